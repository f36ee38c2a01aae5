"""ArgMax and ArgMin in the JIT (the any-axis schedule's two kinds, dsl/kir/reduce_schedule.py
_arg_body): one kernel with the producers fused, over any axis, for every type, numpy's answer
bit for bit: the first extreme (the last with select_last_index), a NaN as the extreme (the first
NaN), -0 equal to +0; rows longer than a block (the winning block rescanned) and split over
threads."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import runtime, thread_policy
from dsl.kir.reduce_schedule import ARG_BLOCK
from dsl.passes.fuse import ReduceStep

RNG = np.random.default_rng(5)
FIND = {"argmax": (dsl.argmax, np.argmax), "argmin": (dsl.argmin, np.argmin)}
TYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int32, np.int64, np.uint64]


def numpy_find(kind, x, axis, last):
    find = FIND[kind][1]
    if not last:
        return find(x, axis)
    return x.shape[axis] - 1 - find(np.flip(x, axis), axis)


def few_values(np_type, shape, seed):
    """Values from a small set (ties everywhere); floats also NaN, +-0 and +-inf."""
    rng = np.random.default_rng(seed)
    if np.dtype(np_type).kind in "iu":
        return rng.integers(0, 4, shape).astype(np_type)
    pool = np.array([-1.5, -0.0, 0.0, 2.0, np.inf, -np.inf, np.nan], np.float64)
    weights = np.array([4, 2, 2, 4, 1, 1, 0.3])
    return pool[rng.choice(len(pool), shape, p=weights / weights.sum())].astype(np_type)


def check(kind, x, axis, last, keepdims, producer=False):
    ours = FIND[kind][0]
    f = dsl.jit(lambda v: ours(v * 2 if producer else v, axis, keepdims=keepdims, select_last_index=last))
    got = f(x)
    want = numpy_find(kind, x * 2 if producer else x, axis, last)
    want = np.expand_dims(want, axis) if keepdims else want
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    executable = f.executable(x)
    assert executable.kernel_count == 1 and isinstance(executable.steps[-1], ReduceStep), executable.explain()
    return got


@pytest.mark.sweep
@pytest.mark.parametrize("np_type", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("shape, axis", [((9,), 0), ((4, 7), 1), ((4, 7), 0), ((3, 5, 6), 1), ((3, 5, 6), -1),
                                         ((2, 1, 5), 1), ((6, 1), 1)])
def test_every_type_and_axis_matches_numpy(np_type, kind, last, shape, axis):
    x = few_values(np_type, shape, seed=len(shape) * 7 + axis)
    check(kind, x, axis, last, keepdims=bool(axis % 2))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("where", ["first block", "later block", "tie across blocks", "nan later", "nan first",
                                   "signed zeros", "all equal", "tail"])
def test_rows_longer_than_a_block(kind, last, where):
    n = 3 * ARG_BLOCK + 17
    x = RNG.standard_normal((3, n)).astype(np.float32)
    big = np.float32(100 if kind == "argmax" else -100)
    if where == "first block":
        x[:, 5] = big
    elif where == "later block":
        x[:, 2 * ARG_BLOCK + 3] = big
    elif where == "tie across blocks":
        x[:, [7, ARG_BLOCK + 1, 3 * ARG_BLOCK + 2]] = big
    elif where == "nan later":
        x[:, [ARG_BLOCK + 9, 2 * ARG_BLOCK + 9]] = np.nan
    elif where == "nan first":
        x[:, [3, 3 * ARG_BLOCK + 16]] = np.nan
    elif where == "signed zeros":  # -0 == +0: the first (last) of either, whichever sign
        x = -np.abs(x) if kind == "argmax" else np.abs(x)
        x[:, [4, ARG_BLOCK + 4]] = [np.float32(-0.0), np.float32(0.0)]
    elif where == "all equal":
        x[:] = 1.25
    else:
        x[:, -1] = big
    check(kind, x, -1, last, keepdims=True)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_producer_fused_and_transposed_input(kind, axis):
    x = RNG.standard_normal((5, 6, 7)).astype(np.float32)
    check(kind, x, axis, 0, keepdims=False, producer=True)
    ours = FIND[kind][0]
    f = dsl.jit(lambda v: ours(dsl.transpose(v, [2, 0, 1]) + 1, axis, keepdims=False))
    np.testing.assert_array_equal(f(x), FIND[kind][1](np.transpose(x, (2, 0, 1)) + 1, axis))
    assert f.executable(x).kernel_count == 1


@pytest.mark.parametrize("axis", [0, 1])
def test_split_over_threads(monkeypatch, axis):
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1 << 10)
    monkeypatch.setattr(thread_policy, "_THREADS", 2)
    x = few_values(np.float32, (64, 2 * ARG_BLOCK + 5), seed=axis)
    for last in (0, 1):
        check("argmax", x, axis, last, keepdims=True)
        check("argmin", x, axis, last, keepdims=False)


def test_argmax_logits_of_a_sampling_step():
    """Greedy decoding: argmax over the vocabulary of scaled logits, one kernel."""
    logits = RNG.standard_normal((4, 32000)).astype(np.float32)
    f = dsl.jit(lambda z: dsl.argmax(z / 0.7, -1, keepdims=False))
    np.testing.assert_array_equal(f(logits), np.argmax(logits / np.float32(0.7), -1))
    assert "numpy ArgMax" not in f.explain(logits)
