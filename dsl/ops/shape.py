"""Shape ops that move no data: Unsqueeze, Squeeze, Reshape, Flatten, Transpose, Expand, Shape.

Each rule validates axes/shapes exactly as the ONNX spec text says (not as other
implementations happen to behave) and records its decision in ``call.plan``; the
reference applies it with numpy (which returns views), ``view`` applies it to a View.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..dtypes import FLOATS_V1, all_types
from ..errors import InputError
from ..ir import TensorType
from ..layout import reshaped
from . import chunks
from .registry import INT64, Attr, Call, Input, OpDef, Schema, register

_DATA = Input("data")
_AXES_INPUT = Input("axes", INT64, needs_value=True)
_V1_TO_25 = (1, 11, 13, 21, 23, 24, 25)


def normalize_axes(call: Call, axes: list[int], rank: int, *, negative: bool, rank_name: str,
                   unique: bool = True) -> list[int]:
    """Axes in [-rank, rank-1] (or [0, rank-1] when ``negative`` is False), normalized by +rank,
    without duplicates when ``unique``; order kept. ShapeError names the offending axis."""
    low = -rank if negative else 0
    normalized = []
    for axis in axes:
        if not low <= axis <= rank - 1:
            if axis < 0 and not negative and -rank <= axis:
                call.fail(f"axis {axis} is negative; version {call.version} accepts only axes in "
                          f"[0, {rank - 1}] for {rank_name} {rank} (negative axes need opset >= 11)")
            call.fail(f"axis {axis} out of range [{low}, {rank - 1}] for {rank_name} {rank}")
        normalized.append(axis + rank if axis < 0 else axis)
    if unique and len(set(normalized)) != len(normalized):
        duplicate = next(a for a in normalized if normalized.count(a) > 1)
        call.fail(f"axes {axes} repeat axis {duplicate} (after normalizing negatives by +{rank})")
    return normalized


def _check_axes_rank(call: Call, index: int, what: str = "axes") -> None:
    if index < len(call.types) and call.types[index] is not None:
        rank = call.types[index].rank
        if rank is not None and rank != 1:
            call.fail(f"{what} must be a 1-D int64 tensor, got shape {list(call.types[index].shape)}")


def _axes_of(call: Call) -> list[int] | None:
    """Axes from the attribute (versions 1, 11) or the second input (13+)."""
    if call.version < 13:
        return call.attrs["axes"]
    _check_axes_rank(call, 1)
    return call.int_list(1, "axes") if len(call.types) > 1 and call.types[1] is not None else None


def _axes_schemas(axes_required: bool) -> tuple[Schema, ...]:
    attr_default = Attr("axes", "ints") if axes_required else Attr("axes", "ints", None)
    axes_input = _AXES_INPUT if axes_required else Input("axes", INT64, optional=True, needs_value=True)
    return tuple(Schema(v, (_DATA,), (attr_default,), all_types(v)) if v < 13
                 else Schema(v, (_DATA, axes_input), (), all_types(v)) for v in _V1_TO_25)


# ---- Unsqueeze ----------------------------------------------------------------------------
# Spec (11+): "Each value in `axes` should be within the (inclusive) range [-output_rank ,
# output_rank - 1]", "It is an error if it contains duplicates", "The order of values in `axes`
# does not matter". Version 1: "List of non-negative integers", so a negative axis is an error
# there (onnxruntime accepts it). Duplicates are checked AFTER normalization ([0, -3] on a rank-1
# input repeats output axis 0), which onnx's version-11 shape inference misses. An empty list
# inserts nothing (output rank = input rank).
def _unsqueeze_rule(call: Call) -> list:
    data = call.types[0]
    axes = _axes_of(call)
    if axes is None or data.shape is None:
        return [TensorType(data.dtype, None)]
    out_rank = len(data.shape) + len(axes)
    call.plan = sorted(normalize_axes(call, axes, out_rank, negative=call.version >= 11,
                                      rank_name="output rank"))
    dims = iter(data.shape)
    return [TensorType(data.dtype, tuple(1 if k in call.plan else next(dims) for k in range(out_rank)))]


register(OpDef(
    "Unsqueeze", _axes_schemas(True), _unsqueeze_rule,
    reference=lambda call, xs: [np.expand_dims(xs[0], tuple(call.plan))],
    view=lambda call, view: view.unsqueeze(call.plan),
    doc="Insert size-1 dims at `axes`, positions in the OUTPUT (rank r + len(axes))."))


# ---- Squeeze ------------------------------------------------------------------------------
# Spec: "If `axes` is not provided, all the single dimensions will be removed from the shape."
# An explicitly EMPTY axes list (attribute or tensor) IS provided, so it removes nothing: the
# output equals the input (as onnx's shape inference says; onnxruntime, and onnx's reference at
# version 11, squeeze every size-1 dim instead). Unlike Unsqueeze, the Squeeze text never makes
# a repeated axis an error, so the listed axes are squeezed as a set ([0, -3] on rank 3 squeezes
# axis 0 once), as onnx's shape inference and onnxruntime do (onnx's reference raises).
# Version 1: "List of non-negative integers"; 11+: "Accepted range is [-r, r-1] where r = rank(data)".
def _squeeze_rule(call: Call) -> list:
    data = call.types[0]
    has_axes = call.attrs.get("axes") is not None if call.version < 13 else \
        len(call.types) > 1 and call.types[1] is not None
    axes = _axes_of(call)
    if data.shape is None or (has_axes and axes is None):
        return [TensorType(data.dtype, None)]
    rank = len(data.shape)
    if has_axes:
        call.plan = sorted(set(normalize_axes(call, axes, rank, negative=call.version >= 11,
                                              rank_name="input rank", unique=False)))
        for axis in call.plan:
            if isinstance(data.shape[axis], int) and data.shape[axis] != 1:
                call.fail(f"cannot squeeze axis {axis} of size {data.shape[axis]} in shape "
                          f"{list(data.shape)}; only size-1 dims can be squeezed")
    else:
        if not all(isinstance(d, int) for d in data.shape):
            return [TensorType(data.dtype, None)]
        call.plan = [k for k, d in enumerate(data.shape) if d == 1]
    return [TensorType(data.dtype, tuple(d for k, d in enumerate(data.shape) if k not in call.plan))]


register(OpDef(
    "Squeeze", _axes_schemas(False), _squeeze_rule,
    reference=lambda call, xs: [np.squeeze(xs[0], tuple(call.plan))],
    view=lambda call, view: view.squeeze(call.plan),
    doc="Remove the size-1 dims listed in `axes` (all size-1 dims when axes is absent)."))


# ---- Reshape ------------------------------------------------------------------------------
# Spec: "At most one dimension of the new shape can be -1. In this case, the value is inferred
# from the size of the tensor and the remaining dimensions." When the remaining dims multiply to
# 0 (a 0 entry, or a copied 0 dim) the -1 cannot be inferred and we raise, as the allowzero
# clause puts it: "the value of the dimension corresponding to -1 cannot be determined uniquely"
# (onnx's shape inference and onnxruntime raise too). A -1 next to non-zero dims of a 0-size
# input is inferred as 0. "A dimension could also be 0, in which case the actual dimension value
# is unchanged (i.e. taken from the input tensor)": so a 0 at a position >= the input rank is an
# error. allowzero (14+): only 0 and 1 are defined ("allowzero=1 indicates that ... the zero
# value is honored"); other values are rejected rather than guessed at.
def _reshape_target(call: Call, in_shape: tuple, spec: list[int], allowzero: bool) -> tuple:
    if any(d < -1 for d in spec):
        call.fail(f"shape {spec} has an entry below -1; expected sizes >= 0 or a single -1")
    if spec.count(-1) > 1:
        call.fail(f"shape {spec} has more than one -1")
    if allowzero and 0 in spec and -1 in spec:
        call.fail(f"shape {spec} has both 0 and -1 with allowzero=1; the -1 cannot be inferred")
    out = []
    for k, d in enumerate(spec):
        if d == 0 and not allowzero:
            if k >= len(in_shape):
                call.fail(f"shape {spec} copies dim {k} (0) but the input has rank {len(in_shape)}")
            out.append(in_shape[k])
        else:
            out.append(d)
    if -1 in out:
        known = [d for d in out if d != -1]
        if all(isinstance(d, int) for d in in_shape) and all(isinstance(d, int) for d in known):
            rest = prod(known)
            if rest == 0 or prod(in_shape) % rest:
                call.fail(f"cannot reshape {list(in_shape)} ({prod(in_shape)} elements) to {spec}: "
                          f"the -1 dim cannot be inferred")
            out[out.index(-1)] = prod(in_shape) // rest
        else:
            out[out.index(-1)] = None
    if all(isinstance(d, int) for d in list(in_shape) + out) and prod(in_shape) != prod(out):
        call.fail(f"cannot reshape {list(in_shape)} ({prod(in_shape)} elements) to {spec} "
                  f"({prod(out)} elements)")
    return check_numel(call, tuple(out))


def _reshape_rule(call: Call) -> list:
    data = call.types[0]
    if call.version < 5:
        spec = call.attrs["shape"]
    else:
        _check_axes_rank(call, 1, "shape")
        spec = call.int_list(1, "shape")
    if spec is None or data.shape is None:
        return [TensorType(data.dtype, None)]
    allowzero = call.attrs.get("allowzero", 0)
    if allowzero not in (0, 1):
        call.fail(f"attribute 'allowzero' = {allowzero}; expected 0 or 1", InputError)
    call.plan = _reshape_target(call, data.shape, spec, allowzero == 1)
    return [TensorType(data.dtype, call.plan)]


def _reshape_schemas() -> tuple[Schema, ...]:
    # Reshape-1 "takes a tensor as input and an argument `shape`": we require the attribute
    # (onnx marks it optional without a default; an absent shape has no meaning).
    v1 = Schema(1, (_DATA,), (Attr("shape", "ints"), Attr("consumed_inputs", "ints", None)), FLOATS_V1)
    later = [Schema(v, (_DATA, Input("shape", INT64, needs_value=True)),
                    (Attr("allowzero", "int", 0),) if v >= 14 else (), all_types(v))
             for v in (5, 13, 14, 19, 21, 23, 24, 25)]
    return (v1, *later)


register(OpDef(
    "Reshape", _reshape_schemas(), _reshape_rule,
    reference=lambda call, xs: [reshaped(xs[0], call.plan)],
    view=lambda call, view: view.reshape(call.plan), chunk=chunks.RESHAPE,
    doc="New shape, same elements in C order; 0 copies the input dim (unless allowzero), -1 infers."))


# ---- Flatten ------------------------------------------------------------------------------
# Spec: versions 1 and 9 "The value for axis must be in the range [0, R]"; 11+ "in the range
# [-r, r] ... Negative value means counting dimensions from the back". So axis = rank is valid
# (output (size, 1)), and a rank-0 input takes only axis 0 (the default axis 1 is an error).
def _group_size(dims):
    """The product of dims that may be symbols: 0 if any is 0, the symbol itself if it is alone."""
    if 0 in dims:
        return 0
    if all(isinstance(d, int) for d in dims):
        return prod(dims)
    known = [d for d in dims if d != 1]
    return known[0] if len(known) == 1 else None


def _flatten_rule(call: Call) -> list:
    data = call.types[0]
    if data.shape is None:
        return [TensorType(data.dtype, (None, None))]
    rank = len(data.shape)
    axis = call.attrs["axis"]
    negative = call.version >= 11
    if not (-rank if negative else 0) <= axis <= rank:
        call.fail(f"axis {axis} out of range [{-rank if negative else 0}, {rank}] for input rank {rank}")
    axis = axis + rank if axis < 0 else axis
    call.plan = (_group_size(data.shape[:axis]), _group_size(data.shape[axis:]))
    return [TensorType(data.dtype, call.plan)]


register(OpDef(
    "Flatten",
    tuple(Schema(v, (Input("input"),), (Attr("axis", "int", 1),), FLOATS_V1 if v == 1 else all_types(v))
          for v in (1, 9, 11, 13, 21, 23, 24, 25)),
    _flatten_rule,
    reference=lambda call, xs: [reshaped(xs[0], call.plan)],
    view=lambda call, view: view.reshape(call.plan),
    doc="2-D result: dims before `axis` multiplied, dims from `axis` on multiplied."))


# ---- Transpose ----------------------------------------------------------------------------
# Spec: "`perm` must contain each axis index in `[0, n-1]` exactly once, so its length is equal
# to the rank `n`". Negative entries are NOT normalized (numpy and onnx's reference accept -1;
# onnx's shape inference and onnxruntime reject it, as we do).
def _transpose_rule(call: Call) -> list:
    data = call.types[0]
    perm = call.attrs["perm"]
    if data.shape is None:
        return [TensorType(data.dtype, None)]
    rank = len(data.shape)
    if perm is None:
        perm = list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        call.fail(f"perm {perm} is not a permutation of [0, {rank - 1}] for input rank {rank}"
                  if rank else f"perm {perm} must be empty for a rank-0 input")
    call.plan = perm
    return [TensorType(data.dtype, tuple(data.shape[p] for p in perm))]


register(OpDef(
    "Transpose",
    tuple(Schema(v, (_DATA,), (Attr("perm", "ints", None),), all_types(v)) for v in (1, 13, 21, 23, 24, 25)),
    _transpose_rule,
    reference=lambda call, xs: [np.transpose(xs[0], call.plan)],
    view=lambda call, view: view.permute(call.plan), chunk=chunks.TRANSPOSE,
    doc="Permute dims (default: reverse them)."))


def check_numel(call: Call, shape: tuple, what: str = "output shape") -> tuple:
    """Reject a static shape whose element count does not fit in int64 (numpy, views and kernels
    index with int64; such a tensor cannot exist)."""
    if all(isinstance(d, int) for d in shape) and prod(shape) > 2 ** 63 - 1:
        call.fail(f"{what} {list(shape)} has {prod(shape)} elements, more than int64 can count "
                  f"(2**63 - 1)")
    return shape


# ---- Expand -------------------------------------------------------------------------------
# Spec: "Dimensions are right alignment; Two corresponding dimensions must have the same value,
# or one of them is equal to 1." So 0 only pairs with 0 or 1 (input (1,) to [0] gives (0,),
# input (0,) to [1] gives (0,), input (2,) to [0] is an error), and "the output.shape is not
# equal to shape, when some dimensions in shape is equal to 1, or the shape.ndim < input.shape.ndim".
# Negative entries in `shape` are not sizes: an error.
def broadcast_dims(call: Call, left: tuple, right: tuple) -> tuple:
    """Multidirectional (numpy) broadcast of two shapes whose dims may be symbols."""
    rank = max(len(left), len(right))
    left = (1,) * (rank - len(left)) + tuple(left)
    right = (1,) * (rank - len(right)) + tuple(right)
    out = []
    for a, b in zip(left, right):
        if a == 1 or a == b:
            out.append(b)
        elif b == 1:
            out.append(a)
        elif isinstance(a, int) and isinstance(b, int):
            call.fail(f"shapes {list(left)} and {list(right)} are not broadcastable: dim {a} vs {b}")
        else:
            out.append(a if isinstance(a, int) else b if isinstance(b, int) else None)
    return check_numel(call, tuple(out), "broadcast shape")


def _expand_rule(call: Call) -> list:
    data = call.types[0]
    _check_axes_rank(call, 1, "shape")
    spec = call.int_list(1, "shape")
    if spec is None or data.shape is None:
        return [TensorType(data.dtype, None)]
    if any(d < 0 for d in spec):
        call.fail(f"shape {spec} has a negative entry; expected sizes >= 0")
    call.plan = broadcast_dims(call, data.shape, tuple(spec))
    return [TensorType(data.dtype, call.plan)]


register(OpDef(
    "Expand",
    tuple(Schema(v, (Input("input"), Input("shape", INT64, needs_value=True)), (), all_types(v))
          for v in (8, 13)),
    _expand_rule,
    reference=lambda call, xs: [np.broadcast_to(xs[0], call.plan)],
    view=lambda call, view: view.expand(call.plan), chunk=chunks.EXPAND,
    doc="Broadcast to `shape` by numpy's rules (stride-0 view); the result may exceed `shape`."))


# ---- Shape --------------------------------------------------------------------------------
# Spec (15+): "axes will be clamped to the range [0, r], where r is the rank of the input tensor
# if they are out-of-range (after adding r in the case of negative axis)" and "If start > end,
# the result will be an empty shape." Any int64 start/end is therefore valid.
def _shape_rule(call: Call) -> list:
    data = call.types[0]
    if data.shape is None:
        return [TensorType(INT64_T, (None,))]
    rank = len(data.shape)
    start, end = call.attrs.get("start", 0), call.attrs.get("end")
    end = rank if end is None else end
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    dims = data.shape[start:end] if start < end else ()
    call.plan = slice(start, max(start, end))  # (the dims it returns)
    if all(isinstance(d, int) for d in dims):
        call.folded = [np.array(dims, np.int64)]
    return [TensorType(INT64_T, (len(dims),))]


INT64_T = next(iter(INT64))

register(OpDef(
    "Shape",
    tuple(Schema(v, (_DATA,), (Attr("start", "int", 0), Attr("end", "int", None)) if v >= 15 else (),
                 all_types(v)) for v in (1, 13, 15, 19, 21, 23, 24, 25)),
    _shape_rule,
    reference=lambda call, xs: [np.array(np.shape(xs[0])[call.plan], np.int64)], chunk=chunks.WHOLE,
    doc="The input's dims [start:end) as int64 (out-of-range start/end are clamped)."))
