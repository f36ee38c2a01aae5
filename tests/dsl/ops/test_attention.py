"""Tests for dsl/ops/attention.py: Attention against a plain numpy formula, eagerly and under dsl.jit."""
from __future__ import annotations

import numpy as np
import pytest

import dsl

ENGINES = ["eager", "jit"]
TOL = {np.float32: (1e-5, 1e-6), np.float16: (4e-3, 2e-3)}


def formula(q, k, v, mask=None, past_key=None, past_value=None, *, is_causal=0, scale=None, softcap=0.0,
            q_heads=None, kv_heads=None, nonpad=None, left=-1, right=-1):
    """softmax(softcap(q k^T * scale) + bias) v in float64, written out plainly; also the scores
    (q k^T * scale), the biased scores and the probabilities."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    three_d = q.ndim == 3
    if three_d:
        def split(x, heads):
            return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)
        q, k, v = split(q, q_heads), split(k, kv_heads), split(v, kv_heads)
    if past_key is not None:
        k = np.concatenate([past_key.astype(np.float64), k], axis=2)
        v = np.concatenate([past_value.astype(np.float64), v], axis=2)
    batch, hq, sq, d = q.shape
    total = k.shape[2]
    group = hq // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(d) if scale is None else scale
    scores = np.einsum("bhid,bhjd->bhij", q, k) * scale
    capped = softcap * np.tanh(scores / softcap) if softcap > 0 else scores
    bias = np.zeros((batch, 1, sq, total))
    if mask is not None:
        mask = np.asarray(mask)
        short = total - mask.shape[-1]
        if mask.dtype == bool:
            mask = np.where(mask, 0.0, -np.inf)
        mask = np.concatenate([mask.astype(np.float64), np.full(mask.shape[:-1] + (short,), -np.inf)], axis=-1)
        bias = bias + mask
    i = np.arange(sq)[:, None]
    j = np.arange(total)[None, :]
    offsets = [past_key.shape[2] if past_key is not None else 0] * batch
    if nonpad is not None:
        offsets = [n - sq for n in nonpad]
        for b, n in enumerate(nonpad):
            bias[b, ..., n:] = -np.inf
    for b, offset in enumerate(offsets):
        position = i + offset
        allowed = np.ones((sq, total), bool)
        if is_causal:
            allowed &= j <= position
        if left >= 0:
            allowed &= j >= position - left
        if right >= 0:
            allowed &= j <= position + right
        bias[b] = np.where(allowed, bias[b], -np.inf)
    biased = capped + bias
    probs = np.zeros_like(biased)
    for index in np.ndindex(biased.shape[:-1]):
        row = biased[index]
        if np.isfinite(row).any():
            e = np.exp(row - row[np.isfinite(row)].max())
            probs[index] = e / e.sum()
    y = probs @ v
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(batch, sq, -1)
    return y, scores, capped, biased, probs


def run(engine, *args, **kwargs):
    if engine == "eager":
        return dsl.attention(*args, **kwargs)
    arrays = [a for a in args if a is not None]
    slots = [a is not None for a in args]

    @dsl.jit(opset=kwargs.pop("opset", None) or dsl.LATEST_OPSET)
    def kernel(*given):
        it = iter(given)
        return dsl.attention(*[next(it) if s else None for s in slots], **kwargs)
    return kernel(*arrays)


def data(rng, dtype, *shapes):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def qkv_shapes(three_d: bool, q_heads: int, kv_heads: int, sq=3, skv=5, d=4, dv=6, batch=2):
    if three_d:
        return (batch, sq, q_heads * d), (batch, skv, kv_heads * d), (batch, skv, kv_heads * dv)
    return (batch, q_heads, sq, d), (batch, kv_heads, skv, d), (batch, kv_heads, skv, dv)


def check(got, want, dtype):
    rtol, atol = TOL[dtype]
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version", [23, 24])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("three_d", [False, True], ids=["4d", "3d"])
@pytest.mark.parametrize("heads", [(2, 2), (4, 2), (3, 1)], ids=["mha", "gqa", "mqa"])
def test_layouts_and_heads(engine, version, dtype, three_d, heads):
    rng = np.random.default_rng(0)
    q, k, v = data(rng, dtype, *qkv_shapes(three_d, *heads))
    attrs = dict(q_num_heads=heads[0], kv_num_heads=heads[1]) if three_d else {}
    got = run(engine, q, k, v, opset=version, **attrs)
    check(got, formula(q, k, v, q_heads=heads[0], kv_heads=heads[1])[0], dtype)


MASKS = ["none", "bool", "float", "short_bool", "short_float", "rank3"]


def make_mask(kind, rng, batch, heads, sq, total, dtype):
    if kind == "none":
        return None
    length = total - 2 if kind.startswith("short") else total
    shape = {"rank3": (heads, sq, length)}.get(kind, (batch, 1, sq, length) if kind == "bool" else (sq, length))
    if kind.endswith("bool"):
        mask = rng.random(shape) < 0.7
        mask[..., 0] = True
        return mask
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version", [23, 24])
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("past", [0, 4])
def test_masks_causal_and_past(engine, version, causal, mask_kind, past):
    rng = np.random.default_rng(1)
    dtype, three_d = np.float32, mask_kind in ("float", "short_bool")
    q, k, v = data(rng, dtype, *qkv_shapes(three_d, 4, 2))
    past_key, past_value = data(rng, dtype, (2, 2, past, 4), (2, 2, past, 6)) if past else (None, None)
    mask = make_mask(mask_kind, rng, 2, 4, 3, 5 + past, dtype)
    attrs = dict(q_num_heads=4, kv_num_heads=2) if three_d else {}
    got = run(engine, q, k, v, mask, past_key, past_value, is_causal=causal, return_present=bool(past),
              opset=version, **attrs)
    want = formula(q, k, v, mask, past_key, past_value, is_causal=causal, q_heads=4, kv_heads=2)[0]
    if past:
        got, present_key, present_value = got
        k4 = k.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3) if three_d else k
        v4 = v.reshape(2, 5, 2, 6).transpose(0, 2, 1, 3) if three_d else v
        np.testing.assert_array_equal(present_key, np.concatenate([past_key, k4], axis=2))
        np.testing.assert_array_equal(present_value, np.concatenate([past_value, v4], axis=2))
    check(got, want, dtype)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_qk_matmul_output_modes_softcap_and_scale(engine, mode, dtype):
    rng = np.random.default_rng(2)
    q, k, v = data(rng, dtype, *qkv_shapes(False, 2, 2))
    mask = make_mask("short_float", rng, 2, 2, 3, 5, dtype)
    got, qk = run(engine, q, k, v, mask, is_causal=1, softcap=1.5, scale=0.3, qk_matmul_output_mode=mode,
                  return_qk_matmul=True)
    y, *stages = formula(q, k, v, mask, is_causal=1, softcap=1.5, scale=0.3)
    check(got, y, dtype)
    check(qk, stages[mode], dtype) if mode != 2 else np.testing.assert_allclose(
        qk.astype(np.float64), stages[2], rtol=TOL[dtype][0] * 4, atol=TOL[dtype][1] * 4)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_nonpad_kv_seqlen(engine, causal, dtype):
    rng = np.random.default_rng(3)
    q, k, v = data(rng, dtype, *qkv_shapes(False, 4, 2, sq=2, skv=6))
    nonpad = np.array([4, 1], np.int64)  # batch 1: more queries than keys: a fully masked row
    mask = make_mask("bool", rng, 2, 4, 2, 4, dtype)
    got = run(engine, q, k, v, mask, nonpad_kv_seqlen=nonpad, is_causal=causal, opset=24)
    check(got, formula(q, k, v, mask, is_causal=causal, nonpad=nonpad)[0], dtype)


@pytest.mark.parametrize("engine", ENGINES)
def test_fully_masked_rows_are_zero_and_precision(engine):
    rng = np.random.default_rng(4)
    q, k, v = data(rng, np.float16, *qkv_shapes(False, 2, 2, sq=2, skv=2))
    mask = np.array([[False, False], [True, True]])
    y, probs = run(engine, q, k, v, mask, softmax_precision=1, qk_matmul_output_mode=3, return_qk_matmul=True,
                   opset=24)
    assert not np.isnan(y).any() and (y[:, :, 0] == 0).all() and (probs[:, :, 0] == 0).all()
    want, *_, want_probs = formula(q, k, v, mask)
    check(y, want, np.float16)
    check(probs, want_probs, np.float16)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("window", [(2, -1), (1, 1)])
def test_window_version_25(engine, window):
    rng = np.random.default_rng(5)
    q, k, v = data(rng, np.float32, *qkv_shapes(False, 2, 1, sq=4, skv=6))
    got = run(engine, q, k, v, is_causal=1, left_window_size=window[0], right_window_size=window[1], opset=25)
    check(got, formula(q, k, v, is_causal=1, left=window[0], right=window[1])[0], np.float32)


def test_value_of_another_type():
    rng = np.random.default_rng(6)
    q, k = data(rng, np.float32, (1, 2, 3, 4), (1, 2, 5, 4))
    (v,) = data(rng, np.float16, (1, 2, 5, 4))
    mask = np.array([[0, -3, 2, 0, 1]], np.int32)  # an integer mask is added like a float one
    got, present_key, present_value = dsl.attention(q, k, v, mask, return_present=True)
    assert present_value.dtype == np.float16
    check(got, formula(q, k, v, mask.astype(np.float64))[0], np.float32)


Q4, K4, V4 = (np.zeros(s, np.float32) for s in ((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)))
Q3, K3 = np.zeros((2, 3, 32), np.float32), np.zeros((2, 5, 16), np.float32)


@pytest.mark.parametrize("kwargs, match", [
    (dict(q=Q3, k=K4, v=V4), r"Attention.*\(ranks \[3, 4, 4\]\); expected all 3-D"),
    (dict(q=Q3, k=K3, v=K3), r"q_num_heads None with a 3-D Q .*expected a positive q_num_heads"),
    (dict(q=Q3, k=K3, v=K3, q_num_heads=5, kv_num_heads=2), r"Q's hidden size 32 .* not divisible by q_num_heads 5"),
    (dict(q=Q4, k=np.zeros((2, 3, 5, 8), np.float32), v=np.zeros((2, 3, 5, 8), np.float32)),
     r"q_num_heads 4 is not a multiple of kv_num_heads 3"),
    (dict(q=Q4, k=np.zeros((2, 2, 5, 6), np.float32), v=V4), r"K's head size 6 differs from Q's 8"),
    (dict(q=Q4, k=K4, v=V4, q_num_heads=2), r"q_num_heads 2 but Q .* expected 4"),
    (dict(q=Q4, k=K4, v=V4, attn_mask=np.zeros((3, 6), np.float32)), r"attn_mask's last dim 6 .* longer than"),
    (dict(q=Q4, k=K4, v=V4, attn_mask=np.zeros((2, 3, 5), np.float32)), r"attn_mask shape \[2, 3, 5\] is not "
     r"broadcastable to \[2, 4, 3, 5\]"),
    (dict(q=Q4, k=K4, v=V4, past_key=np.zeros((2, 2, 1, 8), np.float32)), r"past_key given without past_value"),
    (dict(q=Q4, k=K4, v=V4, past_key=np.zeros((2, 2, 1, 8), np.float32),
          past_value=np.zeros((2, 3, 1, 8), np.float32)), r"past_value shape \[2, 3, 1, 8\]; expected \[2, 2, "),
    (dict(q=Q4, k=K4, v=V4, past_key=np.zeros((2, 2, 1, 8), np.float32),
          past_value=np.zeros((2, 2, 1, 8), np.float16)), r"past_value has element type float16 but V has float"),
    (dict(q=Q4, k=K4, v=V4, past_key=np.zeros((2, 2, 1, 8), np.float32),
          past_value=np.zeros((2, 2, 1, 8), np.float32), nonpad_kv_seqlen=np.array([1, 1])),
     r"nonpad_kv_seqlen given with past_key"),
    (dict(q=Q4, k=K4, v=V4, nonpad_kv_seqlen=np.array([1, 6])), r"nonpad_kv_seqlen value 6 .* out of range \[0, 5\]"),
    (dict(q=Q4, k=K4, v=V4, nonpad_kv_seqlen=np.array([1])), r"nonpad_kv_seqlen shape \[1\]; expected \[2\]"),
    (dict(q=Q4, k=K4, v=V4, softmax_precision=7), r"softmax_precision 7; expected one of"),
    (dict(q=Q4, k=K4, v=V4, qk_matmul_output_mode=4), r"qk_matmul_output_mode 4; expected 0, 1, 2 or 3"),
    (dict(q=Q4, k=K4, v=V4, is_causal=2), r"is_causal 2; expected 0 or 1"),
    (dict(q=Q4, k=K4, v=V4, softcap=-1.0), r"softcap -1.0; expected a finite value >= 0"),
    (dict(q=Q4, k=K4, v=V4, left_window_size=-2), r"left_window_size -2; expected -1"),
    (dict(q=Q4, k=K4, v=V4.astype(np.int32)), r"input 'V' has type .*int32"),
])
def test_errors(kwargs, match):
    with pytest.raises(dsl.DslError, match=match):
        dsl.attention(**kwargs)


def test_errors_under_jit_and_version_23_has_no_nonpad():
    kernel = dsl.jit(lambda q, k, v: dsl.attention(q, k, v, q_num_heads=2))
    with pytest.raises(dsl.DslError, match=r"Attention.*q_num_heads 2 but Q"):
        kernel(Q4, K4, V4)
    with pytest.raises(dsl.DslError, match=r"nonpad_kv_seqlen.*does not exist at opset version 23"):
        dsl.attention(Q4, K4, V4, nonpad_kv_seqlen=np.array([1, 1]), opset=23)


DECODE = {  # name -> (Q, K, V shapes, past length, attributes): a few query rows per KV head
    "4d mha": ((2, 4, 1, 16), (2, 4, 40, 16), (2, 4, 40, 8), 0, {}),
    "4d gqa causal past": ((1, 8, 1, 16), (1, 2, 1, 16), (1, 2, 1, 16), 39, {"is_causal": 1}),
    "3d gqa": ((2, 2, 8 * 8), (2, 50, 2 * 8), (2, 50, 2 * 4), 0, {"q_num_heads": 8, "kv_num_heads": 2}),
    "3d past": ((1, 1, 4 * 8), (1, 1, 4 * 8), (1, 1, 4 * 8), 30, {"q_num_heads": 4, "kv_num_heads": 4}),
    "4d scale, window": ((1, 2, 3, 8), (1, 2, 60, 8), (1, 2, 60, 8), 0, {"scale": 0.3, "left_window_size": 200}),
}


def _decode_inputs(name, rng):
    qs, ks, vs, past, attrs = DECODE[name]
    q, k, v = data(rng, np.float32, qs, ks, vs)
    past_key = past_value = None
    if past:
        heads = attrs.get("kv_num_heads", ks[1])
        past_key, past_value = data(rng, np.float32, (ks[0], heads, past, 8 if len(ks) == 3 else ks[-1]),
                                    (ks[0], heads, past, 8 if len(ks) == 3 else vs[-1]))
    return q, k, v, past_key, past_value, dict(attrs)


@pytest.mark.parametrize("math", ["fast", "exact"])
@pytest.mark.parametrize("name", list(DECODE))
def test_decode_step_runs_as_one_kernel(name, math):
    """A decode step (no mask input, every key attendable) runs as FewRowsAttention in the JIT and
    matches the formula, with the present K / V outputs."""
    rng = np.random.default_rng(len(name))
    q, k, v, past_key, past_value, attrs = _decode_inputs(name, rng)
    heads = (attrs.get("q_num_heads"), attrs.get("kv_num_heads"))
    arrays = [a for a in (q, k, v, past_key, past_value) if a is not None]

    @dsl.jit(opset=25, math=math)
    def step(*given):
        q, k, v, *past = given
        return dsl.attention(q, k, v, None, *(past or [None, None]), return_present=True, **attrs)
    got = step(*arrays)
    assert "FewRowsAttention" in step.explain(*arrays)
    want = formula(q, k, v, None, past_key, past_value, q_heads=heads[0], kv_heads=heads[1],
                   is_causal=attrs.get("is_causal", 0), scale=attrs.get("scale"), left=attrs.get("left_window_size", -1))
    check(got[0], want[0], np.float32)
    eager = dsl.attention(q, k, v, None, past_key, past_value, return_present=True, **attrs)
    for mine, theirs in zip(got, eager):
        np.testing.assert_allclose(mine, np.asarray(theirs), rtol=1e-5, atol=1e-6)


def test_zero_kv_heads_is_a_dsl_error():
    q, k = np.zeros((1, 0, 1, 8), np.float32), np.zeros((1, 0, 5, 8), np.float32)
    with pytest.raises(dsl.DslError, match="no heads"):
        dsl.attention(q, k, k)


@pytest.mark.parametrize("change", ["mask", "softcap", "float16", "qk output", "causal without past",
                                    "precision", "too many rows"])
def test_other_attention_keeps_the_composite(change):
    rng = np.random.default_rng(1)
    q, k, v = data(rng, np.float32, (1, 2, 1, 8), (1, 2, 30, 8), (1, 2, 30, 8))
    mask, attrs, qk = None, {}, False
    if change == "mask":
        mask = rng.standard_normal((1, 2, 1, 30)).astype(np.float32)
    elif change == "softcap":
        attrs["softcap"] = 5.0
    elif change == "float16":
        q, k, v = (a.astype(np.float16) for a in (q, k, v))
    elif change == "qk output":
        qk = True
    elif change == "causal without past":
        q = rng.standard_normal((1, 2, 2, 8)).astype(np.float32)
        k, v = k[:, :, :2], v[:, :, :2]
        attrs["is_causal"] = 1
    elif change == "precision":
        attrs["softmax_precision"] = 11
    else:
        q = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    arrays = [a for a in (q, k, v, mask) if a is not None]

    @dsl.jit
    def step(*given):
        return dsl.attention(*given, return_qk_matmul=qk, **attrs)
    got = step(*arrays)
    assert "FewRowsAttention" not in step.explain(*arrays)
    want = formula(*[a.astype(np.float32) for a in (q, k, v)], mask, is_causal=attrs.get("is_causal", 0),
                   softcap=attrs.get("softcap", 0.0))
    if qk:
        got, scores = got
        check(scores, want[1], np.float32)
    check(got, want[0], q.dtype.type)
