"""Float max / min rows accumulate maxnum / minnum plus a NaN flag and reduce again exactly
where a NaN was seen or the extreme is a zero (kernels/bits.py maxnum_step, dsl/kir/
reduce_schedule.py guarded_extremes, used by the any-axis and row schedules): every such row gives
the eager engine's bits, in the last-axis row kernel, the any-axis schedule, argmax blocks and
the fast softmax's max pass."""
import numpy as np
import pytest

import dsl


def rows(dtype, width: int = 37) -> np.ndarray:
    """Rows whose extreme is ordinary, a NaN (first, middle, last, several), +0 beside -0, -0
    alone, +-inf, and a row of one repeated value."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, width)).astype(dtype)
    x[1, 0] = np.nan
    x[2, width // 2] = np.nan
    x[3, -1] = np.nan
    x[3, 5] = np.nan
    x[4] = -np.abs(x[4])
    x[4, 3], x[4, 9] = -0.0, 0.0  # max +0 (beside -0)
    x[5] = -np.abs(x[5])
    x[5, 7] = -0.0  # max -0 alone
    x[6] = np.abs(x[6])
    x[6, 2], x[6, 11] = 0.0, -0.0  # min -0 (beside +0)
    x[7] = np.abs(x[7])
    x[7, 4] = 0.0  # min +0 alone
    x[8, 6] = np.inf
    x[9, 1] = -np.inf
    x[10] = -np.inf
    x[11] = 0.0
    return x


def same_bits(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_last_axis_rows_give_the_eager_bits(op, dtype):
    x = rows(dtype)
    f = dsl.jit(lambda t: getattr(dsl, op)(t * 1.0, [-1], keepdims=0))
    same_bits(f(x), getattr(dsl, op)(x * 1.0, [-1], keepdims=0))
    want = (np.max if op == "reduce_max" else np.min)(x, axis=-1)
    np.testing.assert_array_equal(f(x), want)
    assert np.signbit(f(x)[4 if op == "reduce_max" else 6]) == (op == "reduce_min")
    assert np.signbit(f(x)[5 if op == "reduce_max" else 7]) == (op == "reduce_max")


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_rows_reduced_with_another_reduction_in_one_pass(op):
    x = rows(np.float32)
    f = dsl.jit(lambda t: (getattr(dsl, op)(t, [-1], keepdims=0), dsl.reduce_sum(t, [-1], keepdims=0)))
    got = f(x)
    same_bits(got[0], getattr(dsl, op)(x, [-1], keepdims=0))
    same_bits(got[1], dsl.reduce_sum(x, [-1], keepdims=0))


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_trailing_axes_of_the_any_axis_schedule(op):
    x = rows(np.float32, 36).reshape(12, 4, 9)
    f = dsl.jit(lambda t: getattr(dsl, op)(t + 0.0, [1, 2], keepdims=0))
    same_bits(f(x), getattr(dsl, op)(x + 0.0, [1, 2], keepdims=0))
    g = dsl.jit(lambda t: getattr(dsl, op)(dsl.transpose(t, [1, 0, 2]), [0, 2], keepdims=1))
    same_bits(g(x), getattr(dsl, op)(np.transpose(x, [1, 0, 2]), [0, 2], keepdims=1))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_blocks_with_nans_and_zeros(op, last):
    x = rows(np.float32, 9000)  # (blocks of 4096: NaNs and zeros in the first and in later blocks)
    x[0, 8500] = np.nan
    x[4, 5000], x[6, 7000] = 0.0, -0.0
    f = dsl.jit(lambda t: getattr(dsl, op)(t, axis=-1, keepdims=0, select_last_index=last))
    want = getattr(dsl, op)(x, axis=-1, keepdims=0, select_last_index=last)
    same_bits(f(x), want)
    if not last:
        same_bits(f(x), (np.argmax if op == "argmax" else np.argmin)(x, axis=-1))


@pytest.mark.parametrize("axis", [-1, 1])
def test_fast_softmax_rows_with_nans_and_zero_maxima(axis):
    x = rows(np.float32)
    x[4] = -np.abs(x[4])
    f = dsl.jit(lambda t: dsl.softmax(t, axis=axis))
    got, want = f(x), dsl.softmax(x, axis=axis)
    assert (np.isnan(got) == np.isnan(want)).all() and np.isnan(got[1:4]).all() and not np.isnan(got[4:8]).any()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    exact = dsl.jit(lambda t: dsl.softmax(t, axis=axis), math="exact")
    np.testing.assert_array_equal(exact(x), want)
