"""kernels/copy.py: strided -> contiguous copies against numpy views of the same memory, bit for bit."""
from math import prod

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from kernels import copy as kc

# Bounded so the file runs in well under 30 s (after numba's on-disk cache is warm).
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every item size: 1, 2, 4, 8, 16 bytes; bool and the ml_dtypes types go through their uint view;
# object and 12-byte strings through the numpy fallback.
DTYPES = [np.bool_, np.uint8, ml_dtypes.float8_e4m3fn, np.int16, ml_dtypes.bfloat16, np.float16,
          np.float32, np.int32, np.float64, np.complex64, np.complex128, object, "U3"]


def random_buffer(dtype, length: int, rng: np.random.Generator) -> np.ndarray:
    """Random bits (NaN payloads, subnormals and all); bools stay 0/1."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, length).astype(np.bool_)
    if dtype.kind in "OU":
        return rng.integers(0, 1000, length).astype(str).astype(dtype)
    return rng.integers(0, 256, length * dtype.itemsize, dtype=np.uint8).view(dtype)


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def element_view(array: np.ndarray, buffer: np.ndarray):
    """(shape, strides, offset) in elements of ``buffer`` for the numpy view ``array``."""
    itemsize = buffer.dtype.itemsize
    assert all(stride % itemsize == 0 for stride in array.strides)
    offset = (address(array) - address(buffer)) // itemsize if array.size else 0
    return array.shape, tuple(s // itemsize for s in array.strides), offset


def same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.flags.c_contiguous
    if actual.dtype.kind in "OU":
        assert actual.tolist() == expected.tolist()
    else:
        np.testing.assert_array_equal(actual.reshape(-1).view(np.uint8),
                                      expected.reshape(-1).view(np.uint8))


@st.composite
def strided_views(draw, max_size: int = 30000):
    """A numpy view of a 1-D buffer: offset start, reshape, transpose, stepped/negative
    slices, broadcast (stride 0) dims. Returns (buffer, view) with ``view`` over ``indices``
    (an int64 arange), so the caller re-creates it on any dtype via element_view."""
    dim = st.one_of(st.integers(0, 5), st.integers(0, 5), st.integers(60, 140))
    shape = draw(st.lists(dim, min_size=0, max_size=4).filter(lambda s: prod(s) <= max_size))
    lead = draw(st.integers(0, 7))
    trail = draw(st.integers(0, 3))
    indices = np.arange(lead + prod(shape) + trail, dtype=np.int64)
    view = indices[lead:lead + prod(shape)].reshape(shape)
    view = view.transpose(draw(st.permutations(range(len(shape)))))
    for axis, size in enumerate(view.shape):
        step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        start = draw(st.integers(0, max(size - 1, 0)))
        stop = draw(st.integers(start, size))
        if step < 0 and stop > start:
            start, stop = stop - 1, (start - 1 if start > 0 else None)
        elif step < 0:
            start = stop = 0
        index = [slice(None)] * view.ndim
        index[axis] = slice(start, stop, step)
        view = view[tuple(index)]
    if draw(st.booleans()):
        position = draw(st.integers(0, view.ndim))
        view = np.expand_dims(view, position)
        view = np.broadcast_to(view, view.shape[:position] + (draw(st.integers(0, 4)),)
                               + view.shape[position + 1:])
    return indices, view


# ---- byte-sized items ---------------------------------------------------------------------------
@PROPERTY
@given(views=strided_views(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_materialize_equals_numpy(views, dtype, seed):
    indices, index_view = views
    buffer = random_buffer(dtype, indices.shape[0], np.random.default_rng(seed))
    shape, strides, offset = element_view(index_view, indices)
    expected = as_strided(buffer[offset:], shape, [s * buffer.itemsize for s in strides])
    # np.ascontiguousarray would turn a 0-d view into shape (1,): copy keeps the shape.
    same_bits(kc.materialize(buffer, shape, strides, offset), np.array(expected, order="C"))


# The threaded kernels for two item sizes only: each costs seconds of compilation.
@pytest.mark.parametrize("dtype, parallel", [(np.uint8, False), (np.float32, False), (np.float64, False),
                                             (np.complex128, False), (np.float32, True),
                                             (np.complex128, True)])
def test_tile_edges_and_threads(dtype, parallel, monkeypatch):
    """Transposes and 3-D permutations straddling TILE_ROWS/TILE_COLS, on both kernels."""
    monkeypatch.setattr(kc, "PARALLEL_MIN_ELEMENTS", 1 if parallel else 1 << 62)
    rng = np.random.default_rng(7)
    buffer = random_buffer(dtype, 3 * 131 * 67 + 5, rng)
    base = buffer[5:].reshape(3, 131, 67)
    for array in (base[0].T, base.transpose(2, 0, 1), base.transpose(1, 2, 0), base[:, ::-3, 1::2].T,
                  base.transpose(0, 2, 1)[:, 1:, :-1], base[1, ::-1].T,
                  base[::-1, ::-1].transpose(0, 2, 1)):
        same_bits(kc.materialize(buffer, *element_view(array, buffer)), np.ascontiguousarray(array))


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_streaming_stores_into_unaligned_out(dtype, shift, monkeypatch):
    """Non-temporal block stores start at the first 64-byte aligned column of ``out``."""
    monkeypatch.setattr(kc, "STREAM_MIN_BYTES", 0)
    buffer = random_buffer(dtype, 128 * 133 + 2, np.random.default_rng(5))
    array = buffer[2:].reshape(128, 133).T[1:]  # out (132, 128): rows of 128 items
    shape, strides, offset = element_view(array, buffer)
    raw = np.zeros(array.size + 64, dtype)
    out = raw[shift:shift + array.size].reshape(shape)
    assert kc._plan(*kc.coalesce_dims(shape, strides), raw.itemsize, out.ctypes.data, 1)[1][-1]
    result = kc.materialize(buffer, shape, strides, offset, out=out)
    assert result is out
    same_bits(out, np.ascontiguousarray(array))
    assert not raw[:shift].any() and not raw[shift + array.size:].any()


def test_out_argument_checked():
    buffer = np.arange(12, dtype=np.float32)
    for out in (np.empty((4, 3), np.float64), np.empty((3, 4), np.float32),
                np.empty((4, 6), np.float32)[:, ::2], [0.0] * 12):
        with pytest.raises(ValueError, match="out must be"):
            kc.materialize(buffer, (4, 3), (1, 4), 0, out=out)
    with pytest.raises(ValueError, match="out must be"):
        kc.materialize_packed(np.zeros(4, np.uint8), 4, (3,), (1,), 0, out=np.empty(1, np.uint8))


def test_parallel_path_by_size():
    """A view above PARALLEL_MIN_ELEMENTS (the wrapper's own choice of the threaded kernel)."""
    buffer = random_buffer(np.float32, 600 * 500, np.random.default_rng(3))
    array = buffer.reshape(600, 500)[::-1].T
    assert array.size >= kc.PARALLEL_MIN_ELEMENTS
    same_bits(kc.materialize(buffer, *element_view(array, buffer)), np.ascontiguousarray(array))


def test_rank0_empty_and_contiguous():
    buffer = np.arange(10, dtype=np.int64)
    assert kc.materialize(buffer, (), (), 7).tolist() == 7
    assert kc.materialize(buffer, (1, 1), (0, 0), 9).tolist() == [[9]]
    assert kc.materialize(buffer, (0, 3), (3, 1), 0).shape == (0, 3)
    assert kc.materialize(buffer, (4, 0), (1, 1), 99).shape == (4, 0)  # nothing is read
    same_bits(kc.materialize(buffer, (2, 4), (4, 1), 2), buffer[2:10].reshape(2, 4))
    same_bits(kc.materialize(buffer, (3, 2), (0, 1), 4), np.array([[4, 5]] * 3))


@pytest.mark.parametrize("dtype", [object, "U3", np.dtypes.StringDType()])
def test_object_and_string_buffers(dtype):
    buffer = np.array(["a", "bb", "ccc", "d", "", "ff"], dtype=dtype)
    expected = buffer.reshape(2, 3)[:, ::-1].T
    result = kc.materialize(buffer, *element_view(expected, buffer))
    assert result.dtype == buffer.dtype and result.tolist() == expected.tolist()


def test_coalesce_dims():
    assert kc.coalesce_dims((2, 1, 3, 4), (12, 0, 4, 1)) == ((24,), (1,))
    assert kc.coalesce_dims((3, 4), (1, 3)) == ((3, 4), (1, 3))
    assert kc.coalesce_dims((2, 5, 3), (0, 0, 1)) == ((10, 3), (0, 1))
    assert kc.coalesce_dims((1, 1), (0, 0)) == ((), ())


# ---- packed 4-bit / 2-bit ----------------------------------------------------------------------
def numpy_codes(packed: np.ndarray, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    return ((packed[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1).astype(np.uint8)


def numpy_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, np.uint8)
    padded[:codes.size] = codes
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    return np.bitwise_or.reduce(padded.reshape(-1, per_byte) << shifts, axis=1).astype(np.uint8)


@PROPERTY
@given(views=strided_views(), bits=st.sampled_from([2, 4]), seed=st.integers(0, 2**32 - 1))
def test_materialize_packed_equals_numpy(views, bits, seed):
    indices, index_view = views
    per_byte = 8 // bits
    # Random bytes: padding bits of the last byte are nonzero and must not leak out.
    packed = random_buffer(np.uint8, -(-indices.shape[0] // per_byte), np.random.default_rng(seed))
    expected = numpy_pack(numpy_codes(packed, bits)[index_view.reshape(-1)], bits)
    shape, strides, offset = element_view(index_view, indices)
    result = kc.materialize_packed(packed, bits, shape, strides, offset)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("parallel", [False, True])
def test_packed_chunks_and_threads(bits, parallel, monkeypatch):
    """More than two PACKED_CHUNK_BYTES of output from a reversed transpose, on both kernels."""
    monkeypatch.setattr(kc, "PARALLEL_MIN_ELEMENTS", 1 if parallel else 1 << 62)
    packed = random_buffer(np.uint8, 2 * kc.PACKED_CHUNK_BYTES + 771, np.random.default_rng(11))
    indices = np.arange(packed.size * (8 // bits))
    view = indices[3:3 + 77 * (indices.size // 77 - 1)].reshape(-1, 77)[::-1].T
    expected = numpy_pack(numpy_codes(packed, bits)[view.reshape(-1)], bits)
    result = kc.materialize_packed(packed, bits, *element_view(view, indices))
    np.testing.assert_array_equal(result, expected)


def test_packed_contiguous_fast_path_clears_padding():
    packed = np.array([0xFF, 0xFF, 0xFF], np.uint8)
    assert kc.materialize_packed(packed, 4, (3,), (1,), 0).tolist() == [0xFF, 0x0F]
    assert kc.materialize_packed(packed, 2, (5,), (1,), 4).tolist() == [0xFF, 0x03]
    assert kc.materialize_packed(packed, 4, (), (), 5).tolist() == [0x0F]
    assert kc.materialize_packed(packed, 4, (0, 2), (2, 1), 0).tolist() == []


# ---- bad views raise ValueError from the wrapper, never reach a kernel -------------------------
@PROPERTY
@given(shape=st.lists(st.integers(0, 4), max_size=3), data=st.data(),
       length=st.integers(1, 12), packed_bits=st.sampled_from([0, 2, 4]))
def test_out_of_range_views_raise(shape, data, length, packed_bits):
    strides = data.draw(st.lists(st.integers(-6, 6), min_size=len(shape), max_size=len(shape)))
    offset = data.draw(st.integers(-3, 14))
    elements = length * (8 // packed_bits) if packed_bits else length
    touched = [offset + sum(i * s for i, s in zip(index, strides)) for index in np.ndindex(*shape)]
    inside = all(0 <= t < elements for t in touched)
    if packed_bits:
        packed = np.arange(length, dtype=np.uint8) * 37
        run = lambda: kc.materialize_packed(packed, packed_bits, shape, strides, offset)
        expected = numpy_pack(numpy_codes(packed, packed_bits)[touched], packed_bits) if inside else None
    else:
        buffer = np.arange(length, dtype=np.float64)
        run = lambda: kc.materialize(buffer, shape, strides, offset)
        expected = buffer[touched].reshape(shape) if inside else None
    if inside:
        np.testing.assert_array_equal(run(), expected)
    else:
        with pytest.raises(ValueError, match="outside the buffer"):
            run()


@pytest.mark.parametrize("call, match", [
    (lambda: kc.materialize(np.zeros((2, 2)), (2,), (1,), 0), "1-D"),
    (lambda: kc.materialize(np.zeros(4), (2, 2), (1,), 0), "rank"),
    (lambda: kc.materialize(np.zeros(4), (-1,), (1,), 0), "negative"),
    (lambda: kc.materialize(np.zeros(4), (2.0,), (1,), 0), "integers"),
    (lambda: kc.materialize(np.zeros(4), (5,), (1,), 0), r"\[0, 4\]"),
    (lambda: kc.materialize_packed(np.zeros(2, np.uint8), 3, (2,), (1,), 0), "bits"),
    (lambda: kc.materialize_packed(np.zeros(2, np.int8), 4, (2,), (1,), 0), "uint8"),
    (lambda: kc.materialize_packed(np.zeros(2, np.uint8), 4, (2, 2), (-1, 1), 0), r"\[0, 4\)"),
])
def test_bad_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- kernels against their pure-Python definitions ----------------------------------------------
def test_kernels_equal_py_func():
    """Each kernel's jitted result equals its Python definition and a numpy formula."""
    src = np.arange(1300, dtype=np.uint32) * np.uint32(2654435761)
    shape, strides, offset = (3, 21, 19), (399, 1, 21), 12  # outer dim + a transposed (blocked) pair
    expected = as_strided(src[offset:], shape, [s * 4 for s in strides]).reshape(-1)
    args = list(kc._plan(shape, strides, 4, 0, 1)[1])
    assert args[6] and args[2] == 1 and args[0].tolist() == [[3], [399], [399]], "expected blocked"
    args[7] = 16  # tile_rows: 2 tasks of one 16 x 16 block plus edges each
    for kernel in (kc.copy_strided, kc.copy_strided_parallel):
        jitted, python = np.zeros(prod(shape), np.uint32), np.zeros(prod(shape), np.uint32)
        kernel(src, offset, *args, jitted)
        kernel.py_func(src, offset, *args, python)
        np.testing.assert_array_equal(jitted, expected)
        np.testing.assert_array_equal(python, expected)
    # 17 rows x 20 cols from src[3 + row + 18 * col] into out[2 + 24 * row + col]
    expected = np.full(24 * 17, 9, np.uint32)
    expected.reshape(17, 24)[:, 2:22] = as_strided(src[3:], (17, 20), (4, 72))
    for helper in (kc._copy_rows, kc._copy_tile_rows):
        extra = (False,) if helper is kc._copy_tile_rows else ()
        jitted, python = np.full(24 * 17, 9, np.uint32), np.full(24 * 17, 9, np.uint32)
        helper(src, 3, 2, 17, 1, 24, 20, 18, *extra, jitted)
        helper.py_func(src, 3, 2, 17, 1, 24, 20, 18, *extra, python)
        np.testing.assert_array_equal(jitted, expected)
        np.testing.assert_array_equal(python, expected)
    packed = (np.arange(40, dtype=np.uint8) * 73).astype(np.uint8)
    view = np.arange(80)[3:57].reshape(6, 9)[:, :4].T  # shape (4, 6), strides (1, 9), offset 3
    expected = numpy_pack(numpy_codes(packed, 4)[view.reshape(-1)], 4)
    shape_array, stride_array = np.array([4, 6], np.int64), np.array([1, 9], np.int64)
    for kernel in (kc.gather_packed, kc.gather_packed_parallel):
        jitted, python = np.zeros(12, np.uint8), np.zeros(12, np.uint8)
        kernel(packed, 4, 3, shape_array, stride_array, 24, jitted)
        kernel.py_func(packed, 4, 3, shape_array, stride_array, 24, python)
        np.testing.assert_array_equal(jitted, expected)
        np.testing.assert_array_equal(python, expected)
