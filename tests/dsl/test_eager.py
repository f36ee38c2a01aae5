"""Tests for dsl/eager.py: argument handling of the eager op functions (dsl.unsqueeze and siblings)."""
from __future__ import annotations

import doctest
import re

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import eager

LATEST = dsl.LATEST_OPSET
ATTRIBUTE_OPSETS = [1, 10, 11, 12]  # Unsqueeze / Squeeze take axes as an attribute
INPUT_OPSETS = [13, 21, 25, LATEST]  # ... and as a 1-D int64 input


def test_docstring_examples_run():
    failures, tried = doctest.testmod(eager, raise_on_error=False)
    assert tried >= 7 and failures == 0


# ---- axes / shape / perm forms ------------------------------------------------------------
AXES_FORMS = {
    "int": 1, "list": [1], "tuple": (1,), "numpy-int-items": [np.int64(1)],
    "int64-array": np.array([1], np.int64), "numpy-scalar": np.int32(1),
}


@pytest.mark.parametrize("opset", ATTRIBUTE_OPSETS + INPUT_OPSETS)
@pytest.mark.parametrize("axes", AXES_FORMS.values(), ids=AXES_FORMS.keys())
def test_axes_accept_int_list_tuple_and_int64_array(axes, opset):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = dsl.unsqueeze(data, axes, opset=opset)
    assert out.shape == (2, 1, 3) and np.shares_memory(out, data)
    assert dsl.squeeze(out, axes, opset=opset).shape == (2, 3)


@pytest.mark.parametrize("opset", INPUT_OPSETS)
@pytest.mark.parametrize("bad, shown", [([True], r"\[True\]"), ([0.0], r"\[0\.0\]"), (True, "True"),
                                        ([1, 2.5], r"\[1, 2\.5\]"), (np.float64(1), r"(np\.float64\()?1\.0\)?"),
                                        ([[0]], r"\[\[0\]\]"), ("0", "'0'")])
def test_axes_entries_that_are_not_ints_are_errors_at_13_and_later(bad, shown, opset):
    with pytest.raises(dsl.InputError, match=rf"^Unsqueeze: axes {shown} must be an int, a list of ints"):
        dsl.unsqueeze(np.zeros((2, 3)), bad, opset=opset)


@pytest.mark.parametrize("opset", ATTRIBUTE_OPSETS)
@pytest.mark.parametrize("bad, shown", [([True], r"\[True\]"), ([0.0], r"\[0\.0\]"), (True, "True"),
                                        ([[0]], r"\[\[0\]\]"), ("0", "'0'")])
def test_axes_entries_that_are_not_ints_are_errors_before_13(bad, shown, opset):
    with pytest.raises(dsl.InputError, match=rf"^Unsqueeze: attribute 'axes' = {shown}; expected"):
        dsl.unsqueeze(np.zeros((2, 3)), bad, opset=opset)


@pytest.mark.parametrize("opset", INPUT_OPSETS)
@pytest.mark.parametrize("array, match", [
    (np.array([1], np.int32), r"^Unsqueeze: input 'axes' has type int32\[1\], not allowed"),
    (np.array([1], np.uint64), r"^Unsqueeze: input 'axes' has type uint64\[1\], not allowed"),
    (np.array([1.0]), r"^Unsqueeze: input 'axes' has type double\[1\], not allowed"),
    (np.array([True]), r"^Unsqueeze: input 'axes' has type bool\[1\], not allowed"),
    (np.array([[1]], np.int64), r"^Unsqueeze: axes must be a 1-D int64 tensor, got shape \[1, 1\]"),
])
def test_axes_arrays_must_be_1d_int64_at_13_and_later(array, match, opset):
    with pytest.raises(dsl.DslError, match=match):
        dsl.unsqueeze(np.zeros((2, 3)), array, opset=opset)


@pytest.mark.parametrize("opset", ATTRIBUTE_OPSETS + INPUT_OPSETS)
@pytest.mark.parametrize("huge", [2 ** 70, [0, 2 ** 63], [-2 ** 63 - 1], np.uint64(2 ** 64 - 1)])
def test_axes_beyond_int64_are_errors(huge, opset):
    with pytest.raises(dsl.InputError, match=r"^Unsqueeze: .*(does not fit in int64|expected a flat list of int64)"):
        dsl.unsqueeze(np.zeros((2, 3)), huge, opset=opset)


@pytest.mark.parametrize("perm", [[1, 0], (1, 0), np.array([1, 0]), np.array([1, 0], np.int32)])
def test_transpose_perm_forms(perm):
    data = np.zeros((2, 3), np.int8)
    out = dsl.transpose(data, perm)
    assert out.shape == (3, 2) and np.shares_memory(out, data)


@pytest.mark.parametrize("shape", [[3, 2], (3, 2), np.array([3, 2]), [np.int64(3), np.int32(2)]])
def test_reshape_and_expand_shape_forms(shape):
    assert dsl.reshape(np.zeros((2, 3)), shape).shape == (3, 2)
    assert dsl.expand(np.zeros((1, 2)), shape).shape == (3, 2)


# ---- opsets -------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [0, -1, LATEST + 1, 29, 100, "13", 13.0, True, np.float64(13)])
def test_unknown_opsets_are_errors(opset):
    with pytest.raises(dsl.UnsupportedError, match=rf"^Unsqueeze: opset {re.escape(repr(opset))} is not "
                                                   rf"supported; expected an int in \[1, {LATEST}\]"):
        dsl.unsqueeze(np.zeros(2), [0], opset=opset)


@pytest.mark.parametrize("opset", range(1, 8))
def test_op_not_defined_at_opset(opset):
    with pytest.raises(dsl.UnsupportedError, match=rf"^Expand: not defined at opset {opset}; first version is 8"):
        dsl.expand(np.zeros(2), [2], opset=opset)


@pytest.mark.parametrize("opset", [np.int64(13), 13, None])
def test_opset_accepts_numpy_ints_and_none_means_latest(opset):
    assert dsl.unsqueeze(np.zeros(2), -1, opset=opset).shape == (2, 1)


def test_default_opset_is_the_latest():
    # negative axes and allowzero need newer opsets than 1: the default must allow them
    assert dsl.reshape(np.zeros((0, 3)), [3, 0], allowzero=1).shape == (3, 0)
    assert dsl.shape(np.zeros((2, 3, 4)), start=-2, end=-1).tolist() == [3]


@pytest.mark.parametrize("opset", range(5, 14))
def test_allowzero_does_not_exist_before_14(opset):
    with pytest.raises(dsl.InputError, match=rf"^Reshape: argument allowzero=1 does not exist at opset version "
                                             rf"{5 if opset < 13 else 13}"):
        dsl.reshape(np.zeros((2, 3)), [3, 2], allowzero=1, opset=opset)
    assert dsl.reshape(np.zeros((2, 3)), [-1, 0], allowzero=0, opset=opset).shape == (2, 3)


@pytest.mark.parametrize("flag", [True, False, 1.0, "1", np.bool_(True)])
def test_allowzero_must_be_an_int(flag):
    with pytest.raises(dsl.InputError, match=rf"^Reshape: attribute 'allowzero' = {flag!r}; expected an int64"):
        dsl.reshape(np.zeros((2, 3)), [3, 2], allowzero=flag)


@pytest.mark.parametrize("name, value", [("start", 1), ("start", -1), ("end", 1), ("end", 0)])
def test_shape_start_end_need_opset_15(name, value):
    with pytest.raises(dsl.InputError, match=rf"^Shape: argument {name}={value} does not exist at opset version 13"):
        dsl.shape(np.zeros((2, 3)), **{name: value}, opset=14)
    assert dsl.shape(np.zeros((2, 3)), start=0, opset=14).tolist() == [2, 3]


# ---- what comes back ----------------------------------------------------------------------
CALLS = {
    "unsqueeze": lambda x: dsl.unsqueeze(x, [0, -1]),
    "squeeze-all": lambda x: dsl.squeeze(x),
    "squeeze-none": lambda x: dsl.squeeze(x, []),
    "reshape": lambda x: dsl.reshape(x, [0, -1]),
    "reshape-same": lambda x: dsl.reshape(x, [0, 0, 0]),
    "flatten": lambda x: dsl.flatten(x, 1),
    "transpose": lambda x: dsl.transpose(x),
    "transpose-identity": lambda x: dsl.transpose(x, [0, 1, 2]),
    "expand": lambda x: dsl.expand(x, [2, 1, 1, 1]),
    "expand-same": lambda x: dsl.expand(x, [1]),
    "identity": lambda x: dsl.identity(x),
}


RETURN_CASES = [pytest.param(call, dtype, id=f"{name}-{np.dtype(dtype).name}")
                for name, call in CALLS.items()
                for dtype in (np.float32, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.bfloat16, object)
                if not (name.startswith("expand") and dtype in (ml_dtypes.int4, ml_dtypes.uint2))]  # Expand-13


@pytest.mark.parametrize("call, dtype", RETURN_CASES)
def test_numpy_in_numpy_view_out_tensor_in_tensor_out(call, dtype):
    data = np.arange(6).reshape(2, 1, 3).astype(dtype)
    if dtype is object:
        data = data.astype(str).astype(object)
    expected = call(data.copy())
    out = call(data)
    assert isinstance(out, np.ndarray) and out is not data and np.shares_memory(out, data)
    assert out.dtype == data.dtype and out.tolist() == expected.tolist()
    tensor = dsl.Tensor.from_numpy(data)
    out = call(tensor)
    assert isinstance(out, dsl.Tensor) and out.buffer is tensor.buffer and out.dtype == tensor.dtype
    assert out.numpy().tolist() == expected.tolist()


def test_results_are_new_array_objects_so_the_input_keeps_its_shape():
    data = np.zeros((1, 3))
    for out in (dsl.identity(data), dsl.squeeze(data, []), dsl.unsqueeze(data, []),
                dsl.transpose(data, [0, 1]), dsl.reshape(data, [1, 3])):
        out.shape = (3,)
        assert data.shape == (1, 3)


def test_shape_returns_int64_numpy_or_tensor():
    data = np.zeros((2, 3), ml_dtypes.float8_e4m3fn)
    out = dsl.shape(data)
    assert out.dtype == np.int64 and out.tolist() == [2, 3]
    out = dsl.shape(dsl.Tensor.from_numpy(data))
    assert isinstance(out, dsl.Tensor) and out.dtype == dsl.int64 and out.numpy().tolist() == [2, 3]


def test_reshape_of_a_tensor_that_needs_a_copy_returns_a_new_tensor():
    tensor = dsl.transpose(dsl.Tensor.from_numpy(np.arange(6).reshape(2, 3).astype(ml_dtypes.int4)))
    out = dsl.reshape(tensor, [6])
    assert isinstance(out, dsl.Tensor) and out.buffer is not tensor.buffer
    assert out.numpy().tolist() == [0, 3, 1, 4, 2, 5]


@pytest.mark.parametrize("data, shape", [([[1, 2, 3]], (1, 1, 3)), (3.5, (1,)), (np.float16(2), (1,)),
                                         (["a", "b"], (1, 2)), (b"xy", (1,))])
def test_python_values_become_arrays(data, shape):
    out = dsl.unsqueeze(data, 0)
    assert isinstance(out, np.ndarray) and out.shape == shape


# ---- garbage in: only DslError may escape -------------------------------------------------
GARBAGE = [None, "axes", b"\xff", [[0]], [0, [1]], 2 ** 70, -2 ** 70, [2 ** 70], np.uint64(2 ** 64 - 1),
           [True], True, 1.5, [0.0], {}, {"a": 1}, object(), np.array(["x"]), np.array([1.5]),
           np.array([[0]]), [None], (x for x in [0]), float("nan"), np.zeros(2, "M8[s]")]
DATA_GARBAGE = [None, {}, object(), [[1], [1, 2]], [None], 2 ** 70, np.array([1, None], object),
                np.zeros(2, "M8[s]"), np.zeros(2, [("a", "i4")]), lambda: 0]
ARGUMENT_CALLS = {  # name -> (op, call, stand-in for None where None is a valid value)
    "unsqueeze": ("Unsqueeze", lambda g, o: dsl.unsqueeze(np.zeros((2, 3)), g, opset=o), None),
    "squeeze": ("Squeeze", lambda g, o: dsl.squeeze(np.zeros((1, 3)), g, opset=o), "axes"),
    "reshape": ("Reshape", lambda g, o: dsl.reshape(np.zeros((2, 3)), g, opset=o), None),
    "reshape-allowzero": ("Reshape", lambda g, o: dsl.reshape(np.zeros((2, 3)), [6], allowzero=g,
                                                              opset=max(o, 14)), "1"),
    "flatten": ("Flatten", lambda g, o: dsl.flatten(np.zeros((2, 3)), g, opset=o), "1"),
    "transpose": ("Transpose", lambda g, o: dsl.transpose(np.zeros((2, 3)), g, opset=o), [2]),
    "expand": ("Expand", lambda g, o: dsl.expand(np.zeros((2, 3)), g, opset=max(o, 8)), None),
    "shape-start": ("Shape", lambda g, o: dsl.shape(np.zeros((2, 3)), start=g, opset=15), "0"),
    "shape-end": ("Shape", lambda g, o: dsl.shape(np.zeros((2, 3)), end=g, opset=15), "0"),
    "opset": ("Unsqueeze", lambda g, o: dsl.unsqueeze(np.zeros((2, 3)), [0], opset=g), "x"),
}


@pytest.mark.parametrize("opset", [1, 11, 13, LATEST])
@pytest.mark.parametrize("op, call, instead_of_none", ARGUMENT_CALLS.values(), ids=ARGUMENT_CALLS.keys())
def test_garbage_arguments_raise_dsl_error(op, call, instead_of_none, opset):
    for garbage in GARBAGE:
        if garbage is None and instead_of_none is not None:
            garbage = instead_of_none
        # the message names the op and shows the value (arrays: their type and shape)
        shown = "" if isinstance(garbage, np.ndarray) or garbage is None else f".*{re.escape(repr(garbage))}"
        with pytest.raises(dsl.DslError, match=rf"^{op}\b{shown}"):
            call(garbage, opset)


DATA_CALLS = {name: CALLS[name] for name in ("unsqueeze", "squeeze-all", "reshape", "flatten", "transpose",
                                             "expand", "identity")}
DATA_CALLS["shape"] = dsl.shape


@pytest.mark.parametrize("call", DATA_CALLS.values(), ids=DATA_CALLS.keys())
def test_garbage_data_raises_dsl_error_naming_the_op(call):
    for garbage in DATA_GARBAGE:
        with pytest.raises(dsl.DslError, match=r"^(Unsqueeze|Squeeze|Reshape|Flatten|Transpose|Expand|"
                                               r"Identity|Shape): data"):
            call(garbage)
