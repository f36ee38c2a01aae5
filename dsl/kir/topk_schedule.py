"""The TopK schedule: the k largest (or smallest) elements along one axis and their indices, with
the producer cone fused, as one loop-nest kernel (dsl/kir/loops.py).

Per row (every index of the kept dims; threads split the first kept dim), two temp buffers hold
the best k so far, sorted: values ``tv_`` and indices ``ti_``. The first k elements are inserted
one by one; the rest go by blocks of BLOCK: a block's extreme (a vectorized reduction) is
compared with the k-th best, and only a block that beats it is scanned element by element (on
random logits almost every block is skipped after the first few, so the row costs about one
vectorized pass). An element is inserted at the count of kept ones at least as good as it, the
worse ones shifted down. The order is the reference's (dsl/ops/scan.py topk_order): descending
(ascending when not ``largest``), a NaN above every number, equal values (-0 and +0 too) by
increasing index (an element never displaces an equal earlier one). The temps hold elements of
T, so a NaN's payload survives as TopK's Values want (dsl/kir/moves.py makes the copies raw).
"""
from __future__ import annotations

from ..dtypes import DType, dtype as dtype_of
from . import expr as kir
from . import loops as L
from . import types
from .moves import raw_moves
from .reduce_schedule import _init, _params, _value

BLOCK = 1024  # elements per skipped block: its extreme is one vectorized reduction
_INT64 = dtype_of("int64")


def _beats(largest: bool, a: kir.Expr, b: kir.Expr) -> kir.Expr:
    """Whether value ``a`` (at a later index) sorts strictly before value ``b``."""
    if largest:
        found = kir.compare("gt", a, b)
        if types.is_float(a.dtype):  # (a NaN above every number)
            found = kir.binary("or", found, kir.binary("and", kir.compare("ne", a, a), kir.compare("eq", b, b)))
    else:
        found = kir.compare("lt", a, b)
        if types.is_float(a.dtype):  # (every number before a NaN)
            found = kir.binary("or", found, kir.binary("and", kir.compare("ne", b, b), kir.compare("eq", a, a)))
    return found


def topk_kernel(expression: kir.Expr, inputs: list, reduced: tuple, blocks: list, out_dtype: DType,
                largest: bool, inner: list | None = None) -> L.Kernel:
    """The kernel along the one ``reduced`` coalesced dim r of ``expression`` (inputs, blocks and
    inner as the reduction schedule's); params as the reduction schedule's plus ``k``, os{d}
    the outputs' C-order strides (r of extent k). out0: values (``out_dtype``), out1: int64
    indices."""
    rank = len(reduced)
    (r,) = [d for d in range(rank) if reduced[d]]
    kept = [d for d in range(rank) if not reduced[d]]
    buffers = [L.Buffer(f"b{i}", elem, "in", packed) for i, (elem, packed) in enumerate(inputs)]
    value = _value(expression, buffers, rank, blocks, inner or [None] * len(inputs))
    values, indices = L.Buffer("out0", out_dtype, "out"), L.Buffer("out1", _INT64, "out")
    tv, ti = L.Buffer("tv_", out_dtype, "temp"), L.Buffer("ti_", _INT64, "temp")
    U, k, n = L.index_var, L.index_var("k"), L.index_var(f"n{r}")
    position = U(f"i{r}")
    worst = L.load(tv, kir.binary("sub", k, L.index(1)))

    def insert() -> list:
        """The element at i{r} into the first ``filled_`` slots (k at most)."""
        filled, at = U("filled_"), U("at_")
        better = kir.select(_beats(largest, value, L.load(tv, U("s_"))), L.index(0), L.index(1))
        top = kir.binary("min", filled, kir.binary("sub", k, L.index(1)))
        moved = kir.binary("sub", kir.binary("sub", top, L.index(1)), U("q_"))
        return [L.Assign("at_", L.index(0)),
                L.For("s_", L.index(0), filled, [L.Accum("at_", "add", better)]),
                L.For("q_", L.index(0), kir.binary("sub", top, at), [
                    L.Store(tv, L.add(moved, L.index(1)), L.load(tv, moved)),
                    L.Store(ti, L.add(moved, L.index(1)), L.load(ti, moved))]),
                L.Store(tv, at, kir.cast(value, out_dtype)),
                L.Store(ti, at, kir.convert(position, "int64")),
                L.Assign("filled_", kir.binary("min", L.add(filled, L.index(1)), k))]

    extreme = "max" if largest else "min"
    block_value = value
    if not largest and types.is_float(value.dtype):  # (a NaN must not hide a smaller number)
        block_value = kir.select(kir.compare("ne", value, value), _init("min", value.dtype), value)
    first = L.For(f"i{r}", L.index(0), k, insert())
    low = L.add(k, L.mul(U("ab_"), L.index(BLOCK)))
    high = kir.binary("min", L.add(low, L.index(BLOCK)), n)
    count = kir.binary("floordiv", L.add(kir.binary("sub", n, k), L.index(BLOCK - 1)), L.index(BLOCK))
    rest = L.For("ab_", L.index(0), count, [
        L.Assign("rext_", _init(extreme, value.dtype)),
        L.For(f"i{r}", low, high, [L.Accum("rext_", extreme, block_value)]),
        L.If(_beats(largest, kir.var("rext_", value.dtype), worst), [
            L.For(f"i{r}", low, high, [L.If(_beats(largest, value, worst), insert())])])])
    slot = U("j_")
    where = L.add(*[L.mul(U(f"i{d}"), U(f"os{d}")) for d in kept], L.mul(slot, U(f"os{r}")))
    store = L.For("j_", L.index(0), k, [L.Store(values, where, L.load(tv, slot)),
                                        L.Store(indices, where, L.load(ti, slot))])
    body = [L.Assign("filled_", L.index(0)), first, rest, store]
    for d in reversed(kept):
        low_d, high_d = (U("start"), U("stop")) if d == kept[0] else (L.index(0), U(f"n{d}"))
        body = [L.For(f"i{d}", low_d, high_d, body)]
    statements = [L.Alloc(tv, k), L.Alloc(ti, k), *raw_moves(body)]
    return L.Kernel("topk", [*buffers, values, indices, tv, ti], [*_params(rank, len(inputs)), "k"], statements)


__all__ = ["BLOCK", "topk_kernel"]
