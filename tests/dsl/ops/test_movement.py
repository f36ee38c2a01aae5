"""Tests for dsl/ops/movement.py: Slice, Concat, Gather, Size, ConstantOfShape and Range at every
version and element type, against numpy oracles written here; the JIT against the eager engine;
bad inputs as DslErrors naming the op."""
from __future__ import annotations

import numpy as np
import onnx.defs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsl
from dsl import dtypes
from dsl.ops import registry

from dsl_test_helpers import (assert_input_types_match_onnx, assert_same, assert_schema_in_force_matches_onnx,
                              make_array, schemas_with_onnx, snapshot)

OPS = ["Slice", "Concat", "Gather", "Size", "ConstantOfShape", "Range"]


def onnx_types(op: str, version: int, param: str) -> set[str]:
    schema = onnx.defs.get_schema(op, version)
    constraint = next(c for c in schema.type_constraints if c.type_param_str == param)
    return {t[len("tensor("):-1] for t in constraint.allowed_type_strs}


@pytest.mark.parametrize("op", OPS)
def test_versions_and_input_types_are_onnx_s(op):
    for schema, spec in schemas_with_onnx(op):
        if op == "Concat":  # (one variadic input in onnx: dsl's slots all take T)
            assert {t.onnx_name for t in schema.types} == onnx_types(op, schema.version, "T")
            continue
        if op == "ConstantOfShape":  # (the output type is the attribute's: T2)
            assert {t.onnx_name for t in schema.types} == onnx_types(op, schema.version, "T2")
        assert_input_types_match_onnx(op, schema, spec)


@pytest.mark.parametrize("opset", range(1, registry.LATEST_OPSET + 1))
@pytest.mark.parametrize("op", OPS)
def test_schema_in_force_at_every_opset_matches_onnx(op, opset):
    assert_schema_in_force_matches_onnx(op, opset)


# ---- Slice ----------------------------------------------------------------------------------------
def onnx_slice_oracle(data: np.ndarray, starts, ends, axes, steps) -> np.ndarray:
    """The spec's effective starts / ends, element by element (independent of dsl)."""
    axes = list(range(len(starts))) if axes is None else [a + data.ndim if a < 0 else a for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    picks = [list(range(d)) for d in data.shape]
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = data.shape[axis]
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            picks[axis] = list(range(start, end, step))
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            picks[axis] = [i for i in range(start, end, step) if i >= 0]
    return data[np.ix_(*picks)] if all(picks) else np.empty([len(p) for p in picks], data.dtype)


SLICE_CASES = [  # starts, ends, axes, steps
    ([1, 0], [2, 3], [0, 1], [1, 2]),
    ([0, 1], [-1, 1000], None, None),
    ([-10], [-20], [1], [-1]),  # the spec's start clamp (numpy: empty)
    ([2, -1], [-100, 0], [2, 0], [-2, -1]),
    ([5], [10], [-1], [1]),  # out of range: empty
    ([-2 ** 63], [2 ** 63 - 1], [0], [3]),  # INT_MIN / INT_MAX
    ([3], [0], [2], [-1]),
]


@pytest.mark.parametrize("starts, ends, axes, steps", SLICE_CASES)
@pytest.mark.parametrize("engine", ["eager", "jit"])
def test_slice_matches_the_spec_oracle(engine, starts, ends, axes, steps):
    data = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    want = onnx_slice_oracle(data, starts, ends, axes, steps)
    if engine == "eager":
        got = dsl.slice(data, starts, ends, axes, steps)
        assert np.shares_memory(got, data) or got.size == 0
    else:
        got = dsl.jit(lambda x: dsl.slice(x, starts, ends, axes, steps) * 2.0)(data) / np.float32(2)
    assert_same(got, want)


@pytest.mark.parametrize("version", [1, 10, 11, 13])
def test_slice_versions_and_types(version):
    for dt in dtypes.ALL:
        data = make_array(dt, (4, 3), seed=version)
        allowed = dt.onnx_name in onnx_types("Slice", version, "T")
        kwargs = {"starts": [1, 2], "ends": [4, 0], "axes": [0, 1]} | ({} if version == 1 else {"steps": [2, -1]})
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^Slice: input 'data' has type {dt.onnx_name}"):
                dsl.slice(data, opset=version, **kwargs)
            continue
        before = snapshot(data)
        got = dsl.slice(data, opset=version, **kwargs)
        assert_same(got, data[1:4:2, 2:0:-1] if version > 1 else data[1:4, 2:0])
        assert snapshot(data) == before


@pytest.mark.parametrize("kwargs, message", [
    ({"starts": [0], "ends": [1], "steps": [0]}, r"steps \[0\] contain 0"),
    ({"starts": [0, 0], "ends": [1]}, r"one entry per sliced axis"),
    ({"starts": [0, 0], "ends": [1, 1], "axes": [1, -1]}, r"repeat axis 1"),
    ({"starts": [0], "ends": [1], "axes": [2]}, r"axis 2 out of range \[-2, 1\]"),
])
def test_slice_errors_name_the_op_and_value(kwargs, message):
    with pytest.raises(dsl.DslError, match=rf"^Slice: .*{message}"):
        dsl.slice(np.zeros((2, 3)), **kwargs)


def test_slice_negative_axes_need_version_11():
    with pytest.raises(dsl.ShapeError, match=r"negative; version 10 accepts only axes in \[0, 1\]"):
        dsl.slice(np.zeros((2, 3)), [0], [1], [-1], opset=10)
    assert dsl.slice(np.zeros((2, 3)), [0], [1], [-1], opset=11).shape == (2, 1)


# ---- Concat ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [1, 4, 11, 13])
def test_concat_versions_and_types(version):
    for dt in dtypes.ALL:
        a, b = make_array(dt, (2, 3), seed=1), make_array(dt, (2, 1), seed=2)
        if dt.onnx_name not in onnx_types("Concat", version, "T"):
            with pytest.raises(dsl.DTypeError, match=r"^Concat: input 'inputs_0' has type"):
                dsl.concat([a, b], 1, opset=version)
            continue
        assert_same(dsl.concat([a, b], 1, opset=version), np.concatenate([a, b], 1))


def test_concat_in_the_jit_matches_eager_and_checks_shapes():
    rng = np.random.default_rng(3)
    past, new = rng.standard_normal((2, 4, 7, 8)).astype(np.float32), rng.standard_normal((2, 4, 1, 8)).astype(np.float32)
    f = dsl.jit(lambda p, n: dsl.concat([p, n * 2.0], -2))
    assert dsl.compare(f, past, new, rtol=0, atol=0).ok
    np.testing.assert_array_equal(f(past, new), np.concatenate([past, new * 2], -2))
    with pytest.raises(dsl.ShapeError, match=r"^Concat.*input 1 has shape \[2, 4, 1, 9\].*dim 3 differs"):
        dsl.concat([past, np.zeros((2, 4, 1, 9), np.float32)], 2)
    with pytest.raises(dsl.ShapeError, match=r"negative; version 4 accepts only"):
        dsl.concat([past, new], -2, opset=4)
    with pytest.raises(dsl.InputError, match=r"^Concat: inputs must be a list of 1 to 64 tensors"):
        dsl.concat(past, 0)


# ---- Gather ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [1, 11, 13])
def test_gather_versions_types_and_index_types(version):
    for dt in dtypes.ALL:
        data = make_array(dt, (5, 3), seed=version)
        indices = np.array([[4, 0], [2, 2]], np.int32)
        if dt.onnx_name not in onnx_types("Gather", version, "T"):
            with pytest.raises(dsl.DTypeError, match=rf"^Gather: input 'data' has type {dt.onnx_name}"):
                dsl.gather(data, indices, opset=version)
            continue
        assert_same(dsl.gather(data, indices, opset=version), data[indices])
        columns = np.array([2, 0, 1], np.int64)
        assert_same(dsl.gather(data, columns, axis=-1, opset=version), data[:, columns])


def test_gather_index_bounds_per_version_in_both_engines():
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_same(dsl.gather(data, np.array([-1, -4])), data[[3, 0]])
    with pytest.raises(dsl.InputError, match=r"^Gather: indices value -1 at \[0\] is out of range \[0, 3\]"):
        dsl.gather(data, np.array([-1]), opset=1)
    f = dsl.jit(lambda d, i: dsl.gather(d, i, axis=1) + 1.0)
    np.testing.assert_array_equal(f(data, np.array([[2, -3]])), data[:, [[2, 0]]] + 1)
    for bad in ([3], [-4], [0, 2 ** 40]):
        with pytest.raises(dsl.InputError, match=rf"^Gather \(node '.*'\): indices value {bad[-1]} at \[{len(bad) - 1}\]"
                                                 rf" is out of range \[-3, 2\] for axis 1 of size 3"):
            f(data, np.array(bad))
    with pytest.raises(dsl.InputError, match=r"out of range"):  # a constant index fails at trace time
        dsl.jit(lambda d: dsl.gather(d, np.array([7])))(data)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_random_embedding_lookups_match_numpy(data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    axis = data.draw(st.integers(-rank, rank - 1))
    size = shape[axis]
    idx_shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x = rng.standard_normal(shape).astype(np.float32)
    indices = rng.integers(-size, size, idx_shape).astype(data.draw(st.sampled_from([np.int32, np.int64])))
    want = np.take(x, np.where(indices < 0, indices + size, indices), axis=axis)
    assert_same(dsl.gather(x, indices, axis=axis), want)
    f = dsl.jit(lambda a, i: dsl.gather(a, i, axis=axis))
    assert_same(f(x, indices), want)


# ---- Size, ConstantOfShape, Range -----------------------------------------------------------------
def test_size_of_every_type_is_folded_in_the_jit():
    for dt in dtypes.ALL:
        data = make_array(dt, (2, 3, 4))
        allowed = dt.onnx_name in onnx_types("Size", registry.get("Size").schema(registry.LATEST_OPSET).version, "T")
        if not allowed:
            continue
        assert_same(dsl.size(data), np.array(24, np.int64))
    f = dsl.jit(lambda x: x * dsl.cast(dsl.size(x), dsl.float32))
    np.testing.assert_array_equal(f(np.ones((2, 3), np.float32)), np.full((2, 3), 6, np.float32))
    assert f.executable(np.ones((2, 3), np.float32)).kernel_count == 1


@pytest.mark.parametrize("version", [9, 20, 21, 23, 24, 25])
def test_constant_of_shape_types_per_version(version):
    for dt in dtypes.ALL:
        value = make_array(dt, (1,), seed=5)
        if dt.onnx_name not in onnx_types("ConstantOfShape", version, "T2"):
            with pytest.raises(dsl.DTypeError, match=rf"^ConstantOfShape: attribute 'value' has type {dt.onnx_name}"):
                dsl.constant_of_shape([2, 3], value, opset=version)
            continue
        assert_same(dsl.constant_of_shape([2, 3], value, opset=version), np.full((2, 3), value[0], dtype=value.dtype))
    assert_same(dsl.constant_of_shape([], opset=version), np.zeros((), np.float32))
    assert_same(dsl.constant_of_shape(np.array([0, 2]), opset=version), np.zeros((0, 2), np.float32))
    with pytest.raises(dsl.InputError, match=r"^ConstantOfShape: shape \[2, -1\] has a negative dim"):
        dsl.constant_of_shape([2, -1], opset=version)


@pytest.mark.parametrize("start, limit, delta, dtype", [
    (3, 9, 3, np.int32), (10, 4, -2, np.int64), (0, 0, 1, np.int16), (5, 1, 2, np.int32),
    (1.0, 2.0, 0.3, np.float32), (-1.5, 1.5, 0.5, np.float64), (0.0, 1.0, -0.1, np.float32),
])
def test_range_matches_the_spec_pseudocode(start, limit, delta, dtype):
    s, lim, d = dtype(start), dtype(limit), dtype(delta)
    count = max(int(np.ceil(np.float64(lim - s) / np.float64(d))), 0)
    want = np.array([s + dtype(i) * d for i in range(count)], dtype).reshape(count)
    assert_same(dsl.range(s, lim, d), want)
    f = dsl.jit(lambda two: two * dsl.range(s, lim, d))
    assert_same(f(np.array(2, dtype)), (want * dtype(2)).astype(dtype))


def test_range_errors():
    with pytest.raises(dsl.InputError, match=r"^Range: delta is 0"):
        dsl.range(np.int32(1), np.int32(5), np.int32(0))
    with pytest.raises(dsl.DslError, match=r"^Range: .*limit"):
        dsl.range(np.int32(1), np.int64(5), np.int32(1))
    with pytest.raises(dsl.DTypeError, match=r"^Range: input 'start' has type uint8"):
        dsl.range(np.uint8(1), np.uint8(5), np.uint8(1))
    assert_same(dsl.range(0, 3, 1), np.arange(3, dtype=np.int64))  # (Python ints: int64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_range_27_narrow_floats_stash_in_float32(dtype):
    dt = dsl.dtype(dtype)
    s, lim, d = (np.array(v, dt.np_dtype) for v in (2048.0, 2064.0, 1.0))
    got = dsl.range(s, lim, d)
    want = (np.float32(2048) + np.arange(16, dtype=np.float32)).astype(dt.np_dtype)  # (2049 is neither type's)
    assert_same(got, want)
    with pytest.raises(dsl.DTypeError, match=rf"^Range: input 'start' has type {dtype}.*version 11"):
        dsl.range(s, lim, d, opset=26)
    with pytest.raises(dsl.InputError, match=r"stash_type 7 is neither 1"):
        dsl.eager.call("Range", s, None, limit=lim, delta=d, stash_type=7)
