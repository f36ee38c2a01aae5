"""The numpy interpreter of kernel-IR expressions: the living definition of each node's
semantics, and the oracle the tests hold the numba renderer to (small shapes; not fast).

Float math (exp, tanh, ...) is evaluated in float64 and rounded once to the node's type, so it
is the correctly rounded result in nearly every case: a backend's float32 math is judged by its
ulp distance from this.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..convert import convert as cast_array, to_wide
from . import types
from .expr import Binary, Call, Cast, Compare, Const, Convert, Leaf, Select, Unary, Var, postorder
from .loops import Accum, Alloc, Assign, For, If, Load, Move, Prefetch, Store, TransposeBlock

_NP = {name: np.dtype("bool" if name == "bool" else name) for name in types.SCALARS}


def evaluate(roots, leaves: dict, variables: dict | None = None, buffers: dict | None = None) -> list[np.ndarray]:
    """The values of ``roots``: ``leaves[index]`` (arrays of each leaf's element type, or already
    of its compute domain), ``variables[name]`` and, for Load nodes, ``buffers[name]`` (flat
    arrays of each buffer's element type) bind the inputs; shapes broadcast."""
    values: dict[int, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for node in postorder(roots):
            if isinstance(node, Load):
                values[id(node)] = _load(node, values, buffers or {})
            else:
                values[id(node)] = _node(node, values, leaves, variables or {})
    return [values[id(r)] for r in roots]


def _load(node: Load, values: dict, buffers: dict) -> np.ndarray:
    if node.valid is not None and not bool(values[id(node.valid)]):
        return values[id(node.default)]
    position = int(values[id(node.index)])
    if node.part is not None:  # (element ``part`` of byte ``position``)
        position = position * (8 // node.buffer.elem.bits) + node.part
    if node.raw:  # (the storage bits)
        return np.asarray(buffers[node.buffer.name].view(types.storage(node.buffer.elem))[position])
    element = buffers[node.buffer.name][position]
    return domain_values(np.asarray(element), node.buffer.elem)


def run_kernel(kernel, buffers: dict, params: dict) -> None:
    """Execute a loop-nest kernel (dsl/kir/loops.py) statement by statement: ``buffers`` maps
    each in / out buffer name to a flat numpy array of its element type (outputs are written in
    place), ``params`` each parameter name to its value. Slow: for small test shapes."""
    env = {name: np.uint64(value) for name, value in params.items()}
    space = dict(buffers)

    def value(node):
        return evaluate([node], {}, env, space)[0]

    def run(statements):
        for statement in statements:
            if isinstance(statement, For):
                for i in range(int(value(statement.start)), int(value(statement.stop))):
                    env[statement.var] = np.uint64(i)
                    run(statement.body)
            elif isinstance(statement, Assign):
                env[statement.name] = value(statement.value)
            elif isinstance(statement, Accum):
                env[statement.name] = _accumulate(statement.op, env[statement.name], value(statement.value))
            elif isinstance(statement, Store):
                target = space[statement.buffer.name]
                if statement.raw:
                    target.view(types.storage(statement.buffer.elem))[int(value(statement.index))] = value(statement.value)
                else:
                    target[int(value(statement.index))] = _to_elem(value(statement.value), statement.buffer.elem)
            elif isinstance(statement, Alloc):
                space[statement.buffer.name] = np.zeros(int(value(statement.size)), statement.buffer.elem.np_dtype)
            elif isinstance(statement, If):
                run(statement.then if bool(value(statement.cond)) else statement.orelse)
            elif isinstance(statement, Move):
                space[statement.dst.name][int(value(statement.dst_index))] = \
                    space[statement.src.name][int(value(statement.src_index))]
            elif isinstance(statement, TransposeBlock):
                src, dst = space[statement.src.name], space[statement.dst.name]
                s0, ss = int(value(statement.src_index)), int(value(statement.src_stride))
                d0, ds = int(value(statement.dst_index)), int(value(statement.dst_stride))
                for a in range(statement.lanes):
                    for b in range(statement.lanes):
                        dst[d0 + a * ds + b] = src[s0 + b * ss + a]
            elif isinstance(statement, Prefetch):
                pass  # (a hint)
    with np.errstate(all="ignore"):
        run(kernel.body)


def _to_elem(value: np.ndarray, elem) -> np.ndarray:
    """A compute-domain value (already in ``elem``'s value set) as an element of ``elem``."""
    return cast_array(np.asarray(value), elem)


def domain_values(array: np.ndarray, elem) -> np.ndarray:
    """An array of element type ``elem`` as its compute-domain values."""
    wide = to_wide(array, dtypes.of_array(array))
    return wide.astype(_NP[types.domain(elem)])


def _node(node, values: dict, leaves: dict, variables: dict) -> np.ndarray:
    args = [values[id(child)] for child in node.children()]
    target = _NP[node.dtype]
    if isinstance(node, Const):
        return np.array(node.value, target)
    if isinstance(node, Leaf):
        return domain_values(np.asarray(leaves[node.index]), node.elem)
    if isinstance(node, Var):
        return np.asarray(variables[node.name]).astype(target)
    if isinstance(node, Unary):
        return _unary(node.op, args[0]).astype(target)
    if isinstance(node, Binary):
        return np.asarray(_binary(node.op, args[0], args[1])).astype(target)
    if isinstance(node, Compare):
        return np.asarray(_COMPARE[node.op](args[0], args[1]))
    if isinstance(node, Select):
        return np.where(args[0], args[1], args[2]).astype(target)
    if isinstance(node, Convert):
        return args[0].astype(target)
    if isinstance(node, Cast):
        rounded = cast_array(np.asarray(args[0]), node.to, saturate=node.saturate, round_mode=node.round_mode)
        return domain_values(rounded, node.to)
    if isinstance(node, Call):
        return _CALLS[node.fn](*args)
    raise AssertionError(f"no semantics for {type(node).__name__}")


def _float_math(fn):
    """fn in float64, rounded once to the argument's type."""
    return lambda x: fn(x.astype(np.float64)).astype(x.dtype)


def _sigmoid(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _softplus(x):
    return np.where(x > 0, x + np.log1p(np.exp(-x)), np.log1p(np.exp(x)))


_ERF = np.frompyfunc(math.erf, 1, 1)
_UNARY = {
    "neg": np.negative, "abs": np.abs, "not": np.logical_not, "bitnot": np.invert,
    "exp": _float_math(np.exp), "log": _float_math(np.log), "sqrt": np.sqrt, "tanh": _float_math(np.tanh),
    "sigmoid": _float_math(_sigmoid), "erf": _float_math(lambda x: _ERF(x).astype(np.float64)),
    "expm1": _float_math(np.expm1), "log1p": _float_math(np.log1p), "sin": _float_math(np.sin),
    "cos": _float_math(np.cos), "softplus": _float_math(_softplus),
    "tan": _float_math(np.tan), "asin": _float_math(np.arcsin), "acos": _float_math(np.arccos),
    "atan": _float_math(np.arctan), "sinh": _float_math(np.sinh), "cosh": _float_math(np.cosh),
    "asinh": _float_math(np.arcsinh), "acosh": _float_math(np.arccosh), "atanh": _float_math(np.arctanh),
    "floor": np.floor, "ceil": np.ceil, "rint": np.rint,  # (exact: no rounding to do)
}


def _unary(op: str, x: np.ndarray) -> np.ndarray:
    return np.asarray(_UNARY[op](np.asarray(x)))


def _int_div(a, b):
    a, b = np.broadcast_arrays(a, b)
    safe = np.where(b == 0, 1, b)
    quotient = np.floor_divide(a, safe)  # minimum // -1 wraps to the minimum
    if a.dtype.kind == "i":
        quotient = quotient + ((np.remainder(a, safe) != 0) & ((a < 0) ^ (safe < 0))).astype(a.dtype)
    return np.where(b == 0, 0, quotient).astype(a.dtype)


def int_pow(x, y):
    """x ** y modulo 2**64 by binary exponentiation; a negative y gives 1 / x**|y| truncated."""
    x, y = np.broadcast_arrays(x, y)
    base = x.astype(np.uint64)
    exponent = np.where(y >= 0, y, 0).astype(np.uint64)
    result = np.ones(base.shape, np.uint64)
    while exponent.any():
        result = np.where(exponent & np.uint64(1), result * base, result)
        base = base * base
        exponent = exponent >> np.uint64(1)
    if x.dtype.kind == "u":
        return result
    negative = np.where(x == 1, 1, np.where(x == -1, 1 - 2 * (y & 1), 0)).astype(np.int64)
    return np.where(y >= 0, result.astype(np.int64), negative)


def ieee_maximum(a, b, take_max: bool = True):
    """IEEE 754-2019 maximum / minimum: NaN if either is NaN, and -0 < +0."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    result = np.maximum(a, b) if take_max else np.minimum(a, b)
    if a.dtype.kind == "f":
        zeros = (a == 0) & (b == 0)
        signed = np.signbit(a) & np.signbit(b) if take_max else np.signbit(a) | np.signbit(b)
        result = np.where(zeros, np.where(signed, -0.0, 0.0).astype(a.dtype), result)
    return result


def _accumulate(op: str, total, value):
    """An Accum step: float max / min are IEEE 754-2019 maximum / minimum (NaN propagates, -0 <
    +0), as every backend's accumulation; maxnum / minnum may give either zero or ignore a NaN
    (the schedules check for both), here numpy's fmax / fmin."""
    if op in ("max", "min") and np.asarray(total).dtype.kind == "f":
        return ieee_maximum(total, value, op == "max")
    return _binary(op, total, value)


def _binary(op: str, a, b):
    if op in ("maximum", "minimum"):
        return ieee_maximum(a, b, op == "maximum")
    if op == "div":
        return np.divide(a, b) if a.dtype.kind == "f" else _int_div(a, b)
    if op == "pow":
        return np.power(a, b) if a.dtype.kind == "f" else int_pow(a, b)
    return _BINARY[op](a, b)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
           "maxnum": np.fmax, "minnum": np.fmin,  # (Accum only: NaN and zeros are guarded by the schedule)
           "floordiv": np.floor_divide, "mod": np.remainder,
           "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
           # numpy's are the IR's definitions: integers by 0 give 0, shifts outside [0, bits) 0 / -1
           "remainder": np.remainder, "fmod": np.fmod, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
           "bitxor": np.bitwise_xor, "shl": np.left_shift, "shr": np.right_shift}
_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}


def _quantize_to_int(quotient, zero_point, low, high):
    value = np.rint(quotient.astype(np.float64)) + zero_point.astype(np.float64)
    return np.clip(np.nan_to_num(value, nan=float(low)), low, high).astype(np.int64)


def _exp_for_float32(x):
    wide = x.astype(np.float64)
    return np.where(wide < -708.0, 0.0, np.where(wide > 709.0, np.inf, np.exp(wide)))


def _exp_times_2_64(x):
    wide = x.astype(np.float64)
    return np.where(wide < -104.0, 0.0, np.exp(wide) * 2.0 ** 64).astype(np.float32)


_CALLS = {"quantize_to_int": _quantize_to_int, "exp_for_float32": _exp_for_float32, "exp_times_2_64": _exp_times_2_64}
