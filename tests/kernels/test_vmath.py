"""Tests for kernels/vmath.py: strided ulp sweeps against float64 libm, special values bit for bit
against numpy float32, vectorized assembly (packed ops, no calls), float16 / bfloat16 through float32."""
import math
import platform
import re

import llvmlite.binding as llvm
import ml_dtypes
import numba
import numpy as np
import pytest

from kernels import bits, vmath

F32, F64 = np.float32, np.float64
STRIDE = 1021  # a prime near 2**32 / 2**22: ~4.2M bit patterns per function, every low-bit residue
LIMIT = 65536.0
# max ulp: (on |x| <= 2**16, overall); the measured maxima (benchmarks/vmath_ulp.py) are 1 everywhere
BOUND = {"exp": (2, 2), "expm1": (2, 3), "log": (2, 2), "log1p": (2, 3), "tanh": (2, 2), "sigmoid": (2, 2),
         "erf": (2, 2), "sin": (2, 2), "cos": (2, 2), "softplus": (2, 3)}
UNARY = list(BOUND)


@numba.njit(nogil=True)
def _erf64(x):
    out = np.empty(x.size, np.float64)
    for i in range(x.size):
        out[i] = math.erf(x[i])
    return out


REF64 = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin,
         "cos": np.cos, "erf": _erf64, "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
         "softplus": lambda v: np.maximum(v, 0.0) + np.log1p(np.exp(-np.abs(v)))}
# numpy's float32 evaluation, whose special values we must give bit for bit
NUMPY32 = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin,
           "cos": np.cos, "erf": lambda v: _erf64(v.astype(F64)).astype(F32),
           "sigmoid": lambda v: F32(1) / (F32(1) + np.exp(-v)), "softplus": lambda v: np.log1p(np.exp(v))}


def _unary_loop(fn):
    @numba.njit(nogil=True, error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])
    return loop


@numba.njit(nogil=True, error_model="numpy")
def _pow_loop(x, y, out):
    for i in range(x.size):
        out[i] = vmath.pow_f32(x[i], y[i])


_LOOPS = {}


def run(name, x):
    """vmath's name_f32 over a float32 array, in the vectorizable loop (compiled once per name)."""
    if name not in _LOOPS:
        _LOOPS[name] = _unary_loop(getattr(vmath, name + "_f32"))
    x = np.ascontiguousarray(x, F32)
    out = np.empty_like(x)
    _LOOPS[name](x, out)
    return out


def reference(name, x):
    with np.errstate(all="ignore"):
        return REF64[name](np.asarray(x, F32).astype(F64)).astype(F32)


def numpy32(name, x):
    with np.errstate(all="ignore"):
        return np.asarray(NUMPY32[name](np.asarray(x, F32)), F32)


def from_bits(words):
    return np.asarray(words, np.uint32).view(F32)


def ordered(a):
    """float32 -> integers in float order, one apart for adjacent floats, +-0 -> 0."""
    b = np.asarray(a, F32).view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def ulps(ours, ref):
    """ulp distance where both are finite, 0 elsewhere (special results are checked apart)."""
    finite = np.isfinite(ours) & np.isfinite(ref)
    return np.where(finite, np.abs(ordered(ours) - ordered(ref)), 0)


def special_mismatch(ours, ref):
    """Where either side is NaN, Inf or zero the bits must agree (NaN: both NaN, ours quiet)."""
    ob, rb = ours.view(np.uint32), ref.view(np.uint32)
    special = ~np.isfinite(ours) | ~np.isfinite(ref) | (ours == 0) | (ref == 0)
    nan_ok = np.isnan(ours) & np.isnan(ref) & ((ob & 0x00400000) != 0)
    return special & ~((ob == rb) | nan_ok)


def strided_inputs(stride=STRIDE):
    return np.arange(0, 1 << 32, stride, dtype=np.uint64).astype(np.uint32).view(F32)


@pytest.fixture(scope="module")
def sweep_x():
    return strided_inputs()


@pytest.mark.parametrize("name", UNARY)
def test_strided_sweep_meets_the_ulp_bound(name, sweep_x):
    x = sweep_x
    ours, ref = run(name, x), reference(name, x)
    d = ulps(ours, ref)
    inside, overall = BOUND[name]
    small = np.abs(x) <= LIMIT
    assert d[small].max() <= inside, f"{name}: {d[small].max()} ulp at x={x[small][np.argmax(d[small])]!r}"
    assert d.max() <= overall, f"{name}: {d.max()} ulp at x={x[np.argmax(d)]!r}"
    bad = special_mismatch(ours, ref)
    assert not bad.any(), f"{name}: special mismatch at x={x[bad][:5]!r}: {ours[bad][:5]!r} vs {ref[bad][:5]!r}"


# ---- sin / cos over the whole float32 range ------------------------------------------------------
def every_exponent(mantissa_step=2039):
    """Both signs, every biased exponent 0..254 (subnormals up to 3.4e38), mantissas 0, step, 2 step,
    ... and the largest: ~2.1M inputs; 106 of the 255 binades lie at or above 2**22."""
    mantissas = np.unique(np.concatenate([np.arange(0, 1 << 23, mantissa_step), [(1 << 23) - 1]]))
    words = (np.arange(255, dtype=np.uint64)[:, None] << 23 | mantissas[None, :].astype(np.uint64)).ravel()
    return from_bits(np.concatenate([words, words | 0x80000000]).astype(np.uint32))


# per exponent, the float32 closest to a multiple of pi/2 (m * 2**e; a brute-force search over
# every 24-bit m with 2/pi to 600 bits): 16367173 * 2**72 is 2**-29.9 quarter turns from one
HARD_REDUCTIONS = [(16367173, 72), (10741887, 11), (16367173, 73), (10741887, 12), (16367173, 74),
                   (10057457, 62), (11617958, 17), (9012376, 53), (14173733, 88), (10695401, 2),
                   (14015064, 66), (8895696, 34), (12558490, 78), (11405107, 50), (9688229, 6),
                   (12438944, 103), (14946604, 41), (12615508, 92), (10511298, 68), (13034427, 60),
                   (15473482, 47), (10838702, -1), (16282999, 22)]


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_every_exponent_against_float64(name):
    x = every_exponent()
    assert np.abs(x).max() == np.finfo(F32).max and (np.abs(x) >= 2.0**22).mean() > 0.4
    ours, ref = run(name, x), reference(name, x)
    d = ulps(ours, ref)
    assert d.max() <= 1, f"{name}: {d.max()} ulp at x={x[np.argmax(d)]!r}"
    assert not special_mismatch(ours, ref).any()
    assert np.isfinite(ours[np.isfinite(x)]).all()


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_hard_reductions(name):
    # the worst cancellations of x - k pi/2 in float32, with both signs, and their neighbours
    base = np.array([float(m) * 2.0**e for m, e in HARD_REDUCTIONS], F64).astype(F32)
    words = base.view(np.uint32)
    x = from_bits(np.concatenate([words - 1, words, words + 1]))
    x = np.concatenate([x, -x])
    ours, ref = run(name, x), reference(name, x)
    assert ulps(ours, ref).max() <= 1, x[np.argmax(ulps(ours, ref))]


def test_sin_cos_quadrants_of_huge_arguments():
    # sign and sin/cos choice for huge x: sin**2 + cos**2 = 1 and both signs as float64 libm's
    x = every_exponent(65537)
    x = x[np.isfinite(x) & (np.abs(x) >= 2.0**22)]
    s, c = run("sin", x), run("cos", x)
    s64, c64 = np.sin(x.astype(F64)), np.cos(x.astype(F64))
    assert np.allclose(s.astype(F64) ** 2 + c.astype(F64) ** 2, 1.0, atol=1e-6)
    big_s, big_c = np.abs(s64) > 1e-3, np.abs(c64) > 1e-3
    assert (np.sign(s[big_s]) == np.sign(s64[big_s])).all() and (np.sign(c[big_c]) == np.sign(c64[big_c])).all()


SPECIAL_BITS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF,
                0x7FFFFFFF]


@pytest.mark.parametrize("name", UNARY)
def test_special_values_match_numpy_float32_bit_for_bit(name):
    x = from_bits(SPECIAL_BITS)
    ours, want = run(name, x), numpy32(name, x)
    quiet = (ours.view(np.uint32) & 0x00400000) != 0
    same = (ours.view(np.uint32) == want.view(np.uint32)) | (np.isnan(ours) & np.isnan(want) & quiet)
    assert same.all(), f"{name}: x={x[~same]!r} ours={ours[~same]!r} numpy={want[~same]!r}"


@pytest.mark.parametrize("name, x, want", [
    ("log", 0.0, -np.inf), ("log", -0.0, -np.inf), ("log", -1.0, np.nan), ("log", -1e-45, np.nan),
    ("log", 1.0, 0.0), ("log1p", -1.0, -np.inf), ("log1p", -2.0, np.nan), ("log1p", -0.0, -0.0),
    ("expm1", -0.0, -0.0), ("expm1", -np.inf, -1.0), ("expm1", 100.0, np.inf), ("tanh", -0.0, -0.0),
    ("tanh", 10.0, 1.0), ("tanh", -1e30, -1.0), ("sin", -0.0, -0.0), ("sin", np.inf, np.nan), ("cos", -0.0, 1.0),
    ("erf", -0.0, -0.0), ("erf", 4.0, 1.0), ("erf", -10.0, -1.0), ("erf", np.inf, 1.0), ("erf", -np.inf, -1.0),
    ("sigmoid", 1e30, 1.0), ("sigmoid", -1e30, 0.0), ("sigmoid", 3.4e38, 1.0), ("sigmoid", -3.4e38, 0.0),
    ("sigmoid", -0.0, 0.5), ("softplus", 1e30, 1e30), ("softplus", 100.0, 100.0), ("softplus", -1e30, 0.0),
    ("exp", 1000.0, np.inf), ("exp", -1000.0, 0.0),
])
def test_named_values(name, x, want):
    got = run(name, [x])[0]
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got.view(np.uint32) == F32(want).view(np.uint32), (name, x, got)


def test_exp_overflow_and_underflow_thresholds_are_numpys():
    # the largest float32 x with a finite exp, and the first with 0, found on numpy's float32 exp
    x = np.arange(F32(88.0).view(np.uint32), F32(89.0).view(np.uint32), dtype=np.uint32).view(F32)
    with np.errstate(over="ignore"):
        assert np.array_equal(np.isinf(run("exp", x)), np.isinf(np.exp(x)))
    x = -np.arange(F32(103.0).view(np.uint32), F32(105.0).view(np.uint32), dtype=np.uint32).view(F32)
    assert np.array_equal(run("exp", x) == 0, np.exp(x) == 0)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "softplus"])
def test_subnormal_results_are_rounded_not_flushed(name):
    # every 7th float32 in [-103.98, -87.34]: the results are subnormal; at most 1 step of the subnormal grid
    x = -np.arange(F32(87.34).view(np.uint32), F32(103.98).view(np.uint32), 7, dtype=np.uint32).view(F32)
    ours, ref = run(name, x), reference(name, x)
    assert (ref[ref != 0] < np.finfo(F32).tiny).all()
    assert ulps(ours, ref).max() <= 1
    assert np.array_equal(ours == 0, ref == 0)


@pytest.mark.parametrize("name", UNARY)
def test_subnormal_and_tiny_inputs(name):
    x = from_bits(np.concatenate([np.arange(1, 1 << 23, 4099), np.arange(1, 1 << 23, 4099) | 0x80000000,
                                  np.arange(0x00800000, 0x30000000, 65537)]).astype(np.uint32))
    ours, ref = run(name, x), reference(name, x)
    assert ulps(ours, ref).max() <= 1
    assert not special_mismatch(ours, ref).any()


# ---- pow ---------------------------------------------------------------------------------------
POW_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-45,
               -1e-45, 16777216.0, -16777217.0, 3.4e38, -3.4e38, 1e-30, 0.25]


def pow_run(x, y):
    x, y = np.broadcast_arrays(np.asarray(x, F32), np.asarray(y, F32))
    x, y = np.ascontiguousarray(x).ravel(), np.ascontiguousarray(y).ravel()
    out = np.empty_like(x)
    _pow_loop(x, y, out)
    return x, y, out


def test_exp_times_2_64_on_minus_104_to_0_within_one_ulp_and_its_special_values():
    """Softmax's exponential (2**64 e**x for x <= 0): every 1021st float32 of [-104, -0] against
    float64, relative error below 2**-23 (measured 0.69 * 2**-23), also where e**x alone is
    subnormal; 0 below -104 and for -inf, 2**64 at +-0 (NaN is the caller's: see the row)."""
    bits_range = np.arange(0x80000000, 0xC2D00001, STRIDE, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits_range.view(F32), np.array([-104.0, -87.34, -1e-45], F32)])
    got = run("exp_times_2_64", x).astype(F64)
    want = np.ldexp(np.exp(x.astype(F64)), 64)
    assert (np.abs(got - want) / want).max() < 2.0 ** -23
    specials = np.array([-np.inf, -104.00001, -1e30, 0.0, -0.0], F32)
    assert np.array_equal(run("exp_times_2_64", specials), np.array([0, 0, 0, 2.0 ** 64, 2.0 ** 64], F32))


def test_pow_special_cases_match_numpy_float32():
    grid = np.array(POW_SPECIAL, F32)
    x, y, ours = pow_run(grid[:, None], grid[None, :])
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    quiet = (ours.view(np.uint32) & 0x00400000) != 0
    same = (ours.view(np.uint32) == want.view(np.uint32)) | (np.isnan(ours) & np.isnan(want) & quiet)
    exact = ~np.isfinite(want) | (want == 0) | ~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0) | (np.abs(x) == 1)
    assert same[exact].all(), list(zip(x[exact & ~same], y[exact & ~same], ours[exact & ~same], want[exact & ~same]))
    # the rest (finite, nonzero) within the pow bound of the float64 reference
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(F64), y.astype(F64)).astype(F32)
    assert ulps(ours[~exact], ref[~exact]).max() <= 1


def test_pow_strided_grid_meets_the_ulp_bound():
    x = strided_inputs(1 << 14)
    x = x[np.isfinite(x)]
    ys = np.array([2.0, -2.0, 3.0, 0.5, -0.5, 1 / 3, 7.25, -11.0, 100.0, 1e-7, 149.0, -149.0, 1e10], F32)
    xx, yy, ours = pow_run(x[:, None], ys[None, :])
    with np.errstate(all="ignore"):
        ref = np.power(xx.astype(F64), yy.astype(F64)).astype(F32)
    assert ulps(ours, ref).max() <= 1
    assert not special_mismatch(ours, ref).any()


def test_pow_integer_powers():
    # exact where x**k is an integer below 2**24 (representable: an error under 1/2 ulp lands on it);
    # above, a result on an exact tie between two floats (31**5 = 28629151) may round either way
    # (exp(y log x) is not exact), and negative powers are within the 1 ulp bound
    x = np.arange(-50, 51, dtype=F32)
    for k in range(-3, 8):
        _, _, ours = pow_run(x, F32(k))
        with np.errstate(divide="ignore"):
            want = (x.astype(F64) ** k).astype(F32)
        small = (np.abs(want) < 2**24) & (k >= 0)
        assert np.array_equal(ours[small], want[small]), k
        assert ulps(ours, want).max() <= 1 and np.array_equal(np.isinf(ours), np.isinf(want))


# ---- vectorization -----------------------------------------------------------------------------
X86 = platform.machine().lower() in ("x86_64", "amd64")
HOST_FEATURES = llvm.get_host_cpu_features() if X86 else {}
AVX2 = X86 and HOST_FEATURES.get("avx2", False) and HOST_FEATURES.get("fma", False)


# A packed fma writing a ymm / zmm register; its first source may be a register or, when the loop
# spills its constants (a bounds-checked build holds more registers), a memory operand.
PACKED_FMA = r"\bvfn?m(?:add|sub)\d{{3}}{}\s+[^\n]*%[yz]mm"


def kernel_assembly(loop, signature):
    """The loop's own function (numba appends its Python wrapper after .Lfunc_end0)."""
    return loop.inspect_asm(signature).split(".Lfunc_end0")[0]


@pytest.mark.skipif(not AVX2, reason="checks x86 AVX2 / AVX-512 packed instructions")
@pytest.mark.parametrize("name", UNARY + ["pow", "exp_times_2_64"])
def test_loops_vectorize_without_libm_calls(name):
    if name == "pow":
        loop = _pow_loop
        x = np.ones(64, F32)
        loop(x, x, np.empty_like(x))
    else:
        run(name, np.ones(64, F32))
        loop = _LOOPS[name]
    text = kernel_assembly(loop, loop.signatures[0])
    assert not re.search(r"\bcall", text), re.findall(r"call\w*\s+\S+", text)
    assert not re.search(r"(expf|logf|tanhf|erff|sinf|cosf|powf|fmaf|exp|log)@", text)
    if name in ("pow", "sin", "cos"):  # computed in float64 (documented): packed double math
        assert re.search(PACKED_FMA.format("pd"), text) and re.search(r"\bvcvtpd2ps\s+%[yz]mm", text)
    else:
        assert re.search(PACKED_FMA.format("ps"), text), "no packed float32 fma"
        assert not re.search(r"\bv\w+pd\s", text), "a float64 packed op in a float32 function"
    if vmath._HOST_AVX512 and _native_width_is_512():  # as wide as numba's own plain loops
        assert re.search(r"\bv\w+p[sd]\s+.*%zmm", text), "no 512-bit packed op on an AVX-512 host"


@numba.njit  # not cached: numba inspects only code it compiled in this process
def _scaled_copy(x, out):
    for i in range(x.size):
        out[i] = x[i] * F32(2.0) + F32(1.0)


def _native_width_is_512() -> bool:
    """Whether LLVM's tuning for this CPU emits 512-bit vectors for a plain float32 loop: AMD Zen 4
    does; Intel's client and server cores (Rocket Lake, Ice Lake, Sapphire Rapids ...) prefer
    256-bit vectors even with AVX-512 present, so the vmath loops are held to ymm there."""
    x = np.ones(64, F32)
    _scaled_copy(x, np.empty_like(x))
    return bool(re.search(r"%zmm", kernel_assembly(_scaled_copy, _scaled_copy.signatures[0])))


# ---- float16 / bfloat16 through float32 ----------------------------------------------------------
def _narrow_loop(fn, decode, encode):
    @numba.njit(nogil=True, error_model="numpy")
    def loop(codes, out):
        for i in range(codes.size):
            out[i] = encode(fn(decode(codes[i])))
    return loop


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "erf", "sin", "cos", "softplus"])
def test_float16_and_bfloat16_through_float32(fmt, name):
    # every 16-bit code: decode to float32 (kernels.bits), vmath, round back; against float64 libm
    # rounded straight to the narrow type: exact but for at most 1 narrow ulp on rare double roundings
    decode, encode, dtype = {"float16": (bits.f16_to_f32, bits.f32_to_f16, np.float16),
                             "bfloat16": (bits.bf16_to_f32, bits.f32_to_bf16, ml_dtypes.bfloat16)}[fmt]
    codes = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty_like(codes)
    _narrow_loop(getattr(vmath, name + "_f32"), decode, encode)(codes, out)
    with np.errstate(all="ignore"):
        x = codes.view(dtype).astype(F64)
        want = REF64[name](x).astype(dtype)
    got = out.view(dtype)
    g32, w32 = got.astype(F32), want.astype(F32)
    both_nan = np.isnan(g32) & np.isnan(w32)
    same = (got.view(np.uint16) == want.view(np.uint16)) | both_nan
    assert same.mean() > 0.999, f"{fmt} {name}: {np.sum(~same)} of {same.size} differ"
    off = ~same
    assert np.isfinite(g32[off]).all() and np.isfinite(w32[off]).all()  # no special value differs
    step = np.abs(got[off].view(np.int16).astype(np.int32) - want[off].view(np.int16).astype(np.int32))
    assert (step <= 1).all() and (np.sign(g32[off]) == np.sign(w32[off])).all()
