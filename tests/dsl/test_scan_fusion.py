"""CumSum and CumProd in the JIT (the any-axis scan schedule, dsl/kir/scan_schedule.py): one
kernel with the producers fused, along any axis, exclusive and reverse, for every type of every
version, bit for bit the numpy engine's (a float partial rounded to T at every step, integers
wrapping); threads split the independent scans."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import runtime, thread_policy
from dsl.passes.fuse import ReduceStep

OPS = {"CumSum": (11, 14), "CumProd": (26,)}
TYPES = {11: ["float", "double", "int32", "int64", "uint32", "uint64"]}
TYPES[14] = TYPES[26] = TYPES[11] + ["float16", "bfloat16"]


def values(op, name, shape, seed):
    """Sums of normals; products near 1 (so they neither vanish nor overflow at once); integers
    that wrap (large sums, products of up to 7)."""
    rng = np.random.default_rng(seed)
    np_type = dsl.dtype(name).np_dtype
    if name in ("float", "double", "float16", "bfloat16"):
        x = rng.standard_normal(shape) * (1 if op == "CumSum" else 0.3) + (0 if op == "CumSum" else 1)
        return x.astype(np_type)
    top = np.iinfo(np_type).max // 4 if op == "CumSum" else 7
    return rng.integers(0, top, shape, dtype=np.uint64 if np_type == np.uint64 else np.int64).astype(np_type)


def scan(op, version, x, axis, exclusive, reverse, producer=False):
    f = dsl.jit(lambda v: dsl.eager.call(op, v * 1 if producer else v, version, axis=np.array(axis, np.int64),
                                         exclusive=exclusive, reverse=reverse), opset=version)
    got = f(x)
    want = dsl.eager.call(op, dsl.Tensor.from_numpy(x * 1 if producer else x), version,
                          axis=np.array(axis, np.int64), exclusive=exclusive, reverse=reverse).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)
    executable = f.executable(x)
    assert executable.kernel_count == 1 and isinstance(executable.steps[-1], ReduceStep), executable.explain()
    return got


@pytest.mark.sweep
@pytest.mark.parametrize("op, version, name", [(op, v, n) for op, vs in OPS.items() for v in vs for n in TYPES[v]])
@pytest.mark.parametrize("shape, axis", [((9,), 0), ((4, 7), 1), ((4, 7), -2), ((3, 5, 6), 1), ((2, 1, 5), 1),
                                         ((3, 1), 1)])
@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_every_version_type_axis_and_direction(op, version, name, shape, axis, exclusive, reverse):
    scan(op, version, values(op, name, shape, seed=len(shape) + axis), axis, exclusive, reverse)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_producer_fused_and_a_transposed_input(axis):
    x = values("CumSum", "float", (5, 6, 7), seed=axis)
    scan("CumSum", 14, x, axis, 0, 0, producer=True)
    f = dsl.jit(lambda v: dsl.cumsum(dsl.transpose(v, [2, 0, 1]) * 0.5, axis))
    np.testing.assert_array_equal(f(x), np.cumsum(np.transpose(x, (2, 0, 1)) * np.float32(0.5), axis, dtype=np.float32))
    assert f.executable(x).kernel_count == 1


def test_float16_rounds_every_partial_as_numpy_does():
    """A long float16 sum: each partial rounded to float16 (a float32 running total would drift)."""
    x = np.full(4096, 0.1, np.float16)
    got = dsl.jit(lambda v: dsl.cumsum(v, 0))(x)
    np.testing.assert_array_equal(got.view(np.uint16), np.cumsum(x, dtype=np.float16).view(np.uint16))
    assert got[-1] != np.float16(np.float32(0.1) * 4096)  # (float16 stalls: 0.1 steps vanish past 256)
    b = np.full(1000, 0.01, ml_dtypes.bfloat16)
    ours = dsl.jit(lambda v: dsl.cumsum(v, 0))(b)
    np.testing.assert_array_equal(ours.view(np.uint16), np.cumsum(b, dtype=ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize("axis", [0, 1])
def test_split_over_threads(monkeypatch, axis):
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1 << 10)
    monkeypatch.setattr(thread_policy, "_THREADS", 2)
    x = values("CumSum", "float", (64, 300), seed=axis)
    for exclusive, reverse in [(0, 0), (1, 1)]:
        scan("CumSum", 14, x, axis, exclusive, reverse)
        scan("CumProd", 26, values("CumProd", "double", (64, 300), seed=1), axis, exclusive, reverse)


def test_empty_and_unknown_axes_run_the_reference():
    x = np.zeros((0, 4), np.float32)
    f = dsl.jit(lambda v: dsl.cumsum(v, 1))
    assert f(x).shape == (0, 4) and "numpy CumSum" in f.explain(x)
    y = np.arange(12, dtype=np.int32).reshape(3, 4)
    g = dsl.jit(lambda v, a: dsl.cumsum(v, a))  # (an axis known only at run time)
    np.testing.assert_array_equal(g(y, np.array(1, np.int64)), np.cumsum(y, 1, dtype=np.int32))
