"""Concat fused into elementwise kernels (dsl/kir/expr.py Pick, lowered by dsl/kir/elementwise.py into
guarded loads): each input read only inside its own range, equal to numpy; the cases the fused form
does not take (a view after it, a reduction's kernel, many inputs) run numpy's concatenate and are
just as exact. CI runs this file with numba's bounds checks too (.ci/run)."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.passes.fuse import KernelStep, NodeStep

RNG = np.random.default_rng(11)


def steps(fn, *args):
    executable = fn.executable(*args)
    return executable, [s for s in executable.steps if isinstance(s, NodeStep) and s.node.op_type == "Concat"]


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("sizes", [(2, 3), (1, 0, 4), (5,), (1, 1, 1, 1, 1)])
def test_fused_concat_equals_numpy_along_any_axis(axis, sizes):
    shape = [3, 4, 5]
    parts = []
    for size in sizes:
        part_shape = list(shape)
        part_shape[axis] = size
        parts.append(RNG.standard_normal(part_shape).astype(np.float32))
    f = dsl.jit(lambda *xs: dsl.concat(list(xs), axis) * 2.0 + 1.0)
    got = f(*parts)
    np.testing.assert_array_equal(got, np.concatenate(parts, axis) * np.float32(2) + np.float32(1))
    executable, numpy_steps = steps(f, *parts)
    assert not numpy_steps and executable.kernel_count == 1, executable.explain(source=False)
    assert "Concat" in executable.explain(source=False).splitlines()[0]


@pytest.mark.parametrize("np_type", [np.float16, ml_dtypes.bfloat16, np.int8, np.bool_, np.int64])
def test_fused_concat_of_each_type_and_broadcast_operands(np_type):
    a = (RNG.standard_normal((2, 6)) * 5).astype(np_type)
    b = (RNG.standard_normal((3, 6)) * 5).astype(np_type)
    bias = (RNG.standard_normal((4, 1, 6)) * 5).astype(np_type)
    op = dsl.logical_or if np_type is np.bool_ else dsl.add
    f = dsl.jit(lambda a, b, c: op(dsl.concat([a, b], 0), c))  # (the concat broadcast to [4, 5, 6])
    want = dsl.jit(lambda a, b, c: op(dsl.concat([a, b], 0), c), math="exact")(a, b, bias)
    eager = op(np.concatenate([a, b], 0), bias)
    np.testing.assert_array_equal(f(a, b, bias), eager)
    np.testing.assert_array_equal(want, eager)
    assert not steps(f, a, b, bias)[1]


def test_strided_inputs_and_one_element_axes():
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    g = dsl.jit(lambda x, y: dsl.concat([x, y], 0) - 1.0)
    np.testing.assert_array_equal(g(x.T, x.T), np.concatenate([x.T, x.T]) - np.float32(1))  # (strided views)
    assert not steps(g, x.T, x.T)[1]
    one = np.ones((1, 3), np.float32)
    h = dsl.jit(lambda a, b: dsl.concat([a, b], 0) * 2.0)  # a joined axis of one element: nothing to guard
    np.testing.assert_array_equal(h(one, one[:0]), one * 2)
    assert steps(h, one, one[:0])[1]


def test_kv_cache_append_and_rope_halves_are_one_kernel():
    cache = RNG.standard_normal((2, 8, 30, 16)).astype(np.float32)
    new = RNG.standard_normal((2, 8, 1, 16)).astype(np.float32)
    append = dsl.jit(lambda c, n: dsl.concat([c, n], 2))
    np.testing.assert_array_equal(append(cache, new), np.concatenate([cache, new], 2))
    assert append.executable(cache, new).kernel_count == 1 and not steps(append, cache, new)[1]

    def rotate_half(x):
        return dsl.concat([-x[..., 8:], x[..., :8]], -1)
    rope = dsl.jit(lambda x, cos, sin: x * cos + rotate_half(x) * sin)
    x = RNG.standard_normal((2, 5, 16)).astype(np.float32)
    cos, sin = np.cos(x[0]), np.sin(x[0])
    want = x * cos + np.concatenate([-x[..., 8:], x[..., :8]], -1) * sin
    np.testing.assert_allclose(rope(x, cos, sin), want, rtol=1e-6, atol=1e-6)
    assert rope.executable(x, cos, sin).kernel_count == 1  # (the Neg and the slices fused into the parts)


def test_each_part_computes_its_producers_where_guarded():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4)).astype(np.float32)
    f = dsl.jit(lambda a, b: dsl.concat([dsl.exp(a), b * 2.0 + a[:2], dsl.abs(a[1:2])], 0) - 1.0)
    want = np.concatenate([np.exp(a), b * np.float32(2) + a[:2], np.abs(a[1:2])]) - np.float32(1)
    np.testing.assert_allclose(f(a, b), want, rtol=1e-6)
    np.testing.assert_array_equal(f(a, b)[3:], want[3:])  # (no exp there: exact)
    assert f.executable(a, b).kernel_count == 1 and not steps(f, a, b)[1]
    # a concatenation inside another's part computes on its own, the outer one still fuses
    g = dsl.jit(lambda a, b: dsl.concat([dsl.concat([a, a], 1) * 2.0, dsl.concat([b, b], 1)], 0))
    np.testing.assert_array_equal(g(a, b), np.concatenate([np.concatenate([a, a], 1) * 2, np.concatenate([b, b], 1)]))
    assert len(steps(g, a, b)[1]) == 2


def test_where_the_fused_form_does_not_fit_numpy_runs_it():
    a, b = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((4, 3)).astype(np.float32)
    cases = {
        "a view after it": (lambda a, b: dsl.transpose(dsl.concat([a, b], 0) + 1.0, [1, 0]),
                            lambda a, b: (np.concatenate([a, b]) + 1).T),
        "a reduction of it": (lambda a, b: dsl.reduce_sum(dsl.concat([a, b], 0) * 2.0, [-1]),
                              lambda a, b: (np.concatenate([a, b]) * 2).sum(-1, keepdims=True)),
        "a softmax of it": (lambda a, b: dsl.softmax(dsl.concat([a, b], 1)),
                            None),
        "nine inputs": (lambda a, b: dsl.concat([a] * 8 + [b], 0) + 0.5,
                        lambda a, b: np.concatenate([a] * 8 + [b]) + np.float32(0.5)),
    }
    for name, (fn, reference) in cases.items():
        f = dsl.jit(fn)
        if reference is None:
            b2 = RNG.standard_normal((2, 5)).astype(np.float32)
            got, want = f(a, b2), dsl.softmax(np.concatenate([a, b2], 1))
            assert steps(f, a, b2)[1], name
        else:
            got, want = f(a, b), reference(a, b)
            assert steps(f, a, b)[1], name  # (numpy's concatenate ran)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)


def test_a_concatenation_that_is_the_output_is_a_kernel_of_its_own():
    a, b = RNG.standard_normal((3, 2)).astype(np.float32), RNG.standard_normal((3, 7)).astype(np.float32)
    f = dsl.jit(lambda a, b: (dsl.concat([a, b], 1), dsl.concat([b, a], -1) * 3.0))
    first, second = f(a, b)
    np.testing.assert_array_equal(first, np.concatenate([a, b], 1))
    np.testing.assert_array_equal(second, np.concatenate([b, a], -1) * np.float32(3))
    executable = f.executable(a, b)
    assert all(isinstance(s, KernelStep) for s in executable.steps) and not steps(f, a, b)[1]


def test_large_concat_threads_and_streams_like_any_elementwise_kernel():
    a = RNG.standard_normal((1024, 2048)).astype(np.float32)
    b = RNG.standard_normal((1024, 2048)).astype(np.float32)
    f = dsl.jit(lambda a, b: dsl.concat([a, b], 0) * 2.0)
    np.testing.assert_array_equal(f(a, b), np.concatenate([a, b]) * np.float32(2))
    g = dsl.jit(lambda a, b: dsl.concat([a, b], 1) + a[:, :1])
    np.testing.assert_array_equal(g(a, b), np.concatenate([a, b], 1) + a[:, :1])


def test_outer_axis_parts_run_as_loops_over_their_ranges_inner_axis_parts_as_guarded_loads():
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((2, 4)).astype(np.float32)
    rows = dsl.jit(lambda a, b: dsl.concat([a, b], 0) * 2.0)
    source = rows.executable(a, b).runners[0].source_for_contiguous().split("def kernel")[1]
    assert " if " not in source and "g1_lo" in source  # one loop per part, no per-element choice
    cols = dsl.jit(lambda a, b: dsl.concat([a, dsl.transpose(b, [1, 0])], 1) * 2.0)
    bt = RNG.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(cols(a, bt), np.concatenate([a, bt.T], 1) * np.float32(2))
    source = cols.executable(a, bt).runners[0].source_for_contiguous().split("def kernel")[1]
    assert " if " in source  # (the joined axis is the inner one: guarded loads)
