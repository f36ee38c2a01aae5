"""The eager numpy engine: executes a Graph node by node with each op's numpy reference.

It is the project's oracle: every rule is re-checked on the concrete inputs, and
shape ops stay numpy views.
"""
from __future__ import annotations

import numpy as np

from .errors import out_of_memory, where
from .ir import Graph
from .ops import registry
from .values import runtime_type


def run_graph(graph: Graph, feeds: dict) -> list:
    """Run ``graph`` on checked feeds (name -> ndarray / list / None); returns output values."""
    env = {name: _read_only_view(array) for name, array in graph.initializers.items()}
    env.update(feeds)
    for node in graph.nodes:
        args = [None if v is None else env[v.name] for v in node.inputs]
        types = [None if v is None else runtime_type(a) for v, a in zip(node.inputs, args)]
        opdef, call, out_types = registry.bind(node, graph.opset, types, args)
        try:
            results = opdef.reference(call, args)
        except MemoryError:
            raise out_of_memory(where(node.op_type, node.name), out_types) from None
        if not node.inputs:  # a source node (Constant) hands out program-owned arrays
            results = [_read_only_view(r) if isinstance(r, np.ndarray) else r for r in results]
        for value, result in zip(node.outputs, results):
            env[value.name] = result
    return [env[v.name] for v in graph.outputs]


def _read_only_view(array: np.ndarray) -> np.ndarray:
    """The graph's constants must survive callers writing into outputs that are views of them."""
    view = array.view()
    view.flags.writeable = False
    return view
