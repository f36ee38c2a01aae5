"""Branch-free, vectorizable float32 exp, expm1, log, log1p, tanh, sigmoid, erf, sin, cos, softplus, pow.

Measured by ``python benchmarks/vmath_ulp.py`` over ALL 2**32 float32 inputs (pow: a grid, see
below) against the float64 libm function rounded to float32: max ulp on abs(x) <= 2**16 and on
all inputs ("_f32" left off, a = abs(x)); specials: NaN / +-Inf / +-0 inputs bit for bit as numpy
float32 gives them, NaN results quiet.

| function | method                                                    | ulp in 2**16 | ulp, all      | specials |
|----------|-----------------------------------------------------------|--------------|---------------|----------|
| exp      | Cody-Waite k ln2 + r, degree-6 minimax, 2**k in 2 factors | 1            | 1             | exact    |
| expm1    | exp's, 2 (2**(k-1) expm1(r) + 2**(k-1) - 1/2)             | 1            | 1             | exact    |
| log      | m in [sqrt(1/2), sqrt(2)), degree-10 log1p, e ln2 split   | 1            | 1             | exact    |
| log1p    | u = 1 + x, its exact error c: log(u) + c / u              | 1            | 1             | exact    |
| tanh     | odd degree 13 below 0.625, else 1 - 2 / (e**2a + 1)       | 1            | 1             | exact    |
| sigmoid  | E = e**-a as hi + lo, 1 / (1 + E) Newton-refined          | 1            | 1             | exact    |
| erf      | odd polynomial below 1, else 1 - e**-x**2 g(a)            | 1            | 1             | exact    |
| sin, cos | 3-part Cody-Waite pi/2 kept hi + lo, minimax              | 1            | 1 below 2**22 | exact    |
| softplus | max(x, 0) + log1p(e**-a)                                  | 1            | 1             | exact    |
| pow      | e**(y log a): log in float64, exp in float32              | 1 (grid)     | 1 (grid)      | exact    |

exp: inf from x = 88.7228394 up, 0 from -103.972084 down (numpy's thresholds); subnormal results are
rounded, not flushed (also sigmoid's and softplus's). sin / cos: |x| >= 2**22 gives NaN (no
Payne-Hanek reduction). pow: every 257th float32 x times 47 y (integers, halves, thirds,
negatives, huge, +-inf, NaN, subnormal); it alone computes in float64 (log|x| and y log|x|).

Each function is a numba-inlined scalar (float32 in, float32 out) made of range reduction,
a polynomial and selects: no libm call and no data-dependent branch, so a plain loop
``for i in range(n): out[i] = exp_f32(x[i])`` compiled with ``error_model='numpy'`` becomes
packed AVX2 / AVX-512 code (the libm calls numba emits for np.exp / np.tanh / math.erf do
not vectorize). ulp is measured against the float64 libm function (numpy's, math.erf for erf)
of the float32 input rounded to float32, on the float32 bit grid (subnormal results counted
on the subnormal grid: they are rounded, never flushed); NaN, +-Inf and +-0 inputs give numpy
float32's bits (NaN results are quiet).

Polynomial coefficients are weighted minimax fits (Remez exchange on a dense grid, relative
error of the final function as the weight) made with numpy over the reduced interval named
at each polynomial, rounded to float32 one coefficient at a time with the rest refitted
(``python benchmarks/vmath_ulp.py --fit`` re-derives them). Constants split into hi + lo parts
(pi/2, ln 2) were computed from pi and ln 2 evaluated to 400 bits with integer arithmetic.

The fused multiply-adds are llvm.fma: exact products are what the reductions rely on. On a
CPU without FMA (pre-2013 x86) LLVM lowers it to a libm fmaf call: still correct, not fast.
"""
import numba
import numpy as np
from llvmlite import ir
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
# pi/2 = _PIO2_1 + _PIO2_2 + _PIO2_3 + 1.1e-23 (each part pi/2's remainder rounded to float32)
_PIO2_1 = F32(1.5707963705062866)
_PIO2_2 = F32(-4.371138828673793e-08)
_PIO2_3 = F32(-1.7151245100058819e-15)
_TWO_OVER_PI = F32(0.6366197466850281)
# sin / cos reduce |x| < 2**22 accurately (k fits the magic shift, x - k * _PIO2_1 is exact);
# beyond, no reduction is attempted and they return NaN (a Payne-Hanek table would be needed).
SIN_COS_LIMIT = 4194304.0
_SIN_COS_LIMIT = F32(SIN_COS_LIMIT)


# ---- shared pieces ---------------------------------------------------------------------------
@_jit
def _pow2(k):
    """2.0**k as float32 for int32 k in [-126, 127] (exponent bits)."""
    return f32_from_bits(np.uint32(I32(k + I32(127)) << I32(23)))


@_jit
def _scale(p, k):
    """p * 2**k for p in [0.5, 2] and int32 k in [-151, 128] with ONE rounding: 2**k is split
    into two normal factors, p * 2**(k >> 1) is exact, the second product rounds once, so
    results in the subnormal range are correctly rounded (no flush) and overflow gives inf."""
    k1 = I32(k >> I32(1))
    return p * _pow2(k1) * _pow2(I32(k - k1))


@_jit
def _clamp(x, low, high):
    """x limited to [low, high]; NaN passes through (each compare is false for NaN)."""
    x = high if x > high else x
    return low if x < low else x


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
    k = shifted - _MAGIC
    r = _fma(-k, _LN2_HI, x)
    r = _fma(-k, _LN2_LO, r)
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
def _exp_normal(x):
    """e**x for x in [-87, 20] (2**k a normal float: tanh and erf's callers stay in it)."""
    r, k = _exp_reduce(x)
    hi, lo = _exp_reduced(r)
    return (hi + lo) * _pow2(k)


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
def _pio2_reduce(x):
    """x = n pi/2 + (hi + lo) for |x| < 2**22; returns (hi, lo, n & 3). n is the nearest integer
    to x * float32(2/pi), which is 2.6e-8 below 2/pi, so |hi| <= pi/4 + 4.1e-8 |x| (0.955 at
    2**22; the polynomials are fit to 0.97). x - k*_PIO2_1 is exact in the fma (|difference| < 1
    on a 2**-24 grid); k*_PIO2_2 is split exactly (TwoProduct by fma) and subtracted with TwoSum,
    so hi + lo carries ~46 bits of the reduced argument: sin/cos stay accurate where x lies
    close to a multiple of pi/2."""
    shifted = _fma(x, _TWO_OVER_PI, _MAGIC)
    k = shifted - _MAGIC
    r1 = _fma(-k, _PIO2_1, x)
    product = k * _PIO2_2
    product_err = _fma(k, _PIO2_2, -product)
    hi = r1 - product
    back = hi - r1
    err = (r1 - (hi - back)) - (product + back)  # TwoSum(r1, -product): hi + err == r1 - product
    lo = _fma(-k, _PIO2_3, err - product_err)
    return hi, lo, I32(bits_from_f32(shifted)) & I32(3)


@_jit
def _sin_poly(t):
    """(sin r - r) / r**3 = S(r**2) on |r| <= 0.97 (the reduction's |r| reaches 0.955 at |x| = 2**22);
    degree 3 in r**2, relative error of sin below 2**-31.6."""
    s = F32(2.7356652481103083e-06)
    s = _fma(s, t, F32(-0.00019843614427372813))
    s = _fma(s, t, F32(0.008333357982337475))
    return _fma(s, t, F32(-0.1666666716337204))


@_jit
def _cos_poly(t):
    """(cos r - 1 + r**2/2) / r**4 = C(r**2) on |r| <= 0.97; degree 2, relative error of cos
    below 2**-29.8."""
    c = F32(2.4236094759544358e-05)
    c = _fma(c, t, F32(-0.0013885165099054575))
    return _fma(c, t, F32(0.04166658967733383))


@_jit
def _sin_cos_reduced(hi, lo):
    """(sin, cos) of hi + lo for |hi| <= 0.97, |lo| <= ulp(hi): the leading term of each
    is added last (cos's 1 - r**2/2 split exactly by Fast2Sum) so one rounding dominates."""
    t = hi * hi
    sin = hi + _fma(hi * t, _sin_poly(t), lo)
    h = _HALF * t
    w = _ONE - h
    w_err = (_ONE - w) - h
    t_err = _fma(hi, hi, -t)  # hi**2 = t + t_err exactly
    tail = _fma(t * t, _cos_poly(t), w_err) - _fma(_HALF, t_err, hi * lo)  # cos(hi+lo) ~ cos hi - lo sin hi
    return sin, w + tail


# ---- public functions ------------------------------------------------------------------------
@_jit
def exp_f32(x):
    """e**x. Cody-Waite reduction x = k ln2 + r (fma), degree-6 minimax polynomial, 2**k applied
    in two factors so subnormal results are correctly rounded. Overflow to inf above
    88.7228394, 0 at and below -103.972084 (numpy's thresholds). Max 1 ulp, all 2**32 inputs."""
    x = F32(x)
    xc = _clamp(x, F32(-104.0), F32(89.0))  # beyond: 0 / inf fall out of the scaling
    r, k = _exp_reduce(xc)
    hi, lo = _exp_reduced(r)
    return _scale(hi + lo, k)


@_jit
def expm1_f32(x):
    """e**x - 1. Same reduction and polynomial as exp_f32 (expm1(r) = r + r**2 Q(r) is accurate
    relative to itself, kept as hi + lo), recombined as 2 * (2**(k-1) expm1(r) + (2**(k-1) - 1/2))
    so k = 128 does not overflow 2**k early; |x| < 2**-25 returns x (keeps -0 and subnormals).
    Max 1 ulp, all inputs."""
    x = F32(x)
    xc = _clamp(x, F32(-80.0), F32(89.0))  # expm1(-80) rounds to -1; keeps 2**(k-1) normal
    r, k = _exp_reduce(xc)
    q_hi, q_lo = _expm1_reduced(r)
    half_scale = _pow2(I32(k - I32(1)))
    result = F32(2.0) * (_fma(half_scale, q_hi, half_scale - _HALF) + half_scale * q_lo)
    return x if abs(x) < F32(2.9802322387695312e-08) else result


@_jit
def log_f32(x):
    """Natural log. x = 2**e m with m in [sqrt(1/2), sqrt(2)) from the bits (subnormals scaled by
    2**23 first), log1p(m - 1) by a degree-10 polynomial, e ln2 added in an exact split.
    log(+-0) = -inf, log(x < 0) = nan, log(inf) = inf. Max 1 ulp, all inputs."""
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
    """tanh x = x + x**3 P(x**2) on |x| <= 0.625 (+1e-3); degree-5 P, relative error below 2**-32."""
    t = x * x
    p = F32(0.002152681117877364)
    p = _fma(p, t, F32(-0.008190012536942959))
    p = _fma(p, t, F32(0.021706894040107727))
    p = _fma(p, t, F32(-0.05394817888736725))
    p = _fma(p, t, F32(0.13333220779895782))
    p = _fma(p, t, F32(-0.3333333134651184))
    return _fma(x * t, p, x)


@_jit
def tanh_f32(x):
    """Hyperbolic tangent. |x| < 0.625: odd minimax polynomial; else 1 - 2 / (e**(2|x|) + 1)
    with the sign of x (2|x| clamped to 20: tanh is 1.0 in float32 from |x| ~ 9.01).
    Max 1 ulp, all inputs."""
    x = F32(x)
    a = abs(x)
    e = _exp_normal(_clamp(a + a, F32(0.0), F32(20.0)))
    big = _ONE - F32(2.0) / (e + _ONE)
    big = -big if x < F32(0.0) else big
    result = _tanh_poly(x) if a < F32(0.625) else big
    return x if x == F32(0.0) else result  # the polynomial's -0 + +0 would lose -0's sign


@_jit
def sigmoid_f32(x):
    """1 / (1 + e**-x). E = e**-|x| in (0, 1] (never overflows); 1/(1+E) refined by one Newton
    step against the exact 1 + E, then x >= 0: that, x < 0: E/(1+E) (subnormal results come
    straight from E). sigmoid(+inf) = 1, sigmoid(-inf) = 0, NaN -> NaN. Max 1 ulp, all inputs."""
    x = F32(x)
    xc = _clamp(-abs(x), F32(-104.0), F32(0.0))
    r, k = _exp_reduce(xc)
    hi, lo = _exp_reduced(r)
    e, e_lo = _scale(hi, k), _scale(lo, k)  # E = e + e_lo (e_lo's own rounding is far below e's ulp)
    d = _ONE + e
    d_err = (e - (d - _ONE)) + e_lo  # 1 + E = d + d_err (Fast2Sum, 1 >= e)
    recip = _ONE / d
    residual = _fma(-recip, d, _ONE) - recip * d_err
    recip = _fma(recip, residual, recip)
    return recip if x >= F32(0.0) else _fma(e, recip, e_lo * recip)


@_jit
def _erf_small(x):
    """erf x = x (c0 + t Q(t)), t = x**2, |x| < 1: c0 = 2/sqrt(pi) split hi + lo so the leading
    product rounds once; degree-5 Q fit on erf's relative error (below 2**-29.3)."""
    t = x * x
    q = F32(7.842548802727833e-05)
    q = _fma(q, t, F32(-0.0008009398588910699))
    q = _fma(q, t, F32(0.005188598297536373))
    q = _fma(q, t, F32(-0.026854202151298523))
    q = _fma(q, t, F32(0.11283603310585022))
    q = _fma(q, t, F32(-0.3761262893676758))
    return _fma(x, F32(1.128379225730896), x * _fma(q, t, F32(-5.8635382771399236e-08)))


@_jit
def _erfc_scaled(a):
    """e**(a**2) erfc(a) on [1, 3.95] as a degree-9 polynomial in a - 2.475 (centred to keep the
    float32 Horner sum well conditioned); error relative to erf's ulp below 2**-31."""
    u = a - F32(2.475)
    g = F32(-2.824455441441387e-05)
    g = _fma(g, u, F32(-5.2658979257103056e-05))
    g = _fma(g, u, F32(-0.00012694117322098464))
    g = _fma(g, u, F32(0.000246809097006917))
    g = _fma(g, u, F32(-0.0006817506509833038))
    g = _fma(g, u, F32(0.00260623125359416))
    g = _fma(g, u, F32(-0.00825610850006342))
    g = _fma(g, u, F32(0.025538772344589233))
    g = _fma(g, u, F32(-0.07561112940311432))
    return _fma(g, u, F32(0.21268077194690704))


@_jit
def erf_f32(x):
    """Error function. |x| < 1: odd polynomial; 1 <= |x|: 1 - e**(-x**2) g(|x|) with x**2 split
    exactly (hi + lo by fma) and |x| clamped to 3.95, where erf is 1.0 in float32.
    Max 1 ulp, all inputs."""
    x = F32(x)
    a = abs(x)
    ac = _clamp(a, _ONE, F32(3.95))
    square = ac * ac
    square_err = _fma(ac, ac, -square)
    e = _exp_normal(-square) * (_ONE - square_err)  # e**-(square + square_err)
    big = _ONE - e * _erfc_scaled(ac)
    big = -big if x < F32(0.0) else big
    result = _erf_small(x) if a < _ONE else big
    return x if x == F32(0.0) else result


@_jit
def sin_f32(x):
    """Sine. x = n pi/2 + r (three-part Cody-Waite, r kept as hi + lo), minimax sin and cos of r,
    quadrant select. Max 1 ulp on every |x| < 2**22 (SIN_COS_LIMIT); NaN at and beyond it (no
    reduction there); sin(+-inf) = nan, sin(-0) = -0."""
    x = F32(x)
    hi, lo, n = _pio2_reduce(x)
    sin, cos = _sin_cos_reduced(hi, lo)
    result = cos if n & I32(1) else sin
    result = -result if n & I32(2) else result
    result = x if x == F32(0.0) else result
    return result if abs(x) < _SIN_COS_LIMIT else _NAN


@_jit
def cos_f32(x):
    """Cosine: sin_f32's reduction, quadrant n + 1. Max 1 ulp on every |x| < 2**22, NaN beyond."""
    x = F32(x)
    hi, lo, n = _pio2_reduce(x)
    sin, cos = _sin_cos_reduced(hi, lo)
    result = sin if n & I32(1) else cos
    result = -result if I32(n + I32(1)) & I32(2) else result
    return result if abs(x) < _SIN_COS_LIMIT else _NAN


@_jit
def softplus_f32(x):
    """log(1 + e**x) = max(x, 0) + log1p(e**-|x|): never overflows; x for large x, e**x (also
    subnormal) for very negative x. softplus(inf) = inf, softplus(-inf) = 0.
    Max 1 ulp, all inputs."""
    x = F32(x)
    xc = _clamp(-abs(x), F32(-104.0), F32(0.0))
    r, k = _exp_reduce(xc)
    hi, lo = _exp_reduced(r)
    e, e_lo = _scale(hi, k), _scale(lo, k)
    u = _ONE + e
    c = (e - (u - _ONE)) + e_lo  # 1 + E = u + c
    f, ex = _log_parts(u)
    tail = _log_sum(f, ex, c / u)
    tail = e + e_lo if e < F32(5.960464477539063e-08) else tail
    return (x if x > F32(0.0) else F32(0.0)) + tail


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
    t = _clamp(t, -104.0, 89.0)
    k = np.rint(t * _LOG2E_F64)
    k = 0.0 if k != k else k  # NaN t: any k (the caller's selects replace the result)
    r = _fma(-k, _LN2_HI_F64, t)
    r = _fma(-k, _LN2_LO_F64, r)
    r32 = F32(r)
    r_lo = F32(r - np.float64(r32))
    hi, lo = _exp_reduced(r32)
    return _scale(hi + _fma(hi, r_lo, lo), I32(k))


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
