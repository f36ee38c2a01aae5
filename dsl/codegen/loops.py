"""The numba renderer of loop-nest kernels (dsl/kir/loops.py): a kernel becomes one
``@numba.njit`` function over flat raw buffers and uint64 parameters, statement for statement.

Unsigned index arithmetic: numba then skips negative-index wraparound, which lets LLVM
vectorize the inner loops (measured 1.6x); negative strides wrap modulo 2**64 and every partial
sum of a valid view's index is >= 0, so the indices are exact. Index arithmetic (uint64 add,
mul, floordiv, mod) is written inline where it is used, so loads read as ``b0[p0_0 + i1]``;
other expressions render through fused.Lines, loads through scalar.load.
"""
from __future__ import annotations

from ..kir import expr as kir
from ..kir import loops
from ..kir import types
from . import scalar
from .fused import PREAMBLE, Lines
from .prelude import TRUNC, helper_lines

_INDEX_OPS = {"add": "+", "mul": "*", "sub": "-"}


class _LoopLines(Lines):
    """Lines that also render Loads (decoded by element type), keeping the decode tables they
    need in ``helpers``, and write index arithmetic inline."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compound: set[int] = set()  # inline texts an operand must parenthesize

    def _arg(self, node) -> str:
        text = self.names[id(node)]
        return f"({text})" if id(node) in self.compound else text

    def _define(self, node):
        if isinstance(node, loops.Load):
            elem = node.buffer.elem
            if elem.onnx_name in scalar.TABLE_FLOATS:
                self.helpers.add(("table", elem.onnx_name, 0, ""))
            index = self.names[id(node.index)]
            if node.part is not None:
                text = scalar.load_part(elem, f"np.int32({node.buffer.name}[{index}])", node.part)
            elif node.raw:
                text = f"{node.buffer.name}[{index}]"
            else:
                text = scalar.load(elem, node.buffer.packed, node.buffer.name, index, f"_T_{elem.onnx_name}")
            if node.valid is not None:
                text = f"({text} if {self._arg(node.valid)} else {self._arg(node.default)})"
            return self._emit(text)
        if isinstance(node, kir.Binary) and node.dtype == loops.INDEX and node.op in (*_INDEX_OPS, "floordiv", "mod"):
            a, b = node.a, node.b
            if node.op == "add":  # (left-associative: a sum's left operand needs no parentheses)
                text = f"{self.names[id(a)]} + {self._arg(b) if _is(b, 'add', 'sub') else self.names[id(b)]}"
            elif node.op == "sub":
                text = f"{self.names[id(a)]} - {self._arg(b)}"
            elif node.op == "mul":
                left = self._arg(a) if _is(a, "add", "sub") else self.names[id(a)]
                right = self._arg(b) if _is(b, "add", "sub", "mul") else self.names[id(b)]
                text = f"{left} * {right}"
            else:
                return f"({self._arg(a)} {'//' if node.op == 'floordiv' else '%'} {self._arg(b)})"
            self.compound.add(id(node))
            return text
        if isinstance(node, kir.Binary) and node.op in ("max", "min") and node.dtype == loops.INDEX:
            return self._emit(f"{node.op}({self.names[id(node.a)]}, {self.names[id(node.b)]})")
        if node.children() and any(id(c) in self.compound for c in node.children()):
            saved = {id(c): self.names[id(c)] for c in node.children()}
            for c in node.children():
                self.names[id(c)] = self._arg(c)
            try:
                return super()._define(node)
            finally:
                self.names.update(saved)
        return super()._define(node)

    def _text(self, node, args):
        if isinstance(node, kir.Binary) and node.op in ("floordiv", "mod"):
            return f"({args[0]} {'//' if node.op == 'floordiv' else '%'} {args[1]})"
        return super()._text(node, args)


def _is(node, *ops) -> bool:
    return isinstance(node, kir.Binary) and node.dtype == loops.INDEX and node.op in ops


class _Renderer:
    def __init__(self, math: str, kernel: loops.Kernel):
        self.math, self.helpers, self.count = math, set(), 0
        # buffers a SIMD block transpose reads or writes as unsigned integers of their width: one
        # view each, made once (after a temp's allocation; a view inside the loop costs a
        # reference count update per block: transpose(x) + y 39 -> 48 ms)
        self.views = {}
        for s in loops.walk(kernel.body):
            if isinstance(s, loops.TransposeBlock) and _simd_transpose(s):
                for buffer in (s.src, s.dst):
                    self.views[buffer.name] = s.src.elem.bits

    def view_lines(self, name: str, pad: str) -> list[str]:
        bits = self.views.get(name)
        return [] if bits is None else [f"{pad}{name}_u{bits} = {name}.view(np.uint{bits})"]

    def expr(self, node, out: list[str], pad: str) -> str:
        """Statements computing ``node`` appended to ``out`` (at ``pad``); returns its text."""
        lines = _LoopLines(self.helpers, start=self.count, math=self.math, prefix="t")  # (t<N>: no param, var or buffer is so named)
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
                zero = isinstance(statement.start, kir.Const) and statement.start.value == 0
                span = stop if zero and _is_name(statement.stop) else f"np.uint64({start}), np.uint64({stop})"
                out.append(f"{pad}for {statement.var} in range({span}):")
                out += self.block(statement.body, pad + "    ") or [pad + "    pass"]
            elif isinstance(statement, loops.Assign):
                out.append(f"{pad}{statement.name} = {self.expr(statement.value, out, pad)}")
            elif isinstance(statement, loops.Accum):
                value = self.expr(statement.value, out, pad)
                out.append(f"{pad}{statement.name} = {_accumulate(statement.op, statement.name, value, statement.value.dtype)}")
            elif isinstance(statement, loops.Store):
                index = self.expr(statement.index, out, pad)
                elem = statement.buffer.elem
                if elem.onnx_name in scalar.TABLE_FLOATS:  # (stores re-encode exact values: fused._encode_stores)
                    self.helpers.add(("encode", elem.onnx_name, 0, "up"))
                value = self.expr(statement.value, out, pad)
                if not statement.raw:  # (raw: the storage bits already, dsl/kir/moves.py)
                    value = scalar.store(elem, value)
                out.append(_store(pad, statement.buffer.name, index, value, statement.stream))
            elif isinstance(statement, loops.Move):
                src = f"{statement.src.name}[{self.expr(statement.src_index, out, pad)}]"
                out.append(_store(pad, statement.dst.name, self.expr(statement.dst_index, out, pad), src,
                                  statement.stream))
            elif isinstance(statement, loops.Alloc):
                size = self.expr(statement.size, out, pad)
                out.append(f"{pad}{statement.buffer.name} = np.empty({size}, np.{types.storage(statement.buffer.elem)})")
                out += self.view_lines(statement.buffer.name, pad)
            elif isinstance(statement, loops.If):
                out.append(f"{pad}if {self.expr(statement.cond, out, pad)}:")
                out += self.block(statement.then, pad + "    ") or [pad + "    pass"]
                if statement.orelse:
                    out.append(f"{pad}else:")
                    out += self.block(statement.orelse, pad + "    ")
            elif isinstance(statement, loops.TransposeBlock):
                out += self._transpose(statement, pad)
            elif isinstance(statement, loops.Prefetch):
                out.append(f"{pad}_bits.prefetch({statement.buffer.name}, {self.expr(statement.index, out, pad)})")
        return out

    def _transpose(self, s: loops.TransposeBlock, pad: str) -> list[str]:
        """kernels/copy.py's SIMD block transpose on the buffers seen as unsigned integers of their
        width, when the square is 64 bytes of them; else two element loops."""
        out: list[str] = []
        src, src_stride = self.expr(s.src_index, out, pad), self.expr(s.src_stride, out, pad)
        dst, dst_stride = self.expr(s.dst_index, out, pad), self.expr(s.dst_stride, out, pad)
        bits = s.src.elem.bits
        if _simd_transpose(s):
            return out + [f"{pad}_copy.transpose_block({s.src.name}_u{bits}, {src}, {src_stride}, "
                          f"{s.dst.name}_u{bits}, {dst}, {dst_stride}, False)"]
        lanes = f"np.uint64({s.lanes})"
        return out + [f"{pad}for ta_ in range({lanes}):", f"{pad}    for tb_ in range({lanes}):",
                      f"{pad}        {s.dst.name}[{dst} + ta_ * {dst_stride} + tb_] = "
                      f"{s.src.name}[{src} + tb_ * {src_stride} + ta_]"]


def _simd_transpose(s: loops.TransposeBlock) -> bool:
    """kernels/copy.py transpose_block applies: squares of 64 bytes of 1, 2, 4 or 8-byte items."""
    bits = s.src.elem.bits
    return bits in (8, 16, 32, 64) and 512 // bits == s.lanes and s.src.elem.onnx_name != "bool"


def _is_name(node) -> bool:
    return isinstance(node, kir.Var)


def _store(pad: str, name: str, index: str, value: str, stream: bool) -> str:
    return f"{pad}_bits.stream_store({name}, {index}, {value})" if stream else f"{pad}{name}[{index}] = {value}"


def _accumulate(op: str, name: str, value: str, dtype: str) -> str:
    if op == "add":
        return f"_bits.add_step({name}, {value})"
    if op in ("maxnum", "minnum"):
        return f"_bits.{op}_step({name}, {value})"
    if types.is_float(dtype):
        return f"_bits.{op}imum_step({name}, {value})"
    return f"_bits.{op}_step({name}, {value})"


def kernel_source(kernel: loops.Kernel, math: str = "fast") -> str:
    """numba source of ``kernel``: a module whose function ``kernel`` takes its arguments
    (kernel.signature(): uint64 params, int64 ParamVectors, raw flat buffers) in order."""
    renderer = _Renderer(math, kernel)
    arguments, body = [], []
    for item in kernel.signature():
        if isinstance(item, loops.Buffer):
            arguments.append(item.name)
            body += renderer.view_lines(item.name, "    ")
        elif isinstance(item, loops.ParamVector):
            arguments.append(item.name)
            body += [f"    {name} = np.uint64({item.name}[{k}])" for k, name in enumerate(item.names)]
        else:
            arguments.append(item)
            body.append(f"    {item} = np.uint64({item})")
    body += renderer.block(kernel.body, "    ")
    if any(getattr(s, "stream", False) for s in loops.walk(kernel.body)):
        body.append("    _bits.stream_fence()")
    packed = sorted({scalar.packed_table_source(b.elem) for b in kernel.buffers if b.packed})
    lines = [PREAMBLE, TRUNC, *helper_lines(renderer.helpers), *packed, "",
             "@numba.njit(cache=True, nogil=True, error_model='numpy')",
             f"def kernel({', '.join(arguments)}):", *body]
    return "\n".join(lines) + "\n"
