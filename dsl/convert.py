"""Element conversion between any two ONNX types with ONNX Cast semantics.

The choices where implementations disagree live here, in one place:
- float -> float8/float4/e8m0/bfloat16: the numba encoders in kernels.floats (round to
  nearest even, ``saturate`` per the Cast spec tables). A float64 source is rounded once,
  straight from its float64 bits, never through float32.
- float -> int4/uint4/int2/uint2 (out of range is undefined in the spec): truncate toward
  zero; a truncated value outside the type's range, NaN and +-Inf give 0 (onnx's reference
  and the node tests' data, both ml_dtypes >= 0.7: -8.9 -> int4 -8, -9.5 -> 0, 16 -> uint4 0;
  onnxruntime rounds instead). Integer sources wrap.
- float -> standard integer types (out of range is undefined in the spec): truncate toward
  zero; NaN, +-Inf and |x| >= 2**63 give 0; then wrap to the width (uint64 keeps [2**63, 2**64)).
  Platform-independent, and exactly what the generated kernels do.
- float64 -> float16 / bfloat16 rounds once (kernels: round-to-odd float32, then RNE).
- int64 / uint64 -> float8/e8m0/bfloat16 rounds once: the integer goes to float64 rounded
  to odd (exact below 2**53), which the encoders then round correctly.
- A cast to the input's own type is an exact copy (NaN payloads kept), except that
  saturating float8e5m2 -> float8e5m2 sends +-Inf to +-max as the Cast table says.
- string -> number: optional surrounding whitespace around a decimal literal with an optional
  exponent ("3.14", "-1e-5", "1E8", ".5") or, case-insensitively, "INF", "+INF", "-INF",
  "INFINITY" (any sign) and "NaN" (any sign); anything else is an InputError (the spec leaves it
  undefined). The decimal value is rounded ONCE to the target type: float64 by RNE, narrower
  floats through a round-to-odd float64; integer targets truncate the exact decimal toward zero
  ("100.5" -> 100, "2.9999999999999999999" -> 2); NaN, Inf and values outside [-2**63, 2**63)
  give 0 (uint64 keeps [2**63, 2**64)), then the value wraps to the target's width.
- number -> string: numpy's str of each value in its own type, as onnx's reference
  (``astype(str)``): shortest round-trip digits ("0.1" for float32 0.1, "1e+20", "-0.0", "nan",
  "inf", "-inf", "True"/"False" for bool). numpy cannot format the exotic floats; they print as
  numpy's str of their exact value as a float32. bytes elements of a string tensor are UTF-8.
"""
from __future__ import annotations

import re
from decimal import Decimal

import numpy as np

from kernels import floats as float_kernels
from kernels import packed as packed_kernels

from . import dtypes
from .buffers import POOL
from .dtypes import DType
from .errors import InputError
from .tensor import Tensor

# Exotic float formats encoded and decoded by kernels.floats (ONNX spelling).
ENCODED_FLOATS = frozenset({"bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                            "float8e8m0", "float4e2m1"})
ROUND_MODES = ("up", "down", "nearest")
# numba kernels cannot type float16 or the ml_dtypes types: tables of those hold raw bits
_NUMBA_NATIVE = frozenset(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                                np.uint32, np.int64, np.uint64, np.float32, np.float64))
_LITERAL = re.compile(r"\s*(?:(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
                      r"|(?P<sign>[+-]?)(?:(?P<inf>inf(?:inity)?)|(?P<nan>nan)))\s*", re.IGNORECASE | re.ASCII)


def _raw(array: np.ndarray) -> np.ndarray:
    """The bit patterns of an exotic-float array as unsigned ints, flattened, contiguous."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.view(np.uint16 if array.dtype.itemsize == 2 else np.uint8)


def to_wide(array: np.ndarray, src: DType) -> np.ndarray:
    """An array of a standard numpy type holding exactly the same values
    (exotic floats -> float32, sub-byte ints -> int8/uint8, strings -> float64)."""
    if src.onnx_name in ENCODED_FLOATS:
        decoded = float_kernels.decode(_raw(array), src.onnx_name, np.float32, empty=POOL.empty)
        return decoded.reshape(array.shape)
    if src.packed:
        return array.astype(np.int8 if src.kind == "int" else np.uint8)
    if src.kind == "string":
        return _parse_strings(array, round_to_odd=False)
    return array


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _match(text: str) -> re.Match:
    found = _LITERAL.fullmatch(text)
    if found is None:
        raise InputError(f"Cast: string {text!r} is not a number; expected a decimal or scientific "
                         f"literal, INF, +INF, -INF or NaN")
    return found


def _parse_strings(array: np.ndarray, round_to_odd: bool) -> np.ndarray:
    """float64 values of number strings: correctly rounded, or rounded to odd (so that one more
    rounding to any narrower float is correct: 53 >= 24 + 2)."""
    out = np.empty(array.shape, np.float64)
    flat_out = out.reshape(-1)
    for index, value in enumerate(array.reshape(-1)):
        found = _match(_text(value))
        number = found.group("number")
        if number is None:
            special = np.inf if found.group("inf") else np.nan
            flat_out[index] = -special if found.group("sign") == "-" else special
            continue
        nearest = float(number)
        if round_to_odd and np.isfinite(nearest):
            exact = Decimal(number)
            if exact != Decimal(nearest) and np.array(nearest).view(np.uint64) & 1 == 0:
                nearest = float(np.nextafter(nearest, np.inf if exact > Decimal(nearest) else -np.inf))
        flat_out[index] = nearest
    return out


def _strings_to_ints(array: np.ndarray, np_dtype) -> np.ndarray:
    """Number strings as integers: the exact decimal truncated toward zero; NaN, Inf and values
    outside [-2**63, 2**63) give 0 (uint64 keeps [2**63, 2**64)). Wrapping is the caller's."""
    unsigned64 = np.dtype(np_dtype) == np.uint64
    out = np.empty(array.shape, np.uint64 if unsigned64 else np.int64)
    flat_out = out.reshape(-1)
    for index, value in enumerate(array.reshape(-1)):
        number = _match(_text(value)).group("number")
        whole = 0
        if number is not None:
            exact = Decimal(number)
            whole = int(exact) if exact.adjusted() < 20 else 0  # int() of 1e999999999 never ends
            in_range = -2 ** 63 <= whole < 2 ** 63 or (unsigned64 and 0 <= whole < 2 ** 64)
            whole = whole if in_range else 0
        flat_out[index] = whole % 2 ** 64 if unsigned64 else whole
    return out


def _to_strings(array: np.ndarray, src: DType) -> np.ndarray:
    if src.kind == "string":
        values = [_text(value) for value in array.reshape(-1)]
    else:
        # numpy's formatting in the value's own type (exotic floats: their exact float32 value)
        numbers = to_wide(array, src) if src.onnx_name in ENCODED_FLOATS or src.packed else array
        values = [str(text) for text in np.asarray(numbers).astype(np.str_).reshape(-1)]
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(array.shape)


def _wrap_bits(values: np.ndarray, dst: DType) -> np.ndarray:
    """Integers (int64 / uint64) wrapped to a sub-byte integer type (two's complement)."""
    mask = (1 << dst.bits) - 1
    low = (values & values.dtype.type(mask)).astype(np.int16)
    if dst.kind == "int":
        half = 1 << (dst.bits - 1)
        low = (low ^ half) - half
    return low.astype(dst.np_dtype)


def _outside(whole: np.ndarray, dst: DType) -> np.ndarray:
    """Where truncated floats fall outside sub-byte integer type ``dst``'s range."""
    low = -(1 << (dst.bits - 1)) if dst.kind == "int" else 0
    high = (1 << (dst.bits - 1)) - 1 if dst.kind == "int" else (1 << dst.bits) - 1
    return (whole < low) | (whole > high)


def _int_to_float64_odd(values: np.ndarray) -> np.ndarray:
    """int64 / uint64 as float64 rounded to odd: exact below 2**53, and beyond it one more
    rounding to any float of <= 51 significant bits is the correct rounding of the integer."""
    low = values & values.dtype.type(0xFFFFFFFF)
    high_f = (values - low).astype(np.float64)  # a multiple of 2**32 with <= 32 significant bits: exact
    low_f = low.astype(np.float64)  # in [0, 2**32): exact
    nearest = high_f + low_f
    error = (high_f - nearest) + low_f  # exact (Fast2Sum: |high_f| >= |low_f| or high_f == 0)
    even = (nearest.view(np.uint64) & np.uint64(1)) == 0
    fix = (error != 0) & even
    if fix.any():
        nearest[fix] = np.nextafter(nearest[fix], np.where(error[fix] > 0, np.inf, -np.inf))
    return nearest


def convert(array: np.ndarray, dst: DType, *, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Cast ``array`` (any ONNX element type, ml_dtypes for the exotic ones) to ``dst``.

    Returns a new array of ``dst.np_dtype`` (never a view of the input).
    """
    src = dtypes.of_array(array)
    if dst.kind == "string":
        return _to_strings(array, src)
    if src == dst and not (saturate and dst.onnx_name == "float8e5m2"):  # saturating sends Inf to max
        return np.array(array, dtype=dst.np_dtype, copy=True)
    if src.kind == "string":
        if dst.kind in ("int", "uint"):
            whole = _strings_to_ints(array, dst.np_dtype)
            return _wrap_bits(whole, dst) if dst.packed else whole.astype(dst.np_dtype)
        wide = _parse_strings(array, round_to_odd=dst.np_dtype != np.float64)
    else:
        wide = to_wide(array, src)
    if dst.onnx_name in ENCODED_FLOATS:
        if wide.dtype in (np.int64, np.uint64):
            wide = _int_to_float64_odd(wide)
        elif wide.dtype not in (np.float32, np.float64):
            wide = wide.astype(np.float32 if wide.dtype in (np.float16, np.bool_) else np.float64)
        codes = float_kernels.encode(np.ascontiguousarray(wide).reshape(-1), dst.onnx_name,
                                     saturate=saturate, round_mode=round_mode, empty=POOL.empty)
        return codes.view(dst.np_dtype).reshape(array.shape)
    if wide.dtype.kind == "f" and dst.kind in ("int", "uint"):
        whole = float_to_int(wide, np.uint64 if dst.np_dtype == np.uint64 else np.int64)
        if dst.packed:
            return _wrap_bits(np.where(_outside(whole, dst), 0, whole), dst)
        return whole.astype(dst.np_dtype)
    with np.errstate(all="ignore"):  # a fresh intermediate (e.g. decoded floats) is returned as is
        return wide.astype(dst.np_dtype, copy=wide is array)


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
    - float / int array -> packed int4/uint4/int2/uint2: truncate (or wrap) and pack in one pass.
    """
    src = tensor.dtype
    contiguous = tensor.view.is_contiguous
    if src.packed and not dst.packed and dst.kind != "string" and contiguous:
        values = _element_values(src, dst)
        native = dst.np_dtype in _NUMBA_NATIVE
        raw = dst.np_dtype if native else np.dtype(f"u{dst.np_dtype.itemsize}")
        table = packed_kernels.byte_table(values if native else values.view(raw), src.bits)
        out = POOL.empty(tensor.size, raw)
        packed_kernels.unpack_values(tensor.buffer, tensor.view.offset, tensor.size, table, out)
        return Tensor.from_numpy(out.view(dst.np_dtype).reshape(tensor.shape))
    if dst.packed and dst.kind in ("int", "uint") and not src.packed and src.kind in ("int", "uint", "float") \
            and src.onnx_name not in ENCODED_FLOATS:
        flat = np.ascontiguousarray(tensor.numpy()).reshape(-1)
        if flat.dtype == np.float16:  # numba has no float16; float32 holds every value exactly
            flat = flat.astype(np.float32)
        out = np.empty(dst.packed_nbytes(flat.size), np.uint8)
        if src.kind == "float":
            packed_kernels.pack_floats(flat, dst.bits, out, dst.kind == "int")
        else:
            packed_kernels.pack_ints(flat, dst.bits, out)
        return Tensor.from_packed(out, dst, tensor.shape)
    return None
