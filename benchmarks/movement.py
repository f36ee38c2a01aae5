"""Data movement in fused programs: Concat as guarded loads inside the consumer's kernel, against
numpy, onnxruntime (intra-op threads = cores, spin-wait off) and jax.jit on CPU; interleaved
(order rotated each round), medians; GB/s of the bytes each program must move (inputs read once,
the output written once) beside a 2-thread streaming copy of the output's bytes.

Rows (float32, larger than the 32 MiB L3):
- KV-cache append: concat([cache [1, 32, 2047, 128], new [1, 32, 1, 128]], axis 2) (the cache copy);
- RoPE: x * cos + concat([-x[..., 64:], x[..., :64]], -1) * sin over [8, 32, 256, 128];
- two-input concat along the last axis followed by a scale, [4096, 2048] each;
- embedding lookup times a scale: gather [4, 64] and [16, 512] int64 ids from a [32000, 1024]
  table (the issue's small case, 1 MiB out, and one larger than the L3, 32 MiB out); its bytes
  moved are the ids, the rows read and the output, not the whole table.

Run: python benchmarks/movement.py [--repeat 9]
"""
import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # (benchmarks/kernels.py)
import numpy as np  # noqa: E402

import dsl  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import PEER_HEADERS, interleaved_medians, ort_session, peer_cells, peer_footer, table  # noqa: E402


COPY = dsl.jit(lambda v: v * 1.0)  # a 2-thread streaming copy of the output's bytes (the bandwidth reference)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return dsl.concat([-x[..., half:], x[..., :half]], -1)


def programs():
    """name -> (dsl program, numpy program, onnx builder, jax program, inputs)."""
    rng = np.random.default_rng(0)
    cache = rng.standard_normal((1, 32, 2047, 128), dtype=np.float32)
    new = rng.standard_normal((1, 32, 1, 128), dtype=np.float32)
    x = rng.standard_normal((8, 32, 256, 128), dtype=np.float32)
    cos, sin = np.cos(x[0, 0]), np.sin(x[0, 0])
    a = rng.standard_normal((4096, 2048), dtype=np.float32)
    b = rng.standard_normal((4096, 2048), dtype=np.float32)
    table = rng.standard_normal((32000, 1024), dtype=np.float32)
    scale = np.float32(0.03125)
    lookups = {
        f"embedding gather * scale, {list(ids.shape)} of [32000, 1024]": (
            lambda w, i, s: dsl.gather(w, i) * s, lambda w, i, s: np.take(w, i, axis=0) * s,
            ("gather_scale",), lambda jnp: (lambda w, i, s: jnp.take(w, i, axis=0) * s), (table, ids, scale))
        for ids in (rng.integers(0, 32000, (4, 64)), rng.integers(0, 32000, (16, 512)))}
    return {
        "KV-cache append, [1, 32, 2047 + 1, 128]": (
            lambda c, n: dsl.concat([c, n], 2), lambda c, n: np.concatenate([c, n], 2),
            ("concat", 2), lambda jnp: (lambda c, n: jnp.concatenate([c, n], 2)), (cache, new)),
        "RoPE rotate-half, [8, 32, 256, 128]": (
            lambda x, c, s: x * c + _rotate_half(x) * s,
            lambda x, c, s: x * c + np.concatenate([-x[..., 64:], x[..., :64]], -1) * s,
            ("rope",), lambda jnp: (lambda x, c, s: x * c + jnp.concatenate([-x[..., 64:], x[..., :64]], -1) * s),
            (x, cos, sin)),
        "concat last axis * 2, 2 x [4096, 2048]": (
            lambda a, b: dsl.concat([a, b], -1) * 2.0, lambda a, b: np.concatenate([a, b], -1) * np.float32(2),
            ("concat_scale", -1), lambda jnp: (lambda a, b: jnp.concatenate([a, b], -1) * 2.0), (a, b)),
        **lookups,
    }


def ort_runner(spec, args):
    from onnx import TensorProto, helper
    names = [f"x{k}" for k in range(len(args))]
    inits = []
    if spec[0] == "concat":
        nodes = [helper.make_node("Concat", names, ["y"], axis=spec[1])]
    elif spec[0] == "gather_scale":
        nodes = [helper.make_node("Gather", names[:2], ["g"], axis=0), helper.make_node("Mul", ["g", "x2"], ["y"])]
    elif spec[0] == "concat_scale":
        inits.append(helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]))
        nodes = [helper.make_node("Concat", names, ["c"], axis=spec[1]), helper.make_node("Mul", ["c", "two"], ["y"])]
    else:  # RoPE spelled out: Slice, Neg, Concat, Mul, Mul, Add
        half = args[0].shape[-1] // 2
        for name, values in (("h", [half]), ("end", [2 ** 62]), ("zero", [0]), ("axis", [-1])):
            inits.append(helper.make_tensor(name, TensorProto.INT64, [1], values))
        nodes = [helper.make_node("Slice", ["x0", "h", "end", "axis"], ["hi"]),
                 helper.make_node("Slice", ["x0", "zero", "h", "axis"], ["lo"]),
                 helper.make_node("Neg", ["hi"], ["nhi"]), helper.make_node("Concat", ["nhi", "lo"], ["rot"], axis=-1),
                 helper.make_node("Mul", ["x0", "x1"], ["xc"]), helper.make_node("Mul", ["rot", "x2"], ["rs"]),
                 helper.make_node("Add", ["xc", "rs"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64 if a.dtype == np.int64 else TensorProto.FLOAT, a.shape)
              for n, a in zip(names, [np.asarray(a) for a in args])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = ort_session(model)
    feeds = dict(zip(names, [np.asarray(a) for a in args]))
    return lambda: session.run(None, feeds)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    rows = []
    for name, (fn, numpy_fn, ort_spec, jax_fn, inputs) in programs().items():
        ours = dsl.jit(fn)
        out = ours(*inputs)
        np.testing.assert_allclose(out, numpy_fn(*inputs), rtol=1e-6, atol=1e-6)
        candidates = {"dsl": lambda: ours(*inputs), "numpy": lambda: numpy_fn(*inputs),
                      "2-thread copy": lambda: COPY(out)}
        try:
            candidates["onnxruntime"] = ort_runner(ort_spec, inputs)
        except ImportError:
            pass
        if jax is not None:
            compiled = jax.jit(jax_fn(jnp))
            device = [jnp.asarray(a) for a in inputs]
            candidates["jax.jit"] = lambda: compiled(*device).block_until_ready()
        t = interleaved_medians(candidates, repeat=args.repeat)
        moved = sum(np.asarray(a).nbytes for a in inputs) + out.nbytes
        if ort_spec[0] == "gather_scale":  # (the rows read, not the table)
            moved = inputs[1].nbytes + 2 * out.nbytes
        rows.append((name, ours.executable(*inputs).kernel_count, *peer_cells(t, "dsl"),
                     f"{moved / t['dsl'] / 1e9:.1f}", f"{2 * out.nbytes / t['2-thread copy'] / 1e9:.1f}"))
        print(rows[-1], flush=True)
    print()
    print(table(rows, ("program (float32)", "dsl kernels", *PEER_HEADERS, "dsl GB/s", "copy GB/s")))
    print(peer_footer(args.repeat, "; copy GB/s: y = x * 1 over the output (dsl's 2-thread streaming kernel), "
                                   "its bytes read and written"))


if __name__ == "__main__":
    main()
