"""com.microsoft GatherBlockQuantized (dsl/ops/gather_block_quantized.py) against a per-element
reading of the contrib spec, on both engines, and against onnxruntime where it has the kernel."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import dsl

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from dsl.onnx_io import tensor_to_proto  # noqa: E402

RNG = np.random.default_rng(7)
FLOAT_CODES = {"float8e4m3fn": ml_dtypes.float8_e4m3fn, "float8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
               "float8e5m2": ml_dtypes.float8_e5m2, "float8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
               "float4e2m1": ml_dtypes.float4_e2m1fn}
OUT_TYPES = {"float": (np.float32, TensorProto.FLOAT), "float16": (np.float16, TensorProto.FLOAT16),
             "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16)}


def _pack_last(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes (ints < 2^bits) along the last axis -> uint8 bytes, low bits first (padded with 0)."""
    per = 8 // bits
    pad = -codes.shape[-1] % per
    codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), codes.dtype)], axis=-1)
    grouped = codes.reshape(codes.shape[:-1] + (-1, per)).astype(np.uint8)
    return np.bitwise_or.reduce([grouped[..., p] << (p * bits) for p in range(per)], axis=0).astype(np.uint8)


def _spec(codes, indices, scales, zero, g, q, block, out_dtype):
    """The spec element by element: codes, scales and zero points as logical arrays (zero None:
    float codes), block 0 meaning the whole quantize axis."""
    block = block or codes.shape[q]
    s = codes.shape[g]
    out_shape = codes.shape[:g] + indices.shape + codes.shape[g + 1:]
    out = np.zeros(out_shape, np.float32)
    for o in itertools.product(*map(range, out_shape)):
        pos = o[g:g + indices.ndim]
        i = int(indices[pos]) if indices.ndim else int(indices)
        if not -s <= i < s:
            continue
        d = o[:g] + (i % s,) + o[g + indices.ndim:]
        si = tuple(d[a] // block if a == q else 0 if scales.shape[a] == 1 else d[a] for a in range(codes.ndim))
        value = np.float32(codes[d]) - (np.float32(zero[si]) if zero is not None else np.float32(0))
        out[o] = np.float32(value) * np.float32(scales[si])
    return out.astype(out_dtype)


def _model(data, indices, scales, zero, attrs, out_type):
    inits = [tensor_to_proto("data", data), tensor_to_proto("scales", scales)]
    names = ["data", "indices", "scales"]
    if zero is not None:
        inits.append(tensor_to_proto("zero_points", zero))
        names.append("zero_points")
    inputs = [helper.make_tensor_value_info("indices", TensorProto.INT64 if indices.dtype == np.int64
                                            else TensorProto.INT32, indices.shape)]
    node = helper.make_node("GatherBlockQuantized", names, ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "gbq", inputs, [helper.make_tensor_value_info("y", out_type, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def _int_case(kind, bits, shape, g, q, block, with_zero, out_name, index_dtype=np.int64):
    """(model pieces, the spec's output) for integer codes."""
    logical = list(shape)
    nb = -(-logical[q] // block)
    scale_shape = logical[:q] + [nb] + logical[q + 1:]
    scales = (RNG.random(scale_shape, dtype=np.float32) / 8 + 0.01).astype(OUT_TYPES[out_name][0])
    lo, hi = {"int4": (-8, 8), "uint4": (0, 16), "uint8": (0, 1 << bits)}[kind]
    codes = RNG.integers(lo, hi, logical)
    zero = RNG.integers(lo, hi, scale_shape) if with_zero else None
    if kind == "uint8":
        data = _pack_last(codes, bits)
        zp = None if zero is None else _pack_last(zero, bits)
        spec_zero = zero if with_zero else np.full(scale_shape, 1 << (bits - 1))
    else:
        dt = ml_dtypes.int4 if kind == "int4" else ml_dtypes.uint4
        data, zp, spec_zero = codes.astype(dt), None if zero is None else zero.astype(dt), zero
    s = logical[g]
    indices = np.array([[0, s - 1, -1], [-s, s, 2], [-s - 1, 1, 0]], index_dtype)
    want = _spec(codes, indices, scales.astype(np.float32), spec_zero, g, q, block, OUT_TYPES[out_name][0])
    attrs = {"bits": bits, "block_size": block, "gather_axis": g, "quantize_axis": q}
    return data, indices, scales, zp, attrs, want


INT_CASES = [("int4", 4, (6, 64), 0, 1, 16, False), ("int4", 4, (6, 64), 0, 1, 32, True),
             ("uint4", 4, (6, 48), 0, 1, 32, True), ("uint4", 4, (6, 48), 0, 1, 16, False),
             ("int4", 4, (5, 3, 32), 1, 2, 16, True), ("int4", 4, (32, 5), 0, 0, 16, True),
             ("int4", 4, (4, 32, 3), 2, 1, 16, False), ("int4", 4, (20, 5), 1, 0, 16, True),
             ("uint8", 4, (6, 32), 0, 1, 16, True), ("uint8", 4, (6, 32), 0, 1, 16, False),
             ("uint8", 8, (6, 40), 0, 1, 16, True), ("uint8", 8, (6, 40), 0, 1, 32, False),
             ("uint8", 2, (6, 64), 0, 1, 16, True), ("uint8", 2, (4, 3, 32), 0, 2, 32, False),
             ("uint8", 4, (6, 96), 0, 1, 32, True)]  # (3 blocks: zero points end inside a byte)


@pytest.mark.parametrize("engine", ["jit", "numpy"])
@pytest.mark.parametrize("out_name", ["float", "float16", "bfloat16"])
@pytest.mark.parametrize("kind, bits, shape, g, q, block, with_zero", INT_CASES)
def test_integer_codes_match_the_spec(kind, bits, shape, g, q, block, with_zero, out_name, engine):
    data, indices, scales, zp, attrs, want = _int_case(kind, bits, shape, g, q, block, with_zero, out_name)
    program = dsl.from_onnx(_model(data, indices, scales, zp, attrs, OUT_TYPES[out_name][1]))
    got = program.run({"indices": indices}, engine=engine)[0]
    assert got.dtype == np.dtype(OUT_TYPES[out_name][0]) and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("engine", ["jit", "numpy"])
@pytest.mark.parametrize("code_type", sorted(FLOAT_CODES))
@pytest.mark.parametrize("shape, g, q, block, scale_shape", [
    ((6, 64), 0, 1, 16, (6, 4)), ((6, 64), 0, 1, 0, (6, 1)), ((6, 64), 0, 1, 32, (1, 2)),
    ((5, 3, 32), 1, 2, 16, (1, 3, 2)), ((32, 5), 0, 0, 16, (2, 1)), ((4, 32, 3), 2, 1, 0, (4, 1, 3))])
def test_float_codes_match_the_spec(code_type, shape, g, q, block, scale_shape, engine):
    values = RNG.standard_normal(shape).astype(np.float32) * 2
    data = values.astype(FLOAT_CODES[code_type])
    scales = (RNG.random(scale_shape, dtype=np.float32) + 0.5).astype(np.float32)
    s = shape[g]
    indices = np.array([3 % s, -1, s, -s - 1, 0], np.int32)
    want = _spec(data.astype(np.float32), indices, scales, None, g, q, block, np.float32)
    attrs = {"block_size": block, "gather_axis": g, "quantize_axis": q}
    program = dsl.from_onnx(_model(data, indices, scales, None, attrs, TensorProto.FLOAT))
    np.testing.assert_array_equal(program.run({"indices": indices}, engine=engine)[0], want)


def _ort():
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return lambda model: ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("kind, bits, shape, g, q, block, with_zero", INT_CASES)
def test_integer_codes_match_onnxruntime(kind, bits, shape, g, q, block, with_zero):
    data, indices, scales, zp, attrs, want = _int_case(kind, bits, shape, g, q, block, with_zero, "float")
    model = _model(data, indices, scales, zp, attrs, TensorProto.FLOAT)
    ours = dsl.from_onnx(model).run({"indices": indices})[0]
    np.testing.assert_array_equal(ours, _ort()(model).run(None, {"indices": indices})[0])


@pytest.mark.parametrize("code_type", ["float8e4m3fn", "float8e5m2", "float4e2m1"])
def test_float_codes_match_onnxruntime(code_type):
    data = (RNG.standard_normal((8, 64)) * 2).astype(FLOAT_CODES[code_type])
    scales = (RNG.random((8, 2), dtype=np.float32) + 0.5).astype(np.float32)
    indices = np.array([[7, -2], [9, 0]], np.int64)
    model = _model(data, indices, scales, None, {"block_size": 32, "gather_axis": 0, "quantize_axis": 1},
                   TensorProto.FLOAT)
    ours = dsl.from_onnx(model).run({"indices": indices})[0]
    np.testing.assert_array_equal(ours, _ort()(model).run(None, {"indices": indices})[0])


def test_an_embedding_lookup_from_a_large_table_and_the_jit_plan():
    vocab, dim = 32000, 1024
    codes = RNG.integers(-8, 8, (vocab, dim))
    scales = (RNG.random((vocab, dim // 32), dtype=np.float32) / 8).astype(np.float32)
    ids = RNG.integers(0, vocab, (4, 64))
    model = _model(codes.astype(ml_dtypes.int4), ids, scales, None, {"block_size": 32}, TensorProto.FLOAT)
    program = dsl.from_onnx(model)
    got = program.run({"indices": ids})[0]
    want = codes[ids].astype(np.float32) * np.repeat(scales, 32, axis=1)[ids]
    np.testing.assert_array_equal(got, want)
    assert "numpy GatherBlockQuantized" in program.explain({"indices": ids})


@pytest.mark.parametrize("change, error, message", [
    ({"block_size": 8}, dsl.InputError, r"block_size 8; expected a power of two >= 16"),
    ({"block_size": 0}, dsl.InputError, r"block_size 0; expected a power of two >= 16$"),
    ({"bits": 8}, dsl.InputError, r"bits 8 for int4 data; expected 4"),
    ({"gather_axis": 2}, dsl.ShapeError, r"gather_axis 2 out of range \[-2, 1\]"),
    ({"quantize_axis": -3}, dsl.ShapeError, r"quantize_axis -3 out of range"),
    ({"block_size": 32}, dsl.ShapeError, r"scales shape \[6, 4\] does not match data of \(logical\) shape \[6, 64\]"),
])
def test_bad_attributes_are_dsl_errors_naming_the_op(change, error, message):
    data, indices, scales, zp, attrs, _ = _int_case("int4", 4, (6, 64), 0, 1, 16, False, "float")
    with pytest.raises(error, match=r"GatherBlockQuantized.*" + message):
        dsl.from_onnx(_model(data, indices, scales, zp, {**attrs, **change}, TensorProto.FLOAT)).run(
            {"indices": indices})


def test_uint8_data_gathers_along_axis_0_and_quantizes_the_last():
    data, indices, scales, zp, attrs, _ = _int_case("uint8", 4, (4, 32, 3), 0, 1, 16, False, "float")
    with pytest.raises(dsl.ShapeError, match=r"uint8 data gathers along axis 0 and is quantized along its last axis"):
        dsl.from_onnx(_model(data, indices, scales, zp, attrs, TensorProto.FLOAT))


def test_zero_points_must_match_the_data_type_and_float_codes_take_none():
    data, indices, scales, zp, attrs, _ = _int_case("int4", 4, (6, 64), 0, 1, 16, True, "float")
    with pytest.raises(dsl.DTypeError, match=r"zero_points has type uint4; expected int4"):
        dsl.from_onnx(_model(data, indices, scales, zp.astype(ml_dtypes.uint4), attrs, TensorProto.FLOAT))
    floats = np.ones((6, 64), ml_dtypes.float8_e4m3fn)
    with pytest.raises(dsl.InputError, match=r"zero_points given for float8e4m3fn data"):
        dsl.from_onnx(_model(floats, indices, scales, floats[:, :4], attrs, TensorProto.FLOAT))


def test_an_empty_table_axis_gives_zeros():
    data = np.zeros((0, 32), ml_dtypes.int4)
    scales = np.ones((0, 2), np.float32)
    indices = np.array([0, -1], np.int64)
    program = dsl.from_onnx(_model(data, indices, scales, None, {"block_size": 16}, TensorProto.FLOAT))
    for engine in ("jit", "numpy"):
        np.testing.assert_array_equal(program.run({"indices": indices}, engine=engine)[0], np.zeros((2, 32), np.float32))



def test_dask_splits_the_indices_and_reads_the_table_whole():
    da = pytest.importorskip("dask.array")
    import dask
    import dsl.dask  # noqa: F401
    data, _, scales, zp, attrs, _ = _int_case("int4", 4, (6, 64), 0, 1, 16, True, "float")
    ids = RNG.integers(-7, 7, (4, 6))
    program = dsl.from_onnx(_model(data, ids, scales, zp, attrs, TensorProto.FLOAT))
    with dask.config.set(scheduler="synchronous"):
        lazy = dsl.dask.apply(program, da.from_array(ids, chunks=(2, 3)))
        assert lazy.chunks[:2] == ((2, 2), (3, 3))
        np.testing.assert_array_equal(lazy.compute(), program.run({"indices": ids})[0])


@pytest.mark.parametrize("engine", ["jit", "numpy"])
def test_float_codes_gathered_along_their_one_block_axis(engine):
    """block_size 0 spans the table's quantize axis, not the gathered one (that is the
    indices' count when the two axes are one)."""
    data = (RNG.standard_normal((64, 4)) * 2).astype(ml_dtypes.float8_e4m3fn)
    scales = np.full((1, 4), 0.5, np.float32)
    indices = np.array([63, 0, -1], np.int64)
    want = _spec(data.astype(np.float32), indices, scales, None, 0, 0, 0, np.float32)
    program = dsl.from_onnx(_model(data, indices, scales, None, {"block_size": 0, "gather_axis": 0,
                                                                 "quantize_axis": 0}, TensorProto.FLOAT))
    np.testing.assert_array_equal(program.run({"indices": indices}, engine=engine)[0], want)


@pytest.mark.parametrize("engine", ["jit", "numpy"])
@pytest.mark.parametrize("shape, scale_shape, g, q, ids", [((6, 64), (6, 4), 0, 1, np.zeros((0, 3), np.int64)),
                                                           ((6, 64), (6, 4), 0, 1, np.zeros(0, np.int64)),
                                                           ((3, 0, 32), (3, 0, 2), 0, 2, np.array([0, 1]))])
def test_empty_outputs(shape, scale_shape, g, q, ids, engine):
    data = np.zeros(shape, ml_dtypes.int4)
    program = dsl.from_onnx(_model(data, ids, np.ones(scale_shape, np.float32), None,
                                   {"block_size": 16, "gather_axis": g, "quantize_axis": q}, TensorProto.FLOAT))
    got = program.run({"indices": ids}, engine=engine)[0]
    assert got.shape == shape[:g] + ids.shape + shape[g + 1:] and got.dtype == np.float32
