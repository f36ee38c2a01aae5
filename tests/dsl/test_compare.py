"""Tests for dsl/compare.py: dsl.compare runs JIT and eager numpy side by side; tolerances, ulps, report text."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.compare import _compare_one, _ulp_distance

X = np.array([[0.5, -1.25, 3.0], [2.0, 0.0, -0.75]], np.float32)
scaled = dsl.jit(lambda x: (x * 3.0 - 1.0, dsl.cast(x, dsl.int32), x > 0))


def test_matching_outputs_report_ok_and_print_one_line_each():
    report = dsl.compare(scaled, X)
    assert report.ok and bool(report) and len(report.outputs) == 3
    assert all(o.shape_ok and o.dtype_ok and o.close and o.max_abs_error == 0 for o in report.outputs)
    text = str(report)
    assert text.startswith("dsl.compare: OK (3 outputs)") and text.count("[ok ]") == 3
    assert "max abs err 0, max ulp err 0" in text


def perturbed(monkeypatch, fn, args, change):
    """Make the compiled side of ``fn`` return ``change(outputs)`` (the eager side is untouched)."""
    executable = fn.executable(*args)
    run = executable.run
    monkeypatch.setattr(executable, "run", lambda feeds: change(run(feeds)))


def test_one_ulp_off_is_close_by_default_and_a_mismatch_without_tolerance(monkeypatch):
    perturbed(monkeypatch, scaled, [X], lambda outs: [np.nextafter(outs[0], np.float32(np.inf)), *outs[1:]])
    report = dsl.compare(scaled, X)
    assert report.ok and report.outputs[0].max_ulp_error == 1 and 0 < report.outputs[0].max_abs_error < 1e-6
    strict = dsl.compare(scaled, X, rtol=0, atol=0)
    assert not strict.ok and not strict
    assert str(strict).startswith("dsl.compare: MISMATCH (3 outputs)") and str(strict).count("[BAD]") == 1


def test_integer_and_bool_outputs_must_be_equal(monkeypatch):
    perturbed(monkeypatch, scaled, [X], lambda outs: [outs[0], outs[1] + 2, ~outs[2]])
    report = dsl.compare(scaled, X, rtol=1, atol=10)
    assert [o.close for o in report.outputs] == [True, False, False]
    assert report.outputs[1].max_abs_error == 2 and report.outputs[1].max_ulp_error == -1


def test_shape_and_dtype_mismatches_are_reported(monkeypatch):
    perturbed(monkeypatch, scaled, [X], lambda outs: [outs[0].astype(np.float64), outs[1][:1], outs[2]])
    report = dsl.compare(scaled, X)
    first, second, _ = report.outputs
    assert not first.dtype_ok and first.shape_ok and not second.shape_ok and not report.ok
    assert "dtype MISMATCH" in str(first) and "shape MISMATCH" in str(second)


@pytest.mark.parametrize("got, want, ulps, close", [
    ([np.nan, 1.0], [np.nan, 1.0], 0, True),   # NaN where both have NaN is equal
    ([np.nan, 1.0], [0.0, 1.0], None, False),  # NaN on one side only
    ([-0.0, 2.0], [0.0, 2.0], 0, True),        # -0 == +0
    ([np.inf, -np.inf], [np.inf, -np.inf], 0, True),
    ([1.0, 2.0], [1.0, 2.5], None, False),
])
def test_special_values(got, want, ulps, close):
    report = _compare_one("y", np.array(got, np.float32), np.array(want, np.float32), 1e-5, 1e-6)
    assert report.close is close
    if ulps is not None:
        assert report.max_ulp_error == ulps


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   np.float64])
def test_ulps_count_in_the_output_format(dtype):
    want = np.array([1.0, -2.0, 0.5], dtype)
    got = want.copy()
    got[1] = np.nextafter(want[1].astype(np.float64), -np.inf).astype(dtype) if dtype == np.float64 else \
        ml_dtypes.finfo(dtype).eps * -2 + want[1]  # -2 - 1 ulp (the spacing at 2 is 2 eps)
    assert got[1] != want[1]
    assert _ulp_distance(got, want) == 1
    assert _ulp_distance(want, want) == 0


def test_packed_and_exotic_inputs_are_compared_through_the_eager_engine():
    codes = dsl.Tensor.from_packed(np.array([0x21, 0xF8, 0x07], np.uint8), "int4", (5,))
    f = dsl.jit(lambda t, s: dsl.dequantize_linear(t, s))
    report = dsl.compare(f, codes, np.array(0.5, ml_dtypes.bfloat16))
    assert report.ok, report
    assert report.outputs[0].dtype_ok and report.outputs[0].max_ulp_error == 0


def test_big_endian_inputs_compare_equal():
    report = dsl.compare(scaled, X.astype(">f4"))
    assert report.ok, report


def test_string_outputs_compare_by_equality():
    f = dsl.jit(lambda s: dsl.unsqueeze(s, [0]))
    report = dsl.compare(f, np.array(["a", "bc"], dtype=object))
    assert report.ok and report.outputs[0].max_abs_error == 0
