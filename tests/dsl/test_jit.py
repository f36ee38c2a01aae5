"""Tests for dsl/jit.py: compiled results vs eager numpy and plain numpy, fusion structure, executable caches."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
from dsl import dtypes
from dsl.codegen import compile as codegen_compile
from dsl.codegen import scalar
from dsl.passes.fuse import KernelStep, NodeStep

RNG = np.random.default_rng(20261130)


def snapshot(args) -> list:
    return [a.buffer.copy() if isinstance(a, dsl.Tensor) else a.copy() for a in args]


def run_checked(f, *args):
    """f(*args) after checking dsl.compare (JIT vs eager numpy) and that no input was written."""
    before = snapshot(args)
    report = dsl.compare(f, *args)
    assert report.ok, report
    outputs = f(*args)
    for arg, copy in zip(args, before):
        now = arg.buffer if isinstance(arg, dsl.Tensor) else arg
        assert now.dtype == copy.dtype and now.tobytes() == copy.tobytes(), "an input was written"
    return outputs


# ---- the attention-mask pipeline -----------------------------------------------------------------
@dsl.jit
def attention_mask(mask, scores):
    m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
    return scores + (1.0 - m) * -1e4


def attention_mask_numpy(mask, scores):
    m = mask.astype(np.float32)[:, None, None, :]
    return scores.astype(np.float32) + (np.float32(1) - m) * np.float32(-1e4)


def mask_inputs(batch, heads, seq, mask_dtype=np.int64):
    mask = RNG.random((batch, seq)) > 0.4
    mask = mask.astype(np.float32) * RNG.choice([1.0, 0.25, -3.0], mask.shape) if mask_dtype == np.float32 else mask
    return mask.astype(mask_dtype), RNG.standard_normal((batch, heads, seq, seq)).astype(np.float32)


@pytest.mark.parametrize("mask_dtype, shapes", [
    (np.int64, [(1, 1, 1), (1, 2, 7), (3, 1, 1), (2, 3, 5), (2, 8, 128)]),  # 2x8x128x128: threads, pooled output
    (np.bool_, [(1, 1, 1), (2, 3, 5)]), (np.float32, [(1, 3, 1), (2, 3, 5)])])
def test_attention_mask_matches_numpy_at_several_shapes(mask_dtype, shapes):
    for batch, heads, seq in shapes:
        mask, scores = mask_inputs(batch, heads, seq, mask_dtype)
        got = run_checked(attention_mask, mask, scores)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, attention_mask_numpy(mask, scores))
        assert attention_mask.executable(mask, scores).kernel_count == 1


def strided_layouts():
    mask, scores = mask_inputs(2, 3, 5)
    read_only = [mask.copy(), scores.copy()]
    for array in read_only:
        array.flags.writeable = False
    return {
        "transposed": (np.ascontiguousarray(mask.T).T, np.ascontiguousarray(scores.transpose(3, 1, 2, 0)).transpose(3, 1, 2, 0)),
        "negative-strides": (mask[::-1, ::-1], scores[:, ::-1, ::-1]),
        "every-other": (np.repeat(mask, 2, axis=1)[:, ::2], np.repeat(scores, 2, axis=3)[..., ::2]),
        "broadcast": (np.broadcast_to(mask[:1], mask.shape), np.broadcast_to(scores[:, :1, :1], scores.shape)),
        "fortran": (np.asfortranarray(mask), np.asfortranarray(scores)),
        "read-only": tuple(read_only),
        "big-endian": (mask.astype(">i8"), scores.astype(">f4")),
    }


@pytest.mark.parametrize("layout", list(strided_layouts()))
def test_attention_mask_reads_any_layout_in_place(layout):
    mask, scores = strided_layouts()[layout]
    got = run_checked(attention_mask, mask, scores)
    assert got.dtype == np.dtype(np.float32)  # native byte order out, whatever came in
    np.testing.assert_array_equal(got, attention_mask_numpy(mask, scores))


def test_zero_size_dims_compile_nothing():
    compiled = codegen_compile.STATS["compiled"]
    for shape in [(0, 2, 3), (2, 2, 0), (2, 0, 3)]:
        mask, scores = mask_inputs(*shape)
        got = run_checked(attention_mask, mask, scores)
        assert got.shape == scores.shape and got.dtype == np.float32
    assert codegen_compile.STATS["compiled"] == compiled


def test_rank_0_inputs_and_outputs():
    f = dsl.jit(lambda s, v: (s * v + 1.0, s * 2.0 - 0.5))
    s, v = np.array(3.0, np.float32), np.array([1.0, -2.0, 0.5], np.float32)
    vector, scalar_out = run_checked(f, s, v)
    np.testing.assert_array_equal(vector, s * v + np.float32(1))
    assert isinstance(scalar_out, np.ndarray) and scalar_out.shape == () and scalar_out == np.float32(5.5)


# ---- packed sub-byte inputs, quantization ---------------------------------------------------------
PACKED = ["int4", "uint4", "int2", "uint2", "float4e2m1"]
cast_twice = dsl.jit(lambda t: dsl.cast(t, dsl.float32) * 2.0)


def random_packed(name, shape, read_only=False):
    dt = dsl.dtype(name)
    raw = RNG.integers(0, 256, dt.packed_nbytes(int(np.prod(shape))), dtype=np.uint8)
    return dsl.Tensor.from_packed(raw.tobytes() if read_only else raw, name, shape)


@pytest.mark.parametrize("name", PACKED)
def test_packed_inputs_are_read_in_place(name):
    for shape in [(1,), (7,), (3, 5)] + [(2, 3, 5)] * (name == "int4"):  # odd element counts end mid-byte
        tensor = random_packed(name, shape, read_only=shape == (7,))
        want = tensor.numpy().astype(np.float32) * np.float32(2)
        np.testing.assert_array_equal(run_checked(cast_twice, tensor), want)
        transposed = dsl.transpose(tensor)
        assert isinstance(transposed, dsl.Tensor) and transposed.buffer is tensor.buffer
        np.testing.assert_array_equal(run_checked(cast_twice, transposed), want.T)
    flat = random_packed(name, (9,))
    for start, stop, step in [(1, 9, 1), (3, 8, 2), (8, 0, -3)]:  # odd element offsets, reversed
        view = flat.with_view(flat.view.slice(0, start, stop, step))
        want = flat.numpy()[start:stop:step].astype(np.float32) * np.float32(2)
        np.testing.assert_array_equal(run_checked(cast_twice, view), want)


dequantize_tensor = dsl.jit(lambda x, scale: dsl.dequantize_linear(x, scale))
dequantize_axis = dsl.jit(lambda x, scale, zero: dsl.dequantize_linear(x, scale, zero, axis=1))


@pytest.mark.parametrize("name, scale_dtype", [("int4", np.float32), ("uint4", ml_dtypes.bfloat16), ("int2", np.float16),
                                               ("float4e2m1", np.float32), ("float8e4m3fn", np.float32),
                                               ("uint8", ml_dtypes.bfloat16)])
def test_dequantize_per_tensor(name, scale_dtype):
    x = random_packed(name, (5, 3))
    scale = np.array(0.375, scale_dtype)
    got = run_checked(dequantize_tensor, x, scale)
    want = (x.numpy().astype(np.float32) * np.float32(scale)).astype(scale_dtype)
    assert got.dtype == np.dtype(scale_dtype)
    np.testing.assert_array_equal(got, want)


def int4_weights(rows, cols):
    codes = RNG.integers(-8, 8, (rows, cols)).astype(ml_dtypes.int4)
    zero = RNG.integers(-8, 8, cols).astype(ml_dtypes.int4)
    scale = (RNG.random(cols) + 0.5).astype(np.float32)
    return dsl.Tensor.from_numpy(codes), scale, dsl.Tensor.from_numpy(zero)


def dequantized(codes, scale, zero, axis):
    shape = [1, 1]
    shape[axis] = -1
    return (codes.astype(np.int64) - zero.astype(np.int64).reshape(shape)).astype(np.float32) * scale.reshape(shape)


def test_dequantize_per_axis_with_int4_zero_point():
    weights, scale, zero = int4_weights(6, 5)
    got = run_checked(dequantize_axis, weights, scale, zero)
    np.testing.assert_array_equal(got, dequantized(weights.numpy(), scale, zero.numpy(), 1))
    along_rows = dsl.jit(lambda x, scale, zero: dsl.dequantize_linear(x, scale, zero, axis=0))
    transposed = dsl.transpose(weights)  # [5, 6] over the same packed bytes
    got = run_checked(along_rows, transposed, scale, zero)
    np.testing.assert_array_equal(got, dequantized(weights.numpy().T, scale, zero.numpy(), 0))


def test_matmul_with_an_int4_dequantize_prologue():
    f = dsl.jit(lambda x, w, scale, zero: dsl.matmul(x, dsl.dequantize_linear(w, scale, zero, axis=1)) + 0.5)
    weights, scale, zero = int4_weights(16, 12)
    x = RNG.standard_normal((3, 16)).astype(np.float32)
    got = run_checked(f, x, weights, scale, zero)
    want = x @ dequantized(weights.numpy(), scale, zero.numpy(), 1) + np.float32(0.5)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    executable = f.executable(x, weights, scale, zero)
    assert executable.kernel_count == 2  # the dequantize prologue and the bias epilogue; BLAS between
    assert [type(s) for s in executable.steps] == [KernelStep, NodeStep, KernelStep]
    assert "kernel [DequantizeLinear]" in executable.explain(source=False)


# ---- narrow floats and every Cast target ----------------------------------------------------------
@dsl.jit
def narrow_floats(a8, b16, h16):
    wide = dsl.cast(a8, dsl.float32) * 2.0 + dsl.cast(b16, dsl.float32)
    return wide, b16 * 3.0 - 1.0, h16 / 3.0 + h16, dsl.cast(h16 * 2.0, dsl.float8e5m2), dsl.cast(wide, dsl.int4)


def test_float8_bfloat16_float16_inputs_and_outputs():
    a8 = RNG.uniform(-1.5, 1.5, (4, 6)).astype(ml_dtypes.float8_e4m3fn)
    b16 = RNG.uniform(-2, 2, (4, 6)).astype(ml_dtypes.bfloat16)
    h16 = RNG.uniform(-2.5, 2.5, 6).astype(np.float16)  # broadcast against [4, 6]
    outs = run_checked(narrow_floats, a8, b16, h16)
    bf, f8, f16 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.float16
    wide = a8.astype(np.float32) * np.float32(2) + b16.astype(np.float32)
    wants = (wide, b16 * bf(3) - bf(1), h16 / f16(3) + h16, (h16 * f16(2)).astype(ml_dtypes.float8_e5m2),
             np.trunc(wide).astype(np.int64).astype(ml_dtypes.int4))
    assert np.all(np.abs(wide) < 7) and np.all(np.abs(h16) < 3)  # in range: plain numpy casts agree with ONNX
    assert [o.shape for o in outs] == [(4, 6), (4, 6), (6,), (6,), (4, 6)]
    for got, want in zip(outs, wants):
        np.testing.assert_array_equal(got, want, strict=True)


CAST_TARGETS = [t for t in dtypes.ALL if scalar.supported(t)]


def cast_chain(targets):
    """Row k of the result is Cast(Cast(x * 3, targets[k]), double): one kernel, a coercion per row.
    (Three kernels of 7-8 targets compile in half the time of one with all 23.)"""
    def chain(x, selector):
        y = x * 3.0
        out = dsl.cast(dsl.cast(y, targets[0]), dsl.double)
        for k, target in enumerate(targets[1:], start=1):
            out = dsl.where(selector == k, dsl.cast(dsl.cast(y, target), dsl.double), out)
        return out
    return dsl.jit(chain)


def plain_cast_is_onnx(values: np.ndarray, dt) -> np.ndarray:
    """Where numpy/ml_dtypes astype agrees with ONNX Cast: finite, in range (no saturation, no wrap)."""
    if dt.onnx_name == "float8e8m0":  # rounds up, not to nearest
        return np.zeros(values.shape, bool)
    finite = np.isfinite(values)
    if dt.kind in ("int", "uint"):
        info = ml_dtypes.iinfo(dt.np_dtype)
        return finite & (np.trunc(values) >= int(info.min)) & (np.trunc(values) <= int(info.max))
    if dt.kind == "float":
        return finite & (np.abs(values.astype(np.float64)) <= float(ml_dtypes.finfo(dt.np_dtype).max))
    return finite


@pytest.mark.parametrize("part", range(3))
def test_every_cast_target_inside_a_fused_chain(part):
    targets, every_cast = CAST_TARGETS[part::3], cast_chain(CAST_TARGETS[part::3])
    specials = [0.0, -0.0, 0.1, -0.4, 0.6, 1.5, -2.5, 7.9, -8.1, 100.3, 300.0, -200.0, 70000.0, 3e9, -3e9, 1e19,
                3e38, 1e-39, np.inf, -np.inf, np.nan]
    x = np.concatenate([np.array(specials, np.float32), (RNG.standard_normal(43) * 60).astype(np.float32)])
    selector = np.arange(len(targets), dtype=np.int64)[:, None]
    got = run_checked(every_cast, x, selector)
    assert every_cast.executable(x, selector).kernel_count == 1
    with np.errstate(all="ignore"):
        y = x * np.float32(3)
        for row, dt in zip(got, targets):
            keep = plain_cast_is_onnx(y, dt)
            want = y[keep].astype(dt.np_dtype).astype(np.float64)
            np.testing.assert_array_equal(row[keep], want, err_msg=dt.onnx_name)
    assert sum(plain_cast_is_onnx(y, dt).sum() for dt in targets) > len(targets) * len(x) // 2


# ---- reductions and softmax fused with their producers --------------------------------------------
@dsl.jit
def rows(x, bias):
    y = dsl.exp(x * 0.5) + bias
    return (dsl.reduce_sum(y, [-1], keepdims=False), dsl.reduce_max(y, [2], keepdims=True),
            dsl.reduce_mean(y, [-1], keepdims=True), dsl.softmax(y * 2.0))


def rows_numpy(x, bias):
    y = (np.exp(x.astype(np.float64) * 0.5) + bias).astype(np.float32).astype(np.float64)
    shifted = np.exp(2 * y - (2 * y).max(-1, keepdims=True))
    return y.sum(-1), y.max(-1, keepdims=True), y.mean(-1, keepdims=True), shifted / shifted.sum(-1, keepdims=True)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_last_axis_reductions_and_softmax_fuse_with_producers(layout):
    x = RNG.standard_normal((2, 3, 7)).astype(np.float32)
    bias = RNG.standard_normal(7).astype(np.float32)
    if layout == "transposed":
        x, bias = np.ascontiguousarray(x.transpose(2, 1, 0)).transpose(2, 1, 0), bias[::-1]
    outs = run_checked(rows, x, bias)
    for got, want in zip(outs, rows_numpy(x, bias)):
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-6)
    executable = rows.executable(x, bias)
    # the three reductions of y share one pass over its rows; softmax (of y * 2) has its own
    assert executable.kernel_count == 2 and all(isinstance(s, KernelStep) for s in executable.steps)
    lines = executable.explain(source=False).splitlines()
    for line, ops in zip(lines, ["ReduceSum, ReduceMax, ReduceMean", "Softmax"]):
        assert "Exp" in line and "Add" in line and line.split("]")[0].endswith(ops), line
    assert lines[0].count("%v") >= 3 and "out2[q" in executable.runners[0].source_for_contiguous()


def _int4_row(n):
    return dsl.Tensor.from_packed(RNG.integers(0, 256, n // 2, dtype=np.uint8), "int4", (n,))


# name, program, arguments: a softmax whose result feeds same-shape elementwise ops only
EPILOGUES = [
    ("scaled", lambda x: dsl.softmax(x) * 3.0, lambda: (RNG.standard_normal((5, 64)).astype(np.float32),)),
    ("cast to float16", lambda x: dsl.cast(dsl.softmax(x), dsl.float16),
     lambda: (RNG.standard_normal((5, 64)).astype(np.float32),)),
    ("cast to float8", lambda x: dsl.cast(dsl.softmax(x * 4.0), dsl.float8e4m3fn),
     lambda: (RNG.standard_normal((3, 4, 32)).astype(np.float32),)),
    ("masked chain to bfloat16", lambda x, m: dsl.cast(dsl.softmax(x * 0.5) * m + 1e-3, dsl.bfloat16),
     lambda: (RNG.standard_normal((6, 96)).astype(np.float32), (RNG.random(96) > 0.5).astype(np.float32))),
    ("float16 rows, int4 weights", lambda x, w: dsl.softmax(x) * dsl.dequantize_linear(w, np.float16(0.25)),
     lambda: (RNG.standard_normal((4, 70)).astype(np.float16), _int4_row(70))),
    ("softmax of x times x", lambda x: dsl.softmax(x) * x, lambda: (RNG.standard_normal((5, 33)).astype(np.float32),)),
]


@pytest.mark.parametrize("name, fn, make", EPILOGUES, ids=[e[0] for e in EPILOGUES])
def test_softmax_consumers_run_in_its_kernel(name, fn, make):
    """Same-shape elementwise consumers of a Softmax (casts, masks, dequantized operands) run in
    its last pass: one kernel, the eager engine's bits (and the unfused JIT's) with exact math;
    fast math changes the row's math, not the fusion."""
    args = make()
    assert dsl.jit(fn).executable(*args).kernel_count == 1
    f = dsl.jit(fn, math="exact")
    assert f.executable(*args).kernel_count == 1
    report = dsl.compare(f, *args, rtol=0, atol=0)
    assert report.ok, report
    (step,) = f.executable(*args).steps
    assert step.group.epilogue is not None and step.row[0][0].op_type == "Softmax"


@pytest.mark.parametrize("fn, make, kernels", [
    (lambda x: dsl.softmax(x) * dsl.softmax(x), lambda: (RNG.standard_normal((4, 16)).astype(np.float32),), 2),
    (lambda x: (dsl.softmax(x), dsl.softmax(x) + 1.0), lambda: (RNG.standard_normal((4, 16)).astype(np.float32),), 2),
    (lambda x, y: dsl.softmax(x) + y, lambda: (RNG.standard_normal(16).astype(np.float32),
                                               RNG.standard_normal((3, 16)).astype(np.float32)), 2),
    (lambda x: dsl.transpose(dsl.softmax(x)) * 2.0, lambda: (RNG.standard_normal((4, 16)).astype(np.float32),), 2),
])
def test_softmax_results_read_elsewhere_are_materialized(fn, make, kernels):
    """No epilogue when the softmax result is a graph output, is read twice, is broadcast to a
    larger shape or goes through a view: it is written once and read by a second kernel."""
    args = make()
    assert dsl.jit(fn).executable(*args).kernel_count == kernels
    f = dsl.jit(fn, math="exact")
    assert f.executable(*args).kernel_count == kernels
    report = dsl.compare(f, *args, rtol=0, atol=0)
    assert report.ok, report


REDUCTION_EPILOGUES = [
    ("scaled sum", lambda x: dsl.reduce_sum(x, [-1]) * 2.0, lambda: (RNG.standard_normal((9, 40)).astype(np.float32),)),
    ("rstd", lambda x: dsl.reciprocal(dsl.sqrt(dsl.reduce_mean(x * x, [-1]) + 1e-5)),
     lambda: (RNG.standard_normal((3, 5, 64)).astype(np.float32),)),
    ("max without keepdims, to float16", lambda x: dsl.cast(dsl.reduce_max(x, [-1], keepdims=False), dsl.float16),
     lambda: (RNG.standard_normal((6, 31)).astype(np.float32),)),
    ("sum times a per-row gain", lambda x, g: dsl.reduce_sum(x, [-1]) * g,
     lambda: (RNG.standard_normal((7, 50)).astype(np.float32), RNG.standard_normal((7, 1)).astype(np.float32))),
    ("integer sum, shifted", lambda x: dsl.reduce_sum(x, [-1]) - 3, lambda: (RNG.integers(-9, 9, (4, 12)).astype(np.int32),)),
]


@pytest.mark.parametrize("name, fn, make", REDUCTION_EPILOGUES, ids=[e[0] for e in REDUCTION_EPILOGUES])
def test_reduction_consumers_run_in_its_kernel(name, fn, make):
    """Elementwise ops on a reduction's result (and on per-row operands) run once per row in the
    reduction's kernel when it is the only reduction of its input."""
    args = make()
    f = dsl.jit(fn)
    assert f.executable(*args).kernel_count == 1
    report = dsl.compare(f, *args, rtol=0, atol=0)
    assert report.ok, report


def test_reductions_sharing_a_pass_keep_their_consumers_apart():
    x = RNG.standard_normal((5, 16)).astype(np.float32)
    f = dsl.jit(lambda x: (dsl.reduce_sum(x, [-1]) * 2.0, dsl.reduce_max(x, [-1])))
    assert f.executable(x).kernel_count == 2  # one pass for both reductions, then the product
    assert dsl.compare(f, x, rtol=0, atol=0).ok


def _spelled_log_softmax(x):
    lse = dsl.log(dsl.reduce_sum(dsl.exp(x - dsl.reduce_max(x, [-1])), [-1]))
    return (x - dsl.reduce_max(x, [-1])) - lse, lse


def test_an_epilogue_result_read_by_a_later_kernel_is_read_not_recomputed():
    """log-softmax spelled out (as ONNX's expanded LogSoftmax) that also returns its
    log(sum(exp(x - max))): that runs in the ReduceSum kernel (an epilogue); the final
    subtraction reads that result (it is not rebuilt from the reduction, which no longer exists
    on its own). Without the second output the reductions are stages of one kernel."""
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    f = dsl.jit(_spelled_log_softmax)
    report = dsl.compare(f, x, rtol=0, atol=0)
    assert report.ok, report
    lines = f.executable(x).explain(source=False).splitlines()
    assert any("ReduceSum, Log]" in line for line in lines), lines
    shifted = x - x.max(-1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    np.testing.assert_allclose(f(x)[0], expected, rtol=1e-6, atol=1e-6)
    alone = dsl.jit(lambda x: _spelled_log_softmax(x)[0])
    assert alone.executable(x).kernel_count == 1
    assert dsl.compare(alone, x, rtol=0, atol=0).ok
    np.testing.assert_allclose(alone(x), expected, rtol=1e-6, atol=1e-6)


def test_softmax_epilogue_over_threads_and_streaming_stores(monkeypatch):
    from dsl import runtime, thread_policy
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    monkeypatch.setattr(runtime, "STREAM_BYTES", 1 << 20)
    x = RNG.standard_normal((520, 1024)).astype(np.float32)
    m = (RNG.random(1024) > 0.5).astype(np.float32)
    f = dsl.jit(lambda x, m: dsl.softmax(x) * m)
    got = f(x, m)
    (runner,) = f.executable(x, m).runners
    assert [streamed for (_, streamed), _, _ in runner.plans.values()] == [(0,)]
    want = dsl.jit(lambda y, m: y * m)(dsl.jit(dsl.softmax)(x), m)  # unfused: softmax, then the product
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["softmax", "sum", "max"])
def test_row_producers_keep_ieee_semantics(kind):
    """Regression: the row kernels were compiled with fastmath 'reassoc', and LLVM rewrote the
    producer s + (1 - m) * -1e4 as (s - 1e4) + 1e4 * m, so unmasked scores lost their low bits
    (softmax off by 1e-4). Only the accumulation step may reassociate."""
    reduce = {"softmax": lambda y: dsl.softmax(y, axis=-1), "sum": lambda y: dsl.reduce_sum(y, [-1]),
              "max": lambda y: dsl.reduce_max(y, [-1])}[kind]
    f = dsl.jit(lambda mask, scores: reduce(scores + (1.0 - dsl.cast(mask, dsl.float32)) * -1e4))
    mask = RNG.random((6, 64)) > 0.3
    scores = RNG.standard_normal((6, 64)).astype(np.float32)
    produced = scores + (1 - mask.astype(np.float32)) * np.float32(-1e4)
    np.testing.assert_array_equal(dsl.jit(lambda y: y * 1.0)(produced), produced)
    want = dsl.jit(reduce)(produced)  # the same row kernel, the producer computed outside it
    np.testing.assert_array_equal(f(mask, scores), want)
    assert dsl.compare(f, mask, scores).ok


def test_reductions_over_empty_rows_and_no_rows():
    for shape in [(2, 3, 0), (0, 3, 4)]:
        x, bias = np.zeros(shape, np.float32), np.zeros(shape[-1:], np.float32)
        total, largest, mean, soft = run_checked(rows, x, bias)
        assert total.shape == shape[:-1] and largest.shape == mean.shape == shape[:-1] + (1,) and soft.shape == shape
        assert np.all(total == 0) and np.all(largest == -np.inf)


# ---- fusion structure -----------------------------------------------------------------------------
def test_mask_pipeline_is_one_kernel_with_the_unsqueeze_folded_into_its_loads():
    mask, scores = mask_inputs(2, 3, 5)
    executable = attention_mask.executable(mask, scores)
    assert executable.kernel_count == 1 and len(executable.steps) == 1
    (step,) = executable.steps
    assert {n.op_type for n in step.group.nodes} == {"Cast", "Sub", "Mul", "Add"}
    mask_leaf = next(leaf for leaf in step.group.leaves if leaf.value.name == "mask")
    assert any(key[0] == "view" for key, _ in mask_leaf.path)  # the Unsqueeze, as a View step
    text = attention_mask.explain(mask, scores)
    assert text.startswith("step 0: kernel [") and "float[2,3,5,5]; reads %scores" in text
    assert "%mask via" in text and "Unsqueeze" not in text and "def kernel(" in text
    attention_mask(mask, scores)  # the source explain shows is the one that ran for contiguous inputs
    shown = executable.runners[0].source_for_contiguous()
    assert text.endswith(shown[shown.index("def kernel("):].rstrip().replace("\n", "\n    "))
    assert hashlib.sha256(shown.encode()).hexdigest()[:32] in codegen_compile._COMPILED


def test_a_pure_view_program_runs_no_kernel_and_returns_a_view():
    f = dsl.jit(lambda x: dsl.unsqueeze(dsl.transpose(x, [1, 0]), [0, -1]))
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    out = f(x)
    assert f.executable(x).kernel_count == 0 and all(isinstance(s, NodeStep) for s in f.executable(x).steps)
    assert np.shares_memory(out, x) and out.shape == (1, 4, 3, 1)
    np.testing.assert_array_equal(out, x.T[None, :, :, None])
    packed = random_packed("int4", (3, 4))
    np.testing.assert_array_equal(f(packed), packed.numpy().T[None, :, :, None])
    assert f.executable(packed).kernel_count == 0


def test_a_reshape_that_needs_a_copy_stays_inside_the_kernel():
    f = dsl.jit(lambda x: dsl.reshape(dsl.transpose(x * 2.0, [1, 0]), [-1]) + 1.0)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_checked(f, x), (x * np.float32(2)).T.reshape(-1) + np.float32(1))
    assert f.executable(x).kernel_count == 1


# ---- executable and kernel caches -----------------------------------------------------------------
def test_same_signature_reuses_the_executable_and_compiles_nothing():
    f = dsl.jit(lambda x: x * 1.25 - 0.125)
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    first = f.executable(x)
    f(x)
    compiled = codegen_compile.STATS["compiled"]
    assert f.executable(x.copy()) is first
    np.testing.assert_array_equal(f(x + 1), (x + 1) * np.float32(1.25) - np.float32(0.125))
    assert codegen_compile.STATS["compiled"] == compiled
    wider = RNG.standard_normal((5, 7)).astype(np.float32)  # new executable, same coalesced kernel source
    assert f.executable(wider) is not first
    np.testing.assert_array_equal(f(wider), wider * np.float32(1.25) - np.float32(0.125))
    assert codegen_compile.STATS["compiled"] == compiled
    f(x.astype(np.float64))  # another dtype: another kernel
    assert codegen_compile.STATS["compiled"] == compiled + 1


def test_program_run_jit_and_numpy_engines_agree_on_an_onnx_model():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["mf", "axes"], ["m4"]),
             helper.make_node("Sub", ["one", "m4"], ["inverted"]),
             helper.make_node("Mul", ["inverted", "big"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["out"])]
    inputs = [helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", "S"]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "H", "S", "S"]),
              helper.make_tensor_value_info("axes", TensorProto.INT64, [2])]
    constants = [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
                 helper.make_tensor("big", TensorProto.FLOAT, [], [-1e4])]
    graph = helper.make_graph(nodes, "mask", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              constants)
    program = dsl.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    for batch, heads, seq in [(2, 3, 5), (1, 4, 1)]:
        mask, scores = mask_inputs(batch, heads, seq)
        feeds = {"mask": mask, "scores": scores, "axes": np.array([1, 2], np.int64)}
        got, = program.run(feeds)
        np.testing.assert_array_equal(got, program.run(feeds, engine="numpy")[0])
        np.testing.assert_array_equal(got, attention_mask_numpy(mask, scores))
    mask, scores = mask_inputs(3, 3, 3)  # axes fed as an input: each value is its own specialization
    for axes, expand in [([1, 2], (slice(None), None, None)), ([1, -2], (slice(None), None, None)),
                         ([0, 1], (None, None)), ([-1, 2], (Ellipsis, None, None))]:
        got, = program.run({"mask": mask, "scores": scores, "axes": np.array(axes, np.int64)})
        m = mask.astype(np.float32)[expand]
        np.testing.assert_array_equal(got, scores + (np.float32(1) - m) * np.float32(-1e4), err_msg=str(axes))


def test_program_run_jit_fuses_nodes_that_read_initializers():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Mul", ["x", "two"], ["y"]), helper.make_node("Add", ["y", "one"], ["z"])]
    constants = [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]), helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], constants)
    program = dsl.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(program.run({"x": x})[0], x * 2 + 1)
    assert program._executable({"x": x}).kernel_count == 1  # no public plan API on Program


# ---- differential fuzzing: random small programs, compiled vs an independent numpy version ----------
FUZZ_TYPES = {"float32": (dsl.float32, np.float32), "float16": (dsl.float16, np.float16)}
FUZZ_CASTS = {"float16": (dsl.float16, np.float16), "bfloat16": (dsl.bfloat16, ml_dtypes.bfloat16),
              "float8e4m3fn": (dsl.float8e4m3fn, ml_dtypes.float8_e4m3fn)}
FUZZ_SCALARS = [0.5, 2.0, -1.5, 3.0, 0.0, 1e4, -7.25, 1, -2]
FUZZ_MAX_SIZE = 512  # elements of any value: tiles and concats of tiles stay tiny
BINARY = {"add": ("y + {b}", "{b} + y", np.add), "sub": ("y - {b}", "{b} - y", np.subtract),
          "mul": ("y * {b}", "{b} * y", np.multiply), "div": ("y / {b}", "{b} / y", np.divide),
          "max": ("dsl.maximum(y, {b})", "dsl.maximum({b}, y)", np.maximum),
          "min": ("dsl.minimum(y, {b})", "dsl.minimum({b}, y)", np.minimum)}
UNARY = {"relu": ("dsl.relu(y)", lambda y: np.maximum(y, y.dtype.type(0))), "abs": ("abs(y)", np.abs),
         "neg": ("-y", np.negative), "exp": ("dsl.exp(y)", lambda y: np.exp(y.astype(np.float64)).astype(y.dtype))}
COMPARISONS = {"y > {b}": np.greater, "dsl.less(y, {b})": np.less, "y >= {b}": np.greater_equal,
               "dsl.equal(y, {b})": np.equal}

# Where the ops the fuzz draws run (README, "JIT lowering"); fusing one moves its name between these sets.
NUMPY_OPS: set = set()  # always their numpy reference
REDUCE_OPS = {"ReduceSum", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin", "CumSum"}  # a row or any-axis kernel with their producers
# fused with producers and elementwise consumers, computed on their own (numpy, or a Gather by a
# kernel of its own) when a later op of their kernel is one of these (Concat: "reached through a
# view, inside a reduction's kernel, inside another Concat's part"; Gather: not inside a
# reduction's kernel or a Concat's part)
FUSED_UNLESS_FOLLOWED_BY = {"Concat": {"view", "Concat", *REDUCE_OPS}, "Gather": {"Concat", *REDUCE_OPS}}
READS_MEMORY = {"Gather"}  # fused ops whose data input is materialized first: a kernel starts at them
VIEW, ELEMENTWISE = ("view",), ("elementwise",)


@dataclass
class Step:
    """One op of a fuzzed program: Python source over ``y`` and operands a0, a1, ... (what the JIT
    traces) and the same op in plain numpy (the oracle)."""

    source: str
    numpy: Callable
    kinds: tuple = ELEMENTWISE  # its nodes in order: "view", "elementwise" or an ONNX op name
    inexact: bool = False  # Exp / ReduceSum: rounding may differ from the oracle's
    tolerance: Callable | None = None  # y -> the absolute error its sum may add (summation order)
    numpy_ok: bool = False  # its op may run numpy for a documented reason (a Concat of < 2, an empty reduction)


@dataclass
class Draws:
    """What the step drawers share: hypothesis' data, the fuzzed type and the operands drawn so far."""

    data: object
    name: str
    np_type: type
    operands: list

    def __call__(self, strategy):
        return self.data.draw(strategy)

    def operand(self, dims) -> tuple[str, np.ndarray]:
        seed = self(st.integers(0, 2 ** 32 - 1))
        array = np.asarray(np.random.default_rng(seed).integers(-32, 33, dims) / 8, self.np_type)
        self.operands.append(array)
        return f"a{len(self.operands) - 1}", array

    def axis(self, rank: int) -> int:
        return self(st.integers(-rank, rank - 1))

    def axes(self, rank: int) -> list:
        axes = self(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        return [a - rank if self(st.booleans()) else a for a in axes]


def dummy(shape):
    return np.broadcast_to(np.zeros((), np.bool_), shape)


def made(step: Step, shape) -> tuple[Step, tuple]:
    """The step and its output shape (its oracle run on zeros)."""
    with np.errstate(all="ignore"):
        return step, np.shape(step.numpy(np.zeros(shape, np.float32)))


def draw_view(data, shape) -> tuple[Step, tuple] | None:
    rank, draw = len(shape), data.draw
    kind = draw(st.sampled_from(["unsqueeze", "squeeze", "transpose", "reshape", "expand"]))
    if kind == "unsqueeze":
        out_rank = rank + draw(st.integers(1, 2))
        axes = draw(st.lists(st.integers(0, out_rank - 1), min_size=out_rank - rank, max_size=out_rank - rank, unique=True))
        axes = [a - out_rank if draw(st.booleans()) else a for a in axes]
        return Step(f"dsl.unsqueeze(y, {axes})", lambda y: np.expand_dims(y, tuple(axes)), VIEW), \
            np.expand_dims(dummy(shape), tuple(axes)).shape
    ones = [k for k, d in enumerate(shape) if d == 1]
    if kind == "squeeze" and ones:
        axes = draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))
        axes = [a - rank if draw(st.booleans()) else a for a in axes]
        return Step(f"dsl.squeeze(y, {axes})", lambda y: np.squeeze(y, tuple(axes)), VIEW), \
            np.squeeze(dummy(shape), tuple(axes)).shape
    if kind == "transpose" and rank >= 2:
        return draw_transpose(data, shape)
    if kind == "reshape" and rank >= 1 and 0 not in shape:  # (a 0 in a target copies the input dim)
        size = int(np.prod(shape))
        options = [(size,), shape + (1,), (1,) + shape, shape[:-2] + (shape[-2] * shape[-1],) if rank >= 2 else (size,)]
        options += [(d, size // d) for d in (2, 3) if size % d == 0]
        target = list(draw(st.sampled_from(options)))
        special = draw(st.sampled_from(["none", "minus-one", "zero"]))
        if special == "minus-one":
            target[draw(st.integers(0, len(target) - 1))] = -1
        elif special == "zero":  # ONNX: 0 copies the input dim at that index
            target = [0 if k < rank and d == shape[k] else d for k, d in enumerate(target)]
        resolved = [shape[k] if d == 0 else d for k, d in enumerate(target)]
        return Step(f"dsl.reshape(y, {target})", lambda y: np.reshape(y, resolved), VIEW), np.reshape(dummy(shape), resolved).shape
    if kind == "expand":
        target = [draw(st.sampled_from([2, 3])) if d == 1 and draw(st.booleans()) else
                  (1 if draw(st.booleans()) else d) for d in shape]
        target = ([2] if draw(st.booleans()) else []) + target
        out = np.broadcast_shapes(shape, tuple(target))
        return Step(f"dsl.expand(y, {target})", lambda y: np.broadcast_to(y, out), VIEW), out
    return None


def draw_transpose(data, shape) -> tuple[Step, tuple] | None:
    """dsl.transpose with a random or the default (reversed) perm, x.T or x.mT."""
    rank = len(shape)
    form = data.draw(st.sampled_from(["perm", "perm", "default", "T", "mT"]))
    if rank < 2:
        return None
    if form == "perm":
        perm = data.draw(st.permutations(range(rank)))
        return made(Step(f"dsl.transpose(y, {perm})", lambda y: np.transpose(y, perm), VIEW), shape)
    if form == "mT":
        return made(Step("y.mT", lambda y: np.swapaxes(y, -1, -2), VIEW), shape)
    return made(Step("y.T" if form == "T" else "dsl.transpose(y)", np.transpose, VIEW), shape)


def draw_operand(data, shape, np_type, operands) -> tuple[str, np.ndarray | float]:
    """A Python scalar or an array broadcastable with ``shape`` (may widen size-1 dims)."""
    if data.draw(st.booleans()):
        value = data.draw(st.sampled_from(FUZZ_SCALARS))
        return repr(value), value
    dims = [data.draw(st.sampled_from([1, d] if d != 1 else [1, 1, 2, 3])) for d in shape]
    dims = dims[data.draw(st.integers(0, len(dims))):]
    return Draws(data, "", np_type, operands).operand(dims)


def draw_elementwise(f: Draws, shape, kind: str) -> tuple[Step, tuple]:
    if kind == "binary":
        op = f(st.sampled_from(list(BINARY)))
        text, value = draw_operand(f.data, shape, f.np_type, f.operands)
        fn, b = BINARY[op][2], np.asarray(value, f.np_type)
        if f(st.booleans()):
            return made(Step(BINARY[op][1].format(b=text), lambda y, fn=fn, b=b: fn(b, y)), shape)
        return made(Step(BINARY[op][0].format(b=text), lambda y, fn=fn, b=b: fn(y, b)), shape)
    if kind == "unary":
        op = f(st.sampled_from(list(UNARY)))
        return Step(UNARY[op][0], UNARY[op][1], inexact=op == "exp"), shape
    target = f(st.sampled_from(list(FUZZ_CASTS)))
    low = float(ml_dtypes.finfo(FUZZ_CASTS[target][1]).max) if target == "float8e4m3fn" else np.inf
    return Step(f"dsl.cast(dsl.cast(y, dsl.{target}), dsl.{f.name})",  # float8 saturates (ONNX saturate=1)
                lambda y, t=FUZZ_CASTS[target][1], m=low: np.clip(y, -m, m).astype(t).astype(y.dtype)), shape


def draw_where(f: Draws, shape) -> tuple[Step, tuple]:
    """dsl.where(y <cmp> b, y, c) (or c, y) with b and c scalars, operands or -y."""
    comparison = f(st.sampled_from(list(COMPARISONS)))
    b_text, b = draw_operand(f.data, shape, f.np_type, f.operands)
    b = np.asarray(b, f.np_type)
    widened = np.broadcast_shapes(shape, b.shape)  # (c may widen only the dims b left at 1)
    c_text, c = ("-y", None) if f(st.booleans()) else draw_operand(f.data, widened, f.np_type, f.operands)
    other = (lambda y: -y) if c is None else (lambda y, c=np.asarray(c, f.np_type): c)
    test = lambda y, fn=COMPARISONS[comparison], b=b: fn(y, b)  # noqa: E731
    if f(st.booleans()):
        return made(Step(f"dsl.where({comparison.format(b=b_text)}, y, {c_text})",
                         lambda y: np.where(test(y), y, other(y))), shape)
    return made(Step(f"dsl.where({comparison.format(b=b_text)}, {c_text}, y)",
                     lambda y: np.where(test(y), other(y), y)), shape)


def index_text(item) -> str:
    if item is None:
        return "None"
    if item is Ellipsis:
        return "..."
    if isinstance(item, slice):
        text = ":".join("" if v is None else str(v) for v in (item.start, item.stop))
        return text + ("" if item.step is None else f":{item.step}")
    if isinstance(item, np.ndarray):
        return f"np.array({item.tolist()}, np.int64)"
    return repr(item)


def key_step(items: list, kinds: tuple) -> Step:
    """y[items]: the oracle indexes numpy with the very key the program prints."""
    text = "y[" + (", ".join(index_text(item) for item in items) if items else "()") + "]"
    key = tuple(items)
    return Step(text, lambda y: y[key], kinds)


def draw_slice(f: Draws, dim: int) -> slice:
    bound = st.one_of(st.none(), st.integers(-dim - 2, dim + 2))
    return slice(f(bound), f(bound), f(st.sampled_from([None, 1, 2, 3, -1, -2, -3])))


def draw_basic_items(f: Draws, dims) -> list:
    choices = [(lambda d: slice(None)), (lambda d: draw_slice(f, d)), (lambda d: draw_slice(f, d)),
               (lambda d: f(st.integers(-d, d - 1)) if d > 0 else slice(None))]
    return [choices[f(st.integers(0, 3))](d) for d in dims]


def draw_index(f: Draws, shape) -> tuple[Step, tuple]:
    """Basic indexing: ints (negative too), slices (any step, empty windows), None, one Ellipsis,
    trailing dims left out."""
    rank = len(shape)
    front = f(st.integers(0, rank))
    items = draw_basic_items(f, shape[:front])
    if f(st.booleans()):  # items after an Ellipsis index the last dims
        back = f(st.integers(front, rank))
        items += [Ellipsis] + draw_basic_items(f, shape[back:])
    for _ in range(f(st.integers(0, 2))):
        items.insert(f(st.integers(0, len(items))), None)
    return made(key_step(items, VIEW), shape)


def draw_indices(f: Draws, dim: int) -> np.ndarray:
    """Constant int64 indices in [-dim, dim - 1] of rank 0, 1 or 2 (none when the dim is empty)."""
    shape = (0,) if dim == 0 else f(st.sampled_from([(), (1,), (2,), (3,), (2, 2), (1, 3), (0,)]))
    count = int(np.prod(shape))
    values = f(st.lists(st.integers(-dim, dim - 1), min_size=count, max_size=count)) if count else []
    return np.array(values, np.int64).reshape(shape)


def draw_take(f: Draws, shape) -> tuple[Step, tuple] | None:
    """One integer array index (a list or an array) among slices, with ints next to it (numpy
    keeps the gathered dims in place), Nones outside them, maybe an Ellipsis."""
    rank = len(shape)
    if rank == 0:
        return None
    at = f(st.integers(0, rank - 1))
    indices = draw_indices(f, shape[at])
    index = indices.tolist() if indices.ndim == 1 and indices.size and f(st.booleans()) else indices
    end = f(st.integers(at + 1, rank))  # (dims after it left out: numpy keeps them whole)
    before = [slice(None) if f(st.booleans()) else draw_slice(f, d) for d in shape[:at]]
    after = [slice(None) if f(st.booleans()) else draw_slice(f, d) for d in shape[at + 1:end]]
    if before and shape[at - 1] > 0 and f(st.booleans()):
        before[-1] = f(st.integers(-shape[at - 1], shape[at - 1] - 1))
    if after and shape[at + 1] > 0 and f(st.booleans()):
        after[0] = f(st.integers(-shape[at + 1], shape[at + 1] - 1))
    if end == rank and before and all(item == slice(None) for item in before) and f(st.booleans()):
        before = [Ellipsis]
    items = before + [index] + after
    items = [None] * f(st.integers(0, 1)) + items + [None] * f(st.integers(0, 1))
    windowed = any(isinstance(i, int) or isinstance(i, slice) and i != slice(None) for i in items)
    squeezed = any(isinstance(i, int) or i is None for i in items)
    return made(key_step(items, VIEW * windowed + ("Gather",) + VIEW * squeezed), shape)


def draw_gather(f: Draws, shape) -> tuple[Step, tuple] | None:
    if not shape:
        return None
    axis = f.axis(len(shape))
    indices = draw_indices(f, shape[axis])
    text = f"dsl.gather(y, {index_text(indices)}" + ("" if axis == 0 and f(st.booleans()) else f", axis={axis}") + ")"
    return made(Step(text, lambda y: np.take(y, indices, axis=axis), ("Gather",)), shape)


def draw_concat(f: Draws, shape) -> tuple[Step, tuple] | None:
    """dsl.concat of y (once or twice) and operands along a random axis."""
    if not shape:
        return None
    axis = f.axis(len(shape))
    names, parts = [], []
    for _ in range(f(st.integers(1, 3))):
        if not names or f(st.booleans()):
            names.append("y")
            parts.append(None)
        else:
            name, array = f.operand(shape[:axis % len(shape)] + (f(st.integers(0, 2)),) + shape[axis % len(shape) + 1:])
            names.append(name)
            parts.append(array)
    order = f(st.permutations(range(len(names))))
    names, parts = [names[k] for k in order], [parts[k] for k in order]
    joined = sum(shape[axis] if part is None else part.shape[axis] for part in parts)
    step = Step(f"dsl.concat([{', '.join(names)}], {axis})",
                lambda y: np.concatenate([y if part is None else part for part in parts], axis), ("Concat",),
                numpy_ok=joined < 2)  # (the fused form needs 2+ elements along the axis)
    return made(step, shape)


def draw_split(f: Draws, shape) -> tuple[Step, tuple] | None:
    """dsl.split by lengths or num_outputs, then one piece (negative picks too)."""
    if not shape:
        return None
    axis = f.axis(len(shape))
    dim = shape[axis]
    count = f(st.integers(1, dim)) if dim > 0 and f(st.booleans()) else None
    if count is not None and dim - -(-dim // count) * (count - 1) >= 0:
        chunk = -(-dim // count)
        sizes, args = [chunk] * (count - 1) + [dim - chunk * (count - 1)], f"num_outputs={count}"
    else:
        cuts = sorted(f(st.lists(st.integers(0, dim), max_size=2)))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [dim])]
        args = f"{sizes}"
    pick = f(st.integers(-len(sizes), len(sizes) - 1))
    text = f"dsl.split(y, {args}" + ("" if axis == 0 and f(st.booleans()) else f", axis={axis}") + f")[{pick}]"
    bounds = list(np.cumsum(sizes)[:-1])
    return made(Step(text, lambda y: np.split(y, bounds, axis)[pick], VIEW), shape)  # (a Slice)


def draw_tile(f: Draws, shape) -> tuple[Step, tuple]:
    """dsl.tile: fused as a Gather per repeated axis (none: a view)."""
    repeats = [f(st.sampled_from([1, 1, 2, 2, 3, 0])) for _ in shape]
    kinds = ("Gather",) * sum(r != 1 for r in repeats) or VIEW
    return made(Step(f"dsl.tile(y, {repeats})", lambda y: np.tile(y, repeats), kinds), shape)


def pad_oracle(y, widths, mode, value):
    """ONNX Pad: negative pads remove elements first, then the positive ones are added (numpy.pad)."""
    cropped = y[tuple(slice(max(-b, 0), d - max(-e, 0)) for (b, e), d in zip(widths, y.shape))]
    added = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        return np.pad(cropped, added, mode="constant", constant_values=np.asarray(value or 0, y.dtype))
    return np.pad(cropped, added, mode=mode)


def draw_pad(f: Draws, shape) -> tuple[Step, tuple] | None:
    """dsl.pad in constant (default or drawn value), reflect, edge or wrap mode, pads in [-2, 2]
    (negatives crop), over every axis or a drawn list of axes."""
    if not shape:
        return None
    rank, mode = len(shape), f(st.sampled_from(["constant", "constant", "reflect", "edge", "wrap"]))
    axes = f.axes(rank) if f(st.booleans()) else None
    chosen = [a % rank for a in axes] if axes is not None else list(range(rank))
    widths = [(0, 0)] * rank
    for a in chosen:
        begin = f(st.integers(-min(shape[a], 2), 2))
        end = f(st.integers(-min(shape[a] - max(-begin, 0), 2), 2))
        if mode != "constant" and shape[a] - max(-begin, 0) - max(-end, 0) == 0:
            begin, end = min(begin, 0), min(end, 0)  # (an empty axis has nothing to extend it with)
        widths[a] = (begin, end)
    if mode == "constant" and 0 in [d - max(-b, 0) - max(-e, 0) for (b, e), d in zip(widths, shape)]:
        # (an empty cropped input padded is all fill, an Expand that reads no y: the kernel count
        # here cannot drop y's producers, dead then; tests/dsl/test_pad_fusion.py covers it)
        widths = [(min(b, 0), min(e, 0)) for b, e in widths]
    pads = [widths[a][0] for a in chosen] + [widths[a][1] for a in chosen]
    value = f(st.sampled_from([None] + FUZZ_SCALARS)) if mode == "constant" else None
    args = "".join([f", constant_value={value!r}" if value is not None else "", f", axes={axes}" if axes else "",
                    "" if mode == "constant" and f(st.booleans()) else f", mode={mode!r}"])
    # fused by its body (dsl/ops/padding.py): crops a Slice (a view); reflect / edge / wrap a Gather
    # per padded axis; constant a Concat on the innermost padded axis, then a Gather and a Where on
    # each outer one; nothing added: a view
    added = sum(max(b, 0) + max(e, 0) > 0 for b, e in widths)
    if mode != "constant":
        kinds = ("Gather",) * added or VIEW
    else:
        kinds = ("Concat",) + ("Gather", "elementwise") * (added - 1) if added else VIEW
    return made(Step(f"dsl.pad(y, {pads}{args})", lambda y: pad_oracle(y, widths, mode, value), kinds), shape)


def draw_trilu(f: Draws, shape) -> tuple[Step, tuple] | None:
    if len(shape) < 2:
        return None
    k, upper = f(st.sampled_from([None, 0, 1, -1, 2, -2, 5])), f(st.booleans())
    text = "dsl.trilu(y" + ("" if k is None else f", {k}") + ("" if upper else ", upper=0") + ")"
    fn = np.triu if upper else np.tril
    return made(Step(text, lambda y: fn(y, k or 0), ELEMENTWISE), shape)  # (a Where of index comparisons)


def cumsum_oracle(y, axis, exclusive, reverse):
    z = np.flip(y, axis) if reverse else y
    out = np.cumsum(z, axis=axis, dtype=y.dtype)
    if exclusive:  # the j-th sum leaves element j out: shifted by one, 0 first
        shifted = np.zeros_like(out)
        lead = (slice(None),) * (axis % y.ndim)
        shifted[lead + (slice(1, None),)] = out[lead + (slice(None, -1),)]
        out = shifted
    return np.flip(out, axis) if reverse else out


def draw_cumsum(f: Draws, shape) -> tuple[Step, tuple] | None:
    if not shape:
        return None
    axis, exclusive, reverse = f.axis(len(shape)), f(st.booleans()), f(st.booleans())
    flags = (", exclusive=1" if exclusive else "") + (", reverse=1" if reverse else "")
    return made(Step(f"dsl.cumsum(y, {axis}{flags})", lambda y: cumsum_oracle(y, axis, exclusive, reverse),
                     ("CumSum",), numpy_ok=0 in shape), shape)  # (an empty scan: its reference)


def extreme_oracle(y, axes, keep, largest):
    """ReduceMax / ReduceMin: NaN propagates, -inf / inf over nothing, and -0 < +0 (IEEE 754-2019)."""
    axes = tuple(range(y.ndim)) if axes is None else tuple(a % y.ndim for a in axes)
    if largest:
        found = np.max(y, axis=axes, keepdims=keep, initial=-np.inf)
        signed = np.any((y == 0) & ~np.signbit(y), axis=axes, keepdims=keep)
    else:
        found = np.min(y, axis=axes, keepdims=keep, initial=np.inf)
        signed = np.any((y == 0) & np.signbit(y), axis=axes, keepdims=keep)
    zero = y.dtype.type(0) if largest else -y.dtype.type(0)
    return np.asarray(np.where((found == 0) & signed, zero, found), y.dtype)


def reduction_source(f: Draws, function: str, method: str, rank: int) -> tuple[str, list | None, bool]:
    """A reduction call in one of its spellings, its axes (None: all) and keepdims."""
    form = f(st.sampled_from(["axes", "axes", "axis", "method"]))
    axes = f.axes(rank) if form == "axis" or f(st.integers(0, 4)) else None  # (None: every axis)
    if form == "method":
        keep = f(st.booleans())
        spelled = "" if axes is None else f"axis={axes[0] if len(axes) == 1 else tuple(axes)}"
        return f"y.{method}({spelled}{', ' if spelled and keep else ''}{'keepdims=True' if keep else ''})", axes, keep
    keep = f(st.booleans())
    if form == "axis":
        return f"dsl.{function}(y, axis={axes[0] if len(axes) == 1 else axes}, keepdims={keep})", axes, keep
    return f"dsl.{function}(y, {axes}, keepdims={keep})", axes, keep


def empty_reduction(shape, axes) -> bool:
    """Reductions the kernels leave to numpy: an empty last axis (row kernel) or any empty dim (any-axis)."""
    reduced = sorted({a % len(shape) for a in axes}) if axes is not None else list(range(len(shape)))
    return shape[-1] == 0 if reduced == [len(shape) - 1] else 0 in shape


def draw_extreme(f: Draws, shape) -> tuple[Step, tuple] | None:
    """reduce_max / reduce_min (or .max() / .min()) over random axes."""
    if not shape:
        return None
    largest = f(st.booleans())
    text, axes, keep = reduction_source(f, "reduce_max" if largest else "reduce_min", "max" if largest else "min",
                                        len(shape))
    step = Step(text, lambda y: extreme_oracle(y, axes, keep, largest), ("ReduceMax" if largest else "ReduceMin",),
                numpy_ok=empty_reduction(shape, axes))
    return made(step, shape)


def draw_sum(f: Draws, shape) -> tuple[Step, tuple] | None:
    """reduce_sum (or .sum()) over random axes: float64 sums, compared with a tolerance."""
    if not shape:
        return None
    text, axes, keep = reduction_source(f, "reduce_sum", "sum", len(shape))
    over = None if axes is None else tuple(axes)
    step = Step(text, lambda y: y.astype(np.float64).sum(over, keepdims=keep).astype(y.dtype), ("ReduceSum",),
                inexact=True, numpy_ok=empty_reduction(shape, axes),
                tolerance=lambda y: float(np.nan_to_num(np.abs(y.astype(np.float64)).sum(over), posinf=0).max(
                    initial=0)) * 2.0 ** -40)
    return made(step, shape)


def draw_arg(f: Draws, shape) -> tuple[Step, tuple] | None:
    """argmax / argmin: dsl.argmax(y, axis, keepdims=...), y.argmax(axis) or y.argmax() (flat)."""
    if not shape or 0 in shape:
        return None
    largest, form, axis = f(st.booleans()), f(st.sampled_from(["dsl", "method", "flat"])), f.axis(len(shape))
    name, fn = ("argmax", np.argmax) if largest else ("argmin", np.argmin)
    op = ("ArgMax" if largest else "ArgMin",)
    if form == "flat":
        return made(Step(f"y.{name}()", lambda y: np.asarray(fn(y)), VIEW + op), shape)
    if form == "method":
        return made(Step(f"y.{name}({axis})", lambda y: fn(y, axis), op), shape)
    keep = f(st.booleans())
    return made(Step(f"dsl.{name}(y, {axis}, keepdims={int(keep)})", lambda y: fn(y, axis, keepdims=keep), op), shape)


STEP_DRAWERS = {
    "view": lambda f, shape: draw_view(f.data, shape),
    **{kind: (lambda f, shape, kind=kind: draw_elementwise(f, shape, kind)) for kind in ("binary", "unary", "cast")},
    "where": draw_where, "index": draw_index, "take": draw_take, "gather": draw_gather, "concat": draw_concat,
    "split": draw_split, "tile": draw_tile, "pad": draw_pad, "trilu": draw_trilu, "cumsum": draw_cumsum,
    "extreme": draw_extreme, "sum": draw_sum, "arg": draw_arg,
}
MOVEMENT = ["index", "take", "gather", "concat", "split", "tile", "pad", "trilu", "extreme"]  # exact in any phase
PHASES = {  # free -> after-exp (rounding differs: no more arithmetic) -> after-sum (only moving values)
    "free": ["view", "binary", "binary", "unary", "cast", "where", "cumsum", "sum", "arg", *MOVEMENT],
    "after-exp": ["view", "sum", *MOVEMENT],
    "after-sum": ["view", *MOVEMENT],
}


def draw_program(data):
    name = data.draw(st.sampled_from(list(FUZZ_TYPES)))
    dsl_type, np_type = FUZZ_TYPES[name]
    shape = tuple(data.draw(st.lists(st.integers(1, 4), max_size=3)))
    layout = data.draw(st.sampled_from(["contiguous", "transposed", "reversed", "broadcast"]))
    x = np.asarray(np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1))).integers(-40, 41, shape) / 8, np_type)
    if layout == "transposed" and len(shape) >= 2:
        x = np.ascontiguousarray(x.T).T
    elif layout == "reversed" and shape:
        x = np.ascontiguousarray(x[::-1])[::-1]
    elif layout == "broadcast" and shape:
        x = np.broadcast_to(x[:1], shape)
    draws, steps, phase = Draws(data, name, np_type, []), [], "free"
    for _ in range(data.draw(st.integers(1, 6))):
        kind = data.draw(st.sampled_from(PHASES[phase]))
        known = len(draws.operands)
        drawn = STEP_DRAWERS[kind](draws, shape)
        if drawn is None or int(np.prod(drawn[1])) > FUZZ_MAX_SIZE:
            del draws.operands[known:]  # (the step is dropped: so are its operands)
            continue
        step, shape = drawn
        steps.append(step)
        if step.inexact:
            phase = "after-sum" if "ReduceSum" in step.kinds else "after-exp"
        if kind == "arg":  # int64 indices: end here, or cast back so every later step applies
            if data.draw(st.booleans()):
                break
            steps.append(Step(f"dsl.cast(y, dsl.{name})" if data.draw(st.booleans()) else f"y.astype(dsl.{name})",
                              lambda y, t=np_type: y.astype(t)))
        if kind in MOVEMENT and data.draw(st.integers(0, 2)) == 0:  # the result read transposed
            transposed = draw_transpose(data, shape)
            if transposed is not None:
                steps.append(transposed[0])
                shape = transposed[1]
    return x, draws.operands, steps, layout


def program_source(x, operands, steps, layout, opset=None) -> str:
    params = ", ".join(["x"] + [f"a{k}" for k in range(len(operands))])
    decorator = "@dsl.jit" if opset is None else f"@dsl.jit(opset={opset})"
    lines = ["import numpy as np"] if any("np." in s.source for s in steps) else []  # (constant indices)
    lines += [decorator, f"def program({params}):", "    y = x"] + [f"    y = {s.source}" for s in steps] + ["    return y"]
    lines.append(f"# x: {x.dtype}{list(x.shape)} strides {x.strides} ({layout})")
    lines += [f"# a{k}: {a.dtype}{list(a.shape)} = {a.tolist()}" for k, a in enumerate(operands)]
    return "\n".join(lines)


def fuzz_function(source: str):
    """The jit function a printed fuzz program defines: the printed program IS what runs."""
    namespace = {"dsl": dsl}
    exec(source.split("\n# x:")[0], namespace)  # noqa: S102
    return namespace["program"]


def oracle(x, steps):
    """The numpy result and an absolute tolerance for sums (summation order may differ)."""
    y, atol = x, 0.0
    with np.errstate(all="ignore"):
        for step in steps:
            if step.tolerance is not None:
                atol = max(atol, step.tolerance(y))
            y = step.numpy(y)
    return np.asarray(y), atol


def kernel_bounds(steps) -> tuple[int, int, dict]:
    """(fewest, most) kernels the program may run and, per fused op, how many may run numpy instead.
    Numpy ops cut the program into stretches (a READS_MEMORY op starts one); a stretch that computes
    anything is exactly one kernel unless one of its ops may run numpy or a reduction is followed by
    more computing there: then 1 (0 if every computing op may run numpy) up to one per computing op."""
    stretches, may_numpy = [[]], {}
    for step in steps:
        for kind in step.kinds:
            if kind in NUMPY_OPS or kind in READS_MEMORY:
                stretches.append([])
            if kind not in NUMPY_OPS:
                stretches[-1].append((kind, step.numpy_ok))
    fewest = most = 0
    for stretch in stretches:
        computing = [k for k, (kind, _) in enumerate(stretch) if kind != "view"]
        falls = {k for k in computing if stretch[k][1] or
                 FUSED_UNLESS_FOLLOWED_BY.get(stretch[k][0], set()) & {kind for kind, _ in stretch[k + 1:]}}
        for k in falls:
            may_numpy[stretch[k][0]] = may_numpy.get(stretch[k][0], 0) + 1
        reduced_then_computed = any(stretch[k][0] in REDUCE_OPS for k in computing[:-1])
        if computing and not falls and not reduced_then_computed:
            fewest, most = fewest + 1, most + 1
        elif computing:
            fewest, most = fewest + int(len(falls) < len(computing)), most + len(computing)
    return fewest, most, may_numpy


def check_placement(executable, steps):
    """Each op runs where the project claims (NUMPY_OPS always numpy, every other op fused but for
    the documented cases) and the kernel count is kernel_bounds'."""
    ran = {}
    for step in executable.steps:
        if isinstance(step, NodeStep) and step.opdef.view is None:
            ran[step.node.op_type] = ran.get(step.node.op_type, 0) + 1
    fewest, most, may_numpy = kernel_bounds(steps)
    drawn = {op: sum(step.kinds.count(op) for step in steps) for op in NUMPY_OPS}
    plan = executable.explain(source=False)
    for op in set(ran) | NUMPY_OPS:
        if op in NUMPY_OPS:
            assert ran.get(op, 0) == drawn[op], f"{op}: {ran.get(op, 0)} numpy steps, {drawn[op]} drawn\n{plan}"
        else:
            assert ran[op] <= may_numpy.get(op, 0), f"{op} runs numpy {ran[op]} times, expected fused\n{plan}"
    assert fewest <= executable.kernel_count <= most, f"{executable.kernel_count} kernels, expected " \
        f"{fewest}" + (f" to {most}" if most > fewest else "") + f"\n{plan}"


# CI runs fixed sets (derandomize): 40 programs where FUZZ_EXAMPLES is imported, FUZZ_PROGRAMS = 100 here
# (3 s with warm numba caches, 50 s cold on 2 cores); DSL_FUZZ_EXAMPLES=2000 pytest -k random_programs
# fuzzes for real.
FUZZ_EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "40"))
FUZZ_PROGRAMS = 100 if FUZZ_EXAMPLES == 40 else FUZZ_EXAMPLES


@settings(max_examples=FUZZ_PROGRAMS, deadline=None, derandomize=FUZZ_EXAMPLES == 40, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_match_plain_numpy(data):
    x, operands, steps, layout = draw_program(data)
    # every schema version of the ops drawn that accepts all the fuzzed types (float8 needs 19+)
    opset = data.draw(st.sampled_from([None, 21, 23, 24, 25, 28]))
    source = program_source(x, operands, steps, layout, opset)
    note(source)
    program = fuzz_function(source)
    args = (x, *operands)
    before = snapshot(args)
    with np.errstate(all="ignore"):
        got = program(*args)
    want, atol = oracle(x, steps)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if any(step.inexact for step in steps):
        rtol = 4 * float(np.finfo(want.dtype).eps)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
    report = dsl.compare(program, *args, rtol=4 * float(np.finfo(want.dtype).eps) if want.dtype.kind == "f" else 0,
                         atol=atol)
    assert report.ok, report  # and the eager numpy engine agrees with the kernels
    for arg, copy in zip(args, before):
        assert arg.tobytes() == copy.tobytes(), "an input was written"
    check_placement(program.executable(*args), steps)


@pytest.mark.parametrize("name", ["int4", "uint4", "float4e2m1", "int2"])
@pytest.mark.parametrize("shape", [(5, 7), (4, 1), (3, 2), (1, 9), (70001,), (2, 65537)])
def test_packed_inner_loops_two_elements_per_byte_at_any_parity(name, shape):
    """4-bit leaves read along the inner dim go a byte per step; rows of odd length start on odd
    nibbles (the one-element loop), odd tails and odd thread splits take it too."""
    f = dsl.jit(lambda w, b, scale: (dsl.cast(w, dsl.float32) + dsl.cast(b, dsl.float32)) * scale)
    w, b = random_packed(name, shape), random_packed(name, shape[-1:])
    scale = RNG.random(shape[:-1] + (1,)).astype(np.float32)
    want = (w.numpy().astype(np.float32) + b.numpy().astype(np.float32)) * scale
    np.testing.assert_array_equal(run_checked(f, w, b, scale), want)
    source = f.executable(w, b, scale).runners[0].source_for_contiguous()
    assert ("for jj in range(" in source) == (name != "int2")


def test_outputs_of_one_shape_share_one_kernel_that_computes_shared_producers_once():
    @dsl.jit
    def heads(x, y):
        a = dsl.exp(x) * y
        return a + 1.0, a * 2.0, dsl.reduce_sum(a, [-1]), dsl.transpose(x, [1, 0]), dsl.matmul(a, dsl.transpose(a, [1, 0]))
    x, y = RNG.random((3, 4)).astype(np.float32), RNG.random(4).astype(np.float32)
    plus, twice, total, xt, gram = run_checked(heads, x, y)
    a = np.exp(x) * y
    np.testing.assert_allclose(plus, a + 1, rtol=1e-6)
    np.testing.assert_allclose(twice, a * 2, rtol=1e-6)
    np.testing.assert_allclose(total, a.sum(-1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(gram, a @ a.T, rtol=1e-5)
    assert np.shares_memory(xt, x)
    executable = heads.executable(x, y)
    shared = [s for s in executable.steps if isinstance(s, KernelStep) and len(s.group.sinks) == 2]
    assert len(shared) == 1
    source = executable._runner(shared[0]).source_for_contiguous()
    assert source.count("np.exp(") + source.count("_vmath.exp_f32(") == 1  # (exact / fast math)
    assert "out0[q1] = " in source and "out1[q1] = " in source
    assert dsl.compare(heads, x, y).ok


@pytest.mark.parametrize("np_type", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_float_row_max_min_propagate_nan_anywhere_in_the_row(np_type):
    """Row max/min use IEEE maximum/minimum (vectorized, NaN-propagating): NaN at any position,
    infinities and rows of one element give numpy's answers."""
    x = RNG.standard_normal((9, 37)).astype(np_type)
    for row, col in [(0, 0), (1, 36), (2, 17), (3, 8), (3, 9)]:
        x[row, col] = np.nan
    x[4, 5], x[5, :] = np.inf, -np.inf
    f = dsl.jit(lambda x: (dsl.reduce_max(x, [-1], keepdims=0), dsl.reduce_max(-x, [-1], keepdims=0),
                           dsl.reduce_max(x, [0], keepdims=0)))
    wide = x.astype(np.float64)
    for got, want in zip(run_checked(f, x), [wide.max(-1), (-wide).max(-1), wide.max(0)]):
        assert got.dtype == np.dtype(np_type)
        np.testing.assert_array_equal(got.astype(np.float64), want)


def module_level_program(x):
    return dsl.relu(x) * 2.0


def test_jit_functions_pickle_as_their_python_function():
    import pickle
    f = dsl.jit(module_level_program, opset=21)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    f(x)
    clone = pickle.loads(pickle.dumps(f))
    assert clone.opset == 21 and clone.fn is module_level_program and clone._cache == {}
    np.testing.assert_array_equal(clone(x), f(x))


@pytest.mark.parametrize("name", ["int4", "uint4", "float4e2m1"])
@pytest.mark.parametrize("shape", [(5, 7), (4, 1), (3, 2), (2, 65537)])
def test_packed_row_kernels_read_byte_pairs_at_any_parity(name, shape):
    f = dsl.jit(lambda w, scale: (dsl.reduce_sum(dsl.cast(w, dsl.float32) * scale, [-1]),
                                  dsl.reduce_max(dsl.cast(w, dsl.float32) * scale, [-1]),
                                  dsl.reduce_mean(dsl.cast(w, dsl.float32), [-1]),
                                  dsl.softmax(dsl.cast(w, dsl.float32), axis=-1)))
    w = random_packed(name, shape)
    scale = RNG.random(shape[:-1] + (1,)).astype(np.float32)
    x = w.numpy().astype(np.float64)
    total, peak, mean, soft = run_checked(f, w, scale)
    np.testing.assert_allclose(total, (x * scale).sum(-1, keepdims=True), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(peak, (w.numpy().astype(np.float32) * scale).max(-1, keepdims=True))
    np.testing.assert_allclose(mean, x.mean(-1, keepdims=True), rtol=1e-6)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(-1, keepdims=True), rtol=1e-6, atol=1e-7)
    sources = [r.source_for_contiguous() for r in f.executable(w, scale).runners]
    assert all("for jj in range(" in source for source in sources) == (shape[-1] > 1)


@pytest.mark.parametrize("np_type", [np.int32, np.uint32, np.float16, np.float64])
def test_reductions_of_one_value_share_one_pass(np_type):
    f = dsl.jit(lambda x: (dsl.reduce_max(x, [-1], keepdims=0), dsl.reduce_sum(x, [-1]),
                           dsl.reduce_mean(x, [-1], keepdims=0)))
    x = (RNG.random((5, 9)) * 100).astype(np_type)
    peak, total, mean = run_checked(f, x)
    assert f.executable(x).kernel_count == 1
    np.testing.assert_array_equal(peak, x.max(-1))
    reference = f.lower(x).run([x], engine="numpy")
    if np_type == np.float64:  # float64 sums: the vectorized order may differ in the last bit
        np.testing.assert_allclose(total, reference[1], rtol=1e-14)
        np.testing.assert_allclose(mean, reference[2], rtol=1e-14)
    else:  # ints exact; float16 sums in float64, rounded once, like the reference
        np.testing.assert_array_equal(total, reference[1])
        np.testing.assert_array_equal(mean, reference[2])


EPILOGUE_STEPS = {
    "scale": ("y * 0.75", lambda y: y * 0.75),
    "shift": ("y + 1.5", lambda y: y + 1.5),
    "negate": ("-y", lambda y: -y),
    "abs": ("dsl.abs(y)", dsl.abs),
    "relu": ("dsl.relu(y)", dsl.relu),
    "through float16": ("dsl.cast(dsl.cast(y, dsl.float16), dsl.float32)",
                        lambda y: dsl.cast(dsl.cast(y, dsl.float16), dsl.float32)),
    "clip": ("dsl.clip(y, -0.5, 2.0)", lambda y: dsl.clip(y, -0.5, 2.0)),
}
ROW_OPS = {
    "softmax": lambda x, keep: dsl.softmax(x),
    "sum": lambda x, keep: dsl.reduce_sum(x, [-1], keepdims=keep),
    "max": lambda x, keep: dsl.reduce_max(x, [-1], keepdims=keep),
    "mean": lambda x, keep: dsl.reduce_mean(x, [-1], keepdims=keep),
}


@settings(max_examples=max(FUZZ_EXAMPLES // 2, 1), deadline=None, derandomize=FUZZ_EXAMPLES == 40, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_row_op_epilogues_match_the_eager_engine(data):
    """A random producer (x * 0.5 + operand), a row op, then a random chain of elementwise steps
    with an optional operand of the row result's shape: one kernel, the eager engine's bits."""
    rows, cols = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 40))
    row_op, keep = data.draw(st.sampled_from(sorted(ROW_OPS))), data.draw(st.booleans())
    chain = data.draw(st.lists(st.sampled_from(sorted(EPILOGUE_STEPS)), min_size=1, max_size=4))
    with_operand = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)
    out_shape = (rows, cols) if row_op == "softmax" else (rows, 1) if keep else (rows,)
    operand = rng.standard_normal(out_shape).astype(np.float32)
    note(f"{row_op} keepdims={keep} chain={chain} operand={with_operand} x{x.shape}")

    def program(x, bias, operand):
        y = ROW_OPS[row_op](x * 0.5 + bias, keep)
        for name in chain:
            y = EPILOGUE_STEPS[name][1](y)
        return y * operand if with_operand else y

    assert dsl.jit(program).executable(x, bias, operand).kernel_count == 1
    f = dsl.jit(program, math="exact")  # (bit for bit: the eager engine's float64 softmax)
    assert f.executable(x, bias, operand).kernel_count == 1
    report = dsl.compare(f, x, bias, operand, rtol=0, atol=0)
    assert report.ok, report


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.float64])
def test_elementwise_work_on_transposed_views_is_tiled_and_exact(dtype):
    # inputs read across their memory order (stride 1 along dim -2) are staged per 64 x 64 square;
    # odd sizes leave partial squares, the thread split cuts squares, broadcasts and plain inputs mix in
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((150, 203)) * 8).astype(dtype)
    y = (rng.standard_normal((203, 150)) * 8).astype(dtype)
    b = (rng.standard_normal((1, 150)) * 8).astype(dtype)
    f = dsl.jit(lambda x, y, b: (dsl.transpose(x, [1, 0]) * y + b, dsl.transpose(x, [1, 0]) - b))
    out, diff = f(x, y, b)
    np.testing.assert_array_equal(out, x.T * y + b)
    np.testing.assert_array_equal(diff, x.T - b)
    assert "tb0" in f.executable(x, y, b).explain()  # the staged (tiled) kernel ran
    plain = dsl.jit(lambda y, b: y * y + b)  # a row broadcast (stride 0 along dim -2) is not a transpose
    assert "tb" not in plain.executable(y, b).explain() and "tr_" not in plain.executable(y, b).explain()
    np.testing.assert_array_equal(plain(y, b), y * y + b)
    big = (rng.standard_normal((1000, 300)) * 8).astype(dtype)  # above the parallel threshold: 2 spans
    g = dsl.jit(lambda a, c: dsl.transpose(a, [1, 0]) + c)
    np.testing.assert_array_equal(g(big, big.T.copy()), big.T + big.T)


def test_tiled_kernels_with_outer_dims_and_a_transposed_slice():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 97, 130)).astype(np.float32)
    y = rng.standard_normal((3, 130, 97)).astype(np.float32)
    f = dsl.jit(lambda x, y: dsl.transpose(x, [0, 2, 1]) + y * 2.0)
    np.testing.assert_array_equal(f(x, y), np.transpose(x, (0, 2, 1)) + y * 2)
    flipped = x[:, ::-1, :]  # unit stride along dim -2 after the transpose, negative along -1: SIMD blocks
    np.testing.assert_array_equal(f(flipped.copy(), y), np.transpose(flipped, (0, 2, 1)) + y * 2)
    h = dsl.jit(lambda a, y: dsl.transpose(a, [0, 2, 1]) + y * 2.0)
    np.testing.assert_array_equal(h(flipped, y), np.transpose(flipped, (0, 2, 1)) + y * 2)
    assert "transpose_block" in h.executable(flipped, y).explain()  # (explain: the contiguous-input kernel)
    strided = x[:, ::-1, ::2]  # negative and non-unit strides: staged with its own strides
    g = dsl.jit(lambda a: dsl.transpose(a, [0, 2, 1]) - 1.0)
    np.testing.assert_array_equal(g(strided), np.transpose(strided, (0, 2, 1)) - 1)


def test_a_last_axis_reduction_broadcast_back_along_its_rows_is_one_kernel():
    # x - max(x, -1) and exp(x - max(x, -1)): the consumers run in a second pass over each row
    rng = np.random.default_rng(11)
    x = rng.standard_normal((37, 129)).astype(np.float32)
    for fn, rtol in ((lambda a: a - dsl.reduce_max(a, [-1]), 0), (lambda a: (a - dsl.reduce_mean(a, [-1])) / 3.0, 0),
                     (lambda a: dsl.exp(a - dsl.reduce_max(a, [-1])) * 2.0, 3e-7)):  # (exp: 1 ulp from numpy's)
        f = dsl.jit(fn)
        assert f.executable(x).kernel_count == 1
        report = dsl.compare(f, x, rtol=rtol, atol=0)
        assert report.ok, report
    shifted = dsl.jit(lambda a: a - dsl.reduce_max(a, [-1]))
    for view in (x[:, ::-1], x[::2, 3:], x[0]):  # strided rows, a slice, rank 1
        np.testing.assert_array_equal(shifted(view), view - view.max(-1, keepdims=True))


def test_broadcast_back_needs_the_kept_axis_and_a_written_end():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    # keepdims=0: the [64] result broadcasts along dim 0, not along the rows
    f = dsl.jit(lambda a: a - dsl.reduce_max(a, [-1], keepdims=0))
    np.testing.assert_array_equal(f(x), x - x.max(-1))

    def layer_norm(a, g, b):  # x - mean feeds two ops: it is recomputed, not written
        d = a - dsl.reduce_mean(a, [-1])
        return d / dsl.sqrt(dsl.reduce_mean(d * d, [-1]) + 1e-5) * g + b
    g, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    ln = dsl.jit(layer_norm)
    # one kernel: the mean and the variance are its stages, x - mean recomputed in each pass
    # (before stages: three kernels, mean; variance; the normalization)
    assert ln.executable(x, g, b).kernel_count == 1
    report = dsl.compare(ln, x, g, b, rtol=0, atol=0)
    assert report.ok, report
