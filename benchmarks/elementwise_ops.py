"""The elementwise ONNX ops of the tensor-program op set (activations, trigonometry, rounding,
integer Mod / BitShift, SwiGLU) as single ops: dsl's fused kernel side by side with numpy,
onnxruntime (the same one-node ONNX model; intra-op threads = cores, spin-wait off) and jax.jit
on the CPU; interleaved, medians; GB/s of the bytes each op must move (inputs read once, the
output written once). A peer without the op (onnxruntime has no SwiGLU-28 kernel) shows "-".

Run: python benchmarks/elementwise_ops.py [--repeat N] [--only NAME ...]
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
from _timing import CORES, interleaved_medians, ort_session, table  # noqa: E402

SHAPE = (4096, 4096)  # 64 MiB of float32 per operand: twice the L3


def _np_gelu():
    """numpy's GELU (erf form) through scipy.special.erf, or None without scipy."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return lambda x: np.float32(0.5) * x * (np.float32(1) + erf(x * np.float32(0.7071067811865476)))


def programs():
    """name -> (dsl function, numpy function or None, (ONNX op, opset, attributes), jax function
    of jnp / jax.nn or None, input kind "f32" | "f32x2" | "i32x2" | "u32x2")."""
    return {
        "Gelu (erf)": (dsl.gelu, _np_gelu(), ("Gelu", 20, {}), lambda jax: lambda x: jax.nn.gelu(x, approximate=False),
                       "f32"),
        "Elu": (dsl.elu, lambda x: np.where(x < 0, np.expm1(x), x), ("Elu", 22, {}), lambda jax: jax.nn.elu, "f32"),
        "Mish": (dsl.mish, lambda x: x * np.tanh(np.logaddexp(np.float32(0), x)), ("Mish", 22, {}),
                 lambda jax: lambda x: x * jax.numpy.tanh(jax.nn.softplus(x)), "f32"),
        "HardSwish": (dsl.hard_swish, lambda x: x * np.clip(x / np.float32(6) + np.float32(0.5), 0, 1),
                      ("HardSwish", 22, {}), lambda jax: jax.nn.hard_swish, "f32"),
        "Softplus": (dsl.softplus, lambda x: np.logaddexp(np.float32(0), x), ("Softplus", 22, {}),
                     lambda jax: jax.nn.softplus, "f32"),
        "Sin": (dsl.sin, np.sin, ("Sin", 22, {}), lambda jax: jax.numpy.sin, "f32"),
        "Round": (dsl.round, np.rint, ("Round", 22, {}), lambda jax: jax.numpy.round, "f32"),
        "Mod, int32": (dsl.mod, np.remainder, ("Mod", 13, {}), lambda jax: jax.numpy.remainder, "i32x2"),
        "BitShift left, uint32": (lambda a, b: dsl.bit_shift(a, b, direction="LEFT"), np.left_shift,
                                  ("BitShift", 11, {"direction": "LEFT"}), lambda jax: jax.numpy.left_shift, "u32x2"),
        "SwiGLU": (dsl.swiglu, lambda a, b: a / (np.float32(1) + np.exp(-a)) * b, ("SwiGLU", 28, {}),
                   lambda jax: lambda a, b: a * jax.nn.sigmoid(a) * b, "f32x2"),
    }


def inputs(kind: str, rng) -> list:
    if kind.startswith("f32"):
        return [rng.standard_normal(SHAPE, dtype=np.float32) * 4 for _ in range(2 if kind == "f32x2" else 1)]
    if kind == "i32x2":
        return [rng.integers(-1000, 1000, SHAPE).astype(np.int32), rng.integers(1, 50, SHAPE).astype(np.int32)]
    return [rng.integers(0, 1 << 20, SHAPE).astype(np.uint32), rng.integers(0, 12, SHAPE).astype(np.uint32)]


def ort_runner(op: str, opset: int, attrs: dict, arrays: list):
    """A one-node model of ``op`` run by onnxruntime, or None where it has no kernel for it."""
    from onnx import helper
    names = [f"x{k}" for k in range(len(arrays))]
    elem = helper.np_dtype_to_tensor_dtype(arrays[0].dtype)
    graph = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info(n, elem, a.shape) for n, a in zip(names, arrays)],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    try:
        session = ort_session(model)
        run = lambda: session.run(None, dict(zip(names, arrays)))[0]  # noqa: E731
        run()
    except Exception:  # noqa: BLE001  (no kernel for this op / opset: the row shows "-")
        return None
    return run


def jax_runner(make, arrays: list):
    if make is None:
        return None
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    compiled = jax.jit(make(jax))
    device = [jnp.asarray(a) for a in arrays]
    return lambda: compiled(*device).block_until_ready()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=None, help="program names (default: all)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for name, (fn, numpy_fn, (op, opset, attrs), jax_make, kind) in programs().items():
        if args.only and name not in args.only:
            continue
        arrays = inputs(kind, rng)
        fused = dsl.jit(fn)
        candidates = {"dsl": lambda: fused(*arrays)}
        if numpy_fn is not None:
            candidates["numpy"] = lambda: numpy_fn(*arrays)
        for peer, runner in (("onnxruntime", ort_runner(op, opset, attrs, arrays)), ("jax.jit", jax_runner(jax_make, arrays))):
            if runner is not None:
                candidates[peer] = runner
        with np.errstate(all="ignore"):
            t = interleaved_medians(candidates, repeat=args.repeat)
        peers = [t[k] for k in ("onnxruntime", "jax.jit") if k in t]
        moved = sum(a.nbytes for a in arrays) + arrays[0].nbytes
        ms = lambda k: f"{t[k] * 1e3:.1f}" if k in t else "-"  # noqa: E731
        best = f"{min(peers) / t['dsl']:.2f}x" if peers else "-"
        numpy_ratio = f"{t['numpy'] / t['dsl']:.2f}x" if "numpy" in t else "-"
        rows.append((name, ms("dsl"), ms("numpy"), ms("onnxruntime"), ms("jax.jit"), numpy_ratio, best,
                     f"{moved / t['dsl'] / 1e9:.1f}"))
        print(rows[-1], flush=True)
    print()
    print(table(rows, ("op, [4096, 4096]", "dsl ms", "numpy ms", "onnxruntime ms", "jax.jit ms", "dsl vs numpy",
                       "dsl vs best peer", "dsl GB/s")))
    print(f"\n{CORES} cores; onnxruntime intra-op threads = {CORES}, spin-wait off; interleaved, median of "
          f"{args.repeat}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
