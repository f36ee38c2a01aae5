"""Padding ops: Pad (constant, reflect, edge, wrap; negative pads crop) and CenterCropPad.

Both run their numpy references (index arithmetic, so every element type works, strings and the
ml_dtypes types included); explain() lists them as numpy steps. Under dsl.dask
(dsl/ops/chunks.py) the axes they leave unchanged stay chunked; the axes they pad or crop are
read whole.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..dtypes import FLOATS_V1, all_types
from ..ir import TensorType
from . import chunks
from .arrange import _mode, _planned, _present, _vector
from .registry import INT64, Attr, Call, Input, OpDef, Schema, register
from .shape import check_numel, normalize_axes

_TIND = dtypes.types("int32", "int64")


def _zero(np_dtype: np.dtype) -> np.ndarray:
    """The 'zero' of a type: 0, False, or the empty string (Pad-18's words)."""
    if np_dtype.kind == "O":
        return np.array("", dtype=object)
    return np.zeros((), np_dtype)


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


def _pad_rule(call: Call) -> list:
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


@_planned(lambda call: _pad_rule(call))
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
    "Pad", _pad_schemas(), _pad_rule, reference=_pad_reference, chunk=chunks.PAD,
    doc="Add (or, negative, remove) elements at both ends of each axis: constant, reflect, edge or wrap."))


# ---- CenterCropPad -------------------------------------------------------------------------------
# `shape` (int32 / int64, 1-D) gives the target dims of `axes` (default all; negative in [-r, r-1];
# "Behavior is undefined if an axis is repeated": an error here); one entry per axis, each >= 0.
# A larger dim is cropped to a window starting at (dim - target) // 2 ("rounded down"); a smaller
# one is padded with zeros (0, False, the empty string), (target - dim) // 2 before and the rest
# ("an additional pixel ... to the right side") after.
@dataclass(frozen=True)
class CropPadPlan:
    """Per axis (source start, destination start, length copied) and the output shape."""

    axes: tuple
    out: tuple


def _center_crop_pad_rule(call: Call) -> list:
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


@_planned(lambda call: _center_crop_pad_rule(call))
def _center_crop_pad_reference(call: Call, xs: list) -> list:
    x, plan = xs[0], call.plan
    out = np.empty(plan.out, x.dtype)
    out[...] = _zero(x.dtype)
    out[tuple(slice(d, d + n) for _, d, n in plan.axes)] = x[tuple(slice(s, s + n) for s, _, n in plan.axes)]
    return [out]


register(OpDef(
    "CenterCropPad",
    (Schema(18, (Input("input_data"), Input("shape", _TIND, needs_value=True)), (Attr("axes", "ints", None),),
            all_types(13)),),
    _center_crop_pad_rule, reference=_center_crop_pad_reference, chunk=chunks.CENTER_CROP_PAD,
    doc="Crop (centered, start rounded down) or zero-pad (extra element at the end) `axes` to `shape`."))
