"""Selection by value: OneHot, Compress and NonZero, at every schema version with its exact rules.

OneHot fuses into kernels by its body (_one_hot_body: compares against a constant arange of the
classes); Compress and NonZero have data-dependent output shapes (their rules give an unknown dim
unless the deciding input is a constant) and run their numpy references (explain() lists them as
numpy steps). Their dsl.dask chunk rules are in dsl/ops/chunks.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .. import dtypes
from ..errors import InputError
from ..ir import TensorType
from . import chunks
from .indexing import _ALL_11, _ALL_13, _BOOL, _INT64, _known, _plan
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes

# ---- OneHot --------------------------------------------------------------------------------------
# Output: indices' shape with a dim of size depth inserted at axis (in [-r-1, r], r = rank of
# indices), values[1] (on) where the class equals the index, values[0] (off) elsewhere. depth: a
# scalar or a one-element 1-D tensor, non-integer types truncated to int64 (it must be finite and
# >= 0). Non-integer indices are truncated to int64 (as a cast would); NaN and infinities are out
# of range. In range: [0, depth-1] at version 9 ("values outside the range [0, depth) ... all
# off_value"), [-depth, depth-1] from 11 (negatives add depth); anything else gives a row of
# off_value, not an error (the spec says so).
@dataclass(frozen=True)
class OneHotPlan:
    axis: int
    depth: int


def _one_hot_depth(call: Call) -> int | None:
    shape = call.types[1].shape
    if shape is not None and not (len(shape) == 0 or (len(shape) == 1 and shape[0] in (1, None))):
        call.fail(f"depth has shape {list(shape)}; expected a scalar or a 1-D tensor of one element")
    value = call.values[1]
    if value is None:
        return None
    value = np.asarray(value).reshape(-1)
    if value.size != 1:
        call.fail(f"depth has {value.size} elements; expected one", InputError)
    depth = value[0]
    if depth.dtype.kind == "f" and not np.isfinite(np.float64(depth)):
        call.fail(f"depth {depth} is not finite; expected a count >= 0", InputError)
    depth = int(np.trunc(np.float64(depth))) if depth.dtype.kind == "f" else int(depth)
    if depth < 0:
        call.fail(f"depth {depth} is negative; expected a count >= 0", InputError)
    return depth


def _one_hot_rule(call: Call) -> list:
    indices, values = call.types[0], call.types[2]
    if values.shape is not None and not (len(values.shape) == 1 and values.shape[0] in (2, None)):
        call.fail(f"values has shape {list(values.shape)}; expected a 1-D tensor of two elements [off_value, "
                  f"on_value]")
    depth = _one_hot_depth(call)
    if indices.shape is None:
        return [TensorType(values.dtype, None)]
    rank = len(indices.shape) + 1
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=True, rank_name="output rank")[0]
    call.plan = None if depth is None else OneHotPlan(axis, depth)
    out = tuple(indices.shape[:axis]) + (depth,) + tuple(indices.shape[axis:])
    return [TensorType(values.dtype, out)]


def _one_hot_positions(call: Call, indices: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """(class positions as int64 in [0, depth-1], mask of the indices in range)."""
    low = -depth if call.version >= 11 else 0
    if indices.dtype.kind == "f":
        wide = indices.astype(np.float64)
        finite = np.isfinite(wide)
        whole = np.trunc(np.where(finite, wide, 0))
        valid = finite & (whole >= low) & (whole <= depth - 1)
        wide = np.where(valid, whole, 0).astype(np.int64)
    elif indices.dtype.kind == "u":  # (compared unsigned: uint64 values above int64 must not wrap)
        valid = indices <= np.uint64(depth - 1) if depth > 0 else np.zeros(indices.shape, bool)
        wide = np.where(valid, indices, 0).astype(np.int64)
    else:
        wide = indices.astype(np.int64)
        valid = (wide >= low) & (wide <= depth - 1)
    return np.where(wide < 0, wide + depth, wide), valid


def _one_hot_reference(call: Call, xs: list) -> list:
    indices, _, values = xs
    plan = _plan(call, xs, _one_hot_rule)
    axis, depth = plan.axis, plan.depth
    values = np.asarray(values)
    if values.shape != (2,):
        call.fail(f"values has shape {list(values.shape)}; expected [2] ([off_value, on_value])")
    positions, valid = _one_hot_positions(call, np.asarray(indices), depth)
    classes = np.arange(depth, dtype=np.int64).reshape((depth,) + (1,) * (indices.ndim - axis))
    hot = (np.expand_dims(positions, axis) == classes) & np.expand_dims(valid, axis)
    out = np.full(hot.shape, values[0], dtype=values.dtype)
    out[hot] = values[1]
    return [out]


def _one_hot_body(call: Call, b, xs: list) -> list:
    """OneHot in primitive ops (the JIT's lowering: one elementwise kernel against a constant
    arange of the classes): the in-range test as _one_hot_positions makes it, in int64 (signed
    indices), the indices' own type (unsigned: no wrap above int64) or float64 (floats: the
    truncated value is in [low, depth-1] exactly when low - 1 < x < depth; NaN compares false)."""
    indices, _, values = xs
    plan, kind = call.plan, call.types[0].dtype.np_dtype.kind
    low = -plan.depth if call.version >= 11 else 0
    int64, double = dtypes.dtype("int64").onnx_code, dtypes.dtype("double").onnx_code

    def const(value, np_type):
        return b.const(np.array(value, np_type))
    if kind == "u":
        top = np.iinfo(call.types[0].dtype.np_dtype).max
        valid = None if plan.depth > top else b.op("Less", indices, const(plan.depth, call.types[0].dtype.np_dtype))
        positions = b.op("Cast", indices, to=int64)
    else:
        wide = b.op("Cast", indices, to=double if kind == "f" else int64)
        if kind == "f":
            above = b.op("Greater", wide, const(low - 1, np.float64))
        else:
            above = b.op("GreaterOrEqual", wide, const(low, np.int64))
        valid = b.op("And", above, b.op("Less", wide, const(plan.depth, np.float64 if kind == "f" else np.int64)))
        positions = b.op("Cast", wide, to=int64) if kind == "f" else wide
        positions = b.op("Where", b.op("Less", positions, const(0, np.int64)),
                         b.op("Add", positions, const(plan.depth, np.int64)), positions)
    if valid is not None:  # (out of range: class -1, which no class equals)
        positions = b.op("Where", valid, positions, const(-1, np.int64))
    classes = np.arange(plan.depth, dtype=np.int64).reshape((plan.depth,) + (1,) * (len(call.types[0].shape) - plan.axis))
    hot = b.op("Equal", b.op("Unsqueeze", positions, const([plan.axis], np.int64)), b.const(classes))
    on, off = (b.op("Gather", values, const(k, np.int64)) for k in (1, 0))
    return [b.op("Where", hot, on, off)]


_ONE_HOT_INDEX = dtypes.types("float16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                              "uint32", "uint64")
register(OpDef(
    "OneHot",
    tuple(Schema(v, (Input("indices", _ONE_HOT_INDEX), Input("depth", _ONE_HOT_INDEX, needs_value=True),
                     Input("values")), (Attr("axis", "int", -1),), _ALL_13 if v >= 28 else _ALL_11)
          for v in (9, 11, 28)),
    _one_hot_rule, reference=_one_hot_reference, expand=_one_hot_body, chunk=chunks.ONE_HOT,
    doc="values[1] where a new `depth`-sized axis equals the index, values[0] elsewhere (indices out of range "
        "give all values[0]; negative ones count from the end, version 11+)."))


# ---- Compress ------------------------------------------------------------------------------------
# numpy.compress: the slices along axis (in [0, r-1] at version 9, [-r, r-1] from 11; input rank
# r >= 1) where the 1-D bool condition is True; no axis: the elements of the flattened input.
# A condition shorter than the axis discards the rest (the spec); a longer one may only hold
# False beyond the axis' end (numpy: a True there selects nothing that exists, an error).
def _compress_axis(call: Call) -> int | None:
    data, condition = call.types
    if condition.shape is not None and len(condition.shape) != 1:
        call.fail(f"condition has shape {list(condition.shape)}; expected a 1-D bool tensor")
    if data.shape is not None and len(data.shape) == 0:
        call.fail("input is a scalar (rank 0); Compress needs rank >= 1")
    axis = call.attrs.get("axis")
    if axis is None or data.shape is None:
        return axis
    return normalize_axes(call, [axis], len(data.shape), negative=call.version >= 11, rank_name="input rank")[0]


def _compress_mask(call: Call, condition: np.ndarray, length: int, axis: int | None) -> np.ndarray:
    mask = np.asarray(condition, bool).reshape(-1)
    if mask.size > length and mask[length:].any():
        position = length + int(np.argmax(mask[length:]))
        what = "the flattened input's size" if axis is None else f"axis {axis}'s size"
        call.fail(f"condition is True at position {position}, beyond {what} {length}; entries past the end must "
                  f"be False", InputError)
    return mask[:length]


def _compress_rule(call: Call) -> list:
    data = call.types[0]
    axis = _compress_axis(call)
    call.plan = (axis,) if data.shape is not None else None
    if data.shape is None:
        return [TensorType(data.dtype, (None,) if call.attrs.get("axis") is None else None)]
    length = (prod(data.shape) if _known(data.shape) else None) if axis is None else data.shape[axis]
    count = None
    if call.values[1] is not None and isinstance(length, int):
        count = int(_compress_mask(call, call.values[1], length, axis).sum())
    if axis is None:
        return [TensorType(data.dtype, (count,))]
    return [TensorType(data.dtype, tuple(count if k == axis else d for k, d in enumerate(data.shape)))]


def _compress_reference(call: Call, xs: list) -> list:
    data, condition = xs
    axis, = _plan(call, xs, _compress_rule)
    mask = _compress_mask(call, condition, data.size if axis is None else data.shape[axis], axis)
    return [np.compress(mask, data, axis=axis)]


register(OpDef(
    "Compress",
    tuple(Schema(v, (Input("input"), Input("condition", _BOOL)), (Attr("axis", "int", None),),
                 _ALL_13 if v >= 28 else _ALL_11) for v in (9, 11, 28)),
    _compress_rule, reference=_compress_reference, chunk=chunks.COMPRESS,
    doc="The slices along `axis` (or elements of the flattened input) where `condition` is True (numpy.compress)."))


# ---- NonZero -------------------------------------------------------------------------------------
# numpy.nonzero as one int64 tensor of shape (rank, count), indices in row-major order; nonzero
# as numpy's truth value (NaN and -0.0: NaN counts, -0.0 does not; strings: non-empty). A scalar
# is treated as a 1-D tensor of one element (output (1, count), as numpy did before it stopped
# accepting 0-d input; the spec says only "behaves similar to numpy.nonzero").
def _nonzero_rule(call: Call) -> list:
    shape = call.types[0].shape
    rank = None if shape is None else max(len(shape), 1)
    count = None
    if call.values[0] is not None:
        count = int(np.count_nonzero(np.asarray(call.values[0])))
    return [TensorType(_INT64, (rank, count))]


def _nonzero_reference(call: Call, xs: list) -> list:
    x = np.atleast_1d(np.asarray(xs[0]))
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


register(OpDef(
    "NonZero",
    tuple(Schema(v, (Input("X"),), (), _ALL_13 if v >= 13 else _ALL_11) for v in (9, 13)),
    _nonzero_rule, reference=_nonzero_reference, chunk=chunks.WHOLE,
    doc="The indices of the nonzero elements, int64 of shape (rank, count), row-major (numpy.nonzero)."))
