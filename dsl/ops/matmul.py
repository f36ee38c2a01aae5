"""MatMul with numpy.matmul semantics (1-D promotion, batch broadcasting); the reference is BLAS."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..ir import TensorType
from . import chunks
from .math import BF16, F, domain_array, finish
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
        return [finish(np.matmul(a, b), call.types[0].dtype)]


register(OpDef(
    "MatMul",
    tuple(Schema(v, (Input("A"), Input("B")), (), dtypes.types(*names))
          for v, names in ((1, F), (9, F + _INTS), (13, F + _INTS + BF16))),
    _matmul_rule, reference=_matmul_reference, chunk=chunks.MATMUL,
    doc="Matrix product like numpy.matmul (1-D operands promoted, batch dims broadcast)."))
