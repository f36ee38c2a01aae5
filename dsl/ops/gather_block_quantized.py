"""``com.microsoft::GatherBlockQuantized``: Gather from a block-quantized table (quantized
embeddings), dequantizing only the gathered slices.

The contrib spec (onnxruntime's ContribOperators.md):
- ``data`` (T1: int4, uint4, uint8, the four float8 types, float4e2m1) is quantized in blocks
  of ``block_size`` (a power of two >= 16; 0 for a float type: the whole ``quantize_axis``)
  along ``quantize_axis``; ``scales`` (T2: float, float16, bfloat16; the output's type) has
  data's rank, ``ceil(dim / block_size)`` along quantize_axis and data's dims elsewhere (a float
  type may also have 1 there: the scale broadcasts).
- Integer codes dequantize as ``(code - zero_point) * scale``; ``zero_points`` (T1, optional)
  default to 0 for int4 / uint4 and to 2^(bits-1) for uint8. Float codes (never a zero point)
  as ``float(code) * scale``. The product is float32, rounded once to T2 (onnxruntime's CPU
  kernel computes it so).
- uint8 data holds codes of ``bits`` 2, 4 or 8 packed low bits first along its last dim, which
  is then its quantize axis, and gathers along axis 0; its zero points pack the same way.
- ``indices`` (int32 / int64, any shape) in [-s, s-1] select along ``gather_axis`` (size s), as
  Gather does; unlike Gather, an index outside that range gives zeros for its slice.
- The output is data's (logical) shape with the gather axis replaced by the indices' shape.

The reference gathers the codes (and the scales and zero points of the gathered slices) first,
then dequantizes: its work is the output's size, not the table's, so the JIT runs it as it is.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..convert import convert, to_wide
from ..errors import DTypeError, InputError
from ..ir import TensorType
from . import chunks
from .quant_matmul import unpack_last
from .registry import Attr, Call, Input, OpDef, Schema, register

_types = dtypes.types
_INT_CODES = _types("int4", "uint4", "uint8")
_FLOAT_CODES = _types("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1")
_SCALES = _types("float", "float16", "bfloat16")


@dataclass(frozen=True)
class GatherPlan:
    gather: int      # the gather axis (non-negative)
    quantize: int    # the quantize axis (non-negative)
    block: int       # codes a block along the quantize axis (block_size 0: that whole dim)
    per: int         # codes a byte of uint8 data (8 // bits), else 1
    bits: int
    floating: bool   # float codes: no zero point


def _rule(call: Call) -> list:
    data, indices, scales = call.types[0], call.types[1], call.types[2]
    zp = call.input_type(3)
    floating = data.dtype in _FLOAT_CODES
    bits, block = call.attrs["bits"], call.attrs["block_size"]
    if zp is not None and floating:
        call.fail(f"zero_points given for {data.dtype} data; float codes are symmetric (no zero point)", InputError)
    if zp is not None and zp.dtype != data.dtype:
        call.fail(f"zero_points has type {zp.dtype}; expected {data.dtype} (the type of data)", DTypeError)
    if not floating:
        allowed = (2, 4, 8) if data.dtype.onnx_name == "uint8" else (4,)
        if bits not in allowed:
            call.fail(f"bits {bits} for {data.dtype} data; expected {' or '.join(map(str, allowed))}", InputError)
    if not (block >= 16 and block & (block - 1) == 0 or block == 0 and floating):
        call.fail(f"block_size {block}; expected a power of two >= 16" + (" or 0" if floating else ""), InputError)
    rank = None if data.shape is None else len(data.shape)
    if rank is None:
        call.plan = None
        return [TensorType(scales.dtype, None)]
    if rank < 1:
        call.fail("data is a scalar; expected rank >= 1")
    axes = []
    for name in ("gather_axis", "quantize_axis"):
        axis = call.attrs[name]
        if not -rank <= axis < rank:
            call.fail(f"{name} {axis} out of range [{-rank}, {rank - 1}] for data of rank {rank}")
        axes.append(axis % rank)
    gather, quantize = axes
    per = 8 // bits if data.dtype.onnx_name == "uint8" else 1
    if data.dtype.onnx_name == "uint8" and (gather != 0 or quantize != rank - 1 or rank < 2):
        call.fail(f"uint8 data gathers along axis 0 and is quantized along its last axis (rank >= 2); got "
                  f"gather_axis {gather}, quantize_axis {quantize}, rank {rank}")
    logical = list(data.shape)
    if per > 1 and isinstance(logical[-1], int):
        logical[-1] *= per
    plan = GatherPlan(gather, quantize, block, per, bits, floating)
    _check_scales(call, plan, logical, scales, zp)
    call.plan = plan
    if indices.shape is None:
        return [TensorType(scales.dtype, None)]
    return [TensorType(scales.dtype, tuple(logical[:gather]) + tuple(indices.shape) + tuple(logical[gather + 1:]))]


def _check_scales(call: Call, plan: GatherPlan, logical: list, scales, zp) -> None:
    if scales.shape is None:
        return
    if len(scales.shape) != len(logical):
        call.fail(f"scales has rank {len(scales.shape)}; expected data's rank {len(logical)}")
    wanted = []
    for axis, dim in enumerate(logical):
        if axis == plan.quantize:
            wanted.append(None if not isinstance(dim, int) else 1 if plan.block == 0 else -(-dim // plan.block))
        else:
            wanted.append(dim if isinstance(dim, int) else None)
    for axis, (got, want) in enumerate(zip(scales.shape, wanted)):
        broadcast = plan.floating and axis != plan.quantize and got == 1
        if isinstance(got, int) and want is not None and got != want and not broadcast:
            call.fail(f"scales shape {list(scales.shape)} does not match data of (logical) shape {logical}, "
                      f"quantize_axis {plan.quantize}, block_size {plan.block}; expected {wanted}")
    if zp is None or zp.shape is None:
        return
    packed = [(-(-d // plan.per) if axis == plan.quantize and isinstance(d, int) else d)
              for axis, d in enumerate(scales.shape)]
    if len(zp.shape) != len(packed) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                           for a, b in zip(zp.shape, packed)):
        call.fail(f"zero_points shape {list(zp.shape)}; expected {packed} (the scales' shape"
                  f"{f', {plan.per} a byte along the quantize axis' if plan.per > 1 else ''})")


def _values(array: np.ndarray, plan: GatherPlan, count: int | None = None) -> np.ndarray:
    """Codes as float32 (exact: integers below 2^8; uint8 unpacked along the last axis and cut
    to ``count``; float codes decoded)."""
    dt = dtypes.of_array(array)
    if dt.onnx_name == "uint8" and not plan.floating:
        codes = array if plan.per == 1 else unpack_last(array, 8 // plan.per)
        return (codes if count is None else codes[..., :count]).astype(np.float32)
    if dt.packed:  # (int4 / uint4: ml_dtypes casts them to float32 in one pass)
        return array.astype(np.float32)
    return to_wide(array, dt).astype(np.float32, copy=False)


def _per_code(params: np.ndarray, plan: GatherPlan) -> np.ndarray:
    """Parameters a block along the quantize axis -> broadcastable against the codes split as
    [..., blocks, block, ...] there (see _split): one more axis, of size 1, after it."""
    return np.expand_dims(params, plan.quantize + 1)  # (the rule checked: ceil(dim / block) blocks there, or 1)


def _split(codes: np.ndarray, plan: GatherPlan, block: int) -> np.ndarray:
    """Codes with the quantize axis split as (blocks, block), zero-padded to whole blocks."""
    q, dim = plan.quantize, codes.shape[plan.quantize]
    pad = -dim % block
    if pad:
        widths = [(0, 0)] * codes.ndim
        widths[q] = (0, pad)
        codes = np.pad(codes, widths)
    return codes.reshape(codes.shape[:q] + (codes.shape[q] // block, block) + codes.shape[q + 1:])


def _reference(call: Call, xs: list) -> list:
    plan = call.plan
    data, indices, scales = xs[0], np.asarray(xs[1]).astype(np.int64), xs[2]
    zp = xs[3] if len(xs) > 3 else None
    size = data.shape[plan.gather]
    flat = indices.reshape(-1)
    logical = list(data.shape)
    logical[-1] *= plan.per
    out_shape = tuple(logical[:plan.gather]) + indices.shape + tuple(logical[plan.gather + 1:])
    if size == 0:  # (every index is out of range: zeros)
        return [convert(np.zeros(out_shape, np.float32), call.types[2].dtype)]
    valid = (flat >= -size) & (flat < size)
    rows = np.where(valid, np.where(flat < 0, flat + size, flat), 0)
    codes = _values(np.take(data, rows, axis=plan.gather), plan)          # (gathered first: output-sized)
    dim = codes.shape[plan.quantize]
    block = plan.block or max(logical[plan.quantize], 1)  # (block_size 0: the table's whole axis)

    def gathered(params: np.ndarray, widen) -> np.ndarray:
        """The parameters of the gathered slices (taken first, then widened to float32): per code
        along the quantize axis when that is the gather axis, else per block (see _per_code)."""
        if plan.gather == plan.quantize:
            return widen(np.take(params, rows // block, axis=plan.gather))
        picked = params if params.shape[plan.gather] == 1 else np.take(params, rows, axis=plan.gather)
        return _per_code(widen(picked), plan)

    s = gathered(scales, lambda p: to_wide(p, dtypes.of_array(p)).astype(np.float32, copy=False))
    if plan.gather != plan.quantize:
        codes = _split(codes, plan, block)
    if plan.floating:
        weights = codes
    elif zp is None:  # (the default zero point: 2^(bits-1) for uint8 codes, 0 for int4 / uint4)
        weights = codes - np.float32(1 << (plan.bits - 1)) if dtypes.of_array(data).onnx_name == "uint8" else codes
    else:  # (uint8: zero points packed along the last axis like the codes, cut to the scales' blocks)
        weights = codes - gathered(zp, lambda z: _values(z, plan, count=scales.shape[-1]))
    with np.errstate(all="ignore"):  # (NaN / Inf scales propagate)
        out = weights * s
    if plan.gather != plan.quantize:
        q = plan.quantize
        out = out.reshape(out.shape[:q] + (out.shape[q] * out.shape[q + 1],) + out.shape[q + 2:])
        out = out[(slice(None),) * q + (slice(0, dim),)]
    if not valid.all():
        shape = [1] * out.ndim
        shape[plan.gather] = flat.size
        out = np.where(valid.reshape(shape), out, np.float32(0.0))
    out = np.ascontiguousarray(out, np.float32).reshape(out_shape)  # (a new array: no input's view)
    return [out if call.types[2].dtype.onnx_name == "float" else convert(out, call.types[2].dtype)]


register(OpDef(
    "GatherBlockQuantized",
    (Schema(1, (Input("data", _INT_CODES | _FLOAT_CODES), Input("indices", _types("int32", "int64")),
                Input("scales", _SCALES), Input("zero_points", _INT_CODES | _FLOAT_CODES, optional=True)),
            (Attr("bits", "int", 4), Attr("block_size", "int", 128), Attr("gather_axis", "int", 0),
             Attr("quantize_axis", "int", 1)), _SCALES),),
    _rule, reference=_reference, domain="com.microsoft", chunk=chunks.GATHER_BLOCK_QUANTIZED,
    doc="com.microsoft GatherBlockQuantized: Gather from a block-quantized table, dequantizing the "
        "gathered slices; an index out of range gives zeros."))
