"""Tests for dsl/ops/bitwise.py: Mod, BitShift, BitwiseAnd / Or / Xor / Not and Xor at every version and type,
eager vs Python-integer / float64 ground truth, jit vs eager, and the Python operators on traced values."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.kir import interp
from dsl.ops import registry
from dsl.passes.fuse import KernelStep
from dsl.view import View

from dsl_test_helpers import allowed_types, assert_input_types_match_onnx, assert_same, onnx_versions, \
    schemas_with_onnx

LATEST = registry.LATEST_OPSET
OPS = ["Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Xor"]
BITWISE = {"BitwiseAnd": (dsl.bitwise_and, lambda a, b: a & b), "BitwiseOr": (dsl.bitwise_or, lambda a, b: a | b),
           "BitwiseXor": (dsl.bitwise_xor, lambda a, b: a ^ b)}


# ---- ground truth (Python integers, float64 numpy; independent of dsl) ------------------------------
def wrap(value: int, dt) -> int:
    """``value`` modulo 2**bits, as the signed or unsigned integer of ``dt``."""
    value %= 1 << dt.bits
    return value - (1 << dt.bits) if dt.kind == "int" and value >= 1 << (dt.bits - 1) else value


def py_mod(a: int, b: int, fmod: int) -> int:
    if b == 0:
        return 0  # numpy's answer (the spec is silent for integers)
    if fmod:
        return -(abs(a) % abs(b)) if a < 0 else abs(a) % abs(b)  # C: truncated quotient, the sign of a
    return a % b


def py_shift(a: int, b: int, left: bool, dt) -> int:
    if not 0 <= b < dt.bits:
        return -1 if (not left and a < 0) else 0
    return wrap(a << b, dt) if left else a >> b


def ints(dt, *extra) -> list:
    info = ml_dtypes.iinfo(dt.np_dtype)
    values = [int(info.min), int(info.max), int(info.min) + 1, int(info.max) - 1, 0, 1, 2, 3, 7, *extra]
    if dt.kind == "int":
        values += [-1, -2, -3, -7]
    return [v for v in values if int(info.min) <= v <= int(info.max)]


def int_pairs(dt, shifts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values (min, max, 0, +-1, ...), divisors / shift counts included."""
    left = ints(dt)
    right = ints(dt, dt.bits - 1, dt.bits, dt.bits + 1, 63, 64, 200) if shifts else left
    a = np.array([x for x in left for _ in right], dtype=object)
    b = np.array([y for _ in left for y in right], dtype=object)
    return a.astype(dt.np_dtype), b.astype(dt.np_dtype)


FLOAT_A = [0.0, -0.0, 1.0, -1.0, 5.5, -5.5, 7.0, -7.0, 0.3, np.inf, -np.inf, np.nan, 1e-3, 60000.0]
FLOAT_B = [3.0, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 0.25, -2.5, 1.5]


def float_pairs(dt) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([x for x in FLOAT_A for _ in FLOAT_B]).astype(dt.np_dtype)
    b = np.array([y for _ in FLOAT_A for y in FLOAT_B]).astype(dt.np_dtype)
    return a, b


def expected_float_mod(a: np.ndarray, b: np.ndarray, fmod: int, dt) -> np.ndarray:
    """float64 numpy, rounded once to ``dt`` (fmod is exact; one rounding of the corrected
    remainder is what float32 gives too: 53 >= 2 * 24 + 2 bits)."""
    with np.errstate(all="ignore"):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        out = np.fmod(a64, b64) if fmod else np.remainder(a64, b64)
    return out.astype(dt.np_dtype)


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype and shape; equal bits, except that any NaN matches any NaN."""
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind in "fV":
        nan = np.isnan(want.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
        got, want = got[~nan], want[~nan]
    assert_same(got, want)


# ---- schemas --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert_input_types_match_onnx(op, schema, spec)
        assert [i.optional for i in schema.inputs] == [False] * len(spec.inputs)
        assert {a.name for a in schema.attrs} == set(spec.attributes), (op, schema.version)
        for attr in schema.attrs:
            formal = spec.attributes[attr.name]
            assert (attr.default is registry.REQUIRED) == formal.required, (op, attr.name)
            default = formal.default_value
            expected = default.i if default.type == onnx.AttributeProto.INT else None
            assert (None if attr.default is registry.REQUIRED else attr.default) == expected


# ---- Mod ------------------------------------------------------------------------------------------
MOD_CASES = [(v, dt, fmod) for v in onnx_versions("Mod") for dt in allowed_types("Mod", v) for fmod in (0, 1)
             if not (dt.kind == "float" and fmod == 0 and v < 28)]


@pytest.mark.parametrize("version, dt, fmod", MOD_CASES, ids=[f"{v}-{d}-fmod{f}" for v, d, f in MOD_CASES])
def test_mod_eager_every_version_and_type(version, dt, fmod):
    if dt.kind == "float":
        a, b = float_pairs(dt)
        want = expected_float_mod(a, b, fmod, dt)
    else:
        a, b = int_pairs(dt)
        want = np.array([py_mod(int(x), int(y), fmod) for x, y in zip(a, b)], dtype=object).astype(dt.np_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # x mod 0: numpy's answer without numpy's warning
        got = dsl.mod(a, b, fmod=fmod, opset=version)
    assert_bits(got, want)


def test_mod_signs_follow_the_divisor_or_the_dividend():
    a = np.array([-7, 7, -7, 7, -128, 5], np.int8)
    b = np.array([3, -3, -3, 3, -1, 0], np.int8)
    assert dsl.mod(a, b).tolist() == [2, -2, -1, 1, 0, 0]
    assert dsl.mod(a, b, fmod=1).tolist() == [-1, 1, -1, 1, 0, 0]


def test_mod_float_special_cases_of_the_version_28_spec():
    nan, inf = np.nan, np.inf
    a = np.array([0.0, -0.0, inf, 1.0, 1.0, -1.0, nan, 1.0], np.float32)
    b = np.array([-2.0, 2.0, 2.0, 0.0, inf, inf, 1.0, nan], np.float32)
    floor = dsl.mod(a, b)  # "±0 with the sign of y", NaN, NaN, x or y by the signs, NaN, NaN
    np.testing.assert_array_equal(np.signbit(floor[:2]), [True, False])
    assert floor[[0, 1, 4, 5]].tolist() == [0.0, 0.0, 1.0, inf] and np.isnan(floor[[2, 3, 6, 7]]).all()
    c = dsl.mod(a, b, fmod=1)  # "If y is ±∞ and x is finite, x is returned"
    assert c[[4, 5]].tolist() == [1.0, -1.0] and np.isnan(c[[2, 3, 6, 7]]).all()


def test_mod_broadcasts_and_python_scalars_take_the_tensor_type():
    a = np.arange(-6, 6, dtype=np.int16).reshape(3, 4)
    got = dsl.mod(a, np.array([[5], [-5], [3]], np.int16))
    np.testing.assert_array_equal(got, np.remainder(a, np.array([[5], [-5], [3]])).astype(np.int16))
    assert dsl.mod(a, 4).dtype == np.int16 and dsl.mod(7, np.int32(-2)).tolist() == -1


@pytest.mark.parametrize("opset, a, b, fmod, error, match", [
    (13, np.zeros(2, np.float32), np.ones(2, np.float32), 0, dsl.DTypeError,
     r"^Mod: fmod=0 \(Python's %\) needs an integer type at version 13, got float: use fmod=1"),
    (LATEST, np.zeros(2, np.int32), np.ones(2, np.int32), 2, dsl.InputError, r"^Mod: fmod must be 0 or 1, got 2"),
    (LATEST, np.zeros(2, np.bool_), np.ones(2, np.bool_), 0, dsl.DTypeError,
     r"^Mod: input 'A' has type bool\[2\], not allowed at version 28"),
    (10, np.zeros(2, ml_dtypes.bfloat16), np.ones(2, ml_dtypes.bfloat16), 1, dsl.DTypeError,
     r"^Mod: input 'A' has type bfloat16\[2\], not allowed at version 10"),
    (LATEST, np.zeros(2, np.int32), np.ones(2, np.int64), 0, dsl.DTypeError,
     r"^Mod: input 'B' has element type int64 but an earlier input of the same type variable has int32"),
    (LATEST, np.zeros((2, 3), np.int32), np.ones(2, np.int32), 0, dsl.ShapeError,
     r"^Mod: shapes \[2, 3\] and \[1, 2\] are not broadcastable"),
    (9, np.zeros(2, np.int32), np.ones(2, np.int32), 0, dsl.UnsupportedError,
     r"^Mod: not defined at opset 9; first version is 10"),
])
def test_mod_errors_name_op_and_value(opset, a, b, fmod, error, match):
    with pytest.raises(error, match=match):
        dsl.mod(a, b, fmod=fmod, opset=opset)


# ---- BitShift -------------------------------------------------------------------------------------
SHIFT_CASES = [(v, dt, d) for v in onnx_versions("BitShift") for dt in allowed_types("BitShift", v)
               for d in ("LEFT", "RIGHT")]


@pytest.mark.parametrize("version, dt, direction", SHIFT_CASES, ids=[f"{v}-{d}-{r}" for v, d, r in SHIFT_CASES])
def test_bitshift_eager_every_version_and_type(version, dt, direction):
    x, y = int_pairs(dt, shifts=True)
    got = dsl.bit_shift(x, y, direction=direction, opset=version)
    want = [py_shift(int(a), int(b), direction == "LEFT", dt) for a, b in zip(x, y)]
    assert_same(got, np.array(want, dtype=object).astype(dt.np_dtype))


def test_bitshift_spec_examples_and_shifts_past_the_width():
    x = np.array([16, 4, 1, 255], np.uint8)
    assert dsl.bit_shift(x, np.array([1, 2, 7, 8], np.uint8), direction="RIGHT").tolist() == [8, 1, 0, 0]
    assert dsl.bit_shift(x, np.array([1, 2, 7, 8], np.uint8), direction="LEFT").tolist() == [32, 16, 128, 0]
    signed = np.array([-8, -8, -8, 8, 64], np.int8)
    counts = np.array([1, 8, -1, 8, 1], np.int8)
    assert dsl.bit_shift(signed, counts, direction="RIGHT").tolist() == [-4, -1, -1, 0, 32]
    assert dsl.bit_shift(signed, counts, direction="LEFT").tolist() == [-16, 0, 0, 0, -128]


@pytest.mark.parametrize("opset, x, kwargs, error, match", [
    (LATEST, np.zeros(2, np.uint8), {}, TypeError, r"direction"),
    (LATEST, np.zeros(2, np.uint8), {"direction": "UP"}, dsl.InputError,
     r"^BitShift: direction must be 'LEFT' or 'RIGHT', got 'UP'"),
    (27, np.zeros(2, np.int8), {"direction": "LEFT"}, dsl.DTypeError,
     r"^BitShift: input 'X' has type int8\[2\], not allowed at version 11"),
    (LATEST, np.zeros(2, np.float32), {"direction": "LEFT"}, dsl.DTypeError,
     r"^BitShift: input 'X' has type float\[2\], not allowed at version 28"),
])
def test_bitshift_errors_name_op_and_value(opset, x, kwargs, error, match):
    with pytest.raises(error, match=match):
        dsl.bit_shift(x, x, opset=opset, **kwargs)


def test_bitshift_without_direction_from_onnx_style_call_is_an_error():
    with pytest.raises(dsl.InputError, match=r"^BitShift: missing required attribute 'direction'"):
        dsl.eager.call("BitShift", np.zeros(2, np.uint8), None, Y=np.zeros(2, np.uint8))


# ---- BitwiseAnd / Or / Xor / Not ------------------------------------------------------------------
BITWISE_CASES = [(op, dt) for op in [*BITWISE, "BitwiseNot"] for dt in allowed_types(op, 18)]


@pytest.mark.parametrize("op, dt", BITWISE_CASES, ids=[f"{o}-{d}" for o, d in BITWISE_CASES])
def test_bitwise_eager_every_type(op, dt):
    a, b = int_pairs(dt)
    if op == "BitwiseNot":
        got, want = dsl.bitwise_not(a), [wrap(~int(x), dt) for x in a]
    else:
        fn, py = BITWISE[op]
        got, want = fn(a, b), [wrap(py(int(x), int(y)), dt) for x, y in zip(a, b)]
    assert_same(got, np.array(want, dtype=object).astype(dt.np_dtype))


def test_bitwise_broadcasts_and_rejects_other_types():
    a = np.array([[0x0F], [0xF0]], np.uint8)
    assert dsl.bitwise_and(a, np.array([0xFF, 0x3C], np.uint8)).tolist() == [[0x0F, 0x0C], [0xF0, 0x30]]
    with pytest.raises(dsl.DTypeError, match=r"^BitwiseOr: input 'A' has type bool\[2\], not allowed at version 18"):
        dsl.bitwise_or(np.zeros(2, np.bool_), np.zeros(2, np.bool_))
    with pytest.raises(dsl.DTypeError, match=r"^BitwiseNot: input 'X' has type float\[2\], not allowed"):
        dsl.bitwise_not(np.zeros(2, np.float32))
    with pytest.raises(dsl.UnsupportedError, match=r"^BitwiseXor: not defined at opset 17; first version is 18"):
        dsl.bitwise_xor(a, a, opset=17)


# ---- Xor ------------------------------------------------------------------------------------------
def test_xor_truth_table_and_broadcast():
    a, b = np.array([[False], [True]]), np.array([False, True])
    assert dsl.xor(a, b).tolist() == [[False, True], [True, False]]
    with pytest.raises(dsl.DTypeError, match=r"^Xor: input 'A' has type int8\[2\], not allowed at version 7"):
        dsl.xor(np.zeros(2, np.int8), np.zeros(2, np.int8))


def test_xor_legacy_broadcast_at_version_1():
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 2, (2, 3, 4)).astype(bool), rng.integers(0, 2, 3).astype(bool)
    got = dsl.eager.call("Xor", a, 1, B=b, broadcast=1, axis=1)
    np.testing.assert_array_equal(got, a != b[None, :, None])
    with pytest.raises(dsl.ShapeError, match=r"^Xor: shapes \[2, 3, 4\] and \[3\] differ and broadcast=0"):
        dsl.eager.call("Xor", a, 1, B=b)


# ---- jit vs eager ---------------------------------------------------------------------------------
def _select(sel, outs):
    """Row k of the result is outs[k]: one fused kernel checks every op (one compile per dtype)."""
    result = outs[-1]
    for index in range(len(outs) - 2, -1, -1):
        result = dsl.where(dsl.equal(sel, index), outs[index], result)
    return result


def read_through(value: np.ndarray, path) -> np.ndarray:
    """``value`` as a kernel leaf reads it: its View moved by each step of the leaf's path."""
    view = View.contiguous(value.shape)
    for _, transform in path:
        view = transform(view)
    flat = np.ascontiguousarray(value).reshape(-1)
    strides = [k * flat.itemsize for k in view.strides]
    return np.ndarray(view.shape, flat.dtype, flat, view.offset * flat.itemsize, strides)


def assert_kernel_is_its_ir(kernel, got: np.ndarray, *args) -> None:
    """The one kernel's IR evaluated by the kernel-IR interpreter (dsl/kir/interp.py) on the
    kernel's own inputs gives what the compiled kernel gave, bit for bit."""
    executable = kernel.executable(*args)
    (step,) = [s for s in executable.steps if isinstance(s, KernelStep)]
    env = {**executable.constants, **dict(zip(executable.input_names, args))}
    leaves = {i: read_through(np.asarray(env[leaf.value.name]), leaf.path)
              for i, leaf in enumerate(step.group.leaves)}
    (want,) = interp.evaluate(step.group.outputs, leaves)
    got_domain = interp.domain_values(got, step.group.sinks[0].type.dtype)
    want = np.broadcast_to(want, got_domain.shape)
    assert got_domain.dtype == want.dtype
    np.testing.assert_array_equal(got_domain, want)
    if got_domain.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got_domain), np.signbit(want))


INTEGER_OPS = [lambda a, b, s: dsl.mod(a, b), lambda a, b, s: dsl.mod(a, b, fmod=1),
               lambda a, b, s: dsl.bit_shift(a, s, direction="LEFT"),
               lambda a, b, s: dsl.bit_shift(a, s, direction="RIGHT"),
               lambda a, b, s: dsl.bitwise_and(a, b), lambda a, b, s: dsl.bitwise_or(a, b),
               lambda a, b, s: dsl.bitwise_xor(a, b), lambda a, b, s: dsl.bitwise_not(a)]


@pytest.mark.parametrize("name", [t.onnx_name for t in allowed_types("BitShift", LATEST)])
def test_integer_ops_jit_match_eager(name):
    """Division by 0 and minimum mod -1 (a hardware trap) and shifts by >= the width run in the kernel."""
    dt = dtypes.dtype(name)
    a, b = int_pairs(dt)
    _, s = int_pairs(dt, shifts=True)
    s = s[:a.size] if s.size >= a.size else np.resize(s, a.size)
    sel = np.arange(len(INTEGER_OPS)).reshape(-1, 1)
    kernel = dsl.jit(lambda sel, a, b, s: _select(sel, [op(a, b, s) for op in INTEGER_OPS]))
    got = kernel(sel, a, b, s)
    assert kernel.executable(sel, a, b, s).kernel_count == 1
    assert_kernel_is_its_ir(kernel, got, sel, a, b, s)
    for row, op in enumerate(INTEGER_OPS):
        assert_same(got[row], op(a, b, s))


@pytest.mark.parametrize("name", [t.onnx_name for t in allowed_types("Mod", LATEST) if t.kind == "float"])
def test_float_mod_jit_matches_eager(name):
    dt = dtypes.dtype(name)
    a, b = float_pairs(dt)
    sel = np.arange(2).reshape(-1, 1)
    kernel = dsl.jit(lambda sel, a, b: _select(sel, [dsl.mod(a, b), dsl.mod(a, b, fmod=1)]))
    got = kernel(sel, a, b)
    assert kernel.executable(sel, a, b).kernel_count == 1
    assert_kernel_is_its_ir(kernel, got, sel, a, b)
    assert_bits(got[0], dsl.mod(a, b))
    assert_bits(got[1], dsl.mod(a, b, fmod=1))


def test_xor_jit_legacy_broadcast_at_opset_6():
    kernel = dsl.jit(lambda a, b: dsl.eager.call("Xor", a, None, B=b, broadcast=1, axis=0), opset=6)
    a = np.array([[True, False, True], [False, False, True]])
    b = np.array([True, False])
    np.testing.assert_array_equal(kernel(a, b), a != b[:, None])


# ---- Python operators and numpy ufuncs on traced values -------------------------------------------
def test_integer_operators_in_jit_follow_numpy():
    x = np.array([-7, 7, -128, 5, 127, -1, 3], np.int8)
    y = np.array([3, -3, -1, 0, 2, 9, -2], np.int8)

    def body(x, y):
        return (x % y, 7 % y, x & y, x | 3, 5 ^ x, ~x, x << y, x >> y, 1 << y,
                np.remainder(x, y), np.fmod(x, y), np.bitwise_and(x, y), np.invert(x), np.right_shift(x, y))
    with np.errstate(all="ignore"):
        want = (np.remainder(x, y), np.remainder(np.int8(7), y), x & y, x | 3, 5 ^ x, ~x, np.left_shift(x, y),
                np.right_shift(x, y), np.left_shift(np.int8(1), y), np.remainder(x, y), np.fmod(x, y), x & y, ~x,
                np.right_shift(x, y))
    for got, expected in zip(dsl.jit(body)(x, y), want):
        assert_same(got, np.asarray(expected, np.int8))


def test_bool_operators_stay_logical():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    got = dsl.jit(lambda a, b: (a & b, a | b, a ^ b, ~a, np.bitwise_xor(a, b), np.logical_xor(a, b)))(a, b)
    for out, expected in zip(got, (a & b, a | b, a ^ b, ~a, a ^ b, a ^ b)):
        assert_same(out, expected)


def test_float_remainder_operator():
    x = np.array([-7.5, 7.5, -0.0, 1.0], np.float32)
    y = np.array([2.0, -2.0, 3.0, -np.inf], np.float32)
    assert_bits(dsl.jit(lambda x, y: x % y)(x, y), np.remainder(x, y))  # opset 28: numpy's float %
    with pytest.raises(dsl.DTypeError, match=r"^Mod .*fmod=0 \(Python's %\) needs an integer type at version 13"):
        dsl.jit(lambda x, y: x % y, opset=27)(x, y)
    assert_bits(dsl.jit(lambda x, y: dsl.mod(x, y, fmod=1), opset=13)(x, y), np.fmod(x, y))


def test_functions_are_exported():
    from dsl import functional
    for name in ("mod", "bit_shift", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "xor"):
        assert getattr(dsl, name) is getattr(functional, name) and name in dsl.__all__
