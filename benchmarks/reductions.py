"""Reductions over any axes and reduce-then-broadcast programs: dsl's any-axis and staged
schedules against numpy, onnxruntime (intra-op threads = cores, spin-wait off) and jax.jit on CPU,
interleaved (order rotated each round), medians; GB/s of the bytes each program must move (inputs
read once, outputs written once).

Rows: sum and max over axis 0 and over the last axis of float32 [4096, 4096]; ReduceL2 (a composite
op: its body fused) over each axis of the same; softmax over axis 1
of [64, 512, 512]; RMS norm and layer norm (one kernel each) over the last axis of [8192, 1024]
and over axis 0 of [1024, 8192].

Run: python benchmarks/reductions.py [--repeat 9] [--only NAME ...]
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

CORES = os.cpu_count() or 1
EPS = 1e-5


def _layer_norm(axis):
    def program(x):
        d = x - dsl.reduce_mean(x, [axis])
        return d / dsl.sqrt(dsl.reduce_mean(d * d, [axis]) + EPS)
    return program


def _rms_norm(axis):
    return lambda x: x / dsl.sqrt(dsl.reduce_mean(x * x, [axis]) + EPS)


def _np_layer_norm(axis):
    def program(x):
        d = x - x.mean(axis, keepdims=True)
        return d / np.sqrt((d * d).mean(axis, keepdims=True) + np.float32(EPS))
    return program


def programs() -> dict:
    """name -> (dsl program, numpy program, onnx nodes (op, attrs, axes input), jax program, shape, output
    elements per input element)."""
    import functools
    sums = {"sum": (dsl.reduce_sum, np.sum, "ReduceSum", "sum"), "max": (dsl.reduce_max, np.max, "ReduceMax", "max")}
    found = {}
    for kind, (ours, theirs, op, jax_name) in sums.items():
        for axis in (0, 1):
            found[f"{kind} axis {axis}, [4096, 4096]"] = (
                functools.partial(lambda x, f, a: f(x, [a], keepdims=0), f=ours, a=axis),
                functools.partial(lambda x, f, a: f(x, axis=a), f=theirs, a=axis),
                ("reduce", op, axis), (jax_name, axis), (4096, 4096), 0)
    for axis in (-1, 0):  # a composite (the spec's body: Mul, ReduceSum, Cast, Sqrt, Cast) fused
        found[f"L2 norm axis {axis}, [4096, 4096]"] = (
            functools.partial(lambda x, a: dsl.reduce_l2(x, [a], keepdims=0), a=axis),
            functools.partial(lambda x, a: np.sqrt(np.sum(x * x, axis=a)), a=axis),
            ("reduce", "ReduceL2", axis), ("l2", axis), (4096, 4096), 0)
    found["softmax axis 1, [64, 512, 512]"] = (lambda x: dsl.softmax(x, 1),
                                               lambda x: _np_softmax(x, 1), ("softmax", 1),
                                               ("softmax", 1), (64, 512, 512), 1)
    for axis, shape in ((-1, (8192, 1024)), (0, (1024, 8192))):
        found[f"RMS norm axis {axis}, {list(shape)}"] = (_rms_norm(axis), lambda x, a=axis: x / np.sqrt(
            (x * x).mean(a, keepdims=True) + np.float32(EPS)), ("rms", axis), ("rms", axis), shape, 1)
        found[f"layer norm axis {axis}, {list(shape)}"] = (_layer_norm(axis), _np_layer_norm(axis), ("layer", axis),
                                                         ("layer", axis), shape, 1)
    return found


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def ort_runner(spec, shape):
    from onnx import TensorProto, helper
    inits = []
    if spec[0] == "reduce":
        _, op, axis = spec
        inits.append(helper.make_tensor("axes", TensorProto.INT64, [1], [axis]))
        nodes = [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)]
    elif spec[0] == "softmax":
        nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=spec[1])]
    elif spec[0] == "layer" and spec[1] == -1:  # onnxruntime's fused kernel
        inits += [helper.make_tensor("g", TensorProto.FLOAT, [shape[-1]], np.ones(shape[-1]).tolist()),
                  helper.make_tensor("b", TensorProto.FLOAT, [shape[-1]], np.zeros(shape[-1]).tolist())]
        nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=EPS)]
    else:  # spelled out (onnxruntime has no RMS or axis-0 normalization kernel at opset 18)
        axis = spec[1]
        inits += [helper.make_tensor("axes", TensorProto.INT64, [1], [axis]),
                  helper.make_tensor("eps", TensorProto.FLOAT, [], [EPS])]
        if spec[0] == "rms":
            nodes = [helper.make_node("Mul", ["x", "x"], ["x2"]), helper.make_node("ReduceMean", ["x2", "axes"], ["m"]),
                     helper.make_node("Add", ["m", "eps"], ["v"]), helper.make_node("Sqrt", ["v"], ["s"]),
                     helper.make_node("Div", ["x", "s"], ["y"])]
        else:
            nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"]), helper.make_node("Sub", ["x", "m"], ["d"]),
                     helper.make_node("Mul", ["d", "d"], ["d2"]), helper.make_node("ReduceMean", ["d2", "axes"], ["v0"]),
                     helper.make_node("Add", ["v0", "eps"], ["v"]), helper.make_node("Sqrt", ["v"], ["s"]),
                     helper.make_node("Div", ["d", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = ort_session(model)
    return lambda x: session.run(None, {"x": x})[0]


def jax_runner(spec):
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    kind, axis = spec
    if kind in ("sum", "max"):
        fn = lambda x: getattr(jnp, kind)(x, axis=axis)
    elif kind == "softmax":
        fn = lambda x: jax.nn.softmax(x, axis)
    elif kind == "l2":
        fn = lambda x: jnp.sqrt(jnp.sum(x * x, axis=axis))
    elif kind == "rms":
        fn = lambda x: x / jnp.sqrt((x * x).mean(axis, keepdims=True) + EPS)
    else:
        fn = lambda x: (x - x.mean(axis, keepdims=True)) / jnp.sqrt(x.var(axis, keepdims=True) + EPS)
    compiled = jax.jit(fn)
    return lambda x: compiled(x).block_until_ready()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=None, help="program names (default: all)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for name, (fn, numpy_fn, ort_spec, jax_spec, shape, full) in programs().items():
        if args.only and name not in args.only:
            continue
        x = rng.standard_normal(shape, dtype=np.float32)
        ours = dsl.jit(fn)
        candidates = {"dsl": lambda: ours(x), "numpy": lambda: numpy_fn(x)}
        try:
            candidates["onnxruntime"] = lambda r=ort_runner(ort_spec, shape): r(x)
        except ImportError:
            pass
        jax_fn = jax_runner(jax_spec)
        if jax_fn is not None:
            import jax.numpy as jnp
            jx = jnp.asarray(x)
            candidates["jax.jit"] = lambda: jax_fn(jx)
        np.testing.assert_allclose(ours(x), numpy_fn(x), rtol=2e-4, atol=2e-4)
        kernels = ours.executable(x).kernel_count
        t = interleaved_medians(candidates, repeat=args.repeat)
        moved = x.nbytes * (1 + full)
        rows.append((name, kernels, *peer_cells(t, "dsl"), f"{moved / t['dsl'] / 1e9:.1f}"))
        print(rows[-1], flush=True)
    print()
    print(table(rows, ("program (float32)", "dsl kernels", *PEER_HEADERS, "dsl GB/s")))
    print(peer_footer(args.repeat))


if __name__ == "__main__":
    main()
