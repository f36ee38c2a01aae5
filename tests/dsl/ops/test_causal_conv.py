"""Tests for dsl/ops/causal_conv.py: schema vs onnx, values vs a plain numpy loop on both engines, errors."""
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


def _loop(x, weight, bias, past_state, activation):
    """output[b, c, t] = bias[c] + sum_j weight[c, 0, j] * padded[b, c, t + j], padded = past ++ x; in float64."""
    batch, channels, length = x.shape
    kernel = weight.shape[2]
    x, weight = x.astype(np.float64), weight.astype(np.float64)
    out = np.zeros(x.shape)
    state = np.zeros((batch, channels, kernel - 1))
    for b in range(batch):
        for c in range(channels):
            history = [0.0] * (kernel - 1) if past_state is None else [float(v) for v in past_state[b, c]]
            padded = history + list(x[b, c])
            for t in range(length):
                total = 0.0 if bias is None else float(bias[c])
                for j in range(kernel):
                    total += weight[c, 0, j] * padded[t + j]
                if activation in ("silu", "swish"):
                    total = total / (1 + np.exp(-total))
                out[b, c, t] = total
            state[b, c] = padded[len(padded) - (kernel - 1):]
    return out, state


def _inputs(dt, batch=2, channels=3, length=6, kernel=4, bias=False, past=False, seed=0):
    rng = np.random.default_rng(seed)
    data = {"x": rng.standard_normal((batch, channels, length)), "weight": rng.standard_normal((channels, 1, kernel)),
            "bias": rng.standard_normal(channels) if bias else None,
            "past_state": rng.standard_normal((batch, channels, kernel - 1)) if past else None}
    return {name: None if v is None else v.astype(dt) for name, v in data.items()}


def _both(data, opset, **attrs):
    """(eager, dsl.jit) results of causal_conv_with_state at ``opset`` (absent inputs left out)."""
    names = [n for n, v in data.items() if v is not None]
    args = [data[n] for n in names]
    eager = dsl.causal_conv_with_state(**data, **attrs, opset=opset)
    traced = dsl.jit(lambda *xs: dsl.causal_conv_with_state(**dict(zip(names, xs)), **attrs), opset=opset)(*args)
    return eager, traced


def _close(got, want, dt):
    assert got.dtype == np.dtype(dt), (got.dtype, dt)
    assert got.shape == want.shape, (got.shape, want.shape)
    tol = TOL[dt]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def test_schema_matches_onnx():
    spec, schema = onnx.defs.get_schema("CausalConvWithState", 27), registry.get("CausalConvWithState").schemas
    assert [s.version for s in schema] == [spec.since_version] == [27]
    assert [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs] == \
        [(i.name, i.optional) for i in schema[0].inputs]
    assert {a.name for a in schema[0].attrs} == set(spec.attributes)
    assert schema[0].attr("activation").default == spec.attributes["activation"].default_value.s.decode()
    assert {t.onnx_name for t in schema[0].types} == {"float", "float16", "bfloat16"}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("bias, past", [(False, False), (True, False), (False, True), (True, True)])
def test_matches_the_loop(bias, past, activation, dt, opset):
    data = _inputs(dt, bias=bias, past=past)
    want_out, want_state = _loop(**data, activation=activation)
    for out, state in _both(data, opset, activation=activation):
        _close(out, want_out, dt)
        _close(state, want_state, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [dict(kernel=1), dict(length=1, past=True, bias=True), dict(length=2, kernel=5),
                                   dict(length=2, kernel=5, past=True), dict(batch=1, channels=1, kernel=2)])
def test_shapes(shape, dt):
    data = _inputs(dt, **shape)
    want_out, want_state = _loop(**data, activation="none")
    for out, state in _both(data, 27):
        _close(out, want_out, dt)
        _close(state, want_state, dt)


def test_decode_steps_continue_a_prefill():
    data = _inputs(np.float32, length=7, bias=True)
    full, full_state = dsl.causal_conv_with_state(**data, activation="silu")
    head, state = dsl.causal_conv_with_state(data["x"][:, :, :5], data["weight"], data["bias"], activation="silu")
    step = dsl.jit(lambda x, w, b, s: dsl.causal_conv_with_state(x, w, b, s, activation="silu"))
    pieces = [head]
    for t in (5, 6):
        out, state = step(data["x"][:, :, t:t + 1], data["weight"], data["bias"], state)
        pieces.append(out)
    np.testing.assert_allclose(np.concatenate(pieces, axis=2), full, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(state, full_state)
    np.testing.assert_array_equal(state, data["x"][:, :, 4:])


@pytest.mark.parametrize("change, activation, pattern", [
    ({}, "relu", r"activation 'relu'; expected one of \['none', 'silu', 'swish'\]"),
    ({"x": np.zeros((3, 6), np.float32)}, "none", r"input shape \[3, 6\] \(rank 2\); expected rank 3"),
    ({"weight": np.zeros((3, 4), np.float32)}, "none", r"weight shape \[3, 4\] \(rank 2\); expected rank 3"),
    ({"weight": np.zeros((2, 1, 4), np.float32)}, "none", r"weight shape \[2, 1, 4\]; expected \[3, 1, k\]"),
    ({"weight": np.zeros((3, 3, 4), np.float32)}, "none", r"weight shape \[3, 3, 4\]; expected \[3, 1, k\]"),
    ({"weight": np.zeros((3, 1, 0), np.float32)}, "none", r"weight shape \[3, 1, 0\]; expected .*k >= 1"),
    ({"bias": np.zeros((4,), np.float32)}, "none", r"bias shape \[4\]; expected \[3\] \(channels\)"),
    ({"bias": np.zeros((3, 1), np.float32)}, "none", r"bias shape \[3, 1\] \(rank 2\); expected rank 1"),
    ({"past_state": np.zeros((2, 3, 4), np.float32)}, "none",
     r"past_state shape \[2, 3, 4\]; expected \[2, 3, 3\] \(batch_size, channels, k - 1\)"),
    ({"past_state": np.zeros((1, 3, 3), np.float32)}, "none", r"past_state shape \[1, 3, 3\]; expected \[2, 3, 3\]"),
])
def test_invalid_inputs_raise(change, activation, pattern):
    data = {**_inputs(np.float32), **change}
    with pytest.raises(dsl.DslError, match=rf"^CausalConvWithState: {pattern}"):
        dsl.causal_conv_with_state(**data, activation=activation)
    names = [n for n, v in data.items() if v is not None]
    with pytest.raises(dsl.DslError, match=rf"^CausalConvWithState \(node '\w+'\): {pattern}"):
        dsl.jit(lambda *xs: dsl.causal_conv_with_state(**dict(zip(names, xs)), activation=activation))(
            *[data[n] for n in names])


def test_invalid_types_and_opset():
    data = _inputs(np.float32, bias=True)
    with pytest.raises(dsl.DTypeError, match=r"CausalConvWithState: input 'bias' has element type float16"):
        dsl.causal_conv_with_state(**{**data, "bias": data["bias"].astype(np.float16)})
    with pytest.raises(dsl.DTypeError, match=r"input 'input' has type .*double.*expected one of"):
        dsl.causal_conv_with_state(**{n: v.astype(np.float64) for n, v in data.items() if v is not None})
    with pytest.raises(dsl.UnsupportedError, match=r"CausalConvWithState: not defined at opset 26"):
        dsl.causal_conv_with_state(**data, opset=26)


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_symbolic_dims_export_and_run():
    data = _inputs(np.float32, bias=True)
    f = dsl.jit(lambda x, w, b: dsl.causal_conv_with_state(x, w, b), opset=27)
    model = f.to_onnx(dsl.TensorType(dsl.float32, ("n", 3, "L")), data["weight"], data["bias"])
    onnx.checker.check_model(model, full_check=True)
    assert [_dims(o) for o in model.graph.output] == [["n", 3, "L"], ["n", 3, 3]]
    program = dsl.from_onnx(model)
    want = _loop(**data, activation="none")
    for engine in ("jit", "numpy"):
        got = program.run(dict(zip(program.input_names, [data["x"], data["weight"], data["bias"]])), engine=engine)
        for g, w in zip(got, want):
            _close(g, w, np.float32)
