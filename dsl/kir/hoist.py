"""Loop-invariant code motion on loop-nest kernels (dsl/kir/loops.py), a backend-neutral pass.

For each ``For``, the largest subexpressions of its body that do not change from one iteration
to the next (no loop variable, no name assigned in the body, no load from a buffer the body
writes) are computed once before the loop, as ``Assign``s of fresh names ``h<N>_``; the hoisted
assignments of inner loops move further out while they stay invariant. Loads of leaves
broadcast along the inner dim, and what is computed from them alone, then run once per row.

This matters beyond speed: LLVM's loop vectorizer takes time exponential in the depth of a
loop-invariant chain left inside the loop (4 float16 round trips in a row kernel: minutes).

A hoisted expression is evaluated where its loop begins even when the loop runs no iteration,
so a schedule applies this only where that is safe: every load it could hoist reads a valid
index whenever the loop is reached (an elementwise kernel over a non-empty domain).
"""
from __future__ import annotations

from itertools import count

from . import expr as kir
from . import loops as L

PREFIX = "h"


def hoist(body: list) -> list:
    """``body`` (a kernel's statements) with invariant code moved out of every loop."""
    return _Hoister().block(body)


def _assigned(statements: list, names: set, stored: set) -> None:
    """Collect the names a block assigns (loop vars included) and the buffers it writes."""
    for s in statements:
        if isinstance(s, L.For):
            names.add(s.var)
            _assigned(s.body, names, stored)
        elif isinstance(s, (L.Assign, L.Accum)):
            names.add(s.name)
        elif isinstance(s, L.If):
            _assigned(s.then, names, stored)
            _assigned(s.orelse, names, stored)
        elif isinstance(s, L.Store):
            stored.add(id(s.buffer))
        elif isinstance(s, (L.Move, L.TransposeBlock)):
            stored.add(id(s.dst))
        elif isinstance(s, L.Alloc):
            stored.add(id(s.buffer))


def _hoisted_name(name: str) -> bool:
    return name.startswith(PREFIX) and name.endswith("_") and name[len(PREFIX):-1].isdigit()


class _Hoister:
    def __init__(self):
        self.names = count()

    def block(self, statements: list) -> list:
        out = []
        for s in statements:
            if isinstance(s, L.For):
                out += self.loop(s)
            elif isinstance(s, L.If):
                out.append(L.If(s.cond, self.block(s.then), self.block(s.orelse)))
            else:
                out.append(s)
        return out

    def loop(self, loop: L.For) -> list:
        """(assignments hoisted before ``loop``, then the loop with its body rewritten)."""
        body = self.block(loop.body)  # (inner loops first: their hoisted values may move further)
        variant, stored = {loop.var}, set()
        _assigned(body, variant, stored)
        before, kept = [], []
        for s in body:  # a hoisted assignment of an inner loop moves on while it stays invariant
            if isinstance(s, L.Assign) and _hoisted_name(s.name) and self._invariant(s.value, variant - {s.name}, stored):
                before.append(s)
            else:
                kept.append(s)
        variant -= {s.name for s in before}
        memo: dict[int, kir.Expr] = {}
        rewritten = [self._statement(s, variant, stored, memo, before) for s in kept]
        return [*before, L.For(loop.var, loop.start, loop.stop, rewritten)]

    def _invariant(self, node: kir.Expr, variant: set, stored: set) -> bool:
        for item in kir.postorder([node]):
            if isinstance(item, kir.Var) and item.name in variant:
                return False
            if isinstance(item, L.Load) and id(item.buffer) in stored:
                return False
        return True

    def _expr(self, node: kir.Expr, variant: set, stored: set, memo: dict, before: list) -> kir.Expr:
        """``node`` with each largest invariant, non-trivial subexpression replaced by a hoisted name."""
        fixed: dict[int, bool] = {}
        for item in kir.postorder([node]):
            own = not ((isinstance(item, kir.Var) and item.name in variant)
                       or (isinstance(item, L.Load) and id(item.buffer) in stored))
            fixed[id(item)] = own and all(fixed[id(c)] for c in item.children())

        def rewrite(item: kir.Expr) -> kir.Expr:
            if id(item) in memo:
                return memo[id(item)]
            if fixed[id(item)] and not isinstance(item, (kir.Const, kir.Var)):
                name = f"{PREFIX}{next(self.names)}_"
                before.append(L.Assign(name, item))
                result = kir.var(name, item.dtype)
            elif not item.children():
                result = item
            else:
                children = [rewrite(c) for c in item.children()]
                same = all(a is b for a, b in zip(children, item.children()))
                result = item if same else kir.with_children(item, children)
            memo[id(item)] = result
            return result
        return rewrite(node)

    def _statement(self, s, variant: set, stored: set, memo: dict, before: list):
        e = lambda node: self._expr(node, variant, stored, memo, before)  # noqa: E731
        if isinstance(s, L.For):
            return L.For(s.var, e(s.start), e(s.stop), s.body)
        if isinstance(s, L.Assign):
            return L.Assign(s.name, e(s.value))
        if isinstance(s, L.Accum):
            return L.Accum(s.name, s.op, e(s.value))
        if isinstance(s, L.Store):
            return L.Store(s.buffer, e(s.index), e(s.value), s.stream, s.raw)
        if isinstance(s, L.If):
            return L.If(e(s.cond), s.then, s.orelse)
        if isinstance(s, L.Move):
            return L.Move(s.dst, e(s.dst_index), s.src, e(s.src_index), s.stream)
        if isinstance(s, L.TransposeBlock):
            return L.TransposeBlock(s.src, e(s.src_index), e(s.src_stride), s.dst, e(s.dst_index), e(s.dst_stride),
                                    s.lanes)
        if isinstance(s, L.Prefetch):
            return L.Prefetch(s.buffer, e(s.index))
        return s


__all__ = ["hoist"]
