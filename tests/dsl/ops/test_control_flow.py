"""If, Loop and Scan from ONNX: bodies reading outer values, nested bodies, loop-carried values,
scan axes and directions, empty loops, export, and the errors, on both engines."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import dsl  # noqa: E402
from dsl.ops import control_flow  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
ENGINES = ["jit", "numpy"]


def info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=21, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def const(name, value):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, F, np.shape(value),
                                                                             np.ravel(value).tolist()))


# ---- If -------------------------------------------------------------------------------------------
def if_model(opset=21):
    """y = If(c) then x * w (w: an outer value, x: the graph input) else concat(x, x) (another
    shape), then z = y + 1 outside: the consumer is planned at run time."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [], [info("t", F, None)])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else", [],
                              [info("e", F, None)])
    nodes = [const("w", [2.0, 3.0, 4.0]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["y", "one"], ["z"])]
    return model(nodes, [info("c", B, []), info("x", F, [3])], [info("z", F, None)], opset,
                 [helper.make_tensor("one", F, [], [1.0])])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("opset", [11, 13, 16, 21, 25])
def test_if_takes_a_branch_by_value_reading_outer_values(engine, opset):
    prog = dsl.from_onnx(if_model(opset))
    x = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_array_equal(prog.run({"c": np.array(True), "x": x}, engine=engine)[0],
                                  x * np.array([2, 3, 4], np.float32) + 1)
    np.testing.assert_array_equal(prog.run({"c": np.array(False), "x": x}, engine=engine)[0],
                                  np.concatenate([x, x]) + 1)
    assert prog.output_types[0].shape == (None,)  # (the branches disagree on the length)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["float", "float16", "bfloat16", "float8e4m3fn", "int4", "uint8", "int64", "bool",
                                  "string"])
def test_if_passes_every_element_type_through(engine, name):
    dt = dsl.dtype(name)
    then = helper.make_graph([helper.make_node("Identity", ["a"], ["t"])], "t", [], [info("t", dt.onnx_code, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["b"], ["e"])], "e", [], [info("e", dt.onnx_code, [2])])
    prog = dsl.from_onnx(model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                               [info("c", B, []), info("a", dt.onnx_code, [2]), info("b", dt.onnx_code, [2])],
                               [info("y", dt.onnx_code, [2])]))
    a, b = (np.array(v, dt.np_dtype) for v in ((["x", "y"], ["z", "w"]) if name == "string" else ([1, 0], [0, 1])))
    for flag, want in ((True, a), (False, b)):
        got = prog.run({"c": np.array(flag), "a": a, "b": b}, engine=engine)[0]
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_if_condition_must_have_one_element():
    prog = dsl.from_onnx(model([helper.make_node("If", ["c"], ["y"], then_branch=helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"])], "t", [], [info("t", F, [3])]), else_branch=helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "e", [], [info("e", F, [3])]))],
        [info("c", B, [2]), info("x", F, [3])], [info("y", F, [3])]))
    with pytest.raises(dsl.DslError, match=r"If .*cond has 2 elements"):
        prog.run({"c": np.array([True, False]), "x": np.ones(3, np.float32)})


def test_if_branches_must_agree_on_their_output_count():
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "t", [], [info("t", F, [3])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"]), helper.make_node("Neg", ["x"], ["f"])],
                              "e", [], [info("e", F, [3]), info("f", F, [3])])
    with pytest.raises(dsl.DslError, match="then_branch has 1 outputs and else_branch 2"):
        dsl.from_onnx(model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                            [info("c", B, []), info("x", F, [3])], [info("y", F, [3])]))


# ---- Loop ---------------------------------------------------------------------------------------
def loop_model(m_input=True, cond_input=True, limit=None, opset=21):
    """Loop over i: s = s + x * i (carried), a scan output of s each step; the body stops once
    s exceeds ``limit`` (a graph input read from the outer scope) when a cond is given. Inside
    the body an If picks x * i or -x by i's parity (a nested body reading x, the loop's outer
    value, and i, the body's own)."""
    odd = helper.make_graph([helper.make_node("Cast", ["i"], ["fi"], to=F),
                             helper.make_node("Mul", ["x", "fi"], ["step_odd"])], "odd", [], [info("step_odd", F, None)])
    even = helper.make_graph([helper.make_node("Neg", ["x"], ["step_even"])], "even", [], [info("step_even", F, None)])
    body = helper.make_graph([
        helper.make_node("Mod", ["i", "two"], ["parity"]),
        helper.make_node("Cast", ["parity"], ["is_odd"], to=B),
        helper.make_node("If", ["is_odd"], ["step"], then_branch=odd, else_branch=even),
        helper.make_node("Add", ["s_in", "step"], ["s_out"]),
        helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["go"]),
        helper.make_node("Identity", ["s_out"], ["s_scan"])],
        "body", [info("i", I64, []), info("cond_in", B, []), info("s_in", F, None)],
        [info("go", B, []), info("s_out", F, None), info("s_scan", F, None)],
        [helper.make_tensor("two", I64, [], [2])])
    inputs = [info("x", F, [3]), info("s0", F, [3]), info("limit", F, [])]
    names = ["M" if m_input else "", "c" if cond_input else "", "s0"]
    if m_input:
        inputs.append(info("M", I64, []))
    if cond_input:
        inputs.append(info("c", B, []))
    nodes = [helper.make_node("Loop", names, ["s_final", "s_all"], body=body)]
    return model(nodes, inputs, [info("s_final", F, None), info("s_all", F, None)], opset)


def loop_reference(x, s, limit, trip=None, use_cond=True):
    history, i, go = [], 0, True
    while go and (trip is None or i < trip):
        s = s + (x * np.float32(i) if i % 2 else -x)
        if use_cond:
            go = bool(s.sum() < limit)
        history.append(s)
        i += 1
    return s, np.stack(history) if history else np.zeros((0, 3), np.float32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("form", ["for", "while", "for and while"])
@pytest.mark.parametrize("opset", [11, 13, 16, 19, 21, 23, 24, 25])
def test_loop_carries_values_stacks_scan_outputs_and_runs_a_nested_if(engine, form, opset):
    m_input, cond_input = form != "while", form != "for"
    prog = dsl.from_onnx(loop_model(m_input, cond_input, opset=opset))
    x = np.array([1.0, 2.0, 0.5], np.float32)
    s0 = np.zeros(3, np.float32)
    feeds = {"x": x, "s0": s0, "limit": np.array(20.0, np.float32)}
    if m_input:
        feeds["M"] = np.array(5, np.int64)
    if cond_input:
        feeds["c"] = np.array(True)
    final, stacked = prog.run(feeds, engine=engine)
    want_final, want_stacked = loop_reference(x, s0, 20.0, 5 if m_input else None, cond_input)
    np.testing.assert_allclose(final, want_final, rtol=1e-6)
    np.testing.assert_allclose(stacked, want_stacked, rtol=1e-6)
    assert len(stacked) == (5 if form == "for" else len(want_stacked))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_loop_of_no_iterations_gives_empty_scan_outputs_of_the_body_type(engine):
    prog = dsl.from_onnx(loop_model(True, False))
    s0 = np.arange(3, dtype=np.float32)
    final, stacked = prog.run({"x": np.ones(3, np.float32), "s0": s0, "limit": np.array(1.0, np.float32),
                               "M": np.array(0, np.int64)}, engine=engine)
    np.testing.assert_array_equal(final, s0)
    assert stacked.shape == (0, 3) and stacked.dtype == np.float32


def test_a_loop_body_compiles_once_for_all_its_iterations():
    prog = dsl.from_onnx(loop_model(True, False))
    body = prog.graph.nodes[0].attrs["body"]
    prog.run({"x": np.ones(3, np.float32), "s0": np.zeros(3, np.float32), "limit": np.array(1.0, np.float32),
              "M": np.array(40, np.int64)})
    runs = [key for key in body._programs if all(isinstance(entry, tuple) for entry in key)]  # (dtype, shape) keys
    assert len(runs) == 1  # one signature: 40 iterations through one compiled body


def test_explain_names_a_step_that_runs_bodies():
    prog = dsl.from_onnx(loop_model(True, False))
    feeds = {"x": np.ones(3, np.float32), "s0": np.zeros(3, np.float32), "limit": np.array(1.0, np.float32),
             "M": np.array(2, np.int64)}
    assert prog._executable(prog._check_feeds(feeds)).explain(source=False).startswith("step 0: body  Loop -> ")


def test_a_loop_without_trip_count_or_condition_is_refused():
    with pytest.raises(dsl.UnsupportedError, match="neither a trip count M nor a condition"):
        dsl.from_onnx(loop_model(False, False))


def test_loop_body_signature_is_checked():
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["go"])], "b",
                             [info("i", I64, []), info("cond_in", B, [])], [info("go", B, [])])
    with pytest.raises(dsl.DslError, match=r"Loop .*the body takes 2 inputs; expected 2 \+ 1"):
        dsl.from_onnx(model([helper.make_node("Loop", ["M", "", "v"], ["w"], body=body)],
                            [info("M", I64, []), info("v", F, [2])], [info("w", F, [2])]))


# ---- Scan ---------------------------------------------------------------------------------------
def scan_model(opset, in_axis=0, in_dir=0, out_axis=0, out_dir=0):
    """Scan over x's axis ``in_axis``: state s = s + slice * scale (scale an outer value);
    scan output: the state after each step."""
    body = helper.make_graph([helper.make_node("Mul", ["xs", "scale"], ["scaled"]),
                              helper.make_node("Add", ["s_in", "scaled"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y"])],
                             "body", [info("s_in", F, None), info("xs", F, None)],
                             [info("s_out", F, None), info("y", F, None)])
    attrs = {"num_scan_inputs": 1, "scan_input_axes": [in_axis], "scan_input_directions": [in_dir],
             "scan_output_axes": [out_axis], "scan_output_directions": [out_dir]}
    nodes = [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, **attrs)]
    return model(nodes, [info("x", F, [4, 3]), info("s0", F, None), info("scale", F, [])],
                 [info("s", F, None), info("ys", F, None)], opset)


def scan_reference(x, s, scale, in_axis, in_dir, out_axis, out_dir):
    steps = list(np.moveaxis(x, in_axis, 0))
    if in_dir:
        steps = steps[::-1]
    history = []
    for piece in steps:
        s = s + piece * scale
        history.append(s)
    if out_dir:
        history = history[::-1]
    return s, np.stack(history, axis=out_axis)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("opset", [11, 16, 19, 21, 23, 24, 25])
@pytest.mark.parametrize("in_axis, in_dir, out_axis, out_dir", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 1, 0),
                                                                 (1, 1, 1, 1), (-1, 0, -1, 1)])
def test_scan_axes_and_directions(engine, opset, in_axis, in_dir, out_axis, out_dir):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    s0 = np.zeros(3 if in_axis == 0 else 4, np.float32)
    prog = dsl.from_onnx(scan_model(opset, in_axis, in_dir, out_axis, out_dir))
    got_s, got_ys = prog.run({"x": x, "s0": s0, "scale": np.array(0.5, np.float32)}, engine=engine)
    want_s, want_ys = scan_reference(x, s0, np.float32(0.5), in_axis, in_dir, out_axis, out_dir)
    np.testing.assert_array_equal(got_s, want_s)
    np.testing.assert_array_equal(got_ys, want_ys)


def test_scan_negative_axes_need_version_11():
    with pytest.raises(dsl.DslError, match=r"scan_input_axes\[0\] = -1 .* expected 0 to 1"):
        dsl.from_onnx(scan_model(9, in_axis=-1))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    _, ys = dsl.from_onnx(scan_model(11, in_axis=-1)).run({"x": x, "s0": np.zeros(4, np.float32),
                                                           "scale": np.array(1.0, np.float32)})
    np.testing.assert_array_equal(ys, np.cumsum(x.T, axis=0))


@pytest.mark.parametrize("engine", ENGINES)
def test_scan_inputs_of_different_lengths_are_refused(engine):
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "body",
                             [info("a", F, [3]), info("b", F, [3])], [info("y", F, [3])])
    with pytest.raises(dsl.DslError, match="scan inputs of lengths \\[4, 5\\]"):
        dsl.from_onnx(model([helper.make_node("Scan", ["p", "q"], ["ys"], body=body, num_scan_inputs=2)],
                            [info("p", F, [4, 3]), info("q", F, [5, 3])], [info("ys", F, None)]))


# ---- export -------------------------------------------------------------------------------------
def test_bodies_round_trip_through_to_onnx_without_their_outer_names_as_inputs():
    prog = dsl.from_onnx(loop_model(True, True))
    node = prog.graph.nodes[0]
    assert [v.name for v in node.inputs][-2:] == ["x", "limit"]  # captured: after the node's own inputs
    assert node.attrs["body"].captured == ("x", "limit")
    exported = prog.to_onnx()
    onnx.checker.check_model(exported)
    loop = exported.graph.node[0]
    assert list(loop.input) == ["M", "c", "s0"]
    again = dsl.from_onnx(exported)
    feeds = {"x": np.ones(3, np.float32), "s0": np.zeros(3, np.float32), "limit": np.array(4.0, np.float32),
             "M": np.array(6, np.int64), "c": np.array(True)}
    for got, want in zip(again.run(feeds), prog.run(feeds, engine="numpy")):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_program_with_bodies_pickles_and_runs_after(engine):
    import pickle
    prog = dsl.from_onnx(loop_model(True, True))
    feeds = {"x": np.ones(3, np.float32), "s0": np.zeros(3, np.float32), "limit": np.array(4.0, np.float32),
             "M": np.array(6, np.int64), "c": np.array(True)}
    want = prog.run(feeds, engine=engine)  # (its bodies hold compiled programs by now)
    again = pickle.loads(pickle.dumps(prog))
    for got, expected in zip(again.run(feeds, engine=engine), want):
        np.testing.assert_array_equal(got, expected)


def test_free_names_include_nested_bodies():
    inner = helper.make_graph([helper.make_node("Add", ["a", "outer"], ["r"])], "inner", [], [info("r", F, None)])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["a"]),
                               helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=inner)],
                              "g", [info("x", F, [1])], [info("y", F, None)])
    assert control_flow.free_names(graph) == ["c", "outer"]
