"""Program: a checked, typed Graph that users run, print and export."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import dtypes, engine as engine_module, onnx_io
from .compiler import Executable, check_math
from .errors import DTypeError, InputError, ShapeError, UnsupportedError
from .ir import Graph, OptionalType, SequenceType, TensorType, format_graph
from .lru import LRU
from .ops import control_flow
from .passes import infer_shapes
from .tensor import Tensor
from .values import as_array, plain_array

ENGINES = ("jit", "numpy")


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

    def __getstate__(self) -> dict:
        """Pickles as its graph (dask ships Programs); compiled executables are per process."""
        return {"graph": self.graph}

    def __setstate__(self, state: dict) -> None:
        self.graph = state["graph"]

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

    def run(self, feeds, engine: str = "jit", math: str = "fast") -> list:
        """Execute on concrete inputs.

        Args:
            feeds: {input name: numpy array (ml_dtypes dtype for exotic types) or Tensor},
                or a list in input order.
            engine: "jit" (fused numba kernels, compiled once per input signature) or
                "numpy" (the eager reference engine).
            math: the JIT's float math, "fast" or "exact" (see dsl.jit).

        Returns:
            A list of numpy arrays, one per graph output.

        Raises:
            DslError: missing, unknown or mistyped feeds; any op-level validation error.
        """
        if engine not in ENGINES:
            raise UnsupportedError(f"Program.run: engine {engine!r} is not available; expected one of "
                                   f"{list(ENGINES)}")
        check_math(math, "Program.run")
        signature = _signature(feeds, math) if engine == "jit" and not self.__dict__.get("_value_inputs", True) \
            else None
        last = self.__dict__.get("_last_run")
        repeat = signature is not None and last is not None and last[0] == signature
        checked = feeds if repeat else self._check_feeds(feeds)  # (types a checked call had: nothing to convert)
        token = control_flow.RUNNING.set((engine, math))  # (If / Loop / Scan bodies run as this does)
        try:
            if repeat:
                return last[1].run(checked)
            if engine == "jit" and all(isinstance(v.type, TensorType) for v in self.graph.inputs):
                executable = self._executable(checked, math)
                if signature is not None and all(checked[name] is feeds[name] for name in checked):
                    self._last_run = (signature, executable)
                return executable.run(checked)
            numpy_feeds = {k: v.numpy() if isinstance(v, Tensor) else v for k, v in checked.items()}
            return engine_module.run_graph(self.graph, numpy_feeds)
        finally:
            control_flow.RUNNING.reset(token)

    def explain(self, feeds, math: str = "fast", source: bool = False) -> str:
        """The JIT's plan for these feeds' types: fused kernels, views, quantized matmuls
        (qgemv) and numpy fallbacks, one step a line (``source``: each kernel's numba code)."""
        check_math(math, "Program.explain")
        return self._executable(self._check_feeds(feeds), math).explain(source=source)

    def _executable(self, feeds: dict, math: str = "fast"):
        """The planned kernels for these feeds' concrete types (cached per signature; inputs
        that are axes or shapes specialize by value)."""
        from .passes.specialize import specialize, value_inputs
        cache = self.__dict__.get("_executables")
        if cache is None:
            cache = self._executables = LRU("signatures")
        if "_value_inputs" not in self.__dict__:
            self._value_inputs = value_inputs(self.graph)
        types = [TensorType(v.dtype if isinstance(v, Tensor) else dtypes.of_array(v), v.shape)
                 for v in (feeds[name] for name in self.input_names)]
        known = {n: feeds[n] for n in self._value_inputs}
        key = (tuple((t.dtype.onnx_name, t.shape, isinstance(feeds[n], Tensor))
                     for t, n in zip(types, self.input_names)),
               tuple((n, a.tobytes()) for n, a in sorted(known.items())), math)
        found = cache.get(key)
        if found is None:
            found = cache[key] = Executable(*specialize(self.graph, types, known), math)
        return found

    def _check_feeds(self, feeds) -> dict:
        names = self.input_names
        if isinstance(feeds, (list, tuple)):
            if len(feeds) != len(names):
                raise InputError(f"Program.run: got {len(feeds)} inputs, expected {len(names)} {names}")
            feeds = dict(zip(names, feeds))
        if not isinstance(feeds, Mapping):
            raise InputError(f"Program.run: feeds must be a dict name -> array or a list in input "
                             f"order, got {type(feeds).__name__}")
        unknown = [n for n in feeds if n not in names]
        missing = [n for n in names if n not in feeds]
        if unknown or missing:
            problems = [f"{what} inputs {found}" for what, found in (("unknown", unknown),
                                                                      ("missing", missing)) if found]
            raise InputError(f"Program.run: {', '.join(problems)}; expected {names}")
        symbols: dict[str, int] = {}
        return {value.name: _check_feed(value.name, value.type, feeds[value.name], symbols)
                for value in self.graph.inputs}

    def to_onnx(self):
        """An onnx.ModelProto of this program (needs the optional onnx package)."""
        return onnx_io.to_model(self.graph)

    def __str__(self) -> str:
        return format_graph(self.graph)

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {t}" for n, t in zip(self.input_names, self.input_types))
        outs = ", ".join(str(t) for t in self.output_types)
        return f"<dsl.Program {self.graph.name}({ins}) -> ({outs})>"


def _signature(feeds, math: str):
    """What a repeated call must match to skip the feed checks (Program.run's last checked call):
    a dict of plain native numpy arrays, each name with its dtype and shape; None for anything
    else. The checks cost 30-60 us a call where a decode step's kernels take 100s."""
    if type(feeds) is not dict:
        return None
    parts = []
    for name, value in feeds.items():
        if type(value) is not np.ndarray or value.dtype.kind in "OSUV" or not value.dtype.isnative:
            return None
        parts.append((name, value.dtype, value.shape))
    return math, tuple(parts)


def _check_feed(name: str, declared, value, symbols: dict):
    if isinstance(declared, OptionalType):
        return None if value is None else _check_feed(name, declared.elem, value, symbols)
    if value is None:
        raise InputError(f"Program.run: input {name!r} is None; only optional(...) inputs may be "
                         f"empty, and this one is {declared}")
    if isinstance(declared, SequenceType):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"Program.run: input {name!r} is {declared}; expected a list of arrays")
        return [_check_feed(name, declared.elem, v, symbols) for v in value]
    if declared is None:
        return _native(name, as_array(value, "Program.run", f"input {name!r}"))
    if isinstance(value, Tensor):  # packed tensors stay packed: kernels read them in place
        if value.dtype != declared.dtype:
            raise DTypeError(f"Program.run: input {name!r} has element type {value.dtype}; "
                             f"expected {declared.dtype}")
        _check_dims(name, declared, value.shape, symbols)
        return value
    array = value
    if isinstance(array, np.generic):  # a numpy scalar is typed like an array: no conversion
        array = np.asarray(array)
    elif isinstance(array, np.ndarray) and type(array) is not np.ndarray:
        array = plain_array(array, "Program.run", f"input {name!r}")
    if not isinstance(array, np.ndarray):
        array = _from_python(name, declared.dtype, array)
    array = _native(name, as_array(array, "Program.run", f"input {name!r}"))
    actual = dtypes.of_array(array)
    if actual != declared.dtype:
        raise DTypeError(f"Program.run: input {name!r} has element type {actual} "
                         f"(numpy {array.dtype}); expected {declared.dtype}")
    _check_dims(name, declared, array.shape, symbols)
    return array


def _from_python(name: str, dt, value) -> np.ndarray:
    """A Python scalar / nested list as an array of ``dt``, refusing lossy conversions."""
    if dt.kind == "string":
        return np.asarray(value, dtype=object)
    try:
        array = np.asarray(value)
        converted = array.astype(dt.np_dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"Program.run: input {name!r} = {value!r:.80} is not an array of "
                         f"{dt}: {exc}") from None
    lossless = (array.size == 0 or (array.dtype.kind in "fc" and dt.kind in ("float", "complex"))
                or (array.dtype.kind in "biu" and np.array_equal(converted.astype(array.dtype), array)))
    if not lossless:
        raise DTypeError(f"Program.run: input {name!r} = {value!r:.80} (numpy {array.dtype}) cannot "
                         f"be converted to {dt} without changing values; pass a numpy array of {dt}")
    return converted


def _native(name: str, array: np.ndarray) -> np.ndarray:
    """Native byte order, strings as str objects: the layout every reference expects."""
    if array.dtype.kind == "U":
        return array.astype(object)
    if array.dtype.kind == "S":
        try:
            return np.char.decode(array, "utf-8").astype(object)
        except UnicodeDecodeError as exc:
            raise InputError(f"Program.run: input {name!r} holds bytes that are not UTF-8: {exc}") from None
    if array.dtype.kind != "O" and not array.dtype.isnative:
        return array.astype(array.dtype.newbyteorder("="))
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


def _body_program(model, base_dir) -> Program:
    """An If / Loop / Scan body as a Program (dsl/ops/control_flow.py Body.BUILD)."""
    return Program(onnx_io.graph_from_model(model, base_dir))


control_flow.Body.BUILD = _body_program


def from_onnx(source, *, base_dir=None):
    """Load an ONNX model as a Program.

    Args:
        source: a file path, serialized bytes or an onnx.ModelProto.
        base_dir: the directory external data files are read from; defaults to the model
            file's directory for a path, and is needed for bytes / ModelProto with external data.
            Each file must be a regular single-link file inside it, reached without symlinks.

    Returns:
        A typed, checked ``dsl.Program`` (shape inference ran; errors name the node).

    Raises:
        DslError: unreadable model, unsupported op / opset / type, invalid node or unsafe
            external data.

    Example:
        >>> prog = dsl.from_onnx("mask.onnx"); prog.run({"mask": mask})
    """
    return Program(onnx_io.load_graph(source, base_dir))
