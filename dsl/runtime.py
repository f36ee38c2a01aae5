"""Execute planned steps: view chains, fused kernels (threaded over rows) and numpy fallbacks.

The per-call work for a kernel is a dict lookup keyed by the leaves' layouts; a miss
composes each leaf's View path, coalesces dims and picks (or compiles) the kernel variant.
"""
from __future__ import annotations

import functools
import os
from math import prod

import numpy as np

from kernels import bits as _bits
from kernels import copy as copy_kernels
from kernels import packed as packed_kernels

from .buffers import ALIGN, POOL
from . import thread_policy
from .codegen import threads
from .codegen.compile import compile_kernel
from .kir import types as kir_types
from .codegen import loops
from .kir import variants
from .kir.variants import INNER_BROADCAST, INNER_STRIDED, INNER_UNIT
from .lru import LRU
from .ops import registry
from .passes.fuse import KernelStep, NodeStep
from .tensor import Tensor, _span_of
from .values import runtime_type
from .view import BlockedView, View

# elements; below this one thread beats the hand-off. The split runs on numba's thread team
# (dsl/codegen/threads.py): 2-3 us a launch while its threads spin after the last one, 40-80 us
# from sleep; a memory-bound kernel gains little from the second core of the 2-core machine here.
# Interleaved medians against the thread-pool split it replaced (same threshold), ms: exp(x) * 2
# at 4M 1.37-1.45 / 1.64-1.85, x * 2 + 1 at 16M 3.39-3.57 / 3.66-4.48, softmax [32, 512, 512]
# 5.37-5.68 / 5.60-6.31. Tried at 256K: an embedding gather (1 MiB out, rows in cache) split in
# two took 36-60 us a call (numpy 32-37; its launcher alone 25 us against 37 serial): the per-call
# work and the variance ate the gain, so the threshold stays.
PARALLEL_THRESHOLD = 1 << 22
# (rows, cols), at most, of the tiles of an elementwise kernel with a transposed input; transpose(x) + y
# on float32 [8192, 8192], interleaved medians of 21-31 in three runs: 512 x 64 took 41-43 ms where
# 1024 x 64 took 45-52 (256 x 64: 39-47, 128 x 64 and 256 x 128 no better)
TILE = (512, 64)


def _stream_threshold() -> float:
    """Output bytes from which a kernel writes with streaming stores: ``$DSL_STREAM_BYTES``
    (``off`` never streams), default 64 MiB. Streaming skips reading each output line before
    writing it but leaves the result out of the caches. On the 2-core reference machine
    (interleaved medians, float32, 2 threads) the write alone was 1.2x faster at 16 MiB and
    1.5x at 64 MiB, but write + an immediate full read of the result was 30% slower at 16-32
    MiB, 23% at 48 MiB, 5% at 64 MiB and 4-8% faster from 96 MiB: the default sits where the
    read-back cost has nearly vanished."""
    setting = os.environ.get("DSL_STREAM_BYTES", "").strip().lower()
    if setting == "off":
        return float("inf")
    return int(setting) if setting.isdigit() else 64 << 20


STREAM_BYTES = _stream_threshold()


def split_threads(size: int, threshold: int | None = None) -> int:
    """The threads a kernel over ``size`` elements splits over from this thread: one below
    ``threshold`` (default PARALLEL_THRESHOLD, read at the call; a compute-bound kernel passes a
    lower one), inside single_threaded(), or where numba's thread team cannot be used
    (dsl/codegen/threads.py), else the set_threads / DSL_THREADS / core count."""
    if size < (PARALLEL_THRESHOLD if threshold is None else threshold):
        return 1
    return thread_policy.available()


@functools.lru_cache(maxsize=256)
def span_bounds(extent: int, count: int, align: int) -> np.ndarray:
    """``count + 1`` bounds splitting range(extent) into near-equal spans, the inner ones rounded
    down to multiples of ``align`` (a power of two; spans may then be empty). Read-only."""
    bounds = np.array([extent * k // count // align * align for k in range(count)] + [extent], np.int64)
    bounds.flags.writeable = False
    return bounds


def run_spans(kernel, form: str, *args) -> None:
    """Run ``kernel`` over its spans on the thread team, the launcher ``form`` of
    dsl/codegen/threads.py taking ``args`` (the span bounds or parameter table first)."""
    threads.launch(kernel, form, *args)


def _storage(obj, dt):
    """(flat raw buffer, View, packed) of a runtime value for kernel loads."""
    raw = np.dtype(kir_types.storage(dt))
    if isinstance(obj, Tensor):
        if obj.dtype.packed:
            return obj.buffer, obj.view, True
        return obj.buffer.view(raw), obj.view, False
    if obj.flags.c_contiguous:
        return obj.reshape(-1).view(raw), View.contiguous(obj.shape), False
    flat, view = _span_of(obj)
    return flat.view(raw), view, False


def _materialize(buffer, view, packed, dt):
    """A contiguous copy of what ``view`` reads (a path step that cannot stay a view)."""
    if isinstance(view, BlockedView):  # a blocked parameter a view op reshapes: spread it out
        source = view.source()
        if packed:
            raw = copy_kernels.materialize_packed(buffer, dt.bits, source.shape, source.strides, source.offset)
            codes = packed_kernels.unpack(raw, 0, source.size, dt.bits).reshape(source.shape)
            return packed_kernels.pack(view.spread_values(codes).reshape(-1), dt.bits), View.contiguous(view.shape), True
        values = copy_kernels.materialize(buffer, source.shape, source.strides, source.offset)
        return view.spread_values(values).reshape(-1), View.contiguous(view.shape), False
    if packed:
        raw = copy_kernels.materialize_packed(buffer, dt.bits, view.shape, view.strides, view.offset)
        return raw, View.contiguous(view.shape), True
    flat = copy_kernels.materialize(buffer, view.shape, view.strides, view.offset).reshape(-1)
    return flat, View.contiguous(view.shape), False


def _walk(buffer, view, packed, dt, path):
    """Apply a leaf's path; returns (buffer, final view, packed, stayed_a_view)."""
    stayed = True
    for _, transform in path:
        moved = transform(view)
        if moved is None:
            buffer, view, packed = _materialize(buffer, view, packed, dt)
            moved, stayed = transform(view), False
        view = moved
    return buffer, view, packed, stayed


def _blocks(view) -> tuple:
    """Per-dim block divisors of a leaf's View (1: a plain dim; a dim read with stride 0 is
    plain whatever its block)."""
    blocks = getattr(view, "blocks", None) or (1,) * len(view.shape)
    return tuple(1 if stride == 0 else block for stride, block in zip(view.strides, blocks))


def _coalesce(shape, leaf_views, keep_last: bool = False):
    """Merge adjacent dims that every leaf (and the C-contiguous output) walks linearly.
    With ``keep_last`` the last dim stays separate and at least one dim precedes it.
    Returns (shape, per-leaf strides, per-leaf block divisors); a blocked dim never merges."""
    if keep_last:
        outer_views = [BlockedView(v.shape[:-1], v.strides[:-1], 0, _blocks(v)[:-1]) for v in leaf_views]
        outer, outer_strides, outer_blocks = _coalesce(shape[:-1], outer_views)
        return (outer + (shape[-1],), [st + (v.strides[-1],) for st, v in zip(outer_strides, leaf_views)],
                [bl + (_blocks(v)[-1],) for bl, v in zip(outer_blocks, leaf_views)])
    dims = [k for k, d in enumerate(shape) if d != 1] or [len(shape)]
    if len(shape) == 0 or dims == [len(shape)]:
        return (1,), [(0,) for _ in leaf_views], [(1,) for _ in leaf_views]
    blocks = [_blocks(v) for v in leaf_views]
    out_shape = [shape[dims[0]]]
    out_strides = [[v.strides[dims[0]]] for v in leaf_views]
    out_blocks = [[b[dims[0]]] for b in blocks]
    for k in dims[1:]:
        size = shape[k]
        if all(st[-1] == v.strides[k] * size and bl[-1] == 1 and b[k] == 1
               for st, v, bl, b in zip(out_strides, leaf_views, out_blocks, blocks)):
            out_shape[-1] *= size
            for st, v in zip(out_strides, leaf_views):
                st[-1] = v.strides[k]
        else:
            out_shape.append(size)
            for st, bl, v, b in zip(out_strides, out_blocks, leaf_views, blocks):
                st.append(v.strides[k])
                bl.append(b[k])
    return tuple(out_shape), [tuple(st) for st in out_strides], [tuple(bl) for bl in out_blocks]


def _coalesce_apart(shape, leaf_views, separate: tuple):
    """_coalesce keeping each dim of ``separate`` a coalesced dim of its own (size-1 dims
    dropped). Returns (shape, strides, blocks, {dim in separate: its coalesced dim})."""
    keep = [k for k, d in enumerate(shape) if d != 1 or k in separate]
    blocks = [_blocks(v) for v in leaf_views]
    out_shape, out_strides, out_blocks, where = [], [[] for _ in leaf_views], [[] for _ in leaf_views], {}
    previous = None
    for k in keep:
        merge = previous is not None and previous not in separate and k not in separate and all(
            st[-1] == v.strides[k] * shape[k] and bl[-1] == 1 and b[k] == 1
            for st, v, bl, b in zip(out_strides, leaf_views, out_blocks, blocks))
        if merge:
            out_shape[-1] *= shape[k]
            for st, v in zip(out_strides, leaf_views):
                st[-1] = v.strides[k]
        else:
            out_shape.append(shape[k])
            for st, bl, v, b in zip(out_strides, out_blocks, leaf_views, blocks):
                st.append(v.strides[k])
                bl.append(b[k])
        if k in separate:
            where[k] = len(out_shape) - 1
        previous = k
    if not out_shape:
        return (1,), [(0,) for _ in leaf_views], [(1,) for _ in leaf_views], where
    return tuple(out_shape), [tuple(st) for st in out_strides], [tuple(bl) for bl in out_blocks], where


def _leaf_kinds(packed: list, strides: list, blocks: list) -> list[tuple]:
    """Kernel variant key per leaf: (packed, inner stride kind[, block divisors if blocked])."""
    return [(p, _inner_kind(st[-1])) + ((bl,) if any(b != 1 for b in bl) else ())
            for p, st, bl in zip(packed, strides, blocks)]


def _inner_kind(stride: int) -> int:
    return INNER_BROADCAST if stride == 0 else INNER_UNIT if stride == 1 else INNER_STRIDED


class Leaves:
    """A group's inputs as its kernels read them each call: the values, the layout key that
    launch plans are cached by (an ndarray's shape and strides, a Tensor's view) and the raw
    flat buffers (fast path: a C-contiguous ndarray)."""

    def __init__(self, leaves: list):
        self.leaves = leaves
        self.names = [leaf.value.name for leaf in leaves]
        self.raws = [np.dtype(kir_types.storage(leaf.dtype)) for leaf in leaves]
        self.contiguous = None  # (shapes, plan) for inputs that are all C-contiguous ndarrays

    def values(self, env: dict) -> list:
        return [env[name] for name in self.names]

    def lookup(self, plans: LRU, objs: list) -> tuple:
        """(the cached launch plan for these inputs' layouts, their flat buffers), or (None,
        None). C-contiguous ndarrays of the shapes last planned that way take that plan without
        building the layout key (a small kernel's whole call costs microseconds)."""
        found = self.contiguous
        if found is not None:
            flats = []
            for obj, shape, raw in zip(objs, found[0], self.raws):
                if type(obj) is not np.ndarray or obj.shape != shape or not obj.flags.c_contiguous:
                    break
                flat = obj.reshape(-1)
                flats.append(flat if flat.dtype == raw else flat.view(raw))
            else:
                return found[1], flats
        plan = plans.get(self.key(objs))
        return (None, None) if plan is None else (plan, self.buffers(objs))

    def remember(self, plans: LRU, objs: list, plan) -> None:
        """Cache ``plan`` for these inputs' layouts (see lookup)."""
        plans[self.key(objs)] = plan
        if all(type(o) is np.ndarray and o.flags.c_contiguous for o in objs):
            self.contiguous = (tuple(o.shape for o in objs), plan)

    @staticmethod
    def key(objs: list) -> tuple:
        return tuple((True, o.view.shape, o.view.strides, o.view.offset) if type(o) is Tensor
                     else (o.shape, o.strides) for o in objs)

    def buffers(self, objs: list) -> list:
        found = []
        for obj, raw, leaf in zip(objs, self.raws, self.leaves):
            if type(obj) is np.ndarray and obj.flags.c_contiguous:
                flat = obj.reshape(-1)
                found.append(flat if flat.dtype == raw else flat.view(raw))
            else:
                found.append(_storage(obj, leaf.dtype)[0])
        return found


class KernelRunner:
    """Runs one KernelStep; caches launch plans by leaf layout."""

    def __init__(self, step: KernelStep, math: str = "fast"):
        self.group = step.group
        self.math = math
        self.row = step.row
        self.plans = LRU("signatures")  # launch plans by leaf layout
        self.size = prod(self.group.shape)
        if self.row is None or self.group.epilogue is not None:
            sinks = self.group.sinks if self.row is None else self.group.epilogue.sinks
            self.outputs = [(s.name, s.type.dtype, tuple(s.type.shape)) for s in sinks]
        else:
            self.outputs = [(node.outputs[0].name, node.outputs[0].type.dtype, tuple(node.outputs[0].type.shape))
                            for node, _, _ in self.row]
        # per-call constants, computed once
        self.leaves = Leaves(self.group.leaves)
        self.out_specs = [(name, dt.np_dtype, out_shape, prod(out_shape), np.dtype(kir_types.storage(dt)))
                          for name, dt, out_shape in self.outputs]
        self.softmax = self.row is not None and self.row[0][2] in ("softmax", "logsoftmax")
        # the parts of fused concatenations: their ranges along the group dims they guard
        self.guards = list(self.group.guards)
        self.bounds = np.array([b for g in self.guards for b in (g.lo, g.hi)], np.int64)
        self.checks = list(self.group.checks)  # fused gathers: their index values, checked each run
        self.gathered = [i for i, leaf in enumerate(self.group.leaves) if leaf.gathers]

    def _coalesced(self, views: list) -> tuple:
        """(coalesced shape, per-leaf strides, per-leaf blocks, per guard its coalesced dim)."""
        if self.guards:
            shape, strides, blocks, where = _coalesce_apart(self.group.shape, views, tuple({g.dim for g in self.guards}))
            return shape, strides, blocks, tuple(where[g.dim] for g in self.guards)
        return (*_coalesce(self.group.shape, views, keep_last=self.row is not None), ())

    def _streamed(self, shape, kinds) -> tuple:
        """Indices of the outputs a kernel of coalesced ``shape`` writes with streaming stores:
        only when the outputs are large (STREAM_BYTES), each streamed one is a pooled (so
        64-byte aligned) buffer of 2+ byte elements (LLVM's vectorizer refuses streaming byte
        stores) and every run of stores starts on a cache line: each row of a rank >= 2 kernel
        spans whole lines; a rank-1 kernel's thread spans start on multiples of 64 elements;
        the blocks of a loop tiled by an inner-blocked parameter span whole lines."""
        if (self.row is not None and not self.softmax) or \
                sum(size * raw.itemsize for *_, size, raw in self.out_specs) < STREAM_BYTES:
            return ()
        tiles = {kind[2][-1] for kind in kinds if len(kind) > 2} - {1}
        return tuple(j for j, (*_, size, raw) in enumerate(self.out_specs)
                     if raw.itemsize >= 2 and size * raw.itemsize >= POOL.MIN_BYTES
                     and (len(shape) == 1 or shape[-1] * raw.itemsize % ALIGN == 0)
                     and all(tile * raw.itemsize % ALIGN == 0 for tile in tiles))

    def _tile(self, shape: tuple, strides: list, kinds):
        """((rows, cols), the leaves read across their memory order: a nonzero stride along dim -2
        smaller than along dim -1, a transposed view (not a row broadcast, stride 0 there); those
        with stride 1 there) for a tiled elementwise kernel (dsl/kir/elementwise.py Tile), 0
        for none. transpose(x, [1, 0]) + y on float32
        [8192, 8192] ran as a plain strided loop at 0.12x of dsl.contiguous of the same view; tiles
        of 1024 x 64 with the staged leaf block-transposed and the next tile of y prefetched: 0.66-0.76x
        (benchmarks/transposed.py). Tile rows: a power of two times 64 up to 1024 that the rows
        fill. Not for packed or blocked leaves."""
        rows, cols = TILE
        if self.row is not None or self.guards or self.gathered or len(shape) < 2 or shape[-2] < 64 or shape[-1] < cols or \
                any(kind[0] or len(kind) > 2 for kind in kinds):
            return 0
        staged = tuple(i for i, st in enumerate(strides) if st[-1] != 0 and 0 < abs(st[-2]) < abs(st[-1]))
        if not staged:
            return 0
        while rows > shape[-2]:
            rows //= 2
        unit = tuple(i for i in staged if strides[i][-2] == 1)
        return ((rows, cols), staged, unit)

    def kernel_ir(self, rank: int, kinds, stream: tuple = (), tile: int = 0, guards: tuple = ()):
        """The kernel IR (dsl/kir/loops.py Kernel) of one layout variant."""
        if self.row is None:
            return variants.group_kernel(self.group, rank, kinds, stream, tile, guards)
        return variants.row_group_kernel(self.group, [kind for _, _, kind in self.row], rank, kinds,
                                         [dt for _, dt, _ in self.outputs], stream, self.math)

    def _source(self, kernel) -> str:
        """numba source of a kernel's IR, with its thread launchers."""
        return threads.with_launchers(loops.kernel_source(kernel, self.math), "spans")

    def contiguous_variant(self) -> tuple:
        """(coalesced shape, per-leaf strides, the kernel IR) used when every input is
        C-contiguous: each leaf is seen through its view path, as the run-time plan sees it."""
        views = []
        for leaf in self.group.leaves:
            view = View.contiguous(leaf.value.type.shape)
            for _, transform in leaf.path:  # a step that cannot stay a view reads a contiguous copy
                view = transform(view) or transform(View.contiguous(view.shape))
            views.append(view)
        shape, strides, blocks, guards = self._coalesced(views)
        kinds = _leaf_kinds([leaf.dtype.packed for leaf in self.group.leaves], strides, blocks)
        kernel = self.kernel_ir(len(shape), kinds, self._streamed(shape, kinds), self._tile(shape, strides, kinds), guards)
        return shape, strides, kernel

    def source_for_contiguous(self) -> str:
        """The kernel source used when every input is C-contiguous (for explain)."""
        return self._source(self.contiguous_variant()[2])

    def _plan(self, objs, stream: bool = True):
        storages, views, kinds, gathers = [], [], [], []
        cacheable = True
        for leaf, obj in zip(self.group.leaves, objs):
            buffer, view, packed = _storage(obj, leaf.dtype)
            if leaf.gathers:  # a gather's data: its strides along the gathered axes, as it is read
                if type(view) is not View or not _walk(buffer, view, packed, leaf.dtype, leaf.path)[3]:
                    # (its path must stay a view, which it does from a contiguous copy: GroupBuilder)
                    buffer, view, packed = _materialize(buffer, view, packed, leaf.dtype)
                gathers += [v for _, axis in leaf.gathers for v in (view.strides[axis], view.shape[axis])]
                if not _walk(buffer, view, packed, leaf.dtype, leaf.path)[3]:
                    raise AssertionError(f"gathered {leaf.value.name}: its path copies")  # (never a wild read)
            buffer, view, packed, stayed = _walk(buffer, view, packed, leaf.dtype, leaf.path)
            cacheable &= stayed
            storages.append((buffer, packed))
            views.append(view)
        shape, strides, blocks, guards = self._coalesced(views)
        kinds = _leaf_kinds([packed for _, packed in storages], strides, blocks)
        streamed = self._streamed(shape, kinds) if stream else ()
        kernel = compile_kernel(self._source(self.kernel_ir(len(shape), kinds, streamed, self._tile(shape, strides, kinds),
                                                            guards)))
        params = []
        for view, st in zip(views, strides):
            params.append((np.int64(view.offset), np.array(st, np.int64)))
        # after the leaves' arguments: the concatenations' bounds, the gathers' strides and sizes
        extras = ([self.bounds] if self.guards else []) + ([np.array(gathers, np.int64)] if self.gathered else [])
        return cacheable, (kernel, streamed), np.array(shape, np.int64), (params, extras), storages

    def run(self, env: dict) -> None:
        if self.size == 0:
            for name, dt, out_shape in self.outputs:
                env[name] = np.empty(out_shape, dt.np_dtype)
            return
        for check in self.checks:  # (before any kernel reads through the indices)
            indices = env[check.indices]
            indices = indices.numpy() if isinstance(indices, Tensor) else indices
            if check.bounds is None or not _bits.within(indices.reshape(-1, len(check.bounds[0])), *check.bounds):
                check.check(check.call, indices)  # (raises, with the details)
        objs = self.leaves.values(env)
        plan, buffers = self.leaves.lookup(self.plans, objs)
        if plan is None:
            cacheable, (kernel, streamed), shape, (params, extras), storages = self._plan(objs)
            buffers = [b for b, _ in storages]
            if cacheable:
                self.leaves.remember(self.plans, objs, ((kernel, streamed), shape, (params, extras)))
        else:
            (kernel, streamed), shape, (params, extras) = plan
        args = []
        for buffer, (offset, strides) in zip(buffers, params):
            args += (buffer, offset, strides)
        args += extras
        outs = [POOL.empty(size, raw) for _, _, _, size, raw in self.out_specs]
        if streamed and any(outs[j].ctypes.data % ALIGN for j in streamed):  # never, by POOL's construction
            kernel = self._plan(objs, stream=False)[1][0]
        rows = int(shape[0])
        count = min(split_threads(self.size), rows)
        if count > 1:
            # rank 1: spans start on multiples of 64 elements (a cache line for streaming
            # stores, a byte for packed leaves); above, rows start even (packed rows on a byte)
            run_spans(kernel, "spans", span_bounds(rows, count, 64 if len(shape) == 1 else 2), shape, *args, *outs)
        else:
            kernel(0, rows, shape, *args, *outs)
        for (name, np_dtype, out_shape, _, raw), out in zip(self.out_specs, outs):
            env[name] = (out if np_dtype == raw else out.view(np_dtype)).reshape(out_shape)


def _unplanned(step: NodeStep) -> bool:
    """Whether the node's rule could not read an input whose contents it needs (computed at run
    time, e.g. Slice starts from a Shape) or an input's dims (data-dependent: NonZero's count):
    its Call is then planned again on the real values."""
    if not hasattr(step, "replan"):
        schema = step.opdef.schema(step.call.version)
        step.replan = any(spec.needs_value and k < len(step.call.values) and step.call.values[k] is None
                          and step.node.inputs[k] is not None for k, spec in enumerate(schema.inputs)) or \
            any(v is not None and not _static_type(v.type) for v in step.node.inputs)  # (a NonZero count)
    return step.replan


def _static_type(value_type) -> bool:
    shape = getattr(value_type, "shape", ())
    return shape is not None and all(isinstance(d, int) for d in shape)


def run_node(step: NodeStep, env: dict) -> None:
    """A node by its numpy reference (packed Tensors through view ops keep their buffer)."""
    args = [None if v is None else env[v.name] for v in step.node.inputs]
    if _unplanned(step):
        values = [a.numpy() if isinstance(a, Tensor) else a for a in args]
        types = [None if a is None else runtime_type(a) for a in args]  # (shapes may be data-dependent too)
        _, call, _ = registry.bind(step.node, step.call.version, types, values)
        step = NodeStep(step.node, call, step.opdef)
        step.replan = False
    if args and isinstance(args[0], Tensor):
        if step.opdef.view is not None:
            moved = step.opdef.view(step.call, args[0].view)
            if moved is not None:
                env[step.node.outputs[0].name] = args[0].with_view(moved)
                return
        args = [a.numpy() if isinstance(a, Tensor) else a for a in args]
    args = [a.numpy() if isinstance(a, Tensor) else a for a in args]
    for value, result in zip(step.node.outputs, step.opdef.reference(step.call, args)):
        env[value.name] = result
