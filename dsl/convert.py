"""Element conversion between any two ONNX types with ONNX Cast semantics.

The choices where implementations disagree live here, in one place:
- float -> float8/float4/e8m0/bfloat16: the numba encoders in kernels.floats (round to
  nearest even, ``saturate`` per the Cast spec tables). A float64 source is rounded once,
  straight from its float64 bits, never through float32.
- float -> int4/uint4/int2/uint2: truncate toward zero, then wrap to the bit width
  (onnx's reference and the node tests' data; onnxruntime rounds instead). NaN and Inf
  give 0. Integer sources wrap.
- float -> standard integer types (out of range is undefined in the spec): truncate toward
  zero; NaN, +-Inf and |x| >= 2**63 give 0; then wrap to the width (uint64 keeps [2**63, 2**64)).
  Platform-independent, and exactly what the generated kernels do.
- float64 -> float16 / bfloat16 rounds once (kernels: round-to-odd float32, then RNE).
- integers wider than 2**53 converted to a float8/bfloat16 type go through float64.
- string -> number: Python float() parsing ("1e-5", "INF", "-inf", "NaN", any case), then
  the numeric rule; number -> string: shortest round-trip repr (numpy's str of the value).
"""
from __future__ import annotations

import numpy as np

from kernels import floats as float_kernels
from kernels import packed as packed_kernels

from . import dtypes
from .dtypes import DType
from .errors import InputError
from .tensor import Tensor

# Exotic float formats encoded and decoded by kernels.floats (ONNX spelling).
ENCODED_FLOATS = frozenset({"bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                            "float8e8m0", "float4e2m1"})
ROUND_MODES = ("up", "down", "nearest")


def _raw(array: np.ndarray) -> np.ndarray:
    """The bit patterns of an exotic-float array as unsigned ints, flattened, contiguous."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.view(np.uint16 if array.dtype.itemsize == 2 else np.uint8)


def to_wide(array: np.ndarray, src: DType) -> np.ndarray:
    """An array of a standard numpy type holding exactly the same values
    (exotic floats -> float32, sub-byte ints -> int8/uint8, strings -> float64)."""
    if src.onnx_name in ENCODED_FLOATS:
        decoded = float_kernels.decode(_raw(array), src.onnx_name, np.float32)
        return decoded.reshape(array.shape)
    if src.packed:
        return array.astype(np.int8 if src.kind == "int" else np.uint8)
    if src.kind == "string":
        return _parse_strings(array)
    return array


def _parse_strings(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, np.float64)
    flat_out = out.reshape(-1)
    for index, text in enumerate(array.reshape(-1)):
        text = text.decode() if isinstance(text, bytes) else str(text)
        try:
            flat_out[index] = float(text)
        except ValueError:
            raise InputError(f"Cast: string {text!r} is not a number; expected a decimal or "
                             f"scientific literal, INF, -INF or NaN") from None
    return out


def _to_strings(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=object)
    flat = out.reshape(-1)
    for index, value in enumerate(array.reshape(-1)):
        flat[index] = str(value.item() if hasattr(value, "item") else value)
    return out


def convert(array: np.ndarray, dst: DType, *, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Cast ``array`` (any ONNX element type, ml_dtypes for the exotic ones) to ``dst``.

    Returns a new array of ``dst.np_dtype`` (never a view of the input).
    """
    src = dtypes.of_array(array)
    if dst.kind == "string":
        return _to_strings(to_wide(array, src) if src.onnx_name in ENCODED_FLOATS else array)
    wide = to_wide(array, src)
    if dst.onnx_name in ENCODED_FLOATS:
        if wide.dtype not in (np.float32, np.float64):
            wide = wide.astype(np.float32 if wide.dtype in (np.float16, np.bool_) else np.float64)
        codes = float_kernels.encode(np.ascontiguousarray(wide).reshape(-1), dst.onnx_name,
                                     saturate=saturate, round_mode=round_mode)
        return codes.view(dst.np_dtype).reshape(array.shape)
    if wide.dtype.kind == "f" and dst.kind in ("int", "uint") and not dst.packed:
        return float_to_int(wide, dst.np_dtype)
    with np.errstate(all="ignore"):
        return wide.astype(dst.np_dtype)


def float_to_int(values: np.ndarray, np_dtype) -> np.ndarray:
    """Truncate toward zero; NaN, +-Inf and |x| >= 2**63 become 0; wrap to ``np_dtype``."""
    with np.errstate(all="ignore"):
        whole = np.trunc(values.astype(np.float64))
        big_unsigned = (whole >= 2.0 ** 63) & (whole < 2.0 ** 64) if np.dtype(np_dtype) == np.uint64 else None
        bad = ~np.isfinite(whole) | (np.abs(whole) >= 2.0 ** 63)
        result = np.where(bad, 0.0, whole).astype(np.int64).astype(np_dtype)
        if big_unsigned is not None and big_unsigned.any():
            result[big_unsigned] = whole[big_unsigned].astype(np.uint64)
    return result


def _element_values(src: DType, dst: DType) -> np.ndarray:
    """The value of every code of a packed type, already converted to ``dst``."""
    codes = np.arange(1 << src.bits, dtype=np.uint8).view(src.np_dtype)
    return convert(codes, dst)


def convert_tensor(tensor: Tensor, dst: DType, *, saturate: bool = True, round_mode: str = "up"):
    """Cast a Tensor without unpacking through an intermediate array where a direct kernel
    exists; returns a Tensor (packed when ``dst`` is) or None when no direct path applies.

    - packed -> any byte-or-wider numeric type: one 256-row byte table lookup per byte;
    - float / int array -> packed int4/uint4/int2/uint2: truncate, wrap and pack in one pass.
    """
    src = tensor.dtype
    contiguous = tensor.view.is_contiguous
    if src.packed and not dst.packed and dst.kind not in ("string",) and contiguous:
        values = _element_values(src, dst)
        raw = np.dtype(np.uint16) if dst.np_dtype.itemsize == 2 and dst.kind == "float" else dst.np_dtype
        table = packed_kernels.byte_table(values.view(raw) if raw != dst.np_dtype else values, src.bits)
        out = np.empty(tensor.size, raw)
        packed_kernels.unpack_values(tensor.buffer, tensor.view.offset, tensor.size, table, out)
        return Tensor.from_numpy(out.view(dst.np_dtype).reshape(tensor.shape))
    if dst.packed and dst.kind in ("int", "uint") and not src.packed and src.kind in ("int", "uint", "float") \
            and src.onnx_name not in ENCODED_FLOATS:
        flat = np.ascontiguousarray(tensor.numpy()).reshape(-1)
        out = np.empty(dst.packed_nbytes(flat.size), np.uint8)
        (packed_kernels.pack_floats if src.kind == "float" else packed_kernels.pack_ints)(flat, dst.bits, out)
        return Tensor.from_packed(out, dst, tensor.shape)
    return None
