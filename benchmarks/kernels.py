"""Kernel benchmarks on the pinned API (dsl.contiguous, dsl.cast), side by side with peers.

Run: python benchmarks/kernels.py   (peers: numpy, ml_dtypes, onnx's unpack helper, onnxruntime)
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# this file's name would shadow the project's `kernels` package: import dsl without its folder
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import dsl  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import median_seconds, ort_session, table  # noqa: E402


def bench_transpose(rows):
    a = np.random.default_rng(0).standard_normal((8192, 8192)).astype(np.float32)
    src = a.T
    assert np.array_equal(dsl.contiguous(src), np.ascontiguousarray(src))
    t_dsl = median_seconds(dsl.contiguous, src, repeat=5)
    t_np = median_seconds(np.ascontiguousarray, src, repeat=3, warmup=1)
    out = np.empty_like(a)
    t_copy = median_seconds(np.copyto, out, a, repeat=5)
    gbs = lambda t: a.nbytes / t / 1e9
    rows.append(("transposed 8192x8192 float32 copy", "np.ascontiguousarray", f"{t_np * 1e3:.1f}",
                 f"{t_dsl * 1e3:.1f}", f"{t_np / t_dsl:.1f}x", f"{gbs(t_dsl):.1f}"))
    rows.append(("", "np.copyto (plain memcpy)", f"{t_copy * 1e3:.1f}", f"{t_dsl * 1e3:.1f}",
                 f"{t_copy / t_dsl:.2f} of memcpy", f"{gbs(t_copy):.1f} (memcpy)"))


def numpy_int4_to_f32(packed):
    low = (packed & 0x0F).astype(np.int8)
    high = (packed >> 4).astype(np.int8)
    out = np.empty(packed.size * 2, np.float32)
    out[0::2] = np.where(low >= 8, low - 16, low)
    out[1::2] = np.where(high >= 8, high - 16, high)
    return out


def bench_int4(rows):
    count = 64 * 1024 * 1024
    packed = np.random.default_rng(1).integers(0, 256, count // 2, dtype=np.uint8)
    weights = dsl.Tensor.from_packed(packed, "int4", (count,))
    run = lambda: dsl.cast(weights, dsl.float32).numpy()
    assert np.array_equal(run(), numpy_int4_to_f32(packed))
    t_dsl = median_seconds(run, repeat=5)
    t_np = median_seconds(numpy_int4_to_f32, packed, repeat=3, warmup=1)
    rows.append(("packed int4 -> float32, 64M", "numpy bit ops", f"{t_np * 1e3:.0f}", f"{t_dsl * 1e3:.1f}",
                 f"{t_np / t_dsl:.1f}x", f"{count * 4.5 / t_dsl / 1e9:.1f}"))
    try:
        from onnx.numpy_helper import unpack_int4
        t_onnx = median_seconds(lambda: unpack_int4(packed, (count,), signed=True).astype(np.float32),
                                repeat=3, warmup=1)
        rows.append(("", "onnx unpack_int4 + astype", f"{t_onnx * 1e3:.0f}", f"{t_dsl * 1e3:.1f}",
                     f"{t_onnx / t_dsl:.1f}x", ""))
    except ImportError:
        pass


def ort_cast(to_code, from_code, saturate=1):
    from onnx import helper
    node = helper.make_node("Cast", ["x"], ["y"], to=to_code, saturate=saturate) if to_code != 1 else \
        helper.make_node("Cast", ["x"], ["y"], to=to_code)
    graph = helper.make_graph([node], "cast", [helper.make_tensor_value_info("x", from_code, ["N"])],
                              [helper.make_tensor_value_info("y", to_code, ["N"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    session = ort_session(model)
    return session


def bench_float8(rows):
    count = 64 * 1024 * 1024
    codes = np.random.default_rng(2).integers(0, 256, count, dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0  # no NaN codes: compare values exactly
    f8 = codes.view(ml_dtypes.float8_e4m3fn)
    decode = lambda: dsl.cast(f8, dsl.float32)
    assert np.array_equal(decode(), f8.astype(np.float32))
    t_dsl = median_seconds(decode, repeat=5)
    t_ml = median_seconds(lambda: f8.astype(np.float32), repeat=3, warmup=1)
    rows.append(("float8e4m3fn -> float32, 64M", "ml_dtypes astype", f"{t_ml * 1e3:.0f}", f"{t_dsl * 1e3:.1f}",
                 f"{t_ml / t_dsl:.1f}x", f"{count * 5 / t_dsl / 1e9:.1f}"))
    try:
        from onnxruntime import OrtValue
        session = ort_cast(1, 17)
        x = OrtValue.ortvalue_from_numpy(f8.view(np.uint8))
        # onnxruntime takes float8 through an OrtValue of the right element type
        x = OrtValue.ortvalue_from_shape_and_type([count], 17)
        x.update_inplace(codes)
        t_ort = median_seconds(lambda: session.run_with_ort_values(["y"], {"x": x}), repeat=5)
        rows.append(("", "onnxruntime Cast", f"{t_ort * 1e3:.0f}", f"{t_dsl * 1e3:.1f}", f"{t_ort / t_dsl:.1f}x", ""))
    except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
        rows.append(("", f"onnxruntime Cast: n/a ({type(exc).__name__})", "", "", "", ""))
    x = np.random.default_rng(3).standard_normal(count).astype(np.float32) * 100
    encode = lambda: dsl.cast(x, dsl.float8e4m3fn)
    assert np.array_equal(encode().view(np.uint8),
                          np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    t_dsl = median_seconds(encode, repeat=5)
    t_ml = median_seconds(lambda: np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn), repeat=3, warmup=1)
    t_ml_plain = median_seconds(lambda: x.astype(ml_dtypes.float8_e4m3fn), repeat=3, warmup=1)
    rows.append(("float32 -> float8e4m3fn (saturate), 64M", "ml_dtypes clip + astype", f"{t_ml * 1e3:.0f}",
                 f"{t_dsl * 1e3:.1f}", f"{t_ml / t_dsl:.1f}x", f"{count * 5 / t_dsl / 1e9:.1f}"))
    rows.append(("", "ml_dtypes astype alone", f"{t_ml_plain * 1e3:.0f}", f"{t_dsl * 1e3:.1f}",
                 f"{t_ml_plain / t_dsl:.1f}x", ""))


def main():
    rows = []
    for bench in (bench_transpose, bench_int4, bench_float8):
        bench(rows)
    print(f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, {os.cpu_count()} cores; medians")
    print(table(rows, ("workload", "peer", "peer ms", "dsl ms", "dsl speed-up", "dsl GB/s")))


if __name__ == "__main__":
    main()
