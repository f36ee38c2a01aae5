"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against plain numpy formulas, on both engines."""
from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.ops import registry
from tests.dsl.dsl_test_helpers import assert_schemas_match_onnx

NLL_VERSIONS = [12, 13, 22]
SCE_VERSIONS = [12, 13]
FLOATS = [np.float32, np.float64, np.float16]


def test_schemas_match_onnx():
    assert_schemas_match_onnx("NegativeLogLikelihoodLoss")
    assert_schemas_match_onnx("SoftmaxCrossEntropyLoss")
    assert [s.version for s in registry.get("NegativeLogLikelihoodLoss").schemas] == NLL_VERSIONS
    assert [s.version for s in registry.get("SoftmaxCrossEntropyLoss").schemas] == SCE_VERSIONS


def formula(logp, target, weight, reduction, ignore):
    """Plain loops: loss[n, d] = -w[t] * logp[n, t, d]; mean divides by the used weights."""
    n, c = logp.shape[:2]
    flat_p = logp.reshape(n, c, -1).astype(np.float64)
    flat_t = target.reshape(n, -1)
    loss = np.zeros(flat_t.shape)
    used = np.zeros(flat_t.shape)
    for i in range(n):
        for d in range(flat_t.shape[1]):
            t = int(flat_t[i, d])
            if t == ignore:
                continue
            w = 1.0 if weight is None else float(weight[t])
            loss[i, d], used[i, d] = -w * flat_p[i, t, d], w
    if reduction == "none":
        return loss.reshape(target.shape)
    return loss.sum() if reduction == "sum" else loss.sum() / used.sum()


def log_softmax(x):
    x = x.astype(np.float64)
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def run(fn, engine, *args, **kw):
    if engine == "numpy":
        return fn(*args, **kw)
    opset = kw.pop("opset", None)
    return dsl.jit(lambda *a: fn(*a, **kw), opset=opset)(*args)


@pytest.mark.parametrize("engine", ["numpy", "jit"])
@pytest.mark.parametrize("version", NLL_VERSIONS)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted,ignore", [(False, None), (True, None), (True, 1)])
def test_nll_values(engine, version, reduction, weighted, ignore):
    rng = np.random.default_rng(version)
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)
    target = np.array([[0, 1], [3, 1], [2, 0]], np.int64)
    weight = rng.uniform(0.5, 2, 4).astype(np.float32) if weighted else None
    args = (x, target) if weight is None else (x, target, weight)
    got = run(lambda *a, **k: dsl.negative_log_likelihood_loss(*a, **k), engine, *args,
              reduction=reduction, ignore_index=ignore, opset=version)
    want = formula(x, target, weight, reduction, ignore)
    assert np.asarray(got).shape == np.shape(want) and np.asarray(got).dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("dt", FLOATS)
def test_nll_types_and_int32_targets(dt):
    x = np.array([[-1.0, -2.0], [-0.5, -3.0]], dt)
    got = dsl.negative_log_likelihood_loss(x, np.array([1, 0], np.int32), reduction="sum")
    assert got.dtype == dt and got.shape == ()
    assert float(got) == pytest.approx(2.5)


def test_nll_bfloat16_at_22_only():
    x = np.array([[-1.0, -2.0]], dsl.bfloat16.np_dtype)
    assert float(dsl.negative_log_likelihood_loss(x, np.array([1]), opset=22)) == 2.0
    with pytest.raises(dsl.DTypeError, match="NegativeLogLikelihoodLoss"):
        dsl.negative_log_likelihood_loss(x, np.array([1]), opset=13)


@pytest.mark.parametrize("engine", ["numpy", "jit"])
@pytest.mark.parametrize("version", SCE_VERSIONS)
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_sce_values_and_log_prob(engine, version, reduction):
    rng = np.random.default_rng(version)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    labels = np.array([4, 0, 2], np.int64)
    weight = rng.uniform(0.5, 2, 5).astype(np.float32)
    loss, logp = run(lambda *a, **k: dsl.softmax_cross_entropy_loss(*a, **k), engine, x, labels, weight,
                     reduction=reduction, return_log_prob=True, opset=version)
    np.testing.assert_allclose(logp, log_softmax(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, formula(log_softmax(x), labels, weight, reduction, None), rtol=1e-5)


def test_sce_all_ignored_mean_is_nan():
    got = dsl.softmax_cross_entropy_loss(np.zeros((2, 3), np.float32), np.array([1, 1]), ignore_index=1)
    assert np.isnan(got)


@pytest.mark.parametrize("engine", ["numpy", "jit"])
@pytest.mark.parametrize("bad", [-1, 4])
def test_out_of_range_target_is_an_error(engine, bad):
    x = np.zeros((2, 4), np.float32)
    target = np.array([0, bad], np.int64)
    with pytest.raises(dsl.DslError, match=rf"NegativeLogLikelihoodLoss.*target value {bad} out of range \[0, 4\)"):
        run(lambda *a: dsl.negative_log_likelihood_loss(*a), engine, x, target)
    with pytest.raises(dsl.DslError, match=rf"SoftmaxCrossEntropyLoss.*target value {bad} out of range"):
        run(lambda *a: dsl.softmax_cross_entropy_loss(*a), engine, x, target)


def test_ignored_target_may_be_out_of_range():
    x = np.log(np.full((2, 4), 0.25, np.float32))
    got = dsl.negative_log_likelihood_loss(x, np.array([1, -100]), ignore_index=-100, reduction="none")
    np.testing.assert_allclose(got, [np.log(4), 0.0], rtol=1e-6)


@pytest.mark.parametrize("kwargs,shapes,match", [
    ({}, ((4,), (4,)), r"rank >= 2"),
    ({}, ((2, 3), (3,)), r"target shape \[3\]; expected \[2\]"),
    ({}, ((2, 3), (2,), (2,)), r"weight shape \[2\]; expected \[3\]"),
    ({"reduction": "max"}, ((2, 3), (2,)), r"reduction 'max'"),
])
def test_shape_and_attribute_errors(kwargs, shapes, match):
    x = np.zeros(shapes[0], np.float32)
    t = np.zeros(shapes[1], np.int64)
    w = () if len(shapes) == 2 else (np.ones(shapes[2], np.float32),)
    with pytest.raises(dsl.DslError, match="NegativeLogLikelihoodLoss.*" + match):
        dsl.negative_log_likelihood_loss(x, t, *w, **kwargs)
