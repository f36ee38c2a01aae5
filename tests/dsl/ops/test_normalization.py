"""Tests for dsl/ops/normalization.py: schemas vs onnx, values vs independent numpy formulas on both engines, errors."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import onnx.defs
from dsl_test_helpers import assert_schema_in_force_matches_onnx, onnx_allowed

import dsl
from dsl.ops import registry

OPS = ["LayerNormalization", "RMSNormalization", "LpNormalization", "GroupNormalization", "InstanceNormalization",
       "BatchNormalization", "MeanVarianceNormalization"]
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
TOL = {np.float32: 1e-5, np.float64: 1e-6, np.float16: 2e-3, ml_dtypes.bfloat16: 2e-2}


def _rng(seed=0):
    return np.random.default_rng(seed)


def _data(shape, dt, seed=0):
    return _rng(seed).standard_normal(shape).astype(dt)


def _both(fn, *args):
    """(eager, jit) results of ``fn``."""
    return fn(*args), dsl.jit(fn)(*args)


def _close(got, want, dt):
    assert got.dtype == np.dtype(dt), (got.dtype, dt)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL[dt], atol=TOL[dt])


@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    for opset in range(1, dsl.LATEST_OPSET + 1):
        assert_schema_in_force_matches_onnx(op, opset)
    for schema in registry.get(op).schemas:
        spec = onnx.defs.get_schema(op, schema.version)
        allowed = onnx_allowed(op, schema.version)
        assert [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs] == \
            [(i.name, i.optional) for i in schema.inputs]
        for formal, mine in zip(spec.inputs, schema.inputs):
            assert {t.onnx_name for t in (mine.types or schema.types)} == allowed[formal.type_str], (op, formal.name)
        assert {a.name for a in schema.attrs} == set(spec.attributes), (op, schema.version)
        for attr in schema.attrs:  # defaults: ints exactly, floats as the float32 onnx stores
            default = spec.attributes[attr.name].default_value
            if attr.kind == "int" and default.type == onnx.AttributeProto.INT:
                assert attr.default == default.i, (op, attr.name)
            elif attr.kind == "float":
                assert np.float32(attr.default) == np.float32(default.f), (op, attr.name)
            elif attr.kind == "ints" and default.ints:
                assert attr.default == list(default.ints), (op, attr.name)


def _standardize(x, axes, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps), mean


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization(dt, axis):
    x, scale, bias = _data((2, 3, 4), dt), _data((4,) if axis == -1 else (3, 4), dt, 1), _data((4,), dt, 2)
    axes = tuple(range(axis % 3, 3))
    norm, mean = _standardize(x, axes, 1e-5)
    want = norm * scale.astype(np.float64) + bias.astype(np.float64)
    for y in _both(lambda x, s, b: dsl.layer_normalization(x, s, b, axis=axis), x, scale, bias):
        _close(y, want, dt)
    y, m, inv = dsl.layer_normalization(x, scale, bias, axis, return_stats=True)
    assert m.dtype == np.float32 and m.shape == mean.shape == inv.shape
    np.testing.assert_allclose(m, mean, rtol=1e-5, atol=1e-6)


def test_layer_normalization_stats_through_the_jit_and_bfloat16_stash():
    x, scale = _data((3, 8), np.float32), np.ones(8, np.float32)
    y, mean, inv = dsl.jit(lambda x, s: dsl.layer_normalization(x, s, return_stats=True))(x, scale)
    np.testing.assert_allclose(mean, x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inv, 1 / np.sqrt(x.var(1, keepdims=True) + 1e-5), rtol=1e-5)
    _, m16, _ = dsl.layer_normalization(x, scale, stash_type=16, return_stats=True)
    assert m16.dtype == ml_dtypes.bfloat16


@pytest.mark.parametrize("dt", DTYPES)
def test_rms_normalization(dt):
    x, scale = _data((2, 3, 5), dt), _data((3, 5), dt, 1)
    wide = x.astype(np.float64)
    want = wide / np.sqrt((wide ** 2).mean(axis=(1, 2), keepdims=True) + 1e-5) * scale.astype(np.float64)
    for y in _both(lambda x, s: dsl.rms_normalization(x, s, axis=1), x, scale):
        _close(y, want, dt)


def test_rms_normalization_output_has_scale_type():
    x, scale = _data((2, 4), np.float16), np.full(4, 2.0, np.float32)
    y = dsl.rms_normalization(x, scale)
    assert y.dtype == np.float32
    wide = x.astype(np.float64)
    np.testing.assert_allclose(y, 2 * wide / np.sqrt((wide ** 2).mean(1, keepdims=True) + 1e-5), rtol=2e-3)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(dt, p):
    x = _data((3, 4), dt)
    x[1] = 0
    wide = x.astype(np.float64)
    norm = (np.abs(wide) ** p).sum(axis=0, keepdims=True) ** (1 / p)
    want = np.where(norm == 0, 0, wide / np.where(norm == 0, 1, norm))
    for y in _both(lambda x: dsl.lp_normalization(x, axis=0, p=p), x):
        _close(y, want, dt)
    y = dsl.lp_normalization(x, p=p)  # the zero row stays zero, not NaN
    assert np.all(y[1].astype(np.float64) == 0)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(dt, opset):
    x = _data((2, 4, 3), dt)
    groups = 2
    norm = _standardize(x.reshape(2, groups, 6), (2,), 1e-5)[0]
    count = groups if opset == 18 else 4
    scale, bias = _data((count,), dt, 1), _data((count,), dt, 2)
    if opset == 18:
        want = (norm * scale.astype(np.float64)[:, None] + bias.astype(np.float64)[:, None]).reshape(x.shape)
    else:
        want = norm.reshape(x.shape) * scale.astype(np.float64)[:, None] + bias.astype(np.float64)[:, None]
    fn = dsl.jit(opset=opset)(lambda x, s, b: dsl.group_normalization(x, s, b, groups))
    _close(fn(x, scale, bias), want, dt)
    _close(dsl.group_normalization(x, scale, bias, groups, opset=opset), want, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_instance_normalization(dt):
    x, scale, bias = _data((2, 3, 2, 2), dt), _data((3,), dt, 1), _data((3,), dt, 2)
    norm = _standardize(x, (2, 3), 1e-5)[0]
    want = norm * scale.astype(np.float64)[:, None, None] + bias.astype(np.float64)[:, None, None]
    for y in _both(dsl.instance_normalization, x, scale, bias):
        _close(y, want, dt)


@pytest.mark.parametrize("opset", [6, 7, 9, 14, 15])
def test_batch_normalization_inference(opset):
    x = _data((2, 3, 2), np.float32)
    scale, bias, mean = (_data((3,), np.float32, k) for k in (1, 2, 3))
    var = np.abs(_data((3,), np.float32, 4)) + 0.5
    want = (x - mean[:, None]) / np.sqrt(var[:, None].astype(np.float64) + 1e-5) * scale[:, None] + bias[:, None]
    _close(dsl.batch_normalization(x, scale, bias, mean, var, opset=opset), want, np.float32)
    fn = dsl.jit(opset=opset)(lambda *a: dsl.batch_normalization(*a))
    _close(fn(x, scale, bias, mean, var), want, np.float32)


def test_batch_normalization_training_mode():
    x = _data((4, 2, 3), np.float32)
    scale, bias = np.ones(2, np.float32), np.zeros(2, np.float32)
    mean, var = np.zeros(2, np.float32), np.ones(2, np.float32)
    cur_mean, cur_var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    for y, rm, rv in _both(lambda *a: dsl.batch_normalization(*a, training_mode=1), x, scale, bias, mean, var):
        np.testing.assert_allclose(y, (x - cur_mean[:, None]) / np.sqrt(cur_var[:, None] + 1e-5), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(rm, 0.1 * cur_mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv, 0.9 + 0.1 * cur_var, rtol=1e-5)


def test_batch_normalization_mixed_types_at_15():
    x = _data((2, 3), np.float16)
    one = np.ones(3, np.float32)
    y = dsl.batch_normalization(x, one, 0 * one, 0 * one, one.astype(np.float64), epsilon=0.0) \
        if False else dsl.batch_normalization(x, one, 0 * one, 0 * one.astype(np.float64), one.astype(np.float64), epsilon=0.0)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y, x, rtol=1e-3)


@pytest.mark.parametrize("dt", DTYPES)
def test_mean_variance_normalization(dt):
    x = _data((2, 3, 2, 2), dt)
    wide = x.astype(np.float64)
    dev = wide - wide.mean(axis=(0, 2, 3), keepdims=True)
    want = dev / (np.sqrt((dev ** 2).mean(axis=(0, 2, 3), keepdims=True)) + 1e-9)
    for y in _both(dsl.mean_variance_normalization, x):
        _close(y, want, dt)
    assert np.all(dsl.mean_variance_normalization(np.ones((1, 1, 2, 2), dt)).astype(np.float64) == 0)


@pytest.mark.parametrize("fn, match", [
    (lambda: dsl.layer_normalization(np.ones((2, 3), np.float32), np.ones(3, np.float32), axis=2),
     r"LayerNormalization: axis 2 out of range \[-2, 1\]"),
    (lambda: dsl.layer_normalization(np.ones((2, 3), np.float32), np.ones(4, np.float32)),
     r"LayerNormalization: Scale shape \[4\] is not unidirectionally broadcastable to X shape \[2, 3\]"),
    (lambda: dsl.layer_normalization(np.ones((2, 3), np.float32), np.ones(3, np.float32), stash_type=11),
     r"LayerNormalization: stash_type 11; expected one of"),
    (lambda: dsl.layer_normalization(np.ones(3, np.float32), np.ones(3, np.float64)),
     r"LayerNormalization: input 'Scale' has element type double"),
    (lambda: dsl.rms_normalization(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32)),
     r"RMSNormalization: scale shape \[2, 2\] is not unidirectionally broadcastable"),
    (lambda: dsl.rms_normalization(np.ones(3, np.int32), np.ones(3, np.float32)),
     r"RMSNormalization: input 'X' has type int32"),
    (lambda: dsl.lp_normalization(np.ones(3, np.float32), p=3), r"LpNormalization: p 3; expected 1 or 2"),
    (lambda: dsl.lp_normalization(np.ones(3, ml_dtypes.bfloat16), opset=21), r"LpNormalization: input 'input' has type"),
    (lambda: dsl.group_normalization(np.ones((1, 4, 2), np.float32), np.ones(4, np.float32), np.ones(4, np.float32), 3),
     r"GroupNormalization: num_groups 3 does not divide the channel count C = 4"),
    (lambda: dsl.group_normalization(np.ones((1, 4, 2), np.float32), np.ones(4, np.float32), np.ones(4, np.float32), 2,
                                     opset=18),
     r"GroupNormalization: scale shape \[4\]; expected \[2\] \(num_groups, at version 18\)"),
    (lambda: dsl.instance_normalization(np.ones((2, 3), np.float32), np.ones(3, np.float32), np.ones(3, np.float32)),
     r"InstanceNormalization: X has shape \[2, 3\] \(rank 2\); expected rank >= 3"),
    (lambda: dsl.batch_normalization(np.ones((2, 3), np.float32), *[np.ones(3, np.float32)] * 2,
                                     *[np.ones(2, np.float32)] * 2),
     r"BatchNormalization: input_mean shape \[2\]; expected \[3\] \(C\)"),
    (lambda: dsl.mean_variance_normalization(np.ones((2, 3), np.float32)),
     r"MeanVarianceNormalization: axis 2 out of range \[-2, 1\]"),
])
def test_errors(fn, match):
    with pytest.raises(dsl.DslError, match=match):
        fn()


def test_batch_normalization_rejects_training_outputs():
    from onnx import TensorProto, helper
    for opset, attrs, match in ((9, {}, r"training-mode outputs .* are not supported"),
                                (15, {}, r"3 outputs with training_mode=0")):
        node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], **attrs)
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])] + \
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "sbmv"]
        outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "rm", "rv")]
        model = helper.make_model(helper.make_graph([node], "g", inputs, outs),
                                  opset_imports=[helper.make_opsetid("", opset)])
        feeds = {"x": np.ones((2, 3), np.float32), **{n: np.ones(3, np.float32) for n in "sbmv"}}
        with pytest.raises(dsl.DslError, match=match):
            dsl.from_onnx(model).run(feeds, engine="numpy")
