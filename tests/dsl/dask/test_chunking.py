"""Chunk rules per op (dsl/dask/chunking.py): which dims share a blockwise index, which must be
whole, which nodes are reshape boundaries. Pure planning: no dask graph is built here."""
from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.dask.chunking import axis_pairs, plan_layout


def layout_of(fn, *args):
    builder = dsl.jit(fn)._trace([dsl.TensorType(a.dtype if isinstance(a, dsl.Tensor) else dsl.dtype(a.dtype), a.shape)
                                  for a in args])
    graph = builder.graph
    values = {v.name: v for v in graph.inputs}
    values.update((v.name, v) for n in graph.nodes for v in n.outputs)
    return plan_layout(graph, builder.calls, builder.constants), graph, values


@pytest.mark.parametrize("in_shape, out_shape, pairs", [
    ((4, 64), (4, 1, 1, 64), [(0, 0), (1, 3)]),
    ((1, 5, 1), (5,), [(1, 0)]),
    ((2, 3), (2, 3), [(0, 0), (1, 1)]),
    ((4, 6), (24,), None), ((2, 6), (2, 3, 2), None), ((6, 1), (1, 2, 3), None),
])
def test_axis_pairs_only_for_inserted_or_removed_unit_dims(in_shape, out_shape, pairs):
    assert axis_pairs(in_shape, out_shape) == pairs


def test_mask_pipeline_letters_follow_broadcasting_and_softmax_reads_its_axis_whole():
    def f(mask, scores):
        return dsl.softmax(scores + (1.0 - dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])) * -1e4, axis=-1)
    layout, graph, values = layout_of(f, np.zeros((4, 64), bool), np.zeros((4, 3, 16, 64), np.float32))
    mask, scores = (layout.index(v) for v in graph.inputs)
    assert mask == (scores[0], scores[3]) and len(set(scores)) == 4
    assert layout.index(graph.outputs[0]) == scores
    assert layout.whole == {scores[3]} and layout.whole_reason[scores[3]].startswith("Softmax (node")
    assert not layout.boundaries and layout.extent[scores[3]] == 64


def test_reductions_keep_their_other_dims_and_mark_reduced_ones_whole():
    layout, graph, _ = layout_of(lambda x: (dsl.reduce_sum(x, [1], keepdims=0), dsl.reduce_max(x, [0])),
                                 np.zeros((5, 7), np.float32))
    (x,) = (layout.index(v) for v in graph.inputs)
    total, peak = (layout.index(v) for v in graph.outputs)
    assert total == (x[0],) and peak == (None, x[1]) and layout.whole == {x[0], x[1]}


def test_transpose_permutes_and_expand_broadcasts():
    layout, graph, _ = layout_of(lambda x, b: dsl.transpose(x, [1, 0]) * dsl.expand(b, [6, 5]),
                                 np.zeros((5, 6), np.float32), np.zeros((6, 1), np.float32))
    x, b = (layout.index(v) for v in graph.inputs)
    assert layout.index(graph.outputs[0]) == (x[1], x[0]) and b == (x[1], None) and not layout.whole


def test_a_merging_reshape_is_a_boundary_and_a_unit_dim_one_is_not():
    layout, graph, _ = layout_of(lambda x: dsl.reshape(x, [24]) + dsl.reshape(dsl.reshape(x, [4, 1, 6]), [24]),
                                 np.zeros((4, 6), np.float32))
    reshapes = [n for n in graph.nodes if n.op_type == "Reshape"]
    assert {n.name for n in reshapes if n.name in layout.boundaries} == {reshapes[0].name, reshapes[2].name}
    assert layout.index(reshapes[1].outputs[0]) == (layout.index(graph.inputs[0])[0], None,
                                                    layout.index(graph.inputs[0])[1])


def test_matmul_ties_k_and_reads_it_whole_batch_dims_broadcast():
    layout, graph, _ = layout_of(lambda a, b: dsl.matmul(a, b), np.zeros((3, 4, 8), np.float32),
                                 np.zeros((8, 5), np.float32))
    a, b = (layout.index(v) for v in graph.inputs)
    assert a[2] == b[0] and layout.whole == {a[2]}
    assert layout.index(graph.outputs[0]) == (a[0], a[1], b[1])


def test_per_axis_and_blocked_quantization_parameters():
    values = dsl.Tensor.from_numpy(np.zeros((8, 6), dsl.int4.np_dtype))
    layout, graph, _ = layout_of(lambda w, s: dsl.dequantize_linear(w, s, axis=0), values, np.zeros(8, np.float32))
    w, s = (layout.index(v) for v in graph.inputs)
    assert s == (w[0],) and not layout.whole
    layout, graph, _ = layout_of(lambda w, s: dsl.dequantize_linear(w, s, axis=1, block_size=2), values,
                                 np.zeros((8, 3), np.float32))
    w, s = (layout.index(v) for v in graph.inputs)
    assert s[0] == w[0] and s[1] != w[1] and {w[1], s[1]} <= layout.whole


def test_castlike_target_is_type_only():
    def f(x, like):
        return x.builder.add("CastLike", [x, like])[0]
    layout, graph, _ = layout_of(f, np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float16))
    (node,) = graph.nodes
    assert layout.type_only == {(node.name, 1)}
    assert layout.index(graph.inputs[1]) == (None, None) or layout.index(graph.inputs[1]) != layout.index(graph.inputs[0])
