"""Elementwise Max and Min over any number of inputs, and Clip; the variadic machinery Sum and Mean
(dsl/ops/variadic.py) share.

max(a, b) is numpy's np.maximum rule written out: ``a if a >= b or a is NaN else b``, so
NaN propagates from either side and ties (-0.0 vs 0.0) keep the left operand; numba's
scalar np.maximum / np.minimum follow the same rule, numpy's SIMD loops do not for zeros.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .. import dtypes, kir
from ..ir import TensorType
from .lowering import Elementwise
from .math import BF16, F, SIGNED, UNSIGNED, domain_array, finish
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import broadcast_dims

# ONNX declares one variadic input data_0 (1 to 2**31 - 1 tensors); the registry has no
# variadic inputs, so data_0 is required and data_1 .. are optional slots without gaps.
MAX_INPUTS = 64
_VERSIONS = {1: F, 6: F, 8: F, 12: F + SIGNED + UNSIGNED, 13: F + SIGNED + UNSIGNED + BF16}


def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where((a >= b) | (a != a), a, b)


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where((a <= b) | (a != a), a, b)


def variadic_rule(call: Call) -> list:
    """Equal shapes before version 8, numpy broadcasting from 8 (Max, Min, Sum, Mean)."""
    present = list(call.types)
    if any(t is None for t in present):
        gap = next(k for k, t in enumerate(present) if t is None)
        call.fail(f"input {gap} is missing; variadic inputs cannot be omitted")
    shapes = [t.shape for t in present]
    if any(shape is None for shape in shapes):
        return [TensorType(present[0].dtype, None)]
    out = tuple(shapes[0])
    for shape in shapes[1:]:
        if call.version < 8:  # "All inputs and outputs must have the same shape"
            if len(shape) != len(out) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                             for a, b in zip(out, shape)):
                call.fail(f"input shapes {[list(s) for s in shapes]} differ; version {call.version} needs "
                          f"equal shapes (broadcasting needs opset >= 8)")
        else:
            out = broadcast_dims(call, out, shape)
    return [TensorType(present[0].dtype, out)]


def variadic_reference(fold):
    """The reference folding the inputs' compute-domain values left to right with ``fold``."""
    def reference(call: Call, xs: list) -> list:
        result = domain_array(xs[0])
        with np.errstate(all="ignore"):  # (inf + -inf is NaN, as in the kernels)
            for x in xs[1:]:
                result = fold(result, domain_array(x))
        return [finish(result, call.types[0].dtype)]
    return reference


def variadic_expr(op: str):
    """The kernel expression folding the inputs left to right with binary kernel-IR ``op``."""
    def expr(call, args) -> kir.Expr:
        present = [a for a in args if a is not None]
        result = present[0]
        for arg in present[1:]:
            result = kir.binary(op, result, arg)
        return result
    return expr


def variadic_schema(version: int, versions: dict = _VERSIONS) -> Schema:
    """Schema ``version`` of a variadic elementwise op typed by ``versions`` ({version: type names})."""
    inputs = (Input("data_0"),) + tuple(Input(f"data_{k}", optional=True) for k in range(1, MAX_INPUTS))
    attrs = (Attr("consumed_inputs", "ints", None),) if version == 1 else ()
    return Schema(version, inputs, attrs, dtypes.types(*versions[version]))


for _name, _fold, _function in (("Max", maximum, "max"), ("Min", minimum, "min")):
    register(OpDef(_name, tuple(variadic_schema(v) for v in _VERSIONS), variadic_rule,
                   reference=variadic_reference(_fold), kernel=Elementwise(variadic_expr(_function)),
                   doc=f"Elementwise {_name.lower()} of 1 to {MAX_INPUTS} inputs (NaN propagates)."))


# ---- Clip -----------------------------------------------------------------------------------------
# Spec: min and max "default to numeric_limits::lowest() and numeric_limits::max()": for a float
# type its largest finite value, so +-Inf inputs clamp to it even without bounds (an integer's
# limits change nothing). Versions 1 and 6 take float attributes: an ONNX float is a float32,
# rounded to T (version 6's default +-3.4028234663852886e38 is Inf in float16). From 11 the
# bounds are inputs that "must be a scalar (tensor of empty shape)". Version 13: "When 'min'
# is greater than 'max', the clip operator sets all the 'input' values to the value of 'max'.
# Thus, this is equivalent to 'Min(max, Max(input, min))'", which we apply at every version.
_CLIP_VERSIONS = {1: F, 6: F, 11: F, 12: F + SIGNED + UNSIGNED, 13: F + SIGNED + UNSIGNED + BF16}
_FLT_MAX = float(np.finfo(np.float32).max)
INPUT = "input"  # plan marker: the bound comes from the min / max input


@dataclass(frozen=True)
class ClipPlan:
    """Clip's bounds (``call.plan``): each INPUT (the min / max input), a float already rounded
    to T, or None (no bound)."""

    low: object
    high: object

    def __iter__(self):
        return iter((self.low, self.high))


def _type_limit(dt, upper: bool):
    """numeric_limits lowest / max of a float type (None for integers: no clamping)."""
    if dt.kind != "float":
        return None
    info = ml_dtypes.finfo(dt.np_dtype) if dt.np_dtype.kind == "V" else np.finfo(dt.np_dtype)
    return float(info.max) if upper else -float(info.max)


def _attr_bound(value: float, dt) -> float:
    return float(finish(np.array(np.float32(value)), dt).astype(np.float64))


def _clip_rule(call: Call) -> list:
    data = call.types[0]
    bounds = []
    for index, name in ((1, "min"), (2, "max")):
        if call.version < 11:
            value = call.attrs[name]
            bounds.append(_type_limit(data.dtype, index == 2) if value is None else _attr_bound(value, data.dtype))
        elif index < len(call.types) and call.types[index] is not None:
            shape = call.types[index].shape
            if shape is not None and len(shape) != 0:
                call.fail(f"{name} must be a scalar (tensor of empty shape), got shape {list(shape)}")
            bounds.append(INPUT)
        else:
            bounds.append(_type_limit(data.dtype, index == 2))
    call.plan = ClipPlan(*bounds)
    return [TensorType(data.dtype, data.shape)]


def _clip_reference(call: Call, xs: list) -> list:
    result = domain_array(xs[0])
    for index, (bound, fold) in enumerate(zip(call.plan, (maximum, minimum)), start=1):
        if bound is INPUT:
            result = fold(result, domain_array(xs[index]))
        elif bound is not None:
            result = fold(result, np.asarray(bound, result.dtype))
    return [finish(result, call.types[0].dtype)]


def _clip_expr(call, args) -> kir.Expr:
    result = args[0]
    for index, (bound, op) in enumerate(zip(call.plan, ("max", "min")), start=1):
        if bound is INPUT:
            result = kir.binary(op, result, args[index])
        elif bound is not None:
            result = kir.binary(op, result, kir.const(bound, result.dtype))
    return result


def _clip_schema(version: int) -> Schema:
    types = dtypes.types(*_CLIP_VERSIONS[version])
    if version >= 11:
        return Schema(version, (Input("input"), Input("min", optional=True), Input("max", optional=True)), (),
                      types)
    default = None if version == 1 else _FLT_MAX
    attrs = (Attr("min", "float", None if default is None else -default), Attr("max", "float", default))
    return Schema(version, (Input("input"),), attrs + ((Attr("consumed_inputs", "ints", None),)
                                                        if version == 1 else ()), types)


register(OpDef("Clip", tuple(_clip_schema(v) for v in _CLIP_VERSIONS), _clip_rule, reference=_clip_reference,
               kernel=Elementwise(_clip_expr),
               doc="Elementwise Min(max, Max(input, min)); absent bounds are the type's finite limits."))
