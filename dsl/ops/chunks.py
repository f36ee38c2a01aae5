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
the attributes the op gets when replayed on a chunk.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["ChunkRule", "CONCAT", "ELEMENTWISE", "EXPAND", "GATHER", "MATMUL", "QUANTIZE", "RESHAPE", "ROW", "SLICE",
           "TRANSPOSE", "VIEW",
           "axis_pairs"]


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
