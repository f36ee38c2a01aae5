"""Tests for dsl/ops/variadic.py: Sum and Mean at every version and type, eager vs float64 ground truth and
jit vs eager."""
from __future__ import annotations

import math

import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.ops import minmax, registry

from dsl_test_helpers import allowed_types, assert_same, onnx_versions, schemas_with_onnx

LATEST = registry.LATEST_OPSET
VARIADIC = {"Sum": dsl.sum, "Mean": dsl.mean}
# sums of up to three of these are exact in every float type (so any order and domain agree)
POOL = [0.0, -0.0, 1.0, -1.5, 2.0, 0.25, 3.0, 1000.0, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("op", list(VARIADIC))
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert {t.onnx_name for t in schema.types} == {t.onnx_name for t in allowed_types(op, schema.version)}
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        assert spec.inputs[0].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        assert [i.name for i in schema.inputs] == [f"data_{k}" for k in range(minmax.MAX_INPUTS)]
        assert [i.optional for i in schema.inputs] == [False] + [True] * (minmax.MAX_INPUTS - 1)


def sample(dt, shape, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice(np.array(POOL), math.prod(shape)).astype(dt.np_dtype).reshape(shape)


def expected(op: str, arrays: list, dt) -> np.ndarray:
    """The float64 sum (exact for POOL) or mean, rounded once to ``dt``."""
    with np.errstate(invalid="ignore"):
        total = arrays[0].astype(np.float64)
        for array in arrays[1:]:
            total = total + array.astype(np.float64)
        out = total / len(arrays) if op == "Mean" else total
    return np.broadcast_to(out, np.broadcast_shapes(*(a.shape for a in arrays))).astype(dt.np_dtype)


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    assert_same(got[~nan], want[~nan])


CASES = [(op, v, dt) for op in VARIADIC for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", CASES, ids=[f"{o}-{v}-{d}" for o, v, d in CASES])
def test_sum_mean_eager_every_version_and_type(op, version, dt):
    shapes = [(3, 4)] * 3 if version < 8 else [(3, 4), (4,), (3, 1)]
    arrays = [sample(dt, shape, seed) for seed, shape in enumerate(shapes)]
    for count in (1, 2, 3):
        got = VARIADIC[op](arrays[:count], opset=version)
        assert_bits(got, expected(op, arrays[:count], dt))


def test_float16_computes_in_float32_and_rounds_once():
    big = np.array([60000.0], np.float16)
    assert dsl.sum([big, big]).tolist() == [np.inf]
    assert dsl.mean([big, big]).tolist() == [60000.0]  # (float32 domain: the sum does not overflow)
    third = dsl.mean([np.float32(1.0), np.float32(0.0), np.float32(0.0)])
    assert third.dtype == np.float32 and float(third) == float(np.float32(1.0) / np.float32(3.0))


def test_python_scalars_take_the_tensor_type():
    got = dsl.sum([np.array([1.0, 2.0], np.float64), 0.5, np.float64(1.0)])
    assert got.dtype == np.float64 and got.tolist() == [2.5, 3.5]


@pytest.mark.parametrize("fn, inputs, opset, error, match", [
    (dsl.sum, [np.zeros((2, 3)), np.zeros(3)], 6, dsl.ShapeError,
     r"^Sum: input shapes \[\[2, 3\], \[3\]\] differ; version 6 needs equal shapes"),
    (dsl.mean, [np.zeros((2, 3)), np.zeros(2)], LATEST, dsl.ShapeError,
     r"^Mean: shapes \[2, 3\] and \[1, 2\] are not broadcastable"),
    (dsl.sum, [np.zeros(2, np.int32)], LATEST, dsl.DTypeError,
     r"^Sum: input 'data_0' has type int32\[2\], not allowed at version 13"),
    (dsl.mean, [np.zeros(2, np.float32), np.zeros(2)], LATEST, dsl.DTypeError,
     r"^Mean: input 'data_1' has element type double but an earlier input of the same type variable has float"),
    (dsl.sum, [], LATEST, dsl.InputError, rf"^Sum: takes 1 to {minmax.MAX_INPUTS} inputs, got 0"),
    (dsl.mean, np.zeros(2), LATEST, dsl.InputError, r"^Mean: takes its inputs as one list, got ndarray"),
])
def test_errors_name_op_and_value(fn, inputs, opset, error, match):
    with pytest.raises(error, match=match):
        fn(inputs, opset=opset)


def _select(sel, outs):
    return dsl.where(dsl.equal(sel, 0), outs[0], outs[1])


@pytest.mark.parametrize("name", [t.onnx_name for t in allowed_types("Sum", LATEST)])
def test_sum_mean_jit_match_eager(name):
    dt = dtypes.dtype(name)
    rng = np.random.default_rng(5)
    arrays = [sample(dt, (2, 12), 0), (rng.standard_normal(12) * 8).astype(dt.np_dtype), sample(dt, (2, 1), 2)]
    sel = np.arange(2).reshape(-1, 1)
    kernel = dsl.jit(lambda sel, a, b, c: _select(sel, [dsl.sum([a, b, c]), dsl.mean([a, b, c])]))
    got = kernel(sel, *arrays)
    assert kernel.executable(sel, *arrays).kernel_count == 1
    assert_bits(got[0], dsl.sum(arrays)[0])
    assert_bits(got[1], dsl.mean(arrays)[1])


def test_sum_jit_at_opset_6_equal_shapes():
    a, b = sample(dtypes.dtype("float"), (3, 4), 0), sample(dtypes.dtype("float"), (3, 4), 1)
    assert_bits(dsl.jit(lambda a, b: dsl.sum([a, b, a]), opset=6)(a, b), dsl.sum([a, b, a], opset=6))


def test_functions_are_exported():
    from dsl import functional
    for name in ("sum", "mean"):
        assert getattr(dsl, name) is getattr(functional, name) and name in dsl.__all__
