"""Tensor = buffer + dtype + View; packed 4-bit and 2-bit storage in ONNX raw layout."""
from __future__ import annotations

from math import prod

import numpy as np
from numpy.lib.stride_tricks import as_strided

from kernels import packed as packed_kernels

from . import dtypes
from .dtypes import DType
from .errors import DTypeError, InputError
from .numpy_methods import NumpyMethods
from .view import View


def _check_shape(shape, op: str) -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    if dims is None or any(not isinstance(d, (int, np.integer)) or isinstance(d, (bool, np.bool_))
                           for d in dims):
        raise InputError(f"{op}: shape {shape!r} must be a sequence of non-negative ints")
    dims = tuple(int(d) for d in dims)
    if any(d < 0 for d in dims):
        raise InputError(f"{op}: shape {dims} has a negative dimension")
    return dims


class Tensor(NumpyMethods):
    """An n-d array of any ONNX element type over a flat storage buffer.

    For byte-or-wider types the buffer is a 1-D numpy array of the storage dtype; for
    4-bit and 2-bit types it is a 1-D uint8 array in ONNX raw layout (several elements
    a byte). ``view`` says which buffer elements the tensor reads, in element units, so
    shape ops on a packed tensor never touch the bytes.
    """

    __slots__ = ("buffer", "dtype", "view")

    def __init__(self, buffer: np.ndarray, dtype: DType, view: View):
        self.buffer = buffer
        self.dtype = dtype
        self.view = view

    # ---- construction -------------------------------------------------------------
    @classmethod
    def from_packed(cls, buf, dtype, shape) -> "Tensor":
        """Wrap ONNX raw bytes without copying.

        Args:
            buf: uint8 numpy array (1-D, C-contiguous), bytes, bytearray or memoryview.
            dtype: any element type except string (e.g. "int4", dsl.float8e4m3fn).
            shape: the tensor's shape.

        Returns:
            A Tensor whose buffer IS ``buf`` (extra trailing bytes are ignored).

        Raises:
            InputError: ``buf`` is too short or not a flat byte buffer.

        Example:
            >>> Tensor.from_packed(np.array([0x21], np.uint8), "int4", (2,)).numpy()
            array([1, 2], dtype=int4)
        """
        dt = dtypes.dtype(dtype)
        if dt.kind == "string":
            raise DTypeError("Tensor.from_packed: string tensors have no packed byte layout")
        dims = _check_shape(shape, "Tensor.from_packed")
        raw = _as_byte_buffer(buf)
        count = prod(dims)
        need = dt.packed_nbytes(count)
        if raw.shape[0] < need:
            raise InputError(f"Tensor.from_packed: buffer of {raw.shape[0]} bytes is too short for "
                             f"{dt.onnx_name}{list(dims)}; expected at least {need} bytes")
        if dt.packed:
            return cls(raw, dt, View.contiguous(dims))
        storage = dt.np_dtype.newbyteorder("<")
        flat = raw[:need].view(storage)
        return cls(flat, dt, View.contiguous(dims))

    @classmethod
    def from_numpy(cls, array) -> "Tensor":
        """Wrap a numpy / ml_dtypes array; packed types are packed (one copy), others are views.

        A non-native byte order (e.g. '>f4') is converted once: the buffer always holds the
        native storage dtype, which is what kernels read.

        Raises:
            DTypeError: the array's dtype has no ONNX element type, or it is an object array
                holding something other than str / bytes.

        Example:
            >>> Tensor.from_numpy(np.zeros((2, 3), np.float32)).shape
            (2, 3)
        """
        if isinstance(array, Tensor):
            return array
        if isinstance(array, np.ma.MaskedArray):
            raise InputError("Tensor.from_numpy: the array is a numpy masked array; ONNX tensors have no mask. "
                             "Pass arr.filled(fill_value)")
        array = np.asarray(array)
        dt = dtypes.of_array(array, "Tensor.from_numpy")
        if array.dtype.kind == "O" and not all(isinstance(v, (str, bytes)) for v in array.flat):
            raise DTypeError("Tensor.from_numpy: an object array must hold only str or bytes "
                             "(ONNX tensor(string))")
        if dt.packed:
            codes = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            return cls(packed_kernels.pack(codes, dt.bits), dt, View.contiguous(array.shape))
        if dt.kind != "string" and array.dtype != dt.np_dtype:
            array = array.astype(dt.np_dtype)
        buffer, view = _span_of(array)
        return cls(buffer, dt, view)

    # ---- inspection ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.view.shape

    @property
    def ndim(self) -> int:
        return self.view.rank

    @property
    def size(self) -> int:
        return self.view.size

    def numpy(self) -> np.ndarray:
        """The elements as a numpy array (ml_dtypes dtype for the exotic types).

        Byte-or-wider types: a view of the buffer. Packed types: a new unpacked array.
        """
        view = self.view
        if view.size == 0:
            return np.empty(view.shape, self.dtype.np_dtype)
        low, high = view.span()
        if self.dtype.packed:
            codes = packed_kernels.unpack(self.buffer, low, high - low, self.dtype.bits)
            base = codes.view(self.dtype.np_dtype)
            if view.is_contiguous:
                return base.reshape(view.shape)
            return _strided(base, View(view.shape, view.strides, view.offset - low), True).copy()
        return _strided(self.buffer, view, not self.buffer.flags.writeable)

    def packed(self) -> np.ndarray:
        """The elements in ONNX raw layout (uint8, little-endian, padding bits zero).

        Zero-copy when the view is contiguous and the layout is already exact.
        """
        if self.dtype.kind == "string":
            raise DTypeError("Tensor.packed: string tensors have no packed byte layout")
        view = self.view
        nbytes = self.dtype.packed_nbytes(view.size)
        if self.dtype.packed:
            per_byte = self.dtype.per_byte
            if view.is_contiguous and view.offset % per_byte == 0:
                start = view.offset // per_byte
                raw = self.buffer[start:start + nbytes]
                pad = nbytes * per_byte - view.size
                if pad == 0 or raw[-1] >> (8 - pad * self.dtype.bits) == 0:
                    return raw
            codes = np.ascontiguousarray(self.numpy()).reshape(-1).view(np.uint8)
            return packed_kernels.pack(codes, self.dtype.bits)
        array = np.ascontiguousarray(self.numpy())
        little = array.dtype.newbyteorder("<")
        if array.dtype != little:
            array = array.astype(little)
        return array.reshape(-1).view(np.uint8)

    def with_view(self, view: View) -> "Tensor":
        """The same buffer seen through another view."""
        return Tensor(self.buffer, self.dtype, view)


    def __repr__(self) -> str:
        return f"Tensor({self.dtype.onnx_name}{list(self.shape)})"


def _as_byte_buffer(buf) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8 or buf.ndim != 1 or not buf.flags.c_contiguous:
            raise InputError(f"Tensor.from_packed: buffer must be a 1-D C-contiguous uint8 array, "
                             f"got {buf.dtype}{list(buf.shape)}")
        return buf
    if isinstance(buf, (bytes, bytearray, memoryview)):
        try:
            return np.frombuffer(buf, np.uint8)
        except (BufferError, ValueError) as exc:  # e.g. a strided memoryview
            raise InputError(f"Tensor.from_packed: buffer must be a contiguous bytes-like object: "
                             f"{exc}") from exc
    raise InputError(f"Tensor.from_packed: buffer must be a uint8 array or bytes-like, got {type(buf).__name__}")


def _span_of(array: np.ndarray) -> tuple[np.ndarray, View]:
    """A flat 1-D array covering exactly the memory ``array`` reads, and its View."""
    itemsize = array.dtype.itemsize
    if array.size == 0:
        return np.empty(0, array.dtype), View.contiguous(array.shape)
    if any(stride % itemsize for stride in array.strides):
        array = np.ascontiguousarray(array)
    strides = tuple(stride // itemsize for stride in array.strides)
    view = View(array.shape, strides, 0)
    low, high = view.span()
    corner = tuple(dim - 1 if stride < 0 else 0 for dim, stride in zip(array.shape, strides))
    first = array[tuple(slice(i, i + 1) for i in corner)] if array.ndim else array.reshape(1)
    flat = _as_strided(first, (high - low,), (itemsize,), writeable=array.flags.writeable)
    return flat, View(view.shape, view.strides, -low)


def _strided(base: np.ndarray, view: View, readonly: bool) -> np.ndarray:
    itemsize = base.dtype.itemsize
    broadcast = any(stride == 0 and dim > 1 for dim, stride in zip(view.shape, view.strides))
    return _as_strided(base[view.offset:], view.shape, tuple(s * itemsize for s in view.strides),
                       writeable=not (readonly or broadcast))


def _as_strided(array: np.ndarray, shape, strides, writeable: bool) -> np.ndarray:
    """numpy's as_strided for every dtype. It goes through ``__array_interface__``, whose
    typestr numpy cannot parse back for some ml_dtypes types (float8_e5m2 is '<f1'), so
    non-object arrays are strided as same-size raw void items and viewed back."""
    if array.dtype.kind == "O":
        return as_strided(array, shape, strides, writeable=writeable)
    raw = array.view(np.dtype((np.void, array.dtype.itemsize)))
    return as_strided(raw, shape, strides, writeable=writeable).view(array.dtype)
