"""Tests for dsl/ops/math.py: unary math ops and Pow at every version and type, eager vs numpy and jit vs eager."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.ops import registry

from dsl_test_helpers import allowed_types, assert_input_types_match_onnx, onnx_versions, schemas_with_onnx

LATEST = registry.LATEST_OPSET
UNARY = {"Neg": dsl.neg, "Abs": dsl.abs, "Exp": dsl.exp, "Log": dsl.log, "Sqrt": dsl.sqrt,
         "Reciprocal": dsl.reciprocal, "Tanh": dsl.tanh, "Sigmoid": dsl.sigmoid, "Relu": dsl.relu, "Erf": dsl.erf}
OPS = [*UNARY, "Pow"]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 1e-30, 88.0, -90.0]


# ---- helpers (independent of dsl) ---------------------------------------------------------------
def assert_schemas_match_onnx(op: str) -> None:
    for schema, spec in schemas_with_onnx(op):
        assert_input_types_match_onnx(op, schema, spec)
        for formal, mine in zip(spec.inputs, schema.inputs):
            assert mine.optional == (formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional)
        assert {a.name for a in schema.attrs} == set(spec.attributes), (op, schema.version)
        for attr in schema.attrs:
            default = spec.attributes[attr.name].default_value
            expected = default.i if default.type == 2 else default.f if default.type == 1 else None
            assert (None if attr.default is registry.REQUIRED else attr.default) == expected


def sample(dt, shape=(3, 16), seed=0) -> np.ndarray:
    """Values of ``dt``: float specials first, then random normals; integers over the full range."""
    rng = np.random.default_rng(seed)
    count = math.prod(shape)
    if dt.kind == "float":
        values = np.concatenate([SPECIALS, rng.standard_normal(count) * 4])[:count]
        return values.astype(dt.np_dtype).reshape(shape)
    if dt.kind == "bool":
        return rng.integers(0, 2, count).astype(np.bool_).reshape(shape)
    info = ml_dtypes.iinfo(dt.np_dtype)
    storage = np.int64 if info.min < 0 else np.uint64
    edges = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2], storage)
    values = np.concatenate([edges, rng.integers(info.min, info.max, count, endpoint=True, dtype=storage)])
    return values[:count].astype(dt.np_dtype).reshape(shape)


def rounded(values64: np.ndarray, dt) -> np.ndarray:
    """float64 values rounded to ``dt`` by numpy / ml_dtypes (not by dsl's convert)."""
    with np.errstate(over="ignore"):
        return np.asarray(values64, np.float64).astype(dt.np_dtype)


def ulp_ordered(values: np.ndarray) -> np.ndarray:
    raw = values.view({2: np.int16, 4: np.int32, 8: np.int64}[values.dtype.itemsize]).astype(np.int64)
    return np.where(raw < 0, -(raw & ((1 << (8 * values.dtype.itemsize - 1)) - 1)), raw)


def assert_close_ulp(got: np.ndarray, want: np.ndarray, ulps: int) -> None:
    """Same dtype and shape, NaN where want is NaN, and at most ``ulps`` apart elsewhere."""
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind not in "fV":
        np.testing.assert_array_equal(got, want)
        return
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
    distance = np.where(np.isnan(w64), 0, np.abs(ulp_ordered(got) - ulp_ordered(want)))
    assert distance.max(initial=0) <= ulps, (got[distance > ulps], want[distance > ulps])


# ---- schemas --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    assert_schemas_match_onnx(op)


# ---- unary ops, eager, vs float64 formulas ------------------------------------------------------
def _expected_unary(op: str, x: np.ndarray, dt) -> tuple[np.ndarray, int]:
    """(expected, ulp tolerance): exact ops compared bit for bit, transcendental within 2 ulp."""
    if dt.kind in ("int", "uint"):
        wide = x.astype(object)
        exact = {"Neg": lambda v: -v, "Abs": abs, "Relu": lambda v: max(v, 0),
                 "Erf": lambda v: int(math.erf(v))}[op]
        bits = dt.bits
        wrapped = [(exact(int(v)) + (1 << (bits - 1) if dt.kind == "int" else 0)) % (1 << bits)
                   - (1 << (bits - 1) if dt.kind == "int" else 0) for v in wide.reshape(-1)]
        return np.array(wrapped, dtype=object).astype(dt.np_dtype).reshape(x.shape), 0
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = {"Neg": np.negative, "Abs": np.abs, "Sqrt": np.sqrt, "Reciprocal": lambda v: 1 / v,
                 "Relu": lambda v: np.where(v < 0, 0.0, v)}
        if op in exact:
            return rounded(exact[op](x64), dt), 0
        formula = {"Exp": np.exp, "Log": np.log, "Tanh": np.tanh, "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
                   "Erf": np.vectorize(math.erf, otypes=[np.float64])}[op]
        return rounded(formula(x64), dt), 2


UNARY_CASES = [(op, v, dt) for op in UNARY for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", UNARY_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in UNARY_CASES])
def test_unary_eager_every_version_and_type(op, version, dt):
    x = sample(dt)
    got = UNARY[op](x, opset=version)
    expected, ulps = _expected_unary(op, x, dt)
    assert_close_ulp(got, expected, ulps)


def test_int8_negation_and_abs_wrap():
    x = np.array([-128, -1, 127], np.int8)
    assert dsl.neg(x).tolist() == [-128, 1, -127]
    assert dsl.abs(x).tolist() == [-128, 1, 127]


def test_relu_keeps_nan_and_negative_zero():
    out = dsl.relu(np.array([np.nan, -0.0, -1.0, 2.0], np.float32))
    assert np.isnan(out[0]) and np.signbit(out[1]) and out[2:].tolist() == [0.0, 2.0]


def test_sigmoid_does_not_overflow_at_extremes():
    out = dsl.sigmoid(np.array([-1000.0, 1000.0, -np.inf, np.inf], np.float32))
    assert out.tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("op, version, name", [("Neg", 1, "int32"), ("Abs", 1, "int8"), ("Exp", 6, "bfloat16"),
                                               ("Relu", 13, "int8"), ("Erf", 13, "int32"), ("Erf", 9, "bfloat16"),
                                               ("Sqrt", LATEST, "int64"), ("Log", LATEST, "float8e4m3fn")])
def test_unary_types_outside_the_version_are_errors(op, version, name):
    x = np.zeros(2, dtypes.dtype(name).np_dtype)
    with pytest.raises(dsl.DTypeError, match=rf"^{op}: input '\w+' has type {name}\[2\], not allowed at "
                                             rf"version {registry.get(op).schema(version).version}"):
        UNARY[op](x, opset=version)


def test_unary_ops_do_not_exist_before_their_first_version():
    with pytest.raises(dsl.UnsupportedError, match=r"^Erf: not defined at opset 8; first version is 9"):
        dsl.erf(np.zeros(2, np.float32), opset=8)


# ---- Pow -------------------------------------------------------------------------------------------
def _pow_operands(x_dt, y_dt):
    rng = np.random.default_rng(1)
    if x_dt.kind == "float":
        x = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan, 2.0, -2.0], rng.uniform(-4, 4, 41)])
    else:
        x = np.concatenate([[0, 1, -1, 2, -2, 3, 7], rng.integers(-6, 7, 41)])
    if y_dt.kind == "float":
        y = np.concatenate([[0.5, 2.0, -1.0, np.nan, 0.0, 3.0, -2.0], rng.uniform(-3, 3, 41)])
        if x_dt.kind != "float":  # integer results of non-integral powers: keep them finite and in range
            x, y = np.abs(x), np.nan_to_num(np.clip(y, 0.0, 3.0))
    else:
        low = 0 if y_dt.kind == "uint" else -3
        y = np.concatenate([[0, 1, 2, 40, low, 63, 5], rng.integers(low, 5, 41)])
    return x.astype(x_dt.np_dtype), y.astype(y_dt.np_dtype)


def _expected_pow(x: np.ndarray, y: np.ndarray, x_dt, y_dt) -> tuple[np.ndarray, int]:
    if x_dt.kind != "float" and y_dt.kind != "float":
        bits, out = x_dt.bits, []
        for a, b in zip(x.astype(object), y.astype(object)):
            a, b = int(a), int(b)
            value = pow(a, b, 1 << 64) if b >= 0 else (1 if a == 1 else (-1 if b & 1 else 1) if a == -1 else 0)
            value %= 1 << bits
            out.append(value - (1 << bits) if value >= 1 << (bits - 1) else value)
        return np.array(out, dtype=x.dtype), 0
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), y.astype(np.float64))
    if x_dt.kind != "float":
        return np.trunc(exact).astype(x.dtype), 0
    return rounded(exact, x_dt), 2


POW_CASES = [(v, x, y) for v in onnx_versions("Pow") for x in allowed_types("Pow", v)
             for y in (allowed_types("Pow", v, "T1") if v >= 12 else [x])]


@pytest.mark.parametrize("version, x_dt, y_dt", POW_CASES, ids=[f"{v}-{x}-{y}" for v, x, y in POW_CASES])
def test_pow_eager_every_version_and_type_pair(version, x_dt, y_dt):
    x, y = _pow_operands(x_dt, y_dt)
    got = dsl.pow(x, y, opset=version)
    expected, ulps = _expected_pow(x, y, x_dt, y_dt)
    assert_close_ulp(got, expected, ulps)


def test_pow_integer_edge_cases():
    x = np.array([3, 0, 1, -1, -1, 2, 0], np.int64)
    y = np.array([41, -1, -5, -3, -4, 64, 0], np.int64)
    assert dsl.pow(x, y).tolist() == [pow(3, 41, 1 << 64) - (1 << 64), 0, 1, -1, 1, 0, 1]
    assert dsl.pow(np.array([3], np.int32), np.array([2 ** 64 - 1], np.uint64)).tolist() == \
        [np.int32(np.uint32(pow(3, 2 ** 64 - 1, 1 << 32)).astype(np.int32))]


def test_pow_broadcasts_and_python_scalars_take_x_type():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert dsl.pow(x, np.array([1.0, 2.0, 0.0], np.float32)).tolist() == [[0, 1, 1], [3, 16, 1]]
    assert dsl.pow(x, 2).dtype == np.float32


def test_pow_legacy_broadcast_before_7():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([2.0, 3.0], np.float32)
    out = dsl.eager.call("Pow", x, 6, Y=y, broadcast=1, axis=0)
    np.testing.assert_array_equal(out, x ** y[:, None])
    with pytest.raises(dsl.ShapeError, match=r"^Pow: shapes \[2, 3\] and \[2\] differ and broadcast=0"):
        dsl.eager.call("Pow", x, 6, Y=y)


@pytest.mark.parametrize("opset, x, y, error, match", [
    (LATEST, np.zeros((2, 3), np.float32), np.zeros((4,), np.float32), dsl.ShapeError,
     r"^Pow: shapes \[2, 3\] and \[1, 4\] are not broadcastable: dim 3 vs 4"),
    (LATEST, np.zeros(2, np.float32), np.zeros(2, np.bool_), dsl.DTypeError,
     r"^Pow: input 'Y' has type bool\[2\], not allowed at version 15"),
    (13, np.zeros(2, np.float32), np.zeros(2, ml_dtypes.bfloat16), dsl.DTypeError,
     r"^Pow: input 'Y' has type bfloat16\[2\], not allowed at version 13"),
    (11, np.zeros(2, np.float32), np.zeros(2, np.float64), dsl.DTypeError,
     r"^Pow: input 'Y' has element type double but an earlier input of the same type variable has float"),
    (11, np.zeros(2, np.float32), np.zeros(2, np.int32), dsl.DTypeError,
     r"^Pow: input 'Y' has type int32\[2\], not allowed at version 7"),
    (LATEST, np.zeros(2, np.int8), np.zeros(2, np.int8), dsl.DTypeError,
     r"^Pow: input 'X' has type int8\[2\], not allowed at version 15"),
])
def test_pow_errors_name_op_and_value(opset, x, y, error, match):
    with pytest.raises(error, match=match):
        dsl.pow(x, y, opset=opset)


# ---- jit vs eager -----------------------------------------------------------------------------------
def _select(sel, outs):
    """Row k of the result is outs[k]: one fused kernel checks every op (one compile per dtype)."""
    result = outs[-1]
    for index in range(len(outs) - 2, -1, -1):
        result = dsl.where(dsl.equal(sel, index), outs[index], result)
    return result


# one type per kernel code path: float32 domain (narrow and native), float64, signed and unsigned ints
JIT_UNARY_TYPES = ["float16", "bfloat16", "float", "double", "int8", "int64", "uint64"]


EXACT_OPS = ("Neg", "Abs", "Sqrt", "Reciprocal", "Relu")


@pytest.mark.parametrize("name", JIT_UNARY_TYPES)
def test_unary_jit_matches_eager(name):
    """math="exact": libm calls, within 2 ulp of numpy's own float32 functions."""
    dt = dtypes.dtype(name)
    ops = [op for op in UNARY if dt in registry.get(op).schema(LATEST).types]
    fns = [UNARY[op] for op in ops]
    kernel = dsl.jit(lambda sel, x: _select(sel, [fn(x) for fn in fns]), math="exact")
    x = sample(dt, (len(ops), 24), seed=3)
    got = kernel(np.arange(len(ops)).reshape(-1, 1), x)
    assert kernel.executable(np.arange(len(ops)).reshape(-1, 1), x).kernel_count == 1
    for row, op in enumerate(ops):
        assert_close_ulp(got[row], UNARY[op](x[row]), 0 if op in EXACT_OPS else 2)


@pytest.mark.parametrize("name", JIT_UNARY_TYPES)
def test_unary_jit_fast_math_is_within_its_ulp_bound(name):
    """math="fast" (the default): float32-domain math within 2 ulp of the float64 function rounded
    to the type (the README's bound; numpy's own float32 functions are not the yardstick)."""
    dt = dtypes.dtype(name)
    ops = [op for op in UNARY if dt in registry.get(op).schema(LATEST).types]
    fns = [UNARY[op] for op in ops]
    kernel = dsl.jit(lambda sel, x: _select(sel, [fn(x) for fn in fns]))
    x = sample(dt, (len(ops), 24), seed=3)
    got = kernel(np.arange(len(ops)).reshape(-1, 1), x)
    for row, op in enumerate(ops):
        if dt.kind != "float":
            assert_close_ulp(got[row], UNARY[op](x[row]), 0)
            continue
        exact = np.asarray(UNARY[op](x[row].astype(np.float64))).astype(x.dtype)
        assert_close_ulp(got[row], exact, 0 if op in EXACT_OPS else 2)


def test_erf_of_integers_jit_at_opset_12():
    kernel = dsl.jit(lambda x: dsl.erf(x), opset=12)
    x = np.array([-100, -6, -5, -1, 0, 1, 5, 6, 2 ** 31 - 1], np.int32)
    np.testing.assert_array_equal(kernel(x), dsl.erf(x, opset=12))
    assert dsl.erf(x, opset=12).tolist() == [-1, -1, 0, 0, 0, 0, 0, 1, 1]


@pytest.mark.parametrize("x_name, y_names", [
    ("float16", ["float16", "float", "int8", "int64"]), ("bfloat16", ["bfloat16", "double", "int32"]),
    ("float", ["float", "double", "int16", "uint64"]), ("double", ["double", "float16", "uint8"]),
    ("int32", ["int32", "int8", "uint64", "float"]), ("int64", ["int64", "uint16", "double"]),
])
def test_pow_jit_matches_eager(x_name, y_names):
    x_dt = dtypes.dtype(x_name)
    operands = [_pow_operands(x_dt, dtypes.dtype(n)) for n in y_names]
    xs, ys = np.stack([x for x, _ in operands]), [y for _, y in operands]
    kernel = dsl.jit(lambda sel, xs, *ys: _select(sel, [dsl.pow(xs, y) for y in ys]))
    got = kernel(np.arange(len(y_names)).reshape(-1, 1), xs, *ys)
    for row, y in enumerate(ys):
        assert_close_ulp(got[row], dsl.pow(xs[row], y), 0 if x_dt.kind != "float" else 2)


def test_pow_legacy_broadcast_jit_at_opset_6():
    kernel = dsl.jit(lambda x, y: dsl.eager.call("Pow", x, None, Y=y, broadcast=1, axis=0), opset=6)
    x = np.linspace(0.5, 3, 6, dtype=np.float32).reshape(2, 3)
    y = np.array([2.0, -1.0], np.float32)
    assert_close_ulp(kernel(x, y), dsl.eager.call("Pow", x, 6, Y=y, broadcast=1, axis=0), 0)


@pytest.mark.parametrize("y_name", ["uint64", "int64", "uint32"])
def test_integer_pow_with_huge_exponents_jit_matches_eager(y_name):
    # numba's integer ** falls back to float pow above 65536: the kernel must not
    y_np = dtypes.dtype(y_name).np_dtype
    top = int(np.iinfo(y_np).max)
    y = np.array([65535, 65536, 65537, 2 ** 31 - 1, top, top - 1, 70001], y_np)
    x = np.array([3, -3, 2, 5, -1, 7, -5], np.int64)
    want = [pow(int(a), int(b), 1 << 64) for a, b in zip(x, y)]
    want = [v - (1 << 64) if v >= 1 << 63 else v for v in want]
    assert dsl.pow(x, y).tolist() == want
    np.testing.assert_array_equal(dsl.jit(lambda x, y: x ** y)(x, y), want)
