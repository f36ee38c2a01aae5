"""Value sources and passthrough: Constant and Identity."""
from __future__ import annotations

import numpy as np

from ..dtypes import FLOATS_V1, all_types
from ..errors import DTypeError, InputError, UnsupportedError
from ..ir import type_of_array
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


def _constant_value(call: Call) -> np.ndarray:
    given = [name for name, value in call.attrs.items() if value is not None]
    if len(given) != 1:
        call.fail(f"exactly one value attribute must be set, got {given or 'none'}", InputError)
    name = given[0]
    if name == "sparse_value":
        call.fail("sparse_value constants are not supported", UnsupportedError)
    if name == "value":
        value = call.attrs["value"]
        if not isinstance(value, np.ndarray):
            call.fail(f"attribute 'value' must be a tensor (numpy array), got {type(value).__name__}",
                      InputError)
        return value
    np_dtype, rank = _VALUE_ATTRS[name]
    raw = call.attrs[name]
    if np_dtype is object:
        items = raw if rank else [raw]
        raw = [v.decode() if isinstance(v, bytes) else v for v in items]
        raw = raw if rank else raw[0]
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
    reference=lambda call, xs: [call.plan],
    doc="A constant tensor from exactly one of value / value_float(s) / value_int(s) / value_string(s)."))
_SCHEMAS_BY_VERSION = {s.version: s for s in _CONSTANT.schemas}


# ---- Identity -----------------------------------------------------------------------------
def _identity_schemas() -> tuple[Schema, ...]:
    schemas = []
    for v in (1, 13, 14, 16, 19, 21, 23, 24, 25):
        schemas.append(Schema(v, (Input("input"),), (), all_types(v),
                              seq_types=all_types(1) if v >= 14 else frozenset(),
                              accepts_optional=v >= 16))
    return tuple(schemas)


register(OpDef(
    "Identity", _identity_schemas(), lambda call: [call.types[0]],
    reference=lambda call, xs: [xs[0]],
    view=lambda call, view: view,
    doc="The input itself (tensors, and from version 14 sequences, 16 optionals)."))
