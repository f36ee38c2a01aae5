"""A tiny Llama-style decoder with int4 weights, generating greedily three ways that must agree
token for token: dsl's JIT, dsl's numpy engine, and plain numpy.

2 layers, hidden 1024, 8 query heads sharing 2 KV heads (GQA), RMSNorm, rotary embeddings,
a SwiGLU MLP, every projection an int4 weight [N, K] in blocks of 32 along K with a float32
scale per block (the layout of com.microsoft MatMulNBits and of QDQ int4 LLM exports), and a
KV cache of fixed length (so each step has one shape: prefill compiles once, decode once).

Each layer step is a @dsl.jit function; its projections are
``matmul(h, transpose(dequantize_linear(w, scale, axis=1, block_size=32)))``, which the JIT runs
as DequantMatMul: the packed int4 bytes are read in place, never dequantized in full. The same
functions exported with ``to_onnx`` run on onnxruntime (tokens/s printed beside dsl's).

    python examples/tiny_llm_decoder.py [--tokens 64]
"""
import argparse
import time

import numpy as np

import dsl

HIDDEN, HEADS, KV_HEADS, LAYERS, FFN, VOCAB = 1024, 8, 2, 2, 2816, 2048
HEAD = HIDDEN // HEADS
GROUP = HEADS // KV_HEADS
BLOCK = 32
PROMPT = 16
EPS = 1e-5


# ---- weights --------------------------------------------------------------------------------
def quantized(rng, n, k):
    """Random weights [n, k] quantized to int4 blocks of 32 along k: (codes, scale, float32 values)."""
    w = rng.standard_normal((n, k)).astype(np.float32) / np.sqrt(k)
    scale = np.abs(w.reshape(n, k // BLOCK, BLOCK)).max(axis=2) / 7 + 1e-8
    codes = np.clip(np.rint(w / np.repeat(scale, BLOCK, axis=1)), -8, 7)
    dense = (codes * np.repeat(scale, BLOCK, axis=1)).astype(np.float32)
    return codes.astype(dsl.int4.np_dtype), scale.astype(np.float32), dense


def make_model(seed=0):
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(LAYERS):
        layer = {"attn_norm": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
                 "mlp_norm": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)}
        for name, n, k in (("q", HIDDEN, HIDDEN), ("k", KV_HEADS * HEAD, HIDDEN), ("v", KV_HEADS * HEAD, HIDDEN),
                           ("o", HIDDEN, HIDDEN), ("gate", FFN, HIDDEN), ("up", FFN, HIDDEN), ("down", HIDDEN, FFN)):
            layer[name] = quantized(rng, n, k)
        layers.append(layer)
    embed = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    final_norm = (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
    return layers, embed, final_norm, quantized(rng, VOCAB, HIDDEN)


def rope_tables(positions):
    inv = 1.0 / 10000 ** (np.arange(0, HEAD, 2, dtype=np.float64) / HEAD)
    angles = np.outer(positions, inv)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)  # [T, HEAD / 2]


def attention_mask(start, length, cache):
    """[T, cache + T] additive mask: cache slots below ``start`` and the new tokens up to each one."""
    mask = np.full((length, cache + length), -np.inf, np.float32)
    mask[:, :start] = 0
    mask[:, cache:] = np.where(np.tril(np.ones((length, length), bool)), 0, -np.inf)
    return mask


# ---- the step, written with dsl ops (traced by @dsl.jit) -------------------------------------
def linear(x, w, s):
    """x @ W^T for int4 W [N, K] (blocks along K): the run-time form the JIT reads in place."""
    return dsl.matmul(x, dsl.transpose(dsl.dequantize_linear(w, s, axis=1, block_size=BLOCK), [1, 0]))


def linear_kn(x, w, s):
    """x @ W for int4 W [K, N] (blocks along K = axis 0): the QDQ form onnxruntime fuses into
    MatMulNBits when W is an initializer (dsl repacks such a constant once)."""
    return dsl.matmul(x, dsl.dequantize_linear(w, s, axis=0, block_size=BLOCK))


def rms_norm(x, weight):
    return x / dsl.sqrt(dsl.reduce_mean(x * x, [-1]) + EPS) * weight


def rotate(x, cos, sin):
    """x [heads, T, HEAD] rotated by position (halves, as Llama): cos / sin [T, HEAD / 2]."""
    x1, x2 = x[..., :HEAD // 2], x[..., HEAD // 2:]
    return dsl.concat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def decoder_layer(x, k_cache, v_cache, mask, cos, sin, attn_norm, mlp_norm, wq, sq, wk, sk, wv, sv, wo, so,
          wg, sg, wu, su, wd, sd, linear=linear):
    """One layer on T new tokens x [T, HIDDEN] against a KV cache [KV_HEADS, C, HEAD]: returns
    the layer's output and the new tokens' keys and values [KV_HEADS, T, HEAD]."""
    t = x.shape[0]
    h = rms_norm(x, attn_norm)
    q = dsl.transpose(dsl.reshape(linear(h, wq, sq), [t, HEADS, HEAD]), [1, 0, 2])
    k = dsl.transpose(dsl.reshape(linear(h, wk, sk), [t, KV_HEADS, HEAD]), [1, 0, 2])
    v = dsl.transpose(dsl.reshape(linear(h, wv, sv), [t, KV_HEADS, HEAD]), [1, 0, 2])
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    keys = dsl.concat([k_cache, k], 1)                                   # [KV, C + T, HEAD]
    values = dsl.concat([v_cache, v], 1)
    grouped = dsl.reshape(q, [KV_HEADS, GROUP * t, HEAD])                # query heads of a KV head
    scores = dsl.matmul(grouped, dsl.transpose(keys, [0, 2, 1])) * (1.0 / HEAD ** 0.5)
    scores = dsl.reshape(scores, [KV_HEADS, GROUP, t, -1]) + mask
    probs = dsl.reshape(dsl.softmax(scores, -1), [KV_HEADS, GROUP * t, -1])
    attended = dsl.reshape(dsl.matmul(probs, values), [HEADS, t, HEAD])
    x = x + linear(dsl.reshape(dsl.transpose(attended, [1, 0, 2]), [t, HIDDEN]), wo, so)
    h = rms_norm(x, mlp_norm)
    gate = linear(h, wg, sg)
    x = x + linear(gate * dsl.sigmoid(gate) * linear(h, wu, su), wd, sd)
    return x, k, v


layer_step = dsl.jit(decoder_layer, opset=23)
layer_step_kn = dsl.jit(lambda *args: decoder_layer(*args, linear=linear_kn), opset=23)


@dsl.jit(opset=23)
def decode_step(token, mask, cos, sin, write, k0, v0, k1, v1, embed, final_norm, wh, sh, *weights):
    """One whole decode step as one program (exported to ONNX below): the token's embedding,
    both layers (QDQ W [K, N]), each cache written at the token's slot (``write`` [1, C, 1]),
    the LM head and the greedy next token. Returns (next token [1, 1], the four new caches)."""
    x = dsl.gather(embed, token, 0)                                      # [1, HIDDEN]
    caches = []
    for layer, (k_cache, v_cache) in enumerate(((k0, v0), (k1, v1))):
        x, k, v = decoder_layer(x, k_cache, v_cache, mask, cos, sin, *weights[16 * layer:16 * layer + 16],
                                linear=linear_kn)
        caches += [dsl.where(write, k, k_cache), dsl.where(write, v, v_cache)]
    logits = linear_kn(rms_norm(x, final_norm), wh, sh)
    return (dsl.argmax(logits, -1), *caches)


@dsl.jit(opset=23)
def head(x, norm, w, s):
    """Logits of the last token: x [1, HIDDEN] -> [1, VOCAB]."""
    return linear(rms_norm(x, norm), w, s)


# ---- the same step in plain numpy -------------------------------------------------------------
def numpy_layer(x, k_cache, v_cache, mask, cos, sin, layer):
    def norm(y, w):
        return y / np.sqrt(np.mean(y * y, axis=-1, keepdims=True) + EPS) * w

    def rot(y):
        y1, y2 = y[..., :HEAD // 2], y[..., HEAD // 2:]
        return np.concatenate([y1 * cos - y2 * sin, y2 * cos + y1 * sin], -1)

    t = x.shape[0]
    w = {name: value[2] for name, value in layer.items() if isinstance(value, tuple)}
    h = norm(x, layer["attn_norm"])
    q = rot((h @ w["q"].T).reshape(t, HEADS, HEAD).transpose(1, 0, 2))
    k = rot((h @ w["k"].T).reshape(t, KV_HEADS, HEAD).transpose(1, 0, 2))
    v = (h @ w["v"].T).reshape(t, KV_HEADS, HEAD).transpose(1, 0, 2)
    keys, values = np.concatenate([k_cache, k], 1), np.concatenate([v_cache, v], 1)
    scores = (q.reshape(KV_HEADS, GROUP * t, HEAD) @ keys.transpose(0, 2, 1)) * (1.0 / HEAD ** 0.5)
    scores = scores.reshape(KV_HEADS, GROUP, t, -1) + mask
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = (scores / scores.sum(-1, keepdims=True)).reshape(KV_HEADS, GROUP * t, -1)
    attended = (probs @ values).reshape(HEADS, t, HEAD).transpose(1, 0, 2).reshape(t, HIDDEN)
    x = x + attended @ w["o"].T
    h = norm(x, layer["mlp_norm"])
    gate = h @ w["gate"].T
    x = x + (gate / (1 + np.exp(-gate)) * (h @ w["up"].T)) @ w["down"].T
    return x.astype(np.float32), k, v


# ---- generation -------------------------------------------------------------------------------
def generate(model, prompt, tokens, engine):
    """Greedy decoding; ``engine``: "jit", "numpy" (dsl's engines) or "plain" (numpy above).
    Returns (token ids, prefill seconds, decode seconds)."""
    layers, embed, final_norm, lm_head = model
    cache_len = len(prompt) + tokens
    caches = [(np.zeros((KV_HEADS, cache_len, HEAD), np.float32), np.zeros((KV_HEADS, cache_len, HEAD), np.float32))
              for _ in layers]
    packed = [{name: (dsl.Tensor.from_numpy(v[0]), v[1]) for name, v in layer.items() if isinstance(v, tuple)}
              for layer in layers]
    lm = (dsl.Tensor.from_numpy(lm_head[0]), lm_head[1])
    out, ids, position = [], np.asarray(prompt), 0
    progress = _progress(tokens)
    start = time.perf_counter()
    prefill = None
    for step in range(tokens):
        x = embed[ids]
        t = len(ids)
        cos, sin = rope_tables(np.arange(position, position + t))
        mask = attention_mask(position, t, cache_len)
        for layer, weights, (k_cache, v_cache) in zip(layers, packed, caches):
            if engine == "plain":
                x, k, v = numpy_layer(x, k_cache, v_cache, mask, cos, sin, layer)
            else:
                args = (x, k_cache, v_cache, mask, cos, sin, layer["attn_norm"], layer["mlp_norm"],
                        *[a for name in ("q", "k", "v", "o", "gate", "up", "down") for a in weights[name]])
                x, k, v = _run(layer_step, args, engine)
            k_cache[:, position:position + t], v_cache[:, position:position + t] = k, v
        last = x[-1:]
        if engine == "plain":
            h = last / np.sqrt(np.mean(last * last, axis=-1, keepdims=True) + EPS) * final_norm
            logits = h @ lm_head[2].T
        else:
            (logits,) = _run(head, (last, final_norm, *lm), engine)
        token = int(np.argmax(logits[0]))
        out.append(token)
        position += t
        ids = np.asarray([token])
        if prefill is None:
            prefill = time.perf_counter() - start
        progress.update(1)
    progress.close()
    return out, prefill, time.perf_counter() - start - prefill


def _run(fn, args, engine):
    if engine == "jit":
        result = fn(*args)
        return result if isinstance(result, tuple) else (result,)
    return tuple(fn.lower(*args).run(list(args), engine="numpy"))


def _progress(total):
    try:
        from tqdm import tqdm
        return tqdm(total=total, leave=False)
    except ImportError:
        class Quiet:
            def update(self, _):
                pass

            def close(self):
                pass
        return Quiet()


def onnx_decoder(model, prompt, tokens, expected):
    """The whole decoder as one ONNX model: ``decode_step`` exported by dsl (``to_onnx``), every
    weight an initializer (int4 W [K, N] in QDQ form, which onnxruntime fuses into MatMulNBits),
    the token, mask, rotary tables, write slot and caches its inputs. The prompt's caches come
    from dsl's JIT prefill; then onnxruntime and ``dsl.from_onnx`` each decode ``tokens - 1``
    tokens greedily through the model. dsl must give ``expected`` (the JIT's tokens);
    onnxruntime's kernels sum in another order, so a near tie between two logits may flip a
    token and the rest then follows another path. Returns ({engine: decode tokens/s}, how many
    of the tokens onnxruntime gave as expected before the first that differs), or None without
    onnx / onnxruntime."""
    try:
        import onnxruntime as ort
        from dsl.onnx_io import tensor_to_proto
    except ImportError:
        return None
    layers, embed, final_norm, lm_head = model
    cache_len = len(prompt) + tokens
    first, caches = prefill(model, prompt, cache_len)
    kn = lambda pair: [np.ascontiguousarray(a.T) for a in pair[:2]]  # noqa: E731  (W [K, N], scale [K / 32, N])
    constants = [embed, final_norm, *kn(lm_head)]
    for layer in layers:
        constants += [layer["attn_norm"], layer["mlp_norm"]] + [a for name in ("q", "k", "v", "o", "gate", "up", "down")
                                                                for a in kn(layer[name])]
    dynamic = _step_inputs(first, len(prompt), cache_len, caches)
    exported = decode_step.to_onnx(*dynamic, *constants)
    graph = exported.graph
    inputs = list(graph.input)
    graph.initializer.extend(tensor_to_proto(value.name, array) for value, array in zip(inputs[9:], constants))
    del graph.input[:]
    graph.input.extend(inputs[:9])
    names = [value.name for value in inputs[:9]]
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(exported.SerializeToString(), options, providers=["CPUExecutionProvider"])
    program = dsl.from_onnx(exported)
    results, agreed = {}, {}
    for name, run in (("onnxruntime", lambda feeds: session.run(None, feeds)), ("dsl", program.run)):
        run(dict(zip(names, dynamic)))  # (warm-up: dsl compiles its kernels on the first call)
        token, state, ids = first, [c.copy() for c in caches], [first]
        begin = time.perf_counter()
        for position in range(len(prompt), len(prompt) + tokens - 1):
            feeds = dict(zip(names, _step_inputs(token, position, cache_len, state)))
            next_token, *state = run(feeds)
            token = int(next_token.reshape(-1)[0])
            ids.append(token)
        results[name] = (tokens - 1) / (time.perf_counter() - begin)
        agreed[name] = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b), len(expected))
    assert agreed["dsl"] == len(expected), ("dsl.from_onnx", agreed)  # (dsl's kernels, the same tokens)
    return results, agreed["onnxruntime"]


def _step_inputs(token, position, cache_len, caches):
    """decode_step's run-time inputs for ``token`` at ``position``."""
    cos, sin = rope_tables(np.arange(position, position + 1))
    write = (np.arange(cache_len) == position).reshape(1, cache_len, 1)
    return (np.array([token], np.int64), attention_mask(position, 1, cache_len), cos, sin, write, *caches)


def prefill(model, prompt, cache_len):
    """The prompt through dsl's JIT layers: (the first generated token, the four caches)."""
    layers, embed, final_norm, lm_head = model
    caches = [np.zeros((KV_HEADS, cache_len, HEAD), np.float32) for _ in range(2 * len(layers))]
    t = len(prompt)
    cos, sin = rope_tables(np.arange(t))
    x = embed[np.asarray(prompt)]
    for i, layer in enumerate(layers):
        weights = [a for name in ("q", "k", "v", "o", "gate", "up", "down")
                   for a in (dsl.Tensor.from_numpy(layer[name][0]), layer[name][1])]
        x, k, v = layer_step(x, caches[2 * i], caches[2 * i + 1], attention_mask(0, t, cache_len), cos, sin,
                             layer["attn_norm"], layer["mlp_norm"], *weights)
        caches[2 * i][:, :t], caches[2 * i + 1][:, :t] = k, v
    logits = head(x[-1:], final_norm, dsl.Tensor.from_numpy(lm_head[0]), lm_head[1])
    return int(np.argmax(logits[0])), caches


def onnx_tokens_per_second(model, prompt, tokens):
    """A decode step of one layer in the QDQ form (W [K, N]), exported by dsl (``to_onnx``) with
    the layer's weights and norms made initializers, run by onnxruntime and by ``dsl.from_onnx``:
    tokens/s of the layers (the LM head left out). None without onnx / onnxruntime."""
    try:
        import onnxruntime as ort
        from dsl.onnx_io import tensor_to_proto
    except ImportError:
        return None
    layers, embed, _, _ = model
    cache_len = len(prompt) + tokens
    first = layers[0]
    weights = [np.ascontiguousarray(a.T) for name in ("q", "k", "v", "o", "gate", "up", "down") for a in first[name][:2]]
    cos, sin = rope_tables(np.arange(len(prompt), len(prompt) + 1))
    args = (embed[:1], np.zeros((KV_HEADS, cache_len, HEAD), np.float32), np.zeros((KV_HEADS, cache_len, HEAD), np.float32),
            attention_mask(len(prompt), 1, cache_len), cos, sin, first["attn_norm"], first["mlp_norm"], *weights)
    exported = layer_step_kn.to_onnx(*args)
    graph = exported.graph
    inputs = list(graph.input)  # (the function's parameters, in order: x, caches, mask, cos, sin first)
    graph.initializer.extend(tensor_to_proto(value.name, array) for value, array in zip(inputs[6:], args[6:]))
    del graph.input[:]
    graph.input.extend(inputs[:6])
    feeds = {value.name: array for value, array in zip(inputs[:6], args[:6])}
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(exported.SerializeToString(), options, providers=["CPUExecutionProvider"])
    program = dsl.from_onnx(exported)
    results = {}
    for name, step in (("onnxruntime", lambda: session.run(None, feeds)), ("dsl", lambda: program.run(feeds))):
        step()
        begin = time.perf_counter()
        for _ in range(10):
            step()
        results[name] = 10 / ((time.perf_counter() - begin) * LAYERS)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    model = make_model()
    prompt = list(np.random.default_rng(1).integers(0, VOCAB, PROMPT))
    results = {}
    generate(model, prompt, 2, "jit")  # (compiles the prefill and the decode step, then cached)
    for engine in ("jit", "numpy", "plain"):
        ids, prefill, decode = generate(model, prompt, args.tokens, engine)
        results[engine] = ids
        print(f"{engine:6s} prefill {PROMPT / prefill:8.1f} tokens/s, decode {(args.tokens - 1) / max(decode, 1e-9):7.1f} "
              f"tokens/s")
    assert results["jit"] == results["numpy"] == results["plain"], results
    print(f"{args.tokens} tokens, identical from dsl's JIT, dsl's numpy engine and plain numpy: {results['jit'][:12]} ...")
    timing = onnx_tokens_per_second(model, prompt, args.tokens)
    if timing:
        print("decode, the layers' steps as one exported ONNX model (weights initializers), tokens/s: " +
              ", ".join(f"{k} {v:.1f}" for k, v in timing.items()))
    whole = onnx_decoder(model, prompt, args.tokens, results["jit"])
    if whole:
        speed, agreed = whole
        print("decode, the whole decoder as one exported ONNX model (embedding, layers, caches, LM head, argmax), "
              "tokens/s: " + ", ".join(f"{k} {v:.1f}" for k, v in speed.items()) +
              f" (dsl {speed['dsl'] / speed['onnxruntime']:.2f}x onnxruntime); dsl.from_onnx gave the JIT's "
              f"{args.tokens} tokens, onnxruntime the first {agreed}")


if __name__ == "__main__":
    main()
