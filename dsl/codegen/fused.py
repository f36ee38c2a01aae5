"""One fused elementwise kernel: from a cone of graph nodes to numba source and a leaf list.

View ops inside the cone are pushed down to the leaves (elementwise ops commute with any
view), so the kernel indexes every leaf by the same output index through a per-leaf View
(element strides + offset, computed at run time). Nothing is materialized in between.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType
from ..ir import Node, Value
from . import scalar

# The generated module imports these; kernels are plain functions over raw buffers.
PREAMBLE = """\
import math

import numba
import numpy as np
from kernels import bits as _bits
from kernels import floats as _floats
from kernels import packed as _packed


@numba.njit(cache=True, nogil=True, inline="always")
def _c_div(a, b):
    # signed integer division truncating toward zero (C); b == 0 gives 0 (error_model='numpy');
    # x / -1 is the wrapping negation: minimum / -1 overflows in hardware (numba's // gave 0
    # for int64), numpy and the reference give the minimum itself
    if b == 0:
        return a - a
    if b == -1:
        return a - a - a
    q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q += 1
    return q


@numba.njit(cache=True, nogil=True, inline="always")
def _c_div_unsigned(a, b):
    # (no sign correction: an int literal added to uint64 would make numba compute in float64)
    if b == 0:
        return a - a
    return a // b
"""


@dataclass
class Leaf:
    """A group input: graph value ``value`` seen through ``path``, a tuple of (key, transform)
    pairs whose View transforms apply in order and end at the group's shape."""

    value: Value
    path: tuple
    dtype: DType


@dataclass
class Epilogue:
    """Elementwise ops applied to a row op's result inside its kernel (per element of a Softmax
    row, once per row after a reduction): ``lines`` compute ``out_vars`` (the values ``sinks``)
    from ``row_var`` (the row result, rounded to ``row_dtype``, in its compute domain) and the
    group's leaves."""

    sinks: list[Value]
    row_var: str
    row_dtype: DType
    lines: list[str] = field(default_factory=list)
    out_vars: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)


@dataclass
class Group:
    """A fused elementwise group: ``sinks`` (all of shape ``shape``) computed from ``leaves``.
    A row kernel's group may carry an ``epilogue`` (ops applied to its result)."""

    sinks: list[Value]
    shape: tuple
    nodes: list[Node] = field(default_factory=list)
    leaves: list[Leaf] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)     # body of the innermost loop
    out_vars: list[str] = field(default_factory=list)
    helpers: set = field(default_factory=set)          # (kind, fmt, flag) of encoders/tables used
    epilogue: Epilogue | None = None


def _literal(array: np.ndarray, dt: DType) -> str | None:
    """A scalar constant inlined as a typed literal (None if it is not a native scalar)."""
    if array.size != 1 or dt.onnx_name not in scalar.NATIVE:
        return None
    value = array.reshape(-1)[0].item()
    name = scalar.NATIVE[dt.onnx_name]
    if name == "bool_":
        return "True" if value else "False"
    if name.startswith("float"):
        text = repr(float(value))
        text = {"inf": "np.inf", "-inf": "-np.inf", "nan": "np.nan"}.get(text, text)
        return f"np.{name}({text})"
    return f"np.{name}({int(value)})"


class GroupBuilder:
    """Builds the expression DAG of one group.

    Args:
        producer: value name -> (Node, Call) for nodes that may be fused.
        lowering: node -> its op's Elementwise lowering, or None for view ops.
        constants: value name -> ndarray for compile-time constants.
    """

    def __init__(self, producer: dict, constants: dict, kept: set = frozenset()):
        self.producer = producer
        self.constants = constants
        self.kept = kept  # values read from memory by any group but their own (epilogue results)

    def build(self, sinks: list[Value]) -> Group:
        group = Group(sinks, sinks[0].type.shape)
        self._group, self._memo, self._lines, self._count, self._row = group, {}, group.lines, 0, None
        self._sinks = {v.name for v in sinks}
        group.out_vars = [self._expr(v, ()) for v in sinks]
        self._encode_stores(sinks)
        return group

    def build_row(self, row_input: Value, row_output: Value, sinks: list[Value]) -> Group:
        """The group of a row kernel (its input's cone) with an epilogue: the elementwise cone
        from its result ``row_output`` to ``sinks`` (of row_output's shape; partition() checks
        that nothing else reads the values in between). A reduction's epilogue leaves are seen
        at the input's shape (its reduced axis broadcast), so the kernel indexes them per row.
        The epilogue's own memo reloads shared leaves in its pass."""
        group = self.build([row_input])
        epilogue = group.epilogue = Epilogue(sinks, f"t{self._count}", row_output.type.dtype)
        self._count += 1
        self._memo, self._lines, self._row = {}, epilogue.lines, (row_output.name, epilogue.row_var)
        self._sinks = {v.name for v in sinks}
        before = len(group.nodes)
        outer = ()
        if row_output.type.shape != row_input.type.shape:  # a reduction: rows of its input
            outer = ((("rows", row_input.type.shape), _ToRows(row_input.type.shape)),)
        epilogue.out_vars = [self._expr(v, outer) for v in sinks]
        epilogue.nodes, group.nodes = group.nodes[before:], group.nodes[:before]
        self._encode_stores(sinks)
        return group

    def _encode_stores(self, sinks: list[Value]) -> None:
        for sink in sinks:  # stores re-encode table floats (exact values, kept as they are)
            if sink.type.dtype.onnx_name in scalar.TABLE_FLOATS:
                self._group.helpers.add(("encode", sink.type.dtype.onnx_name, 0, "up"))

    def _emit(self, expr: str) -> str:
        var = f"t{self._count}"
        self._count += 1
        self._lines.append(f"{var} = {expr}")
        return var

    def _expr(self, value: Value, path: tuple) -> str:
        key = (value.name, tuple(step_key for step_key, _ in path))
        if key not in self._memo:
            self._memo[key] = self._compute(value, path)
        return self._memo[key]

    def _compute(self, value: Value, path: tuple) -> str:
        dt = value.type.dtype
        if self._row is not None and value.name == self._row[0]:
            # the row result, reached only through same-shape elementwise steps
            assert all(key[0] == "rows" or key[0] == "broadcast" and key[1] == value.type.shape
                       for key, _ in path), path
            return self._row[1]
        if value.name in self.constants:
            literal = _literal(self.constants[value.name], dt)
            if literal is not None:
                return literal
        found = self.producer.get(value.name)
        if found is None or value.name in self.kept and value.name not in self._sinks:
            return self._leaf(value, path)
        node, call, opdef = found
        if opdef.view is not None:
            step = (("view", id(node)), _ViewStep(opdef, call))
            return self._expr(node.inputs[0], (step,) + path)
        self._group.nodes.append(node)
        lowering = opdef.kernel
        args, domains = [], []
        used = lowering.used_inputs
        for index, inp in enumerate(node.inputs):
            if inp is None or (used is not None and index not in used):
                args.append(None)
                domains.append(None)
                continue
            extra = lowering.input_path(call, index) if lowering.input_path else ()
            out_shape = node.outputs[0].type.shape
            step = (("broadcast", out_shape), _Broadcast(out_shape))
            args.append(self._expr(inp, tuple(extra) + (step,) + path))
            domains.append(scalar.domain(inp.type.dtype))
        expr = lowering.expr(call, args, domains)
        out_dt = node.outputs[0].type.dtype
        src_domain = lowering.result_domain(call, domains) if lowering.result_domain else domains[0]
        saturate = bool(call.attrs.get("saturate", 1))
        round_mode = call.attrs.get("round_mode", "up")
        if out_dt.onnx_name in scalar.TABLE_FLOATS:
            self._group.helpers.add(("encode", out_dt.onnx_name, int(saturate), round_mode))
        return self._emit(scalar.coerce(expr, src_domain, out_dt, saturate, round_mode))

    def _leaf(self, value: Value, path: tuple) -> str:
        index = len(self._group.leaves)
        dt = value.type.dtype
        self._group.leaves.append(Leaf(value, path, dt))
        if dt.onnx_name in scalar.TABLE_FLOATS:
            self._group.helpers.add(("table", dt.onnx_name, 0, ""))
        return self._emit(f"LOAD{index}")


class _ViewStep:
    """A view op's transform on a View (the op's ``view`` lowering with its planned call)."""

    def __init__(self, opdef, call):
        self.opdef, self.call = opdef, call

    def __call__(self, view):
        return self.opdef.view(self.call, view)


class _Broadcast:
    """Numpy broadcasting of a View to an op's output shape."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def __call__(self, view):
        return view if view.shape == self.shape else view.expand(self.shape)


class _ToRows:
    """A reduction epilogue leaf (of the reduced shape: the last axis kept as 1 or dropped)
    seen at the reduction input's ``shape``: the reduced axis broadcast."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def __call__(self, view):
        if view.rank < len(self.shape):
            view = view.unsqueeze((view.rank,))
        return view.expand(self.shape)
