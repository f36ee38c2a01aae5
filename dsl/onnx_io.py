"""ModelProto <-> Graph. The only module that imports onnx (lazily, inside functions)."""
from __future__ import annotations

import math
import os
import stat
import sys

import numpy as np

from . import dtypes
from .errors import DslError, DTypeError, InputError, ShapeError, UnsupportedError
from .external_data import external_bytes
from .ir import MAX_RANK, Graph, Node, OptionalType, SequenceType, TensorType, Value
from .ops import registry
from .ops.control_flow import Body, free_names
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


_NUMPY_MAX_RANK = MAX_RANK


def tensor_from_proto(proto, base_dir: str | None = None, where: str = "dsl.from_onnx") -> np.ndarray:
    """A TensorProto as a numpy array (ml_dtypes for exotic types), strictly validated.

    ``base_dir`` is the model's directory, needed to read external data; ``where`` prefixes errors.
    Counts are Python ints checked against the data present before numpy sees the shape.
    """
    label = f"{where}: tensor {proto.name!r}" if proto.name else f"{where}: tensor"
    try:
        dt = dtypes.dtype(int(proto.data_type))
    except DslError:
        raise DTypeError(f"{label} has unsupported data_type {proto.data_type}") from None
    shape = tuple(int(d) for d in proto.dims)
    if any(d < 0 for d in shape):
        raise InputError(f"{label} has negative dims {list(shape)}")
    count = math.prod(shape)  # not np.prod: an int64 product can wrap around to a small count
    _check_numpy_limits(shape, count, dt, label)
    if proto.data_location == 1:  # EXTERNAL (a closed proto2 enum: no other value parses)
        inline = proto.HasField("raw_data") or len(getattr(proto, _FIELD.get(dt.onnx_name, "int32_data"))) > 0
        return _from_raw(external_bytes(proto, dt, count, label, base_dir, inline), dt, shape, count, label)
    if proto.external_data:
        raise InputError(f"{label} has external_data entries but data_location DEFAULT; expected "
                         f"data_location EXTERNAL (1) for external data")
    if proto.HasField("raw_data"):
        if dt.kind == "string":
            raise InputError(f"{label} is a string tensor with raw_data; ONNX stores strings in string_data")
        return _from_raw(proto.raw_data, dt, shape, count, label)
    return _from_fields(proto, dt, shape, count, label)


def _check_numpy_limits(shape: tuple, count: int, dt, label: str) -> None:
    """ShapeError for shapes numpy cannot hold even when the data matches: too many dims, or an
    empty tensor whose nonzero dims overflow numpy's byte count (numpy multiplies those). A
    non-empty tensor is only built once its data, which fits in memory, matches ``count``."""
    if len(shape) > _NUMPY_MAX_RANK:
        raise ShapeError(f"{label} has rank {len(shape)}; numpy holds at most {_NUMPY_MAX_RANK} dims")
    nbytes = dt.np_dtype.itemsize * math.prod(d for d in shape if d)
    if count == 0 and nbytes > sys.maxsize:
        raise ShapeError(f"{label} has dims {list(shape)}: {nbytes} bytes before counting zero dims, "
                         f"more than numpy can index (at most {sys.maxsize})")


def _from_raw(raw: bytes, dt, shape: tuple, count: int, label: str) -> np.ndarray:
    need = dt.packed_nbytes(count)
    if len(raw) != need:
        raise InputError(f"{label} {dt.onnx_name}{list(shape)} has {len(raw)} raw bytes; expected {need}")
    if dt.kind == "bool" and raw and max(raw) > 1:
        raise InputError(f"{label} bool raw_data holds byte {max(raw)}; expected 0 or 1")
    if dt.packed:
        return Tensor.from_packed(raw, dt, shape).numpy()
    array = np.frombuffer(raw, dtype=dt.np_dtype).reshape(shape)
    return array.byteswap() if sys.byteorder == "big" else array.copy()  # raw_data is little-endian


def _from_fields(proto, dt, shape: tuple, count: int, label: str) -> np.ndarray:
    field = _FIELD.get(dt.onnx_name, "int32_data")
    data = getattr(proto, field)  # never larger than the serialized model
    if dt.kind == "string":
        _check_count(len(data), count, shape, label)
        strings = [_utf8(s, f"{label} string_data entry {i}") for i, s in enumerate(data)]
        return np.array(strings, dtype=object).reshape(shape)
    if dt.kind == "complex":
        if len(data) != 2 * count:
            raise InputError(f"{label} has {len(data)} {field} entries; expected {2 * count} "
                             f"(real, imaginary pairs)")
        pairs = np.array(data, np.float64).reshape(-1, 2)
        return (pairs[:, 0] + 1j * pairs[:, 1]).astype(dt.np_dtype).reshape(shape)
    if dt.packed:
        need = dt.packed_nbytes(count)
        if len(data) != need:
            raise InputError(f"{label} {dt.onnx_name}{list(shape)} has {len(data)} "
                             f"int32_data entries; expected {need} (one packed byte each)")
        codes = _in_range(data, 0, 255, field, label, "each entry holds one packed byte")
        return Tensor.from_packed(codes.astype(np.uint8), dt, shape).numpy()
    _check_count(len(data), count, shape, label)
    if field == "int32_data" and dt.kind == "float":  # float16/bfloat16/float8 as bit patterns
        bits = _in_range(data, 0, 2 ** dt.bits - 1, field, label, f"{dt.bits}-bit patterns")
        storage = np.uint16 if dt.bits == 16 else np.uint8
        return bits.astype(storage).view(dt.np_dtype).reshape(shape)
    if field in ("int32_data", "uint64_data") and dt.kind in ("int", "uint", "bool"):
        low, high = (0, 1) if dt.kind == "bool" else (np.iinfo(dt.np_dtype).min, np.iinfo(dt.np_dtype).max)
        values = _in_range(data, int(low), int(high), field, label, f"{dt.onnx_name} values")
        return values.astype(dt.np_dtype).reshape(shape)
    return np.array(data, dtype=dt.np_dtype).reshape(shape)


def _in_range(data, low: int, high: int, field: str, label: str, why: str) -> np.ndarray:
    values = np.array(data, dtype=np.uint64 if high > 2 ** 63 else np.int64)
    bad = values[(values < low) | (values > high)] if values.size else values
    if bad.size:
        raise InputError(f"{label} has {field} entry {int(bad[0])} outside [{low}, {high}] ({why})")
    return values


def _check_count(found: int, count: int, shape: tuple, label: str) -> None:
    if found != count:
        raise InputError(f"{label} has {found} values; expected {count} for shape {list(shape)}")


def _utf8(raw: bytes, what: str) -> str:
    """``raw`` decoded as UTF-8, or InputError quoting (a prefix of) the bad bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = repr(raw[:40]) + ("..." if len(raw) > 40 else "")
        raise InputError(f"{what} is not UTF-8: {shown} ({exc.reason} at byte {exc.start}); "
                         f"expected UTF-8 text") from None


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
# The nestings dsl's ops accept (ONNX's tensor / seq / optional constraints); any other is refused
# while walking down, so a type nested 100k levels deep costs 3 steps and no recursion.
_NESTINGS = {(), ("sequence_type",), ("optional_type",), ("optional_type", "sequence_type")}
_SPELLING = {"sequence_type": "seq", "optional_type": "optional"}


def type_from_proto(proto, label: str):
    """A TypeProto as a TensorType / SequenceType / OptionalType; DslError naming ``label``."""
    wrappers: tuple[str, ...] = ()
    which = proto.WhichOneof("value")
    while which in _SPELLING:
        wrappers += (which,)
        if wrappers not in _NESTINGS:
            raise UnsupportedError(f"dsl.from_onnx: {label} has type {_spell(wrappers)}, which is not "
                                   f"supported; expected tensor, seq(tensor), optional(tensor) or "
                                   f"optional(seq(tensor))")
        proto = getattr(proto, which).elem_type
        which = proto.WhichOneof("value")
    if which == "tensor_type":
        result = _tensor_type_from_proto(proto.tensor_type, label)
    elif which is None:
        inner = f" inside {_spell(wrappers)}" if wrappers else ""
        raise InputError(f"dsl.from_onnx: {label} has no type{inner}")
    else:
        raise UnsupportedError(f"dsl.from_onnx: {label} has type {which}, which is not supported")
    for wrapper in reversed(wrappers):
        result = SequenceType(result) if wrapper == "sequence_type" else OptionalType(result)
    return result


def _spell(wrappers: tuple) -> str:
    """ONNX spelling of nested wrappers: ('sequence_type', 'sequence_type') -> 'seq(seq(...))'."""
    return "".join(f"{_SPELLING[w]}(" for w in wrappers) + "..." + ")" * len(wrappers)


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
    try:
        return TensorType(dt, tuple(dims))
    except ShapeError as exc:  # more elements than int64 counts: say which value
        raise ShapeError(f"dsl.from_onnx: {label}: {exc}") from None


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
def _attr_from_proto(attr, op_label: str, base_dir: str | None, opset: int = registry.LATEST_OPSET):
    kind = attr.type
    kinds = _onnx().AttributeProto
    what = f"{op_label}: attribute {attr.name!r}"
    if kind == kinds.INT:
        return int(attr.i)
    if kind == kinds.INTS:
        return [int(v) for v in attr.ints]
    if kind == kinds.FLOAT:
        return float(attr.f)
    if kind == kinds.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == kinds.STRING:
        return _utf8(attr.s, what)
    if kind == kinds.STRINGS:
        return [_utf8(s, f"{what} entry {i}") for i, s in enumerate(attr.strings)]
    if kind == kinds.TENSOR:
        return tensor_from_proto(attr.t, base_dir, what)
    if kind == kinds.SPARSE_TENSOR:
        return _SparseMarker()
    if kind == kinds.GRAPH:  # a body (If, Loop, Scan): its names from enclosing scopes set by the node
        declared = [type_from_proto(vi.type, f"{what}: body output {vi.name!r}")
                    if vi.type.WhichOneof("value") is not None else None for vi in attr.g.output]
        return Body(attr.g, opset, base_dir, declared)
    raise UnsupportedError(f"{what} of type {_attr_type_name(kind)} is not supported")


def _attr_type_name(kind: int) -> str:
    try:
        return _onnx().AttributeProto.AttributeType.Name(kind)
    except ValueError:  # a code newer than this onnx, or garbage
        return f"code {kind}"


def _check_attr_type(attr, spec, label: str) -> None:
    """InputError unless the AttributeProto type is the one the schema's kind needs."""
    expected = _ATTR_TYPES.get(spec.kind)
    got = _attr_type_name(attr.type)
    if expected is not None and got != expected:
        raise InputError(f"{label}: attribute {attr.name!r} has type {got}; expected {expected} "
                         f"(schema kind {spec.kind!r})")


class _SparseMarker:
    """Stands for a sparse tensor attribute (rejected by the op rules that see it)."""

    def __repr__(self) -> str:
        return "<sparse tensor>"


# Schema attribute kind -> AttributeProto type ("dtype" is an INT holding a TensorProto.DataType).
_ATTR_TYPES = {"int": "INT", "ints": "INTS", "float": "FLOAT", "floats": "FLOATS", "string": "STRING",
               "strings": "STRINGS", "tensor": "TENSOR", "sparse_tensor": "SPARSE_TENSOR", "dtype": "INT",
               "graph": "GRAPH"}


def _attr_to_proto(name: str, value, kind: str | None):
    """An AttributeProto; ``kind`` (the schema's, e.g. 'ints') fixes the type of empty lists."""
    onnx = _onnx()
    if isinstance(value, np.ndarray):
        value = tensor_to_proto("", value)
    if isinstance(value, dtypes.DType):
        value = value.onnx_code
    if isinstance(value, Body):
        value = value.graph
    try:
        type_name = _ATTR_TYPES.get(kind)
        attr_type = onnx.AttributeProto.AttributeType.Value(type_name) if type_name else None
        return onnx.helper.make_attribute(name, value, attr_type=attr_type)
    except (TypeError, ValueError) as exc:
        raise UnsupportedError(f"to_onnx: attribute {name!r} = {value!r:.80} cannot be exported: "
                               f"{exc}") from exc


# ---- models -------------------------------------------------------------------------------
def _load_model(source, base_dir):
    """(ModelProto, directory for external data or None); onnx never resolves external data."""
    onnx = _onnx()
    base_dir = None if base_dir is None else _directory(base_dir)
    if isinstance(source, onnx.ModelProto):
        return source, base_dir
    try:
        if isinstance(source, (bytes, bytearray, memoryview)):
            return onnx.load_from_string(bytes(source)), base_dir  # reads no external data
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block or never end
                raise InputError(f"dsl.from_onnx: model {source!r:.80} is not a regular file")
            model = onnx.load(path, load_external_data=False)
            return model, base_dir or os.path.dirname(os.path.abspath(path))
    except DslError:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"dsl.from_onnx: cannot read model {source!r:.80}: {exc}") from exc
    except Exception as exc:  # protobuf DecodeError is not a ValueError subclass
        raise InputError(f"dsl.from_onnx: cannot parse model: {exc}") from exc
    raise InputError(f"dsl.from_onnx: expected a path, bytes or onnx.ModelProto, got {type(source).__name__}")


def _directory(base_dir) -> str:
    path = os.fspath(base_dir) if isinstance(base_dir, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path or "\0" in path or not os.path.isdir(path):
        raise InputError(f"dsl.from_onnx: base_dir {base_dir!r:.80} is not a directory; expected the "
                         f"folder holding the model's external data files")
    return os.path.abspath(path)


def _default_opset(model) -> int:
    seen = set()
    for op in model.opset_import:
        domain = "" if op.domain == "ai.onnx" else op.domain  # two spellings of the default domain
        if domain in seen:
            raise InputError(f"dsl.from_onnx: the model imports domain {op.domain or 'ai.onnx'!r} twice "
                             f"(opset_import {[(o.domain, o.version) for o in model.opset_import]!r:.200}); "
                             f"expected one version per domain")
        seen.add(domain)
    versions = [op.version for op in model.opset_import if op.domain in ("", "ai.onnx")]
    if not versions:
        raise UnsupportedError("dsl.from_onnx: the model imports no default-domain (ai.onnx) opset")
    opset = int(versions[0])
    if not registry.MIN_OPSET <= opset <= registry.LATEST_OPSET:
        raise UnsupportedError(f"dsl.from_onnx: the model imports default-domain opset {opset}; dsl "
                               f"supports opsets {registry.MIN_OPSET} to {registry.LATEST_OPSET}")
    return opset


def _check_op(np_node, name: str, label: str, opset: int):
    """The schema in force; UnsupportedError naming the op and the opset unless dsl defines it."""
    domain = np_node.domain if np_node.domain not in ("", "ai.onnx") else ""
    table = registry.domain_ops(domain) if domain and domain != registry.INTERNAL else \
        {} if domain else registry.all_ops()
    opdef = table.get(np_node.op_type)
    if opdef is None:
        qualified = f"{domain}::{np_node.op_type}" if domain else np_node.op_type
        supported = sorted(table) if not domain else f"{sorted(table)} in domain {domain!r}"
        raise UnsupportedError(f"{label}: operator {qualified} (opset {opset}) is not supported by dsl; "
                               f"supported: {supported}")
    return opdef.schema(opset, name)


def _min_outputs(op_type: str, opset: int) -> int:
    """The fewest outputs ONNX lets a node of ``op_type`` list (dsl's schemas do not count them)."""
    onnx = _onnx()
    try:
        return int(onnx.defs.get_schema(op_type, opset, "").min_output)
    except onnx.defs.SchemaError:  # an op onnx does not know at this opset: at least one output
        return 1


def _read_only(array: np.ndarray) -> np.ndarray:
    """Program constants are never written: views and outputs of them stay read-only."""
    array.flags.writeable = False
    return array


class _Values(dict):
    """Name -> Value, creating each Value on first use; ``taken``: every name the graph spells."""

    taken: frozenset = frozenset()

    def __missing__(self, name: str) -> Value:
        self[name] = Value(name)
        return self[name]


def _check_names(entries, what: str, unique: bool = True) -> None:
    """InputError on an empty name, or (``unique``) a repeated one: of two initializers or
    value_info entries with one name, dsl would silently keep the last."""
    seen = set()
    for index, entry in enumerate(entries):
        if not entry.name:
            raise InputError(f"dsl.from_onnx: {what} {index} has an empty name; expected a non-empty "
                             f"name")
        if unique and entry.name in seen:
            raise InputError(f"dsl.from_onnx: {what} {entry.name!r:.80} appears twice; expected "
                             f"unique names")
        seen.add(entry.name)


def graph_from_model(model, base_dir: str | None = None) -> Graph:
    """Build a Graph from a ModelProto (ops checked against the opset; no inference yet).

    ``base_dir`` is the directory external data is read from (None: external data is refused).
    """
    gp = model.graph
    opset = _default_opset(model)
    if gp.sparse_initializer:
        raise UnsupportedError("dsl.from_onnx: sparse initializers are not supported")
    for entries, what in ((gp.initializer, "initializer"), (gp.input, "graph input"),
                          (gp.value_info, "value_info entry")):
        _check_names(entries, what)
    _check_names(gp.output, "graph output", unique=False)  # a value may be returned twice
    initializers = {t.name: _read_only(tensor_from_proto(t, base_dir)) for t in gp.initializer}
    values = _Values()
    values.taken = frozenset(n for node in gp.node for n in (*node.input, *node.output)) | set(initializers)
    inputs = []
    for vi in gp.input:
        if vi.name not in initializers:  # an initializer listed as input is a constant here
            values[vi.name].type = type_from_proto(vi.type, f"input {vi.name!r}")
            inputs.append(values[vi.name])
    for vi in list(gp.value_info) + list(gp.output):
        if vi.type.WhichOneof("value") is not None:
            values[vi.name].type = type_from_proto(vi.type, f"value {vi.name!r}")
    nodes = [_node_from_proto(np_node, index, opset, values, base_dir)
             for index, np_node in enumerate(gp.node)]
    outputs = [values[vi.name] for vi in gp.output]
    return Graph(gp.name or "main", inputs, outputs, nodes, initializers, opset)


def _node_attrs(np_node, schema, label: str, base_dir: str | None, opset: int = registry.LATEST_OPSET) -> dict:
    attrs = {}
    for a in np_node.attribute:
        if a.ref_attr_name:
            raise UnsupportedError(f"{label}: attribute references are not supported")
        if a.name in attrs:
            raise InputError(f"{label}: attribute {a.name!r:.80} is given twice; expected each "
                             f"attribute once")
        spec = schema.attr(a.name)  # unknown names are refused by the schema check, naming them
        if spec is not None:
            _check_attr_type(a, spec, label)
        value = _attr_from_proto(a, label, base_dir, opset)
        attrs[a.name] = _read_only(value) if isinstance(value, np.ndarray) else value
    return attrs


def _unused_name(values: _Values, stem: str) -> str:
    name, suffix = stem, 0
    while name in values or name in values.taken:
        suffix += 1
        name = f"{stem}_{suffix}"
    return name


def _node_from_proto(np_node, index: int, opset: int, values: _Values, base_dir: str | None) -> Node:
    name = np_node.name or f"{np_node.op_type}_{index}"
    label = f"{np_node.op_type} (node {name!r})"
    schema = _check_op(np_node, name, label, opset)
    attrs = _node_attrs(np_node, schema, label, base_dir, opset)
    in_names = list(np_node.input)
    bodies = [v for v in attrs.values() if isinstance(v, Body)]
    if bodies:  # the names its bodies read from enclosing scopes: inputs of the node, after its own
        captured = []
        for body in bodies:
            for outer in free_names(body.graph):
                if outer not in captured:
                    captured.append(outer)
        for body in bodies:
            body.captured = tuple(captured)
        in_names += captured
    out_names = list(np_node.output)
    while out_names and not out_names[-1]:  # trailing omitted optional outputs
        out_names.pop()
    for position, out_name in enumerate(out_names):  # an omitted output before a present one:
        if not out_name:                                # computed, under a name nothing else uses
            out_names[position] = _unused_name(values, f"{name}/omitted_output_{position}")
    need = _min_outputs(np_node.op_type, opset) if np_node.domain in ("", "ai.onnx") else 1
    if len(out_names) < need:
        raise InputError(f"{label}: lists {len(out_names)} outputs {list(np_node.output)} (omitted "
                         f"ones dropped); the op produces at least {need} at opset {opset}")
    return Node(np_node.op_type, [values[n] if n else None for n in in_names],
                [values[n] for n in out_names], attrs, name, np_node.domain)


def load_graph(source, base_dir=None) -> Graph:
    """The Graph of a model file path, serialized bytes or onnx.ModelProto (see dsl.from_onnx)."""
    return graph_from_model(*_load_model(source, base_dir))


def _node_to_proto(node: Node, opset: int):
    helper = _onnx().helper
    captured = next((len(v.captured) for v in node.attrs.values() if isinstance(v, Body)), 0)
    own = node.inputs[:len(node.inputs) - captured]  # (a body's outer names: not inputs in ONNX)
    proto = helper.make_node(node.op_type, [v.name if v is not None else "" for v in own],
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

    opset = [helper.make_opsetid("", graph.opset)] + \
        [helper.make_opsetid(d, registry.get(op, "", d).schemas[-1].version)
         for d, op in sorted({n.domain: n.op_type for n in graph.nodes if n.domain not in ("", "ai.onnx")}.items())]
    model_graph = helper.make_graph([_node_to_proto(n, graph.opset) for n in graph.nodes], graph.name,
                                    [info(v) for v in graph.inputs], [info(v) for v in graph.outputs],
                                    [tensor_to_proto(k, a) for k, a in graph.initializers.items()])
    model = helper.make_model(model_graph, opset_imports=opset, producer_name="dsl")
    # IR 4 is the first where initializers need not be listed as graph inputs.
    model.ir_version = max(4, helper.find_min_ir_version_for(opset, ignore_unknown=True))
    return model
