"""Tests for dsl/ops/matmul.py: MatMul shapes and every version and type vs exact sums, eager and inside jit."""
from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.ops import registry

LATEST = registry.LATEST_OPSET


def versions() -> list[int]:
    return [v for v in range(1, LATEST + 1) if onnx.defs.get_schema("MatMul", v).since_version == v]


def allowed_types(version: int) -> list:
    spec = onnx.defs.get_schema("MatMul", version)
    return sorted((dtypes.dtype(t[len("tensor("):-1]) for t in spec.type_constraints[0].allowed_type_strs),
                  key=lambda t: t.onnx_name)


def test_schemas_match_onnx():
    opdef = registry.get("MatMul")
    assert [s.version for s in opdef.schemas] == versions()
    for schema in opdef.schemas:
        spec = onnx.defs.get_schema("MatMul", schema.version)
        assert [i.name for i in schema.inputs] == [i.name for i in spec.inputs] == ["A", "B"]
        assert {t.onnx_name for t in schema.types} == {t.onnx_name for t in allowed_types(schema.version)}
        assert schema.attrs == () and not spec.attributes
    assert opdef.kernel is None  # BLAS through the reference, never a generated kernel


def sample(dt, shape, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.kind == "float":
        return (rng.standard_normal(shape) * 2).astype(dt.np_dtype)
    info = ml_dtypes.iinfo(dt.np_dtype)
    storage = np.int64 if info.min < 0 else np.uint64
    return rng.integers(info.min, info.max, shape, endpoint=True, dtype=storage).astype(dt.np_dtype)


def exact_matmul(a: np.ndarray, b: np.ndarray, dt) -> np.ndarray:
    """numpy.matmul's shape rules spelled out, each dot product summed exactly (math.fsum / Python
    ints), then rounded to the compute domain (float32 unless double) and T, or wrapped."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a3 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b3 = np.broadcast_to(b2, batch + b2.shape[-2:])
    out = np.empty(batch + (a2.shape[-2], b2.shape[-1]), dtype=object)
    for index in itertools.product(*map(range, out.shape)):
        *lead, i, j = index
        row, col = a3[tuple(lead) + (i,)], b3[tuple(lead) + (slice(None), j)]
        if dt.kind == "float":
            value = math.fsum(x * y for x, y in zip(row.astype(np.float64).tolist(), col.astype(np.float64).tolist()))
            out[index] = value if dt.onnx_name == "double" else float(np.float32(value))
        else:
            total = sum(x * y for x, y in zip(row.tolist(), col.tolist())) % (1 << dt.bits)
            out[index] = total - (1 << dt.bits) if dt.kind == "int" and total >= 1 << (dt.bits - 1) else total
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    exact = np.float64 if dt.kind == "float" else object
    return np.array(out.reshape(-1).tolist(), dtype=exact).reshape(out.shape).astype(dt.np_dtype)


MATMUL_CASES = [(v, dt) for v in versions() for dt in allowed_types(v)]
SHAPES = [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 1, 2, 3), (3, 3, 2)),
          ((4, 2, 3), (3,)), ((0, 3), (3, 2)), ((2, 0), (0, 3))]


@pytest.mark.parametrize("version, dt", MATMUL_CASES, ids=[f"{v}-{d}" for v, d in MATMUL_CASES])
def test_matmul_every_version_and_type(version, dt):
    for seed, (a_shape, b_shape) in enumerate(SHAPES):
        a, b = sample(dt, a_shape, seed), sample(dt, b_shape, seed + 100)
        got = dsl.matmul(a, b, opset=version)
        want = exact_matmul(a, b, dt)
        assert got.dtype == want.dtype and got.shape == want.shape == np.matmul(np.zeros(a_shape),
                                                                              np.zeros(b_shape)).shape
        if dt.kind != "float":
            np.testing.assert_array_equal(got, want)
        else:  # BLAS sums in its own order: within a few units of the float32 / double result
            tolerance = {"double": 1e-12, "float": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dt.onnx_name]
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tolerance,
                                       atol=tolerance * 8)


def test_float16_products_accumulate_in_float32():
    a = np.full((1, 4096), 1.0, np.float16)
    assert dsl.matmul(a, np.full((4096, 1), 1.0, np.float16)).tolist() == [[4096.0]]


def test_integer_products_wrap():
    a = np.array([[2 ** 31 - 1, 2]], np.int32)
    b = np.array([[2], [1]], np.int32)
    assert dsl.matmul(a, b).tolist() == [[(2 * (2 ** 31 - 1) + 2) % 2 ** 32]]  # 2**32 wraps to 0


@pytest.mark.parametrize("a_shape, b_shape, match", [
    ((), (3,), r"^MatMul: input A is a scalar \(shape \[\]\); matmul needs rank >= 1"),
    ((3,), (), r"^MatMul: input B is a scalar \(shape \[\]\); matmul needs rank >= 1"),
    ((2, 3), (4, 2), r"^MatMul: A shape \[2, 3\] and B shape \[4, 2\]: inner dims 3 and 4 differ"),
    ((3,), (2,), r"^MatMul: A shape \[3\] and B shape \[2\]: inner dims 3 and 2 differ"),
    ((2, 2, 3), (3, 3, 1), r"^MatMul: shapes \[2\] and \[3\] are not broadcastable: dim 2 vs 3"),
])
def test_matmul_shape_errors_name_op_and_shapes(a_shape, b_shape, match):
    with pytest.raises(dsl.ShapeError, match=match):
        dsl.matmul(np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32))


@pytest.mark.parametrize("opset, name, match", [
    (8, "int32", r"^MatMul: input 'A' has type int32\[2,2\], not allowed at version 1"),
    (12, "bfloat16", r"^MatMul: input 'A' has type bfloat16\[2,2\], not allowed at version 9"),
    (LATEST, "int8", r"^MatMul: input 'A' has type int8\[2,2\], not allowed at version 13"),
])
def test_matmul_types_outside_the_version_are_errors(opset, name, match):
    x = np.zeros((2, 2), dtypes.dtype(name).np_dtype)
    with pytest.raises(dsl.DTypeError, match=match):
        dsl.matmul(x, x, opset=opset)


def test_matmul_inside_jit_runs_blas_between_fused_kernels():
    kernel = dsl.jit(lambda q, k: dsl.softmax(dsl.matmul(q, dsl.transpose(k, [0, 2, 1])) * 0.5))
    q, k = sample(dtypes.dtype("float"), (2, 3, 4), 1), sample(dtypes.dtype("float"), (2, 5, 4), 2)
    got = kernel(q, k)
    want = dsl.softmax(dsl.mul(dsl.matmul(q, dsl.transpose(k, [0, 2, 1])), 0.5))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert kernel.executable(q, k).kernel_count == 1  # the Mul fused into the softmax row kernel
    assert "numpy MatMul" in kernel.explain(q, k)


def test_matmul_operator_in_jit():
    kernel = dsl.jit(lambda a, b: a @ b)
    a, b = sample(dtypes.dtype("int64"), (3,), 3), sample(dtypes.dtype("int64"), (2, 3, 2), 4)
    np.testing.assert_array_equal(kernel(a, b), exact_matmul(a, b, dtypes.dtype("int64")))


@pytest.mark.parametrize("engine", ["numpy", "jit"])
@pytest.mark.parametrize("a_shape, b_shape, transposed", [
    ((1, 16, 1, 64), (1, 16, 2048, 64), True),     # a decode step's Q K^T (K^T a view)
    ((1, 16, 1, 2048), (1, 16, 2048, 64), False),  # its P V
    ((2, 4, 3, 1, 64), (2, 4, 1, 512, 64), True),  # grouped-query heads: the group folds into rows
    ((2, 4, 3, 2, 64), (2, 4, 1, 64, 512), False),
    ((2, 3, 1, 64), (1, 3, 64, 4096), False),      # b broadcast along a batch dim: BLAS
    ((4, 1, 64), (4, 4096, 128), True),            # b sliced (not contiguous): BLAS
])
def test_few_row_products_match_a_float64_matmul(engine, a_shape, b_shape, transposed):
    rng = np.random.default_rng(len(a_shape) + b_shape[-1])
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    if transposed:
        b = np.swapaxes(b, -1, -2)[..., :64, :] if b_shape[-1] == 128 else np.swapaxes(b, -1, -2)
    fn = dsl.matmul if engine == "numpy" else dsl.jit(lambda x, y: dsl.matmul(x, y))
    got = fn(a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
