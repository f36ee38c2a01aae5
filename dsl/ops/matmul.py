"""MatMul with numpy.matmul semantics (1-D promotion, batch broadcasting); the reference is BLAS."""
from __future__ import annotations

import numpy as np

from kernels import matvec

from .. import dtypes, thread_policy
from ..ir import TensorType
from . import chunks
from .math import BF16, F, domain_array, finish
from .quant_matmul import matmul_of_dequantized
from .registry import Call, Input, OpDef, Schema, register
from .shape import broadcast_dims

_INTS = ("int32", "int64", "uint32", "uint64")


# Spec: "Matrix product that behaves like numpy.matmul": a 1-D A is a row vector and a 1-D B a
# column vector, the added dim removed from the result; rank-0 operands are errors (numpy
# raises); batch dims broadcast. float16/bfloat16 multiply in float32 and round once;
# integer products and sums wrap.
def _matmul_rule(call: Call) -> list:
    a, b = call.types
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    for name, shape in (("A", a.shape), ("B", b.shape)):
        if len(shape) == 0:
            call.fail(f"input {name} is a scalar (shape []); matmul needs rank >= 1")
    a_shape = (1,) + tuple(a.shape) if len(a.shape) == 1 else tuple(a.shape)
    b_shape = tuple(b.shape) + (1,) if len(b.shape) == 1 else tuple(b.shape)
    inner_a, inner_b = a_shape[-1], b_shape[-2]
    if isinstance(inner_a, int) and isinstance(inner_b, int) and inner_a != inner_b:
        call.fail(f"A shape {list(a.shape)} and B shape {list(b.shape)}: inner dims {inner_a} and "
                  f"{inner_b} differ")
    batch = broadcast_dims(call, a_shape[:-2], b_shape[:-2])
    out = batch + (a_shape[-2],) * (len(a.shape) > 1) + (b_shape[-1],) * (len(b.shape) > 1)
    return [TensorType(a.dtype, out)]


def _matmul_reference(call: Call, xs: list) -> list:
    a, b = (domain_array(x) for x in xs)
    with np.errstate(all="ignore"):
        product = _few_rows(a, b)
        return [finish(np.matmul(a, b) if product is None else product, call.types[0].dtype)]


def _few_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """a @ b by kernels/matvec.py when float32 a has few rows against a large batch of b (a
    decode step: Q K^T, P V), else None. A trailing batch dim along which b is broadcast (the
    query heads of one KV head) folds into a's rows, so b is read once per KV head."""
    if a.dtype != np.float32 or b.dtype != np.float32 or a.ndim < 3 or b.ndim < 3 or a.shape[-2] > matvec.MAX_ROWS:
        return None
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    b = b.reshape((1,) * (len(batch) + 2 - b.ndim) + b.shape)
    fold = batch[-1] if batch[-1] > 1 and b.shape[-3] == 1 and a.shape[-2] * batch[-1] <= matvec.MAX_ROWS else 1
    if fold > 1:  # [.., g, M, K] @ [.., 1, K, N] -> [.., g * M, K] @ [.., K, N]
        a = np.broadcast_to(a, batch + a.shape[-2:]).reshape(batch[:-1] + (fold * a.shape[-2], a.shape[-1]))
        b, batch = b[..., 0, :, :], batch[:-1]
    if b.shape[:-2] != batch or b.size < matvec.PARALLEL_MIN_ELEMENTS:
        return None  # (b broadcast along a batch dim would be read once per copy; small: BLAS)
    try:
        b3 = np.reshape(b, (-1,) + b.shape[-2:], copy=False)
    except ValueError:  # batch dims that do not merge into one stride
        return None
    if b3.shape[0] < 2 or matvec.layout(b3) is None:
        return None
    a3 = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    out = matvec.batched_few_rows(np.ascontiguousarray(a3), b3, thread_policy.available() > 1)
    rows = out.shape[1] // fold
    return out.reshape(batch + ((fold, rows) if fold > 1 else (rows,)) + out.shape[-1:])


register(OpDef(
    "MatMul",
    tuple(Schema(v, (Input("A"), Input("B")), (), dtypes.types(*names))
          for v, names in ((1, F), (9, F + _INTS), (13, F + _INTS + BF16))),
    _matmul_rule, reference=_matmul_reference, chunk=chunks.MATMUL, replace=matmul_of_dequantized,
    doc="Matrix product like numpy.matmul (1-D operands promoted, batch dims broadcast)."))
