"""dsl.dask on a real dask.distributed LocalCluster: two worker processes on loopback, started
and stopped here. Results equal the single-machine JIT and eager numpy."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import dsl
import dsl.dask
from dsl.dask import blocks

RNG = np.random.default_rng(11)


TIMEOUT = 180  # seconds: a lost worker fails the test instead of hanging CI


TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client():
    # Worker processes start with this process's sys.path. pytest put test folders on it, and
    # tests/dsl (no __init__.py) would then import as a namespace package `dsl` in the workers,
    # ahead of an editable install's finder: start them with the test folders left out.
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if not Path(p or os.curdir).resolve().is_relative_to(TESTS)]
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None, worker_dashboard_address=None) as cluster, Client(cluster) as c:
            c.wait_for_workers(2, timeout=TIMEOUT)
            c.cluster_for_logs = cluster
            yield c
    finally:
        sys.path[:] = saved


def result(client, future):
    """The future's result; on a timeout, fail with the cluster's logs (a lost worker says why)."""
    try:
        return future.result(timeout=TIMEOUT)
    except TimeoutError:
        logs = client.cluster_for_logs.get_logs()
        pytest.fail("no result in %d s; cluster logs:\n%s" % (TIMEOUT, "\n".join(f"{k}: {v}" for k, v in logs.items())))


@dsl.jit
def attention_bias(mask, scores):
    m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
    return dsl.softmax(scores + (1.0 - m) * -1e4, axis=-1)


@dsl.jit
def int4_rows(w, scale):
    x = dsl.dequantize_linear(w, scale, axis=0)
    return dsl.reduce_max(dsl.abs(x), [1], keepdims=0), dsl.reduce_mean(x, [1], keepdims=0)


def test_mask_pipeline_on_two_worker_processes(client):
    mask = RNG.random((4, 128)) > 0.25
    scores = RNG.standard_normal((4, 4, 32, 128)).astype(np.float32)
    lazy = attention_bias(da.from_array(mask, chunks=(1, -1)), da.from_array(scores, chunks=(1, 2, 16, -1)))
    got = result(client, client.compute(lazy))
    np.testing.assert_array_equal(got, attention_bias(mask, scores))
    reference = attention_bias.lower(mask, scores).run([mask, scores], engine="numpy")[0]
    np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-8)
    # each worker process planned the one chunk signature once, however many tasks it ran
    counts = client.run(blocks.replay_count)
    assert len(counts) == 2 and all(count <= 1 for count in counts.values()) and sum(counts.values()) >= 1


def test_packed_int4_row_stats_on_the_cluster(client):
    values = RNG.integers(-8, 8, (256, 512))
    raw = dsl.Tensor.from_numpy(values.astype(dsl.int4.np_dtype)).packed().reshape(256, 256)
    scale = (RNG.random(256) * 0.02).astype(np.float32)
    packed = dsl.dask.from_packed(da.from_array(raw, chunks=(32, -1)), "int4")
    peak, mean = client.compute(list(int4_rows(packed, da.from_array(scale, chunks=32))))
    local = dsl.Tensor.from_packed(raw.reshape(-1), "int4", (256, 512))
    want_peak, want_mean = int4_rows(local, scale)
    peak, mean = result(client, peak), result(client, mean)
    np.testing.assert_array_equal(peak, want_peak)
    np.testing.assert_array_equal(mean, want_mean)
    x = values * scale[:, None].astype(np.float64)
    np.testing.assert_allclose(peak, np.abs(x).max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(mean, x.mean(axis=1), rtol=1e-5, atol=1e-7)
