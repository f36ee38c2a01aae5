"""Split and Tile in the JIT (dsl/ops/arrange.py _split_body, _tile_body): Split's outputs are
Slices of its input (views a consumer reads through), Tile a Gather per repeated axis of a
constant index; at every version and element type bit for bit the numpy engine's, with no numpy
Split / Tile step left but for the types kernels do not compute (strings, complex) and dims
unknown before the run; NaN payloads and signaling NaNs of every float type kept."""
import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import dsl
from dsl.ops import registry
from dsl.passes.fuse import KernelStep

from dsl_test_helpers import assert_same, make_array

RNG = np.random.default_rng(11)
NOT_IN_KERNELS = {"string", "complex64", "complex128"}  # (their references run, as in the eager engine)
TILE_NOT_IN_KERNELS = NOT_IN_KERNELS


def kernels(f, *args) -> list:
    return [s for s in f.executable(*args).steps if isinstance(s, KernelStep)]


def numpy_steps(f, *args) -> list:
    return [s.node.op_type for s in f.executable(*args).steps if not isinstance(s, KernelStep) and
            s.opdef.view is None]


def version_types(op: str) -> list:
    """(version, element type name) for every registered version of ``op`` and each type it allows."""
    return [(s.version, t.onnx_name) for s in registry.get(op).schemas for t in sorted(s.types, key=str)]


def assert_all_same(got, want) -> None:
    got, want = (list(v) if isinstance(v, (list, tuple)) else [v] for v in (got, want))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


# ---- Split --------------------------------------------------------------------------------------
# (shape, axis, split lengths or None, num_outputs): zero-size parts, empty inputs, the last axis.
SPLIT_CASES = [((4, 6), 1, [2, 4], None), ((4, 6), -1, [3, 0, 3], None), ((5, 0), 0, [2, 3], None),
               ((0, 3), 0, [0, 0], None), ((2, 3, 4), -2, [3], None), ((6, 2), 0, None, 3), ((3, 8), 1, None, 2)]


@pytest.mark.parametrize("shape, axis, lengths, count", SPLIT_CASES)
@pytest.mark.parametrize("version, name", version_types("Split"))
def test_split_is_slices_at_every_version_and_type(version, name, shape, axis, lengths, count):
    if version < 11 and axis < 0:  # (negative axes from version 11)
        axis += len(shape)
    if version == 1 and count is not None:  # (dsl.split's num_outputs at opset 1 sends int64 lengths, not T)
        lengths, count = [shape[axis] // count] * count, None
    x = make_array(dsl.dtype(name), shape, seed=version)

    def f(t):
        return dsl.split(t, lengths, axis=axis, num_outputs=count)
    jitted = dsl.jit(f, opset=version)
    assert_all_same(jitted(x), dsl.split(x, lengths, axis=axis, num_outputs=count, opset=version))
    assert numpy_steps(jitted, x) == (["Split"] if name in NOT_IN_KERNELS else [])


@pytest.mark.parametrize("shape, count", [((7, 2), 3), ((5, 3), 3), ((1, 3), 1), ((0, 2), 2)])
def test_split_18_num_outputs_with_a_smaller_last_chunk(shape, count):
    x = make_array(dsl.dtype("int16"), shape)
    f = dsl.jit(lambda t: [p * 3 for p in dsl.split(t, axis=0, num_outputs=count)])
    assert_all_same(f(x), [p * np.int16(3) for p in dsl.split(x, axis=0, num_outputs=count)])
    assert numpy_steps(f, x) == []


def _split_model(version: int, outputs: int, dt, lengths=None):
    """Split of x [2, 6] on axis 1 without lengths (the node's output count decides), or with
    Split-1's `split` input (of type T)."""
    inputs, inits = ["x"], []
    if lengths is not None:
        inputs.append("lengths")
        inits.append(onnx.numpy_helper.from_array(np.asarray(lengths, dt.np_dtype), "lengths"))
    node = oh.make_node("Split", inputs, [f"y{k}" for k in range(outputs)], axis=1)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", dt.onnx_code, [2, 6])],
                          [oh.make_tensor_value_info(f"y{k}", dt.onnx_code, None) for k in range(outputs)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", version)])


@pytest.mark.parametrize("version, outputs, lengths", [(1, 3, None), (1, 2, [5.0, 1.0]), (2, 2, None),
                                                       (11, 3, None), (13, 6, None), (13, 1, None)])
def test_split_of_an_onnx_model_without_lengths_or_with_split_1_s_input(version, outputs, lengths):
    dt = dsl.dtype("float16")
    program = dsl.from_onnx(_split_model(version, outputs, dt, lengths))
    feeds = {"x": make_array(dt, (2, 6), seed=3)}
    assert_all_same(program.run(feeds), program.run(feeds, engine="numpy"))
    assert "numpy Split" not in program._executable(feeds).explain(source=False)  # (no public plan API on Program)


# ---- Tile ---------------------------------------------------------------------------------------
# (shape, repeats): one or several repeated axes, all ones, zeros, empty inputs, rank 0 and 1.
TILE_CASES = [((3, 4), [1, 3]), ((3, 4), [2, 1]), ((3, 4), [2, 2]), ((2, 3, 4), [2, 1, 3]), ((0, 4), [2, 3]),
              ((3, 4), [0, 2]), ((3, 4), [1, 0]), ((3, 4), [1, 1]), ((), []), ((5,), [3])]


@pytest.mark.parametrize("shape, repeats", TILE_CASES)
@pytest.mark.parametrize("version, name", [(v, n) for v, n in version_types("Tile") if v >= 6])
def test_tile_is_gathers_at_every_version_and_type(version, name, shape, repeats):
    x = make_array(dsl.dtype(name), shape, seed=version)
    f = dsl.jit(lambda t: dsl.tile(t, repeats), opset=version)
    got = f(x)
    assert_same(got, dsl.tile(x, repeats, opset=version))
    assert_same(got, np.tile(x, repeats))
    repeated = any(r != 1 for r in repeats)  # (all ones: an Identity, a view for every type)
    assert numpy_steps(f, x) == (["Tile"] if name in TILE_NOT_IN_KERNELS and repeated else [])
    if name not in TILE_NOT_IN_KERNELS:  # (a chain of gathers, the innermost axis first)
        assert len(kernels(f, x)) == sum(r != 1 for r in repeats)


@pytest.mark.parametrize("name", ["float16", "float", "double"])
@pytest.mark.parametrize("axis, tiles", [(0, 3), (1, 2), (1, 0), (0, 1)])
def test_tile_1_tiles_and_axis_inputs(name, axis, tiles):
    x = make_array(dsl.dtype(name), (2, 3), seed=tiles)
    args = {"tiles": np.array([tiles], x.dtype), "axis": np.array([axis], x.dtype)}
    f = dsl.jit(lambda t: dsl.eager.call("Tile", t, 1, **args), opset=1)
    assert_same(f(x), dsl.eager.call("Tile", x, 1, **args))
    assert numpy_steps(f, x) == (["Tile"] if name in TILE_NOT_IN_KERNELS and tiles != 1 else [])


NAN_BITS = {"float16": [0xFCC9, 0x7C01, 0x7E00, 0x8000], "bfloat16": [0x7F81, 0xFF81, 0x7FC0, 0x8000],
            "float": [0x7F800001, 0xFF800001, 0x7FC00000, 0x80000000],
            "double": [0x7FF0000000000001, 0xFFF0000000000001, 0x7FF8000000000000, 0x8000000000000000]}


@pytest.mark.parametrize("name", list(NAN_BITS))
def test_tile_and_split_keep_signaling_nans_and_payloads(name):
    dt = dsl.dtype(name)
    bits = np.dtype(f"uint{dt.bits}")
    x = np.array(NAN_BITS[name], bits).view(dt.np_dtype).reshape(2, 2)
    f = dsl.jit(lambda t: (dsl.tile(t, [2, 3]), *dsl.split(t, [1, 1], axis=1)))
    got = f(x)
    want = (np.tile(x, (2, 3)), x[:, :1], x[:, 1:])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(bits), w.view(bits))
    assert numpy_steps(f, x) == (["Tile"] if name in TILE_NOT_IN_KERNELS else [])


# ---- fused with producers and consumers ---------------------------------------------------------
def test_tile_of_one_axis_is_one_kernel_with_its_consumer():
    x = np.asarray(RNG.integers(-40, 40, (5, 7)) / 4, np.float32)
    f = dsl.jit(lambda t: dsl.tile(t, [1, 3]) + 1)
    np.testing.assert_array_equal(f(x), np.tile(x, (1, 3)) + 1)
    assert len(kernels(f, x)) == 1 and numpy_steps(f, x) == []
    assert "numpy" not in f.executable(x).explain(source=False)


def test_split_then_product_is_one_kernel_reading_the_input_twice():
    x = np.asarray(RNG.integers(-40, 40, (4, 10)) / 4, np.float32)

    @dsl.jit
    def f(t):
        a, b = dsl.split(t, axis=-1, num_outputs=2)
        return a * b
    np.testing.assert_array_equal(f(x), x[:, :5] * x[:, 5:])
    assert len(kernels(f, x)) == 1 and numpy_steps(f, x) == []
    assert f.executable(x).explain(source=False).count("%t via") == 2


@pytest.mark.parametrize("name", ["float16", "bfloat16", "int8", "uint32", "int64", "double", "bool"])
def test_qkv_split_and_tile_fuse_with_their_consumers(name):
    np_type = dsl.dtype(name).np_dtype
    qkv = np.asarray(RNG.integers(-8, 8, (2, 3, 12)), np_type)

    @dsl.jit
    def f(t):
        a, b, c = dsl.split(t, axis=-1, num_outputs=3)
        if name == "bool":  # (Add, Mul and Sub take no bool)
            return a | (b & c), dsl.tile(a, [2, 1, 1]) & dsl.logical_not(c[:1])
        return a + b * c, dsl.tile(a, [2, 1, 1]) - c[:1]
    program = dsl.from_onnx(f.to_onnx(qkv))
    for got, want in zip(f(qkv), program.run([qkv], engine="numpy")):
        assert_same(got, want)
    tiled = name in TILE_NOT_IN_KERNELS
    assert len(kernels(f, qkv)) == 2 and numpy_steps(f, qkv) == (["Tile"] if tiled else [])


def test_a_tile_of_a_computed_value_reads_it_from_memory():
    x = np.asarray(RNG.integers(-40, 40, (3, 4)) / 4, np.float32)
    f = dsl.jit(lambda t: dsl.tile(t * 2.0, [3, 2]) + 1.0)
    np.testing.assert_array_equal(f(x), np.tile(x * 2, (3, 2)) + 1)
    assert len(kernels(f, x)) == 3 and numpy_steps(f, x) == []  # (t * 2, then two gathers: + 1 in the last)


# ---- what keeps its reference --------------------------------------------------------------------
def test_dims_unknown_before_the_run_keep_split_and_tile():
    mask = np.array([[1, 0, 1], [0, 1, 1]], np.int64)

    @dsl.jit
    def f(m):
        where = dsl.nonzero(m)  # [2, count]
        a, b = dsl.split(where, axis=0, num_outputs=2)
        return a * b, dsl.tile(where, [2, 3]) + 1
    rows, cols = np.nonzero(mask)
    got = f(mask)
    np.testing.assert_array_equal(got[0], (rows * cols)[None])
    np.testing.assert_array_equal(got[1], np.tile(np.stack([rows, cols]), (2, 3)) + 1)
    assert {"Split", "Tile"} <= set(numpy_steps(f, mask))
