"""The layer ops of a transformer block as users call them: LayerNormalization, RMSNormalization,
RotaryEmbedding and Attention (causal prefill, and a decode step against a KV cache) through
their ONNX op (one node each), dsl.jit side by side with a numpy formula,
onnxruntime running the same node and jax.jit; interleaved, medians; GB/s of the bytes each op
must move, and a 2-thread streaming copy of the same bytes as the machine's ceiling.

Run: python benchmarks/layers.py [--repeat N] [--only NAME ...]
     (needs the `bench` extra: onnxruntime, jax)
"""
import argparse
import os
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # (benchmarks/kernels.py)
import numpy as np  # noqa: E402

import dsl  # noqa: E402
from dsl.ops import registry  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import PEER_HEADERS, interleaved_medians, ort_session, peer_cells, peer_footer, table  # noqa: E402

ROWS, WIDTH = 4096, 4096                     # 64 MiB of float32 activations (twice the L3)
BATCH, HEADS, SEQ, HEAD = 1, 32, 2048, 128   # RoPE on a 32 MiB query block, 2048 cached positions


def _layer_numpy(x, g, b):
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5)) * g + b


def _rms_numpy(x, g):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(1e-5)) * g


def _rope_numpy(x, cos, sin, pos):
    c, s = cos[pos][:, None], sin[pos][:, None]
    x1, x2 = x[..., :HEAD // 2], x[..., HEAD // 2:]
    return np.concatenate([c * x1 - s * x2, s * x1 + c * x2], axis=-1)


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _attention_numpy(q, k, v, causal=False):
    s = q @ np.swapaxes(k, -1, -2) * np.float32(q.shape[-1] ** -0.5)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, np.float32(-np.inf))
    return _softmax(s) @ v


def _jax(kind):
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def layer(x, g, b):
        return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b

    def rms(x, g):
        return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g

    def rope(x, cos, sin, pos):
        c, s = cos[pos][:, None], sin[pos][:, None]
        x1, x2 = x[..., :HEAD // 2], x[..., HEAD // 2:]
        return jnp.concatenate([c * x1 - s * x2, s * x1 + c * x2], axis=-1)

    def attention(q, k, v, causal=False):
        s = q @ jnp.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
        if causal:
            s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
        return jax.nn.softmax(s, -1) @ v

    functions = {"layer": layer, "rms": rms, "rope": rope, "attention": attention,
                 "causal attention": lambda q, k, v: attention(q, k, v, True)}
    compiled = jax.jit(functions[kind])
    return lambda *arrays: compiled(*arrays).block_until_ready()


def programs(rng):
    """name -> (ONNX op, attributes, opset, inputs, numpy formula, jax kind)."""
    x = rng.standard_normal((ROWS, WIDTH)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, WIDTH).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, WIDTH).astype(np.float32)
    q = rng.standard_normal((BATCH, HEADS, SEQ, HEAD)).astype(np.float32)
    angles = np.arange(SEQ)[:, None] * 10000.0 ** (-np.arange(HEAD // 2) / (HEAD // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    pos = np.arange(SEQ, dtype=np.int64)[None].repeat(BATCH, 0)
    prefill = [rng.standard_normal((1, 16, 1024, 64)).astype(np.float32) for _ in range(3)]
    step = [rng.standard_normal((1, 16, s, 64)).astype(np.float32) for s in (1, 2048, 2048)]
    return {
        f"LayerNormalization [{ROWS}, {WIDTH}]": ("LayerNormalization", {"axis": -1, "epsilon": 1e-5}, 17,
                                                 [x, gamma, beta], _layer_numpy, "layer"),
        f"RMSNormalization [{ROWS}, {WIDTH}]": ("RMSNormalization", {"axis": -1, "epsilon": 1e-5}, 23,
                                               [x, gamma], _rms_numpy, "rms"),
        f"RotaryEmbedding [{BATCH}, {HEADS}, {SEQ}, {HEAD}]": ("RotaryEmbedding", {}, 23, [q, cos, sin, pos],
                                                           _rope_numpy, "rope"),
        "Attention B1 H16 S1024 D64, causal": ("Attention", {"is_causal": 1}, 23, prefill,
                                               lambda q, k, v: _attention_numpy(q, k, v, True), "causal attention"),
        "Attention decode, S_q 1, KV 2048": ("Attention", {}, 23, step, _attention_numpy, "attention"),
    }


def _model(op, attrs, opset, arrays):
    from onnx import helper
    names = [f"in{i}" for i in range(len(arrays))]
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in zip(names, arrays)]
    graph = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "g", inputs,
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model, names


def _streaming_copy(nbytes):
    """A 2-thread np.copyto of ``nbytes`` (each thread half the bytes): the copy ceiling."""
    src, dst = np.ones(nbytes // 4, np.float32), np.empty(nbytes // 4, np.float32)
    halves = [(src[:len(src) // 2], dst[:len(src) // 2]), (src[len(src) // 2:], dst[len(src) // 2:])]

    def run():
        threads = [threading.Thread(target=np.copyto, args=(d, s)) for s, d in halves]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=None, help="name prefixes (default: all)")
    args = parser.parse_args()
    rows = []
    for name, (op, attrs, opset, arrays, numpy_fn, kind) in programs(np.random.default_rng(0)).items():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        if op not in registry.all_ops():
            print(f"{name}: dsl has no {op}")
            continue
        model, names = _model(op, attrs, opset, arrays)
        program = dsl.from_onnx(model)
        feeds = dict(zip(names, arrays))
        candidates = {"dsl.jit": lambda: program.run(feeds), "numpy": lambda: numpy_fn(*arrays)}
        try:
            session = ort_session(model)
            session.run(None, feeds)
            candidates["onnxruntime"] = lambda: session.run(None, feeds)
        except Exception as error:  # (an op onnxruntime's CPU provider lacks at this opset)
            print(f"{name}: onnxruntime: {type(error).__name__}: {str(error)[:120]}")
        jax_fn = _jax(kind)
        if jax_fn is not None:
            import jax.numpy as jnp
            jax_arrays = [jnp.asarray(a) for a in arrays]
            candidates["jax.jit"] = lambda: jax_fn(*jax_arrays)
        moved = sum(a.nbytes for a in arrays) + arrays[0].nbytes  # read the inputs, write one result
        candidates["2-thread copy"] = _streaming_copy(moved // 2)  # (reads and writes moved / 2 each)
        np.testing.assert_allclose(program.run(feeds)[0], numpy_fn(*arrays), rtol=2e-4, atol=2e-4)
        t = interleaved_medians(candidates, repeat=args.repeat)
        rows.append((name, *peer_cells(t, "dsl.jit", 1 if t["dsl.jit"] > 0.01 else 3), f"{moved / t['dsl.jit'] / 1e9:.1f}",
                     f"{moved / t['2-thread copy'] / 1e9:.1f}"))
        print(rows[-1], flush=True)
    print()
    print(table(rows, ("op (float32)", *PEER_HEADERS, "dsl GB/s", "copy GB/s")))
    print(peer_footer(args.repeat))


if __name__ == "__main__":
    main()
