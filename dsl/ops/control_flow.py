"""Control flow: If, Loop and Scan at every schema version, each body a program of its own.

A body is a GRAPH attribute, read by dsl/onnx_io.py as a ``Body``: the GraphProto, the model's
opset and where external data lives. The values a body reads from enclosing scopes (its free
names, nested bodies included) are listed after the node's own inputs (``Body.captured``, the
union over the node's bodies), so the outer program computes them before the node and both
engines hand them over like any input.

At run time a body becomes a ``dsl.Program`` for the concrete types of what it is fed (built
once per signature and kept; a Loop whose carried values keep their shapes builds one), run by
the engine and math of the program that runs the node: under the JIT, the body's kernels are
compiled once and reused by every iteration.

The rules give the types the bodies declare (branches merged: a dim the branches disagree on is
unknown), the shapes that depend on the data (a Loop's iteration count, If's branch) unknown,
so the consumers are planned again at run time. Sequence and optional values in bodies are not
supported (a DTypeError / UnsupportedError names them). A Loop with neither a trip count nor a
condition would run forever: an UnsupportedError.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from .. import dtypes
from ..errors import DslError, DTypeError, InputError, ShapeError, UnsupportedError, where
from ..ir import TensorType, type_of_array
from ..lru import LRU
from . import chunks
from .registry import Attr, Call, Input, OpDef, Schema, register

# (engine, math) of the Program.run in progress: a body runs as the program around it does
RUNNING = contextvars.ContextVar("dsl_control_flow_running", default=("jit", "fast"))
MAX_CAPTURED = 256  # outer values one node's bodies may read
_TENSORS = frozenset(dtypes.ALL)
_BOOL, _INT64 = dtypes.types("bool"), dtypes.types("int64")


# ---- bodies -------------------------------------------------------------------------------------
def free_names(graph) -> list[str]:
    """The names ``graph`` (a GraphProto) reads but does not define, nested bodies included, in
    first-use order: what its node must capture from the enclosing scope."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | \
        {t.values.name for t in graph.sparse_initializer}
    found: list[str] = []
    for node in graph.node:
        used = list(node.input)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                used += free_names(sub)
        for name in used:
            if name and name not in defined and name not in found:
                found.append(name)
        defined |= set(node.output)
    return found


@dataclass(eq=False)
class Body:
    """A GRAPH attribute: ``graph`` (onnx.GraphProto), the model's default-domain ``opset``,
    ``base_dir`` for external data, ``declared``: its outputs' declared types (None where
    untyped), and ``captured``: the outer names the node lists after its own inputs. Programs
    are built per signature of the values fed, by ``BUILD`` (a ModelProto and base_dir -> a
    Program; installed by dsl/program.py, the layer that owns Programs)."""

    graph: Any
    opset: int
    base_dir: str | None = None
    declared: list = field(default_factory=list)
    captured: tuple = ()
    _programs: LRU = field(default_factory=lambda: LRU("signatures"), repr=False)  # (bounded: shapes may change every iteration)

    BUILD: ClassVar[Callable | None] = None

    def __repr__(self) -> str:
        return f"<body {self.graph.name or '?'}: {len(self.graph.node)} nodes>"

    def __getstate__(self) -> dict:
        """Pickles without its programs (dsl.dask ships Programs; compiled state is per process)."""
        return {k: v for k, v in self.__dict__.items() if k != "_programs"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _programs=LRU("signatures"))

    @property
    def input_count(self) -> int:
        return len(self.graph.input)

    @property
    def output_count(self) -> int:
        return len(self.graph.output)

    def output_types(self, label: str, input_types: list | None = None) -> list:
        """The types of the body's outputs: as shape inference of the body finds them for
        ``input_types`` (its own inputs', then the captured values'), when given; else as
        declared (None where the body leaves one untyped)."""
        declared = list(self.declared)
        if input_types is None:
            return declared
        key = tuple(input_types)
        program = self._programs.get(key)
        if program is None:
            program = self._programs[key] = self._program(list(input_types))
        return [t if t is not None else d for d, t in zip(declared, program.output_types)]

    def run(self, formal: list, captured: list, label: str) -> list:
        """The body's outputs for its inputs ``formal`` (arrays in its input order) and the
        node's ``captured`` values (in ``self.captured`` order)."""
        if len(formal) != self.input_count:
            raise InputError(f"{label}: the body takes {self.input_count} inputs "
                             f"{[vi.name for vi in self.graph.input]}; the node feeds it {len(formal)}")
        arrays = [np.asarray(a) for a in (*formal, *captured)]
        key = tuple((array.dtype, array.shape) for array in arrays)  # (cheap: once per iteration)
        program = self._programs.get(key)
        if program is None:
            types = [type_of_array(array) for array in arrays]
            program = self._programs[key] = self._program(types)
        names = [vi.name for vi in self.graph.input] + list(self.captured)
        engine, math = RUNNING.get()
        return program.run(dict(zip(names, arrays)), engine=engine, math=math)

    def _program(self, types: list):
        """A Program of the body whose inputs have ``types`` (TensorTypes: its own inputs, then
        the captured names, free in the body and inputs of this program)."""
        import onnx
        graph = onnx.GraphProto()
        graph.CopyFrom(self.graph)
        del graph.input[:]
        for output in graph.output:  # (inferred from these inputs: a declared type may leave dims out)
            output.ClearField("type")
        names = [vi.name for vi in self.graph.input] + list(self.captured)
        for name, value_type in zip(names, types):
            if not isinstance(value_type, TensorType):
                raise UnsupportedError(f"a body input {name!r} of type {value_type}; sequence and optional "
                                       f"values are not supported in bodies")
            graph.input.append(onnx.helper.make_tensor_value_info(name, value_type.dtype.onnx_code, value_type.shape))
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", self.opset)])
        model.ir_version = 10
        return Body.BUILD(model, self.base_dir)


def _body(call: Call, name: str) -> Body:
    body = call.attrs[name]
    if not isinstance(body, Body):
        call.fail(f"attribute {name!r} = {body!r:.80}; expected a graph (a body read from ONNX)", InputError)
    return body


def _captured_types(call: Call, body: Body) -> list:
    return list(call.types[len(call.types) - len(body.captured):])


_SCALAR_INT64, _SCALAR_BOOL = TensorType(dtypes.dtype("int64"), ()), TensorType(dtypes.dtype("bool"), ())


def _slice_type(t: TensorType, axis: int) -> TensorType:
    return TensorType(t.dtype, None if t.shape is None else (*t.shape[:axis], *t.shape[axis + 1:]))


def _captured(call: Call, body: Body, xs: list) -> tuple[list, list]:
    """(the node's own inputs, the captured values) of ``xs``."""
    count = len(body.captured)
    return list(xs[:len(xs) - count]), list(xs[len(xs) - count:])


def _merge(a, b):
    """The type both may be: dims that differ unknown (None), ranks that differ an unknown
    rank; element types must agree."""
    if a is None or b is None:
        return a if b is None else b
    if not isinstance(a, TensorType) or not isinstance(b, TensorType):
        return a
    if a.dtype != b.dtype:
        raise DTypeError(f"body outputs of element types {a.dtype} and {b.dtype}; expected one type")
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(a.dtype, None)
    return TensorType(a.dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)))


def _tensor_types(call: Call, types: list, what: str) -> list:
    for k, t in enumerate(types):
        if t is None:
            call.fail(f"{what} {k} has no declared type; expected the body to type its outputs", UnsupportedError)
        if not isinstance(t, TensorType):
            call.fail(f"{what} {k} is {t}; sequence and optional values are not supported in bodies",
                      UnsupportedError)
    return types


def _scalar_flag(call: Call, value, what: str) -> bool:
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        call.fail(f"{what} has {flat.size} elements (shape {list(np.shape(value))}); expected one", ShapeError)
    return bool(flat[0])


def _node_outputs(call: Call, expected: int, what: str) -> None:
    if call.outputs is not None and call.outputs != expected:
        call.fail(f"the node lists {call.outputs} outputs; {what} gives {expected}", InputError)


# ---- If -----------------------------------------------------------------------------------------
def _if_rule(call: Call) -> list:
    then_body, else_body = _body(call, "then_branch"), _body(call, "else_branch")
    if then_body.output_count != else_body.output_count:
        call.fail(f"then_branch has {then_body.output_count} outputs and else_branch "
                  f"{else_body.output_count}; expected the same count", InputError)
    _node_outputs(call, then_body.output_count, "each branch")
    label = where(call.op, call.node)
    then_types, else_types = (_branch_types(body, label, _captured_types(call, body)) for body in (then_body, else_body))
    try:
        merged = [_merge(a, b) for a, b in zip(then_types, else_types)]
    except DTypeError as exc:
        call.fail(f"the branches disagree: {exc}", DTypeError)
    if call.values[0] is not None:  # a constant condition: the branch taken is known
        taken = then_types if _scalar_flag(call, call.values[0], "cond") else else_types
        merged = [t if t is not None else m for t, m in zip(taken, merged)]
    return _tensor_types(call, merged, "branch output")


def _branch_types(body: Body, label: str, captured: list) -> list:
    """A branch's output types; a branch that cannot be inferred for these inputs (the other one
    is the one a valid model takes for them: AffineGrid's 2-D branch fed 3-D sizes) gives what it
    declares, and fails only if it is taken."""
    try:
        return body.output_types(label, captured)
    except DslError:
        return body.output_types(label)


def _if_reference(call: Call, xs: list) -> list:
    body = _body(call, "then_branch" if _scalar_flag(call, xs[0], "cond") else "else_branch")
    return body.run([], _captured(call, body, xs)[1], where(call.op, call.node))


# ---- Loop ---------------------------------------------------------------------------------------
def _loop_counts(call: Call, body: Body) -> tuple[int, int]:
    """(N loop-carried values, K scan outputs), checked against the body's signature."""
    carried = len(call.types) - len(body.captured) - 2
    if body.input_count != carried + 2:
        call.fail(f"the body takes {body.input_count} inputs; expected 2 + {carried} (iteration "
                  f"number, condition, the loop-carried values)", InputError)
    scans = body.output_count - 1 - carried
    if scans < 0:
        call.fail(f"the body gives {body.output_count} outputs; expected at least 1 + {carried} (the "
                  f"condition, the loop-carried values)", InputError)
    _node_outputs(call, carried + scans, "the body")
    return carried, scans


def _loop_rule(call: Call) -> list:
    body = _body(call, "body")
    carried, scans = _loop_counts(call, body)
    if call.input_type(0) is None and call.input_type(1) is None:
        call.fail("has neither a trip count M nor a condition: it would run forever", UnsupportedError)
    initial = _tensor_types(call, list(call.types[2:2 + carried]), "loop-carried input")
    declared = body.output_types(where(call.op, call.node),
                                 [_SCALAR_INT64, _SCALAR_BOOL, *initial, *_captured_types(call, body)])
    finals = [_merge(t, d) for t, d in zip(initial, declared[1:1 + carried])]
    stacked = []
    for t in _tensor_types(call, declared[1 + carried:], "scan output"):
        stacked.append(TensorType(t.dtype, None if t.shape is None else (None, *t.shape)))
    return [*finals, *stacked]


def _loop_reference(call: Call, xs: list) -> list:
    body = _body(call, "body")
    label = where(call.op, call.node)
    carried, scans = _loop_counts(call, body)
    own, captured = _captured(call, body, xs)
    fed = [_SCALAR_INT64, _SCALAR_BOOL, *[_array_type(v) for v in own[2:]], *map(_array_type, captured)]
    trip = None
    if own[0] is not None:
        flat = np.asarray(own[0]).reshape(-1)
        if flat.size != 1:
            call.fail(f"M has {flat.size} elements; expected one", ShapeError)
        trip = int(flat[0])
    keep = True if own[1] is None else _scalar_flag(call, own[1], "cond")
    values = list(own[2:])
    steps: list[list] = []
    iteration = 0
    while keep and (trip is None or iteration < trip):
        outs = body.run([np.array(iteration, np.int64), np.array(keep), *values], captured, label)
        if own[1] is not None:  # (without a cond input the body's condition is ignored)
            keep = _scalar_flag(call, outs[0], "the body's condition")
        values = list(outs[1:1 + carried])
        steps.append(outs[1 + carried:])
        iteration += 1
    declared = body.output_types(label, fed)[1 + carried:] if not steps else [None] * scans
    return [*values, *[_stack([step[k] for step in steps], 0, declared[k]) for k in range(scans)]]


def _array_type(value) -> TensorType:
    return type_of_array(np.asarray(value))


def _stack(items: list, axis: int, declared) -> np.ndarray:
    """The per-iteration values stacked along ``axis``; none: an empty array of the body's
    declared element type and shape (unknown dims 0)."""
    if items:
        return np.stack([np.asarray(item) for item in items], axis=axis)
    shape = [] if declared.shape is None else [d if isinstance(d, int) else 0 for d in declared.shape]
    shape.insert(axis, 0)
    return np.zeros(shape, declared.dtype.np_dtype)


# ---- Scan ---------------------------------------------------------------------------------------
def _scan_counts(call: Call, body: Body, formal: int) -> tuple[int, int, int]:
    """(N states, M scan inputs, K scan outputs) of a Scan over ``formal`` states and scan
    inputs, checked against num_scan_inputs and the body's signature."""
    m = call.attrs["num_scan_inputs"]
    if not 1 <= m <= formal:
        call.fail(f"num_scan_inputs = {m}; expected 1 to {formal} (the inputs after the states)", InputError)
    n = formal - m
    if body.input_count != formal:
        call.fail(f"the body takes {body.input_count} inputs; expected {n} states + {m} scan slices", InputError)
    k = body.output_count - n
    if k < 0:
        call.fail(f"the body gives {body.output_count} outputs; expected at least the {n} states", InputError)
    _node_outputs(call, n + k, "the body")
    return n, m, k


def _scan_plan(call: Call, body: Body, xs_types: list) -> tuple:
    """(N states, M scan inputs, K scan outputs, input axes, input directions, output axes,
    output directions) of a Scan (version 9 on), checked; axes normalized where ranks are known."""
    n, m, k = _scan_counts(call, body, len(xs_types))

    def listed(name: str, count: int, default: int) -> list:
        value = call.attrs.get(name)
        value = [default] * count if value is None else list(value)
        if len(value) != count:
            call.fail(f"attribute {name!r} = {value}; expected {count} entries", InputError)
        return value
    in_axes, in_dirs = listed("scan_input_axes", m, 0), listed("scan_input_directions", m, 0)
    out_axes, out_dirs = listed("scan_output_axes", k, 0), listed("scan_output_directions", k, 0)
    for name, dirs in (("scan_input_directions", in_dirs), ("scan_output_directions", out_dirs)):
        if any(d not in (0, 1) for d in dirs):
            call.fail(f"attribute {name!r} = {dirs}; expected 0 (forward) or 1 (reverse) each", InputError)
    for j, t in enumerate(xs_types[n:]):
        rank = None if t is None or t.shape is None else len(t.shape)
        if rank is not None:
            if not -rank <= in_axes[j] < rank or (in_axes[j] < 0 and call.version < 11):
                call.fail(f"scan_input_axes[{j}] = {in_axes[j]} for a scan input of rank {rank}; expected "
                          f"{'0' if call.version < 11 else -rank} to {rank - 1}", InputError)
            in_axes[j] %= rank
    return n, m, k, in_axes, in_dirs, out_axes, out_dirs


def _scan_length(call: Call, shapes: list, axes: list):
    """The iteration count: every scan input's length along its axis (None if unknown)."""
    lengths = {shape[axis] for shape, axis in zip(shapes, axes) if shape is not None and isinstance(shape[axis], int)}
    if len(lengths) > 1:
        call.fail(f"scan inputs of lengths {sorted(lengths)} along their scan axes; expected one length", ShapeError)
    return lengths.pop() if lengths else None


def _out_axis(call: Call, axis: int, rank: int | None, j: int) -> int | None:
    if rank is None:
        return None
    if not -(rank + 1) <= axis <= rank or (axis < 0 and call.version < 11):
        call.fail(f"scan_output_axes[{j}] = {axis} for a per-iteration output of rank {rank}; expected "
                  f"{'0' if call.version < 11 else -(rank + 1)} to {rank}", InputError)
    return axis % (rank + 1)


def _scan_rule(call: Call) -> list:
    body = _body(call, "body")
    if call.version < 9:
        return _scan8_rule(call, body)
    formal = list(call.types[:len(call.types) - len(body.captured)])
    n, m, k, in_axes, _, out_axes, _ = _scan_plan(call, body, _tensor_types(call, formal, "input"))
    length = _scan_length(call, [t.shape for t in formal[n:]], in_axes)
    fed = [*formal[:n], *[_slice_type(t, a) for t, a in zip(formal[n:], in_axes)], *_captured_types(call, body)]
    declared = body.output_types(where(call.op, call.node), fed)
    states = [_merge(t, d) for t, d in zip(formal[:n], declared[:n])]
    outs = []
    for j, t in enumerate(_tensor_types(call, declared[n:], "scan output")):
        axis = _out_axis(call, out_axes[j], None if t.shape is None else len(t.shape), j)
        outs.append(TensorType(t.dtype, None if t.shape is None else (*t.shape[:axis], length, *t.shape[axis:])))
    return [*states, *outs]


def _scan_steps(call: Call, body: Body, states: list, scans: list, plan: tuple, captured: list) -> tuple:
    """One scan over unbatched inputs: (final states, scan outputs)."""
    n, m, k, in_axes, in_dirs, out_axes, out_dirs = plan
    label = where(call.op, call.node)
    length = _scan_length(call, [x.shape for x in scans], in_axes)
    collected: list[list] = [[] for _ in range(k)]
    for t in range(length):
        slices = [np.take(x, length - 1 - t if d else t, axis=a) for x, a, d in zip(scans, in_axes, in_dirs)]
        outs = body.run([*states, *slices], captured, label)
        states = list(outs[:n])
        for j in range(k):
            collected[j].append(np.asarray(outs[n + j]))
    declared = [None] * k
    if length == 0:
        fed = [*map(_array_type, states), *[_slice_type(_array_type(x), a) for x, a in zip(scans, in_axes)],
               *map(_array_type, captured)]
        declared = body.output_types(label, fed)[n:]
    results = []
    for j, items in enumerate(collected):
        if out_dirs[j]:
            items = items[::-1]
        rank = items[0].ndim if items else (0 if declared[j].shape is None else len(declared[j].shape))
        axis = _out_axis(call, out_axes[j], rank, j)
        results.append(_stack(items, axis, declared[j]))
    return states, results


def _scan_reference(call: Call, xs: list) -> list:
    body = _body(call, "body")
    own, captured = _captured(call, body, xs)
    if call.version < 9:
        return _scan8_reference(call, body, own, captured)
    arrays = [np.asarray(x) for x in own]
    plan = _scan_plan(call, body, [type_of_array(a) for a in arrays])
    states, outs = _scan_steps(call, body, arrays[:plan[0]], arrays[plan[0]:], plan, captured)
    return [*states, *outs]


# Scan 8: a batch axis 0 on every input and output, the scan axis 1 of each scan input,
# ``directions`` for the scan inputs; the optional first input ``sequence_lens`` [batch].
def _scan8_plan(call: Call, body: Body, formal: list) -> tuple:
    n, m, k = _scan_counts(call, body, len(formal) - 1)  # (after sequence_lens)
    dirs = call.attrs.get("directions")
    dirs = [0] * m if dirs is None else list(dirs)
    if len(dirs) != m or any(d not in (0, 1) for d in dirs):
        call.fail(f"attribute 'directions' = {dirs}; expected {m} entries of 0 or 1", InputError)
    return n, m, k, [0] * m, dirs, [0] * k, [0] * k


def _scan8_rule(call: Call, body: Body) -> list:
    formal = list(call.types[:len(call.types) - len(body.captured)])
    if len(formal) < 2:
        call.fail("takes sequence_lens (may be omitted) and at least one scan input", InputError)
    n, m, k, *_ = _scan8_plan(call, body, formal)
    tensors = _tensor_types(call, formal[1:], "input")
    batch = {t.shape[0] for t in tensors if t.shape and isinstance(t.shape[0], int)}
    length = {t.shape[1] for t in tensors[n:] if t.shape and len(t.shape) > 1 and isinstance(t.shape[1], int)}
    b = batch.pop() if len(batch) == 1 else None
    length = length.pop() if len(length) == 1 else None
    fed = [*[_slice_type(t, 0) for t in tensors[:n]], *[_slice_type(_slice_type(t, 0), 0) for t in tensors[n:]],
           *_captured_types(call, body)]
    declared = body.output_types(where(call.op, call.node), fed)
    states = [TensorType(t.dtype, t.shape) for t in tensors[:n]]
    outs = [TensorType(t.dtype, None if t.shape is None else (b, length, *t.shape))
            for t in _tensor_types(call, declared[n:], "scan output")]
    return [*states, *outs]


def _scan8_reference(call: Call, body: Body, own: list, captured: list) -> list:
    arrays = [np.asarray(x) for x in own[1:]]
    plan = _scan8_plan(call, body, own)
    n, k = plan[0], plan[2]
    batch = arrays[0].shape[0]
    if any(a.ndim < 1 or a.shape[0] != batch for a in arrays) or any(a.ndim < 2 for a in arrays[n:]):
        call.fail(f"inputs of shapes {[list(a.shape) for a in arrays]}; expected one batch dim first and "
                  f"the scan inputs' sequence dim second", ShapeError)
    length = arrays[n].shape[1]
    if own[0] is not None and np.any(np.asarray(own[0]) != length):
        call.fail(f"sequence_lens {np.asarray(own[0]).tolist()} with sequences of length {length}: "
                  f"shorter sequences are not supported", UnsupportedError)
    finals, stacked = [[] for _ in range(n)], [[] for _ in range(k)]
    for b in range(batch):
        states, outs = _scan_steps(call, body, [a[b] for a in arrays[:n]], [a[b] for a in arrays[n:]], plan, captured)
        for j in range(n):
            finals[j].append(np.asarray(states[j]))
        for j in range(k):
            stacked[j].append(outs[j])
    return [*[np.stack(f) for f in finals], *[np.stack(s) for s in stacked]]


# ---- registration -------------------------------------------------------------------------------
def _captures() -> tuple:
    return tuple(Input(f"captured_{k}", _TENSORS, optional=True) for k in range(MAX_CAPTURED))


def _carried(prefix: str) -> tuple:
    return tuple(Input(f"{prefix}_{k}", _TENSORS, optional=True) for k in range(MAX_CAPTURED))


_VERSIONS = (1, 11, 13, 16, 19, 21, 23, 24, 25)
_SCAN_VERSIONS = (8, 9, 11, 16, 19, 21, 23, 24, 25)

register(OpDef(
    "If",
    tuple(Schema(v, (Input("cond", _BOOL), *_captures()),
                 (Attr("then_branch", "graph"), Attr("else_branch", "graph")), _TENSORS) for v in _VERSIONS),
    _if_rule, reference=_if_reference, chunk=chunks.WHOLE,
    doc="Runs then_branch or else_branch (a program of its own) by a one-element bool condition."))

register(OpDef(
    "Loop",
    tuple(Schema(v, (Input("M", _INT64, optional=True), Input("cond", _BOOL, optional=True), *_carried("v")),
                 (Attr("body", "graph"),), _TENSORS) for v in _VERSIONS),
    _loop_rule, reference=_loop_reference, chunk=chunks.WHOLE,
    doc="Runs its body while i < M and cond hold: loop-carried values, per-iteration outputs stacked."))

register(OpDef(
    "Scan",
    tuple(Schema(v, ((Input("sequence_lens", _INT64, optional=True),) if v < 9 else ()) + _carried("x"),
                 (Attr("body", "graph"), Attr("num_scan_inputs", "int"),
                  *((Attr("directions", "ints", None),) if v < 9 else
                    (Attr("scan_input_directions", "ints", None), Attr("scan_output_directions", "ints", None),
                     Attr("scan_input_axes", "ints", None), Attr("scan_output_axes", "ints", None)))),
                 _TENSORS) for v in _SCAN_VERSIONS),
    _scan_rule, reference=_scan_reference, chunk=chunks.WHOLE,
    doc="Runs its body once per slice of the scan inputs along their axes, states carried, outputs stacked."))
