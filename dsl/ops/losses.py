"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reference-only: the JIT runs the numpy reference).

Numerics follow onnx's reference: the per-element losses, their weights and their sums are in
the input type (float16 sums in float16); bfloat16 computes in float32 and rounds once. A target
that is neither ignore_index nor in [0, C) is a DslError on both engines (onnx's reference clips
the weight index and then reads out of bounds; the spec says such targets are invalid).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import InputError
from ..ir import TensorType
from . import chunks
from .math import BF16, F, domain_array, finish
from .registry import Attr, Call, Input, OpDef, Schema, register

_TIND = dtypes.types("int32", "int64")
_REDUCTIONS = ("none", "sum", "mean")
_ATTRS = (Attr("ignore_index", "int", None), Attr("reduction", "string", "mean"))


def _loss_rule(call: Call, log_prob_output: bool) -> list:
    x, target = call.types[0], call.types[1]
    weight = call.input_type(2)
    reduction = call.attrs["reduction"]
    if reduction not in _REDUCTIONS:
        call.fail(f"reduction {reduction!r}; expected one of {list(_REDUCTIONS)}", InputError)
    if weight is not None and weight.dtype != x.dtype:
        call.fail(f"weight type {weight.dtype} differs from input type {x.dtype}")
    out_shape = None
    if x.shape is not None:
        if len(x.shape) < 2:
            call.fail(f"input shape {list(x.shape)}: expected [N, C] or [N, C, d1, ..., dk] (rank >= 2)")
        out_shape = (x.shape[0],) + tuple(x.shape[2:])
        if target.shape is not None:
            ok = len(target.shape) == len(out_shape) and all(
                not (isinstance(a, int) and isinstance(b, int)) or a == b
                for a, b in zip(target.shape, out_shape))
            if not ok:
                call.fail(f"target shape {list(target.shape)}; expected {list(out_shape)} "
                          f"(input shape {list(x.shape)} without its class dim)")
        if weight is not None and weight.shape is not None:
            c = x.shape[1]
            if len(weight.shape) != 1 or (isinstance(c, int) and isinstance(weight.shape[0], int)
                                          and weight.shape[0] != c):
                call.fail(f"weight shape {list(weight.shape)}; expected [{c}] (one weight per class)")
    elif target.shape is not None:
        out_shape = tuple(target.shape)
    loss = TensorType(x.dtype, out_shape if reduction == "none" else ())
    if not log_prob_output:
        return [loss]
    count = 2 if call.outputs is None else call.outputs
    return [loss, TensorType(x.dtype, x.shape)][:max(count, 1)]


def _nll(call: Call, logp: np.ndarray, target: np.ndarray, weight) -> np.ndarray:
    """The reduced loss of log-probabilities ``logp`` [N, C, ...] (compute domain)."""
    ignore = call.attrs["ignore_index"]
    classes = logp.shape[1]
    target = np.asarray(target).astype(np.int64)
    ignored = target == ignore if ignore is not None else np.zeros(target.shape, bool)
    bad = ~ignored & ((target < 0) | (target >= classes))
    if bad.any():
        value = int(target[bad][0])
        call.fail(f"target value {value} out of range [0, {classes})"
                  + (f" and not ignore_index {ignore}" if ignore is not None else ""), InputError)
    safe = np.where(ignored, 0, target)
    picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    loss = np.where(ignored, logp.dtype.type(0), -picked).astype(logp.dtype)
    gather_weight = None
    if weight is not None:
        gather_weight = np.where(ignored, 0, np.take(weight, safe)).astype(logp.dtype)
    elif ignore is not None:
        gather_weight = np.where(ignored, 0, 1).astype(logp.dtype)
    reduction = call.attrs["reduction"]
    with np.errstate(all="ignore"):
        if gather_weight is not None:
            loss = gather_weight * loss
            if reduction == "mean":
                return np.asarray(loss.sum() / gather_weight.sum())
        if reduction == "mean":
            return np.asarray(np.mean(loss))
        if reduction == "sum":
            return np.asarray(np.sum(loss))
        return loss


def _domain(x: np.ndarray) -> np.ndarray:
    # float16 stays float16 (onnx's reference sums in the input type); bfloat16 computes in float32
    return x if x.dtype in (np.float16, np.float32, np.float64) else domain_array(x)


def _nll_reference(call: Call, xs: list) -> list:
    x, target = _domain(xs[0]), xs[1]
    weight = _domain(xs[2]) if len(xs) > 2 and xs[2] is not None else None
    return [finish(_nll(call, x, target, weight), call.types[0].dtype)]


def _sce_reference(call: Call, xs: list) -> list:
    x, target = _domain(xs[0]), xs[1]
    weight = _domain(xs[2]) if len(xs) > 2 and xs[2] is not None else None
    if x.ndim < 2:
        call.fail(f"scores shape {list(x.shape)}: expected rank >= 2")
    with np.errstate(all="ignore"):
        shifted = np.exp(x - np.max(x, axis=1, keepdims=True))
        logp = np.log(shifted / np.sum(shifted, axis=1, keepdims=True))
    dt = call.types[0].dtype
    loss = finish(_nll(call, logp, target, weight), dt)
    count = 2 if call.outputs is None else call.outputs
    return [loss, finish(logp, dt)][:max(count, 1)]


register(OpDef(
    "NegativeLogLikelihoodLoss",
    tuple(Schema(v, (Input("input"), Input("target", _TIND), Input("weight", optional=True)), _ATTRS,
                 dtypes.types(*names)) for v, names in ((12, F), (13, F), (22, F + BF16))),
    lambda call: _loss_rule(call, False), reference=_nll_reference, chunk=chunks.WHOLE,
    doc="Negative log likelihood loss of log-probabilities with optional class weights."))

register(OpDef(
    "SoftmaxCrossEntropyLoss",
    tuple(Schema(v, (Input("scores"), Input("labels", _TIND), Input("weights", optional=True)), _ATTRS,
                 dtypes.types(*names)) for v, names in ((12, F), (13, F + BF16))),
    lambda call: _loss_rule(call, True), reference=_sce_reference, chunk=chunks.WHOLE,
    doc="Softmax cross-entropy loss (and optionally the log-probabilities) of scores and labels."))
