"""Elementwise work on a transposed view: `transpose(x, [1, 0]) + y` on float32 [8192, 8192]
(256 MiB per operand), dsl's tiled kernel against dsl.contiguous of the same view (the blocked
copy kernel, the issue's yardstick), the contiguous `x + y`, numpy and jax.jit; interleaved,
medians; GB/s of the operands each program reads and writes (3 x 256 MiB; the copy 2).

Run: python benchmarks/transposed.py [--n 8192] [--repeat 7]
"""
import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # (benchmarks/kernels.py)
import numpy as np  # noqa: E402

import dsl  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import interleaved_medians, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    y = rng.standard_normal((n, n), dtype=np.float32)
    tiled = dsl.jit(lambda a, b: dsl.transpose(a, [1, 0]) + b)
    plain = dsl.jit(lambda a, b: a + b)
    assert np.array_equal(tiled(x, y), x.T + y)
    candidates = {
        "dsl transpose(x) + y": lambda: tiled(x, y),
        "dsl.contiguous(transpose(x))": lambda: dsl.contiguous(dsl.transpose(x, [1, 0])),
        "dsl x + y (contiguous)": lambda: plain(x, y),
        "numpy x.T + y": lambda: x.T + y,
    }
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
        jx, jy = jnp.asarray(x), jnp.asarray(y)
        jf = jax.jit(lambda a, b: a.T + b)
        jf(jx, jy).block_until_ready()
        candidates["jax.jit x.T + y"] = lambda: jf(jx, jy).block_until_ready()
    except ImportError:
        pass
    medians = interleaved_medians(candidates, repeat=args.repeat)
    base = medians["dsl.contiguous(transpose(x))"]
    rows = [(name, f"{t * 1e3:.1f}", f"{base / t:.2f}x",
             f"{(2 if 'contiguous(' in name else 3) * x.nbytes / t / 1e9:.1f}") for name, t in medians.items()]
    print(table(rows, ("program", "ms", "speed vs dsl.contiguous", "GB/s (operands read and written)")))
    print(f"\n{os.cpu_count()} cores; float32 [{n}, {n}]; interleaved, median of {args.repeat}; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
