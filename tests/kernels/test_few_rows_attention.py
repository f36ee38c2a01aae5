"""kernels/attention.py: few-row attention per KV head against a float64 softmax(q k^T) v."""
import numpy as np
import pytest

from kernels import attention


def _reference(q, k, v, scale, time_major):
    if time_major:  # [batch, T, heads, D] -> [batch, heads, T, D]
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    s = np.einsum("bhrd,bhtd->bhrt", (q * np.float32(scale)).astype(np.float64), k.astype(np.float64))
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v.astype(np.float64)


def _inputs(rng, batch, heads, rows, length, depth, v_depth, time_major):
    kv = (batch, length, heads) if time_major else (batch, heads, length)
    return (rng.standard_normal((batch, heads, rows, depth)).astype(np.float32),
            rng.standard_normal(kv + (depth,)).astype(np.float32),
            rng.standard_normal(kv + (v_depth,)).astype(np.float32))


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("batch, heads, rows, length, depth, v_depth",
                         [(1, 16, 1, 2048, 64, 64), (2, 2, 4, 300, 32, 48), (1, 1, 8, 1, 5, 3), (3, 2, 2, 700, 0, 4)])
def test_matches_float64_softmax(time_major, exact, batch, heads, rows, length, depth, v_depth):
    rng = np.random.default_rng(rows + length)
    q, k, v = _inputs(rng, batch, heads, rows, length, depth, v_depth, time_major)
    got = attention.few_rows_attention(q, k, v, 0.125, time_major, exact, True)
    assert got.dtype == np.float32 and got.shape == (batch, heads, rows, v_depth)
    np.testing.assert_allclose(got, _reference(q, k, v, 0.125, time_major), rtol=2e-5, atol=2e-6)
    serial = attention.few_rows_attention(q, k, v, 0.125, time_major, exact, False)
    assert got.tobytes() == serial.tobytes()  # (a head's sums do not depend on the split)


def test_nan_and_inf_propagate_to_their_rows_only():
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, 1, 2, 2, 10, 4, 3, False)
    q[0, 0, 1, 2] = np.nan          # head 0, row 1: every score NaN
    k[0, 1, 3, 0] = np.inf          # head 1: key 3 scores +-inf (or NaN)
    got = attention.few_rows_attention(q, k, v, 1.0, False, False, False)
    assert np.isnan(got[0, 0, 1]).all() and np.isfinite(got[0, 0, 0]).all()
    want = _reference(q[:, :1, :1], k[:, :1], v[:, :1], 1.0, False)
    np.testing.assert_allclose(got[:, :1, :1], want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("change", ["float64", "strided", "rank", "heads", "rows", "empty"])
def test_bad_layouts_raise_before_the_loops(change):
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, 1, 2, 2, 10, 4, 3, False)
    if change == "float64":
        q = q.astype(np.float64)
    elif change == "strided":
        k = np.repeat(k, 2, axis=-1)[..., ::2]
    elif change == "rank":
        v = v[0]
    elif change == "heads":
        k = k[:, :1]
    elif change == "rows":
        q = np.zeros((1, 2, attention.MAX_ROWS + 1, 4), np.float32)
    else:
        k, v = k[:, :, :0], v[:, :, :0]
    with pytest.raises(ValueError, match="few_rows_attention"):
        attention.few_rows_attention(q, k, v, 1.0, False, False, False)


def test_large_finite_values_do_not_overflow():
    """The weights are normalized before they multiply V (as the composite): equal scores over
    four keys of V = 2e38 give 2e38, not the overflowed sum 8e38."""
    q, k = np.ones((1, 1, 1, 4), np.float32), np.ones((1, 1, 4, 4), np.float32)
    v = np.full((1, 1, 4, 2), 2e38, np.float32)
    for exact in (False, True):
        got = attention.few_rows_attention(q, k, v, 0.5, False, exact, False)
        np.testing.assert_allclose(got, np.full((1, 1, 1, 2), 2e38, np.float32), rtol=1e-6)
