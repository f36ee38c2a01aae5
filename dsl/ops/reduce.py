"""Reductions (ReduceSum, ReduceMax, ReduceMean), Softmax and LogSoftmax: Row kernels on the last axis, the
any-axis schedule (dsl/kir/reduce_schedule.py) on the others.

Accumulation (the Row kernels must do the same): float sums and means accumulate in float64,
the total (or mean) is rounded to the compute domain (float32 for float16/bfloat16/float,
float64 for double) and then to T; integer sums wrap in T; an integer mean is the exact mean
truncated toward zero (it always fits in T, so nothing wraps; an empty set gives 0). Max
propagates NaN. Over an empty set: Sum gives 0, Max -inf (the type's minimum for integers,
False for bool), Mean NaN for floats ("undefined" in the spec). Float max is IEEE 754-2019's
maximum: -0 < +0 (the spec does not say; numpy keeps the first of equal values).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .. import dtypes
from ..ir import TensorType
from .lowering import Row
from .math import BF16, F, domain_array, finish
from .registry import INT64, Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes


@dataclass(frozen=True)
class ReducePlan:
    """What a reduction or Softmax rule decided (``call.plan``), for the reference and Row lowering.

    Attributes:
        axes: sorted, normalized axes of input 0 reduced over (Softmax: normalized over);
            () only for the identity (noop_with_empty_axes with empty axes).
        keepdims: reduced axes stay as size-1 dims (always True for Softmax).
        in_shape: input 0's shape. The kernel reads input 0 only; an axes input was consumed
            by the rule.
        out_shape: the output shape.
        identity: the op returns its input unchanged.
    """

    axes: tuple
    keepdims: bool
    in_shape: tuple
    out_shape: tuple
    identity: bool = False


def reduced_axes(call: Call) -> tuple | None:
    """The axes a reduction or softmax reduces over, for the any-axis schedule (None for the
    identity and unknown plans)."""
    plan = call.plan
    if not isinstance(plan, ReducePlan) or plan.identity or not plan.axes:
        return None
    return plan.axes


def reduces_last_axis(call: Call) -> bool:
    """Row fusability: exactly the last axis, and it is non-empty (else the reference runs)."""
    plan = call.plan
    if not isinstance(plan, ReducePlan) or plan.identity or not plan.in_shape:
        return False
    last = plan.in_shape[-1]
    return plan.axes == (len(plan.in_shape) - 1,) and isinstance(last, int) and last > 0


# ---- axes ---------------------------------------------------------------------------------------
# Versions with an `axes` attribute: "The default is to reduce over all the dimensions of the
# input tensor"; an empty list is treated as absent, as the input versions spell out: "When axes
# is empty (either not provided or explicitly empty), behavior depends on 'noop_with_empty_axes':
# reduction over all axes if 'noop_with_empty_axes' is false, and reduction over the empty set of
# axes when 'noop_with_empty_axes' is true." Axes are in [-r, r-1] (version 1 states no range;
# numpy's, which the spec cites, is used) and may not repeat (numpy rejects duplicates).
def _requested_axes(call: Call) -> list | None:
    """The requested axes ([] when absent or empty), or None when not known yet."""
    if "axes" in call.attrs:
        return list(call.attrs["axes"] or [])
    if len(call.types) < 2 or call.types[1] is None:
        return []
    shape = call.types[1].shape
    if shape is not None and len(shape) != 1:
        call.fail(f"axes must be a 1-D int64 tensor, got shape {list(shape)}")
    return call.int_list(1, "axes")


def _reduce_rule(call: Call) -> list:
    data = call.types[0]
    axes = _requested_axes(call)
    if axes is None or data.shape is None:
        return [TensorType(data.dtype, None)]
    shape, keepdims = tuple(data.shape), bool(call.attrs["keepdims"])
    if not axes and call.attrs.get("noop_with_empty_axes", 0):
        call.plan = ReducePlan((), keepdims, shape, shape, identity=True)
        return [TensorType(data.dtype, shape)]
    axes = axes or list(range(len(shape)))
    reduced = tuple(sorted(normalize_axes(call, axes, len(shape), negative=True, rank_name="input rank")))
    out = tuple(1 if k in reduced else d for k, d in enumerate(shape) if keepdims or k not in reduced)
    call.plan = ReducePlan(reduced, keepdims, shape, out)
    return [TensorType(data.dtype, out)]


# ---- references -----------------------------------------------------------------------------------
def _float_total(x: np.ndarray, plan: ReducePlan) -> tuple[np.ndarray, np.dtype]:
    wide = domain_array(x)
    return np.sum(wide, axis=plan.axes, keepdims=plan.keepdims, dtype=np.float64), wide.dtype


def _sum(x: np.ndarray, plan: ReducePlan, dt) -> np.ndarray:
    if dt.kind == "float":
        total, domain = _float_total(x, plan)
        return finish(np.asarray(total).astype(domain), dt)
    return np.asarray(np.sum(x, axis=plan.axes, keepdims=plan.keepdims, dtype=x.dtype))


def _mean(x: np.ndarray, plan: ReducePlan, dt) -> np.ndarray:
    count = prod(plan.in_shape[k] for k in plan.axes)
    if dt.kind == "float":
        total, domain = _float_total(x, plan)
        with np.errstate(all="ignore"):
            return finish(np.asarray(total / count).astype(domain), dt)
    # exact sums: int64 / uint64 hold any 32-bit sum, Python ints any 64-bit one
    exact = np.dtype(object) if x.dtype.itemsize == 8 else np.int64 if x.dtype.kind == "i" else np.uint64
    total = np.asarray(np.sum(x.astype(exact), axis=plan.axes, keepdims=plan.keepdims), dtype=exact)
    if count == 0:
        return np.zeros(total.shape, x.dtype)
    # Python ints: numpy mixes 0-d object results with C longs, which cannot hold these sums
    means = [abs(v) // count * (1 if v >= 0 else -1) for v in total.reshape(-1).tolist()]
    return np.array(means, dtype=x.dtype).reshape(total.shape)


def _max(x: np.ndarray, plan: ReducePlan, dt) -> np.ndarray:
    if dt.kind == "bool":  # ReduceMax-20: "the comparison should consider False < True"
        return np.asarray(np.logical_or.reduce(x, axis=plan.axes, keepdims=plan.keepdims, initial=False))
    wide = domain_array(x)
    lowest = -np.inf if wide.dtype.kind == "f" else np.iinfo(wide.dtype).min
    result = np.maximum.reduce(wide, axis=plan.axes, keepdims=plan.keepdims, initial=lowest)
    if wide.dtype.kind == "f":  # IEEE 754-2019 maximum: -0 < +0 (numpy keeps the first of equals)
        positive_zero = np.any((wide == 0) & ~np.signbit(wide), axis=plan.axes, keepdims=plan.keepdims)
        result = np.where((result == 0) & positive_zero, wide.dtype.type(0), result)
    return finish(result, dt)


def _min(x: np.ndarray, plan: ReducePlan, dt) -> np.ndarray:
    """ReduceMax's mirror: False < True for bool (20+), IEEE 754-2019 minimum (-0 < +0, NaN
    propagates) for floats."""
    if dt.kind == "bool":
        return np.asarray(np.logical_and.reduce(x, axis=plan.axes, keepdims=plan.keepdims, initial=True))
    wide = domain_array(x)
    highest = np.inf if wide.dtype.kind == "f" else np.iinfo(wide.dtype).max
    result = np.minimum.reduce(wide, axis=plan.axes, keepdims=plan.keepdims, initial=highest)
    if wide.dtype.kind == "f":
        negative_zero = np.any((wide == 0) & np.signbit(wide), axis=plan.axes, keepdims=plan.keepdims)
        result = np.where((result == 0) & negative_zero, -wide.dtype.type(0), result)
    return finish(result, dt)


def _reduce_reference(reducer):
    def reference(call: Call, xs: list) -> list:
        if call.plan.identity:
            return [xs[0]]
        return [reducer(xs[0], call.plan, call.types[0].dtype)]
    return reference


# ---- registration ----------------------------------------------------------------------------------
_WIDE = F + ("int32", "int64", "uint32", "uint64")
_REDUCE_TYPES = {
    "ReduceSum": {1: _WIDE, 11: _WIDE, 13: _WIDE + BF16},
    "ReduceMax": {1: _WIDE, 11: _WIDE, 12: _WIDE + ("int8", "uint8"), 13: _WIDE + ("int8", "uint8") + BF16,
                  18: _WIDE + ("int8", "uint8") + BF16, 20: _WIDE + ("int8", "uint8", "bool") + BF16},
    "ReduceMean": {1: _WIDE, 11: _WIDE, 13: _WIDE + BF16, 18: _WIDE + BF16},
}
_REDUCE_TYPES["ReduceMin"] = dict(_REDUCE_TYPES["ReduceMax"])  # (the same versions and type sets)
_AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMax": 18, "ReduceMin": 18, "ReduceMean": 18}
_REDUCERS = {"ReduceSum": (_sum, "sum"), "ReduceMax": (_max, "max"), "ReduceMin": (_min, "min"),
             "ReduceMean": (_mean, "mean")}


def _reduce_schema(name: str, version: int, names: tuple, axes_input_since: int | None = None) -> Schema:
    """A reduction's schema at ``version``: axes as an attribute before ``axes_input_since``
    (default: the op's in _AXES_INPUT_SINCE), an optional input from then on."""
    keepdims = Attr("keepdims", "int", 1)
    if version < (axes_input_since or _AXES_INPUT_SINCE[name]):
        return Schema(version, (Input("data"),), (Attr("axes", "ints", None), keepdims), dtypes.types(*names))
    axes = Input("axes", INT64, optional=True, needs_value=True)
    return Schema(version, (Input("data"), axes), (keepdims, Attr("noop_with_empty_axes", "int", 0)),
                  dtypes.types(*names))


for _name, _versions in _REDUCE_TYPES.items():
    _reducer, _kind = _REDUCERS[_name]
    register(OpDef(_name, tuple(_reduce_schema(_name, v, names) for v, names in _versions.items()),
                   _reduce_rule, reference=_reduce_reference(_reducer),
                   kernel=Row(_kind, fusable=reduces_last_axis, axes=reduced_axes),
                   doc=f"{_kind.capitalize()} over `axes` (all when empty, unless noop_with_empty_axes)."))


# ---- Softmax ---------------------------------------------------------------------------------------
# Versions 1 and 11: "the input will be coerced into a 2-dimensional tensor with dimensions
# [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}]", so the normalized set is every axis from `axis` on.
# Version 13: along `axis` only, default -1; "Accepted range is [-r, r-1]" (also used for 1).
# y = exp(x - max) / sum(exp(x - max)) is computed in float64 (as the Row kernel does), rounded
# to the compute domain and then to T. A row holding NaN, or +-Inf as its max, gives NaN
# (x - max is NaN), as numpy does.
def _softmax_rule(call: Call) -> list:
    data = call.types[0]
    if data.shape is None:
        return [TensorType(data.dtype, None)]
    rank, shape = len(data.shape), tuple(data.shape)
    axis = normalize_axes(call, [call.attrs["axis"]], rank, negative=True, rank_name="input rank")[0]
    axes = (axis,) if call.version >= 13 else tuple(range(axis, rank))
    call.plan = ReducePlan(axes, True, shape, shape)
    return [TensorType(data.dtype, shape)]


def _softmax_reference(call: Call, xs: list, log: bool = False) -> list:
    x = domain_array(xs[0])
    if x.size == 0:
        return [finish(x, call.types[0].dtype)]
    axis = call.plan.axes[0]
    rows = (x.reshape(x.shape[:axis] + (-1,)) if len(call.plan.axes) > 1 else x).astype(np.float64)
    with np.errstate(all="ignore"):
        shifted = rows - np.max(rows, axis=axis, keepdims=True)
        if log:  # x - max - log(sum(exp(x - max))): finite where softmax underflows to 0
            out = (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).reshape(x.shape)
        else:
            exp = np.exp(shifted)
            out = (exp / np.sum(exp, axis=axis, keepdims=True)).reshape(x.shape)
    return [finish(out.astype(x.dtype), call.types[0].dtype)]


def _log_softmax_reference(call: Call, xs: list) -> list:
    return _softmax_reference(call, xs, log=True)


register(OpDef(
    "Softmax",
    tuple(Schema(v, (Input("input"),), (Attr("axis", "int", 1 if v < 13 else -1),), dtypes.types(*names))
          for v, names in ((1, F), (11, F), (13, F + BF16))),
    _softmax_rule, reference=_softmax_reference, kernel=Row("softmax", fusable=reduces_last_axis, axes=reduced_axes),
    doc="exp(x - max) / sum(exp(x - max)) along `axis` (versions 1, 11: all axes from `axis` on)."))

# LogSoftmax: the same axis rules and type sets as Softmax (1, 11: float16, float, double; 13 adds
# bfloat16). Over the last axis it is the Row kernel's "logsoftmax" pass (x - max - log(sum));
# over other axes (and 1, 11's coerced axes) the any-axis schedule's "logsoftmax" kind.
register(OpDef(
    "LogSoftmax",
    tuple(Schema(v, (Input("input"),), (Attr("axis", "int", 1 if v < 13 else -1),), dtypes.types(*names))
          for v, names in ((1, F), (11, F), (13, F + BF16))),
    _softmax_rule, reference=_log_softmax_reference,
    kernel=Row("logsoftmax", fusable=reduces_last_axis, axes=reduced_axes),
    doc="x - max - log(sum(exp(x - max))) along `axis` (versions 1, 11: all axes from `axis` on)."))
