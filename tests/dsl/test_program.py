"""Tests for dsl/program.py (and the numpy engine under it): feeds, outputs, engines, printing."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.ir import Graph, Node, Value


def make_program(nodes, inputs, outputs, initializers=None, opset=25):
    values = {}

    def value(name, value_type=None):
        values.setdefault(name, Value(name))
        if value_type is not None:
            values[name].type = value_type
        return values[name]

    graph_inputs = [value(name, value_type) for name, value_type in inputs]
    graph_nodes = [Node(op, [value(n) if n else None for n in ins], [value(n) for n in outs], attrs, name)
                   for op, ins, outs, attrs, name in nodes]
    return dsl.Program(Graph("prog", graph_inputs, [value(n) for n in outputs], graph_nodes,
                             dict(initializers or {}), opset))


def mask_program():
    """y = Transpose(Unsqueeze(x, [0, -1])); z = Reshape(b, [-1]) with x: float[N,3], b: int64[N]."""
    nodes = [("Unsqueeze", ["x", "axes"], ["u"], {}, "unsq"),
             ("Transpose", ["u"], ["y"], {"perm": [1, 0, 2, 3]}, "tr"),
             ("Reshape", ["b", "flat"], ["z"], {}, "flat")]
    inputs = [("x", dsl.TensorType("float", ("N", 3))), ("b", dsl.TensorType("int64", ("N",)))]
    consts = {"axes": np.array([0, -1], np.int64), "flat": np.array([-1], np.int64)}
    return make_program(nodes, inputs, ["y", "z"], consts)


X = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([4, 5], np.int64)


def test_types_are_inferred_with_symbols():
    prog = mask_program()
    assert prog.output_types[0] == dsl.TensorType("float", ("N", 1, 3, 1))
    assert prog.output_types["z"].dtype is dsl.int64 and prog.output_types["z"].rank == 1
    assert prog.input_types["b"] == dsl.TensorType(dsl.int64, ("N",))
    with pytest.raises(KeyError):
        prog.input_types["nope"]


def test_run_returns_views_of_the_feeds_and_never_mutates_them():
    x, b = X.copy(), B.copy()
    y, z = mask_program().run({"x": x, "b": b})
    np.testing.assert_array_equal(y, np.transpose(X[None, :, :, None], (1, 0, 2, 3)))
    np.testing.assert_array_equal(z, B)
    assert np.shares_memory(y, x) and np.shares_memory(z, b)
    np.testing.assert_array_equal(x, X)
    np.testing.assert_array_equal(b, B)
    assert x.flags.writeable and b.flags.writeable


def test_list_feeds_are_in_input_order():
    prog = mask_program()
    by_list = prog.run([X, B])
    by_name = prog.run({"b": B, "x": X})
    for got, want in zip(by_list, by_name):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(dsl.InputError, match=r"got 1 inputs, expected 2 \['x', 'b'\]"):
        prog.run([X])


@pytest.mark.parametrize("feeds, match", [
    ({"x": X}, r"missing inputs \['b'\]; expected \['x', 'b'\]"),
    ({"x": X, "b": B, "zz": B}, r"unknown inputs \['zz'\]"),
    ({"x": X, "c": B}, r"unknown inputs \['c'\], missing inputs \['b'\]"),
    ("x", "feeds must be a dict"),
])
def test_feed_names_are_checked(feeds, match):
    with pytest.raises(dsl.InputError, match=match):
        mask_program().run(feeds)


@pytest.mark.parametrize("x, error, match", [
    (X.astype(np.float64), dsl.DTypeError, r"input 'x' has element type double.*expected float"),
    (X.astype(ml_dtypes.bfloat16), dsl.DTypeError, r"input 'x' has element type bfloat16"),
    (X.reshape(3, 2), dsl.ShapeError, r"input 'x' has shape \[3, 2\]; expected float\[N,3\]"),
    (X.reshape(6), dsl.ShapeError, r"input 'x' has shape \[6\]"),
    (None, dsl.InputError, r"input 'x' is None"),
    ([[0.5, 1, 2]] * 2 + [[1.0]], dsl.InputError, r"input 'x'"),
])
def test_bad_feed_type_or_shape(x, error, match):
    with pytest.raises(error, match=match):
        mask_program().run({"x": x, "b": B})


def test_a_repeated_call_skips_the_checks_only_for_the_same_types():
    prog = mask_program()
    for _ in range(3):  # (the second checked call is remembered; the third repeats it)
        y, z = prog.run({"x": X, "b": B})
    assert prog.__dict__.get("_last_run") is not None
    np.testing.assert_array_equal(z, B)
    x2 = X[::-1].copy() + 1
    y2, _ = prog.run({"x": x2, "b": B})  # new values of the same types: computed anew
    np.testing.assert_array_equal(y2, np.transpose(x2[None, :, :, None], (1, 0, 2, 3)))
    for feeds, error, match in [({"x": X.astype(np.float64), "b": B}, dsl.DTypeError, "element type double"),
                                ({"x": X.reshape(3, 2), "b": B}, dsl.ShapeError, r"shape \[3, 2\]"),
                                ({"x": X, "b": np.arange(3)}, dsl.ShapeError, "binds N=3"),
                                ({"x": X, "b": B, "zz": B}, dsl.InputError, "unknown inputs"),
                                ({"x": X}, dsl.InputError, "missing inputs")]:
        with pytest.raises(error, match=match):
            prog.run(feeds)
    big_endian = X.astype(">f4")
    np.testing.assert_array_equal(prog.run({"x": big_endian, "b": B})[0], y)
    np.testing.assert_array_equal(prog.run({"x": X, "b": B}, math="exact")[0], y)


def test_symbolic_dims_must_agree_across_inputs():
    with pytest.raises(dsl.ShapeError, match=r"input 'b' binds N=3 but an earlier input bound N=2"):
        mask_program().run({"x": X, "b": np.arange(3)})
    square = make_program([("Identity", ["s"], ["t"], {}, "")], [("s", dsl.TensorType("int8", ("K", "K")))],
                          ["t"])
    assert square.run({"s": np.zeros((4, 4), np.int8)})[0].shape == (4, 4)
    with pytest.raises(dsl.ShapeError, match="binds K=3"):
        square.run({"s": np.zeros((2, 3), np.int8)})


def test_python_scalars_and_lists_convert_only_without_loss():
    prog = mask_program()
    y, z = prog.run({"x": [[0, 1, 2], [3, 4, 5]], "b": [4, 5]})
    assert y.dtype == np.float32 and z.dtype == np.int64
    np.testing.assert_array_equal(z, B)
    with pytest.raises(dsl.DTypeError, match=r"input 'b' .* cannot be converted to int64"):
        prog.run({"x": X, "b": [4.5, 5.0]})
    small = make_program([("Identity", ["s"], ["t"], {}, "")], [("s", dsl.TensorType("uint8", (2,)))], ["t"])
    with pytest.raises(dsl.DTypeError, match="cannot be converted to uint8"):
        small.run({"s": [1, 300]})
    assert small.run({"s": [1, 255]})[0].dtype == np.uint8
    scalar = make_program([("Identity", ["s"], ["t"], {}, "")], [("s", dsl.TensorType("float", ()))], ["t"])
    assert scalar.run({"s": 2.5})[0].dtype == np.float32
    assert scalar.run({"s": np.float32(2.5)})[0] == 2.5
    with pytest.raises(dsl.DTypeError, match="element type double"):  # numpy scalars are typed
        scalar.run({"s": np.float64(2.5)})


def test_packed_tensor_feeds():
    prog = make_program([("Unsqueeze", ["q", "axes"], ["y"], {}, "")],
                        [("q", dsl.TensorType("int4", (3,)))], ["y"], {"axes": np.array([1], np.int64)})
    packed = dsl.Tensor.from_packed(np.array([0x8F, 0x07], np.uint8), "int4", (3,))  # -1, -8, 7
    got = prog.run({"q": packed})[0]
    assert got.dtype == ml_dtypes.int4 and got.shape == (3, 1)
    assert got.reshape(-1).astype(int).tolist() == [-1, -8, 7]
    with pytest.raises(dsl.DTypeError, match="has element type uint4"):
        prog.run({"q": dsl.Tensor.from_packed(np.array([0, 0], np.uint8), "uint4", (3,))})


def test_string_feeds_become_str_objects():
    prog = make_program([("Identity", ["s"], ["t"], {}, "")], [("s", dsl.TensorType("string", (None,)))],
                        ["t"])
    for feed in (np.array(["ab", "c"]), np.array([b"ab", b"c"]), ["ab", "c"]):
        got = prog.run({"s": feed})[0]
        assert got.dtype == object and got.tolist() == ["ab", "c"]
    with pytest.raises(dsl.InputError, match="not UTF-8"):
        prog.run({"s": np.array([b"\xff"])})


def test_big_endian_feed_gives_native_result():
    y, _ = mask_program().run({"x": X.astype(">f4"), "b": B})
    assert y.dtype == np.float32 and y.dtype.isnative
    np.testing.assert_array_equal(y.reshape(-1), X.reshape(-1))


def test_outputs_from_constants_are_read_only_and_constants_survive():
    prog = make_program([("Reshape", ["c", "shape"], ["y"], {}, "r"), ("Identity", ["c"], ["z"], {}, "")],
                        [], ["y", "z"], {"c": np.arange(4, dtype=np.int32), "shape": np.array([2, 2])})
    y, z = prog.run({})
    for out in (y, z):
        with pytest.raises(ValueError):
            out[...] = 0
    assert prog.graph.initializers["c"].flags.writeable  # the caller's array is not re-flagged
    np.testing.assert_array_equal(prog.run({})[0], np.arange(4).reshape(2, 2))


def test_sequence_and_optional_inputs():
    prog = make_program([("Identity", ["s"], ["t"], {}, ""), ("Identity", ["o"], ["p"], {}, "")],
                        [("s", dsl.SequenceType(dsl.TensorType("float", ("N",)))),
                         ("o", dsl.OptionalType(dsl.TensorType("int64", (2,))))], ["t", "p"])
    seq, opt = prog.run({"s": [np.zeros(2, np.float32)], "o": np.array([1, 2])})
    assert len(seq) == 1 and opt.tolist() == [1, 2]
    assert prog.run({"s": [], "o": None})[1] is None
    with pytest.raises(dsl.InputError, match=r"input 's' is seq\(float\[N\]\); expected a list"):
        prog.run({"s": np.zeros(2, np.float32), "o": None})
    with pytest.raises(dsl.ShapeError, match="binds N=3"):
        prog.run({"s": [np.zeros(2, np.float32), np.zeros(3, np.float32)], "o": None})


def test_unknown_engine_is_an_error():
    prog = mask_program()
    with pytest.raises(dsl.DslError, match=r"engine 'bogus' is not available; expected one of \['jit', 'numpy'\]"):
        prog.run({"x": X, "b": B}, engine="bogus")
    np.testing.assert_array_equal(prog.run({"x": X, "b": B}, engine="numpy")[1], B)


def test_print_shows_readable_typed_ir():
    text = str(mask_program())
    assert text.splitlines()[0] == "graph prog(%x: float[N,3], %b: int64[N]) opset 25 {"
    assert "  %axes = initializer int64[2] [0, -1]" in text
    assert "  %u: float[1,N,3,1] = Unsqueeze(%x, %axes)  # unsq" in text
    assert "  %y: float[N,1,3,1] = Transpose(%u) {perm=[1, 0, 2, 3]}  # tr" in text
    assert text.splitlines()[-2:] == ["  return %y, %z", "}"]
    assert repr(mask_program()).startswith("<dsl.Program prog(x: float[N,3], b: int64[N]) -> "
                                           "(float[N,1,3,1], int64[")


def test_program_checks_the_graph_when_built():
    with pytest.raises(dsl.DslError, match="input 'ghost' is used before it is defined"):
        make_program([("Identity", ["ghost"], ["y"], {}, "")], [], ["y"])
    with pytest.raises(dsl.ShapeError, match=r"Unsqueeze \(node 'u'\): axis 5 out of range"):
        make_program([("Unsqueeze", ["x", "axes"], ["y"], {}, "u")], [("x", dsl.TensorType("float", (2,)))],
                     ["y"], {"axes": np.array([5], np.int64)})


def test_a_program_pickles_before_and_after_it_ran():
    import pickle
    prog = dsl.jit(lambda x: dsl.relu(x - 2.0) * 3.0).lower(X)
    before = pickle.loads(pickle.dumps(prog))
    want = np.maximum(X - 2, 0) * 3
    np.testing.assert_array_equal(prog.run({"x": X})[0], want)  # now holds compiled executables
    after = pickle.loads(pickle.dumps(prog))
    for clone in (before, after):
        np.testing.assert_array_equal(clone.run({"x": X})[0], want)
        np.testing.assert_array_equal(clone.run({"x": X}, engine="numpy")[0], want)
