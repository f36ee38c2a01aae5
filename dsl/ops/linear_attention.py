"""LinearAttention (version 27): the linear / gated / delta / gated-delta recurrences (reference-only: the JIT runs the numpy reference).

The spec's recurrence, per batch and KV head, over the tokens t in order (S is d_k x d_v):
- linear:      S_t = S_{t-1} + k_t v_t^T
- gated:       S_t = exp(g_t) S_{t-1} + k_t v_t^T
- delta:       S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
- gated_delta: S_t = exp(g_t) S_{t-1} + beta_t k_t (v_t - (exp(g_t) S_{t-1})^T k_t)^T
and o_t = scale * q_t^T S_t. A per-key-dim decay (H_kv * d_k wide) scales row d of S by
exp(g_t[d]); a per-head decay (H_kv wide) the whole S. Query head h reads KV head
h // (q_num_heads / kv_num_heads) (grouped-query, consecutive heads share, as in Attention).
The recurrence runs in float32 and each output rounds once; present_state has past_state's type
(S), or query's without a past_state (the type S is then not fixed by any input; onnx's reference
and function body make the same choice). chunk_size is only a tuning hint.

Spec choices: decay given to 'linear' / 'delta' or beta to 'linear' / 'gated' is an error (the
text lists them as required for the other modes and says nothing of the meaning there; onnx's
reference also rejects them). chunk_size must be positive.
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
_RULES = ("linear", "gated", "delta", "gated_delta")
_NAMES = ("query", "key", "value", "past_state", "decay", "beta")


@dataclass(frozen=True)
class LinearAttentionPlan:
    """What the rule decided: the dims, the scale and which terms the update rule has."""

    batch: int
    seq: int
    q_heads: int
    kv_heads: int
    d_k: int
    d_v: int
    scale: float
    gated: bool
    delta: bool

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads


def _check_attrs(call: Call) -> str:
    attrs = call.attrs
    rule = attrs["update_rule"]
    if isinstance(rule, bytes):
        rule = rule.decode("utf-8", "replace")
    if rule not in _RULES:
        call.fail(f"update_rule {rule!r}; expected one of {list(_RULES)}", InputError)
    q_heads, kv_heads = attrs["q_num_heads"], attrs["kv_num_heads"]
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        call.fail(f"q_num_heads {q_heads}, kv_num_heads {kv_heads}; expected positive head counts with "
                  "q_num_heads a multiple of kv_num_heads (grouped-query)", InputError)
    if attrs["chunk_size"] <= 0:
        call.fail(f"chunk_size {attrs['chunk_size']}; expected a positive int (a tuning hint)", InputError)
    if not np.isfinite(attrs["scale"]):
        call.fail(f"scale {attrs['scale']}; expected a finite float (0: 1 / sqrt(d_k))", InputError)
    return rule


def _check_gates(call: Call, rule: str) -> tuple:
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    for name, index, needed in (("decay", 4, gated), ("beta", 5, delta)):
        given = call.input_type(index) is not None
        if needed and not given:
            call.fail(f"update_rule {rule!r} requires the {name} input; it is missing", InputError)
        if given and not needed:
            call.fail(f"{name} given with update_rule {rule!r}; expected no {name} (it is an input of "
                      f"{['gated', 'gated_delta'] if name == 'decay' else ['delta', 'gated_delta']} only)",
                      InputError)
    return gated, delta


def _split(call: Call, name: str, shape: tuple, heads: int, heads_attr: str) -> int:
    if shape[2] % heads:
        call.fail(f"{name}'s last dim {shape[2]} (shape {list(shape)}) is not divisible by {heads_attr} {heads}")
    return shape[2] // heads


def _check_shapes(call: Call, shapes: list) -> tuple:
    """(batch, seq, d_k, d_v) of static shapes, checking every input against them."""
    q, k, v, past, decay, beta = shapes
    q_heads, kv_heads = call.attrs["q_num_heads"], call.attrs["kv_num_heads"]
    batch, seq = q[0], q[1]
    for name, shape in (("key", k), ("value", v), ("decay", decay), ("beta", beta)):
        if shape is not None and (shape[0], shape[1]) != (batch, seq):
            call.fail(f"{name} shape {list(shape)}; expected (batch, sequence) = {[batch, seq]} as query "
                      f"{list(q)}")
    d_k = _split(call, "query", q, q_heads, "q_num_heads")
    k_dim = _split(call, "key", k, kv_heads, "kv_num_heads")
    if k_dim != d_k:
        call.fail(f"key's head size {k_dim} (shape {list(k)}, kv_num_heads {kv_heads}) differs from query's "
                  f"{d_k} (shape {list(q)}, q_num_heads {q_heads}); expected one d_k")
    d_v = _split(call, "value", v, kv_heads, "kv_num_heads")
    if past is not None and tuple(past) != (batch, kv_heads, d_k, d_v):
        call.fail(f"past_state shape {list(past)}; expected {[batch, kv_heads, d_k, d_v]} "
                  "(batch, kv_num_heads, d_k, d_v)")
    if decay is not None and decay[2] not in (kv_heads, kv_heads * d_k):
        call.fail(f"decay shape {list(decay)}; expected last dim {kv_heads * d_k} (kv_num_heads * d_k, "
                  f"per key dim) or {kv_heads} (kv_num_heads, per head)")
    if beta is not None and beta[2] not in (kv_heads, 1):
        call.fail(f"beta shape {list(beta)}; expected last dim {kv_heads} (kv_num_heads) or 1")
    return batch, seq, d_k, d_v


def _partial_types(call: Call, types: list, out_type, state_type) -> list:
    """The output types while some dims are symbolic: what the known dims fix, the rest None."""
    q, v, past = types[0], types[2], types[3]
    q_heads, kv_heads = call.attrs["q_num_heads"], call.attrs["kv_num_heads"]

    def dim(value_type, axis, heads=1):
        size = None if value_type is None or value_type.shape is None else value_type.shape[axis]
        return size // heads if isinstance(size, int) and heads > 1 else size

    d_k, d_v = dim(q, 2, q_heads), dim(v, 2, kv_heads)
    output = (dim(q, 0), dim(q, 1), q_heads * d_v if isinstance(d_v, int) else None)
    state = past.shape if past is not None and past.shape is not None else (dim(q, 0), kv_heads, d_k, d_v)
    return [TensorType(out_type, output), TensorType(state_type, state)]


def _rule(call: Call) -> list:
    rule = _check_attrs(call)
    gated, delta = _check_gates(call, rule)
    types = [call.input_type(i) for i in range(6)]
    ranks = dict(zip(_NAMES, (3, 3, 3, 4, 3, 3)))
    for name, value_type in zip(_NAMES, types):
        if value_type is not None and value_type.rank not in (None, ranks[name]):
            call.fail(f"{name} shape {list(value_type.shape)} (rank {value_type.rank}); expected rank "
                      f"{ranks[name]}")
    q, past = types[0], types[3]
    out_type, state_type = q.dtype, (past.dtype if past is not None else q.dtype)
    if not all(t is None or t.is_static for t in types):
        return _partial_types(call, types, out_type, state_type)
    shapes = [None if t is None else tuple(t.shape) for t in types]
    batch, seq, d_k, d_v = _check_shapes(call, shapes)
    q_heads, kv_heads = call.attrs["q_num_heads"], call.attrs["kv_num_heads"]
    scale = call.attrs["scale"] or 1 / np.sqrt(d_k)
    call.plan = LinearAttentionPlan(batch, seq, q_heads, kv_heads, d_k, d_v, float(scale), gated, delta)
    return [TensorType(out_type, (batch, seq, q_heads * d_v)), TensorType(state_type, (batch, kv_heads, d_k, d_v))]


def _heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, T, H * D) -> (B, H, T, D) in float32."""
    batch, seq, width = x.shape
    return domain_array(x).astype(np.float32).reshape(batch, seq, heads, width // heads).transpose(0, 2, 1, 3)


def _reference(call: Call, xs: list) -> list:
    plan = call.plan
    past, decay, beta = (xs[i] if i < len(xs) else None for i in (3, 4, 5))
    q, k, v = _heads(xs[0], plan.q_heads), _heads(xs[1], plan.kv_heads), _heads(xs[2], plan.kv_heads)
    if past is None:
        state = np.zeros((plan.batch, plan.kv_heads, plan.d_k, plan.d_v), np.float32)
    else:
        state = domain_array(past).astype(np.float32)
    gate = None if decay is None else np.exp(_heads(decay, plan.kv_heads))  # (B, H_kv, T, d_k or 1)
    rate = None if beta is None else _heads(beta, beta.shape[2])  # (B, H_kv or 1, T, 1)
    out = np.zeros((plan.batch, plan.q_heads, plan.seq, plan.d_v), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(plan.seq):
            key, value = k[:, :, t], v[:, :, t]
            if gate is not None:
                state = state * gate[:, :, t, :, None]
            if rate is not None:
                value = rate[:, :, t] * (value - np.einsum("bhdm,bhd->bhm", state, key))
            state = state + key[..., :, None] * value[..., None, :]
            shared = np.repeat(state, plan.group, axis=1) if plan.group > 1 else state
            out[:, :, t] = np.float32(plan.scale) * np.einsum("bhd,bhdm->bhm", q[:, :, t], shared)
    output = out.transpose(0, 2, 1, 3).reshape(plan.batch, plan.seq, plan.q_heads * plan.d_v)
    state_type = call.types[3].dtype if past is not None else call.types[0].dtype
    return [finish(output, call.types[0].dtype), finish(state, state_type)]


register(OpDef(
    "LinearAttention",
    (Schema(27, (Input("query"), Input("key"), Input("value"), Input("past_state", _T, optional=True),
                 Input("decay", optional=True), Input("beta", optional=True)),
            (Attr("chunk_size", "int", 64), Attr("kv_num_heads", "int"), Attr("q_num_heads", "int"),
             Attr("scale", "float", 0.0), Attr("update_rule", "string", "gated_delta")), _T),),
    _rule, reference=_reference, chunk=chunks.WHOLE,
    doc="Linear attention over packed (batch, sequence, heads * head_size) inputs with a recurrent "
        "(batch, kv_heads, d_k, d_v) state: linear, gated (decay), delta (beta) or gated-delta updates, "
        "grouped-query heads."))
