"""ModelProto <-> Graph. The only module that imports onnx (lazily, inside functions)."""
from __future__ import annotations

import os

import numpy as np

from . import dtypes
from .errors import DslError, DTypeError, InputError, UnsupportedError
from .ir import Graph, Node, OptionalType, SequenceType, TensorType, Value
from .ops import registry
from .tensor import Tensor


def _onnx():
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise UnsupportedError("dsl.from_onnx: needs the optional 'onnx' package "
                               "(pip install 'dsl[onnx]')") from exc
    return onnx


# ---- tensors ------------------------------------------------------------------------------
# TensorProto field holding each type's data when raw_data is not used (ONNX spec).
_FIELD = {"float": "float_data", "complex64": "float_data", "double": "double_data",
          "complex128": "double_data", "int64": "int64_data", "uint32": "uint64_data",
          "uint64": "uint64_data", "string": "string_data"}


def tensor_from_proto(proto) -> np.ndarray:
    """A TensorProto as a numpy array (ml_dtypes for exotic types), strictly validated."""
    label = f"tensor {proto.name!r}" if proto.name else "tensor"
    try:
        dt = dtypes.dtype(int(proto.data_type))
    except DslError:
        raise DTypeError(f"dsl.from_onnx: {label} has unsupported data_type {proto.data_type}") from None
    shape = tuple(int(d) for d in proto.dims)
    if any(d < 0 for d in shape):
        raise InputError(f"dsl.from_onnx: {label} has negative dims {list(shape)}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if proto.data_location == 1 or proto.external_data:
        raise UnsupportedError(f"dsl.from_onnx: {label} uses external data, which is not supported")
    if proto.HasField("raw_data") and dt.kind != "string":
        raw = proto.raw_data
        need = dt.packed_nbytes(count)
        if len(raw) != need:
            raise InputError(f"dsl.from_onnx: {label} {dt.onnx_name}{list(shape)} has {len(raw)} raw bytes; "
                             f"expected {need}")
        return Tensor.from_packed(raw, dt, shape).numpy().copy()
    field = _FIELD.get(dt.onnx_name, "int32_data")
    data = list(getattr(proto, field))
    if dt.kind == "string":
        array = np.array([s.decode("utf-8") for s in data] + [], dtype=object)
        return _sized(array, count, shape, label)
    if dt.kind == "complex":
        if len(data) != 2 * count:
            raise InputError(f"dsl.from_onnx: {label} has {len(data)} {field} entries; expected {2 * count}")
        pairs = np.array(data, np.float64).reshape(-1, 2)
        return (pairs[:, 0] + 1j * pairs[:, 1]).astype(dt.np_dtype).reshape(shape)
    if dt.packed:
        need = dt.packed_nbytes(count)
        if len(data) != need:
            raise InputError(f"dsl.from_onnx: {label} has {len(data)} int32_data bytes; expected {need}")
        if any(not 0 <= b <= 255 for b in data):
            raise InputError(f"dsl.from_onnx: {label} has int32_data entries outside [0, 255]; each "
                             f"entry holds one packed byte")
        return Tensor.from_packed(np.array(data, np.int64).astype(np.uint8), dt, shape).numpy()
    if field == "int32_data" and dt.onnx_name not in ("int32", "int16", "int8", "uint16", "uint8", "bool"):
        bits = np.array(data, np.int64).astype(np.uint16 if dt.bits == 16 else np.uint8)
        return _sized(bits.view(dt.np_dtype), count, shape, label)  # float16/bfloat16/float8 bit patterns
    return _sized(np.array(data).astype(dt.np_dtype), count, shape, label)


def _sized(array: np.ndarray, count: int, shape: tuple, label: str) -> np.ndarray:
    if array.size != count:
        raise InputError(f"dsl.from_onnx: {label} has {array.size} values; expected {count} for "
                         f"shape {list(shape)}")
    return array.reshape(shape)


def tensor_to_proto(name: str, array: np.ndarray):
    """A numpy array as a TensorProto (raw_data little-endian; strings in string_data)."""
    onnx = _onnx()
    dt = dtypes.of_array(array)
    proto = onnx.TensorProto()
    proto.name = name
    proto.data_type = dt.onnx_code
    proto.dims.extend(array.shape)
    if dt.kind == "string":
        proto.string_data.extend(s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in array.flat)
    else:
        proto.raw_data = Tensor.from_numpy(array).packed().tobytes()
    return proto


# ---- types --------------------------------------------------------------------------------
def type_from_proto(proto, label: str):
    which = proto.WhichOneof("value")
    if which == "tensor_type":
        tensor = proto.tensor_type
        dt = dtypes.dtype(int(tensor.elem_type)) if tensor.elem_type else None
        if dt is None:
            raise DTypeError(f"dsl.from_onnx: {label} has no element type")
        if not tensor.HasField("shape"):
            return TensorType(dt, None)
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
        return TensorType(dt, tuple(dims))
    if which == "sequence_type":
        return SequenceType(type_from_proto(proto.sequence_type.elem_type, label))
    if which == "optional_type":
        return OptionalType(type_from_proto(proto.optional_type.elem_type, label))
    raise UnsupportedError(f"dsl.from_onnx: {label} has type {which}, which is not supported")


def type_to_proto(value_type):
    helper = _onnx().helper
    if isinstance(value_type, TensorType):
        return helper.make_tensor_type_proto(value_type.dtype.onnx_code,
                                             None if value_type.shape is None else list(value_type.shape))
    if isinstance(value_type, SequenceType):
        return helper.make_sequence_type_proto(type_to_proto(value_type.elem))
    if isinstance(value_type, OptionalType):
        return helper.make_optional_type_proto(type_to_proto(value_type.elem))
    raise DslError(f"to_onnx: value type {value_type!r} cannot be exported")


# ---- attributes ---------------------------------------------------------------------------
def _attr_from_proto(attr, op_label: str):
    kind = attr.type
    kinds = _onnx().AttributeProto
    if kind == kinds.INT:
        return int(attr.i)
    if kind == kinds.INTS:
        return [int(v) for v in attr.ints]
    if kind == kinds.FLOAT:
        return float(attr.f)
    if kind == kinds.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == kinds.STRING:
        return attr.s.decode("utf-8")
    if kind == kinds.STRINGS:
        return [s.decode("utf-8") for s in attr.strings]
    if kind == kinds.TENSOR:
        return tensor_from_proto(attr.t)
    if kind == kinds.SPARSE_TENSOR:
        return _SparseMarker()
    raise UnsupportedError(f"{op_label}: attribute {attr.name!r} of type "
                           f"{kinds.AttributeType.Name(kind)} is not supported")


class _SparseMarker:
    """Stands for a sparse tensor attribute (rejected by the op rules that see it)."""

    def __repr__(self) -> str:
        return "<sparse tensor>"


def _attr_to_proto(name: str, value):
    helper = _onnx().helper
    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, tensor_to_proto("", value))
    return helper.make_attribute(name, value)


# ---- models -------------------------------------------------------------------------------
def _load_model(source):
    onnx = _onnx()
    if isinstance(source, onnx.ModelProto):
        return source
    try:
        if isinstance(source, (bytes, bytearray, memoryview)):
            return onnx.load_from_string(bytes(source))
        if isinstance(source, (str, os.PathLike)):
            return onnx.load(os.fspath(source))
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"dsl.from_onnx: cannot read model {source!r:.80}: {exc}") from exc
    except Exception as exc:  # protobuf DecodeError is not a ValueError subclass
        raise InputError(f"dsl.from_onnx: cannot parse model: {exc}") from exc
    raise InputError(f"dsl.from_onnx: expected a path, bytes or onnx.ModelProto, got {type(source).__name__}")


def _default_opset(model) -> int:
    versions = [op.version for op in model.opset_import if op.domain in ("", "ai.onnx")]
    if not versions:
        raise UnsupportedError("dsl.from_onnx: the model imports no default-domain (ai.onnx) opset")
    return int(versions[0])


def graph_from_model(model) -> Graph:
    """Build a Graph from a ModelProto (no inference yet)."""
    gp = model.graph
    initializers = {t.name: tensor_from_proto(t) for t in gp.initializer}
    if gp.sparse_initializer:
        raise UnsupportedError("dsl.from_onnx: sparse initializers are not supported")
    values: dict[str, Value] = {}

    def value(name: str) -> Value:
        if name not in values:
            values[name] = Value(name)
        return values[name]

    inputs = []
    for vi in gp.input:
        if vi.name in initializers:
            continue
        v = value(vi.name)
        v.type = type_from_proto(vi.type, f"input {vi.name!r}")
        inputs.append(v)
    for vi in list(gp.value_info) + list(gp.output):
        if vi.type.WhichOneof("value") is not None:
            value(vi.name).type = type_from_proto(vi.type, f"value {vi.name!r}")
    nodes = []
    for index, np_node in enumerate(gp.node):
        name = np_node.name or f"{np_node.op_type}_{index}"
        label = f"{np_node.op_type} (node {name!r})"
        attrs = {}
        for a in np_node.attribute:
            if a.ref_attr_name:
                raise UnsupportedError(f"{label}: attribute references are not supported")
            attrs[a.name] = _attr_from_proto(a, label)
        nodes.append(Node(np_node.op_type, [value(n) if n else None for n in np_node.input],
                          [value(n) for n in np_node.output], attrs, name, np_node.domain))
    outputs = [value(vi.name) for vi in gp.output]
    return Graph(gp.name or "main", inputs, outputs, nodes, initializers, _default_opset(model))


def from_onnx(source):
    """Load an ONNX model as a Program.

    Args:
        source: a file path, serialized bytes or an onnx.ModelProto.

    Returns:
        A typed, checked ``dsl.Program`` (shape inference ran; errors name the node).

    Raises:
        DslError: unreadable model, unsupported op / opset / type, or invalid node.

    Example:
        >>> prog = dsl.from_onnx("mask.onnx"); prog.run({"mask": mask})
    """
    from .program import Program
    model = _load_model(source)
    graph = graph_from_model(model)
    for node in graph.nodes:
        registry.get(node.op_type, node.name, node.domain).schema(graph.opset, node.name)
    return Program(graph)


def to_model(graph: Graph):
    """A ModelProto for a typed Graph; onnx.checker accepts it."""
    onnx = _onnx()
    helper = onnx.helper
    nodes = [helper.make_node(n.op_type, [v.name if v is not None else "" for v in n.inputs],
                              [v.name for v in n.outputs], name=n.name or None, domain=n.domain or None)
             for n in graph.nodes]
    for proto, node in zip(nodes, graph.nodes):
        proto.attribute.extend(_attr_to_proto(k, v) for k, v in sorted(node.attrs.items()) if v is not None)

    def info(v: Value):
        return helper.make_value_info(v.name, type_to_proto(v.type))

    opset = [helper.make_opsetid("", graph.opset)]
    model_graph = helper.make_graph(nodes, graph.name, [info(v) for v in graph.inputs],
                                    [info(v) for v in graph.outputs],
                                    [tensor_to_proto(k, a) for k, a in graph.initializers.items()])
    model = helper.make_model(model_graph, opset_imports=opset, producer_name="dsl")
    model.ir_version = helper.find_min_ir_version_for(opset, ignore_unknown=True)
    return model
