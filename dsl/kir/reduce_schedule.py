"""The any-axis reduction schedule: ReduceSum / ReduceMean / ReduceMax / ReduceMin, Softmax and
LogSoftmax over any set of axes, with the producer cone fused, as one loop-nest kernel
(dsl/kir/loops.py).

The loops follow the memory layout, not the reduced axes: dims are walked in their (coalesced)
order, so the innermost loop is the contiguous one. Accumulators live where that puts them:

- dims before the first reduced dim ("outer") index independent outputs: plain loops (threads
  split the first of them);
- from there on, the kept dims index a vector accumulator ``acc`` (a temp buffer), which the
  innermost contiguous kept dim walks: ``acc[k] = acc[k] + x[r, k]`` vectorizes across k (sum
  over axis 0 of a row-major matrix reads it once, row after row);
- a run of reduced dims at the end accumulates in a scalar (an ordinary row reduction).

ArgMax / ArgMin (one reduced dim) take two passes: the extreme (NaN propagates), then the first
(or, with select_last_index, the last) reduced index whose value equals it, or is NaN when it
is: numpy's argmax. Both passes are min / max reductions, so they vectorize.

Softmax and LogSoftmax take three passes over the reduced dims (max, sum of exp(v - max), the
outputs), the producer recomputed in each; with math="fast" a float32 input computes in float32
with a float64 sum (as the last-axis row kernel does). LogSoftmax takes log(sum) once per
accumulator element, between the sum and output passes. Sums accumulate in float64 (int64 for
integers), then round to the value's domain and to the output type, as the references do.

Kernel parameters: start, stop (the split dim's range for this thread), n0.. (the coalesced
shape), count (elements reduced per output), per input i: o{i} and s{i}_{k} (offset and
element strides), os{k} (the output's element stride per dim; 0 for reduced dims).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import DType
from . import expr as kir
from . import loops as L
from . import types
from .elementwise import STAGE

_elem = types.element_type
KINDS = ("sum", "mean", "max", "min", "softmax", "logsoftmax", "argmax", "argmin")
SOFTMAX_KINDS = ("softmax", "logsoftmax")
ARG_KINDS = ("argmax", "argmin")


class ReduceLayout:
    """Which coalesced dims are reduced, where the accumulator nest starts and which dim the
    threads split.

    Attributes:
        reduced: per dim, True when it is reduced.
        first: the first reduced dim (dims before it are outer).
        suffix: the first dim of the trailing run of reduced dims (len(reduced) if none).
        split: the dim whose range [start, stop) each thread covers (None: a full reduction,
            one thread).
        partial: the threads split the first (reduced) dim, each accumulating a partial result
            over its range (a reduction with no outer dim: sum over axis 0, a full reduction);
            a combine kernel (combine_kernel) reduces the partials. Else, with no outer dim, they
            split the innermost kept dim.
    """

    def __init__(self, reduced: tuple, partial: bool = False):
        self.reduced = tuple(reduced)
        rank = len(reduced)
        self.first = next(k for k in range(rank) if reduced[k])
        suffix = rank
        while suffix > 0 and reduced[suffix - 1]:
            suffix -= 1
        self.suffix = max(suffix, self.first)
        kept_inner = [k for k in range(self.first, rank) if not reduced[k]]
        self.partial = partial and self.first == 0
        self.split = 0 if self.first > 0 or self.partial else kept_inner[-1] if kept_inner else None

    @property
    def acc_dims(self) -> list[int]:
        """The kept dims that index the vector accumulator."""
        return [k for k in range(self.first, self.suffix) if not self.reduced[k]]


def _params(rank: int, leaves: int) -> list[str]:
    names = ["start", "stop", *[f"n{k}" for k in range(rank)], "count"]
    for i in range(leaves):
        names += [f"o{i}", *[f"s{i}_{k}" for k in range(rank)]]
    return names + [f"os{k}" for k in range(rank)]


def _bounds(layout: ReduceLayout, k: int):
    if k == layout.split:
        return L.index_var("start"), L.index_var("stop")
    return L.index(0), L.index_var(f"n{k}")


def _leaf_index(i: int, rank: int, blocks, inner) -> kir.Expr:
    """Input i's element at the current indices; ``inner``, its innermost stride when it is 0 or 1
    (a constant: the loop then vectorizes without a runtime stride check), else None."""
    terms = [L.index_var(f"o{i}")]
    for k in range(rank):
        position = L.index_var(f"i{k}")
        if blocks[k] != 1:
            position = kir.binary("floordiv", position, L.index(blocks[k]))
        stride = L.index(inner) if k == rank - 1 and inner is not None else L.index_var(f"s{i}_{k}")
        if not (isinstance(stride, kir.Const) and stride.value == 0):
            terms.append(L.mul(position, stride))
    return L.add(*terms)


def _value(expression: kir.Expr, buffers: list, rank: int, blocks: list, inner: list) -> kir.Expr:
    """The producer's value at the current indices: each group input loaded through its View."""
    return kir.replace_leaves(expression, lambda leaf: L.load(
        buffers[leaf.index], _leaf_index(leaf.index, rank, blocks[leaf.index], inner[leaf.index])))


def _acc_index(layout: ReduceLayout) -> kir.Expr:
    terms = []
    for k in layout.acc_dims:
        low, _ = _bounds(layout, k)
        position = kir.binary("sub", L.index_var(f"i{k}"), low) if k == layout.split else L.index_var(f"i{k}")
        terms.append(L.mul(position, L.index_var(f"a{k}")))
    return L.add(*terms)


def _out_index(dims) -> kir.Expr:
    """The output element: C order over ``dims`` (the last of them has stride 1)."""
    dims = list(dims)
    return L.add(*[L.mul(L.index_var(f"i{k}"), L.index(1) if k == dims[-1] else L.index_var(f"os{k}")) for k in dims])


def _nest(dims: list[int], layout: ReduceLayout, body: list) -> list:
    for k in reversed(dims):
        low, high = _bounds(layout, k)
        body = [L.For(f"i{k}", low, high, body)]
    return body


def _combine(kind: str, acc: kir.Expr, value: kir.Expr) -> kir.Expr:
    # max / min: IEEE 754-2019 (-0 < +0, NaN propagates), as the row kernels and the references
    return kir.binary({"sum": "add", "mean": "add", "max": "maximum", "min": "minimum"}[kind], acc, value)


def accumulation(kind: str) -> str:
    """The Accum op (loops.ACCUMULATIONS) of a reduction kind: sum and mean add."""
    return {"sum": "add", "mean": "add"}.get(kind, kind)


def _init(kind: str, dtype: str) -> kir.Const:
    if kind in ("sum", "mean"):
        return kir.const(0, dtype)
    if dtype == "bool":
        return kir.const(kind == "min", "bool")
    if types.is_float(dtype):
        return kir.const(-np.inf if kind == "max" else np.inf, dtype)
    info = np.iinfo(dtype)
    return kir.const(int(info.min) if kind == "max" else int(info.max), dtype)


def _acc_dtype(kind: str, value_dtype: str) -> str:
    """Floats sum in float64; integer sums in uint64 (int64's bits, without numba's promise that
    signed sums never wrap); an integer mean (32-bit values) needs the signed total."""
    if kind in ("max", "min"):
        return value_dtype
    if types.is_float(value_dtype):
        return "float64"
    return "int64" if kind == "mean" else "uint64"


def _bool_combine(kind: str, acc, value):
    return kir.binary("or" if kind == "max" else "and", acc, value)


def _reduce_pass(kind: str, value: kir.Expr, acc_buffer: L.Buffer, layout: ReduceLayout, rank: int,
                 acc_type: str, name: str = "racc_") -> list:
    """acc[a] = init; then, over every dim from the first reduced one, acc[a] op= value (the
    trailing reduced run in a scalar ``name``); statements to run once per outer index."""
    acc_index = _acc_index(layout)
    combine = _bool_combine if acc_type == "bool" else _combine
    wide = kir.convert(value, acc_type)
    suffix_dims = list(range(layout.suffix, rank))
    if suffix_dims:
        store = L.Store(acc_buffer, acc_index, combine(kind, L.load(acc_buffer, acc_index), kir.var(name, acc_type)))
        if kind in ("max", "min") and types.is_float(acc_type):
            inner = [*guarded_extreme(name, kind, wide, lambda body: _nest(suffix_dims, layout, body)), store]
        else:
            step = L.Assign(name, combine(kind, kir.var(name, acc_type), wide)) if acc_type == "bool" else \
                L.Accum(name, accumulation(kind), wide)  # (reassociable: vectorizes)
            inner = [L.Assign(name, _init(kind, acc_type)), *_nest(suffix_dims, layout, [step]), store]
    else:
        inner = [L.Store(acc_buffer, acc_index, combine(kind, L.load(acc_buffer, acc_index), wide))]
    init = _nest(layout.acc_dims, layout, [L.Store(acc_buffer, acc_index, _init(kind, acc_type))])
    dims = list(range(layout.first, layout.suffix))
    if suffix_dims or not layout.acc_dims:
        return [*init, *_nest(dims, layout, inner)]
    return [*init, *_unrolled(dims, layout, kind, wide, combine, acc_buffer, acc_index)]


def guarded_extreme(name: str, kind: str, value: kir.Expr, loops) -> list:
    """Statements leaving in scalar ``name`` the float max / min of ``value`` (guarded_extremes)."""
    return guarded_extremes([(name, kind)], value, loops, flag=f"{name}nan", moved=f"{name}v")


def guarded_extremes(extremes: list, value: kir.Expr, loops, others: tuple = (), flag: str = "rnan_",
                     moved: str = "v", again: tuple | None = None) -> list:
    """Statements leaving in each scalar ``name`` of ``extremes`` [(name, "max" | "min")] the float
    max / min (IEEE maximum / minimum: NaN propagates, -0 < +0) of ``value`` over the loops
    ``loops(body)`` builds around a body. The loops first accumulate maxnum / minnum (one SIMD
    instruction) and a NaN flag ``flag``; only where a NaN was seen or a result is a zero do they
    run again with max / min. Same result; max over [8, 128256] float32 rows: 80 -> 48 us (numpy
    53). In the first pass ``value`` is bound to ``moved``, which ``others`` (statements run
    there too: other accumulations of the value, a copy of it) may read; ``again`` (loops, value)
    reads the values differently in the exact pass (from a copy)."""
    dtype = value.dtype
    seen, here = kir.var(flag, "bool"), kir.var(moved, dtype)
    fast = loops([L.Assign(moved, value), *[L.Accum(name, kind + "num", here) for name, kind in extremes], *others,
                  L.Assign(flag, kir.binary("or", seen, kir.compare("ne", here, here)))])
    redo = seen
    for name, _ in extremes:
        redo = kir.binary("or", redo, kir.compare("eq", kir.var(name, dtype), kir.const(0.0, dtype)))
    loops_again, value_again = again or (loops, value)
    exact = [*[L.Assign(name, _init(kind, dtype)) for name, kind in extremes],
             *loops_again([L.Accum(name, kind, value_again) for name, kind in extremes])]
    return [*[L.Assign(name, _init(kind, dtype)) for name, kind in extremes], L.Assign(flag, kir.const(False, "bool")),
            *fast, L.If(redo, exact)]


UNROLL = 4  # reduced indices folded into one accumulator update (sum over axis 0: 3.9 -> 2.5 ms)


def _unrolled(dims: list, layout: ReduceLayout, kind: str, wide: kir.Expr, combine, acc_buffer: L.Buffer,
              acc_index: kir.Expr) -> list:
    """The vector-accumulator nest with its innermost reduced dim r (the kept dims after it index
    the accumulator) stepped UNROLL at a time: acc[a] = acc[a] op ((v(r) op v(r+1)) op
    (v(r+2) op v(r+3))), a quarter of the accumulator loads and stores; the rest one at a time.
    (Sums then associate differently from a one-at-a-time loop; their float64 totals round to
    the same float32 and narrower results, integers wrap alike, max / min are associative.)"""
    r = max(k for k in dims if layout.reduced[k])
    low, high = _bounds(layout, r)
    position = L.index_var(f"i{r}")

    def at(offset: int) -> kir.Expr:
        moved = L.add(position, L.index(offset))
        return kir.replace_leaves(wide, lambda v: moved if v.name == position.name else v, kinds=(kir.Var,))
    values = [wide] + [at(u) for u in range(1, UNROLL)]
    while len(values) > 1:
        values = [combine(kind, values[j], values[j + 1]) for j in range(0, len(values), 2)]
    quads = kir.binary("floordiv", kir.binary("sub", high, low), L.index(UNROLL))
    step = [L.Store(acc_buffer, acc_index, combine(kind, L.load(acc_buffer, acc_index), values[0]))]
    one = [L.Store(acc_buffer, acc_index, combine(kind, L.load(acc_buffer, acc_index), wide))]
    inside = [k for k in dims if k > r]  # (kept: acc dims)
    quad_body = [L.Assign(position.name, L.add(low, L.mul(L.index_var(f"i{r}q_"), L.index(UNROLL)))),
                 *_nest(inside, layout, step)]
    rest = [L.For(position.name, L.add(low, L.mul(quads, L.index(UNROLL))), high, _nest(inside, layout, one))]
    return _nest([k for k in dims if k < r], layout, [L.For(f"i{r}q_", L.index(0), quads, quad_body), *rest])


def _finalize(kind: str, acc: kir.Expr, value_dtype: str, out_dtype: DType) -> kir.Expr:
    """The reference's rounding: float totals (and means) to the value's domain, then to the type."""
    if kind == "mean":
        count = kir.convert(L.index_var("count"), acc.dtype)
        acc = kir.binary("div", acc, count)
    if kind in ("sum", "mean") and types.is_float(value_dtype):
        acc = kir.convert(acc, value_dtype)
    return kir.cast(acc, out_dtype)


def _acc_strides(layout: ReduceLayout) -> list:
    """a{k}: the accumulator's stride of each of its dims (C order over their extents)."""
    statements, stride = [], L.index(1)
    for k in reversed(layout.acc_dims):
        statements.append(L.Assign(f"a{k}", stride))
        low, high = _bounds(layout, k)
        extent = kir.binary("sub", high, low) if k == layout.split else high
        stride = L.mul(kir.var(f"a{k}", L.INDEX), extent)
    return statements, stride


def accumulator_type(kind: str, value_dtype: str) -> str:
    """The type a reduction of ``kind`` over values of ``value_dtype`` accumulates in (the
    partials of a split reduction have it)."""
    return "bool" if value_dtype == "bool" else _acc_dtype(kind, value_dtype)


def reduction_kernel(expression: kir.Expr, inputs: list, reduced: tuple, blocks: list, kind: str,
                     out_dtype: DType, math: str = "fast", inner: list | None = None,
                     partial: bool = False, last: bool = False) -> L.Kernel:
    """The kernel of ``kind`` over the ``reduced`` coalesced dims of ``expression`` (a value of the
    group's IR whose Leaf i reads ``inputs[i]`` = (element type, packed), with per-dim block
    divisors ``blocks[i]`` and innermost stride ``inner[i]`` when it is 0 or 1). With
    ``partial`` (ReduceLayout.partial: a reduction with no outer dim) the kernel reduces the
    range [start, stop) of dim 0 and writes its accumulator, unfinalized, to out0 (of the
    accumulator type, in the accumulator's C order): combine_kernel finishes. ``last``: an
    argmax / argmin finds the last extreme, not the first."""
    assert kind in KINDS and any(reduced)
    rank = len(reduced)
    layout = ReduceLayout(reduced, partial and kind in ("sum", "mean", "max", "min"))
    buffers = [L.Buffer(f"b{i}", elem, "in", packed) for i, (elem, packed) in enumerate(inputs)]
    value = _value(expression, buffers, rank, blocks, inner or [None] * len(inputs))
    acc_type = accumulator_type(kind, value.dtype)
    out = L.Buffer("out0", _elem(acc_type) if layout.partial else out_dtype, "out")
    strides, acc_size = _acc_strides(layout)
    if kind in SOFTMAX_KINDS:
        body = _softmax_body(value, layout, rank, out, out_dtype, math, acc_size, kind == "logsoftmax")
    elif kind in ARG_KINDS:
        body = _arg_body(value, layout, rank, out, kind, last, acc_size)
    else:
        acc = L.Buffer("acc_", _elem(acc_type), "temp")
        if layout.partial:
            result, where = L.load(acc, _acc_index(layout)), _acc_index(layout)
        else:
            result = _finalize(kind, L.load(acc, _acc_index(layout)), value.dtype, out_dtype)
            where = _out_index([k for k in range(rank) if not reduced[k]])
        per_outer = [*_reduce_pass(kind, value, acc, layout, rank, acc_type),
                     *_nest(layout.acc_dims, layout, [L.Store(out, where, result)])]
        body = [L.Alloc(acc, acc_size), *_nest(list(range(layout.first)), layout, per_outer)]
        buffers.append(acc)
    temps = [s.buffer for s in L.walk(body) if isinstance(s, L.Alloc) and s.buffer not in buffers]
    return L.Kernel(f"reduce_{kind}", [*buffers, out, *temps], _params(rank, len(inputs)), [*strides, *body])


def combine_kernel(kind: str, acc_type: str, value_dtype: str, out_dtype: DType) -> L.Kernel:
    """The end of a split reduction: out0[a] = finalize(combine over t < parts of
    b0[t * n + a]), the partial accumulators of ``parts`` threads (rounded as the reduction's
    reference rounds its total: see _finalize; ``count`` is the reduction's element count)."""
    part = L.Buffer("b0", _elem(acc_type), "in")
    out = L.Buffer("out0", out_dtype, "out")
    combine = _bool_combine if acc_type == "bool" else _combine
    a, t, n = L.index_var("a"), L.index_var("t"), L.index_var("n")
    total = kir.var("total_", acc_type)
    body = [L.For("a", L.index(0), n, [
        L.Assign("total_", _init(kind, acc_type)),
        L.For("t", L.index(0), L.index_var("parts"),
              [L.Assign("total_", combine(kind, total, L.load(part, L.add(L.mul(t, n), a))))]),
        L.Store(out, a, _finalize(kind, total, value_dtype, out_dtype))])]
    return L.Kernel(f"combine_{kind}", [part, out], ["n", "parts", "count"], body)


def staged_kernel(stages: list, outputs: list, out_dtypes: list, inputs: list, reduced: tuple, blocks: list,
                  math: str = "fast", inner: list | None = None, stream: tuple = ()) -> L.Kernel:
    """One kernel for a group with reductions inside it (dsl/kir/group.py Stage: layer norm's mean
    and variance, RMS norm's mean square): per outer index, one pass over the ``reduced``
    coalesced dims for each stage in order (its value may use the earlier stages' results), then
    one pass writing ``outputs`` (expressions of the group's full shape, of ``out_dtypes``).

    The producers are recomputed in each pass; a row (the reduced dims of one outer index) is
    read from cache after the first. Where every kept dim is outer (a trailing reduction), a
    stage's result is a scalar of the outer loop; otherwise it lives in a vector accumulator
    indexed as the reduction schedule's (see the module docstring). Outputs whose index is in
    ``stream`` are written with streaming stores (the caller checks alignment)."""
    rank = len(reduced)
    layout = ReduceLayout(reduced)
    inner = inner or [None] * len(inputs)
    buffers = [L.Buffer(f"b{i}", elem, "in", packed) for i, (elem, packed) in enumerate(inputs)]
    outs = [L.Buffer(f"out{j}", dt, "out") for j, dt in enumerate(out_dtypes)]
    strides, acc_size = _acc_strides(layout)
    index = _acc_index(layout)
    scalar = not layout.acc_dims
    definitions: dict = {}  # stage var name -> its value at the current indices (vector accumulators)

    def resolve(expression: kir.Expr) -> kir.Expr:
        expression = _value(expression, buffers, rank, blocks, inner)
        return kir.replace_leaves(expression, lambda v: definitions.get(v.name, v), kinds=(kir.Var,))

    allocs, per_outer = [], []
    for k, stage in enumerate(stages):
        value = resolve(stage.value)
        acc_type = "bool" if value.dtype == "bool" else _acc_dtype(stage.kind, value.dtype)
        acc = L.Buffer(f"acc{k}_", _elem(acc_type), "temp")
        allocs.append(L.Alloc(acc, acc_size))
        per_outer += _reduce_pass(stage.kind, value, acc, layout, rank, acc_type, f"racc{k}_")
        result = _finalize(stage.kind, L.load(acc, index), value.dtype, stage.out_dtype)
        if scalar:
            per_outer.append(L.Assign(stage.var.name, result))
        else:
            definitions[stage.var.name] = result
    values = [kir.cast(resolve(expression), dt) for expression, dt in zip(outputs, out_dtypes)]
    if scalar and rank >= 2 and layout.first == rank - 1:  # rows: the next one's start prefetched, as the row schedule does
        per_outer = [*_prefetch_next_row(buffers, blocks, inner, layout, rank), *per_outer]
        if stream:
            staged = {j: L.Buffer(f"stg{j}", outs[j].elem, "temp") for j in stream}
            allocs += [L.Alloc(buffer, L.index(STAGE)) for buffer in staged.values()]
            per_outer += _streamed_row(outs, values, staged, rank)
        else:
            per_outer += _nest([rank - 1], layout, [L.Store(out, _out_index(range(rank)), value)
                                                    for out, value in zip(outs, values)])
    else:
        stores = [L.Store(out, _out_index(range(rank)), value, j in stream)
                  for j, (out, value) in enumerate(zip(outs, values))]
        per_outer += _nest(list(range(layout.first, rank)), layout, stores)
    body = [*allocs, *_nest(list(range(layout.first)), layout, per_outer)]
    temps = [a.buffer for a in allocs]
    return L.Kernel("staged", [*buffers, *outs, *temps], _params(rank, len(inputs)), [*strides, *body])


def _streamed_row(outs: list, values: list, staged: dict, rank: int) -> list:
    """A row's output pass in strips of STAGE elements: the outputs in ``staged`` computed into
    L1 buffers, then copied out with streaming stores (the elementwise schedule's strips). A
    streaming store in the loop that computes a division ran at half the speed:
    RMSNormalization [4096, 4096], 2 threads, 17.8 -> 9.3 ms (not streamed: 9.7; onnxruntime 9.2-10.2)."""
    last = rank - 1
    i, start = L.index_var(f"i{last}"), L.index_var("sb_")
    at, where = kir.binary("sub", i, start), _out_index(range(rank))
    compute = [L.Store(staged[j], at, value) if j in staged else L.Store(out, where, value)
               for j, (out, value) in enumerate(zip(outs, values))]
    copy = [L.Move(outs[j], where, buffer, at, True) for j, buffer in staged.items()]
    n = L.index_var(f"n{last}")
    strips = kir.binary("floordiv", L.add(n, L.index(STAGE - 1)), L.index(STAGE))
    return [L.For("st_", L.index(0), strips, [
        L.Assign("sb_", L.mul(L.index_var("st_"), L.index(STAGE))),
        L.Assign("se_", kir.binary("min", L.add(start, L.index(STAGE)), n)),
        L.For(f"i{last}", start, L.index_var("se_"), compute), L.For(f"i{last}", start, L.index_var("se_"), copy)])]


def _prefetch_next_row(buffers: list, blocks: list, inner: list, layout: ReduceLayout, rank: int) -> list:
    """Before a row's passes (the reduced last dim of one outer index), prefetches of the first
    L.NEXT_ROW_BYTES of the next row of each input read along it with unit stride. Interleaved
    medians of 31, 2 threads, float32 [8192, 1024]: layer norm 6.52 -> 6.13 ms (7.04 -> 6.39 in a
    second run), RMS norm 5.10 -> 4.71 (5.43 -> 4.98)."""
    k, last = rank - 2, rank - 1
    _, high = _bounds(layout, k)
    lines = []
    for i, buffer in enumerate(buffers):
        if buffer.packed or inner[i] != 1 or any(b != 1 for b in blocks[i]):
            continue
        per_row = L.NEXT_ROW_BYTES // max(1, buffer.elem.bits // 8)
        row = L.add(L.index_var(f"o{i}"), *[L.mul(L.index_var(f"i{d}"), L.index_var(f"s{i}_{d}")) for d in range(last)])
        lines.append(L.If(kir.compare("ne", L.index_var(f"s{i}_{k}"), L.index(0)), [
            L.prefetch_run(buffer, L.add(row, L.index_var(f"s{i}_{k}")),
                           kir.binary("min", L.index_var(f"n{last}"), L.index(per_row)))]))
    if not lines:
        return []
    return [L.If(kir.compare("lt", L.add(L.index_var(f"i{k}"), L.index(1)), high), lines)]


def _softmax_body(value, layout: ReduceLayout, rank: int, out: L.Buffer, out_dtype: DType, math: str, acc_size,
                  log: bool = False):
    """max pass, sum-of-exp pass, output pass (see the module docstring); ``log``: LogSoftmax."""
    fast = math == "fast" and value.dtype == "float32"
    domain = "float32" if fast else "float64"
    peak, total = L.Buffer("amax_", _elem(domain), "temp"), L.Buffer("asum_", _elem("float64"), "temp")
    v = kir.convert(value, domain)
    index = _acc_index(layout)
    top = L.load(peak, index)
    exponent = kir.unary("exp", kir.binary("sub", v, top))
    sum_pass = _reduce_pass("sum", exponent, total, layout, rank, "float64")
    if log:
        between, result = _log_softmax_shift(v, peak, total, layout, fast)
    else:
        between = []
        scale = kir.binary("div", kir.const(1.0, "float64"), L.load(total, index))
        if fast:
            result = kir.binary("mul", exponent, kir.convert(scale, "float32"))
        else:
            result = kir.convert(kir.binary("mul", exponent, scale), value.dtype)
    output = _nest(list(range(layout.first, rank)), layout,
                   [L.Store(out, _out_index(range(rank)), kir.cast(kir.convert(result, value.dtype), out_dtype))])
    per_outer = [*_reduce_pass("max", v, peak, layout, rank, domain), *sum_pass, *between, *output]
    return [L.Alloc(peak, acc_size), L.Alloc(total, acc_size), *_nest(list(range(layout.first)), layout, per_outer)]


def _log_softmax_shift(v, peak: L.Buffer, total: L.Buffer, layout: ReduceLayout, fast: bool) -> tuple:
    """(statements run between the sum and output passes, the output value). Fast (float32): as
    the last-axis row kernel, the shift max + float32(log(sum)) in float32 (it replaces the max
    in ``peak``), then v - shift. Exact (float64): log(sum) replaces the sum in ``total``, then
    (v - max) - log(sum), the reference's arithmetic, rounded once."""
    index = _acc_index(layout)
    log_total = kir.unary("log", L.load(total, index))
    if fast:
        shift = kir.binary("add", L.load(peak, index), kir.convert(log_total, "float32"))
        between = _nest(layout.acc_dims, layout, [L.Store(peak, index, shift)])
        return between, kir.binary("sub", v, L.load(peak, index))
    between = _nest(layout.acc_dims, layout, [L.Store(total, index, log_total)])
    return between, kir.binary("sub", kir.binary("sub", v, L.load(peak, index)), L.load(total, index))


ARG_BLOCK = 4096  # elements per block of a row argmax: its rescan reads 16 KiB of float32 (from L1 / L2) again;
# 1024 cost 25% more than one flat pass over [8, 128256] float32, 4096 10%


def _arg_body(value, layout: ReduceLayout, rank: int, out: L.Buffer, kind: str, last: bool, acc_size) -> list:
    """ArgMax / ArgMin over the one reduced dim r. A trailing r (a row): one pass of block
    extremes, then a rescan of the winning block (_arg_row); else the extreme pass, then the
    position pass: min (max for ``last``) over r of r where the value is the extreme, n (-1)
    elsewhere. Float values compare as v + 0.0 (-0 becomes +0: numpy's argmax treats the two
    as equal); a NaN extreme is found as the first (last) NaN."""
    (r,) = [k for k in range(rank) if layout.reduced[k]]
    extreme_kind = "max" if kind == "argmax" else "min"
    if types.is_float(value.dtype):
        value = kir.binary("add", value, kir.const(0.0, value.dtype))
    where = _out_index([k for k in range(rank) if not layout.reduced[k]])
    if r == rank - 1:
        per_outer = _arg_row(value, r, extreme_kind, last, where, out)
        return _nest(list(range(layout.first)), layout, per_outer)
    peak, found = L.Buffer("aext_", _elem(value.dtype), "temp"), L.Buffer("apos_", _elem("int64"), "temp")
    index = _acc_index(layout)
    extreme = _reduce_pass(extreme_kind, value, peak, layout, rank, value.dtype, "rext_")
    first = _reduce_pass("max" if last else "min", _candidate(value, L.load(peak, index), r, last), found, layout,
                         rank, "int64", "rpos_")
    stores = _nest(layout.acc_dims, layout, [L.Store(out, where, L.load(found, index))])
    return [L.Alloc(peak, acc_size), L.Alloc(found, acc_size),
            *_nest(list(range(layout.first)), layout, [*extreme, *first, *stores])]


def _is_nan(x: kir.Expr) -> kir.Expr:
    return kir.compare("ne", x, x)


def _candidate(value: kir.Expr, top: kir.Expr, r: int, last: bool) -> kir.Expr:
    """int64: r's index where ``value`` is the extreme ``top`` (or both are NaN), else n (-1)."""
    hit = kir.compare("eq", value, top)
    if types.is_float(value.dtype):
        hit = kir.binary("or", hit, kir.binary("and", _is_nan(top), _is_nan(value)))
    miss = kir.const(-1, "int64") if last else kir.convert(L.index_var(f"n{r}"), "int64")
    return kir.select(hit, kir.convert(L.index_var(f"i{r}"), "int64"), miss)


def _arg_row(value, r: int, extreme_kind: str, last: bool, where: kir.Expr, out: L.Buffer) -> list:
    """One row: per block of ARG_BLOCK, its extreme (a vectorized reduction); the first block
    (last, for ``last``) holding the row's extreme is remembered; then that block alone is
    rescanned for the position. One pass over the row, where two passes read it twice."""
    dtype = value.dtype
    n, block = L.index_var(f"n{r}"), L.index(ARG_BLOCK)
    best, winner, extreme = kir.var("abest_", dtype), kir.var("ablock_", L.INDEX), kir.var("rext_", dtype)
    beats = kir.compare(("ge" if last else "gt") if extreme_kind == "max" else ("le" if last else "lt"), extreme, best)
    if types.is_float(dtype):  # a NaN block wins once (the first), or always (the last)
        nan_wins = _is_nan(extreme) if last else kir.binary("and", _is_nan(extreme), kir.compare("eq", best, best))
        beats = kir.binary("or", beats, nan_wins)  # (after the first NaN nothing beats it: NaN compares false)
    low = L.mul(L.index_var("ab_"), block)

    def span(start):
        return start, kir.binary("min", L.add(start, block), n)
    blocks = kir.binary("floordiv", L.add(n, L.index(ARG_BLOCK - 1)), block)
    if types.is_float(dtype):
        extreme_of_block = guarded_extreme("rext_", extreme_kind, value, lambda body: [L.For(f"i{r}", *span(low), body)])
    else:
        extreme_of_block = [L.Assign("rext_", _init(extreme_kind, dtype)),
                            L.For(f"i{r}", *span(low), [L.Accum("rext_", extreme_kind, value)])]
    scan = L.For("ab_", L.index(0), blocks, [
        *extreme_of_block, L.If(beats, [L.Assign("abest_", extreme), L.Assign("ablock_", L.index_var("ab_"))])])
    position = L.For(f"i{r}", *span(L.mul(winner, block)),
                     [L.Accum("rpos_", "max" if last else "min", _candidate(value, best, r, last))])
    return [L.Assign("abest_", _init(extreme_kind, dtype)), L.Assign("ablock_", L.index(0)), scan,
            L.Assign("rpos_", kir.const(-1, "int64") if last else kir.convert(n, "int64")), position,
            L.Store(out, where, kir.var("rpos_", "int64"))]

