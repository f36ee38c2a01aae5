"""Tests for dsl/ir.py: value types, the graph verifier and the printer."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.ir import Graph, Node, Value, format_graph, type_of_array


# ---- TensorType ---------------------------------------------------------------------------
def test_tensor_type_dims_and_text():
    t = dsl.TensorType("float", (np.int64(2), "N", None))
    assert t.shape == (2, "N", None) and type(t.shape[0]) is int
    assert t.dtype is dsl.float32 and t.rank == 3 and not t.is_static
    assert str(t) == "float[2,N,?]" and repr(t) == "TensorType(float[2,N,?])"
    assert str(dsl.TensorType(dsl.int4, None)) == "int4[...]" and dsl.TensorType("int4", None).rank is None
    scalar = dsl.TensorType(np.float16)
    assert scalar.shape == () and scalar.is_static and str(scalar) == "float16[]"
    assert dsl.TensorType("float", [2, 3]) == dsl.TensorType(dsl.float32, (2, 3))
    assert len({dsl.TensorType("float", [2]), dsl.TensorType(np.float32, (2,))}) == 1


@pytest.mark.parametrize("shape, match", [
    ((2, -1), "dimension -1"), ((True,), "dimension True"), ((2.0,), "dimension 2.0"),
    (("",), "dimension ''"), ("N5", "shape 'N5'"), (5, "shape 5"),
])
def test_tensor_type_rejects_bad_dims(shape, match):
    with pytest.raises(dsl.ShapeError, match=match):
        dsl.TensorType("float", shape)


def test_tensor_type_rejects_unknown_dtype():
    with pytest.raises(dsl.DTypeError):
        dsl.TensorType("float33", (1,))


def test_type_of_array_and_container_types():
    assert type_of_array(np.zeros((2, 0), ml_dtypes.float8_e4m3fn)) == dsl.TensorType("float8e4m3fn", (2, 0))
    assert type_of_array(np.array(["a"], object)) == dsl.TensorType("string", (1,))
    assert str(dsl.SequenceType(dsl.TensorType("int8", ("N",)))) == "seq(int8[N])"
    assert str(dsl.OptionalType(dsl.SequenceType(dsl.TensorType("bool", ())))) == "optional(seq(bool[]))"


# ---- Graph.verify ---------------------------------------------------------------------------
def chain(*ops_and_names):
    """A graph: input x, then nodes (op, [inputs], [outputs]) over Values shared by name."""
    values = {}

    def v(name):
        return values.setdefault(name, Value(name, dsl.TensorType("float", (2,))))

    x = v("x")
    nodes = [Node(op, [v(n) for n in ins], [v(n) for n in outs], {}, f"n{k}")
             for k, (op, ins, outs) in enumerate(ops_and_names)]
    return Graph("g", [x], [v(ops_and_names[-1][2][0])] if ops_and_names else [x], nodes)


def test_verify_accepts_a_valid_graph():
    chain(("Identity", ["x"], ["a"]), ("Identity", ["a"], ["b"])).verify()


def test_verify_catches_use_before_define():
    graph = chain(("Identity", ["b"], ["a"]), ("Identity", ["x"], ["b"]))
    with pytest.raises(dsl.DslError, match=r"Identity \(node 'n0'\): input 'b' is used before it is defined"):
        graph.verify()


@pytest.mark.parametrize("nodes, match", [
    ([("Identity", ["x"], ["a"]), ("Identity", ["x"], ["a"])],
     r"Identity \(node 'n1'\) output: value 'a' is defined twice"),
    ([("Identity", ["x"], ["x"])], r"Identity \(node 'n0'\) output: value 'x' is defined twice"),
])
def test_verify_catches_double_definition(nodes, match):
    with pytest.raises(dsl.DslError, match=match):
        chain(*nodes).verify()


def test_verify_catches_duplicate_inputs_initializer_redefinition_and_missing_outputs():
    x = Value("x", dsl.TensorType("float", (1,)))
    with pytest.raises(dsl.DslError, match="graph input: value 'x' is defined twice"):
        Graph("g", [x, x], [x], []).verify()
    c, y = Value("c"), Value("y")
    with pytest.raises(dsl.DslError, match="value 'c' is defined twice"):
        Graph("g", [x], [c], [Node("Identity", [x], [c], name="n")], {"c": np.zeros(1)}).verify()
    with pytest.raises(dsl.DslError, match="output 'y' is never defined"):
        Graph("g", [x], [y], []).verify()
    with pytest.raises(dsl.DslError, match="empty value name"):
        Graph("g", [x], [x], [Node("Identity", [x], [Value("")], name="n")]).verify()
    Graph("g", [x], [x, c], [], {"x": np.zeros(1, np.float32), "c": np.zeros(1)}).verify()


# ---- printer ------------------------------------------------------------------------------
def test_format_graph_lists_initializers_attrs_omitted_inputs_and_names():
    x, out = Value("x", dsl.TensorType("float", ("N",))), Value("y")
    big = np.zeros((3, 4), ml_dtypes.bfloat16)
    graph = Graph("g", [x], [out], [Node("Squeeze", [x, None], [out], {"mode": "a"}, "")],
                  {"big": big, "small": np.array([1, 2], np.int8)}, opset=13)
    assert format_graph(graph).splitlines() == [
        "graph g(%x: float[N]) opset 13 {",
        "  %big = initializer bfloat16[3, 4] ...",
        "  %small = initializer int8[2] [1, 2]",
        "  %y = Squeeze(%x, _) {mode='a'}",
        "  return %y",
        "}",
    ]
    assert str(graph) == format_graph(graph)


def test_values_know_their_producer_and_users_across_copies_and_pickles():
    import copy
    import pickle
    x = Value("x")
    chain, nodes = [x], []
    for k in range(5000):  # (deep: a pickle must not recurse through the links)
        nodes.append(Node("Relu", [chain[-1]], [Value(f"v{k}")]))
        chain.append(nodes[-1].outputs[0])
    twice = Node("Add", [chain[-1], chain[-1]], [Value("y")])
    graph = Graph("g", [x], [twice.outputs[0]], nodes + [twice])
    assert x.producer is None and x.users == [nodes[0]]
    assert chain[3].producer is nodes[2] and chain[3].users == [nodes[3]]
    assert chain[-1].users == [twice]  # (read twice by one node: one user)
    for clone in (pickle.loads(pickle.dumps(graph)), copy.deepcopy(graph)):
        clone.verify()
        assert clone.nodes[7].inputs[0].producer is clone.nodes[6]
        assert clone.inputs[0].users == [clone.nodes[0]] and clone.outputs[0].producer is clone.nodes[-1]
    stray = Value("s")
    node = Node("Neg", [x], [stray])
    Node("Abs", [x], [stray])  # takes the link over: node's output now names another producer
    with pytest.raises(dsl.DslError, match="output 's' names another producer"):
        Graph("g", [x], [stray], [node]).verify()
