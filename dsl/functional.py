"""Public elementwise, logic, reduction and matmul functions (dsl.add ... dsl.matmul), eager or traced.

Each function is one ONNX op through ``dsl.eager.call``: on numpy arrays (or dsl.Tensors) it
computes with the op's numpy reference; inside ``@dsl.jit`` it adds a node. ``opset`` None
means the latest (inside dsl.jit, the function's opset). A Python scalar next to a tensor
takes the tensor's element type (NEP 50); a Python float next to an integer tensor is an
error. Every op raises DslError naming the op for types its opset version does not accept
and for shapes that do not broadcast.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .eager import call
from .errors import InputError
from .ops.minmax import MAX_INPUTS
from .ops.movement import MAX_INPUTS as MOVEMENT_MAX_INPUTS
from .ops.registry import LATEST_OPSET
from .tensor import Tensor
from .trace import Tracer, current_builder
from .values import weak_scalar


# ---- Python scalars (NEP 50) ----------------------------------------------------------------------
def _is_weak(value) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def _element_type(op: str, value):
    if isinstance(value, (Tracer, Tensor)):
        return value.dtype
    return dtypes.of_array(np.asarray(value), op)


def _weak(op: str, value, *anchors):
    """``value`` with a Python scalar given the element type of the first tensor in ``anchors``
    (numpy's default type when there is none)."""
    if not _is_weak(value):
        return value
    anchor = next((a for a in anchors if a is not None and not _is_weak(a)), None)
    return np.asarray(value) if anchor is None else weak_scalar(op, value, _element_type(op, anchor))


def _binary(op: str, a, b, opset, second: str = "B"):
    return call(op, _weak(op, a, b), opset, **{second: _weak(op, b, a)})


def _flag(value):
    return int(value) if isinstance(value, (bool, np.bool_)) else value


# ---- arithmetic -----------------------------------------------------------------------------------
def add(a, b, *, opset: int | None = None):
    """ONNX Add: ``a + b`` with numpy broadcasting; integers wrap.

    Example:
        >>> add(np.array([1, 2], np.int8), 1).tolist()
        [2, 3]
    """
    return _binary("Add", a, b, opset)


def sub(a, b, *, opset: int | None = None):
    """ONNX Sub: ``a - b`` with numpy broadcasting; integers wrap.

    Example:
        >>> sub(np.array([1.5], np.float32), 1).tolist()
        [0.5]
    """
    return _binary("Sub", a, b, opset)


def mul(a, b, *, opset: int | None = None):
    """ONNX Mul: ``a * b`` with numpy broadcasting; integers wrap.

    Example:
        >>> mul(np.array([100], np.int8), 2).tolist()
        [-56]
    """
    return _binary("Mul", a, b, opset)


def div(a, b, *, opset: int | None = None):
    """ONNX Div: ``a / b``; integer division truncates toward zero.

    Example:
        >>> div(np.array([-7], np.int32), 2).tolist()
        [-3]
    """
    return _binary("Div", a, b, opset)


def pow(x, y, *, opset: int | None = None):  # noqa: A001  (the ONNX op's name)
    """ONNX Pow: ``x ** y`` with the type of ``x`` (``y`` may have another type from opset 12).

    Integer powers wrap; a negative integer exponent gives 1 / x**|y| truncated (0 unless |x| = 1).

    Example:
        >>> pow(np.array([2, 3], np.int32), np.array([10, -1], np.int64)).tolist()
        [1024, 0]
    """
    return _binary("Pow", x, y, opset, second="Y")


# ---- unary math -----------------------------------------------------------------------------------
def neg(x, *, opset: int | None = None):
    """ONNX Neg: ``-x`` (integers wrap: -(-128) is -128 in int8).

    Example:
        >>> neg(np.array([-128, 5], np.int8)).tolist()
        [-128, -5]
    """
    return call("Neg", x, opset)


def abs(x, *, opset: int | None = None):  # noqa: A001  (the ONNX op's name)
    """ONNX Abs: ``|x|`` (integers wrap: |-128| is -128 in int8).

    Example:
        >>> abs(np.array([-2.5], np.float32)).tolist()
        [2.5]
    """
    return call("Abs", x, opset)


def exp(x, *, opset: int | None = None):
    """ONNX Exp: ``e ** x``; float16/bfloat16 are computed in float32 and rounded once.

    Example:
        >>> exp(np.array([0.0], np.float32)).tolist()
        [1.0]
    """
    return call("Exp", x, opset)


def log(x, *, opset: int | None = None):
    """ONNX Log: natural logarithm (log 0 = -inf, log of a negative = NaN).

    Example:
        >>> log(np.array([1.0], np.float64)).tolist()
        [0.0]
    """
    return call("Log", x, opset)


def sqrt(x, *, opset: int | None = None):
    """ONNX Sqrt: square root (NaN for negatives).

    Example:
        >>> sqrt(np.array([4.0], np.float16)).tolist()
        [2.0]
    """
    return call("Sqrt", x, opset)


def reciprocal(x, *, opset: int | None = None):
    """ONNX Reciprocal: ``1 / x``.

    Example:
        >>> reciprocal(np.array([4.0], np.float32)).tolist()
        [0.25]
    """
    return call("Reciprocal", x, opset)


def tanh(x, *, opset: int | None = None):
    """ONNX Tanh: hyperbolic tangent.

    Example:
        >>> tanh(np.array([0.0], np.float32)).tolist()
        [0.0]
    """
    return call("Tanh", x, opset)


def sigmoid(x, *, opset: int | None = None):
    """ONNX Sigmoid: ``1 / (1 + exp(-x))``, evaluated without overflow.

    Example:
        >>> sigmoid(np.array([0.0], np.float32)).tolist()
        [0.5]
    """
    return call("Sigmoid", x, opset)


def relu(x, *, opset: int | None = None):
    """ONNX Relu: ``max(0, x)`` (NaN stays NaN; integer types from opset 14).

    Example:
        >>> relu(np.array([-1.0, 2.0], np.float32)).tolist()
        [0.0, 2.0]
    """
    return call("Relu", x, opset)


def erf(x, *, opset: int | None = None):
    """ONNX Erf: the error function (integer inputs at opset 9-12 give trunc(erf(x))).

    Example:
        >>> erf(np.array([0.0], np.float32)).tolist()
        [0.0]
    """
    return call("Erf", x, opset)


# ---- comparisons and logic ------------------------------------------------------------------------
def equal(a, b, *, opset: int | None = None):
    """ONNX Equal: ``a == b`` as bool, broadcast (strings from opset 19).

    Example:
        >>> equal(np.array([1, 2], np.int32), 2).tolist()
        [False, True]
    """
    return _binary("Equal", a, b, opset)


def less(a, b, *, opset: int | None = None):
    """ONNX Less: ``a < b`` as bool, broadcast.

    Example:
        >>> less(np.array([1.0, 3.0], np.float32), 2.0).tolist()
        [True, False]
    """
    return _binary("Less", a, b, opset)


def greater(a, b, *, opset: int | None = None):
    """ONNX Greater: ``a > b`` as bool, broadcast.

    Example:
        >>> greater(np.array([1.0, 3.0], np.float32), 2.0).tolist()
        [False, True]
    """
    return _binary("Greater", a, b, opset)


def less_equal(a, b, *, opset: int | None = None):
    """ONNX LessOrEqual (opset >= 12): ``a <= b`` as bool, broadcast.

    Example:
        >>> less_equal(np.array([2, 3], np.int64), 2).tolist()
        [True, False]
    """
    return _binary("LessOrEqual", a, b, opset)


def greater_equal(a, b, *, opset: int | None = None):
    """ONNX GreaterOrEqual (opset >= 12): ``a >= b`` as bool, broadcast.

    Example:
        >>> greater_equal(np.array([2, 3], np.int64), 3).tolist()
        [False, True]
    """
    return _binary("GreaterOrEqual", a, b, opset)


def logical_not(x, *, opset: int | None = None):
    """ONNX Not on a bool tensor.

    Example:
        >>> logical_not(np.array([True, False])).tolist()
        [False, True]
    """
    return call("Not", x, opset)


def logical_and(a, b, *, opset: int | None = None):
    """ONNX And on bool tensors, broadcast.

    Example:
        >>> logical_and(np.array([True, False]), True).tolist()
        [True, False]
    """
    return _binary("And", a, b, opset)


def logical_or(a, b, *, opset: int | None = None):
    """ONNX Or on bool tensors, broadcast.

    Example:
        >>> logical_or(np.array([True, False]), False).tolist()
        [True, False]
    """
    return _binary("Or", a, b, opset)


def where(condition, x, y, *, opset: int | None = None):
    """ONNX Where (opset >= 9): ``x`` where ``condition`` (bool) is True, else ``y``; all three broadcast.

    A Python scalar ``x`` or ``y`` takes the other one's element type.

    Example:
        >>> where(np.array([True, False]), np.array([1.0, 2.0], np.float32), 0.0).tolist()
        [1.0, 0.0]
    """
    return call("Where", condition, opset, X=_weak("Where", x, y), Y=_weak("Where", y, x))


# ---- min / max / clip -----------------------------------------------------------------------------
def _variadic(op: str, inputs: tuple, opset):
    if not 1 <= len(inputs) <= MAX_INPUTS:
        raise InputError(f"{op}: takes 1 to {MAX_INPUTS} inputs, got {len(inputs)}")
    converted = [_weak(op, value, *inputs) for value in inputs]
    return call(op, converted[0], opset, **{f"data_{k}": v for k, v in enumerate(converted[1:], start=1)})


def maximum(*inputs, opset: int | None = None):
    """ONNX Max: elementwise maximum of one or more tensors (broadcast from opset 8; NaN propagates).

    Example:
        >>> maximum(np.array([1.0, np.nan], np.float32), np.float32(2.0)).tolist()
        [2.0, nan]
    """
    return _variadic("Max", inputs, opset)


def minimum(*inputs, opset: int | None = None):
    """ONNX Min: elementwise minimum of one or more tensors (broadcast from opset 8; NaN propagates).

    Example:
        >>> minimum(np.array([1, 5], np.int32), 3, np.array([0, 9], np.int32)).tolist()
        [0, 3]
    """
    return _variadic("Min", inputs, opset)


def clip(x, min=None, max=None, *, opset: int | None = None):  # noqa: A002  (the ONNX input names)
    """ONNX Clip: ``Min(max, Max(x, min))``; an absent bound is the type's lowest / largest finite value.

    Args:
        x: the tensor.
        min, max: scalars (opset >= 11: 0-d tensors or Python numbers taking x's type; before 11:
            floats, the min / max attributes).

    Example:
        >>> clip(np.array([-5.0, 0.5, 5.0], np.float32), 0.0, 1.0).tolist()
        [0.0, 0.5, 1.0]
    """
    builder = current_builder([x, min, max])
    version = builder.graph.opset if builder is not None else LATEST_OPSET if opset is None else opset
    if isinstance(version, (int, np.integer)) and version < 11:
        return call("Clip", x, opset, min=min, max=max)
    return call("Clip", x, opset, min=None if min is None else _weak("Clip", min, x),
                max=None if max is None else _weak("Clip", max, x))


# ---- reductions, softmax, matmul ------------------------------------------------------------------
def _reduce(op: str, data, axes, keepdims, noop_with_empty_axes, opset):
    noop = None if noop_with_empty_axes is False or noop_with_empty_axes == 0 else _flag(noop_with_empty_axes)
    return call(op, data, opset, axes=axes, keepdims=_flag(keepdims), noop_with_empty_axes=noop)


def reduce_sum(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, opset: int | None = None):
    """ONNX ReduceSum over ``axes`` (None or empty: every axis, or none with noop_with_empty_axes).

    Float sums accumulate in float64; integer sums wrap. An empty set sums to 0.

    Example:
        >>> reduce_sum(np.ones((2, 3), np.float32), [1], keepdims=False).tolist()
        [3.0, 3.0]
    """
    return _reduce("ReduceSum", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_max(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, opset: int | None = None):
    """ONNX ReduceMax over ``axes``; NaN propagates; an empty set gives -inf (or the type's minimum).

    Example:
        >>> reduce_max(np.array([[1, 5], [7, 2]], np.int32), [0]).tolist()
        [[7, 5]]
    """
    return _reduce("ReduceMax", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_min(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, opset: int | None = None):
    """ONNX ReduceMin over ``axes``; NaN propagates, -0 < +0, False < True (opset 20 bool).

    Example:
        >>> reduce_min(np.array([[3, 1], [2, 5]], np.int32), [1], keepdims=False).tolist()
        [1, 2]
    """
    return _reduce("ReduceMin", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_mean(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, opset: int | None = None):
    """ONNX ReduceMean over ``axes`` (integer means truncate toward zero).

    Example:
        >>> reduce_mean(np.array([[1.0, 2.0]], np.float32), [-1], keepdims=False).tolist()
        [1.5]
    """
    return _reduce("ReduceMean", data, axes, keepdims, noop_with_empty_axes, opset)


def softmax(x, axis: int | None = None, *, opset: int | None = None):
    """ONNX Softmax along ``axis`` (None: the opset's default, -1 from 13; opsets 1-12 normalize
    over all axes from ``axis`` on, default 1).

    Example:
        >>> softmax(np.zeros((1, 4), np.float32)).tolist()
        [[0.25, 0.25, 0.25, 0.25]]
    """
    return call("Softmax", x, opset, axis=axis)


def log_softmax(x, axis: int | None = None, *, opset: int | None = None):
    """ONNX LogSoftmax along ``axis`` (axis rules as softmax): x - max - log(sum(exp(x - max))),
    finite where log(softmax(x)) would give -inf.

    Example:
        >>> log_softmax(np.zeros((1, 4), np.float32)).tolist() == [[-np.log(4, dtype=np.float32)] * 4]
        True
    """
    return call("LogSoftmax", x, opset, axis=axis)


def matmul(a, b, *, opset: int | None = None):
    """ONNX MatMul: numpy.matmul semantics (1-D operands promoted, batch dims broadcast).

    Example:
        >>> matmul(np.eye(2, dtype=np.float32), np.array([3.0, 4.0], np.float32)).tolist()
        [3.0, 4.0]
    """
    return _binary("MatMul", a, b, opset)


# ---- data movement --------------------------------------------------------------------------------
def slice(data, starts, ends, axes=None, steps=None, *, opset: int | None = None):  # noqa: A001  (the ONNX op's name)
    """ONNX Slice: a strided window along ``axes`` (default: the first len(starts) axes), numpy's
    basic slicing with ONNX's clamping (negative starts / ends count from the end; out-of-range
    values clamp; negative steps walk backward). numpy in -> a numpy VIEW out.

    Example:
        >>> slice(np.arange(6), [1], [-1], steps=[2]).tolist()
        [1, 3]
    """
    return call("Slice", data, opset, starts=starts, ends=ends, axes=axes, steps=steps)


def concat(inputs, axis, *, opset: int | None = None):
    """ONNX Concat: join a list of tensors along ``axis`` (the other dims must match).

    Example:
        >>> concat([np.zeros((1, 2)), np.ones((1, 2))], 0).tolist()
        [[0.0, 0.0], [1.0, 1.0]]
    """
    items = list(inputs) if isinstance(inputs, (list, tuple)) else None
    if not items or len(items) > MOVEMENT_MAX_INPUTS:
        raise InputError(f"Concat: inputs must be a list of 1 to {MOVEMENT_MAX_INPUTS} tensors, got "
                         f"{type(inputs).__name__ if items is None else len(items)}")
    return call("Concat", items[0], opset, axis=axis, **{f"inputs_{k}": v for k, v in enumerate(items[1:], start=1)})


def gather(data, indices, axis=0, *, opset: int | None = None):
    """ONNX Gather: entries of ``data`` along ``axis`` at ``indices`` (int32 / int64, any shape;
    negative indices count from the end); an index out of range is a DslError.

    Example:
        >>> gather(np.array([10, 20, 30]), np.array([[2, 0]])).tolist()
        [[30, 10]]
    """
    return call("Gather", data, opset, indices=indices, axis=axis)


def size(data, *, opset: int | None = None):
    """ONNX Size: the number of elements of ``data`` as an int64 scalar.

    Example:
        >>> int(size(np.zeros((2, 3))))
        6
    """
    return call("Size", data, opset)


def constant_of_shape(input, value=None, *, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX ConstantOfShape: a tensor of shape ``input`` (1-D int64; empty: a scalar), every element
    ``value`` (a one-element array whose type the output takes; default float32 0).

    Example:
        >>> constant_of_shape([2], np.array([7], np.int8)).tolist()
        [7, 7]
    """
    shape = input if isinstance(input, (np.ndarray, Tensor, Tracer)) else np.array(list(input), np.int64)
    return call("ConstantOfShape", shape, opset, value=value)


def range(start, limit, delta, *, opset: int | None = None):  # noqa: A001  (the ONNX op's name)
    """ONNX Range: start, start + delta, ... up to ``limit`` (exclusive), in the scalars' type
    (Python numbers take the type of the others, int64 / float32 when all are Python numbers).

    Example:
        >>> range(np.int32(10), 4, -2).tolist()
        [10, 8, 6]
    """
    values = [start, limit, delta]
    anchor = next((v for v in values if not _is_weak(v)), None)
    if anchor is None:
        kind = np.float32 if any(isinstance(v, float) for v in values) else np.int64
        values = [np.asarray(v, kind) for v in values]
    else:
        values = [_weak("Range", v, anchor) for v in values]
    return call("Range", values[0], opset, limit=values[1], delta=values[2])
