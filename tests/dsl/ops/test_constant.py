"""Tests for dsl/ops/constant.py: Constant (every version and value attribute) and Identity via the graph engine."""
from __future__ import annotations

import re

import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.ir import Graph, Node, OptionalType, SequenceType, TensorType, Value
from dsl.ops import registry

from dsl_test_helpers import assert_same, make_array, registry_versions


def onnx_type_strings(op: str, version: int) -> set[str]:
    schema = onnx.defs.get_schema(op, version)
    formal = (schema.inputs or schema.outputs)[0].type_str
    return set(next(c for c in schema.type_constraints if c.type_param_str == formal).allowed_type_strs)


def every_version_and_type(op: str) -> list:
    """(version, element type) for each of the op's versions and every element type, with ids "version-type"."""
    return [pytest.param(v, dt, id=f"{v}-{dt.onnx_name}") for v in registry_versions(op) for dt in dtypes.ALL]


def assert_versions_match_onnx(op: str) -> None:
    """The schema in force at every opset is onnx's."""
    for opset in range(1, dsl.LATEST_OPSET + 1):
        assert registry.get(op).schema(opset).version == onnx.defs.get_schema(op, opset).since_version


def constant_program(opset: int, **attrs) -> dsl.Program:
    out = Value("out")
    return dsl.Program(Graph("g", [], [out], [Node("Constant", [], [out], attrs, name="c")], {}, opset))


def run_constant(opset: int, **attrs):
    program = constant_program(opset, **attrs)
    return program, program.run({})[0]


# ---- Constant: the `value` tensor attribute, every version x every element type ----------
def test_constant_versions_match_onnx():
    assert_versions_match_onnx("Constant")


@pytest.mark.parametrize("version, dt", every_version_and_type("Constant"))
def test_constant_value_every_version_and_type(version, dt):
    value = make_array(dt, (2, 3), seed=version)
    if f"tensor({dt.onnx_name})" not in onnx_type_strings("Constant", version):
        with pytest.raises(dsl.DTypeError, match=rf"^Constant \(node 'c'\): value of type {dt.onnx_name} is "
                                                 rf"not allowed at version {version}; expected one of"):
            constant_program(version, value=value)
        return
    program, out = run_constant(version, value=value)
    assert program.output_types[0] == TensorType(dt, (2, 3))
    assert_same(out, value)


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "float4e2m1", "float8e8m0"])
def test_constant_value_as_packed_tensor(name):
    value = make_array(dtypes.dtype(name), (3,))
    _, out = run_constant(dsl.LATEST_OPSET, value=dsl.Tensor.from_numpy(value))
    assert_same(out, value)


@pytest.mark.parametrize("shape", [(), (0,), (1, 0, 2), (5,)])
def test_constant_value_of_any_shape(shape):
    value = make_array(dtypes.dtype("float"), shape)
    assert_same(run_constant(1, value=value)[1], value)


# ---- Constant: value_* attributes (version 12+) --------------------------------------------
VALUE_ATTRS = {
    "value_float": (1.5, np.array(1.5, np.float32)),
    "value_float-int": (2, np.array(2.0, np.float32)),
    "value_floats": ([1.0, -2.5, 1e38], np.array([1.0, -2.5, 1e38], np.float32)),
    "value_floats-empty": ([], np.zeros(0, np.float32)),
    "value_floats-inf-nan": ([float("inf"), float("nan")], np.array([np.inf, np.nan], np.float32)),
    "value_int": (-7, np.array(-7, np.int64)),
    "value_int-max": (2 ** 63 - 1, np.array(2 ** 63 - 1, np.int64)),
    "value_ints": ([1, -2, 2 ** 40], np.array([1, -2, 2 ** 40], np.int64)),
    "value_ints-numpy": (np.array([3, 4], np.int32), np.array([3, 4], np.int64)),
    "value_ints-empty": ([], np.zeros(0, np.int64)),
    "value_string": ("h\u00e9llo", np.array("h\u00e9llo", object)),
    "value_string-bytes": ("h\u00e9llo".encode(), np.array("h\u00e9llo", object)),
    "value_strings": (["a", b"bc", ""], np.array(["a", "bc", ""], object)),
    "value_strings-empty": ([], np.zeros(0, object)),
}


@pytest.mark.parametrize("version", [v for v in registry_versions("Constant") if v >= 12])
@pytest.mark.parametrize("case", VALUE_ATTRS.values(), ids=VALUE_ATTRS.keys())
def test_constant_value_attributes(case, version):
    given, expected = case
    name = next(key for key, value in VALUE_ATTRS.items() if value is case).split("-")[0]
    program, out = run_constant(version, **{name: given})
    assert program.output_types[0] == TensorType(dtypes.of_array(expected), expected.shape)
    assert_same(out, expected)


@pytest.mark.parametrize("version", [v for v in registry_versions("Constant") if v < 12])
@pytest.mark.parametrize("name", ["value_float", "value_floats", "value_int", "value_ints", "value_string",
                                  "value_strings"])
def test_constant_value_attributes_need_version_12(name, version):
    value = [1] if name.endswith("s") else 1
    with pytest.raises(dsl.InputError, match=rf"^Constant \(node 'c'\): unknown attribute '{name}' at opset "
                                             rf"version {version}"):
        constant_program(version, **{name: value})


@pytest.mark.parametrize("version", registry_versions("Constant"))
def test_constant_exactly_one_attribute(version):
    value = np.zeros(2, np.float32)
    if version < 11:
        with pytest.raises(dsl.InputError, match=r"^Constant \(node 'c'\): missing required attribute 'value'"):
            constant_program(version)
        return
    with pytest.raises(dsl.InputError, match=r"^Constant \(node 'c'\): exactly one value attribute must be set, "
                                             r"got none"):
        constant_program(version)
    with pytest.raises(dsl.InputError, match=r"exactly one value attribute must be set, got \['value', "
                                             r"'sparse_value'\]"):
        constant_program(version, value=value, sparse_value=object())
    if version >= 12:
        with pytest.raises(dsl.InputError, match=r"^Constant \(node 'c'\): exactly one value attribute must be "
                                                 r"set, got \['value_float', 'value_int'\]"):
            constant_program(version, value_int=1, value_float=1.0)


@pytest.mark.parametrize("version", [v for v in registry_versions("Constant") if v >= 11])
def test_constant_sparse_value_is_an_error(version):
    with pytest.raises(dsl.UnsupportedError, match=r"^Constant \(node 'c'\): sparse_value constants are not "
                                                   r"supported"):
        constant_program(version, sparse_value=object())


def test_constant_sparse_value_before_11_is_unknown():
    with pytest.raises(dsl.InputError, match=r"^Constant \(node 'c'\): unknown attribute 'sparse_value' at opset "
                                             r"version 9"):
        constant_program(10, sparse_value=object())


@pytest.mark.parametrize("attrs, error, match", [
    ({"value_int": 2 ** 63}, dsl.InputError, r"attribute 'value_int' = 9223372036854775808; expected an int64"),
    ({"value_int": True}, dsl.InputError, r"attribute 'value_int' = True; expected an int64"),
    ({"value_int": 1.0}, dsl.InputError, r"attribute 'value_int' = 1\.0; expected an int64"),
    ({"value_ints": [1, 2 ** 70]}, dsl.InputError, r"attribute 'value_ints' = \[1, 1180591620717411303424\]"),
    ({"value_ints": [[1]]}, dsl.InputError, r"attribute 'value_ints' = \[\[1\]\]; expected a flat list"),
    ({"value_float": "1"}, dsl.InputError, r"attribute 'value_float' = '1'; expected a float"),
    ({"value_float": 2 ** 2000}, dsl.InputError, r"attribute 'value_float' = \d+; expected a float"),
    ({"value_float": 1e300}, dsl.InputError, r"attribute 'value_float' = 1e\+300 does not fit in float32"),
    ({"value_floats": ["a"]}, dsl.InputError, r"attribute 'value_floats' = \['a'\]; expected a flat list of floats"),
    ({"value_floats": [None]}, dsl.InputError, r"attribute 'value_floats' = \[None\]"),
    ({"value_floats": 1.0}, dsl.InputError, r"attribute 'value_floats' = 1\.0; expected a flat list of floats"),
    ({"value_string": 5}, dsl.InputError, r"attribute 'value_string' = 5; expected a str"),
    ({"value_string": b"\xff"}, dsl.InputError, r"attribute 'value_string' = b'\\xff' is not UTF-8"),
    ({"value_strings": "abc"}, dsl.InputError, r"attribute 'value_strings' = 'abc'; expected a flat list of str"),
    ({"value_strings": ["a", 1]}, dsl.InputError, r"attribute 'value_strings' = \['a', 1\]"),
    ({"value": [1.0, 2.0]}, dsl.InputError, r"attribute 'value' must be a tensor .* got list"),
    ({"value": np.array([1, None], object)}, dsl.DTypeError,
     r"attribute 'value' is an object array holding non-strings"),
    ({"value": np.zeros(2, "M8[s]")}, dsl.DTypeError, r"numpy dtype datetime64\[s\] has no ONNX element type"),
])
def test_constant_bad_attribute_values(attrs, error, match):
    with pytest.raises(error, match=r"^Constant \(node 'c'\): " + match):
        constant_program(dsl.LATEST_OPSET, **attrs)


# ---- Identity -----------------------------------------------------------------------------
def identity_program(opset: int, in_type) -> dsl.Program:
    x, y = Value("x", in_type), Value("y")
    return dsl.Program(Graph("g", [x], [y], [Node("Identity", [x], [y], name="i")], {}, opset))


def test_identity_versions_match_onnx():
    assert_versions_match_onnx("Identity")


@pytest.mark.parametrize("version, dt", every_version_and_type("Identity"))
def test_identity_of_tensors(version, dt):
    data = make_array(dt, (2, 3), seed=version)
    in_type = TensorType(dt, ("N", 3))
    if f"tensor({dt.onnx_name})" not in onnx_type_strings("Identity", version):
        with pytest.raises(dsl.DTypeError, match=rf"^Identity \(node 'i'\): input 'input' has type "
                                                 rf"{dt.onnx_name}\[N,3\], not allowed at version {version}"):
            identity_program(version, in_type)
        with pytest.raises(dsl.DTypeError, match=rf"^Identity: input 'input' has type {dt.onnx_name}\[2,3\]"):
            dsl.identity(data, opset=version)
        return
    program = identity_program(version, in_type)
    assert program.output_types[0] == in_type
    out = program.run({"x": data})[0]
    assert_same(out, data)
    eager = dsl.identity(data, opset=version)
    assert_same(eager, data)
    assert eager is not data and np.shares_memory(eager, data)


CONTAINER_CASES = [(v, dt, kind) for v in registry_versions("Identity") for dt in dtypes.ALL
                   for kind in ("seq", "optional", "optional-seq")]


def container_type(kind: str, dt):
    tensor = TensorType(dt, None)
    return {"seq": SequenceType(tensor), "optional": OptionalType(tensor),
            "optional-seq": OptionalType(SequenceType(tensor))}[kind]


def onnx_spelling(kind: str, dt) -> str:
    tensor = f"tensor({dt.onnx_name})"
    return {"seq": f"seq({tensor})", "optional": f"optional({tensor})",
            "optional-seq": f"optional(seq({tensor}))"}[kind]


@pytest.mark.parametrize("version, dt, kind", CONTAINER_CASES,
                         ids=[f"{v}-{dt.onnx_name}-{kind}" for v, dt, kind in CONTAINER_CASES])
def test_identity_of_sequences_and_optionals(version, dt, kind):
    # sequences from version 14, optionals from 16, with the element types onnx lists
    in_type = container_type(kind, dt)
    if onnx_spelling(kind, dt) not in onnx_type_strings("Identity", version):
        with pytest.raises(dsl.DTypeError, match=rf"^Identity \(node 'i'\): input 'input' has type "
                                                 rf"{re.escape(str(in_type))}, not allowed at version {version}"):
            identity_program(version, in_type)
        return
    program = identity_program(version, in_type)
    items = [make_array(dt, (2,), seed=1), make_array(dt, (0, 3), seed=2)]
    feeds = items if "seq" in kind else items[0]
    out = program.run({"x": feeds})[0]
    if "seq" in kind:
        assert isinstance(out, list) and len(out) == 2
        for got, expected in zip(out, items):
            assert_same(got, expected)
    else:
        assert_same(out, items[0])
    if kind.startswith("optional"):
        assert program.run({"x": None}) == [None]


def test_identity_sequence_of_mixed_element_types_is_an_error():
    program = identity_program(14, SequenceType(None))
    with pytest.raises(dsl.DTypeError, match=r"sequence holds tensors of one element type, got \['float', 'int64'\]"):
        program.run({"x": [np.zeros(2, np.float32), np.zeros(2, np.int64)]})
    assert program.run({"x": []})[0] == []


def test_identity_of_a_tensor_returns_a_tensor_on_the_same_buffer():
    tensor = dsl.Tensor.from_numpy(make_array(dtypes.dtype("int2"), (5,)))
    out = dsl.identity(tensor)
    assert isinstance(out, dsl.Tensor) and out.buffer is tensor.buffer and out.shape == (5,)
