"""Elementwise Sum and Mean over any number of inputs (the variadic machinery of dsl/ops/minmax.py).

Both add their inputs left to right in the compute domain (float16 / bfloat16 in float32) and
round once to the output type; Mean then divides the sum by the input count (IEEE division,
as onnx's reference ``sum / n``). Before version 8 all shapes must be equal; from 8 they
broadcast like numpy.
"""
from __future__ import annotations

import numpy as np

from .. import kir
from .lowering import Elementwise
from .math import BF16, F, domain_array, finish
from .minmax import MAX_INPUTS, variadic_expr, variadic_reference, variadic_rule, variadic_schema
from .registry import Call, OpDef, register

_VERSIONS = {1: F, 6: F, 8: F, 13: F + BF16}


def _mean_reference(call: Call, xs: list) -> list:
    total = domain_array(xs[0])
    with np.errstate(all="ignore"):  # (inf + -inf is NaN, as in the kernels)
        for x in xs[1:]:
            total = total + domain_array(x)
        mean = total / total.dtype.type(len(xs))
    return [finish(mean, call.types[0].dtype)]


def _mean_expr(call, args) -> kir.Expr:
    total = variadic_expr("add")(call, args)
    count = sum(arg is not None for arg in args)
    return kir.binary("div", total, kir.const(count, total.dtype))


register(OpDef("Sum", tuple(variadic_schema(v, _VERSIONS) for v in _VERSIONS), variadic_rule,
               reference=variadic_reference(np.add), kernel=Elementwise(variadic_expr("add")),
               doc=f"Elementwise sum of 1 to {MAX_INPUTS} inputs (broadcast from version 8)."))
register(OpDef("Mean", tuple(variadic_schema(v, _VERSIONS) for v in _VERSIONS), variadic_rule,
               reference=_mean_reference, kernel=Elementwise(_mean_expr),
               doc=f"Elementwise mean of 1 to {MAX_INPUTS} inputs (broadcast from version 8)."))
