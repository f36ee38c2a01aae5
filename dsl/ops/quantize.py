"""Linear (de)quantization: DequantizeLinear and QuantizeLinear, per-tensor, per-axis, blocked.

Choices where the spec text and the implementations part (onnxruntime 1.32 and onnx's
reference agree on each of them unless said otherwise):
- DequantizeLinear: integer x - zero_point is exact (as onnxruntime; onnx's reference rounds an
  int32 x to float32 first), then one float32 product with the scale, rounded once to the output
  type (the spec says the output type "determines the precision of the multiplication"; both
  implementations multiply in float32 and round the product). A float zero point is subtracted
  (onnx's reference rejects a nonzero float8 one).
- QuantizeLinear: the division runs in the precision type (``precision``, else y_scale's type):
  for float16 / bfloat16 both x and y_scale are rounded to it first and the quotient is rounded
  to it (float32 quotients of such operands rounded once are the correctly rounded narrow
  results: 24 >= 2 * 11 + 2 bits); int32 precision divides in float64; float8e8m0 scales in
  float32. Integer outputs: round half to even, add the zero point, clip to the range; NaN gives
  the low end of the range. Float outputs (float8, float4e2m1): x / scale + zero_point, then Cast
  with ``saturate`` (onnx's reference ignores a float8 zero point; the spec formula keeps it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes, kir
from ..convert import convert, to_wide
from ..dtypes import DType
from ..errors import DslError, DTypeError, InputError
from ..ir import TensorType
from ..view import BlockedView
from . import chunks
from .lowering import Elementwise
from .registry import Attr, Call, Input, OpDef, Schema, register

_types = dtypes.types
_INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
               "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1)}
_FLOAT8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
_FLOAT_OUT = _types("float", "float16", "bfloat16")


def quantized_types(version: int) -> frozenset:
    """The quantized element types (DequantizeLinear T1 minus int32; QuantizeLinear's output)."""
    names = ["int8", "uint8"]
    if version >= 19:
        names += _FLOAT8
    if version >= 21:
        names += ["int16", "uint16", "int4", "uint4"]
    if version >= 23:
        names += ["float4e2m1"]
    if version >= 25:
        names += ["int2", "uint2"]
    return _types(*names)


def _scale_types(version: int, quantize: bool) -> frozenset:
    if version < 19:
        return _types("float")
    names = ["float", "float16", "bfloat16"] + (["int32"] if quantize and version >= 23 else [])
    return _types(*names, *(["float8e8m0"] if version >= 24 else []))


def _axis(call: Call, rank: int) -> int:
    axis = call.attrs.get("axis", 1)
    if not -rank <= axis <= rank - 1:
        call.fail(f"axis {axis} out of range [{-rank}, {rank - 1}] for input rank {rank}")
    return axis + rank if axis < 0 else axis


@dataclass(frozen=True)
class Granularity:
    """How a scale (and zero point) applies to x: ``kind`` 'tensor' (one value), 'axis' (one per
    index of ``axis``) or 'block' (one per ``block`` consecutive indices of ``axis``)."""

    kind: str
    axis: int | None = None
    block: int = 0


@dataclass(frozen=True)
class QuantPlan:
    """What a Quantize / DequantizeLinear rule decided (``call.plan``)."""

    granularity: Granularity
    out: DType  # the output element type


def _check_granularity(call: Call, x_shape: tuple, scale_shape: tuple, name: str) -> Granularity:
    """Validate the scale's shape; returns its Granularity."""
    block = call.attrs.get("block_size", 0)
    if block < 0:
        call.fail(f"block_size {block} must be >= 0", InputError)
    if len(scale_shape) == 0 or (len(scale_shape) == 1 and scale_shape[0] == 1 and not block):
        return Granularity("tensor")
    if call.version < 13 or (call.version < 21 and len(scale_shape) > 1):
        call.fail(f"{name} must be a scalar{' or 1-D' if call.version >= 13 else ''} at version "
                  f"{call.version}, got shape {list(scale_shape)}")
    rank = len(x_shape)
    axis = _axis(call, rank)
    if not block:
        if len(scale_shape) != 1 or scale_shape[0] != x_shape[axis]:
            call.fail(f"per-axis {name} shape {list(scale_shape)} must be [{x_shape[axis]}] "
                      f"(input shape {list(x_shape)}, axis {axis})")
        return Granularity("axis", axis)
    expected = list(x_shape)
    expected[axis] = -(-x_shape[axis] // block)
    if list(scale_shape) != expected:
        call.fail(f"blocked {name} shape {list(scale_shape)} does not match input shape {list(x_shape)} "
                  f"with axis {axis} and block_size {block}; expected {expected}")
    return Granularity("block", axis, block)


def _expand_param(param: np.ndarray, x_shape: tuple, granularity: Granularity) -> np.ndarray:
    kind, axis, block = granularity.kind, granularity.axis, granularity.block
    if kind == "tensor":
        return param.reshape(())
    if kind == "axis":
        dims = [1] * len(x_shape)
        dims[axis] = x_shape[axis]
        return param.reshape(dims)
    return np.repeat(param, block, axis=axis).take(np.arange(x_shape[axis]), axis=axis)


def _dtype_attr(call: Call, name: str):
    """An element-type attribute (0 = absent -> None)."""
    code = call.attrs.get(name) or 0
    if not code:
        return None
    try:
        return dtypes.dtype(code)
    except DslError:
        call.fail(f"{name} {code!r} is not an ONNX element type", DTypeError)


def _check_zero_point(call: Call, scale_type, zp_type, zp_dtype) -> None:
    if zp_type is None:
        return
    if zp_type.dtype != zp_dtype:
        call.fail(f"zero_point has type {zp_type.dtype}; expected {zp_dtype} (the quantized type)",
                  DTypeError)
    if zp_type.shape is None or scale_type.shape is None or zp_type.shape == scale_type.shape:
        return
    if _is_single(zp_type.shape) and _is_single(scale_type.shape):
        return  # a scalar and a one-element vector are both per-tensor (as onnx's reference reads them)
    call.fail(f"zero_point shape {list(zp_type.shape)} must equal scale shape {list(scale_type.shape)}")


def _is_single(shape: tuple) -> bool:
    return len(shape) == 0 or (len(shape) == 1 and shape[0] == 1)


# ---- DequantizeLinear ---------------------------------------------------------------------
def _dequantize_rule(call: Call) -> list:
    x_type, scale_type = call.types[0], call.types[1]
    zp_type = call.input_type(2)
    _check_zero_point(call, scale_type, zp_type, x_type.dtype)
    requested = _dtype_attr(call, "output_dtype")
    out = requested or scale_type.dtype
    if out not in _FLOAT_OUT:
        what = f"output_dtype {out}" if requested else f"output type {out} (the x_scale type; set output_dtype)"
        call.fail(f"{what} is not one of ['bfloat16', 'float', 'float16']", DTypeError)
    if x_type.shape is not None and scale_type.shape is not None:
        call.plan = QuantPlan(_check_granularity(call, x_type.shape, scale_type.shape, "x_scale"), out)
    return [TensorType(out, x_type.shape)]


def _dequantize(call: Call, xs: list) -> list:
    x, scale = xs[0], xs[1]
    zero_point = xs[2] if len(xs) > 2 else None
    granularity, out = call.plan.granularity, call.plan.out
    source = dtypes.of_array(x)
    wide = to_wide(x, source)
    if zero_point is not None:
        zp = to_wide(zero_point, source)
        zp = _expand_param(zp, x.shape, granularity)
        if wide.dtype.kind in "iu":
            wide = wide.astype(np.int64) - zp.astype(np.int64)
        else:
            wide = wide.astype(np.float32) - zp.astype(np.float32)
    scale32 = _expand_param(to_wide(scale, dtypes.of_array(scale)).astype(np.float32), x.shape, granularity)
    product = wide.astype(np.float32) * scale32
    return [convert(product, out)]


def _dequantize_expr(call: Call, args: list) -> kir.Expr:
    x, scale = args[0], args[1]
    zp = args[2] if len(args) > 2 else None
    if zp is None:
        shifted = kir.convert(x, "float32")
    elif kir.types.is_float(x.dtype):
        shifted = kir.binary("sub", kir.convert(x, "float32"), kir.convert(zp, "float32"))
    else:  # integers subtract exactly, then round once to float32 (as the reference)
        shifted = kir.convert(kir.binary("sub", kir.convert(x, "int64"), kir.convert(zp, "int64")), "float32")
    return kir.binary("mul", shifted, kir.convert(scale, "float32"))


def _param_path(call: Call, index: int) -> tuple:
    """How a scale / zero point reads at x's shape: per axis, [D] seen as [1, .., D, .., 1];
    blocked, each value spread over its block of ``block_size`` along the axis (a BlockedView,
    indexed as i // block_size by the kernel)."""
    granularity = call.plan.granularity
    kind, axis, block = granularity.kind, granularity.axis, granularity.block
    if index == 0 or kind == "tensor" or len(call.types[index].shape) == 0:
        return ()  # (a scalar zero point beside a one-element scale broadcasts as it is)
    x_shape = call.types[0].shape
    if kind == "block":
        size = x_shape[axis]
        return ((("block", axis, block, size), lambda view: BlockedView.spread(view, axis, block, size)),)
    dims = [1] * len(x_shape)
    dims[axis] = x_shape[axis]
    return ((("per_axis", tuple(dims)), lambda view, dims=tuple(dims): view.reshape(dims)),)


_DEQUANTIZE_KERNEL = Elementwise(expr=_dequantize_expr, input_path=_param_path, fusable=lambda call: call.plan is not None)


def _dequantize_schemas() -> tuple[Schema, ...]:
    schemas = []
    for v in (10, 13, 19, 21, 23, 24, 25, 28):
        x_types = quantized_types(v) | _types("int32")
        attrs = []
        if v >= 13:
            attrs.append(Attr("axis", "int", 1))
        if v >= 21:
            attrs.append(Attr("block_size", "int", 0))
        if v >= 23:
            attrs.append(Attr("output_dtype", "int", 0))
        schemas.append(Schema(v, (Input("x", x_types), Input("x_scale", _scale_types(v, False)),
                                  Input("x_zero_point", x_types, optional=True)), tuple(attrs), x_types))
    return tuple(schemas)


register(OpDef(
    "DequantizeLinear", _dequantize_schemas(), _dequantize_rule, reference=_dequantize,
    kernel=_DEQUANTIZE_KERNEL, chunk=chunks.QUANTIZE, fold=False,
    doc="y = (x - zero_point) * scale, per tensor, per axis or per block."))


# ---- QuantizeLinear -----------------------------------------------------------------------
def _quantize_output(call: Call, zp_type):
    requested = _dtype_attr(call, "output_dtype")
    if requested is not None and zp_type is not None and requested != zp_type.dtype:
        call.fail(f"output_dtype {requested} differs from the zero_point type {zp_type.dtype}", DTypeError)
    out = requested or (zp_type.dtype if zp_type is not None else dtypes.dtype("uint8"))
    call.require_type(out, quantized_types(call.version), "cannot quantize to")
    return out


def _quantize_rule(call: Call) -> list:
    x_type, scale_type = call.types[0], call.types[1]
    zp_type = call.input_type(2)
    if 19 <= call.version < 23 and scale_type.dtype != x_type.dtype:
        call.fail(f"y_scale has type {scale_type.dtype}; expected {x_type.dtype} (the type of x) at "
                  f"version {call.version}", DTypeError)
    out = _quantize_output(call, zp_type)
    _check_zero_point(call, scale_type, zp_type, out)
    precision = _dtype_attr(call, "precision")
    if precision is not None and precision not in _FLOAT_OUT:
        call.fail(f"precision {precision} must be float, float16 or bfloat16", DTypeError)
    if x_type.shape is not None and scale_type.shape is not None:
        call.plan = QuantPlan(_check_granularity(call, x_type.shape, scale_type.shape, "y_scale"), out)
    return [TensorType(out, x_type.shape)]


def _division_operand(array: np.ndarray, division) -> np.ndarray:
    """x or y_scale as the division sees it: rounded to a float16 / bfloat16 precision (both
    operands, as onnxruntime does), else exactly as float32 (float64 for int32 precision)."""
    wide = to_wide(array, dtypes.of_array(array))
    if division.onnx_name == "int32":
        return wide.astype(np.float64)
    if division.onnx_name in ("float16", "bfloat16"):
        return to_wide(convert(wide, division), division).astype(np.float32)
    return wide.astype(np.float32)


def _quantize(call: Call, xs: list) -> list:
    x, scale = xs[0], xs[1]
    zero_point = xs[2] if len(xs) > 2 else None
    granularity, out = call.plan.granularity, call.plan.out
    precision = call.attrs.get("precision") or 0
    division = dtypes.dtype(precision) if precision else dtypes.of_array(scale)
    x_wide = _division_operand(x, division)
    scale_wide = _expand_param(_division_operand(scale, division), x.shape, granularity)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quotient = x_wide / scale_wide
    if division.onnx_name in ("float16", "bfloat16"):
        quotient = to_wide(convert(quotient, division), division).astype(np.float32)
    zp = None
    if zero_point is not None:
        zp = _expand_param(to_wide(zero_point, out), x.shape, granularity)
    if out.onnx_name in _INT_RANGES:
        low, high = _INT_RANGES[out.onnx_name]
        rounded = np.rint(quotient)
        if zp is not None:
            rounded = rounded + zp.astype(np.float64)
        # NaN -> the low end of the range, as onnxruntime and onnx's reference give
        return [np.clip(np.nan_to_num(rounded, nan=low), low, high).astype(np.int64).astype(out.np_dtype)]
    if zp is not None:
        quotient = quotient + zp.astype(quotient.dtype)
    return [convert(quotient, out, saturate=bool(call.attrs.get("saturate", 1)))]


def _quantize_schemas() -> tuple[Schema, ...]:
    schemas = []
    for v in (10, 13, 19, 21, 23, 24, 25, 28):
        x_types = _types("float", "int32") if v < 19 else _types("float", "float16", "bfloat16", "int32")
        attrs = [Attr("axis", "int", 1)] if v >= 13 else []
        if v >= 19:
            attrs.append(Attr("saturate", "int", 1))
        if v >= 21:
            attrs += [Attr("block_size", "int", 0), Attr("output_dtype", "int", 0)]
        if v >= 23:
            attrs.append(Attr("precision", "int", 0))
        scale_types = _types("float") if v < 19 else x_types if v < 23 else _scale_types(v, True)
        schemas.append(Schema(v, (Input("x", x_types), Input("y_scale", scale_types),
                                  Input("y_zero_point", quantized_types(v), optional=True)),
                              tuple(attrs), x_types))
    return tuple(schemas)


def _quantize_expr(call: Call, args: list) -> kir.Expr:
    x, scale = args[0], args[1]
    zp = args[2] if len(args) > 2 else None
    quotient = kir.binary("div", kir.convert(x, "float32"), kir.convert(scale, "float32"))
    out = call.plan.out.onnx_name
    if out in _INT_RANGES:
        low, high = _INT_RANGES[out]
        zero = kir.const(0, "int64") if zp is None else kir.convert(zp, "int64")
        return kir.call("quantize_to_int", quotient, zero, kir.const(low, "int64"), kir.const(high, "int64"))
    # float8 / float4 outputs: quotient + zero point in float32, then the group builder's Cast to
    # the output type with the saturate attribute (as the reference)
    return quotient if zp is None else kir.binary("add", quotient, kir.convert(zp, "float32"))


def _quantize_fusable(call: Call) -> bool:
    """The kernel covers the float32 division (y_scale float32, no other precision) per tensor,
    per axis or per block, to any output type; other precisions use the reference."""
    if call.plan is None:
        return False
    precision = call.attrs.get("precision") or 0
    return call.types[1].dtype.onnx_name == "float" and precision in (0, dtypes.dtype("float").onnx_code)


_QUANTIZE_KERNEL = Elementwise(expr=_quantize_expr, input_path=_param_path, fusable=_quantize_fusable)


register(OpDef(
    "QuantizeLinear", _quantize_schemas(), _quantize_rule, reference=_quantize, kernel=_QUANTIZE_KERNEL, chunk=chunks.QUANTIZE,
    doc="y = saturate(round_half_even(x / scale) + zero_point), per tensor, per axis or per block."))
