"""The any-axis scan schedule: CumSum / CumProd along one axis, with the producer cone fused, as
one loop-nest kernel (dsl/kir/loops.py).

Loops follow the memory layout as the reduction schedule's do (dsl/kir/reduce_schedule.py, whose
layout and index helpers this reuses): dims before the scanned one index independent scans
(threads split the first of them); a scanned dim that is the innermost keeps its running value
in a scalar; otherwise the kept dims after it index a vector of running values that the
innermost contiguous dim walks (``acc[k] = acc[k] + x[r, k]; out[r, k] = acc[k]``: a scan over
axis 0 of a row-major matrix reads it once, row after row, and vectorizes across k).

The reference's arithmetic, one element after the other (numpy's cumsum / cumprod in T): a float
partial is rounded to T after every step (float16 and bfloat16 through float32, as numpy's own
float16 arithmetic does); integers run in uint64, which wraps as every narrower T does, and are
cast to T on the store. ``exclusive`` stores the running value before the step; ``reverse``
walks the axis from its end.
"""
from __future__ import annotations

from ..dtypes import DType
from . import expr as kir
from . import loops as L
from . import types
from .reduce_schedule import ReduceLayout, _acc_index, _acc_strides, _elem, _nest, _out_index, _params, _value

KINDS = ("cumsum", "cumprod")


def _domain(value_dtype: str) -> str:
    return value_dtype if types.is_float(value_dtype) else "uint64"


def scan_kernel(expression: kir.Expr, inputs: list, reduced: tuple, blocks: list, kind: str, out_dtype: DType,
                reverse: bool, exclusive: bool, inner: list | None = None) -> L.Kernel:
    """The kernel of ``kind`` along the one ``reduced`` coalesced dim of ``expression`` (a value of
    the group's IR whose Leaf i reads ``inputs[i]`` = (element type, packed), with block
    divisors ``blocks[i]`` and innermost stride ``inner[i]`` when it is 0 or 1); parameters as
    the reduction schedule's, the output written in full (os{k}: its C-order strides)."""
    assert kind in KINDS and sum(reduced) == 1
    rank = len(reduced)
    (r,) = [k for k in range(rank) if reduced[k]]
    layout = ReduceLayout(reduced)
    buffers = [L.Buffer(f"b{i}", elem, "in", packed) for i, (elem, packed) in enumerate(inputs)]
    value = _value(expression, buffers, rank, blocks, inner or [None] * len(inputs))
    domain = _domain(value.dtype)
    out = L.Buffer("out0", out_dtype, "out")
    identity = kir.const(0 if kind == "cumsum" else 1, domain)

    def step(running: kir.Expr) -> kir.Expr:
        moved = kir.binary("add" if kind == "cumsum" else "mul", running, kir.convert(value, domain))
        return kir.cast(moved, out_dtype) if types.is_float(domain) else moved  # (a float partial in T)

    def store(running: kir.Expr) -> L.Store:
        return L.Store(out, _out_index(range(rank)), kir.cast(running, out_dtype))

    if layout.acc_dims:  # a vector of running values over the kept dims after r
        acc = L.Buffer("acc_", _elem(domain), "temp")
        index = _acc_index(layout)
        running = L.load(acc, index)
        moved = [L.Assign("rnew_", step(running)), L.Store(acc, index, kir.var("rnew_", domain))]
        body = [store(running), *moved] if exclusive else [*moved, store(kir.var("rnew_", domain))]
        strides, size = _acc_strides(layout)
        per_outer = [*_nest(layout.acc_dims, layout, [L.Store(acc, index, identity)]),
                     _along(r, reverse, _nest(layout.acc_dims, layout, body))]
        statements = [*strides, L.Alloc(acc, size), *_nest(list(range(layout.first)), layout, per_outer)]
        temps = [acc]
    else:  # r is the innermost dim: a scalar running value
        running = kir.var("racc_", domain)
        body = [store(running), L.Assign("racc_", step(running))] if exclusive else \
            [L.Assign("racc_", step(running)), store(running)]
        per_outer = [L.Assign("racc_", identity), _along(r, reverse, body)]
        statements = _nest(list(range(layout.first)), layout, per_outer)
        temps = []
    return L.Kernel(kind, [*buffers, out, *temps], _params(rank, len(inputs)), statements)


def _along(r: int, reverse: bool, body: list) -> L.For:
    """The loop over the scanned dim r (never split between threads), from its end when ``reverse``."""
    high = L.index_var(f"n{r}")
    if not reverse:
        return L.For(f"i{r}", L.index(0), high, body)
    back = kir.binary("sub", kir.binary("sub", high, L.index(1)), L.index_var("ir_"))
    return L.For("ir_", L.index(0), high, [L.Assign(f"i{r}", back), *body])


__all__ = ["KINDS", "scan_kernel"]
