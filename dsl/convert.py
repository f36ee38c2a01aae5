"""Element conversion between any two ONNX types with ONNX Cast semantics.

The choices where implementations disagree live here, in one place:
- float -> float8/float4/e8m0/bfloat16: the numba encoders in kernels.floats (round to
  nearest even, ``saturate`` per the Cast spec tables). A float64 source is rounded once,
  straight from its float64 bits, never through float32.
- float -> int4/uint4/int2/uint2: truncate toward zero, then wrap to the bit width
  (onnx's reference and the node tests' data; onnxruntime rounds instead). NaN and Inf
  give 0. Integer sources wrap.
- float -> standard integer types: out of range is undefined in the spec; we give numpy's
  C cast result (no error, no warning).
- integers wider than 2**53 converted to a float8/bfloat16 type go through float64.
- string -> number: Python float() parsing ("1e-5", "INF", "-inf", "NaN", any case), then
  the numeric rule; number -> string: shortest round-trip repr (numpy's str of the value).
"""
from __future__ import annotations

import numpy as np

from kernels import floats as float_kernels

from . import dtypes
from .dtypes import DType
from .errors import InputError

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
    with np.errstate(all="ignore"):
        return wide.astype(dst.np_dtype)
