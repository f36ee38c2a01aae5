"""Tests for dsl/trace.py: Python operators on traced values, NEP 50 weak scalars, trace-time errors, outputs."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import dsl

X = np.array([[-2.5, -1.0, 0.0], [0.5, 2.0, 3.0]], np.float32)
Y = np.array([1.5, -4.0, 2.0], np.float32)
I = np.array([-7, -1, 0, 2, 5, 100], np.int32)


def ops_of(program) -> list[str]:
    return [node.op_type for node in program.graph.nodes]


def constants_of(program) -> list:
    return list(program.graph.initializers.values())


# ---- Python operators become ONNX nodes ----------------------------------------------------------
def arithmetic(x, y):
    return (x + 1, 2 - x, x * 0.5, 1.0 / y, x ** 2, -x, x / y, x - y, abs(x), 3 * x, y + x, -1.5 + x)


def arithmetic_numpy(x, y):
    one = lambda v: np.array(v, x.dtype)  # noqa: E731  (a weak scalar takes the tensor's type)
    return (x + one(1), one(2) - x, x * one(0.5), one(1) / y, x ** one(2), -x, x / y, x - y, np.abs(x),
            one(3) * x, y + x, one(-1.5) + x)


def test_arithmetic_operators_trace_to_onnx_ops_with_weak_scalars():
    program = dsl.jit(arithmetic).lower(dsl.TensorType(dsl.float16, (2, 3)), dsl.TensorType(dsl.float16, (3,)))
    assert [op for op in ops_of(program) if op != "Identity"] == [
        "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Div", "Sub", "Abs", "Mul", "Add", "Add"]
    assert all(c.dtype == np.float16 and c.shape == () for c in constants_of(program))
    assert all(t.dtype is dsl.float16 for t in program.output_types)
    x, y = X.astype(np.float16), Y.astype(np.float16)
    for got, want in zip(program.run({"x": x, "y": y}, engine="numpy"), arithmetic_numpy(x, y)):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want)


def test_reflected_operators_keep_operand_order():
    program = dsl.jit(lambda x: (2.0 - x, 1.0 / x, 2.0 ** x)).lower(X)
    for node in program.graph.nodes:
        assert node.inputs[0].name in program.graph.initializers and node.inputs[1].name == "x"


def test_arithmetic_operators_compile_into_one_exact_kernel():
    f = dsl.jit(lambda x, y: -((1.0 - x) * 2.0 + x / y - 3.0) / (abs(y) + 0.25))
    one = lambda v: np.float32(v)  # noqa: E731
    want = -((one(1) - X) * one(2) + X / Y - one(3)) / (np.abs(Y) + one(0.25))
    got = f(X, Y)
    assert got.dtype == np.float32 and f.executable(X, Y).kernel_count == 1
    np.testing.assert_array_equal(got, want)


def test_integer_operators_wrap_and_truncate_like_onnx():
    f = dsl.jit(lambda i: (i + 1) * 3 - (i / 2) + (2 ** 3) - i ** 2 + -i)
    got = f(I)
    wide = I.astype(np.int64)
    want = ((wide + 1) * 3 - np.trunc(wide / 2).astype(np.int64) + 8 - wide ** 2 - wide).astype(np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_comparison_and_logic_operators():
    f = dsl.jit(lambda x: (x < 1, x <= 0, x > 0.5, x >= 2, x == 0, x != 0, 1 < x, ~(x > 0),
                           (x > -2) & (x < 2), (x < -2) | (x > 2), (x > 0) & True, False | (x > 0)))
    program = f.lower(X)
    assert [op for op in ops_of(program) if op != "Identity"] == [
        "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal", "Equal", "Not", "Greater", "Greater", "Not",
        "Greater", "Less", "And", "Less", "Greater", "Or", "Greater", "And", "Greater", "Or"]
    wants = (X < 1, X <= 0, X > 0.5, X >= 2, X == 0, X != 0, X > 1, ~(X > 0), (X > -2) & (X < 2),
             (X < -2) | (X > 2), X > 0, X > 0)
    for got, want in zip(program.run([X], engine="numpy"), wants):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)
    combined = dsl.jit(lambda x: ((x < 1) | (x >= 2.5)) & ~(x == 0) | (x != x))
    np.testing.assert_array_equal(combined(X), ((X < 1) | (X >= 2.5)) & ~(X == 0))


@pytest.mark.parametrize("dtype, scalar", [(np.int8, 3), (np.uint16, 7), (ml_dtypes.bfloat16, 0.1),
                                           (np.float16, 1e-3), (np.float64, 0.1), (np.bool_, True)])
def test_weak_python_scalars_take_the_tensor_type(dtype, scalar):
    op = (lambda x: x | scalar) if dtype == np.bool_ else (lambda x: x * scalar)
    program = dsl.jit(op).lower(np.ones(2, dtype))
    (constant,) = constants_of(program)
    assert constant.dtype == np.dtype(dtype) and constant == np.array(scalar, dtype)
    assert program.output_types[0].dtype is dsl.dtype(np.dtype(dtype))


@pytest.mark.parametrize("fn, x, error, match", [
    (lambda x: x + 1000, np.ones(2, np.int8), dsl.InputError, r"^Add: Python int 1000 does not fit in int8 \[-128, 127\]"),
    (lambda x: x - (-1), np.ones(2, np.uint8), dsl.InputError, r"^Sub: Python int -1 does not fit in uint8 \[0, 255\]"),
    (lambda x: x * 1.5, np.ones(2, np.int32), dsl.InputError, r"^Mul: Python float 1\.5 mixed with a int32 tensor"),
    (lambda x: x ** 2.0, np.ones(2, np.int8), dsl.InputError, r"^Pow: Python float 2\.0 mixed with a int8 tensor"),
    (lambda x: x & 1, np.ones(2, np.bool_), dsl.InputError, r"^And: Python int 1 mixed with a bool tensor"),
    (lambda x: x == 1.5, np.ones(2, np.bool_), dsl.InputError, r"^Equal: Python float 1\.5 mixed with a bool tensor"),
    # NEP 50: numpy scalars are strongly typed, inside dsl.jit as eagerly
    (lambda x: x + np.float64(1.5), np.ones(2, np.float32), dsl.DTypeError, r"^Add \(node '.*'\): input 'B' has "
     r"element type double but an earlier input of the same type variable has float"),
])
def test_bad_python_scalars_are_dsl_errors_like_the_eager_functions(fn, x, error, match):
    with pytest.raises(error, match=match):
        dsl.jit(fn).lower(x)


def test_numpy_scalar_of_the_tensor_type_is_accepted():
    got = dsl.jit(lambda x: x + np.float32(0.5))(X)
    np.testing.assert_array_equal(got, X + np.float32(0.5))


# ---- trace-time errors name the op ---------------------------------------------------------------
@pytest.mark.parametrize("fn, args, error, match", [
    (lambda x: dsl.unsqueeze(x, [5]), (X,), dsl.ShapeError,
     r"^Unsqueeze \(node 'unsqueeze_\d+'\): axis 5 out of range \[-3, 2\] for output rank 3"),
    (lambda x, y: x + y, (X, np.ones(4, np.float32)), dsl.ShapeError,
     r"^Add \(node 'add_\d+'\): shapes \[2, 3\] and \[1, 4\] are not broadcastable"),
    (lambda x: dsl.transpose(x, [0, 0]), (X,), dsl.ShapeError, r"^Transpose \(node .*\): perm \[0, 0\] is not a permutation"),
    (lambda x: dsl.reshape(x, [4, 4]), (X,), dsl.ShapeError, r"^Reshape \(node .*\): cannot reshape \[2, 3\]"),
    (lambda x: dsl.reduce_sum(x, [2]), (X,), dsl.ShapeError, r"^ReduceSum \(node .*\): axis 2 out of range \[-2, 1\]"),
    (lambda x: dsl.squeeze(x, [0]), (X,), dsl.ShapeError, r"^Squeeze \(node .*\)"),
    (lambda x: dsl.cast(x, dsl.int4) + 1, (X,), dsl.DTypeError, r"^Add \(node .*\): input 'A' has type int4\[2,3\]"),
])
def test_errors_raise_at_trace_time_and_name_the_op(fn, args, error, match):
    f = dsl.jit(fn)
    with pytest.raises(error, match=match):
        f.lower(*args)  # tracing alone raises: nothing is compiled
    with pytest.raises(error, match=match):
        f(*args)
    with pytest.raises(error, match=match):  # a failed trace is not cached
        f(*args)


def test_python_control_flow_on_tensor_values_raises():
    with pytest.raises(dsl.DslError, match=r"^jit: the truth value of traced tensor %v\d+ is not known at trace time; use dsl.where"):
        dsl.jit(lambda x: x if x > 0 else -x)(X)
    with pytest.raises(dsl.DslError, match=r"truth value"):
        dsl.jit(lambda x: x if bool(x) else x).lower(X)
    with pytest.raises(dsl.DslError, match=r"traced tensor %x cannot become a numpy array"):
        dsl.jit(lambda x: np.asarray(x)).lower(X)  # (np.sum(x) is x.sum() now: dsl/frontend.py)


def test_python_control_flow_on_static_shapes_specializes_per_signature():
    f = dsl.jit(lambda x: x * 2.0 if x.ndim == 2 and x.shape[0] == 2 else x * 3.0)
    np.testing.assert_array_equal(f(X), X * 2)
    np.testing.assert_array_equal(f(Y), Y * 3)
    assert f(X).dtype == np.float32 and f.lower(X).graph.nodes[0].op_type == "Mul"


@pytest.mark.parametrize("fn, match", [
    (lambda x: 3, r"returned int as output 0; expected tensors computed from its inputs"),
    (lambda x: None, r"returned NoneType as output 0"),
    (lambda x: (x + 1, np.ones(3)), r"returned ndarray as output 1"),
    (lambda x: x.dtype, r"returned DType as output 0"),
])
def test_returning_non_tensors_raises(fn, match):
    with pytest.raises(dsl.DslError, match=match):
        dsl.jit(fn).lower(X)


def test_a_traced_value_leaking_into_another_function_raises():
    leaked = []
    dsl.jit(lambda x: leaked.append(x) or x + 1.0).lower(X)
    with pytest.raises(dsl.DslError, match=r"^Add: input %x belongs to another traced function"):
        dsl.jit(lambda y: y + leaked[0])(X)
    with pytest.raises(dsl.DslError, match=r"^Mul: input %y belongs to another traced function"):
        dsl.jit(lambda y: leaked[0] * y)(X)
    with pytest.raises(dsl.DslError, match=r"output 0 of <lambda> belongs to another traced function"):
        dsl.jit(lambda y: leaked[0]).lower(X)


# ---- outputs -------------------------------------------------------------------------------------
def test_multiple_outputs_come_back_as_a_tuple_in_order():
    f = dsl.jit(lambda x, y: (x + y, x * y, [x][0] - y))
    outs = f(X, Y)
    assert isinstance(outs, tuple) and len(outs) == 3
    for got, want in zip(outs, (X + Y, X * Y, X - Y)):
        np.testing.assert_array_equal(got, want)
    assert isinstance(dsl.jit(lambda x: [x + 1.0, x])(X), tuple)


def test_an_input_returned_as_output_is_a_view_of_it():
    x = X.copy()
    f = dsl.jit(lambda x, y: (x, y + 1.0))
    out, _ = f(x, Y)
    np.testing.assert_array_equal(out, X)
    assert np.shares_memory(out, x) and f.executable(x, Y).kernel_count == 1
    assert ops_of(f.lower(x, Y)) == ["Add", "Identity"]


def test_the_same_output_twice_gets_distinct_graph_outputs():
    f = dsl.jit(lambda x: (lambda y: (y, y, x, x))(x * 2.0))
    program = f.lower(X)
    assert len({v.name for v in program.graph.outputs}) == 4
    a, b, c, d = f(X)
    for got, want in ((a, X * 2), (b, X * 2), (c, X), (d, X)):
        np.testing.assert_array_equal(got, want)
    assert f.executable(X).kernel_count == 1  # the repeat is a view, not a second kernel


# ---- lowering to a Program -----------------------------------------------------------------------
def test_lower_with_symbolic_dims_gives_a_readable_program():
    @dsl.jit
    def f(x, bias):
        m = dsl.unsqueeze(dsl.cast(x, dsl.float32), [0, -1])
        return m * 2.0 + bias, dsl.reduce_sum(x, [-1], keepdims=False)

    program = f.lower(dsl.TensorType(dsl.float32, ("N", 5)), dsl.TensorType(dsl.float32, (5, 1)))
    assert isinstance(program, dsl.Program) and program.input_names == ["x", "bias"]
    assert program.input_types["x"] == dsl.TensorType(dsl.float32, ("N", 5))
    assert program.output_types[0] == dsl.TensorType(dsl.float32, (1, "N", 5, 1))
    assert program.output_types[1] == dsl.TensorType(dsl.float32, ("N",))
    text = str(program)
    for expected in ("graph f(%x: float[N,5], %bias: float[5,1])", "= Unsqueeze(", "float[1,N,5,1] = Mul(",
                     "= Cast(%x)", "initializer int64[2] [0, -1]", "return %"):
        assert expected in text, text
    for rows in (1, 4):
        x = np.arange(rows * 5, dtype=np.float32).reshape(rows, 5)
        bias = np.linspace(-1, 1, 5, dtype=np.float32).reshape(5, 1)
        got = program.run({"x": x, "bias": bias})
        np.testing.assert_array_equal(got[0], x[None, :, :, None] * np.float32(2) + bias)
        np.testing.assert_array_equal(got[1], x.sum(-1))


def test_parameter_names_become_input_names():
    assert dsl.jit(lambda *xs: xs[0] + xs[1]).lower(Y, Y).input_names == ["arg0", "arg1"]
    assert dsl.jit(lambda mask, scores: scores + mask).lower(Y, Y).input_names == ["mask", "scores"]


def test_jit_opset_selects_op_versions():
    program = dsl.jit(lambda x: dsl.unsqueeze(x, [0]), opset=11).lower(X)
    assert program.graph.opset == 11 and program.graph.nodes[0].attrs == {"axes": [0]}
    with pytest.raises(dsl.InputError, match=r"^Unsqueeze: opset=13 inside a function traced at opset 11"):
        dsl.jit(lambda x: dsl.unsqueeze(x, [0], opset=13), opset=11).lower(X)


def test_bad_arguments_are_dsl_errors_and_numpy_scalars_are_0d_arrays():
    f = dsl.jit(lambda x: x + 1.0)
    got = f(np.float32(2.5))  # as Program.run takes them
    assert isinstance(got, np.ndarray) and got.shape == () and got == np.float32(3.5)
    with pytest.raises(dsl.InputError, match=r"argument 0 is a float; expected a numpy array"):
        f(3.0)
    with pytest.raises(dsl.InputError, match=r"argument 0 is a list"):
        f([1.0])


def test_a_traced_value_used_after_its_trace_ended_raises():
    # an escaped tracer used eagerly, or passed to another jit function, once its trace is over
    box = []
    dsl.jit(lambda a: (box.append(a), a + 1.0)[1])(X)
    with pytest.raises(dsl.DslError, match=r"^Add: a traced value of <lambda> was used after its trace ended"):
        dsl.add(box[0], X)
    with pytest.raises(dsl.DslError, match=r"used after its trace ended"):
        dsl.jit(lambda a: a * 2.0)(box[0])
    with pytest.raises(dsl.DslError, match=r"used after its trace ended"):
        box[0] - 1.0
