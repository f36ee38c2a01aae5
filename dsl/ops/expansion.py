"""Composite ops: an op whose meaning is an ONNX function body (ReduceL2 is Sqrt of ReduceSum of
Mul ...) declares ``OpDef.expand(call, builder, inputs) -> outputs``, written once against a
builder. Two builders run it:

- ``EagerBuilder`` (here) applies each primitive op's numpy reference at once: it is the
  composite's reference (``expanded_reference``), so the eager engine computes exactly the body;
- the JIT's expansion pass (dsl/passes/expand.py) builds the primitive nodes into the graph,
  where they fuse like any others (ReduceL2 over the last axis: one row kernel, Mul before the
  sum and Sqrt after it).

Bodies are written at ``OPSET``: each primitive application is bound (checked and planned) at
that opset whatever the model's, so a body has one spelling.
"""
from __future__ import annotations

import numpy as np

from ..ir import type_of_array

OPSET = 18  # the opset function bodies are spelled at (ReduceSum / ReduceMax take axes as an input)


class EagerBuilder:
    """Runs a body on arrays: ``op`` binds the primitive at OPSET and returns its reference's
    outputs (one array, or a list when ``outputs`` > 1)."""

    def op(self, op_type: str, *inputs, outputs: int = 1, **attrs):
        from . import registry
        arrays = [None if x is None else x for x in inputs]
        types = [None if x is None else type_of_array(x) for x in arrays]
        opdef, call, _ = registry.bind(op_type, OPSET, types, arrays, attrs)
        results = opdef.reference(call, arrays)
        return results[0] if outputs == 1 else list(results)

    def const(self, array: np.ndarray):
        return np.asarray(array)


def expanded_reference(expand):
    """The reference of a composite op: its body run by an EagerBuilder."""
    def reference(call, xs: list) -> list:
        outputs = expand(call, EagerBuilder(), list(xs))
        return [np.asarray(out) for out in outputs]
    return reference


def reduce(b, op_type: str, x, plan, keepdims: bool | None = None):
    """``op_type`` (ReduceSum, ReduceMax ...) of ``x`` over ``plan.axes`` (a ReducePlan), as
    the composite's own plan decided (the identity plan: ``x`` itself)."""
    if plan.identity:
        return x
    keep = int(plan.keepdims if keepdims is None else keepdims)
    return b.op(op_type, x, b.const(np.array(plan.axes, np.int64)), keepdims=keep)


__all__ = ["EagerBuilder", "OPSET", "expanded_reference", "reduce"]
