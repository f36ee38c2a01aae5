"""Shared timing helpers for the benchmarks: warm up, then the median of several runs."""
import time

import numpy as np


def median_seconds(fn, *args, repeat: int = 7, warmup: int = 2) -> float:
    """Median wall time of ``fn(*args)`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def interleaved_medians(candidates: dict, repeat: int = 9, warmup: int = 2) -> dict:
    """Median wall time of each zero-argument callable, the candidates run in turn in every
    round (a noisy shared machine then slows them alike)."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in candidates}
    for _ in range(repeat):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(values)) for name, values in times.items()}


def table(rows: list[tuple], headers: tuple) -> str:
    """A Markdown table."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)])
