"""dsl.dask end to end on dask's synchronous scheduler: every program equals the single-machine
JIT exactly and eager numpy (the reference engine) within float tolerance."""
from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest

import dsl
import dsl.dask
from dsl.dask import RechunkWarning

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def packed_bytes(values: np.ndarray, dtype) -> np.ndarray:
    """ONNX raw bytes of ``values`` shaped [..., row bytes]."""
    tensor = dsl.Tensor.from_numpy(values.astype(dsl.dtype(dtype).np_dtype))
    per_byte = dsl.dtype(dtype).per_byte
    return tensor.packed().reshape(values.shape[:-1] + (values.shape[-1] // per_byte,))


def check(fn, local_args, dask_args, exact=True, **tolerance):
    """f on dask arrays == f on numpy (JIT), and ~= the eager numpy engine."""
    expected = fn(*local_args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RechunkWarning)
        lazy = fn(*dask_args)
    lazy = lazy if isinstance(lazy, tuple) else (lazy,)
    assert all(isinstance(a, da.Array) for a in lazy)
    computed = dask.compute(*lazy)
    reference = fn.lower(*local_args).run(list(local_args), engine="numpy")
    for got, want, ref, arr in zip(computed, expected, reference, lazy):
        assert got.dtype == want.dtype and got.shape == want.shape == arr.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), **(tolerance or {"rtol": 1e-6}))


@dsl.jit
def mask_pipeline(mask, scores):
    m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
    return dsl.softmax(scores + (1.0 - m) * -1e4, axis=-1)


MASK = RNG.random((4, 64)) > 0.3
SCORES = RNG.standard_normal((4, 3, 16, 64)).astype(np.float32)


@pytest.mark.parametrize("mask_chunks, score_chunks", [
    ((4, 64), (4, 3, 16, 64)), ((1, 64), (1, 3, 16, 64)), ((2, -1), (1, 2, 5, -1)),
    ((3, 16), (2, 1, 8, 32)),  # the softmax axis split: rechunked to one chunk
])
def test_mask_pipeline_any_chunks(mask_chunks, score_chunks):
    check(mask_pipeline, (MASK, SCORES),
          (da.from_array(MASK, chunks=mask_chunks), da.from_array(SCORES, chunks=score_chunks)), atol=1e-7)


def test_mask_pipeline_is_one_blockwise_layer_and_unsqueeze_moves_no_data():
    out = mask_pipeline(da.from_array(MASK, chunks=(1, -1)), da.from_array(SCORES, chunks=(1, 3, 8, -1)))
    layers = [name for name in out.dask.layers if name.startswith("dsl-")]
    assert len(layers) == 1
    assert out.chunks == ((1, 1, 1, 1), (3,), (8, 8), (64,))
    # one task per output chunk, nothing else but the two input layers
    assert len(out.dask.layers) == 3


def test_softmax_axis_split_warns_naming_op_and_axis():
    with pytest.warns(RechunkWarning, match=r"Softmax \(node .*\) reads axis 3 of %scores whole: rechunking it "
                                            r"from 2 chunks to one of 64"):
        mask_pipeline(da.from_array(MASK, chunks=(1, -1)), da.from_array(SCORES, chunks=(1, 3, 16, 32)))


@dsl.jit
def dequant_row_stats(w, scale):
    x = dsl.dequantize_linear(w, scale, axis=0)
    return dsl.reduce_max(x, [1], keepdims=0), dsl.reduce_mean(x, [1], keepdims=0)


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2"])
@pytest.mark.parametrize("row_chunk, byte_chunk", [(16, -1), (5, -1), (64, 4)])
def test_packed_dequant_row_stats(dtype, row_chunk, byte_chunk):
    low, high = (-8, 8) if dtype == "int4" else (0, 16) if dtype == "uint4" else (-2, 2) if dtype == "int2" else (0, 4)
    values = RNG.integers(low, high, (64, 96))
    raw = packed_bytes(values, dtype)
    scale = (RNG.random(64) + 0.5).astype(np.float32)
    local = dsl.Tensor.from_packed(raw.reshape(-1), dtype, values.shape)
    packed = dsl.dask.from_packed(da.from_array(raw, chunks=(row_chunk, byte_chunk)), dtype)
    check(dequant_row_stats, (local, scale), (packed, da.from_array(scale, chunks=row_chunk)))


def test_packed_stats_share_one_blockwise_for_both_outputs():
    raw = packed_bytes(RNG.integers(-8, 8, (64, 96)), "int4")
    packed = dsl.dask.from_packed(da.from_array(raw, chunks=(16, -1)), "int4")
    peak, mean = dequant_row_stats(packed, da.from_array(np.ones(64, np.float32), chunks=16))
    assert [n for n in peak.dask.layers if n.startswith("dsl-") and not n.endswith(("out0", "out1"))] == \
           [n for n in mean.dask.layers if n.startswith("dsl-") and not n.endswith(("out0", "out1"))]


@dsl.jit
def views_and_broadcast(x, bias):
    y = dsl.transpose(dsl.squeeze(x, [0]), [1, 0])          # [1, N, M] -> [M, N]
    b = dsl.expand(dsl.unsqueeze(bias, [1]), [12, 10])      # [M] -> [M, N]
    return dsl.relu(y * b - 0.5)


@pytest.mark.parametrize("x_chunks", [(1, 10, 12), (1, 3, 5), (1, 7, -1)])
def test_views_and_expand(x_chunks):
    x = RNG.standard_normal((1, 10, 12)).astype(np.float32)
    bias = RNG.standard_normal(12).astype(np.float32)
    check(views_and_broadcast, (x, bias), (da.from_array(x, chunks=x_chunks), da.from_array(bias, chunks=4)))


@dsl.jit
def expand_new_axis(row):
    return dsl.expand(row, [6, 8]) * 2.0


def test_expand_makes_an_axis_no_input_carries():
    row = RNG.standard_normal((1, 8)).astype(np.float64)
    check(expand_new_axis, (row,), (da.from_array(row, chunks=(1, 4)),))


@dsl.jit
def split_heads(x):
    heads = dsl.reshape(x, [2, 6, 4, 8])  # [B, S, H*D] -> [B, S, H, D]: a boundary
    return dsl.transpose(heads, [0, 2, 1, 3]) + 1.0


@pytest.mark.parametrize("chunks, warns", [((1, 3, -1), False), ((1, 3, 16), False), ((1, 3, 12), True)])
def test_reshape_boundary(chunks, warns):
    x = RNG.standard_normal((2, 6, 32)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        split_heads(da.from_array(x, chunks=chunks))
    assert any("Reshape" in str(w.message) and "rechunking to" in str(w.message) for w in caught) == warns
    check(split_heads, (x,), (da.from_array(x, chunks=chunks),))


@dsl.jit
def reshape_adds_unit_dims(mask):
    return dsl.reshape(dsl.cast(mask, dsl.float16), [4, 1, 1, 64]) * 3.0


def test_reshape_that_only_inserts_unit_dims_stays_blockwise():
    lazy = reshape_adds_unit_dims(da.from_array(MASK, chunks=(1, 16)))
    assert lazy.chunks == ((1, 1, 1, 1), (1,), (1,), (16, 16, 16, 16))
    assert sum(n.startswith("dsl-") for n in lazy.dask.layers) == 1
    check(reshape_adds_unit_dims, (MASK,), (da.from_array(MASK, chunks=(1, 16)),))


@dsl.jit
def int4_matmul(x, w, scale):
    return dsl.matmul(x, dsl.dequantize_linear(w, scale, axis=1))


@pytest.mark.parametrize("x_chunks, k_bytes", [((2, 4, -1), -1), ((1, 2, 8), 4)])
def test_matmul_with_packed_weights(x_chunks, k_bytes):
    x = RNG.standard_normal((3, 4, 32)).astype(np.float32)
    values = RNG.integers(-8, 8, (32, 24))
    raw = packed_bytes(values, "int4")
    scale = (RNG.random(24) * 0.1).astype(np.float32)
    local = dsl.Tensor.from_packed(raw.reshape(-1), "int4", values.shape)
    w = dsl.dask.from_packed(da.from_array(raw, chunks=(8, k_bytes)), "int4")
    check(int4_matmul, (x, local, scale), (da.from_array(x, chunks=x_chunks), w, da.from_array(scale, chunks=8)),
          exact=False, rtol=1e-5, atol=1e-5)


@dsl.jit
def two_patterns(x):
    return x * 2, dsl.reduce_sum(x, [1], keepdims=0), dsl.reduce_max(x, [0], keepdims=1)


def test_outputs_with_different_index_patterns():
    x = RNG.integers(-100, 100, (9, 7)).astype(np.int32)
    check(two_patterns, (x,), (da.from_array(x, chunks=(4, 3)),))


@dsl.jit
def with_constant(x):
    return x + np.arange(6, dtype=np.float32) * 0.5


def test_traced_constant_broadcast_is_chunked_like_the_input():
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    check(with_constant, (x,), (da.from_array(x, chunks=(2, 4)),))


@dsl.jit
def cast_chain(x):
    return dsl.cast(dsl.cast(x, dsl.float8e4m3fn), dsl.bfloat16)


def test_exotic_types_chunkwise():
    x = (RNG.standard_normal((10, 33)) * 50).astype(np.float32)
    check(cast_chain, (x,), (da.from_array(x, chunks=(3, 11)),))


def test_numpy_arguments_mix_with_dask_ones_and_zero_size_inputs():
    x = RNG.standard_normal((0, 6)).astype(np.float32)
    out = dsl.dask.apply(with_constant, da.from_array(x, chunks=(1, 3)))
    assert out.compute().shape == (0, 6)
    scores = da.from_array(SCORES, chunks=(2, 3, 16, -1))
    np.testing.assert_array_equal(dsl.dask.apply(mask_pipeline, MASK, scores).compute(), mask_pipeline(MASK, SCORES))


def test_plain_function_is_jitted_by_apply():
    out = dsl.dask.apply(lambda a, b: dsl.where(a > b, a, b), da.ones((4, 4), chunks=2), np.zeros((4,)))
    np.testing.assert_array_equal(out.compute(), np.ones((4, 4)))


@pytest.mark.parametrize("make, message", [
    (lambda: dsl.dask.from_packed(da.zeros((4, 3), dtype=np.uint8), "float32"), r"float is not packed"),
    (lambda: dsl.dask.from_packed(da.zeros((4, 3), dtype=np.int8), "int4"), r"dtype int8; expected uint8"),
    (lambda: dsl.dask.from_packed(da.zeros((4, 3), dtype=np.uint8), "int4", (4, 5)), r"int4\[4, 5\] does not match"),
    (lambda: dsl.dask.from_packed(da.zeros((4, 3), dtype=np.uint8), "int4").rechunk(((4,), (3, 3))),
     r"packed chunks must hold multiples of 2"),
    (lambda: mask_pipeline(da.from_array(MASK), da.from_array(SCORES[:, :, :, :5])),
     r"Add .*broadcast|Add .*shape"),
])
def test_bad_inputs_raise_dsl_errors(make, message):
    with pytest.raises(dsl.DslError, match=message):
        make()


@dsl.jit
def symmetric(x):
    return x + dsl.transpose(x, [1, 0])


def test_a_dim_paired_with_itself_reads_whole():
    x = RNG.standard_normal((6, 6)).astype(np.float32)
    with pytest.warns(RechunkWarning, match="paired with itself"):
        lazy = symmetric(da.from_array(x, chunks=(2, 3)))
    np.testing.assert_array_equal(lazy.compute(), symmetric(x))


@dsl.jit
def cast_like(x, like):
    return x.builder.add("CastLike", [x, like])[0] * 2


def test_a_type_only_input_is_not_read_by_the_tasks():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    like = np.zeros((4, 6), np.float16)
    lazy = cast_like(da.from_array(x, chunks=2), da.from_array(like, chunks=2))
    assert len([name for name in lazy.dask.layers if not name.startswith("dsl-")]) == 1  # x only
    np.testing.assert_array_equal(lazy.compute(), cast_like(x, like))


@dsl.jit
def regroup(x):
    return dsl.reshape(x, [2, 3]) * 2.0  # [3, 2, 1] -> [2, 3]: dask cannot reshape this blockwise


def test_a_reshape_dask_cannot_do_blockwise_rechunks_to_one_chunk_with_a_warning():
    x = RNG.standard_normal((3, 2, 1)).astype(np.float32)
    with pytest.warns(RechunkWarning, match=r"Reshape \(node .*\): .*rechunking to \(\(3,\), \(2,\), \(1,\)\)"):
        lazy = regroup(da.from_array(x, chunks=1))
    np.testing.assert_array_equal(lazy.compute(), regroup(x))


def test_tasks_read_their_chunks_in_place_no_concatenation_copy():
    import tracemalloc
    rmax = dsl.jit(lambda x: dsl.reduce_max(x, [1], keepdims=0))
    x = RNG.standard_normal((2048, 1024)).astype(np.float32)  # chunks of 2 MiB
    lazy = rmax(da.from_array(x, chunks=(512, -1)))
    lazy.compute()  # plan and compile first
    tracemalloc.start()
    try:
        got = lazy.compute()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, x.max(axis=1))
    assert peak < 512 * 1024 * 4 / 2, f"peak {peak} bytes: a chunk was copied"


def test_an_onnx_program_runs_blockwise_like_program_run():
    program = dsl.from_onnx(mask_pipeline.lower(MASK, SCORES).to_onnx())
    lazy = dsl.dask.apply(program, da.from_array(MASK, chunks=(1, -1)), da.from_array(SCORES, chunks=(2, 3, 8, -1)))
    np.testing.assert_array_equal(lazy.compute(), program.run([MASK, SCORES])[0])
    with pytest.raises(dsl.DTypeError, match=r"input 'scores' is double\[4,3,16,64\]; expected float\[4,3,16,64\]"):
        dsl.dask.apply(program, da.from_array(MASK), da.from_array(SCORES.astype(np.float64)))
    with pytest.raises(dsl.ShapeError, match=r"input 'mask' has shape \[4, 32\]"):
        dsl.dask.apply(program, da.from_array(MASK[:, :32]), da.from_array(SCORES))


@dsl.jit
def stats(x):
    return (dsl.reduce_sum(x, [1], keepdims=0), dsl.reduce_mean(x, [0, 1], keepdims=1),
            dsl.reduce_max(x, [0], keepdims=0), dsl.reduce_sum(x + x, [0, 1], keepdims=0))


@pytest.mark.parametrize("np_type", [np.float32, np.float64, np.float16, "bfloat16", np.int32, np.int64, np.uint32])
def test_tree_reductions_read_no_axis_whole(np_type):
    dt = dsl.dtype(np_type)
    x = ((RNG.random((13, 17)) - 0.3) * 50).astype(dt.np_dtype)
    x[3, 4] = x[3, 4] if dt.kind != "float" else np.nan  # NaN propagates through sum, mean and max
    with warnings.catch_warnings():
        warnings.simplefilter("error", RechunkWarning)  # nothing is rechunked to one chunk
        lazy = dsl.dask.apply(stats, da.from_array(x, chunks=(4, 5)), reductions="tree")
    assert not any("rechunk" in name for name in lazy[0].dask.layers)
    for got, want, arr in zip(dask.compute(*lazy), stats(x), lazy):
        assert got.dtype == want.dtype and got.shape == want.shape == arr.shape
        if dt.kind == "float":  # chunk totals add in float64: the last bit may differ
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6 if dt.bits > 16 else 1e-2)
        else:
            np.testing.assert_array_equal(got, want)


def test_reductions_mode_is_checked():
    with pytest.raises(dsl.UnsupportedError, match=r"reductions='pairwise'; expected one of \['whole', 'tree'\]"):
        dsl.dask.apply(stats, da.ones((4, 4), chunks=2), reductions="pairwise")


@pytest.mark.parametrize("reductions", ["whole", "tree"])
def test_log_softmax_keeps_its_dims_and_reads_its_axis_whole(reductions):
    """LogSoftmax chunks as Softmax does under either reductions mode (its rule is its OpDef's,
    by lowering kind; it is no tree reduction)."""
    x = RNG.standard_normal((12, 10)).astype(np.float32)
    f = lambda v: dsl.log_softmax(v * 2.0, axis=-1) + dsl.reduce_sum(v, [1])
    lazy = dsl.dask.apply(f, da.from_array(x, chunks=(4, 10)), reductions=reductions)
    got = lazy.compute() if not isinstance(lazy, (list, tuple)) else lazy[0].compute()
    np.testing.assert_allclose(got, dsl.jit(f)(x), rtol=1e-6, atol=1e-6)


def test_slice_concat_and_gather_run_blockwise():
    """Their chunk rules (dsl/ops/chunks.py): untouched axes stay chunked, sliced / concatenated /
    gathered axes are read whole; the result equals the single-machine program."""
    x = RNG.standard_normal((12, 10)).astype(np.float32)
    table = RNG.standard_normal((10, 6)).astype(np.float32)
    ids = np.array([3, 0, 9, 9], np.int64)

    def f(v, t):
        half = v[:, 2:8:2]
        joined = dsl.concat([half, v[:, :1] * 2.0], 1)
        return joined, dsl.gather(t, ids) + dsl.reduce_sum(v, [1], keepdims=0)[:4, None]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RechunkWarning)
        lazy = dsl.dask.apply(f, da.from_array(x, chunks=(4, 10)), da.from_array(table, chunks=(10, 6)))
    for got, want in zip(dask.compute(*lazy), dsl.jit(f)(x, table)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@dsl.jit
def norms(x):
    return (dsl.reduce_l2(x * 2.0, [-1]), dsl.reduce_log_sum_exp(x, [1], keepdims=False), dsl.argmax(x, 0),
            dsl.reduce_prod(x, [-1]))


@pytest.mark.parametrize("chunks", [(8, 6, 32), (3, 6, 32), (3, 2, 32)])
def test_composite_reductions_and_argmax_run_blockwise(chunks):
    x = RNG.standard_normal((8, 6, 32)).astype(np.float32) * 0.5
    check(norms, (x,), (da.from_array(x, chunks=chunks),), exact=False, rtol=2e-6)
