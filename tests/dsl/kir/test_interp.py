"""The kernel IR against its reference interpreter (dsl/kir/interp.py): random programs are traced
and fused, and every kernel's IR, evaluated by the interpreter on the kernel's own inputs, must
give what the compiled numba kernel gives (bit for bit, but for float math, which the
interpreter rounds from float64: there within a few ulp)."""
import os

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
from dsl.kir import interp
from dsl.passes.fuse import KernelStep
from dsl.view import BlockedView, View

TYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "double": np.float64,
         "int8": np.int8, "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "uint32": np.uint32}
CASTS = ["float", "float16", "bfloat16", "float8e4m3fn", "float8e5m2", "int4", "uint4", "int8", "int32", "uint8",
         "double", "bool"]
FLOAT_VALUES = [0.0, -0.0, 1.0, -1.5, 2.5, 3.0, 1e-3, -7.25, 100.0, 65504.0, 1e30, np.inf, -np.inf, np.nan, 1e-40]
FLOAT_UNARY = ["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "relu", "reciprocal", "neg", "abs"]
INEXACT = {"exp", "log", "tanh", "sigmoid", "erf", "pow"}  # float math: libm calls vs float64-rounded


def values_of(draw, name: str, shape) -> np.ndarray:
    np_type = TYPES[name]
    size = int(np.prod(shape))
    if name in ("float32", "float16", "bfloat16", "double"):
        picks = draw(st.lists(st.sampled_from(FLOAT_VALUES), min_size=size, max_size=size))
        with np.errstate(all="ignore"):
            return np.array(picks, np.float64).astype(np_type).reshape(shape)
    info = np.iinfo(np_type)
    edges = [int(info.min), int(info.max), 0, 1, 2, 7, int(info.max) - 1] + ([-1, -2, -7] if info.min < 0 else [3])
    return np.array(draw(st.lists(st.sampled_from(edges), min_size=size, max_size=size)), np_type).reshape(shape)


def draw_program(draw):
    name = draw(st.sampled_from(list(TYPES)))
    is_float = name in ("float32", "float16", "bfloat16", "double")
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    inputs = [values_of(draw, name, shape)]
    for _ in range(draw(st.integers(0, 2))):
        sub = tuple(d if draw(st.booleans()) else 1 for d in shape)
        inputs.append(values_of(draw, name, sub))
    steps, used = [], set()
    for _ in range(draw(st.integers(1, 6))):
        kinds = ["binary", "cast", "compare"] + (["unary", "pow"] if is_float else ["int_unary"])
        kind = draw(st.sampled_from(kinds))
        other = draw(st.integers(0, len(inputs) - 1))
        if kind == "binary":
            op = draw(st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum"]))
            steps.append(f"y = dsl.{op}(y, a{other})" if draw(st.booleans()) else f"y = dsl.{op}(a{other}, y)")
        elif kind == "unary":
            op = draw(st.sampled_from(FLOAT_UNARY))
            used.add(op)
            steps.append(f"y = dsl.{op}(y)")
        elif kind == "int_unary":
            steps.append(f"y = dsl.{draw(st.sampled_from(['neg', 'abs']))}(y)" if name.startswith("int")
                         else "y = dsl.maximum(y, a0)")
        elif kind == "pow":
            used.add("pow")
            steps.append(f"y = dsl.pow(y, np.array({draw(st.sampled_from([2, 3, -1, 0]))}, np.int32))")
        elif kind == "compare":
            op = draw(st.sampled_from(["less", "greater_equal", "equal"]))
            steps.append(f"y = dsl.where(dsl.{op}(y, a{other}), y, a{other})")
        else:
            target = draw(st.sampled_from(CASTS))
            steps.append(f"y = dsl.cast(dsl.cast(y, {target!r}), {name!r})")
    return name, inputs, steps, used


def leaf_array(value: np.ndarray, path: tuple) -> np.ndarray:
    """What a group input reads: ``value`` seen through its View path (no blocked views here)."""
    view = View.contiguous(value.shape)
    flat = np.ascontiguousarray(value).reshape(-1)
    for _, transform in path:
        moved = transform(view)
        if moved is None:  # a step that cannot stay a view reads a contiguous copy
            flat = np.ascontiguousarray(np.ndarray(view.shape, flat.dtype, flat, view.offset * flat.itemsize,
                                                   [s * flat.itemsize for s in view.strides])).reshape(-1)
            view = View.contiguous(view.shape)
            moved = transform(view)
        view = moved
    assert not isinstance(view, BlockedView)
    return np.ndarray(view.shape, flat.dtype, flat, view.offset * flat.itemsize, [s * flat.itemsize for s in view.strides])


EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "60"))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES == 60, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_kernels_match_their_ir_evaluated_by_the_interpreter(data):
    name, inputs, steps, used = draw_program(data.draw)
    params = ", ".join(f"a{k}" for k in range(len(inputs)))
    source = "\n".join([f"def program({params}):", "    y = a0", *[f"    {s}" for s in steps], "    return y"])
    note(source)
    note(repr(inputs))
    namespace = {"dsl": dsl, "np": np}
    exec(source, namespace)  # noqa: S102 (the drawn program)
    f = dsl.jit(namespace["program"])
    with np.errstate(all="ignore"):
        got = f(*inputs)
    executable = f.executable(*inputs)
    kernels = [s for s in executable.steps if isinstance(s, KernelStep)]
    if not kernels:
        return  # a pure view program
    (step,) = kernels
    env = {**executable.constants, **dict(zip(executable.input_names, inputs))}
    leaves = {i: leaf_array(np.asarray(env[leaf.value.name]), leaf.path) for i, leaf in enumerate(step.group.leaves)}
    (want,) = interp.evaluate(step.group.outputs, leaves)
    sink = step.group.sinks[0].type.dtype
    got_domain = interp.domain_values(np.asarray(got), sink)
    want = np.broadcast_to(want, got_domain.shape)
    note(f"got {got_domain!r}\nwant {want!r}")
    if used & INEXACT and got_domain.dtype.kind == "f":
        np.testing.assert_allclose(got_domain, want, rtol=2e-5 if got_domain.dtype == np.float32 else 1e-12,
                                   atol=1e-30, equal_nan=True)
    elif not used & INEXACT:
        assert got_domain.dtype == want.dtype
        assert got_domain.tobytes() == np.ascontiguousarray(want).tobytes() or \
            np.array_equal(got_domain, want, equal_nan=got_domain.dtype.kind == "f")
