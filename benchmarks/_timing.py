"""Shared timing helpers for the benchmarks: warm up, then the median of several runs; the
onnxruntime session every benchmark compares against."""
import os
import time

import numpy as np

CORES = os.cpu_count() or 1


def ort_session(model):
    """An onnxruntime CPU session of ``model`` (a ModelProto) as every benchmark runs it: intra-op
    threads = cores, spin-wait off (so its idle threads do not steal the next candidate's time)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = CORES
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


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
    round (a noisy shared machine then slows them alike), the order rotated each round (a peer
    whose threads stay busy after returning, as jax's do, would otherwise always slow the same
    next candidate)."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in candidates}
    names = list(candidates)
    for round_ in range(repeat):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            fn = candidates[name]
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


PEERS = ("numpy", "onnxruntime", "jax.jit")
PEER_HEADERS = ("dsl ms", "numpy ms", "onnxruntime ms", "jax.jit ms", "dsl vs numpy", "dsl vs onnxruntime",
                "dsl vs jax.jit")


def peer_cells(t: dict, ours: str, digits: int = 2) -> list[str]:
    """A table row's timing cells (PEER_HEADERS): ``ours``'s and each peer's median in ms, then
    each peer's time over ours ('-' for a peer not run)."""
    ms = lambda k: f"{t[k] * 1e3:.{digits}f}" if k in t else "-"  # noqa: E731
    ratio = lambda k: f"{t[k] / t[ours]:.2f}x" if k in t else "-"  # noqa: E731
    return [ms(ours), *map(ms, PEERS), *map(ratio, PEERS)]


def peer_footer(repeat: int, extra: str = "") -> str:
    """The line under a peer table: the machine and how the medians were taken."""
    return (f"\n{CORES} cores; onnxruntime intra-op threads = {CORES}, spin-wait off; interleaved, order rotated, "
            f"median of {repeat}; 'dsl vs X' = X's time / dsl's; load average {os.getloadavg()[0]:.2f}{extra}")
