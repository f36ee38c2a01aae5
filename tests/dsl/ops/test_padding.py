"""Tests for dsl/ops/padding.py: Pad and CenterCropPad at every version and element type, against
numpy oracles written here; the JIT against the eager engine; bad inputs as DslErrors naming the
op; inputs never mutated (moved from test_arrange.py with the ops; their fusion in the JIT:
tests/dsl/test_pad_fusion.py)."""
from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import dtypes
from dsl.functional import center_crop_pad, pad

from dsl_test_helpers import as_tensor, assert_same, make_array, snapshot
from test_arrange import check_schemas_against_onnx, check_type, every_type  # (shared helpers)

OPS = ["Pad", "CenterCropPad"]


@pytest.mark.parametrize("op", OPS)
def test_versions_and_input_types_are_onnx_s(op):
    check_schemas_against_onnx(op)


# ---- Pad --------------------------------------------------------------------------------------------
def pad_oracle(x: np.ndarray, widths, mode: str, fill):
    """np.pad on element indices (so that every element type works), negative widths cropped first."""
    crop = tuple(slice(max(-b, 0), d - max(-e, 0)) for (b, e), d in zip(widths, x.shape))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in widths]
    index = np.arange(x.size).reshape(x.shape)
    if mode == "constant":
        picked = np.pad(index, widths, constant_values=-1)
        out = x.reshape(-1)[np.where(picked < 0, 0, picked)] if x.size else np.empty(picked.shape, x.dtype)
        out = np.asarray(out, x.dtype).reshape(picked.shape)
        out[picked < 0] = fill
        return out
    return x.reshape(-1)[np.pad(index, widths, mode=mode)]


def _zero(dt):
    return "" if dt.kind == "string" else np.zeros((), dt.np_dtype)


def test_pad_every_version_and_type():
    for version, dt, allowed in every_type("Pad"):
        x = make_array(dt, (3, 4), seed=version)
        before = snapshot(x)
        pads = [1, 0, 2, 2] if version == 1 else [1, -1, 2, 2]
        widths = [(pads[0], pads[2]), (pads[1], pads[3])]
        check_type("Pad", version, dt, allowed, lambda: pad(x, pads, opset=version),
                   lambda: pad_oracle(x, widths, "constant", _zero(dt)))
        if allowed:
            assert_same(pad(x, pads, mode="edge", opset=version), pad_oracle(x, widths, "edge", None))
            assert snapshot(x) == before


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[2, 3, 1, 4], [0, 7, 9, 0], [-1, 2, 1, -2], [0, 0, 0, 0]])
@pytest.mark.parametrize("engine", ["eager", "jit"])
def test_pad_modes_match_numpy(engine, mode, pads):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    widths = [(pads[0], pads[2]), (pads[1], pads[3])]
    want = pad_oracle(x, widths, mode, np.float32(-5))
    if engine == "eager":
        got = pad(x, pads, np.float32(-5), mode=mode)
    else:
        got = dsl.jit(lambda a: pad(a, pads, -5.0, mode=mode) * 1.0)(x)
    assert_same(got, want)


def test_pad_axes_and_constant_value_types():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert_same(pad(x, [1, 2], np.int32(9), axes=[-1]), np.pad(x, [(0, 0), (1, 2)], constant_values=9))
    assert_same(pad(x, np.array([1, 0, 0, 1]), 7, axes=np.array([1, 0], np.int32)),
                np.pad(x, [(0, 1), (1, 0)], constant_values=7))
    assert_same(pad(np.array([True]), [1, 0]), np.array([False, True]))
    assert pad(np.array(["a"], object), [0, 1], np.array("z", object)).tolist() == ["a", "z"]
    assert_same(pad(np.arange(3.0), [1, 1], 2.5, opset=2), np.array([2.5, 0, 1, 2, 2.5]))


@pytest.mark.parametrize("kwargs, message", [
    ({"pads": [1, 1, 1]}, r"pads \[1, 1, 1\] has 3 entries; expected 2 \* 2"),
    ({"pads": [0, 0, 0, 0], "mode": "circular"}, r"mode 'circular' is not supported"),
    ({"pads": [-3, 0, -1, 0]}, r"remove 4 elements from axis 0 of size 3"),
    ({"pads": [1, 1], "axes": [1, -1]}, r"repeat axis 1"),
    ({"pads": [1, 1], "axes": [2]}, r"axis 2 out of range"),
    ({"pads": [-3, 0, 1, 0], "mode": "edge"}, r"cannot pad axis 0 \(size 0 after removals\) in edge mode"),
    ({"pads": [0, 0, 0, 0], "constant_value": np.zeros(2, np.float32)}, r"constant_value must be a scalar"),
])
def test_pad_errors_name_the_op_and_value(kwargs, message):
    with pytest.raises(dsl.DslError, match=rf"^Pad: .*{message}"):
        pad(np.zeros((3, 2), np.float32), **kwargs)


def test_pad_version_rules():
    with pytest.raises(dsl.DslError, match=r"^Pad: mode 'wrap' is not supported at version 18"):
        pad(np.zeros(3, np.float32), [1, 1], mode="wrap", opset=18)
    with pytest.raises(dsl.DslError, match=r"^Pad: paddings \[-1, 0\] has a negative entry"):
        pad(np.zeros(3, np.float32), [-1, 0], opset=1)
    with pytest.raises(dsl.DslError, match=r"^Pad: argument axes=\[0\] does not exist at opset version 13"):
        pad(np.zeros(3, np.float32), [1, 1], axes=[0], opset=13)


# ---- CenterCropPad --------------------------------------------------------------------------------------
def crop_pad_oracle(x, target, axes):
    for axis, size in zip([a % x.ndim for a in axes], target):
        dim = x.shape[axis]
        if size <= dim:
            start = (dim - size) // 2
            x = np.take(x, range(start, start + size), axis=axis)
        else:
            before = (size - dim) // 2
            widths = [(0, 0)] * x.ndim
            widths[axis] = (before, size - dim - before)
            x = pad_oracle(x, widths, "constant", "" if x.dtype.kind == "O" else np.zeros((), x.dtype))
    return x


def test_center_crop_pad_every_version_and_type():
    for version, dt, allowed in every_type("CenterCropPad"):
        x = make_array(dt, (5, 2, 3), seed=version)
        before = snapshot(x)
        check_type("CenterCropPad", version, dt, allowed, lambda: center_crop_pad(x, [2, 5], [0, -1], opset=version),
                   lambda: crop_pad_oracle(x, [2, 5], [0, -1]))
        assert snapshot(x) == before


@pytest.mark.parametrize("target", [[4, 4, 4], [1, 2, 7], [5, 2, 3], [0, 3, 6]])
def test_center_crop_pad_shapes_and_jit(target):
    x = np.arange(30, dtype=np.float32).reshape(5, 2, 3)
    want = crop_pad_oracle(x, target, [0, 1, 2])
    assert_same(center_crop_pad(x, np.array(target, np.int32)), want)
    assert_same(dsl.jit(lambda a: center_crop_pad(a, target) * 1.0)(x), want)


@pytest.mark.parametrize("shape, axes, message", [
    ([1, 2], None, r"shape has 2 entries; expected one per axis of \[0, 1, 2\]"),
    ([1, -2, 1], None, r"negative entry"),
    ([1, 1], [0, -3], r"repeat axis 0"),
])
def test_center_crop_pad_errors(shape, axes, message):
    with pytest.raises(dsl.DslError, match=rf"^CenterCropPad: .*{message}"):
        center_crop_pad(np.zeros((2, 3, 4)), shape, axes)


# ---- values known only at run time, packed Tensors ----------------------------------------------------
def test_runtime_computed_pads_and_shape_are_planned_when_run():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = dsl.jit(lambda a, p: pad(a, p * 1, mode="wrap"))
    assert_same(f(x, np.array([1, 0, 0, 2])), pad_oracle(x, [(1, 0), (0, 2)], "wrap", None))
    g = dsl.jit(lambda a, s: center_crop_pad(a, s + 0))
    assert_same(g(x, np.array([1, 6])), crop_pad_oracle(x, [1, 6], [0, 1]))


def test_packed_tensors_pad():
    x = make_array(dtypes.dtype("int4"), (3, 5), seed=4)
    got = pad(as_tensor(x), [0, 1, 0, 2], mode="reflect")
    assert isinstance(got, dsl.Tensor)
    assert_same(got.numpy(), pad_oracle(x, [(0, 0), (1, 2)], "reflect", None))
