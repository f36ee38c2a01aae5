"""Transposed copies: kernels.copy.materialize vs np.ascontiguousarray and np.copyto bandwidth.

Run from the repository root:
    NUMBA_CACHE_DIR=/tmp/numba_cache python benchmarks/copy_bench.py

Each case times, side by side in every round (medians over ROUNDS rounds after a warm-up):
  ascontig   np.ascontiguousarray(a.T)            (allocates its output)
  mater      materialize(buffer, a.T's view)      (allocates its output)
  mater/out  materialize(..., out=preallocated)   (the kernel's bandwidth)
  copyto     np.copyto(preallocated, buffer)      (a plain memory copy of the same bytes)
speedup = ascontig / mater; fraction = copyto time / mater/out time (1.0 = memcpy speed).
GB/s counts the output bytes once.
"""
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
# benchmarks/kernels.py would shadow the project's `kernels` package: import it without this folder
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
import numpy as np  # noqa: E402

from kernels.copy import materialize  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import table  # noqa: E402

ROUNDS = 7
CASES = [  # (label, rows, cols, dtype) of the source array a; the copy reads a.T
    ("8192x8192 float32", 8192, 8192, np.float32),
    ("4096x4096 float32", 4096, 4096, np.float32),
    ("8192x8192 uint8", 8192, 8192, np.uint8),
    ("4096x4096 float64", 4096, 4096, np.float64),
]


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def run_case(rows: int, cols: int, dtype) -> dict[str, float]:
    buffer = np.random.default_rng(0).integers(0, 256, rows * cols * np.dtype(dtype).itemsize,
                                               dtype=np.uint8).view(dtype)
    source = buffer.reshape(rows, cols)
    view = ((cols, rows), (1, cols), 0)  # a.T in elements of buffer
    out = np.zeros((cols, rows), dtype)
    copy_target = np.zeros_like(buffer)
    runs = {
        "ascontig": lambda: np.ascontiguousarray(source.T),
        "mater": lambda: materialize(buffer, *view),
        "mater/out": lambda: materialize(buffer, *view, out=out),
        "copyto": lambda: np.copyto(copy_target, buffer),
    }
    expected = np.ascontiguousarray(source.T)
    assert np.array_equal(materialize(buffer, *view).view(np.uint8), expected.view(np.uint8))
    for run in runs.values():  # warm-up: compile, fault pages in
        run()
    times = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            times[name].append(timed(run))
    return {name: float(np.median(values)) for name, values in times.items()}


def main() -> None:
    rows = []
    for label, source_rows, source_cols, dtype in CASES:
        nbytes = source_rows * source_cols * np.dtype(dtype).itemsize
        median = run_case(source_rows, source_cols, dtype)
        rows.append((f"transposed {label}", f"{nbytes / 2**20:.0f}", f"{median['ascontig'] * 1e3:.1f}",
                     f"{median['mater'] * 1e3:.1f}", f"{median['ascontig'] / median['mater']:.1f}x",
                     f"{nbytes / median['mater/out'] / 1e9:.2f}", f"{nbytes / median['copyto'] / 1e9:.2f}",
                     f"{median['copyto'] / median['mater/out']:.2f}"))
    print(table(rows, ("case", "MB", "ascontig ms", "mater ms", "speedup", "mater/out GB/s",
                       "copyto GB/s", "fraction")))


if __name__ == "__main__":
    main()
