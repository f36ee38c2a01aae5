"""Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logic (Not, And, Or) and Where.

Comparisons give bool and compare exact values (float16/bfloat16 widened to float32 is exact;
NaN compares unequal). Version 1 of Equal/Less/Greater/And/Or carries the legacy
``broadcast``/``axis`` attributes (see dsl/ops/arith.py).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, kir
from ..ir import TensorType
from .lowering import Elementwise
from .math import BF16, F, LEGACY_BROADCAST, SIGNED, UNSIGNED, binary_shape, domain_array, legacy_inputs, \
    legacy_path
from .registry import Call, Input, OpDef, Schema, register
from .shape import broadcast_dims

BOOL = dtypes.dtype("bool")
_BOOL_SET = dtypes.types("bool")
_NUMERIC = F + SIGNED + UNSIGNED

_COMPARE_TYPES = {
    "Equal": {1: ("bool", "int32", "int64"), 7: ("bool", "int32", "int64"), 11: ("bool",) + _NUMERIC,
              13: ("bool",) + _NUMERIC + BF16, 19: ("bool", "string") + _NUMERIC + BF16},
    "Less": {1: F, 7: F, 9: _NUMERIC, 13: _NUMERIC + BF16},
    "Greater": {1: F, 7: F, 9: _NUMERIC, 13: _NUMERIC + BF16},
    "LessOrEqual": {12: _NUMERIC, 16: _NUMERIC + BF16},
    "GreaterOrEqual": {12: _NUMERIC, 16: _NUMERIC + BF16},
}
_COMPARE = {"Equal": (np.equal, "==", "eq"), "Less": (np.less, "<", "lt"), "Greater": (np.greater, ">", "gt"),
            "LessOrEqual": (np.less_equal, "<=", "le"), "GreaterOrEqual": (np.greater_equal, ">=", "ge")}


def _bool_binary_rule(call: Call) -> list:
    return [TensorType(BOOL, binary_shape(call))]


def _compare_reference(fn):
    def reference(call: Call, xs: list) -> list:
        a, b = legacy_inputs(call, xs)
        if a.dtype.kind != "O":  # strings (Equal-19) compare as they are
            a, b = domain_array(a), domain_array(b)
        return [np.asarray(fn(a, b), dtype=np.bool_)]
    return reference


def _binary_kernel(op: str) -> Elementwise:
    build = kir.binary if op in kir.expr.BINARY_BOOL else kir.compare
    return Elementwise(lambda call, args: build(op, args[0], args[1]), input_path=legacy_path)


def _binary_schemas(versions: dict) -> tuple:
    return tuple(Schema(v, (Input("A"), Input("B")), LEGACY_BROADCAST if v < 7 else (), dtypes.types(*names))
                 for v, names in versions.items())


for _name, _versions in _COMPARE_TYPES.items():
    _fn, _symbol, _op = _COMPARE[_name]
    register(OpDef(_name, _binary_schemas(_versions), _bool_binary_rule, reference=_compare_reference(_fn),
                   kernel=_binary_kernel(_op), doc=f"Elementwise A {_symbol} B as bool, broadcast."))


# ---- Not, And, Or --------------------------------------------------------------------------------
register(OpDef(
    "Not", (Schema(1, (Input("X"),), (), _BOOL_SET),),
    lambda call: [TensorType(BOOL, call.types[0].shape)],
    reference=lambda call, xs: [np.logical_not(xs[0])],
    kernel=Elementwise(lambda call, args: kir.unary("not", args[0])),
    doc="Elementwise logical not."))

for _name, _fn, _symbol in (("And", np.logical_and, "and"), ("Or", np.logical_or, "or")):
    register(OpDef(
        _name, _binary_schemas({1: ("bool",), 7: ("bool",)}), _bool_binary_rule,
        reference=lambda call, xs, fn=_fn: [np.asarray(fn(*legacy_inputs(call, xs)), dtype=np.bool_)],
        kernel=_binary_kernel(_symbol), doc=f"Elementwise logical {_name.lower()}, broadcast."))


# ---- Where -----------------------------------------------------------------------------------------
# Spec: "When True (nonzero), yield X, otherwise yield Y", with multidirectional broadcasting
# of all three inputs. The values are copied exactly (no compute-domain rounding).
def _where_rule(call: Call) -> list:
    dtype = call.types[1].dtype
    shapes = [t.shape for t in call.types]
    if any(shape is None for shape in shapes):
        return [TensorType(dtype, None)]
    return [TensorType(dtype, broadcast_dims(call, broadcast_dims(call, shapes[0], shapes[1]), shapes[2]))]


def _where_reference(call: Call, xs: list) -> list:
    condition, x, y = xs
    return [np.where(condition, x, y).astype(x.dtype, copy=False)]


register(OpDef(
    "Where",
    tuple(Schema(v, (Input("condition", _BOOL_SET), Input("X"), Input("Y")), (), dtypes.all_types(v))
          for v in (9, 16)),
    _where_rule, reference=_where_reference,
    kernel=Elementwise(lambda call, args: kir.select(args[0], args[1], args[2])),
    doc="Elementwise select: X where condition, else Y (all three broadcast)."))
