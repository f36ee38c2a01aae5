"""The chunk rules of the rearranging, indexing and generating ops (dsl/ops/chunks.py): each op,
inside a small program with elementwise ops, runs through dsl.dask on inputs chunked along every
axis and equals the single-machine JIT and the numpy reference engine exactly; the layout reads
exactly the expected dims whole (a rule that splits an axis it must read whole, or reads whole
an axis it could keep chunked, fails); ops whose shapes depend on input values raise."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
import pytest

import dsl
import dsl.dask
from dsl.dask import RechunkWarning
from dsl.dask.chunking import plan_layout
from dsl.ops import chunks, registry
from dsl.passes import infer_shapes

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ints(low, high, *shape):
    return RNG.integers(low, high, shape).astype(np.int64)


@dataclass
class Case:
    """``op`` in fn over ``args`` (chunked ``chunks``), the axes the layout reads whole per input (``whole``)
    and per output (``out_whole``); ``unfolded``: constant inputs of ops stay nodes (as they do
    above the fold budget), so the op's own rule plans them."""

    op: str
    name: str
    fn: object
    args: tuple
    chunks: tuple
    whole: tuple
    out_whole: tuple
    opset: int | None = None
    unfolded: bool = False


MASK5 = np.array([1, 0, 1, 1, 0], bool)
MASK120 = RNG.random(120) > 0.6
NZ = (RNG.random((3, 4)) > 0.5).astype(np.float32)
NZ_COUNT = int(np.count_nonzero(NZ))


def _traced_constant(x, value):
    """A constant of x's trace: an op on it is a node (an op on a numpy array runs eagerly)."""
    return x.builder.constant(np.asarray(value))


def _scatter(d, i, u):
    return d.builder.add("Scatter", [d * 2.0, i, u], {"axis": 1})[0] + 1.0


def _split_lengths(x):
    a, b = dsl.split(x * 2.0, [2, 3], axis=1)
    return a + 1.0, b - 1.0


def _split_parts(x):
    a, b = dsl.split(x - 1.0, num_outputs=2, axis=2)
    return a * 3.0, b * 0.5


CASES = [
    Case("Split", "split_lengths", _split_lengths, (f32(6, 5, 4),), ((2, 2, 3),), ({1},), ({1}, {1})),
    Case("Split", "split_num_outputs", _split_parts, (f32(6, 5, 4),), ((2, 2, 3),), ({2},), ({2}, {2})),
    Case("Tile", "tile", lambda x: dsl.tile(x * 2.0, [1, 2, 3]) + 1.0,
         (f32(4, 6, 3),), ((2, 3, 2),), ({1, 2},), ({1, 2},)),
    Case("Tile", "tile_unit_repeats", lambda x: dsl.tile(x, [2, 1, 1]) - x[:1],
         (f32(4, 6, 3),), ((2, 3, 2),), ({0},), ({0},)),
    Case("Pad", "pad_constant", lambda x: dsl.pad(x * 2.0, [0, 2, 0, 0, 1, 0], 1.5) + 1.0,
         (f32(5, 6, 4),), ((2, 3, 2),), ({1},), ({1},)),
    Case("Pad", "pad_remove_and_reflect", lambda x: dsl.pad(x + 1.0, [0, 0, -1, 0, 0, 2], mode="reflect") * 2.0,
         (f32(5, 6, 4),), ((2, 3, 2),), ({2},), ({2},)),
    Case("Pad", "pad_axes_zero_pads", lambda x: dsl.pad(x, [0, 1, 0, 2], axes=[0, 1], mode="edge") * 2.0,
         (f32(5, 6, 4),), ((2, 3, 2),), ({1},), ({1},)),
    Case("DepthToSpace", "depth_to_space_dcr", lambda x: dsl.depth_to_space(x * 2.0, 2) + 1.0,
         (f32(4, 8, 3, 5),), ((2, 4, 2, 3),), ({1, 2, 3},), ({1, 2, 3},)),
    Case("DepthToSpace", "depth_to_space_crd", lambda x: dsl.depth_to_space(x - 1.0, 2, mode="CRD") * 3.0,
         (f32(4, 8, 3, 5),), ((2, 4, 2, 3),), ({1, 2, 3},), ({1, 2, 3},)),
    Case("SpaceToDepth", "space_to_depth", lambda x: dsl.space_to_depth(x * 2.0, 2) + 1.0,
         (f32(4, 2, 6, 4),), ((2, 1, 3, 2),), ({1, 2, 3},), ({1, 2, 3},)),
    Case("ReverseSequence", "reverse_sequence_time_first", lambda x, n: dsl.reverse_sequence(x * 2.0, n) + 1.0,
         (f32(5, 6, 3), ints(0, 6, 6)), ((2, 3, 2), (3,)), ({0}, set()), ({0},)),
    Case("ReverseSequence", "reverse_sequence_batch_first",
         lambda x, n: dsl.reverse_sequence(x - 1.0, n, batch_axis=0, time_axis=1) * 2.0,
         (f32(6, 5, 3), ints(0, 6, 6)), ((2, 2, 2), (3,)), ({1}, set()), ({1},)),
    Case("CenterCropPad", "center_crop_pad_two_axes",
         lambda x: dsl.center_crop_pad(x * 2.0, [4, 9], axes=[1, 2]) + 1.0,
         (f32(6, 7, 5),), ((2, 3, 2),), ({1, 2},), ({1, 2},)),
    Case("CenterCropPad", "center_crop_pad_kept_axis_listed",  # axis 0 is listed with its own size
         lambda x: dsl.center_crop_pad(x + 1.0, [6, 3], axes=[0, 1]) * 2.0,
         (f32(6, 7, 5),), ((2, 3, 2),), ({1},), ({1},)),
    Case("CenterCropPad", "center_crop_pad_all_axes", lambda x: dsl.center_crop_pad(x * 2.0, [6, 7, 2]) - 1.0,
         (f32(6, 7, 5),), ((2, 3, 2),), ({2},), ({2},)),
    Case("EyeLike", "eye_like", lambda x: dsl.eye_like(x, k=1) * 2.0 + x,
         (f32(5, 6),), ((2, 3),), ({0, 1},), ({0, 1},)),
    Case("GatherElements", "gather_elements", lambda d, i: dsl.gather_elements(d * 2.0, i, axis=1) + 1.0,
         (f32(6, 5, 4), ints(-5, 5, 6, 3, 4)), ((2, 2, 2), (2, 2, 2)), ({1}, set()), (set(),)),
    Case("GatherElements", "gather_elements_smaller_indices",
         lambda d, i: dsl.gather_elements(d - 1.0, i, axis=1) * 2.0,
         (f32(6, 5, 4), ints(-5, 5, 6, 3, 2)), ((2, 2, 2), (2, 2, 1)), ({1, 2}, {2}), ({2},)),
    Case("ScatterElements", "scatter_elements",
         lambda d, i, u: dsl.scatter_elements(d * 2.0, i, u * 3.0, axis=1) + 1.0,
         (f32(6, 5, 4), ints(-5, 5, 6, 3, 4), f32(6, 3, 4)), ((2, 2, 2),) * 3, ({1}, {1}, {1}), ({1},)),
    Case("ScatterElements", "scatter_elements_add",  # duplicate indices: added in the same order
         lambda d, i, u: dsl.scatter_elements(d, i, u, axis=2, reduction="add") * 2.0,
         (f32(6, 5, 4), ints(0, 2, 6, 5, 3), f32(6, 5, 3)), ((2, 2, 2),) * 3, ({2}, {2}, {2}), ({2},)),
    Case("Scatter", "scatter", _scatter,
         (f32(6, 5, 4), ints(-5, 5, 6, 3, 4), f32(6, 3, 4)), ((2, 2, 2),) * 3, ({1}, {1}, {1}), ({1},), opset=11),
    Case("GatherND", "gather_nd_batch", lambda d, i: dsl.gather_nd(d * 2.0, i, batch_dims=1) + 1.0,
         (f32(4, 5, 6, 3), np.stack([ints(-5, 5, 4, 7), ints(-6, 6, 4, 7)], -1)),
         ((2, 2, 3, 2), (2, 3, 1)), ({1, 2}, {2}), (set(),)),
    Case("GatherND", "gather_nd_slices", lambda d, i: dsl.gather_nd(d - 1.0, i) * 2.0,
         (f32(5, 6, 4), ints(-5, 5, 4, 3, 1)), ((2, 3, 2), (2, 2, 1)), ({0}, set()), (set(),)),
    Case("ScatterND", "scatter_nd_rows", lambda d, i, u: dsl.scatter_nd(d * 2.0, i, u, reduction="add") + 1.0,
         (f32(5, 6, 4), np.array([[1], [4], [1]], np.int64), f32(3, 6, 4)), ((2, 3, 2), (2, 1), (2, 3, 2)),
         ({0}, {0}, {0}), ({0},)),
    Case("ScatterND", "scatter_nd_elements", lambda d, i, u: dsl.scatter_nd(d - 1.0, i, u) * 2.0,
         (f32(5, 6, 4), np.array([[1, 2], [4, -1], [0, 5]], np.int64), f32(3, 4)), ((2, 3, 2), (2, 1), (2, 2)),
         ({0, 1}, {0, 1}, {0}), ({0, 1},)),
    Case("OneHot", "one_hot", lambda i, v: dsl.one_hot(i, np.array(4, np.int64), v * 2.0, axis=1) + 1.0,
         (ints(-4, 6, 5, 6), np.array([-1.5, 3.0], np.float32)), ((2, 3), (1,)), (set(), {0}), ({1},)),
    Case("OneHot", "one_hot_last_axis", lambda i, v: dsl.one_hot(i, np.array([3], np.int64), v) * 2.0,
         (ints(-3, 4, 5, 6), np.array([0.0, 1.0], np.float32)), ((2, 3), (2,)), (set(), {0}), ({2},)),
    Case("Compress", "compress_axis", lambda x: dsl.compress(x * 2.0, MASK5, axis=1) + 1.0,
         (f32(6, 5, 4),), ((2, 2, 2),), ({1},), ({1},)),
    Case("Compress", "compress_flat", lambda x: dsl.compress(x - 1.0, MASK120) * 2.0,
         (f32(6, 5, 4),), ((2, 2, 2),), ({0, 1, 2},), ({0},)),
    Case("TensorScatter", "tensor_scatter_linear", lambda c, u, w: dsl.tensor_scatter(c * 2.0, u, w) + 1.0,
         (f32(4, 8, 3), f32(4, 2, 3), ints(0, 7, 4)), ((2, 3, 2), (2, 1, 2), (2,)), ({1}, {1}, set()), ({1},)),
    Case("TensorScatter", "tensor_scatter_circular",
         lambda c, u, w: dsl.tensor_scatter(c, u - 1.0, w, mode="circular", axis=1) * 2.0,
         (f32(4, 8, 3), f32(4, 3, 3), ints(-9, 9, 4)), ((2, 3, 2), (2, 1, 2), (2,)), ({1}, {1}, set()), ({1},)),
    Case("NonZero", "nonzero_of_a_constant",
         lambda x: dsl.cast(dsl.nonzero(_traced_constant(x, NZ)), dsl.float32) * x,
         (f32(2, NZ_COUNT),), ((1, 2),), ({0, 1},), ({0, 1},), unfolded=True),
    Case("Range", "range", lambda x: x + dsl.range(*(_traced_constant(x, np.float32(v)) for v in (0.5, 6, 1))),
         (f32(4, 6),), ((2, 3),), ({1},), ({1},), unfolded=True),
    Case("ConstantOfShape", "constant_of_shape",  # the fill is chunked like x
         lambda x: x * dsl.constant_of_shape(_traced_constant(x, np.int64([4, 6])), np.float32([2.5])),
         (f32(4, 6),), ((2, 3),), (set(),), (set(),), unfolded=True),
]


def _traced(case: Case):
    builder = dsl.jit(case.fn, opset=case.opset)._trace(
        [dsl.TensorType(dsl.dtype(a.dtype), a.shape) for a in case.args])
    return builder, plan_layout(builder.graph, builder.calls, builder.constants)


def _whole_axes(layout, value) -> set:
    return {axis for axis, letter in enumerate(layout.index(value)) if letter in layout.whole}


@pytest.fixture
def no_folding(monkeypatch):
    """Constant inputs stay computed nodes (as above DSL_FOLD_BYTES): the op's rule plans them."""
    monkeypatch.setattr(infer_shapes, "FOLD_BYTES", 0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_runs_blockwise_and_equals_the_jit(case, request):
    if case.unfolded:
        request.getfixturevalue("no_folding")
    jitted = dsl.jit(case.fn, opset=case.opset)
    expected = jitted(*case.args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    reference = jitted.lower(*case.args).run(list(case.args), engine="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RechunkWarning)
        lazy = dsl.dask.apply(jitted, *(da.from_array(a, chunks=c) for a, c in zip(case.args, case.chunks)))
    lazy = lazy if isinstance(lazy, tuple) else (lazy,)
    for got, want, ref, array, whole in zip(dask.compute(*lazy), expected, reference, lazy, case.out_whole):
        assert got.dtype == want.dtype and got.shape == want.shape == array.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, ref)
        # every dim the op keeps stays in the inputs' several chunks; the whole ones are one chunk
        assert [k for k, c in enumerate(array.chunks) if len(c) == 1 and array.shape[k] > 1] == sorted(whole)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_layout_reads_exactly_the_expected_dims_whole(case, request):
    if case.unfolded:
        request.getfixturevalue("no_folding")
    builder, layout = _traced(case)
    graph = builder.graph
    assert [_whole_axes(layout, v) for v in graph.inputs] == list(case.whole)
    assert [_whole_axes(layout, v) for v in graph.outputs] == list(case.out_whole)
    computed = {n.op_type for n in graph.nodes if not all(v.name in builder.constants for v in n.outputs)}
    assert case.op in computed and computed & {"Add", "Sub", "Mul"}


def test_whole_reasons_name_the_op():
    builder, layout = _traced(CASES[0])
    (letter,) = {layout.letters[(builder.graph.inputs[0].name, 1)]}
    assert layout.whole_reason[letter].startswith("Split (node 'split_")


@pytest.mark.parametrize("op, fn, args", [
    ("NonZero", lambda x: dsl.nonzero(x) + 1, (f32(3, 4),)),
    ("Compress", lambda x, c: dsl.compress(x, c, axis=1) * 2.0, (f32(3, 5), MASK5)),
    ("Compress", lambda x, c: dsl.compress(x, c) * 2.0, (f32(3, 5), np.ones(15, bool))),
    ("Range", lambda s: dsl.range(s, np.float32(10), np.float32(1)), (np.float32(2),)),
    ("ConstantOfShape", lambda s: dsl.constant_of_shape(s) + 1.0, (np.array([2, 3], np.int64),)),
    ("Tile", lambda x, r: dsl.tile(x, r) * 2.0, (f32(3, 4), np.array([1, 2], np.int64))),
    ("Pad", lambda x, p: dsl.pad(x, p) * 2.0, (f32(3, 4), np.array([0, 1, 0, 1], np.int64))),
    ("Split", lambda x, s: dsl.split(x, s, axis=1)[0] * 2.0, (f32(3, 4), np.array([1, 3], np.int64))),
    ("OneHot", lambda i, d: dsl.one_hot(i, d, np.array([0.0, 1.0], np.float32)), (ints(0, 3, 4), np.int64(3))),
    ("CenterCropPad", lambda x, s: dsl.center_crop_pad(x, s) * 2.0, (f32(3, 4), np.array([2, 2], np.int64))),
])
def test_shapes_known_only_at_run_time_raise_naming_the_op(op, fn, args):
    with pytest.raises(dsl.UnsupportedError, match=rf"^{op} \(node '\w+'\): output %\w+ has type \w+\[[0-9?,]*\], a "
                                                   r"shape that depends on input values known only at run time"):
        dsl.dask.apply(fn, *(da.from_array(np.asarray(a)) for a in args))


def _split_program(opset: int, inputs: list, initializers: list = (), **attrs):
    helper = pytest.importorskip("onnx.helper")
    from onnx import TensorProto
    graph = helper.make_graph(
        [helper.make_node("Split", inputs, ["a", "b"], axis=1, **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "ab"], list(initializers))
    return dsl.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString())


def test_onnx_splits_with_lengths_or_num_outputs_run_blockwise():
    numpy_helper = pytest.importorskip("onnx.numpy_helper")
    x = f32(4, 6)
    lengths = numpy_helper.from_array(np.int64([4, 2]), "lengths")
    for program in (_split_program(18, ["x"], num_outputs=2), _split_program(11, ["x"], split=[1, 5]),
                    _split_program(13, ["x", "lengths"], [lengths])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RechunkWarning)
            lazy = dsl.dask.apply(program, da.from_array(x, chunks=(2, 3)))
        for got, want, array in zip(dask.compute(*lazy), program.run([x]), lazy):
            np.testing.assert_array_equal(got, want)
            assert len(array.chunks[0]) == 2 and len(array.chunks[1]) == 1


@pytest.mark.parametrize("opset", [11, 13])
def test_onnx_split_by_output_count_raises_naming_the_op(opset):
    """Equal parts by the node's output count: a chunk task replays the op, which has no node."""
    with pytest.raises(dsl.UnsupportedError, match=r"^Split \(node '\w+'\): splits axis 1 into equal parts by its "
                                                   r"output count \(2\), which the chunk tasks do not see"):
        dsl.dask.apply(_split_program(opset, ["x"]), da.from_array(f32(4, 6), chunks=2))


class _Recorder:
    """The planner's side of a chunk rule, recorded."""

    def __init__(self):
        self.joined, self.whole = [], []

    def join(self, a, a_axis, b, b_axis):
        self.joined.append(((a.name, a_axis), (b.name, b_axis)))

    def mark_whole(self, value, axis, node):
        if value.type.shape[axis] != 1:
            self.whole.append((value.name, axis))


def test_shape_size_and_constant_read_everything_whole_and_raise_on_run_time_shapes():
    """Shape and Size of a static shape and every Constant are folded at trace time; their rule
    plans them otherwise (a whole read), and a shape known only at run time raises."""
    def f(x):
        b = x.builder
        return (b.add("Constant", [], {"value_floats": [1.0, 2.0]})[0], b.add("Shape", [x])[0],
                b.add("Size", [dsl.nonzero(x)])[0])
    builder = dsl.jit(f)._trace([dsl.TensorType(dsl.float32, (3, 4))])
    constant, shape, nonzero, size = builder.graph.nodes[:4]
    assert {v.name for n in (constant, shape) for v in n.outputs} <= set(builder.constants)
    for node, whole in ((constant, [(constant.outputs[0].name, 0)]),
                        (shape, [(builder.graph.inputs[0].name, 0), (builder.graph.inputs[0].name, 1),
                                 (shape.outputs[0].name, 0)])):
        recorder = _Recorder()
        registry.get(node.op_type).chunk.relate(recorder, node, builder.calls[id(node)], registry.get(node.op_type))
        assert recorder.whole == whole and not recorder.joined
    with pytest.raises(dsl.UnsupportedError, match=r"^Size \(node 'size_\d+'\): input %\w+ has type int64\[2,\?\]"):
        chunks.WHOLE.relate(_Recorder(), size, builder.calls[id(size)], registry.get("Size"))


def test_every_op_has_a_chunk_rule():
    assert [name for name, op in registry.all_ops().items() if op.chunk is None] == []
