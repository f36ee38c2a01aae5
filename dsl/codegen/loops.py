"""The numba renderer of loop-nest kernels (dsl/kir/loops.py): a kernel becomes one
``@numba.njit`` function over flat raw buffers and uint64 parameters, statement for statement.

Unsigned index arithmetic (as in source.py): numba then skips negative-index wraparound and
LLVM vectorizes the loops. Expressions render through fused.Lines, loads through scalar.load.
"""
from __future__ import annotations

from ..kir import expr as kir
from ..kir import loops
from ..kir import types
from . import scalar
from .fused import PREAMBLE, Lines
from .source import _TRUNC, _helpers


class _LoopLines(Lines):
    """Lines that also render Loads (decoded by element type) and put them in ``helpers``."""

    def _define(self, node):
        if isinstance(node, loops.Load):
            elem = node.buffer.elem
            if elem.onnx_name in scalar.TABLE_FLOATS:
                self.helpers.add(("table", elem.onnx_name, 0, ""))
            text = scalar.load(elem, node.buffer.packed, node.buffer.name, self.names[id(node.index)],
                               f"_T_{elem.onnx_name}")
            if node.valid is not None:
                text = f"({text} if {self.names[id(node.valid)]} else {self.names[id(node.default)]})"
            return self._emit(text)
        return super()._define(node)

    def _text(self, node, args):
        if isinstance(node, kir.Binary) and node.op in ("floordiv", "mod"):
            return f"({args[0]} {'//' if node.op == 'floordiv' else '%'} {args[1]})"
        return super()._text(node, args)


class _Renderer:
    def __init__(self, math: str):
        self.math, self.helpers, self.count = math, set(), 0

    def expr(self, node, out: list[str], pad: str) -> str:
        """Statements computing ``node`` appended to ``out`` (at ``pad``); returns its text."""
        lines = _LoopLines(self.helpers, start=self.count, math=self.math, prefix="e_")  # (apart from params)
        name = lines.value(node)
        self.count = lines.count
        out += [pad + line for line in lines.lines]
        return name

    def block(self, statements: list, pad: str) -> list[str]:
        out: list[str] = []
        for statement in statements:
            if isinstance(statement, loops.For):
                start = self.expr(statement.start, out, pad)
                stop = self.expr(statement.stop, out, pad)
                out.append(f"{pad}for {statement.var} in range(np.uint64({start}), np.uint64({stop})):")
                out += self.block(statement.body, pad + "    ") or [pad + "    pass"]
            elif isinstance(statement, loops.Assign):
                out.append(f"{pad}{statement.name} = {self.expr(statement.value, out, pad)}")
            elif isinstance(statement, loops.Accum):
                value = self.expr(statement.value, out, pad)
                out.append(f"{pad}{statement.name} = {_accumulate(statement.op, statement.name, value, statement.value.dtype)}")
            elif isinstance(statement, loops.Store):
                index = self.expr(statement.index, out, pad)
                value = scalar.store(statement.buffer.elem, self.expr(statement.value, out, pad))
                name = statement.buffer.name
                out.append(f"{pad}_bits.stream_store({name}, {index}, {value})" if statement.stream
                           else f"{pad}{name}[{index}] = {value}")
            elif isinstance(statement, loops.Alloc):
                size = self.expr(statement.size, out, pad)
                out.append(f"{pad}{statement.buffer.name} = np.empty({size}, np.{types.storage(statement.buffer.elem)})")
        return out


def _accumulate(op: str, name: str, value: str, dtype: str) -> str:
    if op == "add":
        return f"_bits.add_step({name}, {value})"
    if types.is_float(dtype):
        return f"_bits.{op}imum_step({name}, {value})"
    return f"_bits.{op}_step({name}, {value})"


def kernel_source(kernel: loops.Kernel, math: str = "fast") -> str:
    """numba source of ``kernel``: a module whose function ``kernel`` takes the parameters, then
    the in / out buffers, in the kernel's order."""
    renderer = _Renderer(math)
    body = [f"    {name} = np.uint64({name})" for name in kernel.params]
    body += renderer.block(kernel.body, "    ")
    if any(isinstance(s, loops.Store) and s.stream for s in _walk(kernel.body)):
        body.append("    _bits.stream_fence()")
    arguments = list(kernel.params) + [b.name for b in kernel.buffers if b.role != "temp"]

    class _Helpers:  # what source._helpers reads
        helpers = renderer.helpers
    packed = sorted({scalar.packed_table_source(b.elem) for b in kernel.buffers if b.packed})
    lines = [PREAMBLE, _TRUNC, *_helpers(_Helpers), *packed, "",
             "@numba.njit(cache=True, nogil=True, error_model='numpy')",
             f"def kernel({', '.join(arguments)}):", *body]
    return "\n".join(lines) + "\n"


def _walk(statements: list):
    for statement in statements:
        yield statement
        if isinstance(statement, loops.For):
            yield from _walk(statement.body)
