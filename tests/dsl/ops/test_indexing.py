"""Tests for dsl/ops/indexing.py: GatherElements, GatherND, ScatterElements, ScatterND and TensorScatter
at every version and element type, eager against element-by-element oracles
written here (the spec's pseudocode), the JIT against eager; bad inputs as DslErrors naming the op and
the value."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.functional import gather_elements, gather_nd, scatter_elements, scatter_nd, tensor_scatter
from dsl.ops import registry

from dsl_test_helpers import (assert_same, assert_schema_in_force_matches_onnx, assert_schemas_match_onnx, make_array,
                              onnx_allowed, snapshot)

OPS = ["GatherElements", "GatherND", "ScatterElements", "ScatterND", "TensorScatter"]
VERSIONS = {op: [s.version for s in registry.get(op).schemas] for op in OPS}


# ---- schemas ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS + ["OneHot", "Compress", "NonZero"])  # (and dsl/ops/selection.py's)
def test_every_schema_and_the_one_in_force_at_each_opset_are_onnx_s(op):
    assert_schemas_match_onnx(op)
    for opset in range(1, registry.LATEST_OPSET + 1):
        assert_schema_in_force_matches_onnx(op, opset)


# ---- oracles (the spec's loops, element by element) -----------------------------------------------------
REDUCE = {"add": operator.add, "mul": operator.mul, "max": np.maximum, "min": np.minimum}


def _norm(index, size):
    index = int(index)
    return index + size if index < 0 else index


def gather_elements_oracle(data, indices, axis):
    out = np.empty(indices.shape, data.dtype)
    for p in np.ndindex(indices.shape):
        q = list(p)
        q[axis] = _norm(indices[p], data.shape[axis])
        out[p] = data[tuple(q)]
    return out


def scatter_elements_oracle(data, indices, updates, axis, reduction="none"):
    out = data.copy()
    with np.errstate(all="ignore"):
        for p in np.ndindex(indices.shape):
            q = list(p)
            q[axis] = _norm(indices[p], data.shape[axis])
            q = tuple(q)
            out[q] = updates[p] if reduction == "none" else REDUCE[reduction](out[q], updates[p])
    return out


def gather_nd_oracle(data, indices, batch=0):
    depth = indices.shape[-1]
    out = np.empty(indices.shape[:-1] + data.shape[batch + depth:], data.dtype)
    for p in np.ndindex(indices.shape[:-1]):
        where = tuple(_norm(v, data.shape[batch + j]) for j, v in enumerate(indices[p]))
        out[p] = data[p[:batch] + where]
    return out


def scatter_nd_oracle(data, indices, updates, reduction="none"):
    out = data.copy()
    with np.errstate(all="ignore"):
        for p in np.ndindex(indices.shape[:-1]):
            where = tuple(_norm(v, data.shape[j]) for j, v in enumerate(indices[p]))
            out[where] = updates[p] if reduction == "none" else REDUCE[reduction](out[where], updates[p])
    return out


def small(dt, shape, seed=0):
    """Small values (0..3) of ``dt``: reductions on them are exact, with no NaN payloads to compare."""
    if dt.kind in ("string", "bool"):
        return make_array(dt, shape, seed)
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dt.np_dtype)


def _check_types(op, version, param="T"):
    """(dtype, allowed) for every dsl type."""
    allowed = onnx_allowed(op, version)[param]
    return [(dt, dt.onnx_name in allowed) for dt in dtypes.ALL]


# ---- GatherElements ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS["GatherElements"])
def test_gather_elements_every_version_and_type(version):
    indices = np.array([[2, -1, 0], [1, 0, -3]], np.int32)
    for dt, allowed in _check_types("GatherElements", version):
        data = make_array(dt, (3, 4), seed=version)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^GatherElements: input 'data' has type {dt.onnx_name}"):
                gather_elements(data, indices, opset=version)
            continue
        before = snapshot(data)
        assert_same(gather_elements(data, indices, opset=version), gather_elements_oracle(data, indices, 0))
        # indices smaller than data along the other axis too; int64 indices, negative axis
        cols = np.array([[3], [-4], [1]], np.int64)
        assert_same(gather_elements(data, cols, axis=-1, opset=version), gather_elements_oracle(data, cols, 1))
        assert snapshot(data) == before


def test_gather_elements_rank3_jit_and_errors():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 4, 5)).astype(np.float32)
    indices = rng.integers(-4, 4, (2, 6, 5)).astype(np.int64)
    want = gather_elements_oracle(data, indices, 1)
    assert_same(gather_elements(data, indices, axis=1), want)
    f = dsl.jit(lambda d, i: gather_elements(d * 2.0, i, axis=1))
    assert_same(f(data, indices), gather_elements_oracle(data * 2, indices, 1))
    bad = indices.copy()
    bad[1, 2, 3] = 4
    for run in (lambda: gather_elements(data, bad, axis=1), lambda: f(data, bad)):
        with pytest.raises(dsl.InputError, match=r"^GatherElements.*: indices value 4 at \[1, 2, 3\] is out of range "
                                                 r"\[-4, 3\] for axis 1 of size 4"):
            run()
    with pytest.raises(dsl.ShapeError, match=r"^GatherElements: indices has shape \[2, 3\] \(rank 2\), "
                                             r"data \[3, 4, 5\]"):
        gather_elements(data, np.zeros((2, 3), np.int64))
    with pytest.raises(dsl.ShapeError, match=r"^GatherElements: .*dim 2 is 6, more than data's 5"):
        gather_elements(data, np.zeros((1, 1, 6), np.int64))
    with pytest.raises(dsl.ShapeError, match=r"^GatherElements: axis 3 out of range \[-3, 2\]"):
        gather_elements(data, indices, axis=3)
    with pytest.raises(dsl.ShapeError, match=r"^GatherElements: data is a scalar"):
        gather_elements(np.float32(1), np.array(0))
    with pytest.raises(dsl.DTypeError, match=r"^GatherElements: input 'indices' has type int16"):
        gather_elements(data, indices.astype(np.int16))
    with pytest.raises(dsl.InputError, match=r"out of range"):  # a constant index fails at trace time
        dsl.jit(lambda d: gather_elements(d, np.full((1, 1, 1), 9)))(data)


# ---- GatherND ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS["GatherND"])
def test_gather_nd_every_version_and_type(version):
    for dt, allowed in _check_types("GatherND", version):
        data = make_array(dt, (2, 3, 4), seed=version)
        indices = np.array([[[1, -1], [0, 2]], [[-2, 0], [1, 1]]], np.int64)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^GatherND: input 'data' has type {dt.onnx_name}"):
                gather_nd(data, indices, opset=version)
            continue
        assert_same(gather_nd(data, indices, opset=version), gather_nd_oracle(data, indices))
        full = np.array([[1, 2, 3], [0, -1, -4]], np.int64)
        assert_same(gather_nd(data, full, opset=version), gather_nd_oracle(data, full))
        if version >= 12:
            batched = np.array([[[2, 1]], [[-1, 0]]], np.int64)  # batch 2, one tuple each into (3, 4)
            assert_same(gather_nd(data, batched, batch_dims=1, opset=version), gather_nd_oracle(data, batched, 1))


def test_gather_nd_batch_dims_jit_and_errors():
    rng = np.random.default_rng(2)
    data = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    indices = rng.integers(-4, 4, (2, 3, 6, 1)).astype(np.int64)
    want = gather_nd_oracle(data, indices, 2)
    assert want.shape == (2, 3, 6, 5)
    assert_same(gather_nd(data, indices, batch_dims=2), want)
    f = dsl.jit(lambda d, i: gather_nd(d, i, batch_dims=2) + 1.0)
    assert_same(f(data, indices), want + np.float32(1))
    assert_same(gather_nd(data, np.zeros((0, 2), np.int64)), np.zeros((0, 4, 5), np.float32))
    bad = indices.copy()
    bad[1, 0, 3, 0] = -5
    with pytest.raises(dsl.InputError, match=r"^GatherND.*indices value -5 at \[1, 0, 3, 0\] is out of range \[-4, 3\] "
                                             r"for data axis 2 of size 4"):
        f(data, bad)
    with pytest.raises(dsl.ShapeError, match=r"^GatherND: batch_dims 4 out of range \[0, 3\]"):
        gather_nd(data, indices, batch_dims=4)
    with pytest.raises(dsl.ShapeError, match=r"^GatherND: batch dim 1 differs"):
        gather_nd(data, np.zeros((2, 2, 1), np.int64), batch_dims=2)
    with pytest.raises(dsl.ShapeError, match=r"^GatherND: indices has shape \[2, 4\]: its last dim 4 is out of range "
                                             r"\[1, 3\] \(data rank 4 - batch_dims 1\)"):
        gather_nd(data, np.zeros((2, 4), np.int64), batch_dims=1)
    with pytest.raises(dsl.ShapeError, match=r"^GatherND: indices is a scalar"):
        gather_nd(data, np.array(0, np.int64))
    with pytest.raises(dsl.DTypeError, match=r"^GatherND: input 'indices' has type int32"):
        gather_nd(data, indices.astype(np.int32))
    with pytest.raises(dsl.InputError, match=r"^GatherND: argument batch_dims=1 does not exist at opset version 11"):
        gather_nd(data, indices, batch_dims=1, opset=11)


# ---- ScatterElements ----------------------------------------------------------------------------------
def _reductions(version):
    return ["none"] + (["add", "mul"] if version >= 16 else []) + (["max", "min"] if version >= 18 else [])


@pytest.mark.parametrize("version", VERSIONS["ScatterElements"])
def test_scatter_elements_every_version_type_and_reduction(version):
    indices = np.array([[1, -1, 0, 2], [-3, 2, 0, 0]], np.int64)  # duplicates in the columns: reductions stack
    for dt, allowed in _check_types("ScatterElements", version):
        data, updates = small(dt, (3, 4), seed=1), small(dt, (2, 4), seed=2)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^ScatterElements: input 'data' has type {dt.onnx_name}"):
                scatter_elements(data, indices, updates, opset=version)
            continue
        before = snapshot(data), snapshot(updates)
        for reduction in _reductions(version):
            if reduction != "none" and dt.kind == "string":
                with pytest.raises(dsl.DTypeError, match=rf"^ScatterElements: reduction '{reduction}' on data of "
                                                         r"type string"):
                    scatter_elements(data, indices, updates, reduction=reduction, opset=version)
                continue
            unique = indices if reduction != "none" else np.array([[1, -1, 0, 2], [-3, 2, 1, 0]], np.int64)
            got = scatter_elements(data, unique, updates, reduction=reduction, opset=version)
            assert_same(got, scatter_elements_oracle(data, unique, updates, 0, reduction))
        cols = np.array([[3], [-1], [0]], np.int32)  # axis 1, indices narrower than data
        got = scatter_elements(data, cols, updates[:, :1].repeat(2, 0)[:3], axis=-1, opset=version)
        assert_same(got, scatter_elements_oracle(data, cols, updates[:, :1].repeat(2, 0)[:3], 1))
        assert (snapshot(data), snapshot(updates)) == before


def test_scatter_elements_duplicates_keep_the_last_update_jit_and_errors():
    data = np.zeros((2, 3), np.float32)
    got = scatter_elements(data, np.array([[1, 1, 1]]), np.array([[1.0, 2.0, 3.0]], np.float32), axis=1)
    assert_same(got, np.array([[0, 3, 0], [0, 0, 0]], np.float32))  # (the spec leaves the order undefined)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((4, 5)).astype(np.float32)
    indices = rng.integers(-4, 4, (3, 5)).astype(np.int64)
    updates = rng.standard_normal((3, 5)).astype(np.float32)
    before = snapshot(data)
    for reduction in ("none", "add", "mul", "max", "min"):
        idx = np.array([[0, 1, 2, 3, 0], [1, 2, 3, 0, 1], [2, 3, 0, 1, 2]]) if reduction == "none" else indices
        f = dsl.jit(lambda d, i, u: scatter_elements(d, i, u * 1.0, reduction=reduction))
        want = scatter_elements_oracle(data, idx, updates, 0, reduction)
        assert_same(f(data, idx, updates), want)
        assert_same(scatter_elements(data, idx, updates, reduction=reduction), want)
    assert snapshot(data) == before
    with pytest.raises(dsl.InputError, match=r"^ScatterElements: indices value 5 at \[0, 1\] is out of range \[-5, 4\] "
                                             r"for axis 1 of size 5"):
        scatter_elements(data, np.array([[0, 5]]), np.zeros((1, 2), np.float32), axis=1)
    with pytest.raises(dsl.InputError, match=r"^ScatterElements.*indices value -5 at \[2, 4\]"):
        bad = indices.copy()
        bad[2, 4] = -5
        dsl.jit(lambda d, i, u: scatter_elements(d, i, u))(data, bad, updates)
    with pytest.raises(dsl.ShapeError, match=r"^ScatterElements: updates has shape \[3, 4\], indices \[3, 5\]"):
        scatter_elements(data, indices, updates[:, :4])
    with pytest.raises(dsl.InputError, match=r"^ScatterElements: reduction 'max' at version 16; expected one of "
                                             r"\['none', 'add', 'mul'\]"):
        scatter_elements(data, indices, updates, reduction="max", opset=16)
    with pytest.raises(dsl.InputError, match=r"^ScatterElements: reduction 'sum' at version 18"):
        scatter_elements(data, indices, updates, reduction="sum")
    with pytest.raises(dsl.InputError, match=r"^ScatterElements: argument reduction='add' does not exist at opset "
                                             r"version 13"):
        scatter_elements(data, indices, updates, reduction="add", opset=13)
    with pytest.raises(dsl.DTypeError, match=r"^ScatterElements: input 'updates' has element type double"):
        scatter_elements(data, indices, updates.astype(np.float64))


# ---- ScatterND ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS["ScatterND"])
def test_scatter_nd_every_version_type_and_reduction(version):
    for dt, allowed in _check_types("ScatterND", version):
        data = small(dt, (3, 4), seed=4)
        rows, row_updates = np.array([[2], [-3]], np.int64), small(dt, (2, 4), seed=5)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^ScatterND: input 'data' has type {dt.onnx_name}"):
                scatter_nd(data, rows, row_updates, opset=version)
            continue
        before = snapshot(data)
        assert_same(scatter_nd(data, rows, row_updates, opset=version), scatter_nd_oracle(data, rows, row_updates))
        cells = np.array([[[0, 1], [2, -1]], [[0, 1], [-1, 3]]], np.int64)  # (0, 1) twice: reductions stack
        cell_updates = small(dt, (2, 2), seed=6)
        for reduction in _reductions(version)[1:]:
            if dt.kind == "string":
                with pytest.raises(dsl.DTypeError, match=rf"^ScatterND: reduction '{reduction}' on data of type"):
                    scatter_nd(data, cells, cell_updates, reduction=reduction, opset=version)
                continue
            got = scatter_nd(data, cells, cell_updates, reduction=reduction, opset=version)
            assert_same(got, scatter_nd_oracle(data, cells, cell_updates, reduction))
        assert snapshot(data) == before


def test_scatter_nd_slices_jit_and_errors():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((4, 3, 2)).astype(np.float32)
    indices = np.array([[[0, 2]], [[-1, 0]]], np.int64)  # shape (2, 1, 2): slices of shape (2,)
    updates = rng.standard_normal((2, 1, 2)).astype(np.float32)
    before = snapshot(data)
    for reduction in ("none", "add", "mul", "max", "min"):
        f = dsl.jit(lambda d, i, u: scatter_nd(d + 0.0, i, u, reduction=reduction))
        want = scatter_nd_oracle(data, indices, updates, reduction)
        assert_same(f(data, indices, updates), want)
        assert_same(scatter_nd(data, indices, updates, reduction=reduction), want)
    assert snapshot(data) == before
    whole = np.zeros((2, 0), np.int64)  # k = 0: each tuple addresses all of data (the pseudocode's output[()])
    stacked = np.stack([data + 1, data * 3])
    assert_same(scatter_nd(data, whole, stacked), scatter_nd_oracle(data, whole, stacked))
    assert_same(scatter_nd(data, whole, stacked, reduction="add"), scatter_nd_oracle(data, whole, stacked, "add"))
    dup = scatter_nd(np.zeros(3, np.int32), np.array([[1], [1]]), np.array([5, 7], np.int32))
    assert_same(dup, np.array([0, 7, 0], np.int32))  # duplicates with 'none': the last update (order undefined)
    with pytest.raises(dsl.InputError, match=r"^ScatterND: indices value 3 at \[1, 0, 1\] is out of range \[-3, 2\] "
                                             r"for data axis 1 of size 3"):
        scatter_nd(data, np.array([[[0, 2]], [[0, 3]]]), updates)
    with pytest.raises(dsl.ShapeError, match=r"^ScatterND: updates has shape \[2, 2\]; expected indices.shape\[:-1\] "
                                             r"\+ data.shape\[2:\] = \[2, 1, 2\]"):
        scatter_nd(data, indices, updates.reshape(2, 2))
    with pytest.raises(dsl.ShapeError, match=r"^ScatterND: indices has shape \[1, 4\]: its last dim 4 is more than "
                                             r"data's rank 3"):
        scatter_nd(data, np.zeros((1, 4), np.int64), np.zeros((1,), np.float32))
    with pytest.raises(dsl.ShapeError, match=r"^ScatterND: indices is a scalar"):
        scatter_nd(data, np.array(0), updates)
    with pytest.raises(dsl.InputError, match=r"^ScatterND: reduction 'min' at version 16"):
        scatter_nd(data, indices, updates, reduction="min", opset=16)


# ---- TensorScatter ------------------------------------------------------------------------------------
def tensor_scatter_oracle(cache, update, write_indices, axis, mode):
    """The spec's pseudocode."""
    axis = axis % cache.ndim
    write_indices = np.zeros(cache.shape[0], np.int64) if write_indices is None else write_indices
    out = cache.copy()
    for prefix in np.ndindex(cache.shape[:axis]):
        for s in range(update.shape[axis]):
            position = int(write_indices[prefix[0]]) + s
            position = position % cache.shape[axis] if mode == "circular" else position
            out[prefix + (position,)] = update[prefix + (s,)]
    return out


def test_tensor_scatter_every_type_and_mode():
    for dt, allowed in _check_types("TensorScatter", 24):
        cache, update = make_array(dt, (2, 3, 4, 2), seed=8), make_array(dt, (2, 3, 2, 2), seed=9)
        if not allowed:
            with pytest.raises(dsl.DTypeError, match=rf"^TensorScatter: input 'past_cache' has type {dt.onnx_name}"):
                tensor_scatter(cache, update)
            continue
        before = snapshot(cache)
        assert_same(tensor_scatter(cache, update), tensor_scatter_oracle(cache, update, None, -2, "linear"))
        starts = np.array([2, 1], np.int64)
        assert_same(tensor_scatter(cache, update, starts), tensor_scatter_oracle(cache, update, starts, -2, "linear"))
        wrapping = np.array([3, -1], np.int64)
        assert_same(tensor_scatter(cache, update, wrapping, mode="circular"),
                    tensor_scatter_oracle(cache, update, wrapping, -2, "circular"))
        assert snapshot(cache) == before
    cache, update = np.zeros((2, 5, 3), np.float32), np.ones((2, 2, 3), np.float32)
    assert_same(tensor_scatter(cache, update, np.array([0, 3]), axis=1),
                tensor_scatter_oracle(cache, update, np.array([0, 3]), 1, "linear"))


def test_tensor_scatter_jit_and_errors():
    rng = np.random.default_rng(6)
    cache = rng.standard_normal((2, 4, 6, 3)).astype(np.float32)
    update = rng.standard_normal((2, 4, 2, 3)).astype(np.float32)
    starts = np.array([4, 5], np.int64)
    f = dsl.jit(lambda c, u, w: tensor_scatter(c, u * 1.0, w, mode="circular"))
    assert_same(f(cache, update, starts), tensor_scatter_oracle(cache, update, starts, -2, "circular"))
    g = dsl.jit(lambda c, u, w: tensor_scatter(c, u, w))
    ends = np.array([4, 0])
    assert_same(g(cache, update, ends), tensor_scatter_oracle(cache, update, ends, -2, "linear"))
    for run in (lambda: tensor_scatter(cache, update, starts), lambda: g(cache, update, starts)):
        with pytest.raises(dsl.InputError, match=r"^TensorScatter.*: write_indices value 5 at \[1\] is out of range "
                                                 r"\[0, 4\] for axis 2 of size 6 and an update of length 2"):
            run()
    with pytest.raises(dsl.InputError, match=r"^TensorScatter: write_indices value -1 at \[0\]"):
        tensor_scatter(cache, update, np.array([-1, 0]))
    with pytest.raises(dsl.ShapeError, match=r"^TensorScatter: axis -4 is the batch axis 0; expected a sequence "
                                             r"axis in \[1, 3\]"):
        tensor_scatter(cache, update, axis=-4)
    with pytest.raises(dsl.ShapeError, match=r"^TensorScatter: update has shape \[2, 4, 7, 3\].*dim 2 is 7; expected "
                                             r"at most 6"):
        tensor_scatter(cache, np.zeros((2, 4, 7, 3), np.float32))
    with pytest.raises(dsl.ShapeError, match=r"^TensorScatter: update has shape \[2, 3, 2, 3\].*dim 1 is 3; "
                                             r"expected 4"):
        tensor_scatter(cache, np.zeros((2, 3, 2, 3), np.float32))
    with pytest.raises(dsl.ShapeError, match=r"^TensorScatter: write_indices has shape \[3\]; expected \[2\]"):
        tensor_scatter(cache, update, np.zeros(3, np.int64))
    with pytest.raises(dsl.ShapeError, match=r"^TensorScatter: past_cache has shape \[4\]; expected rank >= 2"):
        tensor_scatter(np.zeros(4, np.float32), np.zeros(4, np.float32))
    with pytest.raises(dsl.InputError, match=r"^TensorScatter: mode 'ring'; expected 'linear' or 'circular'"):
        tensor_scatter(cache, update, mode="ring")
    with pytest.raises(dsl.UnsupportedError, match=r"^TensorScatter: not defined at opset 23"):
        tensor_scatter(cache, update, opset=23)


def test_deprecated_scatter_is_scatter_elements_without_reduction():
    from dsl_test_helpers import allowed_types, schemas_with_onnx
    for schema, spec in schemas_with_onnx("Scatter"):
        assert {t.onnx_name for t in schema.types} == {t.onnx_name for t in allowed_types("Scatter", schema.version)}
        assert {a.name for a in schema.attrs} == set(spec.attributes) == {"axis"}
    data = np.zeros((3, 3), np.float32)
    indices = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
    updates = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    opdef = registry.get("Scatter")
    _, call, _ = registry.bind("Scatter", 11, [dsl.TensorType(dsl.float32, (3, 3)), dsl.TensorType(dsl.int64, (2, 3)),
                                               dsl.TensorType(dsl.float32, (2, 3))], [data, indices, updates], {"axis": 0})
    got = opdef.reference(call, [data, indices, updates])[0]
    want = data.copy()
    np.put_along_axis(want, indices, updates, axis=0)
    np.testing.assert_array_equal(got, want)
    assert not data.any()
    with pytest.raises(dsl.InputError, match="Scatter"):
        bad = np.array([[3, 0, 0]], np.int64)
        _, call, _ = registry.bind("Scatter", 11, [dsl.TensorType(dsl.float32, (3, 3)), dsl.TensorType(dsl.int64, (1, 3)),
                                                   dsl.TensorType(dsl.float32, (1, 3))], [data, bad, updates[:1]],
                                   {"axis": 0})
        opdef.reference(call, [data, bad, updates[:1]])
