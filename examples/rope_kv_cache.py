"""One decode step of an LLM's attention input side, in dsl, checked against numpy and timed:

- an embedding lookup (Gather of token ids from a [32000, 1024] table);
- rotary position embedding by slicing and concatenation (rotate-half), fused into one kernel;
- a KV-cache append two ways: Concat (a new, longer cache) and TensorScatter (writing into a
  fixed-size cache at each sequence's position);
- greedy sampling: argmax over [8, 128256] logits.

Run: python examples/rope_kv_cache.py
"""
from __future__ import annotations

import time

import numpy as np

import dsl

RNG = np.random.default_rng(0)
VOCAB, HIDDEN, HEADS, HEAD_DIM, PAST = 32000, 1024, 8, 64, 1024


def best_ms(fn, *args, repeat: int = 15) -> float:
    """The median of ``repeat`` calls after two warm-up calls, in ms."""
    for _ in range(2):
        fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def rotate_half(x):
    half = x.shape[-1] // 2
    return dsl.concat([-x[..., half:], x[..., :half]], -1)


@dsl.jit
def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def numpy_rope(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], -1) * sin


embed = dsl.jit(lambda table, ids: dsl.gather(table, ids, 0))
append = dsl.jit(lambda cache, new: dsl.concat([cache, new], 2))
scatter = dsl.jit(lambda cache, new, at: dsl.tensor_scatter(cache, new, at, axis=2), opset=24)
greedy = dsl.jit(lambda logits: dsl.argmax(logits, -1, keepdims=False))


def main():
    rows = []

    def check(name, ours, theirs, fn, numpy_fn, args, exact=True):
        got, want = ours, theirs
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        ms, np_ms = best_ms(fn, *args), best_ms(numpy_fn, *args)
        rows.append((name, f"{ms:.3f}", f"{np_ms:.3f}", f"{np_ms / ms:.2f}x"))

    table = RNG.standard_normal((VOCAB, HIDDEN), dtype=np.float32)
    ids = RNG.integers(0, VOCAB, (4, 64))
    check("embedding gather [4, 64] of [32000, 1024]", embed(table, ids), table[ids], embed, lambda t, i: t[i],
          (table, ids))
    try:
        embed(table, np.array([[VOCAB]]))
    except dsl.DslError as error:  # an id out of range is an error, never a read outside the table
        print("out-of-range id:", str(error).split(": ", 1)[1][:80])

    x = RNG.standard_normal((4, HEADS, 64, HEAD_DIM), dtype=np.float32)
    angles = np.arange(64)[:, None] * (10000.0 ** (-np.arange(HEAD_DIM) % (HEAD_DIM // 2) / (HEAD_DIM // 2)))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    check("RoPE rotate-half [4, 8, 64, 64]", rope(x, cos, sin), numpy_rope(x, cos, sin), rope, numpy_rope,
          (x, cos, sin), exact=False)
    assert rope.executable(x, cos, sin).kernel_count == 1  # slices, Neg, Concat, Mul, Add: one kernel

    cache = RNG.standard_normal((1, HEADS, PAST, HEAD_DIM), dtype=np.float32)
    new = RNG.standard_normal((1, HEADS, 1, HEAD_DIM), dtype=np.float32)
    check("KV-cache append (Concat) [1, 8, 1024 + 1, 64]", append(cache, new), np.concatenate([cache, new], 2),
          append, lambda c, n: np.concatenate([c, n], 2), (cache, new))

    fixed = np.zeros((2, HEADS, PAST, HEAD_DIM), np.float32)
    step = RNG.standard_normal((2, HEADS, 1, HEAD_DIM), dtype=np.float32)
    at = np.array([5, 700])

    def numpy_scatter(c, n, positions):
        out = c.copy()
        for b, p in enumerate(positions):
            out[b, :, p:p + n.shape[2]] = n[b]
        return out
    check("KV-cache write (TensorScatter) [2, 8, 1024, 64]", scatter(fixed, step, at), numpy_scatter(fixed, step, at),
          scatter, numpy_scatter, (fixed, step, at))
    assert not fixed.any()  # the input cache is not modified

    logits = RNG.standard_normal((8, 128256), dtype=np.float32)
    check("greedy argmax [8, 128256]", greedy(logits), logits.argmax(-1), greedy, lambda v: v.argmax(-1), (logits,))

    width = max(len(r[0]) for r in rows)
    print(f"{'program'.ljust(width)}  dsl ms   numpy ms  speed-up")
    for name, ms, np_ms, ratio in rows:
        print(f"{name.ljust(width)}  {ms:>7}  {np_ms:>8}  {ratio:>8}")
    print("all results match numpy")


if __name__ == "__main__":
    main()
