"""Materializing views: ``dsl.contiguous`` over the blocked / packed copy kernels."""
from __future__ import annotations

import numpy as np

from kernels import copy as copy_kernels

from .buffers import POOL
from .tensor import Tensor, _span_of
from .values import as_array


def contiguous(x):
    """A C-contiguous copy of ``x`` (``x`` itself when it already is contiguous).

    Args:
        x: numpy / ml_dtypes array (any strides: zero, negative, offset) or dsl.Tensor.

    Returns:
        numpy in -> C-contiguous numpy array; Tensor in -> Tensor with a contiguous view
        (packed types gathered nibble by nibble straight into packed bytes).

    Example:
        >>> contiguous(np.arange(6).reshape(2, 3).T).flags.c_contiguous
        True
    """
    if isinstance(x, Tensor):
        if x.view.is_contiguous and (not x.dtype.packed or x.view.offset % x.dtype.per_byte == 0):
            return x
        view = x.view
        if x.dtype.packed:
            raw = copy_kernels.materialize_packed(x.buffer, x.dtype.bits, view.shape, view.strides, view.offset)
            return Tensor.from_packed(raw, x.dtype, view.shape)
        return Tensor.from_numpy(copy_kernels.materialize(x.buffer, view.shape, view.strides, view.offset))
    array = as_array(x, "contiguous", "x")
    if array.flags.c_contiguous:
        return array
    buffer, view = _span_of(array)
    if buffer.dtype.kind == "O":
        return copy_kernels.materialize(buffer, view.shape, view.strides, view.offset)
    out = POOL.empty(array.size, buffer.dtype).reshape(view.shape)
    return copy_kernels.materialize(buffer, view.shape, view.strides, view.offset, out=out)


def reshaped(array: np.ndarray, shape) -> np.ndarray:
    """numpy reshape that stays a view when it can and copies with the fast kernel otherwise."""
    try:
        return np.reshape(array, shape, copy=False)
    except ValueError:
        return contiguous(array).reshape(shape)
