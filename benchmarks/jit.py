"""JIT benchmarks: fused programs vs numpy, numexpr and onnxruntime, measured side by side.

Run: python benchmarks/jit.py   (needs the `bench` extra: onnxruntime, numexpr)
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
# benchmarks/kernels.py would shadow the project's `kernels` package: import dsl without this folder
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
import numpy as np  # noqa: E402

import dsl  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import median_seconds, ort_session, table  # noqa: E402

CORES = os.cpu_count() or 1


@dsl.jit
def mask_pipeline(mask, scores):
    m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
    return scores + (1.0 - m) * -1e4


def numpy_mask(mask, scores):
    return scores + (1.0 - mask[:, None, None, :].astype(np.float32)) * np.float32(-1e4)


def ort_mask_session():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["mf", "axes"], ["m4"]),
             helper.make_node("Sub", ["one", "m4"], ["inv"]),
             helper.make_node("Mul", ["inv", "big"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["out"])]
    graph = helper.make_graph(
        nodes, "mask",
        [helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", "S"]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "H", "S", "S"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "S", "S"])],
        [helper.make_tensor("axes", TensorProto.INT64, [2], [1, 2]),
         helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
         helper.make_tensor("big", TensorProto.FLOAT, [], [-1e4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort_session(model)
    return lambda mask, scores: session.run(None, {"mask": mask, "scores": scores})[0], model


def bench_mask(rows):
    rng = np.random.default_rng(0)
    batch, heads, seq = 4, 16, 512
    mask = (rng.random((batch, seq)) > 0.2).astype(np.int64)
    scores = rng.standard_normal((batch, heads, seq, seq)).astype(np.float32)
    assert np.array_equal(mask_pipeline(mask, scores), numpy_mask(mask, scores))
    t_dsl = median_seconds(mask_pipeline, mask, scores)
    t_np = median_seconds(numpy_mask, mask, scores)
    peers = [("numpy eager", t_np)]
    try:
        import numexpr
        numexpr.set_num_threads(CORES)
        m4 = mask[:, None, None, :]
        t_ne = median_seconds(lambda: numexpr.evaluate("scores + (1 - m4) * -1e4",
                                                       local_dict={"scores": scores, "m4": m4}))
        peers.append(("numexpr", t_ne))
    except ImportError:
        pass
    try:
        run_ort, _ = ort_mask_session()
        np.testing.assert_allclose(run_ort(mask, scores), numpy_mask(mask, scores))
        peers.append(("onnxruntime", median_seconds(run_ort, mask, scores)))
    except ImportError:
        pass
    nbytes = scores.nbytes * 2 + mask.nbytes
    _peak_memory_row(rows, mask, scores)
    for name, t in peers:
        rows.append(("mask pipeline B4 H16 S512", name, f"{t * 1e3:.2f}", f"{t_dsl * 1e3:.2f}",
                     f"{t / t_dsl:.2f}x", f"{nbytes / t_dsl / 1e9:.1f}"))


def _peak_memory_row(rows, mask, scores):
    """Bytes allocated during one call while the previous result is still alive (so no pooled
    buffer can be reused): only the output should be new."""
    import tracemalloc
    keep = mask_pipeline(mask, scores)
    tracemalloc.start()
    result = mask_pipeline(mask, scores)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out_mb, peak_mb = result.nbytes / 2**20, peak / 2**20
    rows.append(("mask pipeline: peak new memory per call", "output size", f"{out_mb:.1f} MiB",
                 f"{peak_mb:.1f} MiB", f"{peak_mb / out_mb:.3f} of output", "-"))
    del keep


@dsl.jit
def int4_dequant(weights, scale):
    return dsl.dequantize_linear(weights, scale, axis=0)


def numpy_int4_dequant(packed, scale, shape):
    low = (packed & 0x0F).astype(np.int8)
    high = (packed >> 4).astype(np.int8)
    values = np.empty(packed.size * 2, np.int8)
    values[0::2] = np.where(low >= 8, low - 16, low)
    values[1::2] = np.where(high >= 8, high - 16, high)
    return values.reshape(shape).astype(np.float32) * scale[:, None]


def bench_int4(rows):
    rng = np.random.default_rng(1)
    shape = (4096, 8192)
    packed = rng.integers(0, 256, shape[0] * shape[1] // 2, dtype=np.uint8)
    scale = rng.random(shape[0]).astype(np.float32)
    weights = dsl.Tensor.from_packed(packed, "int4", shape)
    assert np.array_equal(int4_dequant(weights, scale), numpy_int4_dequant(packed, scale, shape))
    t_dsl = median_seconds(int4_dequant, weights, scale, repeat=5)
    t_np = median_seconds(numpy_int4_dequant, packed, scale, shape, repeat=3, warmup=1)
    rows.append(("int4 [4096, 8192] dequant x row scale", "numpy bit ops", f"{t_np * 1e3:.1f}",
                 f"{t_dsl * 1e3:.1f}", f"{t_np / t_dsl:.1f}x", f"{(packed.nbytes + 4 * packed.size * 2) / t_dsl / 1e9:.1f}"))


BLOCK = 32


@dsl.jit
def int4_blocked_dequant(weights, scale):
    return dsl.dequantize_linear(weights, scale, axis=1, block_size=BLOCK)


def bench_int4_blocked(rows):
    """Blocked quantization along the inner axis (blocks of 32, the common int4 weight layout):
    the scale is read once per block inside the fused loop."""
    rng = np.random.default_rng(3)
    shape = (4096, 8192)
    packed = rng.integers(0, 256, shape[0] * shape[1] // 2, dtype=np.uint8)
    scale = rng.random((shape[0], shape[1] // BLOCK)).astype(np.float32)
    weights = dsl.Tensor.from_packed(packed, "int4", shape)
    ones = np.ones(shape[0], np.float32)
    numpy_blocked = lambda: numpy_int4_dequant(packed, ones, shape) * np.repeat(scale, BLOCK, axis=1)
    assert np.array_equal(int4_blocked_dequant(weights, scale), numpy_blocked())
    t_dsl = median_seconds(int4_blocked_dequant, weights, scale, repeat=5)
    t_np = median_seconds(numpy_blocked, repeat=3, warmup=1)
    rows.append((f"int4 [4096, 8192] dequant, blocks of {BLOCK} along K", "numpy bit ops + repeat",
                 f"{t_np * 1e3:.1f}", f"{t_dsl * 1e3:.1f}", f"{t_np / t_dsl:.1f}x",
                 f"{(packed.nbytes + scale.nbytes + 4 * packed.size * 2) / t_dsl / 1e9:.1f}"))


@dsl.jit
def last_axis_softmax(x):
    return dsl.softmax(x)


def numpy_softmax(x):
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def bench_softmax(rows):
    x = np.random.default_rng(2).standard_normal((64, 512, 512)).astype(np.float32)
    np.testing.assert_allclose(last_axis_softmax(x), numpy_softmax(x), rtol=1e-5, atol=1e-7)
    t_dsl = median_seconds(last_axis_softmax, x)
    t_np = median_seconds(numpy_softmax, x)
    rows.append(("softmax last axis [64, 512, 512]", "numpy eager", f"{t_np * 1e3:.1f}", f"{t_dsl * 1e3:.1f}",
                 f"{t_np / t_dsl:.2f}x", f"{2 * x.nbytes / t_dsl / 1e9:.1f}"))


_PROCESS = textwrap.dedent("""
    import time, numpy as np
    start = time.perf_counter()
    import dsl
    @dsl.jit  # creating the first jit function also sets numba's CPU target up (once per process)
    def f(mask, scores):
        m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
        return scores + (1.0 - m) * -1e4
    mask = np.ones((2, 8), np.int64); scores = np.zeros((2, 3, 8, 8), np.float32)
    t0 = time.perf_counter(); f(mask, scores); first = time.perf_counter() - t0
    print(first, time.perf_counter() - start)
""")


def bench_compile(rows):
    """A new process's first call with empty caches (cold) and with the caches it left (warm):
    the call alone, and everything from `import dsl` to the first result, and the whole
    process as the shell sees it (Python start-up and exit included)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DSL_CACHE_DIR=os.path.join(cache, "k"), NUMBA_CACHE_DIR=os.path.join(cache, "n"))

        def run():
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _PROCESS], env=env, check=True, capture_output=True, text=True)
            first, after_import = map(float, out.stdout.split()[-2:])
            return first, after_import, time.perf_counter() - start
        cold = run()
        warm = np.median([run() for _ in range(5)], axis=0)
    labels = ("first call, new process", "import dsl + @jit + first call", "whole new process (python -c)")
    for label, c, w in zip(labels, cold, warm):
        rows.append((label, "cold (empty caches)", f"{c * 1e3:.0f}", f"{w * 1e3:.0f}", f"{c / w:.1f}x", "-"))
    x = np.ones(1, np.float32)
    tiny = dsl.jit(lambda a: a * 2.0 + 1.0)
    t_dsl = median_seconds(tiny, x, repeat=2001, warmup=50)
    t_np = median_seconds(lambda a: a * np.float32(2.0) + np.float32(1.0), x, repeat=2001, warmup=50)
    rows.append(("call overhead, 1-element x*2+1", "numpy eager", f"{t_np * 1e6:.1f} us", f"{t_dsl * 1e6:.1f} us",
                 f"{t_np / t_dsl:.2f}x", "-"))


def main():
    rows = []
    for bench in (bench_mask, bench_int4, bench_int4_blocked, bench_softmax, bench_compile):
        bench(rows)
    print(f"dsl {dsl.__version__}, numpy {np.__version__}, {CORES} cores; medians")
    print(table(rows, ("workload", "peer", "peer ms", "dsl ms", "dsl speed-up", "dsl GB/s")))


if __name__ == "__main__":
    main()
