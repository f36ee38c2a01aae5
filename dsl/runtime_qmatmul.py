"""Running a node whose lowering is QuantizedMatMul (dsl/ops/lowering.py): MatMulNBits and the
fused DequantMatMul. Up to kernels.qmatmul.ROWS_MAX rows of A take the GEMV loops, which read
W's codes once; more rows take W a tile of rows at a time, decoded into a buffer of about
TILE_BYTES (half the L3) and multiplied by BLAS (K in the kernels' order on both sides). A
constant W is put in the kernels' layout once, when the runner is made; a run-time one is read
in place. Where the lowering names
no kernel weight (g_idx, a layout the kernels do not read) the node runs its reference."""
from __future__ import annotations

import numpy as np

from kernels import qmatmul

from .buffers import POOL
from .convert import convert
from .passes.fuse import NodeStep
from .runtime import run_node, split_threads

# Bytes of codes from which the GEMV splits over the threads: it is compute-bound (about 7 GB/s a
# core), so two threads pay far below the elementwise kernels' threshold. int4, interleaved
# medians, one thread / two: 256 x 1024 53 / 31 us, 1024 x 1024 143 / 116 us, 2816 x 1024 348 /
# 235 us (examples/tiny_llm_decoder.py's JIT decode: 143 -> 191 tokens/s)
PARALLEL_CODE_BYTES = 64 << 10
TILE_BYTES = 16 << 20  # float32 bytes of a decoded tile of W (large M; 4 MiB tiles measured 1.4x slower)


class QuantMatMulRunner:
    """One QuantizedMatMul node, ready to run."""

    def __init__(self, step: NodeStep, constants: dict):
        self.step = step
        self.lowering = step.opdef.kernel
        self.inputs = [None if v is None else v.name for v in step.node.inputs]
        self.output = step.node.outputs[0].name
        self.out_dtype = step.node.outputs[0].type.dtype
        # W, its scale and zero point (inputs 1..3 of both ops) and MatMulNBits' g_idx (4)
        self.constant = all(name is None or name in constants for name in self.inputs[1:5])
        self.weight = None
        if self.constant:
            args = [None if name is None else constants.get(name) for name in self.inputs]
            self.weight = self.lowering.weight(step.call, args, True)

    def run(self, env: dict) -> None:
        args = [None if name is None else env[name] for name in self.inputs]
        weight = self.weight if self.constant else self.lowering.weight(self.step.call, args, False)
        if weight is None:
            run_node(self.step, env)
            return
        a = self.lowering.activation(self.step.call, args)
        rows = a.reshape(-1, weight.k) if a.ndim > 1 else a.reshape(1, -1)
        out = product(np.ascontiguousarray(rows), weight)
        bias = self.lowering.bias(self.step.call, args)
        if bias is not None:
            out += bias
        out = out.reshape(a.shape[:-1] + (weight.n,))
        env[self.output] = out if self.out_dtype.onnx_name == "float" else convert(out, self.out_dtype)

    @property
    def kind(self) -> str:
        """What explain() calls the step: the kernels, or the reference (a constant weight the
        lowering gave no kernel weight; a run-time g_idx)."""
        if self.constant:
            return "qgemv" if self.weight is not None else "numpy"
        return "numpy" if len(self.inputs) > 4 and self.inputs[4] is not None else "qgemv"


def product(rows: np.ndarray, weight: qmatmul.Weight) -> np.ndarray:
    """rows [M, K] float32 @ W^T -> [M, N] float32."""
    threads = split_threads(weight.codes.size, PARALLEL_CODE_BYTES)
    if rows.shape[0] == 0:
        return np.zeros((0, weight.n), np.float32)
    if rows.shape[0] <= qmatmul.ROWS_MAX:
        return qmatmul.gemv(rows, weight, threads)
    # Tiles decode on this thread alone: BLAS's threads spin for a while after each product, and
    # a decode split over the team then waited for the core they held (int4 128 x 4096 x 4096,
    # 16 MiB tiles: 1.13 ms a tile on one thread, 1.45-1.5 ms on two; BLAS 4.9 ms a tile)
    ordered = qmatmul.in_kernel_order(rows, weight)  # (K as the decoded tiles hold it)
    out = np.empty((rows.shape[0], weight.n), np.float32)
    tile = max(1, min(weight.n, TILE_BYTES // (4 * ordered.shape[1])))
    # (pooled: a fresh 16 MiB buffer costs a page fault per 4 KiB on its first write, every call)
    buffer = POOL.empty(tile * ordered.shape[1], np.float32).reshape(tile, ordered.shape[1])
    for n0 in range(0, weight.n, tile):
        n1 = min(weight.n, n0 + tile)
        block = qmatmul.decode(weight, n0, n1, buffer[:n1 - n0], 1)
        np.matmul(ordered, block.T, out=out[:, n0:n1])
    return out
