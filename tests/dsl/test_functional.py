"""Tests for dsl/functional.py: the public op functions eagerly and traced, Python scalars (NEP 50), docs."""
from __future__ import annotations

import doctest

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import functional

BINARY = ["add", "sub", "mul", "div", "pow", "equal", "less", "greater", "less_equal", "greater_equal", "matmul"]
UNARY = ["neg", "abs", "exp", "log", "sqrt", "reciprocal", "tanh", "sigmoid", "relu", "erf"]


def test_docstring_examples_run():
    failures, tried = doctest.testmod(functional, raise_on_error=False)
    assert tried >= 32 and failures == 0


def test_every_function_is_exported():
    for name in BINARY + UNARY + ["logical_not", "logical_and", "logical_or", "where", "maximum", "minimum", "clip",
                                 "reduce_sum", "reduce_max", "reduce_mean", "softmax"]:
        assert getattr(dsl, name) is getattr(functional, name) and name in dsl.__all__


@pytest.mark.parametrize("name", BINARY)
def test_binary_functions_eager_and_traced_agree(name):
    fn = getattr(dsl, name)
    a = np.array([[1.5, 2.0], [3.0, 0.25]], np.float32)
    b = np.array([[2.0, 0.5], [1.0, 4.0]], np.float32)
    kernel = dsl.jit(lambda a, b: fn(a, b))
    np.testing.assert_array_equal(kernel(a, b), fn(a, b))


@pytest.mark.parametrize("name", UNARY)
def test_unary_functions_accept_python_lists_and_tensors(name):
    fn = getattr(dsl, name)
    x = np.array([0.5, 1.0], np.float32)
    np.testing.assert_array_equal(fn(dsl.Tensor.from_numpy(x)).numpy(), fn(x))
    assert fn([0.5, 1.0]).dtype == np.float64


def test_python_scalars_take_the_tensor_type_eagerly_and_traced():
    x = np.array([1, 2], np.int8)
    assert dsl.add(x, 1).dtype == np.int8 and dsl.add(1, x).dtype == np.int8
    assert dsl.mul(np.array([1.0], ml_dtypes.bfloat16), 3.0).dtype == ml_dtypes.bfloat16
    assert dsl.maximum(2, x).tolist() == [2, 2]
    kernel = dsl.jit(lambda x: (dsl.sub(10, x), dsl.where(x > 1, 7, x), dsl.clip(x, 0, 1)))
    for got, want in zip(kernel(x), (dsl.sub(10, x), dsl.where(x > 1, 7, x), dsl.clip(x, 0, 1))):
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, want)


def test_two_python_scalars_use_numpy_defaults():
    assert dsl.add(1, 2).dtype == np.int64 and dsl.where(np.array([True]), 1.0, 2.0).dtype == np.float64


@pytest.mark.parametrize("call, match", [
    (lambda: dsl.add(np.array([1], np.int32), 1.5),
     r"^Add: Python float 1\.5 mixed with a int32 tensor; pass an array of the intended type instead"),
    (lambda: dsl.add(np.array([1], np.int8), 300), r"^Add: Python int 300 does not fit in int8 \[-128, 127\]"),
    (lambda: dsl.logical_and(np.array([True]), 1), r"^And: Python int 1 mixed with a bool tensor"),
    (lambda: dsl.clip(np.array([1], np.uint8), -1), r"^Clip: Python int -1 does not fit in uint8 \[0, 255\]"),
])
def test_python_scalars_that_do_not_fit_are_errors(call, match):
    with pytest.raises(dsl.InputError, match=match):
        call()


def test_traced_python_float_with_an_integer_tensor_is_an_error():
    kernel = dsl.jit(lambda x: dsl.mul(x, 0.5))
    with pytest.raises(dsl.DslError, match=r"^Mul: Python float 0\.5 mixed with a int32 tensor"):
        kernel(np.array([1], np.int32))


def test_opset_inside_jit_comes_from_jit():
    kernel = dsl.jit(lambda x: dsl.clip(x, -1.0, 1.0), opset=6)  # attributes at opset 6
    assert kernel.lower(np.zeros(2, np.float32)).graph.nodes[0].attrs == {"min": -1.0, "max": 1.0}
    kernel13 = dsl.jit(lambda x: dsl.reduce_sum(x, [0], keepdims=False))
    assert kernel13(np.ones((3, 2), np.float32)).tolist() == [3.0, 3.0]


@pytest.mark.parametrize("opset", [1, 2, 11, 13, 18])
def test_split_into_equal_parts_at_every_opset(opset):
    """num_outputs before 18 becomes the lengths, of type T at opset 1 (Split-1's split input)."""
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for got, want in zip(dsl.split(x, num_outputs=3, axis=1, opset=opset), np.split(x, 3, axis=1)):
        np.testing.assert_array_equal(got, want)
