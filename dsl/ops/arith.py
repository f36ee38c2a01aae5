"""Binary arithmetic with multidirectional broadcasting: Add, Sub, Mul, Div.

Versions 1 and 6 carry the legacy ``broadcast``/``axis`` attributes (B aligned to A at
``axis``, no broadcasting unless broadcast=1); version 7 on broadcasts like numpy.
Integer Div truncates toward zero (C semantics, as the spec's reference does); integer
overflow wraps.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, kir
from ..ir import TensorType
from .lowering import Elementwise
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import broadcast_dims

_F = ("float16", "float", "double")
_I32 = ("int32", "int64", "uint32", "uint64")
_SMALL = ("int8", "int16", "uint8", "uint16")
_ARITH_TYPES = {1: _F, 6: _F + _I32, 7: _F + _I32, 13: _F + _I32 + ("bfloat16",),
                14: _F + _I32 + ("bfloat16",) + _SMALL}


def legacy_b_shape(call: Call, a_shape: tuple, b_shape: tuple) -> tuple:
    """B's shape padded with trailing 1s so that numpy broadcasting implements the legacy
    (version 1 and 6) rule: B matches a contiguous run of A's dims starting at ``axis``."""
    if not call.attrs.get("broadcast", 0):
        if tuple(a_shape) != tuple(b_shape):
            call.fail(f"shapes {list(a_shape)} and {list(b_shape)} differ and broadcast=0 "
                      f"(versions 1 and 6 broadcast only with broadcast=1)")
        return tuple(b_shape)
    rank_a, rank_b = len(a_shape), len(b_shape)
    axis = call.attrs.get("axis")
    axis = rank_a - rank_b if axis is None else axis + rank_a if axis < 0 else axis
    if not 0 <= axis <= rank_a - rank_b or any(
            b not in (1, a) for a, b in zip(a_shape[axis:axis + rank_b], b_shape)):
        call.fail(f"B shape {list(b_shape)} does not match A shape {list(a_shape)} at axis {axis}")
    return tuple(b_shape) + (1,) * (rank_a - rank_b - axis)


def _binary_rule(call: Call) -> list:
    a, b = call.types[0], call.types[1]
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    b_shape = legacy_b_shape(call, a.shape, b.shape) if call.version < 7 else b.shape
    call.plan = b_shape
    shape = broadcast_dims(call, a.shape, b_shape)
    if call.version < 7 and shape != tuple(a.shape):
        call.fail(f"B shape {list(b.shape)} would broadcast A {list(a.shape)}; only B may broadcast")
    return [TensorType(a.dtype, shape)]


def _legacy_path(call: Call, index: int) -> tuple:
    if call.version >= 7 or index != 1 or call.plan is None:
        return ()
    return ((("legacy_b", call.plan), lambda view, shape=call.plan: view.reshape(shape)),)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    quotient = np.floor_divide(a, b)
    remainder = np.remainder(a, b)
    return quotient + ((remainder != 0) & ((a < 0) ^ (b < 0))).astype(quotient.dtype)


def _numpy(fn):
    def reference(call: Call, xs: list) -> list:
        a, b = xs[0], xs[1]
        if call.version < 7:
            b = b.reshape(call.plan)
        with np.errstate(all="ignore"):
            out = fn(a, b)
        return [np.asarray(out).astype(a.dtype, copy=False)]
    return reference


def _div(a, b):
    if a.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            return _int_div(a, b)
    return np.divide(a, b)


def _float_or_cast(fn):
    """numpy has no bfloat16/float16-exact ops everywhere: compute narrow floats in float32."""
    def wrapped(a, b):
        if a.dtype.kind == "V" or a.dtype == np.float16:
            return fn(a.astype(np.float32), b.astype(np.float32))
        return fn(a, b)
    return wrapped


def _register(name: str, fn, symbol: str):
    schemas = []
    for version, names in _ARITH_TYPES.items():
        attrs = (Attr("broadcast", "int", 0), Attr("axis", "int", None)) if version < 7 else ()
        if version == 1:
            attrs += (Attr("consumed_inputs", "ints", None),)
        schemas.append(Schema(version, (Input("A"), Input("B")), attrs, dtypes.types(*names)))
    kernel = Elementwise(lambda call, args: kir.binary(symbol, args[0], args[1]), input_path=_legacy_path)
    register(OpDef(name, tuple(schemas), _binary_rule, reference=_numpy(_float_or_cast(fn)),
                   kernel=kernel, doc=f"Elementwise {name} of A and B with numpy broadcasting."))


_register("Add", np.add, "add")
_register("Sub", np.subtract, "sub")
_register("Mul", np.multiply, "mul")
_register("Div", _div, "div")  # kir div: integers truncate toward zero, x / 0 = 0
