"""dsl.dask benchmark: a fused int4 program vs the same work in dask.array ops, on the same chunks.

Measured: per-row max and mean of dequantize_linear(int4 [8192, 16384], per-row scale), 64 MiB of
packed bytes in chunks of 512 rows. "dsl fused" is one @dsl.jit program applied to
dsl.dask.from_packed(...): every chunk task runs the fused numba kernels on the raw bytes.
"dask array ops" decodes with dask.array bit ops (and/shift, sign extension, stack + reshape),
scales and reduces, building int8 and float32 chunks. Setups: dask's threaded scheduler in this
process, then a distributed LocalCluster with 1 and with 2 worker processes (one thread each).
The bytes are generated on the workers and persisted in their memory first, so only the compute
of the statistics is timed: medians of 7 runs, the two programs interleaved, after 2 warm-up
runs (which compile or load the kernels in each process; the disk cache is shared). GB/s counts
packed bytes read.

Run: python benchmarks/dask.py   (needs the `dask` extra: dask[array], distributed)
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# this file's name would shadow the real `dask` package (and benchmarks/kernels.py the project's
# `kernels`): import everything without this folder on sys.path, also in spawned worker processes
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client, LocalCluster, wait  # noqa: E402

import dsl  # noqa: E402
import dsl.dask  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import median_seconds, table  # noqa: E402

sys.path.remove(_HERE)

ROWS, COLS, CHUNK = 8192, 16384, 512
REPEAT = 7
PACKED_BYTES = ROWS * COLS // 2
CORES = os.cpu_count() or 1


def _example():
    """examples/dask_dequant.py, whose program (and dask.array twin) this benchmark times."""
    import importlib.util
    path = os.path.join(os.path.dirname(_HERE), "examples", "dask_dequant.py")
    spec = importlib.util.spec_from_file_location("dask_dequant", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXAMPLE = _example()
row_stats, dask_ops_row_stats = _EXAMPLE.row_stats, _EXAMPLE.dask_ops_row_stats


def inputs():
    """Lazy random packed bytes [ROWS, COLS // 2] and scales [ROWS], chunked by CHUNK rows."""
    rng = da.random.default_rng(0)
    raw = rng.integers(0, 256, (ROWS, COLS // 2), dtype=np.uint8, chunks=(CHUNK, -1))
    scale = (rng.random(ROWS, chunks=CHUNK) / 8).astype(np.float32)
    return raw, scale


def bench(rows, setup, compute, persist):
    """Time both programs with ``compute`` on inputs held in memory by ``persist``."""
    raw, scale = persist(*inputs())
    fused = row_stats(dsl.dask.from_packed(raw, "int4"), scale)
    eager = dask_ops_row_stats(raw, scale)
    (f_max, f_mean), (e_max, e_mean) = compute(*fused), compute(*eager)
    np.testing.assert_array_equal(f_max, e_max)
    np.testing.assert_allclose(f_mean, e_mean, rtol=1e-5, atol=1e-6)
    compute(*fused), compute(*eager)  # warm-up 2 (the first tasks compile or load kernels per process)
    once = lambda lazy: median_seconds(compute, *lazy, repeat=1, warmup=0)
    runs = [(once(fused), once(eager)) for _ in range(REPEAT)]  # interleaved: both see the same background load
    t_fused, t_dask = np.median(runs, axis=0)
    gbs = lambda t: f"{PACKED_BYTES / t / 1e9:.2f}"
    rows.append((setup, "dsl fused", f"{t_fused * 1e3:.0f}", gbs(t_fused), f"{t_dask / t_fused:.2f}x"))
    rows.append(("", "dask array ops", f"{t_dask * 1e3:.0f}", gbs(t_dask), "1.00x"))


def bench_threads(rows):
    with dask.config.set(scheduler="threads", num_workers=CORES):
        bench(rows, f"threaded scheduler, {CORES} threads, in process", dask.compute, dask.persist)


def bench_cluster(rows, workers):
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, worker_dashboard_address=None) as cluster, Client(cluster) as client:
        def persist(*lazy):
            held = client.persist(list(lazy))
            wait(held)
            return held

        compute = lambda *lazy: client.gather(client.compute(list(lazy)))
        bench(rows, f"LocalCluster, {workers} worker process{'es' if workers > 1 else ''} x 1 thread",
              compute, persist)


def main():
    rows = []
    bench_threads(rows)
    for workers in (1, 2):
        bench_cluster(rows, workers)
    print(f"dsl {dsl.__version__}, dask {dask.__version__}, numpy {np.__version__}, {CORES} cores; "
          f"int4 [{ROWS}, {COLS}] ({PACKED_BYTES / 2**20:.0f} MiB packed), chunks of {CHUNK} rows; "
          f"per-row max + mean of the dequantized matrix; medians of {REPEAT}")
    print(table(rows, ("setup", "program", "time ms", "GB/s packed", "speed-up vs dask array ops")))
    print("command: python benchmarks/dask.py")


if __name__ == "__main__":
    main()
