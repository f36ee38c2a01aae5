"""Expansion of composite ops (``OpDef.expand``, dsl/ops/expansion.py) into their primitive ops,
before fusion: ReduceL2 becomes Mul, ReduceSum, Cast, Sqrt, Cast, which the partitioner then
fuses as it fuses any such chain. The result is a fresh graph (new Values and Nodes, so
producer / user links stay exact) with a planned Call per node; each body output takes the
name of the composite output it replaces."""
from __future__ import annotations

from ..ir import Graph, Node, Value, type_of_array
from ..ops import registry
from ..ops.expansion import OPSET
from .specialize import value_copier


class GraphBuilder:
    """Builds a body's primitive nodes: each bound (checked, planned, typed) at OPSET. ``math``:
    the program's float math mode, for a body that picks a kernel by it (Attention); ``read``
    (set by expand): per output of the composite, whether anything reads it (a body may return
    None for one that nothing reads)."""

    def __init__(self, prefix: str, nodes: list, calls: dict, constants: dict, initializers: dict,
                 math: str = "fast"):
        self.prefix, self.nodes, self.calls = prefix, nodes, calls
        self.constants, self.initializers = constants, initializers
        self.math = math
        self.read = None
        self.count = 0

    def _value(self) -> Value:
        self.count += 1
        return Value(f"{self.prefix}__{self.count}")

    def op(self, op_type: str, *inputs, outputs: int = 1, domain: str = "", **attrs):
        types = [None if v is None else v.type for v in inputs]
        values = [None if v is None else self.constants.get(v.name) for v in inputs]
        _, call, out_types = registry.bind(op_type, OPSET, types, values, attrs, body=True, domain=domain)
        results = [self._value() for _ in out_types]
        for value, value_type in zip(results, out_types):
            value.type = value_type
        node = Node(op_type, list(inputs), results, dict(attrs), f"{self.prefix}/{op_type}", domain)
        self.nodes.append(node)
        self.calls[id(node)] = call
        return results[0] if outputs == 1 else results

    def const(self, array):
        value = self._value()
        value.type = type_of_array(array)
        self.constants[value.name] = self.initializers[value.name] = array
        return value


def expand(graph: Graph, calls: dict, constants: dict, math: str = "fast") -> tuple[Graph, dict, dict]:
    """(graph, calls, constants) with every composite node replaced by its body (unchanged
    when there is none); ``math``, the program's float math mode (GraphBuilder)."""
    composite = {id(n) for n in graph.nodes
                 if registry.get(n.op_type, n.name, n.domain).expand is not None and calls[id(n)].plan is not None}
    if not composite:
        return graph, calls, constants
    copy = value_copier(keep_types=True)
    values = copy.values

    nodes, new_calls, consts, inits = [], {}, dict(constants), dict(graph.initializers)
    returned = {v.name for v in graph.outputs}
    inputs = [copy(v) for v in graph.inputs]
    for node in graph.nodes:
        call = calls[id(node)]
        if id(node) not in composite:
            clone = Node(node.op_type, [copy(v) for v in node.inputs], [copy(v) for v in node.outputs],
                         dict(node.attrs), node.name, node.domain)
            nodes.append(clone)
            new_calls[id(clone)] = call
            continue
        opdef = registry.get(node.op_type, node.name, node.domain)
        builder = GraphBuilder(node.outputs[0].name, nodes, new_calls, consts, inits, math)
        builder.read = [bool(v.users) or v.name in returned for v in node.outputs]
        outputs = opdef.expand(call, builder, [copy(v) for v in node.inputs])
        for old, new, read in zip(node.outputs, outputs, builder.read):
            if new is None:  # (an output nothing reads, which the body may leave out)
                assert not read, f"{node.op_type}: its body left out output {old.name}, which is read"
                continue
            if new.producer is None or new.name in values:  # (a body that returns an input as it is)
                new = builder.op("Identity", new)
            new.name = old.name
            values[old.name] = new
    clone = Graph(graph.name, inputs, [copy(v) for v in graph.outputs], nodes, inits, graph.opset)
    return clone, new_calls, consts


__all__ = ["expand"]
