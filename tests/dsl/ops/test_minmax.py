"""Tests for dsl/ops/minmax.py: Max, Min and Clip at every version and type, eager vs numpy and jit vs eager."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.ops import minmax, registry

from dsl_test_helpers import allowed_types, onnx_versions, schemas_with_onnx

LATEST = registry.LATEST_OPSET
VARIADIC = {"Max": (dsl.maximum, max), "Min": (dsl.minimum, min)}


@pytest.mark.parametrize("op", ["Max", "Min", "Clip"])
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert {t.onnx_name for t in schema.types} == {t.onnx_name for t in allowed_types(op, schema.version)}
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        for attr in schema.attrs:
            default = spec.attributes[attr.name].default_value
            assert attr.default == (default.f if default.type == 1 else None), (op, attr.name)
        if op == "Clip":
            assert [(i.name, i.optional) for i in schema.inputs] == \
                [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs]
        else:  # ONNX's one variadic input: data_0 required, then optional slots of the same type
            assert spec.inputs[0].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
            assert [i.name for i in schema.inputs] == [f"data_{k}" for k in range(minmax.MAX_INPUTS)]
            assert [i.optional for i in schema.inputs] == [False] + [True] * (minmax.MAX_INPUTS - 1)
            assert all(i.types is None for i in schema.inputs)


def sample(dt, shape, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    count = math.prod(shape)
    if dt.kind == "float":
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 2.0, 1e-3, 70000.0])
        with np.errstate(over="ignore"):
            return rng.choice(pool, count).astype(dt.np_dtype).reshape(shape)
    info = ml_dtypes.iinfo(dt.np_dtype)
    pool = np.array([info.min, info.max, 0, 1, info.max - 1, 5], dtype=np.int64 if info.min < 0 else np.uint64)
    return rng.choice(pool, count).astype(dt.np_dtype).reshape(shape)


def exact_fold(pick, arrays: list) -> list:
    """The spec's elementwise max / min over Python numbers; NaN anywhere gives NaN."""
    full = np.broadcast_arrays(*arrays)
    columns = zip(*(a.reshape(-1).tolist() if a.dtype.kind in "iu" else a.astype(np.float64).reshape(-1).tolist()
                    for a in full))
    return [math.nan if any(v != v for v in column) else pick(column) for column in columns]


def assert_values(got: np.ndarray, expected: list) -> None:
    values = got.reshape(-1).tolist() if got.dtype.kind in "iu" else got.astype(np.float64).reshape(-1).tolist()
    assert len(values) == len(expected)
    for value, want in zip(values, expected):
        assert (value != value and want != want) or value == want, (values, expected)


# ---- Max / Min ---------------------------------------------------------------------------------------
VARIADIC_CASES = [(op, v, dt) for op in VARIADIC for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", VARIADIC_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in VARIADIC_CASES])
def test_max_min_eager_every_version_and_type(op, version, dt):
    fn, pick = VARIADIC[op]
    shapes = [(3, 4)] * 3 if version < 8 else [(3, 4), (4,), (3, 1)]
    arrays = [sample(dt, shape, seed) for seed, shape in enumerate(shapes)]
    for count in (1, 2, 3):
        got = fn(*arrays[:count], opset=version)
        assert got.dtype == dt.np_dtype and got.shape == (3, 4)
        assert_values(got, exact_fold(pick, arrays[:count]))


def test_nan_propagates_from_either_side_and_ties_keep_the_first():
    a = np.array([np.nan, 1.0, -0.0, 0.0], np.float32)
    b = np.array([1.0, np.nan, 0.0, -0.0], np.float32)
    assert np.isnan(dsl.maximum(a, b)[:2]).all() and np.isnan(dsl.minimum(b, a)[:2]).all()
    assert np.signbit(dsl.maximum(a, b)[2:]).tolist() == [True, False]
    assert np.signbit(dsl.minimum(a, b)[2:]).tolist() == [True, False]


@pytest.mark.parametrize("args, opset, error, match", [
    ((np.zeros((2, 3)), np.zeros((3,))), 6, dsl.ShapeError,
     r"^Max: input shapes \[\[2, 3\], \[3\]\] differ; version 6 needs equal shapes \(broadcasting needs opset >= 8\)"),
    ((np.zeros((2, 3)), np.zeros((2,))), LATEST, dsl.ShapeError,
     r"^Max: shapes \[2, 3\] and \[1, 2\] are not broadcastable: dim 3 vs 2"),
    ((np.zeros(2, np.int32), np.zeros(2, np.int32)), 11, dsl.DTypeError,
     r"^Max: input 'data_0' has type int32\[2\], not allowed at version 8"),
    ((np.zeros(2, np.float32), np.zeros(2, np.float64)), LATEST, dsl.DTypeError,
     r"^Max: input 'data_1' has element type double but an earlier input of the same type variable has float"),
    ((), LATEST, dsl.InputError, rf"^Max: takes 1 to {minmax.MAX_INPUTS} inputs, got 0"),
])
def test_max_errors_name_op_and_value(args, opset, error, match):
    with pytest.raises(error, match=match):
        dsl.maximum(*args, opset=opset)


def test_variadic_inputs_cannot_have_gaps_or_exceed_the_slots():
    x = np.zeros(2, np.float32)
    with pytest.raises(dsl.ShapeError, match=r"^Min: input 1 is missing; variadic inputs cannot be omitted"):
        dsl.eager.call("Min", x, None, data_2=x)
    with pytest.raises(dsl.InputError, match=rf"^Min: takes 1 to {minmax.MAX_INPUTS} inputs, got 65"):
        dsl.minimum(*[x] * (minmax.MAX_INPUTS + 1))
    assert dsl.minimum(*[x] * minmax.MAX_INPUTS).tolist() == [0.0, 0.0]


# ---- Clip -----------------------------------------------------------------------------------------------
def _finite_limit(dt) -> float:
    info = ml_dtypes.finfo(dt.np_dtype) if dt.onnx_name == "bfloat16" else np.finfo(dt.np_dtype)
    return float(info.max)


def _expected_clip(x: np.ndarray, low, high, dt) -> list:
    """Min(high, Max(x, low)) with the spec's numeric_limits defaults for absent float bounds."""
    if dt.kind == "float":
        low = -_finite_limit(dt) if low is None else low
        high = _finite_limit(dt) if high is None else high
    values = x.reshape(-1).tolist() if dt.kind != "float" else x.astype(np.float64).reshape(-1).tolist()
    out = []
    for v in values:
        if low is not None:
            v = v if (v != v or v >= low) else low
        if high is not None:
            v = v if (v != v or v <= high) else high
        out.append(v)
    return out


CLIP_CASES = [(v, dt) for v in onnx_versions("Clip") for dt in allowed_types("Clip", v)]


@pytest.mark.parametrize("version, dt", CLIP_CASES, ids=[f"{v}-{d}" for v, d in CLIP_CASES])
def test_clip_eager_every_version_and_type(version, dt):
    x = sample(dt, (4, 6), 0)
    bounds = [(1, 5), (None, 1), (0, None), (None, None), (5, 1)] if dt.kind != "float" else \
        [(-1.5, 2.0), (None, 1e-3), (0.0, None), (None, None), (2.0, -1.5)]
    for low, high in bounds:
        if version < 11:  # float attributes: float32 values rounded to T; version 6 defaults to -+FLT_MAX
            got = dsl.clip(x, low, high, opset=version)
            flt_max = float(np.finfo(np.float32).max) if version == 6 else None
            low, high = (default if b is None else b for b, default in ((low, -flt_max if flt_max else None),
                                                                       (high, flt_max)))
            with np.errstate(over="ignore"):
                low, high = (None if b is None else float(np.float32(b).astype(dt.np_dtype)) for b in (low, high))
        else:
            as_input = [None if b is None else np.array(b, dt.np_dtype) for b in (low, high)]
            got = dsl.clip(x, *as_input, opset=version)
            low, high = (None if b is None else b.item() if dt.kind != "float" else float(b) for b in as_input)
        assert got.dtype == dt.np_dtype and got.shape == x.shape
        assert_values(got, _expected_clip(x, low, high, dt))


def test_clip_defaults_clamp_infinities_to_the_finite_limits():
    x = np.array([-np.inf, np.inf, np.nan], np.float16)
    assert dsl.clip(x).tolist()[:2] == [-65504.0, 65504.0] and np.isnan(dsl.clip(x)[2])
    assert dsl.clip(x, opset=6).tolist()[:2] == [-np.inf, np.inf]  # -+FLT_MAX is -+inf in float16
    assert dsl.clip(x.astype(np.float64), opset=6).tolist()[:2] == [-3.4028234663852886e38, 3.4028234663852886e38]


def test_clip_attributes_are_float32_values():
    x = np.array([0.0], np.float64)
    assert dsl.clip(x, 0.1, None, opset=6).tolist() == [float(np.float32(0.1))]


@pytest.mark.parametrize("call, match", [
    (lambda: dsl.clip(np.zeros(3, np.float32), np.zeros(1, np.float32)),
     r"^Clip: min must be a scalar \(tensor of empty shape\), got shape \[1\]"),
    (lambda: dsl.clip(np.zeros(3, np.float32), None, np.zeros((1, 1), np.float32)),
     r"^Clip: max must be a scalar \(tensor of empty shape\), got shape \[1, 1\]"),
    (lambda: dsl.clip(np.zeros(3, np.int32), 0, 1, opset=11),
     r"^Clip: input 'input' has type int32\[3\], not allowed at version 11"),
    (lambda: dsl.clip(np.zeros(3, np.float32), np.float64(0.0), None),
     r"^Clip: input 'min' has element type double but an earlier input of the same type variable has float"),
    (lambda: dsl.clip(np.zeros(3, np.float32), "low", None, opset=6),
     r"^Clip: attribute 'min' = 'low'; expected a float"),
])
def test_clip_errors_name_op_and_value(call, match):
    with pytest.raises(dsl.DslError, match=match):
        call()


# ---- jit vs eager ---------------------------------------------------------------------------------------
def _select(sel, outs):
    result = outs[-1]
    for index in range(len(outs) - 2, -1, -1):
        result = dsl.where(dsl.equal(sel, index), outs[index], result)
    return result


def _jit_ops(a, b, c, low, high):
    return [dsl.maximum(a, b, c), dsl.minimum(a, b, c), dsl.maximum(a), dsl.clip(a, low, high),
            dsl.clip(a, None, high), dsl.clip(a), dsl.clip(a, high, low)]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "double", "int8", "uint16"])
def test_max_min_clip_jit_match_eager(name):
    dt = dtypes.dtype(name)
    count = len(_jit_ops(*[np.zeros(())] * 5))
    a, b, c = sample(dt, (count, 8), 1), sample(dt, (8,), 2), sample(dt, (count, 1), 3)
    low, high = (np.array(v, dt.np_dtype) for v in ((-1.5, 2.0) if dt.kind == "float" else (1, 5)))
    sel = np.arange(count).reshape(-1, 1)
    kernel = dsl.jit(lambda sel, a, b, c, low, high: _select(sel, _jit_ops(a, b, c, low, high)))
    got = kernel(sel, a, b, c, low, high)
    assert kernel.executable(sel, a, b, c, low, high).kernel_count == 1
    for row, want in enumerate(_jit_ops(a, b, c, low, high)):
        np.testing.assert_array_equal(got[row].view(np.uint8), np.broadcast_to(want, a.shape)[row].view(np.uint8))


def test_clip_attributes_and_equal_shapes_jit_at_opset_6():
    kernel = dsl.jit(lambda x, y: (dsl.clip(x, -1.0, 0.5), dsl.clip(x), dsl.maximum(x, y)), opset=6)
    x, y = sample(dtypes.dtype("float"), (3, 5), 4), sample(dtypes.dtype("float"), (3, 5), 5)
    for got, want in zip(kernel(x, y), (dsl.clip(x, -1.0, 0.5, opset=6), dsl.clip(x, opset=6),
                                        dsl.maximum(x, y, opset=6))):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
