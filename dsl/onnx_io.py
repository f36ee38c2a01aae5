"""ModelProto <-> Graph. The only module that imports onnx (lazily, inside functions)."""
from __future__ import annotations

import os
import sys

import numpy as np

from . import dtypes
from .errors import DslError, DTypeError, InputError, ShapeError, UnsupportedError
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
    if proto.HasField("raw_data"):
        if dt.kind == "string":
            raise InputError(f"dsl.from_onnx: {label} is a string tensor with raw_data; ONNX stores "
                             f"strings in string_data")
        return _from_raw(proto.raw_data, dt, shape, count, label)
    return _from_fields(proto, dt, shape, count, label)


def _from_raw(raw: bytes, dt, shape: tuple, count: int, label: str) -> np.ndarray:
    need = dt.packed_nbytes(count)
    if len(raw) != need:
        raise InputError(f"dsl.from_onnx: {label} {dt.onnx_name}{list(shape)} has {len(raw)} raw bytes; "
                         f"expected {need}")
    if dt.kind == "bool" and raw and max(raw) > 1:
        raise InputError(f"dsl.from_onnx: {label} bool raw_data holds byte {max(raw)}; expected 0 or 1")
    if dt.packed:
        return Tensor.from_packed(raw, dt, shape).numpy()
    array = np.frombuffer(raw, dtype=dt.np_dtype).reshape(shape)
    return array.byteswap() if sys.byteorder == "big" else array.copy()  # raw_data is little-endian


def _from_fields(proto, dt, shape: tuple, count: int, label: str) -> np.ndarray:
    field = _FIELD.get(dt.onnx_name, "int32_data")
    data = list(getattr(proto, field))
    if dt.kind == "string":
        try:
            strings = [s.decode("utf-8") for s in data]
        except UnicodeDecodeError as exc:
            raise InputError(f"dsl.from_onnx: {label} has a string that is not UTF-8: {exc}") from None
        return _sized(np.array(strings, dtype=object), count, shape, label)
    if dt.kind == "complex":
        if len(data) != 2 * count:
            raise InputError(f"dsl.from_onnx: {label} has {len(data)} {field} entries; expected {2 * count} "
                             f"(real, imaginary pairs)")
        pairs = np.array(data, np.float64).reshape(-1, 2)
        return (pairs[:, 0] + 1j * pairs[:, 1]).astype(dt.np_dtype).reshape(shape)
    if dt.packed:
        need = dt.packed_nbytes(count)
        if len(data) != need:
            raise InputError(f"dsl.from_onnx: {label} {dt.onnx_name}{list(shape)} has {len(data)} "
                             f"int32_data entries; expected {need} (one packed byte each)")
        codes = _in_range(data, 0, 255, field, label, "each entry holds one packed byte")
        return Tensor.from_packed(codes.astype(np.uint8), dt, shape).numpy()
    if field == "int32_data" and dt.kind == "float":  # float16/bfloat16/float8 as bit patterns
        bits = _in_range(data, 0, 2 ** dt.bits - 1, field, label, f"{dt.bits}-bit patterns")
        storage = np.uint16 if dt.bits == 16 else np.uint8
        return _sized(bits.astype(storage).view(dt.np_dtype), count, shape, label)
    if field in ("int32_data", "uint64_data") and dt.kind in ("int", "uint", "bool"):
        low, high = (0, 1) if dt.kind == "bool" else (np.iinfo(dt.np_dtype).min, np.iinfo(dt.np_dtype).max)
        values = _in_range(data, int(low), int(high), field, label, f"{dt.onnx_name} values")
        return _sized(values.astype(dt.np_dtype), count, shape, label)
    return _sized(np.array(data, dtype=dt.np_dtype), count, shape, label)


def _in_range(data: list, low: int, high: int, field: str, label: str, why: str) -> np.ndarray:
    values = np.array(data, dtype=np.uint64 if high > 2 ** 63 else np.int64)
    bad = values[(values < low) | (values > high)] if values.size else values
    if bad.size:
        raise InputError(f"dsl.from_onnx: {label} has {field} entry {int(bad[0])} outside "
                         f"[{low}, {high}] ({why})")
    return values


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
    elif dt.packed:
        proto.raw_data = Tensor.from_numpy(array).packed().tobytes()
    else:
        little = np.ascontiguousarray(array)
        proto.raw_data = (little.byteswap() if sys.byteorder == "big" else little).tobytes()
    return proto


# ---- types --------------------------------------------------------------------------------
def type_from_proto(proto, label: str):
    """A TypeProto as a TensorType / SequenceType / OptionalType; DslError naming ``label``."""
    which = proto.WhichOneof("value")
    if which == "tensor_type":
        return _tensor_type_from_proto(proto.tensor_type, label)
    if which == "sequence_type":
        return SequenceType(type_from_proto(proto.sequence_type.elem_type, label))
    if which == "optional_type":
        return OptionalType(type_from_proto(proto.optional_type.elem_type, label))
    if which is None:
        raise InputError(f"dsl.from_onnx: {label} has no type")
    raise UnsupportedError(f"dsl.from_onnx: {label} has type {which}, which is not supported")


def _tensor_type_from_proto(tensor, label: str) -> TensorType:
    if not tensor.elem_type:
        raise DTypeError(f"dsl.from_onnx: {label} has no element type")
    try:
        dt = dtypes.dtype(int(tensor.elem_type))
    except DslError:
        raise DTypeError(f"dsl.from_onnx: {label} has unsupported element type {tensor.elem_type}; "
                         f"expected an ONNX TensorProto.DataType code 1-26") from None
    if not tensor.HasField("shape"):
        return TensorType(dt, None)
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise ShapeError(f"dsl.from_onnx: {label} has a negative dim in shape {dims}")
    return TensorType(dt, tuple(dims))


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


# Schema attribute kind -> AttributeProto type ("dtype" is an INT holding a TensorProto.DataType).
_ATTR_TYPES = {"int": "INT", "ints": "INTS", "float": "FLOAT", "floats": "FLOATS", "string": "STRING",
               "strings": "STRINGS", "tensor": "TENSOR", "sparse_tensor": "SPARSE_TENSOR", "dtype": "INT"}


def _attr_to_proto(name: str, value, kind: str | None):
    """An AttributeProto; ``kind`` (the schema's, e.g. 'ints') fixes the type of empty lists."""
    onnx = _onnx()
    if isinstance(value, np.ndarray):
        value = tensor_to_proto("", value)
    if isinstance(value, dtypes.DType):
        value = value.onnx_code
    try:
        type_name = _ATTR_TYPES.get(kind)
        attr_type = onnx.AttributeProto.AttributeType.Value(type_name) if type_name else None
        return onnx.helper.make_attribute(name, value, attr_type=attr_type)
    except (TypeError, ValueError) as exc:
        raise UnsupportedError(f"to_onnx: attribute {name!r} = {value!r:.80} cannot be exported: "
                               f"{exc}") from exc


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
    opset = int(versions[0])
    if not registry.MIN_OPSET <= opset <= registry.LATEST_OPSET:
        raise UnsupportedError(f"dsl.from_onnx: the model imports default-domain opset {opset}; dsl "
                               f"supports opsets {registry.MIN_OPSET} to {registry.LATEST_OPSET}")
    return opset


def _check_op(np_node, name: str, label: str, opset: int) -> None:
    """UnsupportedError naming the op and the opset unless dsl defines it there."""
    domain = np_node.domain if np_node.domain not in ("", "ai.onnx") else ""
    opdef = registry.all_ops().get(np_node.op_type) if not domain else None
    if opdef is None:
        qualified = f"{domain}::{np_node.op_type}" if domain else np_node.op_type
        raise UnsupportedError(f"{label}: operator {qualified} (opset {opset}) is not supported by dsl; "
                               f"supported: {sorted(registry.all_ops())}")
    opdef.schema(opset, name)


def _read_only(array: np.ndarray) -> np.ndarray:
    """Program constants are never written: views and outputs of them stay read-only."""
    array.flags.writeable = False
    return array


class _Values(dict):
    """Name -> Value, creating each Value on first use."""

    def __missing__(self, name: str) -> Value:
        self[name] = Value(name)
        return self[name]


def graph_from_model(model) -> Graph:
    """Build a Graph from a ModelProto (ops checked against the opset; no inference yet)."""
    gp = model.graph
    opset = _default_opset(model)
    if gp.sparse_initializer:
        raise UnsupportedError("dsl.from_onnx: sparse initializers are not supported")
    initializers = {t.name: _read_only(tensor_from_proto(t)) for t in gp.initializer}
    values = _Values()
    inputs = []
    for vi in gp.input:
        if vi.name not in initializers:  # an initializer listed as input is a constant here
            values[vi.name].type = type_from_proto(vi.type, f"input {vi.name!r}")
            inputs.append(values[vi.name])
    for vi in list(gp.value_info) + list(gp.output):
        if vi.type.WhichOneof("value") is not None:
            values[vi.name].type = type_from_proto(vi.type, f"value {vi.name!r}")
    nodes = [_node_from_proto(np_node, index, opset, values) for index, np_node in enumerate(gp.node)]
    outputs = [values[vi.name] for vi in gp.output]
    return Graph(gp.name or "main", inputs, outputs, nodes, initializers, opset)


def _node_from_proto(np_node, index: int, opset: int, values: _Values) -> Node:
    name = np_node.name or f"{np_node.op_type}_{index}"
    label = f"{np_node.op_type} (node {name!r})"
    _check_op(np_node, name, label, opset)
    attrs = {}
    for a in np_node.attribute:
        if a.ref_attr_name:
            raise UnsupportedError(f"{label}: attribute references are not supported")
        value = _attr_from_proto(a, label)
        attrs[a.name] = _read_only(value) if isinstance(value, np.ndarray) else value
    out_names = list(np_node.output)
    while out_names and not out_names[-1]:  # trailing omitted optional outputs
        out_names.pop()
    if "" in out_names:
        raise UnsupportedError(f"{label}: an omitted output before a present one is not supported "
                               f"(outputs {list(np_node.output)})")
    return Node(np_node.op_type, [values[n] if n else None for n in np_node.input],
                [values[n] for n in out_names], attrs, name, np_node.domain)


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
    return Program(graph_from_model(_load_model(source)))


def _node_to_proto(node: Node, opset: int):
    helper = _onnx().helper
    proto = helper.make_node(node.op_type, [v.name if v is not None else "" for v in node.inputs],
                             [v.name for v in node.outputs], name=node.name or None,
                             domain=node.domain or None)
    schema = registry.get(node.op_type, node.name, node.domain).schema(opset, node.name)
    for key, value in sorted(node.attrs.items()):
        if value is not None:
            spec = schema.attr(key)
            proto.attribute.append(_attr_to_proto(key, value, spec.kind if spec else None))
    return proto


def to_model(graph: Graph):
    """A ModelProto for a typed Graph; onnx.checker accepts it."""
    helper = _onnx().helper

    def info(v: Value):
        return helper.make_value_info(v.name, type_to_proto(v.type))

    opset = [helper.make_opsetid("", graph.opset)]
    model_graph = helper.make_graph([_node_to_proto(n, graph.opset) for n in graph.nodes], graph.name,
                                    [info(v) for v in graph.inputs], [info(v) for v in graph.outputs],
                                    [tensor_to_proto(k, a) for k, a in graph.initializers.items()])
    model = helper.make_model(model_graph, opset_imports=opset, producer_name="dsl")
    # IR 4 is the first where initializers need not be listed as graph inputs.
    model.ir_version = max(4, helper.find_min_ir_version_for(opset, ignore_unknown=True))
    return model
