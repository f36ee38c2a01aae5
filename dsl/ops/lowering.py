"""Kernel lowerings an OpDef can carry: how the code generator computes the op per element.

Expressions are numba source over input scalars already loaded in their compute domain
(dsl/codegen/scalar.py); the generator rounds the result to the output type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Elementwise:
    """An op computed independently per output element (inputs broadcast numpy-style).

    Attributes:
        expr: (call, args, domains) -> expression; args[i] is input i's scalar (None if omitted),
            domains[i] its compute-domain numpy type name.
        result_domain: (call, domains) -> compute domain of ``expr``'s value (default: input 0's).
        input_path: (call, index) -> extra (key, View transform) steps applied to input ``index``
            before broadcasting (e.g. a per-axis scale reshaped to broadcast along its axis).
        fusable: call -> whether this application can be fused (e.g. not blocked quantization).
        used_inputs: indices of the inputs ``expr`` reads (None: all); others are not loaded.
    """

    expr: Callable
    result_domain: Callable | None = None
    input_path: Callable | None = None
    fusable: Callable = lambda call: True
    used_inputs: tuple | None = None


@dataclass(frozen=True)
class Row:
    """An op that reduces (or normalizes) along the LAST axis of its single data input, fused
    with the elementwise cone that produces that input.

    Attributes:
        kind: 'sum', 'mean', 'max', 'min' (one value per row) or 'softmax', 'logsoftmax'
            (a full row out).
        fusable: call -> True when this application reduces exactly the last axis of input 0
            (other axes, empty rows or extra inputs run the numpy reference instead).
    """

    kind: str
    fusable: Callable = lambda call: True
