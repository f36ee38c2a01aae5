"""Streaming (non-temporal) output stores: which kernels stream, that they give the same bits
as plain stores (single- and multi-threaded), that they vectorize, and aligned pooled buffers."""
from __future__ import annotations

import platform

import ml_dtypes
import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
from dsl import runtime, thread_policy
from dsl.buffers import ALIGN, POOL, BufferPool, aligned_empty
from test_jit import FUZZ_EXAMPLES, draw_program, fuzz_function, program_source

RNG = np.random.default_rng(11)
X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.fixture
def stream_from_1mib(monkeypatch):
    """Stream every pooled output (the default threshold, 64 MiB, is too large for tests)."""
    monkeypatch.setattr(runtime, "STREAM_BYTES", 1 << 20)


def _plans(f, *args):
    """{output index tuple streamed} of every kernel plan made by calling f(*args)."""
    executable = f.executable(*args)
    return [streamed for runner in executable.runners for (_, streamed), _, _ in runner.plans.values()]


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _mask_pipeline(m, s):
    return s + (1.0 - dsl.unsqueeze(dsl.cast(m, dsl.float32), [1, 2])) * -1e4


# name, function, arguments, numpy reference, expected streamed outputs
CASES = [
    ("rows of whole cache lines", _mask_pipeline,
     lambda: ((RNG.random((4, 128)) > 0.3).astype(np.int64), _f32(4, 8, 64, 128)),
     lambda m, s: s + (np.float32(1) - m[:, None, None, :].astype(np.float32)) * np.float32(-1e4), [(0,)]),
    ("rank 1, thread spans on 64 elements", lambda x: x * 2.0 + 1.0, lambda: (_f32(4 * 65536 + 37),),
     lambda x: x * np.float32(2) + np.float32(1), [(0,)]),
    ("rows not whole lines", lambda x, b: x - b, lambda: (_f32(600, 1000), _f32(1000)),
     lambda x, b: x - b, [()]),
    ("bool output", lambda x: x > 0.25, lambda: (_f32(1 << 21),), lambda x: x > np.float32(0.25), [()]),
    ("float16 output", lambda x: dsl.cast(x * 3.0, dsl.float16), lambda: (_f32(512, 1024),),
     lambda x: (x * np.float32(3)).astype(np.float16), [(0,)]),
    ("bfloat16 output", lambda x: dsl.cast(x, dsl.bfloat16), lambda: (_f32(512, 1024),),
     lambda x: x.astype(ml_dtypes.bfloat16), [(0,)]),
    ("float64 output", lambda x: dsl.cast(x, dsl.float64) * 0.1, lambda: (_f32(256, 512),),
     lambda x: x.astype(np.float64) * 0.1, [(0,)]),
    ("bool and float outputs of one kernel", lambda x, b: (x + b > 0.0, x + b), lambda: (_f32(512, 1024), _f32(1024)),
     lambda x, b: (x + b > np.float32(0), x + b), [(1,)]),
    ("softmax rows", lambda x: dsl.softmax(x), lambda: (_f32(512, 1024),), None, [(0,)]),
]


@pytest.mark.parametrize("name, fn, make, reference, streamed", CASES, ids=[c[0] for c in CASES])
def test_streamed_kernels_give_the_bits_of_plain_stores(name, fn, make, reference, streamed, monkeypatch,
                                                        stream_from_1mib):
    args = make()
    f = dsl.jit(fn)
    got = f(*args)
    assert _plans(f, *args) == streamed
    monkeypatch.setattr(runtime, "STREAM_BYTES", float("inf"))
    plain_f = dsl.jit(fn)
    plain = plain_f(*args)
    assert all(s == () for s in _plans(plain_f, *args))
    for a, b in zip(got if isinstance(got, tuple) else (got,), plain if isinstance(plain, tuple) else (plain,)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    if reference is not None:
        want = reference(*args)
        for a, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(a, w)


def test_packed_int4_dequant_streams_from_the_byte_pair_loop(stream_from_1mib):
    packed = RNG.integers(0, 256, 1024 * 512 // 2, dtype=np.uint8)
    scale = RNG.random(1024).astype(np.float32)
    weights = dsl.Tensor.from_packed(packed, "int4", (1024, 512))
    f = dsl.jit(lambda w, s: dsl.dequantize_linear(w, s, axis=0))
    got = f(weights, scale)
    assert _plans(f, weights, scale) == [(0,)]
    np.testing.assert_array_equal(got, weights.numpy().astype(np.float32) * scale[:, None])


@pytest.mark.parametrize("block, streamed", [(32, [(0,)]), (6, [()]), (24, [()])])
def test_blocked_dequant_streams_only_when_its_blocks_span_whole_lines(block, streamed, stream_from_1mib):
    """Blocks along the inner axis tile the loop, and each block's run of stores must start on
    a cache line to stream (32 float32 = 128 bytes: yes; 6 or 24: no, plain stores)."""
    shape = (512, 96 * 32)
    codes = RNG.integers(-8, 8, shape).astype(ml_dtypes.int4)
    scale = RNG.random((shape[0], -(-shape[1] // block))).astype(np.float32)
    f = dsl.jit(lambda w, s: dsl.dequantize_linear(w, s, axis=1, block_size=block))
    got = f(codes, scale)
    assert _plans(f, codes, scale) == streamed
    want = codes.astype(np.float32) * np.repeat(scale, block, axis=1)[:, :shape[1]]
    np.testing.assert_array_equal(got, want)


def test_streaming_under_many_thread_spans(monkeypatch, stream_from_1mib):
    monkeypatch.setattr(thread_policy, "_THREADS", 3)
    f = dsl.jit(lambda x, b: x * b + 0.5)
    for shape in [(3 * 65536 + 5,), (7, 16, 4096), (5, 1 << 16)]:
        x, b = _f32(*shape), _f32(shape[-1])
        np.testing.assert_array_equal(f(x, b), x * b + np.float32(0.5))
        np.testing.assert_array_equal(f(x[::-1], b), x[::-1] * b + np.float32(0.5))  # another layout


@pytest.mark.skipif(not X86, reason="checks x86 streaming store instructions")
def test_streamed_float_rows_compile_to_vector_streaming_stores(stream_from_1mib):
    f = dsl.jit(lambda x: x * 2.0 + 1.0)
    x = _f32(512, 1024)
    with thread_policy.single_threaded():  # (the kernel called itself: split, it runs inside its launcher)
        f(x)
    (runner,) = f.executable(x).runners
    ((kernel, streamed), _, _), = runner.plans.values()
    assert streamed == (0,)
    fresh = numba.njit(nogil=True, error_model="numpy")(kernel.py_func)  # a cache-loaded kernel has no assembly text
    fresh.compile(kernel.signatures[0])
    assembly = fresh.inspect_asm(kernel.signatures[0])
    assert "vmovntps" in assembly and "sfence" in assembly


def test_explain_shows_the_streaming_stores(stream_from_1mib):
    x = _f32(512, 1024)
    text = dsl.jit(lambda x: x * 2.0).explain(x)
    assert "_bits.stream_store(out0, q0, " in text and "_bits.stream_fence()" in text


def test_the_default_threshold_leaves_small_outputs_to_plain_stores():
    x = _f32(512, 1024)  # 2 MiB, far below the 64 MiB default
    f = dsl.jit(lambda x: x + 1.0)
    f(x)
    assert _plans(f, x) == [()]


@pytest.mark.parametrize("setting, want", [("off", float("inf")), ("1048576", 1 << 20), ("", 64 << 20),
                                           ("junk", 64 << 20)])
def test_stream_threshold_setting(setting, want, monkeypatch):
    monkeypatch.setenv("DSL_STREAM_BYTES", setting)
    assert runtime._stream_threshold() == want


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16, np.uint8, np.bool_])
@pytest.mark.parametrize("count", [(1 << 20) + 3, 3 << 20])
def test_large_buffers_are_cache_line_aligned(dtype, count):
    for buffer in (POOL.empty(count, dtype), aligned_empty(count, dtype), aligned_empty(7, dtype)):
        assert buffer.ctypes.data % ALIGN == 0 and buffer.dtype == dtype and buffer.flags.c_contiguous
    assert POOL.empty(count, dtype).size == count


@settings(max_examples=max(FUZZ_EXAMPLES // 4, 1), deadline=None, derandomize=FUZZ_EXAMPLES == 40, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_with_every_output_streamed_give_the_plain_bits(data):
    """The fuzz programs of test_jit.py (views, broadcasting, casts, reductions, data movement)
    with every output pooled and streamed: no unaligned streaming store (it would fault), the
    same bits as plain stores."""
    x, operands, steps, layout = draw_program(data)
    source = program_source(x, operands, steps, layout)
    note(source)
    results = []
    for threshold, pooled in ((float("inf"), BufferPool.MIN_BYTES), (0, 0)):
        program = fuzz_function(source)  # (a fresh jit function: nothing cached from the other run)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(runtime, "STREAM_BYTES", threshold)
            patch.setattr(BufferPool, "MIN_BYTES", pooled)
            with np.errstate(all="ignore"):
                results.append(program(x, *operands))
    plain, streamed = results
    assert plain.dtype == streamed.dtype and plain.shape == streamed.shape
    assert np.ascontiguousarray(plain).tobytes() == np.ascontiguousarray(streamed).tobytes()


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_staged_rows_stream_their_outputs_from_strips(norm, monkeypatch, stream_from_1mib):
    """A normalization's output pass computes strips of each row into L1 buffers, then streams them
    out (a streaming store beside its division ran at a third of the speed); same bits as plain
    stores."""
    x, g = _f32(512, 1024), _f32(1024)
    fn = (lambda a, s: dsl.rms_normalization(a, s)) if norm == "rms" else (lambda a, s: dsl.layer_normalization(a, s, s))
    f = dsl.jit(fn)
    got = f(x, g)
    source = f.executable(x, g).runners[0].source_for_contiguous()
    assert "_bits.stream_store(out0" in source and "stg0[" in source
    monkeypatch.setattr(runtime, "STREAM_BYTES", float("inf"))
    plain_f = dsl.jit(fn)
    plain = plain_f(x, g)
    assert "stream_store" not in plain_f.executable(x, g).runners[0].source_for_contiguous()
    assert np.array_equal(got.view(np.uint8), plain.view(np.uint8))
