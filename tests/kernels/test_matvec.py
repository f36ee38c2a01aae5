"""kernels/matvec.py: batched few-row float32 products against a float64 numpy matmul."""
import numpy as np
import pytest

from kernels import matvec


def _reference(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("rows", [1, 3, 8])
@pytest.mark.parametrize("layout", ["dots", "rows"])
@pytest.mark.parametrize("count, inner, cols", [(2, 64, 700), (16, 64, 4096), (1, 5, 3), (3, 0, 4)])
def test_products_match_numpy(rows, layout, count, inner, cols):
    rng = np.random.default_rng(rows + inner)
    a = rng.standard_normal((count, rows, inner)).astype(np.float32)
    if layout == "dots":  # b = the transpose of a C-contiguous [count, cols, inner]
        b = rng.standard_normal((count, cols, inner)).astype(np.float32).transpose(0, 2, 1)
    else:
        b = rng.standard_normal((count, inner, cols)).astype(np.float32)
    assert matvec.layout(b) == layout or b.size == 0  # (an empty b is both)
    got = matvec.batched_few_rows(a, b, True)
    assert got.dtype == np.float32 and got.shape == (count, rows, cols)
    np.testing.assert_allclose(got, _reference(a, b), rtol=1e-5, atol=1e-4)
    assert got.tobytes() == matvec.batched_few_rows(a, b, False).tobytes()  # (deterministic, threads or not)


def test_nan_and_inf_propagate():
    a = np.ones((2, 1, 4), np.float32)
    b = np.ones((2, 4, 3), np.float32)
    b[0, 2, 1], b[1, 0, 2] = np.nan, np.inf
    got = matvec.batched_few_rows(a, b, True)
    assert np.isnan(got[0, 0, 1]) and got[1, 0, 2] == np.inf and got[0, 0, 0] == 4.0


def test_other_layouts_are_not_taken():
    b = np.zeros((4, 8, 6), np.float32)
    assert matvec.layout(b[:, ::2]) is None and matvec.layout(b[:, :, ::2]) is None
    assert matvec.layout(b) == "rows" and matvec.layout(b.transpose(0, 2, 1)) == "dots"
