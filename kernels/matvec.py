"""Batched float32 products with few rows: ``out[i] = a[i] @ b[i]`` for a [batch, M, K] with
small M against a large b [batch, K, N], as in a decode step's Q K^T and P V. Reading b is all
the work there; numpy's batched matmul makes one BLAS call per matrix on one thread and reached
half the rate of these loops, which spread the batch over the threads (numba prange) and stream
b once in its own layout:

- ``b`` a transposed view of a C-contiguous [batch, N, K] (K^T): each output is a dot product
  along K;
- ``b`` C-contiguous (V): each row of ``b`` is scaled and added into the output row.

Only C-contiguous operands are taken: numba vectorizes a loop over an array of unknown strides
(layout 'A') only with gathers, which ran these products at a third of the speed.

Sums are float32, reassociated (vectorized), as BLAS's are.
"""
from __future__ import annotations

import numba
import numpy as np

from .parallel import threads as allowed_threads

PARALLEL_MIN_ELEMENTS = 1 << 18  # b's elements from which the batch is split over threads
MAX_ROWS = 8                     # beyond, BLAS's blocked kernels win


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _dots(a, bt, out, i):
    """out[i, m, n] = sum_k a[i, m, k] bt[i, n, k] (bt: b transposed, K its contiguous axis)."""
    for m in range(a.shape[1]):
        for n in range(bt.shape[1]):
            acc = np.float32(0.0)
            for k in range(a.shape[2]):
                acc += a[i, m, k] * bt[i, n, k]
            out[i, m, n] = acc


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _rows(a, b, out, i):
    """out[i, m, :] = sum_k a[i, m, k] b[i, k, :], the n loop innermost (b's contiguous axis)."""
    for m in range(a.shape[1]):
        for n in range(b.shape[2]):
            out[i, m, n] = np.float32(0.0)
        for k in range(a.shape[2]):
            weight = a[i, m, k]
            for n in range(b.shape[2]):
                out[i, m, n] += weight * b[i, k, n]


@numba.njit(cache=True, nogil=True)
def _serial(a, b, out, by_rows):
    for i in range(a.shape[0]):
        if by_rows:
            _rows(a, b, out, i)
        else:
            _dots(a, b, out, i)


@numba.njit(cache=True, nogil=True, parallel=True)
def _parallel(a, b, out, by_rows):
    for i in numba.prange(a.shape[0]):
        if by_rows:
            _rows(a, b, out, i)
        else:
            _dots(a, b, out, i)


def layout(b: np.ndarray) -> str | None:
    """'dots' (a transposed C-contiguous array), 'rows' (C-contiguous) or None: how ``b``
    [batch, K, N] streams."""
    if b.transpose(0, 2, 1).flags.c_contiguous:
        return "dots"
    if b.flags.c_contiguous:
        return "rows"
    return None


def batched_few_rows(a: np.ndarray, b: np.ndarray, threads: bool) -> np.ndarray:
    """``a @ b`` for float32 a [batch, M, K] (M <= MAX_ROWS) and b [batch, K, N] whose
    ``layout`` is not None; a new float32 [batch, M, N]. ``threads``: whether the batch may
    split over numba's team (the caller's thread policy)."""
    count, rows, inner = a.shape
    assert a.dtype == b.dtype == np.float32 and b.shape[:2] == (count, inner) and rows <= MAX_ROWS
    assert a.flags.c_contiguous and layout(b) is not None
    by_rows = layout(b) == "rows"
    b = b if by_rows else b.transpose(0, 2, 1)
    out = np.empty((count, rows, b.shape[2] if by_rows else b.shape[1]), np.float32)
    if threads and count > 1 and b.size >= PARALLEL_MIN_ELEMENTS and allowed_threads() > 1:
        _parallel(a, b, out, by_rows)
    else:
        _serial(a, b, out, by_rows)
    return out
