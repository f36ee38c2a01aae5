"""numpy's conventions on traced values and dsl.Tensor: ``x[...]`` indexing, ``x.T``, ``x.mT``,
``x.astype``, ``x.reshape``, the reductions ``x.sum`` / ``mean`` / ``max`` / ``min`` and numpy
ufuncs on traced values (``np.exp(x)``, ``y_numpy * x``), each built from the ONNX ops (dsl.slice, dsl.gather, dsl.squeeze ...), so it traces inside @dsl.jit and
runs eagerly on a Tensor.

Indexing follows numpy's basic indexing: ints (negative from the end; out of range is an
InputError), slices (any step; Python's clamping), None (a new axis) and one Ellipsis, all as
one Slice, then Squeeze / Unsqueeze (views). One integer array (or traced integer tensor) index
becomes a Gather along its axis; with int indices it must sit next to them (numpy would move the
gathered dims to the front otherwise). A boolean index is an InputError pointing to dsl.where.

trace.Tracer and tensor.Tensor call this module through dsl/numpy_methods.py's ``_frontend`` hook,
which importing dsl installs (they sit below the op functions in the import order).
"""
from __future__ import annotations

import numpy as np

from . import dtypes, eager, functional
from .errors import InputError, UnsupportedError
from .numpy_methods import NumpyMethods
from .tensor import Tensor
from .trace import Tracer

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _label(x) -> str:
    return f"%{x.name}" if isinstance(x, Tracer) else f"tensor of shape {list(x.shape)}"


def _is_bool_index(item) -> bool:
    if isinstance(item, (bool, np.bool_)):
        return True
    if isinstance(item, (Tracer, Tensor)):
        return item.dtype.onnx_name == "bool"
    if isinstance(item, (list, np.ndarray)):
        array = np.asarray(item)
        return array.dtype == np.bool_
    return False


def _is_array_index(item) -> bool:
    return isinstance(item, (Tracer, Tensor, np.ndarray, list))


def _slice_window(item: slice, dim, where: str) -> tuple[int, int, int] | None:
    """ONNX (start, end, step) for a Python slice along a dim (None: the whole dim)."""
    for part in (item.start, item.stop, item.step):
        if part is not None and not _is_int(part):
            raise UnsupportedError(f"{where}: slice bound {part!r} must be an int or None (tensor bounds need "
                                   f"dsl.slice with values known at trace time)")
    step = 1 if item.step is None else int(item.step)
    if step == 0:
        raise InputError(f"{where}: slice step cannot be zero")
    if isinstance(dim, int):
        start, stop, step = item.indices(dim)
        count = len(range(start, stop, step))
        if count == dim and step == 1:
            return None
        if count == 0:
            return 0, 0, 1
        return start, (stop if stop >= 0 else INT64_MIN), step
    # a symbolic dim: ONNX's clamping is Python's except a negative step's start below -dim
    if step > 0:
        start = 0 if item.start is None else int(item.start)
        stop = INT64_MAX if item.stop is None else int(item.stop)
        return None if (start, stop, step) == (0, INT64_MAX, 1) else (start, stop, step)
    if item.start is not None and item.start < 0:
        raise UnsupportedError(f"{where}: a negative start with a negative step on the symbolic dim {dim!r}")
    return (INT64_MAX if item.start is None else int(item.start)), \
        (INT64_MIN if item.stop is None else int(item.stop)), step


def _int_window(index: int, dim, axis: int, where: str) -> tuple[int, int, int]:
    index = int(index)
    if isinstance(dim, int):
        if not -dim <= index < dim:
            raise InputError(f"{where}: index {index} is out of bounds for axis {axis} with size {dim}")
        index = index + dim if index < 0 else index
        return index, index + 1, 1
    return index, (INT64_MAX if index == -1 else index + 1), 1


def _expanded(key, rank: int, where: str) -> list:
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(item is Ellipsis for item in items) > 1:
        raise InputError(f"{where}: an index can only have a single ellipsis ('...')")
    for item in items:
        if _is_bool_index(item):
            raise InputError(f"{where}: boolean mask indexing gives a data-dependent shape; use dsl.where(mask, x, "
                             f"fill) to keep the shape (dsl.compress, the selected elements only, is not implemented "
                             f"yet)")
        if not (item is None or item is Ellipsis or isinstance(item, slice) or _is_int(item) or _is_array_index(item)):
            raise InputError(f"{where}: index {item!r} of type {type(item).__name__}; expected ints, slices, None, "
                             f"... or one integer array")
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    if consumed > rank:
        raise InputError(f"{where}: too many indices: {consumed} for a tensor of rank {rank}")
    fill = [slice(None)] * (rank - consumed)
    if Ellipsis in [i for i in items if not _is_array_index(i)]:
        at = next(k for k, item in enumerate(items) if item is Ellipsis)
        return items[:at] + fill + items[at + 1:]
    return items + fill


def getitem(x, key):
    """``x[key]`` by numpy's rules (see the module docstring)."""
    shape = tuple(x.shape)
    where = f"indexing {_label(x)}"
    items = _expanded(key, len(shape), where)
    starts, ends, axes, steps, squeezed, inserted = [], [], [], [], [], []
    gather, advanced, axis, out = None, [], 0, 0
    for position, item in enumerate(items):
        if item is None:
            inserted.append(out)
            out += 1
            continue
        if _is_array_index(item):
            if gather is not None:
                raise UnsupportedError(f"{where}: more than one integer array index; gather one axis at a time "
                                       f"(dsl.gather)")
            gather = (axis, item)
            advanced.append(position)
            out += np.ndim(item) if not isinstance(item, (Tracer, Tensor)) else len(item.shape)
        else:
            window = _slice_window(item, shape[axis], where) if isinstance(item, slice) else \
                _int_window(item, shape[axis], axis, where)
            if not isinstance(item, slice):
                squeezed.append(axis)
                advanced.append(position)
            else:
                out += 1
            if window is not None:
                for target, value in zip((starts, ends, steps), window):
                    target.append(value)
                axes.append(axis)
        axis += 1
    if gather is not None and squeezed and max(advanced) - min(advanced) + 1 != len(advanced):
        raise UnsupportedError(f"{where}: an integer array index apart from int indices (numpy moves the gathered "
                               f"dims to the front); index with the ints first, then gather")
    y = x
    if axes:
        y = functional.slice(y, starts, ends, axes, steps)
    if gather is not None:
        at, indices = gather
        indices = indices if isinstance(indices, (Tracer, Tensor)) else np.asarray(indices)
        if isinstance(indices, np.ndarray) and indices.dtype.kind not in "iu":
            raise InputError(f"{where}: array index of type {indices.dtype}; expected integers")
        if isinstance(indices, np.ndarray) and indices.dtype not in (np.int32, np.int64):
            indices = indices.astype(np.int64)
        y = functional.gather(y, indices, axis=at)
        shift = (len(indices.shape)) - 1
        squeezed = [k + shift if k > at else k for k in squeezed]
    if squeezed:
        y = eager.squeeze(y, squeezed)
    if inserted:
        y = eager.unsqueeze(y, inserted)
    return y


def transpose_all(x):
    """numpy's ``x.T``: every axis reversed."""
    return eager.transpose(x)


def matrix_transpose(x):
    """numpy's ``x.mT``: the last two axes swapped (rank >= 2)."""
    rank = len(x.shape)
    if rank < 2:
        raise InputError(f".mT of {_label(x)}: needs rank >= 2, got rank {rank}")
    return eager.transpose(x, list(range(rank - 2)) + [rank - 1, rank - 2])


def astype(x, to):
    """numpy's ``x.astype(t)``: ONNX Cast to ``t`` (a DType, ONNX name, numpy dtype or code)."""
    return eager.cast(x, dtypes.dtype(to))


def reshape(x, *shape):
    """numpy's ``x.reshape(shape)`` / ``x.reshape(*dims)``: -1 inferred, 0 a real 0 (allowzero)."""
    dims = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else list(shape)
    return eager.reshape(x, dims, allowzero=1 if 0 in dims else 0)


def _axes(axis):
    if axis is None:
        return None
    return [int(axis)] if _is_int(axis) else [int(a) for a in axis]


def reduction(op: str):
    function = {"sum": functional.reduce_sum, "mean": functional.reduce_mean, "max": functional.reduce_max,
                "min": functional.reduce_min}[op]

    def method(x, axis=None, dtype=None, out=None, keepdims=False, **rest):
        """numpy's reduction method (np.sum(x) calls it too): over ``axis`` (None: all), keepdims
        False by default, ``dtype`` casts the input first; out= and other numpy options are not
        supported."""
        if out is not None or rest:
            raise UnsupportedError(f".{op}() of {_label(x)}: {'out=' if out is not None else sorted(rest)} is not "
                                   f"supported")
        return function(x if dtype is None else astype(x, dtype), _axes(axis), keepdims=bool(keepdims))
    method.__name__ = op
    return method


def arg_reduction(op: str):
    function = functional.argmax if op == "argmax" else functional.argmin

    def method(x, axis=None, out=None, *, keepdims=False):
        """numpy's ``x.argmax()`` / ``x.argmin()``: int64 indices of the first extreme along
        ``axis``; None: of the flattened tensor (a 0-d result, or all ones with keepdims)."""
        if out is not None:
            raise UnsupportedError(f".{op}() of {_label(x)}: out= is not supported")
        if axis is None:
            flat = reshape(x, -1)
            found = function(flat, 0, keepdims=False)
            return reshape(found, *([1] * len(x.shape))) if keepdims else found
        if not _is_int(axis):
            raise InputError(f".{op}() of {_label(x)}: axis {axis!r}; expected an int or None")
        return function(x, int(axis), keepdims=bool(keepdims))
    method.__name__ = op
    return method


UFUNCS = {  # numpy ufunc name -> the dsl function of its ONNX op (numpy's argument order)
    "add": functional.add, "subtract": functional.sub, "multiply": functional.mul, "true_divide": functional.div,
    "divide": functional.div, "power": functional.pow, "negative": functional.neg, "absolute": functional.abs,
    "exp": functional.exp, "log": functional.log, "sqrt": functional.sqrt, "tanh": functional.tanh,
    "reciprocal": functional.reciprocal, "maximum": functional.maximum, "minimum": functional.minimum,
    "equal": functional.equal, "less": functional.less, "greater": functional.greater,
    "less_equal": functional.less_equal, "greater_equal": functional.greater_equal,
    "logical_and": functional.logical_and, "logical_or": functional.logical_or,
    "logical_not": functional.logical_not, "matmul": functional.matmul,
}


def _logical_or_bitwise(logical, bitwise):
    """numpy's bitwise_and / or / xor / invert: logical on bool tensors, bitwise on integers."""
    def apply(*inputs):
        anchor = next(v for v in inputs if isinstance(v, Tracer))
        return (logical if anchor.dtype.kind == "bool" else bitwise)(*inputs)
    return apply


UFUNCS.update({  # (dsl/ops/bitwise.py)
    "remainder": functional.mod, "fmod": lambda a, b: functional.mod(a, b, fmod=1),
    "left_shift": lambda a, b: functional.bit_shift(a, b, direction="LEFT"),
    "right_shift": lambda a, b: functional.bit_shift(a, b, direction="RIGHT"),
    "bitwise_and": _logical_or_bitwise(functional.logical_and, functional.bitwise_and),
    "bitwise_or": _logical_or_bitwise(functional.logical_or, functional.bitwise_or),
    "bitwise_xor": _logical_or_bitwise(functional.xor, functional.bitwise_xor),
    "invert": _logical_or_bitwise(functional.logical_not, functional.bitwise_not),
    "logical_xor": functional.xor,
})
UFUNCS.update({  # (dsl/ops/trig.py, dsl/ops/rounding.py; numpy's rint rounds half to even, as Round)
    "sin": functional.sin, "cos": functional.cos, "tan": functional.tan, "arcsin": functional.asin,
    "arccos": functional.acos, "arctan": functional.atan, "sinh": functional.sinh, "cosh": functional.cosh,
    "arcsinh": functional.asinh, "arccosh": functional.acosh, "arctanh": functional.atanh,
    "floor": functional.floor, "ceil": functional.ceil, "rint": functional.round, "sign": functional.sign,
    "isnan": functional.is_nan, "isinf": functional.is_inf,
})


def array_ufunc(x, ufunc, method: str, *inputs, **kwargs):
    """numpy ufuncs on traced values (``np.exp(x)``, ``y_numpy + x``) as their ONNX ops."""
    name = getattr(ufunc, "__name__", repr(ufunc))
    if method != "__call__" or kwargs or name not in UFUNCS:
        what = f"np.{name}" + (f".{method}" if method != "__call__" else "") + (f" with {sorted(kwargs)}" if kwargs else "")
        raise UnsupportedError(f"jit: {what} on traced tensor {_label(x)} is not supported; supported numpy ufuncs: "
                               f"{sorted(UFUNCS)} (plain calls, no out= / where=)")
    return UFUNCS[name](*inputs)


class Frontend:
    """The methods Tracer and Tensor forward to (their ``_frontend``)."""

    getitem = staticmethod(getitem)
    T = staticmethod(transpose_all)
    mT = staticmethod(matrix_transpose)
    astype = staticmethod(astype)
    reshape = staticmethod(reshape)
    sum = staticmethod(reduction("sum"))
    mean = staticmethod(reduction("mean"))
    max = staticmethod(reduction("max"))
    min = staticmethod(reduction("min"))
    argmax = staticmethod(arg_reduction("argmax"))
    argmin = staticmethod(arg_reduction("argmin"))
    array_ufunc = staticmethod(array_ufunc)


NumpyMethods._frontend = Frontend  # (Tracer and Tensor: dsl/numpy_methods.py)
