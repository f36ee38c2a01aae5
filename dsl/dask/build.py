"""Builds dask arrays for a traced graph: one ``da.blockwise`` per group of outputs (every chunk
runs the same fused kernels through a BlockProgram), ``da.reshape`` at boundaries."""
from __future__ import annotations

import itertools
import warnings
from operator import getitem

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ..errors import where
from ..ir import Graph, Value
from ..ops import registry
from .blocks import BlockProgram, LeafSpec
from .chunking import ChunkLayout, is_folded
from .packed import PackedArray
from .reductions import tree_reduce


class RechunkWarning(UserWarning):
    """An op needs chunks other than the input's: dsl (or dask) rechunks, which moves data
    and can make chunks larger."""


class GraphBuilder:
    """Materializes graph values as dask arrays, memoized."""

    def __init__(self, name: str, graph: Graph, calls: dict, constants: dict, layout: ChunkLayout, args: list):
        self.name, self.graph, self.calls, self.constants, self.layout = name, graph, calls, constants, layout
        self.arrays = {value.name: arg for value, arg in zip(graph.inputs, args)}
        self.values = {v.name: v for v in graph.inputs}
        self.producer = {}
        for node in graph.nodes:
            for value in node.outputs:
                self.producer[value.name] = node
                self.values[value.name] = value
        self._fresh = itertools.count()
        self._single: dict = {}

    def outputs(self) -> list:
        """Dask arrays for the graph outputs; outputs with one index pattern share one blockwise."""
        groups: dict = {}
        for value in self.graph.outputs:
            groups.setdefault(self._pattern(value), []).append(value)
        results = {}
        for values in groups.values():
            results.update(zip((v.name for v in values), self.materialize(values)))
        return [results[v.name] for v in self.graph.outputs]

    def _pattern(self, value: Value) -> tuple:
        return self.layout.index(value) if value.name not in self.constants else ("constant", value.name)

    def value(self, name: str):
        """The dask array of one value (materialized alone; a packed input comes out unpacked)."""
        found = self.arrays.get(name)
        if found is not None and not isinstance(found, PackedArray):
            return found
        if name not in self._single:
            self._single[name] = self.materialize([self.values[name]])[0]
        return self._single[name]

    # -- slices -------------------------------------------------------------------------------
    def _slice(self, values: list) -> tuple[list, list]:
        """The nodes computing ``values`` from leaves, in graph order, and the leaf names."""
        needed, leaves, stack = set(), [], [v.name for v in values]
        while stack:
            name = stack.pop()
            if name in needed or name in leaves:
                continue
            node = self.producer.get(name)
            if name in self.arrays or name in self.constants or node is None:
                leaves.append(name)
                continue
            if node.name in self.layout.boundaries or node.name in self.layout.tree_nodes:
                self.arrays[name] = (self._reshape(node) if node.name in self.layout.boundaries
                                     else self._tree_reduce(node))
                leaves.append(name)
                continue
            needed.add(name)
            stack.extend(v.name for index, v in enumerate(node.inputs)
                         if v is not None and (node.name, index) not in self.layout.type_only)
        nodes = [n for n in self.graph.nodes if any(v.name in needed for v in n.outputs)
                 and not is_folded(n, self.constants)]
        return nodes, leaves

    def _reshape(self, node):
        """A boundary Reshape/Flatten: dask reshapes the materialized input, rechunking (with a
        RechunkWarning) when chunk boundaries do not allow a blockwise reshape."""
        source = self.value(node.inputs[0].name)
        target = node.outputs[0].type.shape
        from dask.array.reshape import reshape_rechunk
        try:
            needed = tuple(reshape_rechunk(source.shape, target, source.chunks)[0])
        except NotImplementedError:  # dims regroup across each other, e.g. [3, 2, 1] -> [2, 3]
            needed = tuple((size,) for size in source.shape)
        if needed != tuple(source.chunks):
            warnings.warn(f"{where(node.op_type, node.name)}: input chunks {source.chunks} do not allow a "
                          f"blockwise reshape {list(source.shape)} -> {list(target)}; rechunking to "
                          f"{needed}", RechunkWarning, stacklevel=4)
            source = source.rechunk(needed)
        return da.reshape(source, target)

    def _tree_reduce(self, node):
        """A reduction as a dask tree reduction of the materialized input (reductions="tree")."""
        kind = registry.get(node.op_type, node.name, node.domain).kernel.kind
        return tree_reduce(self.value(node.inputs[0].name), kind, self.calls[id(node)].plan,
                           node.outputs[0].type.dtype)

    # -- one blockwise ------------------------------------------------------------------------
    def materialize(self, values: list) -> list:
        """Dask arrays for ``values`` (same index pattern), computed by one blockwise."""
        if all(v.name in self.constants for v in values):
            return [da.from_array(np.asarray(self.constants[v.name])) for v in values]
        nodes, leaf_names = self._slice(values)
        data_leaves, constants = [], {}
        for name in leaf_names:
            if name in self.constants and not any(self.layout.index(self._value_of(name))):
                constants[name] = self.constants[name]
            else:
                data_leaves.append(name)
        for node in nodes:  # value inputs (axes, shapes) and type-only inputs stay constants
            for value in node.inputs:
                if value is not None and value.name in self.constants and value.name not in data_leaves:
                    constants[value.name] = self.constants[value.name]
        chunks = self._letter_chunks(data_leaves)
        specs, args = [], []
        for name in data_leaves:
            spec, array = self._leaf(name, chunks)
            specs.append(spec)
            args += [array, tuple(self._aligned(letter) or self._fresh_letter() for letter in spec.letters)]
        local = {n.outputs[0].name: self.layout.index(n.outputs[0]) for n in nodes
                 if getattr(registry.get(n.op_type, n.name, n.domain).chunk, "shape_input", None) is not None}
        program = BlockProgram(self.name, self.graph.opset, nodes, specs, constants,
                               [(v.name, self.layout.index(v)) for v in values], self.layout.extent,
                               self.layout.type_only, local)
        return self._blockwise(program, args, specs, values, chunks)

    def _blockwise(self, program: BlockProgram, args: list, specs: list, values: list, chunks: dict) -> list:
        """One da.blockwise running ``program`` per output chunk; one dask array per value."""
        out_letters = self.layout.index(values[0])
        out_index = tuple(self._aligned(letter) or self._fresh_letter() for letter in out_letters)
        carried = {self._aligned(letter) for spec in specs for letter in spec.letters} - {None}
        new_axes = {index: 1 if letter is None else self.layout.extent[letter]
                    for index, letter in zip(out_index, out_letters) if index not in carried}
        adjust = {index: chunks[index] for index in out_index if index in carried}
        metas = tuple(np.empty((0,) * len(v.type.shape), v.type.dtype.np_dtype) for v in values)
        token = tokenize(self.name, id(self), next(self._fresh))
        # concatenate=False: contracted indices are single-chunk, so a task's block arrives in a
        # one-element list and BlockProgram unwraps it (dask would copy it to concatenate)
        tmp = da.blockwise(program, out_index, *args, name=f"dsl-{self.name}-{token}", concatenate=False,
                           align_arrays=False, new_axes=new_axes, adjust_chunks=adjust,
                           meta=metas[0] if len(values) == 1 else metas)
        if len(values) == 1:
            return [tmp]
        return [_item(tmp, index, meta) for index, meta in enumerate(metas)]

    def _value_of(self, name: str) -> Value:
        """The graph value of ``name``, or a typed stand-in for a constant."""
        found = self.values.get(name)
        return found if found is not None else Value(name, _const_type(self.constants[name]))

    def _fresh_letter(self) -> str:
        return f"s{next(self._fresh)}"

    def _aligned(self, letter):
        """The blockwise index of a letter, None when it needs no alignment: size-1 dims and
        whole letters (one chunk) get a fresh index per array (contracted for inputs, a new
        axis for outputs), so a whole letter may even repeat within one value."""
        return None if letter is None or letter in self.layout.whole else letter

    def _letter_chunks(self, leaves: list) -> dict:
        """Chunk sizes per letter: taken from the leaves (packed leaves first: their byte chunks
        are the hardest to move); whole letters get one chunk."""
        chunks = {}
        for name in sorted(leaves, key=lambda n: not isinstance(self.arrays.get(n), PackedArray)):
            letters = self.layout.index(self._value_of(name))
            for letter, dim_chunks in zip(letters, self._element_chunks(name)):
                if letter is None:
                    continue
                if letter in self.layout.whole:
                    chunks[letter] = (self.layout.extent[letter],)
                else:
                    chunks.setdefault(letter, tuple(dim_chunks))
        return chunks

    def _element_chunks(self, name: str) -> tuple:
        found = self.arrays.get(name)
        if found is None:
            return tuple((size,) for size in np.shape(self.constants[name]))
        return found.chunks

    def _leaf(self, name: str, chunks: dict):
        letters = self.layout.index(self._value_of(name))
        source = self.arrays.get(name)
        if source is None:
            source = da.from_array(np.asarray(self.constants[name]), chunks=-1)
        packed = source.dtype if isinstance(source, PackedArray) else None
        target = tuple(chunks[letter] if letter else (1,) for letter in letters)
        if target != tuple(source.chunks):
            self._warn_whole(name, letters, source.chunks)
            source = source.rechunk(target)
        array = source.data if isinstance(source, PackedArray) else source
        return LeafSpec(name, letters, packed), array

    def _warn_whole(self, name, letters, before) -> None:
        for axis, letter in enumerate(letters):
            if letter in self.layout.whole and len(before[axis]) > 1:
                warnings.warn(f"{self.layout.whole_reason[letter]} reads axis {axis} of %{name} whole: "
                              f"rechunking it from {len(before[axis])} chunks to one of "
                              f"{self.layout.extent[letter]}", RechunkWarning, stacklevel=5)


def _const_type(array):
    from ..ir import type_of_array
    return type_of_array(np.asarray(array))


def _item(tmp, index: int, meta):
    """Output ``index`` of a blockwise whose chunks are tuples (the apply_gufunc pattern)."""
    name = f"{tmp.name}-out{index}"
    layer = {(name,) + key[1:]: (getitem, key, index) for key in _keys(tmp)}
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[tmp])
    return da.Array(graph, name, chunks=tmp.chunks, meta=meta)


def _keys(array) -> list:
    return [(array.name,) + idx for idx in itertools.product(*(range(len(c)) for c in array.chunks))]

