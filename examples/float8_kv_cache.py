"""A float8 (e4m3fn) KV cache: quantize new keys on write, dequantize fused into the attention scores."""
import numpy as np

import dsl


@dsl.jit
def store_keys(keys, scale):
    """float32 keys [B, H, T, D] -> float8e4m3fn codes (saturating, round to nearest even)."""
    return dsl.cast(keys / scale, dsl.float8e4m3fn)


@dsl.jit
def scores_from_cache(query, cached_keys, scale):
    """query [B, H, 1, D] . dequant(cached float8 keys [B, H, T, D]) summed over D -> [B, H, T]."""
    keys = dsl.cast(cached_keys, dsl.float32) * scale
    return dsl.reduce_sum(query * keys, [-1], keepdims=False)


def main():
    rng = np.random.default_rng(0)
    batch, heads, tokens, dim = 2, 8, 1024, 64
    keys = rng.standard_normal((batch, heads, tokens, dim)).astype(np.float32)
    query = rng.standard_normal((batch, heads, 1, dim)).astype(np.float32)
    scale = np.float32(np.abs(keys).max() / 448.0)                 # e4m3fn max finite is 448
    scale_array = np.array(scale, np.float32)

    cache = store_keys(keys, scale_array)
    print("cache", cache.dtype, cache.shape, f"{cache.nbytes / 2**20:.1f} MiB vs float32 "
          f"{keys.nbytes / 2**20:.1f} MiB")
    assert cache.dtype == dsl.float8e4m3fn.np_dtype
    assert np.array_equal(cache.view(np.uint8), dsl.cast(keys / scale, dsl.float8e4m3fn).view(np.uint8))

    scores = scores_from_cache(query, cache, scale_array)
    exact = (query * keys).sum(-1)
    print("scores", scores.shape, "max abs error vs float32 keys:", float(np.abs(scores - exact).max()))
    print(scores_from_cache.executable(query, cache, scale_array).explain(source=False))
    report = dsl.compare(scores_from_cache, query, cache, scale_array, rtol=1e-5, atol=1e-5)
    print(report)
    assert report.ok, report


if __name__ == "__main__":
    main()
