"""Integer bit ops and modulo: Mod, BitShift, BitwiseAnd / Or / Xor / Not, and the bool Xor.

Every op broadcasts like numpy (Xor-1: the legacy ``broadcast``/``axis`` rule, dsl/ops/arith.py)
and follows numpy where the spec leaves a case open, in the reference and the kernels alike:

- Mod fmod=0 is ``A - floor(A / B) * B`` (np.remainder, the sign of B; Python's ``%``), fmod=1
  C fmod (np.fmod, the sign of A). Floats: B = 0 gives NaN (the spec). Integers: the spec is
  silent; x mod 0 is 0 (numpy's answer, without its warning; onnxruntime raises "Integer
  modulo by zero") and never a crash, and minimum mod -1 is 0. Floats need fmod=1 before
  version 28 ("T is constrained to integer data types" for fmod=0); version 28 defines fmod=0
  for floats as numpy's float remainder.
- BitShift by Y outside [0, bits of T) gives 0, or -1 for a RIGHT shift of a negative X: the
  version 28 spec's words and numpy's (np.left_shift / right_shift). Version 11 (unsigned
  types only) does not say; numpy and onnxruntime give 0.
- float16 / bfloat16 compute in float32 and round once (fmod is exact in any precision).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, kir
from ..errors import DTypeError, InputError
from ..ir import TensorType
from .lowering import Elementwise
from .math import BF16, F, LEGACY_BROADCAST, SIGNED, UNSIGNED, binary_shape, domain_array, finish, \
    legacy_inputs, legacy_path
from .registry import REQUIRED, Attr, Call, Input, OpDef, Schema, register

_INTEGERS = SIGNED + UNSIGNED
_MOD_TYPES = {10: F + _INTEGERS, 13: F + _INTEGERS + BF16, 28: F + _INTEGERS + BF16}
_SHIFT_TYPES = {11: UNSIGNED, 28: _INTEGERS}
BOOL = dtypes.dtype("bool")


def _same_type_rule(call: Call) -> list:
    return [TensorType(call.types[0].dtype, binary_shape(call))]


def _schemas(versions: dict, attrs: tuple = (), inputs: tuple = ("A", "B")) -> tuple:
    return tuple(Schema(v, tuple(Input(name) for name in inputs), attrs, dtypes.types(*names))
                 for v, names in versions.items())


# ---- Mod ------------------------------------------------------------------------------------------
def _mod_rule(call: Call) -> list:
    fmod = call.attrs.get("fmod", 0)
    if fmod not in (0, 1):
        call.fail(f"fmod must be 0 or 1, got {fmod!r}", InputError)
    dt = call.types[0].dtype
    if fmod == 0 and dt.kind == "float" and call.version < 28:
        call.fail(f"fmod=0 (Python's %) needs an integer type at version {call.version}, got {dt}: use "
                  f"fmod=1 (C fmod, dsl.mod(a, b, fmod=1)) or opset >= 28", DTypeError)
    return _same_type_rule(call)


def _mod_reference(call: Call, xs: list) -> list:
    a, b = (domain_array(x) for x in xs)
    with np.errstate(all="ignore"):
        out = np.fmod(a, b) if call.attrs.get("fmod", 0) else np.remainder(a, b)
    return [finish(out, call.types[0].dtype)]


register(OpDef(
    "Mod", _schemas(_MOD_TYPES, (Attr("fmod", "int", 0),)), _mod_rule, reference=_mod_reference,
    kernel=Elementwise(lambda call, args: kir.binary("fmod" if call.attrs.get("fmod", 0) else "remainder",
                                                     args[0], args[1])),
    doc="Elementwise A mod B: fmod=0 the sign of B (floor), fmod=1 the sign of A (C fmod)."))


# ---- BitShift -------------------------------------------------------------------------------------
def _shift_rule(call: Call) -> list:
    direction = call.attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        call.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}", InputError)
    return _same_type_rule(call)


def _shift_reference(call: Call, xs: list) -> list:
    shift = np.left_shift if call.attrs["direction"] == "LEFT" else np.right_shift
    return [np.asarray(shift(xs[0], xs[1])).astype(xs[0].dtype, copy=False)]


register(OpDef(
    "BitShift", _schemas(_SHIFT_TYPES, (Attr("direction", "string", REQUIRED),), ("X", "Y")), _shift_rule,
    reference=_shift_reference,
    kernel=Elementwise(lambda call, args: kir.binary("shl" if call.attrs["direction"] == "LEFT" else "shr",
                                                     args[0], args[1])),
    doc="Elementwise X shifted by Y bits (LEFT or RIGHT; arithmetic for signed X); 0 / -1 past the width."))


# ---- BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot ------------------------------------------------
def _bitwise_reference(fn):
    return lambda call, xs: [np.asarray(fn(*xs)).astype(xs[0].dtype, copy=False)]


for _name, _fn, _op in (("BitwiseAnd", np.bitwise_and, "bitand"), ("BitwiseOr", np.bitwise_or, "bitor"),
                        ("BitwiseXor", np.bitwise_xor, "bitxor")):
    register(OpDef(_name, _schemas({18: _INTEGERS}), _same_type_rule, reference=_bitwise_reference(_fn),
                   kernel=Elementwise(lambda call, args, op=_op: kir.binary(op, args[0], args[1])),
                   doc=f"Elementwise bitwise {_name[7:].lower()} of two integer tensors, broadcast."))

register(OpDef(
    "BitwiseNot", _schemas({18: _INTEGERS}, inputs=("X",)),
    lambda call: [TensorType(call.types[0].dtype, call.types[0].shape)],
    reference=_bitwise_reference(np.invert), kernel=Elementwise(lambda call, args: kir.unary("bitnot", args[0])),
    doc="Elementwise bitwise not of an integer tensor."))


# ---- Xor ------------------------------------------------------------------------------------------
register(OpDef(
    "Xor", tuple(Schema(v, (Input("A"), Input("B")), LEGACY_BROADCAST if v < 7 else (), dtypes.types("bool"))
                 for v in (1, 7)),
    lambda call: [TensorType(BOOL, binary_shape(call))],
    reference=lambda call, xs: [np.asarray(np.logical_xor(*legacy_inputs(call, xs)), dtype=np.bool_)],
    kernel=Elementwise(lambda call, args: kir.binary("xor", args[0], args[1]), input_path=legacy_path),
    doc="Elementwise logical xor of bool tensors, broadcast (version 1: the legacy rule)."))
