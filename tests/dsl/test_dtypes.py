"""Tests of dsl/dtypes.py: the element-type table, dsl.dtype() lookup and the per-version type sets."""
import copy
import dataclasses
import pickle

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import dtypes

# Literal facts (TYPES.md + onnx.proto's TensorProto.DataType): one row per ONNX element type.
# (dsl attribute, onnx name, TensorProto code, bits, kind, numpy storage)
TABLE = [
    ("float32", "float", 1, 32, "float", np.float32),
    ("uint8", "uint8", 2, 8, "uint", np.uint8),
    ("int8", "int8", 3, 8, "int", np.int8),
    ("uint16", "uint16", 4, 16, "uint", np.uint16),
    ("int16", "int16", 5, 16, "int", np.int16),
    ("int32", "int32", 6, 32, "int", np.int32),
    ("int64", "int64", 7, 64, "int", np.int64),
    ("string", "string", 8, 0, "string", object),
    ("bool", "bool", 9, 8, "bool", np.bool_),
    ("float16", "float16", 10, 16, "float", np.float16),
    ("float64", "double", 11, 64, "float", np.float64),
    ("uint32", "uint32", 12, 32, "uint", np.uint32),
    ("uint64", "uint64", 13, 64, "uint", np.uint64),
    ("complex64", "complex64", 14, 64, "complex", np.complex64),
    ("complex128", "complex128", 15, 128, "complex", np.complex128),
    ("bfloat16", "bfloat16", 16, 16, "float", ml_dtypes.bfloat16),
    ("float8e4m3fn", "float8e4m3fn", 17, 8, "float", ml_dtypes.float8_e4m3fn),
    ("float8e4m3fnuz", "float8e4m3fnuz", 18, 8, "float", ml_dtypes.float8_e4m3fnuz),
    ("float8e5m2", "float8e5m2", 19, 8, "float", ml_dtypes.float8_e5m2),
    ("float8e5m2fnuz", "float8e5m2fnuz", 20, 8, "float", ml_dtypes.float8_e5m2fnuz),
    ("uint4", "uint4", 21, 4, "uint", ml_dtypes.uint4),
    ("int4", "int4", 22, 4, "int", ml_dtypes.int4),
    ("float4e2m1", "float4e2m1", 23, 4, "float", ml_dtypes.float4_e2m1fn),
    ("float8e8m0", "float8e8m0", 24, 8, "float", ml_dtypes.float8_e8m0fnu),
    ("uint2", "uint2", 25, 2, "uint", ml_dtypes.uint2),
    ("int2", "int2", 26, 2, "int", ml_dtypes.int2),
]
ROWS = pytest.mark.parametrize("py_name, onnx_name, code, bits, kind, storage", TABLE,
                               ids=[row[0] for row in TABLE])
NON_STRING = [row for row in TABLE if row[4] != "string"]

# TYPES.md, "Which Unsqueeze version accepts what": schema version -> types added.
_V1 = {"bool", "complex64", "complex128", "float16", "float", "double", "int8", "int16", "int32", "int64",
       "uint8", "uint16", "uint32", "uint64", "string"}
UNSQUEEZE_TYPES = {1: _V1, 11: _V1, 13: _V1 | {"bfloat16"}}
UNSQUEEZE_TYPES[21] = UNSQUEEZE_TYPES[13] | {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                                             "int4", "uint4"}
UNSQUEEZE_TYPES[23] = UNSQUEEZE_TYPES[21] | {"float4e2m1"}
UNSQUEEZE_TYPES[24] = UNSQUEEZE_TYPES[23] | {"float8e8m0"}
UNSQUEEZE_TYPES[25] = UNSQUEEZE_TYPES[24] | {"int2", "uint2"}


def test_table_covers_every_type_once():
    assert len(dtypes.ALL) == len(TABLE) == 26
    assert sorted(t.onnx_code for t in dtypes.ALL) == list(range(1, 27))
    assert len({t.onnx_name for t in dtypes.ALL}) == 26
    assert len({t.py_name for t in dtypes.ALL}) == 26


@ROWS
def test_type_facts(py_name, onnx_name, code, bits, kind, storage):
    dt = getattr(dsl, py_name)
    assert isinstance(dt, dsl.DType)
    assert (dt.py_name, dt.onnx_name, dt.onnx_code, dt.bits, dt.kind) == (py_name, onnx_name, code, bits, kind)
    assert dt.np_dtype == np.dtype(storage)
    assert py_name in dsl.__all__
    assert repr(dt) == f"dsl.{py_name}"
    assert str(dt) == onnx_name


@ROWS
def test_packed_properties(py_name, onnx_name, code, bits, kind, storage):
    dt = getattr(dsl, py_name)
    assert dt.packed == (bits in (2, 4))
    assert dt.per_byte == {2: 4, 4: 2}.get(bits, 1)


@pytest.mark.parametrize("py_name, count, nbytes", [
    ("int4", 0, 0), ("int4", 1, 1), ("int4", 3, 2), ("uint4", 4, 2), ("float4e2m1", 7, 4),
    ("int2", 1, 1), ("uint2", 4, 1), ("int2", 5, 2), ("uint2", 10, 3),
    ("bool", 3, 3), ("float16", 3, 6), ("float32", 5, 20), ("complex64", 2, 16), ("complex128", 2, 32),
    ("float8e8m0", 9, 9), ("bfloat16", 0, 0),
])
def test_packed_nbytes(py_name, count, nbytes):
    assert getattr(dsl, py_name).packed_nbytes(count) == nbytes


def test_string_has_no_byte_storage():
    with pytest.raises(dsl.DslError, match="string"):
        dsl.string.packed_nbytes(3)


@pytest.mark.parametrize("py_name, onnx_name, code, bits, kind, storage", NON_STRING,
                         ids=[row[0] for row in NON_STRING])
def test_bits_agree_with_numpy_storage(py_name, onnx_name, code, bits, kind, storage):
    np_dtype = np.dtype(storage)
    if kind in ("float", "int", "uint"):
        info = ml_dtypes.finfo(np_dtype) if kind == "float" else ml_dtypes.iinfo(np_dtype)
        assert info.bits == bits
    else:  # bool and complex: one whole numpy item per element
        assert np_dtype.itemsize * 8 == bits
    # Packed types are stored unpacked by ml_dtypes: one element a byte.
    assert np_dtype.itemsize == max(bits // 8, 1)


def test_double_alias():
    assert dsl.double is dsl.float64 is dsl.dtype("double")


@ROWS
def test_dtype_by_onnx_name_code_and_attribute(py_name, onnx_name, code, bits, kind, storage):
    dt = getattr(dsl, py_name)
    assert dsl.dtype(onnx_name) is dt
    assert dsl.dtype(py_name) is dt
    assert dsl.dtype(code) is dt
    assert dsl.dtype(np.int64(code)) is dt
    assert dsl.dtype(dt) is dt


@pytest.mark.parametrize("py_name, onnx_name, code, bits, kind, storage", NON_STRING,
                         ids=[row[0] for row in NON_STRING])
def test_dtype_by_numpy_spellings(py_name, onnx_name, code, bits, kind, storage):
    dt = getattr(dsl, py_name)
    np_dtype = np.dtype(storage)
    assert dsl.dtype(np_dtype) is dt
    assert dsl.dtype(storage) is dt  # numpy scalar type or ml_dtypes type
    assert dsl.dtype(np_dtype.type) is dt
    assert dsl.dtype(np_dtype.name) is dt  # 'float32', 'float8_e4m3fn', 'float4_e2m1fn', ...
    if np_dtype.itemsize > 1 and np_dtype.isbuiltin:
        assert dsl.dtype(np_dtype.newbyteorder(">")) is dt
        assert dsl.dtype(np_dtype.newbyteorder("<")) is dt


@pytest.mark.parametrize("spec", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                                  "float8_e8m0fnu", "float4_e2m1fn", "bfloat16", "int4", "uint4", "int2",
                                  "uint2"])
def test_dtype_by_ml_dtypes_name(spec):
    assert dsl.dtype(spec).np_dtype == np.dtype(getattr(ml_dtypes, spec))


@pytest.mark.parametrize("spec", [str, bytes, object, np.str_, np.bytes_, np.object_, np.dtype("U7"),
                                  np.dtype("S3"), np.dtype("O"), "string", "str", "object"])
def test_dtype_strings(spec):
    assert dsl.dtype(spec) is dsl.string


@pytest.mark.parametrize("spec, expected", [(bool, "bool"), (np.bool_, "bool"), ("bool_", "bool"),
                                            (float, "double"), (int, "int64"), (complex, "complex128")])
def test_dtype_python_types(spec, expected):
    assert dsl.dtype(spec) is dsl.dtype(expected)


@pytest.mark.parametrize("spec", [
    "float128", "Float", "FLOAT", "tensor(float)", "", "f4", "<f4", "int3", "float8", "float8e4m3",
    0, 27, -1, 100, 2**70, np.int64(0),
    None, True, False, np.bool_(True), 1.0,
    np.dtype([("a", np.float32)]), np.dtype((np.float32, (2,))), np.longdouble, np.clongdouble,
    np.datetime64, np.timedelta64, np.dtype("V8"), [1], object(),
], ids=lambda spec: "object()" if type(spec) is object else repr(spec))  # (ids the same in every process: pytest-xdist)
def test_dtype_unknown_raises(spec):
    with pytest.raises(dsl.DslError, match="unknown element type"):
        dsl.dtype(spec)


def test_dtype_error_is_dtype_error_and_value_error():
    with pytest.raises(dsl.DTypeError) as info:
        dsl.dtype("nope")
    assert isinstance(info.value, ValueError)
    assert "'nope'" in str(info.value)


@pytest.mark.parametrize("array, expected", [
    (np.zeros(2, np.float32), "float"), (np.zeros(2, ">i8"), "int64"), (np.array(["a"]), "string"),
    (np.array([b"a"]), "string"), (np.array(["a"], object), "string"), (np.zeros(2, ml_dtypes.int4), "int4"),
    (np.zeros((), np.bool_), "bool"),
])
def test_of_array(array, expected):
    assert dtypes.of_array(array) is dsl.dtype(expected)


@pytest.mark.parametrize("array", [np.zeros(2, np.longdouble), np.zeros(2, "V4"), np.zeros(2, "M8[s]"),
                                   np.zeros(2, [("a", "i4")])], ids=lambda a: str(a.dtype))
def test_of_array_rejects(array):
    with pytest.raises(dsl.DslError, match=r"MyOp: numpy dtype .* has no ONNX element type"):
        dtypes.of_array(array, "MyOp")


@pytest.mark.parametrize("dt", dtypes.ALL, ids=str)
def test_singletons_survive_pickle_and_copy(dt):
    assert pickle.loads(pickle.dumps(dt)) is dt
    assert copy.deepcopy(dt) is dt
    assert hash(dt) == hash(dsl.dtype(dt.onnx_code))
    with pytest.raises(dataclasses.FrozenInstanceError):
        dt.bits = 1


def test_types_and_floats_v1():
    assert dtypes.types("float", "int4") == frozenset({dsl.float32, dsl.int4})
    assert dtypes.FLOATS_V1 == frozenset({dsl.float16, dsl.float32, dsl.float64})
    with pytest.raises(dsl.DslError):
        dtypes.types("float", "nope")


@pytest.mark.parametrize("version", sorted(UNSQUEEZE_TYPES))
def test_all_types_matches_types_md(version):
    assert {t.onnx_name for t in dtypes.all_types(version)} == UNSQUEEZE_TYPES[version]


def test_all_types_latest_is_every_type():
    assert dtypes.all_types(25) == frozenset(dtypes.ALL)
    assert dtypes.all_types(28) == frozenset(dtypes.ALL)


# ---- against the onnx package ------------------------------------------------------------
def _onnx_allowed(schema) -> set[str]:
    (constraint,) = [c for c in schema.type_constraints if c.type_param_str == "T"]
    names = {s.removeprefix("tensor(").removesuffix(")") for s in constraint.allowed_type_strs}
    assert all(n in {row[1] for row in TABLE} for n in names)
    return names


@ROWS
def test_onnx_codes_and_names(py_name, onnx_name, code, bits, kind, storage):
    onnx = pytest.importorskip("onnx")
    assert onnx.TensorProto.DataType.Value(onnx_name.upper()) == code
    assert onnx.TensorProto.DataType.Name(code).lower() == onnx_name
    if kind != "string":
        assert onnx.helper.tensor_dtype_to_np_dtype(code) == np.dtype(storage)


def test_table_is_what_the_latest_unsqueeze_accepts():
    # onnx also defines codes no operator of this scope accepts (FLOAT6E2M3 = 27, ...): not in dsl.
    onnx = pytest.importorskip("onnx")
    latest = onnx.defs.get_schema("Unsqueeze", onnx.defs.onnx_opset_version())
    assert _onnx_allowed(latest) == {row[1] for row in TABLE}


@pytest.mark.parametrize("op", ["Unsqueeze", "Reshape"])
def test_all_types_matches_onnx_schemas_at_every_opset(op):
    onnx = pytest.importorskip("onnx")
    checked = set()
    for opset in range(1, onnx.defs.onnx_opset_version() + 1):
        schema = onnx.defs.get_schema(op, opset)
        expected = _onnx_allowed(schema)
        if op == "Reshape" and schema.since_version < 5:  # Reshape-1 takes floats only
            assert {t.onnx_name for t in dtypes.FLOATS_V1} == expected
            continue
        assert {t.onnx_name for t in dtypes.all_types(schema.since_version)} == expected, \
            f"{op}-{schema.since_version}"
        checked.add(schema.since_version)
    assert len(checked) >= 7


def test_unsqueeze_versions_match_types_md():
    onnx = pytest.importorskip("onnx")
    for version, names in UNSQUEEZE_TYPES.items():
        schema = onnx.defs.get_schema("Unsqueeze", version)
        assert schema.since_version == version
        assert _onnx_allowed(schema) == names
