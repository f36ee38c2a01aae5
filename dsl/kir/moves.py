"""Bit-exact moves, a backend-neutral pass on loop-nest kernels (dsl/kir/loops.py).

A load of float16, bfloat16 or an 8-bit float decodes into float32 and a store encodes back;
the round trip rounds exactly, but it quiets a signaling NaN (float16) and drops a NaN's payload
(bfloat16). Gather, Concat, Tile, Trilu and Where copy elements, bits and all. So a store whose
value only moves loaded elements of its own type (loads, guarded or not, and float constants,
selected between) becomes a raw store of the same expression over raw loads: the storage bits
as unsigned integers (a constant as its value stored in the type). It runs before hoisting.
"""
from __future__ import annotations

import numpy as np

from . import expr as kir
from . import loops as L
from . import types


def _decoded(elem) -> bool:
    return elem.onnx_name in ("float16", "bfloat16") or elem.onnx_name in types.TABLE_FLOATS


def raw_bits(value: kir.Expr, elem) -> kir.Expr | None:
    """``value`` over the storage bits of ``elem`` when it only moves elements of ``elem``, else None."""
    storage = types.storage(elem)
    memo: dict[int, kir.Expr | None] = {}

    def bits(node):
        if id(node) in memo:
            return memo[id(node)]
        found = None
        if isinstance(node, kir.Cast) and node.to == elem:
            found = bits(node.x)
        elif isinstance(node, L.Load) and not node.raw and node.part is None and not node.buffer.packed and \
                node.buffer.elem == elem:
            default = None if node.valid is None else kir.const(0, storage)
            found = L.load(node.buffer, node.index, node.valid, default, raw=True)
        elif isinstance(node, kir.Const) and types.is_float(node.dtype):
            found = kir.const(int(np.asarray(node.value, np.float64).astype(elem.np_dtype).view(storage)), storage)
        elif isinstance(node, kir.Select):
            a, b = bits(node.a), bits(node.b)
            found = None if a is None or b is None else kir.select(node.cond, a, b)
        memo[id(node)] = found
        return found
    return bits(value)


def raw_moves(statements: list) -> list:
    """``statements`` with each store that only moves elements (see the module docstring) made raw."""
    out = []
    for statement in statements:
        if isinstance(statement, L.For):
            statement = L.For(statement.var, statement.start, statement.stop, raw_moves(statement.body))
        elif isinstance(statement, L.If):
            statement = L.If(statement.cond, raw_moves(statement.then), raw_moves(statement.orelse))
        elif isinstance(statement, L.Store) and not statement.raw and _decoded(statement.buffer.elem):
            moved = raw_bits(statement.value, statement.buffer.elem)
            if moved is not None:
                statement = L.Store(statement.buffer, statement.index, moved, statement.stream, raw=True)
        out.append(statement)
    return out


__all__ = ["raw_bits", "raw_moves"]
