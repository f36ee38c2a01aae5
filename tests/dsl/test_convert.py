"""Tests for dsl/convert.py: the conversion choices (rounding once, integer rules, strings, direct Tensor paths)."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dsl
from dsl import convert as conv
from dsl import dtypes

NUMERIC = [t for t in dtypes.ALL if t.kind not in ("complex", "string")]


def sample(dt, count: int = 9) -> np.ndarray:
    values = np.array([0, 1, -1, 2.5, -3.75, 6, 100, 0.1, 448], np.float32)[:count]
    if dt.kind == "bool":
        return values != 0
    if dt.packed and dt.kind != "float":
        return (np.arange(count) % (1 << dt.bits)).astype(np.uint8).view(dt.np_dtype)
    with np.errstate(all="ignore"):
        return conv.convert(values, dt)


def test_encoded_floats_are_the_types_numpy_lacks():
    exotic = {t.onnx_name for t in dtypes.ALL if t.kind == "float" and t.np_dtype.type.__module__ != "numpy"}
    assert conv.ENCODED_FLOATS == exotic
    assert conv.ROUND_MODES == ("up", "down", "nearest")


@pytest.mark.parametrize("src", NUMERIC, ids=str)
def test_to_wide_holds_exactly_the_same_values(src):
    x = sample(src)
    wide = conv.to_wide(x, src)
    assert wide.dtype.type.__module__ == "numpy" and wide.shape == x.shape
    if src.kind == "float":
        np.testing.assert_array_equal(wide.astype(np.float64), x.astype(np.float64))
    else:
        assert [int(v) for v in wide] == [int(v) for v in x]


@pytest.mark.parametrize("dst", NUMERIC, ids=str)
@pytest.mark.parametrize("src", NUMERIC, ids=str)
def test_convert_returns_a_new_array_of_the_target_dtype(src, dst):
    x = sample(src)
    before = x.tobytes()
    got = conv.convert(x, dst)
    assert got.dtype == dst.np_dtype and got.shape == x.shape
    assert not np.shares_memory(got, x) and x.tobytes() == before


def test_float_to_int_rules():
    x = np.array([np.nan, np.inf, -np.inf, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 1e300, 300.7, -300.7, -0.9], np.float64)
    assert conv.float_to_int(x, np.int64).tolist() == [0, 0, 0, 0, 0, 0, 0, 300, -300, 0]
    assert conv.float_to_int(x, np.int8).tolist() == [0, 0, 0, 0, 0, 0, 0, 44, -44, 0]
    unsigned = conv.float_to_int(np.array([2.0 ** 63, 2.0 ** 64 - 2048, 2.0 ** 64, -1.0]), np.uint64)
    assert unsigned.tolist() == [2 ** 63, 2 ** 64 - 2048, 0, 2 ** 64 - 1]


def correct_rounding(value: int, bits: int) -> int:
    """``value`` rounded to nearest even with ``bits`` significant bits, in exact integers."""
    magnitude = abs(value)
    shift = magnitude.bit_length() - bits
    if shift <= 0:
        return value
    kept, rest = divmod(magnitude, 1 << shift)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and kept & 1):
        kept += 1
    return (kept << shift) * (1 if value >= 0 else -1)


WIDE_INTS = st.one_of(st.integers(-(2 ** 63), 2 ** 63 - 1),
                      st.builds(lambda e, d: (1 << e) + d, st.integers(54, 62), st.integers(-(2 ** 12), 2 ** 12)))


@settings(max_examples=300, deadline=None)
@given(st.lists(WIDE_INTS, min_size=1, max_size=8))
@example([2 ** 60 + 2 ** 52 + 1, 2 ** 60 + 2 ** 52, -(2 ** 60) - 2 ** 52 - 1, 2 ** 63 - 1, -(2 ** 63)])
def test_wide_integers_round_once_to_bfloat16(values):
    x = np.array(values, np.int64)
    odd = conv._int_to_float64_odd(x)
    for value, approx in zip(values, odd.tolist()):
        assert Fraction(approx) == value or np.array(approx).view(np.uint64) & 1 == 1  # exact, else odd
    got = conv.convert(x, dtypes.dtype("bfloat16")).astype(np.float64).tolist()
    assert got == [float(correct_rounding(v, 8)) for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2 ** 64 - 1), min_size=1, max_size=8))
def test_wide_unsigned_integers_round_once_to_bfloat16(values):
    got = conv.convert(np.array(values, np.uint64), dtypes.dtype("bfloat16")).astype(np.float64).tolist()
    assert got == [float(correct_rounding(v, 8)) for v in values]


def nearest_float32(text: str) -> float:
    """The float32 nearest to the positive decimal ``text`` (ties to even; Inf stands for 2**128,
    as IEEE rounding treats it), by exact rational arithmetic."""
    exact = Fraction(text)
    with np.errstate(over="ignore"):
        guess = np.float32(float(text))
    below = np.nextafter(guess, np.float32(0))
    candidates = [below, guess] + ([np.nextafter(guess, np.float32(np.inf))] if np.isfinite(guess) else [])

    def distance(c):
        value = Fraction(2 ** 128) if np.isinf(c) else Fraction(float(c))
        return abs(value - exact), int(np.array(c).view(np.uint32)) & 1

    return float(min(candidates, key=distance))


DECIMALS = st.builds(lambda digits, point, exponent: f"{digits[:point]}.{digits[point:]}e{exponent}",
                     st.text("0123456789", min_size=1, max_size=30).map(lambda d: "1" + d),
                     st.integers(0, 30), st.integers(-50, 40))


@settings(max_examples=300, deadline=None)
@given(st.lists(DECIMALS, min_size=1, max_size=6))
@example(["1.00000005960464477539062500000000001", "1.000000059604644775390625", "3.4028235677973366e38"])
def test_strings_round_once_to_float32(texts):
    got = conv.convert(np.array(texts, dtype=object), dtypes.dtype("float")).tolist()
    assert got == [nearest_float32(t) for t in texts]


@pytest.mark.parametrize("text, bad", [("0x1p3", True), ("1,5", True), ("1 2", True), ("١٢", True),
                                       ("  -1.5e+3  ", False), ("+.5E-1", False), ("-INFINITY", False)])
def test_string_literal_grammar(text, bad):
    array = np.array([text], dtype=object)
    if bad:
        with pytest.raises(dsl.InputError, match=r"^Cast: string .* is not a number"):
            conv.convert(array, dtypes.dtype("double"))
    else:
        assert conv.convert(array, dtypes.dtype("double")).tolist() == [float(text)]


def test_numbers_to_strings_are_python_str_objects():
    got = conv.convert(np.array([[1.5, -0.0]], np.float32), dtypes.dtype("string"))
    assert got.dtype == object and got.shape == (1, 2) and got.tolist() == [["1.5", "-0.0"]]
    assert all(type(v) is str for v in got.reshape(-1))
    empty = conv.convert(np.zeros((0, 3), np.int8), dtypes.dtype("string"))
    assert empty.shape == (0, 3) and empty.dtype == object


# ---- direct Tensor paths --------------------------------------------------------------------
PACKED = [t for t in NUMERIC if t.packed]


@pytest.mark.parametrize("dst", [t for t in NUMERIC if not t.packed], ids=str)
@pytest.mark.parametrize("src", PACKED, ids=str)
def test_packed_tensor_table_path_equals_convert(src, dst):
    x = np.resize(np.arange(1 << src.bits, dtype=np.uint8).view(src.np_dtype), 37)
    out = conv.convert_tensor(dsl.Tensor.from_numpy(x), dst)
    assert isinstance(out, dsl.Tensor) and out.dtype == dst
    want = conv.convert(x, dst)
    assert out.numpy().view(np.uint8).tobytes() == want.view(np.uint8).tobytes()


@pytest.mark.parametrize("dst", [t for t in PACKED if t.kind != "float"], ids=str)
@pytest.mark.parametrize("src", ["float16", "float", "double", "int8", "uint16", "int64", "uint64"])
def test_pack_path_equals_convert(src, dst):
    values = np.array([0, 1, -1, 7.9, -8.5, 17, 2 ** 40 + 3, -(2 ** 33) - 5, 65504], np.float64)
    src = dtypes.dtype(src)
    with np.errstate(all="ignore"):
        x = values.astype(src.np_dtype) if src.kind == "float" else values.astype(np.int64).astype(src.np_dtype)
    out = conv.convert_tensor(dsl.Tensor.from_numpy(x), dst)
    assert isinstance(out, dsl.Tensor) and out.dtype == dst
    assert out.numpy().tolist() == conv.convert(x, dst).tolist()


@pytest.mark.parametrize("src, dst", [("float", "float8e4m3fn"), ("bfloat16", "int4"), ("int4", "uint2"),
                                      ("float4e2m1", "int4"), ("bool", "int4"), ("int4", "string")])
def test_no_direct_path_returns_none(src, dst):
    x = sample(dtypes.dtype(src), 4)
    assert conv.convert_tensor(dsl.Tensor.from_numpy(x), dtypes.dtype(dst)) is None


def test_strided_packed_tensor_falls_back():
    tensor = dsl.transpose(dsl.Tensor.from_numpy(np.arange(6).reshape(2, 3).astype(ml_dtypes.int4)))
    assert conv.convert_tensor(tensor, dtypes.dtype("float")) is None
    assert dsl.cast(tensor, "float").numpy().tolist() == [[0, 3], [1, 4], [2, 5]]
