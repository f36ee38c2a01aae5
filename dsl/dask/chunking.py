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
from ..ops.chunks import axis_pairs, broadcast_pairs

__all__ = ["ChunkLayout", "axis_pairs", "is_folded", "plan_layout"]

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
        """Apply the node's chunk rule (its OpDef's, dsl/ops/chunks.py)."""
        opdef = registry.get(node.op_type, node.name, node.domain)
        for value in node.outputs:
            for axis, size in enumerate(value.type.shape):
                if size != 1:
                    self.sets.find((value.name, axis))
        if opdef.chunk is None:
            raise UnsupportedError(f"{where(node.op_type, node.name)}: has no chunk rule; dsl.dask cannot "
                                   f"run it blockwise")
        opdef.chunk.relate(self, node, self.calls[id(node)], opdef)

    # ---- the planner's side of a chunk rule (dsl/ops/chunks.py) ----
    def broadcast(self, value, out) -> None:
        for in_axis, out_axis in broadcast_pairs(value.type.shape, out.type.shape):
            self.join(value, in_axis, out, out_axis)

    def boundary(self, node: Node) -> None:
        self.layout.boundaries.add(node.name)

    def type_only(self, node: Node, index: int) -> None:
        self.layout.type_only.add((node.name, index))

    def tree_reduction(self, node: Node) -> bool:
        """With reductions="tree": the reduction becomes a dask tree reduction (a new leaf)."""
        if self.tree:
            self.layout.tree_nodes.add(node.name)
        return self.tree

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
