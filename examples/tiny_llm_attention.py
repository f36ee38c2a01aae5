"""Tiny-LLM attention: padding mask -> Cast -> Unsqueeze [1, 2] -> additive bias -> Softmax, fused."""
import time

import numpy as np

import dsl


@dsl.jit
def masked_softmax(mask, scores):
    """mask [B, S] (1 = keep, 0 = pad), scores [B, H, S, S] -> attention probabilities."""
    bias = (1.0 - dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])) * -1e4
    return dsl.softmax(scores + bias)


def numpy_masked_softmax(mask, scores):
    bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * np.float32(-1e4)
    logits = scores + bias
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def median_ms(fn, *args, repeat=7):
    fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main():
    rng = np.random.default_rng(0)
    batch, heads, seq = 4, 16, 256
    lengths = rng.integers(seq // 2, seq + 1, batch)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    scores = rng.standard_normal((batch, heads, seq, seq)).astype(np.float32)

    print(masked_softmax.executable(mask, scores).explain(source=False))
    report = dsl.compare(masked_softmax, mask, scores, rtol=1e-5, atol=1e-7)
    print(report)
    assert report.ok, report
    np.testing.assert_allclose(masked_softmax(mask, scores), numpy_masked_softmax(mask, scores),
                               rtol=1e-5, atol=1e-7)
    fused, eager = median_ms(masked_softmax, mask, scores), median_ms(numpy_masked_softmax, mask, scores)
    print(f"fused jit {fused:.2f} ms, numpy {eager:.2f} ms, speed-up {eager / fused:.1f}x")


if __name__ == "__main__":
    main()
