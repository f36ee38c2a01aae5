"""Tests for dsl/ops/cast.py: dsl.cast and CastLike on arrays and packed Tensors vs onnx's reference and TYPES.md."""
from __future__ import annotations

import functools
import math
import warnings

import ml_dtypes
import numpy as np
import onnx.defs
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import dsl
from dsl import dtypes
from dsl.eager import call as eager_call

from dsl_test_helpers import as_tensor, pack_codes

LATEST = dsl.LATEST_OPSET
NUMERIC = [t for t in dtypes.ALL if t.kind not in ("complex", "string")]
FLOAT8 = ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"]
SMALL_FLOATS = [*FLOAT8, "float8e8m0", "float4e2m1"]  # every code fits a 256-entry sweep
SUB_BYTE_INTS = ["int4", "uint4", "int2", "uint2"]
# values every float type's onnx reference handles exactly (float32-exact, so no double rounding
# in ml_dtypes' float64 path), inexact ones (0.1, 1/3) and out-of-range ones for integers and float8
FLOAT_VALUES = [0.0, -0.0, 0.5, 1.5, -2.5, 3.0, 7.0, -8.0, 1.0, -1.0, 0.25, 0.1, 1 / 3, 100.75, -3.75,
                6.0, 240.0, 255.5, 300.0, -129.0, 448.0, 500.0, 65504.0, 70000.0, 1e10, -3e20,
                2.0 ** -10, 2.0 ** -20, np.nan, np.inf, -np.inf]


# ---- independent oracles ------------------------------------------------------------------
def sample(dt) -> np.ndarray:
    """Values of ``dt``: every code of the 8-bit and sub-byte types, edge values of the others."""
    if dt.kind == "bool":
        return np.array([True, False, True, False, True])
    if dt.bits <= 8 and dt.kind != "bool" and not (dt.kind in ("int", "uint") and dt.bits == 8):
        return np.arange(1 << dt.bits, dtype=np.uint8).view(dt.np_dtype)
    if dt.kind in ("int", "uint"):
        info = np.iinfo(dt.np_dtype)
        values = [0, 1, 2, 3, 5, 7, 8, 15, 16, 100, 127, 255, 256, 1000, 65504, 70000, info.max]
        if dt.kind == "int":
            values += [-1, -2, -3, -8, -9, -128, -129, -1000, info.min]
        return np.array([v for v in values if info.min <= v <= info.max], dt.np_dtype)
    with np.errstate(over="ignore"):
        return np.array(FLOAT_VALUES, np.float32).astype(dt.np_dtype)


def exact_values(x: np.ndarray) -> list:
    """The elements as Python ints (integer types) or floats (exact for every float type)."""
    dt = dtypes.of_array(x)
    if dt.kind in ("int", "uint", "bool"):
        return [int(v) for v in x.reshape(-1)]
    return [float(v) for v in x.astype(np.float64).reshape(-1)]


def wrap(value: int, dt) -> int:
    """Two's complement wrap of an integer to ``dt``'s bit width (TYPES.md)."""
    bits = dt.bits
    value %= 1 << bits
    return value - (1 << bits) if dt.kind == "int" and value >= 1 << (bits - 1) else value


def in_range(value: int, dt) -> bool:
    bits = dt.bits
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.kind == "int" else (0, (1 << bits) - 1)
    return low <= value <= high


def float_to_int(value: float, dt) -> int:
    """dsl/convert.py: truncate toward zero; NaN, Inf, |x| >= 2**63 -> 0; wrap. Sub-byte types:
    a truncated value out of range gives 0 (onnx's reference with ml_dtypes >= 0.7)."""
    if not math.isfinite(value):
        return 0
    whole = int(value)
    if dt.packed:
        return whole if in_range(whole, dt) else 0
    if abs(whole) >= 2 ** 63 and not (dt.onnx_name == "uint64" and 0 <= whole < 2 ** 64):
        return 0
    return wrap(whole, dt)


def e8m0_code(value: float, saturate: bool = True, mode: str = "up") -> int:
    """Cast-24 spec text as kernels/floats.py documents it: range judged before rounding."""
    if math.isnan(value):
        return 0xFF
    if value > 2.0 ** 127:
        return 0xFE if saturate else 0xFF
    if value < 2.0 ** -127:  # 0, -0, negatives and float32 subnormals below 2^-127
        return 0x00 if saturate else 0xFF
    mantissa, exponent = math.frexp(value)  # value = mantissa * 2**exponent, mantissa in [0.5, 1)
    fraction = 2 * mantissa - 1
    step = {"up": fraction > 0, "down": False, "nearest": fraction >= 0.5}[mode]
    return exponent - 1 + 127 + int(step)


def cast_model(src: int, to: int, shape, opset: int = LATEST, **attrs):
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    graph = helper.make_graph([node], "cast", [helper.make_tensor_value_info("x", src, shape)],
                              [helper.make_tensor_value_info("y", to, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def onnx_cast(x: np.ndarray, dst, **attrs) -> np.ndarray:
    """onnx's ReferenceEvaluator running a one-node Cast model. Pairs ml_dtypes cannot cast
    directly (e8m0 -> float4e2m1) go through float32, which holds both types' values exactly."""
    src = dtypes.of_array(x)
    model = cast_model(src.onnx_code, dst.onnx_code, x.shape, **attrs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return ReferenceEvaluator(model).run(None, {"x": x})[0]
        except TypeError:
            return onnx_cast(x.astype(np.float32), dst, **attrs)


def expected_cast(x: np.ndarray, dst, saturate: bool = True) -> np.ndarray:
    """onnx's reference where it follows the spec; TYPES.md rules where it does not:
    float -> integers (out of range, NaN, Inf, sub-byte wrap), integers -> sub-byte ints (the
    reference has no ml_dtypes cast between them) and float8e8m0 targets (Cast-24 spec text)."""
    src = dtypes.of_array(x)
    values = exact_values(x)
    if dst.onnx_name == "float8e8m0":
        codes = [e8m0_code(v, saturate) for v in values]
        return np.array(codes, np.uint8).view(dst.np_dtype).reshape(x.shape)
    if dst.kind in ("int", "uint") and src.kind == "float":
        return np.array([float_to_int(v, dst) for v in values], dst.np_dtype).reshape(x.shape)
    if dst.packed and dst.kind in ("int", "uint"):
        return np.array([wrap(v, dst) for v in values], np.int64).astype(dst.np_dtype).reshape(x.shape)
    return onnx_cast(x, dst, saturate=int(saturate))


def assert_same(got: np.ndarray, want: np.ndarray, ignore=None) -> None:
    """Same dtype and shape; floats bit for bit except that NaNs only need to be NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    dt = dtypes.of_array(want)
    if dt.kind == "float":
        got_nan = np.isnan(got.astype(np.float32))
        want_nan = np.isnan(want.astype(np.float32))
        same = (got_nan == want_nan) & (got_nan | (got.view(f"u{dt.np_dtype.itemsize}") ==
                                                   want.view(f"u{dt.np_dtype.itemsize}")))
    else:
        same = got == want
    if ignore is not None:
        same |= ignore
    bad = np.nonzero(~same.reshape(-1))[0]
    assert bad.size == 0, (f"{bad.size} differences, first at {bad[:5].tolist()}: got "
                           f"{got.reshape(-1)[bad[:5]].tolist()}, want {want.reshape(-1)[bad[:5]].tolist()}")


PAIRS = [(s, d) for s in NUMERIC for d in NUMERIC]
PAIR_IDS = [f"{s.onnx_name}->{d.onnx_name}" for s, d in PAIRS]


@functools.lru_cache(maxsize=None)
def expected_pair(src_name: str, dst_name: str) -> tuple:
    x = sample(dtypes.dtype(src_name))
    return x, expected_cast(x, dtypes.dtype(dst_name))


# ---- every (source, target) pair at the latest opset --------------------------------------
@pytest.mark.parametrize("src, dst", PAIRS, ids=PAIR_IDS)
def test_cast_numpy_matches_reference(src, dst):
    x, want = expected_pair(src.onnx_name, dst.onnx_name)
    got = dsl.cast(x, dst)
    assert isinstance(got, np.ndarray)
    assert_same(got, want, None)


@pytest.mark.parametrize("src, dst", PAIRS, ids=PAIR_IDS)
def test_cast_tensor_packed_in_packed_out(src, dst):
    x, want = expected_pair(src.onnx_name, dst.onnx_name)
    x2 = np.resize(x, (3, x.size))[:, : max(1, x.size - 1)]  # odd element counts, 2-D
    want2 = np.resize(want, (3, want.size))[:, : max(1, want.size - 1)]
    got = dsl.cast(as_tensor(np.ascontiguousarray(x2)), dst)
    assert isinstance(got, dsl.Tensor) and got.dtype == dst and got.shape == x2.shape
    assert_same(got.numpy(), np.ascontiguousarray(want2), None)
    if dst.packed:
        assert got.packed().tobytes() == pack_codes(want2, dst.bits).tobytes()


@pytest.mark.parametrize("src", [t for t in NUMERIC if t.packed], ids=str)
@pytest.mark.parametrize("dst", ["float", "int8", "float16", "float8e4m3fn", "int4", "uint2"])
def test_cast_packed_tensor_views_and_padding(src, dst):
    """Offset and strided views of packed buffers, and nonzero padding bits in the last byte."""
    dst = dtypes.dtype(dst)
    x = np.resize(sample(src), 23)
    buf = pack_codes(x, src.bits)
    if x.size % src.per_byte:
        buf[-1] |= np.uint8(0xFF << ((x.size % src.per_byte) * src.bits) & 0xFF)  # garbage padding
    tensor = dsl.Tensor.from_packed(buf, src, x.shape)
    assert_same(dsl.cast(tensor, dst).numpy(), expected_cast(x, dst), None)
    tail = dsl.reshape(tensor, [23])  # the same bytes through view ops: an offset slice and a transpose
    two_d = dsl.Tensor.from_packed(buf, src, (1, 23))
    assert_same(dsl.cast(dsl.transpose(two_d), dst).numpy().reshape(-1), expected_cast(x, dst),
                None)
    assert_same(dsl.cast(tail, dst).numpy(), expected_cast(x, dst), None)


@pytest.mark.parametrize("fmt", SMALL_FLOATS)
@pytest.mark.parametrize("target", [np.float32, np.float64])
def test_every_code_decodes_exactly(fmt, target):
    dt = dtypes.dtype(fmt)
    codes = np.arange(1 << dt.bits, dtype=np.uint8)
    x = codes.view(dt.np_dtype)
    want = x.astype(target)  # ml_dtypes: exact decoding
    for got in (dsl.cast(x, target), dsl.cast(as_tensor(x), target).numpy()):
        assert got.dtype == target
        assert_same(got, want)
    assert np.isnan(dsl.cast(x, target)).sum() == {"float8e4m3fn": 2, "float8e4m3fnuz": 1, "float8e5m2": 6,
                                                   "float8e5m2fnuz": 1, "float8e8m0": 1, "float4e2m1": 0}[fmt]


# ---- float8 saturate, e8m0 round_mode, one rounding from float64 ---------------------------
# fmt: (max finite code, codes of +overflow/-overflow with saturate=0)
NO_SATURATE = {"float8e4m3fn": (0x7E, 0x7F, 0xFF), "float8e4m3fnuz": (0x7F, 0x80, 0x80),
               "float8e5m2": (0x7B, 0x7C, 0xFC), "float8e5m2fnuz": (0x7F, 0x80, 0x80)}
OVERFLOWING = {"float8e4m3fn": 480.0, "float8e4m3fnuz": 248.0, "float8e5m2": 61440.0, "float8e5m2fnuz": 61440.0}


@pytest.mark.parametrize("fmt", FLOAT8)
@pytest.mark.parametrize("source", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_float8_saturate_on_and_off(fmt, source):
    big = OVERFLOWING[fmt]
    x = np.array([big, -big, np.inf, -np.inf, 65504.0 if source is np.float16 else 1e30, 1.0], np.float64)
    x = x.astype(source)
    max_code, pos, neg = NO_SATURATE[fmt]
    sat = dsl.cast(x, fmt).view(np.uint8).tolist()
    assert sat[:5] == [max_code, max_code | 0x80, max_code, max_code | 0x80, max_code]
    off = dsl.cast(x, fmt, saturate=False).view(np.uint8).tolist()
    assert off[:5] == [pos, neg, pos, neg, pos]
    assert sat[5] == off[5] == np.array(1.0, np.float32).astype(dtypes.dtype(fmt).np_dtype).view(np.uint8)
    if source in (np.float32, np.float16):  # the reference implements saturate=0 exactly here
        assert_same(dsl.cast(x, fmt, saturate=False), onnx_cast(x, dtypes.dtype(fmt), saturate=0))
        assert_same(dsl.cast(x, fmt), onnx_cast(x, dtypes.dtype(fmt), saturate=1))


@pytest.mark.parametrize("dst", ["float4e2m1", "bfloat16", "float16", "float", "int8", "uint4"])
def test_saturate_does_not_change_other_targets(dst):
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 2.5, 1e38, -7.0], np.float32)
    assert_same(dsl.cast(x, dst, saturate=False), dsl.cast(x, dst))
    if dst == "float4e2m1":  # always saturates
        assert dsl.cast(x, dst, saturate=False).view(np.uint8)[:4].tolist() == [0x7, 0xF, 0x7, 0xF]


E8M0_VALUES = [1.0, 1.5, 1.25, 1.75, 3.0, 0.75, 2.0 ** 127, 1.5 * 2.0 ** 126, 2.0 ** -127, 2.0 ** -126,
               1.5 * 2.0 ** -127, 1.25 * 2.0 ** -127, 2.0 ** -130, 0.0, -0.0, -4.0, np.inf, -np.inf, np.nan,
               3.4e38, float(np.finfo(np.float32).max)]


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("source", [np.float32, np.float64])
def test_e8m0_round_modes(mode, saturate, source):
    x = np.array(E8M0_VALUES, source)
    want = [e8m0_code(v, saturate, mode) for v in x.astype(np.float64)]
    got = dsl.cast(x, "float8e8m0", saturate=saturate, round_mode=mode)
    assert got.dtype == ml_dtypes.float8_e8m0fnu
    assert got.view(np.uint8).tolist() == want


def test_e8m0_round_mode_examples_by_hand():
    x = np.array([1.5, 3.0, 5.0, 0.0, np.inf], np.float32)
    assert dsl.cast(x, "float8e8m0").astype(np.float32).tolist()[:3] == [2.0, 4.0, 8.0]
    assert dsl.cast(x, "float8e8m0", round_mode="down").astype(np.float32).tolist()[:3] == [1.0, 2.0, 4.0]
    assert dsl.cast(x, "float8e8m0", round_mode="nearest").astype(np.float32).tolist()[:3] == [2.0, 4.0, 4.0]
    codes = dsl.cast(x, "float8e8m0", saturate=False, round_mode="nearest").view(np.uint8).tolist()
    assert codes[3:] == [0xFF, 0xFF]  # the spec table: 0 and Inf give NaN without saturation
    assert dsl.cast(x, "float8e8m0").view(np.uint8).tolist()[3:] == [0x00, 0xFE]


def _just_above(value: float) -> float:
    """A float64 above ``value`` that float32 rounds back to ``value``."""
    return value + abs(value) * 2.0 ** -40


# target: (a midpoint between two neighbours, the neighbour above it)
MIDPOINTS = {"float8e4m3fn": (1.0625, 1.125), "float8e4m3fnuz": (1.0625, 1.125), "float8e5m2": (1.125, 1.25),
             "float8e5m2fnuz": (1.125, 1.25), "float4e2m1": (0.25, 0.5), "bfloat16": (1 + 2.0 ** -8, 1 + 2.0 ** -7),
             "float16": (1 + 2.0 ** -11, 1 + 2.0 ** -10)}


@pytest.mark.parametrize("fmt", sorted(MIDPOINTS))
def test_float64_rounds_once(fmt):
    midpoint, above = MIDPOINTS[fmt]
    x = np.array([_just_above(midpoint), -_just_above(midpoint), midpoint], np.float64)
    assert np.float32(x[0]) == midpoint  # through float32 this would be a tie, rounded to even (down)
    got = dsl.cast(x, fmt).astype(np.float64)
    assert got.tolist() == [above, -above, midpoint - (above - midpoint)]
    assert dsl.cast(as_tensor(x), fmt).numpy().astype(np.float64).tolist() == got.tolist()


def test_float64_to_e8m0_rounds_once():
    x = np.array([_just_above(4.0), _just_above(6.0)], np.float64)
    assert dsl.cast(x, "float8e8m0").astype(np.float64).tolist() == [8.0, 8.0]
    assert dsl.cast(x, "float8e8m0", round_mode="nearest").astype(np.float64).tolist() == [4.0, 8.0]


@pytest.mark.parametrize("source", [np.int64, np.uint64])
def test_wide_integers_round_once(source):
    """2**60 + 2**52 + 1 lies just above a bfloat16 midpoint; as float64 it IS the midpoint."""
    x = np.array([2 ** 60 + 2 ** 52 + 1, 2 ** 60 + 2 ** 52, 2 ** 60 + 1, 2 ** 62 - 1], source)
    assert dsl.cast(x, "bfloat16").astype(np.float64).tolist() == [2.0 ** 60 + 2.0 ** 53, 2.0 ** 60,
                                                                    2.0 ** 60, 2.0 ** 62]
    assert dsl.cast(x, "float8e8m0").astype(np.float64).tolist() == [2.0 ** 61] * 3 + [2.0 ** 62]
    assert dsl.cast(x, "float8e8m0", round_mode="down").astype(np.float64).tolist() == [2.0 ** 60] * 3 + [2.0 ** 61]
    big = np.array([2 ** 63 - 1, 2 ** 53 + 1], np.int64)
    assert dsl.cast(big, "float").tolist() == [2.0 ** 63, 2.0 ** 53]
    assert dsl.cast(big, "double").tolist() == [2.0 ** 63, 2.0 ** 53]


@pytest.mark.parametrize("dst", SUB_BYTE_INTS)
def test_float_to_sub_byte_int_truncates_out_of_range_to_zero(dst):
    """The spec leaves out-of-range float -> int undefined; dsl follows onnx's reference and the
    node tests' data (ml_dtypes >= 0.7): truncate, then 0 outside the type's range."""
    dt = dtypes.dtype(dst)
    low = -(1 << (dt.bits - 1)) if dt.kind == "int" else 0
    high = (1 << (dt.bits - 1)) - 1 if dt.kind == "int" else (1 << dt.bits) - 1
    x = np.array([17.9, -9.7, -0.9, 2.5, -2.5, low - 0.9, high + 0.9, low - 1.0, high + 1.0, 2.0 ** 40 + 3,
                  -(2.0 ** 40) - 3, 2.0 ** 32 + 5, 1e30, np.nan, np.inf, -np.inf], np.float64)
    for source in (np.float64, np.float32):
        values = x.astype(source)
        want = [int(v) if math.isfinite(v) and low <= int(v) <= high else 0 for v in values]
        assert dsl.cast(values, dt).astype(np.int64).tolist() == want
        assert dsl.cast(as_tensor(values), dt).numpy().astype(np.int64).tolist() == want
        assert want[5:9] == [low, high, 0, 0]
        jitted = dsl.jit(lambda v: dsl.cast(v, dt))(values)
        assert jitted.astype(np.int64).tolist() == want


# ---- strings ----------------------------------------------------------------------------
def test_string_literals_of_the_spec():
    text = np.array(["3.14", "1000", "1e-5", "1E8", "+INF", "INF", "-INF", "NaN", "inf", "-inf", "nan",
                     "iNf", "+Infinity", "-nAn", " 2.5 ", ".5", "5.", "-0"], dtype=object)
    got = dsl.cast(text, "float")
    want = np.array([3.14, 1000, 1e-5, 1e8, np.inf, np.inf, -np.inf, np.nan, np.inf, -np.inf, np.nan, np.inf,
                     np.inf, np.nan, 2.5, 0.5, 5.0, -0.0], np.float32)
    assert_same(got, want)
    assert np.signbit(got[-1])
    as_double = dsl.cast(text.astype(str), "double")  # a numpy 'U' array this time
    assert_same(as_double, np.array([float(s.strip().replace("nAn", "nan")) for s in text], np.float64))


def test_string_parse_rounds_once():
    text = np.array(["1.00000005960464477539062500000000001", "1.0000000596046447753906250"], dtype=object)
    assert dsl.cast(text, "float").tolist() == [1.0000001192092896, 1.0]  # above the tie; the tie itself
    assert dsl.cast(text, "double").tolist() == [1.0000000596046448, 1.0000000596046448]
    near = np.array(["1.06250000000000000000001"], dtype=object)  # just above a float8e4m3fn tie
    assert dsl.cast(near, "float8e4m3fn").astype(np.float32).tolist() == [1.125]
    assert dsl.cast(np.array(["1e-400", "-1e-400", "0.0"], dtype=object), "bool").tolist() == [True, True, False]


@pytest.mark.parametrize("dst, texts, want", [
    ("int32", ["100.5", "-7.9", "2.9999999999999999999", "-0.5", "1e3", "NaN", "-INF"], [100, -7, 2, 0, 1000, 0, 0]),
    ("int64", ["9007199254740993", "-9223372036854775808", "9223372036854775808", "1e19", "1e999999999"],
     [9007199254740993, -2 ** 63, 0, 0, 0]),
    ("uint64", ["1e19", "18446744073709551615", "-1"], [10 ** 19, 2 ** 64 - 1, 2 ** 64 - 1]),
    ("uint8", ["300", "-1", "255.9"], [44, 255, 255]),
    ("int4", ["7", "8", "-9", "17.5"], [7, -8, 7, 1]),
    ("uint2", ["3", "4", "-1"], [3, 0, 3]),
])
def test_strings_to_integers_truncate_the_exact_decimal(dst, texts, want):
    got = dsl.cast(np.array(texts, dtype=object), dst)
    assert got.dtype == dtypes.dtype(dst).np_dtype
    assert [int(v) for v in got] == want


def test_string_bytes_and_unicode_arrays():
    assert dsl.cast(np.array([b"1.5", "2"], dtype=object), "float").tolist() == [1.5, 2.0]
    assert dsl.cast(np.array(["1.5", "-2"]), "int8").tolist() == [1, -2]  # a numpy 'U' array
    assert dsl.cast(np.array([b"-3"]), "float16").tolist() == [-3.0]  # a numpy 'S' array
    same = dsl.cast(np.array([b"ab", "c\u00e9"], dtype=object), "string")
    assert same.dtype == object and same.tolist() == ["ab", "c\u00e9"]


@pytest.mark.parametrize("bad", ["Hello World!", "", "1.2.3", "0x10", "1_000", "in f", "--1", "NaNa"])
def test_non_numeric_strings_are_errors(bad):
    with pytest.raises(dsl.DslError, match=r"^Cast: string .* is not a number"):
        dsl.cast(np.array(["1", bad], dtype=object), "float")


@pytest.mark.parametrize("src", ["float", "double", "float16", "bool", "int8", "uint8", "int16", "uint16", "int32",
                                 "uint32", "int64", "uint64"])
def test_numbers_to_strings_match_reference(src):
    dt = dtypes.dtype(src)
    x = sample(dt)
    got = dsl.cast(x, "string")
    assert got.dtype == object and got.shape == x.shape and all(type(v) is str for v in got)
    assert got.tolist() == onnx_cast(x, dtypes.dtype("string")).tolist()


def test_number_to_string_format():
    x = np.array([0.1, 314.15926, 1e20, 1e-7, -0.0, np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert dsl.cast(x, "string").tolist() == ["0.1", "314.15927", "1e+20", "1e-07", "-0.0", "nan", "inf",
                                              "-inf", "1.0"]
    assert dsl.cast(np.array([0.1], np.float64), "string").tolist() == ["0.1"]
    assert dsl.cast(np.array([True, False]), "string").tolist() == ["True", "False"]


@pytest.mark.parametrize("src", ["bfloat16", *SMALL_FLOATS, *SUB_BYTE_INTS])
def test_exotic_numbers_to_strings_print_their_exact_value(src):
    dt = dtypes.dtype(src)
    x = sample(dt)
    got = dsl.cast(x, "string")
    wide = x.astype(np.float32) if dt.kind == "float" else x.astype(np.int64)
    assert got.tolist() == [str(v) for v in wide]
    assert dsl.cast(as_tensor(x), "string").numpy().tolist() == got.tolist()


@pytest.mark.parametrize("dt", ["float", "double", "float16", "bfloat16", "float8e4m3fn", "float8e5m2", "int64",
                                "uint64", "int4", "float4e2m1", "float8e8m0"])
def test_strings_round_trip(dt):
    x = sample(dtypes.dtype(dt))
    # saturation would clip e5m2's Inf; e8m0 rounding up would lift the inexact shortest decimal
    # of a power of two ("5.877472e-39" for 2**-127) to the next power
    assert_same(dsl.cast(dsl.cast(x, "string"), dt, saturate=False, round_mode="nearest"), x)


# ---- versions: which types each Cast version accepts ---------------------------------------
CAST_VERSIONS = [1, 6, 9, 13, 19, 21, 23, 24, 25, 28]
OPSETS = [1, 5, 6, 8, 9, 12, 13, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28]


def onnx_cast_types(opset: int, which: int) -> set:
    schema = onnx.defs.get_schema("Cast", opset)
    names = schema.type_constraints[which].allowed_type_strs
    return {name[len("tensor("):-1] for name in names} - {"float6e2m3", "float6e3m2"}


@pytest.mark.parametrize("opset", OPSETS)
def test_cast_type_sets_match_onnx_schemas(opset):
    allowed_to = onnx_cast_types(opset, 1)
    allowed_from = onnx_cast_types(opset, 0)
    source = np.zeros(3, np.float32)
    for dt in dtypes.ALL:
        if dt.onnx_name in allowed_to:
            assert dsl.cast(source, dt, opset=opset).dtype == dt.np_dtype
        else:
            with pytest.raises(dsl.DTypeError, match=rf"^Cast: cannot cast to {dt.onnx_name} at version "):
                dsl.cast(source, dt, opset=opset)
        x = np.full(3, "1", object) if dt.kind == "string" else np.ones(3, np.float32).astype(dt.np_dtype)
        if dt.onnx_name in allowed_from:
            assert dsl.cast(x, "float", opset=opset).tolist() == [1.0] * 3
        else:
            match = rf"^Cast: input 'input' has type {dt.onnx_name}\[3\], not allowed"
            with pytest.raises(dsl.DTypeError, match=match):
                dsl.cast(x, "float", opset=opset)


@pytest.mark.parametrize("dst, first", [("float8e4m3fn", 19), ("float8e5m2fnuz", 19), ("int4", 21), ("uint4", 21),
                                        ("float4e2m1", 23), ("float8e8m0", 24), ("int2", 25), ("uint2", 25),
                                        ("bfloat16", 13), ("string", 9)])
def test_cast_targets_start_at_their_version(dst, first):
    x = np.array([1.0], np.float32)
    with pytest.raises(dsl.DTypeError, match=rf"^Cast: cannot cast to {dst} at version \d+; expected one of"):
        dsl.cast(x, dst, opset=first - 1)
    assert dsl.cast(x, dst, opset=first).dtype == dtypes.dtype(dst).np_dtype


def test_cast_1_takes_to_as_an_upper_case_type_name():
    x = np.array([1.5, -2.5], np.float32)
    assert eager_call("Cast", x, 1, to="FLOAT16").dtype == np.float16
    assert eager_call("Cast", x, 1, to="INT32").tolist() == [1, -2]
    with pytest.raises(dsl.DTypeError, match=r"^Cast: attribute 'to' = 'FLOAT7' is not an ONNX element type"):
        eager_call("Cast", x, 1, to="FLOAT7")


def test_saturate_before_19_and_round_mode_before_24_are_errors():
    x = np.array([500.0], np.float32)
    with pytest.raises(dsl.InputError, match=r"^Cast: argument saturate=0 does not exist at opset version 13"):
        dsl.cast(x, "float16", saturate=False, opset=18)
    with pytest.raises(dsl.InputError, match=r"^Cast: argument round_mode='down' does not exist at opset version 23"):
        dsl.cast(x, "float16", round_mode="down", opset=23)
    assert dsl.cast(x, "float8e4m3fn", saturate=False, opset=19).view(np.uint8).tolist() == [0x7F]
    assert dsl.cast(x, "float16", opset=18).tolist() == [500.0]  # the defaults are fine anywhere


def test_bad_round_mode_is_an_error():
    with pytest.raises(dsl.InputError, match=r"^Cast: round_mode 'sideways' is not one of \['up', 'down', 'nearest'\]"):
        dsl.cast(np.array([1.0], np.float32), "float8e8m0", round_mode="sideways")


def test_unknown_target_types_are_errors():
    x = np.array([1.0], np.float32)
    with pytest.raises(dsl.DTypeError, match=r"'float7'"):
        dsl.cast(x, "float7")
    with pytest.raises(dsl.DTypeError, match=r"^Cast: attribute 'to' = 999 is not an ONNX element type"):
        eager_call("Cast", x, to=999)
    with pytest.raises(dsl.DTypeError, match=r"^Cast: cannot cast to complex64 at version 28; expected one of \["):
        dsl.cast(x, "complex64")
    with pytest.raises(dsl.DTypeError, match=r"^Cast: input 'input' has type complex128\[1\], not allowed"):
        dsl.cast(np.zeros(1, np.complex128), "float")


def test_packed_buffer_too_short_is_an_error():
    with pytest.raises(dsl.InputError, match=r"buffer of 1 bytes is too short for int4\[3\]; expected at least 2"):
        dsl.cast(dsl.Tensor.from_packed(np.zeros(1, np.uint8), "int4", (3,)), "float")
    with pytest.raises(dsl.InputError, match=r"too short for uint2\[5\]"):
        dsl.Tensor.from_packed(np.zeros(1, np.uint8), "uint2", (5,))


# ---- results are new arrays; inputs are never written ---------------------------------------
@pytest.mark.parametrize("src, dst", [("float", "float"), ("int8", "int8"), ("float", "double"), ("uint8", "int8"),
                                      ("int4", "int4"), ("bfloat16", "bfloat16"), ("float8e4m3fn", "float"),
                                      ("float", "float8e4m3fn"), ("string", "string"), ("float", "string"),
                                      ("string", "float"), ("int4", "float"), ("float", "int4")])
def test_results_are_never_views_and_inputs_are_untouched(src, dst):
    dt = dtypes.dtype(src)
    x = np.array(["1", "2.5", "-3"], dtype=object) if dt.kind == "string" else sample(dt)
    before = x.copy()
    got = dsl.cast(x, dst)
    assert got is not x and not np.shares_memory(got, x)
    got[...] = got.reshape(-1)[0]  # writing the result leaves the input alone
    assert (x == before).all() if dt.kind == "string" else x.tobytes() == before.tobytes()
    if dt.kind != "string":
        tensor = as_tensor(x)
        buffer_before = tensor.buffer.copy()
        out = dsl.cast(tensor, dst)
        assert out is not tensor and not np.shares_memory(out.buffer, tensor.buffer)
        assert tensor.buffer.tobytes() == buffer_before.tobytes()


@pytest.mark.parametrize("src, dst", [("float8e4m3fn", "float"), ("float", "float8e5m2"), ("int4", "float"),
                                      ("float", "bfloat16")])
def test_large_results_stay_independent(src, dst):
    """Past 1 MiB results come from a buffer pool and kernels run in parallel: a second cast
    must neither reuse nor overwrite the first result's memory."""
    count = (1 << 20) + 3
    dt = dtypes.dtype(src)
    codes = np.arange(count, dtype=np.uint32) * 2654435761 >> 24
    x = (codes.astype(np.uint8) & np.uint8((1 << dt.bits) - 1)).view(dt.np_dtype) if dt.bits < 32 else \
        (codes.astype(np.float32) - 128) / 7
    inputs = [as_tensor(x), as_tensor(x[::-1].copy())] if dt.packed else [x, x[::-1].copy()]
    first = dsl.cast(inputs[0], dst)
    kept = (first.numpy() if dt.packed else first).copy()
    second = dsl.cast(inputs[1], dst)
    first, second = (first.numpy(), second.numpy()) if dt.packed else (first, second)
    assert first.tobytes() == kept.tobytes() and not np.shares_memory(first, second)
    sl = slice(0, count, 997)  # the parallel kernels agree with the oracle on a sample
    assert_same(first[sl], expected_cast(np.ascontiguousarray(x[sl]), dtypes.dtype(dst)))


def test_same_type_cast_keeps_nan_payloads():
    bits = np.array([0x7F81, 0xFFA5, 0x7FC0, 0x0001], np.uint16)
    x = bits.view(ml_dtypes.bfloat16)
    assert dsl.cast(x, "bfloat16").view(np.uint16).tolist() == bits.tolist()
    f32 = np.array([0x7F800001, 0xFFC01234], np.uint32).view(np.float32)
    assert dsl.cast(f32, "float").view(np.uint32).tolist() == [0x7F800001, 0xFFC01234]


# ---- CastLike ----------------------------------------------------------------------------
def castlike(x, like, opset=LATEST, **attrs):
    return eager_call("CastLike", x, opset, target_type=like, **attrs)


@pytest.mark.parametrize("src, dst", [("float", "float8e4m3fn"), ("double", "int4"), ("float8e5m2", "bfloat16"),
                                      ("int2", "float16"), ("string", "float"), ("float", "string"),
                                      ("uint64", "float8e8m0")])
def test_castlike_equals_cast(src, dst):
    dt = dtypes.dtype(src)
    x = np.array(["1.5", "-2", "inf"], dtype=object) if dt.kind == "string" else sample(dt)
    like = np.zeros((2, 0), object if dst == "string" else dtypes.dtype(dst).np_dtype)
    got, want = castlike(x, like), dsl.cast(x, dst)
    if dst == "string":
        assert got.dtype == object and got.tolist() == want.tolist()
    else:
        assert_same(got, want)


def test_castlike_attributes_by_version():
    x = np.array([500.0, 1.5], np.float32)
    f8 = np.zeros(1, ml_dtypes.float8_e4m3fn)
    assert castlike(x, f8, saturate=0).view(np.uint8).tolist() == [0x7F, 0x3C]
    e8 = np.zeros(1, ml_dtypes.float8_e8m0fnu)
    assert castlike(x, e8, round_mode="down").astype(np.float32).tolist() == [256.0, 1.0]
    with pytest.raises(dsl.DslError, match=r"^CastLike: argument round_mode='down' does not exist at opset version 23"):
        castlike(x, f8, 23, round_mode="down")
    with pytest.raises(dsl.DslError, match=r"^CastLike: argument saturate=0 does not exist at opset version 15"):
        castlike(x, np.zeros(1, np.float16), 18, saturate=0)
    with pytest.raises(dsl.DTypeError, match=r"^CastLike: input 'target_type' has type float8e4m3fn\[1\], not allowed"):
        castlike(x, f8, 18)
    with pytest.raises(dsl.UnsupportedError, match=r"^CastLike: not defined at opset 14; first version is 15"):
        castlike(x, np.zeros(1, np.float16), 14)
    with pytest.raises(dsl.InputError, match=r"^CastLike: round_mode 'odd' is not one of"):
        castlike(x, e8, round_mode="odd")


def test_castlike_on_a_packed_tensor():
    x = np.arange(-8, 8).astype(ml_dtypes.int4)
    got = castlike(as_tensor(x), np.zeros(1, np.float32))
    assert isinstance(got, dsl.Tensor) and got.numpy().tolist() == list(range(-8, 8))
