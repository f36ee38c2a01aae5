"""The row schedule (dsl/kir/row_schedule.py): the kernel a fused row program gets, compiled by the
numba renderer and run by the kernel-IR interpreter on the same inputs (two thread spans), and
both against the eager engine: several reductions in one pass, NaN and zero rows, integer and
bool rows, softmax / log-softmax in both math modes with and without a copied row, epilogues per
row and per element, 4-bit inputs (byte pairs) with blocked scales, strided rows."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import kir
from dsl.kir import loops as L
from dsl.kir.row_schedule import row_kernel
from kernel_runs import raw, run

RNG = np.random.default_rng(11)


def floats(shape, dt=np.float32):
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    rows[1, 3], rows[2, :], rows[3, 1] = np.nan, 0.0, -np.inf  # (a NaN row, a zero row, an -inf)
    rows[2, 1::3] = -0.0  # (max +0, min -0: IEEE maximum / minimum in both the kernel and the interpreter)
    return x.astype(dt)


def row_runs(fn, args, math="fast", kind=None, computed=()):
    """([(compiled, interpreted) per output], the kernel IR) of ``fn``'s one row kernel (of ``kind``)
    on ``args``; its inputs that another kernel computes take the arrays ``computed``, in order."""
    computed = list(computed)
    executable = dsl.jit(fn, math=math).executable(*args)
    (runner,) = [r for r in executable.runners if getattr(r, "row", None) is not None
                 and (kind is None or kind in [k for _, _, k in r.row])]
    shape, strides, kernel = runner.contiguous_variant()
    by_name = dict(zip(executable.input_names, args))
    params = {"start": 0, "stop": shape[0], **{f"n{k}": d for k, d in enumerate(shape)}}
    inputs = {}
    for i, leaf in enumerate(runner.group.leaves):
        value = by_name[leaf.value.name] if leaf.value.name in by_name else computed.pop(0)
        params.update({f"o{i}": 0, **{f"s{i}_{k}": s for k, s in enumerate(strides[i])}})
        if isinstance(value, dsl.Tensor):
            inputs[f"b{i}"] = (value.packed(), value.numpy().reshape(-1))
        else:
            flat = np.ascontiguousarray(value).reshape(-1)
            inputs[f"b{i}"] = (raw(flat, leaf.dtype), flat)
    sizes = {f"out{j}": size for j, (*_, size, _) in enumerate(runner.out_specs)}
    half = shape[0] // 2
    got, want = run(kernel, inputs, sizes, params, spans=[(0, half), (half, shape[0])])
    outs = [(got[f"out{j}"].reshape(s[2]), want[f"out{j}"].reshape(s[2])) for j, s in enumerate(runner.out_specs)]
    return outs, kernel


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_several_reductions_share_one_pass(dt):
    x = floats((6, 37), dt)
    outs, kernel = row_runs(lambda v: (dsl.reduce_sum(v, [-1]), dsl.reduce_max(v, [-1]), dsl.reduce_min(v, [-1]),
                                       dsl.reduce_mean(v, [-1])), [x])
    assert kernel.name == "row_sum_max_min_mean"
    for got, want in outs:
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    wide = x.astype(np.float64)
    np.testing.assert_array_equal(outs[1][0], x.max(-1, keepdims=True))
    np.testing.assert_array_equal(outs[2][0], x.min(-1, keepdims=True))
    assert not np.signbit(outs[1][0][2]) and np.signbit(outs[2][0][2])  # (the row of zeros)
    np.testing.assert_array_equal(outs[0][0], wide.sum(-1, keepdims=True).astype(dt))


@pytest.mark.parametrize("dt, fn", [(np.int32, dsl.reduce_mean), (np.int64, dsl.reduce_sum), (np.uint8, dsl.reduce_max),
                                    (np.bool_, dsl.reduce_max), (np.bool_, dsl.reduce_min)])
def test_integer_and_bool_rows(dt, fn):
    x = RNG.integers(0, 2, (5, 33)).astype(bool) if dt == np.bool_ else RNG.integers(-100, 100, (5, 33)).astype(dt)
    (got, want), = row_runs(lambda v: fn(v, [-1], keepdims=0), [x])[0]
    np.testing.assert_array_equal(got, want)
    numpy = {dsl.reduce_max: lambda: x.max(-1), dsl.reduce_min: lambda: x.min(-1), dsl.reduce_sum: lambda: x.sum(-1),
             dsl.reduce_mean: lambda: (x.astype(np.int64).sum(-1) / 33).astype(np.int64).astype(dt)}[fn]()
    np.testing.assert_array_equal(got, numpy)


@pytest.mark.parametrize("math", ["fast", "exact"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("form", ["load", "expr", "float16 out", "float16 in"])
def test_softmax_rows_in_every_form(math, log, form):
    op = dsl.log_softmax if log else dsl.softmax
    fn = {"load": lambda v: op(v, -1), "expr": lambda v: op(v * 2.0, -1),
          "float16 out": lambda v: dsl.cast(op(v, -1), dsl.float16), "float16 in": lambda v: op(v, -1)}[form]
    x = floats((6, 200), np.float16 if form == "float16 in" else np.float32)
    (got, want), = row_runs(fn, [x], math)[0]
    finite = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got[1]).all()  # (the NaN row)
    np.testing.assert_allclose(got[finite].astype(np.float64), want[finite].astype(np.float64), rtol=2e-6, atol=2e-7)
    wide = x.astype(np.float64) * (2.0 if form == "expr" else 1.0)
    shifted = wide - wide.max(-1, keepdims=True)
    reference = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)) if log else \
        np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
    rows = [0, 2, 3, 4, 5]  # (not the NaN row)
    tolerance = 2e-3 if got.dtype == np.float16 or form == "float16 in" else 2e-6
    np.testing.assert_allclose(got[rows].astype(np.float64), reference[rows], rtol=tolerance, atol=1e-6)


def softmax64(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("fn, kind, want", [
    # (x - mean feeds a softmax's epilogue: not a stage there; a second pass over each row of the
    # mean's kernel computes it times the softmax, which the other kernel wrote)
    (lambda v: dsl.softmax(v) * (v - dsl.reduce_mean(v, [-1])), "mean",
     lambda x: softmax64(x) * (x - x.mean(-1, keepdims=True))),
    (lambda v: dsl.reduce_sum(v, [-1]) * 2.0 + 1.0, None, lambda x: (x.sum(-1, keepdims=True) * 2 + 1)),
    (lambda v: dsl.softmax(v, -1) * 3.0, None, lambda x: softmax64(x) * 3)])
def test_epilogues_per_row_and_per_element(fn, kind, want):
    x = floats((40, 40))
    x[np.isnan(x) | np.isinf(x)] = 1.0
    (got, interpreted), = row_runs(fn, [x], kind=kind, computed=[softmax64(x.astype(np.float64)).astype(np.float32)])[0]
    np.testing.assert_allclose(got, interpreted, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(got, want(x.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_packed_rows_with_blocked_scales_read_by_byte_pairs():
    codes = RNG.integers(-8, 8, (6, 128)).astype(ml_dtypes.int4)
    w = dsl.Tensor.from_numpy(codes)
    scale = RNG.random((6, 4)).astype(np.float32)
    fn = lambda w, s: dsl.reduce_sum(dsl.dequantize_linear(w, s, axis=1, block_size=32), [-1])  # noqa: E731
    (got, want), = row_runs(fn, [w, scale])[0]
    kernel_text = L.format_kernel(row_runs(fn, [w, scale])[1])
    assert ".part0" in kernel_text and ".part1" in kernel_text and "bk_" in kernel_text
    np.testing.assert_array_equal(got, want)
    decoded = codes.astype(np.float32) * np.repeat(scale, 32, axis=1)  # (float32, as DequantizeLinear gives)
    np.testing.assert_array_equal(got, decoded.astype(np.float64).sum(-1, keepdims=True).astype(np.float32))


def test_strided_rows_and_the_verifier():
    x = floats((40, 9))
    (got, want), = row_runs(lambda v: dsl.softmax(dsl.transpose(v, [1, 0]), -1), [x])[0]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9)
    _, kernel = row_runs(lambda v: dsl.softmax(dsl.transpose(v, [1, 0]), -1), [x])
    L.verify(kernel)
    text = L.format_kernel(kernel)
    assert "prefetch" not in text  # (rows read across memory order: nothing to prefetch)
    with pytest.raises(AssertionError):
        row_kernel(None, ["softmax", "sum"], [dsl.float32], [], [], 2)
    assert kir.CALLS["exp_times_2_64"] == (("float32",), "float32")
