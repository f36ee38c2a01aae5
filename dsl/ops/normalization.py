"""The normalization family as composites (dsl/ops/expansion.py): LayerNormalization,
RMSNormalization, LpNormalization, GroupNormalization, InstanceNormalization, BatchNormalization
and MeanVarianceNormalization, each an ONNX-style body of ReduceMean / ReduceSum, Sub, Mul, Div,
Sqrt, Reciprocal, Cast and Reshape, so the JIT fuses a normalization over the last axis into row
kernels. Normalized dims that are not one last axis are first reshaped (a view) into one.

Spec choices (the spec text wins over onnx's reference and function bodies):
- Variance is the mean of squared deviations, as the LayerNormalization text and the GroupNorm /
  InstanceNorm / BatchNorm formulas write it (the function bodies' E[x^2] - E[x]^2 can go
  negative). LayerNormalization: Normalized = D * Reciprocal(Sqrt(Var + eps)); RMSNormalization:
  X / Sqrt(mean(X^2) + eps); the others divide by Sqrt(Var + eps).
- stash_type fixes stage one's type (Cast in the body, as the function bodies do), for double X
  too (onnx's reference ignores it). LayerNormalization's Mean / InvStdDev are of the stash type
  (1 float or 16 bfloat16, its U); RMSNormalization / GroupNormalization 21 take any float type.
  Without a stash type (LpNormalization, InstanceNormalization, GroupNormalization 18,
  BatchNormalization, MVN) float16 / bfloat16 compute in float32 (BatchNormalization's text asks
  it for its statistics), the others in themselves; the result is cast back to T.
- Scale / B broadcast unidirectionally to X (LayerNormalization, RMSNormalization: the text's
  "unidirectional broadcastable to tensor X"). RMSNormalization's Y is of scale's type V: the
  normalized value is cast to T (the text), then to V when they differ.
- LpNormalization: p=1 is the sum of |x| (onnx's reference sums x itself); a zero norm gives 0.
- GroupNormalization: version 18's scale / bias are per group (num_groups), 21's per channel (C).
- InstanceNormalization needs rank >= 3 (N x C x D1 ...), as onnxruntime.
- BatchNormalization: versions 1-9 compute the inference formula (is_test is not consulted, as
  onnxruntime, which has no training kernel for them) and reject the training-only outputs;
  spatial=0 takes parameters of shape X.shape[1:]. Versions 14 / 15 with training_mode=1 use the
  batch's mean and population variance over all axes but 1 and return running_mean / running_var
  = input * momentum + current * (1 - momentum).
- MeanVarianceNormalization: (X - E[X]) / (Sqrt(E[(X - E[X])^2]) + 1e-9), the function body's
  epsilon (the text's formula has none; a constant input gives 0, not NaN).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .. import dtypes
from ..errors import DTypeError, UnsupportedError
from ..ir import TensorType
from . import chunks
from .expansion import expanded_reference
from .math import BF16, F
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes

_FLOATS = dtypes.types(*F, *BF16)
_OLD_FLOATS = dtypes.types(*F)
_FLOAT, _DOUBLE = dtypes.dtype("float"), dtypes.dtype("double")
_LAYER_STASH = (1, 16)      # LayerNormalization's U: float, bfloat16
_ANY_STASH = (1, 10, 11, 16)  # float, float16, double, bfloat16
_EPS = Attr("epsilon", "float", 1e-5)


@dataclass(frozen=True)
class NormPlan:
    """What a normalization rule decided, for its body.

    Attributes:
        shape: X's shape.
        rows: the shape X is reshaped to so that the normalized elements lie along the reduced
            axes (None: X as it is).
        axes: the axes of ``rows`` (or X) reduced over.
        stats: the shape of the statistics returned as outputs (LayerNormalization), or of the
            parameters (InstanceNorm / GroupNorm / BatchNorm: the shape they reshape to).
        compute: the element type stage one computes in.
        outputs: how many outputs the body returns.
    """

    shape: tuple
    rows: tuple | None
    axes: tuple
    stats: tuple
    compute: object
    outputs: int = 1


# ---- body helpers -------------------------------------------------------------------------------
def _cast(b, x, src, dst):
    return x if src == dst else b.op("Cast", x, to=dst.onnx_code)


def _reshape(b, x, shape):
    return b.op("Reshape", x, b.const(np.array(shape, np.int64)), allowzero=1)


def _mean(b, x, axes):
    return b.op("ReduceMean", x, b.const(np.array(axes, np.int64)), keepdims=1)


def _scalar(b, value: float, dt):
    return b.const(np.array(value, np.float64).astype(dt.np_dtype))


def _moments(b, x, axes, eps: float, dt):
    """(mean, deviation, sqrt(variance + eps)) of ``x`` over ``axes``, two-pass."""
    mean = _mean(b, x, axes)
    dev = b.op("Sub", x, mean)
    var = _mean(b, b.op("Mul", dev, dev), axes)
    return mean, dev, b.op("Sqrt", b.op("Add", var, _scalar(b, eps, dt)))


def _rows(b, x, plan):
    return x if plan.rows is None else _reshape(b, x, plan.rows)


def _unrows(b, x, plan, shape=None):
    return x if plan.rows is None else _reshape(b, x, plan.shape if shape is None else shape)


def _domain(*types):
    """float32 for 16-bit floats, double if any input is double."""
    return _DOUBLE if any(t.dtype == _DOUBLE for t in types if t is not None) else _FLOAT


# ---- rule helpers --------------------------------------------------------------------------------
def _stash(call: Call, allowed: tuple):
    code = call.attrs["stash_type"]
    if code not in allowed:
        names = [f"{c} ({dtypes.dtype(c).onnx_name})" for c in allowed]
        call.fail(f"stash_type {code}; expected one of {names}", DTypeError)
    return dtypes.dtype(code)


def _check_broadcast(call: Call, name: str, value_type, target: tuple, what: str = "X") -> None:
    """ShapeError unless ``value_type`` unidirectionally broadcasts to ``target``."""
    if value_type is None or value_type.shape is None:
        return
    shape = tuple(value_type.shape)
    bad = len(shape) > len(target) or any(
        isinstance(s, int) and isinstance(d, int) and s not in (1, d) for s, d in zip(shape[::-1], target[::-1]))
    if bad:
        call.fail(f"{name} shape {list(shape)} is not unidirectionally broadcastable to {what} shape {list(target)}")


def _check_exact(call: Call, name: str, value_type, want: tuple, what: str) -> None:
    if value_type is None or value_type.shape is None:
        return
    shape = tuple(value_type.shape)
    if len(shape) != len(want) or any(isinstance(s, int) and isinstance(w, int) and s != w
                                      for s, w in zip(shape, want)):
        call.fail(f"{name} shape {list(shape)}; expected {list(want)} ({what})")


def _rank_at_least(call: Call, x, least: int, layout: str) -> tuple:
    shape = tuple(x.shape)
    if len(shape) < least:
        call.fail(f"X has shape {list(shape)} (rank {len(shape)}); expected rank >= {least} ({layout})")
    return shape


def _trailing_plan(shape: tuple, axis: int, compute, outputs: int) -> NormPlan:
    """Normalize over dims [axis, rank): one last axis of ``rows`` = shape[:axis] + (their product,)."""
    rank = len(shape)
    stats = shape[:axis] + (1,) * (rank - axis)
    if axis == rank - 1:
        return NormPlan(shape, None, (axis,), stats, compute, outputs)
    return NormPlan(shape, shape[:axis] + (prod(shape[axis:]),), (axis,), stats, compute, outputs)


def _count(call: Call, most: int) -> int:
    return most if call.outputs is None else max(1, min(call.outputs, most))


# ---- LayerNormalization / RMSNormalization ---------------------------------------------------------
def _layer_rule(call: Call) -> list:
    x, scale = call.types[0], call.types[1]
    bias = call.input_type(2)
    stash = _stash(call, _LAYER_STASH)
    if x.shape is None:
        return [TensorType(x.dtype, None), TensorType(stash, None), TensorType(stash, None)]
    shape = _rank_at_least(call, x, 1, "an axis to normalize")
    axis = normalize_axes(call, [call.attrs["axis"]], len(shape), negative=True, rank_name="X rank")[0]
    _check_broadcast(call, "Scale", scale, shape)
    _check_broadcast(call, "B", bias, shape)
    stats = shape[:axis] + (1,) * (len(shape) - axis)
    if x.is_static:
        call.plan = _trailing_plan(shape, axis, stash, _count(call, 3))
    return [TensorType(x.dtype, shape), TensorType(stash, stats), TensorType(stash, stats)]


def _layer_body(call: Call, b, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x = _cast(b, _rows(b, xs[0], plan), dt, plan.compute)
    mean, dev, std = _moments(b, x, plan.axes, call.attrs["epsilon"], plan.compute)
    inv = b.op("Reciprocal", std)
    normalized = _cast(b, _unrows(b, b.op("Mul", dev, inv), plan), plan.compute, dt)
    y = b.op("Mul", normalized, xs[1])
    if len(xs) > 2 and xs[2] is not None:
        y = b.op("Add", y, xs[2])
    return [y, *(_unrows(b, s, plan, plan.stats) for s in (mean, inv))][:plan.outputs]


def _rms_rule(call: Call) -> list:
    x, scale = call.types[0], call.types[1]
    stash = _stash(call, _ANY_STASH)
    if x.shape is None:
        return [TensorType(scale.dtype, None)]
    shape = _rank_at_least(call, x, 1, "an axis to normalize")
    axis = normalize_axes(call, [call.attrs["axis"]], len(shape), negative=True, rank_name="X rank")[0]
    _check_broadcast(call, "scale", scale, shape)
    if x.is_static:
        call.plan = _trailing_plan(shape, axis, stash, 1)
    return [TensorType(scale.dtype, shape)]


def _rms_body(call: Call, b, xs: list) -> list:
    plan, dt, out = call.plan, call.types[0].dtype, call.types[1].dtype
    x = _cast(b, _rows(b, xs[0], plan), dt, plan.compute)
    square_mean = _mean(b, b.op("Mul", x, x), plan.axes)
    rms = b.op("Sqrt", b.op("Add", square_mean, _scalar(b, call.attrs["epsilon"], plan.compute)))
    normalized = _cast(b, _unrows(b, b.op("Div", x, rms), plan), plan.compute, dt)
    return [b.op("Mul", _cast(b, normalized, dt, out), xs[1])]


register(OpDef(
    "LayerNormalization",
    (Schema(17, (Input("X"), Input("Scale"), Input("B", optional=True)),
            (Attr("axis", "int", -1), _EPS, Attr("stash_type", "int", 1)), _FLOATS),),
    _layer_rule, reference=expanded_reference(_layer_body), expand=_layer_body, chunk=chunks.WHOLE,
    doc="(X - mean) / sqrt(var + epsilon) * Scale + B over dims [axis, rank), in stash_type; "
        "also Mean and InvStdDev (reduced dims kept as 1)."))

register(OpDef(
    "RMSNormalization",
    (Schema(23, (Input("X"), Input("scale", _FLOATS)),
            (Attr("axis", "int", -1), _EPS, Attr("stash_type", "int", 1)), _FLOATS),),
    _rms_rule, reference=expanded_reference(_rms_body), expand=_rms_body, chunk=chunks.WHOLE,
    doc="X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon) * scale, in stash_type."))


# ---- LpNormalization -------------------------------------------------------------------------------
def _lp_rule(call: Call) -> list:
    x = call.types[0]
    if call.attrs["p"] not in (1, 2):
        call.fail(f"p {call.attrs['p']}; expected 1 or 2", UnsupportedError)
    if x.shape is None:
        return [x]
    shape = _rank_at_least(call, x, 1, "an axis to normalize")
    axis = normalize_axes(call, [call.attrs["axis"]], len(shape), negative=True, rank_name="input rank")[0]
    if x.is_static:
        stats = tuple(1 if k == axis else d for k, d in enumerate(shape))
        call.plan = NormPlan(shape, None, (axis,), stats, _domain(x))
    return [TensorType(x.dtype, shape)]


def _lp_body(call: Call, b, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x = _cast(b, xs[0], dt, plan.compute)
    magnitude = b.op("Abs", x) if call.attrs["p"] == 1 else b.op("Mul", x, x)
    norm = b.op("ReduceSum", magnitude, b.const(np.array(plan.axes, np.int64)), keepdims=1)
    if call.attrs["p"] == 2:
        norm = b.op("Sqrt", norm)
    zero = _scalar(b, 0.0, plan.compute)
    return [_cast(b, b.op("Where", b.op("Equal", norm, zero), zero, b.op("Div", x, norm)), plan.compute, dt)]


register(OpDef(
    "LpNormalization",
    tuple(Schema(v, (Input("input"),), (Attr("axis", "int", -1), Attr("p", "int", 2)), types)
          for v, types in ((1, _OLD_FLOATS), (22, _FLOATS))),
    _lp_rule, reference=expanded_reference(_lp_body), expand=_lp_body, chunk=chunks.WHOLE,
    doc="input / its L1 (p=1) or L2 (p=2) norm along axis; 0 where the norm is 0."))


# ---- GroupNormalization / InstanceNormalization --------------------------------------------------------
def _group_rule(call: Call) -> list:
    x, scale, bias = call.types
    groups = call.attrs["num_groups"]
    compute = _stash(call, _ANY_STASH) if call.version >= 21 else _domain(x)
    if x.shape is None:
        return [x]
    shape = _rank_at_least(call, x, 2, "N x C x D1 ...")
    channels = shape[1]
    if groups < 1:
        call.fail(f"num_groups {groups}; expected a positive divisor of the channel count")
    if isinstance(channels, int) and channels % groups:
        call.fail(f"num_groups {groups} does not divide the channel count C = {channels} (X shape {list(shape)})")
    want, what = ((groups,), "num_groups, at version 18") if call.version < 21 else ((channels,), "C, per channel")
    _check_exact(call, "scale", scale, want, what)
    _check_exact(call, "bias", bias, want, what)
    if x.is_static:
        grouped = (shape[0], groups, prod(shape[1:]) // groups if groups else 0)
        params = (1, groups, 1) if call.version < 21 else (channels,) + (1,) * (len(shape) - 2)
        call.plan = NormPlan(shape, grouped, (2,), params, compute)
    return [TensorType(x.dtype, shape)]


def _group_body(call: Call, b, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x = _cast(b, _rows(b, xs[0], plan), dt, plan.compute)
    _, dev, std = _moments(b, x, plan.axes, call.attrs["epsilon"], plan.compute)
    normalized = b.op("Div", dev, std)
    if call.version < 21:  # per-group parameters apply in the grouped shape
        normalized = _cast(b, normalized, plan.compute, dt)
        y = _affine(b, normalized, xs[1], xs[2], plan.stats)
        return [_unrows(b, y, plan)]
    normalized = _cast(b, _unrows(b, normalized, plan), plan.compute, dt)
    return [_affine(b, normalized, xs[1], xs[2], plan.stats)]


def _affine(b, normalized, scale, bias, shape):
    return b.op("Add", b.op("Mul", normalized, _reshape(b, scale, shape)), _reshape(b, bias, shape))


def _instance_rule(call: Call) -> list:
    x, scale, bias = call.types
    if x.shape is None:
        return [x]
    shape = _rank_at_least(call, x, 3, "N x C x D1 ...")
    _check_exact(call, "scale", scale, (shape[1],), "C")
    _check_exact(call, "B", bias, (shape[1],), "C")
    if x.is_static:
        rows = None if len(shape) == 3 else shape[:2] + (prod(shape[2:]),)
        call.plan = NormPlan(shape, rows, (2,), (shape[1],) + (1,) * (len(shape) - 2), _domain(x))
    return [TensorType(x.dtype, shape)]


def _instance_body(call: Call, b, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x = _cast(b, _rows(b, xs[0], plan), dt, plan.compute)
    _, dev, std = _moments(b, x, plan.axes, call.attrs["epsilon"], plan.compute)
    normalized = _cast(b, _unrows(b, b.op("Div", dev, std), plan), plan.compute, dt)
    return [_affine(b, normalized, xs[1], xs[2], plan.stats)]


register(OpDef(
    "GroupNormalization",
    (Schema(18, (Input("X"), Input("scale"), Input("bias")), (_EPS, Attr("num_groups", "int")), _FLOATS),
     Schema(21, (Input("X"), Input("scale"), Input("bias")),
            (_EPS, Attr("num_groups", "int"), Attr("stash_type", "int", 1)), _FLOATS)),
    _group_rule, reference=expanded_reference(_group_body), expand=_group_body, chunk=chunks.WHOLE,
    doc="(X - mean) / sqrt(var + epsilon) per instance and group of C / num_groups channels, "
        "* scale + bias (per group at version 18, per channel from 21)."))

register(OpDef(
    "InstanceNormalization",
    tuple(Schema(v, (Input("input"), Input("scale"), Input("B")),
                 (_EPS,) + ((Attr("consumed_inputs", "ints", None),) if v == 1 else ()), types)
          for v, types in ((1, _OLD_FLOATS), (6, _OLD_FLOATS), (22, _FLOATS))),
    _instance_rule, reference=expanded_reference(_instance_body), expand=_instance_body, chunk=chunks.WHOLE,
    doc="scale * (x - mean) / sqrt(var + epsilon) + B, statistics per instance and channel."))


# ---- BatchNormalization -----------------------------------------------------------------------------
def _batch_rule(call: Call) -> list:
    x, scale, bias, mean, var = call.types
    training = call.version >= 14 and bool(call.attrs["training_mode"])
    outputs = 1 if call.outputs is None and not training else _count(call, 3 if call.version >= 14 else 5)
    if outputs > 1 and call.version < 14:
        call.fail(f"{outputs} outputs at version {call.version}: the training-mode outputs (mean, var, "
                  "saved_mean, saved_var) are not supported; expected Y only", UnsupportedError)
    if outputs > 1 and not training:
        call.fail(f"{outputs} outputs with training_mode=0; expected Y only (running_mean and running_var "
                  "exist only with training_mode=1)")
    for (a, b), names in (((scale, bias), "scale and B"), ((mean, var), "mean and var")):
        if a.dtype != b.dtype:
            call.fail(f"{names} have element types {a.dtype} and {b.dtype}; expected one type", DTypeError)
    stat_type = mean.dtype
    if x.shape is None:
        return [x, TensorType(stat_type, None), TensorType(stat_type, None)][:outputs]
    shape = _rank_at_least(call, x, 1, "N x C x D1 ...")
    channels = shape[1] if len(shape) > 1 else 1
    spatial = call.version >= 9 or bool(call.attrs["spatial"])
    want = (channels,) if spatial else shape[1:]
    names = ("scale", "B") + (("mean", "var") if call.version < 14 else ("input_mean", "input_var"))
    for name, value_type in zip(names, (scale, bias, mean, var)):
        _check_exact(call, name, value_type, want, "C" if spatial else "X's dims after N, with spatial=0")
    if x.is_static:
        params = (channels,) + (1,) * (len(shape) - 2) if spatial and len(shape) > 2 else want
        axes = tuple(k for k in range(len(shape)) if k != 1)
        call.plan = NormPlan(shape, None, axes, params, _domain(*call.types), outputs if training else 0)
    return [TensorType(x.dtype, shape), TensorType(stat_type, want), TensorType(stat_type, want)][:outputs]


def _batch_body(call: Call, b, xs: list) -> list:
    plan, types = call.plan, call.types
    x, scale, bias, mean, var = (_cast(b, v, t.dtype, plan.compute) for v, t in zip(xs, types))
    scale, bias, mean, var = (v if plan.stats == plan.shape[1:] else _reshape(b, v, plan.stats)
                              for v in (scale, bias, mean, var))
    eps = _scalar(b, call.attrs["epsilon"], plan.compute)
    if not plan.outputs:  # inference: the given statistics
        normalized = b.op("Div", b.op("Sub", x, mean), b.op("Sqrt", b.op("Add", var, eps)))
        return [_cast(b, b.op("Add", b.op("Mul", normalized, scale), bias), plan.compute, types[0].dtype)]
    current_mean = _mean(b, x, plan.axes)
    dev = b.op("Sub", x, current_mean)
    current_var = _mean(b, b.op("Mul", dev, dev), plan.axes)
    std = b.op("Sqrt", b.op("Add", current_var, eps))
    y = _cast(b, b.op("Add", b.op("Mul", b.op("Div", dev, std), scale), bias), plan.compute, types[0].dtype)
    momentum = call.attrs["momentum"]
    running = []
    for given, current in ((mean, current_mean), (var, current_var)):
        kept = b.op("Mul", given, _scalar(b, momentum, plan.compute))
        new = b.op("Mul", current, _scalar(b, 1.0 - momentum, plan.compute))
        running.append(_cast(b, _reshape(b, b.op("Add", kept, new), types[3].shape), plan.compute, types[3].dtype))
    return [y, *running][:plan.outputs]


def _batch_schema(version: int) -> Schema:
    if version < 14:
        inputs = tuple(Input(n) for n in ("X", "scale", "B", "mean", "var"))
    else:
        stats = _FLOATS
        params = _FLOATS if version >= 15 else None
        inputs = (Input("X"), Input("scale", params), Input("B", params), Input("input_mean", stats),
                  Input("input_var", stats))
    attrs = (_EPS, Attr("momentum", "float", 0.9))
    if version == 1:
        attrs += (Attr("consumed_inputs", "ints"),)
    if version < 7:
        attrs += (Attr("is_test", "int", 0),)
    if version < 9:
        attrs += (Attr("spatial", "int", 1),)
    if version >= 14:
        attrs += (Attr("training_mode", "int", 0),)
    return Schema(version, inputs, attrs, _FLOATS if version >= 14 else _OLD_FLOATS)


register(OpDef(
    "BatchNormalization", tuple(_batch_schema(v) for v in (1, 6, 7, 9, 14, 15)),
    _batch_rule, reference=expanded_reference(_batch_body), expand=_batch_body, chunk=chunks.WHOLE,
    doc="(X - mean) / sqrt(var + epsilon) * scale + B per channel (dim 1); training_mode=1 (14+) "
        "uses the batch statistics and also returns the running mean and variance."))


# ---- MeanVarianceNormalization --------------------------------------------------------------------------
_MVN_EPS = 1e-9


def _mvn_rule(call: Call) -> list:
    x = call.types[0]
    if x.shape is None:
        return [x]
    shape = tuple(x.shape)
    axes = normalize_axes(call, call.attrs["axes"], len(shape), negative=True, rank_name="X rank")
    if x.is_static:
        axes = tuple(sorted(axes)) if axes else tuple(range(len(shape)))
        call.plan = NormPlan(shape, None, axes, (), _domain(x))
    return [TensorType(x.dtype, shape)]


def _mvn_body(call: Call, b, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x = _cast(b, xs[0], dt, plan.compute)
    dev = b.op("Sub", x, _mean(b, x, plan.axes))
    std = b.op("Sqrt", _mean(b, b.op("Mul", dev, dev), plan.axes))
    y = b.op("Div", dev, b.op("Add", std, _scalar(b, _MVN_EPS, plan.compute)))
    return [_cast(b, y, plan.compute, dt)]


register(OpDef(
    "MeanVarianceNormalization",
    tuple(Schema(v, (Input("X"),), (Attr("axes", "ints", [0, 2, 3]),), types)
          for v, types in ((9, _OLD_FLOATS), (13, _FLOATS))),
    _mvn_rule, reference=expanded_reference(_mvn_body), expand=_mvn_body, chunk=chunks.WHOLE,
    doc="(X - E[X]) / (sqrt(E[(X - E[X])^2]) + 1e-9) over axes."))
