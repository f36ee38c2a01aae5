"""Quantized matrix products and dynamic quantization: MatMulInteger, QLinearMatMul,
DynamicQuantizeLinear (numpy references; the JIT runs them as numpy steps).

- MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) with numpy.matmul's shape rules, int32
  output. Zero points are scalars (per tensor) or per row of A ([M], or [D1, .., M, 1]) / per
  column of B ([N], or [D1, .., 1, N]). The products are exact and the sums wrap modulo 2**32
  (the spec lets accumulation overflow only in 32 bits).
- QLinearMatMul: the real product ((a - a_zp) * a_scale) @ ((b - b_zp) * b_scale), quantized as
  y = saturate(round_half_even(real / y_scale) + y_zp) (spec formula). The sum is exact (float64
  of small integers), the scales multiply in float64 after it (a per-row a_scale and a per-column
  b_scale factor out of the sum) and the result rounds once. y_scale / y_zero_point are per
  tensor. Version 21's float8 operands dequantize as (x - zp) * scale in float64 and a float8
  output is real / y_scale + y_zp cast with saturation, rounded once from float64 (onnx's
  reference casts float8 to int32, which the spec does not say). Integer outputs: NaN gives the low end of the range, as
  QuantizeLinear.
- DynamicQuantizeLinear: the spec's formula in float32: y_scale = (max(0, max(x)) - min(0,
  min(x))) / 255, y_zero_point = round_half_even(clip(0 - min(0, min(x)) / y_scale, 0, 255)), y =
  QuantizeLinear(x, y_scale, y_zero_point) (this module binds QuantizeLinear's own definition).
  Where the formula divides by zero (x all zeros, or empty) y_scale is 1, as onnxruntime and
  onnx's reference give.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..convert import convert, to_wide
from ..errors import DTypeError
from ..ir import TensorType
from . import chunks
from .expansion import EagerBuilder
from .registry import Call, Input, OpDef, Schema, register
from .shape import broadcast_dims

_types = dtypes.types
_INT8 = ("int8", "uint8")
_FLOAT8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
INT32 = _types("int32")


def matmul_shape(call: Call, a_shape: tuple, b_shape: tuple, a_name: str = "A", b_name: str = "B") -> tuple:
    """numpy.matmul's output shape (1-D operands promoted and the added dim removed)."""
    for name, shape in ((a_name, a_shape), (b_name, b_shape)):
        if len(shape) == 0:
            call.fail(f"input {name} is a scalar (shape []); matmul needs rank >= 1")
    a2 = (1,) + tuple(a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if len(b_shape) == 1 else tuple(b_shape)
    if isinstance(a2[-1], int) and isinstance(b2[-2], int) and a2[-1] != b2[-2]:
        call.fail(f"{a_name} shape {list(a_shape)} and {b_name} shape {list(b_shape)}: inner dims "
                  f"{a2[-1]} and {b2[-2]} differ")
    batch = broadcast_dims(call, a2[:-2], b2[:-2])
    return batch + (a2[-2],) * (len(a_shape) > 1) + (b2[-1],) * (len(b_shape) > 1)


def _param_shape(call: Call, name: str, shape: tuple, operand: tuple, of: str, per_row: bool) -> tuple | None:
    """How a scale / zero point broadcasts against its operand: () per tensor, else the
    operand-rank shape with 1 at the contracted dim (per row of A, per column of B)."""
    if shape is None or operand is None:
        return None
    shape = tuple(shape)
    if len(shape) == 0 or shape == (1,):
        return ()
    if len(operand) >= 2:
        target = operand[:-1] + (1,) if per_row else operand[:-2] + (1, operand[-1])
        line = operand[-2] if per_row else operand[-1]
        if shape == target:
            return target
        if len(operand) == 2 and shape == (line,):
            return target
    what = "per row" if per_row else "per column"
    expected = "a scalar" if len(operand) < 2 else \
        f"a scalar, [{line}] or {list(target)} ({what})" if len(operand) == 2 else f"a scalar or {list(target)} ({what})"
    call.fail(f"{name} shape {list(shape)} for {of} shape {list(operand)}; expected {expected}")


def _check_same_type(call: Call, index: int, name: str, want, what: str) -> None:
    if index < len(call.types) and call.types[index] is not None and call.types[index].dtype != want:
        call.fail(f"{name} has type {call.types[index].dtype}; expected {want} ({what})", DTypeError)


def _params(call: Call, a: int, a_params: tuple, b: int, b_params: tuple, names: tuple = ("A", "B")) -> tuple:
    """Per-parameter broadcast shapes against A (per row) and B (per column), named ``names`` in errors."""
    types = call.types
    shape = (lambda i: types[i].shape if i < len(types) and types[i] is not None else None)
    present = (lambda i: i < len(types) and types[i] is not None)
    a_shapes = tuple(_param_shape(call, name, shape(i), shape(a), names[0], True) if present(i) else ()
                     for i, name in a_params)
    b_shapes = tuple(_param_shape(call, name, shape(i), shape(b), names[1], False) if present(i) else ()
                     for i, name in b_params)
    return a_shapes, b_shapes


def _shifted(x: np.ndarray, zero_point, shape) -> np.ndarray:
    """x - zero_point in float64 (exact for 8-bit integers and float8)."""
    wide = to_wide(x, dtypes.of_array(x)).astype(np.float64)
    if zero_point is None:
        return wide
    return wide - to_wide(zero_point, dtypes.of_array(zero_point)).astype(np.float64).reshape(shape)


# ---- MatMulInteger ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantMatMulPlan:
    """Broadcast shapes of A's parameters (per row) and B's (per column), in input order."""

    a: tuple
    b: tuple


def _matmul_integer_rule(call: Call) -> list:
    a, b = call.types[0], call.types[1]
    _check_same_type(call, 2, "a_zero_point", a.dtype, "the type of A")
    _check_same_type(call, 3, "b_zero_point", b.dtype, "the type of B")
    if a.shape is None or b.shape is None:
        return [TensorType(dtypes.dtype("int32"), None)]
    out = matmul_shape(call, a.shape, b.shape)
    a_shapes, b_shapes = _params(call, 0, ((2, "a_zero_point"),), 1, ((3, "b_zero_point"),))
    call.plan = QuantMatMulPlan(a_shapes, b_shapes)
    return [TensorType(dtypes.dtype("int32"), out)]


def _matmul_integer(call: Call, xs: list) -> list:
    a_zp = xs[2] if len(xs) > 2 else None
    b_zp = xs[3] if len(xs) > 3 else None
    a = _shifted(xs[0], a_zp, call.plan.a[0])
    b = _shifted(xs[1], b_zp, call.plan.b[0])
    exact = np.matmul(a, b)  # float64 sums of products <= 2**16: exact below 2**53
    return [exact.astype(np.int64).astype(np.int32)]  # the low 32 bits: accumulation wraps in int32


register(OpDef(
    "MatMulInteger",
    (Schema(10, (Input("A", _types(*_INT8)), Input("B", _types(*_INT8)),
                 Input("a_zero_point", _types(*_INT8), optional=True),
                 Input("b_zero_point", _types(*_INT8), optional=True)), (), INT32),),
    _matmul_integer_rule, reference=_matmul_integer, chunk=chunks.WHOLE,
    doc="int32 (A - a_zero_point) @ (B - b_zero_point), numpy.matmul shapes; zero points per tensor, row or column."))


# ---- QLinearMatMul ---------------------------------------------------------------------------------
_Q_NAMES = ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point")


def _qlinear_rule(call: Call) -> list:
    types = call.types
    a, b, y_zp = types[0], types[3], types[7]
    _check_same_type(call, 2, "a_zero_point", a.dtype, "the type of a")
    _check_same_type(call, 5, "b_zero_point", b.dtype, "the type of b")
    if call.version >= 21:
        for index in (4, 6):
            _check_same_type(call, index, _Q_NAMES[index], types[1].dtype, "the type of a_scale")
    for index in (6, 7):
        if types[index].shape is not None and tuple(types[index].shape) not in ((), (1,)):
            call.fail(f"{_Q_NAMES[index]} shape {list(types[index].shape)}; expected a scalar (per tensor)")
    for scale, zp in ((1, 2), (4, 5)):
        if types[scale].shape is not None and types[zp].shape is not None and \
                tuple(types[scale].shape) != tuple(types[zp].shape) and \
                {tuple(types[scale].shape), tuple(types[zp].shape)} != {(), (1,)}:
            call.fail(f"{_Q_NAMES[zp]} shape {list(types[zp].shape)} must equal {_Q_NAMES[scale]} shape "
                      f"{list(types[scale].shape)}")
    if a.shape is None or b.shape is None:
        return [TensorType(y_zp.dtype, None)]
    out = matmul_shape(call, a.shape, b.shape, "a", "b")
    a_shapes, b_shapes = _params(call, 0, ((1, "a_scale"), (2, "a_zero_point")), 3,
                                 ((4, "b_scale"), (5, "b_zero_point")), ("a", "b"))
    call.plan = QuantMatMulPlan(a_shapes, b_shapes)
    return [TensorType(y_zp.dtype, out)]


def _wide(x: np.ndarray) -> np.ndarray:
    return to_wide(x, dtypes.of_array(x)).astype(np.float64)


def _qlinear(call: Call, xs: list) -> list:
    (a_scale_shape, a_zp_shape), (b_scale_shape, b_zp_shape) = call.plan.a, call.plan.b
    a_scale, b_scale = _wide(xs[1]).reshape(a_scale_shape), _wide(xs[4]).reshape(b_scale_shape)
    a, b = _shifted(xs[0], xs[2], a_zp_shape), _shifted(xs[3], xs[5], b_zp_shape)
    with np.errstate(all="ignore"):
        if dtypes.of_array(xs[0]).kind == "float" or dtypes.of_array(xs[3]).kind == "float":
            real = np.matmul(a * a_scale, b * b_scale)
        else:  # the exact integer sum, then the scales (a per-row and a per-column one factor out)
            real = _scaled(np.matmul(a, b), a_scale, b_scale, len(xs[0].shape), len(xs[3].shape))
        quotient = real / _wide(xs[6]).reshape(())
    return [_saturate(quotient, xs[7], call.types[7].dtype)]


def _scaled(total: np.ndarray, a_scale: np.ndarray, b_scale: np.ndarray, a_rank: int, b_rank: int) -> np.ndarray:
    """The sums times the scales, laid out as the output (a 1-D a or b has a per-tensor scale)."""
    if b_rank == 1 and a_scale.ndim:  # [.., M, 1] against an output [.., M]
        a_scale = a_scale[..., 0]
    if a_rank == 1 and b_scale.ndim:  # [.., 1, N] against an output [.., N]
        b_scale = b_scale[..., 0, :]
    return total * a_scale * b_scale


def _saturate(quotient: np.ndarray, zero_point: np.ndarray, out) -> np.ndarray:
    """round_half_even(quotient) + zero_point clipped to an integer ``out`` (NaN: the low end), or
    quotient + zero_point cast to a float8 ``out`` with saturation."""
    zp = _wide(zero_point).reshape(())
    if out.kind == "float":
        return convert(np.asarray(quotient + zp, np.float64), out, saturate=True)  # (one rounding: not via float32)
    info = np.iinfo(out.np_dtype)
    rounded = np.rint(quotient) + zp
    return np.clip(np.nan_to_num(rounded, nan=info.min), info.min, info.max).astype(out.np_dtype)


def _qlinear_schema(version: int) -> Schema:
    quant = _types(*_INT8) if version < 21 else _types(*_INT8, *_FLOAT8)
    scale = _types("float") if version < 21 else _types("float", "float16", "bfloat16")
    inputs = (Input("a", quant), Input("a_scale", scale), Input("a_zero_point", quant), Input("b", quant),
              Input("b_scale", scale), Input("b_zero_point", quant), Input("y_scale", scale),
              Input("y_zero_point", quant))
    return Schema(version, inputs, (), quant)


register(OpDef(
    "QLinearMatMul", tuple(_qlinear_schema(v) for v in (10, 21)), _qlinear_rule, reference=_qlinear,
    chunk=chunks.WHOLE,
    doc="Quantized matmul: saturate(round(((a - a_zp) a_scale) @ ((b - b_zp) b_scale) / y_scale) + y_zp)."))


# ---- DynamicQuantizeLinear -------------------------------------------------------------------------
def _dynamic_rule(call: Call) -> list:
    x = call.types[0]
    uint8 = dtypes.dtype("uint8")
    return [TensorType(uint8, x.shape), TensorType(dtypes.dtype("float"), ()), TensorType(uint8, ())]


def _dynamic(call: Call, xs: list) -> list:
    x = np.asarray(xs[0], np.float32)
    zero = np.float32(0)
    high = np.maximum(zero, np.max(x)) if x.size else zero
    low = np.minimum(zero, np.min(x)) if x.size else zero
    with np.errstate(all="ignore"):
        scale = np.float32(1) if high == low else np.float32(high - low) / np.float32(255)
        initial = zero - low / scale
    zero_point = np.array(np.rint(np.clip(np.nan_to_num(initial, nan=0.0), 0, 255)), np.uint8)
    scale = np.array(scale, np.float32)
    y = EagerBuilder().op("QuantizeLinear", x, scale, zero_point)
    return [y, scale, zero_point]


register(OpDef(
    "DynamicQuantizeLinear", (Schema(11, (Input("x"),), (), _types("float")),), _dynamic_rule,
    reference=_dynamic, chunk=chunks.WHOLE,
    doc="uint8 y, float y_scale and uint8 y_zero_point quantizing x over its range (0 included)."))
