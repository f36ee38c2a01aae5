"""Materialize a strided view (element units) of a flat buffer into C-contiguous memory.

The view is ``shape``/``strides``/``offset`` in ELEMENTS (dsl.view.View): element
``idx`` is ``buffer[offset + sum(idx[k] * strides[k])]``; strides may be zero,
negative or overlapping. Kernels move raw bits: the buffer is viewed as an unsigned
integer of its item size (16-byte items as a record of two uint64), so bool,
float8, bfloat16 and complex copy bit for bit and only a handful of numba
signatures exist. Packed 4-bit / 2-bit buffers (ONNX raw layout, kernels/packed.py)
gather element codes straight into packed output.

Plan: drop size-1 dims and merge dims that are contiguous with each other; a
contiguous source is one slice copy. When the innermost output dim has a larger
source stride than some other dim (a transpose), that dim becomes the "rows": each
task owns TILE_ROW_BYTES worth of rows (long contiguous source reads) and sweeps
TILE_COLS source rows at a time through square SIMD blocks that read and write
whole 64-byte lines; outputs of STREAM_MIN_BYTES or more are written with
non-temporal stores (no read-for-ownership, the dominant cost of a transpose
otherwise). Other views copy row by row. Tasks run in parallel (numba prange) from
PARALLEL_MIN_ELEMENTS on.

Measured with benchmarks/copy_bench.py on the 2-core dev VM: a 4096-byte source
run beats 1024 (8192^2 float32, 2 threads: 11.1 vs 9.4 GB/s) and 256 (8.0); TILE_COLS
32 or 64 tie, 128 loses (7.0); non-temporal stores lift 4096^2 float32 from 2.8 to
8.5 GB/s and still win at 1 MB (4.3 vs 2.3 single-threaded), but a result that fits
the 2 MB L2 is kept in cache for its consumer; 2 threads tie 1 at 256^2 and win from 512^2.
"""
import operator
from math import prod

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from .parallel import threads as allowed_threads
from .bits import stream_fence

# Tuned on the 2-core dev VM (module docstring).
TILE_ROW_BYTES = 4096  # output rows per task x item size: the length of each source read run
TILE_COLS = 32  # source rows (output columns) visited per sweep of a task's rows
PARALLEL_MIN_ELEMENTS = 1 << 18
STREAM_MIN_BYTES = 1 << 21  # outputs this large bypass the cache (non-temporal stores)
PACKED_CHUNK_BYTES = 1 << 14
LINE_BYTES = 64  # a transpose block moves whole cache lines: 64 // itemsize lanes square

_UINT_BY_ITEMSIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64,
                     16: np.dtype([("lo", "<u8"), ("hi", "<u8")])}


# ---------------------------------------------------------------- byte-sized kernels

def transpose_block(src, s, col_src, out, o, row_out, stream):
    """out[o + i*row_out + j] = src[s + j*col_src + i] for i, j < 64 // itemsize.

    Jitted for integer items as SIMD: one vector load per source row, log2(lanes)
    shuffle stages, one vector store per output row; ``stream`` stores are
    non-temporal and need every output row 64-byte aligned.
    """
    lanes = LINE_BYTES // src.itemsize
    for j in range(lanes):
        for i in range(lanes):
            out[o + i * row_out + j] = src[s + j * col_src + i]


def _transpose_block_codegen(context, builder, signature, args):
    src_type, out_type, stream = signature.args[0], signature.args[3], signature.args[6].literal_value
    lanes = LINE_BYTES // src_type.dtype.bitwidth * 8
    vector_ptr = ir.VectorType(context.get_data_type(src_type.dtype), lanes).as_pointer()
    src_data = context.make_array(src_type)(context, builder, args[0]).data
    out_data = context.make_array(out_type)(context, builder, args[3]).data

    def row_pointer(data, base, stride, k):
        index = builder.add(base, builder.mul(stride, ir.Constant(ir.IntType(64), k)))
        return builder.bitcast(builder.gep(data, [index]), vector_ptr)

    rows = [builder.load(row_pointer(src_data, args[1], args[2], k), align=1) for k in range(lanes)]
    # Stage d swaps bit d of the row number with bit d of the lane number; after all
    # log2(lanes) stages row i holds lane i of every source row.
    distance = 1
    while distance < lanes:
        masks = [[i if not i & distance else lanes + i - distance for i in range(lanes)],
                 [i + distance if not i & distance else lanes + i for i in range(lanes)]]
        masks = [ir.Constant(ir.VectorType(ir.IntType(32), lanes), mask) for mask in masks]
        for j in range(lanes):
            if not j & distance:
                a, b = rows[j], rows[j + distance]
                rows[j], rows[j + distance] = (builder.shuffle_vector(a, b, mask) for mask in masks)
        distance *= 2
    nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
    for k in range(lanes):
        store = builder.store(rows[k], row_pointer(out_data, args[4], args[5], k),
                              align=LINE_BYTES if stream else 1)
        if stream:
            store.set_metadata("nontemporal", nontemporal)
    return context.get_dummy_value()


@intrinsic(prefer_literal=True)
def _transpose_block_simd(typingctx, src, s, col_src, out, o, row_out, stream):
    if isinstance(stream, types.BooleanLiteral) and isinstance(src.dtype, types.Integer):
        return types.void(src, s, col_src, out, o, row_out, stream), _transpose_block_codegen
    return None


@overload(transpose_block, jit_options={"nogil": True})
def _transpose_block_jit(src, s, col_src, out, o, row_out, stream):
    if not isinstance(src.dtype, types.Integer):  # 16-byte records: plain loops
        return transpose_block

    def simd(src, s, col_src, out, o, row_out, stream):
        if stream:
            _transpose_block_simd(src, s, col_src, out, o, row_out, True)
        else:
            _transpose_block_simd(src, s, col_src, out, o, row_out, False)
    return simd


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


@numba.njit(cache=True, nogil=True, inline="always")
def _copy_tile_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, stream, out):
    # A transpose: rows read the source contiguously, cols write the output
    # contiguously. Sweep TILE_COLS source rows at a time over this task's rows so
    # each source read run is row_count items; whole-cache-line SIMD blocks inside.
    if row_src != 1:
        for col0 in range(0, cols, TILE_COLS):
            _copy_rows(src, src_base + col0 * col_src, out_base + col0, row_count, row_src, row_out,
                       min(TILE_COLS, cols - col0), col_src, out)
        return
    lanes = LINE_BYTES // src.itemsize
    first = 0
    if stream:  # start blocks at the first 64-byte aligned output column
        address = np.int64(out.ctypes.data) + out_base * src.itemsize
        first = min(cols, (-address % LINE_BYTES) // src.itemsize)
    last = first + (cols - first) // lanes * lanes
    block_rows = row_count // lanes * lanes
    sweep = (TILE_COLS + lanes - 1) // lanes * lanes
    for col0 in range(first, last, sweep):
        col1 = min(col0 + sweep, last)
        for row in range(0, block_rows, lanes):
            for col in range(col0, col1, lanes):
                transpose_block(src, src_base + row + col * col_src, col_src,
                                out, out_base + row * row_out + col, row_out, stream)
    if stream:
        stream_fence()
    for row in range(row_count):  # what the blocks left: edge columns, then the last rows
        s = src_base + row
        o = out_base + row * row_out
        for col in range(first if row < block_rows else cols):
            out[np.uint64(o + col)] = src[np.uint64(s + col * col_src)]
        for col in range(last if row < block_rows else cols, cols):
            out[np.uint64(o + col)] = src[np.uint64(s + col * col_src)]


@numba.njit(cache=True, nogil=True)
def _copy_task(src, offset, outer, rows, row_src, row_out, cols, col_src, blocked, tile_rows,
               stream, task, out):
    row_tiles = (rows + tile_rows - 1) // tile_rows
    outer_index = task // row_tiles
    row0 = (task - outer_index * row_tiles) * tile_rows
    src_base = offset + row0 * row_src
    out_base = row0 * row_out
    for k in range(outer.shape[1] - 1, -1, -1):
        quotient = outer_index // outer[0, k]
        position = outer_index - quotient * outer[0, k]
        outer_index = quotient
        src_base += position * outer[1, k]
        out_base += position * outer[2, k]
    row_count = min(tile_rows, rows - row0)
    if blocked:
        _copy_tile_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, stream, out)
    else:
        _copy_rows(src, src_base, out_base, row_count, row_src, row_out, cols, col_src, out)


@numba.njit(cache=True, nogil=True)
def copy_strided(src, offset, outer, rows, row_src, row_out, cols, col_src, blocked, tile_rows,
                 stream, out):
    """out[o + i*row_out + j] = src[offset + s + i*row_src + j*col_src] for every
    outer multi-index (offsets s, o from the outer dims), row i < rows, col j < cols.

    ``src``/``out``: 1-D arrays of one unsigned (or uint64-pair record) dtype;
    ``outer``: int64 (3, k) array of the outer dims' sizes, source and output strides.
    Tasks are (outer index, ``tile_rows`` rows); ``blocked`` copies them as transposes,
    ``stream`` (needs row_out * itemsize % 64 == 0) with non-temporal stores.
    Requires every addressed index in range (checked by the caller).
    """
    task_count = (rows + tile_rows - 1) // tile_rows
    for k in range(outer.shape[1]):
        task_count *= outer[0, k]
    for task in range(task_count):
        _copy_task(src, offset, outer, rows, row_src, row_out, cols, col_src, blocked, tile_rows,
                   stream, task, out)


@numba.njit(cache=True, nogil=True, parallel=True)
def copy_strided_parallel(src, offset, outer, rows, row_src, row_out, cols, col_src, blocked,
                          tile_rows, stream, out):
    """``copy_strided`` with its tasks spread over threads."""
    task_count = (rows + tile_rows - 1) // tile_rows
    for k in range(outer.shape[1]):
        task_count *= outer[0, k]
    for task in numba.prange(task_count):
        _copy_task(src, offset, outer, rows, row_src, row_out, cols, col_src, blocked, tile_rows,
                   stream, task, out)


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


def _plan(shape, strides, itemsize: int, out_address: int, threads: int):
    """(task count, ``copy_strided`` arguments after ``offset`` and before ``out``) for
    a coalesced view of rank >= 1, in tasks for ``threads`` threads (1: one thread)."""
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
    outer_count = prod([shape[k] for k in outer])
    rows, row_src, row_out = (1, 0, 0) if row_dim is None else (
        shape[row_dim], strides[row_dim], out_strides[row_dim])
    tile_rows = TILE_ROW_BYTES // itemsize
    if threads > 1:  # enough tasks to balance the threads: split rows, in whole blocks
        splits = -(-4 * threads // outer_count)
        granule = max(1, LINE_BYTES // itemsize)
        tile_rows = min(tile_rows, max(granule, -(-rows // splits // granule) * granule))
    out_bytes = outer_count * rows * cols * itemsize
    stream = (blocked and row_src == 1 and itemsize <= 8 and out_address % itemsize == 0
              and row_out * itemsize % LINE_BYTES == 0 and out_bytes >= STREAM_MIN_BYTES)
    outer_dims = np.array([[shape[k] for k in outer], [strides[k] for k in outer],
                           [out_strides[k] for k in outer]], np.int64).reshape(3, len(outer))
    task_count = outer_count * -(-rows // tile_rows)
    return task_count, (outer_dims, rows, row_src, row_out, cols, col_src, blocked, tile_rows, stream)


def _element_indices(shape, strides, offset) -> np.ndarray:
    """The buffer index of every view element, an int64 array of ``shape``."""
    index = np.full(shape, offset, np.int64)
    for axis, (dim, stride) in enumerate(zip(shape, strides)):
        index += (np.arange(dim, dtype=np.int64) * stride).reshape((-1,) + (1,) * (len(shape) - axis - 1))
    return index


def _output(out, shape, dtype) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype)
    if (not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != dtype
            or not out.flags.c_contiguous or not out.flags.writeable):
        got = f"{getattr(out, 'dtype', type(out).__name__)} of shape {getattr(out, 'shape', None)}"
        raise ValueError(f"out must be a writeable C-contiguous {dtype} array of shape {tuple(shape)}, "
                         f"got {got}")
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
        # References (object, StringDType) must not be copied as raw bits, and odd item
        # sizes ("U3") have no word type: let numpy gather (as_strided rejects StringDType).
        out[...] = buffer[_element_indices(shape, strides, offset)]
        return out
    src = np.ascontiguousarray(buffer).view(word)  # a strided 1-D buffer is compacted first
    dst = out.reshape(-1).view(word)
    shape, strides = coalesce_dims(shape, strides)
    if not shape:
        dst[0] = src[offset]
    elif len(shape) == 1 and strides[0] == 1:
        np.copyto(dst, src[offset:offset + shape[0]])
    else:
        threads = allowed_threads() if dst.shape[0] >= PARALLEL_MIN_ELEMENTS else 1
        task_count, args = _plan(shape, strides, dst.itemsize, dst.ctypes.data, threads)
        kernel = copy_strided_parallel if threads > 1 and task_count > 1 else copy_strided
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
        got = f"{getattr(packed, 'dtype', type(packed).__name__)} of shape {getattr(packed, 'shape', None)}"
        raise ValueError(f"packed must be a 1-D uint8 array, got {got}")
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
    parallel = count >= PARALLEL_MIN_ELEMENTS and allowed_threads() > 1
    kernel = gather_packed_parallel if parallel else gather_packed
    kernel(packed, bits, offset, np.array(shape, np.int64), np.array(strides, np.int64), count, out)
    return out
