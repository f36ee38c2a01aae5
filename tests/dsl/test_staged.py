"""Reductions as stages of the kernel that reads them (dsl/passes/fuse.py _staged, the staged
schedule of dsl/kir/reduce_schedule.py): layer norm, RMS norm and x - max(x) over any axes are
one kernel, matching the eager engine bit for bit; the cases that must not stage (a per-row
value that is needed, a view between, reductions over different axes in one kernel, a row
kernel's epilogue) still give the right values."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
from dsl_test_helpers import draw_reduce_inputs
from dsl.passes.fuse import StagedStep

RNG = np.random.default_rng(23)


def layer_norm(axes):
    def program(x, g, b):
        d = x - dsl.reduce_mean(x, axes)
        return d / dsl.sqrt(dsl.reduce_mean(d * d, axes) + 1e-5) * g + b
    return program


def rms_norm(axes):
    def program(x, g, b):
        return x / dsl.sqrt(dsl.reduce_mean(x * x, axes) + 1e-6) * g
    return program


def staged_count(f, *args) -> int:
    return sum(isinstance(step, StagedStep) for step in f.executable(*args).steps)


@pytest.mark.sweep
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("axes", [[-1], [0], [1, 2], [0, 2], [0, 1, 2]])
@pytest.mark.parametrize("norm", [layer_norm, rms_norm])
def test_norms_over_any_axes_are_one_kernel_equal_to_eager(norm, axes, dtype):
    dt = dsl.dtype(dtype)
    x = RNG.standard_normal((6, 7, 8)).astype(dt.np_dtype)
    g = RNG.standard_normal(8).astype(dt.np_dtype)
    b = RNG.standard_normal(8).astype(dt.np_dtype)
    f = dsl.jit(norm(axes))
    executable = f.executable(x, g, b)
    assert executable.kernel_count == 1 and staged_count(f, x, g, b) == 1
    exact = dtype != "float64"  # (float32 and narrower sum in float64; float64 sums associate differently)
    report = dsl.compare(f, x, g, b, rtol=0 if exact else 1e-12, atol=0 if exact else 1e-12)
    assert report.ok, report


def test_layer_norm_matches_numpy_on_transposed_and_integer_inputs():
    x = np.ascontiguousarray(RNG.standard_normal((48, 64)).astype(np.float32).T).T  # a transposed view
    g, b = RNG.standard_normal(64).astype(np.float32), RNG.standard_normal(64).astype(np.float32)
    f = dsl.jit(layer_norm([-1]))
    d = x - x.astype(np.float64).mean(-1, keepdims=True).astype(np.float32)
    v = (d * d).astype(np.float64).mean(-1, keepdims=True).astype(np.float32)
    np.testing.assert_array_equal(f(x, g, b), d / np.sqrt(v + np.float32(1e-5)) * g + b)
    q = RNG.integers(-128, 128, (48, 64)).astype(np.int8)
    h = dsl.jit(lambda q, g, b: layer_norm([-1])(dsl.cast(q, dsl.float32) * 0.25, g, b))
    assert h.executable(q, g, b).kernel_count == 1
    assert dsl.compare(h, q, g, b, rtol=0, atol=0).ok


@pytest.mark.parametrize("axes, blocked", [([-1], False), ([0], False), ([-1], True), ([0], True)])
def test_rms_norm_of_packed_int4_weights_is_one_kernel(axes, blocked):
    """Packed int4 codes dequantized (per tensor, or blocks of 8 along the last axis) and
    RMS-normalized over either axis: the 4-bit loads, the blocked scale and both passes in one
    kernel."""
    import ml_dtypes
    codes = RNG.integers(-8, 8, (24, 32)).astype(ml_dtypes.int4)
    weights = dsl.Tensor.from_numpy(codes)
    scale = (RNG.random((24, 4)).astype(np.float32) + 0.5) if blocked else np.float32(0.25)
    g = RNG.standard_normal(32).astype(np.float32)
    kwargs = {"axis": 1, "block_size": 8} if blocked else {}
    f = dsl.jit(lambda w, s, g: rms_norm(axes)(dsl.dequantize_linear(w, s, **kwargs), g, None))
    assert f.executable(weights, scale, g).kernel_count == 1 and staged_count(f, weights, scale, g) == 1
    w = codes.astype(np.float32) * (np.repeat(scale, 8, axis=1) if blocked else scale)
    m = (w * w).astype(np.float64).mean(tuple(axes), keepdims=True).astype(np.float32)
    np.testing.assert_array_equal(f(weights, scale, g), w / np.sqrt(m + np.float32(1e-6)) * g)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint32"])
@pytest.mark.parametrize("axes", [[-1], [0]])
def test_integer_x_minus_max_is_one_kernel(dtype, axes):
    x = RNG.integers(0, 100, (9, 33)).astype(dtype)
    f = dsl.jit(lambda x: x - dsl.reduce_max(x, axes))
    assert f.executable(x).kernel_count == 1 and staged_count(f, x) == 1
    np.testing.assert_array_equal(f(x), x - x.max(tuple(axes), keepdims=True))


def test_threads_and_streaming_stores(monkeypatch):
    from dsl import runtime, thread_policy
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    monkeypatch.setattr(runtime, "STREAM_BYTES", 1)
    x = RNG.standard_normal((512, 512)).astype(np.float32)  # 1 MiB out: a pooled, aligned buffer
    g, b = RNG.standard_normal(512).astype(np.float32), RNG.standard_normal(512).astype(np.float32)
    for axes in ([-1], [0]):
        f = dsl.jit(layer_norm(axes))
        source = f.explain(x, g, b)
        assert ("stream_store" in source) == (axes == [-1]), source  # (vector accumulators never stream)
        assert dsl.compare(f, x, g, b, rtol=0, atol=0).ok


def test_a_needed_per_row_value_is_written_and_still_right():
    """rstd returned as well: the variance cannot be a stage (its per-row consumer is written at
    the reduced shape), the mean still can."""
    x = RNG.standard_normal((16, 40)).astype(np.float32)

    def program(x):
        d = x - dsl.reduce_mean(x, [-1])
        rstd = 1.0 / dsl.sqrt(dsl.reduce_mean(d * d, [-1]) + 1e-5)
        return d * rstd, rstd
    f = dsl.jit(program)
    assert dsl.compare(f, x, rtol=0, atol=0).ok
    y, rstd = f(x)
    assert rstd.shape == (16, 1)


def test_reductions_over_different_axes_in_one_kernel_split():
    """Stages share the kernel's reduced axes: the second runs as a kernel of its own."""
    x = RNG.standard_normal((12, 20)).astype(np.float32)
    f = dsl.jit(lambda x: (x - dsl.reduce_mean(x, [-1])) * (x - dsl.reduce_max(x, [0])))
    assert f.executable(x).kernel_count == 2
    assert dsl.compare(f, x, rtol=0, atol=0).ok
    want = (x - x.astype(np.float64).mean(-1, keepdims=True).astype(np.float32)) * (x - x.max(0, keepdims=True))
    np.testing.assert_array_equal(f(x), want)


def test_stage_under_a_view_or_in_a_row_epilogue_is_not_staged():
    x = RNG.standard_normal((10, 10)).astype(np.float32)
    views = dsl.jit(lambda x: dsl.transpose(x - dsl.reduce_max(x, [-1]), [1, 0]) + x)
    np.testing.assert_array_equal(views(x), (x - x.max(-1, keepdims=True)).T + x)
    assert dsl.compare(views, x, rtol=0, atol=0).ok
    epilogue = dsl.jit(lambda x: dsl.softmax(x) * (x - dsl.reduce_mean(x, [-1])), math="exact")
    assert dsl.compare(epilogue, x, rtol=0, atol=0).ok
    keep0 = dsl.jit(lambda x: x - dsl.reduce_max(x, [-1], keepdims=0))  # broadcasts along dim 0
    np.testing.assert_array_equal(keep0(x), x - x.max(-1))


FUZZ_EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "40"))
KINDS = {"sum": dsl.reduce_sum, "mean": dsl.reduce_mean, "max": dsl.reduce_max,
         "min": lambda v, axes: -dsl.reduce_max(-v, axes)}


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=FUZZ_EXAMPLES == 40, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_reduce_then_broadcast_programs_match_the_eager_engine(data):
    """A producer (transposed or not, a broadcast operand), a reduction over random axes kept as
    1, its result used at the full shape, a second reduction of that, and an output of both."""
    x, operand, rank = draw_reduce_inputs(data)
    first, second = data.draw(st.sampled_from(sorted(KINDS))), data.draw(st.sampled_from(sorted(KINDS)))
    axes = sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=1)))
    axes = [a - rank if data.draw(st.booleans()) else a for a in axes]
    note(f"{first}, {second} axes={axes} x{list(x.shape)} strides {x.strides} operand{list(operand.shape)}")

    def program(v, o):
        y = v * 0.5 + o
        d = y - KINDS[first](y, axes)
        return d * (KINDS[second](d * d, axes) + 1.0) + o

    f = dsl.jit(program, math="exact")
    report = dsl.compare(f, x, operand, rtol=0, atol=0)
    assert report.ok, report
    assert f.executable(x, operand).kernel_count == 1
