"""Rounding and classification ops: Floor, Ceil, Round, Sign, IsNaN, IsInf.

Floor, Ceil and Round (half to even, as np.rint) are exact in every compute domain (a float16 or
bfloat16 value rounded in float32 is representable in its own type again), keep -0 and NaN, and
map +-inf to itself. Sign gives -1, 0 or 1 in the input's type (NaN for NaN; -0 gives +0, as
np.sign). IsNaN and IsInf give bool; float8 inputs (version 20) are decoded exactly to float32
first, so a format without infinities (the e4m3 and fnuz ones) is never infinite.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, kir
from ..ir import TensorType
from .lowering import Elementwise
from .math import BF16, F, SIGNED, UNSIGNED, _register_unary, domain_array
from .registry import Attr, Call, Input, OpDef, Schema, register

BOOL = dtypes.dtype("bool")
FLOAT8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")


# ---- Floor, Ceil, Round, Sign --------------------------------------------------------------------
def _sign_expr(a: kir.Expr) -> kir.Expr:
    zero = kir.const(0, a.dtype)
    result = kir.select(kir.compare("gt", a, zero), kir.const(1, a.dtype), zero)
    if kir.types.is_integer(a.dtype) and not kir.types.is_signed(a.dtype):
        return result
    result = kir.select(kir.compare("lt", a, zero), kir.const(-1, a.dtype), result)
    if kir.types.is_float(a.dtype):  # (NaN is neither > 0 nor < 0: it stays NaN)
        result = kir.select(kir.compare("ne", a, a), a, result)
    return result


_ROUNDING = (
    ("Floor", "X", {1: F, 6: F, 13: F + BF16}, np.floor, lambda a: kir.unary("floor", a)),
    ("Ceil", "X", {1: F, 6: F, 13: F + BF16}, np.ceil, lambda a: kir.unary("ceil", a)),
    ("Round", "X", {11: F, 22: F + BF16}, np.rint, lambda a: kir.unary("rint", a)),
    ("Sign", "input", {9: F + SIGNED + UNSIGNED, 13: F + SIGNED + UNSIGNED + BF16}, np.sign, _sign_expr),
)

for _row in _ROUNDING:
    _register_unary(*_row)


# ---- IsNaN, IsInf -------------------------------------------------------------------------------
def _predicate_rule(call: Call) -> list:
    return [TensorType(BOOL, call.types[0].shape)]


def _is_inf_reference(call: Call, xs: list) -> list:
    x = domain_array(xs[0])
    positive = (x == np.inf) if call.attrs["detect_positive"] else np.zeros(x.shape, np.bool_)
    negative = (x == -np.inf) if call.attrs["detect_negative"] else np.zeros(x.shape, np.bool_)
    return [np.asarray(positive | negative, np.bool_)]


def _is_inf_expr(call: Call, args: list) -> kir.Expr:
    a = args[0]
    positive, negative = call.attrs["detect_positive"], call.attrs["detect_negative"]
    if positive and negative:
        return kir.compare("eq", kir.unary("abs", a), kir.const(np.inf, a.dtype))
    if positive or negative:
        return kir.compare("eq", a, kir.const(np.inf if positive else -np.inf, a.dtype))
    return kir.compare("lt", a, a)  # (false for every value, NaN included)


_IS_NAN_TYPES = {9: F, 13: F + BF16, 20: F + BF16 + FLOAT8}
_IS_INF_TYPES = {10: ("float", "double"), 20: F + BF16 + FLOAT8}
_DETECT = (Attr("detect_negative", "int", 1), Attr("detect_positive", "int", 1))

register(OpDef(
    "IsNaN", tuple(Schema(v, (Input("X"),), (), dtypes.types(*names)) for v, names in _IS_NAN_TYPES.items()),
    _predicate_rule, reference=lambda call, xs: [np.isnan(domain_array(xs[0]))],
    kernel=Elementwise(lambda call, args: kir.compare("ne", args[0], args[0])),
    doc="Elementwise x is NaN, as bool."))

register(OpDef(
    "IsInf", tuple(Schema(v, (Input("X"),), _DETECT, dtypes.types(*names)) for v, names in _IS_INF_TYPES.items()),
    _predicate_rule, reference=_is_inf_reference, kernel=Elementwise(_is_inf_expr),
    doc="Elementwise x is +inf (detect_positive) or -inf (detect_negative), as bool."))
