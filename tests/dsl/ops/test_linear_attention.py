"""Tests for dsl/ops/linear_attention.py: schema vs onnx, values vs a plain numpy loop on both engines, errors."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx.defs
import pytest

import dsl
from dsl.ops import registry

OPSETS = [27, 28]
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
TOL = {np.float32: 1e-5, np.float16: 2e-3, ml_dtypes.bfloat16: 2e-2}
RULES = ["linear", "gated", "delta", "gated_delta"]


def _loop(query, key, value, past_state, decay, beta, q_heads, kv_heads, rule, scale):
    """The spec's recurrence token by token, one (batch, KV head) at a time, in float64."""
    q, k, v = (x.astype(np.float64) for x in (query, key, value))
    past = past_state
    batch, seq, _ = q.shape
    d_k, d_v = q.shape[2] // q_heads, v.shape[2] // kv_heads
    group = q_heads // kv_heads
    scale = scale or 1 / np.sqrt(d_k)
    out = np.zeros((batch, seq, q_heads * d_v))
    state = np.zeros((batch, kv_heads, d_k, d_v)) if past is None else past.astype(np.float64).copy()
    for b in range(batch):
        for h in range(kv_heads):
            s = state[b, h]
            for t in range(seq):
                k_t, v_t = k[b, t, h * d_k:(h + 1) * d_k], v[b, t, h * d_v:(h + 1) * d_v]
                if rule in ("gated", "gated_delta"):
                    row = decay[b, t].astype(np.float64)
                    g = row[h * d_k:(h + 1) * d_k] if row.size == kv_heads * d_k else row[h]
                    s = np.exp(g).reshape(-1, 1) * s
                if rule in ("delta", "gated_delta"):
                    rate = float(beta[b, t, h if beta.shape[2] == kv_heads else 0])
                    s = s + rate * np.outer(k_t, v_t - s.T @ k_t)
                else:
                    s = s + np.outer(k_t, v_t)
                for hq in range(h * group, (h + 1) * group):
                    out[b, t, hq * d_v:(hq + 1) * d_v] = scale * (q[b, t, hq * d_k:(hq + 1) * d_k] @ s)
            state[b, h] = s
    return out, state


def _inputs(rule, dt, batch=2, seq=3, q_heads=4, kv_heads=2, d_k=3, d_v=2, per_head_decay=False,
            scalar_beta=False, past=False, seed=0):
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((batch, seq, kv_heads, d_k))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)  # L2-normalized keys, as the delta rules expect
    data = {"query": rng.standard_normal((batch, seq, q_heads * d_k)), "key": k.reshape(batch, seq, -1),
            "value": rng.standard_normal((batch, seq, kv_heads * d_v)),
            "past_state": rng.standard_normal((batch, kv_heads, d_k, d_v)) if past else None,
            "decay": -rng.random((batch, seq, kv_heads if per_head_decay else kv_heads * d_k))
            if rule in ("gated", "gated_delta") else None,
            "beta": rng.random((batch, seq, 1 if scalar_beta else kv_heads))
            if rule in ("delta", "gated_delta") else None}
    return {name: None if x is None else x.astype(dt) for name, x in data.items()}


def _both(fn, data, opset=None):
    """(eager at ``opset``, dsl.jit at ``opset``) results of ``fn(**data)`` (absent inputs left out)."""
    names = [n for n, x in data.items() if x is not None]
    args = [data[n] for n in names]
    eager = fn(**dict(zip(names, args)), opset=opset)
    return eager, dsl.jit(lambda *xs: fn(**dict(zip(names, xs))), opset=opset or dsl.LATEST_OPSET)(*args)


def _close(got, want, dt):
    assert got.dtype == np.dtype(dt), (got.dtype, dt)
    assert got.shape == want.shape, (got.shape, want.shape)
    tol = TOL[dt]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


def test_schema_matches_onnx():
    spec, schema = onnx.defs.get_schema("LinearAttention", 27), registry.get("LinearAttention").schemas
    assert [s.version for s in schema] == [spec.since_version] == [27]
    assert [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs] == \
        [(i.name, i.optional) for i in schema[0].inputs]
    assert {a.name for a in schema[0].attrs} == set(spec.attributes)
    assert {t.onnx_name for t in schema[0].types} == {"float", "float16", "bfloat16"}
    with pytest.raises(dsl.UnsupportedError, match="LinearAttention: not defined at opset 26"):
        registry.get("LinearAttention").schema(26)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("rule", RULES)
def test_rules_match_the_loop(rule, dt, opset):
    data = _inputs(rule, dt, past=True)
    want_out, want_state = _loop(**data, q_heads=4, kv_heads=2, rule=rule, scale=0.0)
    for out, state in _both(lambda opset=None, **xs: dsl.linear_attention(
            **xs, q_num_heads=4, kv_num_heads=2, update_rule=rule, opset=opset), data, opset):
        _close(out, want_out, dt)
        _close(state, want_state, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("variant", [
    dict(per_head_decay=True), dict(scalar_beta=True), dict(q_heads=2, kv_heads=2), dict(q_heads=4, kv_heads=1),
    dict(seq=1, past=True), dict(seq=1), dict(d_k=4, d_v=5, q_heads=3, kv_heads=3)])
def test_variants_and_scale(dt, variant):
    q_heads, kv_heads = variant.get("q_heads", 4), variant.get("kv_heads", 2)
    data = _inputs("gated_delta", dt, **variant)
    for scale in (0.0, 0.25):
        want_out, want_state = _loop(**data, q_heads=q_heads, kv_heads=kv_heads, rule="gated_delta", scale=scale)
        for out, state in _both(lambda opset=None, **xs: dsl.linear_attention(
                **xs, q_num_heads=q_heads, kv_num_heads=kv_heads, scale=scale, chunk_size=2, opset=opset), data):
            _close(out, want_out, dt)
            _close(state, want_state, dt)


def test_state_type_follows_past_state_and_decode_continues_prefill():
    data = _inputs("gated_delta", np.float16, seq=4)
    out, state = dsl.linear_attention(**data, q_num_heads=4, kv_num_heads=2)
    assert state.dtype == np.float16  # no past_state: present_state takes query's type
    first = {n: None if x is None else x[:, :3] for n, x in data.items()}
    first["past_state"] = np.zeros((2, 2, 3, 2), np.float32)
    head, mid = dsl.linear_attention(**first, q_num_heads=4, kv_num_heads=2)
    assert mid.dtype == np.float32
    last = {n: None if x is None else x[:, 3:] for n, x in data.items()}
    last["past_state"] = mid
    tail, end = dsl.jit(lambda **xs: dsl.linear_attention(**xs, q_num_heads=4, kv_num_heads=2))(**last)
    _, want_state = _loop(**data, q_heads=4, kv_heads=2, rule="gated_delta", scale=0.0)
    np.testing.assert_allclose(np.concatenate([head, tail], 1).astype(np.float64), out.astype(np.float64), atol=3e-3)
    np.testing.assert_allclose(end, want_state, rtol=1e-3, atol=1e-3)


def _call(data, **attrs):
    attrs = {"q_num_heads": 4, "kv_num_heads": 2, **attrs}
    return dsl.linear_attention(**data, **attrs)


@pytest.mark.parametrize("change, attrs, pattern", [
    ({}, {"update_rule": "softmax"}, r"update_rule 'softmax'; expected one of \['linear'"),
    ({}, {"q_num_heads": 3}, r"q_num_heads 3, kv_num_heads 2; expected positive head counts"),
    ({}, {"kv_num_heads": 0}, r"q_num_heads 4, kv_num_heads 0; expected positive"),
    ({}, {"chunk_size": 0}, r"chunk_size 0; expected a positive int"),
    ({}, {"scale": float("nan")}, r"scale nan; expected a finite float"),
    ({"decay": None}, {}, r"update_rule 'gated_delta' requires the decay input"),
    ({"beta": None}, {}, r"update_rule 'gated_delta' requires the beta input"),
    ({}, {"update_rule": "gated"}, r"beta given with update_rule 'gated'; expected no beta"),
    ({}, {"update_rule": "delta"}, r"decay given with update_rule 'delta'; expected no decay"),
    ({"query": np.zeros((2, 3, 4, 3), np.float32)}, {}, r"query shape \[2, 3, 4, 3\] \(rank 4\); expected rank 3"),
    ({"past_state": np.zeros((2, 2, 3), np.float32)}, {}, r"past_state shape \[2, 2, 3\] \(rank 3\); expected rank 4"),
    ({"query": np.zeros((2, 3, 10), np.float32)}, {}, r"query's last dim 10 .* not divisible by q_num_heads 4"),
    ({"key": np.zeros((2, 3, 8), np.float32)}, {}, r"key's head size 4 .* differs from query's 3"),
    ({"value": np.zeros((2, 3, 5), np.float32)}, {}, r"value's last dim 5 .* not divisible by kv_num_heads 2"),
    ({"key": np.zeros((2, 4, 6), np.float32)}, {}, r"key shape \[2, 4, 6\]; expected \(batch, sequence\) = \[2, 3\]"),
    ({"beta": np.zeros((1, 3, 2), np.float32)}, {}, r"beta shape \[1, 3, 2\]; expected \(batch, sequence\)"),
    ({"past_state": np.zeros((2, 2, 2, 3), np.float32)}, {},
     r"past_state shape \[2, 2, 2, 3\]; expected \[2, 2, 3, 2\] \(batch, kv_num_heads, d_k, d_v\)"),
    ({"decay": np.zeros((2, 3, 4), np.float32)}, {}, r"decay shape \[2, 3, 4\]; expected last dim 6 .* or 2"),
    ({"beta": np.zeros((2, 3, 3), np.float32)}, {}, r"beta shape \[2, 3, 3\]; expected last dim 2 .* or 1"),
])
def test_invalid_inputs_raise(change, attrs, pattern):
    data = {**_inputs("gated_delta", np.float32), **change}
    with pytest.raises(dsl.DslError, match=rf"^LinearAttention: {pattern}"):
        _call(data, **attrs)
    names = [n for n, x in data.items() if x is not None]
    with pytest.raises(dsl.DslError, match=rf"^LinearAttention \(node '\w+'\): {pattern}"):
        dsl.jit(lambda *xs: _call(dict(zip(names, xs)), **attrs))(*[data[n] for n in names])


def test_invalid_types_and_missing_heads():
    data = _inputs("linear", np.float32)
    with pytest.raises(dsl.DTypeError, match=r"LinearAttention: input 'value' has element type float16"):
        _call({**data, "value": data["value"].astype(np.float16)}, update_rule="linear")
    with pytest.raises(dsl.DTypeError, match=r"input 'query' has type .*double.*expected one of"):
        _call({n: None if x is None else x.astype(np.float64) for n, x in data.items()}, update_rule="linear")
    with pytest.raises(dsl.DslError, match=r"LinearAttention: missing required attribute 'q_num_heads'"):
        dsl.ops.registry.bind("LinearAttention", 27, [dsl.TensorType(dsl.float32, (1, 1, 1))] * 3, [None] * 3,
                              {"kv_num_heads": 1})
    with pytest.raises(dsl.UnsupportedError, match=r"LinearAttention: not defined at opset 26"):
        _call(data, update_rule="linear", opset=26)


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_symbolic_dims_export_and_run():
    data = _inputs("linear", np.float32)
    f = dsl.jit(lambda q, k, v: dsl.linear_attention(q, k, v, q_num_heads=4, kv_num_heads=2, update_rule="linear"),
                opset=27)
    model = f.to_onnx(*(dsl.TensorType(dsl.float32, ("b", "t", data[n].shape[2])) for n in ("query", "key", "value")))
    onnx.checker.check_model(model, full_check=True)
    assert [_dims(o) for o in model.graph.output] == [["b", "t", 8], ["b", 2, 3, 2]]
    program = dsl.from_onnx(model)
    want = _loop(**data, q_heads=4, kv_heads=2, rule="linear", scale=0.0)
    for engine in ("jit", "numpy"):
        got = program.run(dict(zip(program.input_names, [data["query"], data["key"], data["value"]])), engine=engine)
        for g, w in zip(got, want):
            _close(g, w, np.float32)
