"""Tests for dsl/runtime.py: coalescing, layout-keyed launch plans, row splitting, pooled outputs, threads."""
from __future__ import annotations

import threading

import ml_dtypes
import numba
import numpy as np
import pytest

import dsl
from dsl import runtime, thread_policy
from dsl.codegen import compile as codegen_compile
from dsl.view import BlockedView, View

RNG = np.random.default_rng(7)


# ---- coalescing -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, strides, keep_last, want_shape, want_strides", [
    ((2, 3, 4), [(12, 4, 1)], False, (24,), [(1,)]),                      # contiguous: one flat loop
    ((2, 3), [(1, 2)], False, (2, 3), [(1, 2)]),                          # transposed: nothing merges
    ((2, 3), [(3, 1), (0, 1)], False, (2, 3), [(3, 1), (0, 1)]),          # a broadcast row blocks the merge
    ((4, 5), [(0, 0), (5, 1)], False, (20,), [(0,), (1,)]),               # a scalar leaf merges everywhere
    ((1, 5, 1), [(0, 1, 0)], False, (5,), [(1,)]),                        # size-1 dims vanish
    ((), [()], False, (1,), [(0,)]),                                      # rank 0 runs one element
    ((1, 1), [(0, 0)], False, (1,), [(0,)]),
    ((4, 1, 6), [(6, 0, 1)], True, (4, 6), [(6, 1)]),                     # rows: the last dim stays
    ((6,), [(1,)], True, (1, 6), [(0, 1)]),                               # ... with one row before it
    ((2, 3, 6), [(18, 6, 1)], True, (6, 6), [(6, 1)]),
])
def test_coalesce(shape, strides, keep_last, want_shape, want_strides):
    views = [View(shape, s) for s in strides]
    assert runtime._coalesce(shape, views, keep_last) == (want_shape, want_strides,
                                                          [(1,) * len(want_shape)] * len(views))


@pytest.mark.parametrize("keep_last, want", [
    (False, ((6, 64), [(64, 1), (2, 1)], [(1, 1), (1, 32)])),
    (True, ((6, 64), [(64, 1), (2, 1)], [(1, 1), (1, 32)])),
])
def test_coalesce_keeps_blocked_dims_apart(keep_last, want):
    """A [2, 3, 64] input beside its scale blocked by 32 along the last axis ([2, 3, 2]): the
    outer dims merge (the scale walks them linearly too), the blocked one never does."""
    data = View.contiguous((2, 3, 64))
    scale = BlockedView.spread(View.contiguous((2, 3, 2)), 2, 32, 64)
    assert runtime._coalesce((2, 3, 64), [data, scale], keep_last) == want


# ---- launch plans ---------------------------------------------------------------------------------
def test_plans_are_keyed_by_leaf_layout_and_reused():
    f = dsl.jit(lambda x: x * 1.75 + 0.5)
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    (runner,) = f.executable(x).runners
    f(x)
    compiled = codegen_compile.STATS["compiled"]
    f(x + 1)
    assert len(runner.plans) == 1 and codegen_compile.STATS["compiled"] == compiled
    transposed = np.ascontiguousarray(x.T).T
    np.testing.assert_array_equal(f(transposed), x * np.float32(1.75) + np.float32(0.5))
    assert len(runner.plans) == 2
    f(np.ascontiguousarray(x.T + 2).T)
    assert len(runner.plans) == 2


def test_packed_views_with_other_offsets_get_their_own_plan():
    f = dsl.jit(lambda t: dsl.cast(t, dsl.float32) + 0.25)
    flat = dsl.Tensor.from_numpy(RNG.integers(-8, 8, 9).astype(ml_dtypes.int4))
    for start in (0, 1, 0, 1):  # same shape and strides; offsets 0 and 1 (mid-byte)
        view = flat.with_view(flat.view.slice(0, start, start + 8))
        np.testing.assert_array_equal(f(view), flat.numpy()[start:start + 8].astype(np.float32) + np.float32(0.25))


def test_a_leaf_that_must_be_copied_is_not_planned_ahead():
    f = dsl.jit(lambda x: dsl.reshape(dsl.transpose(x, [1, 0]), [-1]) * 0.75)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(f(x), x.T.reshape(-1) * np.float32(0.75))
    (runner,) = f.executable(x).runners
    assert runner.plans == {}


# ---- splitting rows over threads ------------------------------------------------------------------
def test_rows_split_across_the_pool_give_the_serial_result(monkeypatch):
    f = dsl.jit(lambda x, b: (x * 0.375 + b, dsl.softmax(x - b), dsl.reduce_max(x * b, [-1])))
    x = RNG.standard_normal((7, 33)).astype(np.float32)
    b = RNG.standard_normal(33).astype(np.float32)
    serial = f(x, b)
    monkeypatch.setattr(runtime, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    spans = _counted_spans(monkeypatch)
    for layout in (x, np.ascontiguousarray(x.T).T):
        for got, want in zip(f(layout, b), serial):
            np.testing.assert_array_equal(got, want)
    assert len(spans) >= 3 * 2 and set(spans) == {3}  # every kernel split in 3 row ranges on the team


def _counted_spans(monkeypatch) -> list:
    """The span count of every kernel launch split over threads from now on in the test."""
    spans, real = [], runtime.run_spans

    def counting(kernel, form, table, *args):
        spans.append(len(table) - 1 if form == "spans" else len(table))
        return real(kernel, form, table, *args)
    monkeypatch.setattr(runtime, "run_spans", counting)
    return spans


# ---- pooled output buffers ------------------------------------------------------------------------
def test_large_outputs_are_reused_only_once_nothing_refers_to_them():
    f = dsl.jit(lambda x: x * 2.0 - 1.0)
    x1, x2 = (RNG.standard_normal((512, 600)).astype(np.float32) for _ in range(2))  # 1.2 MB outputs
    want1, want2 = x1 * np.float32(2) - np.float32(1), x2 * np.float32(2) - np.float32(1)
    first = f(x1)
    second = f(x2)
    assert not np.shares_memory(first, second)
    kept_view, kept_tensor, kept_memory = first[::3], dsl.Tensor.from_numpy(second), memoryview(f(x1))
    del first, second
    for _ in range(3):
        fresh = f(x2)
        np.testing.assert_array_equal(fresh, want2)
    np.testing.assert_array_equal(kept_view, want1[::3])
    np.testing.assert_array_equal(kept_tensor.numpy(), want2)
    np.testing.assert_array_equal(np.asarray(kept_memory), want1)
    address = fresh.__array_interface__["data"][0]
    del fresh
    again = f(x1)  # the dropped buffer comes back
    assert again.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(again, want1)


# ---- many threads from a cold start ---------------------------------------------------------------
def test_threads_share_compiled_kernels_and_each_source_compiles_once(tmp_path, monkeypatch, counted_imports):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))  # a cold disk cache (and constants no other test uses)
    shared = dsl.jit(lambda m, s: s + (1.0 - dsl.unsqueeze(dsl.cast(m, dsl.float32), [1])) * -3.5e3)
    others = [dsl.jit(lambda x, k=k: dsl.exp(x * (0.0625 * k)) - 0.3125) for k in (1, 2, 3)]
    mask = RNG.random((64, 256)) > 0.5
    scores = RNG.standard_normal((64, 8, 256)).astype(np.float32)  # 512 KB: split into row ranges
    x = RNG.standard_normal((33, 17)).astype(np.float32)
    want_shared = scores + (np.float32(1) - mask[:, None, :].astype(np.float32)) * np.float32(-3.5e3)
    barrier, failures, executables = threading.Barrier(8), [], []

    def work(index):
        try:
            barrier.wait()
            for _ in range(3):
                if index % 2 == 0:
                    np.testing.assert_array_equal(shared(mask, scores), want_shared)
                    executables.append(shared.executable(mask, scores))
                else:
                    k = index // 2 % 3
                    want = np.exp(x * np.float32(0.0625 * (k + 1))) - np.float32(0.3125)
                    np.testing.assert_allclose(others[k](x), want, rtol=1e-6)
        except Exception as exc:  # noqa: BLE001  (reported below, with the thread)
            failures.append((index, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len(counted_imports) == len(set(counted_imports)) == 4, counted_imports  # 4 kernels, each compiled once
    assert all(e is executables[0] for e in executables)
    for name in counted_imports:
        kernel = codegen_compile._COMPILED[name[2:-3]]
        assert sum(kernel.stats.cache_misses.values()) == 1  # numba compiled it exactly once


def test_single_threaded_keeps_large_kernels_on_the_calling_thread(monkeypatch):
    f = dsl.jit(lambda x: x * 2.0 + 1.0)
    x = np.ones((256, 1024), np.float32)  # above PARALLEL_THRESHOLD
    f(x)
    calls = _counted_spans(monkeypatch)
    with thread_policy.single_threaded():
        np.testing.assert_array_equal(f(x), x * 2 + 1)
        with thread_policy.single_threaded():
            f(x)
        f(x)  # still inside the outer block
    assert calls == [] and not getattr(thread_policy._LOCAL, "serial", False)
    if thread_policy._THREADS > 1:
        f(x)
        assert calls


def test_kernels_run_serially_where_the_thread_team_cannot_be_used(monkeypatch):
    """A forked child of a process whose team ran (GNU OpenMP is not fork-safe), or a numba with
    no thread-safe layer: every kernel runs on the calling thread, with the same results."""
    from dsl.codegen import threads
    f = dsl.jit(lambda x: (x * 2.0 + 1.0, dsl.reduce_sum(x, [0]), dsl.softmax(x)))
    x = RNG.standard_normal((300, 257)).astype(np.float32)  # above the tests' threshold
    want = f(x)
    state = dict(threads._STATE)
    spans = _counted_spans(monkeypatch)
    monkeypatch.setitem(threads._STATE, "forked", True)
    for got, expected in zip(f(x), want):
        np.testing.assert_array_equal(got, expected)
    assert spans == [] and not threads.usable()
    monkeypatch.setitem(threads._STATE, "forked", False)
    monkeypatch.setitem(threads._STATE, "usable", False)
    f(x)
    assert spans == []
    threads._STATE.update(state)
    if thread_policy._THREADS > 1 and threads.usable():
        for got, expected in zip(f(x), want):
            np.testing.assert_array_equal(got, expected)
        assert spans


def test_set_threads_and_dsl_threads_choose_the_split(monkeypatch):
    before = thread_policy._THREADS
    try:
        dsl.set_threads(1)
        x = RNG.standard_normal((1024, 512)).astype(np.float32)
        f = dsl.jit(lambda v: v * 2.0)
        np.testing.assert_array_equal(f(x), x * 2)
        assert thread_policy._THREADS == 1
        dsl.set_threads(2)
        np.testing.assert_array_equal(f(x), x * 2)
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(dsl.InputError, match="set_threads: count"):
                dsl.set_threads(bad)
    finally:
        dsl.set_threads(before)
    monkeypatch.setenv("DSL_THREADS", "3")
    assert thread_policy._thread_setting() == 3
    monkeypatch.setenv("DSL_THREADS", "zero")
    with pytest.raises(dsl.InputError, match="DSL_THREADS='zero'"):
        thread_policy._thread_setting()


def test_the_ops_own_parallel_loops_follow_the_thread_policy(monkeypatch):
    """kernels/matvec.py and kernels/attention.py split inside the op: set_threads(1) and
    single_threaded() keep them on the calling thread too, with the same results."""
    from kernels import attention, matvec
    a, b = RNG.standard_normal((8, 1, 256)).astype(np.float32), RNG.standard_normal((8, 256, 512)).astype(np.float32)
    q = RNG.standard_normal((1, 8, 1, 64)).astype(np.float32)
    k, v = (RNG.standard_normal((1, 2, 2048, 64)).astype(np.float32) for _ in range(2))
    product = dsl.jit(lambda a, b: dsl.matmul(a, b))
    decode = dsl.jit(lambda q, k, v: dsl.attention(q, k, v)[0])
    want = [product(a, b), decode(q, k, v)]
    split = []
    for module in (matvec, attention):
        monkeypatch.setattr(module, "_parallel", lambda *args, run=module._parallel: split.append(1) or run(*args))
    before = thread_policy._THREADS
    try:
        dsl.set_threads(1)
        assert [product(a, b).tobytes(), decode(q, k, v).tobytes()] == [w.tobytes() for w in want]
        dsl.set_threads(2)
        with thread_policy.single_threaded():
            assert [product(a, b).tobytes(), decode(q, k, v).tobytes()] == [w.tobytes() for w in want]
        assert split == []
        if numba.get_num_threads() > 1 and thread_policy.available() > 1:
            product(a, b), decode(q, k, v)
            assert split == [1, 1]
    finally:
        dsl.set_threads(before)
