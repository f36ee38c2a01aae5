"""MatMulInteger, QLinearMatMul and DynamicQuantizeLinear (dsl/ops/matmul_integer.py) against plain
numpy formulas, on both engines."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.ops import registry
from tests.dsl.dsl_test_helpers import assert_schema_in_force_matches_onnx, assert_schemas_match_onnx

ENGINES = ["numpy", "jit"]
INT8 = ["uint8", "int8"]
FLOAT8 = ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"]
OPS = {"MatMulInteger": [10], "QLinearMatMul": [10, 21], "DynamicQuantizeLinear": [11]}


@pytest.mark.parametrize("op", sorted(OPS))
def test_schemas_match_onnx(op):
    assert_schemas_match_onnx(op)
    assert [s.version for s in registry.get(op).schemas] == OPS[op]
    for opset in range(1, dsl.LATEST_OPSET + 1):
        assert_schema_in_force_matches_onnx(op, opset)


def run(fn, engine, *arrays, opset=None):
    if engine == "numpy":
        return fn(*arrays, opset=opset)
    return dsl.jit(lambda *a: fn(*a), opset=dsl.LATEST_OPSET if opset is None else opset)(*arrays)


def np_type(name):
    return dsl.dtype(name).np_dtype


def ints(name, shape, rng):
    info = np.iinfo(np_type(name))
    return rng.integers(int(info.min), int(info.max) + 1, shape).astype(np_type(name))


# ---- MatMulInteger -------------------------------------------------------------------------------
def matmul_integer_formula(a, b, a_zp, b_zp):
    """Exact (a - a_zp) @ (b - b_zp) in Python ints, reduced to int32 (sums wrap modulo 2**32)."""
    a64 = a.astype(np.int64) - (0 if a_zp is None else a_zp.astype(np.int64))
    b64 = b.astype(np.int64) - (0 if b_zp is None else b_zp.astype(np.int64))
    exact = np.asarray(np.matmul(a64.astype(object), b64.astype(object)))
    low = exact % (1 << 32)
    return np.array(np.where(low >= 1 << 31, low - (1 << 32), low).tolist(), np.int32).reshape(exact.shape)


# (a shape, b shape, a_zp shape or None, b_zp shape or None, a_zp broadcast shape, b_zp broadcast shape)
MMI_CASES = [
    ((3, 4), (4, 5), None, None, None, None),
    ((3, 4), (4, 5), (), (), (), ()),
    ((3, 4), (4, 5), (1,), (1,), (), ()),
    ((3, 4), (4, 5), (3,), (5,), (3, 1), (5,)),          # per row of A, per column of B
    ((3, 4), (4, 5), (3, 1), (1, 5), (3, 1), (1, 5)),
    ((2, 3, 4), (2, 4, 5), (2, 3, 1), (2, 1, 5), (2, 3, 1), (2, 1, 5)),
    ((2, 1, 3, 4), (5, 4, 2), (), (5, 1, 2), (), (5, 1, 2)),  # batch dims broadcast
    ((4,), (4, 5), (), (5,), (), (5,)),                   # 1-D A
    ((3, 4), (4,), (3,), (), (3, 1), ()),                 # 1-D B
    ((4,), (4,), (), (), (), ()),
    ((0, 4), (4, 5), (), (), (), ()),                     # empty outputs
    ((3, 0), (0, 5), (3,), (5,), (3, 1), (5,)),           # K = 0: zeros
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("a_name", INT8)
@pytest.mark.parametrize("b_name", INT8)
@pytest.mark.parametrize("case", MMI_CASES)
def test_matmul_integer_values(engine, a_name, b_name, case):
    a_shape, b_shape, a_zp_shape, b_zp_shape, a_at, b_at = case
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a, b = ints(a_name, a_shape, rng), ints(b_name, b_shape, rng)
    a_zp = None if a_zp_shape is None else ints(a_name, a_zp_shape, rng)
    b_zp = None if b_zp_shape is None else ints(b_name, b_zp_shape, rng)
    if a_zp is None:
        got = run(lambda x, y, opset=None: dsl.matmul_integer(x, y, opset=opset), engine, a, b)
    else:
        got = run(dsl.matmul_integer, engine, a, b, a_zp, b_zp)
    want = matmul_integer_formula(a, b, None if a_zp is None else a_zp.reshape(a_at),
                                  None if b_zp is None else b_zp.reshape(b_at))
    assert got.dtype == np.int32 and got.shape == np.matmul(a, b).shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("engine", ENGINES)
def test_matmul_integer_only_b_zero_point_and_python_ints(engine):
    a, b = np.array([[1, 2, 3]], np.uint8), np.array([[4], [5], [6]], np.int8)
    got = run(lambda x, y, opset=None: dsl.matmul_integer(x, y, None, np.int8(-2), opset=opset), engine, a, b)
    np.testing.assert_array_equal(got, [[1 * 6 + 2 * 7 + 3 * 8]])
    got = run(lambda x, y, opset=None: dsl.matmul_integer(x, y, 1, -2, opset=opset), engine, a, b)
    np.testing.assert_array_equal(got, [[0 * 6 + 1 * 7 + 2 * 8]])


@pytest.mark.parametrize("engine", ENGINES)
def test_matmul_integer_sums_wrap_in_int32(engine):
    k = 40_000  # 40000 * 255 * 255 > 2**31
    a, b = np.full((1, k), 255, np.uint8), np.full((k, 2), 255, np.uint8)
    got = run(lambda x, y, opset=None: dsl.matmul_integer(x, y, opset=opset), engine, a, b)
    np.testing.assert_array_equal(got, matmul_integer_formula(a, b, None, None))
    assert int(got[0, 0]) == k * 255 * 255 - (1 << 32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("args,error,match", [
    (((3, 4), (5, 6)), dsl.DslError, r"A shape \[3, 4\] and B shape \[5, 6\]: inner dims 4 and 5 differ"),
    (((2, 3, 4), (3, 4, 5)), dsl.DslError, r"shapes \[2\] and \[3\] are not broadcastable: dim 2 vs 3"),
    (((), (4, 5)), dsl.DslError, r"input A is a scalar \(shape \[\]\); matmul needs rank >= 1"),
    (((3, 4), (4, 5), ("int8", ())), dsl.DTypeError, r"a_zero_point has type int8; expected uint8"),
    (((3, 4), (4, 5), ("uint8", ()), ("int8", ())), dsl.DTypeError, r"b_zero_point has type int8; expected uint8"),
    (((3, 4), (4, 5), ("uint8", (4,))), dsl.DslError,
     r"a_zero_point shape \[4\] for A shape \[3, 4\]; expected a scalar, \[3\] or \[3, 1\] \(per row\)"),
    (((3, 4), (4, 5), ("uint8", ()), ("uint8", (4, 1))), dsl.DslError,
     r"b_zero_point shape \[4, 1\] for B shape \[4, 5\]; expected a scalar, \[5\] or \[1, 5\] \(per column\)"),
    (((2, 3, 4), (4, 5), ("uint8", (3,))), dsl.DslError,
     r"a_zero_point shape \[3\] for A shape \[2, 3, 4\]; expected a scalar or \[2, 3, 1\]"),
    (((4,), (4, 5), ("uint8", (1, 1))), dsl.DslError,
     r"a_zero_point shape \[1, 1\] for A shape \[4\]; expected a scalar"),
])
def test_matmul_integer_errors(engine, args, error, match):
    a, b = np.zeros(args[0], np.uint8), np.zeros(args[1], np.uint8)
    zero_points = [np.zeros(shape, np_type(name)) for name, shape in args[2:]]
    with pytest.raises(error, match="MatMulInteger.*" + match):
        run(lambda *xs, opset=None: dsl.matmul_integer(*xs, opset=opset), engine, a, b, *zero_points)


def test_matmul_integer_type_errors():
    with pytest.raises(dsl.DTypeError, match="MatMulInteger"):
        dsl.matmul_integer(np.zeros((2, 2), np.int16), np.zeros((2, 2), np.int16))
    with pytest.raises(dsl.DslError, match="MatMulInteger.*Python int 300"):
        dsl.matmul_integer(np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.uint8), 300)


# ---- QLinearMatMul -------------------------------------------------------------------------------
def dequantized(q, scale, zp):
    return (q.astype(np.float64) - zp.astype(np.float64)) * scale.astype(np.float64)


def saturate_to(real, name):
    """The spec's output step: round half to even and clip for integers, a saturating cast for float8."""
    dt = np_type(name)
    if dsl.dtype(name).kind == "float":
        top = float(ml_dtypes.finfo(dt).max)
        return np.clip(real, -top, top).astype(dt)
    info = np.iinfo(dt)
    return np.clip(np.rint(real), info.min, info.max).astype(dt)


def qlinear_formula(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, a_at=(), b_at=()):
    a_real = dequantized(a, a_scale.reshape(a_at), a_zp.reshape(a_at))
    b_real = dequantized(b, b_scale.reshape(b_at), b_zp.reshape(b_at))
    real = np.matmul(a_real, b_real) / y_scale.astype(np.float64)
    if dsl.dtype(y_zp.dtype).kind == "float":
        return saturate_to(real + y_zp.astype(np.float64), dsl.dtype(y_zp.dtype).onnx_name)
    return saturate_to(np.rint(real) + y_zp.astype(np.float64), dsl.dtype(y_zp.dtype).onnx_name)


def qlinear(*args, opset=None):
    return dsl.qlinear_matmul(*args, opset=opset)


def qtypes(version):
    names = INT8 + (FLOAT8 if version >= 21 else [])
    return [(version, a, b, y) for a in names for b in names for y in names
            if version == 10 or len({a, b, y}) <= 2]  # (at 21: every type, pairs of types mixed)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version,a_name,b_name,y_name", qtypes(10) + qtypes(21))
def test_qlinear_matmul_by_version_and_types(engine, version, a_name, b_name, y_name):
    rng = np.random.default_rng(version)

    def quantized(name, shape):
        if dsl.dtype(name).kind == "float":
            return rng.uniform(-4, 4, shape).astype(np_type(name))
        return ints(name, shape, rng)

    a, b = quantized(a_name, (3, 4)), quantized(b_name, (4, 2))
    a_zp, b_zp = quantized(a_name, ()), quantized(b_name, ())
    y_zp = np.zeros((), np_type(y_name)) if dsl.dtype(y_name).kind == "float" else quantized(y_name, ())
    scales = [np.float32(s) for s in (0.05, 0.02, 0.25)]
    args = (a, scales[0], a_zp, b, scales[1], b_zp, scales[2], y_zp)
    got = run(qlinear, engine, *args, opset=version)
    want = qlinear_formula(*[np.asarray(x) for x in args])
    assert got.dtype == np.dtype(np_type(y_name)) and got.shape == (3, 2)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("scale_name", ["float", "float16", "bfloat16"])
def test_qlinear_matmul_scale_types_at_21(engine, scale_name):
    rng = np.random.default_rng(1)
    a, b = ints("uint8", (2, 3), rng), ints("int8", (3, 2), rng)
    s = [np.array(v, np_type(scale_name)) for v in (0.125, 0.0625, 2.0)]
    args = (a, s[0], np.uint8(128), b, s[1], np.int8(3), s[2], np.uint8(100))
    got = run(qlinear, engine, *args, opset=21)
    np.testing.assert_array_equal(got, qlinear_formula(*[np.asarray(x) for x in args]))
    if scale_name != "float":
        with pytest.raises(dsl.DTypeError, match="QLinearMatMul"):
            qlinear(*args, opset=10)


# (a shape, b shape, a param shape, b param shape, a param broadcast shape, b param broadcast shape)
QL_SHAPES = [
    ((3, 4), (4, 2), (3,), (2,), (3, 1), (2,)),            # per row of a, per column of b
    ((3, 4), (4, 2), (3, 1), (1, 2), (3, 1), (1, 2)),
    ((3, 4), (4, 2), (), (2,), (), (2,)),
    ((2, 3, 4), (2, 4, 2), (2, 3, 1), (2, 1, 2), (2, 3, 1), (2, 1, 2)),
    ((4,), (4, 2), (), (2,), (), (2,)),                     # 1-D a, per-column b
    ((3, 4), (4,), (3,), (), (3, 1), ()),                   # per-row a, 1-D b
    ((4,), (4,), (1,), (), (), ()),
    ((2, 3, 4), (4,), (2, 3, 1), (), (2, 3, 1), ()),       # N-D per-row a, 1-D b
    ((4,), (2, 4, 5), (), (2, 1, 5), (), (2, 1, 5)),       # 1-D a, N-D per-column b
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shapes", QL_SHAPES)
@pytest.mark.parametrize("version", [10, 21])
def test_qlinear_matmul_per_row_and_column(engine, shapes, version):
    a_shape, b_shape, a_p, b_p, a_at, b_at = shapes
    rng = np.random.default_rng(len(a_shape) + 3 * len(b_shape))
    a, b = ints("uint8", a_shape, rng), ints("int8", b_shape, rng)
    a_scale = rng.uniform(0.01, 0.05, a_p).astype(np.float32)
    b_scale = rng.uniform(0.01, 0.05, b_p).astype(np.float32)
    a_zp, b_zp = ints("uint8", a_p, rng), ints("int8", b_p, rng)
    args = (a, a_scale, a_zp, b, b_scale, b_zp, np.float32(0.03), np.int8(-5))
    got = run(qlinear, engine, *args, opset=version)
    want = qlinear_formula(*[np.asarray(x) for x in args], a_at=a_at, b_at=b_at)
    assert got.dtype == np.int8 and got.shape == np.matmul(a, b).shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("engine", ENGINES)
def test_qlinear_matmul_rounds_half_to_even_and_saturates(engine):
    a = np.array([[1], [3], [5], [7], [200], [0]], np.uint8)
    b = np.array([[1, 255]], np.uint8)
    args = (a, np.float32(1.0), np.uint8(0), b, np.float32(1.0), np.uint8(0), np.float32(2.0), np.uint8(0))
    got = run(qlinear, engine, *args)
    # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4 (half to even); 200 * 255 / 2 saturates to 255
    np.testing.assert_array_equal(got[:, 0], [0, 2, 2, 4, 100, 0])
    np.testing.assert_array_equal(got[:, 1], [128, 255, 255, 255, 255, 0])
    signed = (a.astype(np.int8), np.float32(1.0), np.int8(0), -np.array([[1, 100]], np.int8), np.float32(1.0),
              np.int8(0), np.float32(2.0), np.int8(0))
    got = run(qlinear, engine, *signed)
    np.testing.assert_array_equal(got, qlinear_formula(*[np.asarray(x) for x in signed]))
    assert got[2, 0] == -2 and got[1, 1] == -128  # -2.5 -> -2; -150 saturates to -128


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", FLOAT8)
def test_qlinear_matmul_float8_saturates(engine, name):
    a = np.array([[1.0, 2.0], [-3.0, 0.5]], np_type(name))
    b = np.array([[2.0], [4.0]], np_type(name))
    zero = np.zeros((), np_type(name))
    args = (a, np.float32(1.0), zero, b, np.float32(1.0), zero, np.float32(1e-6), zero)  # |real| / 1e-6 > max
    got = run(qlinear, engine, *args, opset=21)
    top = float(ml_dtypes.finfo(np_type(name)).max)
    np.testing.assert_array_equal(got.astype(np.float64), [[top], [-top]])
    args = args[:6] + (np.float32(0.5), zero)
    got = run(qlinear, engine, *args, opset=21)
    np.testing.assert_array_equal(got.astype(np.float64), [[20.0], [-8.0]])  # (2 + 8, -6 + 2) / 0.5


@pytest.mark.parametrize("engine", ENGINES)
def test_qlinear_matmul_float8_output_rounds_once(engine):
    # real / y_scale = 8.5 * (1 + 2**-46 / (1 + 2**-22)): just above the tie 8.5, so it rounds to 9; a detour
    # through float32 would land exactly on 8.5 and round half to even to 8
    f8 = np_type("float8e4m3fn")
    a, b, zero = np.array([[8.0, 0.5]], f8), np.array([[1.0], [1.0]], f8), np.zeros((), f8)
    scale, y_scale = np.float32(1 + 2 ** -23), np.float32(1 + 2 ** -22)
    args = (a, scale, zero, b, scale, zero, y_scale, zero)
    got = run(qlinear, engine, *args, opset=21)
    want = qlinear_formula(*[np.asarray(x) for x in args])
    assert float(want[0, 0]) == 9.0
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("engine", ENGINES)
def test_qlinear_matmul_python_scalars(engine):
    a = np.array([[2, 4]], np.uint8)
    got = run(lambda x, y, opset=None: dsl.qlinear_matmul(x, 0.5, 0, y, 0.5, 0, 1.0, 0, opset=opset), engine, a, a.T)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, [[5]])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("change,error,match", [
    ({"a_zero_point": np.int8(0)}, dsl.DTypeError, r"a_zero_point has type int8; expected uint8"),
    ({"b_zero_point": np.uint8(0)}, dsl.DTypeError, r"b_zero_point has type uint8; expected int8"),
    ({"y_scale": np.ones(2, np.float32)}, dsl.DslError, r"y_scale shape \[2\]; expected a scalar"),
    ({"y_zero_point": np.zeros(2, np.uint8)}, dsl.DslError, r"y_zero_point shape \[2\]; expected a scalar"),
    ({"a_scale": np.ones(3, np.float32)}, dsl.DslError, r"a_zero_point shape \[\] must equal a_scale shape \[3\]"),
    ({"a_scale": np.ones(4, np.float32), "a_zero_point": np.zeros(4, np.uint8)}, dsl.DslError,
     r"a_scale shape \[4\] for a shape \[3, 4\]; expected a scalar, \[3\] or \[3, 1\] \(per row\)"),
    ({"b": np.zeros((5, 2), np.int8)}, dsl.DslError, r"a shape \[3, 4\] and b shape \[5, 2\]: inner dims 4 and 5"),
    ({"a_scale": np.float64(1)}, dsl.DTypeError, r"input 'a_scale' has type double"),
])
def test_qlinear_matmul_errors(engine, change, error, match):
    args = {"a": np.zeros((3, 4), np.uint8), "a_scale": np.float32(1), "a_zero_point": np.uint8(0),
            "b": np.zeros((4, 2), np.int8), "b_scale": np.float32(1), "b_zero_point": np.int8(0),
            "y_scale": np.float32(1), "y_zero_point": np.uint8(0)}
    args.update(change)
    with pytest.raises(error, match="QLinearMatMul.*" + match):
        run(qlinear, engine, *args.values())


def test_qlinear_matmul_version_errors():
    f8 = np.zeros((2, 2), np_type("float8e4m3fn"))
    zero = np.zeros((), np_type("float8e4m3fn"))
    with pytest.raises(dsl.DTypeError, match="QLinearMatMul"):
        qlinear(f8, np.float32(1), zero, f8, np.float32(1), zero, np.float32(1), zero, opset=20)
    with pytest.raises(dsl.DTypeError, match=r"QLinearMatMul.*b_scale has type float16; expected float"):
        u8 = np.zeros((2, 2), np.uint8)
        qlinear(u8, np.float32(1), np.uint8(0), u8, np.float16(1), np.uint8(0), np.float32(1), np.uint8(0), opset=21)


# ---- DynamicQuantizeLinear -----------------------------------------------------------------------
def dynamic_formula(x):
    """The spec's formula in float32: the range widened to include 0, zero point rounded half to even."""
    x = x.astype(np.float32)
    high = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    low = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    scale = np.float32((high - low) / np.float32(255)) if high != low else np.float32(1)
    zp = np.uint8(np.rint(np.clip(-low / scale, 0, 255)))
    y = np.clip(np.rint(x / scale) + np.float32(zp), 0, 255).astype(np.uint8)
    return y, scale, zp


DYNAMIC_INPUTS = {
    "mixed": np.array([[-1.0, 0.5, 2.55], [3.3, -0.2, 0.0]], np.float32),
    "all_positive": np.array([1.0, 2.0, 5.1], np.float32),        # min(0, min x) = 0: zero point 0
    "all_negative": np.array([-1.0, -2.0, -5.1], np.float32),     # max(0, max x) = 0: zero point 255
    "all_zero": np.zeros((2, 3), np.float32),                     # 0 / 0: y_scale 1, zero point 0
    "half_way": np.array([-1.0, 1.55], np.float32),               # a zero point / value at .5 rounds half to even
    "random": np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32) * 3,
    "empty": np.zeros((0, 3), np.float32),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", sorted(DYNAMIC_INPUTS))
@pytest.mark.parametrize("version", [11])
def test_dynamic_quantize_linear(engine, case, version):
    x = DYNAMIC_INPUTS[case]
    y, scale, zp = run(dsl.dynamic_quantize_linear, engine, x, opset=version)
    want_y, want_scale, want_zp = dynamic_formula(x)
    assert y.dtype == np.uint8 and y.shape == x.shape
    assert scale.dtype == np.float32 and scale.shape == () and zp.dtype == np.uint8 and zp.shape == ()
    assert scale == want_scale and zp == want_zp
    np.testing.assert_array_equal(y, want_y)
    if case == "all_positive":
        assert zp == 0 and y.max() == 255
    if case == "all_negative":
        assert zp == 255 and y.min() == 0
    if case == "all_zero":
        assert scale == 1 and zp == 0 and not y.any()


@pytest.mark.parametrize("name", ["float16", "double", "uint8"])
def test_dynamic_quantize_linear_takes_float32_only(name):
    with pytest.raises(dsl.DTypeError, match="DynamicQuantizeLinear"):
        dsl.dynamic_quantize_linear(np.ones(3, np_type(name)))
