"""Tests for dsl/ops/trig.py: Sin ... Atanh at every version and type, eager vs float64 math, jit vs eager, IEEE specials."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.ops import registry

from dsl_test_helpers import interpreted, select_rows, allowed_types, assert_schemas_match_onnx, onnx_versions

LATEST = registry.LATEST_OPSET
OPS = {"Sin": dsl.sin, "Cos": dsl.cos, "Tan": dsl.tan, "Asin": dsl.asin, "Acos": dsl.acos, "Atan": dsl.atan,
       "Sinh": dsl.sinh, "Cosh": dsl.cosh, "Asinh": dsl.asinh, "Acosh": dsl.acosh, "Atanh": dsl.atanh}
# the float64 ground truth: Python's math module (libm), numpy only where math refuses (poles, NaN results)
MATH = {"Sin": (math.sin, np.sin), "Cos": (math.cos, np.cos), "Tan": (math.tan, np.tan),
        "Asin": (math.asin, np.arcsin), "Acos": (math.acos, np.arccos), "Atan": (math.atan, np.arctan),
        "Sinh": (math.sinh, np.sinh), "Cosh": (math.cosh, np.cosh), "Asinh": (math.asinh, np.arcsinh),
        "Acosh": (math.acosh, np.arccosh), "Atanh": (math.atanh, np.arctanh)}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 1e-7, 1.0, -1.0, 2.0, 0.5]
BOUNDED = ("Asin", "Acos", "Atanh")  # domain [-1, 1]
ULPS = 2  # transcendental results: within 2 ulp of the float64 function rounded to the type


# ---- helpers (independent of dsl) ---------------------------------------------------------------
def sample(op: str, dt, count: int = 48, seed: int = 0) -> np.ndarray:
    """Specials first, then values spread over the op's domain (and some outside it)."""
    rng = np.random.default_rng(seed)
    if op in BOUNDED:
        spread = rng.uniform(-1.1, 1.1, count)
    elif op == "Acosh":
        spread = 1 + np.abs(rng.standard_normal(count) * 6) - 0.2
    else:
        spread = np.concatenate([[88.5, -90.0, 1e4, -3e4], rng.standard_normal(count) * 4])
    with np.errstate(over="ignore"):
        return np.concatenate([SPECIALS, spread])[:count].astype(dt.np_dtype)


def truth(op: str, x: np.ndarray, dt) -> np.ndarray:
    """The float64 function of x's values, rounded once to ``dt`` by numpy / ml_dtypes."""
    libm, fallback = MATH[op]

    def one(value: float) -> float:
        try:
            return libm(value)
        except (ValueError, OverflowError):
            return float(fallback(np.float64(value)))
    with np.errstate(all="ignore"):
        exact = np.array([one(float(v)) for v in x.astype(np.float64).reshape(-1)]).reshape(x.shape)
        return exact.astype(dt.np_dtype)


def ulp_ordered(values: np.ndarray) -> np.ndarray:
    raw = values.view({2: np.int16, 4: np.int32, 8: np.int64}[values.dtype.itemsize]).astype(np.int64)
    return np.where(raw < 0, -(raw & ((1 << (8 * values.dtype.itemsize - 1)) - 1)), raw)


def assert_close(got: np.ndarray, want: np.ndarray, ulps: int) -> None:
    """Same dtype and shape, NaN where want is NaN, zeros of want's sign, else at most ``ulps`` apart."""
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
    zeros = w64 == 0
    np.testing.assert_array_equal(np.signbit(g64[zeros]), np.signbit(w64[zeros]))
    distance = np.where(np.isnan(w64), 0, np.abs(ulp_ordered(got) - ulp_ordered(want)))
    assert distance.max(initial=0) <= ulps, (got[distance > ulps], want[distance > ulps])


# ---- schemas --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    assert_schemas_match_onnx(op)


# ---- eager, vs float64 math -----------------------------------------------------------------------
CASES = [(op, v, dt) for op in OPS for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", CASES, ids=[f"{o}-{v}-{d}" for o, v, d in CASES])
def test_eager_every_version_and_type(op, version, dt):
    x = sample(op, dt)
    assert_close(OPS[op](x, opset=version), truth(op, x, dt), ULPS)


# C99 Annex F: exact results at the special points (f(x) = x: the sign of zero is kept)
IEEE = [
    ("Sin", [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40], [0.0, -0.0, np.nan, np.nan, np.nan, 1e-40]),
    ("Cos", [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40], [1.0, 1.0, np.nan, np.nan, np.nan, 1.0]),
    ("Tan", [0.0, -0.0, np.inf, -np.inf, np.nan, -1e-40], [0.0, -0.0, np.nan, np.nan, np.nan, -1e-40]),
    ("Asin", [0.0, -0.0, 1.5, -np.inf, np.nan, 1e-40], [0.0, -0.0, np.nan, np.nan, np.nan, 1e-40]),
    ("Acos", [1.0, 1.5, -1.5, np.inf, np.nan, -np.inf], [0.0, np.nan, np.nan, np.nan, np.nan, np.nan]),
    ("Atan", [0.0, -0.0, np.nan, -1e-40], [0.0, -0.0, np.nan, -1e-40]),
    ("Sinh", [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 1e4], [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, np.inf]),
    ("Cosh", [0.0, -0.0, np.inf, -np.inf, np.nan, -1e4], [1.0, 1.0, np.inf, np.inf, np.nan, np.inf]),
    ("Asinh", [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40], [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]),
    ("Acosh", [1.0, 0.5, -np.inf, np.inf, np.nan, 0.0], [0.0, np.nan, np.nan, np.inf, np.nan, np.nan]),
    ("Atanh", [0.0, -0.0, 1.0, -1.0, 1.5, np.nan, 1e-40], [0.0, -0.0, np.inf, -np.inf, np.nan, np.nan, 1e-40]),
]


@pytest.mark.parametrize("op, inputs, expected", IEEE, ids=[row[0] for row in IEEE])
@pytest.mark.parametrize("name", ["float", "double"])
def test_special_values_exactly(op, inputs, expected, name):
    np_dtype = dtypes.dtype(name).np_dtype
    assert_close(OPS[op](np.array(inputs, np_dtype)), np.array(expected, np_dtype), 0)


def test_half_precision_computes_in_float32_and_rounds_once():
    # sin(float16(3.14)) is 1.5926e-3 in float32; float16 has a coarser grid there
    x = np.array([3.140625, 1e4, -0.0], np.float16)
    want = np.sin(x.astype(np.float64)).astype(np.float32).astype(np.float16)
    assert_close(dsl.sin(x), want, 0)
    assert dsl.atan(np.array([np.inf], dtypes.dtype("bfloat16").np_dtype)).astype(np.float32)[0] == \
        np.float32(np.pi / 2).astype(dtypes.dtype("bfloat16").np_dtype).astype(np.float32)


@pytest.mark.parametrize("op, version, name", [
    ("Sin", LATEST, "int32"), ("Cos", 7, "bfloat16"), ("Tan", 21, "bfloat16"), ("Sinh", LATEST, "int64"),
    ("Acosh", 9, "bfloat16"), ("Atan", LATEST, "float8e4m3fn"), ("Asin", LATEST, "bool"),
])
def test_types_outside_the_version_are_errors(op, version, name):
    x = np.zeros(2, dtypes.dtype(name).np_dtype)
    with pytest.raises(dsl.DTypeError, match=rf"^{op}: input 'input' has type {name}\[2\], not allowed at "
                                             rf"version {registry.get(op).schema(version).version}"):
        OPS[op](x, opset=version)


@pytest.mark.parametrize("op, opset", [("Sin", 6), ("Sinh", 8), ("Atanh", 8)])
def test_ops_do_not_exist_before_their_first_version(op, opset):
    with pytest.raises(dsl.UnsupportedError, match=rf"^{op}: not defined at opset {opset}; first version is"):
        OPS[op](np.zeros(2, np.float32), opset=opset)


# ---- jit vs eager ---------------------------------------------------------------------------------
JIT_CASES = [(name, mode) for name in ["float16", "bfloat16", "float", "double"] for mode in ("exact", "fast")]


@pytest.mark.parametrize("name, mode", JIT_CASES, ids=[f"{n}-{m}" for n, m in JIT_CASES])
def test_jit_matches_eager_every_type(name, mode):
    """Both math modes: float32-domain math within 2 ulp of the eager reference (float64 libm
    rounded once); float64 libm within 2 ulp of numpy's."""
    dt = dtypes.dtype(name)
    assert all(dt in allowed_types(op, LATEST) for op in OPS)
    fns = list(OPS.values())
    kernel = dsl.jit(lambda sel, x: select_rows(sel, [fn(x) for fn in fns]), math=mode)
    x = np.stack([sample(op, dt, 40, seed=5) for op in OPS])
    sel = np.arange(len(OPS)).reshape(-1, 1)
    got = kernel(sel, x)
    assert kernel.executable(sel, x).kernel_count == 1
    by_interpreter = interpreted(kernel, sel, x)
    for row, (op, fn) in enumerate(OPS.items()):
        assert_close(got[row], by_interpreter[row], ULPS)
        assert_close(got[row], fn(x[row]), ULPS)
        assert_close(got[row], truth(op, x[row], dt), ULPS)
