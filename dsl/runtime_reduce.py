"""Runs any-axis reductions, softmax and log-softmax (a ReduceStep) with the schedule of dsl/kir/reduce_schedule.py.

Per call: the producer cone's inputs seen at the reduction input's shape (their View paths, as
for elementwise kernels), dims coalesced where every input walks them linearly and they are of
one class (reduced or kept), the kernel for that class pattern compiled once, and the split
dim's range divided between threads.
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import runtime
from .buffers import POOL
from .codegen import threads
from .codegen.compile import compile_kernel
from .codegen.loops import kernel_source
from .kir import loops
from .kir import types as kir_types
from .kir.reduce_schedule import ReduceLayout, accumulator_type, combine_kernel, reduction_kernel, staged_kernel
from .lru import LRU
from .passes.fuse import ReduceStep, StagedStep
from .view import View


def coalesce(shape: tuple, views: list, reduced: tuple) -> tuple:
    """(shape, per-view strides, per-view block divisors, reduced flags) with size-1 dims dropped
    (a reduced one kept when it is the only reduced dim) and adjacent dims merged when they are
    of one class and every view walks them linearly (blocked dims never merge)."""
    blocks = [runtime._blocks(v) for v in views]
    keep = [k for k, d in enumerate(shape) if d != 1]
    if not any(reduced[k] for k in keep):
        keep = sorted(set(keep) | {next(k for k in range(len(shape)) if reduced[k])})
    dims, strides, divisors, classes = [], [[] for _ in views], [[] for _ in views], []
    for k in keep:
        mergeable = dims and classes[-1] == reduced[k] and all(
            st[-1] == v.strides[k] * shape[k] and bl[-1] == 1 and b[k] == 1
            for st, bl, v, b in zip(strides, divisors, views, blocks))
        if mergeable:
            dims[-1] *= shape[k]
            for st, v in zip(strides, views):
                st[-1] = v.strides[k]
        else:
            dims.append(shape[k])
            classes.append(reduced[k])
            for st, bl, v, b in zip(strides, divisors, views, blocks):
                st.append(v.strides[k])
                bl.append(b[k])
    return tuple(dims), [tuple(s) for s in strides], [tuple(b) for b in divisors], tuple(classes)


class ReduceRunner:
    """Runs one ReduceStep; caches launch plans by the inputs' layouts."""

    def __init__(self, step: ReduceStep, math: str = "fast"):
        self.group, self.row, self.math = step.group, step.row, math
        node, call, kind = step.row[0]
        self.kind, self.plan = kind, call.plan
        self.last = bool(call.attrs.get("select_last_index", 0))  # (ArgMax / ArgMin)
        self.in_shape = tuple(self.plan.in_shape)
        self.reduced = tuple(k in self.plan.axes for k in range(len(self.in_shape)))
        out = node.outputs[0]
        self.outputs = [(out.name, out.type.dtype, tuple(out.type.shape))]
        self._per_call()

    def _per_call(self) -> None:
        """What each run needs, computed once: the leaves' reader, the outputs' sizes and types."""
        self.plans = LRU("signatures")
        self.leaves = runtime.Leaves(self.group.leaves)
        raws = [np.dtype(kir_types.storage(dt)) for _, dt, _ in self.outputs]
        self.out_specs = [(prod(out_shape), raw) for (_, _, out_shape), raw in zip(self.outputs, raws)]
        self.out_views = [(name, dt.np_dtype, out_shape, raw) for (name, dt, out_shape), raw in zip(self.outputs, raws)]

    def _layout(self, objs: list) -> tuple:
        storages, views, cacheable = [], [], True
        for leaf, obj in zip(self.group.leaves, objs):
            buffer, view, packed = runtime._storage(obj, leaf.dtype)
            buffer, view, packed, stayed = runtime._walk(buffer, view, packed, leaf.dtype, leaf.path)
            cacheable &= stayed
            storages.append((buffer, packed))
            views.append(view)
        return storages, views, cacheable

    def _ir(self, classes: tuple, packed: list, blocks: list, strides: list, shape: tuple = None,
            partial: bool = False):
        inputs = [(leaf.dtype, p) for leaf, p in zip(self.group.leaves, packed)]
        inner = [st[-1] if st[-1] in (0, 1) else None for st in strides]
        return reduction_kernel(self.group.outputs[0], inputs, classes, blocks, self.kind, self.outputs[0][1],
                                self.math, inner, partial, self.last)

    def _kernel(self, classes: tuple, packed: list, blocks: list, strides: list, shape: tuple,
                partial: bool = False) -> tuple:
        """(the compiled kernel, its parameter names in argument order). The parameters are
        passed as one int64 vector (numba's dispatch costs about 0.3 us per scalar argument)."""
        ir = self._ir(classes, packed, blocks, strides, shape, partial)
        ir.arguments = [loops.ParamVector("params", tuple(ir.params)), *[b for b in ir.buffers if b.role != "temp"]]
        return compile_kernel(threads.with_launchers(kernel_source(ir, self.math), "table")), ir.params

    def _partial(self, shape: tuple, classes: tuple) -> int:
        """The number of partial accumulators (threads over dim 0, ReduceLayout.partial) for a
        reduction with no outer dim whose partials are small beside its input (64 elements
        read per partial element), else 0: the threads split the innermost kept dim (or, for a
        full reduction too small to split, one runs)."""
        if self.kind not in ("sum", "mean", "max", "min") or not classes[0]:
            return 0
        kept = prod(d for d, r in zip(shape, classes) if not r)
        spans = self._spans(shape[0], ReduceLayout(classes, True))
        return len(spans) if len(spans) > 1 and len(spans) * kept * 64 <= prod(shape) else 0

    def _combine(self):
        """The compiled combine kernel of this reduction's partials and their element type."""
        value_dtype = self.group.outputs[0].dtype
        acc_type = accumulator_type(self.kind, value_dtype)
        ir = combine_kernel(self.kind, acc_type, value_dtype, self.outputs[0][1])
        return compile_kernel(kernel_source(ir, self.math)), np.dtype(kir_types.storage(ir.buffers[0].elem))

    def source_for_contiguous(self) -> str:
        """The kernel source when every input is C-contiguous (for explain)."""
        views = []
        for leaf in self.group.leaves:
            view = View.contiguous(leaf.value.type.shape)
            for _, transform in leaf.path:
                view = transform(view) or transform(View.contiguous(view.shape))
            views.append(view)
        shape, strides, blocks, classes = coalesce(self.in_shape, views, self.reduced)
        packed = [leaf.dtype.packed for leaf in self.group.leaves]
        return threads.with_launchers(kernel_source(
            self._ir(classes, packed, blocks, strides, shape, bool(self._partial(shape, classes))), self.math), "table")

    def _params(self, shape: tuple, strides: list, views: list, classes: tuple) -> dict:
        values = {f"n{k}": d for k, d in enumerate(shape)}
        values["count"] = prod(d for d, r in zip(self.in_shape, self.reduced) if r)
        for i, (view, st) in enumerate(zip(views, strides)):
            values[f"o{i}"] = view.offset
            values.update({f"s{i}_{k}": s for k, s in enumerate(st)})
        full = self.kind in ("softmax", "logsoftmax", "staged")  # (a full-shape output)
        written = shape if full else tuple(1 if r else d for d, r in zip(shape, classes))
        for k in range(len(shape)):
            values[f"os{k}"] = 0 if (classes[k] and not full) else prod(written[k + 1:])
        return values

    def _plan(self, storages: list, views: list) -> tuple:
        """(kernel, order, layout, split extent, params, combine) for these leaf views."""
        shape, strides, blocks, classes = coalesce(self.in_shape, views, self.reduced)
        parts = self._partial(shape, classes)
        kernel, order = self._kernel(classes, [p for _, p in storages], blocks, strides, shape, bool(parts))
        layout = ReduceLayout(classes, bool(parts))
        params = self._params(shape, strides, views, classes)
        extent = shape[layout.split] if layout.split is not None else 1
        kept = prod(d for d, r in zip(shape, layout.reduced) if not r)
        return kernel, order, layout, extent, params, kept, self._combine() if parts else None, {}

    def run(self, env: dict) -> None:
        objs = self.leaves.values(env)
        plan, buffers = self.leaves.lookup(self.plans, objs)
        if plan is None:
            storages, views, cacheable = self._layout(objs)
            plan = self._plan(storages, views)
            if cacheable:
                self.leaves.remember(self.plans, objs, plan)
            buffers = [buffer for buffer, _ in storages]
        kernel, order, layout, extent, params, kept, combine, launches = plan
        spans = tuple(self._spans(extent, layout))
        table = launches.get(spans)
        if table is None:  # per span, the kernel's parameters as it takes them, computed once
            # (negative strides wrap modulo 2**64: index sums of a valid view stay exact)
            table = launches[spans] = np.array(
                [[{**params, "start": lo, "stop": hi}[p] % 2 ** 64 for p in order] for lo, hi in spans],
                np.uint64).view(np.int64)
        outs = [POOL.empty(size, raw) for size, raw in self.out_specs]
        partials = np.empty((len(spans), kept), combine[1]) if combine else None
        if len(spans) == 1:
            kernel(table[0], *buffers, *([partials[0]] if combine else outs))
        elif combine:
            runtime.run_spans(kernel, "table_partials", table, partials, *buffers)
        else:
            runtime.run_spans(kernel, "table", table, *buffers, *outs)
        if combine:
            combine[0](np.uint64(kept), np.uint64(len(spans)), np.uint64(params["count"]), partials.reshape(-1), outs[0])
        for (name, np_dtype, out_shape, raw), out in zip(self.out_views, outs):
            env[name] = (out if np_dtype == raw else out.view(np_dtype)).reshape(out_shape)

    def _spans(self, extent: int, layout: ReduceLayout) -> list:
        threads = runtime.split_threads(prod(self.in_shape)) if layout.split is not None else 1
        if extent < 2 or threads < 2:
            return [(0, extent)]
        # (split != 0: the innermost kept dim, spans on whole cache lines of it)
        bounds = runtime.span_bounds(extent, min(threads, extent), 1 if layout.split == 0 else 16).tolist()
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


class StagedRunner(ReduceRunner):
    """Runs a StagedStep: the group's stages (reductions over one set of axes of its shape), then
    its outputs, one kernel (dsl/kir/reduce_schedule.py staged_kernel); layouts, coalescing and
    threads as for reductions (threads split the outer dims)."""

    def __init__(self, step: StagedStep, math: str = "fast"):
        self.group, self.row, self.math, self.kind, self.plan = step.group, None, math, "staged", None
        self.in_shape = tuple(self.group.shape)
        axes = self.group.stages[0].axes
        self.reduced = tuple(k in axes for k in range(len(self.in_shape)))
        self.outputs = [(v.name, v.type.dtype, tuple(v.type.shape)) for v in self.group.sinks]
        self._per_call()

    def _ir(self, classes: tuple, packed: list, blocks: list, strides: list, shape: tuple = None,
            partial: bool = False):
        inputs = [(leaf.dtype, p) for leaf, p in zip(self.group.leaves, packed)]
        inner = [st[-1] if st[-1] in (0, 1) else None for st in strides]
        return staged_kernel(self.group.stages, self.group.outputs, [dt for _, dt, _ in self.outputs], inputs,
                             classes, blocks, self.math, inner, self._streamed(classes, shape))

    def _streamed(self, classes: tuple, shape: tuple | None) -> tuple:
        """The outputs written with streaming stores: when they are large (runtime.STREAM_BYTES)
        and each outer index's run of stores (the dims from the first reduced one, in C order)
        spans whole cache lines of a pooled (aligned) buffer of 2+ byte elements."""
        layout = ReduceLayout(classes)
        raws = [np.dtype(kir_types.storage(dt)) for _, dt, _ in self.outputs]
        sizes = [prod(out_shape) * raw.itemsize for (_, _, out_shape), raw in zip(self.outputs, raws)]
        if shape is None or layout.acc_dims or sum(sizes) < runtime.STREAM_BYTES:
            return ()
        run = prod(shape[layout.first:])
        return tuple(j for j, (raw, size) in enumerate(zip(raws, sizes))
                     if raw.itemsize >= 2 and size >= POOL.MIN_BYTES and run * raw.itemsize % runtime.ALIGN == 0)


__all__ = ["ReduceRunner", "StagedRunner", "coalesce"]
