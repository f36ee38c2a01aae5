"""Loop nests of the kernel IR: a kernel is its buffers and integer parameters, and a body of
statements (loops, assignments, accumulations, stores) over scalar expressions (expr.py) that
may load from buffers at index expressions.

- ``Buffer(name, elem, role)``: a flat array of element type ``elem`` (an input read through
  ``Load``, an output written by ``Store`` (and read back where it stored), or a ``temp`` the
  kernel allocates with ``Alloc``).
  Packed 4-bit and 2-bit inputs are element-indexed too: a backend unpacks them in its loads.
- ``Load(buffer, index, valid, default, part)``: the element at ``index`` (uint64 expression),
  decoded into its compute domain; where ``valid`` is false, ``default`` (no read happens).
  With ``part`` (packed buffers only), ``index`` names a byte and ``part`` the element in it
  (0: the low bits): a loop over bytes decodes both nibbles of one load. With ``raw``, the
  element's storage bits as an unsigned integer (dsl/kir/moves.py: kernels that only move
  elements copy their bits).
- Index expressions are uint64 expressions of loop variables and parameters: add, mul,
  floordiv and mod (by constants for blocked parameters and reshapes), and loaded values
  converted to uint64 (gathers; the schedule validates them before the kernel runs).
- ``For(var, start, stop, body)`` loops ``var`` over [start, stop) (uint64); ``Assign`` binds
  (or rebinds) a named scalar; ``Accum(name, op, value)`` is ``name = op(name, value)`` that a
  backend may reassociate (vectorized sums and extremes: ACCUMULATIONS); ``Store`` writes an
  element (``stream``: a non-temporal store, the backend's choice of instruction; ``raw``: the value is
  the element's storage bits, as a raw Load gives them); ``Alloc`` gives a temp
  buffer ``size`` elements; ``If(cond, then, orelse)`` branches; ``Move(dst, di, src, si)``
  copies one element's storage bits; ``TransposeBlock`` copies a ``lanes`` x ``lanes`` square
  transposed (a SIMD shuffle where the backend has one); ``Prefetch`` is a read hint.
- A kernel's ``arguments`` fix its calling convention: parameter names, ``ParamVector``s (one
  int64 array argument whose elements bind several parameters: a shape, a leaf's strides)
  and buffers, in order.

Schedules (dsl/kir/schedules/) build these; renderers (dsl/codegen/loops.py for numba) and the
interpreter (dsl/kir/interp.py run_kernel) execute them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..dtypes import DType
from . import expr as kir
from . import types
from .expr import Expr, IRError, _require

INDEX = "uint64"


@dataclass(frozen=True, eq=False)
class Buffer:
    name: str
    elem: DType
    role: str = "in"  # in | out | temp
    packed: bool = False  # 4-bit / 2-bit elements two / four to a byte (ONNX raw layout)


@dataclass(frozen=True, eq=False)
class Load(Expr):
    buffer: Buffer | None = None
    index: Expr | None = None
    valid: Expr | None = None
    default: Expr | None = None
    part: int | None = None
    raw: bool = False

    def children(self) -> tuple:
        return tuple(c for c in (self.index, self.valid, self.default) if c is not None)


@dataclass
class For:
    var: str
    start: Expr
    stop: Expr
    body: list = field(default_factory=list)


@dataclass
class Assign:
    name: str
    value: Expr


# Accum ops. maxnum / minnum: max / min of floats that a backend may compute as if no value
# were NaN and either zero could win; a schedule using them checks for NaN and zero results
# itself and then reduces again with max / min (dsl/kir/reduce_schedule.py guarded_extreme).
ACCUMULATIONS = ("add", "max", "min", "maxnum", "minnum")


@dataclass
class Accum:
    name: str
    op: str  # one of ACCUMULATIONS
    value: Expr


@dataclass
class Store:
    buffer: Buffer
    index: Expr
    value: Expr
    stream: bool = False
    raw: bool = False


@dataclass
class Alloc:
    buffer: Buffer
    size: Expr


@dataclass
class If:
    cond: Expr
    then: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@dataclass
class Move:
    """dst[dst_index] = src[src_index], the element's storage bits (no decoding)."""

    dst: Buffer
    dst_index: Expr
    src: Buffer
    src_index: Expr
    stream: bool = False


@dataclass
class TransposeBlock:
    """dst[dst_index + a * dst_stride + b] = src[src_index + b * src_stride + a] for a, b <
    lanes (storage bits)."""

    src: Buffer
    src_index: Expr
    src_stride: Expr
    dst: Buffer
    dst_index: Expr
    dst_stride: Expr
    lanes: int


@dataclass
class Prefetch:
    """A hint that ``buffer[index]`` (clamped into the buffer) will be read soon; no effect."""

    buffer: Buffer
    index: Expr


@dataclass(frozen=True)
class ParamVector:
    """A kernel argument: an int64 vector whose element k is the uint64 parameter names[k]."""

    name: str
    names: tuple


@dataclass
class Kernel:
    """``params``: uint64 scalars the caller passes (sizes, strides, offsets, a thread's
    [start, stop)); ``arguments`` (default: the params, then the buffers of role in / out)
    orders them with the buffers, params possibly grouped in ParamVectors."""

    name: str
    buffers: list[Buffer]
    params: list[str]
    body: list
    arguments: list | None = None

    def signature(self) -> list:
        """The arguments in order: param names, ParamVectors and Buffers."""
        if self.arguments is not None:
            return list(self.arguments)
        return [*self.params, *[b for b in self.buffers if b.role != "temp"]]


def load(buffer: Buffer, index: Expr, valid: Expr | None = None, default: Expr | None = None,
         part: int | None = None, raw: bool = False) -> Load:
    dtype = types.storage(buffer.elem) if raw else types.domain(buffer.elem)
    _require(not (raw and (buffer.packed or part is not None)), f"load {buffer.name}: raw bits of packed elements")
    _require(index.dtype == INDEX, f"load {buffer.name}: index is {index.dtype}, not {INDEX}")
    if part is not None:
        _require(buffer.packed and 0 <= part < 8 // buffer.elem.bits,
                 f"load {buffer.name}: part {part} of a byte of {buffer.elem.onnx_name}")
    if valid is not None:
        _require(valid.dtype == "bool", f"load {buffer.name}: valid is {valid.dtype}, not bool")
        _require(default is not None and default.dtype == dtype, f"load {buffer.name}: needs a {dtype} default")
    return Load(dtype, buffer, index, valid, default, part, raw)


def index_var(name: str) -> kir.Var:
    return kir.var(name, INDEX)


def index(value: int) -> kir.Const:
    return kir.const(value, INDEX)


def add(*terms: Expr) -> Expr:
    """The uint64 sum of index terms (constants 0 dropped)."""
    live = [t for t in terms if not (isinstance(t, kir.Const) and t.value == 0)]
    if not live:
        return index(0)
    total = live[0]
    for term in live[1:]:
        total = kir.binary("add", total, term)
    return total


def mul(a: Expr, b: Expr) -> Expr:
    for x, y in ((a, b), (b, a)):
        if isinstance(x, kir.Const) and x.value == 1:
            return y
    return kir.binary("mul", a, b)


NEXT_ROW_BYTES = 4096  # prefetched of the next row, at most, by schedules that walk rows


def prefetch_run(buffer: Buffer, start: Expr, count: Expr, var: str = "f_", line_bytes: int = 64) -> For:
    """Prefetch hints for elements [start, start + count) of ``buffer``, one a cache line."""
    step = max(1, line_bytes // max(1, buffer.elem.bits // 8))
    lines = kir.binary("floordiv", add(count, index(step - 1)), index(step))
    return For(var, index(0), lines, [Prefetch(buffer, add(start, mul(index_var(var), index(step))))])


def walk(statements: list):
    """Every statement of ``statements``, nested ones (loop and branch bodies) after their parent."""
    for statement in statements:
        yield statement
        if isinstance(statement, For):
            yield from walk(statement.body)
        elif isinstance(statement, If):
            yield from walk(statement.then)
            yield from walk(statement.orelse)


def verify(kernel: Kernel) -> None:
    """IRError unless names are defined before use, every Load / Store names a buffer of the
    kernel with the right role (a Load of an output only after a Store to it), and every
    expression is well typed."""
    buffers = {id(b) for b in kernel.buffers}
    written = set()  # outputs stored so far, in program order: the kernel may read those back
    defined = set(kernel.params)
    for buffer in kernel.buffers:
        _require(buffer.role in ("in", "out", "temp"), f"buffer {buffer.name}: role {buffer.role!r}")

    def check_expr(node: Expr) -> None:
        for item in kir.postorder([node]):
            if isinstance(item, kir.Var):
                _require(item.name in defined, f"{kernel.name}: {item.name} is used before it is defined")
            if isinstance(item, Load):
                _require(id(item.buffer) in buffers and (item.buffer.role != "out" or id(item.buffer) in written),
                         f"{kernel.name}: load from {item.buffer.name}, not an input, a temp or an output the kernel writes")
        kir.verify([node])

    def walk_block(statements: list) -> None:
        for statement in statements:
            if isinstance(statement, For):
                check_expr(statement.start)
                check_expr(statement.stop)
                defined.add(statement.var)
                walk_block(statement.body)
            elif isinstance(statement, (Assign, Accum)):
                check_expr(statement.value)
                if isinstance(statement, Accum):
                    _require(statement.name in defined and statement.op in ACCUMULATIONS,
                             f"{kernel.name}: accumulation into {statement.name} ({statement.op})")
                defined.add(statement.name)
            elif isinstance(statement, Store):
                _require(id(statement.buffer) in buffers and statement.buffer.role in ("out", "temp"),
                         f"{kernel.name}: store to {statement.buffer.name}, not an output or temp")
                check_expr(statement.index)
                check_expr(statement.value)
                stored = types.storage if statement.raw else types.domain
                _require(statement.value.dtype == stored(statement.buffer.elem),
                         f"{kernel.name}: store of {statement.value.dtype} into {statement.buffer.name}")
                written.add(id(statement.buffer))
            elif isinstance(statement, Alloc):
                _require(statement.buffer.role == "temp", f"{kernel.name}: alloc of {statement.buffer.name}")
                check_expr(statement.size)
            elif isinstance(statement, If):
                check_expr(statement.cond)
                _require(statement.cond.dtype == "bool", f"{kernel.name}: if on a {statement.cond.dtype}")
                walk_block(statement.then)
                walk_block(statement.orelse)
            elif isinstance(statement, (Move, TransposeBlock)):
                moves = [(statement.dst, True), (statement.src, False)]
                for buffer, is_target in moves:
                    _require(id(buffer) in buffers and buffer.role in (("out", "temp") if is_target else ("in", "temp")),
                             f"{kernel.name}: {'copy to' if is_target else 'copy from'} {buffer.name}")
                    _require(not buffer.packed, f"{kernel.name}: element copy of packed {buffer.name}")
                _require(statement.dst.elem.bits == statement.src.elem.bits,
                         f"{kernel.name}: copy between {statement.src.elem.onnx_name} and {statement.dst.elem.onnx_name}")
                indices = [statement.dst_index, statement.src_index]
                if isinstance(statement, TransposeBlock):
                    indices += [statement.src_stride, statement.dst_stride]
                for item in indices:
                    check_expr(item)
                    _require(item.dtype == INDEX, f"{kernel.name}: copy index of {item.dtype}")
            elif isinstance(statement, Prefetch):
                _require(id(statement.buffer) in buffers, f"{kernel.name}: prefetch of {statement.buffer.name}")
                check_expr(statement.index)
            else:
                raise IRError(f"{kernel.name}: unknown statement {statement!r}")

    signature = kernel.signature()
    named = [n for item in signature if not isinstance(item, Buffer)
             for n in (item.names if isinstance(item, ParamVector) else (item,))]
    passed = [item for item in signature if isinstance(item, Buffer)]
    _require(sorted(named) == sorted(kernel.params) and len(passed) == len({id(b) for b in passed})
             and {id(b) for b in passed} == {id(b) for b in kernel.buffers if b.role != "temp"},
             f"{kernel.name}: the arguments do not pass each param and in / out buffer once")
    walk_block(kernel.body)
    allocated = {id(s.buffer) for s in walk(kernel.body) if isinstance(s, Alloc)}
    _require(all(id(b) in allocated for b in kernel.buffers if b.role == "temp"),
             f"{kernel.name}: a temp buffer is never allocated")


def format_kernel(kernel: Kernel) -> str:
    """Readable text of a kernel: one statement a line, expressions as nested calls."""
    def text(node: Expr) -> str:
        if isinstance(node, kir.Const):
            return repr(node.value)
        if isinstance(node, kir.Var):
            return node.name
        if isinstance(node, Load):
            base = f"{node.buffer.name}[{text(node.index)}]" + (f".part{node.part}" if node.part is not None else "")
            return base if node.valid is None else f"({base} if {text(node.valid)} else {text(node.default)})"
        if isinstance(node, kir.Leaf):
            return f"leaf{node.index}"
        label = getattr(node, "op", None) or getattr(node, "fn", None) or type(node).__name__.lower()
        if isinstance(node, kir.Cast):
            label = f"cast<{node.to.onnx_name}>"
        elif isinstance(node, kir.Convert):
            label = f"convert<{node.dtype}>"
        return f"{label}({', '.join(text(c) for c in node.children())})"

    lines = [f"kernel {kernel.name}({', '.join(f'{b.name}: {b.role} {b.elem.onnx_name}' for b in kernel.buffers)}; "
             f"{', '.join(kernel.params)})"]

    def walk(statements: list, depth: int) -> None:
        pad = "  " * depth
        for s in statements:
            if isinstance(s, For):
                lines.append(f"{pad}for {s.var} in [{text(s.start)}, {text(s.stop)}):")
                walk(s.body, depth + 1)
            elif isinstance(s, Assign):
                lines.append(f"{pad}{s.name} = {text(s.value)}")
            elif isinstance(s, Accum):
                lines.append(f"{pad}{s.name} = {s.op}!({s.name}, {text(s.value)})")
            elif isinstance(s, Store):
                lines.append(f"{pad}{s.buffer.name}[{text(s.index)}] = {text(s.value)}" + ("  # stream" if s.stream else ""))
            elif isinstance(s, Alloc):
                lines.append(f"{pad}{s.buffer.name} = alloc({text(s.size)})")
            elif isinstance(s, If):
                lines.append(f"{pad}if {text(s.cond)}:")
                walk(s.then, depth + 1)
                if s.orelse:
                    lines.append(f"{pad}else:")
                    walk(s.orelse, depth + 1)
            elif isinstance(s, Move):
                lines.append(f"{pad}{s.dst.name}[{text(s.dst_index)}] = bits {s.src.name}[{text(s.src_index)}]"
                             + ("  # stream" if s.stream else ""))
            elif isinstance(s, TransposeBlock):
                lines.append(f"{pad}transpose<{s.lanes}>({s.dst.name}[{text(s.dst_index)}; {text(s.dst_stride)}] "
                             f"<- {s.src.name}[{text(s.src_index)}; {text(s.src_stride)}])")
            elif isinstance(s, Prefetch):
                lines.append(f"{pad}prefetch {s.buffer.name}[{text(s.index)}]")
    walk(kernel.body, 1)
    return "\n".join(lines)


__all__ = ["ACCUMULATIONS", "Accum", "Alloc", "Assign", "Buffer", "For", "INDEX", "If", "Kernel", "Load", "Move", "ParamVector",
           "Prefetch", "Store", "TransposeBlock", "add", "format_kernel", "index", "index_var", "load", "mul", "prefetch_run",
           "verify", "walk", "IRError"]
