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
    # integer division truncating toward zero (C); b == 0 gives 0 (error_model='numpy')
    if b == 0:
        return a - a
    q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q += 1
    return q
"""


@dataclass
class Leaf:
    """A group input: graph value ``value`` seen through ``path``, a tuple of (key, transform)
    pairs whose View transforms apply in order and end at the group's shape."""

    value: Value
    path: tuple
    dtype: DType


@dataclass
class Group:
    """A fused elementwise group: ``sinks`` (all of shape ``shape``) computed from ``leaves``."""

    sinks: list[Value]
    shape: tuple
    nodes: list[Node] = field(default_factory=list)
    leaves: list[Leaf] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)     # body of the innermost loop
    out_vars: list[str] = field(default_factory=list)
    helpers: set = field(default_factory=set)          # (kind, fmt, flag) of encoders/tables used


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

    def __init__(self, producer: dict, constants: dict):
        self.producer = producer
        self.constants = constants

    def build(self, sinks: list[Value]) -> Group:
        group = Group(sinks, sinks[0].type.shape)
        self._group, self._memo = group, {}
        group.out_vars = [self._expr(v, ()) for v in sinks]
        for sink in sinks:  # stores re-encode table floats (exact values, kept as they are)
            if sink.type.dtype.onnx_name in scalar.TABLE_FLOATS:
                group.helpers.add(("encode", sink.type.dtype.onnx_name, 0, "up"))
        return group

    def _var(self) -> str:
        return f"t{len(self._group.lines)}"

    def _emit(self, expr: str) -> str:
        var = self._var()
        self._group.lines.append(f"{var} = {expr}")
        return var

    def _expr(self, value: Value, path: tuple) -> str:
        key = (value.name, tuple(step_key for step_key, _ in path))
        if key not in self._memo:
            self._memo[key] = self._compute(value, path)
        return self._memo[key]

    def _compute(self, value: Value, path: tuple) -> str:
        dt = value.type.dtype
        if value.name in self.constants:
            literal = _literal(self.constants[value.name], dt)
            if literal is not None:
                return literal
        found = self.producer.get(value.name)
        if found is None:
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
