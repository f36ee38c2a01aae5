"""Specialize a graph to concrete input types: a copy whose every value has a static type,
plus each node's planned Call and the constants (what the code generator needs)."""
from __future__ import annotations

from ..ir import Graph, Node, Value, type_of_array
from . import infer_shapes


def value_inputs(graph: Graph) -> set[str]:
    """Graph inputs whose contents a rule reads (axes, target shapes): their values become part
    of a specialization, like constants."""
    from ..ops import registry
    names = {v.name for v in graph.inputs}
    found = set()
    for node in graph.nodes:
        schema = registry.get(node.op_type, node.name, node.domain).schema(graph.opset, node.name)
        for spec, value in zip(schema.inputs, node.inputs):
            if spec.needs_value and value is not None and value.name in names:
                found.add(value.name)
    return found


def value_copier(keep_types: bool = False):
    """copy(value) -> a fresh Value of the same name, one per name (None stays None); with
    ``keep_types`` it carries the original's type. ``copy.values`` maps names to the copies."""
    values: dict[str, Value] = {}

    def copy(value: Value | None) -> Value | None:
        if value is None:
            return None
        if value.name not in values:
            values[value.name] = Value(value.name)
            if keep_types:
                values[value.name].type = value.type
        return values[value.name]
    copy.values = values
    return copy


def specialize(graph: Graph, input_types: list, known: dict | None = None) -> tuple[Graph, dict, dict]:
    """Copy ``graph`` with ``input_types`` on its inputs and re-run inference; ``known`` holds
    the values of ``value_inputs`` (treated as constants).

    Returns:
        (the copy, {id(node): Call}, {value name: constant array}).
    """
    copy = value_copier()
    inputs = [copy(v) for v in graph.inputs]
    for value, value_type in zip(inputs, input_types):
        value.type = value_type
    nodes = [Node(n.op_type, [copy(v) for v in n.inputs], [copy(v) for v in n.outputs], dict(n.attrs),
                  n.name, n.domain) for n in graph.nodes]
    clone = Graph(graph.name, inputs, [copy(v) for v in graph.outputs], nodes, dict(graph.initializers),
                  graph.opset)
    for name, array in graph.initializers.items():  # constants feed kernels: they need types
        if name in copy.values and copy.values[name].type is None:
            copy.values[name].type = type_of_array(array)
    _, calls, consts = infer_shapes.infer(clone, known)
    return clone, calls, consts
