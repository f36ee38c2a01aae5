"""Rearranging ops: Split, Tile, DepthToSpace, SpaceToDepth, ReverseSequence (Pad and CenterCropPad:
dsl/ops/padding.py).

In the JIT, Split and Tile fuse by their bodies: Split's outputs are Slices of its input (views a
consumer reads through), Tile is a Gather per repeated axis of a constant index; for the types
kernels do not compute (strings, complex) they run their references, as the eager engine does
(Split: numpy views; Tile: index arithmetic). Kernels that only move elements copy their bits,
so NaN payloads survive (dsl/kir/moves.py). DepthToSpace / SpaceToDepth are composites (Reshape, Transpose, Reshape as the spec
spells them): views and fused copies. ReverseSequence runs its numpy reference. Under dsl.dask
(dsl/ops/chunks.py) the axes each op leaves unchanged stay chunked; the axes it cuts, repeats or
reverses (and DepthToSpace / SpaceToDepth's C, H, W) are read whole.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import FLOATS_V1, all_types
from ..errors import InputError
from ..ir import TensorType, type_of_array
from ..kir import types as kir_types
from . import chunks
from .expansion import expanded_reference
from .registry import INT64, Attr, Call, Input, OpDef, Schema, register
from .shape import check_numel, normalize_axes


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


def _fusable_input(call: Call) -> bool:
    """Whether input 0 is of a type kernels compute, its dims known before the run (not a
    NonZero count): else a body keeps its op, whose reference runs."""
    data = call.types[0]
    return kir_types.supported(data.dtype) and all(isinstance(d, int) for d in data.shape)


def _split_body(call: Call, b, xs: list) -> list:
    """Each output a Slice of the input (a view: a consumer fuses reading the input through it),
    or the Split itself (numpy views) for an input kernels do not read (_fusable_input)."""
    plan, sizes = call.plan, np.array(call.plan.sizes, np.int64)
    if not _fusable_input(call):
        kept = b.op("Split", xs[0], b.const(sizes), axis=plan.axis, outputs=len(sizes))
        return kept if len(sizes) > 1 else [kept]
    axes, ends = b.const(np.array([plan.axis], np.int64)), np.cumsum(sizes)
    return [b.op("Slice", xs[0], b.const(np.array([end - size])), b.const(np.array([end])), axes)
            for size, end in zip(sizes, ends)]


def _split_schemas() -> tuple[Schema, ...]:
    v1 = Schema(1, (Input("input"), Input("split", optional=True, needs_value=True)),
                (Attr("split", "ints", None), Attr("axis", "int", 0)), FLOATS_V1)
    attr_form = [Schema(v, (Input("input"),), (Attr("split", "ints", None), Attr("axis", "int", 0)), all_types(1))
                 for v in (2, 11)]
    inputs = (Input("input"), Input("split", INT64, optional=True, needs_value=True))
    return (v1, *attr_form, Schema(13, inputs, (Attr("axis", "int", 0),), all_types(13)),
            Schema(18, inputs, (Attr("num_outputs", "int", None), Attr("axis", "int", 0)), all_types(13)))


register(OpDef(
    "Split", _split_schemas(), _split_rule, reference=_split_reference, expand=_split_body, chunk=chunks.SPLIT,
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


def _tile_body(call: Call, b, xs: list) -> list:
    """One Gather per repeated axis of the constant index arange(r * a) % a (a: the axis' size),
    or the Tile itself (its reference) for an input kernels do not read (_fusable_input). (A
    kernel that only moves float16 / bfloat16 / 8-bit float elements copies their bits: NaN
    payloads survive, as Tile wants.)"""
    shape = call.types[0].shape
    if all(repeat == 1 for repeat in call.plan):
        return [xs[0]]
    if not _fusable_input(call):
        return [b.op("Tile", xs[0], b.const(np.array(call.plan, np.int64)))]
    # Innermost axis first: inner gathers (a loaded index per element) run on the smaller
    # intermediates, the last, outermost one (whole rows) fuses with the consumer. Measured on
    # float32 [2048, 1024] + 1, medians: tile [8, 2] 19.8 ms inner-first, 38.5 outer-first, 57.0
    # as Expand + Reshape (no view: a floordiv / mod per element), 135 np.tile + 1.
    out = xs[0]
    for axis in reversed(range(len(shape))):
        size, repeat = shape[axis], call.plan[axis]
        if repeat != 1:
            out = b.op("Gather", out, b.const(np.arange(repeat * size, dtype=np.int64) % max(size, 1)), axis=axis)
    return [out]


register(OpDef(
    "Tile",
    (Schema(1, (Input("input"), Input("tiles", needs_value=True), Input("axis", needs_value=True)), (), FLOATS_V1),
     *(Schema(v, (Input("input"), Input("repeats", INT64, needs_value=True)), (), all_types(v)) for v in (6, 13))),
    _tile_rule, reference=_tile_reference, expand=_tile_body, chunk=chunks.TILE,
    doc="Repeat the whole tensor `repeats[i]` times along each axis i (numpy's tile, no broadcast)."))


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
