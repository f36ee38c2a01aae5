"""Runtime values: checking and typing what users pass in (arrays, packed Tensors, lists)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import dtypes
from .errors import DTypeError, InputError
from .ir import OptionalType, SequenceType, TensorType, type_of_array
from .tensor import Tensor


def plain_array(value: np.ndarray, op: str, what: str) -> np.ndarray:
    """An ndarray subclass as a plain ndarray (np.matrix, memmap ...); a masked array is refused:
    ONNX tensors have no mask, and numpy would silently drop it."""
    if isinstance(value, np.ma.MaskedArray):
        raise InputError(f"{op}: {what} is a numpy masked array; ONNX tensors have no mask. Pass "
                         f"arr.filled(fill_value), or the data and the mask as two arrays (dsl.where)")
    return np.asarray(value)


def as_array(value, op: str, what: str) -> np.ndarray:
    """A numpy array of an ONNX element type, or DslError naming ``op`` and ``what``."""
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        value = plain_array(value, op, what)
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
    items = [value] if _is_int(value) else list(value) if isinstance(value, (list, tuple)) else None
    if items is None or not all(_is_int(v) for v in items):
        raise InputError(f"{op}: {what} {value!r} must be an int, a list of ints or a 1-D int64 array")
    if any(not _INT64_MIN <= v <= _INT64_MAX for v in items):
        raise InputError(f"{op}: {what} {value!r} does not fit in int64")
    return np.array([int(v) for v in items], np.int64).reshape(-1)


_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def runtime_type(value):
    """The value type of a runtime value: ndarray, list (sequence) or None (empty optional)."""
    if value is None:
        return OptionalType(None)
    if isinstance(value, list):
        if not value:
            return SequenceType(None)
        elem_types = [runtime_type(v) for v in value]
        if any(not isinstance(t, TensorType) for t in elem_types):
            raise InputError(f"dsl: a sequence holds only tensors, got {[str(t) for t in elem_types]}")
        dtypes_seen = sorted({t.dtype.onnx_name for t in elem_types})
        if len(dtypes_seen) > 1:
            raise DTypeError(f"dsl: a sequence holds tensors of one element type, got {dtypes_seen}")
        return SequenceType(TensorType(elem_types[0].dtype, None))
    if isinstance(value, Tensor):
        return TensorType(value.dtype, value.shape)
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise InputError(f"dsl: value {value!r:.60} is not a tensor (numpy array or dsl.Tensor), "
                         f"a list of tensors or None")
    return type_of_array(value)


def weak_scalar(op: str, value, dt) -> np.ndarray:
    """A Python scalar next to a tensor of element type ``dt``, as a 0-d array of ``dt`` (NEP 50:
    it takes the tensor's type); InputError if the value does not belong there."""
    is_float, is_bool = isinstance(value, float), isinstance(value, bool)
    if dt.kind in ("string", "complex") or (is_float and dt.kind in ("int", "uint", "bool")) \
            or (dt.kind == "bool" and not is_bool):
        raise InputError(f"{op}: Python {type(value).__name__} {value!r} mixed with a {dt} tensor; "
                         f"pass an array of the intended type instead")
    if dt.kind in ("int", "uint") and not is_bool:
        info = ml_dtypes.iinfo(dt.np_dtype)
        if not int(info.min) <= value <= int(info.max):
            raise InputError(f"{op}: Python int {value!r} does not fit in {dt} [{info.min}, {info.max}]")
    return np.array(value, dtype=dt.np_dtype)
