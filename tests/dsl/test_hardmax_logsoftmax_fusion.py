"""Hardmax and LogSoftmax over any axis in the JIT: Hardmax by its body (dsl/ops/scan.py
_hardmax_body: Cast(Equal(ArgMax, arange)), an argmax reduction and one elementwise kernel, the
reference's bits for every version, type and axis, with ties, NaN and signed zeros), LogSoftmax
by the any-axis schedule's "logsoftmax" kind (dsl/kir/reduce_schedule.py), both with their
producer fused and no numpy step left; inputs kernels cannot run (dims known only at run time,
empty) keep the reference."""
import re
from math import prod

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import runtime, thread_policy
from dsl.passes.fuse import KernelStep, ReduceStep
from dsl_test_helpers import allowed_types, onnx_versions

RNG = np.random.default_rng(23)
NUMPY_STEP = re.compile(r"^step \d+: numpy ", re.MULTILINE)


def numpy_steps(f, *args) -> list:
    return NUMPY_STEP.findall(f.explain(*args))


def coerced_rows(x: np.ndarray, axis: int, coerce: bool) -> tuple:
    """(x as float64, the axis to work along): versions 1 and 11 as 2-D [prod(dims before axis), rest]."""
    wide = x.astype(np.float64)
    if not coerce:
        return wide, axis
    return wide.reshape(prod(x.shape[:axis]), -1), 1


def reduction_fused_with(executable, op_type: str) -> bool:
    reductions = [s for s in executable.steps if isinstance(s, (ReduceStep, KernelStep)) and s.row]
    return len(reductions) == 1 and op_type in [n.op_type for n in reductions[0].group.nodes]


# ---- Hardmax ---------------------------------------------------------------------------------------
HARDMAX_CASES = [(v, dt) for v in onnx_versions("Hardmax") for dt in allowed_types("Hardmax", v)]


def hardmax_numpy(x: np.ndarray, axis: int, coerce: bool) -> np.ndarray:
    """One-hot of numpy's argmax (the first maximum, NaN as the maximum; float64 holds every
    float16 / bfloat16 / float32 value exactly, -0 == +0)."""
    axis %= x.ndim
    if x.size == 0:
        return np.zeros(x.shape, x.dtype)
    rows, along = coerced_rows(x, axis, coerce)
    out = np.zeros(rows.shape, x.dtype)
    np.put_along_axis(out, np.expand_dims(np.argmax(rows, along), along), 1, along)
    return out.reshape(x.shape)


def few_values(np_type, shape, seed: int) -> np.ndarray:
    """Values from a small set: ties everywhere, NaN, +-0 and +-inf."""
    rng = np.random.default_rng(seed)
    pool = np.array([-1.5, -0.0, 0.0, 2.0, 3.0, np.inf, -np.inf, np.nan])
    weights = np.array([4, 2, 2, 4, 3, 0.5, 0.5, 0.3])
    return pool[rng.choice(len(pool), shape, p=weights / weights.sum())].astype(np_type)


def check_hardmax(x: np.ndarray, axis: int, version: int):
    f = dsl.jit(lambda v: dsl.hardmax(v + v, axis), opset=version)
    got = f(x)
    want = dsl.hardmax(x + x, axis, opset=version)
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # the reference's bits
    np.testing.assert_array_equal(got, hardmax_numpy(x + x, axis, version < 13))
    executable = f.executable(x)
    assert not numpy_steps(f, x), f.explain(x)
    assert executable.kernel_count <= 2 and reduction_fused_with(executable, "Add"), f.explain(x)
    assert isinstance(executable.steps[0], ReduceStep)
    return got


@pytest.mark.sweep
@pytest.mark.parametrize("version, dt", HARDMAX_CASES, ids=[f"{v}-{d}" for v, d in HARDMAX_CASES])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_hardmax_every_version_type_and_axis(version, dt, axis):
    x = few_values(dt.np_dtype, (4, 5, 6), seed=version * 10 + axis)
    check_hardmax(x, axis, version)


@pytest.mark.parametrize("version", [1, 11, 13])
@pytest.mark.parametrize("shape, axis", [((7,), 0), ((2, 1, 5), 1), ((6, 1), 1), ((6, 1), 0), ((1, 1, 1), -1),
                                         ((1, 9), -2), ((3, 1, 4, 1), 2)])
def test_hardmax_shapes_with_size_one_axes(version, shape, axis):
    check_hardmax(few_values(np.float32, shape, seed=len(shape) + axis), axis, version)


@pytest.mark.parametrize("np_type", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64],
                         ids=lambda t: np.dtype(t).name)
def test_hardmax_ties_nan_and_signed_zeros(np_type):
    nan, inf = np.nan, np.inf
    x = (np.array([[1.0, 3.0, 3.0, 2.0],  # a tie: the first maximum
                   [5.0, nan, 9.0, nan],  # NaN counts as the maximum: the first NaN
                   [-0.0, 0.0, -1.0, -0.0],  # -0 == +0: the first zero, whichever sign
                   [-inf, -inf, -inf, -inf],  # all equal: index 0
                   [2.0, inf, inf, -inf]]) * 0.5).astype(np_type)  # (halved: the program adds v + v)
    versions = (13,) if np_type is ml_dtypes.bfloat16 else (11, 13)  # (bfloat16 from version 13)
    for version in versions:
        assert np.argmax(check_hardmax(x, -1, version), -1).tolist() == [1, 1, 0, 0, 1]
    # columns: 5 (the first of 5, 2), NaN, +inf (the first of two), NaN
    assert np.argmax(check_hardmax(x, 0, 13), 0).tolist() == [1, 1, 4, 1]
    if 11 in versions:
        assert np.flatnonzero(check_hardmax(x, 0, 11)).tolist() == [5]  # coerced: the first NaN of all


def test_hardmax_rows_longer_than_a_block_and_split_over_threads(monkeypatch):
    from dsl.kir.reduce_schedule import ARG_BLOCK
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1 << 10)
    monkeypatch.setattr(thread_policy, "_THREADS", 2)
    x = RNG.standard_normal((6, 2 * ARG_BLOCK + 9)).astype(np.float32)
    x[0, ARG_BLOCK + 3] = x[0, 2 * ARG_BLOCK + 1] = 50  # a tie across blocks
    x[1, -1] = np.nan
    for version in (11, 13):
        for axis in (0, 1):
            check_hardmax(x, axis, version)


def test_hardmax_of_a_transposed_producer():
    x = few_values(np.float32, (5, 6, 7), seed=3)
    for version in (11, 13):
        f = dsl.jit(lambda v: dsl.hardmax(dsl.transpose(v, [2, 0, 1]) * 2, 1), opset=version)
        want = hardmax_numpy(np.transpose(x, (2, 0, 1)) * 2, 1, version < 13)
        np.testing.assert_array_equal(f(x), want)
        assert not numpy_steps(f, x) and f.executable(x).kernel_count == 2, f.explain(x)


def test_hardmax_of_x_times_two_is_a_reduction_and_an_elementwise_kernel():
    x = RNG.standard_normal((8, 100)).astype(np.float32)
    f = dsl.jit(lambda v: dsl.hardmax(v * 2))
    np.testing.assert_array_equal(f(x), hardmax_numpy(x * 2, -1, False))
    steps = f.executable(x).steps
    assert [type(s) for s in steps] == [ReduceStep, KernelStep] and reduction_fused_with(f.executable(x), "Mul")
    assert "numpy Hardmax" not in f.explain(x)


@pytest.mark.parametrize("version", [1, 11, 13])
@pytest.mark.parametrize("np_type", [np.float32, np.float16])
def test_hardmax_empty_inputs_keep_the_reference(version, np_type):
    for shape, axis in (((2, 0, 3), 1), ((0, 4), -1), ((3, 0), 0)):
        x = np.zeros(shape, np_type)
        f = dsl.jit(lambda v, axis=axis: dsl.hardmax(v, axis), opset=version)
        got = f(x)
        assert got.shape == shape and got.dtype == x.dtype
        assert "numpy Hardmax" in f.explain(x), f.explain(x)


@pytest.mark.parametrize("version", [11, 13])  # (Compress is defined from opset 9)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_hardmax_dims_known_only_at_run_time_keep_the_reference(version, axis):
    """Compress makes a data-dependent dim: the Hardmax stays (its reference runs), version 11
    still coerced to 2-D over the axes from `axis` on (also with no row left)."""
    x = few_values(np.float32, (4, 3, 5), seed=axis + 5)
    f = dsl.jit(lambda v, m: dsl.hardmax(dsl.compress(v, m, axis=0) * 2, axis), opset=version)
    for mask in (np.array([True, False, True, True]), np.zeros(4, bool)):
        got = f(x, mask)
        np.testing.assert_array_equal(got, hardmax_numpy(x[mask] * 2, axis, version < 13))
        assert "numpy Hardmax" in f.explain(x, mask)


# ---- LogSoftmax ------------------------------------------------------------------------------------
LOG_SOFTMAX_CASES = [(v, dt) for v in onnx_versions("LogSoftmax") for dt in allowed_types("LogSoftmax", v)]
# the existing LogSoftmax tests' fast-math tolerance (tests/dsl/ops/test_reduce.py); exact math:
# one unit in the last place of T (a near-zero result, -log(1 + tiny), is ill-conditioned: the
# order of the float64 sum moves its last bits), as relative and absolute bounds
FAST_RTOL = {"float": 2e-6, "double": 2e-6, "float16": 1e-2, "bfloat16": 1e-2}
EXACT_RTOL = {"float": 2 ** -23, "double": 1e-14, "float16": 2 ** -10, "bfloat16": 2 ** -7}
FLOAT64_RTOL = {"float": 2e-6, "double": 1e-13, "float16": 2 ** -10, "bfloat16": 2 ** -7}


def log_softmax_numpy(x: np.ndarray, axis: int, coerce: bool) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) in float64."""
    axis %= x.ndim
    rows, along = coerced_rows(x, axis, coerce)
    shifted = rows - rows.max(along, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(along, keepdims=True))).reshape(x.shape)


@pytest.mark.sweep
@pytest.mark.parametrize("math", ["fast", "exact"])
@pytest.mark.parametrize("version, dt", LOG_SOFTMAX_CASES, ids=[f"{v}-{d}" for v, d in LOG_SOFTMAX_CASES])
@pytest.mark.parametrize("shape", [(4, 5, 6), (3, 4, 5, 6)], ids=["rank3", "rank4"])
def test_log_softmax_over_every_axis(shape, version, dt, math):
    x = (RNG.standard_normal(shape) * 1.5).astype(dt.np_dtype)
    name = dt.onnx_name
    for axis in range(-len(shape), len(shape)):
        f = dsl.jit(lambda v, axis=axis: dsl.log_softmax(v + v, axis), opset=version, math=math)
        got = f(x)
        assert got.dtype == x.dtype and got.shape == x.shape
        want = dsl.log_softmax(x + x, axis, opset=version)
        rtol = FAST_RTOL[name] if math == "fast" else EXACT_RTOL[name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=1e-6 if math == "fast" else 1e-14, err_msg=f"axis {axis}")
        independent = log_softmax_numpy(x + x, axis, version < 13)
        np.testing.assert_allclose(got.astype(np.float64), independent, rtol=FLOAT64_RTOL[name],
                                   atol=2e-6 if name != "double" else 1e-13, err_msg=f"axis {axis}")
        executable = f.executable(x)
        assert not numpy_steps(f, x), f.explain(x)
        assert executable.kernel_count == 1 and reduction_fused_with(executable, "Add"), f.explain(x)
        # the normalized axes are the last one alone (1, 11: from `axis` on) in the row kernel
        row = axis % len(shape) == len(shape) - 1
        assert type(executable.steps[-1]) is (KernelStep if row else ReduceStep)


@pytest.mark.parametrize("np_type", [np.float32, np.float16, ml_dtypes.bfloat16], ids=lambda t: np.dtype(t).name)
def test_fast_log_softmax_over_any_axis_is_the_row_kernels_bits(np_type):
    """math="fast": the any-axis kind computes as the last-axis row kernel does (float32 v - max,
    vmath exp, float64 sum, v - (max + float32(log(sum)))): over axis k of x the bits of the row
    kernel over the last axis of x with k moved last."""
    x = (RNG.standard_normal((3, 4, 5, 6)) * 4).astype(np_type)
    for axis in range(3):
        perm = [a for a in range(4) if a != axis] + [axis]
        any_axis = dsl.jit(lambda v, axis=axis: dsl.log_softmax(v * 2, axis))
        row = dsl.jit(lambda v, perm=perm: dsl.log_softmax(dsl.transpose(v * 2, perm), -1))
        assert isinstance(any_axis.executable(x).steps[-1], ReduceStep)
        assert type(row.executable(x).steps[-1]) is KernelStep
        got = np.ascontiguousarray(np.moveaxis(any_axis(x), axis, -1))
        np.testing.assert_array_equal(got.view(np.uint8), row(x).view(np.uint8))


@pytest.mark.parametrize("math", ["fast", "exact"])
def test_log_softmax_special_values_over_other_axes(math):
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    x[1, :, 0] = np.nan  # a NaN in each column x[:, j, 0]: NaN columns
    x[2, 0, 1] = np.inf  # +inf as the max: NaN (inf - inf)
    x[:, 1, 2] = -np.inf  # all -inf: NaN
    x[:, 2, 3] = [0.0, -200.0, -1000.0, -300.0]  # finite (the values themselves) where softmax underflows
    f = dsl.jit(lambda v: dsl.log_softmax(v, 0), math=math)
    got, want = f(x), dsl.log_softmax(x, 0)
    assert isinstance(f.executable(x).steps[-1], ReduceStep)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[:, :, 0]).all() and np.isnan(got[:, 0, 1]).all() and np.isnan(got[:, 1, 2]).all()
    assert got[:, 2, 3].tolist() == [0.0, -200.0, -1000.0, -300.0]
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("axis", [0, 1])
def test_log_softmax_split_over_threads(monkeypatch, axis):
    """Threads split the outer dim (axis 1) or the innermost kept dim (axis 0: no outer dim);
    each writes its part of the full-shape output."""
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1 << 10)
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    x = RNG.standard_normal((37, 130, 3)).astype(np.float32)
    for math in ("fast", "exact"):
        f = dsl.jit(lambda v: dsl.log_softmax(v * 0.5, axis), math=math)
        np.testing.assert_allclose(f(x), log_softmax_numpy(x * np.float32(0.5), axis, False), rtol=2e-6, atol=2e-6)
        assert isinstance(f.executable(x).steps[-1], ReduceStep)


@pytest.mark.parametrize("reduced", [(True, False, False), (False, True, False), (False, False, True),
                                     (False, True, True), (True, False, True)])
@pytest.mark.parametrize("math", ["fast", "exact"])
def test_log_softmax_kind_compiled_and_interpreted(reduced, math):
    """The schedule's "logsoftmax" kernel on its own (dsl/kir/reduce_schedule.py): compiled (two
    "threads" over the split dim) and run by the kernel-IR interpreter, against numpy."""
    from dsl import kir
    from dsl.codegen import compile as codegen_compile
    from dsl.codegen.loops import kernel_source
    from dsl.kir import interp
    from dsl.kir import loops as L
    from dsl.kir.reduce_schedule import ReduceLayout, reduction_kernel
    shape = (3, 4, 5)
    x = (np.random.default_rng(sum(reduced)).standard_normal(shape) * 3).astype(np.float32)
    kernel = reduction_kernel(kir.leaf(0, dsl.float32), [(dsl.float32, False)], reduced, [(1, 1, 1)], "logsoftmax",
                              dsl.float32, math)
    L.verify(kernel)
    strides = [int(np.prod(shape[k + 1:])) for k in range(3)]
    layout = ReduceLayout(reduced)
    split = shape[layout.split] if layout.split is not None else 1
    values = {"count": int(np.prod([d for d, r in zip(shape, reduced) if r])), "o0": 0,
              **{f"n{k}": d for k, d in enumerate(shape)}, **{f"s0_{k}": s for k, s in enumerate(strides)},
              **{f"os{k}": s for k, s in enumerate(strides)}}
    compiled = codegen_compile.compile_kernel(kernel_source(kernel, math))
    got = np.zeros(x.size, np.float32)
    for lo, hi in ((0, split // 2), (split // 2, split)):
        args = {**values, "start": lo, "stop": hi}
        compiled(*[np.uint64(args[p]) for p in kernel.params], x.ravel(), got)
    interpreted = np.zeros(x.size, np.float32)
    interp.run_kernel(kernel, {"b0": x.ravel(), "out0": interpreted}, {**values, "start": 0, "stop": split})
    axes = tuple(k for k, r in enumerate(reduced) if r)
    wide = x.astype(np.float64)
    shifted = wide - wide.max(axes, keepdims=True)
    want = (shifted - np.log(np.exp(shifted).sum(axes, keepdims=True))).astype(np.float32)
    np.testing.assert_allclose(got.reshape(shape), want, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(interpreted.reshape(shape), want, rtol=2e-6, atol=2e-6)
    if math == "exact":  # float64 throughout, rounded once: the interpreter's bits
        np.testing.assert_array_equal(got, interpreted)
