"""Rewrites the JIT applies before fusion, each declared on an op's OpDef (``replace``): a node
becomes one node of an internal op (domain dsl.internal) that a runtime runner executes. Today:
a MatMul of a dequantized weight becomes a DequantMatMul (dsl/ops/quant_matmul.py), so the JIT
reads the weight's codes (kernels/qmatmul.py) instead of writing the float32 weight out and
handing it to BLAS. The nodes that fed the replaced node only (the DequantizeLinear, its
Transpose) are dropped when nothing else reads them and the graph does not return them.

The result is a fresh graph (new Values and Nodes, so producer / user links stay exact) with a
planned Call per node."""
from __future__ import annotations

from ..ir import Graph, Node
from ..ops import registry
from .specialize import value_copier


def replace(graph: Graph, calls: dict, constants: dict) -> tuple[Graph, dict]:
    """(graph, calls) with every node its OpDef's ``replace`` rewrites replaced (unchanged when
    there is none)."""
    found = {}
    for node in graph.nodes:
        hook = registry.get(node.op_type, node.name, node.domain).replace
        if hook is not None:
            replacement = hook(node, calls, constants, graph.opset)
            if replacement is not None:
                found[id(node)] = replacement
    if not found:
        return graph, calls
    dropped = _unread(graph, found)
    copy = value_copier(keep_types=True)
    nodes, new_calls = [], {}
    for node in graph.nodes:
        if id(node) in dropped:
            continue
        if id(node) in found:
            new = found[id(node)]
            clone = Node(new.op, [copy(v) for v in new.inputs], [copy(v) for v in node.outputs], new.attrs,
                         node.name, registry.INTERNAL)
            _, call, _ = registry.bind(clone, graph.opset, [None if v is None else v.type for v in new.inputs],
                                       [None if v is None else constants.get(v.name) for v in new.inputs])
        else:
            clone = Node(node.op_type, [copy(v) for v in node.inputs], [copy(v) for v in node.outputs],
                         dict(node.attrs), node.name, node.domain)
            call = calls[id(node)]
        nodes.append(clone)
        new_calls[id(clone)] = call
    clone = Graph(graph.name, [copy(v) for v in graph.inputs], [copy(v) for v in graph.outputs], nodes,
                  dict(graph.initializers), graph.opset)
    return clone, new_calls


def _unread(graph: Graph, found: dict) -> set:
    """ids of the replaced nodes' sources that nothing but the replaced nodes (and each other)
    reads, neither a replacement (a MatMul of W by W^T keeps W's DequantizeLinear) nor the graph
    returns (sources listed consumer first)."""
    kept = {v.name for v in graph.outputs} | {v.name for r in found.values() for v in r.inputs if v is not None}
    gone = set(found)
    for replacement in found.values():
        for node in replacement.sources:
            if id(node) not in gone and all(v.name not in kept and all(id(u) in gone for u in v.users)
                                            for v in node.outputs):
                gone.add(id(node))
    return gone - set(found)


__all__ = ["replace"]
