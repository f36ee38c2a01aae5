"""The IR: value types, values, nodes, graphs; a verifier and a readable printer. Op-agnostic."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from . import dtypes
from .dtypes import DType
from .errors import DslError, ShapeError

Dim = Union[int, str, None]  # a fixed size, a named symbol, or unknown
MAX_RANK = 64 if int(np.__version__.split(".")[0]) >= 2 else 32  # numpy's NPY_MAXDIMS


@dataclass(frozen=True)
class TensorType:
    """Element type and shape; ``shape`` None means the rank is unknown.

    Example:
        >>> TensorType(dsl.float32, ("N", 5))
        TensorType(float[N,5])
    """

    dtype: DType
    shape: tuple[Dim, ...] | None = None

    def __init__(self, dtype, shape=()):
        object.__setattr__(self, "dtype", dtypes.dtype(dtype))
        if shape is not None:
            if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
                raise ShapeError(f"TensorType: shape {shape!r} must be a sequence of dims (int, "
                                 f"symbol name or None) or None for an unknown rank")
            shape = tuple(_check_dim(d) for d in shape)
            if len(shape) > MAX_RANK:
                raise ShapeError(f"TensorType: rank {len(shape)} is more than the {MAX_RANK} dims a numpy array "
                                 f"can have")
            if all(isinstance(d, int) for d in shape) and math.prod(shape) > 2 ** 63 - 1:
                raise ShapeError(f"TensorType: shape {list(shape)} has {math.prod(shape)} elements, more than "
                                 f"int64 can count (2**63 - 1)")
        object.__setattr__(self, "shape", shape)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def nbytes(self) -> int | None:
        """Bytes of a tensor of this type as numpy holds it (packed types: one byte an element;
        strings: a pointer each); None unless the shape is static."""
        if not self.is_static:
            return None
        return math.prod(self.shape) * self.dtype.np_dtype.itemsize

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype.onnx_name}[...]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.onnx_name}[{dims}]"

    def __repr__(self) -> str:
        return f"TensorType({self})"


@dataclass(frozen=True)
class SequenceType:
    """ONNX seq(T): a list of tensors of one element type."""

    elem: Any

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True)
class OptionalType:
    """ONNX optional(T): a value of type T or nothing (None)."""

    elem: Any

    def __str__(self) -> str:
        return f"optional({self.elem})"


ValueType = Union[TensorType, SequenceType, OptionalType]


def _check_dim(dim):
    if dim is None or (isinstance(dim, str) and dim):
        return dim
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, (bool, np.bool_)) and dim >= 0:
        return int(dim)
    raise ShapeError(f"TensorType: dimension {dim!r} must be a non-negative int, a symbol name or None")


def type_of_array(array) -> TensorType:
    """The exact TensorType of a concrete numpy array."""
    return TensorType(dtypes.of_array(array), array.shape)


@dataclass(eq=False)
class Value:
    """A named SSA value; ``type`` may be filled in by shape inference. ``producer`` is the node
    that defines it (None for graph inputs and initializers) and ``users`` the nodes that read
    it, in the order they were made (each once); a Node links itself when it is made."""

    name: str
    type: ValueType | None = None
    producer: Node | None = field(default=None, repr=False)
    users: list = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        return f"%{self.name}"

    def __getstate__(self) -> dict:  # (links are rebuilt by the nodes: a pickle stays flat, not graph-deep)
        return {"name": self.name, "type": self.type}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, producer=None, users=[])


@dataclass(eq=False)
class Node:
    """One op application. ``inputs`` may hold None for an omitted optional input."""

    op_type: str
    inputs: list[Value | None]
    outputs: list[Value]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = ""

    def __post_init__(self):
        for value in self.outputs:
            value.producer = self
        for value in self.inputs:
            if value is not None and not any(user is self for user in value.users):
                value.users.append(self)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()


@dataclass(eq=False)
class Graph:
    """Nodes in topological order, graph inputs/outputs, constant initializers and the opset."""

    name: str
    inputs: list[Value]
    outputs: list[Value]
    nodes: list[Node]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    opset: int = 25

    def verify(self) -> None:
        """Check SSA form and topological order; DslError naming the offending value."""
        defined: set[str] = set()
        for value in self.inputs:
            _define(defined, value.name, "graph input")
        for name in self.initializers:
            if name not in defined:
                defined.add(name)
        for node in self.nodes:
            for value in node.inputs:
                if value is not None and value.name not in defined:
                    raise DslError(f"{node.op_type} (node {node.name!r}): input {value.name!r} is used "
                                   f"before it is defined")
            for value in node.outputs:
                _define(defined, value.name, f"{node.op_type} (node {node.name!r}) output")
        for value in self.outputs:
            if value.name not in defined:
                raise DslError(f"graph {self.name!r}: output {value.name!r} is never defined")
        for node in self.nodes:  # (the links partitioning walks)
            for value in node.outputs:
                if value.producer is not node:
                    raise DslError(f"{node.op_type} (node {node.name!r}): output {value.name!r} names "
                                   f"another producer")

    def __str__(self) -> str:
        return format_graph(self)


def _define(defined: set[str], name: str, what: str) -> None:
    if not name:
        raise DslError(f"{what}: empty value name")
    if name in defined:
        raise DslError(f"{what}: value {name!r} is defined twice")
    defined.add(name)


def _format_attr(value) -> str:
    if isinstance(value, np.ndarray):
        dt = dtypes.of_array(value)
        if value.size <= 8:
            return f"{dt.onnx_name}{list(value.shape)} {value.reshape(-1).tolist()}"
        return f"{dt.onnx_name}{list(value.shape)} ..."
    return repr(value)


def format_graph(graph: Graph) -> str:
    """Readable IR text, one node a line."""
    def typed(value: Value) -> str:
        return f"%{value.name}: {value.type}" if value.type is not None else f"%{value.name}"

    params = ", ".join(typed(v) for v in graph.inputs)
    lines = [f"graph {graph.name}({params}) opset {graph.opset} {{"]
    for name, array in graph.initializers.items():
        lines.append(f"  %{name} = initializer {_format_attr(array)}")
    for node in graph.nodes:
        args = ", ".join("_" if v is None else f"%{v.name}" for v in node.inputs)
        attrs = ", ".join(f"{k}={_format_attr(v)}" for k, v in sorted(node.attrs.items()))
        outs = ", ".join(typed(v) for v in node.outputs)
        label = f"  # {node.name}" if node.name else ""
        lines.append(f"  {outs} = {node.op_type}({args}){' {' + attrs + '}' if attrs else ''}{label}")
    lines.append(f"  return {', '.join('%' + v.name for v in graph.outputs)}")
    lines.append("}")
    return "\n".join(lines)
