"""BlockProgram: the picklable function every dask chunk task calls. It replays a slice of a
traced graph at the chunk's shapes and runs it on the JIT (one compile per chunk signature per
process, then the in-memory and disk kernel caches)."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass

import numpy as np

from .. import trace as tracing
from ..compiler import Executable
from ..dtypes import DType
from ..ir import Node
from ..ops import registry
from ..thread_policy import single_threaded
from ..tensor import Tensor


# (program token, chunk signature) -> Executable, per process: dask ships a program with every
# task, so the cache lives here, and a worker replays and plans each chunk signature once.
_EXECUTABLES: dict = {}
_LOCK = threading.Lock()
_MAX_EXECUTABLES = 1024  # bounded: long sessions apply many programs


def replay_count(token: str | None = None) -> int:
    """How many chunk signatures this process has planned (for one program token, or all)."""
    return sum(1 for key in list(_EXECUTABLES) if token is None or key[0] == token)


def _single_block(block):
    """A chunk as blockwise passes it without concatenation: nested one-element lists for each
    contracted index (all of them single-chunk by the plan), unwrapped without a copy."""
    while isinstance(block, list):
        assert len(block) == 1, "a contracted index has more than one chunk"
        block = block[0]
    return block


@dataclass(frozen=True)
class LeafSpec:
    """One chunked input of a BlockProgram.

    Attributes:
        name: the graph value it stands for.
        letters: its dims as blockwise letters (None: a size-1 dim).
        packed: the packed element type when the chunk arrives as raw bytes (last axis in bytes).
    """

    name: str
    letters: tuple
    packed: DType | None = None


class BlockProgram:
    """Computes some graph values for one chunk from the chunks of its leaves.

    Args:
        name: a readable name (the traced function's).
        opset: the graph's opset.
        nodes: the slice of graph nodes to replay, in graph order.
        leaves: LeafSpec per positional chunk argument.
        constants: value name -> array for constant inputs of ``nodes``.
        outputs: (value name, letters) per result.
        extent: letter -> full size (letters no leaf carries keep their full size).
        type_only: (node name, input index) pairs replaced by an empty array of their type.
        local_letters: value name -> letters of each Expand/Reshape output, whose target shape
            is rewritten to the chunk's sizes.
    """

    def __init__(self, name, opset, nodes, leaves, constants, outputs, extent, type_only, local_letters):
        self.name, self.opset, self.nodes = name, opset, list(nodes)
        self.leaves, self.constants = list(leaves), dict(constants)
        self.outputs, self.extent, self.type_only = list(outputs), dict(extent), set(type_only)
        self.local_letters = dict(local_letters)
        self.token = uuid.uuid4().hex  # names this program in every process it is unpickled in

    def __call__(self, *blocks):
        args = [self._as_input(spec, _single_block(block)) for spec, block in zip(self.leaves, blocks)]
        key = (self.token, tuple((a.dtype, a.shape) for a in args))
        executable = _EXECUTABLES.get(key)
        if executable is None:
            with _LOCK:
                executable = _EXECUTABLES.get(key)
                if executable is None:
                    while len(_EXECUTABLES) >= _MAX_EXECUTABLES:  # oldest first (insertion order)
                        del _EXECUTABLES[next(iter(_EXECUTABLES))]
                    executable = _EXECUTABLES[key] = self._replay(args)
        with single_threaded():  # dask owns the threads: one kernel thread per task
            results = executable.run(dict(zip(executable.input_names, args)))
        return results[0] if len(results) == 1 else tuple(results)

    @staticmethod
    def _as_input(spec: LeafSpec, block):
        if spec.packed is None:
            return np.asarray(block)
        raw = np.ascontiguousarray(block, dtype=np.uint8)
        shape = raw.shape[:-1] + (raw.shape[-1] * spec.packed.per_byte,) if raw.ndim else ()
        return Tensor.from_packed(raw.reshape(-1), spec.packed, shape)

    def _replay(self, args):
        builder = tracing.Builder(self.name, self.opset)
        sizes = dict(self.extent)
        env = {}
        for spec, arg in zip(self.leaves, args):
            sizes.update((letter, size) for letter, size in zip(spec.letters, arg.shape) if letter is not None)
            env[spec.name] = builder.input(spec.name, tracing.input_type(arg, 0))
        for node in self.nodes:
            inputs = [self._input(builder, env, node, index, value, sizes)
                      for index, value in enumerate(node.inputs)]
            outs = builder.add(node.op_type, inputs, _local_attrs(node, self.opset), node.domain)
            env.update((v.name, o) for v, o in zip(node.outputs, outs))
        outputs = [env[name] if name in env else builder.constant(self.constants[name]) for name, _ in self.outputs]
        builder.graph.outputs = tracing.distinct_outputs(builder, outputs)
        return Executable(builder.graph, builder.calls, builder.constants)

    def _input(self, builder, env, node: Node, index: int, value, sizes: dict):
        if value is None:
            return None
        if (node.name, index) in self.type_only:
            return builder.constant(np.empty((0,), value.type.dtype.np_dtype))
        if index == getattr(registry.get(node.op_type, node.name, node.domain).chunk, "shape_input", None):
            letters = self.local_letters[node.outputs[0].name]
            return builder.constant(np.array([1 if letter is None else sizes[letter] for letter in letters],
                                             np.int64))
        if value.name in env:
            return env[value.name]
        env[value.name] = builder.constant(self.constants[value.name])
        return env[value.name]


def _local_attrs(node: Node, opset: int) -> dict:
    """The attributes of a node replayed at chunk shapes (its chunk rule's local_attrs)."""
    rule = registry.get(node.op_type, node.name, node.domain).chunk
    return dict(node.attrs) if rule is None else rule.local_attrs(node.attrs, opset)
