"""Shape and type inference over a Graph: every value gets a type; errors name the node.

Constants (initializers that are not graph inputs, Constant outputs, Shape of static
shapes, and any node whose inputs are all constant) are propagated so that rules can
read axes and target shapes at load time.
"""
from __future__ import annotations

import os

from ..errors import DTypeError, InputError, ShapeError
from ..ir import Graph, TensorType, type_of_array
from ..ops import registry
from ..values import runtime_type


def _check_declared(node, value, inferred) -> None:
    """A declared (value_info / output) type must agree with the inferred one where both are known."""
    declared = value.type
    if not isinstance(declared, TensorType) or not isinstance(inferred, TensorType):
        return
    where = f"{node.op_type} (node {node.name!r}): output {value.name!r} is declared {declared}"
    if declared.dtype != inferred.dtype:
        raise DTypeError(f"{where} but the op produces {inferred}")
    if declared.shape is None or inferred.shape is None:
        return
    if len(declared.shape) != len(inferred.shape) or any(
            isinstance(d, int) and isinstance(e, int) and d != e
            for d, e in zip(declared.shape, inferred.shape)):
        raise ShapeError(f"{where} but the op produces {inferred}")


def _merge(declared, inferred):
    """Keep the inferred type, filling unknown dims from a declared type of the same rank."""
    if not isinstance(declared, TensorType) or not isinstance(inferred, TensorType):
        return inferred if inferred is not None else declared
    if inferred.shape is None:
        return TensorType(inferred.dtype, declared.shape)
    if declared.shape is None or len(declared.shape) != len(inferred.shape):
        return inferred
    dims = tuple(d if d is not None else e for d, e in zip(inferred.shape, declared.shape))
    return TensorType(inferred.dtype, dims)


def _fold_budget() -> int:
    """Bytes of outputs a node may have to be evaluated at load / trace time: ``$DSL_FOLD_BYTES``,
    default 16 MiB. Larger constant results (an Expand of a scalar to [2**17, 2**17] is 64 GiB)
    are computed when the program runs, like any other value."""
    text = os.environ.get("DSL_FOLD_BYTES", "").strip()
    return int(text) if text.isdigit() else 16 << 20


FOLD_BYTES = _fold_budget()


def fold(opdef, call, inputs: list, values: list, consts: dict, outputs: list, out_types: list) -> list | None:
    """Constant outputs of a node: what its rule computed from types alone (Shape), or its
    reference when every input is a known constant and its outputs (``out_types``) fit in
    FOLD_BYTES. Records them in ``consts``."""
    folded = call.folded
    if folded is None and opdef.fold and inputs and all(v is not None and v.name in consts for v in inputs) and \
            sum(t.nbytes or 0 for t in out_types if isinstance(t, TensorType)) <= FOLD_BYTES and \
            all(not isinstance(t, TensorType) or t.is_static for t in out_types):
        folded = opdef.reference(call, values)
    for value, array in zip(outputs, folded or []):
        consts[value.name] = array
    return folded


def _infer_node(graph: Graph, node, types: dict, consts: dict, calls: dict) -> list:
    """Output types of one node; records its Call in ``calls`` and constant outputs in ``consts``."""
    in_types = [None if v is None else types.get(v.name) for v in node.inputs]
    values = [None if v is None else consts.get(v.name) for v in node.inputs]
    if any(t is None for t, v in zip(in_types, node.inputs) if v is not None):
        registry.bind(node, graph.opset, in_types, values, infer=False)
        return [None] * len(node.outputs)  # an input of unknown type: nothing to infer (the attributes checked)
    opdef, call, out_types = registry.bind(node, graph.opset, in_types, values)
    calls[id(node)] = call
    if len(node.outputs) > len(out_types):
        raise InputError(f"{node.op_type} (node {node.name!r}): has {len(node.outputs)} outputs "
                         f"{[v.name for v in node.outputs]}; the op produces {len(out_types)}")
    folded = fold(opdef, call, node.inputs, values, consts, node.outputs, out_types)
    return out_types if folded is None else [runtime_type(a) for a in folded]


def infer(graph: Graph, known: dict | None = None) -> tuple[bool, dict, dict]:
    """Infer every node's output types in order; ``known`` gives values of some graph inputs
    (e.g. axes fed at run time) to treat as constants.

    Returns:
        (whether any type changed, {id(node): planned Call}, {value name: constant array}).
    """
    input_names = {v.name for v in graph.inputs}
    consts = {k: a for k, a in graph.initializers.items() if k not in input_names}
    types = {v.name: v.type for v in graph.inputs}
    types.update({k: type_of_array(a) for k, a in consts.items()})
    consts.update(known or {})
    changed, calls = False, {}
    for node in graph.nodes:
        for value, inferred in zip(node.outputs, _infer_node(graph, node, types, consts, calls)):
            _check_declared(node, value, inferred)
            merged = _merge(value.type, inferred)
            changed |= merged != value.type
            value.type = merged
            types[value.name] = merged
    return changed, calls, consts


def run(graph: Graph) -> bool:
    """Infer every node's output types in order; returns True if any type changed."""
    return infer(graph)[0]
