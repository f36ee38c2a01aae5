"""The any-axis reduction schedule (dsl/kir/reduce_schedule.py) on its own: every layout class
(reduced dims first, in the middle, last, several runs), every kind, checked three ways: the
compiled kernel, the interpreter and numpy."""
import itertools

import numpy as np
import pytest

import dsl
from dsl import kir
from dsl.codegen import compile as codegen_compile
from dsl.codegen.loops import kernel_source
from dsl.kir import interp
from dsl.kir import loops as L
from dsl.kir.reduce_schedule import ReduceLayout, reduction_kernel


def params_for(kernel, shape, reduced, strides, start=None, stop=None, split_extent=None):
    layout = ReduceLayout(reduced)
    out_shape = [1 if r else d for d, r in zip(shape, reduced)]
    out_strides = [int(np.prod(out_shape[k + 1:])) if not reduced[k] else 0 for k in range(len(shape))]
    split = shape[layout.split] if layout.split is not None else 1
    values = {"start": 0 if start is None else start, "stop": split if stop is None else stop,
              "count": int(np.prod([d for d, r in zip(shape, reduced) if r]))}
    values.update({f"n{k}": d for k, d in enumerate(shape)})
    values.update({"o0": 0, **{f"s0_{k}": s for k, s in enumerate(strides)}})
    values.update({f"os{k}": t for k, t in enumerate(out_strides)})
    return values, out_shape


def run(kernel, x, shape, reduced, out_dtype, softmax=False):
    strides = [int(np.prod(shape[k + 1:])) for k in range(len(shape))]
    values, out_shape = params_for(kernel, shape, reduced, strides)
    if softmax:
        values.update({f"os{k}": s for k, s in enumerate(strides)})
        out_shape = list(shape)
    L.verify(kernel)
    compiled = codegen_compile.compile_kernel(kernel_source(kernel))
    raw = np.zeros(int(np.prod(out_shape)), kir.types.storage(out_dtype))
    got = raw.view(out_dtype.np_dtype)
    layout = ReduceLayout(reduced)
    split = shape[layout.split] if layout.split is not None else 1
    half = split // 2
    for lo, hi in ((0, half), (half, split)) if layout.split is not None else ((0, 1),):  # two "threads"
        args = {**values, "start": lo, "stop": hi}
        compiled(*[np.uint64(args[p]) for p in kernel.params], x.ravel().view(kir.types.storage(kernel.buffers[0].elem)), raw)
    want = np.zeros_like(got)
    interp.run_kernel(kernel, {"b0": x.ravel(), "out0": want}, values)
    return got.reshape(out_shape), want.reshape(out_shape)


SHAPE = (3, 4, 5)
LAYOUTS = [r for r in itertools.product([False, True], repeat=3) if any(r)]


@pytest.mark.parametrize("reduced", LAYOUTS)
@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean"])
def test_float_reductions_over_any_dims(reduced, kind):
    x = np.random.default_rng(sum(reduced) + len(kind)).standard_normal(SHAPE).astype(np.float32)
    value = kir.binary("mul", kir.leaf(0, dsl.float32), kir.const(2.0, "float32"))
    kernel = reduction_kernel(value, [(dsl.float32, False)], reduced, [(1, 1, 1)], kind, dsl.float32)
    got, want = run(kernel, x, SHAPE, reduced, dsl.float32)
    np.testing.assert_array_equal(got, want)
    axes = tuple(k for k, r in enumerate(reduced) if r)
    numpy = {"sum": lambda v: (v.astype(np.float64) * 2).sum(axes, keepdims=True),
             "mean": lambda v: (v.astype(np.float64) * 2).mean(axes, keepdims=True),
             "max": lambda v: (v * 2).max(axes, keepdims=True), "min": lambda v: (v * 2).min(axes, keepdims=True)}[kind]
    np.testing.assert_allclose(got, numpy(x).astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("reduced", [(True, False, False), (False, True, False), (True, False, True)])
@pytest.mark.parametrize("elem, kind", [(dsl.int32, "sum"), (dsl.int8, "max"), (dsl.uint8, "min"), (dsl.int32, "mean"),
                                        (dsl.float16, "sum"), (dsl.bool, "max")])
def test_integer_narrow_and_bool_reductions(reduced, elem, kind):
    rng = np.random.default_rng(7)
    x = (rng.integers(0, 2, SHAPE).astype(bool) if elem == dsl.bool else
         (rng.standard_normal(SHAPE) * 50).astype(elem.np_dtype))
    kernel = reduction_kernel(kir.leaf(0, elem), [(elem, False)], reduced, [(1, 1, 1)], kind, elem)
    got, want = run(kernel, x, SHAPE, reduced, elem)
    np.testing.assert_array_equal(got, want)
    axes = tuple(k for k, r in enumerate(reduced) if r)
    if kind == "sum" and elem == dsl.int32:
        np.testing.assert_array_equal(got, x.sum(axes, keepdims=True, dtype=np.int32))


@pytest.mark.parametrize("reduced", [(False, True, False), (True, False, False), (False, False, True)])
@pytest.mark.parametrize("math", ["fast", "exact"])
def test_softmax_over_any_axis(reduced, math):
    x = (np.random.default_rng(3).standard_normal(SHAPE) * 3).astype(np.float32)
    kernel = reduction_kernel(kir.leaf(0, dsl.float32), [(dsl.float32, False)], reduced, [(1, 1, 1)], "softmax",
                              dsl.float32, math)
    got, want = run(kernel, x, SHAPE, reduced, dsl.float32, softmax=True)
    axis = reduced.index(True)
    e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
    reference = (e / e.sum(axis, keepdims=True)).astype(np.float32)
    if math == "exact":
        np.testing.assert_array_equal(got, reference)
    np.testing.assert_allclose(got, reference, rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(want, reference, rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("reduced", LAYOUTS)
def test_staged_kernel_layer_norm_over_any_dims(reduced):
    """Stages (dsl/kir/group.py Stage) in every layout class: mean, then the mean of the squared
    deviation using it, then the normalized output using both; compiled (two threads) vs the
    interpreter vs numpy."""
    from dsl.kir.group import Stage
    from dsl.kir.reduce_schedule import staged_kernel
    x = np.random.default_rng(len(reduced) + sum(reduced)).standard_normal(SHAPE).astype(np.float32)
    leaf = kir.leaf(0, dsl.float32)
    mean = kir.var("stage0_", "float32")
    d = kir.binary("sub", leaf, mean)
    var = kir.var("stage1_", "float32")
    out = kir.binary("div", d, kir.unary("sqrt", kir.binary("add", var, kir.const(1e-5, "float32"))))
    axes = tuple(k for k, r in enumerate(reduced) if r)
    stages = [Stage("mean", leaf, mean, dsl.float32, axes, None),
              Stage("mean", kir.binary("mul", d, d), var, dsl.float32, axes, None)]
    kernel = staged_kernel(stages, [out], [dsl.float32], [(dsl.float32, False)], reduced, [(1, 1, 1)])
    got, want = run(kernel, x, SHAPE, reduced, dsl.float32, softmax=True)
    np.testing.assert_array_equal(got, want)
    m = x.astype(np.float64).mean(axes, keepdims=True).astype(np.float32)
    dev = x - m
    v = (dev * dev).astype(np.float64).mean(axes, keepdims=True).astype(np.float32)
    np.testing.assert_array_equal(got, dev / np.sqrt(v + np.float32(1e-5)))
