"""Reductions and softmax over any axes in the JIT (the any-axis schedule, dsl/kir/reduce_schedule.py):
one kernel with the producers fused, on transposed, broadcast and packed inputs, matching numpy
and the eager engine; random programs by hypothesis."""
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
from dsl_test_helpers import draw_reduce_inputs
from dsl.passes.fuse import ReduceStep

RNG = np.random.default_rng(11)
REDUCE = {"sum": (dsl.reduce_sum, np.sum), "mean": (dsl.reduce_mean, np.mean), "max": (dsl.reduce_max, np.max),
          "min": (None, np.min)}


def reduce_min(x, axes, keepdims=True):
    return -dsl.reduce_max(-x, axes, keepdims=keepdims)


REDUCE["min"] = (reduce_min, np.min)


@pytest.mark.parametrize("axes", [[0], [1], [0, 2], [1, 2], [0, 1, 2], [-2]])
@pytest.mark.parametrize("kind", ["sum", "mean", "max"])
def test_reductions_over_any_axes_are_one_kernel_with_their_producer(axes, kind):
    x = RNG.standard_normal((6, 7, 8)).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    ours, theirs = REDUCE[kind]
    f = dsl.jit(lambda v, b: ours(v * 0.5 + b, axes, keepdims=False))
    got = f(x, bias)
    want = theirs((x * np.float32(0.5) + bias).astype(np.float64), axis=tuple(axes))
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)
    executable = f.executable(x, bias)
    assert executable.kernel_count == 1 and isinstance(executable.steps[-1], ReduceStep)
    assert dsl.compare(f, x, bias, rtol=1e-6).ok


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("math", ["fast", "exact"])
def test_softmax_over_any_axis(axis, math):
    x = (RNG.standard_normal((5, 6, 7)) * 3).astype(np.float32)
    f = dsl.jit(lambda v: dsl.softmax(v * 1.5, axis), math=math)
    e = np.exp((x * np.float32(1.5)).astype(np.float64) - (x * np.float32(1.5)).max(axis, keepdims=True))
    want = (e / e.sum(axis, keepdims=True)).astype(np.float32)
    np.testing.assert_allclose(f(x), want, rtol=2e-6 if math == "exact" else 4e-6, atol=1e-9)
    assert f.executable(x).kernel_count == 1


def test_layouts_transposed_broadcast_and_packed_inputs():
    x = RNG.standard_normal((16, 24)).astype(np.float32)
    xt = np.ascontiguousarray(x.T).T  # Fortran order
    f = dsl.jit(lambda v: dsl.reduce_sum(v, [0], keepdims=False))
    np.testing.assert_allclose(f(xt), x.astype(np.float64).sum(0).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(f(x[::-1, ::2]), x[::-1, ::2].astype(np.float64).sum(0).astype(np.float32), rtol=1e-6)
    row = RNG.standard_normal((1, 24)).astype(np.float32)
    g = dsl.jit(lambda v, r: dsl.reduce_max(v * r, [0]))
    np.testing.assert_array_equal(g(x, row), (x * row).max(0, keepdims=True))
    codes = RNG.integers(-8, 8, (16, 24)).astype(ml_dtypes.int4)
    weights = dsl.Tensor.from_numpy(codes)
    h = dsl.jit(lambda w, s: dsl.reduce_sum(dsl.dequantize_linear(w, s), [0], keepdims=False))
    scale = np.float32(0.25)
    np.testing.assert_array_equal(h(weights, scale), (codes.astype(np.float64) * 0.25).sum(0).astype(np.float32))
    assert h.executable(weights, scale).kernel_count == 1


def test_integer_and_bool_reductions_over_other_axes():
    x = RNG.integers(-100, 100, (5, 6, 7)).astype(np.int32)
    f = dsl.jit(lambda v: (dsl.reduce_sum(v, [0, 2]), dsl.reduce_mean(v, [1]), dsl.reduce_max(v, [0])))
    for got, want in zip(f(x), (x.sum((0, 2), keepdims=True), dsl.reduce_mean(x, [1]), x.max(0, keepdims=True))):
        np.testing.assert_array_equal(got, want)
    flags = RNG.random((4, 5)) > 0.7
    g = dsl.jit(lambda v: dsl.reduce_max(v, [0]))
    np.testing.assert_array_equal(g(flags), flags.any(0, keepdims=True))


FUZZ_EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "40"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=FUZZ_EXAMPLES == 40, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_any_axis_programs_match_the_eager_engine(data):
    """A producer (transposed or not, with a broadcast operand), then a reduction over random
    axes (or a softmax over a random axis), then an elementwise consumer."""
    x, operand, rank = draw_reduce_inputs(data)
    kind = data.draw(st.sampled_from(["sum", "mean", "max", "min", "softmax"]))
    keep = data.draw(st.booleans())
    axes = sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=1)))
    axes = [a - rank if data.draw(st.booleans()) else a for a in axes]
    note(f"{kind} axes={axes} keepdims={keep} x{list(x.shape)} strides {x.strides} operand{list(operand.shape)}")

    def program(v, o):
        y = v * 0.5 + o
        if kind == "softmax":
            return dsl.softmax(y, axes[0]) * 2.0
        return REDUCE[kind][0](y, axes, keepdims=keep) + 1.0

    f = dsl.jit(program, math="exact")
    report = dsl.compare(f, x, operand, rtol=2e-6, atol=1e-7)
    assert report.ok, report
    fast = dsl.jit(program)
    np.testing.assert_allclose(fast(x, operand), f(x, operand), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes", [[-1], [0], [0, 1]])
def test_reduce_max_orders_negative_zero_below_positive_zero_in_both_engines(axes):
    # IEEE 754-2019 maximum: -0 < +0 and NaN propagates; jit (row and any-axis kernels) and eager agree bit for bit
    a = np.array([[-0.0, 0.0, -0.0], [-0.0, -0.0, -0.0], [0.0, np.nan, -0.0]], np.float32)
    f = lambda x: dsl.reduce_max(x, axes)  # noqa: E731
    got, want = dsl.jit(f)(a), f(a)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    lowest = -dsl.reduce_max(-a, axes)
    if axes == [-1]:
        assert want.ravel().view(np.uint32)[:2].tolist() == [0, 0x80000000] and np.isnan(want.ravel()[2])
        assert np.signbit(lowest.ravel()[:2]).tolist() == [True, True]


@pytest.mark.sweep
@pytest.mark.parametrize("dtype, kind", [("float32", "sum"), ("float32", "mean"), ("float32", "max"), ("float16", "sum"),
                                         ("bfloat16", "mean"), ("int32", "sum"), ("int8", "max"), ("uint8", "max"),
                                         ("int32", "mean"), ("bool", "max"), ("float32", "min"), ("float64", "sum")])
@pytest.mark.parametrize("shape, axes", [((257, 5), [0]), ((130, 3, 4), [0, 1]), ((300, 1), [0]), ((70, 2, 9), [0, 1, 2]),
                                         ((200, 4, 2), [0, 2])])
def test_split_reductions_over_threads_combine_partials(monkeypatch, dtype, kind, shape, axes):
    """A reduction with no outer dim splits its first (reduced) dim between threads, each
    accumulating a partial; a combine kernel finishes (ReduceLayout.partial). Three threads, odd
    extents (the unrolled loop's remainder), every kind's combine, against the eager engine."""
    from dsl import runtime, thread_policy
    from dsl.runtime_reduce import ReduceRunner
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    rng = np.random.default_rng(len(shape) * 7 + len(kind))
    if dtype == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
        x.reshape(-1)[5] = not x.reshape(-1)[5]
    elif dtype.startswith(("int", "uint")):
        x = rng.integers(0, 100, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dsl.dtype(dtype).np_dtype)
    ours = {"sum": dsl.reduce_sum, "mean": dsl.reduce_mean, "max": dsl.reduce_max, "min": reduce_min}[kind]
    f = dsl.jit(lambda v: ours(v, axes, keepdims=0))
    exact = dtype != "float64"
    report = dsl.compare(f, x, rtol=0 if exact else 1e-12, atol=0 if exact else 1e-12)
    assert report.ok, report
    runner = next(r for r in f.executable(x).runners if isinstance(r, ReduceRunner))
    assert any(plan[-1] is not None for plan in runner.plans.values())  # the partials path ran
