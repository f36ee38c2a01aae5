"""Tests for dsl/onnx_io.py: loading, tensors of every type, opset selection, export and round trips."""
import ctypes

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import dsl  # noqa: E402
from dsl import dtypes  # noqa: E402
from dsl.ops import all_ops  # noqa: E402

TYPES = list(dtypes.ALL)
TYPE_IDS = [t.onnx_name for t in TYPES]
# First opset whose Unsqueeze accepts each type (TYPES.md).
FIRST_OPSET = {"bfloat16": 13, "float8e4m3fn": 21, "float8e4m3fnuz": 21, "float8e5m2": 21,
               "float8e5m2fnuz": 21, "int4": 21, "uint4": 21, "float4e2m1": 23, "float8e8m0": 24,
               "int2": 25, "uint2": 25}
# Packed samples: values and their codes (TYPES.md: int4 v < 0 -> v + 16, float4 0x8 = -0, ...).
PACKED = {"int4": ([-8, 7, -1, 0, 3], [8, 7, 15, 0, 3]), "uint4": ([0, 15, 1, 8, 7], [0, 15, 1, 8, 7]),
          "float4e2m1": ([0, -6, 0.5, 1.5, -0.0], [0x0, 0xF, 0x1, 0x3, 0x8]),
          "int2": ([-2, 1, -1, 0, 1], [2, 1, 3, 0, 1]), "uint2": ([0, 3, 1, 2, 3], [0, 3, 1, 2, 3])}
# Bit patterns of the 16- and 8-bit floats: +0, -0, a normal, max/inf, NaN (for most types).
FLOAT_BITS = {16: [0x0000, 0x8000, 0x3E00, 0x7C00, 0x7E01], 8: [0x00, 0x80, 0x38, 0x7E, 0xFF]}


# ---- helpers ------------------------------------------------------------------------------
def make_model(nodes, inputs, outputs, initializers=(), opset=25):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def info(name, dt, shape):
    return helper.make_tensor_value_info(name, dtypes.dtype(dt).onnx_code, shape)


def int64s(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def is_packed(dt) -> bool:
    return dt.onnx_name in PACKED


def sample(dt, count=5) -> np.ndarray:
    """``count`` values of ``dt`` covering signs, extremes and special codes."""
    name = dt.onnx_name
    if name == "string":
        base = np.array(["", "a", "h\u00e9llo", "x y", "z"], dtype=object)
    elif name == "bool":
        base = np.array([True, False, True, True, False])
    elif is_packed(dt):
        base = np.array(PACKED[name][0], dtype=dt.np_dtype)
    elif dt.kind in ("int", "uint"):
        info_ = np.iinfo(dt.np_dtype)
        base = np.array([info_.min, info_.max, 0, 1, info_.max // 3], dtype=dt.np_dtype)
    elif name in ("float", "double"):
        base = np.array([0.0, -0.0, 1.5, np.inf, np.nan], dtype=dt.np_dtype)
    elif dt.kind == "complex":
        base = np.array([1 + 2j, -0.5j, 0, 3.25, np.nan], dtype=dt.np_dtype)
    else:
        base = np.array(FLOAT_BITS[dt.bits], np.uint16 if dt.bits == 16 else np.uint8).view(dt.np_dtype)
    return np.resize(base, count)


def codes_of(dt, array) -> list:
    """The per-element codes of a packed array, derived from PACKED (not from dsl)."""
    values, codes = PACKED[dt.onnx_name]
    lookup = dict(zip(np.array(values, dt.np_dtype).view(np.uint8).tolist(), codes))
    return [lookup[b] for b in np.ascontiguousarray(array).reshape(-1).view(np.uint8).tolist()]


def pack_by_hand(dt, array, fill_padding=False) -> bytes:
    """ONNX raw layout written from the spec: first element in the lowest bits."""
    per_byte = 8 // dt.bits
    codes = codes_of(dt, array)
    out = bytearray(-(-len(codes) // per_byte))
    for index, code in enumerate(codes):
        out[index // per_byte] |= code << (dt.bits * (index % per_byte))
    used = len(codes) % per_byte
    if fill_padding and used:
        out[-1] |= (0xFF << (dt.bits * used)) & 0xFF
    return bytes(out)


def raw_proto(name, dt, array, fill_padding=False):
    proto = TensorProto(name=name, data_type=dt.onnx_code, dims=array.shape)
    proto.raw_data = pack_by_hand(dt, array, fill_padding) if is_packed(dt) else array.tobytes()
    return proto


def field_proto(name, dt, array, fill_padding=False):
    """A TensorProto using the typed fields exactly as the ONNX TensorProto docs say."""
    proto = TensorProto(name=name, data_type=dt.onnx_code, dims=array.shape)
    flat, onnx_name = array.reshape(-1), dt.onnx_name
    if onnx_name == "string":
        proto.string_data.extend(s.encode("utf-8") for s in flat)
    elif dt.kind == "complex":
        pairs = np.stack([flat.real, flat.imag], axis=1).reshape(-1).tolist()
        (proto.float_data if onnx_name == "complex64" else proto.double_data).extend(pairs)
    elif onnx_name in ("float", "double"):
        (proto.float_data if onnx_name == "float" else proto.double_data).extend(flat.tolist())
    elif onnx_name == "int64":
        proto.int64_data.extend(flat.tolist())
    elif onnx_name in ("uint32", "uint64"):
        proto.uint64_data.extend(int(v) for v in flat)
    elif is_packed(dt):
        proto.int32_data.extend(pack_by_hand(dt, array, fill_padding))
    elif dt.kind == "float":  # float16 / bfloat16 / float8: bit patterns
        proto.int32_data.extend(flat.view(np.uint16 if dt.bits == 16 else np.uint8).tolist())
    else:
        proto.int32_data.extend(int(v) for v in flat)
    return proto


def assert_same(got, want):
    """Same dtype, shape and values; floats compared bit for bit (NaN and -0 included)."""
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    kind = dtypes.of_array(want).kind
    if kind in ("float", "complex"):
        np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                      np.ascontiguousarray(want).view(np.uint8))
    elif kind == "string":
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))


def identity_of(proto, dt):
    return make_model([helper.make_node("Identity", [proto.name], ["y"])], [], [info("y", dt, None)],
                      [proto])


# ---- loading ------------------------------------------------------------------------------
def unsqueeze_model(opset=25, axes=(0, -1), dt="float", shape=("N", 5)):
    if opset < 13:
        node = helper.make_node("Unsqueeze", ["x"], ["y"], axes=list(axes))
        return make_model([node], [info("x", dt, list(shape))], [info("y", dt, None)], opset=opset)
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsq")
    return make_model([node], [info("x", dt, list(shape))], [info("y", dt, None)],
                      [int64s("axes", list(axes))], opset)


def test_from_onnx_accepts_path_bytes_and_model_proto(tmp_path):
    model = unsqueeze_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for source in (model, model.SerializeToString(), bytearray(model.SerializeToString()), path, str(path)):
        got = dsl.from_onnx(source).run({"x": x})[0]
        assert got.shape == (1, 2, 5, 1) and np.shares_memory(got, x)


@pytest.mark.parametrize("source, match", [
    (b"\x08\x07 this is not a protobuf", "cannot"), ("/nonexistent/model.onnx", "cannot read"),
    (42, "expected a path, bytes or onnx.ModelProto")])
def test_from_onnx_rejects_unreadable_sources(source, match):
    with pytest.raises(dsl.DslError, match=match):
        dsl.from_onnx(source)


def test_input_and_output_types_keep_int_symbolic_and_unknown_dims():
    x = info("x", "float", ["N", 5])
    m = helper.make_tensor_value_info("m", TensorProto.INT64, [None, 3])  # dim with neither field
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["y"]), helper.make_node("Identity", ["m"], ["z"])]
    prog = dsl.from_onnx(make_model(nodes, [x, m], [info("y", "float", None), info("z", "int64", None)],
                                    [int64s("axes", [0, 3])]))
    assert prog.input_types == [dsl.TensorType(dsl.float32, ("N", 5)), dsl.TensorType(dsl.int64, (None, 3))]
    assert prog.input_types["m"] == dsl.TensorType("int64", (None, 3))
    assert prog.output_types[0] == dsl.TensorType(dsl.float32, (1, "N", 5, 1))
    assert prog.output_types["z"].shape == (None, 3)
    assert prog.input_names == ["x", "m"] and prog.output_names == ["y", "z"]


def test_unknown_rank_input_gives_unknown_rank_output():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    prog = dsl.from_onnx(make_model([helper.make_node("Unsqueeze", ["x", "axes"], ["y"])], [x],
                                    [info("y", "float", None)], [int64s("axes", [0])]))
    assert prog.input_types[0].shape is None and prog.output_types[0].shape is None
    assert prog.run({"x": np.zeros((2, 3), np.float32)})[0].shape == (1, 2, 3)


def test_sequence_and_optional_types():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.INT8, None)
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    nodes = [helper.make_node("Identity", ["s"], ["s2"]), helper.make_node("Identity", ["o"], ["o2"])]
    outs = [helper.make_tensor_sequence_value_info("s2", TensorProto.INT8, None),
            helper.make_value_info("o2", opt.type)]
    prog = dsl.from_onnx(make_model(nodes, [seq, opt], outs, opset=16))
    assert prog.input_types == [dsl.SequenceType(dsl.TensorType("int8", None)),
                                dsl.OptionalType(dsl.TensorType("float", (2,)))]
    items = [np.arange(3, dtype=np.int8), np.zeros((2, 2), np.int8)]
    got_seq, got_opt = prog.run({"s": items, "o": None})
    assert got_opt is None and len(got_seq) == 2 and all(a is b for a, b in zip(got_seq, items))


def test_initializer_listed_as_input_is_a_constant():
    prog = dsl.from_onnx(make_model([helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
                                    [info("x", "float", [2]), info("axes", "int64", [1])],
                                    [info("y", "float", None)], [int64s("axes", [1])]))
    assert prog.input_names == ["x"] and prog.output_types[0].shape == (2, 1)


# ---- tensors of every element type --------------------------------------------------------
STORAGES = [(dt, storage) for dt in TYPES for storage in ("raw", "fields")
            if not (storage == "raw" and dt.onnx_name == "string")]  # strings: string_data only


@pytest.mark.parametrize("dt, storage", STORAGES, ids=[f"{dt.onnx_name}-{s}" for dt, s in STORAGES])
def test_initializer_of_every_type(dt, storage):
    want = sample(dt, 5).reshape(5, 1)
    make = raw_proto if storage == "raw" else field_proto
    prog = dsl.from_onnx(identity_of(make("c", dt, want, fill_padding=True), dt))
    got = prog.run({})[0]
    assert_same(got, want)
    assert prog.output_types[0] == dsl.TensorType(dt, (5, 1))


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 8])
@pytest.mark.parametrize("name", sorted(PACKED))
def test_packed_initializers_of_any_count(name, count):
    dt = dsl.dtype(name)
    want = sample(dt, count)
    for make in (raw_proto, field_proto):
        assert_same(dsl.from_onnx(identity_of(make("c", dt, want, fill_padding=True), dt)).run({})[0], want)


@pytest.mark.parametrize("dt", TYPES, ids=TYPE_IDS)
def test_graph_input_of_every_type(dt):
    opset = FIRST_OPSET.get(dt.onnx_name, 1)
    prog = dsl.from_onnx(unsqueeze_model(opset, (0, 2), dt, ["N"]))
    x = sample(dt, 5)
    got = prog.run({"x": x})[0]
    assert_same(got, x.reshape(1, 5, 1))
    assert prog.output_types[0] == dsl.TensorType(dt, (1, "N", 1))
    if is_packed(dt):
        packed = dsl.Tensor.from_packed(np.frombuffer(pack_by_hand(dt, x, True), np.uint8), dt, (5,))
        assert_same(prog.run({"x": packed})[0], x.reshape(1, 5, 1))
    else:
        assert np.shares_memory(got, x)


@pytest.mark.parametrize("dt", [t for t in TYPES if t.onnx_name in FIRST_OPSET], ids=lambda t: t.onnx_name)
def test_type_is_rejected_before_its_first_opset(dt):
    with pytest.raises(dsl.DTypeError, match=f"Unsqueeze.*{dt.onnx_name}"):
        dsl.from_onnx(unsqueeze_model(FIRST_OPSET[dt.onnx_name] - 1, (0,), dt, [3]))


def _proto(dt_name, dims, **fields):
    proto = TensorProto(name="c", data_type=dsl.dtype(dt_name).onnx_code if dt_name else 0, dims=dims)
    for key, values in fields.items():
        if key == "raw_data":
            proto.raw_data = values
        else:
            getattr(proto, key).extend(values)
    return proto


MALFORMED = {
    "raw too short": (_proto("float", [3], raw_data=b"\0" * 8), "8 raw bytes; expected 12"),
    "raw too long": (_proto("float", [3], raw_data=b"\0" * 16), "16 raw bytes; expected 12"),
    "int4 raw too short": (_proto("int4", [5], raw_data=b"\0\0"), "2 raw bytes; expected 3"),
    "int2 raw too long": (_proto("int2", [5], raw_data=b"\0\0\0"), "3 raw bytes; expected 2"),
    "float_data count": (_proto("float", [2, 2], float_data=[1.0, 2.0, 3.0]), "3 values; expected 4"),
    "int32_data count": (_proto("int16", [2], int32_data=[1]), "1 values; expected 2"),
    "packed count": (_proto("uint4", [5], int32_data=[1, 2]), "2 int32_data entries; expected 3"),
    "packed byte range": (_proto("uint4", [2], int32_data=[256]), "entry 256 outside"),
    "float16 bits range": (_proto("float16", [1], int32_data=[70000]), "entry 70000 outside"),
    "float8 bits range": (_proto("float8e4m3fn", [1], int32_data=[-1]), "entry -1 outside"),
    "int8 range": (_proto("int8", [1], int32_data=[200]), "entry 200 outside"),
    "bool range": (_proto("bool", [1], int32_data=[2]), "entry 2 outside"),
    "bool raw byte": (_proto("bool", [2], raw_data=b"\x01\x07"), "byte 7"),
    "uint32 range": (_proto("uint32", [1], uint64_data=[2 ** 32]), "outside"),
    "complex count": (_proto("complex64", [2], float_data=[1.0, 2.0, 3.0]), "3 float_data entries"),
    "string raw": (_proto("string", [1], raw_data=b"abc"), "string_data"),
    "string utf8": (_proto("string", [1], string_data=[b"\xff"]), "not UTF-8"),
    "no data type": (_proto(None, [1], float_data=[1.0]), "unsupported data_type 0"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_tensor_is_a_dsl_error(name):
    proto, match = MALFORMED[name]
    dt = proto.data_type or 1
    with pytest.raises(dsl.DslError, match=match):
        dsl.from_onnx(identity_of(proto, dt))


def test_malformed_tensor_attribute_is_a_dsl_error():
    node = helper.make_node("Constant", [], ["y"], value=_proto("float", [2], raw_data=b"\0" * 4))
    with pytest.raises(dsl.DslError, match="4 raw bytes; expected 8"):
        dsl.from_onnx(make_model([node], [], [info("y", "float", None)]))


# ---- ops and opsets -----------------------------------------------------------------------
def test_unsupported_op_names_op_and_opset():
    op = next(o for o in ("TfIdfVectorizer", "StringNormalizer", "RoiAlign") if o not in all_ops())
    model = make_model([helper.make_node(op, ["x"], ["y"], name="n")], [info("x", "float", [2])],
                       [info("y", "float", None)], opset=17)
    with pytest.raises(dsl.UnsupportedError, match=rf"{op} \(node 'n'\): operator {op} \(opset 17\)"):
        dsl.from_onnx(model)


def test_op_of_another_domain_is_unsupported():
    model = make_model([helper.make_node("Unsqueeze", ["x"], ["y"], domain="com.example", axes=[0])],
                       [info("x", "float", [2])], [info("y", "float", None)])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(dsl.UnsupportedError, match="com.example::Unsqueeze"):
        dsl.from_onnx(model)


def test_op_not_defined_at_model_opset():
    node = helper.make_node("Expand", ["x", "shape"], ["y"])
    model = make_model([node], [info("x", "float", [1])], [info("y", "float", None)],
                       [int64s("shape", [3])], opset=7)
    with pytest.raises(dsl.UnsupportedError, match="Expand.*not defined at opset 7"):
        dsl.from_onnx(model)


@pytest.mark.parametrize("opset, match", [(29, "opset 29"), (0, "opset 0")])
def test_model_opset_outside_supported_range(opset, match):
    with pytest.raises(dsl.UnsupportedError, match=match):
        dsl.from_onnx(make_model([], [info("x", "float", [1])], [info("x", "float", [1])], opset=opset))


def test_model_without_default_domain_opset():
    model = make_model([], [info("x", "float", [1])], [info("x", "float", [1])])
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(dsl.UnsupportedError, match="no default-domain"):
        dsl.from_onnx(model)


def test_shape_error_is_raised_at_load_naming_the_node():
    with pytest.raises(dsl.ShapeError, match=r"Unsqueeze \(node 'unsq'\): axis 7 out of range \[-4, 3\]"):
        dsl.from_onnx(unsqueeze_model(25, (0, 7)))


def test_unsqueeze_11_reads_axes_attribute_with_negatives():
    prog = dsl.from_onnx(unsqueeze_model(11, (0, -1)))
    assert prog.output_types[0].shape == (1, "N", 5, 1)
    assert prog.run({"x": np.ones((2, 5), np.float32)})[0].shape == (1, 2, 5, 1)


@pytest.mark.parametrize("opset", [1, 10])
def test_unsqueeze_1_rejects_negative_axes_at_load(opset):
    with pytest.raises(dsl.ShapeError, match="axis -1 is negative.*opset >= 11"):
        dsl.from_onnx(unsqueeze_model(opset, (0, -1)))


def test_schema_version_decides_attribute_or_input():
    attr_model = unsqueeze_model(11, (0,))
    attr_model.opset_import[0].version = 13
    with pytest.raises(dsl.DslError, match="unknown attribute 'axes' at opset version 13"):
        dsl.from_onnx(attr_model)
    input_model = unsqueeze_model(13, (0,))
    input_model.opset_import[0].version = 12
    with pytest.raises(dsl.DslError, match="Unsqueeze .*missing required attribute 'axes'"):
        dsl.from_onnx(input_model)


def test_extra_node_output_is_rejected():
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y", "z"])
    model = make_model([node], [info("x", "float", [2])], [info("y", "float", None)], [int64s("axes", [0])])
    with pytest.raises(dsl.DslError, match=r"has 2 outputs \['y', 'z'\]; the op produces 1"):
        dsl.from_onnx(model)


@pytest.mark.parametrize("declared, error", [(("int64", [1, 2]), dsl.DTypeError),
                                             (("float", [2, 1]), dsl.ShapeError),
                                             (("float", [1, 2, 1]), dsl.ShapeError)])
def test_declared_output_type_must_match(declared, error):
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="u")
    model = make_model([node], [info("x", "float", [2])], [info("y", *declared)], [int64s("axes", [0])])
    with pytest.raises(error, match=r"Unsqueeze \(node 'u'\): output 'y' is declared"):
        dsl.from_onnx(model)


def test_trailing_omitted_output_is_dropped():
    node = helper.make_node("Identity", ["x"], ["y", ""])
    prog = dsl.from_onnx(make_model([node], [info("x", "float", [2])], [info("y", "float", None)]))
    assert prog.graph.nodes[0].outputs[0].name == "y" and len(prog.graph.nodes[0].outputs) == 1


@pytest.mark.parametrize("engine", ["jit", "numpy"])
def test_omitted_output_before_a_present_one_is_computed_unseen(engine):
    # Split's middle output omitted; the name it gets must not capture the user's value named alike
    split = helper.make_node("Split", ["x"], ["a", "", "c"], axis=0, name="s", num_outputs=3)
    clash = helper.make_node("Neg", ["x"], ["s/omitted_output_1"])
    out = helper.make_node("Add", ["c", "s/omitted_output_1"], ["y"])
    model = make_model([split, clash, out], [info("x", "float", [3])], [info("a", "float", None), info("y", "float", None)],
                       opset=18)
    prog = dsl.from_onnx(model)
    x = np.array([1.0, 2.0, 4.0], np.float32)
    a, y = prog.run({"x": x}, engine=engine)
    assert a.tolist() == [1.0]
    np.testing.assert_array_equal(y, x[2:] - x)  # c + (-x): the Neg's value, not Split's middle part
    names = [v.name for v in prog.graph.nodes[0].outputs]
    assert names[0] == "a" and names[2] == "c" and names[1] not in ("", "s/omitted_output_1")


# ---- one-op models per (op, type, opset), checked against onnx's own schemas --------------
X_SHAPE = (3, 1, 3)  # 9 elements: odd for 4-bit types, 9 % 4 == 1 for 2-bit types


# The operand each op reads: (name, value, first opset taking it as an input, not an attribute).
OPERANDS = {"Unsqueeze": ("axes", [0, 4], 13), "Squeeze": ("axes", [1], 13),
            "Reshape": ("shape", [3, -1], 5), "Expand": ("shape", [3, 4, 3], 1)}
ATTRS = {"Flatten": {"axis": 2}, "Transpose": {"perm": [2, 0, 1]}}


def op_model(op, dt, opset):
    """A one-node model applying ``op`` to input x ("B", 1, 3) (Constant: to a sample)."""
    if op == "Constant":
        value = field_proto("v", dt, sample(dt, 9).reshape(X_SHAPE))
        return make_model([helper.make_node(op, [], ["y"], value=value)], [], [info("y", dt, None)],
                          opset=opset)
    attrs, extra, inits = dict(ATTRS.get(op, {})), [], []
    if op in OPERANDS:
        name, value, as_input = OPERANDS[op]
        if opset < as_input:
            attrs[name] = value
        else:
            extra, inits = [name], [int64s(name, value)]
    out_type = "int64" if op == "Shape" else dt
    node = helper.make_node(op, ["x", *extra], ["y"], **attrs)
    return make_model([node], [info("x", dt, ["B", 1, 3])], [info("y", out_type, None)], inits, opset)


EXPECTED = {"Unsqueeze": lambda x: x.reshape(1, 3, 1, 3, 1), "Squeeze": lambda x: x.reshape(3, 3),
            "Reshape": lambda x: x.reshape(3, 3), "Flatten": lambda x: x.reshape(3, 3),
            "Transpose": lambda x: x.transpose(2, 0, 1), "Expand": lambda x: np.broadcast_to(x, (3, 4, 3)),
            "Identity": lambda x: x, "Shape": lambda x: np.array(X_SHAPE, np.int64), "Constant": lambda x: x}
OPS = sorted(set(EXPECTED) & set(all_ops()))


def onnx_versions(op):
    return sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                   if s.name == op and s.domain == ""})


def onnx_allows(op, dt, opset) -> bool:
    try:
        schema = onnx.defs.get_schema(op, opset)
    except onnx.defs.SchemaError:
        return False
    param = (schema.inputs or schema.outputs)[0].type_str
    allowed = next(c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == param)
    return f"tensor({dt.onnx_name})" in allowed


@pytest.mark.parametrize("op", OPS)
def test_model_opset_selects_schema_types_like_onnx(op):
    versions = onnx_versions(op)
    mismatches = []
    for opset in sorted({v for v in versions} | {v - 1 for v in versions if v > 1} | {25}):
        for dt in TYPES:
            try:
                dsl.from_onnx(op_model(op, dt, opset))
                accepted = True
            except dsl.DslError:
                accepted = False
            if accepted != onnx_allows(op, dt, opset):
                mismatches.append(f"opset {opset} {dt.onnx_name}: dsl {'accepts' if accepted else 'rejects'}")
    assert not mismatches, mismatches


def round_trip_cases():
    """Every type at opset 25; at each older schema version, float and the types it added."""
    cases = [(op, dt, 25) for op in OPS for dt in TYPES if onnx_allows(op, dt, 25)]
    for op in OPS:
        versions = onnx_versions(op)
        for prev, version in zip([None] + versions, versions):
            for dt in TYPES:
                added = prev is not None and not onnx_allows(op, dt, prev)
                if version != 25 and onnx_allows(op, dt, version) and (added or dt.onnx_name == "float"):
                    cases.append((op, dt, version))
    return cases


ROUND_TRIP = round_trip_cases()
ROUND_TRIP_IDS = [f"{op}-{dt.onnx_name}-opset{opset}" for op, dt, opset in ROUND_TRIP]


def run_dsl(op, dt, opset):
    prog = dsl.from_onnx(op_model(op, dt, opset))
    x = sample(dt, 9).reshape(X_SHAPE)
    feeds = {"x": x} if prog.input_names else {}
    return prog, feeds, prog.run(feeds)[0], EXPECTED[op](x)


@pytest.mark.parametrize("op, dt, opset", ROUND_TRIP, ids=ROUND_TRIP_IDS)
def test_round_trip_through_dsl(op, dt, opset):
    prog, feeds, got, want = run_dsl(op, dt, opset)
    assert_same(got, want)
    model = prog.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == opset
    again = dsl.from_onnx(model.SerializeToString())
    assert again.input_types == prog.input_types and again.output_types == prog.output_types
    assert_same(again.run(feeds)[0], want)


def _is_plain(dt) -> bool:
    return dt.kind == "string" or dt.np_dtype.type.__module__ == "numpy"


def _to_ort_value(ort, array):
    """An OrtValue holding ``array`` (exotic types written in ONNX raw layout by hand)."""
    dt = dtypes.of_array(array)
    if _is_plain(dt):
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))
    raw = np.frombuffer(pack_by_hand(dt, array) if is_packed(dt) else array.tobytes(), np.uint8)
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), dt.onnx_code)
    assert value.tensor_size_in_bytes() == raw.nbytes
    ctypes.memmove(value.data_ptr(), raw.ctypes.data, raw.nbytes)
    return value


def _from_ort_value(value):
    dt = dsl.dtype(value.element_type())
    if _is_plain(dt):
        return value.numpy()
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    if is_packed(dt):
        return dsl.Tensor.from_packed(raw, dt, value.shape()).numpy()
    return np.frombuffer(raw, dt.np_dtype).reshape(value.shape())


def run_onnxruntime(model, feeds, dt):
    """Run with onnxruntime; skip only when onnxruntime itself lacks the type or kernel."""
    ort = pytest.importorskip("onnxruntime")
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, NotImplemented as OrtNotImplemented
    try:
        options = ort.SessionOptions()  # no constant folding: onnxruntime's kernels do the work
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
    except OrtNotImplemented as exc:
        pytest.skip(f"onnxruntime has no kernel for type {dt.onnx_name}: {str(exc)[:90]}")
    except Fail as exc:
        if "is not currently registered or supported" not in str(exc):
            raise
        pytest.skip(f"onnxruntime does not support type {dt.onnx_name}: {str(exc)[:90]}")
    if any(a.dtype == object for a in feeds.values()):  # OrtValues cannot hold strings
        return session.run(None, feeds)[0]
    values = {name: _to_ort_value(ort, a) for name, a in feeds.items()}
    return _from_ort_value(session.run_with_ort_values(None, values)[0])


@pytest.mark.parametrize("op, dt, opset", ROUND_TRIP, ids=ROUND_TRIP_IDS)
def test_round_trip_through_onnxruntime(op, dt, opset):
    prog, feeds, got, want = run_dsl(op, dt, opset)
    model = prog.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    assert_same(run_onnxruntime(model, feeds, dt), got)


def test_export_keeps_symbolic_dims_and_empty_list_attributes():
    node = helper.make_node("Transpose", ["x"], ["y"])
    node.attribute.append(helper.make_attribute("perm", [], attr_type=onnx.AttributeProto.INTS))
    prog = dsl.from_onnx(make_model([node], [info("x", "float", [])], [info("y", "float", None)]))
    model = prog.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.node[0].attribute[0].type == onnx.AttributeProto.INTS
    sym = dsl.from_onnx(unsqueeze_model()).to_onnx()
    dims = sym.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in dims] == [1, "N", 5, 1]


def test_export_writes_dtype_attributes_as_onnx_codes():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)
    prog = dsl.from_onnx(make_model([node], [info("x", "int32", [2])], [info("y", "float16", None)]))
    model = prog.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    attr = model.graph.node[0].attribute[0]
    assert (attr.name, attr.type, attr.i) == ("to", onnx.AttributeProto.INT, TensorProto.FLOAT16)
    x = np.array([1, -2], np.int32)
    assert_same(dsl.from_onnx(model).run({"x": x})[0], x.astype(np.float16))
