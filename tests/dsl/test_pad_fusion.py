"""Pad and CenterCropPad in the JIT (dsl/ops/padding.py _pad_body, _center_crop_pad_body): what
is cut a Slice (a view), constant pads a Concat with broadcast fills on the innermost padded axis
and a Gather + Where on each outer one, reflect / edge / wrap a Gather per padded axis; at every
version, mode and element type bit for bit the numpy engine's, with no numpy Pad / CenterCropPad
step left but for the types the bodies cannot be built of (strings, complex) and dims unknown
before the run; NaN payloads of float16 and bfloat16 kept, in the data and in the fill; the
narrow types no op of the expansion opset lists (float8, int4, float4, e8m0, int2) fused, every
code kept."""
import numpy as np
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import dsl
from dsl.ops import registry
from dsl.passes.fuse import KernelStep

from dsl_test_helpers import assert_same, make_array

TYPES = ["float", "float16", "bfloat16", "int8", "uint64", "bool"]  # (each where the version allows it)
NOT_BUILT = ["string", "complex64"]  # (their references run, as in the eager engine)
# narrow types and the first Pad version that takes each
NARROW = {"float8e4m3fn": 21, "float8e5m2": 21, "float8e4m3fnuz": 21, "float8e5m2fnuz": 21, "int4": 21, "uint4": 21,
          "float4e2m1": 23, "float8e8m0": 24, "int2": 25, "uint2": 25}


def kernels(f, *args) -> list:
    return [s for s in f.executable(*args).steps if isinstance(s, KernelStep)]


def numpy_steps(f, *args) -> list:
    return [s.node.op_type for s in f.executable(*args).steps if not isinstance(s, KernelStep) and
            s.opdef.view is None]


def modes(version: int) -> list:
    return ["constant", "reflect", "edge"] + (["wrap"] if version >= 19 else [])


def version_mode_types(op: str = "Pad") -> list:
    """(version, mode, element type name) for every registered version of ``op``, each mode it
    allows and each of TYPES its schema takes."""
    return [(s.version, mode, name) for s in registry.get(op).schemas for mode in modes(s.version)
            for name in TYPES if dsl.dtype(name) in s.types]


# (shape, pads, axes): positive, negative and mixed pads, all zeros, one axis or all, pads longer
# than the axis (reflect repeats), an axis emptied by negative pads (and, constant mode, filled
# again), an empty input, axes with negative entries (18+).
PATTERNS = {
    "one axis": ((3, 5), [0, 2, 0, 3], None),
    "first axis": ((3, 5), [2, 0, 1, 0], None),
    "all axes": ((2, 3, 4), [1, 2, 1, 2, 1, 3], None),
    "longer than the axis": ((2, 3), [5, 4, 3, 7], None),
    "negative": ((3, 5), [-1, -2, 0, -1], None),
    "mixed": ((3, 5), [-1, 2, 2, -3], None),
    "zero": ((3, 5), [0, 0, 0, 0], None),
    "empty result": ((3, 5), [-1, 1, -2, 0], None),
    "emptied then filled": ((3, 5), [-3, 0, 1, 1], None),
    "empty input": ((0, 4), [0, 1, 0, 2], None),
    "axes with negatives": ((2, 3, 4), [1, -1, 2, 0], [-1, 0]),
    "one axis of axes": ((3, 5), [0, 3], [-2]),
}


def _applies(version: int, mode: str, pattern: str) -> bool:
    _, pads, axes = PATTERNS[pattern]
    if version == 1 and min(pads) < 0:  # (version 1 only adds elements)
        return False
    if axes is not None and version < 18:
        return False
    return mode == "constant" or pattern != "emptied then filled"  # (reflect / edge / wrap: nothing to extend)


# ---- Pad: every version, mode, type and pattern -----------------------------------------------------------
@pytest.mark.parametrize("version, mode, name, pattern", [(v, m, n, p) for v, m, n in version_mode_types()
                                                          for p in PATTERNS if _applies(v, m, p)])
def test_pad_fuses_at_every_version_mode_and_type(version, mode, name, pattern):
    shape, pads, axes = PATTERNS[pattern]
    x = make_array(dsl.dtype(name), shape, seed=version)
    extra = {} if axes is None else {"axes": axes}
    f = dsl.jit(lambda t: dsl.pad(t, pads, mode=mode, **extra), opset=version)
    assert_same(f(x), dsl.pad(x, pads, mode=mode, opset=version, **extra))
    assert numpy_steps(f, x) == []


@pytest.mark.parametrize("version, name", [(v, n) for v, m, n in version_mode_types() if m == "constant"])
def test_constant_value_as_a_constant_at_every_version(version, name):
    dt = dsl.dtype(name)
    x = make_array(dt, (3, 4), seed=version)
    value = np.asarray(True if name == "bool" else -2.5 if dt.kind == "float" else 7, dt.np_dtype)
    pads = [1, 0, 2, 3] if version == 1 else [1, -1, 2, 3]  # (before 11: the `value` attribute)
    f = dsl.jit(lambda t: dsl.pad(t, pads, value), opset=version)
    assert_same(f(x), dsl.pad(x, pads, value, opset=version))
    assert numpy_steps(f, x) == []


@pytest.mark.parametrize("value_shape", [(), (1,)])
@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("pads", [[0, 2, 0, 3], [1, -1, 2, 3], [-3, 0, 1, 0]])
def test_constant_value_as_a_run_time_argument(pads, name, value_shape):
    dt = dsl.dtype(name)
    x = make_array(dt, (3, 4), seed=3)
    value = make_array(dt, value_shape, seed=4)
    f = dsl.jit(lambda t, v: dsl.pad(t, pads, v))
    assert_same(f(x, value), dsl.pad(x, pads, value))
    assert numpy_steps(f, x, value) == []


def test_pad_of_a_scalar_and_of_a_vector():
    f = dsl.jit(lambda t: dsl.pad(t, []) * 2.0)
    assert_same(f(np.array(1.5, np.float32)), np.array(3.0, np.float32))
    assert numpy_steps(f, np.array(1.5, np.float32)) == []
    x = np.arange(5, dtype=np.int32)
    for mode in modes(19):
        g = dsl.jit(lambda t: dsl.pad(t, [3, 6], mode=mode) + 1)
        assert_same(g(x), dsl.pad(x, [3, 6], mode=mode) + np.int32(1))
        assert numpy_steps(g, x) == []


# ---- NaN payloads --------------------------------------------------------------------------------------
NAN_BITS = {"float16": [0xFCC9, 0x7C01, 0x7E00, 0x8000, 0x3C00, 0xFE01], "bfloat16": [0x7F81, 0xFF81, 0x7FC0,
                                                                                       0x8000, 0x3F80, 0xFFC1]}


@pytest.mark.parametrize("name", list(NAN_BITS))
@pytest.mark.parametrize("mode, fill_as", [("constant", "argument"), ("constant", "constant"), ("reflect", None),
                                           ("edge", None), ("wrap", None)])
def test_nan_payloads_survive_in_the_data_and_the_fill(mode, fill_as, name):
    dt = dsl.dtype(name)
    bits = np.dtype(f"uint{dt.bits}")
    x = np.array(NAN_BITS[name], bits).view(dt.np_dtype).reshape(2, 3)
    fill = np.array(NAN_BITS[name][1], bits).view(dt.np_dtype).reshape(())
    pads = [1, 2, 3, 1]
    if fill_as == "argument":
        f, args = dsl.jit(lambda t, v: dsl.pad(t, pads, v)), (x, fill)
    else:
        f, args = dsl.jit(lambda t: dsl.pad(t, pads, fill if fill_as else None, mode=mode)), (x,)
    want = dsl.pad(x, pads, fill if fill_as else None, mode=mode)
    np.testing.assert_array_equal(f(*args).view(bits), want.view(bits))
    assert numpy_steps(f, *args) == []


# ---- kernels -------------------------------------------------------------------------------------------
def test_one_padded_axis_is_one_kernel_with_its_consumer():
    x = np.asarray(np.random.default_rng(1).integers(-40, 40, (5, 7)) / 4, np.float32)
    f = dsl.jit(lambda t: dsl.pad(t, [0, 2, 0, 3]) * 2)
    np.testing.assert_array_equal(f(x), np.pad(x, ((0, 0), (2, 3))) * 2)
    assert len(kernels(f, x)) == 1 and numpy_steps(f, x) == []
    assert "numpy" not in f.executable(x).explain(source=False)


@pytest.mark.parametrize("mode", modes(19))
@pytest.mark.parametrize("pads, count", [([0, 2, 0, 3], 1), ([2, 0, 1, 0], 1), ([1, 2, 1, 2], 2), ([0, 0, 0, 0], 1),
                                         ([-1, 0, -1, 0], 1)])
def test_a_kernel_per_padded_axis_fused_with_producer_and_consumer(pads, count, mode):
    x = np.asarray(np.random.default_rng(2).integers(-40, 40, (6, 7)) / 4, np.float32)
    f = dsl.jit(lambda t: dsl.pad(t * 2.0, pads, mode=mode) + 1.0)
    np.testing.assert_array_equal(f(x), dsl.pad(x * np.float32(2), pads, mode=mode) + np.float32(1))
    if mode != "constant" and any(p > 0 for p in pads):  # (the gathered data is read from memory)
        count += 1
    assert len(kernels(f, x)) == count and numpy_steps(f, x) == []


# ---- ONNX models ---------------------------------------------------------------------------------------
def _pad_model(version: int, dt, pads, value=None, value_input=False, axes=None):
    """Pad of x [3, 4]: pads (and value) as attributes before 11, else initializers; with
    ``value_input`` constant_value is a graph input."""
    inputs, inits, graph_inputs = ["x"], [], [oh.make_tensor_value_info("x", dt.onnx_code, [3, 4])]
    attrs = {"mode": "constant"}
    if version < 11:
        attrs["paddings" if version == 1 else "pads"] = pads
        if value is not None:
            attrs["value"] = float(value)
    else:
        inputs.append("pads")
        inits.append(onnx.numpy_helper.from_array(np.array(pads, np.int64), "pads"))
        if value_input:
            inputs.append("value")
            graph_inputs.append(oh.make_tensor_value_info("value", dt.onnx_code, []))
        elif value is not None:
            inputs.append("value")
            inits.append(onnx.numpy_helper.from_array(np.asarray(value, dt.np_dtype), "value"))
        if axes is not None:
            inputs += [""] * (3 - len(inputs)) + ["axes"]
            inits.append(onnx.numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    node = oh.make_node("Pad", inputs, ["y"], **attrs)
    graph = oh.make_graph([node], "g", graph_inputs, [oh.make_tensor_value_info("y", dt.onnx_code, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", version)])


@pytest.mark.parametrize("version, pads, value, value_input, axes", [
    (1, [1, 0, 2, 2], 1.5, False, None), (2, [1, -1, 2, 2], -3.0, False, None), (2, [0, 1, 0, 1], None, False, None),
    (11, [1, -1, 2, 2], 4.0, False, None), (13, [1, 1, 0, 0], None, False, None), (13, [2, 0, 1, 3], None, True, None),
    (18, [2, -1], 5.0, False, [-1]), (19, [1, 0, 0, 2], None, True, [1, 0]), (25, [0, 1, 0, 1], 6.0, False, None)])
def test_pad_of_an_onnx_model_matches_the_numpy_engine(version, pads, value, value_input, axes):
    dt = dsl.dtype("float16")
    program = dsl.from_onnx(_pad_model(version, dt, pads, value, value_input, axes))
    feeds = {"x": make_array(dt, (3, 4), seed=version)}
    if value_input:
        feeds["value"] = np.asarray(-0.5, np.float16)
    got, want = program.run(feeds), program.run(feeds, engine="numpy")
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))
    assert "numpy Pad" not in program._executable(feeds).explain(source=False)  # (no public plan API on Program)


# ---- CenterCropPad --------------------------------------------------------------------------------------
# (shape, target, axes): crop only, pad only, both, nothing changed, an empty target, an empty
# input, listed axes with negatives.
CROP_PAD_CASES = [((5, 6), [3, 2], None), ((3, 2), [6, 5], None), ((5, 2, 3), [2, 7, 3], None), ((3, 4), [3, 4], None),
                  ((4, 6), [0, 9], None), ((0, 3), [2, 1], None), ((2, 5, 4), [7, 1], [-1, 0]), ((3, 4), [6], [1])]


@pytest.mark.parametrize("shape, target, axes", CROP_PAD_CASES)
@pytest.mark.parametrize("name", [n for n in TYPES if dsl.dtype(n) in registry.get("CenterCropPad").schemas[0].types])
def test_center_crop_pad_fuses_for_every_type(name, shape, target, axes):
    x = make_array(dsl.dtype(name), shape, seed=len(target))
    f = dsl.jit(lambda t: dsl.center_crop_pad(t, target, axes))
    assert_same(f(x), dsl.center_crop_pad(x, target, axes))
    assert numpy_steps(f, x) == []


@pytest.mark.parametrize("name", list(NAN_BITS))
def test_center_crop_pad_keeps_nan_payloads(name):
    dt = dsl.dtype(name)
    bits = np.dtype(f"uint{dt.bits}")
    x = np.array(NAN_BITS[name], bits).view(dt.np_dtype).reshape(3, 2)
    f = dsl.jit(lambda t: dsl.center_crop_pad(t, [2, 5]))
    np.testing.assert_array_equal(f(x).view(bits), dsl.center_crop_pad(x, [2, 5]).view(bits))
    assert numpy_steps(f, x) == []


def test_center_crop_pad_of_one_padded_axis_is_one_kernel_with_its_consumer():
    x = np.asarray(np.random.default_rng(3).integers(-40, 40, (6, 5)) / 4, np.float32)
    f = dsl.jit(lambda t: dsl.center_crop_pad(t, [4, 8]) * 2)
    np.testing.assert_array_equal(f(x), np.pad(x[1:5], ((0, 0), (1, 2))) * 2)
    assert len(kernels(f, x)) == 1 and numpy_steps(f, x) == []
    assert "numpy" not in f.executable(x).explain(source=False)


# ---- what keeps its reference ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", NOT_BUILT)
@pytest.mark.parametrize("mode", modes(21))
def test_types_the_bodies_cannot_be_built_of_keep_pad(name, mode):
    x = make_array(dsl.dtype(name), (3, 4), seed=5)
    f = dsl.jit(lambda t: dsl.pad(t, [1, -1, 0, 2], mode=mode), opset=21)
    assert_same(f(x), dsl.pad(x, [1, -1, 0, 2], mode=mode, opset=21))
    assert numpy_steps(f, x) == ["Pad"]
    if name in ("string", "complex64"):  # (CenterCropPad-18 takes neither float8 nor int4)
        g = dsl.jit(lambda t: dsl.center_crop_pad(t, [2, 6]))
        assert_same(g(x), dsl.center_crop_pad(x, [2, 6]))
        assert numpy_steps(g, x) == ["CenterCropPad"]


@pytest.mark.parametrize("name", NARROW)
@pytest.mark.parametrize("mode", modes(21))
def test_narrow_types_fuse_keeping_every_code(name, mode):
    dt = dsl.dtype(name)
    if dt.np_dtype.itemsize == 1 and not dt.packed:  # (float8: all 256 codes, NaN payloads included)
        x = np.arange(256, dtype=np.uint8).view(dt.np_dtype).reshape(16, 16)
    else:
        x = make_array(dt, (5, 6), seed=7)
    f = dsl.jit(lambda t: dsl.pad(t, [1, -1, 0, 3], mode=mode), opset=NARROW[name])
    assert_same(f(x), dsl.pad(x, [1, -1, 0, 3], mode=mode, opset=NARROW[name]))
    wide = np.zeros(x.shape, np.float32)  # (the same kernels as float32: CenterCropPad-18 takes no narrow type)
    assert numpy_steps(f, x) == [] and len(kernels(f, x)) == len(kernels(f, wide))


def test_dims_unknown_before_the_run_keep_pad():
    mask = np.array([[1, 0, 1], [0, 1, 1]], np.int64)

    @dsl.jit
    def f(m):
        where = dsl.nonzero(m)  # [2, count]
        return dsl.pad(where, [0, 1, 0, 2], mode="wrap"), dsl.pad(where, [1, 0, 0, 1], np.int64(-1))
    rows, cols = np.nonzero(mask)
    where = np.stack([rows, cols])
    got = f(mask)
    assert_same(got[0], np.pad(where, ((0, 0), (1, 2)), mode="wrap"))
    assert_same(got[1], np.pad(where, ((1, 0), (0, 1)), constant_values=-1))
    assert numpy_steps(f, mask).count("Pad") == 2
