"""Rearranging ops: Split, Tile, Pad, DepthToSpace, SpaceToDepth, ReverseSequence, CenterCropPad.

Split returns numpy views of its input (one per output); Tile, Pad, ReverseSequence and
CenterCropPad run their numpy references (index arithmetic, so every element type works,
strings and the ml_dtypes types included). DepthToSpace / SpaceToDepth are composites
(Reshape, Transpose, Reshape as the spec spells them): in the JIT they become views and fused
copies. Under dsl.dask (dsl/ops/chunks.py) the axes each op leaves unchanged stay chunked; the
axes it cuts, repeats, pads or reverses (and DepthToSpace / SpaceToDepth's C, H, W) are read whole.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..dtypes import FLOATS_V1, all_types
from ..errors import InputError
from ..ir import TensorType, type_of_array
from . import chunks
from .expansion import expanded_reference
from .registry import INT64, Attr, Call, Input, OpDef, Schema, register
from .shape import check_numel, normalize_axes

_TIND = dtypes.types("int32", "int64")


def _present(call: Call, index: int) -> bool:
    return index < len(call.types) and call.types[index] is not None


def _vector(call: Call, index: int, what: str, integral: bool = False) -> list[int] | None:
    """A 1-D input as ints (None when its value is unknown); ``integral`` for T-typed inputs
    (Split-1's split, Tile-1's tiles) whose float values must be whole numbers."""
    rank = call.types[index].rank
    if rank is not None and rank != 1:
        call.fail(f"{what} must be a 1-D tensor, got shape {list(call.types[index].shape)}")
    value = call.values[index]
    if value is None:
        return None
    if integral:
        return _whole_numbers(call, np.asarray(value).reshape(-1), what)
    return call.int_list(index, what)


def _scalar_int(call: Call, index: int, what: str) -> int | None:
    """A one-element T-typed input (Tile-1's tiles and axis) as an int, None when unknown."""
    shape = call.types[index].shape
    if shape is not None and all(isinstance(d, int) for d in shape) and int(np.prod(shape)) != 1:
        call.fail(f"{what} must hold exactly one value, got shape {list(shape)}")
    if call.values[index] is None:
        return None
    value = np.asarray(call.values[index]).reshape(-1)
    return _whole_numbers(call, value, what)[0]


def _whole_numbers(call: Call, flat: np.ndarray, what: str) -> list[int]:
    wide = np.asarray(flat, np.float64)
    if not np.all(np.isfinite(wide)) or np.any(wide != np.round(wide)):
        call.fail(f"{what} {wide.tolist()} must hold whole numbers", InputError)
    return [int(v) for v in wide]


def _planned(rule):
    """``reference`` run on a Call planned from the concrete inputs when the bound one has no
    plan (a pads / split / shape input computed at run time inside a compiled program)."""
    def wrap(reference):
        def run(call: Call, xs: list) -> list:
            if call.plan is None:
                call = Call(call.op, call.version, call.node, call.attrs,
                            [None if x is None else type_of_array(np.asarray(x)) for x in xs], list(xs),
                            outputs=call.outputs)
                rule(call)
            return reference(call, xs)
        return run
    return wrap


def _zero(np_dtype: np.dtype) -> np.ndarray:
    """The 'zero' of a type: 0, False, or the empty string (Pad-18's words)."""
    if np_dtype.kind == "O":
        return np.array("", dtype=object)
    return np.zeros((), np_dtype)


def _mode(call: Call, allowed: tuple) -> str:
    mode = call.attrs["mode"]
    mode = mode.decode("utf-8", "replace") if isinstance(mode, bytes) else mode
    if mode not in allowed:
        call.fail(f"mode {mode!r} is not supported at version {call.version}; expected one of {list(allowed)}",
                  InputError)
    return mode


# ---- Split --------------------------------------------------------------------------------------
# Version 1: lengths from the `split` attribute or the optional second input (of type T);
# 2 and 11: the attribute; 13+: the optional int64 input ("Values should be >= 0. Sum of the
# values must be equal to the dim value at 'axis'"). Negative axes from 11 ("[-rank, rank-1]").
# Without lengths the tensor "is split to equal sized parts": as many as the node has outputs,
# the axis divisible by that count (an uneven split is an error before 18). 18 adds num_outputs:
# "Either input 'split' or the attribute 'num_outputs' should be specified, but not both" (both,
# or neither, is an error here), and "If the tensor is not evenly splittable into num_outputs,
# the last chunk will be smaller": every chunk ceil(dim / n), the last dim - (n - 1) * ceil(dim / n)
# (an error when that is negative: dim 5 into 4 parts has no such split). A node listing another
# number of outputs than its lengths (or num_outputs) is an error.
@dataclass(frozen=True)
class SplitPlan:
    """The split axis and each output's length along it."""

    axis: int
    sizes: tuple


def _split_lengths(call: Call):
    """(the lengths or None, num_outputs or None, whether lengths are given: their value may be unknown)."""
    if call.version == 1:
        if _present(call, 1):
            return _vector(call, 1, "split", integral=True), None, True
        return call.attrs.get("split"), None, call.attrs.get("split") is not None
    if call.version < 13:
        return call.attrs.get("split"), None, call.attrs.get("split") is not None
    given = _present(call, 1)
    lengths = _vector(call, 1, "split") if given else None
    return lengths, call.attrs.get("num_outputs") if call.version >= 18 else None, given


def _split_sizes(call: Call, dim, lengths, num_outputs, given: bool) -> list | None:
    count = call.outputs
    if lengths is not None:
        if any(n < 0 for n in lengths):
            call.fail(f"split {lengths} has a negative length; expected lengths >= 0")
        if count is not None and count != len(lengths):
            call.fail(f"split {lengths} gives {len(lengths)} outputs but the node has {count}", InputError)
        if isinstance(dim, int) and sum(lengths) != dim:
            call.fail(f"split {lengths} sums to {sum(lengths)}; expected the axis' dim {dim}")
        return list(lengths)
    if given:  # (lengths of unknown value)
        return None
    if num_outputs is not None:
        if num_outputs < 1:
            call.fail(f"num_outputs {num_outputs} must be >= 1", InputError)
        if count is not None and count != num_outputs:
            call.fail(f"num_outputs {num_outputs} but the node has {count} outputs", InputError)
        if not isinstance(dim, int):
            return [None] * num_outputs
        chunk = -(-dim // num_outputs)
        last = dim - chunk * (num_outputs - 1)
        if last < 0:
            call.fail(f"cannot split dim {dim} into {num_outputs} chunks of {chunk} with a smaller last one "
                      f"({last} left for it)")
        return [chunk] * (num_outputs - 1) + [last]
    if call.version >= 18:
        call.fail("neither input 'split' nor attribute 'num_outputs' is given; expected exactly one", InputError)
    if count is None:
        call.fail("no 'split' lengths and the number of outputs is unknown; give split", InputError)
    if not isinstance(dim, int):
        return [None] * count
    if dim % count:
        call.fail(f"cannot split dim {dim} into {count} equal parts; give split lengths")
    return [dim // count] * count


def _split_rule(call: Call) -> list:
    data = call.types[0]
    lengths, num_outputs, given = _split_lengths(call)
    if call.version >= 18 and given and num_outputs is not None:
        call.fail(f"both input 'split' and attribute num_outputs={num_outputs} are given; expected one", InputError)
    if data.shape is None:
        count = len(lengths) if lengths is not None else num_outputs or call.outputs
        if count is None:
            call.fail("the number of outputs is unknown; give split or num_outputs", InputError)
        return [TensorType(data.dtype, None)] * count
    rank = len(data.shape)
    if rank == 0:
        call.fail("input is a scalar (rank 0); Split needs rank >= 1")
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=call.version >= 11, rank_name="input rank")[0]
    sizes = _split_sizes(call, data.shape[axis], lengths, num_outputs, given)
    if sizes is None:
        count = call.types[1].shape[0] if call.types[1].shape else None
        if not isinstance(count, int):
            count = call.outputs
        if count is None:
            call.fail("split lengths of unknown value and count; give them as a constant", InputError)
        sizes = [None] * count
    call.plan = SplitPlan(axis, tuple(sizes)) if all(isinstance(s, int) for s in sizes) else None
    return [TensorType(data.dtype, data.shape[:axis] + (size,) + data.shape[axis + 1:]) for size in sizes]


@_planned(lambda call: _split_rule(call))
def _split_reference(call: Call, xs: list) -> list:
    axis, outs, start = call.plan.axis, [], 0
    for size in call.plan.sizes:
        index = [slice(None)] * xs[0].ndim
        index[axis] = slice(start, start + size)
        outs.append(xs[0][tuple(index)])
        start += size
    return outs


def _split_schemas() -> tuple[Schema, ...]:
    v1 = Schema(1, (Input("input"), Input("split", optional=True, needs_value=True)),
                (Attr("split", "ints", None), Attr("axis", "int", 0)), FLOATS_V1)
    attr_form = [Schema(v, (Input("input"),), (Attr("split", "ints", None), Attr("axis", "int", 0)), all_types(1))
                 for v in (2, 11)]
    inputs = (Input("input"), Input("split", INT64, optional=True, needs_value=True))
    return (v1, *attr_form, Schema(13, inputs, (Attr("axis", "int", 0),), all_types(13)),
            Schema(18, inputs, (Attr("num_outputs", "int", None), Attr("axis", "int", 0)), all_types(13)))


register(OpDef(
    "Split", _split_schemas(), _split_rule, reference=_split_reference, chunk=chunks.SPLIT,
    doc="Cut along `axis` into parts of the given lengths, equal parts, or num_outputs parts (views)."))


# ---- Tile ---------------------------------------------------------------------------------------
# Version 1 ("Repeat the elements of a tensor along an axis"): one-element inputs `tiles` (the
# number of copies) and `axis`, both of type T as onnx's schema declares them (whole numbers;
# axis in [0, r-1]). 6+: `repeats`, "1D int64 tensor of the same length as input's dimension
# number", "the same as function `tile` in Numpy, but no broadcast": a length other than the
# rank is an error; a negative repeat is an error (no count of copies is negative); 0 empties.
def _tile_rule(call: Call) -> list:
    data = call.types[0]
    if call.version == 1:
        tiles, axis = _scalar_int(call, 1, "tiles"), _scalar_int(call, 2, "axis")
        if data.shape is None or tiles is None or axis is None:
            return [TensorType(data.dtype, None if data.shape is None else (None,) * len(data.shape))]
        axis = normalize_axes(call, [axis], len(data.shape), negative=False, rank_name="input rank")[0]
        repeats = [tiles if k == axis else 1 for k in range(len(data.shape))]
    else:
        repeats = _vector(call, 1, "repeats")
        if data.shape is None or repeats is None:
            return [TensorType(data.dtype, None if data.shape is None else (None,) * len(data.shape))]
        if len(repeats) != len(data.shape):
            call.fail(f"repeats {repeats} has {len(repeats)} entries; expected one per input dim (rank "
                      f"{len(data.shape)})")
    if any(r < 0 for r in repeats):
        call.fail(f"repeats {repeats} has a negative entry; expected counts >= 0")
    call.plan = tuple(repeats)
    out = tuple(d * r if isinstance(d, int) else d if r == 1 else 0 if r == 0 else None
                for d, r in zip(data.shape, repeats))
    return [TensorType(data.dtype, check_numel(call, out))]


@_planned(lambda call: _tile_rule(call))
def _tile_reference(call: Call, xs: list) -> list:
    x = xs[0]
    if x.ndim == 0:
        return [x.copy()]
    index = np.ix_(*[np.tile(np.arange(d), r) for d, r in zip(x.shape, call.plan)])
    return [x[index]]


register(OpDef(
    "Tile",
    (Schema(1, (Input("input"), Input("tiles", needs_value=True), Input("axis", needs_value=True)), (), FLOATS_V1),
     *(Schema(v, (Input("input"), Input("repeats", INT64, needs_value=True)), (), all_types(v)) for v in (6, 13))),
    _tile_rule, reference=_tile_reference, chunk=chunks.TILE,
    doc="Repeat the whole tensor `repeats[i]` times along each axis i (numpy's tile, no broadcast)."))


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


# ---- DepthToSpace / SpaceToDepth ------------------------------------------------------------------
# Rank-4 [N, C, H, W] input, blocksize >= 1 (a block of 0 or fewer elements has no meaning).
# DepthToSpace (mode from 11; version 1 is DCR): C divisible by blocksize**2, and, as the spec
# spells it, DCR: reshape [b, bs, bs, c // bs**2, h, w], transpose [0, 3, 4, 1, 5, 2], reshape
# [b, c // bs**2, h * bs, w * bs]; CRD: reshape [b, c // bs**2, bs, bs, h, w], transpose
# [0, 1, 4, 2, 5, 3]. SpaceToDepth (mode from 28; before it DCR): H and W divisible by blocksize;
# reshape [b, c, h // bs, bs, w // bs, bs], transpose [0, 3, 5, 1, 2, 4] (DCR) or
# [0, 1, 3, 5, 2, 4] (CRD), reshape [b, c * bs**2, h // bs, w // bs]. The reshapes use
# allowzero=1 so that a 0-size dim is a size, not "copy the input dim".
@dataclass(frozen=True)
class BlockPlan:
    """The reshape before, the permutation and the final shape."""

    inner: tuple
    perm: tuple
    out: tuple


def _block_rule(to_space: bool):
    def rule(call: Call) -> list:
        data = call.types[0]
        mode = "DCR" if "mode" not in call.attrs else _mode(call, ("DCR", "CRD"))
        bs = call.attrs["blocksize"]
        if bs < 1:
            call.fail(f"blocksize {bs} must be >= 1", InputError)
        if data.shape is None:
            return [TensorType(data.dtype, (None,) * 4)]
        if len(data.shape) != 4:
            call.fail(f"input has shape {list(data.shape)}; expected rank 4 [N, C, H, W]")
        b, c, h, w = data.shape
        known = all(isinstance(d, int) for d in data.shape)
        if to_space:
            if isinstance(c, int) and c % (bs * bs):
                call.fail(f"channels {c} (shape {list(data.shape)}) are not divisible by blocksize**2 = {bs * bs}")
            out = (b, c // (bs * bs) if isinstance(c, int) else None, h * bs if isinstance(h, int) else None,
                   w * bs if isinstance(w, int) else None)
            if known:
                inner = (b, bs, bs, c // bs ** 2, h, w) if mode == "DCR" else (b, c // bs ** 2, bs, bs, h, w)
                perm = (0, 3, 4, 1, 5, 2) if mode == "DCR" else (0, 1, 4, 2, 5, 3)
        else:
            for name, dim in (("height", h), ("width", w)):
                if isinstance(dim, int) and dim % bs:
                    call.fail(f"{name} {dim} (shape {list(data.shape)}) is not divisible by blocksize {bs}")
            out = (b, c * bs * bs if isinstance(c, int) else None, h // bs if isinstance(h, int) else None,
                   w // bs if isinstance(w, int) else None)
            if known:
                inner = (b, c, h // bs, bs, w // bs, bs)
                perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        call.plan = BlockPlan(inner, perm, out) if known else None
        return [TensorType(data.dtype, check_numel(call, out))]
    return rule


def _block_body(call: Call, b, xs: list) -> list:
    plan = call.plan
    inner = b.op("Reshape", xs[0], b.const(np.array(plan.inner, np.int64)), allowzero=1)
    moved = b.op("Transpose", inner, perm=list(plan.perm))
    return [b.op("Reshape", moved, b.const(np.array(plan.out, np.int64)), allowzero=1)]


def _block_schemas(versions: dict) -> tuple[Schema, ...]:
    blocksize = Attr("blocksize", "int")
    return tuple(Schema(v, (Input("input"),), (Attr("mode", "string", "DCR"), blocksize) if has_mode else (blocksize,),
                        all_types(13 if v >= 13 else 1)) for v, has_mode in versions.items())


register(OpDef(
    "DepthToSpace", _block_schemas({1: False, 11: True, 13: True, 28: True}), _block_rule(True),
    reference=_planned(_block_rule(True))(expanded_reference(_block_body)), expand=_block_body,
    chunk=chunks.BATCH_ONLY,
    doc="Move blocksize x blocksize blocks from channels into height and width (DCR or CRD order)."))

register(OpDef(
    "SpaceToDepth", _block_schemas({1: False, 13: False, 28: True}), _block_rule(False),
    reference=_planned(_block_rule(False))(expanded_reference(_block_body)), expand=_block_body,
    chunk=chunks.BATCH_ONLY,
    doc="Move blocksize x blocksize blocks of height and width into channels (DCR, or CRD from 28)."))


# ---- ReverseSequence ----------------------------------------------------------------------------
# "Tensor of rank r >= 2"; batch_axis "Must be one of 1 (default), or 0", time_axis "one of 0
# (default), or 1" (equal axes are an error: one axis cannot be both). sequence_lens has "shape
# [batch_size]"; each length reverses "the first sequence_lens[i] elements on time axis", so it
# lies in [0, time dim] (checked when the values are known: at trace time for constants, else
# when run).
def _reverse_sequence_rule(call: Call) -> list:
    data, lens = call.types[0], call.types[1]
    batch_axis, time_axis = call.attrs["batch_axis"], call.attrs["time_axis"]
    for name, axis in (("batch_axis", batch_axis), ("time_axis", time_axis)):
        if axis not in (0, 1):
            call.fail(f"{name} {axis} must be 0 or 1", InputError)
    if batch_axis == time_axis:
        call.fail(f"batch_axis and time_axis are both {batch_axis}; expected different axes", InputError)
    if lens.shape is not None and len(lens.shape) != 1:
        call.fail(f"sequence_lens must be 1-D [batch_size], got shape {list(lens.shape)}")
    if data.shape is None:
        return [TensorType(data.dtype, None)]
    if len(data.shape) < 2:
        call.fail(f"input has shape {list(data.shape)}; expected rank >= 2")
    batch, time = data.shape[batch_axis], data.shape[time_axis]
    if lens.shape is not None and isinstance(batch, int) and isinstance(lens.shape[0], int) and lens.shape[0] != batch:
        call.fail(f"sequence_lens has {lens.shape[0]} entries; expected batch_size {batch} (input shape "
                  f"{list(data.shape)}, batch_axis {batch_axis})")
    if call.values[1] is not None and isinstance(time, int):
        _checked_lengths(call, call.values[1], time)
    call.plan = (batch_axis, time_axis)
    return [TensorType(data.dtype, data.shape)]


def _checked_lengths(call: Call, lens: np.ndarray, time: int) -> list[int]:
    lengths = [int(v) for v in np.asarray(lens).reshape(-1)]
    for k, n in enumerate(lengths):
        if not 0 <= n <= time:
            call.fail(f"sequence_lens[{k}] = {n} is out of range [0, {time}] (the time axis' size)", InputError)
    return lengths


@_planned(lambda call: _reverse_sequence_rule(call))
def _reverse_sequence_reference(call: Call, xs: list) -> list:
    batch_axis, time_axis = call.plan
    x = np.moveaxis(xs[0], (batch_axis, time_axis), (0, 1))
    out = x.copy()
    for k, n in enumerate(_checked_lengths(call, xs[1], x.shape[1])):
        out[k, :n] = x[k, :n][::-1]
    return [np.moveaxis(out, (0, 1), (batch_axis, time_axis))]


register(OpDef(
    "ReverseSequence",
    tuple(Schema(v, (Input("input"), Input("sequence_lens", INT64)),
                 (Attr("batch_axis", "int", 1), Attr("time_axis", "int", 0)), all_types(1 if v < 28 else 13))
          for v in (10, 28)),
    _reverse_sequence_rule, reference=_reverse_sequence_reference, chunk=chunks.REVERSE_SEQUENCE,
    doc="Reverse the first sequence_lens[i] steps along time_axis of each batch entry i."))


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
