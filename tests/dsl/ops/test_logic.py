"""Tests for dsl/ops/logic.py: comparisons, Not/And/Or and Where at every version and type, eager and jit."""
from __future__ import annotations

import math
import operator

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.ops import registry

from dsl_test_helpers import (allowed_types, assert_input_types_match_onnx, onnx_allowed, onnx_versions,
                              schemas_with_onnx)

LATEST = registry.LATEST_OPSET
COMPARE = {"Equal": (dsl.equal, operator.eq), "Less": (dsl.less, operator.lt), "Greater": (dsl.greater, operator.gt),
           "LessOrEqual": (dsl.less_equal, operator.le), "GreaterOrEqual": (dsl.greater_equal, operator.ge)}
LOGIC = {"And": (dsl.logical_and, operator.and_), "Or": (dsl.logical_or, operator.or_)}
OPS = [*COMPARE, "Not", *LOGIC, "Where"]


@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert_input_types_match_onnx(op, schema, spec)
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        if op not in ("Where", "Not"):
            assert onnx_allowed(op, schema.version)["T1"] == {"bool"}  # the output type the rule gives


def sample(dt, shape, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    count = math.prod(shape)
    if dt.kind == "string":
        return np.array([f"s{v}" for v in rng.integers(0, 3, count)], dtype=object).reshape(shape)
    if dt.kind == "bool":
        return rng.integers(0, 2, count).astype(np.bool_).reshape(shape)
    if dt.kind == "complex":
        return (rng.integers(-2, 3, count) + 1j * rng.integers(-2, 3, count)).astype(dt.np_dtype).reshape(shape)
    if dt.kind == "float":
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 2.0, 1e-3])
        return rng.choice(pool, count).astype(dt.np_dtype).reshape(shape)
    info = ml_dtypes.iinfo(dt.np_dtype)
    pool = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=np.int64 if info.min < 0 else np.uint64)
    return rng.choice(pool, count).astype(dt.np_dtype).reshape(shape)


def python_values(array: np.ndarray) -> list:
    """Elements as exact Python numbers (ints stay ints, floats as float64) or strings."""
    if array.dtype.kind in "iu" or array.dtype.kind == "O":
        return array.reshape(-1).tolist()
    return array.astype(np.float64).reshape(-1).tolist()


# ---- comparisons -----------------------------------------------------------------------------------
COMPARE_CASES = [(op, v, dt) for op in COMPARE for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", COMPARE_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in COMPARE_CASES])
def test_comparison_eager_every_version_and_type(op, version, dt):
    fn, py_op = COMPARE[op]
    a, b = sample(dt, (4, 6), 0), sample(dt, (4, 6) if version < 7 else (6,), 1)
    got = fn(a, b, opset=version)
    a_full, b_full = np.broadcast_arrays(a, b)
    expected = [py_op(x, y) for x, y in zip(python_values(a_full), python_values(b_full))]
    assert got.dtype == np.bool_ and got.shape == (4, 6)
    assert got.reshape(-1).tolist() == expected


def test_nan_and_signed_zero_comparisons():
    a = np.array([np.nan, 0.0, np.nan], np.float32)
    b = np.array([np.nan, -0.0, 1.0], np.float32)
    assert dsl.equal(a, b).tolist() == [False, True, False]
    assert dsl.less_equal(a, b).tolist() == [False, True, False]
    assert dsl.greater(a, b).tolist() == [False, False, False]


def test_equal_on_strings_from_19():
    a = np.array(["a", "bb", "é"], dtype=object)
    assert dsl.equal(a, np.array(["a", "b", "é"], dtype=object)).tolist() == [True, False, True]
    with pytest.raises(dsl.DTypeError, match=r"^Equal: input 'A' has type string\[3\], not allowed at version 13"):
        dsl.equal(a, a, opset=18)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
def test_comparison_legacy_broadcast_at_version_1(op):
    fn, py_op = COMPARE[op]
    a = np.arange(6, dtype=np.int32 if op == "Equal" else np.float32).reshape(2, 3)
    b = np.array([1, 4], a.dtype)
    got = dsl.eager.call(op, a, 6, B=b, broadcast=1, axis=0)
    assert got.tolist() == [[py_op(int(x), int(y)) for x in row] for row, y in zip(a, b)]
    with pytest.raises(dsl.ShapeError, match=rf"^{op}: B shape \[2\] does not match A shape \[2, 3\] at axis 1"):
        dsl.eager.call(op, a, 6, B=b, broadcast=1, axis=1)


@pytest.mark.parametrize("fn, opset, a, b, error, match", [
    (dsl.less, LATEST, np.zeros(2, np.bool_), np.zeros(2, np.bool_), dsl.DTypeError,
     r"^Less: input 'A' has type bool\[2\], not allowed at version 13"),
    (dsl.equal, 10, np.zeros(2, np.float32), np.zeros(2, np.float32), dsl.DTypeError,
     r"^Equal: input 'A' has type float\[2\], not allowed at version 7"),
    (dsl.greater, LATEST, np.zeros((2, 3), np.int8), np.zeros((2,), np.int8), dsl.ShapeError,
     r"^Greater: shapes \[2, 3\] and \[1, 2\] are not broadcastable: dim 3 vs 2"),
    (dsl.less_equal, 11, np.zeros(2, np.int8), np.zeros(2, np.int8), dsl.UnsupportedError,
     r"^LessOrEqual: not defined at opset 11; first version is 12"),
    (dsl.greater_equal, 15, np.zeros(2, ml_dtypes.bfloat16), np.zeros(2, ml_dtypes.bfloat16), dsl.DTypeError,
     r"^GreaterOrEqual: input 'A' has type bfloat16\[2\], not allowed at version 12"),
    (dsl.equal, LATEST, np.zeros(2, np.int32), np.zeros(2, np.int64), dsl.DTypeError,
     r"^Equal: input 'B' has element type int64 but an earlier input of the same type variable has int32"),
])
def test_comparison_errors_name_op_and_value(fn, opset, a, b, error, match):
    with pytest.raises(error, match=match):
        fn(a, b, opset=opset)


# ---- Not, And, Or -----------------------------------------------------------------------------------
def test_not_and_or_truth_tables():
    a = np.array([[False], [True]])
    b = np.array([False, True])
    assert dsl.logical_not(np.array([True, False])).tolist() == [False, True]
    assert dsl.logical_and(a, b).tolist() == [[False, False], [False, True]]
    assert dsl.logical_or(a, b).tolist() == [[False, True], [True, True]]


@pytest.mark.parametrize("op", list(LOGIC))
def test_and_or_legacy_broadcast_at_version_1(op):
    fn, py_op = LOGIC[op]
    a = sample(dtypes.dtype("bool"), (2, 3, 4), 2)
    b = sample(dtypes.dtype("bool"), (3,), 3)
    got = dsl.eager.call(op, a, 1, B=b, broadcast=1, axis=1)
    np.testing.assert_array_equal(got, py_op(a, b[None, :, None]))
    with pytest.raises(dsl.ShapeError, match=rf"^{op}: shapes \[2, 3, 4\] and \[3\] differ and broadcast=0"):
        dsl.eager.call(op, a, 1, B=b)


@pytest.mark.parametrize("fn, args, match", [
    (dsl.logical_not, (np.zeros(2, np.int8),), r"^Not: input 'X' has type int8\[2\], not allowed at version 1"),
    (dsl.logical_and, (np.zeros(2, np.bool_), np.zeros(2, np.float32)),
     r"^And: input 'B' has type float\[2\], not allowed at version 7"),
])
def test_logic_ops_accept_only_bool(fn, args, match):
    with pytest.raises(dsl.DTypeError, match=match):
        fn(*args)


# ---- Where -------------------------------------------------------------------------------------------
WHERE_CASES = [(v, dt) for v in onnx_versions("Where") for dt in allowed_types("Where", v)]


@pytest.mark.parametrize("version, dt", WHERE_CASES, ids=[f"{v}-{d}" for v, d in WHERE_CASES])
def test_where_eager_every_version_and_type(version, dt):
    condition = sample(dtypes.dtype("bool"), (3, 1), 4)
    x, y = sample(dt, (1, 4), 5), sample(dt, (3, 4), 6)
    got = dsl.where(condition, x, y, opset=version)
    c_full, x_full, y_full = np.broadcast_arrays(condition, x, y)
    expected = [xv if c else yv for c, xv, yv in zip(c_full.reshape(-1), x_full.reshape(-1), y_full.reshape(-1))]
    assert got.dtype == x.dtype and got.shape == (3, 4)
    if dt.kind == "string":
        assert got.reshape(-1).tolist() == expected
    else:  # bit patterns: NaN payloads and signed zeros are copied exactly
        assert got.reshape(-1).tobytes() == np.array(expected, x.dtype).tobytes()


def test_where_python_scalars_take_the_other_branch_type():
    out = dsl.where(np.array([True, False]), 1.5, np.array([7.0, 8.0], np.float16))
    assert out.dtype == np.float16 and out.tolist() == [1.5, 8.0]


@pytest.mark.parametrize("args, opset, error, match", [
    ((np.zeros(2, np.int32), np.zeros(2, np.float32), np.zeros(2, np.float32)), LATEST, dsl.DTypeError,
     r"^Where: input 'condition' has type int32\[2\], not allowed at version 16"),
    ((np.zeros(2, np.bool_), np.zeros(2, np.float32), np.zeros(2, np.float64)), LATEST, dsl.DTypeError,
     r"^Where: input 'Y' has element type double but an earlier input of the same type variable has float"),
    ((np.zeros(2, np.bool_), np.zeros(3, np.float32), np.zeros(2, np.float32)), LATEST, dsl.ShapeError,
     r"^Where: shapes \[2\] and \[3\] are not broadcastable: dim 2 vs 3"),
    ((np.zeros(2, np.bool_), np.zeros(2, ml_dtypes.bfloat16), np.zeros(2, ml_dtypes.bfloat16)), 15, dsl.DTypeError,
     r"^Where: input 'X' has type bfloat16\[2\], not allowed at version 9"),
])
def test_where_errors_name_op_and_value(args, opset, error, match):
    with pytest.raises(error, match=match):
        dsl.where(*args, opset=opset)


# ---- jit vs eager ------------------------------------------------------------------------------------------
def _select(sel, outs):
    """Row k of the result is outs[k]: one fused kernel checks every op (one compile per dtype)."""
    result = outs[-1]
    for index in range(len(outs) - 2, -1, -1):
        result = dsl.where(dsl.equal(sel, index), outs[index], result)
    return result


@pytest.mark.parametrize("name", ["float16", "bfloat16", "double", "int8", "uint64"])
def test_comparisons_jit_match_eager(name):
    dt = dtypes.dtype(name)
    fns = [fn for fn, _ in COMPARE.values()]
    kernel = dsl.jit(lambda sel, a, b: _select(sel, [fn(a, b) for fn in fns]))
    a, b = sample(dt, (len(fns), 32), 7), sample(dt, (32,), 8)
    sel = np.arange(len(fns)).reshape(-1, 1)
    got = kernel(sel, a, b)
    assert kernel.executable(sel, a, b).kernel_count == 1
    for row, fn in enumerate(fns):
        np.testing.assert_array_equal(got[row], fn(a[row], b))


def test_logic_and_where_jit_match_eager():
    kernel = dsl.jit(lambda c, d, x, y: (dsl.where(c | ~d, x, y), dsl.where(c & d, y, 2.5),
                                         dsl.logical_or(dsl.logical_not(c), d)))
    c, d = sample(dtypes.dtype("bool"), (5, 1), 9), sample(dtypes.dtype("bool"), (7,), 10)
    x, y = sample(dtypes.dtype("bfloat16"), (5, 7), 11), sample(dtypes.dtype("bfloat16"), (7,), 12)
    first, second, third = kernel(c, d, x, y)
    np.testing.assert_array_equal(first.view(np.uint16), dsl.where(c | ~d, x, y).view(np.uint16))
    np.testing.assert_array_equal(second.view(np.uint16), dsl.where(c & d, y, 2.5).view(np.uint16))
    np.testing.assert_array_equal(third, ~c | d)


def test_comparison_legacy_broadcast_jit_at_opset_6():
    kernel = dsl.jit(lambda a, b: dsl.eager.call("Less", a, None, B=b, broadcast=1, axis=0), opset=6)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.0, 4.0], np.float32)
    np.testing.assert_array_equal(kernel(a, b), a < b[:, None])


def test_string_equal_in_jit_runs_the_reference():
    kernel = dsl.jit(lambda a, b: dsl.equal(a, b))
    a, b = np.array(["x", "y"], dtype=object), np.array(["x", "z"], dtype=object)
    assert kernel(a, b).tolist() == [True, False] and kernel.executable(a, b).kernel_count == 0
