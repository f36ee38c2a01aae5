"""Tests for dsl/ops/reduce_composite.py: ReduceL1 / L2 / LogSum / LogSumExp / SumSquare (the spec's
function bodies, fused in the JIT as their primitive ops), ReduceProd, ArgMax and ArgMin, at every
version and type, eager against independent per-row formulas, and jit against eager."""
from __future__ import annotations

import math

import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes

from dsl_test_helpers import allowed_types, onnx_versions, schemas_with_onnx
from test_reduce import AXES_CASES, _float_result, _wrap, assert_close, per_row, sample

COMPOSITE = {"ReduceL1": dsl.reduce_l1, "ReduceL2": dsl.reduce_l2, "ReduceLogSum": dsl.reduce_log_sum,
             "ReduceLogSumExp": dsl.reduce_log_sum_exp, "ReduceSumSquare": dsl.reduce_sum_square,
             "ReduceProd": dsl.reduce_prod}
ARG = {"ArgMax": dsl.argmax, "ArgMin": dsl.argmin}


@pytest.mark.parametrize("op", [*COMPOSITE, *ARG])
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert {t.onnx_name for t in schema.types} == {t.onnx_name for t in allowed_types(op, schema.version)}
        assert [(i.name, i.optional) for i in schema.inputs] == \
            [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs]
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        for attr in schema.attrs:
            default = spec.attributes[attr.name].default_value
            assert attr.default == (default.i if default.type == 2 else None), (op, attr.name)


def _in_type(value, dt):
    """A Python number rounded to element type ``dt`` (floats) or wrapped (integers)."""
    if dt.kind == "float":
        return float(np.asarray(value, np.float64).astype(dt.np_dtype).astype(np.float64))
    return _wrap(int(value), dt)


def _to_int(value: float, dt) -> int:
    """float -> integer as Cast does (truncation; NaN, Inf and out of range give 0)."""
    if not math.isfinite(value):
        return 0
    whole = int(value)
    info = np.iinfo(dt.np_dtype)
    return whole if info.min <= whole <= info.max else 0


def _row_fn(op: str, dt):
    """The spec's body per reduced row, in exact Python arithmetic with the body's roundings."""
    floating = dt.kind == "float"

    def total(values):  # ReduceSum: float64-exact sum rounded to the compute domain and T, or wrapping
        return _in_type(_float_result(math.fsum(values), dt), dt) if floating else _wrap(sum(values), dt)
    if op == "ReduceSumSquare":
        return lambda r: total([_in_type(v * v, dt) for v in r])
    if op == "ReduceL1":
        return lambda r: total([_in_type(abs(v), dt) for v in r])
    if op == "ReduceL2":
        def l2(r):
            root = float(np.sqrt(np.float32(total([_in_type(v * v, dt) for v in r]))))
            return root if floating else _to_int(root, dt)
        return l2
    if op == "ReduceLogSum":
        def log_sum(r):
            value = total(r)
            result = math.log(value) if value > 0 else (-math.inf if value == 0 else math.nan)
            return result if floating else _to_int(result, dt)
        return log_sum
    if op == "ReduceLogSumExp":
        def log_sum_exp(r):
            value = math.fsum(math.exp(v) for v in r)
            result = math.log(value) if value > 0 else -math.inf
            return result if floating else _to_int(result, dt)
        return log_sum_exp
    # ReduceProd: floats multiply exactly (then round once), integers wrap
    if floating:
        return lambda r: _float_result(math.prod(r), dt)
    return lambda r: _wrap(math.prod(r), dt)


def composite_sample(op, dt, shape, seed):
    x = sample(dt, shape, seed, finite=True)
    if dt.kind != "float":  # small values: exp, squares and products stay meaningful
        x = (np.arange(x.size).reshape(shape) % 7 - (0 if dt.kind == "uint" or op == "ReduceLogSum" else 3))
        x = x.astype(dt.np_dtype)
    elif op == "ReduceLogSum":
        x = np.abs(x)
    elif op == "ReduceProd":
        x = (x / 3 + np.float32(0.5)).astype(x.dtype)  # products of a few dozen values stay finite
    return x


CASES = [(op, v, dt) for op in COMPOSITE for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", CASES, ids=[f"{o}-{v}-{d}" for o, v, d in CASES])
def test_eager_every_version_and_type(op, version, dt):
    for seed, (shape, axes, keepdims, normalized) in enumerate(AXES_CASES):
        x = composite_sample(op, dt, shape, seed)
        with np.errstate(all="ignore"):
            got = COMPOSITE[op](x, axes, keepdims=keepdims, opset=version)
            want = per_row(x, normalized, keepdims, _row_fn(op, dt), dt.np_dtype)
        assert_close(got, want, 2 if op in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd") else 1)


@pytest.mark.parametrize("op", list(COMPOSITE))
def test_noop_with_empty_axes_is_the_identity_of_the_reduction_at_18(op):
    x = composite_sample(op, dtypes.dtype("float"), (2, 3), 1)
    got = COMPOSITE[op](x, [], noop_with_empty_axes=True, opset=18)
    want = {"ReduceL1": np.abs(x), "ReduceL2": np.sqrt(x * x), "ReduceLogSum": np.log(x),
            "ReduceLogSumExp": np.log(np.exp(x.astype(np.float64))).astype(np.float32),
            "ReduceSumSquare": x * x, "ReduceProd": x}[op]
    np.testing.assert_allclose(got, want, rtol=2e-7)


JIT_TYPES = ["float", "float16", "double", "int32", "bfloat16"]


@pytest.mark.parametrize("op", list(COMPOSITE))
@pytest.mark.parametrize("name", JIT_TYPES)
def test_jit_matches_eager_and_fuses_the_body_over_any_axes(op, name):
    dt = dtypes.dtype(name)
    x = composite_sample(op, dt, (4, 6, 40), 3)
    f = dsl.jit(lambda v: (COMPOSITE[op](v, [-1]), COMPOSITE[op](v, [0], keepdims=False), COMPOSITE[op](v, [0, 2])),
                opset=18)  # (integer LogSum / LogSumExp: up to 18)
    with np.errstate(all="ignore"):
        outs = f(x)
        for got, axes, keep in zip(outs, ([-1], [0], [0, 2]), (True, False, True)):
            want = COMPOSITE[op](x, axes, keepdims=keep, opset=18)
            assert_close(got, want, 0 if dt.kind != "float" else 8)
    explained = f.executable(x).explain(source=False)
    if op == "ReduceProd":  # (no body: the reference runs)
        assert explained.count("numpy ReduceProd") == 3
    else:  # over the last axis one kernel, the body's ops before and after the sum fused; over
        # other axes the ops before it fuse, those after it (Sqrt, Log) run as a kernel of their own
        tail = 2 if op in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp") else 0
        assert f.executable(x).kernel_count == 3 + tail and "numpy" not in explained, explained
        assert explained.splitlines()[0].startswith("step 0: kernel [") and "ReduceSum" in explained.splitlines()[0]


def test_log_sum_exp_computes_in_double_as_the_body_casts():
    x = np.array([[100.0, 100.0], [-1000.0, -1000.0]], np.float32)  # exp(100) overflows float32
    want = np.array([[100 + math.log(2)], [-math.inf]], np.float32)
    np.testing.assert_allclose(dsl.reduce_log_sum_exp(x, [1]), want, rtol=1e-7)
    np.testing.assert_allclose(dsl.jit(lambda v: dsl.reduce_log_sum_exp(v, [1]))(x), want, rtol=1e-7)


def test_integer_bodies_truncate_back_to_the_type():
    x = np.array([[3, 4, 1], [0, 0, 0]], np.int32)
    assert dsl.reduce_l2(x, [1], keepdims=False).tolist() == [5, 0]  # sqrt(26) = 5.09 -> 5
    assert dsl.reduce_log_sum(np.array([[1, 2, 5]], np.int64), [1], keepdims=False, opset=18).tolist() == [2]  # log 8
    assert dsl.reduce_sum_square(np.array([[-3, 100000]], np.int32), [1], keepdims=False).tolist() == \
        [_wrap(9 + 100000 ** 2, dtypes.dtype("int32"))]
    assert dsl.reduce_prod(np.array([[2, -3, 4], [65536, 65536, 3]], np.int32), [1], keepdims=False).tolist() == [-24, 0]
    assert dsl.reduce_prod(np.zeros((2, 0), np.float32), [1], keepdims=False).tolist() == [1.0, 1.0]


def test_composites_chunk_under_dask_rules():
    from dsl.ops import registry
    for op in [*COMPOSITE, *ARG]:
        assert registry.get(op).chunk is not None and registry.get(op).chunk.name == "reduction"


# ---- ArgMax / ArgMin ------------------------------------------------------------------------------------
ARG_CASES = [(op, v, dt) for op in ARG for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", ARG_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in ARG_CASES])
def test_arg_eager_every_version_and_type(op, version, dt):
    find = np.argmax if op == "ArgMax" else np.argmin
    x = sample(dt, (3, 4, 5), version)
    if dt.kind != "float":
        x = (np.arange(60).reshape(3, 4, 5) * 7 % 5).astype(dt.np_dtype)  # ties
    for axis, keepdims in ((0, True), (-1, False), (1, True)):
        got = ARG[op](x, axis, keepdims=keepdims, opset=version)
        want = find(x.astype(np.float64) if dt.kind == "float" else x, axis=axis)
        want = np.expand_dims(want, axis) if keepdims else want
        assert got.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if version >= 12:  # the last of equal extremes
            last = ARG[op](x, axis, keepdims=keepdims, select_last_index=True, opset=version)
            flipped = x.shape[axis] - 1 - find(np.flip(x.astype(np.float64) if dt.kind == "float" else x, axis), axis=axis)
            np.testing.assert_array_equal(last, np.expand_dims(flipped, axis) if keepdims else flipped)


def test_arg_nan_counts_as_the_extreme_and_ties_take_the_first():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 0.0]], np.float32)
    assert dsl.argmax(x, 1, keepdims=False).tolist() == [1, 1]
    assert dsl.argmin(x, 1, keepdims=False).tolist() == [1, 3]
    assert dsl.argmax(x, 1, keepdims=False, select_last_index=True).tolist() == [3, 2]
    f = dsl.jit(lambda v: (dsl.argmax(v * 1.0, 1), dsl.argmin(v, 0, keepdims=False)))
    got = f(x)
    assert got[0].tolist() == [[1], [1]] and got[1].tolist() == np.argmin(x, 0).tolist()


@pytest.mark.parametrize("call, match", [
    (lambda: dsl.argmax(np.zeros((2, 0), np.float32), 1), "ArgMax: axis 1 has size 0"),
    (lambda: dsl.argmin(np.float32(1.0)), "ArgMin: input is a scalar"),
    (lambda: dsl.argmax(np.zeros((2, 3), np.float32), 2), "ArgMax"),
    (lambda: dsl.argmax(np.zeros((2, 3), np.bool_), 0), "ArgMax"),
    (lambda: dsl.reduce_l2(np.zeros((2, 3), np.int8), [0]), "ReduceL2"),
    (lambda: dsl.reduce_log_sum_exp(np.zeros((2, 3), np.int32), [0], opset=28), "ReduceLogSumExp"),
])
def test_errors_name_op_and_value(call, match):
    with pytest.raises(dsl.DslError, match=match):
        call()
