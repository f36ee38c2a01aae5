"""Tiny-LLM attention, two ways.

1. A padding mask -> Cast -> Unsqueeze [1, 2] -> additive bias -> Softmax, fused in one kernel.
2. A decoder attention block (RMSNorm, Q/K/V projections, rotary embedding, causal attention,
   output projection) written with dsl's primitive ops under @dsl.jit, and the same block as an
   ONNX model built here from the RMSNormalization, RotaryEmbedding and Attention ops (opset
   23) and loaded with dsl.from_onnx; both are checked against plain numpy and timed.
"""
import time

import numpy as np

import dsl

HEADS, HEAD_DIM, EPS = 8, 64, 1e-5
HIDDEN = HEADS * HEAD_DIM


@dsl.jit
def masked_softmax(mask, scores):
    """mask [B, S] (1 = keep, 0 = pad), scores [B, H, S, S] -> attention probabilities."""
    bias = (1.0 - dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])) * -1e4
    return dsl.softmax(scores + bias)


def numpy_masked_softmax(mask, scores):
    bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * np.float32(-1e4)
    logits = scores + bias
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


# ---- 2. the decoder attention block ----------------------------------------------------------
def block_weights(rng, max_positions):
    """Projection weights, the RMSNorm scale and the rotary cos / sin tables [positions, dim / 2]."""
    w = {name: (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)
         for name in ("wq", "wk", "wv", "wo")}
    w["gamma"] = rng.uniform(0.5, 1.5, HIDDEN).astype(np.float32)
    angles = np.arange(max_positions)[:, None] * 10000.0 ** (-np.arange(HEAD_DIM // 2) / (HEAD_DIM // 2))
    w["cos"], w["sin"] = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    return w


def _heads(t, batch, seq):
    """[B, S, hidden] -> [B, heads, S, head_dim]."""
    return dsl.transpose(dsl.reshape(t, [batch, seq, HEADS, HEAD_DIM]), [0, 2, 1, 3])


def _rotate(t, cos, sin):
    """Rotate-half RoPE of [B, heads, S, head_dim] by cos / sin [S, head_dim / 2]."""
    half = HEAD_DIM // 2
    first, second = t[..., :half], t[..., half:]
    return dsl.concat([first * cos - second * sin, first * sin + second * cos], -1)


@dsl.jit
def composite_block(x, wq, wk, wv, wo, gamma, cos, sin, causal):
    """x [B, S, hidden] -> the attention block's output, from primitive ops (one causal additive
    bias ``causal`` [S, S]: 0 or -inf)."""
    batch, seq = x.shape[0], x.shape[1]
    normed = x / dsl.sqrt(dsl.reduce_mean(x * x, [-1]) + EPS) * gamma
    q = _rotate(_heads(dsl.matmul(normed, wq), batch, seq), cos, sin)
    k = _rotate(_heads(dsl.matmul(normed, wk), batch, seq), cos, sin)
    v = _heads(dsl.matmul(normed, wv), batch, seq)
    scores = dsl.matmul(q, dsl.transpose(k, [0, 1, 3, 2])) * (1.0 / HEAD_DIM ** 0.5) + causal
    context = dsl.matmul(dsl.softmax(scores), v)
    return dsl.matmul(dsl.reshape(dsl.transpose(context, [0, 2, 1, 3]), [batch, seq, HIDDEN]), wo)


def onnx_block(batch, seq, weights):
    """The same block as an ONNX model (opset 23): RMSNormalization, MatMul, RotaryEmbedding on
    [B, S, hidden] with num_heads, Attention with is_causal and q_num_heads / kv_num_heads."""
    import onnx
    from onnx import TensorProto, helper
    float_ = TensorProto.FLOAT
    names = ["wq", "wk", "wv", "wo", "gamma", "cos", "sin"]
    inits = [onnx.numpy_helper.from_array(weights[n], n) for n in names]
    inits.append(onnx.numpy_helper.from_array(np.arange(seq, dtype=np.int64)[None].repeat(batch, 0), "positions"))
    nodes = [helper.make_node("RMSNormalization", ["x", "gamma"], ["normed"], axis=-1, epsilon=EPS),
             *[helper.make_node("MatMul", ["normed", w], [f"{w}_out"]) for w in ("wq", "wk", "wv")],
             helper.make_node("RotaryEmbedding", ["wq_out", "cos", "sin", "positions"], ["q"], num_heads=HEADS),
             helper.make_node("RotaryEmbedding", ["wk_out", "cos", "sin", "positions"], ["k"], num_heads=HEADS),
             helper.make_node("Attention", ["q", "k", "wv_out"], ["context"], is_causal=1, q_num_heads=HEADS,
                              kv_num_heads=HEADS),
             helper.make_node("MatMul", ["context", "wo"], ["y"])]
    graph = helper.make_graph(nodes, "attention_block", [helper.make_tensor_value_info("x", float_, [batch, seq, HIDDEN])],
                              [helper.make_tensor_value_info("y", float_, [batch, seq, HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def numpy_block(x, w):
    """The block in float64 numpy."""
    x = x.astype(np.float64)
    batch, seq, _ = x.shape
    normed = x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w["gamma"]

    def heads(t):
        return t.reshape(batch, seq, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)

    def rotate(t):
        cos, sin, half = w["cos"][:seq], w["sin"][:seq], HEAD_DIM // 2
        first, second = t[..., :half], t[..., half:]
        return np.concatenate([first * cos - second * sin, first * sin + second * cos], -1)
    q, k, v = rotate(heads(normed @ w["wq"])), rotate(heads(normed @ w["wk"])), heads(normed @ w["wv"])
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD_DIM)
    scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    context = (p / p.sum(-1, keepdims=True)) @ v
    return context.transpose(0, 2, 1, 3).reshape(batch, seq, HIDDEN) @ w["wo"]


def run_block(rng):
    batch, seq = 2, 128
    weights = block_weights(rng, seq)
    x = rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32)
    causal = np.where(np.tril(np.ones((seq, seq), bool)), 0.0, -np.inf).astype(np.float32)
    args = [x, *(weights[n] for n in ("wq", "wk", "wv", "wo", "gamma")), weights["cos"][:seq], weights["sin"][:seq], causal]
    program = dsl.from_onnx(onnx_block(batch, seq, weights))
    want = numpy_block(x, weights)
    composite, loaded = composite_block(*args), program.run({"x": x})[0]
    for name, got in (("composite @dsl.jit", composite), ("ONNX ops via from_onnx", loaded)):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, err_msg=name)
    np.testing.assert_allclose(loaded, composite, rtol=2e-4, atol=2e-4)
    times = {"composite @dsl.jit": median_ms(composite_block, *args), "ONNX ops (dsl.from_onnx)":
             median_ms(lambda: program.run({"x": x})), "numpy float64": median_ms(numpy_block, x, weights)}
    print(f"attention block B{batch} S{seq} hidden {HIDDEN} ({HEADS} heads): "
          + ", ".join(f"{name} {ms:.2f} ms" for name, ms in times.items()))


def median_ms(fn, *args, repeat=7):
    fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main():
    rng = np.random.default_rng(0)
    batch, heads, seq = 4, 16, 256
    lengths = rng.integers(seq // 2, seq + 1, batch)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    scores = rng.standard_normal((batch, heads, seq, seq)).astype(np.float32)

    print(masked_softmax.executable(mask, scores).explain(source=False))
    report = dsl.compare(masked_softmax, mask, scores, rtol=1e-5, atol=1e-7)
    print(report)
    assert report.ok, report
    np.testing.assert_allclose(masked_softmax(mask, scores), numpy_masked_softmax(mask, scores),
                               rtol=1e-5, atol=1e-7)
    fused, eager = median_ms(masked_softmax, mask, scores), median_ms(numpy_masked_softmax, mask, scores)
    print(f"fused jit {fused:.2f} ms, numpy {eager:.2f} ms, speed-up {eager / fused:.1f}x")
    run_block(rng)


if __name__ == "__main__":
    main()
