"""Branch-free, vectorizable float32 exp, expm1, log, log1p, tanh, sigmoid, erf, sin, cos, softplus, pow.

Measured by ``python benchmarks/vmath_ulp.py`` over ALL 2**32 float32 inputs (pow: a grid, see
below) against the float64 libm function rounded to float32: max ulp on abs(x) <= 2**16 and on
all inputs ("_f32" left off, a = abs(x)); specials: NaN / +-Inf / +-0 inputs bit for bit as numpy
float32 gives them, NaN results quiet.

| function | method                                                                    | ulp in 2**16 | ulp, all | specials |
|----------|---------------------------------------------------------------------------|--------------|----------|----------|
| exp      | Cody-Waite k ln2 + r, 1 + (r + r**2 Q), degree 6; 2**k: vscalefps         | 1            | 1        | exact    |
| expm1    | exp's, 2 (2**(k-1) expm1(r) + 2**(k-1) - 1/2)                             | 1            | 1        | exact    |
| log      | m in [sqrt(1/2), sqrt(2)), degree-10 log1p, e ln2 split                   | 1            | 1        | exact    |
| log1p    | u = 1 + x, its exact error c: log(u) + c / u                              | 1            | 1        | exact    |
| tanh     | odd degree 11 below 0.6, else 1 - 2 / (e**2a + 1)                         | 1            | 1        | exact    |
| sigmoid  | E = e**-a = 2**k (1 + s), 1 / (1 + E) Newton-refined                      | 1            | 1        | exact    |
| erf      | odd degree 11 below 0.75, else 1 - 2**h(a), h(a) ~ log2 erfc(a), degree 6 | 1            | 1        | exact    |
| sin, cos | x 2/pi in float64: 2/pi to 106 bits (mod 4 above 2**50), degree 7 / 8     | 1            | 1        | exact    |
| softplus | max(x, 0) + log1p(e**-a)                                                  | 1            | 1        | exact    |
| pow      | e**(y log a): log in float64, exp in float32                              | 1 (grid)     | 1 (grid) | exact    |

exp_times_2_64 (softmax rows): 2**64 e**x for x in [-104, 0], exp's reduction and polynomial with
2**(k + 64) added to the exponent bits, below 0.7 * 2**-23 relative error (a strided sweep).

exp: inf from x = 88.7228394 up, 0 from -103.972084 down (numpy's thresholds); subnormal results are
rounded, not flushed (also sigmoid's and softplus's). pow: every 257th float32 x times 47 y
(integers, halves, thirds, negatives, huge, +-inf, NaN, subnormal). pow, sin and cos compute in
float64 (pow: log|x| and y log|x|; sin / cos: the reduction and the polynomials), at half the
SIMD width: sin / cos are correct on every float32 up to 3.4e38, where x 2/pi must be known to
~2**-58 of a quarter turn (see _quarter_turns).

Each function is a numba-inlined scalar (float32 in, float32 out) made of range reduction,
a polynomial and selects: no libm call and no data-dependent branch (both sides of a select
are computed), so a plain loop ``for i in range(n): out[i] = exp_f32(x[i])`` compiled with
``error_model='numpy'`` becomes packed AVX2 / AVX-512 code (the libm calls numba emits for
np.exp / np.tanh / math.erf do not vectorize; gathers are slow on AMD Zen 4, ~2 cycles an
element, so no table lookups either). ulp is measured against the float64 libm function
(numpy's, math.erf for erf) of the float32 input rounded to float32, on the float32 bit grid
(subnormal results counted on the subnormal grid: they are rounded, never flushed); NaN, +-Inf
and +-0 inputs give numpy float32's bits (NaN results are quiet).

Polynomial coefficients are weighted minimax fits (Remez exchange on a dense grid, relative
error of the final function as the weight) made with numpy over the reduced interval named
at each polynomial, rounded to float32 one coefficient at a time with the rest refitted
(sin / cos: float64 coefficients; ``python benchmarks/vmath_ulp.py --fit`` re-derives them).
Constants split into hi + lo parts (ln 2) were computed from ln 2 evaluated to 400 bits with
integer arithmetic; the 2/pi tables are computed at import from pi to 600 bits (Machin's formula
in Python integers).

The fused multiply-adds are llvm.fma: exact products are what the reductions rely on. On a
CPU without FMA (pre-2013 x86) LLVM lowers it to a libm fmaf call: still correct, not fast.
llvm.ldexp (2**k scaling) is vscalefps on AVX-512; elsewhere the exponent-bit scaling is used.
"""
import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import config as numba_config
from numba.core import types
from numba.extending import intrinsic

from .bits import bits_from_f32, bits_from_f64, f32_from_bits, f64_from_bits

_jit = numba.njit(cache=True, nogil=True, inline="always")

F32 = np.float32
I32 = np.int32


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c with one rounding (llvm.fma), for float32 or float64 operands of one type."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        ty = context.get_value_type(signature.args[0])
        fn = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty, ty, ty]))
        return builder.call(fn, args)
    return a(a, b, c), codegen


@intrinsic
def _ldexp(typingctx, p, k):
    """p * 2**k with one rounding (llvm.ldexp: AVX-512 vscalefps in a vector loop), float32 p, int32 k."""
    if not (p == types.float32 and k == types.int32):
        return None

    def codegen(context, builder, signature, args):
        f32, i32 = ir.FloatType(), ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.ldexp", [f32, i32], ir.FunctionType(f32, [f32, i32]))
        return builder.call(fn, args)
    return types.float32(types.float32, types.int32), codegen


@intrinsic
def _copysign(typingctx, magnitude, sign):
    """|magnitude| with the sign bit of sign (llvm.copysign: one bitwise select), float32."""
    if not (magnitude == types.float32 and sign == types.float32):
        return None

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.copysign", [f32], ir.FunctionType(f32, [f32, f32]))
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32), codegen


def _target_has_avx512():
    """Whether numba compiles for an AVX-512 CPU: llvm.ldexp becomes vscalefps there; elsewhere
    LLVM scalarizes it into ldexpf calls, so those targets keep the exponent-bit scaling
    (_scale_bits). NUMBA_CPU_NAME / NUMBA_CPU_FEATURES (cache-portable builds) are honoured."""
    if numba_config.CPU_FEATURES is not None:
        return "+avx512f" in numba_config.CPU_FEATURES.split(",")
    if numba_config.CPU_NAME not in (None, "host"):
        return False
    return bool(llvm_binding.get_host_cpu_features().get("avx512f", False))


_HOST_AVX512 = _target_has_avx512()


# ---- constants -------------------------------------------------------------------------------
_ONE = F32(1.0)
_HALF = F32(0.5)
_INF = F32(np.inf)
_NAN = F32(np.nan)
# 1.5 * 2**23: fma(x, c, MAGIC) rounds x * c to an integer k kept in the low mantissa bits of
# the sum (|k| < 2**22), so one add gives k both as a float (sum - MAGIC) and as int bits.
_MAGIC = F32(12582912.0)
_MAGIC_BITS = 0x4B400000
_LOG2E = F32(1.4426950216293335)  # 1/ln 2 rounded to float32
_LN2_HI = F32(0.6931471824645996)  # ln 2 rounded to float32: k * _LN2_HI is exact inside an fma
_LN2_LO = F32(-1.9046542121259336e-09)  # ln 2 - _LN2_HI
_LN2_HI16 = F32(0.693145751953125)  # ln 2 to 16 bits: e * _LN2_HI16 is exact in float32 for |e| < 2**8
_LN2_LO16 = F32(1.428606765330187e-06)  # ln 2 - _LN2_HI16
_SQRT_HALF_BITS = 0x3F3504F3  # float32 sqrt(1/2): mantissas are reduced into [sqrt(1/2), sqrt(2))
_MAGIC_F64 = 6755399441055744.0  # 1.5 * 2**52: p + _MAGIC_F64 rounds p to an integer k, k mod 2**32 in the low word


def _pi_scaled(bits):
    """pi * 2**bits truncated to an integer (Machin: pi = 16 atan(1/5) - 4 atan(1/239), in
    Python integers with 64 guard bits; exact in every bit that the tables below use)."""
    one = 1 << (bits + 64)

    def atan_inverse(n):
        total = term = one // n
        k, sign = 1, -1
        while term:
            term //= n * n
            k += 2
            total += sign * (term // k)
            sign = -sign
        return total
    return (16 * atan_inverse(5) - 4 * atan_inverse(239)) >> 64


def _two_over_pi_parts(exponent):
    """(h0, h1), float64 hi + lo of T = V * 2**-exponent, where V = (2**exponent * 2/pi) mod 4
    taken in [-2, 2): any x that is an integer multiple of 2**exponent has x T = x 2/pi - 4 N
    for an integer N, so x T is x 2/pi reduced mod 4 (the quadrant) with no big product.
    exponent=None: T = 2/pi itself. From 2/pi to 600 bits (exact rationals, float() rounds
    correctly)."""
    from fractions import Fraction
    two_over_pi = Fraction((1 << 1201) // _pi_scaled(600), 1 << 600)
    if exponent is None:
        t = two_over_pi
    else:
        v = (two_over_pi * Fraction(2) ** exponent) % 4
        t = (v - 4 if v >= 2 else v) / Fraction(2) ** exponent
    h0 = float(t)
    if exponent is None and h0 > t:  # 2/pi itself: h0 rounded down, so h1 > 0 and -0 * h1 = -0
        h0 = float(np.nextafter(h0, 0.0))
    return h0, float(t - Fraction(h0))


# sin / cos: x 2/pi = k + y in float64 (see _quarter_turns), T = h0 + h1 picked by |x|:
# |x| < 2**50: T = 2/pi; a larger x lies in [2**b, 2**b'), b = 50, 77, 103 (b' the next, 128 for
# the last), and is an integer multiple of 2**(b - 23), so that group's T = 2**(23-b)
# ((2**(b-23) 2/pi) mod 4) has x T = x 2/pi - 4 N (N an integer): the quadrant and y survive,
# |x h0| stays below 2**49.4 (the groups were chosen with the exact tables: |x h1| <= 0.081,
# truncation after h1 below 2**-32 of the smallest |y| of each binade).
_RED_H0_0, _RED_H1_0 = _two_over_pi_parts(None)
_RED_H0_1, _RED_H1_1 = _two_over_pi_parts(50 - 23)
_RED_H0_2, _RED_H1_2 = _two_over_pi_parts(77 - 23)
_RED_H0_3, _RED_H1_3 = _two_over_pi_parts(103 - 23)
_RED_B1, _RED_B2, _RED_B3 = F32(2.0 ** 50), F32(2.0 ** 77), F32(2.0 ** 103)
SIN_COS_LIMIT = np.inf  # kept for callers: sin / cos are accurate on every float32


# ---- shared pieces ---------------------------------------------------------------------------
@_jit
def _pow2(k):
    """2.0**k as float32 for int32 k in [-126, 127] (exponent bits)."""
    return f32_from_bits(np.uint32(I32(k + I32(127)) << I32(23)))


@_jit
def _scale_bits(p, k):
    """p * 2**k for p in [0.5, 2] and int32 k in [-151, 128] with ONE rounding: 2**k is split
    into two normal factors, p * 2**(k >> 1) is exact, the second product rounds once, so
    results in the subnormal range are correctly rounded (no flush) and overflow gives inf."""
    k1 = I32(k >> I32(1))
    return p * _pow2(k1) * _pow2(I32(k - k1))


if _HOST_AVX512:
    @_jit
    def _scale(p, k):
        """p * 2**k, one rounding (subnormal results rounded, overflow inf): vscalefps."""
        return _ldexp(p, k)
else:
    _scale = _scale_bits


@_jit
def _clamp(x, low, high):
    """x limited to [low, high]; NaN passes through (each compare is false for NaN)."""
    x = high if x > high else x
    return low if x < low else x


@_jit
def _exp_q(r):
    """Q of _exp_poly (e**r = 1 + r + r**2 Q(r))."""
    q = F32(0.00138388411141932)
    q = _fma(q, r, F32(0.008369190618395805))
    q = _fma(q, r, F32(0.04166810214519501))
    q = _fma(q, r, F32(0.16666516661643982))
    return _fma(q, r, F32(0.4999999403953552))


@_jit
def _exp_poly(r):
    """expm1(r) - r = r**2 Q(r) on |r| <= ln(2)/2 + 1e-4; degree-4 Q, relative error of
    e**r = 1 + r + r**2 Q below 2**-28.2 (fit on e**r's relative error)."""
    q = F32(0.00138388411141932)
    q = _fma(q, r, F32(0.008369190618395805))
    q = _fma(q, r, F32(0.04166810214519501))
    q = _fma(q, r, F32(0.16666516661643982))
    q = _fma(q, r, F32(0.4999999403953552))
    return r * r * q


@_jit
def _exp_reduce(x):
    """x = k ln2 + r, |r| <= ln(2)/2 + 1e-4, for |x| <= 104: returns (r, k as int32). k*ln2 is
    taken off in two fmas; the first is exact (k * _LN2_HI fits the fma's product, the
    difference is < 1/2 on a 2**-25 grid), the second rounds once."""
    shifted = _fma(x, _LOG2E, _MAGIC)
    k = I32(I32(bits_from_f32(shifted)) - I32(_MAGIC_BITS))
    kf = F32(k)  # = shifted - _MAGIC; as a conversion it is shared with llvm.ldexp's own (vscalefps)
    r = _fma(-kf, _LN2_HI, x)
    return _fma(-kf, _LN2_LO, r), k


@_jit
def _exp_reduce_sub(x):
    """_exp_reduce with k as shifted - _MAGIC (an add, not a conversion): for expm1, which
    builds 2**k from the bits and has no ldexp conversion to share."""
    shifted = _fma(x, _LOG2E, _MAGIC)
    k = shifted - _MAGIC
    r = _fma(-k, _LN2_HI, x)
    return _fma(-k, _LN2_LO, r), I32(I32(bits_from_f32(shifted)) - I32(_MAGIC_BITS))


@_jit
def _exp_reduce_short(x):
    """_exp_reduce with ln 2 as one float32 (_LN2_HI, 1.9e-9 low): r is off by k * 1.9e-9,
    a relative error of e**x that tanh and erf (|k| <= 29) scale down below their ulp (their
    results depend on e**x through a factor 2**-k or less)."""
    shifted = _fma(x, _LOG2E, _MAGIC)
    r = _fma(_MAGIC - shifted, _LN2_HI, x)
    return r, I32(I32(bits_from_f32(shifted)) - I32(_MAGIC_BITS))


@_jit
def _expm1_reduced(r):
    """expm1(r) = hi + lo for |r| <= ln(2)/2: r + r**2 Q(r) split exactly (Fast2Sum: |r| >= the
    polynomial part), so callers can add 1 or scale without losing the low bits."""
    p = _exp_poly(r)
    hi = r + p
    return hi, (r - hi) + p


@_jit
def _exp_reduced(r):
    """e**r = hi + lo for |r| <= ln(2)/2 (1 + expm1(r) split exactly by Fast2Sum)."""
    q_hi, q_lo = _expm1_reduced(r)
    hi = _ONE + q_hi
    return hi, ((_ONE - hi) + q_hi) + q_lo


@_jit
def _log_poly(f):
    """log1p(f) - f + f**2/2 = f**3 P(f) on f in [sqrt(1/2)-1, sqrt(2)-1]; degree-7 P,
    relative error of log1p(f) below 2**-27 (fit on log1p's relative error)."""
    p = F32(-0.07646345347166061)
    p = _fma(p, f, F32(0.12769834697246552))
    p = _fma(p, f, F32(-0.13160227239131927))
    p = _fma(p, f, F32(0.14200986921787262))
    p = _fma(p, f, F32(-0.1662333458662033))
    p = _fma(p, f, F32(0.20001260936260223))
    p = _fma(p, f, F32(-0.250008225440979))
    p = _fma(p, f, F32(0.3333333134651184))
    return f * f * _fma(p, f, -_HALF)  # -f**2/2 + f**3 P


@_jit
def _log_parts(u):
    """u = 2**e * m, m in [sqrt(1/2), sqrt(2)), for a positive normal float32 u (subnormals are
    scaled by the caller): returns (m - 1, e as float32), both exact."""
    word = I32(I32(bits_from_f32(u)) - I32(_SQRT_HALF_BITS))
    exponent = I32(word >> I32(23))  # (numba widens int32 arithmetic to int64: narrow it back)
    m = f32_from_bits(np.uint32(I32(word & I32(0x007FFFFF)) + I32(_SQRT_HALF_BITS)))
    return m - _ONE, F32(exponent)


@_jit
def _log_sum(f, e, extra):
    """e ln2 + log1p(f) + extra with one final rounding of significance: e * _LN2_HI16 is
    exact, its sum with f is split exactly (Fast2Sum: |e ln2| >= 0.69 > |f| unless e = 0,
    where the sum is f itself), every small term joins the low part."""
    high = e * _LN2_HI16
    s = high + f
    err = f - (s - high)
    low = _fma(e, _LN2_LO16, _log_poly(f)) + (err + extra)
    return s + low


@_jit
def _quarter_turns(x):
    """x 2/pi = k + y for every float32 x, in float64: returns (y, shifted), |y| <= 0.581, and
    k mod 2**32 in the low word of shifted's bits (NaN / inf: y NaN). T = h0 + h1 (106 bits) is
    the exponent group's 2/pi (mod 4 * 2**-e, see _two_over_pi_parts), picked by selects on |x|.
    k = round(x h0): an fma with the 1.5 * 2**52 shift (|x h0| < 2**49.4); f = x h0 - k in one
    fma: exact for |x| >= 2**23 (|f| <= 1/2 on a grid of at most 52 bits), below rounded
    relative to f only; y = x h1 + f rounds once (|x h1| <= 0.081: y overshoots 1/2 that
    much, the polynomials cover it). Truncating T after h1 costs at most 2**-32 of y where the
    float32 closest to a multiple of pi/2 (16367173 * 2**72, y = 2**-29.9) lies, less elsewhere.
    For x = -0, h1 > 0 (h0 rounded down) keeps y = -0."""
    a = abs(x)
    h0 = _RED_H0_0
    h1 = _RED_H1_0
    h0 = _RED_H0_1 if a >= _RED_B1 else h0
    h1 = _RED_H1_1 if a >= _RED_B1 else h1
    h0 = _RED_H0_2 if a >= _RED_B2 else h0
    h1 = _RED_H1_2 if a >= _RED_B2 else h1
    h0 = _RED_H0_3 if a >= _RED_B3 else h0
    h1 = _RED_H1_3 if a >= _RED_B3 else h1
    xd = np.float64(x)
    shifted = _fma(xd, h0, _MAGIC_F64)
    k = shifted - _MAGIC_F64
    y = _fma(xd, h1, _fma(xd, h0, -k))
    return y, shifted


@_jit
def _sin_cos_quarter(y):
    """(sin(pi/2 y), cos(pi/2 y)) in float64 for |y| <= 0.59: sin = y P(y**2), cos = 1 + y**2 Q(y**2),
    degree 3 each, float64 coefficients (relative error below 2**-26.3 and 2**-31.4: with the
    float64 evaluation and one rounding to float32, under 0.71 ulp)."""
    t = y * y
    s = _fma(_fma(_fma(-0.004570290535035199, t, 0.07966816227136339), t, -0.6459623654522905), t, 1.5707963073787996)
    c = _fma(_fma(_fma(0.0008975864318375967, t, -0.02085696594726013), t, 0.2536687270504564), t, -1.2337005205595708)
    return s * y, _fma(c, t, 1.0)


# _UNDERFLOW_NOTE: an input whose exponential is 0 (x < -104: -inf, a masked score) is computed
# on 0 and its result selected away. Computing it on the clamp (-104) makes the scaling produce
# a subnormal, which costs this CPU a microcode assist per element: exp_f32 over 4M elements
# took 37 ms at -104, -200 or -inf against 1.4 ms at 0 or -50, and a causal softmax over
# [16, 1024, 1024] (half the scores -inf) 121 ms against 15 ms unmasked. Results whose value
# really is subnormal (x in (-104, -87.3)) still pay it; they are rare.

# ---- public functions ------------------------------------------------------------------------
@_jit
def exp_f32(x):
    """e**x. Cody-Waite reduction x = k ln2 + r (fma), degree-6 minimax polynomial, 2**k applied
    in two factors so subnormal results are correctly rounded. Overflow to inf above
    88.7228394, 0 at and below -103.972084 (numpy's thresholds). Max 1 ulp, all 2**32 inputs."""
    x = F32(x)
    far = x < F32(-104.0)  # the result 0; computed on 0 instead (see _UNDERFLOW_NOTE)
    xc = _clamp(F32(0.0) if far else x, F32(-104.0), F32(89.0))  # above 89: inf falls out of the scaling
    r, k = _exp_reduce(xc)
    return F32(0.0) if far else _scale(_ONE + _fma(r * r, _exp_q(r), r), k)


@_jit
def exp_times_2_64_f32(x):
    """2**64 e**x for x <= 0, not NaN: softmax's e**(v - max), in a range where every result is a
    normal float32 (2**-86 at x = -104), so 2**k is an add to the exponent bits instead of
    exp_f32's two factors. 0 below -104 and for -inf. Relative error below 0.7 * 2**-23 on
    [-104, 0] (tests/kernels/test_vmath.py), also where e**x alone would be subnormal: a row
    divided by its sum of these (the 2**64 cancels) rounds its subnormal results only once.
    x > 0 or NaN gives an unspecified value (the exponent add overflows; no NaN select: it cost
    25% of the loop's time); the softmax row rules both out (a row whose max is not finite is
    NaN through its sum)."""
    x = F32(x)
    far = x < F32(-104.0)  # (the result 0; computed on 0 instead, see _UNDERFLOW_NOTE)
    r, k = _exp_reduce(F32(0.0) if far else x)
    p = _ONE + _fma(r * r, _exp_q(r), r)
    scaled = f32_from_bits(bits_from_f32(p) + (np.uint32(I32(k + I32(64))) << np.uint32(23)))
    return F32(0.0) if far else scaled


@_jit
def expm1_f32(x):
    """e**x - 1. Same reduction and polynomial as exp_f32 (expm1(r) = r + r**2 Q(r) is accurate
    relative to itself, kept as hi + lo), recombined as 2 * (2**(k-1) expm1(r) + (2**(k-1) - 1/2))
    so k = 128 does not overflow 2**k early; |x| < 2**-25 returns x (keeps -0 and subnormals).
    Max 1 ulp, all inputs."""
    x = F32(x)
    xc = _clamp(x, F32(-80.0), F32(89.0))  # expm1(-80) rounds to -1; keeps 2**(k-1) normal
    r, k = _exp_reduce_sub(xc)
    q_hi, q_lo = _expm1_reduced(r)
    half_scale = _pow2(I32(k - I32(1)))
    result = F32(2.0) * (_fma(half_scale, q_hi, half_scale - _HALF) + half_scale * q_lo)
    return x if abs(x) < F32(2.9802322387695312e-08) else result


@_jit
def log_f32(x):
    """Natural log. x = 2**e m with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled by
    2**23 first), log1p(m - 1) by _log_poly, e ln2 added in an exact split (_log_sum): 2.6% of
    results 1 ulp off (the shorter e hi + (f + (e lo + tail)) form: 8-12%, 15% faster). log(+-0)
    = -inf, log(x < 0) = nan, log(inf) = inf. Max 1 ulp, all inputs."""
    x = F32(x)
    subnormal = x < F32(1.1754943508222875e-38)
    u = x * F32(8388608.0) if subnormal else x
    f, e = _log_parts(u)
    e = e - F32(23.0) if subnormal else e
    result = _log_sum(f, e, F32(0.0))
    result = _NAN if x < F32(0.0) else result
    result = -_INF if x == F32(0.0) else result
    return result if x < _INF else x + x  # inf -> inf, NaN -> quiet NaN


@_jit
def log1p_f32(x):
    """log(1 + x). u = 1 + x rounded, c = x - (u - 1) its exact error, then log(u) as in log_f32
    plus c / u; |x| < 2**-24 returns x. log1p(-1) = -inf, below -1 nan. Max 1 ulp, all inputs."""
    x = F32(x)
    u = _ONE + x
    c = x - (u - _ONE)
    f, e = _log_parts(u)
    result = _log_sum(f, e, c / u)
    result = x if abs(x) < F32(5.960464477539063e-08) else result
    result = _NAN if x < -_ONE else result
    result = -_INF if x == -_ONE else result
    return result if x < _INF else x + x


@_jit
def _tanh_poly(x):
    """tanh x = x + x**3 P(x**2) on |x| <= 0.6 (+1e-3); degree-4 P, relative error below 2**-28.4."""
    t = x * x
    p = F32(-0.0058925761841237545)
    p = _fma(p, t, F32(0.020794786512851715))
    p = _fma(p, t, F32(-0.053783856332302094))
    p = _fma(p, t, F32(0.13331930339336395))
    p = _fma(p, t, F32(-0.33333298563957214))
    return _fma(x * t, p, x)


@_jit
def tanh_f32(x):
    """Hyperbolic tangent. a = |x| < 0.6: odd minimax polynomial; else 1 - 2 / (e**(2a) + 1)
    (2a clamped to 20: tanh is 1.0 in float32 from |x| ~ 9.01); the sign of x put on last
    (also keeps -0). Max 1 ulp, all inputs."""
    x = F32(x)
    a = abs(x)
    twice = a + a
    r, k = _exp_reduce_short(F32(20.0) if twice > F32(20.0) else twice)  # NaN passes
    d = _fma(_ONE + _fma(r * r, _exp_q(r), r), _pow2(k), _ONE)  # e**(2a) + 1, rounded once
    big = _ONE - F32(2.0) / d
    return _copysign(_tanh_poly(a) if a < F32(0.6) else big, x)


@_jit
def sigmoid_f32(x):
    """1 / (1 + e**-x). E = e**-|x| = 2**k (1 + s) in (0, 1] (never overflows); 1/(1+E) refined by
    one Newton step against the unrounded 1 + E, then x >= 0: that; x < 0: E/(1+E)
    as 2**k ((1 + s) / (1+E)) in one fma and one scaling (subnormal results rounded, not
    flushed). sigmoid(+inf) = 1, sigmoid(-inf) = 0, NaN -> NaN. Max 1 ulp, all inputs."""
    x = F32(x)
    minus_a = -abs(x)
    far = minus_a < F32(-104.0)  # E = 0: the result 1 or 0, computed on 0 instead (_UNDERFLOW_NOTE)
    r, k = _exp_reduce(F32(0.0) if far else minus_a)  # NaN passes
    s = _fma(r * r, _exp_q(r), r)  # e**r - 1
    e = _scale(_ONE + s, k)
    recip = _ONE / (_ONE + e)
    # Newton against the unrounded 1 + e: 1 - recip is exact (recip in [1/2, 1]), so the fma
    # gives the residual 1 - recip (1 + e) rounded once (it is ~2**-24, its rounding negligible)
    recip = _fma(recip, _fma(-recip, e, _ONE - recip), recip)
    result = recip if x >= F32(0.0) else _scale(_fma(s, recip, recip), k)
    return (_ONE if x >= F32(0.0) else F32(0.0)) if far else result


@_jit
def _erf_small(x, t):
    """erf x = x (c0 + t Q(t)), t = x**2, |x| < 0.75: c0 = 2/sqrt(pi) split hi + lo so the leading
    product rounds once; degree-4 Q fit on erf's relative error (below 2**-29.1)."""
    q = F32(-0.0006784011493436992)
    q = _fma(q, t, F32(0.005119782406836748))
    q = _fma(q, t, F32(-0.02683771401643753))
    q = _fma(q, t, F32(0.11283452063798904))
    q = _fma(q, t, F32(-0.3761262595653534))
    return _fma(x, F32(1.128379225730896), x * _fma(q, t, F32(-5.8635382771399236e-08)))


@_jit
def _log2_erfc(a):
    """log2(erfc(a)) on [0.75, 3.95] as a degree-6 polynomial in a - 0.75 (the accurate end at the
    origin of the Horner sum); error in erf (erfc ln2 times it) below 2**-27.8 of erf."""
    u = a - F32(0.75)
    h = F32(0.0003048037178814411)
    h = _fma(h, u, F32(-0.0032255013938993216))
    h = _fma(h, u, F32(0.018189143389463425))
    h = _fma(h, u, F32(-0.07623530924320221))
    h = _fma(h, u, F32(-1.1655020713806152))
    h = _fma(h, u, F32(-3.2112555503845215))
    return _fma(h, u, F32(-1.7916357517242432))


@_jit
def _exp2_frac(f):
    """2**f = 1 + f P(f) for |f| <= 1/2: degree-4 P, relative error below 2**-23.3 (enough where
    erf uses it: the result is scaled by erfc <= 0.27 before it meets erf's ulp)."""
    p = F32(0.001330459606833756)
    p = _fma(p, f, F32(0.009672741405665874))
    p = _fma(p, f, F32(0.055506493896245956))
    p = _fma(p, f, F32(0.24022223055362701))
    p = _fma(p, f, F32(0.6931470036506653))
    return _fma(p, f, _ONE)


@_jit
def erf_f32(x):
    """Error function. a = |x| < 0.75: odd polynomial; else erf = 1 - erfc = 1 - 2**h(a), h a
    polynomial fit of log2(erfc(a)) on [0.75, 3.95] (a clamped to 3.95, where erf is 1.0 in
    float32), 2**h = 2**k 2**f with k = round(h) as exponent bits; both branches are computed,
    the sign of x put on last. Max 1 ulp, all inputs."""
    x = F32(x)
    a = abs(x)
    h = _log2_erfc(F32(3.95) if a > F32(3.95) else a)  # NaN passes
    shifted = h + _MAGIC
    big = _fma(-_exp2_frac(h - (shifted - _MAGIC)), _pow2(I32(I32(bits_from_f32(shifted)) - I32(_MAGIC_BITS))), _ONE)
    return _copysign(_erf_small(a, a * a) if a < F32(0.75) else big, x)


@_jit
def sin_f32(x):
    """Sine of every float32. x 2/pi = k + y in float64 (_quarter_turns: 2/pi to 106 bits, mod 4
    per exponent group above 2**51), sin or cos of pi/2 y by k's low bits, rounded once to
    float32. Max 1 ulp on all 2**32 inputs; sin(+-inf) = nan, sin(-0) = -0."""
    x = F32(x)
    y, shifted = _quarter_turns(x)
    sin, cos = _sin_cos_quarter(y)
    n = bits_from_f64(shifted)
    result = cos if n & np.uint64(1) else sin
    result = -result if n & np.uint64(2) else result
    return F32(result)


@_jit
def cos_f32(x):
    """Cosine: sin_f32's reduction, quadrant k + 1. Max 1 ulp on all inputs; cos(+-inf) = nan."""
    x = F32(x)
    y, shifted = _quarter_turns(x)
    sin, cos = _sin_cos_quarter(y)
    n = bits_from_f64(shifted)
    result = sin if n & np.uint64(1) else cos
    result = -result if (n + np.uint64(1)) & np.uint64(2) else result
    return F32(result)


@_jit
def softplus_f32(x):
    """log(1 + e**x) = max(x, 0) + log1p(e**-|x|): never overflows; x for large x, e**x (also
    subnormal) for very negative x. softplus(inf) = inf, softplus(-inf) = 0.
    Max 1 ulp, all inputs."""
    x = F32(x)
    minus_a = -abs(x)
    far = minus_a < F32(-104.0)  # e**-|x| = 0: the tail 0, computed on 0 instead (_UNDERFLOW_NOTE)
    xc = _clamp(F32(0.0) if far else minus_a, F32(-104.0), F32(0.0))
    r, k = _exp_reduce(xc)
    hi, lo = _exp_reduced(r)
    e, e_lo = _scale(hi, k), _scale(lo, k)
    u = _ONE + e
    c = (e - (u - _ONE)) + e_lo  # 1 + E = u + c
    f, ex = _log_parts(u)
    tail = _log_sum(f, ex, c / u)
    tail = e + e_lo if e < F32(5.960464477539063e-08) else tail
    return (x if x > F32(0.0) else F32(0.0)) + (F32(0.0) if far else tail)


# float64 pieces of pow
_SQRT_HALF_BITS64 = np.int64(0x3FE6A09E667F3BCD)
_LOG2E_F64 = 1.4426950408889634
_LN2_HI_F64 = 0.6931471805599453  # ln 2 rounded to float64
_LN2_LO_F64 = 2.3190468138462996e-17  # ln 2 - _LN2_HI_F64


@_jit
def _log_f64(a):
    """log(a) for a positive normal float64 (every float32 but 0 / inf): m in [sqrt(1/2), sqrt(2)),
    s = (m-1)/(m+1), log m = 2s + s**3 L(s**2) with a degree-4 L (relative error below 2**-43.7)."""
    word = np.int64(bits_from_f64(a)) - _SQRT_HALF_BITS64
    exponent = np.float64(word >> np.int64(52))
    m = f64_from_bits(np.uint64((word & np.int64(0x000FFFFFFFFFFFFF)) + _SQRT_HALF_BITS64))
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = 0.19819863275397104
    p = _fma(p, z, 0.22158523258806903)
    p = _fma(p, z, 0.2857256582254655)
    p = _fma(p, z, 0.39999991011203406)
    p = _fma(p, z, 0.6666666668959812)
    return _fma(exponent, _LN2_HI_F64, _fma(s * z, p, s + s))


@_jit
def _exp_of_f64(t):
    """e**t as float32 for a float64 t: k and r = t - k ln2 in float64 (r exact to ~2**-70), r
    handed to the float32 polynomial as r32 + r_lo, 2**k by _scale (subnormals, overflow)."""
    far = t < -104.0  # the result 0, computed on 0 instead (_UNDERFLOW_NOTE)
    t = _clamp(0.0 if far else t, -104.0, 89.0)
    k = np.rint(t * _LOG2E_F64)
    k = 0.0 if k != k else k  # NaN t: any k (the caller's selects replace the result)
    r = _fma(-k, _LN2_HI_F64, t)
    r = _fma(-k, _LN2_LO_F64, r)
    r32 = F32(r)
    r_lo = F32(r - np.float64(r32))
    hi, lo = _exp_reduced(r32)
    return F32(0.0) if far else _scale(hi + _fma(hi, r_lo, lo), I32(k))


@_jit
def pow_f32(x, y):
    """x**y = e**(y log|x|) with C99 / numpy's special cases (signs of odd integer powers, NaN
    for negative x and non-integer y, pow(x, 0) = pow(1, y) = 1, zeros and infinities).
    log|x| and y log|x| are float64 (half the SIMD width): a float32 result needs y log x to
    ~2**-30 absolute, beyond float32's reach; the exp is float32 on r = t - k ln2 split hi + lo
    (_exp_of_f64). An exact tie between two floats (31**5) may round either way (numpy's pow
    is correctly rounded there). Max 1 ulp on the sweep's grid."""
    x = F32(x)
    y = F32(y)
    a = np.float64(abs(x))
    log_a = _log_f64(a)
    log_a = -np.inf if a == 0.0 else log_a
    log_a = np.inf if a == np.inf else log_a
    result = _exp_of_f64(np.float64(y) * log_a)
    y_integer = np.rint(y) == y and abs(y) < _INF
    y_odd = y_integer and abs(y) < F32(16777216.0) and np.rint(y * _HALF) != y * _HALF
    negative = (bits_from_f32(x) >> np.uint32(31)) != np.uint32(0)
    result = -result if negative and y_odd else result
    result = _NAN if x < F32(0.0) and x > -_INF and not y_integer and abs(y) < _INF else result
    result = x + y if x != x or y != y else result
    result = _ONE if y == F32(0.0) or x == _ONE else result
    return _ONE if x == -_ONE and abs(y) == _INF else result
