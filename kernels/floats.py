"""Encode and decode the narrow float formats (float8, float4e2m1, float8e8m0, bfloat16) as raw codes."""
import functools
import math
from typing import NamedTuple

import numba
import numpy as np

from .parallel import threads as allowed_threads

# Below this many elements a prange loop costs more in thread start-up than it saves.
PARALLEL_THRESHOLD = 1 << 16

ROUND_UP, ROUND_DOWN, ROUND_NEAREST = 0, 1, 2
_ROUND_MODES = {"up": ROUND_UP, "down": ROUND_DOWN, "nearest": ROUND_NEAREST}


class Minifloat(NamedTuple):
    """A sign-exponent-mantissa format whose magnitude codes 0..max_code increase with value."""

    mbits: int
    bias: int
    max_code: int  # magnitude code of the largest finite value
    sign_bit: int
    signed_zero: bool  # False for fnuz: -0 and -tiny encode as +0, and the -0 code is NaN
    has_inf: bool  # magnitude code max_code + 1 is Inf
    nan: tuple  # codes written for (+NaN, -NaN)
    overflow: tuple  # codes for (+, -) overflow and Inf when not saturating
    saturate_applies: bool  # Cast's `saturate` attribute covers float8 types only


MINIFLOATS = {
    "float8e4m3fn": Minifloat(3, 7, 0x7E, 0x80, True, False, (0x7F, 0xFF), (0x7F, 0xFF), True),
    "float8e4m3fnuz": Minifloat(3, 8, 0x7F, 0x80, False, False, (0x80, 0x80), (0x80, 0x80), True),
    "float8e5m2": Minifloat(2, 15, 0x7B, 0x80, True, True, (0x7E, 0xFE), (0x7C, 0xFC), True),
    "float8e5m2fnuz": Minifloat(2, 16, 0x7F, 0x80, False, False, (0x80, 0x80), (0x80, 0x80), True),
    # float4e2m1 always saturates. Its NaN codes are those of onnx's shipped Cast test data (made
    # by ml_dtypes): +NaN -> 0x8 (-0), -NaN -> 0x0 (+0).
    "float4e2m1": Minifloat(1, 1, 0x7, 0x8, True, False, (0x8, 0x0), (0x7, 0xF), False),
    # bfloat16 NaN keeps the sign and drops the payload (quiet NaN 0x7FC0); overflow is Inf.
    "bfloat16": Minifloat(7, 127, 0x7F7F, 0x8000, True, True, (0x7FC0, 0xFFC0), (0x7F80, 0xFF80), False),
}
FORMATS = (*MINIFLOATS, "float8e8m0", "float16")


# ---------------------------------------------------------------- decoding


def _minifloat_value(code: int, fmt: Minifloat) -> float:
    """Exact value of ``code`` from the format definition (Python floats are exact here)."""
    negative = bool(code & fmt.sign_bit)
    magnitude = code & (fmt.sign_bit - 1)
    if magnitude > fmt.max_code:
        value = math.inf if fmt.has_inf and magnitude == fmt.max_code + 1 else math.nan
    elif negative and magnitude == 0 and not fmt.signed_zero:
        return -math.nan  # fnuz: the would-be -0 is the only NaN; negative, as ml_dtypes decodes it
    else:
        exponent, mantissa = magnitude >> fmt.mbits, magnitude & ((1 << fmt.mbits) - 1)
        if exponent == 0:
            value = math.ldexp(mantissa, 1 - fmt.bias - fmt.mbits)
        else:
            value = math.ldexp(mantissa | 1 << fmt.mbits, exponent - fmt.bias - fmt.mbits)
    return -value if negative else value


@functools.lru_cache(maxsize=None)
def decode_table(fmt: str) -> np.ndarray:
    """Read-only float32 value of every code of an 8-bit or 4-bit float format.

    Args:
        fmt: ONNX spelling of a float8 type, 'float8e8m0' or 'float4e2m1'.
    Returns:
        256 entries (16 for float4e2m1), exact; NaN codes hold NaN.
    Raises:
        ValueError: for any other format.
    Example:
        >>> float(decode_table("float8e4m3fn")[0x7E])
        448.0
    """
    if fmt == "float8e8m0":  # 2^(code - 127); 0xFF is NaN, there is no zero and no sign
        values = [math.ldexp(1.0, code - 127) for code in range(255)] + [math.nan]
    elif fmt in MINIFLOATS and MINIFLOATS[fmt].sign_bit <= 0x80:
        spec = MINIFLOATS[fmt]
        values = [_minifloat_value(code, spec) for code in range(2 * spec.sign_bit)]
    else:
        raise ValueError(f"no decode table for float format {fmt!r}")
    table = np.array(values, np.float32)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=None)
def _lookup_table(fmt: str, dtype: type) -> np.ndarray:
    """256-entry table indexable by any uint8 (float4 codes use their low nibble), so lookup is safe."""
    table = decode_table(fmt)
    return np.resize(table, 256).astype(dtype)


@numba.njit(cache=True, nogil=True)
def lookup_seq(codes, table, out):
    """out[i] = table[codes[i]]; ``table`` has 256 entries."""
    for i in range(codes.shape[0]):
        out[i] = table[codes[i]]


@numba.njit(cache=True, nogil=True, parallel=True)
def lookup_par(codes, table, out):
    """Parallel lookup_seq."""
    for i in numba.prange(codes.shape[0]):
        out[i] = table[codes[i]]


@numba.njit(cache=True, nogil=True)
def widen_bfloat16_seq(bits16, bits32):
    """bfloat16 bits -> float32 bits: bfloat16 is the top half of a float32."""
    for i in range(bits16.shape[0]):
        bits32[i] = np.uint32(bits16[i]) << 16


@numba.njit(cache=True, nogil=True, parallel=True)
def widen_bfloat16_par(bits16, bits32):
    """Parallel widen_bfloat16_seq."""
    for i in numba.prange(bits16.shape[0]):
        bits32[i] = np.uint32(bits16[i]) << 16


def decode(codes: np.ndarray, fmt: str, out_dtype=np.float32, empty=np.empty) -> np.ndarray:
    """Values of an array of codes, same shape (exact: every format here fits in float32).

    Args:
        codes: uint8 codes (float4e2m1 unpacked, one code per byte, low nibble used), or uint16
            bits for 'bfloat16' and 'float16'. Any dtype of that item size (an ml_dtypes array)
            is read as its raw bits.
        fmt: ONNX spelling of the format, one of FORMATS.
        out_dtype: np.float32 or np.float64.
        empty: allocator ``empty(count, dtype)`` for the flat result (a buffer pool may reuse memory).
    Returns:
        A new array of out_dtype.
    Raises:
        ValueError: unknown format, output dtype or code item size.
    Example:
        >>> decode(np.array([0x38, 0xFE], np.uint8), "float8e4m3fn")
        array([   1., -448.], dtype=float32)
    """
    out_dtype = np.dtype(out_dtype).type
    if out_dtype not in (np.float32, np.float64):
        raise ValueError(f"decode: out_dtype must be float32 or float64, got {out_dtype}")
    width = np.uint16 if fmt in ("bfloat16", "float16") else np.uint8
    if codes.dtype.itemsize != np.dtype(width).itemsize:  # a wider index would read past the table
        itemsize = np.dtype(width).itemsize
        raise ValueError(f"decode: {fmt} codes must be {itemsize}-byte, got {codes.dtype}")
    flat = np.ascontiguousarray(codes).reshape(-1).view(width)  # one compiled layout, any shape
    with np.errstate(invalid="ignore"):  # signalling NaN payloads widen quietly, as ml_dtypes does
        return _decode_flat(flat, fmt, out_dtype, empty).reshape(codes.shape)


def _decode_flat(codes, fmt, out_dtype, empty):
    if fmt == "float16":
        return codes.view(np.float16).astype(out_dtype)
    parallel = codes.shape[0] >= PARALLEL_THRESHOLD and allowed_threads() > 1
    if fmt == "bfloat16":
        bits32 = np.empty(codes.shape[0], np.uint32)
        (widen_bfloat16_par if parallel else widen_bfloat16_seq)(codes, bits32)
        return bits32.view(np.float32).astype(out_dtype, copy=False)
    if fmt not in MINIFLOATS and fmt != "float8e8m0":
        raise ValueError(f"decode: unknown float format {fmt!r}; expected one of {FORMATS}")
    out = empty(codes.shape[0], out_dtype)
    (lookup_par if parallel else lookup_seq)(codes, _lookup_table(fmt, out_dtype), out)
    return out


# ---------------------------------------------------------------- encoding to sign/exponent/mantissa
# Kernels receive the format as a tuple of ints, so one compiled signature serves every format
# (the float64 kernel gets a second one for uint16 bfloat16 output):
# (mbits, bias, max_code, sign_bit, signed_zero, nan_pos, nan_neg, overflow_pos, overflow_neg).


@numba.njit(cache=True, nogil=True)
def _round_to_code(significand, lsb_exp, top_exp, mbits, bias):
    """Magnitude code of significand * 2^lsb_exp (leading bit at 2^top_exp), rounded to nearest even.

    The code may exceed max_code: the caller treats that as overflow. Rounding up into the next
    binade (or from the largest subnormal to the smallest normal) is just a carry into the exponent.
    """
    target_exp = max(top_exp, 1 - bias)  # below the normal range the quantum stays fixed: subnormals
    shift = min(target_exp - mbits - lsb_exp, 62)  # >= 16 for every format here; past 54 all bits drop
    kept = significand >> shift
    rest = significand - (kept << shift)
    half = np.int64(1) << (shift - 1)
    if rest > half or (rest == half and (kept & 1) == 1):
        kept += 1
    return ((target_exp + bias - 1) << mbits) + kept


@numba.njit(cache=True, nogil=True)
def _finish_code(code, negative, params):
    """Apply overflow, signed zero and sign to a magnitude code."""
    max_code, sign_bit, signed_zero = params[2], params[3], params[4]
    if code > max_code:
        return params[8] if negative else params[7]
    if not negative or (code == 0 and not signed_zero):
        return code
    return code | sign_bit


@numba.njit(cache=True, nogil=True)
def _minifloat_from_f32(word, params):
    """Code of the float32 with bits ``word`` (an int64 holding 32 bits)."""
    negative = (word >> 31) != 0
    magnitude = word & 0x7FFFFFFF
    if magnitude > 0x7F800000:
        return params[6] if negative else params[5]
    if magnitude == 0x7F800000:
        code = params[2] + 1  # every Cast table treats Inf like an overflowing finite value
    elif magnitude < 0x00800000:  # float32 subnormal: no hidden bit
        code = _round_to_code(magnitude, -149, -127, params[0], params[1])
    else:
        exp_field = magnitude >> 23
        significand = (magnitude & 0x7FFFFF) | 0x800000
        code = _round_to_code(significand, exp_field - 150, exp_field - 127, params[0], params[1])
    return _finish_code(code, negative, params)


@numba.njit(cache=True, nogil=True)
def _minifloat_from_f64(word, params):
    """Code of the float64 with bits ``word`` (int64), rounded once from the 53-bit significand."""
    negative = word < 0
    magnitude = word & 0x7FFFFFFFFFFFFFFF
    if magnitude > 0x7FF0000000000000:
        return params[6] if negative else params[5]
    if magnitude == 0x7FF0000000000000:
        code = params[2] + 1
    elif magnitude < 0x0010000000000000:  # float64 subnormal: far below every target's range
        code = _round_to_code(magnitude, -1074, -1023, params[0], params[1])
    else:
        exp_field = magnitude >> 52
        significand = (magnitude & 0xFFFFFFFFFFFFF) | 0x10000000000000
        code = _round_to_code(significand, exp_field - 1075, exp_field - 1023, params[0], params[1])
    return _finish_code(code, negative, params)


@numba.njit(cache=True, nogil=True)
def encode_minifloat_f32_seq(bits, params, out):
    """out[i] = code of float32 bits[i] (uint32) in the format ``params``."""
    for i in range(bits.shape[0]):
        out[i] = _minifloat_from_f32(np.int64(bits[i]), params)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_minifloat_f32_par(bits, params, out):
    """Parallel encode_minifloat_f32_seq."""
    for i in numba.prange(bits.shape[0]):
        out[i] = _minifloat_from_f32(np.int64(bits[i]), params)


@numba.njit(cache=True, nogil=True)
def encode_minifloat_f64_seq(bits, params, out):
    """out[i] = code of float64 bits[i] (uint64) in the format ``params``."""
    for i in range(bits.shape[0]):
        out[i] = _minifloat_from_f64(np.int64(bits[i]), params)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_minifloat_f64_par(bits, params, out):
    """Parallel encode_minifloat_f64_seq."""
    for i in numba.prange(bits.shape[0]):
        out[i] = _minifloat_from_f64(np.int64(bits[i]), params)


@numba.njit(cache=True, nogil=True)
def _bfloat16_from_f32(word):
    """bfloat16 bits of the float32 with bits ``word`` (int64), rounded to nearest even.

    The carry trick gives the same codes as _round_to_code, about twice as fast; overflow carries
    into the Inf code by itself.
    """
    if word & 0x7FFFFFFF > 0x7F800000:
        return (word >> 16) & 0x8000 | 0x7FC0
    return (word + 0x7FFF + ((word >> 16) & 1)) >> 16


@numba.njit(cache=True, nogil=True)
def encode_bfloat16_f32_seq(bits, out):
    """out[i] = bfloat16 bits (uint16) of float32 bits[i] (uint32)."""
    for i in range(bits.shape[0]):
        out[i] = _bfloat16_from_f32(np.int64(bits[i]))


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_bfloat16_f32_par(bits, out):
    """Parallel encode_bfloat16_f32_seq."""
    for i in numba.prange(bits.shape[0]):
        out[i] = _bfloat16_from_f32(np.int64(bits[i]))


def minifloat_params(fmt: str, saturate: bool) -> tuple:
    """The kernel parameter tuple of a sign/exponent/mantissa format."""
    spec = MINIFLOATS[fmt]
    if spec.saturate_applies and saturate:
        overflow = (spec.max_code, spec.max_code | spec.sign_bit)
    else:
        overflow = spec.overflow
    signed_zero = int(spec.signed_zero)
    return (spec.mbits, spec.bias, spec.max_code, spec.sign_bit, signed_zero, *spec.nan, *overflow)


# ---------------------------------------------------------------- encoding to float8e8m0
# Cast-24+ spec text (onnx/defs/tensor/defs.cc, onnx 1.23), followed here:
#   "`up`: round to nearest value away from zero, `down`: round to nearest value towards zero,
#    `nearest`: round to nearest value and ties round up."
#   "Casting negative values to FLOAT8E8M0 gives undefined behavior."
#   | x            | saturate + up | non-saturate + nearest |
#   | 0            | 0             | NaN                    |
#   | -0           | Unspecified   | Unspecified            |
#   | NaN          | NaN           | NaN                    |
#   | Inf          | E8M0_MAX      | NaN                    |
#   | x > E8M0_MAX | E8M0_MAX      | NaN                    |
#   | x < E8M0_MIN | E8M0_MIN      | NaN                    |
#   | x < 0        | Unspecified   | Unspecified            |
# Choices (one rule for every round_mode / saturate pair, matching both columns):
# - Range is judged on x itself, before rounding (this table says x where the float8 table says
#   [x]): x > 2^127 (+Inf included) -> 0xFE saturating, 0xFF (NaN) otherwise; x < 2^-127 -> 0x00
#   (E8M0_MIN, the table's "0") saturating, NaN otherwise. x < 2^-127 covers 0, the float32
#   subnormals below 2^-127 and, for the unspecified rows, -0 and every negative x (-Inf too).
#   Inside [2^-127, 2^127] every mode rounds to a representable value.
# - NaN (any sign or payload) -> 0xFF.
# - Float32 subnormals in [2^-127, 2^-126) round like any other value: down -> 0x00, up -> 0x01
#   unless exactly 2^-127, nearest -> 0x01 from 1.5 * 2^-127 on.
# - "nearest": the tie between 2^k and 2^(k+1) is their arithmetic midpoint 1.5 * 2^k, rounded up.
# - A float64 x is rounded once from its own bits (not via float32).
# onnxruntime 1.32 gives the same codes on every edge case tested. onnx 1.23's reference
# (numpy_helper.to_float8e8m0) differs: Inf -> NaN even when saturating; no NaN for 0, tiny or
# huge x without saturation; "up" sends every nonzero float32 subnormal to 0x01 (even 2^-127),
# "nearest" rounds subnormals above 2^-127 up; negatives encode as |x|; float64 goes via float32.


@numba.njit(cache=True, nogil=True)
def _e8m0_round(floor_code, fraction, fraction_bits, round_mode):
    """Round 2^(floor_code - 127) * (1 + fraction / 2^fraction_bits) to a power of two."""
    if round_mode == ROUND_UP:
        return floor_code + (1 if fraction != 0 else 0)
    if round_mode == ROUND_NEAREST:
        return floor_code + (1 if fraction >= np.int64(1) << (fraction_bits - 1) else 0)
    return floor_code


@numba.njit(cache=True, nogil=True)
def _e8m0_from_f32(word, saturate, round_mode):
    """float8e8m0 code of the float32 with bits ``word`` (int64); see the block above."""
    magnitude = word & 0x7FFFFFFF
    if magnitude > 0x7F800000:
        return 0xFF
    if magnitude < 0x00400000 or (word >> 31) != 0:  # below 2^-127: zero and negatives included
        return 0x00 if saturate else 0xFF
    if magnitude > 0x7F000000:  # above 2^127, Inf included
        return 0xFE if saturate else 0xFF
    if magnitude < 0x00800000:  # subnormal in [2^-127, 2^-126): fraction relative to 2^-127
        return _e8m0_round(0, (magnitude << 1) & 0x7FFFFF, 23, round_mode)
    return _e8m0_round(magnitude >> 23, magnitude & 0x7FFFFF, 23, round_mode)


@numba.njit(cache=True, nogil=True)
def _e8m0_from_f64(word, saturate, round_mode):
    """float8e8m0 code of the float64 with bits ``word`` (int64); see the block above."""
    magnitude = word & 0x7FFFFFFFFFFFFFFF
    if magnitude > 0x7FF0000000000000:
        return 0xFF
    if magnitude < 896 << 52 or word < 0:  # below 2^-127 (1023 - 127): zero and negatives included
        return 0x00 if saturate else 0xFF
    if magnitude > 1150 << 52:  # above 2^127 (biased exponent 1023 + 127), Inf included
        return 0xFE if saturate else 0xFF
    return _e8m0_round((magnitude >> 52) - 896, magnitude & 0xFFFFFFFFFFFFF, 52, round_mode)


@numba.njit(cache=True, nogil=True)
def encode_e8m0_f32_seq(bits, saturate, round_mode, out):
    """out[i] = float8e8m0 code of float32 bits[i] (uint32)."""
    for i in range(bits.shape[0]):
        out[i] = _e8m0_from_f32(np.int64(bits[i]), saturate, round_mode)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_e8m0_f32_par(bits, saturate, round_mode, out):
    """Parallel encode_e8m0_f32_seq."""
    for i in numba.prange(bits.shape[0]):
        out[i] = _e8m0_from_f32(np.int64(bits[i]), saturate, round_mode)


@numba.njit(cache=True, nogil=True)
def encode_e8m0_f64_seq(bits, saturate, round_mode, out):
    """out[i] = float8e8m0 code of float64 bits[i] (uint64)."""
    for i in range(bits.shape[0]):
        out[i] = _e8m0_from_f64(np.int64(bits[i]), saturate, round_mode)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_e8m0_f64_par(bits, saturate, round_mode, out):
    """Parallel encode_e8m0_f64_seq."""
    for i in numba.prange(bits.shape[0]):
        out[i] = _e8m0_from_f64(np.int64(bits[i]), saturate, round_mode)


# ---------------------------------------------------------------- public encoder

_KERNELS = {  # (family, source dtype) -> (sequential, parallel)
    ("minifloat", np.float32): (encode_minifloat_f32_seq, encode_minifloat_f32_par),
    ("minifloat", np.float64): (encode_minifloat_f64_seq, encode_minifloat_f64_par),
    ("e8m0", np.float32): (encode_e8m0_f32_seq, encode_e8m0_f32_par),
    ("e8m0", np.float64): (encode_e8m0_f64_seq, encode_e8m0_f64_par),
    ("bfloat16", np.float32): (encode_bfloat16_f32_seq, encode_bfloat16_f32_par),
}
_BITS = {np.float32: np.uint32, np.float64: np.uint64}


def encode(x: np.ndarray, fmt: str, saturate: bool = True, round_mode: str = "up", empty=np.empty) -> np.ndarray:
    """Codes of a float32 or float64 array in a narrow float format (same shape), with ONNX Cast semantics.

    Rounds to nearest even (subnormals too), once, from the source's own bits: a float64 source
    is never rounded to float32 first (ml_dtypes and onnx's reference do, and so differ on values
    just off a midpoint). ``saturate`` applies to the float8 types (e8m0 included); float4e2m1
    always saturates, bfloat16 and float16 overflow to Inf. ``round_mode`` applies to float8e8m0
    only; its rules at 0, Inf, NaN, subnormals and negatives are in the comment block above
    ``_e8m0_round``.

    Args:
        x: float32 or float64 array of any shape.
        fmt: ONNX spelling of the target, one of FORMATS.
        saturate: Cast's `saturate` attribute.
        round_mode: Cast's `round_mode` attribute: 'up', 'down' or 'nearest'.
    Returns:
        New uint8 codes (float4e2m1 unpacked, one per byte), or uint16 bits for bfloat16/float16.
    Raises:
        ValueError: unknown format or round mode, or a source dtype other than float32/float64.
    Example:
        >>> encode(np.array([464.0, 500.0], np.float32), "float8e4m3fn", saturate=False)
        array([126, 127], dtype=uint8)
    """
    source = x.dtype.type
    if source not in _BITS:
        raise ValueError(f"encode: source must be float32 or float64, got {x.dtype}")
    if fmt == "float16":
        return x.astype(np.float16).view(np.uint16)  # numpy rounds once, IEEE RNE, to Inf
    bits = np.ascontiguousarray(x).reshape(-1).view(_BITS[source])  # one compiled layout
    return _encode_flat(bits, source, fmt, saturate, round_mode, empty).reshape(x.shape)


def _encode_flat(bits, source, fmt, saturate, round_mode, empty=np.empty):
    parallel = bits.shape[0] >= PARALLEL_THRESHOLD and allowed_threads() > 1
    if fmt == "float8e8m0":
        if round_mode not in _ROUND_MODES:
            expected = sorted(_ROUND_MODES)
            raise ValueError(f"encode: round_mode must be one of {expected}, got {round_mode!r}")
        out = empty(bits.shape[0], np.uint8)
        _KERNELS["e8m0", source][parallel](bits, int(saturate), _ROUND_MODES[round_mode], out)
        return out
    if fmt not in MINIFLOATS:
        raise ValueError(f"encode: unknown float format {fmt!r}; expected one of {FORMATS}")
    if fmt == "bfloat16" and source is np.float32:
        out = empty(bits.shape[0], np.uint16)
        _KERNELS["bfloat16", source][parallel](bits, out)
        return out
    out = empty(bits.shape[0], np.uint16 if MINIFLOATS[fmt].sign_bit > 0x80 else np.uint8)
    _KERNELS["minifloat", source][parallel](bits, minifloat_params(fmt, saturate), out)
    return out
