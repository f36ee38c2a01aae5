"""Op definitions and the registry: versioned schemas, rule, reference and lowering in one object.

An op module builds one ``OpDef`` per ONNX operator and calls ``register``; nothing
else in the project dispatches on op names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import DslError, DTypeError, InputError, ShapeError, UnsupportedError, where
from ..ir import OptionalType, SequenceType, TensorType
from . import chunks
from .lowering import Elementwise, Row

MIN_OPSET = 1
LATEST_OPSET = 28  # newest default-domain opset this project implements (onnx 1.23 defines 28)

REQUIRED = object()  # marks an attribute without a default
INT64 = dtypes.types("int64")


@dataclass(frozen=True)
class Input:
    """A formal input. ``types`` None means the schema's type variable T."""

    name: str
    types: frozenset | None = None
    optional: bool = False
    needs_value: bool = False  # the rule reads its contents (axes, shape)


@dataclass(frozen=True)
class Attr:
    """A formal attribute: kind in int, ints, float, floats, string, strings, tensor."""

    name: str
    kind: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class Schema:
    """One ONNX schema version, valid from ``version`` up to the next one."""

    version: int
    inputs: tuple[Input, ...]
    attrs: tuple[Attr, ...]
    types: frozenset[DType]
    seq_types: frozenset[DType] = frozenset()   # element types of accepted seq(T)
    optional_types: frozenset[DType] = frozenset()  # element types of accepted optional(tensor(T))
    accepts_optional: bool = False              # optional(tensor) and optional(seq) accepted

    def attr(self, name: str) -> Attr | None:
        return next((a for a in self.attrs if a.name == name), None)

    def input_index(self, name: str) -> int | None:
        return next((i for i, inp in enumerate(self.inputs) if inp.name == name), None)


@dataclass(eq=False)
class Call:
    """One application of an op: what a rule validates and a reference executes.

    ``values[i]`` is the concrete array of input i when known (always at run time;
    at graph-inference time only for constants). A rule records what it decided
    (normalized axes, target shape) in ``plan`` for the reference and lowering.
    """

    op: str
    version: int
    node: str
    attrs: dict[str, Any]
    types: list[Any]
    values: list[Any]
    plan: Any = None
    folded: list[Any] | None = None  # output values a rule can compute from types alone
    outputs: int | None = None  # the node's output count when bound from an ir.Node (Split reads it)

    def fail(self, message: str, cls: type[DslError] = ShapeError):
        raise cls(f"{where(self.op, self.node)}: {message}")

    def input_type(self, index: int):
        """The type of input ``index``, or None when the node omits it (absent or trailing)."""
        return self.types[index] if index < len(self.types) else None

    def require_type(self, dt, allowed, what: str) -> None:
        """DTypeError unless ``dt`` is in ``allowed``: "<what> <dt> at version V; expected one of"."""
        if dt not in allowed:
            self.fail(f"{what} {dt} at version {self.version}; expected one of "
                      f"{sorted(t.onnx_name for t in allowed)}", DTypeError)

    def int_list(self, index: int, what: str) -> list[int] | None:
        """Input ``index`` as a list of ints (a 1-D int64 tensor), or None if unknown."""
        value = self.values[index]
        if value is None:
            return None
        if value.ndim != 1:
            self.fail(f"{what} must be a 1-D int64 tensor, got rank {value.ndim} shape {list(value.shape)}")
        return [int(v) for v in value]


Rule = Callable[[Call], list]
Reference = Callable[[Call, list], list]


@dataclass(eq=False)
class OpDef:
    """An ONNX operator: schemas by version, the shape/type rule, the numpy reference
    and, for pure shape ops, ``view``: the same transform applied to a View."""

    name: str
    schemas: tuple[Schema, ...]
    rule: Rule
    reference: Reference
    view: Callable | None = None
    kernel: Any = None  # a codegen lowering (dsl.ops.lowering.Elementwise / Row), or None
    # reference taking dsl.Tensor inputs as they are (packed ones stay packed); returns the
    # outputs, or None to fall back to the numpy reference on unpacked arrays
    tensor_reference: Callable | None = None
    doc: str = ""
    # how its dims chunk under dsl.dask (a dsl.ops.chunks.ChunkRule); register() gives elementwise,
    # view and row (reduction / softmax) ops theirs; None: dsl.dask cannot run it blockwise
    chunk: Any = None
    # a composite op's function body: expand(call, builder, inputs) -> outputs, in primitive ops
    # (dsl/ops/expansion.py); the JIT builds them into the graph, where they fuse
    expand: Callable | None = None
    # "" for the default (ai.onnx) domain; an op of another domain (com.microsoft) is looked up
    # by (domain, name) and has one schema line of its own versions
    domain: str = ""
    # whether a node whose inputs are all constants is computed ahead of the run (trace / load
    # time); DequantizeLinear is not, as onnxruntime does not fold it: its result is the weight
    # at 4-8x the bytes, and a MatMul reading the codes (dsl/ops/quant_matmul.py, by dsl/passes/replace.py) needs the node
    fold: bool = True
    # a rewrite the JIT applies before fusion (dsl/passes/replace.py): (node, calls, constants,
    # opset) -> a dsl.ops.quant_matmul.Replacement or None (MatMul of a dequantized weight)
    replace: Callable | None = None

    def schema(self, opset: int, node: str = "") -> Schema:
        """The schema in force at a default-domain opset (an op of another domain: its newest
        schema, since a graph records the default domain's opset only)."""
        if self.domain:
            return self.schemas[-1]
        if not isinstance(opset, (int, np.integer)) or isinstance(opset, bool) \
                or not MIN_OPSET <= opset <= LATEST_OPSET:
            raise UnsupportedError(f"{where(self.name, node)}: opset {opset!r} is not supported; "
                                   f"expected an int in [{MIN_OPSET}, {LATEST_OPSET}]")
        found = [s for s in self.schemas if s.version <= opset]
        if not found:
            raise UnsupportedError(f"{where(self.name, node)}: not defined at opset {opset}; "
                                   f"first version is {self.schemas[0].version}")
        return found[-1]

    def infer(self, schema: Schema, call: Call, body: bool = False) -> list:
        """Check arity and element types against ``schema`` (any element type for the data type
        variable of a body's primitive: bind), then run the rule; an output too large for any
        array is a ShapeError here, before anything is allocated."""
        _check_inputs(schema, call, body)
        try:
            out_types = self.rule(call)
        except ShapeError as exc:  # an impossible output type: name the op that made it
            text = str(exc)
            if not text.startswith("TensorType: "):
                raise
            call.fail(f"output {text[len('TensorType: '):]}")
        for index, value_type in enumerate(out_types):
            size = value_type.nbytes if isinstance(value_type, TensorType) else None
            if size is not None and size > MAX_ARRAY_BYTES:
                call.fail(f"output {index} {value_type} would need {size} bytes, more than an array can "
                          f"hold ({MAX_ARRAY_BYTES} bytes, numpy's limit)")
        return out_types

    def make_call(self, schema: Schema, node: str, attrs: dict, types: list, values: list) -> Call:
        return Call(self.name, schema.version, node, resolve_attrs(self.name, node, schema, attrs),
                    list(types), list(values))


def _type_allowed(schema: Schema, spec: Input, value_type) -> bool:
    if isinstance(value_type, TensorType):
        return value_type.dtype in (spec.types if spec.types is not None else schema.types)
    if isinstance(value_type, SequenceType) and spec.types is None:
        elem = value_type.elem  # (dsl's sequences hold tensors; anything else is not allowed)
        return elem is None or isinstance(elem, TensorType) and elem.dtype in schema.seq_types
    if isinstance(value_type, OptionalType) and spec.types is None and schema.accepts_optional:
        inner = value_type.elem
        if isinstance(inner, TensorType):  # ONNX lists optional(tensor(T)) for fewer T than tensor(T)
            return inner.dtype in schema.optional_types
        return inner is None or _type_allowed(schema, spec, inner)
    return False


def _check_inputs(schema: Schema, call: Call, any_data_type: bool = False) -> None:
    types = call.types
    if len(types) > len(schema.inputs):
        call.fail(f"takes at most {len(schema.inputs)} inputs at opset version {schema.version}, "
                  f"got {len(types)}", InputError)
    bound = None
    for index, spec in enumerate(schema.inputs):
        value_type = types[index] if index < len(types) else None
        if value_type is None:
            if not spec.optional:
                call.fail(f"missing required input {spec.name!r}", InputError)
            continue
        relaxed = any_data_type and spec.types is None and isinstance(value_type, TensorType)
        if not relaxed and not _type_allowed(schema, spec, value_type):
            allowed = sorted(t.onnx_name for t in (spec.types or schema.types))
            call.fail(f"input {spec.name!r} has type {value_type}, not allowed at version "
                      f"{schema.version}; expected one of {allowed}", DTypeError)
        if spec.types is None and isinstance(value_type, TensorType):
            if bound is not None and value_type.dtype != bound:
                call.fail(f"input {spec.name!r} has element type {value_type.dtype} but an earlier "
                          f"input of the same type variable has {bound}", DTypeError)
            bound = value_type.dtype


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1  # ONNX int / ints attributes are int64
MAX_ARRAY_BYTES = 2 ** 63 - 1  # numpy's limit on one array's byte size (its intp)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return _is_int(value) or isinstance(value, (float, np.floating))


def _attr_value(op: str, node: str, attr: Attr, value):
    def bad(expected: str):
        raise InputError(f"{where(op, node)}: attribute {attr.name!r} = {value!r}; expected {expected}")

    def items(kind_ok, expected: str) -> list:
        if isinstance(value, np.ndarray):
            if value.ndim != 1:
                bad(expected)
            entries = value.tolist()
        elif isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            bad(expected)
        else:
            entries = list(value)
        if not all(kind_ok(v) for v in entries):
            bad(expected)
        return entries

    if attr.kind == "int":
        if not _is_int(value) or not INT64_MIN <= value <= INT64_MAX:
            bad("an int64")
        return int(value)
    if attr.kind == "ints":
        entries = [int(v) for v in items(_is_int, "a flat list of int64")]
        if any(not INT64_MIN <= v <= INT64_MAX for v in entries):
            bad("a flat list of int64")
        return entries
    if attr.kind == "float":
        if not _is_real(value):
            bad("a float")
        try:
            return float(value)
        except OverflowError:
            bad("a float")
    if attr.kind == "floats":
        try:
            return [float(v) for v in items(_is_real, "a flat list of floats")]
        except OverflowError:
            bad("a flat list of floats")
    if attr.kind == "string":
        if not isinstance(value, (str, bytes)):
            bad("a str (UTF-8)")
        return value
    if attr.kind == "strings":
        return items(lambda v: isinstance(v, (str, bytes)), "a flat list of str")
    return value


def resolve_attrs(op: str, node: str, schema: Schema, attrs: dict) -> dict:
    """Attributes checked against the schema, with defaults filled in (None = absent)."""
    resolved = {}
    for name in attrs:
        if schema.attr(name) is None:
            known = [a.name for a in schema.attrs] or "none"
            raise InputError(f"{where(op, node)}: unknown attribute {name!r} at opset version "
                             f"{schema.version}; expected one of {known}")
    for attr in schema.attrs:
        if attr.name in attrs and attrs[attr.name] is not None:
            resolved[attr.name] = _attr_value(op, node, attr, attrs[attr.name])
        elif attr.default is REQUIRED:
            raise InputError(f"{where(op, node)}: missing required attribute {attr.name!r}")
        else:
            resolved[attr.name] = attr.default
    return resolved


_REGISTRY: dict[str, OpDef] = {}           # the default domain's ops
_DOMAINS: dict[str, dict[str, OpDef]] = {}  # other domains: {domain: {name: OpDef}}
INTERNAL = "dsl.internal"  # the domain of ops only the compiler's passes make (never imported)


def register(opdef: OpDef) -> OpDef:
    """Add an op; each (domain, name) is registered exactly once."""
    table = _DOMAINS.setdefault(opdef.domain, {}) if opdef.domain else _REGISTRY
    assert opdef.name not in table, opdef.name
    assert list(opdef.schemas) == sorted(opdef.schemas, key=lambda s: s.version)
    if opdef.chunk is None:
        opdef.chunk = chunks.ELEMENTWISE if isinstance(opdef.kernel, Elementwise) else \
            chunks.ROW if isinstance(opdef.kernel, Row) else chunks.VIEW if opdef.view is not None else None
    table[opdef.name] = opdef
    return opdef


def bind(node, opset: int, types: list, values: list, attrs: dict | None = None, name: str = "",
         infer: bool = True, body: bool = False, domain: str = "") -> tuple:
    """The one way an application of an op is checked and planned, for the trace, shape
    inference and both engines: ``node`` is an ir.Node (its op, attributes, name and domain) or
    an op name (with ``attrs`` and the node ``name`` it will have, if any); ``types`` and
    ``values`` are per input (None where absent / unknown). Returns (OpDef, its planned Call, the
    output types, None without ``infer``: attributes checked only, for inputs of unknown type); a
    DslError names the op, the node and what was wrong. ``body``: a primitive of a composite's
    body (dsl/passes/expand.py), whose element type the composite already checked at the model's
    opset: its data type variable takes any element type (a Pad of float8 moves float8 through
    the body's Slice / Concat / Where, which opset 18 lists without float8). ``domain``: that of
    an op given by name."""
    if isinstance(node, str):
        op_type = node
    else:
        op_type, name, domain, attrs = node.op_type, node.name, node.domain, node.attrs
    opdef = get(op_type, name, domain)
    schema = opdef.schema(opset, name)
    call = opdef.make_call(schema, name, attrs or {}, types, values)
    call.outputs = None if isinstance(node, str) else len(node.outputs)
    return opdef, call, opdef.infer(schema, call, body) if infer else None


def get(op_type: str, node: str = "", domain: str = "") -> OpDef:
    """The registered op of ``domain`` ("" or "ai.onnx": the default one), or UnsupportedError
    naming it and what that domain supports."""
    if domain in ("", "ai.onnx", None):
        table, label = _REGISTRY, op_type
    else:
        table, label = _DOMAINS.get(domain, {}), f"{domain}::{op_type}"
    if op_type not in table:
        known = sorted(table) if table is _REGISTRY else \
            f"{sorted(table)} in domain {domain!r} (other domains: {sorted(d for d in _DOMAINS if d != INTERNAL)})"
        raise UnsupportedError(f"{where(label, node)}: operator not supported by dsl; supported: {known}")
    return table[op_type]


def all_ops() -> dict[str, OpDef]:
    """The default (ai.onnx) domain's ops."""
    return dict(_REGISTRY)


def domain_ops(domain: str) -> dict[str, OpDef]:
    """The ops of another domain ("com.microsoft")."""
    return dict(_DOMAINS.get(domain, {}))

