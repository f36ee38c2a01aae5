"""Tests for dsl/ops/rounding.py: Floor, Ceil, Round, Sign, IsNaN, IsInf at every version and type, eager and jit."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.ops import registry

from dsl_test_helpers import interpreted, select_rows, allowed_types, assert_schemas_match_onnx, make_array, onnx_versions

LATEST = registry.LATEST_OPSET
ROUNDING = {"Floor": dsl.floor, "Ceil": dsl.ceil, "Round": dsl.round, "Sign": dsl.sign}
OPS = [*ROUNDING, "IsNaN", "IsInf"]
F32_BELOW_HALF = float(np.nextafter(np.float32(0.5), np.float32(0)))
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e-7, -1e-7, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5,
            F32_BELOW_HALF, -F32_BELOW_HALF, 2.0 ** 22 + 0.5, 2.0 ** 23 - 0.5, -7.5, 1e30, -3.0]
# IsInf's (detect_negative, detect_positive) combinations
DETECT = [(1, 1), (0, 1), (1, 0), (0, 0)]


# ---- helpers (independent of dsl) ---------------------------------------------------------------
def sample(dt, count: int = 64, seed: int = 0) -> np.ndarray:
    """Float specials (ties, the float32 just below 1/2, subnormals) then random values; integers
    over their full range with the edges first."""
    rng = np.random.default_rng(seed)
    if dt.kind == "float":
        spread = np.concatenate([rng.uniform(-10, 10, count), rng.standard_normal(count) * 1e3])
        with np.errstate(over="ignore"):
            return np.concatenate([SPECIALS, spread])[:count].astype(dt.np_dtype)
    info = np.iinfo(dt.np_dtype)
    edges = [info.min, info.max, 0, 1, info.max - 1] + ([-1] if info.min < 0 else [])
    storage = np.int64 if info.min < 0 else np.uint64
    values = np.concatenate([np.array(edges, storage), rng.integers(info.min, info.max, count, dtype=storage)])
    return values[:count].astype(dt.np_dtype)


def _round_half_even(value: float) -> float:
    if not math.isfinite(value):
        return value
    return math.copysign(float(round(value)), value)  # (Python's round: half to even; -0.4 -> -0.0)


def truth(op: str, x: np.ndarray) -> np.ndarray:
    """Floor / Ceil / Round / Sign of x's exact values (float64 or Python ints), in x's type."""
    if x.dtype.kind in "iu":
        assert op == "Sign"
        return np.array([(v > 0) - (v < 0) for v in x.tolist()]).astype(x.dtype)
    wide = x.astype(np.float64)
    formula = {"Floor": np.floor, "Ceil": np.ceil, "Sign": np.sign,
               "Round": np.vectorize(_round_half_even, otypes=[np.float64])}[op]
    return formula(wide).astype(x.dtype)


def assert_exact(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype, shape and values; NaN where want is NaN and zeros of want's sign."""
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
        return
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    numbers = ~np.isnan(w64)
    np.testing.assert_array_equal(np.isnan(g64), ~numbers)
    np.testing.assert_array_equal(g64[numbers], w64[numbers])
    np.testing.assert_array_equal(np.signbit(g64[numbers]), np.signbit(w64[numbers]))


def float_codes(dt, seed: int = 0) -> np.ndarray:
    """Every code of an 8-bit float; otherwise specials and random bit patterns (NaN payloads too)."""
    if dt.bits == 8:
        return np.arange(256, dtype=np.uint8).view(dt.np_dtype)
    special = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1.0, 1e-40, 3e38], np.float64)
    with np.errstate(over="ignore"):
        return np.concatenate([special.astype(dt.np_dtype), make_array(dt, (120,), seed)])


def predicate_truth(x: np.ndarray, detect=None) -> np.ndarray:
    """IsNaN (``detect`` None) or IsInf of x's values, decoded to float64 by ml_dtypes / numpy."""
    with np.errstate(invalid="ignore"):  # (ml_dtypes warns casting a bfloat16 NaN)
        wide = x.astype(np.float64)
    if detect is None:
        return np.isnan(wide)
    negative, positive = detect
    return (np.isposinf(wide) & bool(positive)) | (np.isneginf(wide) & bool(negative))


# ---- schemas --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    assert_schemas_match_onnx(op)


# ---- Floor, Ceil, Round, Sign: eager ------------------------------------------------------------
CASES = [(op, v, dt) for op in ROUNDING for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", CASES, ids=[f"{o}-{v}-{d}" for o, v, d in CASES])
def test_rounding_eager_every_version_and_type(op, version, dt):
    x = sample(dt)
    assert_exact(ROUNDING[op](x, opset=version), truth(op, x))


def test_round_ties_go_to_even_and_keep_the_sign_of_zero():
    x = np.concatenate([np.arange(-6, 6) + 0.5, [F32_BELOW_HALF, -F32_BELOW_HALF, 2.0 ** 23 - 0.5]]).astype(np.float32)
    want = [-6.0, -4.0, -4.0, -2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0, 4.0, 6.0, 0.0, -0.0, 2.0 ** 23]
    got = dsl.round(x)
    assert got.tolist() == want and np.signbit(got).tolist() == np.signbit(want).tolist()


def test_floor_and_ceil_of_tiny_values():
    x = np.array([-1e-40, 1e-40, -0.0, -0.5], np.float32)
    assert dsl.floor(x).tolist() == [-1.0, 0.0, -0.0, -1.0]
    assert np.signbit(dsl.ceil(x)).tolist() == [True, False, True, True]


def test_sign_of_unsigned_and_extremes():
    assert dsl.sign(np.array([0, 1, 2 ** 64 - 1], np.uint64)).tolist() == [0, 1, 1]
    assert dsl.sign(np.array([-128, 0, 127], np.int8)).tolist() == [-1, 0, 1]
    out = dsl.sign(np.array([np.nan, -0.0, -np.inf, 1e-40], np.float32))
    assert np.isnan(out[0]) and out[1:].tolist() == [0.0, -1.0, 1.0] and not np.signbit(out[1])


# ---- IsNaN, IsInf: eager ------------------------------------------------------------------------
PREDICATE_CASES = [(op, v, dt) for op in ("IsNaN", "IsInf") for v in onnx_versions(op)
                   for dt in allowed_types(op, v, "T1")]


@pytest.mark.parametrize("op, version, dt", PREDICATE_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in PREDICATE_CASES])
def test_predicates_eager_every_version_and_type(op, version, dt):
    x = float_codes(dt)
    if op == "IsNaN":
        out = dsl.is_nan(x, opset=version)
        assert out.dtype == np.bool_ and out.tolist() == predicate_truth(x).tolist()
        return
    for negative, positive in DETECT:
        out = dsl.is_inf(x, detect_negative=negative, detect_positive=positive, opset=version)
        assert out.dtype == np.bool_ and out.tolist() == predicate_truth(x, (negative, positive)).tolist()


def test_float8_nan_and_inf_codes():
    e4m3 = np.array([0x7F, 0xFF, 0x7E, 0x80], np.uint8).view(ml_dtypes.float8_e4m3fn)
    assert dsl.is_nan(e4m3).tolist() == [True, True, False, False]
    assert not dsl.is_inf(e4m3).any()  # (no infinities: 0x7E is 448)
    e5m2 = np.array([0x7C, 0xFC, 0x7D, 0x7B], np.uint8).view(ml_dtypes.float8_e5m2)
    assert dsl.is_inf(e5m2).tolist() == [True, True, False, False]
    assert dsl.is_inf(e5m2, detect_positive=False).tolist() == [False, True, False, False]
    assert dsl.is_nan(np.array([0x80, 0x00], np.uint8).view(ml_dtypes.float8_e5m2fnuz)).tolist() == [True, False]


# ---- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("op, version, name, input_name", [
    ("Floor", LATEST, "int32", "X"), ("Floor", 6, "bfloat16", "X"), ("Ceil", 1, "bfloat16", "X"),
    ("Round", 21, "bfloat16", "X"), ("Round", LATEST, "int64", "X"), ("Sign", LATEST, "bool", "input"),
    ("Sign", 12, "bfloat16", "input"), ("IsNaN", 19, "float8e4m3fn", "X"), ("IsNaN", LATEST, "int32", "X"),
    ("IsNaN", LATEST, "float4e2m1", "X"), ("IsNaN", LATEST, "float8e8m0", "X"), ("IsInf", 19, "float16", "X"),
    ("IsInf", LATEST, "uint8", "X"),
])
def test_types_outside_the_version_are_errors(op, version, name, input_name):
    x = np.zeros(2, dtypes.dtype(name).np_dtype)
    fn = {**ROUNDING, "IsNaN": dsl.is_nan, "IsInf": dsl.is_inf}[op]
    with pytest.raises(dsl.DTypeError, match=rf"^{op}: input '{input_name}' has type {name}\[2\], not allowed at "
                                             rf"version {registry.get(op).schema(version).version}"):
        fn(x, opset=version)


@pytest.mark.parametrize("op, opset", [("Round", 10), ("Sign", 8), ("IsNaN", 8), ("IsInf", 9)])
def test_ops_do_not_exist_before_their_first_version(op, opset):
    fn = {**ROUNDING, "IsNaN": dsl.is_nan, "IsInf": dsl.is_inf}[op]
    with pytest.raises(dsl.UnsupportedError, match=rf"^{op}: not defined at opset {opset}; first version is"):
        fn(np.zeros(2, np.float32), opset=opset)


# ---- jit vs eager ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float", "double"])
def test_rounding_jit_matches_eager_floats(name):
    dt = dtypes.dtype(name)
    fns = list(ROUNDING.values())
    kernel = dsl.jit(lambda sel, x: select_rows(sel, [fn(x) for fn in fns]))
    x, sel = sample(dt, 96, seed=2), np.arange(len(fns)).reshape(-1, 1)
    got = kernel(sel, x)
    assert kernel.executable(sel, x).kernel_count == 1
    assert_exact(got, interpreted(kernel, sel, x))
    for row, (op, fn) in enumerate(ROUNDING.items()):
        assert_exact(got[row], fn(x))
        assert_exact(got[row], truth(op, x))


def test_sign_jit_matches_eager_every_integer_type():
    names = [dt.onnx_name for dt in allowed_types("Sign", LATEST) if dt.kind != "float"]
    assert len(names) == 8
    xs = [sample(dtypes.dtype(n), 64, seed=4) for n in names]
    got = dsl.jit(lambda *xs: tuple(dsl.sign(x) for x in xs))(*xs)
    for out, x in zip(got, xs):
        assert_exact(out, dsl.sign(x))
        assert_exact(out, truth("Sign", x))


def test_predicates_jit_match_eager_every_type():
    """IsNaN and IsInf under each detect combination, for every type of version 20 (float8 too)."""
    dts = allowed_types("IsNaN", LATEST, "T1")
    assert dts == allowed_types("IsInf", LATEST, "T1") and len(dts) == 8

    def predicates(sel, *xs):
        return tuple(select_rows(sel, [dsl.is_nan(x)] + [dsl.is_inf(x, detect_negative=n, detect_positive=p)
                                                      for n, p in DETECT]) for x in xs)
    xs = [float_codes(dt, seed=6)[:128] for dt in dts]
    sel = np.arange(1 + len(DETECT)).reshape(-1, 1)
    got = dsl.jit(predicates)(sel, *xs)
    for out, x in zip(got, xs):
        want = np.stack([predicate_truth(x)] + [predicate_truth(x, detect) for detect in DETECT])
        assert out.dtype == np.bool_ and out.tolist() == want.tolist()
        assert out.tolist() == np.stack([dsl.is_nan(x)] + [dsl.is_inf(x, detect_negative=n, detect_positive=p)
                                                           for n, p in DETECT]).tolist()
