"""Attention of a few query rows against a long KV cache (a decode step) in one pass per KV
head: ``out = softmax((q * scale) K^T) V``, the scores of a head's rows kept in a small buffer
and never written out.

As three steps (Q K^T by kernels/matvec.py, a Softmax kernel, P V by kernels/matvec.py) the
decode step of benchmarks/layers.py (16 heads, 2048 cached keys of 64) took 0.61-0.63 ms where
this loop took 0.35-0.41 ms (interleaved medians; onnxruntime's Attention 0.54-0.55): K and V are
each read once, straight after the scores that weigh them, on both cores, with one launch.

Layouts: ``q`` [batch, kv_heads, rows, D] C-contiguous (a KV head's query heads folded into its
rows, so K and V are read once per KV head); ``k`` / ``v`` C-contiguous [batch, kv_heads, T, D]
or, ``time_major``, [batch, T, kv_heads, D] (3-D Attention inputs split into heads in place).
Sums are float32, reassociated (vectorized), as BLAS's are; exp is kernels/vmath.py's (within
its README bound) or, ``exact``, libm's. The probabilities are normalized before they weigh V (as
the composite), so a large but finite V cannot overflow the running sum.
"""
from __future__ import annotations

import numba
import numpy as np

from .parallel import threads as allowed_threads
from .vmath import exp_f32

MAX_ROWS = 8                      # query rows per KV head; beyond, BLAS's blocked matmuls win
PARALLEL_MIN_ELEMENTS = 1 << 18   # K's elements from which the heads are split over threads


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _head(q, k, v, out, index, scale, time_major, exact, scores, scaled):
    """One (batch, KV head): its rows' scores, their softmax, the weighted sum of V."""
    b, h = index // q.shape[1], index % q.shape[1]
    rows, depth = q.shape[2], q.shape[3]
    length = k.shape[1] if time_major else k.shape[2]
    for r in range(rows):
        for d in range(depth):
            scaled[r, d] = q[b, h, r, d] * scale
    for t in range(length):
        key = k[b, t, h] if time_major else k[b, h, t]
        for r in range(rows):
            acc = np.float32(0.0)
            for d in range(depth):
                acc += scaled[r, d] * key[d]
            scores[r, t] = acc
    for r in range(rows):
        top = scores[r, 0]
        for t in range(length):
            top = max(top, scores[r, t])
        total = np.float32(0.0)
        for t in range(length):
            e = np.exp(scores[r, t] - top) if exact else exp_f32(scores[r, t] - top)
            scores[r, t] = e
            total += e
        for t in range(length):  # (the probabilities before P V, as the composite: a sum of
            scores[r, t] = scores[r, t] / total  # unnormalized weights times V can overflow)
        for d in range(out.shape[3]):
            out[b, h, r, d] = np.float32(0.0)
    for t in range(length):
        value = v[b, t, h] if time_major else v[b, h, t]
        for r in range(rows):
            p = scores[r, t]
            for d in range(value.shape[0]):
                out[b, h, r, d] += p * value[d]


@numba.njit(cache=True, nogil=True)
def _serial(q, k, v, out, scale, time_major, exact):
    length = k.shape[1] if time_major else k.shape[2]
    scores = np.empty((q.shape[2], length), np.float32)
    scaled = np.empty((q.shape[2], q.shape[3]), np.float32)
    for index in range(q.shape[0] * q.shape[1]):
        _head(q, k, v, out, index, scale, time_major, exact, scores, scaled)


@numba.njit(cache=True, nogil=True, parallel=True)
def _parallel(q, k, v, out, scale, time_major, exact):
    length = k.shape[1] if time_major else k.shape[2]
    for index in numba.prange(q.shape[0] * q.shape[1]):
        scores = np.empty((q.shape[2], length), np.float32)
        scaled = np.empty((q.shape[2], q.shape[3]), np.float32)
        _head(q, k, v, out, index, scale, time_major, exact, scores, scaled)


def few_rows_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, time_major: bool,
                       exact: bool, threads: bool) -> np.ndarray:
    """softmax((q * scale) k^T) v per (batch, KV head) for float32 C-contiguous arrays in the
    module's layouts (checked here: the loops index without bounds checks); a new float32
    [batch, kv_heads, rows, Dv]. ``threads``: whether the heads may split over numba's team."""
    batch, heads, rows, depth = q.shape
    length = k.shape[1] if time_major else k.shape[2]
    kv = (batch, length, heads) if time_major else (batch, heads, length)
    if not (q.dtype == k.dtype == v.dtype == np.float32 and 0 < rows <= MAX_ROWS and length > 0
            and k.ndim == v.ndim == 4 and k.shape == kv + (depth,) and v.shape[:3] == kv
            and all(a.flags.c_contiguous for a in (q, k, v))):
        raise ValueError(f"few_rows_attention: q {q.shape}, k {k.shape}, v {v.shape}, time_major "
                         f"{time_major}: not float32 C-contiguous arrays of the module's layouts")
    out = np.empty((batch, heads, rows, v.shape[3]), np.float32)
    args = (q, k, v, out, np.float32(scale), bool(time_major), bool(exact))
    if threads and batch * heads > 1 and k.size >= PARALLEL_MIN_ELEMENTS and allowed_threads() > 1:
        _parallel(*args)
    else:
        _serial(*args)
    return out
