"""Tests for dsl/ops/selection.py: OneHot, Compress and NonZero at every version and element type,
eager against element-by-element oracles written here (the spec's pseudocode), the JIT against eager
(OneHot as one fused kernel); bad inputs as DslErrors naming the op and the value."""
from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.functional import compress, gather_nd, nonzero, one_hot
from dsl.ops import registry

from dsl_test_helpers import assert_same, make_array, onnx_allowed, snapshot
from test_indexing import _check_types, small  # (shared helpers; the schema tests there cover OPS too)

OPS = ["OneHot", "Compress", "NonZero"]
VERSIONS = {op: [s.version for s in registry.get(op).schemas] for op in OPS}


# ---- oracles (the spec's loops, element by element) -----------------------------------------------------
def one_hot_oracle(indices, depth, values, axis, version):
    axis = axis + indices.ndim + 1 if axis < 0 else axis
    out = np.empty(indices.shape[:axis] + (depth,) + indices.shape[axis:], values.dtype)
    for p in np.ndindex(out.shape):
        raw = float(indices[p[:axis] + p[axis + 1:]])
        index = int(raw) if np.isfinite(raw) else None  # (int() truncates toward zero, as the cast to int64)
        if index is not None and index < 0 and version >= 11:
            index += depth
        out[p] = values[1] if index == p[axis] else values[0]
    return out


def compress_oracle(data, condition, axis):
    if axis is None:
        flat = data.reshape(-1)
        return np.array([flat[i] for i, c in enumerate(condition) if c and i < flat.size], data.dtype).reshape(-1)
    picks = [i for i, c in enumerate(condition) if c and i < data.shape[axis]]
    return np.take(data, np.array(picks, np.int64), axis=axis)


def nonzero_oracle(x):
    x = x.reshape(1) if x.ndim == 0 else x
    found = [p for p in np.ndindex(x.shape) if bool(x[p])]
    return np.array(found, np.int64).reshape(len(found), x.ndim).T.copy()


# ---- OneHot -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS["OneHot"])
def test_one_hot_every_version_and_value_type(version):
    indices = np.array([[0, 2, -1], [5, -4, 1]], np.int64)  # -1: in range from 11 only; 5, -4: out of range
    for dt, allowed in _check_types("OneHot", version, "T3"):
        values = make_array(dt, (2,), seed=7)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^OneHot: input 'values' has type {dt.onnx_name}"):
                one_hot(indices, 3, values, opset=version)
            continue
        for axis in (-1, 0, 1, -3):
            assert_same(one_hot(indices, 3, values, axis=axis, opset=version),
                        one_hot_oracle(indices, 3, values, axis, version))


@pytest.mark.parametrize("version", VERSIONS["OneHot"])
def test_one_hot_index_and_depth_types(version):
    values = np.array([0.5, 2.0], np.float32)
    raw = np.array([0, 1, 3, 2.7, -1.5, -0.5, 200], np.float64)
    for dt in dtypes.ALL:
        allowed = dt.onnx_name in onnx_allowed("OneHot", version)["T1"]
        if dt.kind not in ("int", "uint", "float") or dt.bits < 8:
            assert not allowed, dt
            continue
        kept = raw[raw >= 0] if dt.kind == "uint" else raw
        kept = np.trunc(kept) if dt.kind != "float" else kept
        indices = kept.astype(dt.np_dtype)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^OneHot: input 'indices' has type {dt.onnx_name}"):
                one_hot(indices, 4, values, opset=version)
            continue
        depth = np.array([4], dt.np_dtype) if dt.kind != "float" else np.array(4.9, dt.np_dtype)  # (truncated to 4)
        assert_same(one_hot(indices, depth, values, opset=version), one_hot_oracle(indices, 4, values, -1, version))
    special = np.array([np.nan, np.inf, -np.inf, 1e30, 1], np.float32)
    assert_same(one_hot(special, 2, values, opset=version), one_hot_oracle(special, 2, values, -1, version))
    huge = np.array([2 ** 64 - 1, 1], np.uint64)  # (must not wrap to -1)
    assert_same(one_hot(huge, 3, values, opset=version), one_hot_oracle(huge.astype(np.float64), 3, values, -1, 11))


def test_one_hot_jit_and_errors():
    indices = np.array([[1, -1], [0, 7]], np.int32)
    values = np.array([-1, 4], np.int16)
    want = one_hot_oracle(indices, 5, values, 1, 11)
    f = dsl.jit(lambda i, d: one_hot(i, d, values, axis=1))
    assert_same(f(indices, np.array(5, np.int64)), want)
    assert_same(dsl.jit(lambda i: one_hot(i, 5, values, axis=1))(indices), want)
    computed = dsl.jit(lambda i, d: one_hot(i, dsl.add(d, 1), values, axis=1))  # depth unknown until run time
    assert_same(computed(indices, np.array(4, np.int64)), want)
    assert_same(one_hot(np.array(2), 3, values), np.array([-1, -1, 4], np.int16))  # scalar indices
    with pytest.raises(dsl.ShapeError, match=r"^OneHot: values has shape \[3\]; expected a 1-D tensor of two"):
        one_hot(indices, 5, np.zeros(3, np.float32))
    with pytest.raises(dsl.ShapeError, match=r"^OneHot: depth has shape \[2\]; expected a scalar or a 1-D"):
        one_hot(indices, np.array([2, 3]), values)
    with pytest.raises(dsl.InputError, match=r"^OneHot: depth -2 is negative"):
        one_hot(indices, -2, values)
    with pytest.raises(dsl.InputError, match=r"^OneHot: depth nan is not finite"):
        one_hot(indices, np.array(np.nan, np.float32), values)
    with pytest.raises(dsl.ShapeError, match=r"^OneHot: axis 3 out of range \[-3, 2\] for output rank 3"):
        one_hot(indices, 5, values, axis=3)
    with pytest.raises(dsl.DTypeError, match=r"^OneHot: input 'depth' has type bool"):
        one_hot(indices, np.array(True), values)


# ---- Compress -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS["Compress"])
def test_compress_every_version_and_type(version):
    condition = np.array([True, False, True])
    for dt, allowed in _check_types("Compress", version):
        data = make_array(dt, (3, 4), seed=version)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^Compress: input 'input' has type {dt.onnx_name}"):
                compress(data, condition, axis=0, opset=version)
            continue
        before = snapshot(data)
        assert_same(compress(data, condition, axis=0, opset=version), compress_oracle(data, condition, 0))
        assert_same(compress(data, condition, opset=version), compress_oracle(data, condition, None))
        longer = np.array([False, True, True, True, False, False])  # past the end: False only
        assert_same(compress(data, longer, axis=1, opset=version), compress_oracle(data, longer, 1))
        if version >= 11:
            assert_same(compress(data, condition, axis=-1, opset=version), compress_oracle(data, condition, 1))
        else:
            with pytest.raises(dsl.ShapeError, match=r"^Compress: axis -1 is negative; version 9"):
                compress(data, condition, axis=-1, opset=version)
        assert snapshot(data) == before


def test_compress_jit_and_errors():
    rng = np.random.default_rng(5)
    data = rng.standard_normal((3, 5)).astype(np.float32)
    condition = np.array([False, True, True, False, True])
    f = dsl.jit(lambda x, c: compress(x * 2.0, c, axis=1))
    assert_same(f(data, condition), compress_oracle(data * 2, condition, 1))
    assert_same(f(data, ~condition), compress_oracle(data * 2, ~condition, 1))
    assert_same(dsl.jit(lambda x: compress(x, np.array([True, False, True])))(data), data.reshape(-1)[[0, 2]])
    with pytest.raises(dsl.InputError, match=r"^Compress.*condition is True at position 3, beyond axis 0's size 3"):
        compress(data, np.array([False, False, False, True]), axis=0)
    with pytest.raises(dsl.ShapeError, match=r"^Compress: condition has shape \[1, 3\]; expected a 1-D bool"):
        compress(data, np.ones((1, 3), bool), axis=0)
    with pytest.raises(dsl.ShapeError, match=r"^Compress: input is a scalar"):
        compress(np.float32(1), np.array([True]))
    with pytest.raises(dsl.ShapeError, match=r"^Compress: axis 2 out of range \[-2, 1\]"):
        compress(data, condition, axis=2)
    with pytest.raises(dsl.DTypeError, match=r"^Compress: input 'condition' has type int64"):
        compress(data, np.array([1, 0]), axis=0)


# ---- NonZero ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS["NonZero"])
def test_nonzero_every_version_and_type(version):
    for dt, allowed in _check_types("NonZero", version):
        x = small(dt, (3, 4), seed=version) if dt.kind != "string" else \
            np.array([["", "a", "", "b"]] * 3, dtype=object)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^NonZero: input 'X' has type {dt.onnx_name}"):
                nonzero(x, opset=version)
            continue
        assert_same(nonzero(x, opset=version), nonzero_oracle(x))
        assert_same(nonzero(x[:, :0], opset=version), np.zeros((2, 0), np.int64))
    special = np.array([0.0, -0.0, np.nan, 1e-45, -np.inf], np.float32)
    assert_same(nonzero(special), np.array([[2, 3, 4]], np.int64))
    assert_same(nonzero(np.float32(3)), np.zeros((1, 1), np.int64))  # a scalar: one element of rank 1
    assert_same(nonzero(np.float32(0)), np.zeros((1, 0), np.int64))


def test_nonzero_jit_feeds_gather_nd():
    x = np.array([[0, 1.5, 0], [2.5, 0, -1]], np.float32)
    f = dsl.jit(lambda a: nonzero(a + 0.0))
    assert_same(f(x), nonzero_oracle(x))
    assert_same(f(np.zeros((2, 3), np.float32)), np.zeros((2, 0), np.int64))
    g = dsl.jit(lambda a: gather_nd(a, dsl.transpose(nonzero(a))))  # a data-dependent shape between numpy steps
    assert_same(g(x), np.array([1.5, 2.5, -1], np.float32))
    mask = np.array([[0, 1, 0], [1, 0, 1]])  # a constant: NonZero folds at trace time, GatherND gets static indices
    h = dsl.jit(lambda a: gather_nd(a, dsl.transpose(nonzero(mask))) * 2.0)
    assert_same(h(x), np.array([3, 5, -2], np.float32))


@pytest.mark.parametrize("version", VERSIONS["OneHot"])
@pytest.mark.parametrize("index_type", ["int8", "int32", "int64", "uint8", "uint64", "float16", "float32", "double"])
def test_one_hot_jit_is_one_kernel_against_the_oracle(version, index_type):
    """The JIT computes OneHot by its body (_one_hot_body): one elementwise kernel, no numpy step."""
    np_type = dtypes.dtype(index_type).np_dtype
    raw = {"i": [[0, 2, -1, 4], [-5, -6, 1, 3]], "u": [[0, 2, 255, 4], [5, 6, 1, 3]],
           "f": [[0.5, 2.9, -0.5, np.nan], [-5.5, -4.2, np.inf, 3.999]]}[np.dtype(np_type).kind]
    indices = np.array(raw, np_type if np.dtype(np_type).kind != "u" else np.float64).astype(np_type)
    if index_type == "uint64":
        indices[0, 2] = np.uint64(2 ** 64 - 1)
    values = np.array([-1.5, 4.0], np.float32)
    for axis in (-1, 0, 1):
        f = dsl.jit(lambda i, v: one_hot(i, 5, v, axis=axis, opset=version), opset=version)
        want = one_hot_oracle(indices.astype(np.float64) if index_type == "uint64" else indices, 5, values, axis,
                              version)
        assert_same(f(indices, values), want)
        shown = f.executable(indices, values).explain(source=False)
        assert f.executable(indices, values).kernel_count == 1 and ": numpy" not in shown, shown


@pytest.mark.parametrize("index", [(slice(None), slice(1, 3)), (0,), (slice(None), slice(None, None, -2)), (1, -1)])
def test_nonzero_jit_results_sliced_and_computed_on(index):
    """Ops after NonZero see its count only at run time: their Calls are planned again there
    (a Slice of it raised an AttributeError once)."""
    m = np.array([[1, 0, 1, 0], [0, 1, 1, 1]], bool)
    f = dsl.jit(lambda v: nonzero(v)[index] * 2)
    np.testing.assert_array_equal(f(m), np.array(np.nonzero(m))[index] * 2)
    m2 = np.eye(5, dtype=bool)
    np.testing.assert_array_equal(f(m2), np.array(np.nonzero(m2))[index] * 2)


def test_shape_ops_after_compress_are_planned_at_run_time():
    """Flatten (and any op whose plan needs dims) after a data-dependent count plans again on the
    real shape (it raised a TypeError on its None dims once)."""
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    keep = np.array([True, False, True])
    f = dsl.jit(lambda v, m: dsl.flatten(compress(v, m, axis=0), 1) + 1.0)
    np.testing.assert_array_equal(f(x, keep), x[keep].reshape(2, 20) + 1)
    np.testing.assert_array_equal(f(x, ~keep), x[~keep].reshape(1, 20) + 1)
