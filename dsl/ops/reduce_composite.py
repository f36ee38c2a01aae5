"""The reductions ONNX defines by function bodies, and the rest of the reduction family:
ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare (composites, dsl/ops/expansion.py:
fused in the JIT as their primitive ops), ReduceProd (numpy reference), ArgMax and ArgMin (fused:
the any-axis schedule's two-pass argmax, dsl/kir/reduce_schedule.py).

Bodies, as the spec's (opset 18) function bodies spell them:
- ReduceSumSquare = ReduceSum(Mul(x, x)); ReduceL1 = ReduceSum(Abs(x));
- ReduceL2 = CastLike(Sqrt(Cast<float>(ReduceSum(Mul(x, x)))), x);
- ReduceLogSum = Log(ReduceSum(x));
- ReduceLogSumExp = CastLike(Log(ReduceSum(Exp(Cast<double>(x)))), x).
Integer inputs (versions 1-18 allow them): Log needs a float, so LogSum takes the sum's log in
double and casts back (truncating, as Cast does); the other bodies are type-correct as written.

ReduceProd (no body): floats multiply in float64 and round once to the compute domain, then to T
(as sums do); integers wrap in T; the empty product is 1. ArgMax / ArgMin: numpy's argmax /
argmin along ``axis`` (the first extreme, or the last with ``select_last_index``; NaN counts as
the extreme, as in numpy), int64 indices, ``keepdims``.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..ir import TensorType
from . import chunks
from .expansion import expanded_reference, reduce
from .math import BF16, F, SIGNED, UNSIGNED, domain_array, finish
from .lowering import Row
from .reduce import ReducePlan, _reduce_rule, _reduce_schema, reduced_axes
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes

_WIDE = F + ("int32", "int64", "uint32", "uint64")
_VERSIONS = {1: _WIDE, 11: _WIDE, 13: _WIDE + BF16, 18: _WIDE + BF16}
_LOG_VERSIONS = {**_VERSIONS, 28: F + BF16}  # opset 28 drops the integer types (Exp and Log need floats)


def _cast(b, x, dt):
    return b.op("Cast", x, to=dt.onnx_code)


def _sum_square(call, b, xs):
    return [reduce(b, "ReduceSum", b.op("Mul", xs[0], xs[0]), call.plan)]


def _l1(call, b, xs):
    return [reduce(b, "ReduceSum", b.op("Abs", xs[0]), call.plan)]


def _l2(call, b, xs):
    total = reduce(b, "ReduceSum", b.op("Mul", xs[0], xs[0]), call.plan)
    return [_cast(b, b.op("Sqrt", _cast(b, total, dtypes.dtype("float"))), call.types[0].dtype)]


def _log_sum(call, b, xs):
    dt = call.types[0].dtype
    total = reduce(b, "ReduceSum", xs[0], call.plan)
    if dt.kind == "float":
        return [b.op("Log", total)]
    return [_cast(b, b.op("Log", _cast(b, total, dtypes.dtype("double"))), dt)]


def _log_sum_exp(call, b, xs):
    exp = b.op("Exp", _cast(b, xs[0], dtypes.dtype("double")))
    return [_cast(b, b.op("Log", reduce(b, "ReduceSum", exp, call.plan)), call.types[0].dtype)]


_COMPOSITES = {"ReduceSumSquare": (_sum_square, _VERSIONS, "sum of squares"),
               "ReduceL1": (_l1, _VERSIONS, "sum of absolute values"),
               "ReduceL2": (_l2, _VERSIONS, "square root of the sum of squares"),
               "ReduceLogSum": (_log_sum, _LOG_VERSIONS, "log of the sum"),
               "ReduceLogSumExp": (_log_sum_exp, _LOG_VERSIONS, "log of the sum of exponentials, in double")}
_AXES_INPUT_SINCE = 18

CHUNK = chunks.ChunkRule("reduction", chunks.reduced_whole)

for _name, (_body, _versions, _what) in _COMPOSITES.items():
    register(OpDef(_name, tuple(_reduce_schema(_name, v, names, _AXES_INPUT_SINCE) for v, names in _versions.items()),
                   _reduce_rule, reference=expanded_reference(_body), expand=_body, chunk=CHUNK,
                   doc=f"The {_what} over `axes` (all when empty, unless noop_with_empty_axes)."))


# ---- ReduceProd --------------------------------------------------------------------------------------
def _prod_reference(call: Call, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    if plan.identity:
        return [xs[0]]
    if dt.kind == "float":
        wide = domain_array(xs[0])
        with np.errstate(all="ignore"):
            total = np.prod(wide, axis=plan.axes, keepdims=plan.keepdims, dtype=np.float64)
        return [finish(np.asarray(total).astype(wide.dtype), dt)]
    return [np.asarray(np.prod(xs[0], axis=plan.axes, keepdims=plan.keepdims, dtype=xs[0].dtype))]


register(OpDef("ReduceProd", tuple(_reduce_schema("ReduceProd", v, names, _AXES_INPUT_SINCE)
                                   for v, names in _VERSIONS.items()),
               _reduce_rule, reference=_prod_reference, chunk=CHUNK,
               doc="The product over `axes` (all when empty, unless noop_with_empty_axes); 1 over none."))


# ---- ArgMax / ArgMin -----------------------------------------------------------------------------------
_ARG_TYPES = F + SIGNED + UNSIGNED
_ARG_VERSIONS = {1: _ARG_TYPES, 11: _ARG_TYPES, 12: _ARG_TYPES, 13: _ARG_TYPES + BF16}


def _arg_rule(call: Call) -> list:
    data = call.types[0]
    if data.shape is None:
        return [TensorType(dtypes.dtype("int64"), None)]
    shape = tuple(data.shape)
    if not shape:
        call.fail("input is a scalar; expected rank >= 1 (an axis to reduce)")
    axis = normalize_axes(call, [call.attrs["axis"]], len(shape), negative=True, rank_name="input rank")[0]
    if shape[axis] == 0:
        call.fail(f"axis {call.attrs['axis']} has size 0; expected a non-empty axis (no index to return)")
    keepdims = bool(call.attrs["keepdims"])
    out = tuple(1 if k == axis else d for k, d in enumerate(shape) if keepdims or k != axis)
    call.plan = ReducePlan((axis,), keepdims, shape, out)
    return [TensorType(dtypes.dtype("int64"), out)]


def _arg_reference(find):
    def reference(call: Call, xs: list) -> list:
        x, axis = domain_array(xs[0]), call.plan.axes[0]
        if call.attrs.get("select_last_index", 0):  # the last extreme: the first one of the reversed axis
            flipped = np.flip(x, axis)
            index = x.shape[axis] - 1 - find(flipped, axis=axis)
        else:
            index = find(x, axis=axis)
        index = np.asarray(index, np.int64)
        return [np.expand_dims(index, axis) if call.plan.keepdims else index]
    return reference


def _arg_schema(version: int, names: tuple) -> Schema:
    attrs = (Attr("axis", "int", 0), Attr("keepdims", "int", 1))
    if version >= 12:
        attrs += (Attr("select_last_index", "int", 0),)
    return Schema(version, (Input("data"),), attrs, dtypes.types(*names))


for _name, _find in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
    register(OpDef(_name, tuple(_arg_schema(v, names) for v, names in _ARG_VERSIONS.items()), _arg_rule,
                   reference=_arg_reference(_find), chunk=CHUNK,
                   kernel=Row(_name.lower(), fusable=lambda call: False, axes=reduced_axes),
                   doc=f"int64 indices of the {'largest' if _name == 'ArgMax' else 'smallest'} element along `axis` "
                       "(the first, or the last with select_last_index; NaN counts as the extreme)."))
