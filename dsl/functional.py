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
def _reduce(op: str, data, axes, keepdims, noop_with_empty_axes, opset, axis=None):
    """``axis`` (numpy's spelling: an int or a sequence of ints) may stand for ``axes``."""
    if axis is not None:
        if axes is not None:
            raise InputError(f"{op}: axes={axes!r} and axis={axis!r} both given; pass one of them")
        axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    noop = None if noop_with_empty_axes is False or noop_with_empty_axes == 0 else _flag(noop_with_empty_axes)
    return call(op, data, opset, axes=axes, keepdims=_flag(keepdims), noop_with_empty_axes=noop)


def reduce_sum(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceSum over ``axes`` (None or empty: every axis, or none with noop_with_empty_axes).

    Float sums accumulate in float64; integer sums wrap. An empty set sums to 0.

    Example:
        >>> reduce_sum(np.ones((2, 3), np.float32), [1], keepdims=False).tolist()
        [3.0, 3.0]
    """
    return _reduce("ReduceSum", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_max(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceMax over ``axes``; NaN propagates; an empty set gives -inf (or the type's minimum).

    Example:
        >>> reduce_max(np.array([[1, 5], [7, 2]], np.int32), [0]).tolist()
        [[7, 5]]
    """
    return _reduce("ReduceMax", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_min(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceMin over ``axes``; NaN propagates, -0 < +0, False < True (opset 20 bool).

    Example:
        >>> reduce_min(np.array([[3, 1], [2, 5]], np.int32), [1], keepdims=False).tolist()
        [1, 2]
    """
    return _reduce("ReduceMin", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_mean(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceMean over ``axes`` (integer means truncate toward zero).

    Example:
        >>> reduce_mean(np.array([[1.0, 2.0]], np.float32), [-1], keepdims=False).tolist()
        [1.5]
    """
    return _reduce("ReduceMean", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_prod(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceProd over ``axes`` (floats multiply in float64, integers wrap; 1 over none).

    Example:
        >>> reduce_prod(np.array([[2, 3], [4, 5]], np.int32), [1], keepdims=False).tolist()
        [6, 20]
    """
    return _reduce("ReduceProd", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_l1(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceL1: the sum of absolute values over ``axes`` (the spec's body: ReduceSum(Abs(x))).

    Example:
        >>> reduce_l1(np.array([[3.0, -4.0]], np.float32), [1], keepdims=False).tolist()
        [7.0]
    """
    return _reduce("ReduceL1", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_l2(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceL2: sqrt of the sum of squares over ``axes`` (the sum's square root in float,
    as the spec's body casts; integers truncate back).

    Example:
        >>> reduce_l2(np.array([[3.0, -4.0]], np.float32), [1], keepdims=False).tolist()
        [5.0]
    """
    return _reduce("ReduceL2", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_sum_square(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceSumSquare: the sum of x * x over ``axes`` (squares in x's type, then ReduceSum).

    Example:
        >>> reduce_sum_square(np.array([[3.0, -4.0]], np.float32), [1], keepdims=False).tolist()
        [25.0]
    """
    return _reduce("ReduceSumSquare", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_log_sum(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceLogSum: log of the sum over ``axes``.

    Example:
        >>> float(reduce_log_sum(np.full((1, 4), 0.25, np.float32), [1], keepdims=False)[0])
        0.0
    """
    return _reduce("ReduceLogSum", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def reduce_log_sum_exp(data, axes=None, *, keepdims=True, noop_with_empty_axes=False, axis=None, opset: int | None = None):
    """ONNX ReduceLogSumExp: log(sum(exp(x))) over ``axes``, computed in double as the spec's body
    casts (exp overflows past 709, not 88), rounded to x's type.

    Example:
        >>> print(f"{float(reduce_log_sum_exp(np.zeros((1, 4), np.float32), [1], keepdims=False)[0]):.6f}")
        1.386294
    """
    return _reduce("ReduceLogSumExp", data, axes, keepdims, noop_with_empty_axes, opset, axis)


def argmax(data, axis: int = 0, *, keepdims=True, select_last_index=False, opset: int | None = None):
    """ONNX ArgMax: int64 indices of the largest element along ``axis`` (the first of equals, or
    the last with select_last_index; NaN counts as the largest, as numpy's argmax).

    Example:
        >>> argmax(np.array([[1, 9, 9], [7, 2, 3]], np.int32), 1, keepdims=False).tolist()
        [1, 0]
    """
    last = None if select_last_index is False or select_last_index == 0 else _flag(select_last_index)
    return call("ArgMax", data, opset, axis=axis, keepdims=_flag(keepdims), select_last_index=last)


def argmin(data, axis: int = 0, *, keepdims=True, select_last_index=False, opset: int | None = None):
    """ONNX ArgMin: int64 indices of the smallest element along ``axis`` (rules as argmax).

    Example:
        >>> argmin(np.array([[1, 0, 0], [7, 2, 3]], np.int32), 1, keepdims=False, select_last_index=True).tolist()
        [2, 1]
    """
    last = None if select_last_index is False or select_last_index == 0 else _flag(select_last_index)
    return call("ArgMin", data, opset, axis=axis, keepdims=_flag(keepdims), select_last_index=last)


def _unless_default(value, default):
    """None for an attribute left at its default, so that opsets without the attribute accept the call."""
    return None if isinstance(value, (str, int)) and not isinstance(value, bool) and value == default else value


def gather_elements(data, indices, axis: int = 0, *, opset: int | None = None):
    """ONNX GatherElements: ``out[p] = data[p with p[axis] = indices[p]]`` (numpy's take_along_axis;
    int32 / int64 indices of data's rank, negatives count from the end); an index out of range is
    a DslError.

    Example:
        >>> gather_elements(np.array([[1, 2], [3, 4]]), np.array([[0, 0], [1, 0]]), axis=1).tolist()
        [[1, 1], [4, 3]]
    """
    return call("GatherElements", data, opset, indices=indices, axis=axis)


def gather_nd(data, indices, *, batch_dims: int = 0, opset: int | None = None):
    """ONNX GatherND: the slices of ``data`` at the index tuples in the last dim of ``indices``
    (int64), after ``batch_dims`` leading dims shared by both (opset >= 12).

    Example:
        >>> gather_nd(np.array([[0, 1], [2, 3]]), np.array([[0, 0], [1, 1]])).tolist()
        [0, 3]
    """
    return call("GatherND", data, opset, indices=indices, batch_dims=_unless_default(batch_dims, 0))


def scatter_elements(data, indices, updates, axis: int = 0, *, reduction: str = "none",
                     opset: int | None = None):
    """ONNX ScatterElements: a copy of ``data`` with ``out[p with p[axis] = indices[p]] = updates[p]``,
    or combined with ``reduction`` ('add', 'mul' from opset 16, 'max', 'min' from 18). With
    'none', duplicate indices keep the last update (the spec leaves the order undefined).

    Example:
        >>> scatter_elements(np.zeros((1, 4)), np.array([[1, 3]]), np.array([[5.0, 6.0]]), axis=1).tolist()
        [[0.0, 5.0, 0.0, 6.0]]
    """
    return call("ScatterElements", data, opset, indices=indices, updates=updates, axis=axis,
                reduction=_unless_default(reduction, "none"))


def scatter_nd(data, indices, updates, *, reduction: str = "none", opset: int | None = None):
    """ONNX ScatterND: a copy of ``data`` with the slices at the index tuples of ``indices`` (int64,
    last dim) set to ``updates``, or combined with ``reduction`` ('add', 'mul' from opset 16, 'max',
    'min' from 18). With 'none', duplicate indices keep the last update.

    Example:
        >>> scatter_nd(np.arange(4), np.array([[3], [0]]), np.array([9, 8]), reduction="add").tolist()
        [8, 1, 2, 12]
    """
    return call("ScatterND", data, opset, indices=indices, updates=updates,
                reduction=_unless_default(reduction, "none"))


def one_hot(indices, depth, values, axis: int = -1, *, opset: int | None = None):
    """ONNX OneHot: ``values[1]`` where a new axis of size ``depth`` (at ``axis``) equals the index,
    ``values[0]`` elsewhere; indices out of range give a row of ``values[0]`` (negatives count from
    the end at opset >= 11). ``values`` is [off_value, on_value] and gives the output's type.

    Example:
        >>> one_hot(np.array([0, 2, -1, 5]), 3, np.array([0, 1], np.int8)).tolist()
        [[1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 0]]
    """
    if not isinstance(depth, (np.ndarray, Tensor, Tracer)):
        depth = np.asarray(depth)
    return call("OneHot", indices, opset, depth=depth, values=values, axis=axis)


def compress(input, condition, axis=None, *, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX Compress: the slices along ``axis`` where the 1-D bool ``condition`` is True
    (numpy.compress; no axis: the elements of the flattened input). The output's size is known
    only when the condition is.

    Example:
        >>> compress(np.array([[1, 2], [3, 4], [5, 6]]), np.array([False, True, True]), axis=0).tolist()
        [[3, 4], [5, 6]]
    """
    return call("Compress", input, opset, condition=condition, axis=axis)


def nonzero(x, *, opset: int | None = None):
    """ONNX NonZero: the indices of the nonzero elements of ``x`` as int64 of shape (rank, count),
    row-major (numpy.nonzero; a scalar counts as one element of rank 1).

    Example:
        >>> nonzero(np.array([[1, 0], [0, 3]])).tolist()
        [[0, 1], [0, 1]]
    """
    return call("NonZero", x, opset)


def tensor_scatter(past_cache, update, write_indices=None, *, mode: str = "linear", axis: int = -2,
                   opset: int | None = None):
    """ONNX TensorScatter (opset >= 24): a copy of ``past_cache`` with ``update`` written along ``axis``
    (not 0, the batch axis) from ``write_indices[b]`` on for each batch b (1-D int64; zeros when
    None); mode 'circular' wraps positions modulo the cache's length, 'linear' needs them to fit.

    Example:
        >>> tensor_scatter(np.zeros((2, 3)), np.ones((2, 1)), np.array([2, 0]), axis=1).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    return call("TensorScatter", past_cache, opset, update=update, write_indices=write_indices, mode=mode, axis=axis)


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


# ---- rearranging and padding (dsl/ops/arrange.py, padding.py) ---------------------------------------
def _opset_of(data, opset) -> int:
    """The opset a call runs at: the traced function's inside dsl.jit, else ``opset`` or the latest."""
    builder = current_builder([data])
    return builder.graph.opset if builder is not None else LATEST_OPSET if opset is None else opset


def _static_dim(op: str, data, axis):
    shape = getattr(data, "shape", None)
    if shape is None:
        shape = np.shape(data)
    if shape is None or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def split(input, split=None, *, axis: int = 0, num_outputs: int | None = None,  # noqa: A002  (the ONNX names)
          opset: int | None = None) -> list:
    """ONNX Split: cut ``input`` along ``axis`` into parts of the lengths ``split`` (they sum to
    the dim), or ``num_outputs`` parts: equal ones, the last smaller when the dim does not divide
    (opset >= 18; before it the dim must divide). Always a list (numpy views of ``input``).

    Raises DslError for lengths that do not sum to the dim, a negative length, both or neither
    of split / num_outputs, an uneven split before opset 18.

    Example:
        >>> [p.tolist() for p in split(np.arange(5), num_outputs=2)]
        [[0, 1, 2], [3, 4]]
    """
    level = _opset_of(input, opset)
    if split is not None:
        count = len(split) if isinstance(split, (list, tuple)) else (getattr(split, "shape", None) or (None,))[0]
    elif num_outputs is not None and level < 18:  # equal parts: the lengths, which every version takes
        dim = _static_dim("Split", input, axis)
        if not isinstance(num_outputs, int) or num_outputs < 1 or dim is None or dim % num_outputs:
            raise InputError(f"Split: num_outputs={num_outputs!r} at opset {level} needs a static axis dim "
                             f"divisible by it (got dim {dim}); uneven chunks need opset >= 18")
        split, count, num_outputs = [dim // num_outputs] * num_outputs, num_outputs, None
    else:
        count = num_outputs
    if level < 2 and isinstance(split, (list, tuple)) and _element_type("Split", input).kind == "float":
        split = np.asarray(split, _element_type("Split", input).np_dtype)  # (Split-1's split has type T)
    if not isinstance(count, int) or isinstance(count, bool):
        raise InputError(f"Split: give split (the lengths, of static size) or num_outputs (an int), got "
                         f"split={split!r}, num_outputs={num_outputs!r}")
    out = call("Split", input, opset, split=split, axis=axis, num_outputs=num_outputs, outputs=count)
    return [out] if count == 1 else list(out)


def tile(input, repeats, *, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX Tile (opset >= 6): repeat the whole tensor ``repeats[i]`` times along each axis i
    (numpy's tile; one repeat per dim, each >= 0).

    Example:
        >>> tile(np.array([[1, 2]]), [2, 2]).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    return call("Tile", input, opset, repeats=repeats)


def pad(data, pads, constant_value=None, axes=None, *, mode: str = "constant", opset: int | None = None):
    """ONNX Pad: add ``pads`` = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] elements at both ends
    of each axis (of ``axes``, opset >= 18; negative pads remove elements); ``mode`` constant
    (``constant_value``, default 0 / False / ""), reflect, edge, or wrap (opset >= 19).

    Example:
        >>> pad(np.array([1, 2, 3]), [2, 1], mode="reflect").tolist()
        [3, 2, 1, 2, 3, 2]
    """
    if _opset_of(data, opset) < 11:  # (pads and the value were attributes)
        pad_name = "paddings" if _opset_of(data, opset) == 1 else "pads"
        value = None if constant_value is None else float(constant_value)
        return call("Pad", data, opset, mode=mode, value=value, **{pad_name: pads})
    return call("Pad", data, opset, pads=pads, constant_value=_weak("Pad", constant_value, data), axes=axes,
                mode=mode)


def depth_to_space(input, blocksize: int, *, mode: str = "DCR", opset: int | None = None):  # noqa: A002
    """ONNX DepthToSpace: move blocksize x blocksize blocks of the channels of an [N, C, H, W]
    tensor into its height and width (``mode`` DCR or CRD, opset >= 11).

    Example:
        >>> depth_to_space(np.arange(4).reshape(1, 4, 1, 1), 2).reshape(2, 2).tolist()
        [[0, 1], [2, 3]]
    """
    return call("DepthToSpace", input, opset, blocksize=blocksize, mode=None if mode == "DCR" else mode)


def space_to_depth(input, blocksize: int, *, mode: str = "DCR", opset: int | None = None):  # noqa: A002
    """ONNX SpaceToDepth: move blocksize x blocksize blocks of the height and width of an
    [N, C, H, W] tensor into its channels (``mode`` CRD needs opset >= 28).

    Example:
        >>> space_to_depth(np.arange(4).reshape(1, 1, 2, 2), 2).reshape(-1).tolist()
        [0, 1, 2, 3]
    """
    return call("SpaceToDepth", input, opset, blocksize=blocksize, mode=None if mode == "DCR" else mode)


def reverse_sequence(input, sequence_lens, *, batch_axis: int = 1, time_axis: int = 0,  # noqa: A002
                     opset: int | None = None):
    """ONNX ReverseSequence: reverse the first ``sequence_lens[i]`` steps along ``time_axis`` of
    each entry i along ``batch_axis`` (the axes are 0 and 1; each length in [0, time dim]).

    Example:
        >>> reverse_sequence(np.array([[1, 2, 3], [4, 5, 6]]), np.array([3, 1]), batch_axis=0,
        ...                  time_axis=1).tolist()
        [[3, 2, 1], [4, 5, 6]]
    """
    return call("ReverseSequence", input, opset, sequence_lens=sequence_lens, batch_axis=batch_axis,
                time_axis=time_axis)


def center_crop_pad(input_data, shape, axes=None, *, opset: int | None = None):
    """ONNX CenterCropPad: crop (a centered window, its start rounded down) or zero-pad (the extra
    element at the end) the dims of ``axes`` (default all) to ``shape``.

    Example:
        >>> center_crop_pad(np.arange(5), [3]).tolist()
        [1, 2, 3]
    """
    return call("CenterCropPad", input_data, opset, shape=shape, axes=axes)


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


def stack(inputs, axis: int = 0, *, opset: int | None = None):
    """numpy's stack: the tensors (one shape) joined along a new ``axis`` (in [-r-1, r]): each
    unsqueezed there (a view), then one Concat (fused in the JIT).

    Example:
        >>> stack([np.zeros(2), np.ones(2)], 1).tolist()
        [[0.0, 1.0], [0.0, 1.0]]
    """
    from .eager import unsqueeze
    items = list(inputs) if isinstance(inputs, (list, tuple)) else None
    if not items:
        raise InputError(f"stack: inputs must be a non-empty list of tensors, got {type(inputs).__name__}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise InputError(f"stack: axis {axis!r}; expected an int")
    return concat([unsqueeze(x, [int(axis)], opset=opset) for x in items], int(axis), opset=opset)


def gather(data, indices, axis=0, *, opset: int | None = None):
    """ONNX Gather: entries of ``data`` along ``axis`` at ``indices`` (int32 / int64, any shape;
    negative indices count from the end); an index out of range is a DslError.

    Example:
        >>> gather(np.array([10, 20, 30]), np.array([[2, 0]])).tolist()
        [[30, 10]]
    """
    return call("Gather", data, opset, indices=indices, axis=axis)


# ---- scans, selection, triangles (dsl/ops/scan.py) --------------------------------------------------
def _index_scalar(value):
    """A Python / numpy integer as a 0-D array (int64 for Python ints): the 0-D index inputs of
    CumSum / CumProd / Trilu; anything else goes to the op as it is (the rule checks it)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return np.asarray(value, np.int64) if isinstance(value, int) else np.asarray(value)
    return value


def _type_code(value, op: str, what: str):
    """An element-type argument (DType, ONNX name, numpy dtype or code) as its ONNX code."""
    from .errors import DslError, DTypeError  # (imported here: this block owns only its own lines)
    try:
        return dtypes.dtype(value).onnx_code
    except DslError:
        raise DTypeError(f"{op}: {what} {value!r} is not an ONNX element type") from None


def cumsum(x, axis, *, exclusive=0, reverse=0, opset: int | None = None):
    """ONNX CumSum: running sums of ``x`` along ``axis`` (an int or a 0-D int32 / int64 array), in
    x's type (integers wrap; each float partial is rounded to the type). ``exclusive``: the j-th
    output leaves out element j; ``reverse``: sums from the end of the axis.

    Example:
        >>> cumsum(np.array([1, 2, 3], np.int32), 0, exclusive=1).tolist()
        [0, 1, 3]
    """
    return call("CumSum", x, opset, axis=_index_scalar(axis), exclusive=_flag(exclusive), reverse=_flag(reverse))


def cumprod(x, axis, *, exclusive=0, reverse=0, opset: int | None = None):
    """ONNX CumProd (opset >= 26): running products along ``axis``, rules as cumsum (exclusive
    starts from 1).

    Example:
        >>> cumprod(np.array([1.0, 2.0, 3.0]), 0, reverse=1).tolist()
        [6.0, 6.0, 3.0]
    """
    return call("CumProd", x, opset, axis=_index_scalar(axis), exclusive=_flag(exclusive), reverse=_flag(reverse))


def topk(x, k, *, axis: int = -1, largest=1, sorted=1, opset: int | None = None):  # noqa: A002  (ONNX's name)
    """ONNX TopK: the ``k`` largest (``largest=0``: smallest) elements along ``axis`` and their
    int64 indices, as a tuple (values, indices). Equal values: the lower index first; NaN counts
    as the largest. ``k`` >= 1 and at most the axis' size (an attribute before opset 10, the
    input K after; ``largest`` / ``sorted`` need opset >= 11; sorted=0 returns sorted order too).

    Example:
        >>> values, indices = topk(np.array([3.0, 5.0, 5.0, 1.0], np.float32), 2)
        >>> values.tolist(), indices.tolist()
        ([5.0, 5.0], [1, 2])
    """
    import inspect

    from .errors import UnsupportedError
    if "outputs" not in inspect.signature(call).parameters:
        raise UnsupportedError("TopK: dsl.eager.call cannot return both outputs (values, indices) in this "
                               "build; run TopK through dsl.jit or dsl.from_onnx instead")
    builder = current_builder([x, k])
    version = builder.graph.opset if builder is not None else LATEST_OPSET if opset is None else opset
    extra = {"largest": None if largest is True or largest == 1 else _flag(largest),
             "sorted": None if sorted is True or sorted == 1 else _flag(sorted)}
    if isinstance(version, (int, np.integer)) and version < 10:
        extra["k"] = k
    else:
        extra["K"] = k
    return tuple(call("TopK", x, opset, outputs=2, axis=axis, **extra))


def trilu(input, k=None, *, upper=1, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX Trilu (opset >= 14): the upper (``upper=1``: j - i >= k) or lower (j - i <= k) triangle
    of the last two dims of ``input`` (rank >= 2), every other element zero ("" for strings).
    ``k``: an int or a 0-D int64 array (None: 0).

    Example:
        >>> trilu(np.ones((2, 3), np.int32), 1).tolist()
        [[0, 1, 1], [0, 0, 1]]
    """
    return call("Trilu", input, opset, k=None if k is None else _index_scalar(k), upper=_flag(upper))


def eye_like(input, *, dtype=None, k: int = 0, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX EyeLike (opset >= 9): a matrix of ``input``'s shape (rank 2) with ones on diagonal
    ``k`` (out[i, i + k] = 1) and zeros elsewhere, of element type ``dtype`` (a DType, ONNX name,
    numpy dtype or ONNX code; None: input's type).

    Example:
        >>> eye_like(np.zeros((2, 3), np.float32), dtype="int32", k=1).tolist()
        [[0, 1, 0], [0, 0, 1]]
    """
    code = None if dtype is None else _type_code(dtype, "EyeLike", "dtype")
    return call("EyeLike", input, opset, dtype=code, k=k)


def hardmax(input, axis: int | None = None, *, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX Hardmax: 1 at the first maximum along ``axis``, 0 elsewhere (axis None: the opset's
    default, -1 from 13; opsets 1-12 take the maximum over all axes from ``axis`` on, default 1).

    Example:
        >>> hardmax(np.array([[1.0, 3.0, 3.0]], np.float32)).tolist()
        [[0.0, 1.0, 0.0]]
    """
    return call("Hardmax", input, opset, axis=axis)


def bitcast(input, to, *, opset: int | None = None):  # noqa: A002  (the ONNX input's name)
    """ONNX BitCast (opset >= 26): the same bits read as element type ``to`` (a DType, ONNX name,
    numpy dtype or ONNX code) of the same bit width; little-endian bytes, shape unchanged.

    Example:
        >>> bitcast(np.array([1.0], np.float32), "int32").tolist()
        [1065353216]
    """
    return call("BitCast", input, opset, to=_type_code(to, "BitCast", "to"))


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


# ---- trigonometric, hyperbolic and rounding ops (dsl/ops/trig.py, dsl/ops/rounding.py) ----
def sin(x, *, opset: int | None = None):
    """ONNX Sin: the sine of ``x`` (radians); float16/bfloat16 computed in float32, rounded once.

    Example:
        >>> sin(np.array([0.0, np.pi / 2], np.float32)).tolist()
        [0.0, 1.0]
    """
    return call("Sin", x, opset)


def cos(x, *, opset: int | None = None):
    """ONNX Cos: the cosine of ``x`` (radians).

    Example:
        >>> cos(np.array([0.0, np.pi])).tolist()
        [1.0, -1.0]
    """
    return call("Cos", x, opset)


def tan(x, *, opset: int | None = None):
    """ONNX Tan: the tangent of ``x`` (radians); -0 stays -0.

    Example:
        >>> tan(np.array([-0.0, np.pi / 4], np.float32)).tolist()
        [-0.0, 1.0]
    """
    return call("Tan", x, opset)


def asin(x, *, opset: int | None = None):
    """ONNX Asin: the arcsine of ``x`` in [-pi/2, pi/2]; NaN outside [-1, 1].

    Example:
        >>> asin(np.array([1.0, 2.0], np.float32)).tolist()
        [1.5707963705062866, nan]
    """
    return call("Asin", x, opset)


def acos(x, *, opset: int | None = None):
    """ONNX Acos: the arccosine of ``x`` in [0, pi]; NaN outside [-1, 1].

    Example:
        >>> acos(np.array([1.0, -1.0])).tolist()
        [0.0, 3.141592653589793]
    """
    return call("Acos", x, opset)


def atan(x, *, opset: int | None = None):
    """ONNX Atan: the arctangent of ``x`` in [-pi/2, pi/2].

    Example:
        >>> atan(np.array([np.inf, -0.0])).tolist()
        [1.5707963267948966, -0.0]
    """
    return call("Atan", x, opset)


def sinh(x, *, opset: int | None = None):
    """ONNX Sinh: the hyperbolic sine of ``x``.

    Example:
        >>> sinh(np.array([0.0, 1.0])).tolist()
        [0.0, 1.1752011936438014]
    """
    return call("Sinh", x, opset)


def cosh(x, *, opset: int | None = None):
    """ONNX Cosh: the hyperbolic cosine of ``x``.

    Example:
        >>> cosh(np.array([0.0, -np.inf])).tolist()
        [1.0, inf]
    """
    return call("Cosh", x, opset)


def asinh(x, *, opset: int | None = None):
    """ONNX Asinh: the inverse hyperbolic sine of ``x``.

    Example:
        >>> asinh(np.array([-0.0, 1.0])).tolist()
        [-0.0, 0.881373587019543]
    """
    return call("Asinh", x, opset)


def acosh(x, *, opset: int | None = None):
    """ONNX Acosh: the inverse hyperbolic cosine of ``x``; NaN below 1.

    Example:
        >>> acosh(np.array([1.0, 0.5])).tolist()
        [0.0, nan]
    """
    return call("Acosh", x, opset)


def atanh(x, *, opset: int | None = None):
    """ONNX Atanh: the inverse hyperbolic tangent of ``x``; +-inf at +-1, NaN beyond.

    Example:
        >>> np.round(atanh(np.array([0.5, -1.0])), 12).tolist()  # (the last digit varies by libm)
        [0.549306144334, -inf]
    """
    return call("Atanh", x, opset)


def floor(x, *, opset: int | None = None):
    """ONNX Floor: the largest integral value <= ``x`` (-0, +-inf and NaN kept).

    Example:
        >>> floor(np.array([-1.5, 2.5], np.float32)).tolist()
        [-2.0, 2.0]
    """
    return call("Floor", x, opset)


def ceil(x, *, opset: int | None = None):
    """ONNX Ceil: the smallest integral value >= ``x`` (-0, +-inf and NaN kept).

    Example:
        >>> ceil(np.array([-1.5, 2.5], np.float32)).tolist()
        [-1.0, 3.0]
    """
    return call("Ceil", x, opset)


def round(x, *, opset: int | None = None):  # noqa: A001  (the ONNX op's name)
    """ONNX Round: ``x`` rounded to the nearest integral value, halves to even (as np.rint).

    Example:
        >>> round(np.array([0.5, 1.5, 2.5, -0.5], np.float32)).tolist()
        [0.0, 2.0, 2.0, -0.0]
    """
    return call("Round", x, opset)


def sign(x, *, opset: int | None = None):
    """ONNX Sign: -1, 0 or 1 in ``x``'s type by the sign of each element (NaN stays NaN).

    Example:
        >>> sign(np.array([-3, 0, 7], np.int8)).tolist()
        [-1, 0, 1]
    """
    return call("Sign", x, opset)


def is_nan(x, *, opset: int | None = None):
    """ONNX IsNaN: whether each element of ``x`` is NaN, as bool (float8 inputs from opset 20).

    Example:
        >>> is_nan(np.array([np.nan, 1.0], np.float32)).tolist()
        [True, False]
    """
    return call("IsNaN", x, opset)


def is_inf(x, *, detect_negative=1, detect_positive=1, opset: int | None = None):
    """ONNX IsInf: whether each element of ``x`` is +inf (if ``detect_positive``) or -inf (if
    ``detect_negative``), as bool.

    Example:
        >>> is_inf(np.array([np.inf, -np.inf, 1.0]), detect_negative=0).tolist()
        [True, False, False]
    """
    return call("IsInf", x, opset, detect_negative=_flag(detect_negative), detect_positive=_flag(detect_positive))


# ---- bitwise, modulo and variadic ops (dsl/ops/bitwise.py, dsl/ops/variadic.py) ----
def mod(a, b, *, fmod=0, opset: int | None = None):
    """ONNX Mod: ``a mod b``, numpy broadcasting; fmod=0 has the sign of ``b`` (Python's ``%``,
    np.remainder), fmod=1 the sign of ``a`` (C fmod, np.fmod).

    Floats need fmod=1 before opset 28 (a DTypeError otherwise). Integer ``x mod 0`` is 0
    (numpy's answer, without a warning); float ``x mod 0`` is NaN.

    Example:
        >>> mod(np.array([-7, 7, 5], np.int32), np.array([3, -3, 0], np.int32)).tolist()
        [2, -2, 0]
    """
    return call("Mod", _weak("Mod", a, b), opset, B=_weak("Mod", b, a), fmod=_flag(fmod))


def bit_shift(x, y, *, direction: str, opset: int | None = None):
    """ONNX BitShift: ``x`` shifted ``y`` bits, direction "LEFT" or "RIGHT" (unsigned types; signed
    from opset 28, RIGHT arithmetic). A shift outside [0, bits) gives 0 (-1 for RIGHT of a negative x).

    Example:
        >>> bit_shift(np.array([1, 255], np.uint8), np.array([3, 8], np.uint8), direction="LEFT").tolist()
        [8, 0]
    """
    return call("BitShift", _weak("BitShift", x, y), opset, Y=_weak("BitShift", y, x), direction=direction)


def bitwise_and(a, b, *, opset: int | None = None):
    """ONNX BitwiseAnd (opset >= 18) of integer tensors, broadcast.

    Example:
        >>> bitwise_and(np.array([12, -1], np.int8), 10).tolist()
        [8, 10]
    """
    return _binary("BitwiseAnd", a, b, opset)


def bitwise_or(a, b, *, opset: int | None = None):
    """ONNX BitwiseOr (opset >= 18) of integer tensors, broadcast.

    Example:
        >>> bitwise_or(np.array([12, 1], np.uint8), 10).tolist()
        [14, 11]
    """
    return _binary("BitwiseOr", a, b, opset)


def bitwise_xor(a, b, *, opset: int | None = None):
    """ONNX BitwiseXor (opset >= 18) of integer tensors, broadcast.

    Example:
        >>> bitwise_xor(np.array([12, 1], np.uint8), 10).tolist()
        [6, 11]
    """
    return _binary("BitwiseXor", a, b, opset)


def bitwise_not(x, *, opset: int | None = None):
    """ONNX BitwiseNot (opset >= 18) of an integer tensor.

    Example:
        >>> bitwise_not(np.array([0, 5], np.uint8)).tolist()
        [255, 250]
    """
    return call("BitwiseNot", x, opset)


def xor(a, b, *, opset: int | None = None):
    """ONNX Xor on bool tensors, broadcast.

    Example:
        >>> xor(np.array([True, False]), True).tolist()
        [False, True]
    """
    return _binary("Xor", a, b, opset)


def _variadic_list(op: str, inputs, opset):
    if not isinstance(inputs, (list, tuple)):
        raise InputError(f"{op}: takes its inputs as one list, got {type(inputs).__name__}")
    return _variadic(op, tuple(inputs), opset)


def sum(inputs, *, opset: int | None = None):  # noqa: A001  (the ONNX op's name)
    """ONNX Sum: the elementwise sum of a list of 1 to 64 float tensors (broadcast from opset 8).

    Example:
        >>> sum([np.array([1.0, 2.0], np.float32), np.float32(0.5), 1.0]).tolist()
        [2.5, 3.5]
    """
    return _variadic_list("Sum", inputs, opset)


def mean(inputs, *, opset: int | None = None):
    """ONNX Mean: the elementwise mean of a list of 1 to 64 float tensors (broadcast from opset 8).

    Example:
        >>> mean([np.array([1.0, 2.0], np.float32), np.array([2.0, 5.0], np.float32)]).tolist()
        [1.5, 3.5]
    """
    return _variadic_list("Mean", inputs, opset)


# ---- activations (dsl/ops/activations.py) ----
def elu(x, *, alpha: float = 1.0, opset: int | None = None):
    """ONNX Elu: ``alpha * (exp(x) - 1)`` for x < 0, ``x`` for x >= 0.

    Example:
        >>> np.round(elu(np.array([-1.0, 0.0, 2.0]), alpha=2.0), 4).tolist()
        [-1.2642, 0.0, 2.0]
    """
    return call("Elu", x, opset, alpha=alpha)


_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def selu(x, *, alpha: float = _SELU_ALPHA, gamma: float = _SELU_GAMMA, opset: int | None = None):
    """ONNX Selu: ``gamma * (alpha * exp(x) - alpha)`` for x <= 0, ``gamma * x`` for x > 0 (left at
    their defaults, alpha and gamma are the version's: 1.6732 and 1.0507 at opset 1).

    Example:
        >>> np.round(selu(np.array([-1.0, 1.0])), 4).tolist()
        [-1.1113, 1.0507]
    """
    return call("Selu", x, opset, alpha=None if alpha == _SELU_ALPHA else alpha,
                gamma=None if gamma == _SELU_GAMMA else gamma)


def celu(x, *, alpha: float = 1.0, opset: int | None = None):
    """ONNX Celu: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Example:
        >>> np.round(celu(np.array([-1.0, 2.0]), alpha=2.0), 4).tolist()
        [-0.7869, 2.0]
    """
    return call("Celu", x, opset, alpha=alpha)


def leaky_relu(x, *, alpha: float = 0.01, opset: int | None = None):
    """ONNX LeakyRelu: ``alpha * x`` for x < 0, ``x`` for x >= 0.

    Example:
        >>> leaky_relu(np.array([-2.0, 3.0], np.float32), alpha=0.5).tolist()
        [-1.0, 3.0]
    """
    return call("LeakyRelu", x, opset, alpha=alpha)


def prelu(x, slope, *, opset: int | None = None):
    """ONNX PRelu: ``slope * x`` for x < 0, ``x`` for x >= 0; slope broadcasts unidirectionally to x
    (opsets 1 and 6 also take a 1-D slope of x's channel count, dim 1).

    Example:
        >>> prelu(np.array([[-2.0, 3.0], [-4.0, 1.0]], np.float32), np.array([0.5, 2.0], np.float32)).tolist()
        [[-1.0, 3.0], [-2.0, 1.0]]
    """
    return _binary("PRelu", x, slope, opset, second="slope")


def hard_sigmoid(x, *, alpha: float = 0.2, beta: float = 0.5, opset: int | None = None):
    """ONNX HardSigmoid: ``max(0, min(1, alpha * x + beta))``.

    Example:
        >>> hard_sigmoid(np.array([-5.0, 0.0, 5.0], np.float32)).tolist()
        [0.0, 0.5, 1.0]
    """
    return call("HardSigmoid", x, opset, alpha=alpha, beta=beta)


def hard_swish(x, *, opset: int | None = None):
    """ONNX HardSwish: ``x * max(0, min(1, x / 6 + 0.5))``.

    Example:
        >>> hard_swish(np.array([-4.0, 1.5, 6.0], np.float32)).tolist()
        [-0.0, 1.125, 6.0]
    """
    return call("HardSwish", x, opset)


def softplus(x, *, opset: int | None = None):
    """ONNX Softplus: ``ln(exp(x) + 1)``, evaluated without overflow.

    Example:
        >>> np.round(softplus(np.array([0.0, 100.0], np.float64)), 4).tolist()
        [0.6931, 100.0]
    """
    return call("Softplus", x, opset)


def softsign(x, *, opset: int | None = None):
    """ONNX Softsign: ``x / (1 + |x|)``.

    Example:
        >>> softsign(np.array([-3.0, 1.0], np.float32)).tolist()
        [-0.75, 0.5]
    """
    return call("Softsign", x, opset)


def thresholded_relu(x, *, alpha: float = 1.0, opset: int | None = None):
    """ONNX ThresholdedRelu: ``x`` for x > alpha, else 0.

    Example:
        >>> thresholded_relu(np.array([0.5, 1.0, 2.0], np.float32)).tolist()
        [0.0, 0.0, 2.0]
    """
    return call("ThresholdedRelu", x, opset, alpha=alpha)


def shrink(input, *, bias: float = 0.0, lambd: float = 0.5, opset: int | None = None):  # noqa: A002  (ONNX's name)
    """ONNX Shrink: ``x + bias`` for x < -lambd, ``x - bias`` for x > lambd, else 0 (integer inputs:
    bias truncated to the type, as the function body's CastLike).

    Example:
        >>> shrink(np.array([-2.0, 0.25, 2.0], np.float32), bias=0.5, lambd=1.0).tolist()
        [-1.5, 0.0, 1.5]
    """
    return call("Shrink", input, opset, bias=bias, lambd=lambd)


def gelu(x, *, approximate: str = "none", opset: int | None = None):
    """ONNX Gelu: ``0.5 * x * (1 + erf(x / sqrt(2)))``; approximate="tanh":
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.

    Example:
        >>> np.round(gelu(np.array([0.0, 1.0]), approximate="tanh"), 4).tolist()
        [0.0, 0.8412]
    """
    return call("Gelu", x, opset, approximate=approximate)


def mish(x, *, opset: int | None = None):
    """ONNX Mish: ``x * tanh(softplus(x))``.

    Example:
        >>> np.round(mish(np.array([0.0, 1.0])), 4).tolist()
        [0.0, 0.8651]
    """
    return call("Mish", x, opset)


def swish(x, *, alpha: float = 1.0, opset: int | None = None):
    """ONNX Swish: ``x * sigmoid(alpha * x)`` (opset >= 24).

    Example:
        >>> np.round(swish(np.array([0.0, 2.0]), alpha=0.5), 4).tolist()
        [0.0, 1.4621]
    """
    return call("Swish", x, opset, alpha=alpha)


def swiglu(a, b, *, alpha: float = 1.0, opset: int | None = None):
    """ONNX SwiGLU: ``Swish_alpha(a) * b = a * sigmoid(alpha * a) * b``, a and b of one shape
    (opset >= 28; no broadcasting).

    Example:
        >>> np.round(swiglu(np.array([0.0, 2.0]), np.array([3.0, 0.5])), 4).tolist()
        [0.0, 0.8808]
    """
    a, b = _weak("SwiGLU", a, b), _weak("SwiGLU", b, a)
    return call("SwiGLU", a, opset, B=b, alpha=alpha)


# ---- losses and dropout (dsl/ops/losses.py, dsl/ops/dropout.py) ----------------------------------
def negative_log_likelihood_loss(input, target, weight=None, *, ignore_index: int | None = None,  # noqa: A002
                                 reduction: str = "mean", opset: int | None = None):
    """ONNX NegativeLogLikelihoodLoss: ``-input[n, target[n, d...], d...]`` weighted by
    ``weight[target]``, reduced by ``reduction`` ("none", "sum" or "mean": the weighted sum over
    the sum of the weights of the targets that are not ``ignore_index``).

    Raises:
        DslError: a target outside [0, C) that is not ignore_index, mismatched shapes.

    Example:
        >>> loss = negative_log_likelihood_loss(np.log(np.array([[0.5, 0.5], [0.25, 0.75]])),
        ...                                     np.array([0, 1]), reduction="sum")
        >>> print(f"{float(loss):.4f}")
        0.9808
    """
    return call("NegativeLogLikelihoodLoss", input, opset, target=target, weight=weight,
                ignore_index=ignore_index, reduction=reduction)


def softmax_cross_entropy_loss(scores, labels, weights=None, *, ignore_index: int | None = None,
                               reduction: str = "mean", return_log_prob: bool = False,
                               opset: int | None = None):
    """ONNX SoftmaxCrossEntropyLoss: the negative log likelihood loss of ``log_softmax(scores,
    axis=1)``; ``return_log_prob`` also returns the log-probabilities (the op's second output).

    Raises:
        DslError: a label outside [0, C) that is not ignore_index, mismatched shapes.

    Example:
        >>> print(f"{float(softmax_cross_entropy_loss(np.zeros((2, 4)), np.array([1, 3]))):.4f}")
        1.3863
    """
    count = 2 if return_log_prob else 1
    out = call("SoftmaxCrossEntropyLoss", scores, opset, labels=labels, weights=weights,
               ignore_index=ignore_index, reduction=reduction, outputs=count)
    return tuple(out) if return_log_prob else out


def dropout(data, ratio=None, training_mode=None, *, seed: int | None = None, return_mask: bool = False,
            opset: int | None = None):
    """ONNX Dropout: the identity in inference mode (the default); with ``training_mode`` true,
    ``mask * data / (1 - ratio)`` where mask is ``np.random.RandomState(seed).uniform(0, 1, shape)
    >= ratio`` (a fresh draw without ``seed``). ``return_mask`` also returns the mask.

    Raises:
        DslError: ratio outside [0, 1).

    Example:
        >>> dropout(np.array([1.0, 2.0], np.float32)).tolist()
        [1.0, 2.0]
    """
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool):
        ratio = np.asarray(ratio, np.float32)  # T1 (ratio's type) is float at every version
    if isinstance(training_mode, (bool, np.bool_)):
        training_mode = np.asarray(training_mode)
    count = 2 if return_mask else 1
    out = call("Dropout", data, opset, ratio=ratio, training_mode=training_mode, seed=seed, outputs=count)
    return tuple(out) if return_mask else out


# ---- normalization (dsl/ops/normalization.py) -----------------------------------------------------
def layer_normalization(x, scale, bias=None, axis: int = -1, epsilon: float = 1e-5, *, stash_type: int = 1,
                        return_stats: bool = False, opset: int | None = None):
    """ONNX LayerNormalization: ``(x - mean) / sqrt(var + epsilon) * scale + bias`` over dims
    [axis, rank), stage one in ``stash_type`` (1 float, 16 bfloat16). ``return_stats`` also
    returns Mean and InvStdDev (reduced dims kept as 1, of the stash type).

    Raises:
        DslError: axis out of range, scale / bias not broadcastable to x, a bad stash_type.

    Example:
        >>> layer_normalization(np.array([[1.0, 3.0]], np.float32), np.ones(2, np.float32)).round(3).tolist()
        [[-1.0, 1.0]]
    """
    out = call("LayerNormalization", x, opset, Scale=scale, B=bias, axis=axis, epsilon=epsilon,
               stash_type=stash_type, outputs=3 if return_stats else 1)
    if return_stats:
        return tuple(out)
    return out[0] if isinstance(out, tuple) else out  # (traced: the node's every output)


def rms_normalization(x, scale, axis: int = -1, epsilon: float = 1e-5, *, stash_type: int = 1,
                      opset: int | None = None):
    """ONNX RMSNormalization: ``x / sqrt(mean(x**2 over dims [axis, rank)) + epsilon) * scale``.

    Raises:
        DslError: axis out of range, scale not broadcastable to x, a bad stash_type.

    Example:
        >>> y = rms_normalization(np.array([[3.0, 4.0]], np.float32), np.ones(2, np.float32), epsilon=0.0)
        >>> print(", ".join(f"{v:.4f}" for v in y.ravel()))
        0.8485, 1.1314
    """
    return call("RMSNormalization", x, opset, scale=scale, axis=axis, epsilon=epsilon, stash_type=stash_type)


def lp_normalization(x, axis: int = -1, p: int = 2, *, opset: int | None = None):
    """ONNX LpNormalization: ``x`` divided by its L1 (p=1) or L2 (p=2) norm along ``axis`` (0 where it is 0).

    Example:
        >>> lp_normalization(np.array([3.0, 4.0], np.float32)).tolist()
        [0.6000000238418579, 0.800000011920929]
    """
    return call("LpNormalization", x, opset, axis=axis, p=p)


def group_normalization(x, scale, bias, num_groups: int, epsilon: float = 1e-5, *, stash_type: int = 1,
                        opset: int | None = None):
    """ONNX GroupNormalization: x (N x C x ...) normalized per instance and group of
    C / num_groups channels, then ``* scale + bias`` (per channel; per group at opset 18-20).

    Example:
        >>> x = np.array([[[1.0], [3.0]]], np.float32)
        >>> group_normalization(x, np.ones(2, np.float32), np.zeros(2, np.float32), 1).round(3).ravel().tolist()
        [-1.0, 1.0]
    """
    return call("GroupNormalization", x, opset, scale=scale, bias=bias, num_groups=num_groups, epsilon=epsilon,
                stash_type=None if stash_type == 1 else stash_type)


def instance_normalization(x, scale, bias, epsilon: float = 1e-5, *, opset: int | None = None):
    """ONNX InstanceNormalization: ``scale * (x - mean) / sqrt(var + epsilon) + bias``, statistics per
    instance and channel of x (N x C x D1 ...).

    Example:
        >>> x = np.array([[[1.0, 3.0]]], np.float32)
        >>> instance_normalization(x, np.ones(1, np.float32), np.zeros(1, np.float32)).round(3).tolist()
        [[[-1.0, 1.0]]]
    """
    return call("InstanceNormalization", x, opset, scale=scale, B=bias, epsilon=epsilon)


def batch_normalization(x, scale, bias, input_mean, input_var, epsilon: float = 1e-5, momentum: float = 0.9, *,
                        training_mode: int = 0, opset: int | None = None):
    """ONNX BatchNormalization: ``(x - mean) / sqrt(var + epsilon) * scale + bias`` per channel (dim 1).
    ``training_mode`` (opset >= 14) uses the batch's statistics and returns (Y, running_mean, running_var).

    Example:
        >>> one = np.ones(1, np.float32)
        >>> batch_normalization(np.array([[3.0]], np.float32), one, 0 * one, one, 4 * one, epsilon=0.0).tolist()
        [[1.0]]
    """
    builder = current_builder([x, scale, bias, input_mean, input_var])
    version = builder.graph.opset if builder is not None else LATEST_OPSET if opset is None else opset
    names = ("mean", "var") if version < 14 else ("input_mean", "input_var")
    stats = {names[0]: input_mean, names[1]: input_var}
    out = call("BatchNormalization", x, opset, scale=scale, B=bias, **stats, epsilon=epsilon, momentum=momentum,
               training_mode=training_mode or None, outputs=3 if training_mode else 1)
    if training_mode:
        return tuple(out)
    return out[0] if isinstance(out, tuple) else out


def mean_variance_normalization(x, axes=(0, 2, 3), *, opset: int | None = None):
    """ONNX MeanVarianceNormalization: ``(x - E[x]) / (sqrt(E[(x - E[x])**2]) + 1e-9)`` over ``axes``.

    Example:
        >>> mean_variance_normalization(np.array([1.0, 3.0], np.float32), axes=[0]).round(3).tolist()
        [-1.0, 1.0]
    """
    return call("MeanVarianceNormalization", x, opset, axes=list(axes))


# ---- Gemm, Einsum and quantized matmuls (dsl/ops/gemm.py, dsl/ops/matmul_integer.py) ---------------
EINSUM_MAX_INPUTS = 64  # (Einsum's variadic slots, dsl/ops/gemm.py)


def _version_of(values, opset) -> int:
    builder = current_builder(list(values))
    return builder.graph.opset if builder is not None else LATEST_OPSET if opset is None else opset


def gemm(a, b, c=None, alpha: float = 1.0, beta: float = 1.0, trans_a=0, trans_b=0, *,
         opset: int | None = None):
    """ONNX Gemm: ``alpha * A' @ B' + beta * C`` with A' = A.T if ``trans_a``, B' = B.T if ``trans_b``.

    Args:
        a, b: 2-D tensors of one float or (opset >= 9) int32 / int64 / uint32 / uint64 type.
        c: optional (required before opset 11), unidirectionally broadcastable to [M, N]; before
            opset 7 this function sets ``broadcast=1`` so that C broadcasts at every opset.
        alpha, beta: float factors; beta = 0 leaves C out. Integer types wrap.
        trans_a, trans_b: 0 / 1 (or bools).

    Returns:
        The [M, N] product, of the type of ``a``.

    Raises:
        DslError: operands not 2-D, inner dims that differ, C not broadcastable to [M, N], a type
            the opset does not accept.

    Example:
        >>> a = np.array([[1.0, 2.0]], np.float32)
        >>> gemm(a, a, np.float32(1.0), alpha=2.0, trans_b=1).tolist()
        [[11.0]]
    """
    broadcast = 1 if c is not None and _version_of((a, b, c), opset) < 7 else None
    return call("Gemm", a, opset, B=b, C=_weak("Gemm", c, a), alpha=float(alpha), beta=float(beta),
                transA=_flag(trans_a), transB=_flag(trans_b), broadcast=broadcast)


def einsum(equation: str, *inputs, opset: int | None = None):
    """ONNX Einsum: Einstein summation of ``inputs`` by ``equation`` (numpy.einsum's notation:
    explicit ``->`` output or the implicit one, ``...`` for broadcast dims).

    Args:
        equation: e.g. ``"ij,jk->ik"``, ``"ii"`` (trace), ``"...ij->...ji"``.
        inputs: 1 to 64 tensors of one numeric type, one per term.

    Returns:
        The summed tensor, of the inputs' type (integer sums wrap).

    Raises:
        DslError: a malformed equation, a term count that is not the input count, ranks or letter
            sizes that do not fit the terms.

    Example:
        >>> einsum("ij,j->i", np.array([[1, 2], [3, 4]], np.int32), np.array([1, 1], np.int32)).tolist()
        [3, 7]
    """
    if not 1 <= len(inputs) <= EINSUM_MAX_INPUTS:
        raise InputError(f"Einsum: takes 1 to {EINSUM_MAX_INPUTS} inputs, got {len(inputs)}")
    if not isinstance(equation, str):
        raise InputError(f"Einsum: equation {equation!r} must be a str like 'ij,jk->ik'")
    return call("Einsum", inputs[0], opset, equation=equation,
                **{f"Inputs_{k}": v for k, v in enumerate(inputs[1:], start=1)})


def matmul_integer(a, b, a_zero_point=None, b_zero_point=None, *, opset: int | None = None):
    """ONNX MatMulInteger: int32 ``(a - a_zero_point) @ (b - b_zero_point)`` with numpy.matmul's
    shapes (1-D operands promoted, batch dims broadcast); sums wrap modulo 2**32.

    Args:
        a, b: int8 / uint8 tensors.
        a_zero_point: of a's type; a scalar, or per row of a ([M] or [..., M, 1]). A Python int takes a's type.
        b_zero_point: of b's type; a scalar, or per column of b ([N] or [..., 1, N]).

    Returns:
        The int32 product.

    Raises:
        DslError: inner dims that differ, batch dims that do not broadcast, a zero point of another
            type than its operand or of a bad shape.

    Example:
        >>> a = np.array([[3, 4]], np.uint8)
        >>> matmul_integer(a, np.array([[1], [2]], np.uint8), a_zero_point=np.uint8(1)).tolist()
        [[8]]
    """
    return call("MatMulInteger", a, opset, B=b, a_zero_point=_weak("MatMulInteger", a_zero_point, a),
                b_zero_point=_weak("MatMulInteger", b_zero_point, b))


def _scales(op: str, scales: tuple) -> list:
    """Python float scales take the type of a tensor scale next to them (float when there is none)."""
    anchor = next((s for s in scales if not _is_weak(s)), None)
    return [s if not _is_weak(s) else weak_scalar(op, float(s), dtypes.dtype("float") if anchor is None
                                                  else _element_type(op, anchor)) for s in scales]


def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, *,
                   opset: int | None = None):
    """ONNX QLinearMatMul: ``saturate(round_half_even(((a - a_zp) * a_scale) @ ((b - b_zp) * b_scale)
    / y_scale) + y_zp)`` with numpy.matmul's shapes.

    Args:
        a, b: int8 / uint8 (opset >= 21 also float8) tensors; zero points of their types (a Python int takes it).
        a_scale, b_scale: float (opset >= 21 also float16 / bfloat16) scalars, or per row of a /
            per column of b, each of its zero point's shape. A Python float takes the type of a tensor scale.
        y_scale, y_zero_point: per-tensor scalars; y_zero_point's type is the output's.

    Returns:
        The quantized product, of y_zero_point's type.

    Raises:
        DslError: bad shapes, a zero point of another type than its operand, scales of different types
            (opset >= 21), a non-scalar y_scale / y_zero_point.

    Example:
        >>> q = np.array([[2, 4]], np.uint8)
        >>> qlinear_matmul(q, 0.5, np.uint8(0), q.T, 0.5, np.uint8(0), 1.0, np.uint8(0)).tolist()
        [[5]]
    """
    op = "QLinearMatMul"
    a_scale, b_scale, y_scale = _scales(op, (a_scale, b_scale, y_scale))
    return call(op, a, opset, a_scale=a_scale, a_zero_point=_weak(op, a_zero_point, a), b=b, b_scale=b_scale,
                b_zero_point=_weak(op, b_zero_point, b), y_scale=y_scale,
                y_zero_point=_weak(op, y_zero_point, a))


def dynamic_quantize_linear(x, *, opset: int | None = None):
    """ONNX DynamicQuantizeLinear: uint8 quantization of float ``x`` over its range widened to include 0:
    ``y_scale = (max(0, max(x)) - min(0, min(x))) / 255``, ``y_zero_point = round(clip(-min(0, min(x)) /
    y_scale, 0, 255))``, ``y = saturate(round(x / y_scale) + y_zero_point)`` (rounding half to even;
    y_scale = 1 for an all-zero or empty x).

    Returns:
        (y, y_scale, y_zero_point): uint8 of x's shape, a float32 scalar, a uint8 scalar.

    Raises:
        DslError: x not float32.

    Example:
        >>> y, scale, zero_point = dynamic_quantize_linear(np.array([0.0, 2.55], np.float32))
        >>> print(y.tolist(), scale, zero_point)
        [0, 255] 0.01 0
    """
    return tuple(call("DynamicQuantizeLinear", x, opset, outputs=3))


# ---- rotary embedding (dsl/ops/rotary.py) -----------------------------------------------------------
def rotary_embedding(x, cos_cache, sin_cache, position_ids=None, *, interleaved: int = 0, num_heads: int | None = None,
                     rotary_embedding_dim: int = 0, opset: int | None = None):
    """ONNX RotaryEmbedding (RoPE): the first ``rotary_embedding_dim`` elements (0: all) of each
    head rotated by angle pairs ``cos_cache`` / ``sin_cache``, gathered at ``position_ids`` when
    given; halves (``interleaved=0``) or even / odd pairs.

    Args:
        x: 4-D (batch, num_heads, sequence, head_size), or 3-D (batch, sequence, hidden) with ``num_heads``.
        cos_cache, sin_cache: (max_position + 1, rotary_dim / 2) with ``position_ids`` (int64,
            (batch, sequence)), else (batch, sequence, rotary_dim / 2); of x's type.

    Returns:
        The rotated tensor, x's shape and type.

    Raises:
        DslError: a rank other than 3 or 4, num_heads missing or not dividing the hidden size, an
            odd or too large rotary_embedding_dim, caches or position_ids of the wrong shape or type,
            a position outside the cache (at run time).

    Example:
        >>> x = np.array([[[[1.0, 0.0]]]], np.float32)        # one head of size 2
        >>> c, s = np.array([[0.0]], np.float32), np.array([[1.0]], np.float32)  # a quarter turn
        >>> rotary_embedding(x, c, s, np.array([[0]])).tolist()
        [[[[0.0, 1.0]]]]
    """
    return call("RotaryEmbedding", x, opset, cos_cache=cos_cache, sin_cache=sin_cache, position_ids=position_ids,
                interleaved=interleaved, num_heads=num_heads, rotary_embedding_dim=rotary_embedding_dim)


# ---- attention (dsl/ops/attention.py) ----------------------------------------------------------------
def attention(q, k, v, attn_mask=None, past_key=None, past_value=None, *, is_causal: int = 0, scale: float | None = None,
              softcap: float = 0.0, q_num_heads: int | None = None, kv_num_heads: int | None = None,
              softmax_precision: int | None = None, qk_matmul_output_mode: int = 0, return_present: bool = False,
              nonpad_kv_seqlen=None, left_window_size: int | None = None, right_window_size: int | None = None,
              return_qk_matmul: bool = False, opset: int | None = None):
    """ONNX Attention: ``softmax(softcap(q k^T * scale) + bias) v`` per head, the bias made of
    ``attn_mask`` (bool: True attends; float: added; a short last dim is padded with -inf),
    ``is_causal`` (query i attends key j <= i + past length), ``nonpad_kv_seqlen`` (version 24)
    and the window (version 25). A query row with no key to attend gives 0.

    Args:
        q, k, v: 4-D (batch, heads, sequence, head_size), or 3-D (batch, sequence, heads * head_size)
            with ``q_num_heads`` / ``kv_num_heads``; kv heads divide q heads (grouped-query).
        attn_mask: broadcastable to (batch, q_heads, q_sequence, total_sequence).
        past_key, past_value: (batch, kv_heads, past_sequence, head_size), put before k / v.
        scale: of q k^T (default 1 / sqrt(head_size)); softcap: 0 disables it.
        softmax_precision: an ONNX type code (1 float, 10 float16, 11 double, 16 bfloat16).
        qk_matmul_output_mode: which scores ``return_qk_matmul`` returns (0 q k^T * scale,
            1 after softcap, 2 with the bias, 3 the probabilities).
        return_present: also return present_key, present_value (4-D, past and new keys / values).

    Returns:
        y (q's layout and type, head size of v); with ``return_present`` (y, present_key,
        present_value); with ``return_qk_matmul`` the scores last.

    Raises:
        DslError: ranks other than all 3 or all 4, missing or non-dividing head counts, mismatched
            batch / sequence / head sizes, a mask not broadcastable, past shapes or types that do
            not match, past given with nonpad_kv_seqlen, bad attribute values.

    Example:
        >>> q = np.ones((1, 1, 1, 2), np.float32)
        >>> k = np.array([[[[1.0, 0.0], [1.0, 0.0]]]], np.float32)
        >>> v = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
        >>> attention(q, k, v).tolist()
        [[[[2.0, 3.0]]]]
    """
    out = call("Attention", q, opset, outputs=4, K=k, V=v,
               attn_mask=attn_mask, past_key=past_key, past_value=past_value, nonpad_kv_seqlen=nonpad_kv_seqlen,
               is_causal=is_causal, scale=scale, softcap=softcap, q_num_heads=q_num_heads, kv_num_heads=kv_num_heads,
               softmax_precision=softmax_precision, qk_matmul_output_mode=qk_matmul_output_mode,
               left_window_size=left_window_size, right_window_size=right_window_size)
    if not (return_present or return_qk_matmul):
        return out[0]
    return tuple(out[:3] if not return_qk_matmul else out if return_present else (out[0], out[3]))


# ---- linear attention (dsl/ops/linear_attention.py) ----------------------------------------------------
def linear_attention(query, key, value, past_state=None, decay=None, beta=None, *, q_num_heads: int,
                     kv_num_heads: int, update_rule: str = "gated_delta", scale: float = 0.0, chunk_size: int = 64,
                     opset: int | None = None):
    """ONNX LinearAttention (opset >= 27): a recurrent state S (d_k x d_v per KV head) updated token
    by token, ``o_t = scale * q_t^T S_t``; ``update_rule`` 'linear' (S += k v^T), 'gated'
    (S = exp(decay) S + k v^T), 'delta' (S += beta k (v - S^T k)^T) or 'gated_delta' (both).

    Args:
        query: (batch, sequence, q_num_heads * d_k); key: (batch, sequence, kv_num_heads * d_k);
            value: (batch, sequence, kv_num_heads * d_v); all of one float type.
        past_state: (batch, kv_num_heads, d_k, d_v), default zeros; may have another float type.
        decay: log-space gate (batch, sequence, kv_num_heads * d_k or kv_num_heads), for the gated rules.
        beta: update rate (batch, sequence, kv_num_heads or 1), for the delta rules.
        q_num_heads, kv_num_heads: head counts; kv_num_heads divides q_num_heads (grouped-query).
        scale: 0 means 1 / sqrt(d_k). chunk_size: a tuning hint (positive), no effect on values.

    Returns:
        (output (batch, sequence, q_num_heads * d_v) of query's type, present_state of past_state's
        type, or query's without past_state).

    Raises:
        DslError: ranks or shapes that do not match the head counts, a missing or unexpected
            decay / beta for the update rule, bad head counts, update_rule, scale or chunk_size.

    Example:
        >>> one = np.ones((1, 2, 1), np.float32)
        >>> out, state = linear_attention(one, one, np.array([[[1.0], [2.0]]], np.float32), q_num_heads=1,
        ...                               kv_num_heads=1, update_rule="linear")
        >>> out.tolist(), state.tolist()
        ([[[1.0], [3.0]]], [[[[3.0]]]])
    """
    return tuple(call("LinearAttention", query, opset, outputs=2, key=key, value=value, past_state=past_state,
                      decay=decay, beta=beta, q_num_heads=q_num_heads, kv_num_heads=kv_num_heads,
                      update_rule=update_rule, scale=scale, chunk_size=chunk_size))


# ---- causal convolution with state (dsl/ops/causal_conv.py) --------------------------------------------
def causal_conv_with_state(x, weight, bias=None, past_state=None, *, activation: str = "none",
                           opset: int | None = None):
    """ONNX CausalConvWithState (opset >= 27): a causal depthwise 1-D convolution of
    (batch, channels, length) whose left padding is ``past_state`` (default zeros), with an
    optional bias and fused SiLU; also returns the last k - 1 positions as the next state.

    Args:
        x: (batch, channels, length). weight: (channels, 1, k). bias: (channels,).
        past_state: (batch, channels, k - 1). All of one float type.
        activation: 'none', 'silu' or 'swish' (an alias of 'silu').

    Returns:
        (output of x's shape and type, present_state (batch, channels, k - 1)).

    Raises:
        DslError: ranks or shapes other than the above, an unknown activation, mixed types.

    Example:
        >>> x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
        >>> out, state = causal_conv_with_state(x, np.ones((1, 1, 2), np.float32))
        >>> out.tolist(), state.tolist()
        ([[[1.0, 3.0, 5.0]]], [[[3.0]]])
    """
    return tuple(call("CausalConvWithState", x, opset, outputs=2, weight=weight, bias=bias, past_state=past_state,
                      activation=activation))
