"""Lowering a cone of graph nodes to one fused group of kernel-IR expressions.

View ops inside the cone are pushed down to the group's inputs (elementwise ops commute with
any view), so the kernel reads every input at the output index through a per-input View path
(element strides + offset, composed at run time). Each elementwise node becomes the IR its op's
lowering returns, rounded to the node's output type by a Cast; nothing is materialized in
between. A backend renders the group (dsl/codegen/fused.py for numba).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType
from ..ir import Node, Value
from ..ops.lowering import Concatenation, Gathering
from ..view import View
from . import expr as kir
from . import types


@dataclass
class GroupInput:
    """A group input: graph value ``value`` seen through ``path``, a tuple of (key, transform)
    pairs whose View transforms apply in order and end at the group's shape."""

    value: Value
    path: tuple
    dtype: DType
    guard: int | None = None  # index into Group.guards: read only where that guard holds
    gathers: tuple = ()  # (index expression, data axis) per coordinate loaded (a Gathering's data)


@dataclass(frozen=True)
class GatherCheck:
    """The index values a fused gather loads: graph value ``indices``, checked before every run
    against ``bounds`` (lows, highs per index column, or None), then on failure (or with no
    bounds) by ``check(call, array)``, which raises: an index out of range is a DslError,
    never a wild read."""

    node: Node
    call: object
    check: object
    indices: str
    bounds: tuple | None = None


@dataclass(frozen=True)
class Guard:
    """One part of a concatenation: the group index along ``dim`` is in [lo, hi). The group
    inputs read inside that part are loaded only where it holds (elsewhere their Views point
    outside their data)."""

    dim: int
    lo: int
    hi: int


class Unfusable(Exception):
    """The fused form of value ``name`` does not fit the group being built (a concatenation
    reached through a view, or broadcast along its axis): the partitioner computes it on its own
    (by its reference; ``apart``: by a plain kernel of its own first)."""

    def __init__(self, name: str, apart: bool = False):
        super().__init__(name)
        self.name, self.apart = name, apart


@dataclass
class Epilogue:
    """Elementwise ops applied to a row op's result inside its kernel (per element of a Softmax
    row, once per row after a reduction): ``outputs`` compute the values ``sinks`` from ``row``
    (the row result, rounded to ``row_dtype``, as a Var of its compute domain) and the group's
    inputs."""

    sinks: list[Value]
    row: kir.Var
    row_dtype: DType
    outputs: list[kir.Expr] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)


@dataclass
class Stage:
    """A reduction computed inside a group (layer norm's mean, then its variance): ``kind``
    (sum, mean, max, min) of ``value`` (an expression of the group, which may use earlier
    stages' vars) over the group's ``axes``, kept as 1; ``var`` names the result (rounded as the
    reduction's reference rounds it, to ``out_dtype``) for the expressions after it, which see it
    broadcast along the reduced axes."""

    kind: str
    value: kir.Expr
    var: kir.Var
    out_dtype: DType
    axes: tuple
    node: Node


@dataclass
class Group:
    """A fused elementwise group: ``sinks`` (all of shape ``shape``) computed as ``outputs``
    from ``leaves`` (the group inputs; kir Leaf i reads leaves[i]). A row kernel's group may
    carry an ``epilogue`` (ops applied to its result); a staged group computes ``stages``
    (reductions of its own values, in order) before its outputs."""

    sinks: list[Value]
    shape: tuple
    nodes: list[Node] = field(default_factory=list)
    leaves: list[GroupInput] = field(default_factory=list)
    outputs: list[kir.Expr] = field(default_factory=list)
    epilogue: Epilogue | None = None
    stages: list[Stage] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    checks: list[GatherCheck] = field(default_factory=list)


def constant(array: np.ndarray, dt: DType) -> kir.Const | None:
    """A one-element constant of a native type as an IR constant (None: it stays an input)."""
    if array.size != 1 or dt.onnx_name not in types.NATIVE:
        return None
    return kir.const(array.reshape(-1)[0].item(), types.domain(dt))


ROW_VAR = "rowv_"  # the name of an epilogue's row value


class GroupBuilder:
    """Builds the expression DAG of one group.

    Args:
        producer: value name -> (Node, Call, OpDef) for nodes that may be fused.
        constants: value name -> ndarray for compile-time constants.
        kept: values read from memory by any group but their own (epilogue results, cuts).
    """

    def __init__(self, producer: dict, constants: dict, kept: set = frozenset(), staged: dict | None = None,
                 apart: set = frozenset()):
        self.producer = producer
        self.constants = constants
        self.kept = kept
        self.staged = staged or {}
        self.apart = apart  # values computed only by plain kernels of their own (kept)

    def build(self, sinks: list[Value], read_apart: bool = False) -> Group:
        """The group computing ``sinks``; with ``read_apart`` (a row kernel's input) those
        computed apart are read from memory instead."""
        group = Group(sinks, sinks[0].type.shape)
        self._group, self._memo, self._row, self._stages, self._guard = group, {}, None, {}, None
        self._sinks = {v.name for v in sinks if not (read_apart and v.name in self.apart)}
        group.outputs = [self._expr(v, ()) for v in sinks]
        return group

    def build_row(self, row_input: Value, row_output: Value, sinks: list[Value]) -> Group:
        """The group of a row kernel (its input's cone) with an epilogue: the elementwise cone
        from its result ``row_output`` to ``sinks`` (of row_output's shape, or of the input's
        for a reduction's result broadcast back along the row; partition() checks that nothing
        else reads the values in between). A reduction's epilogue inputs are seen
        at the input's shape (its reduced axis broadcast), so the kernel indexes them per row.
        The epilogue's own memo reloads shared inputs in its pass."""
        group = self.build([row_input], read_apart=True)
        row = kir.var(ROW_VAR, types.domain(row_output.type.dtype))
        epilogue = group.epilogue = Epilogue(sinks, row, row_output.type.dtype)
        self._memo, self._row = {}, (row_output.name, row)
        self._sinks = {v.name for v in sinks}
        before = len(group.nodes)
        outer = ()
        if sinks[0].type.shape != row_input.type.shape:  # a reduction's per-row consumers: rows of its input
            outer = ((("rows", row_input.type.shape), _ToRows(row_input.type.shape)),)
        epilogue.outputs = [self._expr(v, outer) for v in sinks]
        epilogue.nodes, group.nodes = group.nodes[before:], group.nodes[:before]
        return group

    def _expr(self, value: Value, path: tuple) -> kir.Expr:
        key = (value.name, _path_key(path))
        if key not in self._memo:
            self._memo[key] = self._compute(value, path)
        return self._memo[key]

    def _compute(self, value: Value, path: tuple) -> kir.Expr:
        if self._row is not None and value.name == self._row[0]:
            # the row result, reached only through elementwise steps of its shape or, after a
            # last-axis reduction, of its input's (constant along the row: partition() checks)
            assert all(key[0] in ("rows", "broadcast") for key, _ in path), path
            return self._row[1]
        if value.name in self.staged:
            return self._stage(value, path)
        if value.name in self.constants:
            literal = constant(self.constants[value.name], value.type.dtype)
            if literal is not None:
                return literal
        found = self.producer.get(value.name)
        if found is None or value.name in self.kept and value.name not in self._sinks:
            return self._leaf(value, path)
        node, call, opdef = found
        if opdef.view is not None:
            step = (("view", id(node)), _ViewStep(opdef, call))
            return self._expr(node.inputs[0], (step,) + path)
        if isinstance(opdef.kernel, Concatenation):
            return self._concat(node, call, opdef.kernel.axis(call), path)
        if isinstance(opdef.kernel, Gathering):
            return self._gather(node, call, opdef.kernel, path)
        self._group.nodes.append(node)
        lowering = opdef.kernel
        args = []
        used = lowering.used_inputs
        out_shape = node.outputs[0].type.shape
        for index, inp in enumerate(node.inputs):
            if inp is None or (used is not None and index not in used):
                args.append(None)
                continue
            extra = lowering.input_path(call, index) if lowering.input_path else ()
            step = (("broadcast", out_shape), _Broadcast(out_shape))
            args.append(self._expr(inp, tuple(extra) + (step,) + path))
        result = lowering.expr(call, args)
        saturate = bool(call.attrs.get("saturate", 1))
        return kir.cast(result, node.outputs[0].type.dtype, saturate, call.attrs.get("round_mode", "up"))

    def _stage(self, value: Value, path: tuple) -> kir.Var:
        """A staged reduction's result: its input (of the group's shape, so at the group's own
        index) reduced inside the group; it is read only broadcast back along its axes
        (partition() checks that every reader is an elementwise op of the group's shape)."""
        assert all(key[0] == "broadcast" for key, _ in path), path
        if value.name not in self._stages:
            guard, self._guard = self._guard, None  # (a stage reduces the whole value: unguarded)
            try:
                self._stages[value.name] = self._new_stage(value)
            finally:
                self._guard = guard
        return self._stages[value.name]

    def _new_stage(self, value: Value) -> kir.Var:
        node, call, opdef = self.staged[value.name]
        assert tuple(node.inputs[0].type.shape) == tuple(self._group.shape)
        shape = tuple(self._group.shape)  # (the path its input's other readers in the group have)
        inner = self._expr(node.inputs[0], ((("broadcast", shape), _Broadcast(shape)),))
        var = kir.var(f"stage{len(self._group.stages)}_", types.domain(value.type.dtype))
        self._group.stages.append(Stage(opdef.kernel.kind, inner, var, value.type.dtype, tuple(call.plan.axes), node))
        return var

    def _concat(self, node: Node, call, axis: int, path: tuple) -> kir.Expr:
        """A Concat as a Pick of its inputs, each computed (its producers fused) at the output's
        shape: the inputs it reads have their Views shifted back by its start along the axis
        and are loaded only where its guard holds. Only numpy broadcasting may lie between the
        Concat and the group, and not along its axis: a guard is then the group's own index
        along that dim. A Concat inside another's part computes on its own (Unfusable)."""
        out = node.outputs[0]
        shape = tuple(out.type.shape)
        dim = axis + len(self._group.shape) - len(shape)
        if self._guard is not None or not all(key[0] == "broadcast" for key, _ in path) or \
                self._group.shape[dim] != shape[axis]:
            raise Unfusable(out.name)
        self._group.nodes.append(node)
        items, guards, start = [], [], 0
        for j, inp in enumerate(node.inputs):
            size = inp.type.shape[axis]
            self._group.guards.append(Guard(dim, start, start + size))
            guards.append(len(self._group.guards) - 1)
            step = (("concat", id(node), j), _Shift(axis, start, shape))
            self._guard = guards[-1]
            try:
                items.append(self._expr(inp, (step,) + path))
            finally:
                self._guard = None
            start += size
        return kir.pick(items, out.name, guards)

    def _gather(self, node: Node, call, lowering: Gathering, path: tuple) -> kir.Expr:
        """A gather as a load of its data (a group input: the partitioner keeps data and indices
        in memory) at its View plus the loaded coordinates times the data's strides; each
        coordinate is the indices (a group input too) seen at the output's index, then along
        ``path`` as the gather's result is. Not inside a concatenation's part (Unfusable)."""
        if self._guard is not None:
            raise Unfusable(node.outputs[0].name, apart=True)
        data, indices = node.inputs[0], node.inputs[1]
        self._group.nodes.append(node)
        if not any(c.node is node for c in self._group.checks):
            bounds = None if lowering.bounds is None else lowering.bounds(call)
            self._group.checks.append(GatherCheck(node, call, lowering.check, indices.name, bounds))
        gathers = []
        for k, (axis, seen) in enumerate(lowering.terms(call)):
            step = (("gather-index", id(node), k), _Transform(seen))
            gathers.append((self._expr(indices, (step,) + path), axis))
        step = (("gather", id(node)), _Transform(lambda view: lowering.data(call, view)))
        if not _stays_a_view(data, (step,) + path):  # (a copy of the data would not be what the
            raise Unfusable(node.outputs[0].name, apart=True)  # loaded offsets index)
        loaded = self._expr(data, (step,) + path)
        if isinstance(loaded, kir.Leaf):
            leaf = self._group.leaves[loaded.index]
            assert leaf.path[0][0] == step[0], leaf.path  # (data is read from memory: its own leaf)
            leaf.gathers = tuple(gathers)
        return loaded  # (a one-element constant: every valid index reads it)

    def _leaf(self, value: Value, path: tuple) -> kir.Leaf:
        index = len(self._group.leaves)
        self._group.leaves.append(GroupInput(value, path, value.type.dtype, self._guard))
        return kir.leaf(index, value.type.dtype)


def _stays_a_view(value: Value, path: tuple) -> bool:
    """Whether C-contiguous ``value`` read along ``path`` stays one View (no step copies): a
    gathered data input must, since the gathered offsets are added to its own strides (a
    Reshape merging the gathered axis with others does not)."""
    view = View.contiguous(value.type.shape)
    for _, transform in path:
        view = transform(view)
        if view is None:
            return False
    return True


def _path_key(path: tuple) -> tuple:
    """A path's identity, with each run of broadcasts folded into its last one (broadcasting to
    a shape and then to a broadcast of it is broadcasting to the latter): a value used at
    several depths of the cone is then one input, loaded once."""
    keys = []
    for step_key, _ in path:
        if keys and step_key[0] == "broadcast" and keys[-1][0] == "broadcast":
            keys[-1] = step_key
        else:
            keys.append(step_key)
    return tuple(keys)


class _ViewStep:
    """A view op's transform on a View (the op's ``view`` lowering with its planned call)."""

    def __init__(self, opdef, call):
        self.opdef, self.call = opdef, call

    def __call__(self, view):
        return self.opdef.view(self.call, view)


class _Transform:
    """A View transform from a lowering (None for a View it cannot take: the runtime copies the
    input out first)."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, view):
        return self.transform(view) if type(view) is View else None


class _Shift:
    """A Concat input's View at the Concat's ``shape``: index i along ``axis`` reads the input's
    element i - start (an offset moved back by start strides; only read where guarded)."""

    def __init__(self, axis: int, start: int, shape: tuple):
        self.axis, self.start, self.shape = axis, start, tuple(shape)

    def __call__(self, view):
        if type(view) is not View:  # (a blocked parameter: the runtime copies it out first)
            return None
        return View(self.shape, view.strides, view.offset - self.start * view.strides[self.axis])


class _Broadcast:
    """Numpy broadcasting of a View to an op's output shape."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def __call__(self, view):
        return view if view.shape == self.shape else view.expand(self.shape)


class _ToRows:
    """A reduction epilogue input (of the reduced shape: the last axis kept as 1 or dropped)
    seen at the reduction input's ``shape``: the reduced axis broadcast."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def __call__(self, view):
        if view.rank < len(self.shape):
            view = view.unsqueeze((view.rank,))
        return view.expand(self.shape)
