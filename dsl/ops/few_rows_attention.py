"""FewRowsAttention (internal, domain dsl.internal): ``softmax((Q * scale) K^T) V`` for a few
query rows per KV head against a long K / V, as one kernel (kernels/attention.py). The JIT's
expansion of Attention (dsl/ops/attention.py) makes it for a decode step with no mask, softcap
or widened softmax; every other Attention keeps the composite body.

Inputs: Q [batch, q_heads, rows, D] (any layout: it is small, and made contiguous), K / V
[batch, kv_heads, T, D | Dv] or, ``time_major``, [batch, T, kv_heads, D | Dv] (3-D Attention
inputs split into heads without a copy); q_heads a multiple of kv_heads, consecutive query
heads sharing a KV head (grouped-query attention), the rows of a KV head's group at most
kernels.attention.MAX_ROWS. ``exact``: exp by libm (``@dsl.jit(math="exact")``) instead of
kernels/vmath.py. Output: [batch, q_heads, rows, Dv], float32.
"""
from __future__ import annotations

import numpy as np

from kernels import attention as kernel

from .. import dtypes, thread_policy
from ..ir import TensorType
from . import chunks
from .registry import INTERNAL, Attr, Call, Input, OpDef, Schema, register

MAX_ROWS = kernel.MAX_ROWS
_F32 = dtypes.types("float")


def _rule(call: Call) -> list:
    q, k, v = call.types[:3]
    major = bool(call.attrs["time_major"])
    if any(t.rank != 4 for t in (q, k, v)) or not all(t.is_static for t in (q, k, v)):
        call.fail(f"Q, K, V {[str(t) for t in (q, k, v)]}; expected static 4-D tensors")
    batch, q_heads, rows, depth = q.shape
    kb, kt, kh = (k.shape[0], k.shape[1], k.shape[2]) if major else (k.shape[0], k.shape[2], k.shape[1])
    vb, vt, vh = (v.shape[0], v.shape[1], v.shape[2]) if major else (v.shape[0], v.shape[2], v.shape[1])
    if kb != batch or k.shape[3] != depth or (vb, vt, vh) != (batch, kt, kh) or kh < 1 or q_heads % kh \
            or kt < 1 or not 0 < q_heads // kh * rows <= MAX_ROWS:
        call.fail(f"Q {q}, K {k}, V {v} (time_major {int(major)}); expected one batch and head size, "
                  f"q heads a multiple of the kv heads, at most {MAX_ROWS} query rows per kv head, keys")
    return [TensorType(q.dtype, (batch, q_heads, rows, v.shape[3]))]


def _reference(call: Call, xs: list) -> list:
    q, k, v = (np.asarray(x) for x in xs)
    major = bool(call.attrs["time_major"])
    batch, q_heads, rows, depth = q.shape
    kv_heads = k.shape[2] if major else k.shape[1]
    grouped = np.ascontiguousarray(q).reshape(batch, kv_heads, q_heads // kv_heads * rows, depth)
    out = kernel.few_rows_attention(grouped, np.ascontiguousarray(k), np.ascontiguousarray(v),
                                    call.attrs["scale"], major, bool(call.attrs["exact"]),
                                    thread_policy.available() > 1)
    return [out.reshape(batch, q_heads, rows, v.shape[3])]


register(OpDef(
    "FewRowsAttention",
    (Schema(1, (Input("Q", _F32), Input("K", _F32), Input("V", _F32)),
            (Attr("scale", "float"), Attr("time_major", "int", 0), Attr("exact", "int", 0)), _F32),),
    _rule, reference=_reference, domain=INTERNAL, chunk=chunks.WHOLE,
    doc="softmax((Q * scale) K^T) V for a few query rows per KV head, one kernel (a decode step)."))
