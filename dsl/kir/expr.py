"""Scalar expressions of the kernel IR: a DAG of typed nodes that op lowerings build and renderers
(dsl/codegen for numba, dsl/kir/interp.py for numpy) turn into code or values.

Every node has a ``dtype``, one of dsl.kir.types.SCALARS, and exact semantics (no backend may
change a result except where a node says so):

- ``Const(value)``; ``Leaf(index, elem)``: input ``index`` of the kernel group, an element of
  type ``elem`` already decoded into its compute domain; ``Var(name)``: a value defined by the
  schedule (a row result, a loop index).
- ``Unary(op, x)``: neg, abs (integers wrap: -min is min), not, bitnot (integers); float math
  exp, log, sqrt, tanh, sigmoid, erf, expm1, log1p, sin, cos, softplus, tan, asin, acos, atan, sinh, cosh,
  asinh, acosh, atanh: the mathematical function, rounded as the backend's math mode allows
  (exact: as float64 libm rounded, or the float32 libm call; fast: within the documented ulp
  bound of kernels/vmath.py); floor, ceil, rint (round half to even): exact in every mode.
- ``Binary(op, a, b)`` on two values of one type: add, sub, mul (integers wrap), div (floats:
  IEEE; integers: truncated toward zero, x / 0 = 0, min / -1 = min), max / min (numpy's: NaN
  propagates, of equal values the first), maximum / minimum (IEEE 754-2019: NaN propagates,
  -0 < +0; reductions use these, they vectorize), pow (floats: IEEE pow; int64: the power modulo 2**64 for y >= 0, and for y < 0
  1 / x**|y| truncated; uint64: modulo 2**64), and / or / xor on bool, floordiv / mod of
  non-negative integers (index arithmetic); remainder (numpy's np.remainder: the sign of b,
  floats IEEE fmod corrected by b, +-0 taking b's sign) and fmod (C fmod: the sign of a), both
  total on integers: x by 0 is 0 and x by -1 is 0 (never a trap), floats by 0 are NaN;
  bitand / bitor / bitxor and shl / shr (arithmetic for signed a) on integers, numpy's
  shifts: b outside [0, bits) gives 0, or -1 for shr of a negative a.
- ``Compare(op, a, b)``: eq, ne, lt, le, gt, ge, giving bool.
- ``Select(cond, a, b)``: a where cond else b.
- ``Convert(x, dtype)``: a numeric conversion: integers wrap to the target's width, integers to
  float and wider to narrower floats round to nearest even, float to integer truncates toward
  zero (defined only in range: lowerings clamp or Cast first), bool is 0 / 1, numbers to bool
  are "nonzero".
- ``Cast(x, to, saturate, round_mode)``: ONNX Cast of a domain value to element type ``to``
  (dsl/convert.py's rules), giving a value of ``to``'s compute domain.
- ``Call(fn, args)``: the named operations in CALLS.
- ``Pick(items)``: concatenation, the item whose group input's guard holds (lowered by schedules
  into guarded loads).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import DType
from . import types

UNARY_NUMERIC = ("neg", "abs")
UNARY_FLOAT = ("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "expm1", "log1p", "sin", "cos", "softplus",
               "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "rint")
BINARY_NUMERIC = ("add", "sub", "mul", "div", "max", "min", "maximum", "minimum", "pow")
BINARY_INTEGER = ("floordiv", "mod")  # of non-negative integers (index arithmetic)
BINARY_BOOL = ("and", "or", "xor")
BINARY_MODULO = ("remainder", "fmod")  # numeric (ONNX Mod)
BINARY_BITS = ("bitand", "bitor", "bitxor", "shl", "shr")  # integers (ONNX Bitwise*, BitShift)
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
# name -> (argument types, result type); see each backend for the formula
CALLS = {
    # QuantizeLinear's integer step: rint(q) + zero_point in float64, NaN -> low, clamped to [low, high]
    "quantize_to_int": (("float32", "int64", "int64", "int64"), "int64"),
    # e**x in float64 accurate to about 1e-11 relative: ample for a result rounded to float32 or
    # narrower (softmax rows of those types), and vectorizable; 0 below -708, inf above 709
    "exp_for_float32": (("float64",), "float64"),
    # 2**64 e**x for x <= 0, not NaN (fast float32 softmax rows): relative error below 0.7 * 2**-23,
    # never subnormal; 0 below -104; x > 0 or NaN gives an unspecified value
    "exp_times_2_64": (("float32",), "float32"),
}


class IRError(AssertionError):
    """A malformed kernel-IR node (a bug in a lowering or a pass, never a user error)."""


@dataclass(frozen=True, eq=False)
class Expr:
    """A node of the DAG; nodes compare by identity (a node used twice is one value)."""

    dtype: str

    def children(self) -> tuple:
        return ()


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: object = 0


@dataclass(frozen=True, eq=False)
class Leaf(Expr):
    index: int = 0
    elem: DType | None = None


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str = ""


@dataclass(frozen=True, eq=False)
class Unary(Expr):
    op: str = ""
    x: Expr | None = None

    def children(self) -> tuple:
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str = ""
    a: Expr | None = None
    b: Expr | None = None

    def children(self) -> tuple:
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    op: str = ""
    a: Expr | None = None
    b: Expr | None = None

    def children(self) -> tuple:
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Select(Expr):
    cond: Expr | None = None
    a: Expr | None = None
    b: Expr | None = None

    def children(self) -> tuple:
        return (self.cond, self.a, self.b)


@dataclass(frozen=True, eq=False)
class Convert(Expr):
    x: Expr | None = None

    def children(self) -> tuple:
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    x: Expr | None = None
    to: DType | None = None
    saturate: bool = True
    round_mode: str = "up"

    def children(self) -> tuple:
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Call(Expr):
    fn: str = ""
    args: tuple = ()

    def children(self) -> tuple:
        return self.args


@dataclass(frozen=True, eq=False)
class Pick(Expr):
    """Concatenation: ``items[j]`` where guard ``guards[j]`` (an index into the group's guards,
    dsl/kir/group.py Guard: the output index along the joined dim in part j's range) holds.
    The group inputs inside item j carry that guard too: a schedule loads them only where it
    holds (dsl/kir/loops.py Load valid / default), so no part reads outside its data. ``name``
    is the value it computes."""

    items: tuple = ()
    name: str = ""
    guards: tuple = ()

    def children(self) -> tuple:
        return self.items


# ---- constructors (each checks its operands: a bad node is a lowering bug) ----------------------
def _require(condition: bool, message: str) -> None:
    if not condition:
        raise IRError(message)


def const(value, dtype: str) -> Const:
    """A constant of scalar type ``dtype`` (floats may be inf / nan)."""
    _require(dtype in types.SCALARS, f"const: unknown scalar type {dtype!r}")
    if dtype == "bool":
        return Const(dtype, bool(value))
    if types.is_float(dtype):
        return Const(dtype, float(value))
    number, info = int(value), np.iinfo(dtype)
    _require(int(info.min) <= number <= int(info.max), f"const: {number} does not fit in {dtype}")
    return Const(dtype, number)


def leaf(index: int, elem: DType) -> Leaf:
    return Leaf(types.domain(elem), index, elem)


def pick(items, name: str, guards) -> Pick:
    items, guards = tuple(items), tuple(guards)
    _require(items and len(guards) == len(items) and all(i.dtype == items[0].dtype for i in items),
             "pick: one guard per item, items of one type")
    return Pick(items[0].dtype, items, name, guards)


def var(name: str, dtype: str) -> Var:
    _require(dtype in types.SCALARS, f"var: unknown scalar type {dtype!r}")
    return Var(dtype, name)


def unary(op: str, x: Expr) -> Unary:
    if op == "not":
        _require(x.dtype == "bool", f"not: needs bool, got {x.dtype}")
    elif op == "bitnot":
        _require(types.is_integer(x.dtype), f"bitnot: needs an integer, got {x.dtype}")
    elif op in UNARY_FLOAT:
        _require(types.is_float(x.dtype), f"{op}: needs a float, got {x.dtype}")
    else:
        _require(op in UNARY_NUMERIC and x.dtype != "bool", f"unary {op!r} on {x.dtype}")
    return Unary(x.dtype, op, x)


def binary(op: str, a: Expr, b: Expr) -> Binary:
    _require(a.dtype == b.dtype, f"{op}: operand types differ: {a.dtype} vs {b.dtype}")
    if op in BINARY_BOOL:
        _require(a.dtype == "bool", f"{op}: needs bool, got {a.dtype}")
    elif op in BINARY_INTEGER or op in BINARY_BITS:
        _require(types.is_integer(a.dtype), f"{op}: needs integers, got {a.dtype}")
    elif op in BINARY_MODULO:
        _require(a.dtype != "bool", f"{op}: needs numbers, got {a.dtype}")
    else:
        _require(op in BINARY_NUMERIC and a.dtype != "bool", f"binary {op!r} on {a.dtype}")
        _require(op != "pow" or types.is_float(a.dtype) or a.dtype in ("int64", "uint64"),
                 f"pow: computes in a float, int64 or uint64, got {a.dtype}")
    return Binary(a.dtype, op, a, b)


def compare(op: str, a: Expr, b: Expr) -> Compare:
    _require(op in COMPARE, f"unknown comparison {op!r}")
    _require(a.dtype == b.dtype, f"{op}: operand types differ: {a.dtype} vs {b.dtype}")
    return Compare("bool", op, a, b)


def select(cond: Expr, a: Expr, b: Expr) -> Select:
    _require(cond.dtype == "bool", f"select: condition is {cond.dtype}, not bool")
    _require(a.dtype == b.dtype, f"select: branch types differ: {a.dtype} vs {b.dtype}")
    return Select(a.dtype, cond, a, b)


def convert(x: Expr, dtype: str) -> Expr:
    """``x`` as scalar type ``dtype`` (the node itself when it already is)."""
    _require(dtype in types.SCALARS, f"convert: unknown scalar type {dtype!r}")
    if x.dtype == dtype:
        return x
    if isinstance(x, Const) and types.is_integer(x.dtype) and types.is_integer(dtype):
        info = np.iinfo(dtype)
        if int(info.min) <= x.value <= int(info.max):  # (a constant that fits: the same value)
            return const(x.value, dtype)
    return Convert(dtype, x)


def cast(x: Expr, to: DType, saturate: bool = True, round_mode: str = "up") -> Expr:
    """ONNX Cast of ``x`` to element type ``to``; the node itself when nothing changes (the
    value is already in ``to``'s value set: same native type, or ``in_value_set``)."""
    target = types.domain(to)
    if x.dtype == target and (to.onnx_name in types.NATIVE or in_value_set(x, to)):
        return x
    return Cast(target, x, to, bool(saturate), round_mode)


def in_value_set(x: Expr, to: DType) -> bool:
    """Whether ``x`` is always a value of ``to`` exactly, so a Cast to ``to`` returns it unchanged:
    a Cast to ``to``, a group input of type ``to``, a constant ``to`` represents (not a NaN,
    whose payload a round trip may change), or a Select between such values. Each fused op
    rounds its result to its type, so a float16 chain held such no-op round trips (a select of
    -inf / 0 masks rounded, a result rounded again by its consumer): six an element in the
    softmax row of onnx's float16 local-window attention case, which took 13 s to compile (7.4 s
    without them)."""
    if isinstance(x, Cast):
        return x.to == to
    if isinstance(x, Leaf):
        return x.elem == to
    if isinstance(x, Select):
        return in_value_set(x.a, to) and in_value_set(x.b, to)
    if isinstance(x, Const) and not (types.is_float(x.dtype) and math.isnan(x.value)):
        from ..convert import convert as convert_array, to_wide  # (dsl.convert imports no kir)
        value = np.array(x.value, x.dtype)
        back = np.asarray(to_wide(convert_array(value, to), to)).astype(value.dtype)
        return back.tobytes() == value.tobytes()  # (the same bits: -0.0 is not +0.0)
    return False


def call(fn: str, *args: Expr) -> Call:
    _require(fn in CALLS, f"unknown call {fn!r}")
    arg_types, result = CALLS[fn]
    _require(tuple(a.dtype for a in args) == arg_types, f"{fn}: arguments {[a.dtype for a in args]}, "
                                                           f"expected {list(arg_types)}")
    return Call(result, fn, tuple(args))


# ---- walking, verifying, printing -----------------------------------------------------------
def postorder(roots) -> list[Expr]:
    """Every node reachable from ``roots``, each once, operands before users (iterative)."""
    order, seen, stack = [], set(), [(root, False) for root in reversed(list(roots))]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node.children()) if id(child) not in seen)
    return order


_CHILD_FIELDS = {"Unary": ("x",), "Binary": ("a", "b"), "Compare": ("a", "b"), "Select": ("cond", "a", "b"),
                 "Convert": ("x",), "Cast": ("x",)}


def with_children(node: Expr, children: list) -> Expr:
    """``node`` with its operands replaced (same op and type)."""
    if isinstance(node, Call):
        return dataclasses.replace(node, args=tuple(children))
    if isinstance(node, Pick):
        return dataclasses.replace(node, items=tuple(children))
    fields = _CHILD_FIELDS.get(type(node).__name__)
    if fields is None:  # (a Load: its present operands in order index, valid, default)
        names = [n for n in ("index", "valid", "default") if getattr(node, n, None) is not None]
        return dataclasses.replace(node, **dict(zip(names, children)))
    return dataclasses.replace(node, **dict(zip(fields, children)))


def replace_leaves(root: Expr, replace, kinds: tuple = (Leaf,)) -> Expr:
    """The DAG of ``root`` with every node of ``kinds`` (Leaf; Var too for a schedule that gives
    named values their definitions) replaced by ``replace(node)`` (shared nodes stay shared)."""
    return replace_all([root], replace, kinds)[0]


def replace_all(roots, replace, kinds: tuple = (Leaf,)) -> list[Expr]:
    """replace_leaves over several roots at once: a node they share is rebuilt once."""
    memo: dict[int, Expr] = {}
    for node in postorder(roots):
        if isinstance(node, kinds):
            memo[id(node)] = replace(node)
        elif not node.children():
            memo[id(node)] = node
        else:
            children = [memo[id(c)] for c in node.children()]
            same = all(a is b for a, b in zip(children, node.children()))
            memo[id(node)] = node if same else with_children(node, children)
    return [memo[id(root)] for root in roots]


_REBUILD = {Unary: lambda n: unary(n.op, n.x), Binary: lambda n: binary(n.op, n.a, n.b),
            Compare: lambda n: compare(n.op, n.a, n.b), Select: lambda n: select(n.cond, n.a, n.b),
            Call: lambda n: call(n.fn, *n.args)}


def verify(roots) -> None:
    """IRError unless every node is well typed (re-running each constructor's checks)."""
    for node in postorder(roots):
        _require(node.dtype in types.SCALARS, f"{type(node).__name__}: unknown scalar type {node.dtype!r}")
        rebuild = _REBUILD.get(type(node))
        if rebuild is not None:
            _require(rebuild(node).dtype == node.dtype, f"{type(node).__name__} {getattr(node, 'op', '')}: "
                                                         f"dtype {node.dtype} is not what its operands give")
        if isinstance(node, Const):
            const(node.value, node.dtype)
        if isinstance(node, Cast):
            _require(node.dtype == types.domain(node.to), f"cast to {node.to}: dtype {node.dtype}")


def _label(node: Expr, names: dict) -> str:
    args = ", ".join(names[id(c)] for c in node.children())
    if isinstance(node, Const):
        value = node.value
        text = repr(value) if not (isinstance(value, float) and not math.isfinite(value)) else str(value)
        return f"const {text}"
    if isinstance(node, Leaf):
        return f"leaf {node.index} ({node.elem.onnx_name})"
    if isinstance(node, Var):
        return f"var {node.name}"
    if isinstance(node, Cast):
        return f"cast {args} to {node.to.onnx_name} saturate={int(node.saturate)} round={node.round_mode}"
    if isinstance(node, Convert):
        return f"convert {args}"
    if isinstance(node, Select):
        return f"select {args}"
    if isinstance(node, Call):
        return f"call {node.fn}({args})"
    if isinstance(node, Pick):
        return f"pick {args}"
    return f"{node.op} {args}"


def format_exprs(roots, names=None) -> str:
    """Readable SSA text of the DAG behind ``roots``: ``%3: float32 = add %1, %2``."""
    names = {} if names is None else names
    lines = []
    for node in postorder(roots):
        names[id(node)] = f"%{len(names)}"
        lines.append(f"{names[id(node)]}: {node.dtype} = {_label(node, names)}")
    lines.append("return " + ", ".join(names[id(r)] for r in roots))
    return "\n".join(lines)
