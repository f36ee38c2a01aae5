"""Activations, GELU, SwiGLU, softmax and row ops (x - max, layer norm): dsl (fast and exact
math) side by side with numpy, onnxruntime and jax.jit on the CPU, interleaved, medians; GB/s of
the bytes each program must move.

Run: python benchmarks/activations.py [--repeat N] [--only NAME ...]
     (needs the `bench` extra: onnxruntime, jax)
"""
import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # (benchmarks/kernels.py)
import numpy as np  # noqa: E402

import dsl  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import interleaved_medians, ort_session, table  # noqa: E402

CORES = os.cpu_count() or 1
SQRT_2_OVER_PI, INV_SQRT2 = 0.7978845608028654, 0.7071067811865476


def programs():
    """name -> (dsl function of its inputs, numpy version, ONNX nodes, jax version, input shapes)."""
    return {
        "exp": (lambda x: dsl.exp(x), np.exp, [("Exp", ["x"], ["y"])], "exp", [(4096, 4096)]),
        "tanh": (lambda x: dsl.tanh(x), np.tanh, [("Tanh", ["x"], ["y"])], "tanh", [(4096, 4096)]),
        "sigmoid": (lambda x: dsl.sigmoid(x), lambda x: 1 / (1 + np.exp(-x)), [("Sigmoid", ["x"], ["y"])], "sigmoid",
                    [(4096, 4096)]),
        "erf": (lambda x: dsl.erf(x), None, [("Erf", ["x"], ["y"])], "erf", [(4096, 4096)]),
        "GELU, tanh form": (lambda x: 0.5 * x * (1.0 + dsl.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))),
                            lambda x: 0.5 * x * (1 + np.tanh(np.float32(SQRT_2_OVER_PI) * (x + np.float32(0.044715) * x * x * x))),
                            "gelu_tanh", "gelu_tanh", [(4096, 4096)]),
        "GELU, erf form": (lambda x: 0.5 * x * (1.0 + dsl.erf(x * INV_SQRT2)), None, "gelu_erf", "gelu_erf",
                           [(4096, 4096)]),
        "SwiGLU a*sigmoid(a)*b": (lambda a, b: a * dsl.sigmoid(a) * b, lambda a, b: a / (1 + np.exp(-a)) * b,
                                  [("Sigmoid", ["x"], ["s"]), ("Mul", ["x", "s"], ["t"]), ("Mul", ["t", "b"], ["y"])],
                                  "swiglu", [(2048, 8192), (2048, 8192)]),
        "softmax, last axis": (lambda x: dsl.softmax(x), lambda x: _np_softmax(x), [("Softmax", ["x"], ["y"])],
                               "softmax", [(32, 512, 512)]),
        "log-softmax, last axis": (lambda x: dsl.log_softmax(x), lambda x: np.log(_np_softmax(x)),
                                   [("LogSoftmax", ["x"], ["y"])], "log_softmax", [(32, 512, 512)]),
        "x - max(x, -1)": (lambda x: x - dsl.reduce_max(x, [-1]), lambda x: x - x.max(-1, keepdims=True),
                           [("ReduceMax", ["x"], ["m"]), ("Sub", ["x", "m"], ["y"])], "sub_max", [(32, 512, 512)]),
        "layer norm, last axis": (_dsl_layer_norm, _np_layer_norm, "layer_norm", "layer_norm", [(8192, 1024)]),
        "floor: y = x * 2": (lambda x: x * 2.0, lambda x: x * np.float32(2), [("Add", ["x", "x"], ["y"])], "double",
                             [(4096, 4096)]),
    }


LN_GAMMA = np.linspace(0.5, 1.5, 1024, dtype=np.float32)
LN_BETA = np.linspace(-0.25, 0.25, 1024, dtype=np.float32)


def _dsl_layer_norm(x):
    d = x - dsl.reduce_mean(x, [-1])
    return d / dsl.sqrt(dsl.reduce_mean(d * d, [-1]) + 1e-5) * LN_GAMMA + LN_BETA


def _np_layer_norm(x):
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + np.float32(1e-5)) * LN_GAMMA + LN_BETA


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def onnx_nodes(kind):
    """The ONNX graph of a program as a user exports it (GELU spelled out; onnxruntime's
    optimizer may fuse it)."""
    from onnx import helper
    if kind == "gelu_tanh":
        consts = {"c0": 0.044715, "c1": SQRT_2_OVER_PI, "half": 0.5, "one": 1.0}
        steps = [("Mul", ["x", "x"], ["x2"]), ("Mul", ["x2", "x"], ["x3"]), ("Mul", ["x3", "c0"], ["a"]),
                 ("Add", ["x", "a"], ["b"]), ("Mul", ["b", "c1"], ["c"]), ("Tanh", ["c"], ["t"]),
                 ("Add", ["t", "one"], ["u"]), ("Mul", ["x", "u"], ["v"]), ("Mul", ["v", "half"], ["y"])]
    elif kind == "gelu_erf":
        consts = {"k": INV_SQRT2, "half": 0.5, "one": 1.0}
        steps = [("Mul", ["x", "k"], ["a"]), ("Erf", ["a"], ["e"]), ("Add", ["e", "one"], ["u"]),
                 ("Mul", ["x", "u"], ["v"]), ("Mul", ["v", "half"], ["y"])]
    elif kind == "layer_norm":  # onnxruntime's fused LayerNormalization kernel (opset 17)
        return [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)], \
            {"gamma": LN_GAMMA, "beta": LN_BETA}
    else:
        return [helper.make_node(op, ins, outs, **({"axes": [-1]} if op == "ReduceMax" else {}))
                for op, ins, outs in kind], {}
    return [helper.make_node(op, ins, outs) for op, ins, outs in steps], consts


def ort_runner(kind, shapes):
    from onnx import TensorProto, helper
    nodes, consts = onnx_nodes(kind)
    names = ["x", "b"][:len(shapes)]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)]
    inits = [helper.make_tensor(k, TensorProto.FLOAT, np.shape(v), np.ravel(v).tolist()) for k, v in consts.items()]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort_session(model)
    return lambda *arrays: session.run(None, dict(zip(names, arrays)))[0]


def jax_runner(kind):
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    functions = {
        "exp": jnp.exp, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "erf": jax.scipy.special.erf,
        "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True), "gelu_erf": lambda x: jax.nn.gelu(x, approximate=False),
        "swiglu": lambda a, b: a * jax.nn.sigmoid(a) * b, "softmax": lambda x: jax.nn.softmax(x, -1),
        "log_softmax": lambda x: jax.nn.log_softmax(x, -1), "double": lambda x: x * 2.0,
        "sub_max": lambda x: x - x.max(-1, keepdims=True),
        "layer_norm": lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
        * LN_GAMMA + LN_BETA}
    compiled = jax.jit(functions[kind])
    return lambda *arrays: compiled(*arrays).block_until_ready()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=None, help="program names (default: all)")
    args = parser.parse_args()
    repeat = args.repeat
    rng = np.random.default_rng(0)
    rows = []
    for name, (fn, numpy_fn, kind, jax_kind, shapes) in programs().items():
        if args.only and name not in args.only:
            continue
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        fast, exact = dsl.jit(fn), dsl.jit(fn, math="exact")
        jax_fn = jax_runner(jax_kind)
        jax_arrays = None
        if jax_fn is not None:
            import jax.numpy as jnp
            jax_arrays = [jnp.asarray(a) for a in arrays]
        candidates = {"dsl fast": lambda: fast(*arrays), "dsl exact": lambda: exact(*arrays),
                      "onnxruntime": (lambda r=ort_runner(kind, shapes): r(*arrays))}
        if numpy_fn is not None:
            candidates["numpy"] = lambda: numpy_fn(*arrays)
        if jax_fn is not None:
            candidates["jax.jit"] = lambda: jax_fn(*jax_arrays)
        t = interleaved_medians(candidates, repeat=repeat)
        peers = [t[k] for k in ("onnxruntime", "jax.jit") if k in t]
        moved = sum(a.nbytes for a in arrays) + arrays[0].nbytes  # read the inputs, write one result
        ms = lambda k: f"{t[k] * 1e3:.1f}" if k in t else "-"
        rows.append((name, ms("dsl fast"), ms("dsl exact"), ms("numpy"), ms("onnxruntime"), ms("jax.jit"),
                     f"{min(peers) / t['dsl fast']:.2f}x", f"{moved / t['dsl fast'] / 1e9:.1f}"))
        print(rows[-1], flush=True)
    print()
    print(table(rows, ("program (float32)", "dsl fast ms", "dsl exact ms", "numpy ms", "onnxruntime ms", "jax.jit ms",
                       "dsl fast vs best peer", "dsl fast GB/s")))
    print(f"\n{CORES} cores; onnxruntime intra-op threads = {CORES}, spin-wait off; interleaved, median of {repeat}; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
