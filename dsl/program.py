"""Program: a checked, typed Graph that users run, print and export."""
from __future__ import annotations

import numpy as np

from . import engine as engine_module
from .errors import DTypeError, InputError, ShapeError, UnsupportedError
from .ir import Graph, OptionalType, SequenceType, TensorType, format_graph
from .passes import infer_shapes
from .tensor import Tensor
from .values import as_array

ENGINES = ("numpy",)


class NamedTypes(list):
    """A list of value types that can also be indexed by value name."""

    def __init__(self, values):
        super().__init__(v.type for v in values)
        self.names = [v.name for v in values]

    def __getitem__(self, key):
        if isinstance(key, str):
            if key not in self.names:
                raise KeyError(key)
            return list.__getitem__(self, self.names.index(key))
        return list.__getitem__(self, key)


class Program:
    """A typed graph with the pinned run/print/export API.

    Example:
        >>> prog = dsl.from_onnx("model.onnx")
        >>> prog.run({"x": x})[0]
    """

    def __init__(self, graph: Graph):
        graph.verify()
        infer_shapes.run(graph)
        self.graph = graph

    @property
    def input_types(self) -> NamedTypes:
        return NamedTypes(self.graph.inputs)

    @property
    def output_types(self) -> NamedTypes:
        return NamedTypes(self.graph.outputs)

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name for v in self.graph.outputs]

    def run(self, feeds, engine: str = "numpy") -> list:
        """Execute on concrete inputs.

        Args:
            feeds: {input name: numpy array (ml_dtypes dtype for exotic types) or Tensor},
                or a list in input order.
            engine: "numpy" (the eager reference engine).

        Returns:
            A list of numpy arrays, one per graph output.

        Raises:
            DslError: missing, unknown or mistyped feeds; any op-level validation error.
        """
        if engine not in ENGINES:
            raise UnsupportedError(f"Program.run: engine {engine!r} is not available; expected one of "
                                   f"{list(ENGINES)}")
        return engine_module.run_graph(self.graph, self._check_feeds(feeds))

    def _check_feeds(self, feeds) -> dict:
        names = self.input_names
        if isinstance(feeds, (list, tuple)):
            if len(feeds) != len(names):
                raise InputError(f"Program.run: got {len(feeds)} inputs, expected {len(names)} {names}")
            feeds = dict(zip(names, feeds))
        if not isinstance(feeds, dict):
            raise InputError(f"Program.run: feeds must be a dict name -> array, got {type(feeds).__name__}")
        unknown = sorted(set(feeds) - set(names))
        missing = [n for n in names if n not in feeds]
        if unknown or missing:
            raise InputError(f"Program.run: unknown inputs {unknown}, missing inputs {missing}; "
                             f"expected {names}")
        symbols: dict[str, int] = {}
        return {value.name: _check_feed(value.name, value.type, feeds[value.name], symbols)
                for value in self.graph.inputs}

    def to_onnx(self):
        """An onnx.ModelProto of this program (needs the optional onnx package)."""
        from . import onnx_io
        return onnx_io.to_model(self.graph)

    def __str__(self) -> str:
        return format_graph(self.graph)

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {t}" for n, t in zip(self.input_names, self.input_types))
        outs = ", ".join(str(t) for t in self.output_types)
        return f"<dsl.Program {self.graph.name}({ins}) -> ({outs})>"


def _check_feed(name: str, declared, value, symbols: dict):
    if isinstance(declared, OptionalType):
        return None if value is None else _check_feed(name, declared.elem, value, symbols)
    if isinstance(declared, SequenceType):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"Program.run: input {name!r} is {declared}; expected a list of arrays")
        return [_check_feed(name, declared.elem, v, symbols) for v in value]
    if declared is None:
        return as_array(value, "Program.run", f"input {name!r}")
    array = value.numpy() if isinstance(value, Tensor) else value
    if not isinstance(array, np.ndarray):
        array = np.asarray(array, dtype=declared.dtype.np_dtype) if declared.dtype.kind != "string" \
            else np.asarray(array, dtype=object)
    array = as_array(array, "Program.run", f"input {name!r}")
    actual = TensorType(array.dtype if array.dtype.kind not in "OUS" else "string", array.shape)
    if actual.dtype != declared.dtype:
        raise DTypeError(f"Program.run: input {name!r} has element type {actual.dtype} "
                         f"(numpy {array.dtype}); expected {declared.dtype}")
    _check_dims(name, declared, array.shape, symbols)
    return array


def _check_dims(name: str, declared: TensorType, shape: tuple, symbols: dict) -> None:
    if declared.shape is None:
        return
    if len(shape) != len(declared.shape):
        raise ShapeError(f"Program.run: input {name!r} has shape {list(shape)}; expected {declared}")
    for size, dim in zip(shape, declared.shape):
        if isinstance(dim, int) and size != dim:
            raise ShapeError(f"Program.run: input {name!r} has shape {list(shape)}; expected {declared}")
        if isinstance(dim, str):
            if symbols.setdefault(dim, size) != size:
                raise ShapeError(f"Program.run: input {name!r} binds {dim}={size} but an earlier input "
                                 f"bound {dim}={symbols[dim]}")
