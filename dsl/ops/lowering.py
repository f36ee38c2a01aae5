"""Kernel lowerings an OpDef can carry: how a kernel computes the op per element, in the kernel IR.

An elementwise op's ``expr`` builds kernel-IR nodes (dsl/kir/expr.py) from its inputs' nodes,
each a value of its compute domain (dsl/kir/types.py); the group builder then casts the result
to the output type. Nothing here is backend code: renderers turn the IR into kernels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Elementwise:
    """An op computed independently per output element (inputs broadcast numpy-style).

    Attributes:
        expr: (call, args) -> kir.Expr; args[i] is input i's value as a kir.Expr of its compute
            domain (None if omitted or unused).
        input_path: (call, index) -> extra (key, View transform) steps applied to input ``index``
            before broadcasting (e.g. a per-axis scale reshaped to broadcast along its axis).
        fusable: call -> whether this application can be fused (e.g. not blocked quantization).
        used_inputs: indices of the inputs ``expr`` reads (None: all); others are not loaded.
    """

    expr: Callable
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
            (the row kernel).
        axes: call -> the reduced axes when the any-axis schedule can run this application
            (dsl/kir/reduce_schedule.py), else None (the numpy reference runs).
    """

    kind: str
    fusable: Callable = lambda call: True
    axes: Callable | None = None  # call -> the axes of input 0 reduced (any-axis schedule), or None


@dataclass(frozen=True)
class Concatenation:
    """An op whose output element is one input's element at a shifted index along one axis
    (Concat): fused, each input is a group input read through a guarded load (dsl/kir/expr.py
    Pick), never outside its own range.

    Attributes:
        axis: call -> the concatenated axis (normalized).
        fusable: call -> whether this application can be fused (static shapes, few inputs).
    """

    axis: Callable
    fusable: Callable = lambda call: True


@dataclass(frozen=True)
class Gathering:
    """An op whose output element is one element of its data at an index some coordinates of
    which are loaded from an index tensor (Gather, GatherElements, GatherND): fused, data and
    indices are group inputs read from memory, the index values are checked before the kernel
    runs (out of range: a DslError, never a wild read) and the data element is read at its
    View's offset plus, per loaded coordinate, that coordinate (negatives counted from the end)
    times the data's stride along its axis.

    Attributes:
        data: (call, View of data) -> the View read at the output's index, each gathered axis
            replaced by what indexes it (stride 0 there: the loaded coordinates add the rest).
        terms: call -> ((data axis, (View of indices) -> View at the output's shape), ...): per
            loaded coordinate, the data axis it indexes and where the indices hold it.
        check: (call, indices ndarray) -> None; raises InputError for an index out of range
            (with the details: the runtime calls it when ``bounds`` fails).
        fusable: call -> whether this application can be fused.
        bounds: call -> (lows, highs), int64 arrays: the valid range of each index column (the
            last dim of the indices when there are several, GatherND's tuples), checked in one
            pass before every run.
    """

    data: Callable
    terms: Callable
    check: Callable
    fusable: Callable = lambda call: True
    bounds: Callable | None = None


@dataclass(frozen=True)
class QuantizedMatMul:
    """An op computing ``A @ dequantize(W)^T (+ bias)`` from W's codes, never writing the
    dequantized W out in full (dsl/runtime_qmatmul.py runs it with kernels/qmatmul.py).

    Attributes:
        weight: (call, args, constant) -> the kernels' view of W (kernels.qmatmul.Weight), or
            None: run the reference. ``args`` are the node's run-time inputs (packed ones as
            dsl.Tensors); ``constant`` says W is the same every run (it may then be repacked
            once into the kernels' lanes layout).
        activation: (call, args) -> A as a float32 array [..., K].
        bias: (call, args) -> a float32 [N] added to every row, or None.
    """

    weight: Callable
    activation: Callable
    bias: Callable = lambda call, args: None
