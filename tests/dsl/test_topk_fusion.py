"""TopK in the JIT (dsl/kir/topk_schedule.py): one kernel with the producers fused, along any
axis, for every type of every version, bit for bit the numpy engine's values and indices
(descending or ascending, NaN above every number, ties by the lower index, -0 == +0); rows
longer than a block (skipped blocks, then scanned ones) and threads over rows."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import runtime, thread_policy
from dsl.kir.topk_schedule import BLOCK
from dsl.passes.fuse import ReduceStep

VERSIONS = {1: ["float16", "float", "double"], 10: ["float16", "float", "double"],
            11: ["float16", "float", "double", "int8", "uint8", "int32", "int64", "uint64"],
            24: ["float16", "float", "double", "int8", "uint64", "bfloat16"]}


def few_values(name, shape, seed):
    """Values from a small set (ties everywhere); floats also NaN, +-0 and +-inf."""
    rng = np.random.default_rng(seed)
    np_type = dsl.dtype(name).np_dtype
    if name not in ("float16", "float", "double", "bfloat16"):
        return rng.integers(0, 5, shape).astype(np_type)
    pool = np.array([-1.5, -0.0, 0.0, 2.0, 3.5, np.inf, -np.inf, np.nan])
    weights = np.array([4, 2, 2, 4, 3, 1, 1, 0.5])
    return pool[rng.choice(len(pool), shape, p=weights / weights.sum())].astype(np_type)


def topk(x, k, axis, largest, version, producer=False):
    assert largest or version >= 11  # (largest arrives with version 11)
    f = dsl.jit(lambda v: dsl.topk(v + 0 if producer else v, k if version < 10 else np.array([k]), axis=axis,
                                   largest=int(largest), opset=version), opset=version)
    values, indices = f(x)
    want_values, want_indices = dsl.topk(x + 0 if producer else x, k if version < 10 else np.array([k]), axis=axis,
                                         largest=int(largest), opset=version)
    assert indices.dtype == np.int64 and values.dtype == x.dtype
    np.testing.assert_array_equal(indices, want_indices)
    assert values.tobytes() == want_values.tobytes()
    executable = f.executable(x)
    assert executable.kernel_count == 1 and isinstance(executable.steps[-1], ReduceStep), executable.explain()


@pytest.mark.sweep
@pytest.mark.parametrize("version, name, largest", [(v, n, big) for v, names in VERSIONS.items() for n in names
                                                    for big in ([True, False] if v >= 11 else [True])])
@pytest.mark.parametrize("shape, axis, k", [((9,), 0, 3), ((4, 7), 1, 7), ((4, 7), 0, 1), ((3, 5, 6), 1, 4),
                                            ((3, 5, 6), -1, 2), ((2, 1, 5), 1, 1)])
def test_every_version_type_axis_and_k(version, name, largest, shape, axis, k):
    topk(few_values(name, shape, seed=len(shape) * 3 + k), k, axis, largest, version)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 5, 64])
@pytest.mark.parametrize("pattern", ["random", "ascending", "descending", "ties", "nans", "all nan", "signed zeros"])
def test_rows_longer_than_a_block(largest, k, pattern):
    n = 3 * BLOCK + 77
    rng = np.random.default_rng(k)
    x = rng.standard_normal((3, n)).astype(np.float32)
    if pattern == "ascending":
        x = np.sort(x, axis=1)
    elif pattern == "descending":
        x = -np.sort(x, axis=1)
    elif pattern == "ties":
        x = rng.integers(0, 3, (3, n)).astype(np.float32)
    elif pattern == "nans":
        x[:, rng.integers(0, n, 40)] = np.nan
    elif pattern == "all nan":
        x[:] = np.nan
        x[1, 5] = 1.0
    elif pattern == "signed zeros":
        x = np.where(rng.random((3, n)) < 0.5, np.float32(-0.0), np.float32(0.0))
    topk(x, k, -1, largest, 11)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_producer_fused_and_a_strided_axis(axis):
    x = np.random.default_rng(axis).standard_normal((5, 6, 7)).astype(np.float32)
    topk(x, 3, axis, True, 11, producer=True)
    f = dsl.jit(lambda v: dsl.topk(dsl.transpose(v, [2, 0, 1]) * 0.5, np.array([2]), axis=axis))
    values, indices = f(x)
    want = dsl.topk(np.transpose(x, (2, 0, 1)) * np.float32(0.5), np.array([2]), axis=axis)
    np.testing.assert_array_equal(values, want[0])
    np.testing.assert_array_equal(indices, want[1])
    assert f.executable(x).kernel_count == 1


def test_float16_nan_payloads_kept_in_the_values():
    bits = np.array([0x7C01, 0x3C00, 0xFE01, 0x4000, 0x7E00], np.uint16)
    x = np.tile(bits, 300).view(np.float16).reshape(3, -1)
    topk(x, 7, -1, True, 11)
    b = np.array([0x7F81, 0x3F80, 0xFFC1, 0x4000], np.uint16).view(ml_dtypes.bfloat16)
    topk(np.tile(b, 400).reshape(4, -1), 5, -1, False, 24)


def test_split_over_threads(monkeypatch):
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1 << 10)
    monkeypatch.setattr(thread_policy, "_THREADS", 2)
    x = np.random.default_rng(3).standard_normal((64, 2 * BLOCK + 5)).astype(np.float32)
    topk(x, 10, 1, True, 11)
    topk(x, 10, 0, False, 11)


def test_sampling_step_top_k_of_scaled_logits():
    """Top-50 of temperature-scaled logits over a 32000 vocabulary: one kernel."""
    logits = np.random.default_rng(0).standard_normal((4, 32000)).astype(np.float32)
    f = dsl.jit(lambda z: dsl.topk(z / 0.7, np.array([50]), axis=-1))
    values, indices = f(logits)
    scaled = logits / np.float32(0.7)
    order = np.argsort(-scaled, axis=-1, kind="stable")[:, :50]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(scaled, order, -1))
    assert "numpy TopK" not in f.explain(logits)
