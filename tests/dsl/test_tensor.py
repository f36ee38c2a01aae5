"""Tests of dsl/tensor.py: packed ONNX raw layout, zero-copy wrapping, and numpy round trips."""
from math import prod

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.tensor import Tensor

PACKED = [t for t in dtypes.ALL if t.packed]
FIXED = [t for t in dtypes.ALL if t.kind != "string"]
BYTE_OR_WIDER = [t for t in FIXED if not t.packed]


# ---- plain-numpy oracles (TYPES.md, "Packed sub-byte storage") ----------------------------------
def pack_reference(codes, bits: int) -> np.ndarray:
    """byte = x0 | x1 << bits | ...; first element in the low bits; zero padding."""
    per_byte = 8 // bits
    codes = np.asarray(codes, np.int64) & ((1 << bits) - 1)
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, np.int64)
    padded[:codes.size] = codes
    shifts = np.arange(per_byte) * bits
    return (padded.reshape(-1, per_byte) << shifts).sum(axis=1).astype(np.uint8)


def unpack_reference(raw, count: int, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    index = np.arange(count)
    return (np.asarray(raw, np.uint8)[index // per_byte] >> (index % per_byte * bits)) & ((1 << bits) - 1)


def signed(codes, bits: int) -> np.ndarray:
    """int4: v >= 8 -> v - 16; int2: v >= 2 -> v - 4."""
    codes = np.asarray(codes, np.int64)
    return np.where(codes >= 1 << (bits - 1), codes - (1 << bits), codes)


def codes_of(array: np.ndarray, bits: int) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8) & ((1 << bits) - 1)


def sample(dt, shape, seed: int = 0) -> np.ndarray:
    """Random elements of ``dt``; float types get arbitrary bit patterns (NaN payloads, Inf, -0)."""
    rng = np.random.default_rng(seed)
    count = prod(shape)
    if dt.kind == "string":
        return np.array([("é" if i % 2 else "ab") * (i % 4) for i in range(count)], object).reshape(shape)
    if dt.kind == "bool":
        return (rng.integers(0, 2, count) == 1).reshape(shape)
    if dt.packed:
        return rng.integers(0, 1 << dt.bits, count, dtype=np.uint8).view(dt.np_dtype).reshape(shape)
    raw = rng.integers(0, 256, count * dt.np_dtype.itemsize, dtype=np.uint8)
    return raw.view(dt.np_dtype).reshape(shape)


def assert_identical(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same shape and the same elements bit for bit (NaN payloads included)."""
    assert isinstance(actual, np.ndarray)
    assert actual.shape == expected.shape
    if expected.dtype.kind in "OUS":
        assert actual.tolist() == expected.tolist()
        return
    native = expected.dtype.newbyteorder("=")
    assert actual.dtype.newbyteorder("=") == native
    as_bytes = lambda a: np.ascontiguousarray(a, native).reshape(-1).view(np.uint8)  # noqa: E731
    np.testing.assert_array_equal(as_bytes(actual), as_bytes(expected))


def expected_packed(array: np.ndarray, dt) -> bytes:
    if dt.packed:
        return pack_reference(codes_of(array, dt.bits), dt.bits).tobytes()
    return np.ascontiguousarray(array, dt.np_dtype.newbyteorder("<")).tobytes()


# ---- layouts from_numpy must accept ------------------------------------------------------------
def _unaligned(dt, shape, byte_stride=None):
    values = sample(dt, shape)
    itemsize = dt.np_dtype.itemsize
    strides = None if byte_stride is None else (byte_stride,)
    storage = np.zeros(prod(shape) * (byte_stride or itemsize) + 1, np.uint8)
    array = np.ndarray(shape, dt.np_dtype, buffer=storage, offset=1, strides=strides)
    array[...] = values
    return array


LAYOUTS = {
    "contiguous": lambda dt: sample(dt, (2, 3, 4)),
    "scalar": lambda dt: sample(dt, ()),
    "empty": lambda dt: sample(dt, (2, 0, 3)),
    "size1": lambda dt: sample(dt, (1, 5, 1)),
    "transposed": lambda dt: sample(dt, (3, 4, 2)).transpose(2, 0, 1),
    "negative_steps": lambda dt: sample(dt, (4, 7))[::-1, 5::-2],
    "broadcast": lambda dt: np.broadcast_to(sample(dt, (3, 1)), (2, 3, 4)),
    "misaligned": lambda dt: _unaligned(dt, (3, 5)),
    "odd_byte_strides": lambda dt: _unaligned(dt, (7,), dt.np_dtype.itemsize + 1),
    "big_endian": lambda dt: sample(dt, (3, 4)).astype(dt.np_dtype.newbyteorder(">")).T,
}


def _layout_applies(dt, layout: str) -> bool:
    if layout in ("misaligned", "odd_byte_strides"):
        return dt.kind != "string" and dt.np_dtype.itemsize > 1
    if layout == "big_endian":
        return dt.kind != "string" and dt.np_dtype.isbuiltin and dt.np_dtype.itemsize > 1
    return True


CASES = [pytest.param(dt, layout, id=f"{dt.py_name}-{layout}")
         for dt in dtypes.ALL for layout in LAYOUTS if _layout_applies(dt, layout)]


@pytest.mark.parametrize("dt, layout", CASES)
def test_from_numpy_round_trips(dt, layout):
    array = LAYOUTS[layout](dt)
    assert dtypes.of_array(array) is dt
    tensor = Tensor.from_numpy(array)
    assert (tensor.dtype, tensor.shape, tensor.ndim, tensor.size) == (dt, array.shape, array.ndim, array.size)
    out = tensor.numpy()
    assert_identical(out, array)
    if dt.kind != "string":
        assert out.dtype == dt.np_dtype  # native storage, whatever the input's byte order
        assert tensor.buffer.dtype == (np.uint8 if dt.packed else dt.np_dtype)
        raw = tensor.packed()
        assert raw.dtype == np.uint8 and raw.ndim == 1
        assert raw.tobytes() == expected_packed(array, dt)
        assert_identical(Tensor.from_packed(raw, dt, array.shape).numpy(), array)


@pytest.mark.parametrize("dt", [dsl.float32, dsl.bfloat16, dsl.float8e4m3fn, dsl.complex128, dsl.bool,
                                dsl.string], ids=str)
def test_from_numpy_is_zero_copy_for_byte_types(dt):
    storage = sample(dt, (4, 7))
    array = storage[::-1, 5::-2]
    tensor = Tensor.from_numpy(array)
    assert np.shares_memory(tensor.buffer, storage)
    low, high = tensor.view.span()
    assert (low, high) == (0, tensor.buffer.size)  # the buffer covers exactly what the array reads
    assert np.shares_memory(tensor.numpy(), storage)
    before = tensor.numpy().copy()
    if dt.kind == "string":
        storage[3, 5] = "changed"
    else:
        storage.view(np.uint8)[3, 5 * storage.itemsize] ^= 1
    after = tensor.numpy()
    assert_identical(after, array)  # the tensor reads the caller's memory live
    assert (after.tolist() != before.tolist()) if dt.kind == "string" else (after.tobytes() != before.tobytes())


def test_from_numpy_of_a_tensor_is_that_tensor():
    tensor = Tensor.from_numpy(np.zeros(3, ml_dtypes.int4))
    assert Tensor.from_numpy(tensor) is tensor


@pytest.mark.parametrize("array, match", [
    (np.array([1.5, None], object), "object array must hold only str or bytes"),
    (np.zeros(2, np.longdouble), "numpy dtype .* has no ONNX element type"),
    (np.zeros(2, [("a", "i4")]), "has no ONNX element type"),
], ids=["object_floats", "longdouble", "structured"])
def test_from_numpy_rejects_arrays_without_onnx_type(array, match):
    with pytest.raises(dsl.DslError, match=rf"Tensor.from_numpy: .*{match}"):
        Tensor.from_numpy(array)


def test_numpy_is_read_only_for_broadcast_and_read_only_inputs():
    assert not Tensor.from_numpy(np.broadcast_to(np.arange(3.0), (2, 3))).numpy().flags.writeable
    assert not Tensor.from_packed(bytes(8), "float", (2,)).numpy().flags.writeable
    assert Tensor.from_numpy(np.zeros((2, 3))).numpy().flags.writeable


# ---- from_packed -------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FIXED, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 3), (2, 1, 3)], ids=str)
def test_from_packed_is_zero_copy_and_decodes(dt, shape):
    need = dt.packed_nbytes(prod(shape))
    buf = np.random.default_rng(1).integers(0, 256, need + 3, dtype=np.uint8)
    if dt.kind == "bool":
        buf &= 1
    tensor = Tensor.from_packed(buf, dt, shape)
    assert (tensor.dtype, tensor.shape) == (dt, shape)
    if dt.packed:
        assert tensor.buffer is buf
        codes = unpack_reference(buf, prod(shape), dt.bits).astype(np.uint8)
        expected = codes.view(dt.np_dtype).reshape(shape)
    else:
        assert need == 0 or np.shares_memory(tensor.buffer, buf)
        expected = buf[:need].view(dt.np_dtype.newbyteorder("<")).reshape(shape)
    assert_identical(tensor.numpy(), expected)
    if need:  # the tensor sees later writes to the caller's buffer
        buf[0] ^= 1
        expected = Tensor.from_packed(buf.copy(), dt, shape).numpy()
        assert_identical(tensor.numpy(), expected)


@pytest.mark.parametrize("make", [bytes, bytearray, lambda b: memoryview(bytearray(b)),
                                  lambda b: memoryview(np.frombuffer(b, np.uint8).reshape(2, 2))],
                         ids=["bytes", "bytearray", "memoryview", "memoryview2d"])
@pytest.mark.parametrize("dt, shape", [("int4", (2, 3)), ("uint2", (7,)), ("float", (1,)), ("float16", (2,))])
def test_from_packed_accepts_bytes_like(make, dt, shape):
    raw = bytes([0x21, 0xF3, 0x80, 0x7F])
    expected = Tensor.from_packed(np.frombuffer(raw, np.uint8).copy(), dt, shape).numpy()
    assert_identical(Tensor.from_packed(make(raw), dt, shape).numpy(), expected)


@pytest.mark.parametrize("dt, shape, given, need", [
    ("float16", (2,), 3, 4), ("int4", (3,), 1, 2), ("int2", (5,), 1, 2), ("uint2", (2, 2, 2), 1, 2),
    ("complex128", (1,), 15, 16), ("float4e2m1", (4, 1), 0, 2), ("bool", (2, 3), 5, 6),
])
def test_from_packed_too_short(dt, shape, given, need):
    with pytest.raises(dsl.DslError, match=rf"buffer of {given} bytes is too short for {dt}\[.*\]; "
                                           rf"expected at least {need} bytes"):
        Tensor.from_packed(np.zeros(given, np.uint8), dt, shape)


@pytest.mark.parametrize("buf", [np.zeros(4, np.int8), np.zeros(4, np.float32), np.zeros((2, 2), np.uint8),
                                 np.zeros(8, np.uint8)[::2], [1, 2, 3, 4], "abcd", 4, None,
                                 memoryview(bytearray(8))[::2]],
                         ids=["int8", "float32", "2d", "strided", "list", "str", "int", "none", "strided_mv"])
def test_from_packed_rejects_non_byte_buffers(buf):
    with pytest.raises(dsl.DslError, match="Tensor.from_packed: buffer"):
        Tensor.from_packed(buf, "uint8", (4,))


@pytest.mark.parametrize("shape", [(-1,), (2.0,), 3, "ab", None, (True, 2), (2, None)], ids=repr)
def test_from_packed_rejects_bad_shapes(shape):
    with pytest.raises(dsl.DslError, match="shape"):
        Tensor.from_packed(np.zeros(16, np.uint8), "uint8", shape)


@pytest.mark.parametrize("dt, match", [("string", "string"), ("float128", "unknown element type")])
def test_from_packed_rejects_bad_dtypes(dt, match):
    with pytest.raises(dsl.DslError, match=match):
        Tensor.from_packed(np.zeros(16, np.uint8), dt, (2,))


def test_string_tensor_has_no_packed_bytes():
    with pytest.raises(dsl.DslError, match="string"):
        Tensor.from_numpy(np.array(["a", "b"], object)).packed()


# ---- packed layout, bit-exact ------------------------------------------------------------------
@pytest.mark.parametrize("dt, values, raw", [
    ("int4", [1, 2, 3], [0x21, 0x03]),
    ("int4", [-1, -8, 7, 0], [0x8F, 0x07]),
    ("uint4", [15, 0, 7, 8, 1], [0x0F, 0x87, 0x01]),
    ("float4e2m1", [0.5, -6.0, 1.5], [0xF1, 0x03]),
    ("int2", [0, 1, -2, -1, 1], [0xE4, 0x01]),
    ("uint2", [3, 2, 1], [0x1B]),
    ("uint2", [1, 2, 3, 0, 3, 3, 3, 3], [0x39, 0xFF]),
    ("int2", [-1, -1], [0x0F]),
])
def test_packed_layout_examples(dt, values, raw):
    array = np.array(values, dsl.dtype(dt).np_dtype)
    assert Tensor.from_numpy(array).packed().tolist() == raw
    assert Tensor.from_packed(np.array(raw, np.uint8), dt, (len(values),)).numpy().tolist() == \
        array.tolist()


@pytest.mark.parametrize("dt", PACKED, ids=str)
def test_every_code_decodes_per_types_md(dt):
    codes = np.arange(1 << dt.bits, dtype=np.uint8)
    out = Tensor.from_packed(pack_reference(codes, dt.bits), dt, codes.shape).numpy()
    assert out.dtype == dt.np_dtype
    if dt.kind == "float":  # float4e2m1 codes 0x0-0x7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; 0x8-0xF negated
        magnitudes = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
        np.testing.assert_array_equal(out.astype(np.float32), magnitudes + [-m for m in magnitudes])
        np.testing.assert_array_equal(np.signbit(out.astype(np.float32)), codes >= 8)
    else:
        expected = signed(codes, dt.bits) if dt.kind == "int" else codes
        np.testing.assert_array_equal(out.astype(np.int64), expected)
        np.testing.assert_array_equal(out, codes.view(dt.np_dtype))  # and ml_dtypes agrees


@pytest.mark.parametrize("dt", PACKED, ids=str)
@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 5, 6, 7, 9, 31])
def test_padding_bits_are_ignored_and_cleared(dt, count):
    codes = np.random.default_rng(count).integers(0, 1 << dt.bits, count, dtype=np.uint8)
    clean = pack_reference(codes, dt.bits)
    dirty = np.concatenate([clean, [0xA5, 0xFF]]).astype(np.uint8)  # extra trailing bytes
    pad_bits = (clean.size * 8 - count * dt.bits)
    if pad_bits:
        dirty[clean.size - 1] |= (0xFF << (8 - pad_bits)) & 0xFF
    tensor = Tensor.from_packed(dirty, dt, (count,))
    np.testing.assert_array_equal(codes_of(tensor.numpy(), dt.bits), codes)
    packed = tensor.packed()
    assert packed.tobytes() == clean.tobytes()
    if not pad_bits:  # already exact: the caller's bytes come back without a copy
        assert packed.size == 0 or np.shares_memory(packed, dirty)
        assert tensor.buffer is dirty


@pytest.mark.parametrize("dt", PACKED, ids=str)
def test_packed_of_unaligned_and_strided_views(dt):
    array = sample(dt, (3, 5), seed=3)
    tensor = Tensor.from_numpy(array)
    flat = tensor.with_view(tensor.view.reshape((15,)))
    for start in range(1, 5):  # offsets that are not byte boundaries
        piece = flat.with_view(flat.view.slice(0, start, 15 - start % 2, 1))
        assert piece.packed().tobytes() == expected_packed(array.reshape(-1)[start:15 - start % 2], dt)
    transposed = tensor.with_view(tensor.view.permute((1, 0)))
    assert_identical(transposed.numpy(), array.T)
    assert transposed.packed().tobytes() == expected_packed(array.T, dt)
    reversed_ = tensor.with_view(tensor.view.slice(1, 4, -1, -2))
    assert_identical(reversed_.numpy(), array[:, ::-2])


@pytest.mark.parametrize("dt", PACKED, ids=str)
@pytest.mark.parametrize("shape", [(), (0, 3), (17,), (3, 5, 1)], ids=str)
def test_from_numpy_packs(dt, shape):
    array = sample(dt, shape, seed=7)
    tensor = Tensor.from_numpy(array)
    assert tensor.buffer.dtype == np.uint8 and tensor.buffer.size == dt.packed_nbytes(array.size)
    assert tensor.buffer.tobytes() == expected_packed(array, dt)
    assert_identical(tensor.numpy(), array)


@pytest.mark.parametrize("dt", [dsl.int4, dsl.int2], ids=str)
def test_negative_values_pack_to_low_bits(dt):
    low = -(1 << (dt.bits - 1))
    values = np.arange(low, -low, dtype=np.int64)
    raw = Tensor.from_numpy(values.astype(dt.np_dtype)).packed()
    np.testing.assert_array_equal(raw, pack_reference(values & ((1 << dt.bits) - 1), dt.bits))


# ---- shape ops on packed tensors stay views of the same bytes ----------------------------------
SHAPE_OPS = {
    "unsqueeze": lambda m, x: m.unsqueeze(x, [0, -1]),
    "transpose": lambda m, x: m.transpose(x, [2, 0, 1]),
    "reverse_transpose": lambda m, x: m.transpose(x),
    "reshape": lambda m, x: m.reshape(x, [3, 10]),
    "reshape_infer": lambda m, x: m.reshape(x, [0, -1]),
    "squeeze": lambda m, x: m.squeeze(m.unsqueeze(x, [1]), [1]),
    "transpose_unsqueeze": lambda m, x: m.unsqueeze(m.transpose(x, [1, 2, 0]), [1]),
    "transpose_reshape_view": lambda m, x: m.reshape(m.transpose(x, [2, 0, 1]), [5, 6]),
}


class NumpyOps:
    """The same ops in plain numpy, called like the ``dsl`` functions in SHAPE_OPS."""

    unsqueeze = staticmethod(lambda x, axes: np.expand_dims(x, tuple(axes)))
    transpose = staticmethod(lambda x, perm=None: np.transpose(x, perm))
    squeeze = staticmethod(lambda x, axes: np.squeeze(x, tuple(axes)))

    @staticmethod
    def reshape(x, shape):  # ONNX Reshape: 0 copies the input dim
        return x.reshape([x.shape[k] if dim == 0 else dim for k, dim in enumerate(shape)])


@pytest.mark.parametrize("dt", PACKED, ids=str)
@pytest.mark.parametrize("op", SHAPE_OPS)
def test_shape_ops_on_packed_tensors_are_views(dt, op):
    array = sample(dt, (2, 3, 5), seed=11)  # 30 elements: odd per row, not a multiple of 4
    tensor = Tensor.from_packed(Tensor.from_numpy(array).packed(), dt, array.shape)
    result = SHAPE_OPS[op](dsl, tensor)
    assert isinstance(result, Tensor) and result.dtype is dt
    assert result.buffer is tensor.buffer
    expected = SHAPE_OPS[op](NumpyOps, array)
    assert_identical(result.numpy(), expected)
    assert_identical(result.numpy(), SHAPE_OPS[op](dsl, tensor.numpy()))
    assert result.packed().tobytes() == expected_packed(expected, dt)


@pytest.mark.parametrize("dt", PACKED, ids=str)
def test_reshape_that_needs_a_copy_repacks(dt):
    array = sample(dt, (2, 3, 5), seed=5)
    tensor = Tensor.from_numpy(array)
    result = dsl.reshape(dsl.transpose(tensor, [1, 0, 2]), [6, 5])
    assert isinstance(result, Tensor) and result.buffer is not tensor.buffer
    expected = array.transpose(1, 0, 2).reshape(6, 5)
    assert_identical(result.numpy(), expected)
    assert result.buffer.tobytes() == expected_packed(expected, dt)
