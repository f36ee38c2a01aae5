"""Runtime values: checking and typing what users pass in (arrays, packed Tensors, lists)."""
from __future__ import annotations

import numpy as np

from . import dtypes
from .errors import DTypeError, InputError
from .ir import OptionalType, SequenceType, TensorType, type_of_array
from .tensor import Tensor


def as_array(value, op: str, what: str) -> np.ndarray:
    """A numpy array of an ONNX element type, or DslError naming ``op`` and ``what``."""
    if isinstance(value, Tensor):
        return value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{op}: {what} {value!r} is not an array: {exc}") from exc
    if array.dtype.kind == "O" and not all(isinstance(v, (str, bytes)) for v in array.flat):
        raise DTypeError(f"{op}: {what} is an object array holding non-strings; ONNX object "
                         f"tensors hold str (tensor(string))")
    dtypes.of_array(array, f"{op}: {what}")
    return array


def int_vector(value, op: str, what: str) -> np.ndarray:
    """A Python int or sequence of ints as a 1-D int64 array; arrays pass through unchanged
    (their dtype and rank are checked by the op's schema and rule)."""
    if isinstance(value, (np.ndarray, Tensor)):
        return as_array(value, op, what)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return np.array([int(value)], np.int64)
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value):
        try:
            return np.array([int(v) for v in value], np.int64).reshape(-1)
        except OverflowError:
            raise InputError(f"{op}: {what} {value!r} does not fit in int64") from None
    raise InputError(f"{op}: {what} {value!r} must be an int, a list of ints or a 1-D int64 array")


def runtime_type(value):
    """The value type of a runtime value: ndarray, list (sequence) or None (empty optional)."""
    if value is None:
        return OptionalType(None)
    if isinstance(value, list):
        return SequenceType(type_of_array(value[0]) if value else None)
    if isinstance(value, Tensor):
        return TensorType(value.dtype, value.shape)
    return type_of_array(value)
