"""math="fast" (the default) vs math="exact" in the JIT: float32 math through kernels/vmath.py
within the README's ulp bounds with special values exact, float32 softmax rows, cheap forms of
powers and divisions, and dsl.compare's reporting of near-zero results."""
import math

import re

import numpy as np
import pytest

import dsl

STRIDE = 2 ** 32 // 2 ** 17  # a strided sweep of every float32 bit pattern (the full one: benchmarks/vmath_ulp.py)
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.17549435e-38, 88.72284,
                     -103.97208, 3.4028235e38, -3.4028235e38, 1.0, -1.0], np.float32)
OPS = {"exp": (dsl.exp, np.exp), "log": (dsl.log, np.log), "tanh": (dsl.tanh, np.tanh),
       "sigmoid": (dsl.sigmoid, lambda x: 1 / (1 + np.exp(-x))), "erf": (dsl.erf, None)}


def sweep() -> np.ndarray:
    bits = np.arange(0, 2 ** 32, STRIDE, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), SPECIALS])


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance on the float32 grid (NaN vs NaN 0; NaN vs a number: a huge value)."""
    def ordered(v):
        raw = v.view(np.int32).astype(np.int64)
        return np.where(raw < 0, -(raw & 0x7FFFFFFF), raw)
    both_nan = np.isnan(got) & np.isnan(want)
    distance = np.abs(ordered(got) - ordered(want))
    return np.where(both_nan, 0, np.where(np.isnan(got) != np.isnan(want), 2 ** 40, distance))


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """The float64 function of each float32 input, rounded to float32."""
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "erf":
            return np.array([math.erf(v) if not np.isnan(v) else np.nan for v in wide]).astype(np.float32)
        if name == "sigmoid":
            return np.where(wide >= 0, 1 / (1 + np.exp(-wide)), np.exp(wide) / (1 + np.exp(wide))).astype(np.float32)
        return OPS[name][1](wide).astype(np.float32)


@pytest.mark.parametrize("name", sorted(OPS))
def test_fast_float32_math_is_within_2_ulp_with_special_values_exact(name):
    x = sweep()
    f = dsl.jit(lambda v: OPS[name][0](v))
    with np.errstate(all="ignore"):
        got = f(x)
    want = reference(name, x)
    bound = np.abs(x) <= 2 ** 16
    assert int(ulps(got, want)[bound].max()) <= 2
    assert int(ulps(got, want).max()) <= 2 or name in ("exp", "sigmoid")  # (subnormal results: see the sweep)
    specials = ~np.isfinite(x) | (x == 0)
    np.testing.assert_array_equal(np.isnan(got[specials]), np.isnan(want[specials]))
    finite = specials & ~np.isnan(want)
    assert got[finite].tobytes() == want[finite].tobytes()  # +-0 and +-inf bit for bit
    assert "_vmath." in f.executable(x).runners[0].source_for_contiguous()


@pytest.mark.parametrize("name", sorted(OPS))
def test_exact_math_keeps_libm_calls(name):
    x = sweep()[::7]
    f = dsl.jit(lambda v: OPS[name][0](v), math="exact")
    with np.errstate(all="ignore"):
        got = f(x)
    source = f.executable(x).runners[0].source_for_contiguous()
    assert "_vmath." not in source
    assert int(ulps(got, reference(name, x)).max()) <= 1


def test_fast_math_follows_the_float_type_float64_keeps_libm_and_narrow_floats_round_once():
    x = np.linspace(-5, 5, 101)
    f = dsl.jit(lambda v: dsl.tanh(v))
    np.testing.assert_allclose(f(x), np.tanh(x), rtol=3e-16)  # float64: libm (numpy's loops: within 1 ulp)
    assert "_vmath." not in f.executable(x).runners[0].source_for_contiguous()
    half = x.astype(np.float16)
    np.testing.assert_array_equal(f(half), np.tanh(half.astype(np.float64)).astype(np.float16))


def softmax64(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("scale, cols", [(1.0, 7), (1.0, 512), (3.0, 4096), (10.0, 100)])
def test_fast_softmax_rows_are_float32_within_their_bound(scale, cols):
    """exp within 1 ulp, a float64 sum, one rounding of 1 / sum and of the product: 4 ulp, plus
    the float32 difference v - max (relative error up to |v - max| * 2**-24, as in every float32
    softmax); exact math is the float64 row."""
    x = (np.random.default_rng(cols).standard_normal((64, cols)) * scale).astype(np.float32)
    fast = dsl.jit(lambda v: dsl.softmax(v))(x)
    want64 = softmax64(x)
    shift = np.abs(x - x.max(-1, keepdims=True)).astype(np.float64)
    relative = np.abs(fast.astype(np.float64) - want64) / np.maximum(want64, 1e-300)
    assert np.all(relative <= (4 + shift) * 2.0 ** -23), float((relative / ((4 + shift) * 2.0 ** -23)).max())
    exact = dsl.jit(lambda v: dsl.softmax(v), math="exact")(x)
    np.testing.assert_array_equal(exact, want64.astype(np.float32))
    log_fast = dsl.jit(lambda v: dsl.log(dsl.softmax(v)))(x)
    assert np.all(np.isfinite(log_fast) | (want64 == 0))


def logsoftmax64(x: np.ndarray) -> np.ndarray:
    w = x.astype(np.float64)
    shifted = w - w.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


ROW_FORMS = {  # the fast row's forms: the row read again or copied; exponentials in the output or tmp
    "load, float32 out": (lambda v: dsl.softmax(v), lambda v: dsl.log_softmax(v), lambda w: w, np.float32),
    "computed, float32 out": (lambda v: dsl.softmax(v * 2.0), lambda v: dsl.log_softmax(v * 2.0), lambda w: w * 2,
                              np.float32),
    "load, float16 epilogue": (lambda v: dsl.cast(dsl.softmax(v), dsl.float16),
                               lambda v: dsl.cast(dsl.log_softmax(v), dsl.float16), lambda w: w, np.float16),
    "computed, scaled epilogue": (lambda v: dsl.softmax(v - 1.0) * 3.0, lambda v: dsl.log_softmax(v - 1.0) * 3.0,
                                  lambda w: w - 1, np.float32),
}


@pytest.mark.parametrize("form", list(ROW_FORMS))
@pytest.mark.parametrize("cols", [5, 512, 1000])
def test_fast_softmax_and_log_softmax_row_forms(form, cols):
    """Every form of the fast row (dsl/kir/row_schedule.py softmax_f32) against float64,
    with a NaN row (all NaN), a row of -inf (all NaN, as numpy), a row holding +inf and a row
    of zeros (both zeros: either may be the maximum)."""
    softmax, log_softmax, producer, out = ROW_FORMS[form]
    x = (np.random.default_rng(cols).standard_normal((9, cols)) * 4).astype(np.float32)
    x[1, cols // 2], x[2], x[3, 0], x[4] = np.nan, -np.inf, np.inf, 0.0
    x[5, ::2] = -0.0
    w = producer(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        want, log_want = softmax64(w), logsoftmax64(w)
    scale = 3.0 if "scaled" in form else 1.0
    got, log_got = dsl.jit(softmax)(x), dsl.jit(log_softmax)(x)
    assert got.dtype == out and log_got.dtype == out
    # float32: 4 ulp plus the rounding of v - max (as above); log-softmax: that difference's
    # rounding (absolute) and the result's own; float16 results: one more rounding
    with np.errstate(invalid="ignore"):
        shift = np.abs(w - w.max(-1, keepdims=True))
    rows = np.r_[0, 4:9]
    narrow = 2.0 ** -11 if out == np.float16 else 0.0
    soft_error = np.abs(got[rows].astype(np.float64) - want[rows] * scale)
    soft_bound = ((4 + shift[rows]) * 2.0 ** -23 + narrow) * want[rows] * scale + narrow * 2.0 ** -13
    assert np.all(soft_error <= soft_bound), float((soft_error / soft_bound).max())
    log_error = np.abs(log_got[rows].astype(np.float64) - log_want[rows] * scale)
    peak = np.abs(w[rows]).max(-1, keepdims=True) + np.log(cols)  # (max + log(sum): one float32 rounding)
    log_bound = ((4 + shift[rows] + peak + np.abs(log_want[rows])) * 2.0 ** -23
                 + narrow * np.abs(log_want[rows])) * scale
    assert np.all(log_error <= log_bound + 2.0 ** -30), float((log_error / (log_bound + 2.0 ** -30)).max())
    for rows in (got, log_got):
        assert np.isnan(rows[1:4]).all() and not np.isnan(rows[np.r_[0, 4:9]]).any()


def test_row_kernels_prefetch_the_next_row():
    """Softmax rows prefetch the first 4 KiB of the next row; reductions only rows of at most
    4 KiB (longer ones are streams the hardware prefetches); a row broadcast (stride 0) is not
    prefetched; the results are those of plain numpy."""
    x = np.random.default_rng(3).standard_normal((6, 40, 33)).astype(np.float32)
    gamma = np.random.default_rng(4).standard_normal(33).astype(np.float32)
    soft = dsl.jit(lambda v: dsl.softmax(v))
    total = dsl.jit(lambda v, g: dsl.reduce_sum(v * g, [-1], keepdims=False))
    soft_source = soft.executable(x).runners[0].source_for_contiguous()
    sum_source = total.executable(x, gamma).runners[0].source_for_contiguous()
    # (the first 16 cache lines of the next row: p0_0 + s0_0 hoisted out of the loop over them)
    assert re.search(r"(h\d+_) = p0_0 \+ s0_0\n(.*\n){1,2}\s+for f_ in .*\n\s+_bits.prefetch\(b0, \1 \+ f_ \* np.uint64\(16\)\)",
                     soft_source) and "rowlen <= " not in soft_source
    # (the row length test hoisted out of the loops: computed once a call)
    assert re.search(r"(t\d+) = \(rowlen <= np.uint64\(1024\)\)\n\s+(h\d+_) = \1\n(.*\n){3,6}"
                     r"\s+(t\d+) = \(\(i0 \+ np.uint64\(1\)\) < stop\)\n\s+(t\d+) = \(\4 & \2\)\n\s+if \5:", sum_source)
    # (gamma: stride 0 along the rows, skipped at run time)
    assert re.search(r"(t\d+) = \(s1_0 != np.uint64\(0\)\)\n\s+if \1:", sum_source)
    np.testing.assert_allclose(soft(x), softmax64(x), rtol=2e-6)
    np.testing.assert_allclose(total(x, gamma), (x.astype(np.float64) * gamma).sum(-1), rtol=1e-5, atol=1e-5)


def test_gelu_and_swiglu_fast_match_float64():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 256)).astype(np.float32) * 3
    b = rng.standard_normal((64, 256)).astype(np.float32)
    gelu_tanh = dsl.jit(lambda v: 0.5 * v * (1.0 + dsl.tanh(0.7978845608 * (v + 0.044715 * v * v * v))))
    gelu_erf = dsl.jit(lambda v: 0.5 * v * (1.0 + dsl.erf(v * 0.7071067811865476)))
    swiglu = dsl.jit(lambda a, c: a * dsl.sigmoid(a) * c)
    w = x.astype(np.float64)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(gelu_tanh(x), 0.5 * w * (1 + np.tanh(0.7978845608 * (w + 0.044715 * w ** 3))),
                               rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(gelu_erf(x), 0.5 * w * (1 + erf(w * 0.7071067811865476)), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(swiglu(x, b), w / (1 + np.exp(-w)) * b, rtol=2e-6, atol=1e-6)
    report = dsl.compare(gelu_erf, x)
    assert report.ok, report


def test_small_constant_powers_become_multiplications_with_fast_math():
    x = np.concatenate([np.random.default_rng(2).standard_normal(200).astype(np.float32) * 10,
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30], np.float32)])
    for exponent, spelled in ((2.0, "(t0 * t0)"), (3.0, "((t0 * t0) * t0)"), (0.5, "np.sqrt(t0)")):
        f = dsl.jit(lambda v, e=exponent: v ** e)
        with np.errstate(all="ignore"):  # (C99 pow: numpy's own x ** 0.5 is sqrt, NaN at -inf)
            got = f(x)
            want = np.array([math.pow(v, exponent) if not (v < 0 and math.isfinite(v) and exponent == 0.5) else np.nan
                             for v in x.astype(np.float64)]).astype(np.float32)
        source = f.executable(x).runners[0].source_for_contiguous()
        assert spelled in source and "np.power" not in source and "pow_f32" not in source
        assert int(ulps(got, want).max()) <= (0 if exponent != 3.0 else 1)
        exact = dsl.jit(lambda v, e=exponent: v ** e, math="exact")
        assert "np.power(" in exact.executable(x).runners[0].source_for_contiguous()
    halves = dsl.jit(lambda v: v ** 0.5)(np.array([-0.0, -np.inf, 4.0], np.float32))
    assert halves.tolist() == [0.0, np.inf, 2.0] and not np.signbit(halves[0])  # pow's rules, not sqrt's


@pytest.mark.parametrize("math", ["fast", "exact"])
def test_division_by_a_power_of_two_is_a_bit_identical_multiplication(math):
    x = np.concatenate([np.random.default_rng(3).standard_normal(500).astype(np.float32) * 1e3,
                        np.array([1e-38, 3e-45, np.inf, -0.0, np.nan], np.float32)])
    for divisor in (2.0, 0.25, 1024.0):
        f = dsl.jit(lambda v, d=divisor: v / d, math=math)
        source = f.executable(x).runners[0].source_for_contiguous()
        assert " / " not in source.split("def kernel")[1] and " * np.float32(" in source
        with np.errstate(all="ignore"):
            assert f(x).tobytes() == (x / np.float32(divisor)).tobytes()
    third = dsl.jit(lambda v: v / 3.0, math=math)
    assert " / np.float32(3.0)" in third.executable(x).runners[0].source_for_contiguous()


def test_compare_reports_ulps_only_away_from_zero_and_where_the_worst_element_is():
    x = np.linspace(-4, 4, 64, dtype=np.float32).reshape(8, 8)
    gelu = dsl.jit(lambda v: 0.5 * v * (1.0 + dsl.erf(v * 0.7071067811865476)))
    report = dsl.compare(gelu, x)
    assert report.ok, report
    (out,) = report.outputs
    # ulps only where |want| >= atol: near zero GELU's values are tiny and a 1e-9 absolute
    # difference was 875 million ulps; at x = -3.9, 1 + erf cancels and 1 ulp of erf is
    # thousands of ulps of the result, which the report shows honestly
    assert out.max_ulp_error < 2 ** 16 and out.ulp_floor == 1e-6
    text = str(report)
    assert "(where |want| >= 1e-06)" in text
    if out.worst_abs is not None:
        index, got, want = out.worst_abs
        assert len(index) == 2 and f"worst abs at {list(index)}" in text and got != want


def test_math_mode_is_checked():
    with pytest.raises(dsl.InputError, match=r"dsl\.jit: math='quick'; expected one of \['fast', 'exact'\]"):
        dsl.jit(lambda v: v, math="quick")
    prog = dsl.jit(lambda v: dsl.exp(v)).lower(np.ones(9, np.float32))
    with pytest.raises(dsl.InputError, match=r"Program\.run: math='x'"):
        prog.run([np.ones(3, np.float32)], math="x")
    x = np.linspace(-3, 3, 9, dtype=np.float32)
    fast, exact = prog.run([x])[0], prog.run([x], math="exact")[0]
    assert int(ulps(fast, exact).max()) <= 2
