"""Dropout: identity in inference at every version; training mode's seeded numpy mask; ratio errors."""
from __future__ import annotations

import numpy as np
import onnx.defs
import pytest

import dsl
from dsl.ops import registry

VERSIONS = [1, 6, 7, 10, 12, 13, 22]


def test_schemas_match_onnx():
    for schema in registry.get("Dropout").schemas:
        spec = onnx.defs.get_schema("Dropout", schema.version)
        assert spec.since_version == schema.version
        assert [i.name for i in schema.inputs] == [i.name for i in spec.inputs]
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        allowed = {t[len("tensor("):-1] for t in spec.type_constraints[0].allowed_type_strs}
        assert {t.onnx_name for t in schema.types} == allowed
    assert [s.version for s in registry.get("Dropout").schemas] == VERSIONS


@pytest.mark.parametrize("engine", ["numpy", "jit"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_inference_is_identity_with_all_true_mask(engine, version, dt):
    x = np.arange(6, dtype=dt).reshape(2, 3)
    fn = lambda a, **k: dsl.dropout(a, return_mask=True, **k)  # noqa: E731
    y, mask = fn(x, opset=version) if engine == "numpy" else dsl.jit(fn, opset=version)(x)
    np.testing.assert_array_equal(y, x)
    assert y.dtype == dt
    if version < 10:
        assert mask.dtype == dt and (mask == 1).all()
    else:
        assert mask.dtype == np.bool_ and mask.all()


@pytest.mark.parametrize("engine", ["numpy", "jit"])
def test_training_mode_with_seed_is_numpys_legacy_stream(engine):
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    ratio = np.float32(0.3)
    fn = lambda a, r, t: dsl.dropout(a, r, t, seed=7, return_mask=True)  # noqa: E731
    args = (x, ratio, np.array(True))
    y, mask = fn(*args) if engine == "numpy" else dsl.jit(fn)(*args)
    want_mask = np.random.RandomState(7).uniform(0, 1, x.shape) >= 0.3
    np.testing.assert_array_equal(mask, want_mask)
    np.testing.assert_allclose(y, want_mask * x / np.float32(0.7), rtol=1e-6)
    assert not want_mask.all() and want_mask.any()


def test_training_mode_without_seed_draws_fresh_and_scales():
    x = np.ones(2000, np.float32)
    y, mask = dsl.dropout(x, np.float32(0.5), np.array(True), return_mask=True)
    np.testing.assert_allclose(y, mask * 2.0)
    assert 800 < mask.sum() < 1200


def test_training_mode_false_ignores_ratio():
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(dsl.dropout(x, np.float32(0.9), np.array(False), seed=1), x)


@pytest.mark.parametrize("ratio", [1.0, -0.1, 1.5])
def test_ratio_outside_unit_interval_is_an_error(ratio):
    x = np.ones(3, np.float32)
    with pytest.raises(dsl.DslError, match=rf"Dropout.*ratio {ratio} out of range; expected a value in \[0, 1\)"):
        dsl.dropout(x, np.float32(ratio), np.array(True))
    with pytest.raises(dsl.DslError, match=r"Dropout.*ratio .* out of range"):
        dsl.jit(lambda a, r: dsl.dropout(a, r))(x, np.float32(ratio))


def test_legacy_ratio_attribute_checked():
    with pytest.raises(dsl.DslError, match=r"Dropout.*ratio 1.0 out of range"):
        dsl.eager.call("Dropout", np.ones(2, np.float32), 7, ratio=1.0)
