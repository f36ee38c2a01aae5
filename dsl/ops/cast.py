"""Type conversion ops: Cast and CastLike (the element rules live in dsl/convert.py)."""
from __future__ import annotations

from .. import dtypes
from ..convert import ROUND_MODES, convert, convert_tensor
from ..errors import DslError, DTypeError, InputError
from ..ir import TensorType
from .lowering import Elementwise
from .registry import Attr, Call, Input, OpDef, Schema, register

# In a kernel the value is already in its compute domain; the group builder's kir.cast to the
# output type is exactly Cast, saturate and round_mode included.
_CAST_KERNEL = Elementwise(expr=lambda call, args: args[0])


def cast_types(version: int) -> frozenset:
    """Cast's T1/T2 at a schema version: all tensor types but complex, strings from 9.
    Cast-28 adds float6e2m3/float6e3m2, which this project does not implement."""
    names = {t.onnx_name for t in dtypes.all_types(version)} - {"complex64", "complex128"}
    if version < 9:
        names.discard("string")
    return dtypes.types(*names)


def _target(call: Call, value):
    try:  # Cast-1 spells `to` as an upper-case string ("FLOAT16")
        target = dtypes.dtype(value.lower() if isinstance(value, str) and call.version == 1 else value)
    except DslError:
        call.fail(f"attribute 'to' = {value!r} is not an ONNX element type", DTypeError)
    call.require_type(target, cast_types(call.version), "cannot cast to")
    return target


def _check_round_mode(call: Call) -> None:
    mode = call.attrs.get("round_mode", "up")
    if mode not in ROUND_MODES:
        call.fail(f"round_mode {mode!r} is not one of {list(ROUND_MODES)}", InputError)


def _cast_rule(call: Call) -> list:
    _check_round_mode(call)
    call.plan = _target(call, call.attrs["to"])
    return [TensorType(call.plan, call.types[0].shape)]


def _castlike_rule(call: Call) -> list:
    _check_round_mode(call)
    call.plan = call.types[1].dtype
    return [TensorType(call.plan, call.types[0].shape)]


def _convert(call: Call, xs: list) -> list:
    return [convert(xs[0], call.plan, saturate=bool(call.attrs.get("saturate", 1)),
                    round_mode=call.attrs.get("round_mode", "up"))]


def _convert_tensor(call: Call, xs: list):
    out = convert_tensor(xs[0], call.plan, saturate=bool(call.attrs.get("saturate", 1)),
                         round_mode=call.attrs.get("round_mode", "up"))
    return None if out is None else [out]


def _cast_attrs(version: int, to: Attr | None) -> tuple[Attr, ...]:
    attrs = (to,) if to else ()
    if version >= 19:
        attrs += (Attr("saturate", "int", 1),)
    if version >= 24:
        attrs += (Attr("round_mode", "string", "up"),)
    return attrs


register(OpDef(
    "Cast",
    tuple(Schema(v, (Input("input", cast_types(v)),), _cast_attrs(v, Attr("to", "dtype")), cast_types(v))
          for v in (1, 6, 9, 13, 19, 21, 23, 24, 25, 28)),
    _cast_rule, reference=_convert, kernel=_CAST_KERNEL, tensor_reference=_convert_tensor,
    doc="Convert elements to `to` (saturate for float8/e8m0, round_mode for e8m0)."))

register(OpDef(
    "CastLike",
    tuple(Schema(v, (Input("input", cast_types(v)), Input("target_type", cast_types(v))),
                 _cast_attrs(v, None), cast_types(v)) for v in (15, 19, 21, 23, 24, 25)),
    _castlike_rule, reference=_convert,
    kernel=Elementwise(expr=lambda call, args: args[0], used_inputs=(0,)),
    doc="Cast to the element type of `target_type`."))
