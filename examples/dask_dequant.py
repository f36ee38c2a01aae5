"""Out-of-core int4 weights with dsl.dask: the max and mean of every row of a dequantized matrix.

The packed int4 bytes sit in a numpy memmap on disk. dask reads them one chunk of rows at a time,
and each chunk task runs the fused numba kernel (unpack, scale, reduce) on the raw bytes. The
float32 matrix (8x the packed bytes) is never built, in whole or per chunk. The same decode
written with dask.array ops runs next to it.

Run: python examples/dask_dequant.py [--rows 16384 --cols 16384 --chunk-rows 512 --threads 2]
     python examples/dask_dequant.py --workers 2     # also on a distributed LocalCluster
"""
import argparse
import os
import tempfile
import time
import tracemalloc

import dask
import dask.array as da
import numpy as np

import dsl
import dsl.dask


@dsl.jit
def row_stats(w, scale):
    """w: int4 [R, C] packed, scale: float32 [R] -> max and mean of each dequantized row."""
    x = dsl.dequantize_linear(w, scale, axis=0)
    return dsl.reduce_max(x, [1], keepdims=0), dsl.reduce_mean(x, [1], keepdims=0)


def dask_ops_row_stats(raw, scale):
    """The same decode written with dask.array ops (this does build float32 chunks)."""
    low, high = (raw & 15).astype(np.int8), (raw >> 4).astype(np.int8)
    codes = da.stack([(low ^ 8) - 8, (high ^ 8) - 8], axis=-1).reshape(raw.shape[0], -1)
    x = codes.astype(np.float32) * scale[:, None]
    return x.max(axis=1), x.mean(axis=1)


def numpy_rows(raw_rows, scale_rows):
    """Decode some rows with numpy bit ops: low nibble first, then sign-extend 4 bits."""
    codes = np.stack([raw_rows & 15, raw_rows >> 4], axis=-1).reshape(len(raw_rows), -1).astype(np.int8)
    x = ((codes ^ 8) - 8).astype(np.float32) * scale_rows[:, None]
    return x.max(axis=1), x.mean(axis=1, dtype=np.float64)


def write_weights(path, rows, cols, block=1024):
    """Random packed int4 bytes [rows, cols // 2] in a memmap file, written a block at a time."""
    raw = np.memmap(path, np.uint8, "w+", shape=(rows, cols // 2))
    rng = np.random.default_rng(0)
    for start in range(0, rows, block):  # any byte is a valid pair of int4 values
        raw[start:start + block] = rng.integers(0, 256, raw[start:start + block].shape, dtype=np.uint8)
    raw.flush()
    return np.memmap(path, np.uint8, "r", shape=(rows, cols // 2))


class MappedFile:
    """A read-only memmap that opens its file per chunk and pickles as its path. (``da.from_array``
    of an np.memmap copies it into memory, and a pickled np.memmap carries all its bytes.)"""

    def __init__(self, path, shape):
        self.path, self.shape, self.dtype, self.ndim = path, shape, np.dtype(np.uint8), len(shape)

    def __getitem__(self, key):
        return np.memmap(self.path, np.uint8, "r", shape=self.shape)[key]


def timed(compute, *lazy, repeat=3):
    """(median seconds, results) of ``repeat`` computes after a warm-up (which compiles kernels)."""
    results, times = compute(*lazy), []
    for _ in range(repeat):
        start = time.perf_counter()
        compute(*lazy)
        times.append(time.perf_counter() - start)
    return float(np.median(times)), results


def traced_peak(run):
    """Peak bytes allocated while ``run()`` runs (tracemalloc sees numpy and numba allocations)."""
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def report(label, seconds, raw_bytes, elements):
    """Print one timing line: ms, GB/s of packed bytes read, elements/s."""
    print(f"{label:<30} {seconds * 1e3:7.0f} ms  {raw_bytes / seconds / 1e9:5.2f} GB/s packed  "
          f"{elements / seconds / 1e9:5.2f} G elements/s")


def on_cluster(workers, weights, scale, chunk):
    """Time the fused program on a LocalCluster; returns (seconds, row maxima, peak traced bytes per worker)."""
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        fused = row_stats(dsl.dask.from_packed(da.from_array(weights, chunks=(chunk, -1)), "int4"),
                          da.from_array(scale, chunks=chunk))
        gather = lambda *lazy: client.gather(client.compute(list(lazy)))
        seconds, (peak_row, _) = timed(gather, *fused)
        client.run(tracemalloc.start)
        gather(*fused)
        worker_peak = max(client.run(lambda: tracemalloc.get_traced_memory()[1]).values())
        client.run(tracemalloc.stop)
    return seconds, peak_row, worker_peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=16384)
    parser.add_argument("--chunk-rows", type=int, default=512)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--workers", type=int, default=0, help="also run on a LocalCluster of N processes")
    args = parser.parse_args()
    rows, cols, chunk = args.rows, args.cols, args.chunk_rows
    chunk_f32, whole_f32, raw_bytes = chunk * cols * 4, rows * cols * 4, rows * cols // 2

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "weights.int4")
        memmap = write_weights(path, rows, cols)
        weights = MappedFile(path, memmap.shape)
        scale = (np.random.default_rng(1).random(rows) / 8).astype(np.float32)
        print(f"int4 [{rows}, {cols}]: {raw_bytes / 2**20:.0f} MiB packed on disk, {whole_f32 / 2**20:.0f} MiB "
              f"as float32; chunks of {chunk} rows ({chunk_f32 / 2**20:.0f} MiB as float32); "
              f"threaded scheduler with {args.threads} threads")
        raw, lazy_scale = da.from_array(weights, chunks=(chunk, -1)), da.from_array(scale, chunks=chunk)
        build = lambda: row_stats(dsl.dask.from_packed(raw, "int4"), lazy_scale)
        with dask.config.set(scheduler="threads", num_workers=args.threads):
            t_fused, (peak_row, mean_row) = timed(dask.compute, *build())
            t_dask, (dask_peak, dask_mean) = timed(dask.compute, *dask_ops_row_stats(raw, lazy_scale))
            peak_mem = traced_peak(lambda: dask.compute(*build()))  # a new graph, built and run
            dask_mem = traced_peak(lambda: dask.compute(*dask_ops_row_stats(raw, lazy_scale)))
        report("dsl fused (threads)", t_fused, raw_bytes, rows * cols)
        report("dask.array ops (threads)", t_dask, raw_bytes, rows * cols)
        print(f"fused is {t_dask / t_fused:.1f}x faster than dask.array ops (target >= 5x)")
        budget = 2 * chunk_f32 * args.threads
        print(f"peak traced memory: fused {peak_mem / 2**20:.1f} MiB = {peak_mem / chunk_f32:.2f} float32 chunks = "
              f"{peak_mem / whole_f32:.4f} of the float32 matrix (budget 2 chunks x {args.threads} threads = "
              f"{budget / 2**20:.0f} MiB); dask.array ops {dask_mem / 2**20:.1f} MiB")
        assert peak_mem < budget, "the fused run held more than 2 float32 chunks per thread"

        sample = np.sort(np.random.default_rng(2).choice(rows, min(rows, 64), replace=False))
        want_peak, want_mean = numpy_rows(np.asarray(memmap[sample]), scale[sample])
        for got_peak, got_mean in [(peak_row, mean_row), (dask_peak, dask_mean)]:
            np.testing.assert_array_equal(got_peak[sample], want_peak)
            np.testing.assert_allclose(got_mean[sample], want_mean, rtol=1e-5, atol=1e-6)
        print(f"results equal numpy on {len(sample)} sampled rows")

        if args.workers:
            seconds, cluster_peak, worker_peak = on_cluster(args.workers, weights, scale, chunk)
            report(f"dsl fused (LocalCluster x{args.workers})", seconds, raw_bytes, rows * cols)
            print(f"peak traced memory per worker: {worker_peak / 2**20:.1f} MiB = {worker_peak / chunk_f32:.2f} "
                  f"float32 chunks (budget 2: one thread per worker)")
            assert worker_peak < 2 * chunk_f32, "a worker held more than 2 float32 chunks"
            np.testing.assert_array_equal(cluster_peak[sample], want_peak)


if __name__ == "__main__":
    main()
