"""Indexing: GatherElements, GatherND, ScatterElements, ScatterND and TensorScatter, at every
schema version with its exact rules (OneHot, Compress, NonZero: dsl/ops/selection.py).

GatherElements and GatherND fuse into kernels as loads through their loaded indices
(lowering.Gathering); the scatters run their numpy references (explain() lists them as numpy
steps). Their dsl.dask chunk rules are in dsl/ops/chunks.py. Indices are checked against the
data's dims before anything is read or written: an index out of range is an InputError naming the value, its position and the bounds, never a read
or a write outside the data. Scatters write into a copy of ``data``; with reduction 'none',
duplicate indices (for which the spec leaves the order undefined) keep the last update in
row-major order of ``indices`` (numpy's assignment); with a reduction they accumulate in that
order (numpy's ``ufunc.at``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

import numpy as np

from .. import dtypes
from ..dtypes import all_types
from ..errors import DTypeError, InputError
from ..ir import TensorType
from ..view import View
from .lowering import Gathering
from . import chunks
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes

_TIND = dtypes.types("int32", "int64")
_INT64_ONLY = dtypes.types("int64")
_INT64 = dtypes.dtype("int64")
_BOOL = dtypes.types("bool")
_ALL_11 = all_types(11)  # every type but bfloat16 (versions before 13)
_ALL_13 = all_types(13)  # + bfloat16 (only TensorScatter takes the float8 / 4-bit types)


def _known(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _first_bad(bad: np.ndarray) -> list[int]:
    return [int(k) for k in np.argwhere(bad)[0]]


def _plan(call: Call, xs: list, rule):
    """The rule's plan; made from the concrete inputs when the planning call did not know enough
    (a JIT step fed by a data-dependent shape, a depth computed in the graph)."""
    if call.plan is None:
        types = [None if x is None else TensorType(dtypes.of_array(np.asarray(x)), np.shape(x)) for x in xs]
        fresh = replace(call, types=types, values=list(xs), plan=None)
        rule(fresh)
        return fresh.plan
    return call.plan


# ---- GatherElements / ScatterElements ------------------------------------------------------------
# data, indices (and updates) of one rank r >= 1; axis in [-r, r-1]; indices (= updates') dims
# at most data's except along axis (the entry at position p reads / writes data at p with p[axis]
# replaced by the index: a larger dim would address data outside its bounds). Index values in
# [-s, s-1] for s = data.shape[axis] (versions 11+, the first of both ops); negatives add s.
def _elements_axis(call: Call, with_updates: bool) -> int | None:
    data, indices = call.types[0], call.types[1]
    if data.shape is None or indices.shape is None:
        return None
    rank = len(data.shape)
    if rank == 0:
        call.fail(f"data is a scalar (rank 0); {call.op} needs rank >= 1")
    if len(indices.shape) != rank:
        call.fail(f"indices has shape {list(indices.shape)} (rank {len(indices.shape)}), data {list(data.shape)} "
                  f"(rank {rank}); expected indices of data's rank")
    if with_updates:
        updates = call.types[2]
        if updates.shape is not None and (len(updates.shape) != rank or any(
                isinstance(u, int) and isinstance(i, int) and u != i for u, i in zip(updates.shape, indices.shape))):
            call.fail(f"updates has shape {list(updates.shape)}, indices {list(indices.shape)}; expected the "
                      f"same shape")
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=True, rank_name="data rank")[0]
    for k, (d, i) in enumerate(zip(data.shape, indices.shape)):
        if k != axis and isinstance(d, int) and isinstance(i, int) and i > d:
            call.fail(f"indices has shape {list(indices.shape)}, data {list(data.shape)}: dim {k} is {i}, more "
                      f"than data's {d} (only axis {axis} may be larger)")
    if call.values[1] is not None and isinstance(data.shape[axis], int):
        _checked_axis_indices(call, call.values[1], data.shape[axis], axis)
    return axis


def _checked_axis_indices(call: Call, indices: np.ndarray, size: int, axis: int) -> np.ndarray:
    """The indices as non-negative int64, or InputError at the first one out of [-size, size-1]."""
    wide = np.asarray(indices).astype(np.int64)
    bad = (wide < -size) | (wide >= size)
    if bad.any():
        where = _first_bad(bad)
        call.fail(f"indices value {int(wide[tuple(where)])} at {where} is out of range [{-size}, {size - 1}] for "
                  f"axis {axis} of size {size}", InputError)
    return np.where(wide < 0, wide + size, wide)


def _gather_elements_rule(call: Call) -> list:
    data, indices = call.types[0], call.types[1]
    call.plan = _elements_axis(call, with_updates=False)
    return [TensorType(data.dtype, indices.shape)]


def _gather_elements_reference(call: Call, xs: list) -> list:
    data, indices = xs
    axis = _plan(call, xs, _gather_elements_rule)
    positions = _checked_axis_indices(call, indices, data.shape[axis], axis)
    window = data[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(indices.shape))]
    return [np.take_along_axis(window, positions, axis)]


def _static_plan(call: Call) -> bool:
    """Fused (loads through the loaded indices) when the plan is made and every shape is static."""
    return call.plan is not None and all(_known(t.shape) for t in call.types[:2])


def _gather_elements_data(call: Call, view: View) -> View:
    """data's View at the output's (= indices') index: data's strides, 0 along the axis."""
    axis = call.plan
    return View(tuple(call.types[1].shape), tuple(0 if k == axis else st for k, st in enumerate(view.strides)),
                view.offset)


def _gather_elements_check(call: Call, indices: np.ndarray) -> None:
    """The run-time check of a fused GatherElements: min and max, the details only on failure."""
    size = call.types[0].shape[call.plan]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        _checked_axis_indices(call, indices, size, call.plan)


def _gather_elements_bounds(call: Call) -> tuple:
    size = call.types[0].shape[call.plan]
    return np.array([-size], np.int64), np.array([size - 1], np.int64)


GATHER_ELEMENTS = Gathering(_gather_elements_data, lambda call: ((call.plan, lambda view: view),),
                            _gather_elements_check, _static_plan, _gather_elements_bounds)


def _elements_schemas(versions, inputs, with_reduction_since=None) -> tuple:
    schemas = []
    for version in versions:
        attrs = (Attr("axis", "int", 0),)
        if with_reduction_since is not None and version >= with_reduction_since:
            attrs += (Attr("reduction", "string", "none"),)
        schemas.append(Schema(version, inputs, attrs, _ALL_13 if version >= 13 else _ALL_11))
    return tuple(schemas)


register(OpDef(
    "GatherElements", _elements_schemas((11, 13), (Input("data"), Input("indices", _TIND))),
    _gather_elements_rule, reference=_gather_elements_reference, kernel=GATHER_ELEMENTS, chunk=chunks.GATHER_ELEMENTS,
    doc="out[p] = data[p with p[axis] = indices[p]]: numpy's take_along_axis (negative indices count from the "
        "end); the output has the indices' shape."))


# ---- reductions of the scatters ------------------------------------------------------------------
# Version 16 adds `reduction` (none, add, mul), 18 max and min. bool: add is 'or', mul 'and', max
# 'or', min 'and' (numpy's bool arithmetic). Strings have no arithmetic: a reduction other than
# 'none' on them is a DTypeError (the spec lists no meaning for it).
_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(call: Call) -> str:
    reduction = call.attrs.get("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    allowed = ["none", "add", "mul"] + (["max", "min"] if call.version >= 18 else [])
    if reduction not in allowed:
        call.fail(f"reduction {reduction!r} at version {call.version}; expected one of {allowed}", InputError)
    if reduction != "none" and call.types[0].dtype.kind == "string":
        call.fail(f"reduction {reduction!r} on data of type string; only 'none' applies to strings", DTypeError)
    return reduction


def _scatter(reduction: str, out: np.ndarray, target, updates: np.ndarray) -> np.ndarray:
    if reduction == "none":
        out[target] = updates  # duplicates: numpy keeps the last (the spec leaves the order undefined)
    else:
        with np.errstate(all="ignore"):  # integers wrap, floats overflow to inf, as T's arithmetic does
            _REDUCTIONS[reduction].at(out, target, updates)
    return out


@dataclass(frozen=True)
class ScatterPlan:
    axis: int  # ScatterElements: the scattered axis; ScatterND: indices.shape[-1]
    reduction: str


def _scatter_elements_rule(call: Call) -> list:
    reduction = _reduction(call)
    axis = _elements_axis(call, with_updates=True)
    call.plan = None if axis is None else ScatterPlan(axis, reduction)
    return [TensorType(call.types[0].dtype, call.types[0].shape)]


def _scatter_elements_reference(call: Call, xs: list) -> list:
    data, indices, updates = xs
    plan = _plan(call, xs, _scatter_elements_rule)
    axis = plan.axis
    positions = _checked_axis_indices(call, indices, data.shape[axis], axis)
    out = np.array(data, copy=True, order="C")
    target = list(np.indices(indices.shape, sparse=True))
    target[axis] = positions
    return [_scatter(plan.reduction, out, tuple(target), np.asarray(updates))]


register(OpDef(
    "ScatterElements",
    _elements_schemas((11, 13, 16, 18), (Input("data"), Input("indices", _TIND), Input("updates")),
                      with_reduction_since=16),
    _scatter_elements_rule, reference=_scatter_elements_reference, chunk=chunks.SCATTER_ELEMENTS,
    doc="A copy of data with out[p with p[axis] = indices[p]] = updates[p] (or combined by `reduction`: add, "
        "mul, max, min); the inverse of GatherElements."))


# Scatter (9; 11 deprecates it in favour of ScatterElements): ScatterElements-11 without reduction.
register(OpDef(
    "Scatter", _elements_schemas((9, 11), (Input("data"), Input("indices", _TIND), Input("updates"))),
    _scatter_elements_rule, reference=_scatter_elements_reference, chunk=chunks.SCATTER_ELEMENTS,
    doc="The deprecated name of ScatterElements (versions 9, 11; no reduction)."))


# ---- GatherND / ScatterND ------------------------------------------------------------------------
# indices (int64, rank q >= 1) is a (q-1)-D tensor of k-tuples, k = indices.shape[-1], each a
# partial index into data (rank r >= 1). GatherND (batch_dims b from 12, 0 <= b < min(q, r), the
# first b dims of data and indices equal): 1 <= k <= r - b, output indices.shape[:-1] +
# data.shape[b+k:]. ScatterND: k <= r (its spec gives no lower bound; k = 0 addresses all of data,
# as its pseudocode does), updates of shape indices.shape[:-1] + data.shape[k:]. Every index value
# j of a tuple is in [-s, s-1] for s the dim of data it addresses; negatives add s.
def _checked_tuples(call: Call, indices: np.ndarray, sizes: tuple, first_axis: int) -> np.ndarray:
    wide = np.asarray(indices).astype(np.int64)
    bounds = np.array(sizes, np.int64)
    bad = (wide < -bounds) | (wide >= bounds)
    if bad.any():
        where = _first_bad(bad)
        size = int(bounds[where[-1]])
        call.fail(f"indices value {int(wide[tuple(where)])} at {where} is out of range [{-size}, {size - 1}] for "
                  f"data axis {first_axis + where[-1]} of size {size}", InputError)
    return np.where(wide < 0, wide + bounds, wide)


def _nd_ranks(call: Call) -> tuple[int, int] | None:
    data, indices = call.types[0], call.types[1]
    if data.shape is None or indices.shape is None:
        return None
    if len(data.shape) == 0:
        call.fail(f"data is a scalar (rank 0); {call.op} needs rank >= 1")
    if len(indices.shape) == 0:
        call.fail(f"indices is a scalar (rank 0); {call.op} needs rank >= 1 (the last dim holds the index tuples)")
    return len(data.shape), len(indices.shape)


def _gather_nd_rule(call: Call) -> list:
    data, indices = call.types[0], call.types[1]
    ranks = _nd_ranks(call)
    if ranks is None:
        return [TensorType(data.dtype, None)]
    rank, q = ranks
    batch = call.attrs.get("batch_dims", 0)
    if not 0 <= batch < min(q, rank):
        call.fail(f"batch_dims {batch} out of range [0, {min(q, rank) - 1}] (it must be less than both data's rank "
                  f"{rank} and indices' rank {q})")
    for k in range(batch):
        a, b = data.shape[k], indices.shape[k]
        if isinstance(a, int) and isinstance(b, int) and a != b:
            call.fail(f"batch dim {k} differs: data {list(data.shape)}, indices {list(indices.shape)}; the first "
                      f"batch_dims={batch} dims must be equal")
    depth = indices.shape[-1]
    if not isinstance(depth, int):
        return [TensorType(data.dtype, None)]
    if not 1 <= depth <= rank - batch:
        call.fail(f"indices has shape {list(indices.shape)}: its last dim {depth} is out of range [1, {rank - batch}] "
                  f"(data rank {rank} - batch_dims {batch})")
    call.plan = batch
    if call.values[1] is not None and _known(data.shape[batch:batch + depth]):
        _checked_tuples(call, call.values[1], data.shape[batch:batch + depth], batch)
    lead = tuple(b if isinstance(b, int) or not isinstance(a, int) else a
                 for a, b in zip(data.shape[:batch], indices.shape[:batch]))
    return [TensorType(data.dtype, lead + tuple(indices.shape[batch:-1]) + tuple(data.shape[batch + depth:]))]


def _gather_nd_reference(call: Call, xs: list) -> list:
    data, indices = xs
    batch, depth = _plan(call, xs, _gather_nd_rule), indices.shape[-1]
    positions = _checked_tuples(call, indices, data.shape[batch:batch + depth], batch)
    batches, count = prod(data.shape[:batch]), prod(indices.shape[batch:-1])
    flat_data = data.reshape((batches,) + data.shape[batch:])
    flat_positions = positions.reshape(batches, count, depth)
    picked = flat_data[(np.arange(batches)[:, None],) + tuple(flat_positions[..., j] for j in range(depth))]
    return [picked.reshape(tuple(indices.shape[:-1]) + tuple(data.shape[batch + depth:]))]


def _gather_nd_data(call: Call, view: View) -> View:
    """data's View at the output's index: its batch dims, then the tuples' dims at stride 0 (the
    loaded tuple adds the rest), then the dims after the tuple's."""
    batch, depth, lead = call.plan, call.types[1].shape[-1], len(call.types[1].shape) - 1 - call.plan
    return View(tuple(view.shape[:batch]) + tuple(call.types[1].shape[batch:-1]) + tuple(view.shape[batch + depth:]),
                view.strides[:batch] + (0,) * lead + view.strides[batch + depth:], view.offset)


def _gather_nd_terms(call: Call) -> tuple:
    """Per tuple entry j: data axis batch + j, read from indices[..., j] at the output's index."""
    batch, indices = call.plan, call.types[1].shape
    depth, rest = indices[-1], len(call.types[0].shape) - call.plan - indices[-1]
    out_shape = tuple(call.types[0].shape[:batch]) + tuple(indices[batch:-1]) + tuple(call.types[0].shape[batch + depth:])

    def entry(j: int):
        def seen(view: View) -> View:
            picked = View(view.shape[:-1], view.strides[:-1], view.offset + j * view.strides[-1])
            return picked.unsqueeze(tuple(range(len(indices) - 1, len(indices) - 1 + rest))).expand(out_shape)
        return seen
    return tuple((batch + j, entry(j)) for j in range(depth))


def _gather_nd_check(call: Call, indices: np.ndarray) -> None:
    """The run-time check of a fused GatherND: each tuple entry's min and max against its dim,
    the details only on failure."""
    sizes = np.array(call.types[0].shape[call.plan:call.plan + indices.shape[-1]], np.int64)
    tuples = indices.reshape(-1, indices.shape[-1])
    if len(tuples) and ((tuples.min(0) < -sizes).any() or (tuples.max(0) >= sizes).any()):
        _checked_tuples(call, indices, tuple(int(s) for s in sizes), call.plan)


def _gather_nd_bounds(call: Call) -> tuple | None:
    """Each tuple entry's range, [-dim, dim - 1] of the data dim it indexes (None: empty tuples)."""
    sizes = np.array(call.types[0].shape[call.plan:call.plan + call.types[1].shape[-1]], np.int64)
    return (-sizes, sizes - 1) if len(sizes) else None


GATHER_ND = Gathering(_gather_nd_data, _gather_nd_terms, _gather_nd_check, _static_plan, _gather_nd_bounds)


def _nd_schemas(versions, inputs, attr_since, attr) -> tuple:
    return tuple(Schema(v, inputs, (attr,) if attr_since is not None and v >= attr_since else (),
                        _ALL_13 if v >= 13 else _ALL_11) for v in versions)


register(OpDef(
    "GatherND", _nd_schemas((11, 12, 13), (Input("data"), Input("indices", _INT64_ONLY)), 12,
                            Attr("batch_dims", "int", 0)),
    _gather_nd_rule, reference=_gather_nd_reference, kernel=GATHER_ND, chunk=chunks.GATHER_ND,
    doc="Slices of data at the index tuples in the last dim of indices (after `batch_dims` shared leading dims; "
        "negative indices count from the end)."))


def _scatter_nd_rule(call: Call) -> list:
    data, indices, updates = call.types
    reduction = _reduction(call)
    ranks = _nd_ranks(call)
    if ranks is None or not isinstance(indices.shape[-1], int):
        return [TensorType(data.dtype, data.shape)]
    rank, q = ranks
    depth = indices.shape[-1]
    if depth > rank:
        call.fail(f"indices has shape {list(indices.shape)}: its last dim {depth} is more than data's rank {rank}")
    want = tuple(indices.shape[:-1]) + tuple(data.shape[depth:])
    if updates.shape is not None and (len(updates.shape) != len(want) or any(
            isinstance(u, int) and isinstance(w, int) and u != w for u, w in zip(updates.shape, want))):
        call.fail(f"updates has shape {list(updates.shape)}; expected indices.shape[:-1] + data.shape[{depth}:] = "
                  f"{list(want)} (indices {list(indices.shape)}, data {list(data.shape)})")
    call.plan = ScatterPlan(depth, reduction)
    if call.values[1] is not None and _known(data.shape[:depth]):
        _checked_tuples(call, call.values[1], data.shape[:depth], 0)
    return [TensorType(data.dtype, data.shape)]


def _scatter_nd_reference(call: Call, xs: list) -> list:
    data, indices, updates = xs
    plan = _plan(call, xs, _scatter_nd_rule)
    depth = plan.axis
    positions = _checked_tuples(call, indices, data.shape[:depth], 0).reshape(prod(indices.shape[:-1]), depth)
    strides = np.array([prod(data.shape[k + 1:depth]) for k in range(depth)], np.int64)
    rows = positions @ strides if depth else np.zeros(len(positions), np.int64)
    out = np.array(data, copy=True, order="C")
    flat_out = out.reshape((prod(data.shape[:depth]),) + data.shape[depth:])  # (a view of the copy)
    flat_updates = np.asarray(updates).reshape((len(rows),) + data.shape[depth:])
    _scatter(plan.reduction, flat_out, rows, flat_updates)
    return [out]


register(OpDef(
    "ScatterND",
    tuple(Schema(v, (Input("data"), Input("indices", _INT64_ONLY), Input("updates")),
                 (Attr("reduction", "string", "none"),) if v >= 16 else (), _ALL_13 if v >= 13 else _ALL_11)
          for v in (11, 13, 16, 18)),
    _scatter_nd_rule, reference=_scatter_nd_reference, chunk=chunks.SCATTER_ND,
    doc="A copy of data with the slices at the index tuples of indices set to updates (or combined by "
        "`reduction`: add, mul, max, min); the inverse of GatherND."))


# ---- TensorScatter -------------------------------------------------------------------------------
# Version 24 (a KV-cache update): past_cache and update of one rank r >= 2 and the same dims but
# along axis (in [-r, r-1], not the batch axis 0), where update's length L is at most the cache's
# M. For each batch b the update is written at write_indices[b] + s, s = 0..L-1 (write_indices:
# optional 1-D int64 of the batch size, zeros when absent); mode 'linear' needs every write index
# in [0, M - L] ("write_indices + sequence_length <= max_sequence_length"; a negative one would
# write before the cache's start), 'circular' takes the position modulo M (Python's modulo, so
# negative indices wrap too). Every element type of version 24.
@dataclass(frozen=True)
class TensorScatterPlan:
    axis: int
    circular: bool


def _tensor_scatter_rule(call: Call) -> list:
    cache, update = call.types[0], call.types[1]
    mode = call.attrs["mode"]
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular"):
        call.fail(f"mode {mode!r}; expected 'linear' or 'circular'", InputError)
    indices = call.input_type(2)
    if indices is not None and indices.shape is not None and len(indices.shape) != 1:
        call.fail(f"write_indices has shape {list(indices.shape)}; expected a 1-D tensor (one index per batch)")
    if cache.shape is None or update.shape is None:
        return [TensorType(cache.dtype, cache.shape)]
    rank = len(cache.shape)
    if rank < 2:
        call.fail(f"past_cache has shape {list(cache.shape)}; expected rank >= 2 (a batch axis and a sequence axis)")
    if len(update.shape) != rank:
        call.fail(f"update has shape {list(update.shape)}, past_cache {list(cache.shape)}; expected the same rank")
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=True, rank_name="past_cache rank")[0]
    if axis == 0:
        call.fail(f"axis {call.attrs['axis']} is the batch axis 0; expected a sequence axis in [1, {rank - 1}]")
    for k, (c, u) in enumerate(zip(cache.shape, update.shape)):
        if isinstance(c, int) and isinstance(u, int) and (u > c if k == axis else u != c):
            expected = f"at most {c} (the cache's length)" if k == axis else f"{c}"
            call.fail(f"update has shape {list(update.shape)}, past_cache {list(cache.shape)}: dim {k} is {u}; "
                      f"expected {expected}")
    batch = cache.shape[0]
    if indices is not None and indices.shape is not None and isinstance(indices.shape[0], int) \
            and isinstance(batch, int) and indices.shape[0] != batch:
        call.fail(f"write_indices has shape {list(indices.shape)}; expected [{batch}] (one index per batch)")
    call.plan = TensorScatterPlan(axis, mode == "circular")
    if indices is not None and call.values[2] is not None and isinstance(cache.shape[axis], int) \
            and isinstance(update.shape[axis], int):
        _write_positions(call, call.values[2], cache.shape[axis], update.shape[axis])
    return [TensorType(cache.dtype, cache.shape)]


def _write_positions(call: Call, indices: np.ndarray, size: int, length: int) -> np.ndarray:
    """Per batch the cache positions of the update's L entries, shape (batch, L)."""
    starts = np.asarray(indices).astype(np.int64).reshape(-1, 1)
    if call.plan.circular:
        return (starts + np.arange(length)) % size if size else np.zeros((len(starts), 0), np.int64)
    bad = (starts[:, 0] < 0) | (starts[:, 0] > size - length)
    if bad.any():
        where = int(np.argmax(bad))
        call.fail(f"write_indices value {int(starts[where, 0])} at [{where}] is out of range [0, {size - length}] "
                  f"for axis {call.plan.axis} of size {size} and an update of length {length} (mode 'linear')",
                  InputError)
    return starts + np.arange(length)


def _tensor_scatter_reference(call: Call, xs: list) -> list:
    cache, update = xs[0], xs[1]
    indices = xs[2] if len(xs) > 2 and xs[2] is not None else np.zeros(cache.shape[0], np.int64)
    plan = _plan(call, xs, _tensor_scatter_rule)
    call = replace(call, plan=plan)
    if np.asarray(indices).shape != (cache.shape[0],):
        call.fail(f"write_indices has shape {list(np.shape(indices))}; expected [{cache.shape[0]}]")
    positions = _write_positions(call, indices, cache.shape[plan.axis], update.shape[plan.axis])
    shape = [1] * cache.ndim
    shape[0], shape[plan.axis] = positions.shape
    out = np.array(cache, copy=True, order="C")
    np.put_along_axis(out, positions.reshape(shape), update, plan.axis)
    return [out]


register(OpDef(
    "TensorScatter",
    (Schema(24, (Input("past_cache"), Input("update"), Input("write_indices", _INT64_ONLY, optional=True)),
            (Attr("mode", "string", "linear"), Attr("axis", "int", -2)), all_types(24)),),
    _tensor_scatter_rule, reference=_tensor_scatter_reference, chunk=chunks.TENSOR_SCATTER,
    doc="A copy of past_cache with update written along `axis` from write_indices[b] on, per batch b "
        "(mode 'circular': modulo the cache's length)."))
