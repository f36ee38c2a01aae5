"""Tests for dsl/ops/reduce.py: ReduceSum/Max/Mean and Softmax at every version and type, eager and fused jit."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx.defs
import pytest

import dsl
from dsl import dtypes
from dsl.passes.fuse import ReduceStep
from dsl.ops import registry

from dsl_test_helpers import allowed_types, onnx_versions, schemas_with_onnx

REDUCE = {"ReduceSum": dsl.reduce_sum, "ReduceMax": dsl.reduce_max, "ReduceMean": dsl.reduce_mean,
          "ReduceMin": dsl.reduce_min}


@pytest.mark.parametrize("op", [*REDUCE, "Softmax"])
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        assert {t.onnx_name for t in schema.types} == {t.onnx_name for t in allowed_types(op, schema.version)}
        assert [(i.name, i.optional) for i in schema.inputs] == \
            [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs]
        if len(schema.inputs) > 1:
            assert {t.onnx_name for t in schema.inputs[1].types} == {"int64"}
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        for attr in schema.attrs:
            default = spec.attributes[attr.name].default_value
            assert attr.default == (default.i if default.type == 2 else None), (op, attr.name)


# ---- independent formulas ---------------------------------------------------------------------------
def sample(dt, shape, seed, finite=False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    count = math.prod(shape)
    if dt.kind == "bool":
        return rng.integers(0, 2, count).astype(np.bool_).reshape(shape)
    if dt.kind == "float":
        values = rng.standard_normal(count) * 3
        if not finite and count > 3:
            values[:3] = [np.nan, np.inf, -np.inf]
            rng.shuffle(values)
        return values.astype(dt.np_dtype).reshape(shape)
    info = ml_dtypes.iinfo(dt.np_dtype)
    storage = np.int64 if info.min < 0 else np.uint64
    return rng.integers(info.min, info.max, count, endpoint=True, dtype=storage).astype(dt.np_dtype).reshape(shape)


def per_row(x: np.ndarray, axes: tuple, keepdims: bool, fn, out_dtype) -> np.ndarray:
    """Apply ``fn`` to the list of values of every reduced slice (exact Python numbers)."""
    kept = [k for k in range(x.ndim) if k not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape(math.prod(x.shape[k] for k in kept),
                                                      math.prod(x.shape[k] for k in axes))
    as_python = (lambda r: r.tolist()) if x.dtype.kind in "iub" else (lambda r: r.astype(np.float64).tolist())
    values = [fn(as_python(row)) for row in rows]
    shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape) if keepdims or k not in axes)
    exact = np.float64 if np.dtype(out_dtype).kind in "fV" else object
    with np.errstate(over="ignore"):
        return np.array(values, dtype=exact).reshape(shape).astype(out_dtype)


def _wrap(value: int, dt) -> int:
    modulus = 1 << dt.bits
    value %= modulus
    return value - modulus if dt.kind == "int" and value >= modulus >> 1 else value


def _float_result(value: float, dt) -> float:
    """A float64 result rounded to the compute domain (float32 unless double), as numpy would."""
    return value if dt.onnx_name == "double" else float(np.float32(value))


def _row_fn(op: str, dt):
    if op == "ReduceSum":
        return (lambda r: _wrap(sum(r), dt)) if dt.kind != "float" else lambda r: _float_result(math.fsum(r), dt)
    if op == "ReduceMean":
        if dt.kind != "float":
            return lambda r: 0 if not r else (abs(sum(r)) // len(r)) * (1 if sum(r) >= 0 else -1)
        return lambda r: math.nan if not r else _float_result(math.fsum(r) / len(r), dt)
    if op == "ReduceMin":
        if dt.kind == "bool":
            return lambda r: all(r)
        highest = math.inf if dt.kind == "float" else int(ml_dtypes.iinfo(dt.np_dtype).max)
        return lambda r: math.nan if any(v != v for v in r) else min(r, default=highest)
    if dt.kind == "bool":
        return lambda r: any(r)
    lowest = -math.inf if dt.kind == "float" else int(ml_dtypes.iinfo(dt.np_dtype).min)
    return lambda r: math.nan if any(v != v for v in r) else max(r, default=lowest)


def assert_close(got: np.ndarray, want: np.ndarray, ulps: int) -> None:
    """Equal for integers; floats within ``ulps`` of the output type, except that double results
    (numpy's pairwise sums vs exact ones, where cancellation magnifies ulps) are compared to 1e-12."""
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
        return
    if want.dtype == np.float64 and ulps:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        return
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
    width = {2: np.int16, 4: np.int32, 8: np.int64}[want.dtype.itemsize]

    def ordered(v):
        raw = v.view(width).astype(np.int64)
        return np.where(raw < 0, -(raw & ((1 << (8 * v.dtype.itemsize - 1)) - 1)), raw)
    distance = np.where(np.isnan(w64), 0, np.abs(ordered(got) - ordered(want)))
    assert distance.max(initial=0) <= ulps, (got, want)


# ---- reductions, eager ---------------------------------------------------------------------------------
REDUCE_CASES = [(op, v, dt) for op in REDUCE for v in onnx_versions(op) for dt in allowed_types(op, v)]
# (input shape, axes, keepdims, normalized axes)
AXES_CASES = [((2, 3, 4), [1], True, (1,)), ((2, 3, 4), [-1, 0], False, (0, 2)), ((2, 3, 4), None, True, (0, 1, 2)),
              ((2, 3, 4), None, False, (0, 1, 2)), ((2, 3, 4), [], False, (0, 1, 2)), ((), None, False, ()),
              ((2, 0, 3), [1], True, (1,)), ((2, 0, 3), [0, 2], False, (0, 2)), ((0,), None, False, (0,))]


@pytest.mark.parametrize("op, version, dt", REDUCE_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in REDUCE_CASES])
def test_reduction_eager_every_version_and_type(op, version, dt):
    for seed, (shape, axes, keepdims, normalized) in enumerate(AXES_CASES):
        x = sample(dt, shape, seed, finite=op not in ("ReduceMax", "ReduceMin"))
        got = REDUCE[op](x, axes, keepdims=keepdims, opset=version)
        want = per_row(x, normalized, keepdims, _row_fn(op, dt), dt.np_dtype)
        assert_close(got, want, 0 if op in ("ReduceMax", "ReduceMin") else 1)


@pytest.mark.parametrize("op", list(REDUCE))
def test_noop_with_empty_axes_is_the_identity_from_the_axes_input_versions(op):
    x = sample(dtypes.dtype("float"), (2, 3), 1)
    first_input_version = next(v for v in onnx_versions(op) if len(registry.get(op).schema(v).inputs) == 2)
    for axes in (None, [], np.zeros(0, np.int64)):
        out = REDUCE[op](x, axes, keepdims=False, noop_with_empty_axes=True, opset=first_input_version)
        np.testing.assert_array_equal(out, x)
    with pytest.raises(dsl.InputError, match=rf"^{op}: argument noop_with_empty_axes=1 does not exist at opset "
                                             rf"version {registry.get(op).schema(first_input_version - 1).version}"):
        REDUCE[op](x, noop_with_empty_axes=True, opset=first_input_version - 1)


def test_empty_set_reductions_follow_the_spec():
    empty = np.zeros((2, 0), np.float32)
    assert dsl.reduce_sum(empty, [1], keepdims=False).tolist() == [0.0, 0.0]
    assert dsl.reduce_max(empty, [1], keepdims=False).tolist() == [-np.inf, -np.inf]
    assert np.isnan(dsl.reduce_mean(empty, [1], keepdims=False)).all()
    assert dsl.reduce_max(np.zeros((0,), np.uint8), keepdims=False, opset=18).tolist() == 0
    assert dsl.reduce_max(np.zeros((0,), np.int32), keepdims=False).tolist() == -2 ** 31
    assert dsl.reduce_max(np.zeros((0,), np.bool_), keepdims=False).tolist() is False


def test_integer_sums_wrap_and_means_are_exact_and_truncate():
    x = np.array([[2 ** 31 - 1, 2 ** 31 - 1], [-7, 2]], np.int32)
    assert dsl.reduce_sum(x, [1], keepdims=False).tolist() == [-2, -5]
    assert dsl.reduce_mean(x, [1], keepdims=False).tolist() == [2 ** 31 - 1, -2]
    big = np.array([2 ** 62 + 1, 2 ** 62 + 1], np.int64)
    assert dsl.reduce_mean(big, keepdims=False).tolist() == 2 ** 62 + 1


def test_float16_sums_accumulate_beyond_float16():
    x = np.full(4096, 1.0, np.float16)  # float16 accumulation would stop at 2048
    assert dsl.reduce_sum(x).tolist() == [4096.0]
    assert dsl.reduce_mean(np.array([60000, 60000], np.float16)).tolist() == [60000.0]


@pytest.mark.parametrize("call, error, match", [
    (lambda: dsl.reduce_sum(np.zeros((2, 3)), [2]), dsl.ShapeError,
     r"^ReduceSum: axis 2 out of range \[-2, 1\] for input rank 2"),
    (lambda: dsl.reduce_max(np.zeros((2, 3)), [0, -2]), dsl.ShapeError,
     r"^ReduceMax: axes \[0, -2\] repeat axis 0 \(after normalizing negatives by \+2\)"),
    (lambda: dsl.reduce_mean(np.zeros((2, 3)), [-3], opset=11), dsl.ShapeError,
     r"^ReduceMean: axis -3 out of range \[-2, 1\] for input rank 2"),
    (lambda: dsl.reduce_sum(np.zeros((2, 3)), np.array([[0]], np.int64)), dsl.ShapeError,
     r"^ReduceSum: axes must be a 1-D int64 tensor, got shape \[1, 1\]"),
    (lambda: dsl.reduce_sum(np.zeros((2, 3)), np.array([0], np.int32)), dsl.DTypeError,
     r"^ReduceSum: input 'axes' has type int32\[1\], not allowed at version 13"),
    (lambda: dsl.reduce_max(np.zeros(2, np.bool_), opset=18), dsl.DTypeError,
     r"^ReduceMax: input 'data' has type bool\[2\], not allowed at version 18"),
    (lambda: dsl.reduce_sum(np.zeros(2, np.int8)), dsl.DTypeError,
     r"^ReduceSum: input 'data' has type int8\[2\], not allowed at version 13"),
    (lambda: dsl.reduce_sum(np.zeros(2), [0], keepdims=2.5), dsl.InputError,
     r"^ReduceSum: attribute 'keepdims' = 2.5; expected an int64"),
])
def test_reduction_errors_name_op_and_value(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- Softmax, eager ------------------------------------------------------------------------------------
def _softmax_formula(x: np.ndarray, axis: int, coerce: bool) -> np.ndarray:
    """Row by row in float64 with math.exp; versions 1 and 11 flatten the axes from ``axis`` on."""
    rank = x.ndim
    axis = axis + rank if axis < 0 else axis
    axes = tuple(range(axis, rank)) if coerce else (axis,)
    kept = [k for k in range(rank) if k not in axes]
    moved = np.transpose(x.astype(np.float64), kept + list(axes))
    rows = moved.reshape(-1, math.prod(x.shape[k] for k in axes))
    out = []
    for row in rows.tolist():  # finite values
        shifted = [math.exp(v - max(row)) for v in row]
        out.append([s / math.fsum(shifted) for s in shifted])
    result = np.array(out).reshape(moved.shape)
    return np.transpose(result, np.argsort(kept + list(axes)))


SOFTMAX_CASES = [(v, dt) for v in onnx_versions("Softmax") for dt in allowed_types("Softmax", v)]


@pytest.mark.parametrize("version, dt", SOFTMAX_CASES, ids=[f"{v}-{d}" for v, d in SOFTMAX_CASES])
def test_softmax_eager_every_version_and_type(version, dt):
    x = sample(dt, (2, 3, 4), 2, finite=True)
    for axis in (None, 0, 1, -1, -2):
        got = dsl.softmax(x, axis, opset=version)
        default = 1 if version < 13 else -1
        expected = _softmax_formula(x, default if axis is None else axis, coerce=version < 13)
        with np.errstate(over="ignore"):
            assert_close(got, expected.astype(np.float32).astype(dt.np_dtype) if dt.onnx_name != "double"
                         else expected, 1)


def test_softmax_rows_with_nan_or_infinities_are_nan():
    x = np.array([[1.0, np.nan], [np.inf, 0.0], [-np.inf, -np.inf], [-np.inf, 0.0]], np.float32)
    out = dsl.softmax(x)
    assert np.isnan(out[:3]).all() and out[3].tolist() == [0.0, 1.0]


def test_softmax_of_an_empty_tensor_is_empty():
    assert dsl.softmax(np.zeros((2, 0), np.float32)).shape == (2, 0)


@pytest.mark.parametrize("call, error, match", [
    (lambda: dsl.softmax(np.zeros((2, 3), np.float32), 2), dsl.ShapeError,
     r"^Softmax: axis 2 out of range \[-2, 1\] for input rank 2"),
    (lambda: dsl.softmax(np.zeros((), np.float32)), dsl.ShapeError,
     r"^Softmax: axis -1 out of range \[0, -1\] for input rank 0"),
    (lambda: dsl.softmax(np.zeros(3, np.int32)), dsl.DTypeError,
     r"^Softmax: input 'input' has type int32\[3\], not allowed at version 13"),
    (lambda: dsl.softmax(np.zeros(3, ml_dtypes.bfloat16), opset=12), dsl.DTypeError,
     r"^Softmax: input 'input' has type bfloat16\[3\], not allowed at version 11"),
])
def test_softmax_errors_name_op_and_value(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- LogSoftmax ------------------------------------------------------------------------------------------
LOG_SOFTMAX_CASES = [(v, dt) for v in onnx_versions("LogSoftmax") for dt in allowed_types("LogSoftmax", v)]


@pytest.mark.parametrize("version, dt", LOG_SOFTMAX_CASES, ids=[f"{v}-{d}" for v, d in LOG_SOFTMAX_CASES])
def test_log_softmax_every_version_and_type_eager_and_jit(version, dt):
    x = sample(dt, (2, 3, 4), 5, finite=True)
    for axis in (None, 0, 1, -1, -2):
        default = 1 if version < 13 else -1
        expected = np.log(_softmax_formula(x, default if axis is None else axis, coerce=version < 13))
        want = expected.astype(np.float32).astype(dt.np_dtype) if dt.onnx_name != "double" else expected
        got = dsl.log_softmax(x, axis, opset=version)
        with np.errstate(over="ignore"):
            assert_close(got, want, 1)
        jit = dsl.jit(lambda a, axis=axis: dsl.log_softmax(a, axis), math="exact", opset=version)
        exact_tol = 1e-14 if dt.onnx_name == "double" else 0  # (a double row sum reassociates: last bits)
        assert dsl.compare(jit, x, rtol=exact_tol, atol=exact_tol).ok  # narrower types: the reference's bits
        fast = dsl.jit(lambda a, axis=axis: dsl.log_softmax(a, axis), opset=version)
        assert dsl.compare(fast, x, rtol=2e-6 if dt.onnx_name in ("float", "double") else 1e-2, atol=1e-6).ok


def test_log_softmax_stays_finite_where_softmax_underflows():
    x = np.array([[0.0, -200.0, -1000.0], [5.0, 5.0, 5.0]], np.float32)
    for fn in (dsl.log_softmax, dsl.jit(dsl.log_softmax)):
        out = fn(x)
        assert np.isfinite(out).all() and out[0].tolist() == [0.0, -200.0, -1000.0]
        np.testing.assert_allclose(out[1], np.full(3, -np.log(3.0)), rtol=1e-6)
    assert np.isneginf(np.log(dsl.softmax(x)))[0, 2]  # what the spelled-out form gives
    with pytest.raises(dsl.DTypeError, match=r"^LogSoftmax: input 'input' has type int32\[3\], not allowed"):
        dsl.log_softmax(np.zeros(3, np.int32))


# ---- jit: last-axis reductions fuse into Row kernels, other axes run the reference -------------------------
JIT_ROWS = [("float", ["ReduceSum", "ReduceMax", "ReduceMean", "Softmax", "ReduceMin"]),
            ("float16", ["ReduceSum", "Softmax"]), ("bfloat16", ["ReduceMax", "ReduceMean", "ReduceMin"]),
            ("double", ["ReduceMean", "Softmax"]), ("int32", ["ReduceSum", "ReduceMean", "ReduceMin"]),
            ("int8", ["ReduceMax"]), ("uint64", ["ReduceSum"]), ("uint32", ["ReduceMin"])]
FUNCTIONS = {**REDUCE, "Softmax": lambda x, axes, keepdims: dsl.softmax(x)}


@pytest.mark.parametrize("name, ops", JIT_ROWS)
def test_last_axis_reductions_fuse_with_their_producer(name, ops):
    dt = dtypes.dtype(name)
    x = sample(dt, (3, 5, 7), 4, finite=True)
    if dt.kind == "int":  # keep int32 sums inside int32: the mean's exactness is tested eagerly
        x = (x // 4096).astype(x.dtype) if dt.bits > 8 else x
    functions = [FUNCTIONS[op] for op in ops]
    kernel = dsl.jit(lambda x: tuple(fn(dsl.abs(x) if dt.kind != "uint" else x, [-1], keepdims=k % 2 == 0)
                                     for k, fn in enumerate(functions)), math="exact")
    outs = kernel(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    assert kernel.executable(x).kernel_count == len(ops)  # each a Row kernel with the Abs fused in
    for k, (op, got) in enumerate(zip(ops, outs)):
        want = FUNCTIONS[op](dsl.abs(x) if dt.kind != "uint" else x, [-1], keepdims=k % 2 == 0)
        assert_close(got, want, 0 if op in ("ReduceMax", "ReduceMin") or dt.kind != "float" else 2)


def test_other_axes_fuse_too_and_empty_rows_run_the_reference_in_jit():
    kernel = dsl.jit(lambda x: (dsl.reduce_sum(x, [0]), dsl.softmax(x, 0), dsl.reduce_max(x, [-1]),
                                dsl.reduce_mean(x, None, noop_with_empty_axes=True)), opset=18, math="exact")
    x = sample(dtypes.dtype("float"), (4, 3), 5, finite=True)
    outs = kernel(x)
    # axis 0 (sum, softmax): the any-axis schedule; the last axis: a row kernel; the identity: a view
    steps = kernel.executable(x).steps
    assert kernel.executable(x).kernel_count == 3 and sum(isinstance(s, ReduceStep) for s in steps) == 2
    for got, want in zip(outs, (dsl.reduce_sum(x, [0]), dsl.softmax(x, 0), dsl.reduce_max(x, [-1]),
                                x)):
        assert_close(got, want, 0)
    empty = np.zeros((2, 0), np.float32)
    assert kernel(empty)[2].tolist() == [[-np.inf], [-np.inf]] and kernel.executable(empty).kernel_count == 0


def test_softmax_version_11_coerces_to_2d_in_jit():
    kernel = dsl.jit(lambda x: (dsl.softmax(x), dsl.softmax(x, -1)), opset=11, math="exact")
    x = sample(dtypes.dtype("float"), (2, 3, 4), 6, finite=True)
    first, last = kernel(x)
    # axis 2 of rank 3 is the last axis: a Row kernel; axis 1 coerces to axes (1, 2): the any-axis schedule
    assert kernel.executable(x).kernel_count == 2
    assert_close(first, dsl.softmax(x, opset=11), 0)
    assert_close(last, dsl.softmax(x, -1, opset=11), 1)
