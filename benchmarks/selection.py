"""Sampling and scans in fused programs: ArgMax, TopK and CumSum as kernels with their producers,
against numpy, onnxruntime (intra-op threads = cores, spin-wait off) and jax.jit on CPU;
interleaved (order rotated each round), medians; GB/s of the input bytes read once beside a
2-thread streaming copy of those bytes.

Rows (float32):
- greedy sampling: argmax over [8, 128256] logits (the issue's size, 4 MiB: in the L3) and over
  [64, 128256] (31 MiB);
- top-k sampling: the 50 largest of [8, 128256] logits divided by a temperature (numpy:
  argpartition, then a stable sort of the 50; jax: lax.top_k);
- running sums: cumsum over axis 1 and axis 0 of [4096, 4096] (64 MiB in, 64 MiB out).

Run: python benchmarks/selection.py [--repeat 9]
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

COPY = dsl.jit(lambda v: v * 1.0)
K = 50


def numpy_topk(z):
    part = np.argpartition(-z, K - 1, axis=-1)[:, :K]
    values = np.take_along_axis(z, part, -1)
    order = np.argsort(-values, axis=-1, kind="stable")
    return np.take_along_axis(values, order, -1), np.take_along_axis(part, order, -1)


def programs():
    """name -> (dsl fn, numpy fn, onnx nodes builder, jax fn builder, inputs)."""
    rng = np.random.default_rng(0)
    small = rng.standard_normal((8, 128256), dtype=np.float32)
    large = rng.standard_normal((64, 128256), dtype=np.float32)
    square = rng.standard_normal((4096, 4096), dtype=np.float32)
    return {
        "argmax, [8, 128256]": (lambda z: dsl.argmax(z, -1), lambda z: np.argmax(z, -1, keepdims=True),
                                "argmax", lambda jnp, lax: (lambda z: jnp.argmax(z, -1)), (small,)),
        "argmax, [64, 128256]": (lambda z: dsl.argmax(z, -1), lambda z: np.argmax(z, -1, keepdims=True),
                                 "argmax", lambda jnp, lax: (lambda z: jnp.argmax(z, -1)), (large,)),
        f"top-{K} of logits / 0.7, [8, 128256]": (
            lambda z: dsl.topk(z / 0.7, np.array([K]))[1], lambda z: numpy_topk(z / np.float32(0.7))[1],
            "topk", lambda jnp, lax: (lambda z: lax.top_k(z / 0.7, K)[1]), (small,)),
        "cumsum axis 1, [4096, 4096]": (lambda z: dsl.cumsum(z, 1), lambda z: np.cumsum(z, 1), "cumsum1",
                                        lambda jnp, lax: (lambda z: jnp.cumsum(z, 1)), (square,)),
        "cumsum axis 0, [4096, 4096]": (lambda z: dsl.cumsum(z, 0), lambda z: np.cumsum(z, 0), "cumsum0",
                                        lambda jnp, lax: (lambda z: jnp.cumsum(z, 0)), (square,)),
    }


def ort_runner(spec, z):
    from onnx import TensorProto, helper
    inits, out_type = [], TensorProto.INT64
    if spec == "argmax":
        nodes = [helper.make_node("ArgMax", ["z"], ["y"], axis=-1, keepdims=1)]
    elif spec == "topk":
        inits = [helper.make_tensor("t", TensorProto.FLOAT, [], [0.7]), helper.make_tensor("k", TensorProto.INT64, [1], [K])]
        nodes = [helper.make_node("Div", ["z", "t"], ["s"]), helper.make_node("TopK", ["s", "k"], ["v", "y"], axis=-1)]
    else:
        inits, out_type = [helper.make_tensor("a", TensorProto.INT64, [], [int(spec[-1])])], TensorProto.FLOAT
        nodes = [helper.make_node("CumSum", ["z", "a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("z", TensorProto.FLOAT, z.shape)],
                              [helper.make_tensor_value_info("y", out_type, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = ort_session(model)
    return lambda: session.run(["y"], {"z": z})[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        jax = None
    rows = []
    for name, (fn, numpy_fn, ort_spec, jax_fn, inputs) in programs().items():
        ours = dsl.jit(fn)
        out = ours(*inputs)
        want = numpy_fn(*inputs)
        if ort_spec.startswith("cumsum"):
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)  # (numpy sums pairwise along axis 1)
        else:
            np.testing.assert_array_equal(out, want)
        candidates = {"dsl": lambda: ours(*inputs), "numpy": lambda: numpy_fn(*inputs),
                      "2-thread copy": lambda: COPY(inputs[0])}
        try:
            candidates["onnxruntime"] = ort_runner(ort_spec, inputs[0])
        except ImportError:
            pass
        if jax is not None:
            compiled = jax.jit(jax_fn(jnp, lax))
            device = [jnp.asarray(a) for a in inputs]
            candidates["jax.jit"] = lambda: compiled(*device).block_until_ready()
        t = interleaved_medians(candidates, repeat=args.repeat)
        read = inputs[0].nbytes
        rows.append((name, ours.executable(*inputs).kernel_count, *peer_cells(t, "dsl", 3),
                     f"{read / t['dsl'] / 1e9:.1f}", f"{2 * read / t['2-thread copy'] / 1e9:.1f}"))
        print(rows[-1], flush=True)
    print()
    print(table(rows, ("program (float32)", "dsl kernels", *PEER_HEADERS, "dsl GB/s read", "copy GB/s")))
    print(peer_footer(args.repeat, "; copy GB/s: y = x * 1 over the input (dsl's 2-thread streaming kernel), "
                                   "its bytes read and written"))


if __name__ == "__main__":
    main()
