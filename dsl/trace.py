"""Tracing: inside ``@dsl.jit`` the dsl functions and Python operators build IR nodes.

A ``Tracer`` is a graph ``Value`` that knows its builder; every op added goes through the
op's rule at once, so a bad axis raises at trace time naming the op. Python scalars are
weakly typed (NEP 50): ``x + 1.0`` makes a constant of x's element type.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .errors import DslError, InputError, UnsupportedAttributeError, UnsupportedError
from .ir import Graph, Node, TensorType, Value, type_of_array
from .numpy_methods import NumpyMethods
from .ops import registry
from .passes.infer_shapes import fold
from .values import as_array, weak_scalar

class Tracer(Value, NumpyMethods):
    """A symbolic tensor inside a traced function."""

    def __init__(self, name: str, value_type, builder: "Builder"):
        super().__init__(name, value_type)
        self.builder = builder

    __hash__ = Value.__hash__

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def shape(self):
        return self.type.shape

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    def __bool__(self):
        raise DslError(f"jit: the truth value of traced tensor %{self.name} is not known at trace time; "
                       f"use dsl.where instead of Python control flow on tensor values")

    def __array__(self, *args, **kwargs):
        raise DslError(f"jit: traced tensor %{self.name} cannot become a numpy array inside a traced "
                       f"function; use dsl functions on it")

    def __repr__(self) -> str:
        return f"Tracer(%{self.name}: {self.type})"

    def _unsupported(self, what: str):
        raise UnsupportedError(f"jit: {what} on traced tensor %{self.name} is not supported; use the dsl "
                               f"functions (README: Supported ONNX operators)")

    def __getattr__(self, name: str):
        if name.startswith("__"):  # (Python's protocols probe for these: keep them AttributeErrors)
            raise AttributeError(name)
        raise UnsupportedAttributeError(f"jit: traced tensor %{self.name} has no attribute {name!r}; traced "
                                        f"values have .shape, .ndim, .dtype, .T, .mT, .astype, .reshape, .sum, "
                                        f".mean, .max, .min and [] indexing")

    def __len__(self):
        self._unsupported("len()")

    def __iter__(self):
        self._unsupported("iteration")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return self._frontend.array_ufunc(self, ufunc, method, *inputs, **kwargs)

    def __setitem__(self, key, value):
        self._unsupported("item assignment (traced tensors are immutable)")

    def __float__(self):
        self._unsupported("float()")

    def __int__(self):
        self._unsupported("int()")

    def __index__(self):
        self._unsupported("use as an index")

    def __complex__(self):
        self._unsupported("complex()")

    def __contains__(self, item):
        self._unsupported("'in'")

    # Python operators -> ONNX ops
    def __add__(self, other): return binary("Add", self, other)
    def __radd__(self, other): return binary("Add", other, self)
    def __sub__(self, other): return binary("Sub", self, other)
    def __rsub__(self, other): return binary("Sub", other, self)
    def __mul__(self, other): return binary("Mul", self, other)
    def __rmul__(self, other): return binary("Mul", other, self)
    def __truediv__(self, other): return binary("Div", self, other)
    def __rtruediv__(self, other): return binary("Div", other, self)
    def __pow__(self, other): return binary("Pow", self, other)
    def __rpow__(self, other): return binary("Pow", other, self)
    def __matmul__(self, other): return binary("MatMul", self, other)
    def __rmatmul__(self, other): return binary("MatMul", other, self)
    def __neg__(self): return self.builder.add("Neg", [self])[0]
    def __abs__(self): return self.builder.add("Abs", [self])[0]
    # ~ & | ^ as numpy: logical on bool tensors (Not, And, Or, Xor), bitwise on integers
    def __invert__(self): return self.builder.add("Not" if self.dtype.kind == "bool" else "BitwiseNot", [self])[0]
    def __and__(self, other): return logical_or_bitwise("And", self, other)
    def __rand__(self, other): return logical_or_bitwise("And", other, self)
    def __or__(self, other): return logical_or_bitwise("Or", self, other)
    def __ror__(self, other): return logical_or_bitwise("Or", other, self)
    def __xor__(self, other): return logical_or_bitwise("Xor", self, other)
    def __rxor__(self, other): return logical_or_bitwise("Xor", other, self)
    # % is Mod fmod=0 (Python's and numpy's: the sign of the divisor; floats need opset >= 28)
    def __mod__(self, other): return binary("Mod", self, other)
    def __rmod__(self, other): return binary("Mod", other, self)
    def __lshift__(self, other): return binary("BitShift", self, other, {"direction": "LEFT"})
    def __rlshift__(self, other): return binary("BitShift", other, self, {"direction": "LEFT"})
    def __rshift__(self, other): return binary("BitShift", self, other, {"direction": "RIGHT"})
    def __rrshift__(self, other): return binary("BitShift", other, self, {"direction": "RIGHT"})
    def __lt__(self, other): return binary("Less", self, other)
    def __le__(self, other): return binary("LessOrEqual", self, other)
    def __gt__(self, other): return binary("Greater", self, other)
    def __ge__(self, other): return binary("GreaterOrEqual", self, other)
    def __eq__(self, other): return binary("Equal", self, other)  # noqa: D105

    def __ne__(self, other):
        return self.builder.add("Not", [binary("Equal", self, other)])[0]

    # operators with no ONNX op here yet: a DslError, not Python's TypeError
    def __floordiv__(self, other): self._unsupported("//")
    def __rfloordiv__(self, other): self._unsupported("//")
    def __divmod__(self, other): self._unsupported("divmod()")
    def __pos__(self): self._unsupported("unary +")
    def __round__(self, ndigits=None): self._unsupported("round()")


class Builder:
    """Collects nodes of one traced function into a Graph."""

    def __init__(self, name: str, opset: int):
        self.graph = Graph(name, [], [], [], {}, opset)
        self.constants: dict[str, np.ndarray] = dict()  # initializers and folded values
        self.calls: dict[int, object] = {}  # id(node) -> its planned Call
        self._names: set[str] = set()
        self.finished = False  # set when the traced function returned: its values are frozen

    def fresh(self, stem: str) -> str:
        index = len(self._names)
        name = f"{stem}{index}"
        while name in self._names:
            index += 1
            name = f"{stem}{index}"
        self._names.add(name)
        return name

    def input(self, name: str, value_type) -> Tracer:
        self._names.add(name)
        tracer = Tracer(name, value_type, self)
        self.graph.inputs.append(tracer)
        return tracer

    def constant(self, array: np.ndarray) -> Tracer:
        name = self.fresh("c")
        self.constants[name] = array
        self.graph.initializers[name] = array
        return Tracer(name, type_of_array(array), self)

    def lift(self, value, like: Tracer | None = None, op: str = "jit") -> Tracer:
        """A traced value for ``value``: Python scalars take ``like``'s element type (NEP 50:
        numpy scalars keep their own type), checked as the dsl functions check them."""
        if isinstance(value, Tracer):
            return value
        if like is not None and isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
            return self.constant(weak_scalar(op, value, like.dtype))
        return self.constant(as_array(value, "jit", "constant"))

    def add(self, op_type: str, inputs: list, attrs: dict | None = None, domain: str = "") -> list[Tracer]:
        """Append a node (of ``domain``: "" is ONNX's own); its rule runs now (trace-time
        validation and shape inference)."""
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        for value in inputs:
            if isinstance(value, Tracer) and value.builder is not self:
                raise DslError(f"{op_type}: input %{value.name} belongs to another traced function "
                               f"(a traced value escaped its @dsl.jit function); pass it as an argument")
        if self.finished:
            raise DslError(f"{op_type}: a traced value of {self.graph.name} was used after its trace ended (it "
                           f"escaped its @dsl.jit function, e.g. stored outside it); pass arrays instead")
        types = [None if v is None else v.type for v in inputs]
        values = [None if v is None else self.constants.get(v.name) for v in inputs]
        node_name = self.fresh(op_type.lower() + "_")
        opdef, call, out_types = registry.bind(op_type, self.graph.opset, types, values, attrs, node_name,
                                               domain=domain)
        outputs = [Tracer(self.fresh("v"), t, self) for t in out_types]
        node = Node(op_type, list(inputs), outputs, attrs, node_name, domain)
        self.graph.nodes.append(node)
        self.calls[id(node)] = call
        fold(opdef, call, inputs, values, self.constants, outputs, out_types)
        return outputs


def binary(op_type: str, left, right, attrs: dict | None = None) -> Tracer:
    """Apply a two-input op, lifting Python scalars to the other side's element type."""
    anchor = left if isinstance(left, Tracer) else right
    builder = anchor.builder
    return builder.add(op_type, [builder.lift(left, anchor, op_type), builder.lift(right, anchor, op_type)],
                       attrs)[0]


def logical_or_bitwise(op_type: str, left, right) -> Tracer:
    """``&`` ``|`` ``^`` as numpy: ONNX And / Or / Xor on bool tensors, BitwiseAnd / Or / Xor else."""
    anchor = left if isinstance(left, Tracer) else right
    return binary(op_type if anchor.dtype.kind == "bool" else "Bitwise" + op_type, left, right)


def current_builder(values) -> Builder | None:
    """The builder of the first Tracer among ``values`` (None when nothing is traced)."""
    for value in values:
        if isinstance(value, Tracer):
            return value.builder
    return None


def trace_into(builder: Builder, fn, arg_types: list, names=None, call=None) -> Graph:
    """Trace ``fn`` on symbolic inputs of ``arg_types`` (graph inputs ``names``, default
    arg0, arg1, ...) into ``builder``; ``call(fn, tracers)`` applies it (default: positionally).
    Returns the builder's Graph."""
    names = names or [f"arg{i}" for i in range(len(arg_types))]
    tracers = [builder.input(p, t) for p, t in zip(names, arg_types)]
    try:
        result = call(fn, tracers) if call is not None else fn(*tracers)
        outputs = _outputs(builder, result)
    finally:
        builder.finished = True
    builder.graph.outputs = outputs
    return builder.graph


def _outputs(builder: Builder, result) -> list:
    name = builder.graph.name
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    for index, out in enumerate(outputs):
        if not isinstance(out, Tracer):
            raise DslError(f"jit: {name} returned {type(out).__name__} as output {index}; expected "
                           f"tensors computed from its inputs")
        if out.builder is not builder:
            raise DslError(f"jit: output {index} of {name} belongs to another traced function")
    return distinct_outputs(builder, outputs)


def distinct_outputs(builder: Builder, outputs: list) -> list:
    """Graph outputs must be distinct node outputs: route inputs and repeats through Identity."""
    seen, result = set(), []
    produced = {v.name for n in builder.graph.nodes for v in n.outputs}
    for out in outputs:
        if out.name in seen or out.name not in produced:
            out = builder.add("Identity", [out])[0]
        seen.add(out.name)
        result.append(out)
    return result


def input_type(arg, index: int) -> TensorType:
    """The TensorType of a jit argument (array, Tensor, TensorType or Python scalar)."""
    from .tensor import Tensor
    if isinstance(arg, TensorType):
        return arg
    if isinstance(arg, np.generic):
        arg = np.asarray(arg)
    if isinstance(arg, Tensor):
        return TensorType(arg.dtype, arg.shape)
    if isinstance(arg, np.ndarray):
        if arg.dtype.kind == "O":  # ONNX object tensors hold strings only
            as_array(arg, "jit", f"argument {index}")
        return TensorType(dtypes.of_array(arg, f"jit: argument {index}"), arg.shape)
    raise InputError(f"jit: argument {index} is a {type(arg).__name__}; expected a numpy array, "
                     f"dsl.Tensor or dsl.TensorType")
