"""Packed int4 weights: DequantizeLinear fused into the MatMul prologue, read straight from packed bytes.

Two layouts: one scale / zero point per output column (axis=1), and blocks of 32 along K with
packed int4 zero points (axis=0, block_size=32: the ONNX QDQ layout of int4 LLM weights).
"""
import time

import numpy as np

import dsl


@dsl.jit
def int4_linear(x, weights, scale, zero_point):
    """x [T, K] @ dequant(weights [K, N] int4, per-output-column scale / zero point)."""
    w = dsl.dequantize_linear(weights, scale, zero_point, axis=1)
    return dsl.matmul(x, w)


BLOCK = 32


@dsl.jit
def int4_linear_blocked(x, weights, scale, zero_point):
    """x [T, K] @ dequant(weights [K, N] int4, scale / zero point [K / 32, N]: blocks of 32 along K)."""
    w = dsl.dequantize_linear(weights, scale, zero_point, axis=0, block_size=BLOCK)
    return dsl.matmul(x, w)


def int4_codes(packed):
    """ONNX raw int4 bytes (low nibble first) -> int16 values."""
    low = (packed & 0x0F).astype(np.int16)
    high = (packed >> 4).astype(np.int16)
    codes = np.empty(packed.size * 2, np.int16)
    codes[0::2], codes[1::2] = np.where(low >= 8, low - 16, low), np.where(high >= 8, high - 16, high)
    return codes


def numpy_int4_linear(x, packed, scale, zero_point, shape):
    weights = (int4_codes(packed).reshape(shape) - zero_point.astype(np.int16)).astype(np.float32) * scale
    return x @ weights


def numpy_int4_linear_blocked(x, packed, scale, packed_zero_point, shape):
    spread = lambda a: np.repeat(a, BLOCK, axis=0)
    zero_point = spread(int4_codes(packed_zero_point).reshape(scale.shape))
    weights = (int4_codes(packed).reshape(shape) - zero_point).astype(np.float32) * spread(scale)
    return x @ weights


def main():
    rng = np.random.default_rng(0)
    tokens, k, n = 8, 2048, 4096
    packed = rng.integers(0, 256, k * n // 2, dtype=np.uint8)        # ONNX raw int4 layout
    weights = dsl.Tensor.from_packed(packed, "int4", (k, n))          # zero-copy
    scale = (rng.random(n) / 8).astype(np.float32)
    zero_point = rng.integers(-2, 3, n).astype(dsl.int4.np_dtype)     # ml_dtypes int4 array
    x = rng.standard_normal((tokens, k)).astype(np.float32)

    print(int4_linear.executable(x, weights, scale, zero_point).explain(source=False))
    got = int4_linear(x, weights, scale, zero_point)
    want = numpy_int4_linear(x, packed, scale, zero_point, (k, n))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)
    print(dsl.compare(int4_linear, x, weights, scale, zero_point, rtol=2e-5, atol=1e-4))

    def timed(fn, *args):
        fn(*args)
        start = time.perf_counter()
        for _ in range(5):
            fn(*args)
        return (time.perf_counter() - start) / 5 * 1e3

    fused = timed(int4_linear, x, weights, scale, zero_point)
    eager = timed(numpy_int4_linear, x, packed, scale, zero_point, (k, n))
    print(f"int4 weights {k}x{n} ({packed.nbytes / 2**20:.0f} MiB packed): fused {fused:.1f} ms, "
          f"numpy {eager:.1f} ms ({eager / fused:.1f}x)")

    # blocks of 32 along K, packed int4 zero points
    block_scale = (rng.random((k // BLOCK, n)) / 8).astype(np.float32)
    packed_zero_point = rng.integers(0, 256, k // BLOCK * n // 2, dtype=np.uint8)
    block_zero_point = dsl.Tensor.from_packed(packed_zero_point, "int4", (k // BLOCK, n))
    args = (x, weights, block_scale, block_zero_point)
    print(int4_linear_blocked.executable(*args).explain(source=False))
    want = numpy_int4_linear_blocked(x, packed, block_scale, packed_zero_point, (k, n))
    np.testing.assert_allclose(int4_linear_blocked(*args), want, rtol=2e-5, atol=1e-4)
    fused = timed(int4_linear_blocked, *args)
    eager = timed(numpy_int4_linear_blocked, x, packed, block_scale, packed_zero_point, (k, n))
    print(f"int4 weights {k}x{n}, blocks of {BLOCK} along K: fused {fused:.1f} ms, "
          f"numpy {eager:.1f} ms ({eager / fused:.1f}x)")


if __name__ == "__main__":
    main()
