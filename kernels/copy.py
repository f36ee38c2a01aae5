"""Materialize a strided view (element units) of a flat buffer into C-contiguous memory.

The view is ``shape``/``strides``/``offset`` in ELEMENTS (dsl.view.View): element
``idx`` is ``buffer[offset + sum(idx[k] * strides[k])]``; strides may be zero,
negative or overlapping. Kernels move raw bits: the buffer is viewed as an unsigned
integer of its item size (16-byte items as a record of two uint64), so bool,
float8, bfloat16 and complex copy bit for bit and only a handful of numba
signatures exist. Packed 4-bit / 2-bit buffers (ONNX raw layout, kernels/packed.py)
gather element codes straight into packed output.

Plan: drop size-1 dims and merge dims that are contiguous with each other; a
contiguous source is one slice copy; when the innermost output dim has a larger
source stride than some other dim (a transpose), copy TILE_ROWS x TILE_COLS tiles
through a small buffer so both memory streams are contiguous; otherwise copy row
by row. Work is split into (outer index, row tile) tasks, run in parallel above
PARALLEL_MIN_ELEMENTS.
"""
import operator
from math import prod

import numba
import numpy as np

# Measured with benchmarks/copy_bench.py (transposed 8192^2 / 4096^2 float32, uint8,
# float64): see the module docstring of the benchmark for the table.
TILE_ROWS = 64  # along the output's outer tile dim (the source-contiguous one)
TILE_COLS = 64  # along the output's innermost dim
PARALLEL_MIN_ELEMENTS = 1 << 18
PACKED_CHUNK_BYTES = 1 << 14

_UINT_BY_ITEMSIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64,
                     16: np.dtype([("lo", "<u8"), ("hi", "<u8")])}


# ---------------------------------------------------------------- byte-sized kernels

@numba.njit(cache=True, nogil=True)
def _copy_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, out):
    for row in range(row_count):
        s = src_base + row * row_src
        o = out_base + row * row_out
        if col_src == 1:
            for col in range(cols):
                out[np.uint64(o + col)] = src[np.uint64(s + col)]
        else:
            for col in range(cols):
                out[np.uint64(o + col)] = src[np.uint64(s + col * col_src)]


@numba.njit(cache=True, nogil=True)
def _copy_tile_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, out):
    # A transpose reads the source along rows and writes the output along cols: go
    # through an L1-sized buffer so each phase streams one side contiguously
    # (row-major reads into buf, then contiguous writes), whatever the strides' set
    # aliasing (power-of-two strides make a direct tiled loop thrash L1 ways).
    buf = np.empty(TILE_ROWS * TILE_COLS, src.dtype)
    for col0 in range(0, cols, TILE_COLS):
        col_count = min(TILE_COLS, cols - col0)
        for col in range(col_count):
            s = src_base + (col0 + col) * col_src
            for row in range(row_count):
                buf[col * TILE_ROWS + row] = src[np.uint64(s + row * row_src)]
        for row in range(row_count):
            o = out_base + row * row_out + col0
            for col in range(col_count):
                out[np.uint64(o + col)] = buf[col * TILE_ROWS + row]


@numba.njit(cache=True, nogil=True)
def _copy_task(src, offset, outer_shape, outer_src, outer_out, rows, row_src, row_out,
               cols, col_src, blocked, task, out):
    row_tiles = (rows + TILE_ROWS - 1) // TILE_ROWS
    outer_index = task // row_tiles
    row0 = (task - outer_index * row_tiles) * TILE_ROWS
    src_base = offset + row0 * row_src
    out_base = row0 * row_out
    for k in range(outer_shape.shape[0] - 1, -1, -1):
        quotient = outer_index // outer_shape[k]
        position = outer_index - quotient * outer_shape[k]
        outer_index = quotient
        src_base += position * outer_src[k]
        out_base += position * outer_out[k]
    row_count = min(TILE_ROWS, rows - row0)
    if blocked:
        _copy_tile_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, out)
    else:
        _copy_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, out)


@numba.njit(cache=True, nogil=True)
def copy_strided(src, offset, outer_shape, outer_src, outer_out, rows, row_src, row_out,
                 cols, col_src, blocked, out):
    """out[o + i*row_out + j] = src[offset + s + i*row_src + j*col_src] for every
    outer multi-index (offsets s, o from the outer dims), row i < rows, col j < cols.

    ``src``/``out`` are 1-D of one unsigned (or uint64-pair record) dtype; ``outer_*``
    int64 arrays. Requires every addressed index in range (checked by the caller).
    """
    row_tiles = (rows + TILE_ROWS - 1) // TILE_ROWS
    task_count = row_tiles
    for k in range(outer_shape.shape[0]):
        task_count *= outer_shape[k]
    for task in range(task_count):
        _copy_task(src, offset, outer_shape, outer_src, outer_out, rows, row_src, row_out,
                   cols, col_src, blocked, task, out)


@numba.njit(cache=True, nogil=True, parallel=True)
def copy_strided_parallel(src, offset, outer_shape, outer_src, outer_out, rows, row_src,
                          row_out, cols, col_src, blocked, out):
    """``copy_strided`` with its (outer index, row tile) tasks spread over threads."""
    row_tiles = (rows + TILE_ROWS - 1) // TILE_ROWS
    task_count = row_tiles
    for k in range(outer_shape.shape[0]):
        task_count *= outer_shape[k]
    for task in numba.prange(task_count):
        _copy_task(src, offset, outer_shape, outer_src, outer_out, rows, row_src, row_out,
                   cols, col_src, blocked, task, out)


# ---------------------------------------------------------------------- packed kernels

@numba.njit(cache=True, nogil=True)
def _gather_packed_chunk(packed, bits, offset, shape, strides, count, chunk, out):
    per_byte = 8 // bits
    shift = 1 if bits == 4 else 2  # log2(per_byte)
    mask = (1 << bits) - 1
    rank = shape.shape[0]
    first = chunk * PACKED_CHUNK_BYTES * per_byte
    last = min(count, first + PACKED_CHUNK_BYTES * per_byte)
    index = np.empty(rank, np.int64)
    remaining = first
    source = offset
    for k in range(rank - 1, -1, -1):
        index[k] = remaining % shape[k]
        remaining //= shape[k]
        source += index[k] * strides[k]
    inner, inner_stride = shape[rank - 1], strides[rank - 1]
    element = first
    value = 0
    while element < last:
        run = min(inner - index[rank - 1], last - element)
        for _ in range(run):
            code = (packed[np.uint64(source >> shift)] >> ((source & (per_byte - 1)) * bits)) & mask
            slot = element & (per_byte - 1)
            value |= code << (slot * bits)
            if slot == per_byte - 1:
                out[element >> shift] = value
                value = 0
            element += 1
            source += inner_stride
        index[rank - 1] += run
        if index[rank - 1] < inner:
            continue  # the chunk ended inside a row
        source -= inner * inner_stride
        index[rank - 1] = 0
        for k in range(rank - 2, -1, -1):  # odometer carry into the outer dims
            index[k] += 1
            source += strides[k]
            if index[k] < shape[k]:
                break
            source -= shape[k] * strides[k]
            index[k] = 0
    if last & (per_byte - 1):
        out[(last - 1) >> shift] = value


@numba.njit(cache=True, nogil=True)
def gather_packed(packed, bits, offset, shape, strides, count, out):
    """out = the ``count`` codes of the view, packed (zero padding bits).

    ``packed``/``out`` uint8, ``shape``/``strides`` int64 arrays of rank >= 1 with
    prod(shape) == count and len(out) == ceil(count * bits / 8); every addressed
    element in range (checked by the caller).
    """
    for chunk in range((out.shape[0] + PACKED_CHUNK_BYTES - 1) // PACKED_CHUNK_BYTES):
        _gather_packed_chunk(packed, bits, offset, shape, strides, count, chunk, out)


@numba.njit(cache=True, nogil=True, parallel=True)
def gather_packed_parallel(packed, bits, offset, shape, strides, count, out):
    """``gather_packed`` with output chunks spread over threads."""
    for chunk in numba.prange((out.shape[0] + PACKED_CHUNK_BYTES - 1) // PACKED_CHUNK_BYTES):
        _gather_packed_chunk(packed, bits, offset, shape, strides, count, chunk, out)


# --------------------------------------------------------------------- Python entries

def coalesce_dims(shape, strides) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The same element order with size-1 dims dropped and contiguous neighbours merged.

    Dim k merges into dim k+1 when ``strides[k] == shape[k+1] * strides[k+1]`` (this
    includes runs of broadcast dims). A 0-d or all-ones shape gives ``((), ())``.

    Example: ``coalesce_dims((2, 1, 3, 4), (12, 0, 4, 1)) == ((24,), (1,))``.
    """
    merged: list[list[int]] = []
    for dim, stride in zip(shape, strides):
        if dim == 1:
            continue
        if merged and merged[-1][1] == dim * stride:
            merged[-1] = [merged[-1][0] * dim, stride]
        else:
            merged.append([dim, stride])
    return tuple(d for d, _ in merged), tuple(s for _, s in merged)


def _normalized(shape, strides, offset):
    try:
        shape = tuple(operator.index(d) for d in shape)
        strides = tuple(operator.index(s) for s in strides)
        offset = operator.index(offset)
    except TypeError as error:
        raise ValueError(f"shape {shape!r}, strides {strides!r} and offset {offset!r} "
                         "must be integers") from error
    if len(shape) != len(strides):
        raise ValueError(f"shape {shape} and strides {strides} differ in rank")
    if any(dim < 0 for dim in shape):
        raise ValueError(f"shape {shape} has a negative dim")
    return shape, strides, offset


def _check_in_range(shape, strides, offset, length, unit):
    # A kernel fed an out-of-range index writes garbage or segfaults: refuse here.
    low = offset + sum(s * (d - 1) for d, s in zip(shape, strides) if s < 0)
    high = offset + sum(s * (d - 1) for d, s in zip(shape, strides) if s > 0)
    if low < 0 or high >= length:
        raise ValueError(f"view (shape {shape}, strides {strides}, offset {offset}) reaches "
                         f"{unit} [{low}, {high}], outside the buffer's [0, {length})")


def _plan(shape, strides):
    """Kernel arguments for a coalesced view of rank >= 1 (see ``copy_strided``)."""
    rank = len(shape)
    out_strides = [1] * rank
    for k in range(rank - 2, -1, -1):
        out_strides[k] = out_strides[k + 1] * shape[k + 1]
    cols, col_src = shape[-1], strides[-1]
    moving = [k for k in range(rank - 1) if strides[k] != 0]
    row_dim = min(moving, key=lambda k: abs(strides[k]), default=None)
    blocked = row_dim is not None and col_src != 0 and abs(strides[row_dim]) < abs(col_src)
    if not blocked:
        row_dim = rank - 2 if rank >= 2 else None
    outer = [k for k in range(rank - 1) if k != row_dim]
    rows, row_src, row_out = (1, 0, 0) if row_dim is None else (
        shape[row_dim], strides[row_dim], out_strides[row_dim])
    return (np.array([shape[k] for k in outer], np.int64),
            np.array([strides[k] for k in outer], np.int64),
            np.array([out_strides[k] for k in outer], np.int64),
            rows, row_src, row_out, cols, col_src, blocked)


def _output(out, shape, dtype) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype)
    if (not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != dtype
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"out must be a writeable C-contiguous {dtype} array of shape {tuple(shape)}, "
                         f"got {getattr(out, 'dtype', type(out))} of shape {getattr(out, 'shape', None)}")
    return out


def materialize(buffer: np.ndarray, shape, strides, offset: int = 0, *, out=None) -> np.ndarray:
    """A new C-contiguous array holding the view ``buffer[offset + sum(idx * strides)]``.

    Args:
        buffer: 1-D array of any dtype (numpy, ml_dtypes, object/string).
        shape, strides: the view's dims and element strides (zero, negative and
            overlapping strides allowed).
        offset: element index of the view's first element.
        out: optional preallocated C-contiguous result (a memory plan's buffer); must
            not overlap ``buffer``.
    Returns:
        ``out`` or a new array of ``shape`` and ``buffer.dtype``, bit-identical to
        ``np.ascontiguousarray`` of the same numpy view.
    Raises:
        ValueError: bad shape/strides types or ranks, or a view reaching outside
            ``buffer`` (checked here: the kernels do not bounds-check).

    Example:
        >>> materialize(np.arange(6, dtype=np.float32), (3, 2), (1, 3)).tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    """
    if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
        raise ValueError(f"buffer must be a 1-D numpy array, got {type(buffer).__name__} "
                         f"of shape {getattr(buffer, 'shape', None)}")
    shape, strides, offset = _normalized(shape, strides, offset)
    out = _output(out, shape, buffer.dtype)
    if out.size == 0:
        return out
    _check_in_range(shape, strides, offset, buffer.shape[0], "elements")
    word = _UINT_BY_ITEMSIZE.get(buffer.dtype.itemsize)
    if word is None or buffer.dtype.hasobject or buffer.dtype.kind == "T":
        # Object and string items cannot be moved as raw bits (numpy keeps references);
        # gather them with an index array (as_strided rejects StringDType).
        index = sum((np.arange(dim, dtype=np.int64).reshape([-1 if j == k else 1 for j in range(len(shape))])
                     * stride for k, (dim, stride) in enumerate(zip(shape, strides))), np.int64(offset))
        out[...] = buffer[np.broadcast_to(index, shape)]
        return out
    src = np.ascontiguousarray(buffer).view(word)
    dst = out.reshape(-1).view(word)
    shape, strides = coalesce_dims(shape, strides)
    if not shape:
        dst[0] = src[offset]
    elif len(shape) == 1 and strides[0] == 1:
        np.copyto(dst, src[offset:offset + shape[0]])
    else:
        args = _plan(shape, strides)
        parallel = dst.shape[0] >= PARALLEL_MIN_ELEMENTS and dst.shape[0] > args[3]
        kernel = copy_strided_parallel if parallel else copy_strided
        kernel(src, offset, *args, dst)
    return out


def materialize_packed(packed: np.ndarray, bits: int, shape, strides, offset: int = 0, *,
                       out=None) -> np.ndarray:
    """The view's element codes packed into a new ONNX raw-layout uint8 array.

    Element i of ``packed`` is bits ``(i % (8 // bits)) * bits`` of byte
    ``i // (8 // bits)`` (low bits first); the output has ceil(N * bits / 8) bytes
    for N = prod(shape) elements, padding bits zero.

    Args:
        packed: 1-D uint8 buffer in ONNX raw layout.
        bits: 4 or 2.
        shape, strides, offset: the view in ELEMENT units (nibbles / crumbs).
        out: optional preallocated 1-D uint8 result, not overlapping ``packed``.
    Returns:
        ``out`` or a new 1-D uint8 array.
    Raises:
        ValueError: bad ``bits``, buffer, shape/strides, or a view outside the buffer.

    Example:
        >>> materialize_packed(np.array([0x21, 0x43], np.uint8), 4, (2, 2), (1, 2)).tolist()
        [49, 66]
    """
    if bits not in (2, 4):
        raise ValueError(f"bits must be 2 or 4, got {bits!r}")
    if not isinstance(packed, np.ndarray) or packed.ndim != 1 or packed.dtype != np.uint8:
        raise ValueError(f"packed must be a 1-D uint8 array, got {getattr(packed, 'dtype', type(packed))} "
                         f"of shape {getattr(packed, 'shape', None)}")
    shape, strides, offset = _normalized(shape, strides, offset)
    per_byte = 8 // bits
    count = prod(shape)
    out = _output(out, (-(-count * bits // 8),), np.dtype(np.uint8))
    if count == 0:
        return out
    _check_in_range(shape, strides, offset, packed.shape[0] * per_byte, f"{bits}-bit elements")
    packed = np.ascontiguousarray(packed)
    shape, strides = coalesce_dims(shape, strides)
    if not shape:
        shape, strides = (1,), (0,)
    if len(shape) == 1 and strides[0] == 1 and offset % per_byte == 0:
        start = offset // per_byte
        np.copyto(out, packed[start:start + out.shape[0]])
        if count % per_byte:
            out[-1] &= (1 << (count % per_byte * bits)) - 1
        return out
    kernel = gather_packed_parallel if count >= PARALLEL_MIN_ELEMENTS else gather_packed
    kernel(packed, bits, offset, np.array(shape, np.int64), np.array(strides, np.int64), count, out)
    return out
