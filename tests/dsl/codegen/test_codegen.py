"""Tests for dsl/codegen: per-type load/compute/store expressions, generated kernel source, compile caches."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import dsl
import kernels.floats
import kernels.packed
from dsl.codegen import compile as codegen_compile
from dsl.codegen import scalar
from dsl.codegen.fused import _literal
from dsl.codegen.loops import kernel_source as render
from dsl.kir import variants
from dsl.kir.variants import INNER_BROADCAST, INNER_STRIDED, INNER_UNIT

REPO = Path(__file__).resolve().parents[3]


# ---- scalar: compute domains and load expressions -------------------------------------------------
@pytest.mark.parametrize("name, domain, raw", [
    ("int4", "int8", "uint8"), ("uint2", "uint8", "uint8"), ("float16", "float32", "uint16"),
    ("bfloat16", "float32", "uint16"), ("float8e5m2", "float32", "uint8"), ("float4e2m1", "float32", "uint8"),
    ("double", "float64", "float64"), ("bool", "bool_", "bool_"), ("uint64", "uint64", "uint64")])
def test_compute_domain_and_raw_storage(name, domain, raw):
    dt = dsl.dtype(name)
    assert scalar.supported(dt) and scalar.domain(dt) == domain and scalar.raw_view(dt) == raw


def test_strings_and_complex_are_left_to_the_reference():
    assert not any(scalar.supported(dsl.dtype(n)) for n in ("string", "complex64", "complex128"))


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2", "float4e2m1"])
def test_packed_load_expressions_follow_the_onnx_raw_layout(name):
    """Element i of a packed buffer is nibble/crumb i (low bits first); evaluated as plain Python."""
    dt = dsl.dtype(name)
    raw = np.random.default_rng(3).integers(0, 256, 5, dtype=np.uint8)
    count = 5 * dt.per_byte - 1
    namespace = {"np": np, "_packed": kernels.packed, "_floats": kernels.floats, "b0": raw}
    exec(scalar.packed_table_source(dt), namespace)  # noqa: S102 - the module-level _P_<type> table
    expression = scalar.load(dt, True, "b0", "i", "unused")
    loaded = [eval(expression, {**namespace, "i": np.uint64(i)}) for i in range(count)]  # noqa: S307
    want = dsl.Tensor.from_packed(raw, name, (count,)).numpy()
    np.testing.assert_array_equal(np.asarray(loaded, np.float64), want.astype(np.float64))


@pytest.mark.parametrize("value, dt, text", [
    (np.float32(np.inf), "float", "np.float32(np.inf)"), (np.float32(-np.inf), "float", "np.float32(-np.inf)"),
    (np.float32(np.nan), "float", "np.float32(np.nan)"), (np.float64(-0.0), "double", "np.float64(-0.0)"),
    (np.float32(0.1), "float", "np.float32(0.10000000149011612)"), (np.int8(-128), "int8", "np.int8(-128)"),
    (np.uint64(2 ** 64 - 1), "uint64", "np.uint64(18446744073709551615)"), (np.bool_(True), "bool", "True")])
def test_scalar_constants_are_inlined_exactly(value, dt, text):
    assert _literal(np.array(value), dsl.dtype(dt)) == text
    assert np.array(eval(text, {"np": np}), value.dtype).tobytes() == np.array(value).tobytes()  # noqa: S307


def test_non_native_or_non_scalar_constants_stay_leaves():
    assert _literal(np.array(1.0, np.float16), dsl.float16) is None
    assert _literal(np.ones(2, np.float32), dsl.float32) is None


# ---- generated source -----------------------------------------------------------------------------
def group_of(fn, *args, math="fast"):
    """The KernelRunner of a one-kernel function (tracing and planning only: nothing compiles)."""
    (runner,) = dsl.jit(fn, math=math).executable(*args).runners
    return runner


def test_kernel_source_variants_by_leaf_layout():
    runner = group_of(lambda a, b: a * b + 1.0, np.ones((3, 4), np.float32), np.ones(4, np.float32))
    source = render(variants.group_kernel(runner.group, 2, [(False, INNER_STRIDED), (False, INNER_BROADCAST)]))
    compile(source, "<kernel>", "exec")  # valid Python
    assert "def kernel(start, stop, shape, b0, o0, s0, b1, o1, s1, out0):" in source
    assert "fastmath" not in source  # kernels round like the reference, op by op
    body = source[source.index("def kernel"):].splitlines()
    inner = next(k for k, line in enumerate(body) if "for i1 in" in line)
    assert any("b1[p1_0]" in line for line in body[:inner]), "a broadcast leaf is loaded once per row"
    assert any("b0[p0_0 + i1 * s0_1]" in line for line in body[inner:])
    unit = render(variants.group_kernel(runner.group, 1, [(False, INNER_UNIT), (False, INNER_UNIT)]))
    assert "b0[p0_m1 + i0]" in unit and "out0[q0] =" in unit


def test_packed_leaves_load_codes_from_bytes():
    weights = dsl.Tensor.from_numpy(np.zeros((2, 3), ml_dtypes.int4))
    runner = group_of(lambda w: dsl.cast(w, dsl.float32), weights)
    source = runner.source_for_contiguous()
    # the byte holding element i0, then one lookup at (byte << 1) | (position in the byte)
    assert "b0[(p0_m1 + i0) >> np.uint64(1)]" in source and "_P_int4[" in source
    assert "_P_int4 = _packed.code_table(4, signed=True)" in source


def test_row_kernels_reassociate_only_the_accumulation_and_round_once():
    runner = group_of(lambda x: dsl.softmax(x * 2.0), np.ones((3, 4), np.float32), math="exact")
    source = runner.source_for_contiguous()
    compile(source, "<kernel>", "exec")
    assert "fastmath" not in source and "tmp = np.empty(rowlen, np.float64)" in source
    assert "acc = _bits.maximum_step(acc, v)" in source and "total = _bits.add_step(total, e)" in source
    assert source.count("for i1 in range(rowlen):") == 3  # max; exp and sum; scale
    # fast: max (the row copied to tmp); exponentials (times 2**64) into the float32 output row; their float64
    # sum in a loop of its own (so the exponential vectorizes at 16 lanes); the row scaled in place
    fast = group_of(lambda x: dsl.softmax(x * 2.0), np.ones((3, 4), np.float32)).source_for_contiguous()
    assert "tmp = np.empty(rowlen, np.float32)" in fast and "tmp[i1] = v" in fast
    assert re.search(r"(t\d+) = \(v - acc\)\n\s+(t\d+) = _vmath.exp_times_2_64_f32\(\1\)\n\s+out0\[h\d+_ \+ i1\] = \2", fast)
    assert re.search(r"(t\d+) = out0\[h\d+_ \+ i1\]\n\s+(t\d+) = np.float64\(\1\)\n\s+total = _bits.add_step\(total, \2\)",
                     fast)
    assert re.search(r"(t\d+) = out0\[(h\d+_) \+ i1\]\n\s+(t\d+) = \(\1 \* scale\)\n\s+out0\[\2 \+ i1\] = \3", fast)
    assert "fastmath" not in fast and fast.count("for i1 in range(rowlen):") == 4
    # a row that is a load alone is read again from the input, not copied; float16 results
    # keep the exponentials in tmp
    plain = group_of(lambda x: dsl.cast(dsl.softmax(x), dsl.float16), np.ones((3, 4), np.float32))
    plain = plain.source_for_contiguous()
    assert "tmp[i1] = v" not in plain
    assert re.search(r"(t\d+) = \(v - acc\)\n\s+(t\d+) = _vmath.exp_times_2_64_f32\(\1\)\n\s+tmp\[i1\] = \2", plain)
    assert re.search(r"(t\d+) = tmp\[i1\]\n\s+(t\d+) = np.float64\(\1\)\n\s+total = _bits.add_step\(total, \2\)", plain)
    reduce = group_of(lambda x: dsl.reduce_sum(x * 2.0, [-1]), np.ones((3, 4), np.float32))
    text = render(variants.row_group_kernel(reduce.group, ["sum"], 2, [(False, INNER_UNIT)], [dsl.float32]))
    assert "acc0 = np.float64(0.0)" in text and re.search(r"(t\d+) = np.float32\(acc0\)\n\s+out0\[q0\] = \1", text)
    assert "acc0 = _bits.add_step(acc0, " in text


def f16_chain_row(x):
    """A row reduction of a value that does not vary along the row (broadcast), computed in float16."""
    for _ in range(4):
        x = dsl.cast(dsl.cast(x, dsl.bfloat16), dsl.float16)
    return dsl.reduce_sum(dsl.expand(x, [3, 5]), [-1], keepdims=False)


def test_what_does_not_vary_along_the_inner_loop_is_computed_before_it():
    runner = group_of(f16_chain_row, np.ones((3, 1), np.float16))
    body = runner.source_for_contiguous().split("def kernel(")[1].splitlines()
    inner = next(k for k, line in enumerate(body) if "for i1 in range(rowlen):" in line)
    assert sum("_bits." in line for line in body[:inner]) == 9  # the load and 8 casts, once per row
    assert body[inner + 1].strip().startswith("acc0 = _bits.add_step(acc0, ")
    for math, exp in (("exact", "np.exp("), ("fast", "_vmath.exp_f32(")):
        runner = group_of(lambda x, b: x + dsl.exp(b * 2.0), np.ones((3, 4), np.float32), np.ones((3, 1), np.float32),
                          math=math)
        body = runner.source_for_contiguous().split("def kernel(")[1].splitlines()
        inner = next(k for k, line in enumerate(body) if "for i1 in range(n1):" in line)
        assert any(exp in line for line in body[:inner]) and not any(exp in line for line in body[inner:])


def test_a_loop_invariant_float16_chain_in_a_row_kernel_compiles_and_is_exact():
    # Left inside the row loop, this chain made LLVM's vectorizer run for minutes (exponential in its depth).
    x = np.array([[1.0009765625], [-3.3], [65504.0]], np.float16)
    got = dsl.jit(f16_chain_row)(x)
    step = x.astype(np.float32)
    for _ in range(4):
        step = step.astype(ml_dtypes.bfloat16).astype(np.float16)
    np.testing.assert_array_equal(got, (step.astype(np.float64) * 5).astype(np.float16)[:, 0])


# ---- compile_kernel: in-memory and on-disk caches -------------------------------------------------
def unique_source(tag: str) -> str:
    """A tiny kernel source no other test (or earlier run) compiled: ``kernel(x) = x + added(source)``."""
    return f"import numba\n\n\n@numba.njit(cache=True)\ndef kernel(x):\n    return x + {time.time_ns() % 1000003}  # {tag}\n"


def added(source: str) -> int:
    return int(source.split("return x + ")[1].split()[0])


def expected_path(directory, source) -> Path:
    import hashlib
    return Path(directory) / f"k_{hashlib.sha256(source.encode()).hexdigest()[:32]}.py"


def test_same_source_compiles_once_per_process(tmp_path, monkeypatch):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))
    source = unique_source("memory")
    before = dict(codegen_compile.STATS)
    kernel = codegen_compile.compile_kernel(source)
    assert kernel(1) == 1 + added(source)
    assert codegen_compile.compile_kernel(source) is kernel
    assert codegen_compile.STATS["compiled"] == before["compiled"] + 1
    assert codegen_compile.STATS["memory_hits"] == before["memory_hits"] + 1
    assert expected_path(tmp_path, source).read_text() == source


@pytest.mark.parametrize("damage", ["garbage", "truncated", "identical"])
def test_an_existing_generated_file_is_kept_if_identical_else_rewritten(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))
    source = unique_source(damage)
    path = expected_path(tmp_path, source)
    path.write_text({"garbage": "this is not python (\n", "truncated": source[:40], "identical": source}[damage])
    os.utime(path, (1_000_000_000, 1_000_000_000))
    kernel = codegen_compile.compile_kernel(source)
    assert kernel(0) == added(source)
    assert path.read_text() == source
    assert (path.stat().st_mtime == 1_000_000_000) is (damage == "identical")


def test_cache_dir_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("DSL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert codegen_compile.cache_dir() == tmp_path / "dsl" / "kernels"
    for off in ("off", "OFF"):
        monkeypatch.setenv("DSL_CACHE_DIR", off)
        directory = codegen_compile.cache_dir()
        assert directory.name.startswith("dsl-kernels-") and directory.is_dir()
    source = unique_source("off")
    kernel = codegen_compile.compile_kernel(source)
    assert kernel(0) == added(source) and expected_path(directory, source).exists()
    assert not (tmp_path / "dsl").exists()


def test_concurrent_first_calls_compile_once(tmp_path, monkeypatch, counted_imports):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))
    source, barrier, results = unique_source("threads"), threading.Barrier(8), [None] * 8

    def work(index):
        barrier.wait()
        results[index] = codegen_compile.compile_kernel(source)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(counted_imports) == 1 and all(r is results[0] for r in results)


# ---- across processes: numba's cache next to the generated file -----------------------------------
SCRIPT = """
import json, numpy as np, dsl
from dsl.codegen import compile as cc
f = dsl.jit(lambda x: x * 2.5 + 1.0)
x = np.arange(6, dtype=np.float32).reshape(2, 3)
ok = bool(np.array_equal(f(x), x * np.float32(2.5) + np.float32(1)))
numba = [(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values())) for k in cc._COMPILED.values()]
print(json.dumps({"ok": ok, "compiled": cc.STATS["compiled"], "numba": numba, "dir": str(cc.cache_dir())}))
"""


def run_fresh_process(kernel_dir, numba_dir) -> dict:
    env = dict(os.environ, DSL_CACHE_DIR=str(kernel_dir), NUMBA_CACHE_DIR=str(numba_dir))
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def listing(*directories) -> dict:
    return {str(p): p.stat().st_mtime_ns for d in directories for p in Path(d).rglob("*") if p.is_file()}


def test_a_new_process_reuses_the_disk_cache_and_survives_damaged_files(tmp_path):
    kernels, numba_dir = tmp_path / "kernels", tmp_path / "numba"
    first = run_fresh_process(kernels, numba_dir)
    assert first == {"ok": True, "compiled": 1, "numba": [[0, 1]], "dir": str(kernels)}  # numba compiled it
    (generated,) = kernels.glob("k_*.py")
    source = generated.read_text()
    files = listing(kernels, numba_dir)
    assert any(name.endswith(".nbi") for name in files) and any(name.endswith(".nbc") for name in files)
    second = run_fresh_process(kernels, numba_dir)
    assert second["ok"] and second["numba"] == [[1, 0]]  # loaded from disk: no LLVM
    assert listing(kernels, numba_dir) == files  # nothing written
    generated.write_text(source[: len(source) // 2])  # a truncated generated module ...
    for index in numba_dir.rglob("*.nbi"):  # ... and a damaged numba index
        index.write_bytes(b"\x80\x04garbage")
    third = run_fresh_process(kernels, numba_dir)
    assert third["ok"] and third["numba"] == [[0, 1]] and generated.read_text() == source
    assert run_fresh_process(kernels, numba_dir)["numba"] == [[1, 0]]  # and the cache works again


def test_two_processes_writing_the_same_cache_entry_both_succeed(tmp_path):
    """Both start cold on one empty cache directory at the same moment: the generated module is
    written atomically and numba's cache tolerates the race; the entry works afterwards."""
    kernels, numba_dir = tmp_path / "kernels", tmp_path / "numba"
    env = dict(os.environ, DSL_CACHE_DIR=str(kernels), NUMBA_CACHE_DIR=str(numba_dir))
    runs = [subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["ok"]
    assert len(list(kernels.glob("k_*.py"))) == 1
    assert run_fresh_process(kernels, numba_dir)["ok"]


def test_generated_modules_carry_a_fingerprint_of_kernels_so_a_change_there_recompiles(tmp_path, monkeypatch):
    # numba's disk cache looks only at the generated file: without the fingerprint a kernel
    # compiled against an older kernels/vmath.py kept running after vmath changed
    import shutil
    from dsl.codegen import fused
    real = Path(kernels.floats.__file__).resolve().parent
    copy = tmp_path / "kernels"
    shutil.copytree(real, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert fused.kernels_fingerprint(copy) == fused.kernels_fingerprint()
    vmath_file = copy / "vmath.py"
    vmath_file.write_text(vmath_file.read_text().replace("0.4999999403953552", "0.4999999403953553"))
    assert fused.kernels_fingerprint(copy) != fused.kernels_fingerprint()
    assert fused.PREAMBLE.splitlines()[0].endswith(fused.kernels_fingerprint())
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path / "cache"))
    x = np.ones((3, 5), np.float32)
    c = 1.0 + (time.time_ns() % 1000003) / 1e7  # constants no other test compiled: new kernels
    dsl.jit(lambda x: (dsl.exp(x) * c, dsl.softmax(x * c), dsl.reduce_sum(x * c, [0])))(x)
    written = sorted((tmp_path / "cache").glob("k_*.py"))
    assert len(written) == 3  # elementwise, softmax row and any-axis reduction kernels
    assert all(path.read_text().startswith(fused.PREAMBLE) for path in written)
