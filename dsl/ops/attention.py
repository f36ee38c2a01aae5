"""Attention (scaled dot-product attention, versions 23, 24 and 25) as a composite of Reshape,
Transpose, Concat, Mul, MatMul, Tanh, Add, Where, Softmax and Cast, so the JIT fuses its
elementwise stages around the two matmuls.

The body follows the spec's pattern: 3-D inputs are split into heads ((B, S, H * D) ->
(B, H, S, D)); past_key / past_value are concatenated in front of K / V (the present outputs);
the scale multiplies the smaller of Q and K before the product; QK^T is softcapped (softcap * tanh(x / softcap)) and the
attention bias is added; Softmax runs in softmax_precision; P V is the output. Grouped-query
attention (q_num_heads a multiple of kv_num_heads) repeats each KV head for consecutive query
heads ([h0, h0, h1, h1, ...]); the body broadcasts a 5-D MatMul instead of copying K and V.

The bias is a float mask (cast to Q's type) or a boolean mask (True: attend; 0 / -inf), padded
with -inf (False) up to the total sequence length when its last dim is shorter, plus the
structural masks: is_causal (query i attends key j iff j <= i + offset, offset = the past length,
or nonpad_kv_seqlen - q_sequence_length per batch without a past), nonpad_kv_seqlen's padding
(key j < nonpad_kv_seqlen[b]) and version 25's window (p - left <= j <= p + right, p = i + offset).
A query row whose bias is -inf everywhere gives zero probabilities (Y row 0, mode 3 row 0).

Spec choices (the spec text wins over onnx's reference):
- qk_matmul_output mode 0 is the scaled QK^T before softcap (the attribute's text); onnx's
  reference returns the softcapped value in mode 0 too.
- A mask's last dim shorter than the total sequence length is padded even when it is 1 (as
  onnx's reference; the text says "shorter ... padded").
- The text scales Q and K by sqrt(scale) each, so that Q K^T cannot overflow; the whole scale
  on the smaller operand does that as well (and a negative scale needs no square root, where
  onnx's reference takes sqrt of it: NaN), without a pass over a decode step's KV cache. q_num_heads / kv_num_heads with 4-D inputs must match their head dims.
- An integer attn_mask is added as a float mask (cast to Q's type).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..errors import DTypeError, InputError
from ..ir import TensorType
from . import chunks
from .expansion import expanded_reference
from .math import BF16, F
from .few_rows_attention import MAX_ROWS
from .registry import INTERNAL, Attr, Call, Input, OpDef, Schema, register

_FLOATS = dtypes.types(*F, *BF16)
_MASK = dtypes.types(*F, *BF16, "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_BOOL = dtypes.dtype("bool")
_PRECISIONS = (1, 10, 11, 16)  # float, float16, double, bfloat16
_NAMES = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")


@dataclass(frozen=True)
class AttentionPlan:
    """What the rule decided, for the body (all dims static).

    Attributes:
        batch, q_heads, kv_heads, q_seq, kv_seq, past_seq, head, v_head: the dims (kv_seq is
            K's own sequence length; total = past_seq + kv_seq).
        rank3: Q, K, V are (batch, sequence, heads * head_size).
        mask_pad: how many -inf (False) columns pad attn_mask's last dim.
        scale: the scale of Q K^T.
        outputs: how many outputs the body returns.
    """

    batch: int
    q_heads: int
    kv_heads: int
    q_seq: int
    kv_seq: int
    past_seq: int
    head: int
    v_head: int
    rank3: bool
    mask_pad: int
    scale: float
    outputs: int

    @property
    def total(self) -> int:
        return self.past_seq + self.kv_seq

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads


def _check_attrs(call: Call) -> None:
    attrs = call.attrs
    if attrs["is_causal"] not in (0, 1):
        call.fail(f"is_causal {attrs['is_causal']}; expected 0 or 1", InputError)
    if attrs["qk_matmul_output_mode"] not in (0, 1, 2, 3):
        call.fail(f"qk_matmul_output_mode {attrs['qk_matmul_output_mode']}; expected 0, 1, 2 or 3", InputError)
    if attrs["softcap"] < 0 or not np.isfinite(attrs["softcap"]):
        call.fail(f"softcap {attrs['softcap']}; expected a finite value >= 0 (0 disables it)", InputError)
    precision = attrs["softmax_precision"]
    if precision is not None and precision not in _PRECISIONS:
        names = [f"{c} ({dtypes.dtype(c).onnx_name})" for c in _PRECISIONS]
        call.fail(f"softmax_precision {precision}; expected one of {names}", DTypeError)
    if attrs["scale"] is not None and not np.isfinite(attrs["scale"]):
        call.fail(f"scale {attrs['scale']}; expected a finite float", InputError)
    for side in ("left_window_size", "right_window_size"):
        if attrs.get(side, -1) < -1:
            call.fail(f"{side} {attrs[side]}; expected -1 (unbounded) or a value >= 0", InputError)


def _check_types(call: Call) -> None:
    v, past_value = call.types[2], call.input_type(5)
    if past_value is not None and past_value.dtype != v.dtype:
        call.fail(f"past_value has element type {past_value.dtype} but V has {v.dtype}; expected one type "
                  "(T2)", DTypeError)
    past_key = call.input_type(4)
    if (past_key is None) != (past_value is None):
        given = "past_key" if past_value is None else "past_value"
        call.fail(f"{given} given without {'past_value' if past_value is None else 'past_key'}; expected "
                  "both or neither", InputError)
    if past_key is not None and call.input_type(6) is not None:
        call.fail("nonpad_kv_seqlen given with past_key / past_value; expected one kind of KV cache "
                  "(nonpad_kv_seqlen is for a cache updated outside the op)", InputError)


def _heads(call: Call, name: str, shape: tuple, heads_attr: str) -> tuple:
    """(heads, sequence, head_size) of a 3-D or 4-D Q / K / V."""
    heads = call.attrs[heads_attr]
    if len(shape) == 4:
        if heads is not None and heads != shape[1]:
            call.fail(f"{heads_attr} {heads} but {name} (batch, heads, sequence, head_size) has shape "
                      f"{list(shape)}; expected {shape[1]} or no {heads_attr}", InputError)
        return shape[1], shape[2], shape[3]
    if heads is None or heads <= 0:
        call.fail(f"{heads_attr} {heads} with a 3-D {name} of shape {list(shape)}; expected a positive "
                  f"{heads_attr} (a 3-D {name} is (batch, sequence, heads * head_size))", InputError)
    if shape[2] % heads:
        call.fail(f"{name}'s hidden size {shape[2]} (shape {list(shape)}) is not divisible by "
                  f"{heads_attr} {heads}")
    return heads, shape[1], shape[2] // heads


def _check_past(call: Call, name: str, past: tuple, want: tuple) -> None:
    if len(past) != 4 or past[0] != want[0] or past[1] != want[1] or past[3] != want[3]:
        call.fail(f"{name} shape {list(past)}; expected [{want[0]}, {want[1]}, past_sequence_length, "
                  f"{want[3]}] (batch, kv_num_heads, past_sequence_length, head size)")


def _check_mask(call: Call, mask: tuple, target: tuple) -> int:
    """How many columns pad the mask's last dim; ShapeError unless it broadcasts to ``target``."""
    if len(mask) == 0 or len(mask) > 4:
        call.fail(f"attn_mask shape {list(mask)} (rank {len(mask)}); expected rank 1 to 4, broadcastable "
                  f"to {list(target)} (batch, q_num_heads, q_sequence_length, total_sequence_length)")
    if mask[-1] > target[-1]:
        call.fail(f"attn_mask's last dim {mask[-1]} (shape {list(mask)}) is longer than the total sequence "
                  f"length {target[-1]}; expected at most {target[-1]}")
    if any(m not in (1, t) for m, t in zip(mask[-2::-1], target[-2::-1])):
        call.fail(f"attn_mask shape {list(mask)} is not broadcastable to {list(target)} "
                  "(batch, q_num_heads, q_sequence_length, total_sequence_length)")
    return target[-1] - mask[-1]


def _qkv_dims(call: Call, q, k, v) -> tuple:
    """(batch, q_heads, kv_heads, q_seq, kv_seq, head, v_head) of static Q, K, V."""
    ranks = [len(t.shape) for t in (q, k, v)]
    if ranks[0] not in (3, 4) or len(set(ranks)) != 1:
        call.fail(f"Q, K, V shapes {[list(t.shape) for t in (q, k, v)]} (ranks {ranks}); expected all 3-D "
                  "(batch, sequence, hidden) or all 4-D (batch, heads, sequence, head_size)")
    q_heads, q_seq, head = _heads(call, "Q", q.shape, "q_num_heads")
    kv_heads, kv_seq, k_head = _heads(call, "K", k.shape, "kv_num_heads")
    v_heads, v_seq, v_head = _heads(call, "V", v.shape, "kv_num_heads")
    batch = q.shape[0]
    if k.shape[0] != batch or v.shape[0] != batch:
        call.fail(f"batch sizes Q {batch}, K {k.shape[0]}, V {v.shape[0]}; expected one batch size")
    if k_head != head:
        call.fail(f"K's head size {k_head} differs from Q's {head} (Q {list(q.shape)}, K {list(k.shape)}); "
                  "expected one head_size")
    if v_heads != kv_heads or v_seq != kv_seq:
        call.fail(f"V shape {list(v.shape)} has {v_heads} heads and sequence {v_seq}; expected K's "
                  f"{kv_heads} heads and sequence {kv_seq} (K {list(k.shape)})")
    if kv_heads < 1:
        call.fail(f"K shape {list(k.shape)} has no heads; expected at least one KV head")
    if q_heads % kv_heads:
        call.fail(f"q_num_heads {q_heads} is not a multiple of kv_num_heads {kv_heads}; expected "
                  "kv_num_heads to divide it (grouped-query attention)")
    return batch, q_heads, kv_heads, q_seq, kv_seq, head, v_head


def _past_length(call: Call, past_key, past_value, batch: int, kv_heads: int, head: int, v_head: int) -> int:
    if past_key is None:
        return 0
    _check_past(call, "past_key", past_key.shape, (batch, kv_heads, None, head))
    _check_past(call, "past_value", past_value.shape, (batch, kv_heads, None, v_head))
    if past_value.shape[2] != past_key.shape[2]:
        call.fail(f"past_key sequence {past_key.shape[2]} differs from past_value's {past_value.shape[2]} "
                  f"(shapes {list(past_key.shape)}, {list(past_value.shape)})")
    return past_key.shape[2]


def _rule(call: Call) -> list:
    _check_attrs(call)
    _check_types(call)
    types = [call.input_type(i) for i in range(7)]
    q, k, v, mask, past_key, past_value, nonpad = types
    t1, t2 = q.dtype, v.dtype
    count = 4 if call.outputs is None else max(1, min(call.outputs, 4))
    if any(t is not None and not t.is_static for t in types):  # planned again at run time
        if any(t is not None and t.rank not in (None, 3, 4) for t in (q, k, v)):
            call.fail(f"Q, K, V ranks {[t.rank for t in (q, k, v)]}; expected all 3 or all 4")
        return [TensorType(t1, None), TensorType(t1, None), TensorType(t2, None), TensorType(t1, None)][:count]
    batch, q_heads, kv_heads, q_seq, kv_seq, head, v_head = _qkv_dims(call, q, k, v)
    total = _past_length(call, past_key, past_value, batch, kv_heads, head, v_head) + kv_seq
    if nonpad is not None:
        if nonpad.shape != (batch,):
            call.fail(f"nonpad_kv_seqlen shape {list(nonpad.shape)}; expected [{batch}] (batch_size,)")
        _check_nonpad(call, total)
    pad = 0 if mask is None else _check_mask(call, tuple(mask.shape), (batch, q_heads, q_seq, total))
    scale = call.attrs["scale"]
    rank3 = len(q.shape) == 3
    call.plan = AttentionPlan(batch, q_heads, kv_heads, q_seq, kv_seq, total - kv_seq, head, v_head, rank3,
                              pad, 1 / np.sqrt(head) if scale is None else scale, count)
    y = (batch, q_seq, q_heads * v_head) if rank3 else (batch, q_heads, q_seq, v_head)
    return [TensorType(t1, y), TensorType(t1, (batch, kv_heads, total, head)),
            TensorType(t2, (batch, kv_heads, total, v_head)), TensorType(t1, (batch, q_heads, q_seq, total))][:count]


def _check_nonpad(call: Call, total: int) -> None:
    values = call.values[6] if len(call.values) > 6 else None
    if values is None:
        return
    bad = (values < 0) | (values > total)
    if bad.any():
        call.fail(f"nonpad_kv_seqlen value {int(values[bad][0])} (of {values.tolist()}) out of range "
                  f"[0, {total}] (the kv sequence length)", InputError)


# ---- body ------------------------------------------------------------------------------------------
def _const(b, value, dt):
    return b.const(np.asarray(np.array(value, np.float64).astype(dt.np_dtype)))


def _index(b, length: int, shape: tuple):
    return b.const(np.arange(length, dtype=np.int64).reshape(shape))


def _reshape(b, x, shape):
    return b.op("Reshape", x, b.const(np.array(shape, np.int64)))


def _split_heads(b, x, plan, seq: int, heads: int, size: int):
    return b.op("Transpose", _reshape(b, x, (plan.batch, seq, heads, size)), perm=[0, 2, 1, 3])


def _grouped_matmul(b, left, right, plan, rows: int, cols: int):
    """left (B, Hq, rows, n) @ right (B, Hkv, n, cols), each KV head serving ``group`` query heads."""
    if plan.group == 1:
        return b.op("MatMul", left, right)
    grouped = _reshape(b, left, (plan.batch, plan.kv_heads, plan.group, rows, -1))
    product = b.op("MatMul", grouped, b.op("Unsqueeze", right, b.const(np.array([2], np.int64))))
    return _reshape(b, product, (plan.batch, plan.q_heads, rows, cols))


def _static_allowed(call: Call, plan) -> np.ndarray:
    """[q_seq, total] bool: which keys the causal and window attributes let each query attend,
    with the past length as the query offset (no nonpad_kv_seqlen)."""
    causal = bool(call.attrs["is_causal"])
    left, right = call.attrs.get("left_window_size", -1), call.attrs.get("right_window_size", -1)
    rows = np.arange(plan.q_seq, dtype=np.int64).reshape(plan.q_seq, 1)
    diff = rows + plan.past_seq - np.arange(plan.total, dtype=np.int64).reshape(1, plan.total)  # query - key
    allowed = np.ones(diff.shape, bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    return allowed


def _structural(call: Call, b, plan, nonpad):
    """The causal / window / padding constraints as a bool "allowed" tensor, or None."""
    causal = bool(call.attrs["is_causal"])
    left, right = call.attrs.get("left_window_size", -1), call.attrs.get("right_window_size", -1)
    if not causal and left < 0 and right < 0 and nonpad is None:
        return None
    rows = np.arange(plan.q_seq, dtype=np.int64).reshape(plan.q_seq, 1)
    if nonpad is None:  # a static offset: one constant
        return b.const(_static_allowed(call, plan))
    per_batch = _reshape(b, nonpad, (plan.batch, 1, 1, 1))
    key = _index(b, plan.total, (1, 1, 1, plan.total))
    allowed = b.op("Less", key, per_batch)  # padding: key j < nonpad_kv_seqlen[b]
    if causal or left >= 0 or right >= 0:
        # query position p = i + nonpad - q_seq; diff = p - j
        position = b.op("Add", b.const(rows.reshape(1, 1, plan.q_seq, 1) - plan.q_seq), per_batch)
        diff = b.op("Sub", position, key)
        bounds = ([(0, "GreaterOrEqual", diff)] if causal else []) + \
                 ([(left, "LessOrEqual", diff)] if left >= 0 else []) + \
                 ([(-right, "GreaterOrEqual", diff)] if right >= 0 else [])
        for bound, op, value in bounds:
            allowed = b.op("And", allowed, b.op(op, value, b.const(np.array(bound, np.int64))))
    return allowed


def _bias(call: Call, b, plan, mask, nonpad):
    """The additive attention bias of Q's type (None: no mask of any kind)."""
    dt = call.types[0].dtype
    zero, neg = _const(b, 0.0, dt), _const(b, -np.inf, dt)
    bias = None
    if mask is not None:
        mask_type = call.types[3]
        is_bool = mask_type.dtype == _BOOL
        if not is_bool and mask_type.dtype != dt:
            mask = b.op("Cast", mask, to=dt.onnx_code)
        if plan.mask_pad:  # a short last dim: the missing keys are masked out
            fill = np.full(tuple(mask_type.shape[:-1]) + (plan.mask_pad,), False if is_bool else -np.inf)
            mask = b.op("Concat", mask, b.const(fill.astype(bool if is_bool else dt.np_dtype)), axis=-1)
        bias = b.op("Where", mask, zero, neg) if is_bool else mask
    allowed = _structural(call, b, plan, nonpad)
    if allowed is not None:
        structural = b.op("Where", allowed, zero, neg)
        bias = structural if bias is None else b.op("Add", bias, structural)
    return bias


def _probabilities(call: Call, b, scores, bias):
    """Softmax of the biased scores in softmax_precision, as Q's type; a row whose bias is -inf
    everywhere (no key to attend) gives zeros, not NaN."""
    t1 = call.types[0].dtype
    precision = call.attrs["softmax_precision"]
    wide = precision is not None and precision != t1.onnx_code
    probs = b.op("Softmax", b.op("Cast", scores, to=precision) if wide else scores, axis=-1)
    if bias is not None:
        row_max = b.op("ReduceMax", bias, b.const(np.array([-1], np.int64)), keepdims=1)
        empty = b.op("Equal", row_max, _const(b, -np.inf, t1))
        probs = b.op("Where", empty, _const(b, 0.0, dtypes.dtype(precision if wide else t1.onnx_code)), probs)
    return b.op("Cast", probs, to=t1.onnx_code) if wide else probs


def _body(call: Call, b, xs: list) -> list:
    plan = call.plan
    t1, t2 = call.types[0].dtype, call.types[2].dtype
    q, k, v = xs[0], xs[1], xs[2]
    mask, past_key, past_value, nonpad = (xs[i] if i < len(xs) else None for i in range(3, 7))
    if plan.rank3:
        q = _split_heads(b, q, plan, plan.q_seq, plan.q_heads, plan.head)
        k = _split_heads(b, k, plan, plan.kv_seq, plan.kv_heads, plan.head)
        v = _split_heads(b, v, plan, plan.kv_seq, plan.kv_heads, plan.v_head)
    if past_key is not None:
        k = b.op("Concat", past_key, k, axis=2)
        v = b.op("Concat", past_value, v, axis=2)
    present_key, present_value = k, v
    # The spec scales Q and K by sqrt(scale) before the product so that it cannot overflow; the
    # whole scale on the smaller operand does that too, and leaves the larger one (a decode
    # step's KV cache) unread until the product (decode against 2048 keys: 2.1 -> 0.9 ms)
    if plan.q_seq * plan.q_heads <= plan.total * plan.kv_heads:
        q = b.op("Mul", q, _const(b, plan.scale, t1))
    else:
        k = b.op("Mul", k, _const(b, plan.scale, t1))
    scores = _grouped_matmul(b, q, b.op("Transpose", k, perm=[0, 1, 3, 2]), plan, plan.q_seq, plan.total)
    raw = scores
    softcap = call.attrs["softcap"]
    if softcap > 0:
        cap = _const(b, softcap, t1)
        scores = b.op("Mul", b.op("Tanh", b.op("Div", scores, cap)), cap)
    capped = scores
    bias = _bias(call, b, plan, mask, nonpad)
    if bias is not None:
        scores = b.op("Add", scores, bias)
    probs = _probabilities(call, b, scores, bias)
    if t2 != t1:
        v = b.op("Cast", v, to=t1.onnx_code)
    y = _grouped_matmul(b, probs, v, plan, plan.q_seq, plan.v_head)
    if plan.rank3:
        y = _reshape(b, b.op("Transpose", y, perm=[0, 2, 1, 3]), (plan.batch, plan.q_seq, plan.q_heads * plan.v_head))
    qk = (raw, capped, scores, probs)[call.attrs["qk_matmul_output_mode"]]
    return [y, present_key, present_value, qk][:plan.outputs]


def _fused(call: Call, b, xs: list) -> list | None:
    """The JIT's body (``b`` a dsl.passes.expand.GraphBuilder: its math mode, which outputs are
    read) for a decode step: one FewRowsAttention kernel (dsl/ops/few_rows_attention.py)
    where Q has at most MAX_ROWS rows per KV head against float32 K / V, with no mask input,
    softcap, widened softmax or QK output that is read, and the causal / window attributes (if
    any) letting every query attend every key; else None (the composite body)."""
    plan = call.plan
    f32 = dtypes.dtype("float")
    if call.types[0].dtype != f32 or call.types[2].dtype != f32 or (plan.outputs > 3 and b.read[3]) \
            or any(i < len(xs) and xs[i] is not None for i in (3, 6)) or call.attrs["softcap"] > 0 \
            or call.attrs["softmax_precision"] not in (None, f32.onnx_code) \
            or not (plan.batch and plan.q_heads and plan.q_seq and plan.total) \
            or plan.group * plan.q_seq > MAX_ROWS or plan.q_seq * plan.q_heads > plan.total * plan.kv_heads \
            or not _static_allowed(call, plan).all():
        return None
    q, k, v = xs[:3]
    past_key, past_value = (xs[i] if i < len(xs) else None for i in (4, 5))
    time_major = plan.rank3 and past_key is None
    if plan.rank3:
        q = _split_heads(b, q, plan, plan.q_seq, plan.q_heads, plan.head)
        if time_major:  # K, V read in their (batch, sequence, heads, size) order
            k_in = _reshape(b, k, (plan.batch, plan.kv_seq, plan.kv_heads, plan.head))
            v_in = _reshape(b, v, (plan.batch, plan.kv_seq, plan.kv_heads, plan.v_head))
            k = b.op("Transpose", k_in, perm=[0, 2, 1, 3])
            v = b.op("Transpose", v_in, perm=[0, 2, 1, 3])
        else:
            k = _split_heads(b, k, plan, plan.kv_seq, plan.kv_heads, plan.head)
            v = _split_heads(b, v, plan, plan.kv_seq, plan.kv_heads, plan.v_head)
    if past_key is not None:
        k = b.op("Concat", past_key, k, axis=2)
        v = b.op("Concat", past_value, v, axis=2)
    if not time_major:
        k_in, v_in = k, v
    y = b.op("FewRowsAttention", q, k_in, v_in, domain=INTERNAL, scale=float(plan.scale),
             time_major=int(time_major), exact=int(b.math == "exact"))
    if plan.rank3:
        y = _reshape(b, b.op("Transpose", y, perm=[0, 2, 1, 3]), (plan.batch, plan.q_seq, plan.q_heads * plan.v_head))
    return [y, k, v, None][:plan.outputs]  # (the scores output: nothing reads it)


def _expand(call: Call, b, xs: list) -> list:
    """The JIT's body: the decode-step kernel where it applies (_fused), else the composite."""
    fused = _fused(call, b, xs)
    return _body(call, b, xs) if fused is None else fused


def _schema(version: int) -> Schema:
    inputs = (Input("Q"), Input("K"), Input("V", _FLOATS), Input("attn_mask", _MASK, optional=True),
              Input("past_key", optional=True), Input("past_value", _FLOATS, optional=True))
    if version >= 24:
        inputs += (Input("nonpad_kv_seqlen", dtypes.types("int64"), optional=True),)
    attrs = (Attr("is_causal", "int", 0), Attr("kv_num_heads", "int", None), Attr("q_num_heads", "int", None),
             Attr("qk_matmul_output_mode", "int", 0), Attr("scale", "float", None), Attr("softcap", "float", 0.0),
             Attr("softmax_precision", "int", None))
    if version >= 25:
        attrs += (Attr("left_window_size", "int", -1), Attr("right_window_size", "int", -1))
    return Schema(version, inputs, attrs, _FLOATS)


register(OpDef(
    "Attention", tuple(_schema(v) for v in (23, 24, 25)),
    _rule, reference=expanded_reference(_body), expand=_expand, chunk=chunks.WHOLE,
    doc="softmax(softcap(Q K^T * scale) + mask) V over heads (3-D or 4-D, grouped-query), with an "
        "optional KV cache (past_key / past_value, nonpad_kv_seqlen), causal and window masks."))
