"""Shape and type inference over a Graph: every value gets a type; errors name the node.

Constants (initializers that are not graph inputs, Constant outputs, Shape of static
shapes, and any node whose inputs are all constant) are propagated so that rules can
read axes and target shapes at load time.
"""
from __future__ import annotations

from ..errors import DTypeError
from ..ir import Graph, TensorType, type_of_array
from ..ops import registry
from ..values import runtime_type


def _check_declared(node, value, inferred) -> None:
    declared = value.type
    if not isinstance(declared, TensorType) or not isinstance(inferred, TensorType):
        return
    if declared.dtype != inferred.dtype:
        raise DTypeError(f"{node.op_type} (node {node.name!r}): output {value.name!r} is declared "
                         f"{declared} but the op produces {inferred}")


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


def run(graph: Graph) -> bool:
    """Infer every node's output types in order; returns True if any type changed."""
    input_names = {v.name for v in graph.inputs}
    consts = {k: a for k, a in graph.initializers.items() if k not in input_names}
    types = {v.name: v.type for v in graph.inputs}
    types.update({k: type_of_array(a) for k, a in graph.initializers.items() if k not in input_names})
    changed = False
    for node in graph.nodes:
        opdef = registry.get(node.op_type, node.name, node.domain)
        schema = opdef.schema(graph.opset, node.name)
        in_types = [None if v is None else types.get(v.name) for v in node.inputs]
        values = [None if v is None else consts.get(v.name) for v in node.inputs]
        call = opdef.make_call(schema, node.name, node.attrs, in_types, values)
        if any(t is None for t, v in zip(in_types, node.inputs) if v is not None):
            out_types = [None] * len(node.outputs)
        else:
            out_types = opdef.infer(schema, call)
            folded = call.folded
            if folded is None and node.inputs and all(v is not None and v.name in consts
                                                      for v in node.inputs):
                folded = opdef.reference(call, values)
            if folded is not None:
                for value, array in zip(node.outputs, folded):
                    consts[value.name] = array
                    out_types = [runtime_type(a) for a in folded]
        for value, inferred in zip(node.outputs, out_types):
            _check_declared(node, value, inferred)
            merged = _merge(value.type, inferred)
            changed |= merged != value.type
            value.type = merged
            types[value.name] = merged
    return changed

