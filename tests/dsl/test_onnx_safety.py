"""Hostile ONNX models: every malformed or unsafe model is a named dsl.DslError, never a crash or a leak."""
import os
import threading
import tracemalloc

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto, TensorProto, helper  # noqa: E402

import dsl  # noqa: E402

DEEP = 100_000  # far beyond Python's recursion limit and protobuf's parse depth


# ---- helpers ------------------------------------------------------------------------------
def make_model(nodes, inputs, outputs, initializers=(), opset=25):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def info(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def identity_model(proto):
    return make_model([helper.make_node("Identity", [proto.name], ["y"])], [], [info("y", proto.data_type)],
                      [proto])


def x_model(node, shape=(2,), opset=25):
    return make_model([node], [info("x", TensorProto.FLOAT, list(shape))], [info("y")], opset=opset)


def run_with_timeout(fn, seconds=20.0):
    """fn() in a daemon thread; fails the test (instead of hanging it) if fn blocks."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds}s"
    if "error" in result:
        raise result["error"]
    return result["value"]


# ---- 1. nested types ----------------------------------------------------------------------
def nested_input_model(depth, pattern):
    """Identity on an input whose type nests ``depth`` wrappers (built in place: protobuf
    refuses to parse or copy messages this deep)."""
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], [], [], opset=16)
    value = model.graph.input.add()
    value.name = "x"
    proto = value.type
    for level in range(depth):
        proto = getattr(proto, pattern[level % len(pattern)]).elem_type
    proto.tensor_type.elem_type = TensorProto.FLOAT
    model.graph.output.add().name = "y"
    return model


@pytest.mark.parametrize("pattern, shown", [
    (["sequence_type"], r"seq\(seq\(\.\.\.\)\)"),
    (["optional_type"], r"optional\(optional\(\.\.\.\)\)"),
    (["optional_type", "sequence_type"], r"optional\(seq\(optional\(\.\.\.\)\)\)")],
    ids=["seq", "optional", "alternating"])
def test_deeply_nested_type_is_refused_without_recursion(pattern, shown):
    with pytest.raises(dsl.UnsupportedError, match=rf"dsl.from_onnx: input 'x' has type {shown}, which "
                                                   r"is not supported; expected tensor"):
        dsl.from_onnx(nested_input_model(DEEP, pattern))


@pytest.mark.parametrize("pattern", [["sequence_type"], ["sequence_type", "optional_type"]],
                         ids=["seq-seq", "seq-optional"])
def test_nesting_no_op_accepts_is_refused_at_load(pattern):
    with pytest.raises(dsl.UnsupportedError, match=r"input 'x' has type seq\((seq|optional)\(\.\.\.\)\)"):
        dsl.from_onnx(nested_input_model(2, pattern))


def test_deep_type_in_serialized_bytes_is_a_dsl_error():
    data = nested_input_model(500, ["sequence_type"]).SerializeToString()
    with pytest.raises(dsl.DslError, match="dsl.from_onnx"):
        dsl.from_onnx(data)


def test_optional_sequence_still_loads():
    prog = dsl.from_onnx(nested_input_model(2, ["optional_type", "sequence_type"]))
    assert prog.input_types[0] == dsl.OptionalType(dsl.SequenceType(dsl.TensorType("float", None)))


def test_sequence_without_element_type_names_the_nesting():
    model = nested_input_model(1, ["sequence_type"])
    model.graph.input[0].type.sequence_type.elem_type.Clear()
    with pytest.raises(dsl.InputError, match=r"input 'x' has no type inside seq\(\.\.\.\)"):
        dsl.from_onnx(model)


# ---- 2. element counts beyond int64 -------------------------------------------------------
def _tensor(data_type, dims, **fields):
    proto = TensorProto(name="c", data_type=data_type, dims=dims)
    for key, values in fields.items():
        if key == "raw_data":
            proto.raw_data = values
        else:
            getattr(proto, key).extend(values)
    return proto


WRAPS = [3, 6148914691236517206]  # 3 * that = 2**64 + 2: int64 numpy prod says 2 elements
OVERFLOW = {
    "2**64 raw empty": (_tensor(TensorProto.FLOAT, [2 ** 32, 2 ** 32], raw_data=b""),
                        r"has 0 raw bytes; expected 73786976294838206464"),
    "2**64 fields empty": (_tensor(TensorProto.FLOAT, [2 ** 32, 2 ** 32]),
                           r"has 0 values; expected 18446744073709551616"),
    "wrap raw": (_tensor(TensorProto.FLOAT, WRAPS, raw_data=b"\0" * 8),
                 r"has 8 raw bytes; expected 73786976294838206472"),
    "wrap float_data": (_tensor(TensorProto.FLOAT, WRAPS, float_data=[1.0, 2.0]),
                        r"has 2 values; expected 18446744073709551618"),
    "wrap int32_data": (_tensor(TensorProto.INT8, WRAPS, int32_data=[1, 2]),
                        r"has 2 values; expected 18446744073709551618"),
    "wrap string_data": (_tensor(TensorProto.STRING, WRAPS, string_data=[b"a", b"b"]),
                         r"has 2 values; expected 18446744073709551618"),
    "wrap complex": (_tensor(TensorProto.COMPLEX64, WRAPS, float_data=[1.0, 2.0, 3.0, 4.0]),
                     r"has 4 float_data entries; expected 36893488147419103236"),
    "wrap packed": (_tensor(TensorProto.INT4, WRAPS, int32_data=[1]),
                    r"has 1 int32_data entries; expected 9223372036854775809"),
}


@pytest.mark.parametrize("name", list(OVERFLOW))
def test_dims_whose_product_overflows_int64_are_an_input_error(name):
    proto, match = OVERFLOW[name]
    with pytest.raises(dsl.InputError, match=rf"dsl.from_onnx: tensor 'c'.* {match}"):
        dsl.from_onnx(identity_model(proto))


def test_constant_attribute_with_wrapping_dims_names_the_node():
    node = helper.make_node("Constant", [], ["y"], name="k",
                            value=_tensor(TensorProto.FLOAT, WRAPS, raw_data=b"\0" * 8))
    with pytest.raises(dsl.InputError, match=r"Constant \(node 'k'\): attribute 'value': tensor 'c' "
                                             r"float\[3, 6148914691236517206\] has 8 raw bytes"):
        dsl.from_onnx(make_model([node], [], [info("y")]))


def test_missing_data_of_a_huge_tensor_never_allocates():
    proto = _tensor(TensorProto.DOUBLE, [2 ** 20, 2 ** 20, 2 ** 24])  # 2**64 elements: int64 says 0
    tracemalloc.start()
    try:
        with pytest.raises(dsl.InputError, match="has 0 values; expected 18446744073709551616"):
            dsl.from_onnx(identity_model(proto))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2 ** 20, peak


@pytest.mark.parametrize("dims", [[0, 2 ** 62, 2 ** 62], [2 ** 62, 2 ** 62, 0], [0, 2 ** 63 - 1]])
def test_empty_tensor_numpy_cannot_hold_is_a_shape_error(dims):
    with pytest.raises(dsl.ShapeError, match=r"tensor 'c' has dims .* more than numpy can index"):
        dsl.from_onnx(identity_model(_tensor(TensorProto.FLOAT, dims, raw_data=b"")))


def test_rank_numpy_cannot_hold_is_a_shape_error():
    with pytest.raises(dsl.ShapeError, match=r"tensor 'c' has rank 65; numpy holds at most"):
        dsl.from_onnx(identity_model(_tensor(TensorProto.FLOAT, [1] * 65, raw_data=b"\0" * 4)))


@pytest.mark.parametrize("where", ["input", "value_info"])
def test_huge_declared_value_type_is_a_shape_error_naming_the_value(where):
    model = x_model(helper.make_node("Identity", ["x"], ["y"]))
    huge = info("x" if where == "input" else "z", TensorProto.FLOAT, [2 ** 32, 2 ** 32])
    (model.graph.input if where == "input" else model.graph.value_info).insert(0, huge)
    if where == "input":
        del model.graph.input[1:]
    name = "input 'x'" if where == "input" else "value 'z'"
    with pytest.raises(dsl.ShapeError, match=rf"dsl.from_onnx: {name}: .*18446744073709551616 elements"):
        dsl.from_onnx(model)


# ---- 3. attribute text that is not UTF-8 --------------------------------------------------
def _raw_attr(node, name, kind, value):
    attr = node.attribute.add()
    attr.name, attr.type = name, kind
    if kind == AttributeProto.STRING:
        attr.s = value
    else:
        attr.strings.extend(value)
    return node


def test_string_attribute_that_is_not_utf8_is_an_input_error():
    node = _raw_attr(helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.FLOAT8E4M3FN),
                     "round_mode", AttributeProto.STRING, b"up\xff\xfe")
    with pytest.raises(dsl.InputError, match=r"Cast \(node 'c'\): attribute 'round_mode' is not UTF-8: "
                                             r"b'up\\xff\\xfe'"):
        dsl.from_onnx(x_model(node))


def test_strings_attribute_that_is_not_utf8_names_the_entry_and_truncates():
    node = _raw_attr(helper.make_node("Constant", [], ["y"], name="k"), "value_strings",
                     AttributeProto.STRINGS, [b"ok", b"\xff" * 500])
    with pytest.raises(dsl.InputError, match=r"Constant \(node 'k'\): attribute 'value_strings' entry 1 "
                                             r"is not UTF-8: b'(\\xff){40}'\.\.\. ") as caught:
        dsl.from_onnx(make_model([node], [], [info("y", TensorProto.STRING)]))
    assert len(str(caught.value)) < 400


# ---- 4. nodes without outputs -------------------------------------------------------------
@pytest.mark.parametrize("outputs", [[], [""], ["", ""]], ids=["none", "one-omitted", "all-omitted"])
def test_node_listing_no_outputs_is_refused_at_load(outputs):
    node = helper.make_node("Identity", ["x"], outputs, name="n")
    model = make_model([node], [info("x", TensorProto.FLOAT, [2])], [info("x", TensorProto.FLOAT, [2])])
    with pytest.raises(dsl.InputError, match=r"Identity \(node 'n'\): lists 0 outputs .*the op produces "
                                             r"at least 1 at opset 25"):
        dsl.from_onnx(model)


# ---- 5. external data ---------------------------------------------------------------------
VALUES = np.array([1.5, -2.0, 3.25, 4.0], np.float32)


def external_tensor(location, offset=None, length=None, name="w", extra=()):
    proto = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[4])
    proto.data_location = TensorProto.EXTERNAL
    entries = [("location", location)] + [(k, v) for k, v in (("offset", offset), ("length", length))
                                          if v is not None] + list(extra)
    for key, value in entries:
        entry = proto.external_data.add()
        entry.key, entry.value = key, str(value)
    return proto


def write_model(folder, proto, name="model.onnx"):
    """The model file (written as plain bytes: onnx.save would touch the external files)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(identity_model(proto).SerializeToString())
    return path


@pytest.fixture
def tree(tmp_path):
    """tmp/model (the model folder) and tmp/secret.bin outside it (16 bytes, a valid payload)."""
    (tmp_path / "model").mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(VALUES.tobytes())
    return tmp_path / "model", secret


def load(path):
    return dsl.from_onnx(path).run({})[0]


def test_external_file_inside_the_folder_loads(tree):
    folder, _ = tree
    (folder / "sub").mkdir()
    (folder / "sub" / "w.bin").write_bytes(b"\x07" * 8 + VALUES.tobytes() + b"\x09" * 3)
    path = write_model(folder, external_tensor("sub/w.bin", offset=8, length=16))
    got = load(path)
    assert got.dtype == np.float32 and np.array_equal(got, VALUES)
    assert np.array_equal(load(str(path)), VALUES)


def test_external_file_without_offset_and_length_reads_the_tensor_size(tree):
    folder, _ = tree
    (folder / "w.bin").write_bytes(VALUES.tobytes())
    assert np.array_equal(load(write_model(folder, external_tensor("./w.bin"))), VALUES)


def test_bytes_and_model_proto_read_external_data_only_with_base_dir(tree):
    folder, _ = tree
    (folder / "w.bin").write_bytes(VALUES.tobytes())
    model = identity_model(external_tensor("w.bin"))
    for source in (model, model.SerializeToString()):
        with pytest.raises(dsl.UnsupportedError, match=r"tensor 'w' stores its data in external file "
                                                       r"'w.bin', and the model directory is unknown"):
            dsl.from_onnx(source)
        assert np.array_equal(dsl.from_onnx(source, base_dir=folder).run({})[0], VALUES)


def test_base_dir_must_be_a_directory(tree):
    folder, secret = tree
    for bad in (secret, folder / "missing", 42, "", "a\0b", b"/tmp"):
        with pytest.raises(dsl.InputError, match="dsl.from_onnx: base_dir .* is not a directory"):
            dsl.from_onnx(identity_model(external_tensor("w.bin")), base_dir=bad)


def test_model_folder_reached_through_a_symlink_still_loads(tree, tmp_path):
    folder, _ = tree
    (folder / "w.bin").write_bytes(VALUES.tobytes())
    write_model(folder, external_tensor("w.bin"))
    os.symlink(folder, tmp_path / "alias")
    assert np.array_equal(load(tmp_path / "alias" / "model.onnx"), VALUES)


def test_constant_attribute_tensor_reads_external_data(tree):
    folder, _ = tree
    (folder / "w.bin").write_bytes(VALUES.tobytes())
    node = helper.make_node("Constant", [], ["y"], value=external_tensor("w.bin"))
    path = folder / "model.onnx"
    path.write_bytes(make_model([node], [], [info("y")]).SerializeToString())
    assert np.array_equal(load(path), VALUES)


def test_onnx_never_resolves_external_data(tree, monkeypatch):
    folder, _ = tree
    (folder / "w.bin").write_bytes(VALUES.tobytes())
    path = write_model(folder, external_tensor("w.bin"))

    def refuse(*args, **kwargs):
        raise AssertionError("onnx resolved external data")
    monkeypatch.setattr(onnx, "load_external_data_for_model", refuse)
    monkeypatch.setattr(onnx.external_data_helper, "load_external_data_for_model", refuse)
    assert np.array_equal(load(path), VALUES)


@pytest.mark.parametrize("location, match", [
    ("../secret.bin", r"'\.\.' component"),
    ("sub/../../secret.bin", r"'\.\.' component"),
    ("..", r"'\.\.' component"),
    ("w.bin\0../../secret.bin", "NUL character"),
    ("\\..\\secret.bin", "absolute path or uses backslashes"),
    ("C:secret.bin", "absolute path or uses backslashes"),
    ("", "no external_data 'location'"),
    ("./", "names no file"),
])
def test_external_location_that_could_escape_is_refused(tree, location, match):
    folder, _ = tree
    with pytest.raises(dsl.InputError, match=rf"dsl.from_onnx: tensor 'w' .*{match}"):
        load(write_model(folder, external_tensor(location)))


def test_absolute_external_location_is_refused(tree):
    folder, secret = tree
    with pytest.raises(dsl.InputError, match=r"tensor 'w' has external data location '.*secret.bin': it is "
                                             r"an absolute path"):
        load(write_model(folder, external_tensor(str(secret))))


def test_symlink_to_a_file_outside_is_refused(tree):
    folder, secret = tree
    os.symlink(secret, folder / "w.bin")
    with pytest.raises(dsl.InputError, match=r"location 'w.bin': 'w.bin' is a symlink"):
        load(write_model(folder, external_tensor("w.bin")))


def test_symlink_to_a_file_inside_is_refused_too(tree):
    folder, _ = tree
    (folder / "real.bin").write_bytes(VALUES.tobytes())
    os.symlink("real.bin", folder / "w.bin")
    with pytest.raises(dsl.InputError, match="'w.bin' is a symlink"):
        load(write_model(folder, external_tensor("w.bin")))


def test_symlinked_directory_is_refused(tree, tmp_path):
    folder, _ = tree
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(VALUES.tobytes())
    os.symlink(outside, folder / "sub")
    with pytest.raises(dsl.InputError, match=r"location 'sub/w.bin': 'sub' is a symlink"):
        load(write_model(folder, external_tensor("sub/w.bin")))


def test_hardlink_is_refused(tree):
    folder, secret = tree
    try:
        os.link(secret, folder / "w.bin")
    except OSError as exc:  # pragma: no cover - filesystems without hard links
        pytest.skip(f"no hard links here: {exc}")
    with pytest.raises(dsl.InputError, match="the file has 2 hard links"):
        load(write_model(folder, external_tensor("w.bin")))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_as_external_file_is_refused_without_blocking(tree):
    folder, _ = tree
    os.mkfifo(folder / "w.bin")
    path = write_model(folder, external_tensor("w.bin"))
    with pytest.raises(dsl.InputError, match="'w.bin': it is not a regular file"):
        run_with_timeout(lambda: load(path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_as_model_file_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "model.onnx")
    with pytest.raises(dsl.InputError, match="model .* is not a regular file"):
        run_with_timeout(lambda: dsl.from_onnx(tmp_path / "model.onnx"))


def test_directory_or_missing_external_file_is_refused(tree):
    folder, _ = tree
    (folder / "dir").mkdir()
    (folder / "plain").write_bytes(b"")
    for location, match in (("dir", "it is not a regular file"), ("missing.bin", "cannot stat 'missing.bin'"),
                            ("plain/w.bin", "'plain' is not a directory")):
        with pytest.raises(dsl.InputError, match=match):
            load(write_model(folder, external_tensor(location)))


@pytest.mark.parametrize("offset, length, match", [
    (24, None, r"reads bytes \[24, 40\) of external data 'w.bin', which has 32 bytes"),
    (17, 16, r"reads bytes \[17, 33\)"),
    (2 ** 62, 16, r"reads bytes \[4611686018427387904, 4611686018427387920\)"),
    (10 ** 25, 16, r"offset '10{25}'; expected a non-negative decimal integer of at most 20 digits"),
    (-4, None, "offset '-4'; expected a non-negative decimal integer"),
    ("+4", None, "offset '\\+4'; expected a non-negative"),
    (" 4", None, "offset ' 4'; expected a non-negative"),
    ("1_0", None, "offset '1_0'; expected a non-negative"),
    (0, -16, "length '-16'; expected a non-negative"),
    (0, 8, r"external length 8; expected 16 bytes"),
    (0, 32, r"external length 32; expected 16 bytes"),
])
def test_external_offset_and_length_are_checked(tree, offset, length, match):
    folder, _ = tree
    (folder / "w.bin").write_bytes(bytes(32))
    with pytest.raises(dsl.InputError, match=match):
        load(write_model(folder, external_tensor("w.bin", offset, length)))


def test_external_metadata_is_strict(tree):
    folder, _ = tree
    (folder / "w.bin").write_bytes(VALUES.tobytes())
    cases = [(external_tensor("w.bin", extra=[("__class__", "x")]), "unknown external_data key '__class__'"),
             (external_tensor("w.bin", extra=[("location", "w.bin")]), "key 'location' twice")]
    with_raw = external_tensor("w.bin")
    with_raw.raw_data = VALUES.tobytes()
    cases.append((with_raw, "data_location EXTERNAL but also holds data in the model"))
    default = external_tensor("w.bin")
    default.data_location = TensorProto.DEFAULT
    default.raw_data = VALUES.tobytes()
    cases.append((default, "has external_data entries but data_location DEFAULT"))
    text = TensorProto(name="w", data_type=TensorProto.STRING, dims=[1])
    text.data_location = TensorProto.EXTERNAL
    text.external_data.add(key="location", value="w.bin")
    cases.append((text, "string tensor with external data"))
    for proto, match in cases:
        with pytest.raises(dsl.InputError, match=rf"dsl.from_onnx: tensor 'w' .*{match}"):
            load(write_model(folder, proto))


# ---- 6. silently accepted duplicates and attribute types ----------------------------------
def test_duplicate_initializer_names_are_refused():
    inits = [helper.make_tensor("c", TensorProto.FLOAT, [1], [1.0]),
             helper.make_tensor("c", TensorProto.FLOAT, [1], [2.0])]
    model = make_model([helper.make_node("Identity", ["c"], ["y"])], [], [info("y")], inits)
    with pytest.raises(dsl.InputError, match="dsl.from_onnx: initializer 'c' appears twice"):
        dsl.from_onnx(model)


def test_duplicate_value_info_names_are_refused():
    model = x_model(helper.make_node("Identity", ["x"], ["y"]))
    model.graph.value_info.extend([info("y", TensorProto.FLOAT, [2]), info("y", TensorProto.INT64, [2])])
    with pytest.raises(dsl.InputError, match="dsl.from_onnx: value_info entry 'y' appears twice"):
        dsl.from_onnx(model)


def test_duplicate_attribute_names_are_refused():
    node = helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.FLOAT)
    node.attribute.append(helper.make_attribute("to", TensorProto.INT64))
    with pytest.raises(dsl.InputError, match=r"Cast \(node 'c'\): attribute 'to' is given twice"):
        dsl.from_onnx(x_model(node))


@pytest.mark.parametrize("second", ["", "ai.onnx"])
def test_duplicate_default_domain_opset_imports_are_refused(second):
    model = x_model(helper.make_node("Identity", ["x"], ["y"]))
    model.opset_import.append(helper.make_opsetid(second, 13))
    with pytest.raises(dsl.InputError, match=r"dsl.from_onnx: the model imports domain '(ai.onnx)?' twice"):
        dsl.from_onnx(model)


@pytest.mark.parametrize("op, name, value, shape, got, expected, kind", [
    ("Cast", "to", "float", (2,), "STRING", "INT", "dtype"),
    ("Cast", "to", [TensorProto.FLOAT], (2,), "INTS", "INT", "dtype"),
    ("Flatten", "axis", 1.0, (2, 2), "FLOAT", "INT", "int"),
    ("Flatten", "axis", [1], (2, 2), "INTS", "INT", "int"),
    ("Transpose", "perm", 1, (2, 2), "INT", "INTS", "ints"),
    ("Clip", "min", 0, (2,), "INT", "FLOAT", "float"),
], ids=["cast-to-string", "cast-to-ints", "flatten-float", "flatten-ints", "transpose-int", "clip-int"])
def test_attribute_type_must_match_the_schema_kind(op, name, value, shape, got, expected, kind):
    node = helper.make_node(op, ["x"], ["y"], name="n", **{name: value})
    opset = 6 if op == "Clip" else 25  # Clip's min/max are attributes before opset 11
    with pytest.raises(dsl.InputError, match=rf"{op} \(node 'n'\): attribute '{name}' has type {got}; "
                                             rf"expected {expected} \(schema kind '{kind}'\)"):
        dsl.from_onnx(x_model(node, shape, opset))


def test_constant_value_must_be_a_tensor_attribute():
    node = helper.make_node("Constant", [], ["y"], name="k", value=1.0)
    with pytest.raises(dsl.InputError, match=r"Constant \(node 'k'\): attribute 'value' has type FLOAT; "
                                             r"expected TENSOR"):
        dsl.from_onnx(make_model([node], [], [info("y")]))


def test_correctly_typed_attributes_still_load():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)
    model = make_model([node], [info("x", TensorProto.FLOAT, [2])], [info("y", TensorProto.INT64)])
    got = dsl.from_onnx(model).run({"x": np.array([1.5, -2.5], np.float32)})[0]
    assert got.dtype == np.int64 and got.tolist() == [1, -2]


# ---- names --------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["input", "output", "value_info", "initializer"])
def test_empty_value_names_are_refused(where):
    model = x_model(helper.make_node("Identity", ["x"], ["y"]))
    if where == "input":
        model.graph.input.append(info("", TensorProto.FLOAT, [2]))
    elif where == "output":
        model.graph.output.append(info("", TensorProto.FLOAT, [2]))
    elif where == "value_info":
        model.graph.value_info.append(info("", TensorProto.FLOAT, [2]))
    else:
        model.graph.initializer.append(helper.make_tensor("", TensorProto.FLOAT, [1], [1.0]))
    what = {"input": "graph input 1", "output": "graph output 1", "value_info": "value_info entry 0",
            "initializer": "initializer 0"}[where]
    with pytest.raises(dsl.InputError, match=rf"dsl.from_onnx: {what} has an empty name"):
        dsl.from_onnx(model)


def test_node_input_never_defined_is_a_dsl_error():
    model = x_model(helper.make_node("Identity", ["nowhere"], ["y"], name="n"))
    with pytest.raises(dsl.DslError, match=r"Identity \(node 'n'\): input 'nowhere' is used before it is "
                                           r"defined"):
        dsl.from_onnx(model)
