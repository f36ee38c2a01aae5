"""Tests for dsl/ops/scan.py: CumSum, CumProd, TopK, Trilu, EyeLike, Hardmax and BitCast at every
version and type, eager against independent per-lane Python formulas, jit against eager, errors
and edge cases."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import pytest

import dsl
from dsl.functional import bitcast, cumprod, cumsum, eye_like, hardmax, topk, trilu
from dsl.ops import registry
from dsl.ops.registry import REQUIRED
from dsl.values import runtime_type

from dsl_test_helpers import allowed_types, make_array, onnx_allowed, onnx_versions, schemas_with_onnx, snapshot

OPS = ["CumSum", "CumProd", "TopK", "Trilu", "EyeLike", "Hardmax", "BitCast"]


# ---- schemas ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_schemas_match_onnx(op):
    for schema, spec in schemas_with_onnx(op):
        params = onnx_allowed(op, schema.version)
        first = "T1" if "T1" in params else "T"
        assert {t.onnx_name for t in schema.types} == params[first], (op, schema.version)
        assert [(i.name, i.optional) for i in schema.inputs] == \
            [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs]
        for mine, formal in zip(schema.inputs, spec.inputs):
            want = params.get(formal.type_str, {formal.type_str[len("tensor("):-1]})
            assert {t.onnx_name for t in (mine.types or schema.types)} == want, (op, mine.name)
        assert {a.name for a in schema.attrs} == set(spec.attributes)
        for attr in schema.attrs:
            onnx_attr = spec.attributes[attr.name]
            default = onnx_attr.default_value
            expected = REQUIRED if onnx_attr.required else (default.i if default.type == 2 else None)
            assert attr.default == expected, (op, attr.name)


def test_output_type_sets_match_onnx():
    eye = registry.get("EyeLike")
    for version in onnx_versions("EyeLike"):
        allowed = {t.onnx_name for t in eye.schema(version).types}
        assert allowed == onnx_allowed("EyeLike", version)["T2"]
    from dsl.ops.scan import _BITCAST_TYPES
    assert {t.onnx_name for t in _BITCAST_TYPES} == onnx_allowed("BitCast", 26)["T2"]


# ---- independent formulas ------------------------------------------------------------------------------
def _lanes(x: np.ndarray, axis: int):
    """(moved array, list of 1-D lanes along ``axis`` as Python lists)."""
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(-1, moved.shape[-1] if moved.ndim else 0)
    as_python = (lambda r: r.tolist()) if x.dtype.kind in "iubO" else (lambda r: r.astype(np.float64).tolist())
    return moved, [as_python(row) for row in flat]


def _from_lanes(lanes: list, moved_shape: tuple, axis: int, dtype) -> np.ndarray:
    exact = np.float64 if np.dtype(dtype).kind in "fV" else object
    with np.errstate(all="ignore"):
        flat = np.array(lanes, dtype=exact).reshape(moved_shape).astype(dtype)
    return np.moveaxis(flat, -1, axis)


def _wrap(value: int, dt) -> int:
    modulus = 1 << dt.bits
    value %= modulus
    return value - modulus if dt.kind == "int" and value >= modulus >> 1 else value


def _round(value: float, dt) -> float:
    with np.errstate(all="ignore"):
        return float(np.array(value, np.float64).astype(dt.np_dtype).astype(np.float64))


def _scan_lane(row: list, dt, product: bool, exclusive: bool, reverse: bool) -> list:
    values = row[::-1] if reverse else row
    acc, out = (1 if product else 0), []
    for v in values:
        if exclusive:
            out.append(acc)
        if dt.kind == "float":
            acc = _round(acc * v if product else acc + v, dt)
        else:
            acc = _wrap(acc * v if product else acc + v, dt)
        if not exclusive:
            out.append(acc)
    return out[::-1] if reverse else out


def _sample(dt, shape, seed):
    rng = np.random.default_rng(seed)
    if dt.kind == "float":
        return (rng.standard_normal(shape) * 2).astype(dt.np_dtype)
    if dt.kind == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    info = ml_dtypes.iinfo(dt.np_dtype)
    return rng.integers(max(int(info.min), -9), min(int(info.max), 9), shape, endpoint=True).astype(dt.np_dtype)


SCAN = {"CumSum": cumsum, "CumProd": cumprod}
SCAN_CASES = [(op, v, dt) for op in SCAN for v in onnx_versions(op) for dt in allowed_types(op, v)]


@pytest.mark.parametrize("op, version, dt", SCAN_CASES, ids=[f"{o}-{v}-{d}" for o, v, d in SCAN_CASES])
def test_scan_every_version_and_type(op, version, dt):
    x = _sample(dt, (3, 4, 5), version)
    for axis, axis_type in ((0, np.int32), (-1, np.int64), (1, np.int64)):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                got = SCAN[op](x, np.array(axis, axis_type), exclusive=exclusive, reverse=reverse, opset=version)
                moved, lanes = _lanes(x, axis)
                want = _from_lanes([_scan_lane(r, dt, op == "CumProd", exclusive, reverse) for r in lanes],
                                   moved.shape, axis, dt.np_dtype)
                assert got.dtype == x.dtype and got.shape == x.shape
                np.testing.assert_array_equal(got.astype(np.float64) if dt.kind == "float" else got,
                                              want.astype(np.float64) if dt.kind == "float" else want,
                                              err_msg=f"{op} axis={axis} exclusive={exclusive} reverse={reverse}")


def test_scan_spec_examples_and_wrapping():
    x = np.array([1, 2, 3], np.int64)
    assert [cumsum(x, 0, exclusive=e, reverse=r).tolist() for e in (0, 1) for r in (0, 1)] == \
        [[1, 3, 6], [6, 5, 3], [0, 1, 3], [5, 3, 0]]
    assert [cumprod(x, 0, exclusive=e, reverse=r).tolist() for e in (0, 1) for r in (0, 1)] == \
        [[1, 2, 6], [6, 6, 3], [1, 1, 2], [6, 3, 1]]
    assert cumsum(np.array([2 ** 31 - 1, 1], np.int32), 0).tolist() == [2 ** 31 - 1, -2 ** 31]
    assert cumsum(np.array([2 ** 64 - 1, 2], np.uint64), 0).tolist() == [2 ** 64 - 1, 1]
    assert cumprod(np.array([65536, 65536], np.int32), 0).tolist() == [65536, 0]
    # float16 partials are rounded to float16 at every step: 2048 + 1 stays 2048
    assert cumsum(np.array([2048, 1, 1], np.float16), 0).tolist() == [2048, 2048, 2048]
    empty = np.zeros((2, 0), np.float32)
    assert cumsum(empty, 1, exclusive=1).shape == (2, 0) and cumprod(empty, -1, reverse=1).shape == (2, 0)


# ---- TopK -----------------------------------------------------------------------------------------------
def _topk_lane(row: list, k: int, largest: bool) -> list:
    def key(i):
        v = row[i]
        nan = isinstance(v, float) and math.isnan(v)
        if largest:
            return (not nan, 0 if nan else -v, i)
        return (nan, 0 if nan else v, i)
    return sorted(range(len(row)), key=key)[:k]


TOPK_CASES = [(v, dt) for v in onnx_versions("TopK") for dt in allowed_types("TopK", v)]


@pytest.mark.parametrize("version, dt", TOPK_CASES, ids=[f"TopK-{v}-{d}" for v, d in TOPK_CASES])
def test_topk_every_version_and_type(version, dt):
    x = _sample(dt, (3, 4, 6), version)  # small integers: many ties
    if dt.kind == "float":
        x.flat[[0, 5, 7, 30]] = [np.nan, 0.0, -0.0, np.nan]
        x.flat[10:13] = x.flat[9]
    for axis, k in ((-1, 3), (0, 3), (1, 1), (2, 6)):
        for largest in ((1, 0) if version >= 11 else (1,)):
            kwargs = {"largest": largest} if version >= 11 else {}
            values, indices = topk(x, k, axis=axis, opset=version, **kwargs)
            moved, lanes = _lanes(x, axis)
            want = _from_lanes([_topk_lane(r, k, bool(largest)) for r in lanes], moved.shape[:-1] + (k,), axis,
                               np.int64)
            assert indices.dtype == np.int64 and values.dtype == x.dtype
            np.testing.assert_array_equal(indices, want, err_msg=f"axis={axis} k={k} largest={largest}")
            assert snapshot(values) == snapshot(np.take_along_axis(x, want, axis))


def test_topk_ties_nan_and_unsorted():
    x = np.array([1.0, np.nan, 3.0, 3.0, np.nan, -0.0, 0.0], np.float32)
    assert topk(x, 4)[1].tolist() == [1, 4, 2, 3]
    assert topk(x, 4, largest=0)[1].tolist() == [5, 6, 0, 2]  # -0 == +0: the lower index first
    assert topk(x, 7, largest=0)[1].tolist() == [5, 6, 0, 2, 3, 1, 4]
    assert topk(x, 3, sorted=0)[1].tolist() == [1, 4, 2]  # (undefined order: the sorted one)
    same = np.array([[0, 0, 0, 0], [1, 1, 1, 1]], np.int64)
    assert topk(same, 2)[1].tolist() == [[0, 1], [0, 1]] and topk(same, 2, largest=0)[1].tolist() == [[0, 1], [0, 1]]
    big = np.array([2 ** 64 - 1, 0, 2 ** 63], np.uint64)
    assert topk(big, 2)[0].tolist() == [2 ** 64 - 1, 2 ** 63]


# ---- Trilu ---------------------------------------------------------------------------------------------
TRILU_TYPES = allowed_types("Trilu", 14)


def _zero(dt):
    return "" if dt.kind == "string" else np.zeros((), dt.np_dtype)


@pytest.mark.parametrize("dt", TRILU_TYPES, ids=[t.onnx_name for t in TRILU_TYPES])
def test_trilu_every_type(dt):
    x = make_array(dt, (2, 3, 4), 3)
    for k in (None, 0, 1, -1, 3, -2, 7, -9, 2 ** 63 - 1, -2 ** 63):
        for upper in (0, 1):
            got = trilu(x, k, upper=upper)
            want = x.copy()
            kk = 0 if k is None else k
            for i in range(3):
                for j in range(4):
                    if not ((j - i >= kk) if upper else (j - i <= kk)):
                        want[:, i, j] = _zero(dt)
            assert got.dtype == x.dtype and snapshot(got) == snapshot(want), (k, upper)


def test_trilu_k_beyond_the_matrix_and_empty():
    x = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    assert trilu(x, 5).tolist() == [[0, 0, 0], [0, 0, 0]] and trilu(x, -5).tolist() == x.tolist()
    assert trilu(x, 5, upper=0).tolist() == x.tolist() and trilu(x, -5, upper=0).tolist() == [[0, 0, 0], [0, 0, 0]]
    assert trilu(np.zeros((3, 0, 5), np.float32), 1).shape == (3, 0, 5)


# ---- EyeLike ---------------------------------------------------------------------------------------------
EYE_CASES = [(v, dt) for v in onnx_versions("EyeLike") for dt in allowed_types("EyeLike", v, "T1")]


@pytest.mark.parametrize("version, dt", EYE_CASES, ids=[f"EyeLike-{v}-{d}" for v, d in EYE_CASES])
def test_eye_like_every_version_and_type(version, dt):
    x = make_array(dt, (3, 5), 1)
    for out_type in [None] + allowed_types("EyeLike", version, "T2"):
        for k in (0, 2, -1, 5, -3, 2 ** 63 - 1, -2 ** 63):
            got = eye_like(x, dtype=out_type, k=k, opset=version)
            want_type = (out_type or dt).np_dtype
            want = np.zeros((3, 5), want_type)
            for i in range(3):
                if 0 <= i + k < 5:
                    want[i, i + k] = 1
            assert got.dtype == want_type and snapshot(got) == snapshot(want), (out_type, k)


def test_eye_like_non_square_and_dtype_by_code():
    assert eye_like(np.zeros((2, 4), np.int32), dtype=1).tolist() == [[1.0, 0, 0, 0], [0, 1.0, 0, 0]]
    assert eye_like(np.zeros((4, 2), np.int32), k=-2).tolist() == [[0, 0], [0, 0], [1, 0], [0, 1]]
    assert eye_like(np.zeros((0, 3), np.float32)).shape == (0, 3)


# ---- Hardmax ---------------------------------------------------------------------------------------------
def _first_max(row: list) -> int:
    nans = [i for i, v in enumerate(row) if isinstance(v, float) and math.isnan(v)]
    return nans[0] if nans else max(range(len(row)), key=lambda i: (row[i], -i))


HARDMAX_CASES = [(v, dt) for v in onnx_versions("Hardmax") for dt in allowed_types("Hardmax", v)]


@pytest.mark.parametrize("version, dt", HARDMAX_CASES, ids=[f"Hardmax-{v}-{d}" for v, d in HARDMAX_CASES])
def test_hardmax_every_version_and_type(version, dt):
    x = np.round(_sample(dt, (3, 4, 5), version)).astype(dt.np_dtype)  # rounded: ties
    x.flat[7] = np.nan
    for axis in (0, 1, -1, 2):
        got = hardmax(x, axis, opset=version)
        a = axis % 3
        if version < 13:  # coerced to 2-D: every axis from `axis` on
            rows = x.reshape(int(np.prod(x.shape[:a])), -1).astype(np.float64)
            want = np.zeros(rows.shape)
            for r, row in enumerate(rows.tolist()):
                want[r, _first_max(row)] = 1
            want = want.reshape(x.shape)
        else:
            moved, lanes = _lanes(x, a)
            want = _from_lanes([[1.0 if i == _first_max(r) else 0.0 for i in range(len(r))] for r in lanes],
                               moved.shape, a, np.float64)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=f"axis={axis}")


def test_hardmax_default_axis_per_version():
    x = np.array([[[1, 2], [3, 0]]], np.float32)
    assert hardmax(x, opset=11).tolist() == [[[0, 0], [1, 0]]]  # over axes 1 and 2
    assert hardmax(x).tolist() == [[[0, 1], [1, 0]]]  # 13: the last axis
    assert hardmax(np.zeros((2, 0), np.float32)).shape == (2, 0)


# ---- BitCast ---------------------------------------------------------------------------------------------
BITCAST_TYPES = allowed_types("BitCast", 26, "T1")
BITCAST_PAIRS = [(a, b) for a in BITCAST_TYPES for b in BITCAST_TYPES if a.bits == b.bits]


@pytest.mark.parametrize("source, target", BITCAST_PAIRS, ids=[f"{a}-{b}" for a, b in BITCAST_PAIRS])
def test_bitcast_every_pair_of_equal_widths(source, target):
    x = make_array(source, (3, 4), 5)
    if target.kind == "bool":  # (only 0 / 1 bytes are bools)
        x = (np.arange(12).reshape(3, 4) % 2).astype(np.uint8).view(source.np_dtype)
    got = bitcast(x, target)
    raw = x.view(np.uint8) if source.packed else np.frombuffer(x.tobytes(), np.uint8)
    if source.packed:
        want = (raw & np.uint8((1 << source.bits) - 1)).view(target.np_dtype)
    else:
        want = np.frombuffer(raw.tobytes(), target.np_dtype).reshape(x.shape)
    assert got.dtype == target.np_dtype and snapshot(got) == snapshot(want)
    assert bitcast(got, source).tobytes() == x.tobytes()


def test_bitcast_reads_little_endian_bytes():
    big = np.array([1.0, -2.0], np.dtype(">f4"))
    assert bitcast(big, "int32").tolist() == np.array([1.0, -2.0], np.float32).view(np.int32).tolist()
    assert bitcast(np.array([True, False]), "uint8").tolist() == [1, 0]
    assert bitcast(np.array([-1, 7], ml_dtypes.int4), "uint4").tolist() == [15, 7]
    assert bitcast(np.float32(1.0), np.int32).tolist() == 1065353216


# ---- errors, immutability, jit, ONNX ---------------------------------------------------------------------
F32 = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("call, match", [
    (lambda: cumsum(F32, 2), r"CumSum: axis 2 out of range \[-2, 1\]"),
    (lambda: cumsum(F32, np.array([1])), r"CumSum: axis must be a 0-D tensor .*shape \[1\]"),
    (lambda: cumsum(np.float32(1), 0), "CumSum: x is a scalar"),
    (lambda: cumsum(F32, np.array(0, np.int16)), "CumSum: input 'axis'"),
    (lambda: cumsum(F32.astype(np.float16), 0, opset=11), "CumSum: input 'x' has type"),
    (lambda: cumsum(np.zeros(2, np.int8), 0), "CumSum: input 'x'"),
    (lambda: cumprod(F32, 0, opset=25), "CumProd: not defined at opset 25"),
    (lambda: topk(F32, 4), r"TopK: k = 4 is larger than axis 1's size 3"),
    (lambda: topk(F32, 0), r"TopK: k = 0; expected a positive"),
    (lambda: topk(F32, -1, opset=1), r"TopK: k = -1"),
    (lambda: topk(F32, np.array([1, 2])), r"TopK: K must be a 1-D tensor holding one value, got shape \[2\]"),
    (lambda: topk(F32, 1, axis=2), r"TopK: axis 2 out of range"),
    (lambda: topk(np.float32(1), 1), "TopK: X is a scalar"),
    (lambda: topk(np.zeros(3, np.int32), 1, opset=10), "TopK: input 'X' has type"),
    (lambda: topk(F32, 1, largest=0, opset=10), "TopK: argument largest=0 does not exist"),
    (lambda: trilu(np.zeros(3, np.float32)), r"Trilu: input has shape \[3\]; expected rank >= 2"),
    (lambda: trilu(F32, np.array([1])), r"Trilu: k must be a 0-D tensor"),
    (lambda: trilu(F32, np.array(1, np.int32)), "Trilu: input 'k'"),
    (lambda: trilu(F32, opset=13), "Trilu: not defined at opset 13"),
    (lambda: eye_like(np.zeros((2, 2, 2), np.float32)), r"EyeLike: input has shape \[2, 2, 2\]; expected rank 2"),
    (lambda: eye_like(F32, dtype="string"), "EyeLike: attribute 'dtype' is string"),
    (lambda: eye_like(F32, dtype="bfloat16", opset=21), "EyeLike: attribute 'dtype' is bfloat16 at version 9"),
    (lambda: eye_like(F32, dtype="nonsense"), "EyeLike: dtype 'nonsense' is not an ONNX element type"),
    (lambda: dsl.eager.call("EyeLike", F32, dtype=99), "EyeLike: attribute 'dtype' = 99"),
    (lambda: hardmax(F32, 2), r"Hardmax: axis 2 out of range"),
    (lambda: hardmax(F32.astype(np.int32)), "Hardmax: input 'input' has type"),
    (lambda: bitcast(F32, "int16"), "BitCast: input type float has 32 bits, 'to' type int16 16"),
    (lambda: bitcast(np.zeros(2, np.uint8) + 2, "bool"), r"BitCast: byte 2 at \[0\] is not a bool"),
    (lambda: bitcast(np.array(["a"], object), "uint8"), "BitCast: input 'input' has type"),
    (lambda: bitcast(F32, "string"), "BitCast: attribute 'to' is string"),
    (lambda: bitcast(F32, "int32", opset=25), "BitCast: not defined at opset 25"),
])
def test_errors_name_op_and_value(call, match):
    with pytest.raises(dsl.DslError, match=match):
        call()


def test_inputs_are_not_mutated():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1]
    before = snapshot(x)
    outs = [cumsum(x, 1, exclusive=1, reverse=1), cumprod(x, 0), *topk(x, 2), trilu(x, 1), eye_like(x),
            hardmax(x), bitcast(x, "uint32")]
    assert snapshot(x) == before
    for out in outs[:-1]:
        assert not np.shares_memory(out, x)
    assert outs[-1].base is not None and outs[-1] is not x  # BitCast: a numpy view, as numpy's x.view(dtype)


def test_references_plan_from_values_unknown_at_planning():
    """An axis / K / k computed at run time: the rule plans without it, the reference reads it."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for op, index_input, attrs, want in (
            ("CumSum", np.array(1), {}, cumsum(x, 1)),
            ("TopK", np.array([2]), {}, topk(x, 2)[0]),
            ("Trilu", np.array(-1), {"upper": 0}, trilu(x, -1, upper=0))):
        opdef, call, out_types = registry.bind(op, 24, [runtime_type(x), runtime_type(index_input)], [x, None], attrs)
        assert call.plan is None
        assert snapshot(opdef.reference(call, [x, index_input])[0]) == snapshot(want), op


def test_packed_tensors_in_tensors_out():
    from dsl_test_helpers import as_tensor
    codes = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    out = bitcast(as_tensor(codes), "uint4")
    assert isinstance(out, dsl.Tensor) and out.numpy().tolist() == [8, 15, 0, 7]
    values, indices = topk(dsl.Tensor.from_numpy(np.array([1.0, 4.0, 2.0], np.float32)), 2)
    assert isinstance(values, dsl.Tensor) and values.numpy().tolist() == [4.0, 2.0]
    assert indices.numpy().tolist() == [1, 2]


def test_jit_matches_eager():
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    x[1, 2] = np.nan

    def fn(v):
        values, indices = topk(v, 3, axis=0, largest=0)
        return (cumsum(v, -1, exclusive=1), cumprod(v, 0, reverse=1), values, indices, trilu(v, -1, upper=0),
                eye_like(v, dtype="int8", k=1), hardmax(v, 0), bitcast(v, "int32"))
    got = dsl.jit(fn)(x)
    want = fn(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert snapshot(g) == snapshot(w)
    old = dsl.jit(lambda v: (*topk(v, 2), hardmax(v)), opset=1)(x)
    assert snapshot(old[1]) == snapshot(topk(x, 2, opset=1)[1]) and snapshot(old[2]) == snapshot(hardmax(x, opset=1))


def test_topk_from_onnx_both_outputs_and_dynamic_k():
    from onnx import TensorProto, helper
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1, largest=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5]),
                                            helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("values", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("indices", TensorProto.INT64, None)])
    prog = dsl.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)]))
    x = np.array([[5, 1, 3, 1, 0], [2, 2, 2, 9, -1]], np.float32)
    for engine in ("jit", "numpy"):
        for k in (1, 3):
            values, indices = prog.run({"x": x, "k": np.array([k], np.int64)}, engine=engine)
            want = topk(x, k, axis=1, largest=0)
            assert snapshot(values) == snapshot(want[0]) and snapshot(indices) == snapshot(want[1])


def test_chunk_rules_are_declared():
    for op in OPS:
        assert registry.get(op).chunk is not None, op
