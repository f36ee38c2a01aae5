"""PackedArray: a dask array of ONNX raw bytes standing for a packed tensor (int4, uint4, int2,
uint2, float4e2m1), chunked on byte boundaries along the last axis."""
from __future__ import annotations

import dask.array as da
import numpy as np

from .. import dtypes
from ..errors import DTypeError, InputError, ShapeError


class PackedArray:
    """Packed elements held as a uint8 dask array whose last axis counts bytes.

    Attributes:
        data: the uint8 dask array, shape ``shape[:-1] + (shape[-1] * bits // 8,)``.
        dtype: the packed element type.
        shape: the element shape.
        chunks: chunk sizes in elements (the last axis is bytes x elements per byte).
    """

    def __init__(self, data, dtype, shape):
        self.data, self.dtype, self.shape = data, dtype, tuple(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def chunks(self) -> tuple:
        if not self.shape:
            return ()
        per_byte = self.dtype.per_byte
        return self.data.chunks[:-1] + (tuple(c * per_byte for c in self.data.chunks[-1]),)

    def rechunk(self, chunks) -> "PackedArray":
        """Rechunk in element units; the last axis must stay on byte boundaries."""
        if not self.shape:
            return self
        last = chunks[-1]
        if any(c % self.dtype.per_byte for c in last):
            raise ShapeError(f"dsl.dask: cannot split the last axis of packed {self.dtype.onnx_name}"
                             f"{list(self.shape)} into chunks {list(last)}; packed chunks must hold multiples "
                             f"of {self.dtype.per_byte} elements (whole bytes)")
        byte_chunks = tuple(chunks[:-1]) + (tuple(c // self.dtype.per_byte for c in last),)
        return PackedArray(self.data.rechunk(byte_chunks), self.dtype, self.shape)

    def __repr__(self) -> str:
        return f"dsl.dask.PackedArray({self.dtype.onnx_name}{list(self.shape)}, chunks={self.chunks})"


def from_packed(data, dtype, shape=None) -> PackedArray:
    """Wrap chunked ONNX raw bytes of a packed type for ``dsl.dask`` programs (no copy).

    Args:
        data: a uint8 dask array (or numpy array / memmap, wrapped with dask's default chunks)
            whose last axis holds each row's bytes: shape ``shape[:-1] + (shape[-1] * bits // 8,)``.
        dtype: a packed element type ("int4", "uint4", "int2", "uint2", "float4e2m1").
        shape: the element shape (default: ``data.shape`` with the last axis x elements per byte).

    Returns:
        A PackedArray; jit functions applied to it decode each chunk inside their kernels.

    Raises:
        DTypeError: ``dtype`` is not packed or ``data`` is not uint8.
        ShapeError: ``shape`` does not match the bytes, or rows do not end on a byte boundary.

    Example:
        >>> w = dsl.dask.from_packed(da.from_array(raw_uint8_2d, chunks=(1024, -1)), "int4")
    """
    dt = dtypes.dtype(dtype)
    if not dt.packed:
        raise DTypeError(f"dsl.dask.from_packed: element type {dt.onnx_name} is not packed; wrap "
                         f"{dt.onnx_name} data as a plain dask array")
    if not isinstance(data, da.Array):
        if not hasattr(data, "shape") or not hasattr(data, "dtype"):
            raise InputError(f"dsl.dask.from_packed: data is a {type(data).__name__}; expected a uint8 "
                             f"dask or numpy array")
        data = da.from_array(data)
    if data.dtype != np.uint8:
        raise DTypeError(f"dsl.dask.from_packed: data has dtype {data.dtype}; expected uint8 raw bytes")
    if data.ndim == 0:
        raise ShapeError("dsl.dask.from_packed: data must have at least one axis (the bytes of each row)")
    row_bytes = data.shape[-1]
    if shape is None:
        shape = data.shape[:-1] + (row_bytes * dt.per_byte,)
    shape = tuple(int(d) for d in shape)
    expected = shape[:-1] + ((shape[-1] * dt.bits) // 8,) if shape else ()
    if not shape or (shape[-1] * dt.bits) % 8 or tuple(data.shape) != expected:
        raise ShapeError(f"dsl.dask.from_packed: {dt.onnx_name}{list(shape)} does not match bytes of shape "
                         f"{list(data.shape)}; expected byte shape {list(expected)} with each row ending on "
                         f"a byte boundary (last dim a multiple of {dt.per_byte})")
    return PackedArray(data, dt, shape)
