"""Quantized matmul: dsl (the weight's codes read by kernels/qmatmul.py) against onnxruntime and
numpy on the same weights, with GB/s of packed-weight bytes against a 2-thread streaming read of
those bytes measured in the same run.

Rows:
- int4 blocks of 32 (com.microsoft MatMulNBits, B an initializer; onnxruntime's MatMulNBits
  with accuracy_level 0, i.e. float32 compute);
- int8 per output channel (MatMulNBits bits=8 with one block a row for onnxruntime, the same
  bytes; dsl also runs the QDQ form DequantizeLinear -> Transpose -> MatMul);
- float8e4m3fn per output channel (QDQ: onnxruntime dequantizes, then MatMul);
- int4 layers of 4096 x 4096 whose codes are twice the L3 the OS reports (at least 8 layers),
  each reading the same A: every run streams the weights from memory, as a model's layers do;
- prefill (M = 128) against float32 BLAS on the weight dequantized beforehand;
- an embedding lookup through com.microsoft GatherBlockQuantized (int4 table).
numpy (unpack + dequantize + matmul) runs after the interleaved dsl / onnxruntime rounds:
its BLAS threads keep spinning after returning and would slow whichever candidate followed.

    python benchmarks/quant_matmul.py [--repeat 21] [--quick]
"""
import argparse
import os
import sys

import numba
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import dsl  # noqa: E402

from _timing import CORES, interleaved_medians, median_seconds, ort_session, table  # noqa: E402

BLOCK = 32


@numba.njit(parallel=True, nogil=True, cache=True)
def _read(words, tasks):
    total = np.uint64(0)
    for t in numba.prange(tasks):
        acc = np.uint64(0)
        for i in range(t * words.size // tasks, (t + 1) * words.size // tasks):
            acc += words[i]
        total += acc
    return total


def read_bandwidth_case(arrays):
    """A zero-argument callable reading every byte of ``arrays`` on 2 threads (uint64 words)."""
    words = [a.reshape(-1).view(np.uint64) for a in arrays]
    return lambda: [_read(w, CORES) for w in words]


def _onnx():
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    return onnx, TensorProto, helper, numpy_helper


def l3_bytes() -> int:
    """The L3 size the OS reports (32 MiB if it reports none)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            text = f.read().strip()
        return int(text[:-1]) << {"K": 10, "M": 20}[text[-1]] if text[-1] in "KM" else int(text)
    except (OSError, ValueError, KeyError):
        return 32 << 20


def nbits_model(weights: list, m: int, k: int, n: int, bits: int, block: int, chain: bool = True):
    """MatMulNBits nodes (each weight (B, scales) an initializer): a chain A [m, k] -> Y, or
    (``chain`` False, k = n) every node reading A, outputs Y0, Y1, ... (as a model's layers read
    their weights in turn, with activations that neither grow nor vanish)."""
    onnx, TensorProto, helper, numpy_helper = _onnx()
    nodes, inits, prev, outs = [], [], "A", []
    for i, (b, scales) in enumerate(weights):
        inits += [numpy_helper.from_array(b, f"B{i}"), numpy_helper.from_array(scales, f"S{i}")]
        out = f"Y{i}" if not chain else "Y" if i == len(weights) - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMulNBits", ["A" if i == 0 or not chain else prev, f"B{i}", f"S{i}"], [out],
                                      domain="com.microsoft", K=k, N=n, bits=bits, block_size=block))
        prev = out
        outs += [out] if not chain or i == len(weights) - 1 else []
    graph = helper.make_graph(nodes, "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [m, n]) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def qdq_model(codes, scale, m: int, k: int, n: int):
    """DequantizeLinear(W [n, k], per-row scale, axis 0) -> Transpose -> MatMul, W an initializer."""
    onnx, TensorProto, helper, numpy_helper = _onnx()
    from dsl.onnx_io import tensor_to_proto
    inits = [tensor_to_proto("W", codes), numpy_helper.from_array(scale, "S")]
    nodes = [helper.make_node("DequantizeLinear", ["W", "S"], ["Wf"], axis=0),
             helper.make_node("Transpose", ["Wf"], ["Wt"], perm=[1, 0]),
             helper.make_node("MatMul", ["A", "Wt"], ["Y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def nbits_weights(rng, k: int, n: int, bits: int, block: int):
    blocks = -(-k // block)
    b = rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    scales = (rng.random(n * blocks, dtype=np.float32) / 64).astype(np.float32)
    return b, scales


def dequantized(b, scales, k, n, bits, block):
    """The contrib spec in numpy: unpack, (code - 2^(bits-1)) * scale -> W [n, k] float32."""
    raw = b.reshape(n, -1)
    per = 8 // bits
    codes = np.stack([(raw >> (p * bits)) & ((1 << bits) - 1) for p in range(per)], axis=-1).reshape(n, -1)[:, :k]
    return (codes.astype(np.float32) - (1 << (bits - 1))) * np.repeat(scales.reshape(n, -1), block, axis=1)[:, :k]


def numpy_nbits(a, weights, k, n, bits, block):
    """Dequantize, then a @ W^T, layer by layer."""
    for b, scales in weights:
        a = a @ dequantized(b, scales, k, n, bits, block).T
    return a


def run(rows, label, m, k, n, candidates, numpy_fn, packed_bytes, read_case, repeat):
    times = interleaved_medians({**candidates, "read": read_case}, repeat=repeat)
    times["numpy"] = median_seconds(numpy_fn, repeat=max(3, repeat // 4), warmup=1)
    ours = times["dsl"]
    cells = [label, f"{m}x{k}x{n}", f"{ours * 1e3:.3f}"]
    for peer in ("onnxruntime", "numpy"):
        cells += [f"{times[peer] * 1e3:.3f}" if peer in times else "-",
                  f"{times[peer] / ours:.2f}x" if peer in times else "-"]
    gbs = packed_bytes / ours / 1e9
    read = packed_bytes / times["read"] / 1e9
    cells += [f"{gbs:.1f}", f"{read:.1f}", f"{gbs / read:.0%}"]
    rows.append(cells)
    print(" | ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--quick", action="store_true", help="the K = N = 4096 rows only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    shapes = [(1, 4096, 4096), (1, 8192, 4096), (1, 4096, 11008), (4, 4096, 4096), (16, 4096, 4096)]
    if args.quick:
        shapes = shapes[:1]
    for m, k, n in shapes:   # int4, blocks of 32
        weights = [nbits_weights(rng, k, n, 4, BLOCK)]
        model = nbits_model(weights, m, k, n, 4, BLOCK)
        program, session = dsl.from_onnx(model), ort_session(model)
        a = rng.standard_normal((m, k), dtype=np.float32)
        run(rows, "int4 block 32", m, k, n, {"dsl": lambda: program.run({"A": a}),
                                             "onnxruntime": lambda: session.run(None, {"A": a})},
            lambda: numpy_nbits(a, weights, k, n, 4, BLOCK), weights[0][0].nbytes,
            read_bandwidth_case([weights[0][0]]), args.repeat)

    for m, k, n in shapes[:1] + shapes[2:3]:  # int8 per channel: MatMulNBits bits 8, one block a row
        codes = rng.integers(-128, 128, (n, k), dtype=np.int8)
        scale = (rng.random(n, dtype=np.float32) / 256).astype(np.float32)
        b = (codes.astype(np.int16) + 128).astype(np.uint8).reshape(n, 1, k)
        model = nbits_model([(b, scale)], m, k, n, 8, k)
        qdq = dsl.from_onnx(qdq_model(codes, scale, m, k, n))
        session = ort_session(model)
        a = rng.standard_normal((m, k), dtype=np.float32)
        run(rows, "int8 per channel (QDQ)", m, k, n, {"dsl": lambda: qdq.run({"A": a}),
                                                      "onnxruntime": lambda: session.run(None, {"A": a})},
            lambda: a @ (codes.astype(np.float32) * scale[:, None]).T, codes.nbytes,
            read_bandwidth_case([codes]), args.repeat)

    for m, k, n in shapes[:1] + shapes[2:3]:  # float8e4m3fn per channel (QDQ)
        values = rng.standard_normal((n, k), dtype=np.float32)
        codes = values.astype(dsl.float8e4m3fn.np_dtype)
        scale = (rng.random(n, dtype=np.float32) / 16).astype(np.float32)
        model = qdq_model(codes, scale, m, k, n)
        program, session = dsl.from_onnx(model), ort_session(model)
        a = rng.standard_normal((m, k), dtype=np.float32)
        run(rows, "float8e4m3fn per channel (QDQ)", m, k, n, {"dsl": lambda: program.run({"A": a}),
                                                              "onnxruntime": lambda: session.run(None, {"A": a})},
            lambda: a @ (codes.astype(np.float32) * scale[:, None]).T, codes.nbytes,
            read_bandwidth_case([codes.view(np.uint8)]), args.repeat)

    if not args.quick:   # layers of int4 4096 x 4096 whose codes are twice the L3: streamed from memory
        k = n = 4096
        count = max(8, -(-2 * l3_bytes() // (k * n // 2)))
        weights = [nbits_weights(rng, k, n, 4, BLOCK) for _ in range(count)]
        model = nbits_model(weights, 1, k, n, 4, BLOCK, chain=False)
        program, session = dsl.from_onnx(model), ort_session(model)
        a = rng.standard_normal((1, k), dtype=np.float32)
        mib = sum(w[0].nbytes for w in weights) >> 20
        run(rows, f"int4 block 32, {count} layers ({mib} MiB)", 1, k, n,
            {"dsl": lambda: program.run({"A": a}), "onnxruntime": lambda: session.run(None, {"A": a})},
            lambda: [numpy_nbits(a, [w], k, n, 4, BLOCK) for w in weights], sum(w[0].nbytes for w in weights),
            read_bandwidth_case([w[0] for w in weights]), max(5, args.repeat // 3))

    print()
    print(table(rows, ("weights", "MxKxN", "dsl ms", "onnxruntime ms", "dsl vs onnxruntime", "numpy ms",
                       "dsl vs numpy", "dsl GB/s", "read GB/s", "of read")))
    print(f"\n{CORES} cores; onnxruntime intra-op threads = {CORES}, spin-wait off, accuracy_level 0; dsl and "
          f"onnxruntime interleaved (order rotated), median of {args.repeat}; numpy after them; 'dsl vs X' = "
          f"X's time / dsl's; GB/s of packed weight bytes; read = a {CORES}-thread read of the same bytes; "
          f"load average {os.getloadavg()[0]:.2f}")

    if not args.quick:
        prefill(rng, args.repeat)
        embedding(rng, args.repeat)


def prefill(rng, repeat: int) -> None:
    """M = 128 rows through int4 blocks of 32 against float32 BLAS on the dequantized weight."""
    m, k, n = 128, 4096, 4096
    weights = [nbits_weights(rng, k, n, 4, BLOCK)]
    program = dsl.from_onnx(nbits_model(weights, m, k, n, 4, BLOCK))
    dense = dequantized(*weights[0], k, n, 4, BLOCK)
    a = rng.standard_normal((m, k), dtype=np.float32)
    np.testing.assert_allclose(program.run({"A": a})[0], a @ dense.T, rtol=1e-3, atol=1e-3)
    t_dsl = median_seconds(lambda: program.run({"A": a}), repeat=max(5, repeat // 2))
    t_blas = median_seconds(lambda: a @ dense.T, repeat=max(5, repeat // 2))
    print(f"\nprefill {m}x{k}x{n}, int4 blocks of 32: dsl {t_dsl * 1e3:.2f} ms, float32 BLAS on the dequantized "
          f"weight {t_blas * 1e3:.2f} ms: dsl takes {t_dsl / t_blas:.2f}x BLAS's time")


def embedding(rng, repeat: int) -> None:
    """com.microsoft GatherBlockQuantized: [4, 64] token ids from an int4 [32000, 1024] table
    (blocks of 32 along the rows), against onnxruntime and numpy (gather, then dequantize)."""
    import ml_dtypes
    onnx, TensorProto, helper, numpy_helper = _onnx()
    from dsl.onnx_io import tensor_to_proto
    vocab, dim, block = 32000, 1024, 32
    table = rng.integers(-8, 8, (vocab, dim)).astype(ml_dtypes.int4)
    scales = (rng.random((vocab, dim // block), dtype=np.float32) / 8).astype(np.float32)
    ids = rng.integers(0, vocab, (4, 64))
    node = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["y"], domain="com.microsoft",
                            block_size=block, gather_axis=0, quantize_axis=1, bits=4)
    graph = helper.make_graph([node], "embedding", [helper.make_tensor_value_info("ids", TensorProto.INT64, ids.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [tensor_to_proto("data", table), numpy_helper.from_array(scales, "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    program, session = dsl.from_onnx(model), ort_session(model)

    def numpy_lookup():
        return table[ids].astype(np.float32) * np.repeat(scales[ids], block, axis=-1)
    np.testing.assert_array_equal(program.run({"ids": ids})[0], numpy_lookup())
    t = interleaved_medians({"dsl": lambda: program.run({"ids": ids}), "onnxruntime": lambda: session.run(None, {"ids": ids}),
                             "numpy": numpy_lookup}, repeat=repeat)
    print(f"\nembedding lookup (GatherBlockQuantized) of [4, 64] ids from int4 [{vocab}, {dim}], blocks of {block}: "
          f"dsl {t['dsl'] * 1e3:.3f} ms, onnxruntime {t['onnxruntime'] * 1e3:.3f} ms "
          f"({t['onnxruntime'] / t['dsl']:.2f}x), numpy {t['numpy'] * 1e3:.3f} ms ({t['numpy'] / t['dsl']:.2f}x)")


if __name__ == "__main__":
    main()
