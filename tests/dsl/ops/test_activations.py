"""Tests for dsl/ops/activations.py: every activation at every version and type, eager vs float64 formulas of
the spec text and jit vs eager."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.ops import registry

from dsl_test_helpers import (allowed_types, assert_input_types_match_onnx, assert_schema_in_force_matches_onnx,
                              onnx_versions, schemas_with_onnx)
from dsl_test_helpers import onnx_default as helper_default

LATEST = registry.LATEST_OPSET
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 1e-30, 88.0, -90.0, 1e-5, -1e-5]
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(y):
    return np.exp(-np.logaddexp(0.0, -y))


# ---- the spec texts' formulas in float64 (independent of dsl) --------------------------------------
# op -> (dsl function, ONNX attributes the formula takes, formula(x, **attributes), error scale):
# the scale is what a few float32 roundings inside the formula are relative to (the result, or
# also |x| where 1 + erf / alpha x + beta cancel).
def _rel(x, want):
    return np.abs(want)


def _abs_x(x, want):
    return np.abs(want) + np.abs(x)


FORMULAS = {
    "Elu": (dsl.elu, {"alpha": 0.3}, lambda x, alpha=1.0: np.where(x < 0, alpha * np.expm1(x), x), _rel),
    "Selu": (dsl.selu, {"alpha": 1.5, "gamma": 2.25},
             lambda x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875:
             np.where(x <= 0, gamma * (alpha * np.expm1(x)), gamma * x), _rel),
    "Celu": (dsl.celu, {"alpha": 0.3},
             lambda x, alpha=1.0: np.maximum(0, x) + np.minimum(0, alpha * np.expm1(x / alpha)), _rel),
    "LeakyRelu": (dsl.leaky_relu, {"alpha": 0.1}, lambda x, alpha=0.01: np.where(x < 0, alpha * x, x), _rel),
    "HardSigmoid": (dsl.hard_sigmoid, {"alpha": 0.3, "beta": 0.25},
                    lambda x, alpha=0.2, beta=0.5: np.maximum(0, np.minimum(1, alpha * x + beta)),
                    lambda x, want: np.abs(want) + np.abs(x) + 1),
    "HardSwish": (dsl.hard_swish, {}, lambda x: x * np.maximum(0, np.minimum(1, x / 6 + 0.5)),
                  lambda x, want: np.abs(want) + np.abs(x) * (1 + np.abs(x))),
    "Softplus": (dsl.softplus, {}, lambda x: np.logaddexp(0.0, x), _rel),
    "Softsign": (dsl.softsign, {}, lambda x: x / (1 + np.abs(x)), _rel),
    "ThresholdedRelu": (dsl.thresholded_relu, {"alpha": -0.5}, lambda x, alpha=1.0: np.where(x > alpha, x, 0.0), _rel),
    "Shrink": (dsl.shrink, {"bias": 0.75, "lambd": 1.5},
               lambda x, bias=0.0, lambd=0.5: np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0.0)),
               lambda x, want: np.abs(want) + np.abs(x)),
    "Gelu": (dsl.gelu, {"approximate": "tanh"},
             lambda x, approximate="none": 0.5 * x * (1 + (np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
                                                          if approximate == "tanh" else _erf(x / math.sqrt(2)))),
             _abs_x),
    "Mish": (dsl.mish, {}, lambda x: x * np.tanh(np.logaddexp(0.0, x)), _rel),
    "Swish": (dsl.swish, {"alpha": 0.5}, lambda x, alpha=1.0: x * _sigmoid(alpha * x), _rel),
}
OPS = [*FORMULAS, "PRelu", "SwiGLU"]
# error bound in units of the type's epsilon (times the scale): exact ops 0, else a few roundings
ULPS = {"LeakyRelu": 0, "ThresholdedRelu": 0, "Shrink": 0, "PRelu": 0}
JIT_EXTRA_ULPS = 1  # the fast vectorized float32 math (kernels/vmath.py) on top


def _f32(value: float) -> float:
    return float(np.float32(value))


def _attrs64(op: str, version: int, attrs: dict) -> dict:
    """The attributes the formula sees: onnx's defaults at ``version`` and ``attrs``, ONNX floats
    being float32 values."""
    spec = onnx.defs.get_schema(op, version).attributes
    given = {name: onnx_default(spec[name]) for name in spec if name != "consumed_inputs"} | attrs
    return {k: (_f32(v) if isinstance(v, float) else v) for k, v in given.items()}


# ---- helpers (independent of dsl) ---------------------------------------------------------------
def _eps(dt) -> float:
    return float(ml_dtypes.finfo(dt.np_dtype).eps)


def _tiny(dt) -> float:
    return float(ml_dtypes.finfo(dt.np_dtype).smallest_subnormal)


def sample(dt, shape=(2, 24), seed=0) -> np.ndarray:
    """Float specials first, then normals of spread 4 (or the full range of an integer type)."""
    rng = np.random.default_rng(seed)
    count = math.prod(shape)
    if dt.kind == "float":
        values = np.concatenate([SPECIALS, rng.standard_normal(count) * 4])[:count]
        return values.astype(dt.np_dtype).reshape(shape)
    info = ml_dtypes.iinfo(dt.np_dtype)
    storage = np.int64 if info.min < 0 else np.uint64
    edges = np.array([info.min, info.max, 0, 1, 2, 3, -1 if info.min < 0 else 4, -2 if info.min < 0 else 5], storage)
    values = np.concatenate([edges, rng.integers(-6, 7, count // 2).astype(storage) if info.min < 0 else
                             rng.integers(0, 7, count // 2).astype(storage),
                             rng.integers(info.min, info.max, count, endpoint=True, dtype=storage)])
    return values[:count].astype(dt.np_dtype).reshape(shape)


def assert_close(got, want64, x, dt, ulps: float, scale) -> None:
    """``got`` has dt's numpy type; NaN exactly where the float64 ``want64`` is NaN, infinities equal,
    elsewhere |got - want| <= ulps * (eps * scale(x, want) + subnormal * (1 + |x|)); 0 ulps: the bits of
    want rounded to dt, the sign of zero included."""
    assert got.dtype == dt.np_dtype and got.shape == np.shape(want64)
    g64 = got.astype(np.float64)
    if ulps == 0:
        with np.errstate(over="ignore"):
            want = np.asarray(want64).astype(dt.np_dtype)
        np.testing.assert_array_equal(np.isnan(g64), np.isnan(want64))
        ok = np.isnan(want64) | ((g64 == want.astype(np.float64)) & (np.signbit(g64) == np.signbit(want)))
        assert ok.all(), (x[~ok], got[~ok], want[~ok])
        return
    np.testing.assert_array_equal(np.isnan(g64), np.isnan(want64), err_msg=str((x, got, want64)))
    infinite = np.isinf(want64) | np.isinf(g64)
    np.testing.assert_array_equal(g64[infinite], want64[infinite])
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)  # (a subnormal intermediate, as softplus(-90) in float32, times x)
        bound = ulps * (_eps(dt) * scale(x64, want64) + _tiny(dt) * (1 + np.abs(x64)))
        bad = ~np.isnan(want64) & ~infinite & ~(np.abs(g64 - want64) <= bound)
    assert not bad.any(), (x[bad], got[bad], want64[bad])


def onnx_default(attr):
    """As dsl_test_helpers.onnx_default, float defaults included (these ops' alpha, beta ...)."""
    default = attr.default_value
    return default.f if default.type == onnx.AttributeProto.FLOAT else helper_default(attr)


# ---- schemas --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert_input_types_match_onnx(op, schema, spec)
        assert all(not i.optional for i in schema.inputs)
        assert {a.name for a in schema.attrs} == set(spec.attributes), (op, schema.version)
        for attr in schema.attrs:
            assert attr.default == onnx_default(spec.attributes[attr.name]), (op, schema.version, attr.name)


def test_every_version_up_to_the_latest_opset_is_onnx():
    for op in OPS:
        for opset in range(1, LATEST + 1):
            assert_schema_in_force_matches_onnx(op, opset)


# ---- eager vs the float64 formulas ----------------------------------------------------------------
FLOAT_CASES = [(op, v, dt) for op in FORMULAS for v in onnx_versions(op) for dt in allowed_types(op, v)
               if dt.kind == "float"]


def _check_eager(op, version, dt, attrs, ulps_extra=0):
    fn, _, formula, scale = FORMULAS[op]
    x = sample(dt)
    got = fn(x, opset=version, **attrs)
    want = formula(x.astype(np.float64), **_attrs64(op, version, attrs))
    assert_close(got, want, x, dt, ULPS.get(op, 3) + ulps_extra, scale)


@pytest.mark.parametrize("op, version, dt", FLOAT_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in FLOAT_CASES])
def test_eager_every_version_and_type(op, version, dt):
    with np.errstate(all="ignore"):
        _check_eager(op, version, dt, {})
        _check_eager(op, version, dt, FORMULAS[op][1])


def test_float_attributes_are_float32_values():
    x = np.array([-1.0], np.float64)
    assert dsl.leaky_relu(x, alpha=0.1).tolist() == [-_f32(0.1)]
    assert dsl.thresholded_relu(np.array([0.1000000001, 0.1000001]), alpha=0.1).tolist() == [0.0, 0.1000001]


def test_selu_defaults_at_opset_1():
    x = np.array([-1.0, 1.0], np.float64)
    gamma, alpha = _f32(1.0507), _f32(1.6732)
    np.testing.assert_array_equal(dsl.selu(x, opset=1), [gamma * (alpha * math.expm1(-1.0)), gamma])
    np.testing.assert_array_equal(dsl.selu(x, opset=6)[1], _f32(1.05070102214813232421875))


# ---- special values ---------------------------------------------------------------------------------
INF, NAN = np.inf, np.nan


@pytest.mark.parametrize("fn, x, want", [
    (dsl.elu, [-INF, INF, NAN, -0.0, -1000.0], [-1.0, INF, NAN, -0.0, -1.0]),
    (dsl.selu, [-INF, INF, NAN, -0.0], [-_f32(1.0507010221481323) * _f32(1.6732631921768188), INF, NAN, -0.0]),
    (dsl.celu, [-INF, INF, NAN, 1e30], [-1.0, INF, NAN, 1e30]),
    (dsl.leaky_relu, [-INF, INF, NAN, -0.0], [-INF, INF, NAN, -0.0]),
    (dsl.hard_sigmoid, [-INF, INF, NAN, 1e30], [0.0, 1.0, NAN, 1.0]),
    (dsl.hard_swish, [-INF, INF, NAN, -1e30, 1e30], [NAN, INF, NAN, -0.0, 1e30]),  # -inf * 0 is NaN
    (dsl.softplus, [-INF, INF, NAN, 1000.0, -1000.0], [0.0, INF, NAN, 1000.0, 0.0]),
    (dsl.softsign, [-INF, INF, NAN, 1e300, -0.0], [NAN, NAN, NAN, 1.0, -0.0]),  # inf / inf
    (dsl.thresholded_relu, [-INF, INF, NAN, 1.0], [0.0, INF, 0.0, 0.0]),
    (dsl.shrink, [-INF, INF, NAN, -0.5, 0.5], [-INF, INF, 0.0, 0.0, 0.0]),
    (dsl.gelu, [-INF, INF, NAN, -40.0, 40.0], [NAN, INF, NAN, -0.0, 40.0]),
    (dsl.mish, [-INF, INF, NAN, -1000.0, 1000.0], [NAN, INF, NAN, -0.0, 1000.0]),
    (dsl.swish, [-INF, INF, NAN, -1000.0, 1000.0], [NAN, INF, NAN, -0.0, 1000.0]),
])
@pytest.mark.parametrize("engine", ["eager", "jit"])
def test_special_values(fn, x, want, engine):
    x = np.array(x, np.float64)
    run = fn if engine == "eager" else dsl.jit(lambda v: fn(v))
    with np.errstate(all="ignore"):
        got = run(x)
    want = np.array(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


def test_scalar_empty_and_tensor_inputs():
    assert dsl.gelu(np.array(1.0, np.float32)).shape == ()
    assert float(dsl.gelu(np.array(1.0, np.float32))) == pytest.approx(0.5 * (1 + math.erf(math.sqrt(0.5))), rel=1e-7)
    assert dsl.mish(np.zeros((0, 3), np.float16)).shape == (0, 3)
    out = dsl.elu(dsl.Tensor.from_numpy(np.array([1.0, -1.0], np.float32)))
    assert isinstance(out, dsl.Tensor) and out.numpy().tolist() == [1.0, float(np.float32(math.expm1(-1.0)))]


def test_gelu_default_is_erf_form():
    x = np.array([1.0, -1.0], np.float64)
    np.testing.assert_allclose(dsl.gelu(x), 0.5 * x * (1 + _erf(x / math.sqrt(2))), rtol=1e-15)
    assert not np.allclose(dsl.gelu(x), dsl.gelu(x, approximate="tanh"), rtol=1e-6)


# ---- Shrink on integers, PRelu ------------------------------------------------------------------------
def _shrink_int(x: np.ndarray, dt, bias: float, lambd: float) -> np.ndarray:
    """The spec text with exact comparisons; bias CastLike'd to the type (truncated, wrapped)."""
    bits, signed = dt.bits, dt.kind == "int"
    bias_i = int(bias)
    out = []
    for v in x.reshape(-1).tolist():
        value = v + bias_i if v < -lambd else v - bias_i if v > lambd else 0
        value %= 1 << bits
        out.append(value - (1 << bits) if signed and value >= 1 << (bits - 1) else value)
    return np.array(out, dtype=object).astype(dt.np_dtype).reshape(x.shape)


INT_NAMES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
SHRINK_INT_ATTRS = [(0.0, 0.5), (3.0, 2.5), (-2.0, 1.0), (1.9, -0.5), (5.0, 1e30), (2.0, -1e30), (1.0, NAN),
                    (1e3, 0.0)]


@pytest.mark.parametrize("name", INT_NAMES)
def test_shrink_integers_eager(name):
    dt = dtypes.dtype(name)
    x = sample(dt, (40,))
    for bias, lambd in SHRINK_INT_ATTRS:
        got = dsl.shrink(x, bias=bias, lambd=lambd)
        np.testing.assert_array_equal(got, _shrink_int(x, dt, _f32(bias), _f32(lambd)), err_msg=str((bias, lambd)))
        assert got.dtype == x.dtype


def _prelu64(x, slope):
    return np.where(x < 0, slope * x, x)


@pytest.mark.parametrize("version", onnx_versions("PRelu"))
def test_prelu_eager_every_version_and_type(version):
    for dt in allowed_types("PRelu", version):
        x = sample(dt, (3, 8))
        slope = (np.array([0.5, -2.0, 3.0, 0.0, 1.0, -0.25, 2.0, 7.0]) if dt.kind == "float"
                 else np.array([2, 3, 1, 0, 5, 7, 1, 2])).astype(dt.np_dtype)
        got = dsl.prelu(x, slope, opset=version)
        if dt.kind == "float":
            with np.errstate(invalid="ignore"):  # (the -inf * 0 the formula's unused branch makes)
                want = _prelu64(x.astype(np.float64), slope.astype(np.float64))
            assert_close(got, want, x, dt, 0, _rel)
        else:  # slope * x wraps
            want = [int(v) * int(s) if int(v) < 0 else int(v) for v, s in zip(x.reshape(-1), np.tile(slope, 3))]
            bits = dt.bits
            want = [(w % (1 << bits)) - ((1 << bits) if dt.kind == "int" and w % (1 << bits) >= 1 << (bits - 1) else 0)
                    for w in want]
            np.testing.assert_array_equal(got, np.array(want, dtype=object).astype(dt.np_dtype).reshape(x.shape))


def test_prelu_broadcasts_slope_unidirectionally():
    x = np.array([[[-1.0, 2.0], [-3.0, 4.0], [-5.0, 6.0]]], np.float32)  # [1, 3, 2]
    slope = np.array([[0.5], [2.0], [3.0]], np.float32)  # [3, 1]
    assert dsl.prelu(x, slope).tolist() == [[[-0.5, 2.0], [-6.0, 4.0], [-15.0, 6.0]]]
    assert dsl.prelu(x, np.float32(2)).tolist() == [[[-2.0, 2.0], [-6.0, 4.0], [-10.0, 6.0]]]
    np.testing.assert_array_equal(dsl.jit(lambda a, b: dsl.prelu(a, b))(x, slope), dsl.prelu(x, slope))
    with pytest.raises(dsl.ShapeError, match=r"^PRelu: slope shape \[3\] does not broadcast unidirectionally to X "
                                             r"shape \[1, 3, 2\]"):
        dsl.prelu(x, np.ones(3, np.float32))
    with pytest.raises(dsl.ShapeError, match=r"^PRelu: slope shape \[2, 3, 2\] does not broadcast"):
        dsl.prelu(x, np.ones((2, 3, 2), np.float32))


def test_prelu_legacy_per_channel_slope():
    x = -np.ones((2, 3, 2), np.float32)
    slope = np.array([1.0, 2.0, 3.0], np.float32)
    want = np.broadcast_to(-slope[:, None], x.shape)
    np.testing.assert_array_equal(dsl.prelu(x, slope, opset=6), want)
    np.testing.assert_array_equal(dsl.prelu(x, slope, opset=1), want)
    np.testing.assert_array_equal(dsl.jit(lambda a, b: dsl.prelu(a, b), opset=6)(x, slope), want)
    with pytest.raises(dsl.ShapeError, match=r"^PRelu: slope shape \[3\] does not broadcast"):
        dsl.prelu(x, slope, opset=7)


# ---- errors -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, opset, name", [
    (dsl.elu, LATEST, "int32"), (dsl.selu, 6, "bfloat16"), (dsl.celu, 27, "double"), (dsl.leaky_relu, 6, "bfloat16"),
    (dsl.hard_sigmoid, LATEST, "int64"), (dsl.hard_swish, 21, "bfloat16"), (dsl.softplus, LATEST, "int8"),
    (dsl.softsign, 21, "bfloat16"), (dsl.thresholded_relu, LATEST, "float8e4m3fn"), (dsl.shrink, LATEST, "bfloat16"),
    (dsl.shrink, LATEST, "bool"), (dsl.gelu, LATEST, "int32"), (dsl.mish, 21, "bfloat16"), (dsl.swish, LATEST, "int64"),
])
def test_types_outside_the_version_are_errors(fn, opset, name):
    x = np.zeros(2, dtypes.dtype(name).np_dtype)
    with pytest.raises(dsl.DTypeError, match=rf"^\w+: input '\w+' has type {name}\[2\], not allowed at version"):
        fn(x, opset=opset)


def test_prelu_integer_types_need_opset_9():
    with pytest.raises(dsl.DTypeError, match=r"^PRelu: input 'X' has type int32\[2\], not allowed at version 7"):
        dsl.prelu(np.zeros(2, np.int32), np.zeros(2, np.int32), opset=8)


@pytest.mark.parametrize("fn, opset, first", [(dsl.gelu, 19, 20), (dsl.swish, 23, 24), (dsl.celu, 11, 12),
                                              (dsl.mish, 17, 18), (dsl.hard_swish, 13, 14),
                                              (dsl.thresholded_relu, 9, 10), (dsl.shrink, 8, 9)])
def test_ops_do_not_exist_before_their_first_version(fn, opset, first):
    with pytest.raises(dsl.UnsupportedError, match=rf"not defined at opset {opset}; first version is {first}"):
        fn(np.zeros(2, np.float32), opset=opset)


def test_attribute_errors():
    with pytest.raises(dsl.InputError, match=r"^Gelu: approximate 'erf' is not one of \['none', 'tanh'\]"):
        dsl.gelu(np.zeros(2, np.float32), approximate="erf")
    with pytest.raises(dsl.InputError, match=r"^Shrink: bias inf cannot be cast to int8"):
        dsl.shrink(np.zeros(2, np.int8), bias=np.inf)
    with pytest.raises(dsl.InputError, match=r"^Elu: attribute 'alpha' = 'x'; expected a float"):
        dsl.elu(np.zeros(2, np.float32), alpha="x")


# ---- jit vs eager -------------------------------------------------------------------------------------
def _select(sel, outs):
    """Row k of the result is outs[k]: one fused kernel checks every op (one compile per dtype)."""
    result = outs[-1]
    for index in range(len(outs) - 2, -1, -1):
        result = dsl.where(dsl.equal(sel, index), outs[index], result)
    return result


def _jit_rows(dt):
    """(label, function, attributes) per row: every op at the latest version, default and other attributes."""
    rows = []
    for op, (fn, attrs, _, _) in FORMULAS.items():
        if dt in registry.get(op).schema(LATEST).types:
            rows.append((op, fn, {}))
            if attrs:
                rows.append((op, fn, attrs))
    if dt.kind == "float":
        rows.append(("Gelu", dsl.gelu, {}))  # (the erf form; FORMULAS' other attributes are the tanh form)
    return rows


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float", "double"])
def test_float_jit_matches_eager(name):
    dt = dtypes.dtype(name)
    rows = _jit_rows(dt)
    x = np.stack([sample(dt, (24,), seed=row) for row in range(len(rows))])  # specials in every row
    sel = np.arange(len(rows)).reshape(-1, 1)
    kernel = dsl.jit(lambda sel, x: _select(sel, [fn(x, **attrs) for _, fn, attrs in rows]))
    with np.errstate(all="ignore"):
        got = kernel(sel, x)
        assert kernel.executable(sel, x).kernel_count == 1
        for row, (op, fn, attrs) in enumerate(rows):
            want = FORMULAS[op][2](x[row].astype(np.float64), **_attrs64(op, LATEST, attrs))
            assert_close(got[row], want, x[row], dt, ULPS.get(op, 3) + (JIT_EXTRA_ULPS if op not in ULPS else 0),
                         FORMULAS[op][3])
            eager = fn(x[row], **attrs)
            if op in ULPS:
                np.testing.assert_array_equal(got[row].view(np.uint8), eager.view(np.uint8))


@pytest.mark.parametrize("name", INT_NAMES)
def test_integer_jit_matches_eager(name):
    dt = dtypes.dtype(name)
    has_prelu = dt in registry.get("PRelu").schema(LATEST).types
    x = sample(dt, (len(SHRINK_INT_ATTRS) + has_prelu, 24), seed=4)
    slope = sample(dt, (24,), seed=5)
    sel = np.arange(x.shape[0]).reshape(-1, 1)

    def program(sel, x, slope):
        outs = [dsl.shrink(x, bias=b, lambd=lam) for b, lam in SHRINK_INT_ATTRS]
        return _select(sel, outs + ([dsl.prelu(x, slope)] if has_prelu else []))

    kernel = dsl.jit(program)
    got = kernel(sel, x, slope)
    assert kernel.executable(sel, x, slope).kernel_count == 1
    for row, (bias, lambd) in enumerate(SHRINK_INT_ATTRS):
        np.testing.assert_array_equal(got[row], dsl.shrink(x[row], bias=bias, lambd=lambd))
    if has_prelu:
        np.testing.assert_array_equal(got[-1], dsl.prelu(x[-1], slope))


def test_fused_chain_is_one_kernel():
    x = np.linspace(-4, 4, 64, dtype=np.float32).reshape(4, 16)
    y = np.linspace(1, 2, 16, dtype=np.float32)
    kernel = dsl.jit(lambda x, y: dsl.gelu(x) * y + dsl.prelu(x, y) - dsl.mish(dsl.leaky_relu(x)))
    got = kernel(x, y)
    assert kernel.executable(x, y).kernel_count == 1
    want = dsl.gelu(x) * y + dsl.prelu(x, y) - dsl.mish(dsl.leaky_relu(x))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    report = dsl.compare(kernel, x, y)
    assert report.ok, report


# ---- SwiGLU ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float", "double"])
def test_swiglu_is_swish_of_a_times_b(name):
    dt = dtypes.dtype(name)
    a, b = sample(dt, (2, 24), seed=8), sample(dt, (2, 24), seed=9)[::-1].copy()
    f = dsl.jit(lambda a, b: dsl.swiglu(a, b, alpha=1.5))
    with np.errstate(all="ignore"):
        want = a.astype(np.float64) * _sigmoid(1.5 * a.astype(np.float64)) * b.astype(np.float64)
        # relative, times the condition of sigmoid(alpha a) in a (the rounding of alpha * a)
        scale = lambda x, w: np.abs(w) * (1 + 1.5 * np.abs(x))  # noqa: E731
        assert_close(dsl.swiglu(a, b, alpha=1.5), want, a, dt, 4, scale)
        assert_close(f(a, b), want, a, dt, 4 + JIT_EXTRA_ULPS, scale)
    assert f.executable(a, b).kernel_count == 1


def test_swiglu_does_not_broadcast():
    with pytest.raises(dsl.ShapeError, match=r"SwiGLU: A shape \[2, 3\] and B shape \[3\] differ"):
        dsl.swiglu(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(dsl.UnsupportedError, match=r"^SwiGLU: not defined at opset 27"):
        dsl.swiglu(np.ones(3, np.float32), np.ones(3, np.float32), opset=27)
