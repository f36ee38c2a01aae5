"""CausalConvWithState (version 27): a stateful causal depthwise 1-D convolution (reference-only: the JIT runs the numpy reference).

The spec's algorithm: ``padded = Concat(past_state or zeros (batch, channels, k - 1), input)``
along the length axis; ``output[b, c, t] = bias[c] + sum_j weight[c, 0, j] * padded[b, c, t + j]``
(a valid depthwise Conv, so the output keeps the input's length), then SiLU (``x * sigmoid(x)``,
'swish' an alias) when asked; ``present_state`` is the last k - 1 positions of ``padded``
(including past_state or zeros when the input is shorter than k - 1). The sum runs in float32
for float16 / bfloat16 and rounds once to the input type (onnx's reference sums float16 in
float16; the spec fixes no intermediate precision).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..errors import InputError
from ..ir import TensorType
from . import chunks
from .math import domain_array, finish
from .registry import Attr, Call, Input, OpDef, Schema, register

_T = dtypes.types("float", "float16", "bfloat16")
_ACTIVATIONS = ("none", "silu", "swish")


@dataclass(frozen=True)
class CausalConvPlan:
    """What the rule decided: the dims and whether SiLU follows the convolution."""

    batch: int
    channels: int
    length: int
    kernel: int
    silu: bool


def _activation(call: Call) -> str:
    activation = call.attrs["activation"]
    if isinstance(activation, bytes):
        activation = activation.decode("utf-8", "replace")
    if activation not in _ACTIVATIONS:
        call.fail(f"activation {activation!r}; expected one of {list(_ACTIVATIONS)}", InputError)
    return activation


def _check_shapes(call: Call, x: tuple, weight: tuple, bias, past) -> None:
    batch, channels, _ = x
    if len(weight) != 3 or weight[0] != channels or weight[1] != 1 or weight[2] < 1:
        call.fail(f"weight shape {list(weight)}; expected [{channels}, 1, k] (channels, 1, kernel size k >= 1) "
                  f"for input shape {list(x)}")
    if bias is not None and tuple(bias) != (channels,):
        call.fail(f"bias shape {list(bias)}; expected [{channels}] (channels)")
    if past is not None and tuple(past) != (batch, channels, weight[2] - 1):
        call.fail(f"past_state shape {list(past)}; expected {[batch, channels, weight[2] - 1]} "
                  "(batch_size, channels, k - 1)")


def _rule(call: Call) -> list:
    silu = _activation(call) != "none"
    x, weight, bias, past = (call.input_type(i) for i in range(4))
    dt = x.dtype
    for name, value_type, rank in (("input", x, 3), ("weight", weight, 3), ("bias", bias, 1), ("past_state", past, 3)):
        if value_type is not None and value_type.rank not in (None, rank):
            call.fail(f"{name} shape {list(value_type.shape)} (rank {value_type.rank}); expected rank {rank}")
    if not all(t is None or t.is_static for t in (x, weight, bias, past)):
        shape = x.shape if x.shape is not None else (None, None, None)  # the rank is always 3
        kernel = weight.shape[2] if weight.shape is not None else None
        state = (shape[0], shape[1], kernel - 1 if isinstance(kernel, int) else None)
        return [TensorType(dt, shape), TensorType(dt, state)]
    _check_shapes(call, x.shape, weight.shape, None if bias is None else bias.shape,
                  None if past is None else past.shape)
    batch, channels, length = x.shape
    kernel = weight.shape[2]
    call.plan = CausalConvPlan(batch, channels, length, kernel, silu)
    return [TensorType(dt, x.shape), TensorType(dt, (batch, channels, kernel - 1))]


def _reference(call: Call, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x, weight = domain_array(xs[0]), domain_array(xs[1])
    bias, past = (xs[i] if i < len(xs) else None for i in (2, 3))
    if past is None:
        pad = np.zeros((plan.batch, plan.channels, plan.kernel - 1), x.dtype)
    else:
        pad = domain_array(past)
    padded = np.concatenate([pad, x], axis=2)
    out = np.zeros(x.shape, x.dtype)
    for tap in range(plan.kernel):
        out += weight[None, :, 0, tap, None] * padded[:, :, tap:tap + plan.length]
    if bias is not None:
        out += domain_array(bias)[None, :, None]
    if plan.silu:
        with np.errstate(over="ignore"):
            out = out / (1 + np.exp(-out))
    state = padded[:, :, padded.shape[2] - (plan.kernel - 1):]
    return [finish(out, dt), finish(state, dt)]


register(OpDef(
    "CausalConvWithState",
    (Schema(27, (Input("input"), Input("weight"), Input("bias", optional=True), Input("past_state", optional=True)),
            (Attr("activation", "string", "none"),), _T),),
    _rule, reference=_reference, chunk=chunks.WHOLE,
    doc="Causal depthwise 1-D convolution of (batch, channels, length) with a carried state of the "
        "last k - 1 positions, optional bias and fused SiLU."))
