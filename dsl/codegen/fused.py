"""The numba rendering of a fused group's kernel-IR expressions (dsl/kir/group.py): each IR node
becomes one statement ``tN = <numba expression>`` of the kernel body, each group input a
``LOADi`` placeholder that the loop templates (source.py) replace by the load for its layout.

This module and its siblings are the only code that knows numba, ``np.*`` scalar functions and
the ``kernels`` helpers' names. ``math="exact"`` renders float math as libm calls (bit-identical
with numpy's scalar functions); ``math="fast"`` as kernels/vmath.py's vectorizable versions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import kir
from ..dtypes import DType
from ..ir import Value
from ..kir import types
from ..kir.group import Group, constant
from . import scalar

# The generated module imports these; kernels are plain functions over raw buffers.
PREAMBLE = """\
import math

import numba
import numpy as np
from kernels import bits as _bits
from kernels import floats as _floats
from kernels import packed as _packed
from kernels import vmath as _vmath


@numba.njit(cache=True, nogil=True, inline="always")
def _c_div(a, b):
    # signed integer division truncating toward zero (C); b == 0 gives 0 (error_model='numpy');
    # x / -1 is the wrapping negation: minimum / -1 overflows in hardware (numba's // gave 0
    # for int64), numpy and the reference give the minimum itself
    if b == 0:
        return a - a
    if b == -1:
        return a - a - a
    q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q += 1
    return q


@numba.njit(cache=True, nogil=True, inline="always")
def _c_div_unsigned(a, b):
    # (no sign correction: an int literal added to uint64 would make numba compute in float64)
    if b == 0:
        return a - a
    return a // b
"""


@dataclass
class RenderedEpilogue:
    """An epilogue as statements: ``lines`` compute ``out_vars`` from ``row_var``."""

    sinks: list[Value]
    row_var: str
    row_dtype: DType
    nodes: list
    lines: list[str] = field(default_factory=list)
    out_vars: list[str] = field(default_factory=list)


@dataclass
class Rendered:
    """A group as statements: ``lines`` (the innermost loop body, LOADi placeholders for the
    inputs) compute ``out_vars``, one per sink; ``helpers`` names the module-level decode
    tables and encoders they use, as (kind, format, saturate, round_mode)."""

    sinks: list[Value]
    shape: tuple
    leaves: list
    nodes: list
    lines: list[str] = field(default_factory=list)
    out_vars: list[str] = field(default_factory=list)
    helpers: set = field(default_factory=set)
    epilogue: RenderedEpilogue | None = None


def render(group: Group, math: str = "exact") -> Rendered:
    """The statements of ``group``'s expressions (and its epilogue's)."""
    out = Rendered(group.sinks, group.shape, group.leaves, group.nodes)
    lines = Lines(out.helpers, math=math)
    out.out_vars = [lines.value(e) for e in group.outputs]
    out.lines = lines.lines
    _encode_stores(out.helpers, group.sinks)
    if group.epilogue is not None:
        epilogue = group.epilogue
        row_var = f"t{lines.count}"
        tail = Lines(out.helpers, start=lines.count + 1, math=math, variables={epilogue.row.name: row_var})
        out.epilogue = RenderedEpilogue(epilogue.sinks, row_var, epilogue.row_dtype, epilogue.nodes)
        out.epilogue.out_vars = [tail.value(e) for e in epilogue.outputs]
        out.epilogue.lines = tail.lines
        _encode_stores(out.helpers, epilogue.sinks)
    return out


def _encode_stores(helpers: set, sinks: list[Value]) -> None:
    for sink in sinks:  # stores re-encode table floats (exact values, kept as they are)
        if sink.type.dtype.onnx_name in scalar.TABLE_FLOATS:
            helpers.add(("encode", sink.type.dtype.onnx_name, 0, "up"))


def _literal(array: np.ndarray, dt: DType) -> str | None:
    """A scalar constant inlined as a typed literal (None if it is not a native scalar)."""
    node = constant(array, dt)
    return None if node is None else literal(node)


_SPECIAL = {"inf": "np.inf", "-inf": "-np.inf", "nan": "np.nan"}


def literal(node: kir.Const) -> str:
    """numba source of an IR constant, exact (floats by repr, inf / nan spelled np.*)."""
    if node.dtype == "bool":
        return "True" if node.value else "False"
    if types.is_float(node.dtype):
        text = repr(float(node.value))
        return f"np.{node.dtype}({_SPECIAL.get(text, text)})"
    return f"np.{node.dtype}({int(node.value)})"


# numba computes int8 .. int32 (and their unsigned kin) arithmetic in 64 bits: results wrap back
_NARROW_INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "!=",
           "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LIBM = ("exp", "log", "sqrt", "tanh", "expm1", "log1p", "sin", "cos")


class Lines:
    """Renders IR nodes as numba statements ``tN = <expr>`` (each node once, operands first);
    constants are inlined, Vars are the names in ``variables`` (else their own)."""

    def __init__(self, helpers: set, start: int = 0, math: str = "exact", variables: dict | None = None,
                 prefix: str = "t"):
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.helpers, self.count, self.math = helpers, start, math
        self.variables = variables or {}
        self.prefix = prefix

    def value(self, node: kir.Expr) -> str:
        """The name (or literal) holding ``node``'s value, emitting what it needs."""
        for item in kir.postorder([node]):
            if id(item) not in self.names:
                self.names[id(item)] = self._define(item)
        return self.names[id(node)]

    def _emit(self, text: str) -> str:
        name = f"{self.prefix}{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {text}")
        return name

    def _define(self, node: kir.Expr) -> str:
        if isinstance(node, kir.Const):
            return literal(node)
        if isinstance(node, kir.Var):
            return self.variables.get(node.name, node.name)
        if isinstance(node, kir.Leaf):
            if node.elem.onnx_name in scalar.TABLE_FLOATS:
                self.helpers.add(("table", node.elem.onnx_name, 0, ""))
            return self._emit(f"LOAD{node.index}")
        return self._emit(self._text(node, [self.names[id(c)] for c in node.children()]))

    def _text(self, node: kir.Expr, args: list[str]) -> str:
        fast = self.math == "fast" and node.dtype == "float32"
        if isinstance(node, kir.Unary):
            if fast and node.op in VMATH:
                return f"_vmath.{node.op}_f32({args[0]})"
            return _wrap(node.dtype, _unary(node.op, args[0], node.dtype))
        if isinstance(node, kir.Binary):
            cheap = _cheap_form(node, args, fast)
            if cheap is not None:
                return cheap
            if fast and node.op == "pow":
                return f"_vmath.pow_f32({args[0]}, {args[1]})"
            return _wrap(node.dtype, _binary(node.op, args[0], args[1], node.a.dtype))
        if isinstance(node, kir.Compare):
            return f"({args[0]} {_SYMBOL[node.op]} {args[1]})"
        if isinstance(node, kir.Select):
            return f"({args[1]} if {args[0]} else {args[2]})"
        if isinstance(node, kir.Convert):
            return f"({args[0]} != 0)" if node.dtype == "bool" else f"np.{node.dtype}({args[0]})"
        if isinstance(node, kir.Cast):
            name = node.to.onnx_name
            if name in scalar.TABLE_FLOATS:
                self.helpers.add(("encode", name, int(node.saturate), node.round_mode))
            return scalar.coerce(args[0], types.numpy_name(node.x.dtype), node.to, node.saturate, node.round_mode)
        if isinstance(node, kir.Call):
            return f"_bits.{node.fn}({', '.join(args)})"
        raise AssertionError(f"no numba rendering for {type(node).__name__}")


VMATH = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "sin", "cos", "softplus")  # kernels/vmath.py


def _cheap_form(node: kir.Binary, args: list[str], fast: bool) -> str | None:
    """A cheaper spelling of a division or power by a constant, or None.

    - x / 2**k (k in [-126, 126]) is x * 2**-k in every mode: both are the correctly rounded
      value of the same real number, so the bits are identical.
    - With fast math, x ** c for c in {2, 3, 4, -1} becomes multiplications (x ** 2 is even
      correctly rounded, as IEEE pow; 3 and 4 round twice, within 1 ulp), x ** 0.5 sqrt (with
      pow's sign rules: +0 for -0, +inf for -inf), x ** 1 x and x ** 0 one (exactly pow's).
    """
    if not isinstance(node.b, kir.Const) or not kir.types.is_float(node.dtype):
        return None
    x, c, dtype = args[0], node.b.value, node.dtype
    if node.op == "div":
        mantissa, exponent = math.frexp(c) if math.isfinite(c) and c != 0 else (0.0, 0)
        if abs(mantissa) == 0.5 and -125 <= exponent - 1 <= 126:
            return f"({x} * np.{dtype}({repr(1.0 / c)}))"
        return None
    if node.op != "pow" or not fast:
        return None
    forms = {2.0: f"({x} * {x})", 3.0: f"(({x} * {x}) * {x})", 4.0: f"(({x} * {x}) * ({x} * {x}))",
             -1.0: f"(np.{dtype}(1) / {x})", 1.0: x, 0.0: f"np.{dtype}(1)",
             0.5: f"(np.{dtype}(np.inf) if {x} == -np.inf else np.sqrt({x}) + np.{dtype}(0))"}
    return forms.get(c)


def _wrap(dtype: str, text: str) -> str:
    return f"np.{dtype}({text})" if dtype in _NARROW_INTS else text


def _unary(op: str, a: str, dtype: str) -> str:
    if op == "neg":
        return f"np.int64(np.uint64(0) - np.uint64({a}))" if dtype == "int64" else f"(-{a})"
    if op == "abs":
        return f"({a} if {a} >= 0 else {_unary('neg', a, dtype)})" if dtype == "int64" else f"abs({a})"
    if op == "not":
        return f"(not {a})"
    if op in _LIBM:
        return f"np.{op}({a})"
    one = f"np.{dtype}(1)"
    if op == "sigmoid":  # two branches: exp of a non-positive argument only, never overflows
        return f"(({one} / ({one} + np.exp(-{a}))) if {a} >= 0 else (np.exp({a}) / ({one} + np.exp({a}))))"
    if op == "softplus":
        return f"(({a} + np.log1p(np.exp(-{a}))) if {a} > 0 else np.log1p(np.exp({a})))"
    if op == "erf":  # libm erf in float64 (kernels/special.py's reference uses the same)
        value = f"math.erf(np.float64({a}))"
        return f"np.float32({value})" if dtype == "float32" else value
    raise AssertionError(f"no numba rendering for unary {op!r}")


def _binary(op: str, a: str, b: str, dtype: str) -> str:
    if op in ("max", "min"):
        return f"np.{op}imum({a}, {b})"
    if op in ("maximum", "minimum"):  # IEEE 754-2019 (llvm.maximum / minimum; integers: plain)
        return f"_bits.{op}_step({a}, {b})" if types.is_float(dtype) else f"_bits.{op[:3]}_step({a}, {b})"
    if op == "div":
        if types.is_float(dtype):
            return f"({a} / {b})"
        return f"{'_c_div_unsigned' if dtype.startswith('uint') else '_c_div'}({a}, {b})"
    if op == "pow":
        if types.is_float(dtype):
            return f"np.power({a}, {b})"
        if dtype == "uint64":
            return _wrapping_power(a, b)
        # uint64 arithmetic wraps modulo 2**64, which truncation to the result's width preserves
        positive = f"np.int64({_wrapping_power(a, b)})"
        negative = f"np.int64(1 if {a} == 1 else ((1 - 2 * ({b} & 1)) if {a} == -1 else 0))"
        return f"({positive} if {b} >= 0 else {negative})"
    if dtype == "int64" and op in ("add", "sub", "mul"):
        # numba marks signed arithmetic no-signed-wrap, so LLVM may fold a wrapping int64 sum
        # as if it never wrapped ((a + b) > c became true where the sum wraps): unsigned
        # arithmetic has the same bits and no such promise
        return f"np.int64(np.uint64({a}) {_SYMBOL[op]} np.uint64({b}))"
    return f"({a} {_SYMBOL[op]} {b})"


def _wrapping_power(x: str, y: str) -> str:
    """x ** y modulo 2**64 for y >= 0, in uint64. numba's integer ** switches to float pow for
    exponents above 65536 (and reads >= 2**63 as negative), so larger exponents are split into
    base-65536 digits: x**y = prod_k (x**(65536**k)) ** digit_k, every ** within the exact range."""
    base, exponent = f"np.uint64({x})", f"np.uint64({y})"
    powers, factors = [base], []
    for k in range(4):
        digit = f"(({exponent} >> np.uint64({16 * k})) & np.uint64(65535))"
        factors.append(f"({powers[-1]} ** {digit})")
        powers.append(f"({powers[-1]} ** np.uint64(65536))")
    return f"(({base} ** {exponent}) if {exponent} <= np.uint64(65536) else ({' * '.join(factors)}))"
