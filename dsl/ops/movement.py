"""Data movement: Slice, Concat, Gather, at every schema version with its exact rules.

Slice is a view (a strided window of its input, no copy: fused kernels read through it). Concat
fuses as guarded loads (lowering.Concatenation), Gather as loads through its loaded indices
(lowering.Gathering); Gather's indices are checked against the axis before anything is read (at
trace time when constant, else before the kernel runs), so an index out of range is a DslError,
never a read outside the data.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..dtypes import all_types
from ..errors import InputError
from ..ir import TensorType
from . import chunks
from ..view import View
from .lowering import Concatenation, Gathering
from .registry import INT64_MAX, INT64_MIN, Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes

_TIND = dtypes.types("int32", "int64")
_NO_BF16 = all_types(4)  # (the 'all types' of versions 4 to 12: no bfloat16)


def _present(call: Call, index: int) -> bool:
    return index < len(call.types) and call.types[index] is not None


def _index_list(call: Call, index: int, what: str) -> list[int] | None:
    """A 1-D int32 / int64 input as ints (None when its value is not known)."""
    rank = call.types[index].rank
    if rank is not None and rank != 1:
        call.fail(f"{what} must be a 1-D int32 or int64 tensor, got shape {list(call.types[index].shape)}")
    return call.int_list(index, what)


# ---- Slice --------------------------------------------------------------------------------------
# Spec (13, the last version): negative starts / ends have the axis' dim added, then starts is
# clamped to [0, dim] for positive steps and to [0, dim - 1] for negative ones, ends to [0, dim]
# or [-1, dim - 1]. Axes default to [0, 1, ..., len(starts) - 1] (version 1's words; later
# versions say [0, ..., r-1], which is the same when starts names every axis) and steps to 1.
# Negative axes from version 11 ("Accepted range is [-r, r-1]"); a step of 0 is an error ('steps'
# cannot be 0, version 11; a zero step selects nothing meaningful before it either). Repeated
# axes are an error (one axis sliced twice has no meaning; onnx's shape inference rejects it).
# The clamping differs from Python's for negative steps: starts=[-10] on a dim of 3 with step -1
# takes element 0 (numpy's a[-10::-1] is empty); the spec wins.
@dataclass(frozen=True)
class SlicePlan:
    """Per input axis (start, step, count): the first element taken, the step between taken
    elements and how many are taken (axes not sliced: (0, 1, dim))."""

    axes: tuple


def slice_window(start: int, end: int, step: int, dim: int) -> tuple[int, int, int]:
    """ONNX Slice's effective (start, step, count) along one axis of size ``dim``."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        count = max(0, -(-(end - start) // step))
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        count = max(0, -(-(start - end) // -step))
    return (start if count else 0), step, count


def _slice_params(call: Call):
    """(starts, ends, axes or None, steps or None), or None when an input's value is unknown."""
    if call.version < 10:
        return call.attrs["starts"], call.attrs["ends"], call.attrs.get("axes"), None
    found = []
    for index, what in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
        if not _present(call, index):
            found.append(None)
            continue
        value = _index_list(call, index, what)
        if value is None:
            return None
        found.append(value)
    return tuple(found)


def _slice_rule(call: Call) -> list:
    data = call.types[0]
    params = _slice_params(call)
    if data.shape is None:
        return [TensorType(data.dtype, None)]
    rank = len(data.shape)
    if params is None:
        return [TensorType(data.dtype, (None,) * rank)]
    starts, ends, axes, steps = params
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        call.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have one entry per sliced "
                  f"axis (lengths {len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})")
    axes = normalize_axes(call, axes, rank, negative=call.version >= 11, rank_name="input rank")
    if 0 in steps:
        call.fail(f"steps {steps} contain 0; a step must be nonzero")
    windows = [(0, 1, d) for d in data.shape]
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = data.shape[axis]
        if isinstance(dim, int):
            windows[axis] = slice_window(start, end, step, dim)
        elif not (step == 1 and start in (0, INT64_MIN) and end == INT64_MAX):  # (the whole symbolic dim)
            windows[axis] = (0, step, None)
    out = tuple(count for _, _, count in windows)
    call.plan = SlicePlan(tuple(windows)) if all(isinstance(d, int) for d in out) else None
    return [TensorType(data.dtype, out)]


def _slice_reference(call: Call, xs: list) -> list:
    index = []
    for start, step, count in call.plan.axes:
        stop = start + step * count
        index.append(slice(0, 0) if count == 0 else slice(start, None if stop < 0 else stop, step))
    return [xs[0][tuple(index)]]


def _slice_view(call: Call, view):
    for axis, (start, step, count) in enumerate(call.plan.axes):
        if (start, step, count) != (0, 1, view.shape[axis]):
            view = view.slice(axis, start, start + step * count, step)
            if view is None:
                return None
    return view


def _slice_schemas() -> tuple[Schema, ...]:
    schemas = [Schema(1, (Input("data"),), (Attr("starts", "ints"), Attr("ends", "ints"), Attr("axes", "ints", None)),
                      all_types(1))]
    for version in (10, 11, 13):
        inputs = (Input("data"), Input("starts", _TIND, needs_value=True), Input("ends", _TIND, needs_value=True),
                  Input("axes", _TIND, optional=True, needs_value=True),
                  Input("steps", _TIND, optional=True, needs_value=True))
        schemas.append(Schema(version, inputs, (), all_types(version)))
    return tuple(schemas)


register(OpDef(
    "Slice", _slice_schemas(), _slice_rule, reference=_slice_reference, view=_slice_view, chunk=chunks.SLICE,
    doc="A strided window along some axes (numpy's basic slicing with ONNX's clamping); a view."))


# ---- Concat -------------------------------------------------------------------------------------
# Version 1: axis optional, default 1, float types only; 4: axis required, all types; 11: negative
# axis in [-r, r-1]; 13: bfloat16. Every input has the rank of the first and its dims except
# along the axis (version 11's words; the op has no other meaning before). The variadic input is
# MAX_INPUTS slots without gaps, as Max / Min's.
MAX_INPUTS = 64


def _concat_rule(call: Call) -> list:
    present = list(call.types)
    if any(t is None for t in present):
        gap = next(k for k, t in enumerate(present) if t is None)
        call.fail(f"input {gap} is missing; variadic inputs cannot be omitted")
    first = present[0]
    for k, t in enumerate(present[1:], start=1):
        if t.dtype != first.dtype:
            call.fail(f"input {k} has type {t.dtype}, input 0 {first.dtype}; all inputs must have one type")
    if any(t.shape is None for t in present):
        return [TensorType(first.dtype, None)]
    rank = len(first.shape)
    for k, t in enumerate(present[1:], start=1):
        if len(t.shape) != rank:
            call.fail(f"input {k} has shape {list(t.shape)}, input 0 {list(first.shape)}; all inputs need one rank")
    if rank == 0:
        call.fail("inputs are scalars (rank 0); Concat needs rank >= 1")
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=call.version >= 11, rank_name="input rank")[0]
    out = list(first.shape)
    for k, t in enumerate(present[1:], start=1):
        for d, (a, b) in enumerate(zip(first.shape, t.shape)):
            if d != axis and isinstance(a, int) and isinstance(b, int) and a != b:
                call.fail(f"input {k} has shape {list(t.shape)}, input 0 {list(first.shape)}: dim {d} differs "
                          f"(only axis {axis} may)")
            if d != axis and a != b:
                out[d] = a if isinstance(a, int) else b if isinstance(b, int) else None
    sizes = [t.shape[axis] for t in present]
    out[axis] = sum(sizes) if all(isinstance(s, int) for s in sizes) else None
    call.plan = axis
    return [TensorType(first.dtype, tuple(out))]


def _concat_reference(call: Call, xs: list) -> list:
    return [np.concatenate([x for x in xs if x is not None], axis=call.plan)]


def _concat_schemas() -> tuple[Schema, ...]:
    slots = (Input("inputs_0"),) + tuple(Input(f"inputs_{k}", optional=True) for k in range(1, MAX_INPUTS))
    return (Schema(1, slots, (Attr("axis", "int", 1),), dtypes.FLOATS_V1),
            *(Schema(v, slots, (Attr("axis", "int"),), all_types(v) if v >= 13 else _NO_BF16) for v in (4, 11, 13)))


FUSED_CONCAT_INPUTS = 8  # more inputs: one guarded load each per element costs more than numpy's copies


def _concat_fusable(call: Call) -> bool:
    """Fused (guarded loads) when every shape is static, the joined axis has 2+ elements and
    there are at most FUSED_CONCAT_INPUTS inputs."""
    shapes = [t.shape for t in call.types]
    return isinstance(call.plan, int) and len(shapes) <= FUSED_CONCAT_INPUTS and \
        all(s is not None and all(isinstance(d, int) for d in s) for s in shapes) and \
        sum(s[call.plan] for s in shapes) >= 2


register(OpDef(
    "Concat", _concat_schemas(), _concat_rule, reference=_concat_reference, chunk=chunks.CONCAT,
    kernel=Concatenation(axis=lambda call: call.plan, fusable=_concat_fusable),
    doc="Join tensors along `axis` (all other dims equal)."))


# ---- Gather -------------------------------------------------------------------------------------
# out[i_0..i_{q-1}, j...] = data[..., indices[i_0..i_{q-1}], ...] along `axis` (negative axes in
# [-r, r-1] at every version). Indices: within [0, s-1] at version 1 ("It is an error if any of
# the index values are out of bounds"), [-s, s-1] from 11 (negatives count from the end). An index
# out of range is an InputError naming the value, its position and the bounds; known at trace
# time (a constant), it fails there.
def _gather_rule(call: Call) -> list:
    data, indices = call.types[0], call.types[1]
    if data.shape is None or indices.shape is None:
        return [TensorType(data.dtype, None)]
    rank = len(data.shape)
    if rank == 0:
        call.fail("data is a scalar (rank 0); Gather needs rank >= 1")
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=True, rank_name="data rank")[0]
    call.plan = axis
    if call.values[1] is not None and isinstance(data.shape[axis], int):
        _checked_indices(call, call.values[1], data.shape[axis])
    return [TensorType(data.dtype, tuple(data.shape[:axis]) + tuple(indices.shape) + tuple(data.shape[axis + 1:]))]


def _checked_indices(call: Call, indices: np.ndarray, size: int) -> np.ndarray:
    """The indices as non-negative int64, or InputError at the first one out of range."""
    low = -size if call.version >= 11 else 0
    wide = np.asarray(indices).astype(np.int64)
    bad = (wide < low) | (wide >= size)
    if bad.any():
        where = tuple(int(k) for k in np.argwhere(bad)[0])
        call.fail(f"indices value {int(wide[where])} at {list(where)} is out of range [{low}, {size - 1}] for axis "
                  f"{call.plan} of size {size}", InputError)
    return np.where(wide < 0, wide + size, wide)


def _gather_reference(call: Call, xs: list) -> list:
    data, indices = xs
    return [np.asarray(np.take(data, _checked_indices(call, indices, data.shape[call.plan]), axis=call.plan))]


def _gather_data(call: Call, view: View) -> View:
    """data's View at the output's index: the gathered axis becomes the indices' dims, at
    stride 0 (the loaded index adds index * stride)."""
    axis, q = call.plan, len(call.types[1].shape)
    return View(view.shape[:axis] + tuple(call.types[1].shape) + view.shape[axis + 1:],
                view.strides[:axis] + (0,) * q + view.strides[axis + 1:], view.offset)


def _gather_terms(call: Call) -> tuple:
    axis, data_rank = call.plan, len(call.types[0].shape)
    out_shape = tuple(call.types[0].shape[:axis]) + tuple(call.types[1].shape) + tuple(call.types[0].shape[axis + 1:])
    q = len(call.types[1].shape)
    around = tuple(range(axis)) + tuple(range(axis + q, axis + q + data_rank - axis - 1))
    return ((axis, lambda view: view.unsqueeze(around).expand(out_shape)),)


def _gather_check(call: Call, indices: np.ndarray) -> None:
    """The run-time check of a fused Gather: min and max first (cheap), the message's details
    only when one is out of range."""
    size = call.types[0].shape[call.plan]
    if indices.size and (indices.min() < (-size if call.version >= 11 else 0) or indices.max() >= size):
        _checked_indices(call, indices, size)


def _gather_bounds(call: Call) -> tuple:
    size = call.types[0].shape[call.plan]
    return np.array([-size if call.version >= 11 else 0], np.int64), np.array([size - 1], np.int64)


def _gather_fusable(call: Call) -> bool:
    return isinstance(call.plan, int) and all(
        t.shape is not None and all(isinstance(d, int) for d in t.shape) for t in call.types[:2])


register(OpDef(
    "Gather",
    tuple(Schema(v, (Input("data"), Input("indices", _TIND)), (Attr("axis", "int", 0),),
                 all_types(v) if v >= 13 else _NO_BF16) for v in (1, 11, 13)),
    _gather_rule, reference=_gather_reference, chunk=chunks.GATHER,
    kernel=Gathering(_gather_data, _gather_terms, _gather_check, _gather_fusable, _gather_bounds),
    doc="Entries of `data` along `axis` at `indices` (negative indices count from the end, version 11+)."))


# ---- Size ---------------------------------------------------------------------------------------
# The element count of any tensor as an int64 scalar; every type of its version (all_types).
def _size_rule(call: Call) -> list:
    shape = call.types[0].shape
    if shape is not None and all(isinstance(d, int) for d in shape):
        call.folded = [np.array(int(np.prod(shape, dtype=object)), np.int64)]
    return [TensorType(_INT64, ())]


_INT64 = dtypes.dtype("int64")

register(OpDef(
    "Size", tuple(Schema(v, (Input("data"),), (), all_types(v)) for v in (1, 13, 19, 21, 23, 24, 25)),
    _size_rule, reference=lambda call, xs: [np.array(np.size(xs[0]), np.int64)], chunk=chunks.WHOLE,
    doc="The number of elements of the input, as an int64 scalar."))


# ---- ConstantOfShape ----------------------------------------------------------------------------
# The output has the shape given by the 1-D int64 input (every value >= 0; empty: a scalar) and
# every element equal to the one-element tensor attribute `value` (default float32 0), whose type
# is the output's: version 9 the numeric types and bool, 20 adds bfloat16 and the float8 types,
# 21 int4 / uint4, 23 float4e2m1, 24 float8e8m0, 25 int2 / uint2.
_COS_TYPES = {9: ("float16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "bool")}
_COS_TYPES[20] = _COS_TYPES[9] + ("bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
_COS_TYPES[21] = _COS_TYPES[20] + ("uint4", "int4")
_COS_TYPES[23] = _COS_TYPES[21] + ("float4e2m1",)
_COS_TYPES[24] = _COS_TYPES[23] + ("float8e8m0",)
_COS_TYPES[25] = _COS_TYPES[24] + ("uint2", "int2")


def _fill_value(call: Call) -> np.ndarray:
    value = call.attrs.get("value")
    if value is None:
        return np.zeros((), np.float32)
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):  # (a dsl.Tensor)
        value = value.numpy()
    if not isinstance(value, np.ndarray) or value.size != 1:
        call.fail(f"attribute 'value' must be a one-element tensor, got "
                  f"{getattr(value, 'shape', type(value).__name__)}", InputError)
    return value.reshape(())


def _constant_of_shape_rule(call: Call) -> list:
    value = _fill_value(call)
    dt = dtypes.of_array(value)
    allowed = dtypes.types(*_COS_TYPES[call.version])
    call.require_type(dt, allowed, "attribute 'value' has type")
    shape = _index_list(call, 0, "input (the shape)")
    if shape is None:
        rank = call.types[0].shape[0] if call.types[0].shape else None
        return [TensorType(dt, None if not isinstance(rank, int) else (None,) * rank)]
    if any(d < 0 for d in shape):
        call.fail(f"shape {shape} has a negative dim; every value must be >= 0", InputError)
    call.plan = value
    return [TensorType(dt, tuple(shape))]


register(OpDef(
    "ConstantOfShape",
    tuple(Schema(v, (Input("input", dtypes.types("int64"), needs_value=True),), (Attr("value", "tensor", None),),
                 dtypes.types(*_COS_TYPES[v])) for v in (9, 20, 21, 23, 24, 25)),
    _constant_of_shape_rule,
    reference=lambda call, xs: [np.full(tuple(int(d) for d in xs[0]), call.plan, dtype=call.plan.dtype)],
    chunk=chunks.FILL,
    doc="A tensor of the given shape, every element the attribute `value` (default float32 0)."))


# ---- Range --------------------------------------------------------------------------------------
# Version 11: scalars start, limit, delta of one type T (float, double, int16, int32, int64);
# number_of_elements = max(ceil((limit - start) / delta), 0) and output[i] = start + i * delta in
# T (integers wrap). limit - start is taken in T, the division in float64 (as onnxruntime), for
# integers exactly. delta = 0 is an error (the count is undefined). Version 27 adds float16 and
# bfloat16 with `stash_type` (default 1, float): the scalars are cast to float32, the count and
# the elements computed there and the output cast back; stash_type = T's own type code computes
# in T; any other value is an error.
def _range_scalars(call: Call):
    for index, name in enumerate(("start", "limit", "delta")):
        shape = call.types[index].shape
        if shape is not None and len(shape) != 0:
            call.fail(f"{name} must be a scalar, got shape {list(shape)}")
    if any(v is None for v in call.values[:3]):
        return None
    return [np.asarray(v).reshape(()) for v in call.values[:3]]


def _range_count(call: Call, start, limit, delta) -> int:
    if delta == 0:
        call.fail(f"delta is 0; Range needs a nonzero step (start {start}, limit {limit})", InputError)
    if start.dtype.kind == "f":
        with np.errstate(all="ignore"):
            span = np.float64(limit - start)
        count = np.ceil(span / np.float64(delta))
        if not np.isfinite(count):
            call.fail(f"start {start}, limit {limit}, delta {delta} give no finite element count", InputError)
        return max(int(count), 0)
    span, step = int(limit) - int(start), int(delta)
    return max(-(-span // step), 0)


def _range_domain(call: Call, dt) -> np.dtype:
    """The numpy type Range computes in (see above)."""
    stash = call.attrs.get("stash_type", 1)
    if dt.onnx_name not in ("float16", "bfloat16"):
        return dt.np_dtype
    if stash == 1:
        return np.dtype(np.float32)
    if stash != dt.onnx_code:
        call.fail(f"stash_type {stash} is neither 1 (float) nor {dt.onnx_code} ({dt.onnx_name}, the inputs' type)",
                  InputError)
    return dt.np_dtype


def _range_rule(call: Call) -> list:
    dt = call.types[0].dtype
    for k, name in ((1, "limit"), (2, "delta")):
        if call.types[k].dtype != dt:
            call.fail(f"{name} has type {call.types[k].dtype}, start {dt}; all three must have one type", InputError)
    domain = _range_domain(call, dt)
    scalars = _range_scalars(call)
    if scalars is None:
        return [TensorType(dt, (None,))]
    count = _range_count(call, *(v.astype(domain) for v in scalars))
    call.plan = count
    return [TensorType(dt, (count,))]


def _range_reference(call: Call, xs: list) -> list:
    out = np.asarray(xs[0]).dtype
    domain = _range_domain(call, dtypes.of_array(np.asarray(xs[0])))
    start, _, delta = (np.asarray(x).reshape(()).astype(domain) for x in xs[:3])
    steps = np.arange(call.plan, dtype=np.int64)
    if start.dtype.kind == "f":
        return [(steps.astype(domain) * delta + start).astype(domain).astype(out)]
    return [(steps * np.int64(delta) + np.int64(start)).astype(out)]


_RANGE_INPUTS = tuple(Input(n, needs_value=True) for n in ("start", "limit", "delta"))
register(OpDef(
    "Range",
    (Schema(11, _RANGE_INPUTS, (), dtypes.types("float", "double", "int16", "int32", "int64")),
     Schema(27, _RANGE_INPUTS, (Attr("stash_type", "int", 1),),
            dtypes.types("float", "double", "int16", "int32", "int64", "float16", "bfloat16"))),
    _range_rule, reference=_range_reference, chunk=chunks.WHOLE,
    doc="start, start + delta, ... up to limit (exclusive): max(ceil((limit - start) / delta), 0) elements."))
