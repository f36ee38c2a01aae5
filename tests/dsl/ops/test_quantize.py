"""Tests for dsl/ops/quantize.py: (De)QuantizeLinear granularities, types, rounding and errors vs onnx's reference."""
from __future__ import annotations

import math
import re
import warnings

import ml_dtypes
import numpy as np
import onnx.defs
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import dsl
from dsl import dtypes
from dsl.eager import call as eager_call

from dsl_test_helpers import as_tensor, pack_codes

LATEST = dsl.LATEST_OPSET
VERSIONS = [10, 13, 19, 21, 23, 24, 25, 28]
INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
              "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1)}
FLOAT8 = ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"]
QUANTIZED = [*INT_RANGES, *FLOAT8, "float4e2m1"]


def np_type(name: str):
    return dtypes.dtype(name).np_dtype


def onnx_run(op: str, x, scale, zero_point=None, opset: int = LATEST, **attrs) -> np.ndarray:
    """onnx's ReferenceEvaluator running a one-node model."""
    feeds = {"x": x, "scale": scale}
    if zero_point is not None:
        feeds["zero_point"] = zero_point
    node = helper.make_node(op, list(feeds), ["y"], **attrs)
    inputs = [helper.make_tensor_value_info(name, dtypes.of_array(v).onnx_code, v.shape) for name, v in feeds.items()]
    graph = helper.make_graph([node], "q", inputs, [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(model).run(None, feeds)[0]


def every_value(name: str, shape=None) -> np.ndarray:
    """Every code of the quantized type (a range for the 16-bit ones), NaNs removed."""
    dt = dtypes.dtype(name)
    if name in INT_RANGES:
        low, high = INT_RANGES[name]
        values = np.arange(low, high + 1, 1 if dt.bits <= 8 else 97).astype(dt.np_dtype)
    else:
        values = np.arange(1 << dt.bits, dtype=np.uint8).view(dt.np_dtype)
        values = values[~np.isnan(values.astype(np.float32))]
    return values if shape is None else np.resize(values, shape)


def assert_float_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


# ---- DequantizeLinear ----------------------------------------------------------------------
@pytest.mark.parametrize("name", [*QUANTIZED, "int32"])
def test_dequantize_per_tensor_every_type(name):
    x = every_value(name) if name != "int32" else np.array([0, 1, -7, 2 ** 20 + 3, -(2 ** 31)], np.int32)
    zero = {"float4e2m1": 0.0, **{f: 0.0 for f in FLOAT8}}.get(name)
    zp = np.array(zero if zero is not None else (3 if name != "uint2" else 1), x.dtype)
    scale = np.float32(0.375)
    want = onnx_run("DequantizeLinear", x, scale, zp)
    assert_float_equal(dsl.dequantize_linear(x, scale, zp), want)
    got = dsl.dequantize_linear(as_tensor(x), scale, as_tensor(zp))
    assert isinstance(got, dsl.Tensor)
    assert_float_equal(got.numpy(), want)
    assert_float_equal(dsl.dequantize_linear(x, scale), onnx_run("DequantizeLinear", x, scale))


@pytest.mark.parametrize("name", [*FLOAT8, "float4e2m1"])
def test_dequantize_float_zero_point_is_subtracted(name):
    """The spec keeps the formula for float types (onnx's reference rejects a nonzero one)."""
    x = np.array([1.0, 2.0, -0.5, 4.0], np.float32).astype(np_type(name))
    zp = np.array(0.5, np.float32).astype(np_type(name))
    assert dsl.dequantize_linear(x, np.float32(2.0), zp).tolist() == [1.0, 3.0, -2.0, 7.0]


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("name", ["int8", "uint4", "int2", "float8e4m3fn"])
def test_dequantize_per_axis_every_axis(axis, name):
    x = every_value(name, (3, 4, 5))
    length = x.shape[axis]
    scale = (np.arange(1, length + 1, dtype=np.float32) * 0.25).astype(np.float32)
    zp = np.resize(every_value(name)[:2], length).astype(x.dtype) if name != "float8e4m3fn" \
        else np.zeros(length, x.dtype)
    want = onnx_run("DequantizeLinear", x, scale, zp, axis=axis)
    assert_float_equal(dsl.dequantize_linear(x, scale, zp, axis=axis), want)
    assert_float_equal(dsl.dequantize_linear(as_tensor(x), scale, as_tensor(zp), axis=axis).numpy(), want)


def accepted_blocks(dim: int, blocks: int) -> list:
    """The spec's accepted block sizes for a dim of ``dim`` and a scale dim of ``blocks``:
    [ceil(Di/Si), ceil(Di/(Si-1)) - 1] (no upper bound for Si == 1)."""
    low = -(-dim // blocks)
    high = dim + 3 if blocks == 1 else -(-dim // (blocks - 1)) - 1
    return list(range(low, high + 1))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_blocked_accepts_exactly_the_spec_range(axis):
    shape = (4, 7, 6)
    x = every_value("int8", shape)
    dim = shape[axis]
    for blocks in range(1, dim + 1):
        scale_shape = list(shape)
        scale_shape[axis] = blocks
        scale = (np.arange(np.prod(scale_shape), dtype=np.float32).reshape(scale_shape) % 7 + 1) / 8
        zp = (np.arange(np.prod(scale_shape)).reshape(scale_shape) % 5 - 2).astype(np.int8)
        accepted = accepted_blocks(dim, blocks)
        for block in accepted:
            want = onnx_run("DequantizeLinear", x, scale, zp, axis=axis, block_size=block)
            got = dsl.dequantize_linear(x, scale, zp, axis=axis, block_size=block)
            assert_float_equal(got, want)
            q = dsl.quantize_linear(got, scale, zp, axis=axis, block_size=block)
            assert q.tolist() == x.tolist()
        rejected = {accepted[0] - 1, accepted[-1] + 1} if accepted else {1, 2, dim}
        for block in sorted(b for b in rejected if b > 0 and not (blocks == 1 and b >= dim)):
            match = rf"^DequantizeLinear: blocked x_scale shape {re.escape(str(scale_shape))} does not match .* " \
                    rf"block_size {block};"
            with pytest.raises(dsl.ShapeError, match=match):
                dsl.dequantize_linear(x, scale, zp, axis=axis, block_size=block)


def test_blocked_remainder_block_by_hand():
    x = np.arange(7, dtype=np.int8).reshape(1, 7)
    scale = np.array([[1.0, 10.0, 100.0]], np.float32)
    got = dsl.dequantize_linear(x, scale, axis=1, block_size=3)
    assert got.tolist() == [[0, 1, 2, 30, 40, 50, 600]]


@pytest.mark.parametrize("out", ["float16", "bfloat16", "float"])
@pytest.mark.parametrize("scale_type", ["float", "float16", "bfloat16"])
def test_dequantize_output_dtype(out, scale_type):
    x = every_value("int16")
    zp = np.array(-1000, np.int16)
    scale = np.array(0.1, np.float32).astype(np_type(scale_type))
    want = onnx_run("DequantizeLinear", x, scale, zp, output_dtype=dtypes.dtype(out).onnx_code)
    got = dsl.dequantize_linear(x, scale, zp, output_dtype=out)
    assert got.dtype == np_type(out)
    assert_float_equal(got, want)
    default = dsl.dequantize_linear(x, scale, zp)
    assert default.dtype == np_type(scale_type)


def test_dequantize_int32_subtracts_exactly():
    x = np.array([2 ** 24 + 1, 2 ** 31 - 1, -(2 ** 31)], np.int32)
    zp = np.array(1, np.int32)
    assert dsl.dequantize_linear(x, np.float32(1.0), zp).tolist() == [2.0 ** 24, 2.0 ** 31, -(2.0 ** 31)]
    assert dsl.dequantize_linear(x, np.float32(0.5)).tolist() == [2.0 ** 23, 2.0 ** 30, -(2.0 ** 30)]


def test_dequantize_e8m0_scale_from_opset_24():
    x = np.array([[1, -2, 3], [4, 5, -6]], np.int8)
    scale = np.array([2.0 ** -3, 2.0 ** 10], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    got = dsl.dequantize_linear(x, scale, axis=0, output_dtype="float")
    assert got.tolist() == [[0.125, -0.25, 0.375], [4096.0, 5120.0, -6144.0]]
    assert_float_equal(got, onnx_run("DequantizeLinear", x, scale, axis=0, output_dtype=1))
    assert dsl.dequantize_linear(x, scale, axis=0, output_dtype="bfloat16").dtype == ml_dtypes.bfloat16
    with pytest.raises(dsl.DTypeError, match=r"^DequantizeLinear: input 'x_scale' has type float8e8m0\[2\], "
                                             r"not allowed at version 23"):
        dsl.dequantize_linear(x, scale, axis=0, output_dtype="float", opset=23)
    with pytest.raises(dsl.DTypeError, match=r"^DequantizeLinear: output type float8e8m0 \(the x_scale type; "
                                             r"set output_dtype\) is not one of"):
        dsl.dequantize_linear(x, scale, axis=0)


# ---- QuantizeLinear ------------------------------------------------------------------------
TIES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 3.51, 126.5, 127.5, -128.5, 254.5, 255.5, 300.0, -300.0, 7.5, -8.5, 1e9]


@pytest.mark.parametrize("name", list(INT_RANGES))
def test_quantize_integers_round_half_even_then_clip(name):
    low, high = INT_RANGES[name]
    x = np.array(TIES, np.float32)
    for zero in sorted({low, 0 if low < 0 else 1, high}):
        zp = np.array(zero, np_type(name))
        want = [min(max(int(np.rint(v)) + zero, low), high) for v in TIES]
        got = dsl.quantize_linear(x, np.float32(1.0), zp)
        assert got.dtype == np_type(name) and [int(v) for v in got] == want
        assert [int(v) for v in onnx_run("QuantizeLinear", x, np.float32(1.0), zp)] == want
        tensor = dsl.quantize_linear(as_tensor(x), np.float32(1.0), as_tensor(zp))
        assert isinstance(tensor, dsl.Tensor) and tensor.dtype == dtypes.dtype(name)
        if tensor.dtype.packed:
            want_codes = pack_codes(np.array(want).astype(np_type(name)), tensor.dtype.bits)
            assert tensor.packed().tobytes() == want_codes.tobytes()
        assert [int(v) for v in tensor.numpy()] == want


def test_quantize_rounds_before_adding_the_zero_point():
    x = np.array([0.5, 1.5, 2.5], np.float32)
    assert dsl.quantize_linear(x, np.float32(1.0), np.uint8(1)).tolist() == [1, 3, 3]


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int4", "uint2"])
def test_quantize_nan_and_inf(name):
    """NaN -> the low end of the range (onnxruntime and onnx's reference agree); Inf clips."""
    low, high = INT_RANGES[name]
    x = np.array([np.nan, -np.nan, np.inf, -np.inf], np.float32)
    zp = np.array(1 if low == 0 else -1, np_type(name))
    assert [int(v) for v in dsl.quantize_linear(x, np.float32(1.0), zp)] == [low, low, high, low]


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("name", ["uint8", "int4", "uint2", "int16"])
def test_quantize_per_axis_every_axis(axis, name):
    rng = np.random.default_rng(abs(axis))
    x = (rng.standard_normal((3, 4, 5)) * 20).astype(np.float32)
    length = x.shape[axis]
    scale = np.linspace(0.5, 3.0, length).astype(np.float32)
    low, high = INT_RANGES[name]
    zp = np.resize(np.array([low, (low + high) // 2, high]), length).astype(np_type(name))
    want = onnx_run("QuantizeLinear", x, scale, zp, axis=axis)
    got = dsl.quantize_linear(x, scale, zp, axis=axis)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert dsl.quantize_linear(as_tensor(x), scale, as_tensor(zp), axis=axis).numpy().tolist() == want.tolist()


@pytest.mark.parametrize("axis, block", [(0, 2), (0, 3), (1, 4), (1, 3), (1, 7), (-1, 5), (-1, 4)])
def test_quantize_blocked(axis, block):
    rng = np.random.default_rng(block)
    x = (rng.standard_normal((4, 7, 6)) * 50).astype(np.float32)
    scale_shape = list(x.shape)
    scale_shape[axis] = -(-x.shape[axis] // block)
    scale = rng.uniform(0.5, 2.0, scale_shape).astype(np.float32)
    zp = rng.integers(-8, 8, scale_shape).astype(ml_dtypes.int4)
    want = onnx_run("QuantizeLinear", x, scale, zp, axis=axis, block_size=block)
    got = dsl.quantize_linear(x, scale, zp, axis=axis, block_size=block)
    assert got.dtype == ml_dtypes.int4 and got.tolist() == want.tolist()


# fmt: (max finite code, +overflow code and -overflow code with saturate=0)
FLOAT8_CODES = {"float8e4m3fn": (0x7E, 0x7F, 0xFF), "float8e4m3fnuz": (0x7F, 0x80, 0x80),
                "float8e5m2": (0x7B, 0x7C, 0xFC), "float8e5m2fnuz": (0x7F, 0x80, 0x80)}


@pytest.mark.parametrize("name", FLOAT8)
def test_quantize_float8_saturate(name):
    x = np.array([1e6, -1e6, np.inf, -np.inf, 3.0, np.nan], np.float32)
    zp = np.zeros((), np_type(name))
    top, pos, neg = FLOAT8_CODES[name]
    sat = dsl.quantize_linear(x, np.float32(2.0), zp)
    assert sat.dtype == np_type(name)
    assert sat.view(np.uint8)[:4].tolist() == [top, top | 0x80, top, top | 0x80]
    assert sat.astype(np.float32)[4] == 1.5 and np.isnan(sat.astype(np.float32)[5])
    off = dsl.quantize_linear(x, np.float32(2.0), zp, saturate=False)
    assert off.view(np.uint8)[:4].tolist() == [pos, neg, pos, neg]
    for saturate in (True, False):
        want = onnx_run("QuantizeLinear", x, np.float32(2.0), zp, saturate=int(saturate))
        assert dsl.quantize_linear(x, np.float32(2.0), zp, saturate=saturate).view(np.uint8)[:5].tolist() == \
            want.view(np.uint8)[:5].tolist()


@pytest.mark.parametrize("name", [*FLOAT8, "float4e2m1"])
def test_quantize_float_zero_point_is_added(name):
    x = np.array([1.0, -3.0], np.float32)
    zp = np.array(0.5, np.float32).astype(np_type(name))
    assert dsl.quantize_linear(x, np.float32(2.0), zp).astype(np.float32).tolist() == [1.0, -1.0]


def test_quantize_float4_always_saturates_and_rounds_to_even():
    x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 100.0, -np.inf], np.float32)
    for saturate in (True, False):
        got = dsl.quantize_linear(x, np.float32(1.0), output_dtype="float4e2m1", saturate=saturate)
        assert got.astype(np.float32).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -6.0]
    packed = dsl.quantize_linear(as_tensor(x), np.float32(1.0), output_dtype="float4e2m1")
    assert packed.packed().tobytes() == pack_codes(got, 4).tobytes()


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantize_output_dtype_without_zero_point(name):
    x = np.array([1.0, -2.0, 3.0], np.float32)
    got = dsl.quantize_linear(x, np.float32(1.0), output_dtype=name)
    assert got.dtype == np_type(name)
    want = onnx_run("QuantizeLinear", x, np.float32(1.0), output_dtype=dtypes.dtype(name).onnx_code)
    assert got.view(np.uint8).tolist() == want.view(np.uint8).tolist()
    assert dsl.quantize_linear(x, np.float32(1.0)).dtype == np.uint8  # the default


def quantize_with(x, scale, zp, precision=None, opset=LATEST):
    return eager_call("QuantizeLinear", x, opset, y_scale=scale, y_zero_point=zp, precision=precision)


def test_quantize_division_precision():
    """Both operands are rounded to the precision type (onnxruntime's behaviour): 1000.2 -> 1000 as
    float16, 1000 / 3 -> 333.25 -> 333, where a float32 quotient rounded to float16 would give 334."""
    x = np.array([1000.2, 1000.3, 70000.0, -70000.0], np.float32)
    zp = np.array(0, np.int16)
    f16, bf16, f32 = (dtypes.dtype(n).onnx_code for n in ("float16", "bfloat16", "float"))
    assert quantize_with(x, np.float32(3.0), zp).tolist() == [333, 333, 23333, -23333]
    assert quantize_with(x, np.float32(3.0), zp, precision=f16).tolist() == [333, 334, 32767, -32768]
    assert quantize_with(x, np.float16(3.0), zp).tolist() == [333, 334, 32767, -32768]
    assert quantize_with(x, np.float16(3.0), zp, precision=f32).tolist() == [333, 333, 23333, -23333]
    assert quantize_with(x, np.float32(3.0), zp, precision=bf16).tolist() == [334, 334, 23424, -23424]
    for code in (f16, bf16):
        want = onnx_run("QuantizeLinear", x[:2], np.float32(3.0), zp, precision=code)
        assert quantize_with(x[:2], np.float32(3.0), zp, precision=code).tolist() == want.tolist()
    with pytest.raises(dsl.DTypeError, match=r"^QuantizeLinear: precision int8 must be float, float16 or bfloat16"):
        quantize_with(x, np.float32(3.0), zp, precision=3)
    with pytest.raises(dsl.InputError, match=r"^QuantizeLinear: argument precision=10 does not exist at opset "
                                             r"version 21"):
        quantize_with(x, np.float32(3.0), zp, precision=f16, opset=22)


def test_quantize_precision_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = np.array([1000.2, 1000.3, 70000.0, 2.5, -7.77], np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", 1, x.shape),
                                            helper.make_tensor_value_info("s", 10, ()),
                                            helper.make_tensor_value_info("zp", 5, ())],
                              [helper.make_tensor_value_info("y", 5, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    feeds = {"x": x, "s": np.array(3.0, np.float16), "zp": np.array(0, np.int16)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert dsl.quantize_linear(x, feeds["s"], feeds["zp"], opset=23).tolist() == want.tolist()


def test_quantize_int32_input_and_scale():
    x = np.array([7, -7, 2 ** 24 + 1, 5], np.int32)
    assert dsl.quantize_linear(x, np.float32(2.0), np.int16(0)).tolist() == [4, -4, 32767, 2]
    x = np.array([7, -9, 5, 3], np.int32)
    assert dsl.quantize_linear(x, np.int32(2), np.int8(0)).tolist() == [4, -4, 2, 2]
    assert dsl.quantize_linear(x, np.int32(2), np.int8(0)).tolist() == \
        onnx_run("QuantizeLinear", x, np.int32(2), np.int8(0)).tolist()


def test_quantize_e8m0_scale():
    x = np.array([[3.0, -6.0], [1000.0, 24.0]], np.float32)
    scale = np.array([0.5, 8.0], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    zp = np.zeros(2, np.int8)
    assert dsl.quantize_linear(x, scale, zp, axis=0).tolist() == [[6, -12], [125, 3]]
    with pytest.raises(dsl.DTypeError, match=r"^QuantizeLinear: input 'y_scale' has type float8e8m0\[2\], "
                                             r"not allowed at version 23"):
        dsl.quantize_linear(x, scale, zp, axis=0, opset=23)


@pytest.mark.parametrize("out", ["bfloat16", "float16"])
def test_quantize_narrow_float_inputs(out):
    x = np.array([1.5, 2.5, -3.5, 100.0], np.float32).astype(np_type(out))
    assert dsl.quantize_linear(x, np.array(1.0, x.dtype), np.int8(0)).tolist() == [2, 2, -4, 100]
    assert dsl.quantize_linear(x, np.array(1.0, x.dtype), np.int8(0), opset=19).tolist() == [2, 2, -4, 100]


# ---- versions: the type sets of each schema ------------------------------------------------
def onnx_types(op: str, opset: int, input_index: int) -> set:
    schema = onnx.defs.get_schema(op, opset)
    param = schema.inputs[input_index].type_str
    for constraint in schema.type_constraints:
        if constraint.type_param_str == param:
            return {t[len("tensor("):-1] for t in constraint.allowed_type_strs} - {"float6e2m3", "float6e3m2"}
    return {param[len("tensor("):-1]}


def sample_of(name: str, shape=(2,)) -> np.ndarray:
    return np.ones(shape, np.float32).astype(np_type(name))


@pytest.mark.parametrize("opset", VERSIONS + [12, 20, 22, 26])
def test_dequantize_type_sets_match_onnx(opset):
    x_types, scale_types = onnx_types("DequantizeLinear", opset, 0), onnx_types("DequantizeLinear", opset, 1)
    for dt in dtypes.ALL:
        if dt.kind in ("string", "complex"):
            continue
        name = dt.onnx_name
        if name in x_types:
            assert dsl.dequantize_linear(sample_of(name), np.float32(2.0), opset=opset).tolist() == [2.0, 2.0]
        else:
            match = rf"^DequantizeLinear: input 'x' has type {name}\[2\], not allowed"
            with pytest.raises(dsl.DTypeError, match=match):
                dsl.dequantize_linear(sample_of(name), np.float32(2.0), opset=opset)
        out = "float" if name == "float8e8m0" else None
        if name in scale_types:
            got = dsl.dequantize_linear(np.array([3], np.uint8), sample_of(name, ()), output_dtype=out, opset=opset)
            assert got.astype(np.float32).tolist() == [3.0]
        elif opset >= 23 or out is None:
            with pytest.raises(dsl.DTypeError, match=rf"^DequantizeLinear: input 'x_scale' has type {name}\[\], "):
                dsl.dequantize_linear(np.array([3], np.uint8), sample_of(name, ()), output_dtype=out, opset=opset)


@pytest.mark.parametrize("opset", VERSIONS + [12, 20, 22, 26])
def test_quantize_type_sets_match_onnx(opset):
    x_types, scale_types = onnx_types("QuantizeLinear", opset, 0), onnx_types("QuantizeLinear", opset, 1)
    out_types = onnx_types("QuantizeLinear", opset, 2)
    for dt in dtypes.ALL:
        if dt.kind in ("string", "complex"):
            continue
        name = dt.onnx_name
        zp = np.zeros((), np_type(name))
        if name in out_types:
            assert dsl.quantize_linear(np.ones(2, np.float32), np.float32(1.0), zp, opset=opset).dtype == dt.np_dtype
        else:
            with pytest.raises(dsl.DTypeError, match=rf"^QuantizeLinear: input 'y_zero_point' has type {name}\[\], "):
                dsl.quantize_linear(np.ones(2, np.float32), np.float32(1.0), zp, opset=opset)
        if name in x_types:
            scale = sample_of(name if 19 <= opset < 23 else "float", ())  # 19-22: the type of x
            assert dsl.quantize_linear(sample_of(name), scale, opset=opset).tolist() == [1, 1]
        else:
            with pytest.raises(dsl.DTypeError, match=rf"^QuantizeLinear: input 'x' has type {name}\[2\], "):
                dsl.quantize_linear(sample_of(name), np.float32(1.0), opset=opset)
        if name in scale_types and opset >= 23:
            assert dsl.quantize_linear(np.ones(2, np.float32), sample_of(name, ()), opset=opset).tolist() == [1, 1]
        elif name not in scale_types:
            with pytest.raises(dsl.DTypeError, match=rf"^QuantizeLinear: input 'y_scale' has type {name}\[\], "):
                dsl.quantize_linear(np.ones(2, np.float32), sample_of(name, ()), opset=opset)


# ---- errors --------------------------------------------------------------------------------
X = np.arange(12, dtype=np.int8).reshape(2, 6)
F = X.astype(np.float32)


@pytest.mark.parametrize("call, match", [
    (lambda: dsl.dequantize_linear(X, np.ones(6, np.float32), np.zeros(3, np.int8)),
     r"^DequantizeLinear: zero_point shape \[3\] must equal scale shape \[6\]"),
    (lambda: dsl.quantize_linear(F, np.ones(6, np.float32), np.zeros((), np.uint8)),
     r"^QuantizeLinear: zero_point shape \[\] must equal scale shape \[6\]"),
    (lambda: dsl.dequantize_linear(X, np.ones(6, np.float32), np.zeros(6, np.uint8)),
     r"^DequantizeLinear: zero_point has type uint8; expected int8"),
    (lambda: dsl.dequantize_linear(X.astype(ml_dtypes.int4), np.float32(1), np.zeros((), ml_dtypes.uint4)),
     r"^DequantizeLinear: zero_point has type uint4; expected int4"),
    (lambda: dsl.quantize_linear(F, np.float32(1), np.uint8(0), output_dtype="int8"),
     r"^QuantizeLinear: output_dtype int8 differs from the zero_point type uint8"),
    (lambda: dsl.dequantize_linear(X, np.ones(6, np.float32), axis=2),
     r"^DequantizeLinear: axis 2 out of range \[-2, 1\] for input rank 2"),
    (lambda: dsl.quantize_linear(F, np.ones(6, np.float32), axis=-3),
     r"^QuantizeLinear: axis -3 out of range \[-2, 1\] for input rank 2"),
    (lambda: dsl.dequantize_linear(X.reshape(-1), np.ones(12, np.float32)),
     r"^DequantizeLinear: axis 1 out of range \[-1, 0\] for input rank 1"),
    (lambda: dsl.dequantize_linear(X, np.ones((2, 3), np.float32), axis=1, block_size=3),
     r"^DequantizeLinear: blocked x_scale shape \[2, 3\] does not match input shape \[2, 6\] with axis 1 "
     r"and block_size 3; expected \[2, 2\]"),
    (lambda: dsl.quantize_linear(F, np.ones((2, 3, 1), np.float32), axis=1, block_size=2),
     r"^QuantizeLinear: blocked y_scale shape \[2, 3, 1\] does not match"),
    (lambda: dsl.dequantize_linear(X, np.ones((2, 3), np.float32), axis=1, block_size=-2),
     r"^DequantizeLinear: block_size -2 must be >= 0"),
    (lambda: dsl.dequantize_linear(X, np.ones((2, 3), np.float32), axis=1),
     r"^DequantizeLinear: per-axis x_scale shape \[2, 3\] must be \[6\]"),
    (lambda: dsl.dequantize_linear(X, np.ones(5, np.float32)),
     r"^DequantizeLinear: per-axis x_scale shape \[5\] must be \[6\]"),
    (lambda: dsl.dequantize_linear(X, np.ones((2, 3), np.float32), axis=1, block_size=2, opset=19),
     r"^DequantizeLinear: argument block_size=2 does not exist at opset version 19"),
    (lambda: dsl.dequantize_linear(X, np.ones((2, 6), np.float32), opset=19),
     r"^DequantizeLinear: x_scale must be a scalar or 1-D at version 19, got shape \[2, 6\]"),
    (lambda: dsl.dequantize_linear(X, np.ones(6, np.float32), opset=10),
     r"^DequantizeLinear: x_scale must be a scalar at version 10, got shape \[6\]"),
    (lambda: dsl.dequantize_linear(X, np.float32(1), output_dtype="int8"),
     r"^DequantizeLinear: output_dtype int8 is not one of \['bfloat16', 'float', 'float16'\]"),
    (lambda: dsl.dequantize_linear(X, np.float32(1), output_dtype="float16", opset=22),
     r"^DequantizeLinear: argument output_dtype=10 does not exist at opset version 21"),
    (lambda: dsl.quantize_linear(F, np.float32(1), output_dtype="float"),
     r"^QuantizeLinear: cannot quantize to float at version 28; expected one of \['float4e2m1'"),
    (lambda: dsl.quantize_linear(F, np.float32(1), output_dtype="int2", opset=24),
     r"^QuantizeLinear: cannot quantize to int2 at version 24"),
    (lambda: dsl.quantize_linear(F, np.float32(1), output_dtype="float4e2m1", opset=22),
     r"^QuantizeLinear: cannot quantize to float4e2m1 at version 21"),
    (lambda: dsl.quantize_linear(F, np.float16(1), opset=21),
     r"^QuantizeLinear: y_scale has type float16; expected float \(the type of x\) at version 21"),
    (lambda: dsl.quantize_linear(X, np.float32(1)),
     r"^QuantizeLinear: input 'x' has type int8\[2, ?6\], not allowed at version 28"),
    (lambda: dsl.quantize_linear(F, np.float32(1), saturate=False, opset=18),
     r"^QuantizeLinear: argument saturate=0 does not exist at opset version 13"),
    (lambda: eager_call("QuantizeLinear", F, y_scale=np.float32(1), output_dtype=999),
     r"^QuantizeLinear: output_dtype 999 is not an ONNX element type"),
    (lambda: eager_call("DequantizeLinear", X, x_scale=np.float32(1), output_dtype=0.5),
     r"^DequantizeLinear: attribute 'output_dtype' = 0.5; expected an int64"),
    (lambda: dsl.dequantize_linear(X, np.float32(1), opset=9),
     r"^DequantizeLinear: not defined at opset 9; first version is 10"),
])
def test_errors_name_the_op_and_the_value(call, match):
    with pytest.raises(dsl.DslError, match=match):
        call()


def test_inputs_are_not_mutated():
    x = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12) / 3
    scale = np.array([0.5, 1.0, 2.0], np.float32)
    zp = np.array([-1, 0, 1], ml_dtypes.int4)
    copies = [a.copy() for a in (x, scale, zp)]
    q = dsl.quantize_linear(x, scale, zp)
    y = dsl.dequantize_linear(q, scale, zp)
    for array, copy in zip((x, scale, zp), copies):
        assert array.tobytes() == copy.tobytes()
    assert not np.shares_memory(y, x) and math.isclose(float(np.abs(y - x).max()), 1.0, abs_tol=1.0)


@pytest.mark.parametrize("name", list(INT_RANGES))
@pytest.mark.parametrize("x_type, axis", [(np.float32, None), (ml_dtypes.bfloat16, 1), (np.float16, 0), (np.int32, None)])
def test_quantize_in_a_fused_kernel_equals_the_reference(name, x_type, axis):
    """The JIT's QuantizeLinear lowering (float32 division, integer outputs, per tensor / per
    axis) inside a fused kernel gives the reference's bits: ties, NaN, Inf, clipping, zero points."""
    low, high = INT_RANGES[name]
    rng = np.random.default_rng(len(name))
    values = np.concatenate([np.array(TIES + [np.nan, np.inf, -np.inf]), rng.standard_normal(39) * 40])
    x = np.nan_to_num(values, nan=7, posinf=1e6, neginf=-1e6) if x_type == np.int32 else values
    with np.errstate(over="ignore"):  # 1e9 -> float16 is inf: wanted
        x = x.reshape(5, 12).astype(x_type)
    scale = np.float32(0.75) if axis is None else np.linspace(0.5, 2.0, x.shape[axis]).astype(np.float32)
    zp = np.resize(np.array([low, 0 if low < 0 else 1, high]), np.shape(scale)).astype(np_type(name))
    f = dsl.jit(lambda x, s, z: dsl.quantize_linear(x, s, z, axis=1 if axis is None else axis))
    got = f(x, np.asarray(scale), zp)
    want = dsl.quantize_linear(x, np.asarray(scale), zp, axis=1 if axis is None else axis)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert f.executable(x, np.asarray(scale), zp).kernel_count == 1


@pytest.mark.parametrize("name", [*FLOAT8, "float4e2m1"])
@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("x_type, axis", [(np.float32, None), (ml_dtypes.bfloat16, 1), (np.float16, 0), (np.int32, None)])
def test_quantize_to_floats_in_a_fused_kernel_equals_the_reference(name, saturate, x_type, axis):
    """float8 / float4 outputs fuse too: float32 quotient + zero point, then Cast with saturate:
    overflow, Inf, NaN, rounding ties and zero points give the reference's bits."""
    rng = np.random.default_rng(len(name) + saturate)
    values = np.concatenate([np.array([1e6, -1e6, np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, 3.5, 0.3]),
                             rng.standard_normal(50) * 20])
    x = np.nan_to_num(values, nan=7, posinf=1e6, neginf=-1e6) if x_type == np.int32 else values
    with np.errstate(over="ignore"):
        x = x.reshape(5, 12).astype(x_type)
    scale = np.float32(0.75) if axis is None else np.linspace(0.5, 2.0, x.shape[axis]).astype(np.float32)
    zp = np.resize(np.array([0.0, 0.5, -1.0]), np.shape(scale)).astype(np_type(name))
    kw = dict(axis=1 if axis is None else axis, saturate=saturate)
    f = dsl.jit(lambda x, s, z: dsl.quantize_linear(x, s, z, **kw))
    got = f(x, np.asarray(scale), zp)
    want = dsl.quantize_linear(x, np.asarray(scale), zp, **kw)
    assert got.dtype == want.dtype and got.view(np.uint8).tolist() == want.view(np.uint8).tolist()
    assert f.executable(x, np.asarray(scale), zp).kernel_count == 1


# ---- blocked (de)quantization inside fused kernels --------------------------------------------
def _blocked_cases():
    """(axis, scale size, block size) of a [4, 7, 6] input: one, two and one-per-element scale
    blocks per axis, each with the smallest and the largest accepted block size."""
    shape = (4, 7, 6)
    for axis in (0, 1, 2):
        dim = shape[axis]
        for blocks in sorted({1, 2, 3, dim}):
            accepted = accepted_blocks(dim, blocks)
            for block in sorted({accepted[0], accepted[-1]} if accepted else ()):
                yield axis, blocks, block


@pytest.mark.parametrize("x_name, zp_name", [("int8", "int8"), ("int4", "int4"), ("uint4", None), ("float8e4m3fn", None)])
def test_blocked_dequantize_in_a_fused_kernel_equals_the_reference(x_name, zp_name):
    """Blocked scales along every axis of a [4, 7, 6] input (remainder blocks included), packed
    int4 inputs and zero points as packed Tensors: the fused kernel (the scale and zero point
    indexed as i // block) gives the reference's bits, in one kernel."""
    shape = (4, 7, 6)
    x = every_value(x_name, shape)
    for axis, blocks, block in _blocked_cases():
        scale_shape = list(shape)
        scale_shape[axis] = blocks
        scale = (np.arange(np.prod(scale_shape), dtype=np.float32).reshape(scale_shape) % 7 + 1) / 8
        zp = None if zp_name is None else every_value(zp_name, scale_shape)[::-1].copy()
        args = [as_tensor(x), scale] + ([] if zp is None else [as_tensor(zp)])
        f = dsl.jit(lambda *a: dsl.dequantize_linear(*a, axis=axis, block_size=block) * 0.5)
        got = f(*args)
        want = dsl.dequantize_linear(x, scale, zp, axis=axis, block_size=block) * np.float32(0.5)
        assert_float_equal(got, want)
        assert f.executable(*args).kernel_count == 1, (axis, blocks, block)


@pytest.mark.parametrize("name", ["int8", "uint4", "float8e5m2"])
def test_blocked_quantize_in_a_fused_kernel_equals_the_reference(name):
    shape = (4, 7, 6)
    x = (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 80) / 3
    for axis, blocks, block in _blocked_cases():
        scale_shape = list(shape)
        scale_shape[axis] = blocks
        scale = (np.arange(np.prod(scale_shape), dtype=np.float32).reshape(scale_shape) % 5 + 1) / 4
        zp = every_value(name, scale_shape)
        f = dsl.jit(lambda x, s, z: dsl.quantize_linear(x + 0.25, s, z, axis=axis, block_size=block))
        got = f(x, scale, zp)
        want = dsl.quantize_linear(x + np.float32(0.25), scale, zp, axis=axis, block_size=block)
        assert got.dtype == want.dtype and got.view(np.uint8).tolist() == want.view(np.uint8).tolist()
        assert f.executable(x, scale, zp).kernel_count == 1


def test_blocked_parameters_through_views_reductions_and_threads(monkeypatch):
    """A blocked scale seen through a transpose stays blocked; a reshape that merges the blocked
    axis copies it out (exact either way); a row reduction reads it; large inputs split rows
    over threads (each span starts mid-block)."""
    from dsl import runtime, thread_policy
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    rng = np.random.default_rng(5)
    w = rng.integers(-8, 8, (96, 130)).astype(ml_dtypes.int4)
    scale = rng.random((96, 3)).astype(np.float32) + 0.5  # blocks of 64 along axis 1: 64, 64, 2
    zp = rng.integers(-8, 8, (96, 3)).astype(ml_dtypes.int4)
    ref = dsl.dequantize_linear(w, scale, zp, axis=1, block_size=64)
    programs = {
        "transpose": (lambda w, s, z: dsl.transpose(dsl.dequantize_linear(w, s, z, axis=1, block_size=64)) + 1.0,
                      ref.T + np.float32(1)),
        "reshape": (lambda w, s, z: dsl.reshape(dsl.dequantize_linear(w, s, z, axis=1, block_size=64), [-1]) * 2.0,
                    ref.reshape(-1) * np.float32(2)),
        "row max": (lambda w, s, z: dsl.reduce_max(dsl.dequantize_linear(w, s, z, axis=1, block_size=64), [1]),
                    ref.max(axis=1, keepdims=True)),
    }
    for name, (fn, want) in programs.items():
        f = dsl.jit(fn)
        for args in ([w, scale, zp], [as_tensor(w), scale, as_tensor(zp)]):
            got = f(*args)
            assert got.shape == want.shape and np.array_equal(got, want), name


def test_blocked_with_a_scalar_zero_point_in_a_fused_kernel():
    """A one-element blocked scale may come with a 0-d zero point (both single values)."""
    x = np.arange(6, dtype=np.int8)
    scale, zp = np.array([0.5], np.float32), np.array(1, np.int8)
    f = dsl.jit(lambda x, s, z: dsl.dequantize_linear(x, s, z, axis=0, block_size=6))
    assert f(x, scale, zp).tolist() == dsl.dequantize_linear(x, scale, zp, axis=0, block_size=6).tolist()
    g = dsl.jit(lambda x, s, z: dsl.quantize_linear(x, s, z, axis=0, block_size=6))
    y = x.astype(np.float32)
    assert g(y, scale, zp).tolist() == dsl.quantize_linear(y, scale, zp, axis=0, block_size=6).tolist()
