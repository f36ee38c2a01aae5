"""Padding ops: Pad (constant, reflect, edge, wrap; negative pads crop) and CenterCropPad.

In the JIT both fuse by their bodies: what is cut a Slice (a view), what is added in constant
mode a Concat with broadcast fills on the innermost padded axis and a Gather of clipped indices
then a Where with the fill on each outer one (_constant_pad), in reflect / edge / wrap mode a
Gather per padded axis of a constant index (_source_index); fused with producers and consumers.
For the element types the bodies cannot be built of (strings, complex; float8, int4, float4,
e8m0, int2, which no op takes at the expansion opset) and dims unknown before the run the plan is
None and they run their numpy references (index arithmetic, so every element type works), as the
eager engine always does. Under dsl.dask (dsl/ops/chunks.py) the axes they leave unchanged stay
chunked; the axes they pad or crop are read whole.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..dtypes import FLOATS_V1, all_types
from ..ir import TensorType
from . import chunks
from .arrange import _fusable_input, _mode, _planned, _present, _vector
from .registry import INT64, Attr, Call, Input, OpDef, Schema, register
from .shape import check_numel, normalize_axes

_TIND = dtypes.types("int32", "int64")


def _zero(np_dtype: np.dtype) -> np.ndarray:
    """The 'zero' of a type: 0, False, or the empty string (Pad-18's words)."""
    if np_dtype.kind == "O":
        return np.array("", dtype=object)
    return np.zeros((), np_dtype)


def _kept_unless_expanded(plan_rule):
    """``plan_rule`` with the plan dropped where the body cannot be built: the JIT then keeps the
    op, whose reference runs (planned again from the concrete inputs). That is for the element
    types kernels do not compute (strings, complex) and dims unknown before the run (a NonZero
    count). Types the expansion opset's ops do not list (float8, int4, float4, e8m0, int2) are
    built: a body's primitives take any data type (registry.bind)."""
    def rule(call: Call) -> list:
        out = plan_rule(call)
        if call.plan is not None and not _fusable_input(call):
            call.plan = None
        return out
    return rule


def _crop(b, x, windows: dict):
    """``x`` cut to windows[axis] = (start, end): one Slice, a view."""
    if not windows:
        return x
    axes = sorted(windows)
    return b.op("Slice", x, *(b.const(np.array([windows[a][k] for a in axes], np.int64)) for k in (0, 1)),
                b.const(np.array(axes, np.int64)))


def _constant_pad(b, x, shape: list, widths: dict, fill):
    """``x`` (of ``shape``) with widths[axis] = (before, after) elements of the scalar ``fill``
    added (an all-fill Expand, a broadcast view, when ``x`` is empty)."""
    # The innermost padded axis a Concat([Expand(fill), x, Expand(fill)]) - guarded loads fused
    # with producer and consumer, the fill a broadcast view; each further axis outward a Gather of
    # clipped indices, then Where(constant mask, gathered, fill) - the result before it is the
    # gather's data, so each axis is one kernel (a Concat in another Concat's part would run
    # numpy's concatenate). Measured + 1 on float32, medians of 41 interleaved runs (ms; numpy:
    # np.pad + 1): [2048, 2048] last axis + 64: Concat 1.90, Gather + Where 4.59, numpy 9.31;
    # [8, 1000, 1024] axis 1 to 1024: 3.51, 3.40, numpy 12.94; both axes of [2048, 2048] + 8 / + 8:
    # this 3.49, Concats 3.74 (a numpy step), Gathers + Wheres 6.93, numpy 3.36; [8, 1000, 1024] to
    # [8, 1024, 1040]: 6.38, 6.42, 15.26, numpy 10.29.
    shape = list(shape)
    out = [d + sum(widths.get(k, (0, 0))) for k, d in enumerate(shape)]
    if 0 in shape:
        return b.op("Expand", fill, b.const(np.array(out, np.int64)))
    for axis in sorted(widths, reverse=True):
        (before, after), size = widths[axis], shape[axis]
        if axis == max(widths):
            ends = [b.op("Expand", fill, b.const(np.array(shape[:axis] + [width] + shape[axis + 1:], np.int64)))
                    if width else None for width in (before, after)]
            x = b.op("Concat", *[part for part in (ends[0], x, ends[1]) if part is not None], axis=axis)
        else:
            index = np.arange(size + before + after, dtype=np.int64) - before
            inside = ((index >= 0) & (index < size)).reshape([-1 if k == axis else 1 for k in range(len(shape))])
            gathered = b.op("Gather", x, b.const(np.clip(index, 0, size - 1)), axis=axis)
            x = b.op("Where", b.const(inside), gathered, fill)
        shape[axis] = out[axis]
    return x


# ---- Pad ----------------------------------------------------------------------------------------
# Pads are [x1_begin, x2_begin, ..., x1_end, x2_end, ...], 2 entries per axis (version 1's example
# lists them otherwise; its format text wins). Version 1 `paddings` counts elements added (a
# negative one is an error); 2+ "add or remove (if negative)": a negative pad removes that many
# elements first, then the positive pads are applied to what is left (onnxruntime's order; an axis
# cannot lose more than it has). Modes (numpy.pad's): constant (the `value` attribute before 11,
# the optional `constant_value` input from 11 - a scalar; one-element tensors are accepted -
# default 0, "empty string, or False"), reflect (numpy's: mirrored on the edge values, repeating
# for pads longer than the axis), edge, and from 19 wrap ("as if the data tensor forms a torus").
# reflect / edge / wrap need a non-empty axis to extend (numpy raises there too). 18 adds `axes`
# ("Behavior is undefined if an axis is repeated": an error here); pads then hold 2 * len(axes).
# In the JIT, _pad_body (the module docstring); the plan is None where it cannot be built
# (_kept_unless_expanded), and _planned_relate plans again for dsl.dask's chunk rule.
@dataclass(frozen=True)
class PadPlan:
    """Per axis (removed at begin, removed at end, added at begin, added at end), the mode and,
    before version 11, the fill value."""

    axes: tuple
    mode: str
    value: float | None = None


def _pad_inputs(call: Call):
    """(pads, axes or None) or None when a value is unknown."""
    if call.version < 11:
        return call.attrs["paddings" if call.version == 1 else "pads"], None
    pads = _vector(call, 1, "pads")
    axes = None
    if call.version >= 18 and _present(call, 3):
        axes = _vector(call, 3, "axes")
        if axes is None:
            return None
    return None if pads is None else (pads, axes)


def _plan_pad(call: Call) -> list:
    data = call.types[0]
    mode = _mode(call, ("constant", "reflect", "edge", "wrap") if call.version >= 19 else
                 ("constant", "reflect", "edge"))
    if _present(call, 2):
        shape = call.types[2].shape
        if shape is not None and (len(shape) > 1 or all(isinstance(d, int) for d in shape) and
                                  int(np.prod(shape)) != 1):
            call.fail(f"constant_value must be a scalar, got shape {list(shape)}")
    params = _pad_inputs(call)
    if data.shape is None or params is None:
        return [TensorType(data.dtype, None if data.shape is None else (None,) * len(data.shape))]
    pads, axes = params
    rank = len(data.shape)
    axes = list(range(rank)) if axes is None else \
        normalize_axes(call, axes, rank, negative=True, rank_name="input rank")
    if len(pads) != 2 * len(axes):
        call.fail(f"pads {pads} has {len(pads)} entries; expected 2 * {len(axes)} (begin and end per "
                  f"{'axis in axes' if call.version >= 18 and _present(call, 3) else 'input dim'})")
    if call.version == 1 and any(p < 0 for p in pads):
        call.fail(f"paddings {pads} has a negative entry; version 1 only adds elements")
    widths = [(0, 0)] * rank
    for k, axis in enumerate(axes):
        widths[axis] = (pads[k], pads[len(axes) + k])
    plan, out = [], []
    for axis, ((begin, end), dim) in enumerate(zip(widths, data.shape)):
        cut_begin, cut_end, add_begin, add_end = max(-begin, 0), max(-end, 0), max(begin, 0), max(end, 0)
        plan.append((cut_begin, cut_end, add_begin, add_end))
        if not isinstance(dim, int):
            out.append(dim if begin == end == 0 else None)
            continue
        if cut_begin + cut_end > dim:
            call.fail(f"pads {pads} remove {cut_begin + cut_end} elements from axis {axis} of size {dim}")
        left = dim - cut_begin - cut_end
        if mode != "constant" and left == 0 and add_begin + add_end > 0:
            call.fail(f"cannot pad axis {axis} (size {left} after removals) in {mode} mode: there is nothing "
                      f"to extend it with; expected a non-empty axis")
        out.append(left + add_begin + add_end)
    value = call.attrs.get("value") if call.version < 11 else None
    call.plan = PadPlan(tuple(plan), mode, value)
    return [TensorType(data.dtype, check_numel(call, tuple(out)))]


def _source_index(mode: str, size: int, begin: int, out: int) -> np.ndarray:
    """Index into an axis of ``size`` for each of ``out`` positions, ``begin`` of them before it."""
    pos = np.arange(out) - begin
    if mode == "edge":
        return np.clip(pos, 0, size - 1)
    if mode == "wrap":
        return pos % size
    if size == 1:
        return np.zeros(out, np.int64)
    period = 2 * (size - 1)
    pos = pos % period
    return np.where(pos >= size, period - pos, pos)


@_planned(lambda call: _plan_pad(call))
def _pad_reference(call: Call, xs: list) -> list:
    plan, x = call.plan, xs[0]
    x = x[tuple(slice(cb, d - ce) for (cb, ce, _, _), d in zip(plan.axes, x.shape))]
    out_shape = tuple(d + ab + ae for (_, _, ab, ae), d in zip(plan.axes, x.shape))
    if plan.mode != "constant":
        if x.ndim == 0:
            return [x.copy()]
        return [x[np.ix_(*[_source_index(plan.mode, d, ab, n)
                           for (_, _, ab, _), d, n in zip(plan.axes, x.shape, out_shape)])]]
    if plan.value is not None:
        fill = np.asarray(plan.value).astype(x.dtype)
    elif len(xs) > 2 and xs[2] is not None:
        fill = np.asarray(xs[2]).reshape(())
    else:
        fill = _zero(x.dtype)
    out = np.empty(out_shape, x.dtype)
    out[...] = fill
    out[tuple(slice(ab, ab + d) for (_, _, ab, _), d in zip(plan.axes, x.shape))] = x
    return [out]


_pad_rule = _kept_unless_expanded(_plan_pad)


def _pad_fill(call: Call, b, xs: list):
    """The constant-mode fill as a scalar: the `value` attribute before 11, else constant_value
    (a constant, or the input itself: a run-time scalar broadcast where it is read), else zero."""
    np_dtype = call.types[0].dtype.np_dtype
    if call.plan.value is not None:
        return b.const(np.asarray(call.plan.value).astype(np_dtype))
    if not _present(call, 2):
        return b.const(_zero(np_dtype))
    if call.values[2] is not None:
        return b.const(np.asarray(call.values[2], np_dtype).reshape(()))
    return xs[2] if call.types[2].rank == 0 else b.op("Reshape", xs[2], b.const(np.zeros(0, np.int64)))


def _pad_body(call: Call, b, xs: list) -> list:
    """Negative pads a Slice (a view); then constant mode _constant_pad, reflect / edge / wrap
    one Gather per padded axis of the constant index _source_index, innermost first as Tile's
    (inner gathers on the smaller intermediates, the outermost fused with the consumer). Kernels
    that only move float16 / bfloat16 elements copy bits, so NaN payloads survive."""
    # (The innermost axis as a Concat of views - reversed Slices, broadcast edge elements - fuses
    # the producer too but ran slower: + 1 on float32 [2048, 2048], medians of 41 runs, reflect 8
    # on both axes 5.8 ms Gathers vs 14.1, reflect 64 on the last axis 4.2 vs 6.4, edge 8 on both
    # 5.6 vs 7.2; only wrap on the last axis won, 3.2 vs 1.7.)
    plan, shape = call.plan, call.types[0].shape
    x = _crop(b, xs[0], {k: (cb, d - ce) for k, ((cb, ce, _, _), d) in enumerate(zip(plan.axes, shape)) if cb or ce})
    sizes = [d - cb - ce for (cb, ce, _, _), d in zip(plan.axes, shape)]
    widths = {k: (ab, ae) for k, (_, _, ab, ae) in enumerate(plan.axes) if ab or ae}
    if not widths:
        return [x]
    if plan.mode == "constant":
        return [_constant_pad(b, x, sizes, widths, _pad_fill(call, b, xs))]
    for axis in sorted(widths, reverse=True):
        before, after = widths[axis]
        index = _source_index(plan.mode, sizes[axis], before, sizes[axis] + before + after)
        x = b.op("Gather", x, b.const(index.astype(np.int64)), axis=axis)
    return [x]


def _planned_relate(relate):
    """A chunk rule's ``relate`` given a planned Call where the bound one keeps no plan
    (_kept_unless_expanded): dsl.dask reads the pads of every static Pad."""
    def run(dims, node, call, opdef) -> None:
        if call.plan is None:
            call = dataclasses.replace(call)
            _plan_pad(call)
        relate(dims, node, call, opdef)
    return run


_PAD_V11 = dtypes.types("float16", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64")


def _pad_schemas() -> tuple[Schema, ...]:
    mode = Attr("mode", "string", "constant")
    schemas = [Schema(1, (Input("data"),), (Attr("value", "float", 0.0), mode, Attr("paddings", "ints")), FLOATS_V1),
               Schema(2, (Input("data"),), (Attr("value", "float", 0.0), mode, Attr("pads", "ints")), FLOATS_V1)]
    base = (Input("data"), Input("pads", INT64, needs_value=True), Input("constant_value", optional=True))
    schemas += [Schema(11, base, (mode,), _PAD_V11), Schema(13, base, (mode,), all_types(13))]
    axes = Input("axes", _TIND, optional=True, needs_value=True)
    schemas += [Schema(v, base + (axes,), (mode,), all_types(v if v >= 21 else 13)) for v in (18, 19, 21, 23, 24, 25)]
    return tuple(schemas)


register(OpDef(
    "Pad", _pad_schemas(), _pad_rule, reference=_pad_reference, expand=_pad_body,
    chunk=dataclasses.replace(chunks.PAD, relate=_planned_relate(chunks.PAD.relate)),
    doc="Add (or, negative, remove) elements at both ends of each axis: constant, reflect, edge or wrap."))


# ---- CenterCropPad -------------------------------------------------------------------------------
# `shape` (int32 / int64, 1-D) gives the target dims of `axes` (default all; negative in [-r, r-1];
# "Behavior is undefined if an axis is repeated": an error here); one entry per axis, each >= 0.
# A larger dim is cropped to a window starting at (dim - target) // 2 ("rounded down"); a smaller
# one is padded with zeros (0, False, the empty string), (target - dim) // 2 before and the rest
# ("an additional pixel ... to the right side") after. In the JIT, _center_crop_pad_body; the plan
# is None where it cannot be built (_kept_unless_expanded; chunks.CENTER_CROP_PAD reads no plan).
@dataclass(frozen=True)
class CropPadPlan:
    """Per axis (source start, destination start, length copied) and the output shape."""

    axes: tuple
    out: tuple


def _plan_center_crop_pad(call: Call) -> list:
    data = call.types[0]
    target = _vector(call, 1, "shape")
    if data.shape is None:
        return [TensorType(data.dtype, None)]
    rank = len(data.shape)
    axes = call.attrs.get("axes")
    axes = list(range(rank)) if axes is None else normalize_axes(call, axes, rank, negative=True,
                                                                 rank_name="input rank")
    length = call.types[1].shape[0] if call.types[1].shape else None
    if isinstance(length, int) and length != len(axes):
        call.fail(f"shape has {length} entries; expected one per axis of {axes}")
    if target is None:
        return [TensorType(data.dtype, tuple(None if k in axes else d for k, d in enumerate(data.shape)))]
    if any(t < 0 for t in target):
        call.fail(f"shape {target} has a negative entry; expected sizes >= 0")
    out = list(data.shape)
    for axis, size in zip(axes, target):
        out[axis] = size
    if all(isinstance(d, int) for d in data.shape):
        windows = []
        for dim, size in zip(data.shape, out):
            if size <= dim:
                windows.append(((dim - size) // 2, 0, size))
            else:
                windows.append((0, (size - dim) // 2, dim))
        call.plan = CropPadPlan(tuple(windows), tuple(out))
    return [TensorType(data.dtype, check_numel(call, tuple(out)))]


@_planned(lambda call: _plan_center_crop_pad(call))
def _center_crop_pad_reference(call: Call, xs: list) -> list:
    x, plan = xs[0], call.plan
    out = np.empty(plan.out, x.dtype)
    out[...] = _zero(x.dtype)
    out[tuple(slice(d, d + n) for _, d, n in plan.axes)] = x[tuple(slice(s, s + n) for s, _, n in plan.axes)]
    return [out]


_center_crop_pad_rule = _kept_unless_expanded(_plan_center_crop_pad)


def _center_crop_pad_body(call: Call, b, xs: list) -> list:
    """The cropped axes one Slice (a view), then the padded ones _constant_pad with the zero."""
    plan, shape = call.plan, call.types[0].shape
    x = _crop(b, xs[0], {k: (start, start + n) for k, ((start, _, n), dim) in enumerate(zip(plan.axes, shape))
                         if n < dim})
    widths = {k: (dest, size - dest - n) for k, ((_, dest, n), size) in enumerate(zip(plan.axes, plan.out))
              if n < size}
    if not widths:
        return [x]
    zero = b.const(_zero(call.types[0].dtype.np_dtype))
    return [_constant_pad(b, x, [n for _, _, n in plan.axes], widths, zero)]


register(OpDef(
    "CenterCropPad",
    (Schema(18, (Input("input_data"), Input("shape", _TIND, needs_value=True)), (Attr("axes", "ints", None),),
            all_types(13)),),
    _center_crop_pad_rule, reference=_center_crop_pad_reference, expand=_center_crop_pad_body,
    chunk=chunks.CENTER_CROP_PAD,
    doc="Crop (centered, start rounded down) or zero-pad (extra element at the end) `axes` to `shape`."))
