"""Chunk semantics per op: which dims of a traced graph must share one chunking, which must be
whole (one chunk), and which ops cannot run chunk by chunk. Pure planning: no dask import.

Every dim of size > 1 of every computed value is a point in a union-find. An op joins the
dims it maps one-to-one (broadcasting aligns equal dims, Transpose permutes, Unsqueeze/Squeeze
insert or drop size-1 dims, a Reduce keeps its other dims, MatMul ties K of A to K of B). Each
class becomes one blockwise index ("letter"); size-1 dims have none (they broadcast). Dims an op
reads across (the reduced axes, Softmax's axes, MatMul's K, a blocked quantization axis) are
marked whole: every chunk then holds the full extent, so chunk results equal the single-machine
program exactly. A Reshape or Flatten that merges or splits dims is a *boundary*: its input is
materialized and reshaped by dask (which rechunks when the chunk boundaries do not allow it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedError, where
from ..ir import Graph, Node, TensorType
from ..ops import registry
from ..ops.lowering import Elementwise, Row

Dim = tuple  # (value name, axis)


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, item):
        self.parent.setdefault(item, item)
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


@dataclass
class ChunkLayout:
    """The blockwise plan of one traced graph.

    Attributes:
        letters: (value name, axis) -> index letter for every dim of size > 1 of a computed
            value or leaf; size-1 dims are absent (they broadcast).
        extent: letter -> the dim's full size.
        whole: letters that must be a single chunk (read across by some op).
        whole_reason: letter -> the op that requires it whole (for messages).
        boundaries: names of Reshape/Flatten nodes that are not pure axis maps.
        tree_nodes: names of reductions done as dask tree reductions (reductions="tree").
        type_only: (node name, input index) pairs whose input only contributes its element type.
    """

    letters: dict = field(default_factory=dict)
    extent: dict = field(default_factory=dict)
    whole: set = field(default_factory=set)
    whole_reason: dict = field(default_factory=dict)
    boundaries: set = field(default_factory=set)
    type_only: set = field(default_factory=set)
    tree_nodes: set = field(default_factory=set)

    def index(self, value) -> tuple:
        """The value's dims as letters, None for size-1 dims."""
        return tuple(self.letters.get((value.name, axis)) for axis in range(len(value.type.shape)))


def axis_pairs(in_shape: tuple, out_shape: tuple) -> list | None:
    """(in axis, out axis) pairs when ``out_shape`` only inserts or removes size-1 dims of
    ``in_shape``; None when dims merge or split."""
    ins = [k for k, d in enumerate(in_shape) if d != 1]
    outs = [k for k, d in enumerate(out_shape) if d != 1]
    if [in_shape[k] for k in ins] != [out_shape[k] for k in outs]:
        return None
    return list(zip(ins, outs))


def _broadcast_pairs(in_shape: tuple, out_shape: tuple) -> list:
    """Numpy-style right-aligned broadcasting: the input dims equal to their output dim."""
    offset = len(out_shape) - len(in_shape)
    return [(k, k + offset) for k, d in enumerate(in_shape) if d != 1 and d == out_shape[k + offset]]


class _Relator:
    """Applies each node's dim relation to the union-find."""

    def __init__(self, graph: Graph, calls: dict, constants: dict, tree: bool = False):
        self.graph, self.calls, self.constants, self.tree = graph, calls, constants, tree
        self.sets = _UnionFind()
        self.whole: dict = {}
        self.layout = ChunkLayout()
        self.shapes = {v.name: v.type.shape for v in graph.inputs}
        self.shapes.update((v.name, v.type.shape) for node in graph.nodes for v in node.outputs)
        self.shapes.update((name, np.shape(array)) for name, array in constants.items())

    def dim(self, value, axis: int) -> Dim:
        return self.sets.find((value.name, axis))

    def join(self, a, a_axis, b, b_axis) -> None:
        self.sets.union((a.name, a_axis), (b.name, b_axis))

    def mark_whole(self, value, axis: int, node: Node) -> None:
        if value.type.shape[axis] != 1:
            self.sets.find((value.name, axis))
            self.whole.setdefault((value.name, axis), f"{node.op_type} (node {node.name!r})")

    def relate(self, node: Node) -> None:
        opdef = registry.get(node.op_type, node.name)
        call = self.calls[id(node)]
        out = node.outputs[0]
        for value in node.outputs:
            for axis, size in enumerate(value.type.shape):
                if size != 1:
                    self.sets.find((value.name, axis))
        if node.op_type in ("DequantizeLinear", "QuantizeLinear"):
            self._quantize(node, call)
        elif node.op_type == "MatMul":
            self._matmul(node)
        elif node.op_type == "Transpose":
            for out_axis, in_axis in enumerate(call.plan):
                self.join(node.inputs[0], in_axis, out, out_axis)
        elif node.op_type == "Expand":
            self._broadcast(node.inputs[0], out)
        elif opdef.view is not None:
            pairs = axis_pairs(node.inputs[0].type.shape, out.type.shape)
            if pairs is None:
                self.layout.boundaries.add(node.name)
                return
            for in_axis, out_axis in pairs:
                self.join(node.inputs[0], in_axis, out, out_axis)
        elif isinstance(opdef.kernel, Row):
            self._row(node, call)
        elif isinstance(opdef.kernel, Elementwise):
            used = opdef.kernel.used_inputs
            for index, value in enumerate(node.inputs):
                if value is None:
                    continue
                if used is not None and index not in used:
                    self.layout.type_only.add((node.name, index))
                else:
                    self._broadcast(value, out)
        else:
            raise UnsupportedError(f"{where(node.op_type, node.name)}: has no chunk rule; dsl.dask cannot "
                                   f"run it blockwise")

    def _broadcast(self, value, out) -> None:
        for in_axis, out_axis in _broadcast_pairs(value.type.shape, out.type.shape):
            self.join(value, in_axis, out, out_axis)

    def _row(self, node: Node, call) -> None:
        plan, data, out = call.plan, node.inputs[0], node.outputs[0]
        if plan.identity:
            for axis in range(len(data.type.shape)):
                self.join(data, axis, out, axis)
            return
        if self.tree and node.op_type != "Softmax":  # a dask reduction: its output is a new leaf
            self.layout.tree_nodes.add(node.name)
            return
        kept = [k for k in range(len(plan.in_shape)) if k not in plan.axes]
        out_axes = kept if plan.keepdims else range(len(kept))
        for in_axis, out_axis in zip(kept, out_axes):
            if data.type.shape[in_axis] != 1:
                self.join(data, in_axis, out, out_axis)
        for axis in plan.axes:
            self.mark_whole(data, axis, node)
            if node.op_type == "Softmax":
                self.join(data, axis, out, axis)

    def _matmul(self, node: Node) -> None:
        a, b = node.inputs
        out = node.outputs[0]
        a_rank, b_rank, out_rank = len(a.type.shape), len(b.type.shape), len(out.type.shape)
        b_k = 0 if b_rank == 1 else b_rank - 2
        self.join(a, a_rank - 1, b, b_k)
        self.mark_whole(a, a_rank - 1, node)
        self.mark_whole(b, b_k, node)
        if b_rank >= 2:
            self.join(b, b_rank - 1, out, out_rank - 1)
        if a_rank >= 2:
            self.join(a, a_rank - 2, out, out_rank - 1 - (b_rank >= 2))
        batch = out.type.shape[:out_rank - (a_rank >= 2) - (b_rank >= 2)]
        for operand, rank in ((a, a_rank), (b, b_rank)):
            for in_axis, out_axis in _broadcast_pairs(operand.type.shape[:max(rank - 2, 0)], batch):
                self.join(operand, in_axis, out, out_axis)

    def _quantize(self, node: Node, call) -> None:
        (kind, axis, _block), _ = call.plan
        x, out = node.inputs[0], node.outputs[0]
        for k in range(len(x.type.shape)):
            if x.type.shape[k] != 1:
                self.join(x, k, out, k)
        for param in node.inputs[1:]:
            if param is None or kind == "tensor":
                continue
            if kind == "axis":
                if param.type.shape and param.type.shape[0] != 1:
                    self.join(param, 0, x, axis)
                continue
            for k, size in enumerate(param.type.shape):  # blocked: the block axis is read whole
                if k == axis:
                    self.mark_whole(param, k, node)
                elif size != 1:
                    self.join(param, k, x, k)
            self.mark_whole(x, axis, node)

    def finish(self) -> ChunkLayout:
        layout = self.layout
        roots: dict = {}
        for item in list(self.sets.parent):
            root = self.sets.find(item)
            letter = roots.setdefault(root, f"d{len(roots)}")
            layout.letters[item] = letter
            name, axis = item
            layout.extent[letter] = self.shapes[name][axis]
        for item, reason in self.whole.items():
            letter = layout.letters[item]
            layout.whole.add(letter)
            layout.whole_reason.setdefault(letter, reason)
        seen: dict = {}
        for (name, _axis), letter in layout.letters.items():  # x + transpose(x): one letter twice
            if letter in seen.setdefault(name, set()) and letter not in layout.whole:
                layout.whole.add(letter)
                layout.whole_reason[letter] = f"value %{name} (a dim paired with itself)"
            seen[name].add(letter)
        return layout


def is_folded(node: Node, constants: dict) -> bool:
    """True when every output of ``node`` was computed at trace time (a constant)."""
    return all(v.name in constants for v in node.outputs)


def plan_layout(graph: Graph, calls: dict, constants: dict, tree: bool = False) -> ChunkLayout:
    """The ChunkLayout of a traced graph (static shapes); UnsupportedError for an op without
    a chunk rule. ``tree``: reductions become dask tree reductions instead of reading their
    axes whole."""
    relator = _Relator(graph, calls, constants, tree)
    for value in graph.inputs:
        if not isinstance(value.type, TensorType) or not value.type.is_static:
            raise UnsupportedError(f"dsl.dask: input {value.name!r} has type {value.type}; expected a tensor "
                                   f"with a static shape")
        for axis, size in enumerate(value.type.shape):
            if size != 1:
                relator.sets.find((value.name, axis))
    for node in graph.nodes:
        if not is_folded(node, constants):
            relator.relate(node)
    return relator.finish()
