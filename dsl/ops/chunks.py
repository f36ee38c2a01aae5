"""Chunk rules: how an op's output dims relate to its inputs' dims when dsl.dask runs a program
chunk by chunk (dsl/dask/chunking.py applies them). Each OpDef declares one (``OpDef.chunk``);
register() gives the elementwise, view and reduction ops theirs from their lowering.

A rule's ``relate(dims, node, call, opdef)`` states the relation through ``dims`` (the planner):
``dims.join(a, a_axis, b, b_axis)`` (one chunking for both dims), ``dims.broadcast(value, out)``
(numpy broadcasting: equal dims joined), ``dims.mark_whole(value, axis, node)`` (an axis the op
reads across: one chunk), ``dims.boundary(node)`` (dims merge or split: the input is
materialized and reshaped by dask), ``dims.type_only(node, index)`` (an input that gives only its
element type), ``dims.tree_reduction(node)`` (True when reductions run as dask tree reductions:
the node's output is then a new leaf). ``shape_input``: the index of an input holding a target
shape, which each chunk's program gets as that chunk's own sizes; ``local_attrs(attrs, opset)``:
the attributes the op gets when replayed on a chunk. Rules of ops whose shapes can depend on
input values (NonZero, Compress, Range, a target shape computed at run time) raise
UnsupportedError, naming the node, when its shapes are not static.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import UnsupportedError, where

__all__ = ["ChunkRule", "BATCH_ONLY", "CENTER_CROP_PAD", "COMPRESS", "CONCAT", "ELEMENTWISE", "EXPAND", "FILL",
           "GATHER", "GATHER_BLOCK_QUANTIZED", "GATHER_ELEMENTS", "GATHER_ND", "MATMUL", "ONE_HOT", "PAD", "QUANTIZE", "RESHAPE",
           "REVERSE_SEQUENCE", "ROW", "SCATTER_ELEMENTS", "SCATTER_ND", "SLICE", "SPLIT", "TENSOR_SCATTER", "TILE",
           "TRANSPOSE", "VIEW", "WHOLE", "axis_pairs"]


@dataclass(frozen=True)
class ChunkRule:
    name: str
    relate: Callable
    shape_input: int | None = None
    local_attrs: Callable = lambda attrs, opset: dict(attrs)


def axis_pairs(in_shape: tuple, out_shape: tuple) -> list | None:
    """(in axis, out axis) pairs when ``out_shape`` only inserts or removes size-1 dims of
    ``in_shape``; None when dims merge or split."""
    ins = [k for k, d in enumerate(in_shape) if d != 1]
    outs = [k for k, d in enumerate(out_shape) if d != 1]
    if [in_shape[k] for k in ins] != [out_shape[k] for k in outs]:
        return None
    return list(zip(ins, outs))


def _elementwise(dims, node, call, opdef) -> None:
    used = opdef.kernel.used_inputs
    for index, value in enumerate(node.inputs):
        if value is None:
            continue
        if used is not None and index not in used:
            dims.type_only(node, index)
        else:
            dims.broadcast(value, node.outputs[0])


def _view(dims, node, call, opdef) -> None:
    """Shape ops that insert or drop size-1 dims map axes one to one; merging or splitting dims
    is a boundary."""
    out = node.outputs[0]
    pairs = axis_pairs(node.inputs[0].type.shape, out.type.shape)
    if pairs is None:
        dims.boundary(node)
        return
    for in_axis, out_axis in pairs:
        dims.join(node.inputs[0], in_axis, out, out_axis)


def _transpose(dims, node, call, opdef) -> None:
    for out_axis, in_axis in enumerate(call.plan):
        dims.join(node.inputs[0], in_axis, node.outputs[0], out_axis)


def _expand(dims, node, call, opdef) -> None:
    dims.broadcast(node.inputs[0], node.outputs[0])


def reduced_whole(dims, node, call, opdef) -> None:
    """A reduction that dask does not split along its axes (composites, ReduceProd, ArgMax):
    its other dims kept, its axes read whole."""
    _reduce_dims(dims, node, call, full=False)


def _reduce_dims(dims, node, call, full: bool) -> None:
    plan, data, out = call.plan, node.inputs[0], node.outputs[0]
    if plan.identity:
        for axis in range(len(data.type.shape)):
            dims.join(data, axis, out, axis)
        return
    kept = [k for k in range(len(plan.in_shape)) if k not in plan.axes]
    out_axes = kept if plan.keepdims else range(len(kept))
    for in_axis, out_axis in zip(kept, out_axes):
        if data.type.shape[in_axis] != 1:
            dims.join(data, in_axis, out, out_axis)
    for axis in plan.axes:
        dims.mark_whole(data, axis, node)
        if full:
            dims.join(data, axis, out, axis)


def _row(dims, node, call, opdef) -> None:
    """Reductions keep their other dims and read their axes whole (or are dask tree
    reductions); Softmax / LogSoftmax keep every dim and read their axes whole."""
    full = opdef.kernel.kind in ("softmax", "logsoftmax")
    if not full and not call.plan.identity and dims.tree_reduction(node):
        return
    _reduce_dims(dims, node, call, full)


def _matmul(dims, node, call, opdef) -> None:
    """K of A joins K of B, read whole; the row and column dims map to the output's; batch dims
    broadcast."""
    a, b = node.inputs
    out = node.outputs[0]
    a_rank, b_rank, out_rank = len(a.type.shape), len(b.type.shape), len(out.type.shape)
    b_k = 0 if b_rank == 1 else b_rank - 2
    dims.join(a, a_rank - 1, b, b_k)
    dims.mark_whole(a, a_rank - 1, node)
    dims.mark_whole(b, b_k, node)
    if b_rank >= 2:
        dims.join(b, b_rank - 1, out, out_rank - 1)
    if a_rank >= 2:
        dims.join(a, a_rank - 2, out, out_rank - 1 - (b_rank >= 2))
    batch = out.type.shape[:out_rank - (a_rank >= 2) - (b_rank >= 2)]
    for operand, rank in ((a, a_rank), (b, b_rank)):
        for in_axis, out_axis in broadcast_pairs(operand.type.shape[:max(rank - 2, 0)], batch):
            dims.join(operand, in_axis, out, out_axis)


def broadcast_pairs(in_shape: tuple, out_shape: tuple) -> list:
    """Numpy-style right-aligned broadcasting: the input dims equal to their output dim."""
    offset = len(out_shape) - len(in_shape)
    return [(k, k + offset) for k, d in enumerate(in_shape) if d != 1 and d == out_shape[k + offset]]


def _quantize(dims, node, call, opdef) -> None:
    """x maps to the output one to one; per-axis parameters join x's axis; blocked ones join x's
    other dims and read the block axis (of both) whole."""
    kind, axis = call.plan.granularity.kind, call.plan.granularity.axis
    x, out = node.inputs[0], node.outputs[0]
    for k in range(len(x.type.shape)):
        if x.type.shape[k] != 1:
            dims.join(x, k, out, k)
    for param in node.inputs[1:]:
        if param is None or kind == "tensor":
            continue
        if kind == "axis":
            if param.type.shape and param.type.shape[0] != 1:
                dims.join(param, 0, x, axis)
            continue
        for k, size in enumerate(param.type.shape):
            if k == axis:
                dims.mark_whole(param, k, node)
            elif size != 1:
                dims.join(param, k, x, k)
        dims.mark_whole(x, axis, node)


def _slice(dims, node, call, opdef) -> None:
    """Axes a Slice leaves whole map one to one; a sliced axis is read whole (and its output
    axis, of another size, is one chunk)."""
    data, out = node.inputs[0], node.outputs[0]
    for axis, (start, step, count) in enumerate(call.plan.axes):
        if (start, step, count) == (0, 1, data.type.shape[axis]):
            dims.join(data, axis, out, axis)
        else:
            dims.mark_whole(data, axis, node)
            dims.mark_whole(out, axis, node)


def _concat(dims, node, call, opdef) -> None:
    """The other dims of every input map to the output's; the concatenated axis is one chunk."""
    out, axis = node.outputs[0], call.plan
    for value in node.inputs:
        if value is None:
            continue
        for k in range(len(out.type.shape)):
            if k != axis and value.type.shape[k] != 1:
                dims.join(value, k, out, k)
        dims.mark_whole(value, axis, node)
    dims.mark_whole(out, axis, node)


def _gather(dims, node, call, opdef) -> None:
    """data's other dims map to the output's around the indices' dims, which map to theirs; the
    gathered axis of data is read whole."""
    data, indices, out = node.inputs[0], node.inputs[1], node.outputs[0]
    axis, q = call.plan, len(indices.type.shape)
    for k in range(len(data.type.shape)):
        if k == axis:
            dims.mark_whole(data, k, node)
        elif data.type.shape[k] != 1:
            dims.join(data, k, out, k if k < axis else k + q - 1)
    for k in range(q):
        if indices.type.shape[k] != 1:
            dims.join(indices, k, out, axis + k)


# ---- rearranging, padding, indexing and generating ops (arrange.py, padding.py, indexing.py, scan.py, ...) ----
def _static(relate):
    """``relate`` behind a check that the node's shapes are static: NonZero's count, Compress's
    selection, a Range of run-time scalars or a run-time target shape are known only from input
    values, and dsl.dask plans every chunk before anything runs."""
    def checked(dims, node, call, opdef) -> None:
        for role, values in (("input", node.inputs), ("output", node.outputs)):
            for value in values:
                if value is not None and not value.type.is_static:
                    raise UnsupportedError(
                        f"{where(node.op_type, node.name)}: {role} %{value.name} has type {value.type}, a shape "
                        f"that depends on input values known only at run time; dsl.dask plans every chunk from "
                        f"static shapes, so it cannot run this node blockwise (make the inputs that decide the "
                        f"shape constants)")
        relate(dims, node, call, opdef)
    return checked


def _tie(dims, node, pairs, whole: bool = False) -> None:
    """Dims ``(value, axis)`` that map one to one (position p of one is position p of the others):
    joined when they have one size; marked whole when ``whole`` (the op reads or writes across
    them) or when their sizes differ (a chunk of one does not line up with a chunk of another).
    Absent (None) values are skipped."""
    pairs = [(value, axis) for value, axis in pairs if value is not None]
    sizes = {value.type.shape[axis] for value, axis in pairs}
    if len(sizes) == 1:
        first, first_axis = pairs[0]
        for value, axis in pairs[1:]:
            if value.type.shape[axis] != 1:
                dims.join(first, first_axis, value, axis)
    if whole or len(sizes) > 1:
        for value, axis in pairs:
            dims.mark_whole(value, axis, node)


def _gather_block_quantized(dims, node, call, opdef) -> None:
    """The indices' dims map to the output's at the gather axis; the table, its scales and zero
    points are read whole (a chunk of indices may select any slice of them)."""
    indices, out = node.inputs[1], node.outputs[0]
    for value in (node.inputs[0], *node.inputs[2:]):
        for axis in range(len(value.type.shape) if value is not None else 0):
            dims.mark_whole(value, axis, node)
    for k in range(len(indices.type.shape)):
        if indices.type.shape[k] != 1:
            dims.join(indices, k, out, call.plan.gather + k)
    for axis in range(len(out.type.shape)):
        if not call.plan.gather <= axis < call.plan.gather + len(indices.type.shape):
            dims.mark_whole(out, axis, node)


def _whole(dims, node, call, opdef) -> None:
    """Every dim of every input and output read whole (one chunk): EyeLike's diagonal, Range's
    elements and NonZero's positions depend on where a chunk starts."""
    for value in (*node.inputs, *node.outputs):
        for axis in range(len(value.type.shape) if value is not None else 0):
            dims.mark_whole(value, axis, node)


def _split(dims, node, call, opdef) -> None:
    """The other dims map the input to every output; the split axis is whole."""
    data = node.inputs[0]
    if not (len(node.inputs) > 1 and node.inputs[1] is not None or {"split", "num_outputs"} & set(node.attrs)):
        raise UnsupportedError(
            f"{where(node.op_type, node.name)}: splits axis {call.plan.axis} into equal parts by its output count "
            f"({len(node.outputs)}), which the chunk tasks do not see (they replay the op, not the node); give the "
            f"lengths (input 'split', the attribute before opset 13) or num_outputs (opset >= 18)")
    for axis in range(len(data.type.shape)):
        _tie(dims, node, [(data, axis)] + [(out, axis) for out in node.outputs], whole=axis == call.plan.axis)


def _same_rank(changed):
    """Input 0 and the output dim by dim (Tile, Pad, CenterCropPad): an axis the op leaves
    unchanged (``changed(call, node, axis)`` False) maps one to one, a changed one is whole on both."""
    def relate(dims, node, call, opdef) -> None:
        data, out = node.inputs[0], node.outputs[0]
        for axis in range(len(data.type.shape)):
            _tie(dims, node, [(data, axis), (out, axis)], whole=changed(call, node, axis))
    return relate


def _all_axes(attrs: dict, opset: int) -> dict:
    """CenterCropPad replayed on a chunk gets a target for every axis (the chunk's own sizes on
    the axes it keeps, via shape_input), so its ``axes`` attribute goes."""
    return {name: value for name, value in attrs.items() if name != "axes"}


def _batch_only(dims, node, call, opdef) -> None:
    """DepthToSpace / SpaceToDepth: N maps one to one; C, H and W interleave across blocks."""
    data, out = node.inputs[0], node.outputs[0]
    for axis in range(len(data.type.shape)):
        _tie(dims, node, [(data, axis), (out, axis)], whole=axis != 0)


def _rows_of_first(dims, node, call, opdef) -> None:
    """Input 0's leading dims map to the output's (MatMulNBits' rows of A); its last dim, the
    output's last and every other input are read whole."""
    data, out = node.inputs[0], node.outputs[0]
    rank = len(data.type.shape)
    for axis in range(rank):
        _tie(dims, node, [(data, axis), (out, axis)], whole=axis == rank - 1)
    for value in node.inputs[1:]:
        for axis in range(len(value.type.shape) if value is not None else 0):
            dims.mark_whole(value, axis, node)


def _reverse_sequence(dims, node, call, opdef) -> None:
    """The batch axis maps data, sequence_lens and the output; the time axis is read whole."""
    (data, lens), out = node.inputs, node.outputs[0]
    batch_axis, time_axis = call.plan
    for axis in range(len(data.type.shape)):
        extra = [(lens, 0)] if axis == batch_axis else []
        _tie(dims, node, [(data, axis), (out, axis)] + extra, whole=axis == time_axis)


def _gather_elements(dims, node, call, opdef) -> None:
    """out[p] = data[p with p[axis] = indices[p]]: data's axis is read whole (indices and output
    keep theirs: a chunk of positions needs no offset); other dims map all three at p."""
    (data, indices), out = node.inputs, node.outputs[0]
    for axis in range(len(data.type.shape)):
        if axis == call.plan:
            _tie(dims, node, [(data, axis)], whole=True)
            _tie(dims, node, [(indices, axis), (out, axis)])
        else:
            _tie(dims, node, [(data, axis), (indices, axis), (out, axis)])


def _scatter_elements(dims, node, call, opdef) -> None:
    """Any update may land anywhere along axis: that axis is whole on every operand; other dims
    map data, indices, updates and output at p."""
    (data, indices, updates), out = node.inputs, node.outputs[0]
    for axis in range(len(data.type.shape)):
        if axis == call.plan.axis:
            _tie(dims, node, [(data, axis), (out, axis)], whole=True)
            _tie(dims, node, [(indices, axis), (updates, axis)], whole=True)
        else:
            _tie(dims, node, [(data, axis), (indices, axis), (updates, axis), (out, axis)])


def _gather_nd(dims, node, call, opdef) -> None:
    """Batch dims map data, indices and output; indices' other dims (but the tuples) map the
    output's, and data's dims after the indexed ones the output's last; the indexed dims of data
    and the tuple dim of indices are read whole."""
    (data, indices), out = node.inputs, node.outputs[0]
    batch, rank, q = call.plan, len(data.type.shape), len(indices.type.shape)
    depth = indices.type.shape[-1]
    for axis in range(batch):
        _tie(dims, node, [(data, axis), (indices, axis), (out, axis)])
    for axis in range(batch, q - 1):
        _tie(dims, node, [(indices, axis), (out, axis)])
    _tie(dims, node, [(indices, q - 1)], whole=True)
    for axis in range(batch, batch + depth):
        _tie(dims, node, [(data, axis)], whole=True)
    for axis in range(batch + depth, rank):
        _tie(dims, node, [(data, axis), (out, q - 1 + axis - batch - depth)])


def _scatter_nd(dims, node, call, opdef) -> None:
    """The indexed dims of data (and output) are whole, and so are indices and updates' leading
    dims (any update may land anywhere); data's dims after the indexed ones map the output's and
    updates' last dims."""
    (data, indices, updates), out = node.inputs, node.outputs[0]
    depth, q = call.plan.axis, len(indices.type.shape)
    for axis in range(len(data.type.shape)):
        if axis < depth:
            _tie(dims, node, [(data, axis), (out, axis)], whole=True)
        else:
            _tie(dims, node, [(data, axis), (out, axis), (updates, q - 1 + axis - depth)])
    for axis in range(q):
        _tie(dims, node, [(indices, axis)], whole=True)
    for axis in range(q - 1):
        _tie(dims, node, [(updates, axis)], whole=True)


def _one_hot(dims, node, call, opdef) -> None:
    """Indices' dims map the output's around the new axis, which is whole (a chunk of classes
    would need its offset); values [off, on] are read whole."""
    indices, values, out = node.inputs[0], node.inputs[2], node.outputs[0]
    axis = call.plan.axis
    for k in range(len(indices.type.shape)):
        _tie(dims, node, [(indices, k), (out, k if k < axis else k + 1)])
    _tie(dims, node, [(out, axis)], whole=True)
    _tie(dims, node, [(values, 0)], whole=True)


def _compress(dims, node, call, opdef) -> None:
    """With an axis: the other dims map one to one, the axis (and the condition) are whole;
    without: the input is flattened, every dim whole."""
    (data, condition), out = node.inputs, node.outputs[0]
    (axis,) = call.plan
    if axis is None:
        _whole(dims, node, call, opdef)
        return
    for k in range(len(data.type.shape)):
        _tie(dims, node, [(data, k), (out, k)], whole=k == axis)
    _tie(dims, node, [(condition, 0)], whole=True)


def _tensor_scatter(dims, node, call, opdef) -> None:
    """The batch axis maps past_cache, update, write_indices and output; the sequence axis is
    whole (the write position is the batch's index); other dims map one to one."""
    cache, update = node.inputs[0], node.inputs[1]
    indices = node.inputs[2] if len(node.inputs) > 2 else None
    out = node.outputs[0]
    for axis in range(len(cache.type.shape)):
        if axis == call.plan.axis:
            _tie(dims, node, [(cache, axis), (out, axis)], whole=True)
            _tie(dims, node, [(update, axis)], whole=True)
        else:
            _tie(dims, node, [(cache, axis), (update, axis), (out, axis)] + ([(indices, 0)] if axis == 0 else []))


def _fill(dims, node, call, opdef) -> None:
    """ConstantOfShape: every element is the value, so any chunk of the output is the fill at the
    chunk's own shape (shape_input): its dims are free, chunked like whatever they meet."""


def _reshape_attrs(attrs: dict, opset: int) -> dict:
    """A Reshape replayed at chunk shapes gets explicit sizes; allowzero keeps a 0-size chunk dim
    from meaning 'copy the input dim'."""
    return {**attrs, "allowzero": 1} if opset >= 14 else dict(attrs)


ELEMENTWISE = ChunkRule("elementwise", _elementwise)
VIEW = ChunkRule("view", _view)
RESHAPE = ChunkRule("reshape", _view, shape_input=1, local_attrs=_reshape_attrs)
TRANSPOSE = ChunkRule("transpose", _transpose)
EXPAND = ChunkRule("expand", _expand, shape_input=1)
ROW = ChunkRule("row", _row)
MATMUL = ChunkRule("matmul", _matmul)
QUANTIZE = ChunkRule("quantize", _quantize)
SLICE = ChunkRule("slice", _slice)
CONCAT = ChunkRule("concat", _concat)
GATHER = ChunkRule("gather", _gather)
GATHER_BLOCK_QUANTIZED = ChunkRule("gather_block_quantized", _static(_gather_block_quantized))

SPLIT = ChunkRule("split", _static(_split))
TILE = ChunkRule("tile", _static(_same_rank(lambda call, node, axis: call.plan[axis] != 1)))
PAD = ChunkRule("pad", _static(_same_rank(lambda call, node, axis: call.plan.axes[axis] != (0, 0, 0, 0))))
CENTER_CROP_PAD = ChunkRule("center_crop_pad", _static(_same_rank(
    lambda call, node, axis: node.inputs[0].type.shape[axis] != node.outputs[0].type.shape[axis])),
    shape_input=1, local_attrs=_all_axes)
BATCH_ONLY = ChunkRule("batch_only", _static(_batch_only))
ROWS_OF_FIRST = ChunkRule("rows_of_first", _static(_rows_of_first))
REVERSE_SEQUENCE = ChunkRule("reverse_sequence", _static(_reverse_sequence))
GATHER_ELEMENTS = ChunkRule("gather_elements", _static(_gather_elements))
SCATTER_ELEMENTS = ChunkRule("scatter_elements", _static(_scatter_elements))
GATHER_ND = ChunkRule("gather_nd", _static(_gather_nd))
SCATTER_ND = ChunkRule("scatter_nd", _static(_scatter_nd))
ONE_HOT = ChunkRule("one_hot", _static(_one_hot))
COMPRESS = ChunkRule("compress", _static(_compress))
TENSOR_SCATTER = ChunkRule("tensor_scatter", _static(_tensor_scatter))
WHOLE = ChunkRule("whole", _static(_whole))
FILL = ChunkRule("fill", _static(_fill), shape_input=0)
