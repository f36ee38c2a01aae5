"""Value sources and passthrough: Constant and Identity."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..dtypes import FLOATS_V1, all_types
from ..errors import DTypeError, InputError, UnsupportedError, where
from ..ir import type_of_array
from ..tensor import Tensor
from . import chunks
from .registry import Attr, Call, Input, OpDef, Schema, register

# ---- Constant -----------------------------------------------------------------------------
_VALUE_ATTRS = {  # attribute -> (numpy dtype, rank) of the constant it makes (Constant-12+)
    "value_float": (np.float32, 0), "value_floats": (np.float32, 1),
    "value_int": (np.int64, 0), "value_ints": (np.int64, 1),
    "value_string": (object, 0), "value_strings": (object, 1),
}


def _constant_schemas() -> tuple[Schema, ...]:
    value = Attr("value", "tensor", None)
    sparse = Attr("sparse_value", "sparse_tensor", None)
    extra = (Attr("value_float", "float", None), Attr("value_floats", "floats", None),
             Attr("value_int", "int", None), Attr("value_ints", "ints", None),
             Attr("value_string", "string", None), Attr("value_strings", "strings", None))
    schemas = [Schema(1, (), (Attr("value", "tensor"),), FLOATS_V1),
               Schema(9, (), (Attr("value", "tensor"),), all_types(1)),
               Schema(11, (), (value, sparse), all_types(1))]
    schemas += [Schema(v, (), (value, sparse, *extra), all_types(v)) for v in (12, 13, 19, 21, 23, 24, 25)]
    return tuple(schemas)


def _tensor_value(call: Call, value) -> np.ndarray:
    if isinstance(value, Tensor):
        value = value.numpy()
    if not isinstance(value, np.ndarray):
        call.fail(f"attribute 'value' must be a tensor (numpy array or dsl.Tensor), got "
                  f"{type(value).__name__}", InputError)
    if value.dtype.kind == "O" and not all(isinstance(v, (str, bytes)) for v in value.flat):
        call.fail("attribute 'value' is an object array holding non-strings; ONNX object tensors "
                  "hold str (tensor(string))", DTypeError)
    dtypes.of_array(value, where(call.op, call.node))
    return value


def _utf8(call: Call, name: str, text):
    try:
        return text.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError as exc:
        call.fail(f"attribute {name!r} = {text!r} is not UTF-8: {exc}", InputError)


def _constant_value(call: Call) -> np.ndarray:
    # Spec (11+): "Exactly one of the provided attributes, either value, sparse_value, or
    # value_* must be specified."
    given = [name for name, value in call.attrs.items() if value is not None]
    if len(given) != 1:
        call.fail(f"exactly one value attribute must be set, got {given or 'none'}", InputError)
    name = given[0]
    if name == "sparse_value":
        call.fail("sparse_value constants are not supported", UnsupportedError)
    if name == "value":
        return _tensor_value(call, call.attrs["value"])
    np_dtype, rank = _VALUE_ATTRS[name]
    raw = call.attrs[name]
    if np_dtype is object:
        raw = [_utf8(call, name, v) for v in raw] if rank else _utf8(call, name, raw)
    if np_dtype is np.float32:
        floats = np.array(raw, np.float64)
        if np.any(np.isfinite(floats) & (np.abs(floats) > np.finfo(np.float32).max)):
            call.fail(f"attribute {name!r} = {raw!r} does not fit in float32", InputError)
    return np.array(raw, dtype=np_dtype).reshape((-1,) if rank else ())


def _constant_rule(call: Call) -> list:
    value = _constant_value(call)
    out_type = type_of_array(value)
    schema_types = _SCHEMAS_BY_VERSION[call.version].types
    if out_type.dtype not in schema_types:
        call.fail(f"value of type {out_type.dtype} is not allowed at version {call.version}; "
                  f"expected one of {sorted(t.onnx_name for t in schema_types)}", DTypeError)
    call.plan = value
    call.folded = [value]
    return [out_type]


_CONSTANT = register(OpDef(
    "Constant", _constant_schemas(), _constant_rule,
    reference=lambda call, xs: [call.plan], chunk=chunks.WHOLE,
    doc="A constant tensor from exactly one of value / value_float(s) / value_int(s) / value_string(s)."))
_SCHEMAS_BY_VERSION = {s.version: s for s in _CONSTANT.schemas}


# ---- Identity -----------------------------------------------------------------------------
def _identity_schemas() -> tuple[Schema, ...]:
    schemas = []
    for v in (1, 13, 14, 16, 19, 21, 23, 24, 25):
        schemas.append(Schema(v, (Input("input"),), (), all_types(v),
                              seq_types=all_types(1) if v >= 14 else frozenset(),
                              optional_types=all_types(1) if v >= 16 else frozenset(),
                              accepts_optional=v >= 16))
    return tuple(schemas)


def _identity_rule(call: Call) -> list:
    call.plan = ()  # (a view with nothing to change: no plan needed, but it has one)
    return [call.types[0]]


register(OpDef(
    "Identity", _identity_schemas(), _identity_rule,
    reference=lambda call, xs: [xs[0]],
    view=lambda call, view: view,
    doc="The input itself (tensors, and from version 14 sequences, 16 optionals)."))
