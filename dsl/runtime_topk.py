"""Runs TopK (a ReduceStep of kind "topk") with the schedule of dsl/kir/topk_schedule.py: layouts,
coalescing, plan caching and threads as for reductions (dsl/runtime_reduce.py); two outputs,
the values and the int64 indices, of the input's shape with the axis' dim k."""
from __future__ import annotations

from math import prod
from types import SimpleNamespace

from .kir.topk_schedule import topk_kernel
from .passes.fuse import ReduceStep
from .runtime_reduce import ReduceRunner, coalesce


class TopKRunner(ReduceRunner):
    """Runs one TopK ReduceStep."""

    def __init__(self, step: ReduceStep, math: str = "fast"):
        self.group, self.row, self.math = step.group, step.row, math
        node, call, kind = step.row[0]
        self.kind, self.plan, self.last = kind, call.plan, False
        self.in_shape = tuple(node.inputs[0].type.shape)
        self.reduced = tuple(d == call.plan.axis for d in range(len(self.in_shape)))
        self.outputs = [(v.name, v.type.dtype, tuple(v.type.shape)) for v in node.outputs]
        self._per_call()

    def _ir(self, classes: tuple, packed: list, blocks: list, strides: list, shape: tuple = None,
            partial: bool = False):
        inputs = [(leaf.dtype, p) for leaf, p in zip(self.group.leaves, packed)]
        inner = [st[-1] if st[-1] in (0, 1) else None for st in strides]
        return topk_kernel(self.group.outputs[0], inputs, classes, blocks, self.outputs[0][1], self.plan.largest,
                           inner)

    def _plan(self, storages: list, views: list) -> tuple:
        shape, strides, blocks, classes = coalesce(self.in_shape, views, self.reduced)
        kernel, order = self._kernel(classes, [p for _, p in storages], blocks, strides, shape)
        kept = [d for d, r in enumerate(classes) if not r]
        layout = SimpleNamespace(split=kept[0] if kept else None)  # (threads split the first kept dim)
        params = self._params(shape, strides, views, classes)
        written = [self.plan.k if r else d for d, r in zip(shape, classes)]
        params.update({f"os{d}": prod(written[d + 1:]) for d in range(len(shape))}, k=self.plan.k)
        extent = shape[layout.split] if layout.split is not None else 1
        return kernel, order, layout, extent, params, 0, None, {}


__all__ = ["TopKRunner"]
