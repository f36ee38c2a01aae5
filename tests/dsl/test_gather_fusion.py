"""Fused gathers (dsl/ops/lowering.py Gathering): Gather, GatherElements and GatherND inside
elementwise kernels as loads through loaded indices, checked against numpy and the eager
engine; index values out of range raise before any kernel reads through them."""
import numpy as np
import pytest

import dsl
from dsl.passes.fuse import KernelStep

RNG = np.random.default_rng(7)


def kernels(f, *args) -> list:
    return [s for s in f.executable(*args).steps if isinstance(s, KernelStep)]


def fused_ops(f, *args) -> list:
    return [n.op_type for s in kernels(f, *args) for n in s.group.nodes]


def numpy_steps(f, *args) -> list:
    return [s.node.op_type for s in f.executable(*args).steps if not isinstance(s, KernelStep)]


def table(shape, np_type=np.float32):
    return np.asarray(RNG.integers(-60, 60, shape) / 4, np_type)


# ---- Gather -------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("index_shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_gather_fuses_with_its_consumer_at_every_axis(axis, index_shape, index_type):
    data = table((5, 6, 7))
    size = data.shape[axis]
    indices = np.asarray(RNG.integers(-size, size, index_shape), index_type)

    @dsl.jit
    def f(w, i):
        return dsl.gather(w, i, axis=axis) * 2.0 - 1.0
    want = np.take(data, np.where(indices < 0, indices + size, indices), axis=axis) * 2 - 1
    np.testing.assert_array_equal(f(data, indices), want)
    assert "Gather" in fused_ops(f, data, indices) and numpy_steps(f, data, indices) == []
    assert dsl.compare(f, data, indices).ok


@pytest.mark.parametrize("name", ["float16", "bfloat16", "int8", "uint16", "int64", "bool", "int32", "float64"])
def test_gather_of_every_native_element_type_is_bit_exact(name):
    np_type = dsl.dtype(name).np_dtype
    data = np.asarray(RNG.integers(0, 2 if name == "bool" else 50, (9, 4)), np_type)
    indices = np.array([[8, 0], [-1, 3]], np.int64)

    @dsl.jit
    def f(w, i):
        return dsl.identity(dsl.gather(w, i))
    got = f(data, indices)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got.view(np.uint8), data[[[8, 0], [8, 3]]].view(np.uint8))
    assert "Gather" in fused_ops(f, data, indices)


@pytest.mark.parametrize("name", ["int4", "uint4", "float4e2m1", "int2", "float8e4m3fn"])
def test_gather_takes_no_packed_or_float8_table_as_its_schema_says(name):
    """Gather-13 / GatherElements-13 / GatherND-13 list the types of version 13: no float8 and no
    4- or 2-bit types (an int4 table is gathered as its raw bytes, or cast first)."""
    weights = dsl.cast(dsl.Tensor.from_numpy(np.zeros((6, 8), np.float32)), dsl.dtype(name))
    for op in (lambda w: dsl.gather(w, np.array([1], np.int64)),
               lambda w: dsl.gather_elements(w, np.zeros((1, 8), np.int64)),
               lambda w: dsl.gather_nd(w, np.zeros((1, 1), np.int64))):
        with pytest.raises(dsl.DTypeError, match=rf"input 'data' has type {name}\[6,8\], not allowed at version 13"):
            op(weights)
        with pytest.raises(dsl.DTypeError, match=rf"has type {name}\[6,8\], not allowed"):
            dsl.jit(op)(weights)


@pytest.mark.parametrize("layout", ["transposed", "reversed", "sliced"])
def test_gather_reads_a_strided_table_through_its_strides(layout):
    base = table((40, 24))
    data = {"transposed": np.ascontiguousarray(base.T).T, "reversed": base[::-1], "sliced": base[3:31:2, ::-3]}[layout]
    indices = np.array([[0, -1, 5], [2, 2, 7]], np.int64)

    @dsl.jit
    def f(w, i):
        return dsl.gather(w, i, axis=1) + 1.0
    np.testing.assert_array_equal(f(data, indices), np.take(data, np.where(indices < 0, indices + data.shape[1],
                                                                           indices), axis=1) + 1)


def test_views_after_the_gather_move_both_the_table_and_the_indices():
    data, indices = table((10, 8)), np.array([[1, 9, 4], [0, -3, 2]], np.int64)

    @dsl.jit
    def f(w, i):
        g = dsl.gather(w, i)  # [2, 3, 8]
        return dsl.transpose(g, [2, 0, 1])[::-2, :, 1:] * 3.0
    want = np.transpose(data[np.where(indices < 0, indices + 10, indices)], (2, 0, 1))[::-2, :, 1:] * 3
    np.testing.assert_array_equal(f(data, indices), want)
    assert numpy_steps(f, data, indices) == []


def test_computed_indices_and_tables_are_materialized_then_checked():
    data, ids = table((16, 5)), np.array([3, 14, 0], np.int64)

    @dsl.jit
    def f(w, i):
        return dsl.gather(w * 2.0, i + 1) + w[0]
    np.testing.assert_array_equal(f(data, ids), (data * 2)[ids + 1] + data[0])
    with pytest.raises(dsl.InputError, match=r"Gather .*indices value 16 at \[1\] is out of range \[-16, 15\]"):
        f(data, np.array([3, 15, 0], np.int64))


@pytest.mark.parametrize("engine", ["jit", "numpy"])
@pytest.mark.parametrize("bad", [32, -33, 10 ** 12])
def test_an_index_out_of_range_raises_before_any_read(engine, bad):
    data, ids = table((32, 4)), np.array([[1, bad]], np.int64)

    def f(w, i):
        return dsl.gather(w, i) * 2.0
    with pytest.raises(dsl.InputError, match=rf"Gather\b.*indices value {bad} at \[0, 1\] is out of range \[-32, 31\]"):
        dsl.jit(f)(data, ids) if engine == "jit" else f(dsl.Tensor.from_numpy(data), dsl.Tensor.from_numpy(ids))


def test_version_1_gather_refuses_negative_indices_at_run_time():
    data = table((6, 3))

    @dsl.jit(opset=9)
    def f(w, i):
        return dsl.gather(w, i) + 1.0
    np.testing.assert_array_equal(f(data, np.array([5, 0], np.int64)), data[[5, 0]] + 1)
    with pytest.raises(dsl.InputError, match=r"indices value -1 at \[0\] is out of range \[0, 5\]"):
        f(data, np.array([-1, 0], np.int64))


def test_a_gather_feeding_a_reduction_or_concat_runs_as_its_own_kernel():
    data, ids = table((12, 16)), np.array([4, -1, 0, 7], np.int64)

    @dsl.jit
    def f(w, i):
        g = dsl.gather(w, i)
        return dsl.reduce_sum(g * g, [-1]), dsl.concat([g, w[:2]], 0) + 1.0, dsl.softmax(g, -1)
    got = f(data, ids)
    g = data[[4, 11, 0, 7]]
    np.testing.assert_allclose(got[0], (g.astype(np.float64) ** 2).sum(-1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(got[1], np.concatenate([g, data[:2]]) + 1)
    e = np.exp(g - g.max(-1, keepdims=True))
    np.testing.assert_allclose(got[2], e / e.sum(-1, keepdims=True), rtol=1e-5)
    assert numpy_steps(f, data, ids) == [] and dsl.compare(f, data, ids).ok


def test_an_embedding_lookup_larger_than_a_thread_span_runs_threaded():
    vocab, width = 4000, 512
    data, ids = table((vocab, width)), RNG.integers(-vocab, vocab, (16, 64)).astype(np.int64)

    @dsl.jit
    def f(w, i, scale):
        return dsl.gather(w, i) * scale
    scale = np.float32(0.125)
    np.testing.assert_array_equal(f(data, ids, scale), data[np.where(ids < 0, ids + vocab, ids)] * scale)
    assert f.executable(data, ids, scale).kernel_count == 1


def test_the_inputs_are_not_written():
    data, ids = table((8, 8)), np.array([1, 2], np.int64)
    before = data.copy(), ids.copy()
    dsl.jit(lambda w, i: dsl.gather(w, i) + 1.0)(data, ids)
    np.testing.assert_array_equal(data, before[0])
    np.testing.assert_array_equal(ids, before[1])


# ---- GatherElements -------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_gather_elements_fuses_at_every_axis(axis, index_type):
    data = table((5, 6, 4))
    shape = list(data.shape)
    shape[axis] = 7  # more indices along the axis than data has
    shape[(axis + 1) % 3] -= 2  # fewer along another dim: a window of data
    size = data.shape[axis]
    indices = np.asarray(RNG.integers(-size, size, shape), index_type)

    @dsl.jit
    def f(x, i):
        return dsl.gather_elements(x, i, axis=axis) - 0.5
    window = data[tuple(slice(None) if k == axis % 3 else slice(0, n) for k, n in enumerate(shape))]
    want = np.take_along_axis(window, np.where(indices < 0, indices + size, indices), axis) - 0.5
    np.testing.assert_array_equal(f(data, indices), want)
    assert "GatherElements" in fused_ops(f, data, indices) and dsl.compare(f, data, indices).ok
    with pytest.raises(dsl.InputError, match=r"GatherElements .*out of range"):
        f(data, np.full(shape, size, index_type))


# ---- GatherND ------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_dims, data_shape, index_shape", [
    (0, (4, 5, 6), (3, 1)), (0, (4, 5, 6), (2, 3, 2)), (0, (4, 5, 6), (2, 3)), (1, (3, 5, 6), (3, 2, 1)),
    (1, (3, 5, 6), (3, 2)), (2, (2, 3, 5, 4), (2, 3, 4, 1))])
def test_gather_nd_fuses_with_batch_dims(batch_dims, data_shape, index_shape):
    data = table(data_shape)
    sizes = data_shape[batch_dims:batch_dims + index_shape[-1]]
    indices = np.stack([RNG.integers(-s, s, index_shape[:-1]) for s in sizes], -1).astype(np.int64)

    @dsl.jit
    def f(x, i):
        return dsl.gather_nd(x, i, batch_dims=batch_dims) * 2.0
    want = dsl.gather_nd(dsl.Tensor.from_numpy(data), dsl.Tensor.from_numpy(indices), batch_dims=batch_dims).numpy() * 2
    np.testing.assert_array_equal(f(data, indices), want)
    assert "GatherND" in fused_ops(f, data, indices) and numpy_steps(f, data, indices) == []
    bad = indices.copy()
    bad.reshape(-1, index_shape[-1])[-1, -1] = sizes[-1]
    with pytest.raises(dsl.InputError, match=r"GatherND .*out of range"):
        f(data, bad)


def test_gather_nd_against_plain_numpy_indexing():
    data = table((4, 5, 6))
    indices = np.array([[[0, 1], [3, -1]], [[-4, 0], [2, 2]]], np.int64)

    @dsl.jit
    def f(x, i):
        return dsl.gather_nd(x, i) + 0.0
    n = np.where(indices < 0, indices + np.array([4, 5]), indices)
    np.testing.assert_array_equal(f(data, indices), data[n[..., 0], n[..., 1]])


# ---- bits kept ------------------------------------------------------------------------------------
NAN_BITS = {"float16": [0xFCC9, 0x7C01, 0x7E00, 0x8000, 0x3C00, 0x0001],
            "bfloat16": [0x7F81, 0xFFA3, 0x7FC0, 0x8000, 0x3F80, 0x0001]}


@pytest.mark.parametrize("name", list(NAN_BITS))
def test_moving_kernels_copy_bits_signaling_nans_and_payloads_kept(name):
    """A kernel that only moves float16 / bfloat16 elements (Gather, Concat, both at once) copies
    their bits, as the ops do (dsl/codegen/loops.py _moved): a decode to float32 and back would
    quiet a signaling NaN (float16) or drop a payload (bfloat16)."""
    dt = dsl.dtype(name)
    x = np.array(NAN_BITS[name], np.uint16).view(dt.np_dtype).reshape(2, 3)
    y = x[::-1].copy()
    index = np.array([1, 0, 1], np.int64)

    @dsl.jit
    def f(a, b):
        return (dsl.gather(a, index, axis=0), dsl.concat([a, b], axis=1), dsl.concat([a, b], axis=0),
                dsl.gather(dsl.concat([a, b], axis=1), index, axis=1))
    got = f(x, y)
    both = np.concatenate([x, y], 1)
    want = (x[index], both, np.concatenate([x, y], 0), both[:, index])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16))
    assert numpy_steps(f, x, y) == []
    # arithmetic still computes in float32 (its NaN results come out quiet)
    h = dsl.jit(lambda a: dsl.gather(a, index, axis=0) * 1.0)
    quiet = 0x0200 if name == "float16" else 0x0040
    assert np.isnan(h(x)[1]).all() and (h(x)[1].view(np.uint16) & quiet).all()


def test_reshape_merging_the_gathered_axis_reads_only_the_data():
    """A Reshape of a gather's result that merges the gathered axis with others is no view of the
    data: the gather is computed apart first (it once read outside the data through a copy)."""
    x = np.arange(36, dtype=np.float32).reshape(3, 3, 4)
    z = np.zeros((3, 1), np.float32)
    f = dsl.jit(lambda a, b: dsl.reshape(a[[2, 0]], [3, 8]) + b)
    np.testing.assert_array_equal(f(x, z), x[[2, 0]].reshape(3, 8))
    assert len(kernels(f, x, z)) == 2


@pytest.mark.parametrize("order", ["C", "transposed", "strided"])
def test_a_gathers_data_path_that_copies_for_this_layout_reads_a_contiguous_copy(order):
    """The path stays a view for C-contiguous data (so the gather fuses) but not for every
    layout the data arrives in: such data is copied first, then gathered from."""
    base = np.arange(5 * 6 * 4, dtype=np.float32).reshape(5, 6, 4)
    x = {"C": base, "strided": base[:, ::-1, :],  # (axes 1 and 2 not mergeable in either of these)
         "transposed": np.swapaxes(np.ascontiguousarray(np.swapaxes(base, 1, 2)), 1, 2)}[order]
    index = np.array([4, 0, 2], np.int64)
    f = dsl.jit(lambda a: dsl.reshape(dsl.gather(a, index, axis=0), [3, 24]) * 2.0)
    np.testing.assert_array_equal(f(x), x[index].reshape(3, 24) * 2)
