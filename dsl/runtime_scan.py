"""Runs CumSum / CumProd (a ReduceStep of a scan kind) with the schedule of dsl/kir/scan_schedule.py:
layouts, coalescing, plan caching and threads as for reductions (dsl/runtime_reduce.py); the
output is written in full."""
from __future__ import annotations

from .kir.scan_schedule import scan_kernel
from .passes.fuse import ReduceStep
from .runtime_reduce import ReduceRunner


class ScanRunner(ReduceRunner):
    """Runs one scan ReduceStep (kinds "cumsum", "cumprod")."""

    def __init__(self, step: ReduceStep, math: str = "fast"):
        self.group, self.row, self.math = step.group, step.row, math
        node, call, kind = step.row[0]
        self.kind, self.plan, self.last = kind, call.plan, False
        self.reverse, self.exclusive = call.plan.reverse, call.plan.exclusive
        self.in_shape = tuple(node.inputs[0].type.shape)
        self.reduced = tuple(k == call.plan.axis for k in range(len(self.in_shape)))
        out = node.outputs[0]
        self.outputs = [(out.name, out.type.dtype, tuple(out.type.shape))]
        self._per_call()

    def _ir(self, classes: tuple, packed: list, blocks: list, strides: list, shape: tuple = None,
            partial: bool = False):
        inputs = [(leaf.dtype, p) for leaf, p in zip(self.group.leaves, packed)]
        inner = [st[-1] if st[-1] in (0, 1) else None for st in strides]
        return scan_kernel(self.group.outputs[0], inputs, classes, blocks, self.kind, self.outputs[0][1],
                           self.reverse, self.exclusive, inner)

    def _params(self, shape: tuple, strides: list, views: list, classes: tuple) -> dict:
        values = super()._params(shape, strides, views, classes)
        values.update({f"os{k}": int(prod_after) for k, prod_after in enumerate(_c_strides(shape))})
        return values


def _c_strides(shape: tuple) -> list:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


__all__ = ["ScanRunner"]
