"""The any-axis reduction schedule: ReduceSum / ReduceMean / ReduceMax / ReduceMin and Softmax over
any set of axes, with the producer cone fused, as one loop-nest kernel (dsl/kir/loops.py).

The loops follow the memory layout, not the reduced axes: dims are walked in their (coalesced)
order, so the innermost loop is the contiguous one. Accumulators live where that puts them:

- dims before the first reduced dim ("outer") index independent outputs: plain loops (threads
  split the first of them);
- from there on, the kept dims index a vector accumulator ``acc`` (a temp buffer), which the
  innermost contiguous kept dim walks: ``acc[k] = acc[k] + x[r, k]`` vectorizes across k (sum
  over axis 0 of a row-major matrix reads it once, row after row);
- a run of reduced dims at the end accumulates in a scalar (an ordinary row reduction).

Softmax takes three passes over the reduced dims (max, sum of exp(v - max), the outputs), the
producer recomputed in each; with math="fast" a float32 input computes in float32 with a
float64 sum (as the last-axis row kernel does). Sums accumulate in float64 (int64 for
integers), then round to the value's domain and to the output type, as the references do.

Kernel parameters: start, stop (the split dim's range for this thread), n0.. (the coalesced
shape), count (elements reduced per output), per input i: o{i} and s{i}_{k} (offset and
element strides), os{k} (the output's element stride per dim; 0 for reduced dims).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import DType, dtype as dtype_of
from . import expr as kir
from . import loops as L
from . import types

KINDS = ("sum", "mean", "max", "min", "softmax")


class ReduceLayout:
    """Which coalesced dims are reduced, where the accumulator nest starts and which dim the
    threads split.

    Attributes:
        reduced: per dim, True when it is reduced.
        first: the first reduced dim (dims before it are outer).
        suffix: the first dim of the trailing run of reduced dims (len(reduced) if none).
        split: the dim whose range [start, stop) each thread covers (None: a full reduction,
            one thread).
    """

    def __init__(self, reduced: tuple):
        self.reduced = tuple(reduced)
        rank = len(reduced)
        self.first = next(k for k in range(rank) if reduced[k])
        suffix = rank
        while suffix > 0 and reduced[suffix - 1]:
            suffix -= 1
        self.suffix = max(suffix, self.first)
        kept_inner = [k for k in range(self.first, rank) if not reduced[k]]
        self.split = 0 if self.first > 0 else kept_inner[-1] if kept_inner else None

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
                 acc_type: str) -> list:
    """acc[a] = init; then, over every dim from the first reduced one, acc[a] op= value (the
    trailing reduced run in a scalar); statements to run once per outer index."""
    acc_index = _acc_index(layout)
    combine = _bool_combine if acc_type == "bool" else _combine
    wide = kir.convert(value, acc_type)
    suffix_dims = list(range(layout.suffix, rank))
    if suffix_dims:
        step = L.Assign("racc_", combine(kind, kir.var("racc_", acc_type), wide)) if acc_type == "bool" else \
            L.Accum("racc_", {"sum": "add", "mean": "add"}.get(kind, kind), wide)  # (reassociable: vectorizes)
        inner = [L.Assign("racc_", _init(kind, acc_type)), *_nest(suffix_dims, layout, [step]),
                 L.Store(acc_buffer, acc_index, combine(kind, L.load(acc_buffer, acc_index), kir.var("racc_", acc_type)))]
    else:
        inner = [L.Store(acc_buffer, acc_index, combine(kind, L.load(acc_buffer, acc_index), wide))]
    init = _nest(layout.acc_dims, layout, [L.Store(acc_buffer, acc_index, _init(kind, acc_type))])
    return [*init, *_nest(list(range(layout.first, layout.suffix)), layout, inner)]


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


def reduction_kernel(expression: kir.Expr, inputs: list, reduced: tuple, blocks: list, kind: str,
                     out_dtype: DType, math: str = "fast", inner: list | None = None) -> L.Kernel:
    """The kernel of ``kind`` over the ``reduced`` coalesced dims of ``expression`` (a value of the
    group's IR whose Leaf i reads ``inputs[i]`` = (element type, packed), with per-dim block
    divisors ``blocks[i]`` and innermost stride ``inner[i]`` when it is 0 or 1)."""
    assert kind in KINDS and any(reduced)
    rank = len(reduced)
    layout = ReduceLayout(reduced)
    buffers = [L.Buffer(f"b{i}", elem, "in", packed) for i, (elem, packed) in enumerate(inputs)]
    out = L.Buffer("out0", out_dtype, "out")
    value = _value(expression, buffers, rank, blocks, inner or [None] * len(inputs))
    strides, acc_size = _acc_strides(layout)
    if kind == "softmax":
        body = _softmax_body(value, layout, rank, out, out_dtype, math, acc_size)
    else:
        acc_type = "bool" if value.dtype == "bool" else _acc_dtype(kind, value.dtype)
        acc = L.Buffer("acc_", _elem(acc_type), "temp")
        result = _finalize(kind, L.load(acc, _acc_index(layout)), value.dtype, out_dtype)
        per_outer = [*_reduce_pass(kind, value, acc, layout, rank, acc_type),
                     *_nest(layout.acc_dims, layout,
                            [L.Store(out, _out_index([k for k in range(rank) if not reduced[k]]), result)])]
        body = [L.Alloc(acc, acc_size), *_nest(list(range(layout.first)), layout, per_outer)]
        buffers.append(acc)
    temps = [b for b in _temps(body) if b not in buffers]
    return L.Kernel(f"reduce_{kind}", [*buffers, out, *temps], _params(rank, len(inputs)), [*strides, *body])


def _softmax_body(value, layout: ReduceLayout, rank: int, out: L.Buffer, out_dtype: DType, math: str, acc_size):
    """max pass, sum-of-exp pass, output pass (see the module docstring)."""
    fast = math == "fast" and value.dtype == "float32"
    domain = "float32" if fast else "float64"
    peak, total = L.Buffer("amax_", _elem(domain), "temp"), L.Buffer("asum_", _elem("float64"), "temp")
    v = kir.convert(value, domain)
    index = _acc_index(layout)
    top = L.load(peak, index)
    exponent = kir.unary("exp", kir.binary("sub", v, top))
    sum_pass = _reduce_pass("sum", exponent, total, layout, rank, "float64")
    scale = kir.binary("div", kir.const(1.0, "float64"), L.load(total, index))
    if fast:
        result = kir.binary("mul", exponent, kir.convert(scale, "float32"))
    else:
        result = kir.convert(kir.binary("mul", exponent, scale), value.dtype)
    output = _nest(list(range(layout.first, rank)), layout,
                   [L.Store(out, _out_index(range(rank)), kir.cast(kir.convert(result, value.dtype), out_dtype))])
    per_outer = [*_reduce_pass("max", v, peak, layout, rank, domain), *sum_pass, *output]
    return [L.Alloc(peak, acc_size), L.Alloc(total, acc_size), *_nest(list(range(layout.first)), layout, per_outer)]


def _elem(scalar: str) -> DType:
    return dtype_of({"float32": "float", "float64": "double"}.get(scalar, scalar))


def _temps(body: list) -> list:
    found = []
    for statement in body:
        if isinstance(statement, L.Alloc):
            found.append(statement.buffer)
        if isinstance(statement, L.For):
            found += _temps(statement.body)
    return found
