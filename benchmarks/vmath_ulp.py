"""ulp sweep of kernels/vmath.py against float64 libm, over all 2**32 float32 inputs (or a strided subset).

Run:  python benchmarks/vmath_ulp.py                       # every function, every float32 bit pattern
      python benchmarks/vmath_ulp.py --stride 1031 exp log  # a strided subset, two functions
      python benchmarks/vmath_ulp.py --min-abs 4194304 sin  # only |x| >= 2**22 (both signs, NaN/inf too)
      python benchmarks/vmath_ulp.py --fit                  # re-derive the polynomial coefficients

The reference is the float64 function (numpy's; math.erf for erf, the formulas for sigmoid and
softplus) of the float32 input, rounded to float32. ulp = distance of the float32 bit patterns
in the ordered integer mapping (+0 and -0 coincide; subnormal results count subnormal steps).
A "special mismatch" is any result whose bits differ from the reference where either is NaN,
Inf or zero (for NaN only NaN-ness counts, and our NaN must be quiet), or a zero of the wrong
sign. pow sweeps every x with the stride times a fixed set of y. Exit code 1 if any bound in
BOUNDS is exceeded or any special value mismatches.
"""
import argparse
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/kernels.py shadows kernels
sys.path.insert(0, os.path.dirname(_HERE))
import numba  # noqa: E402
import numpy as np  # noqa: E402

from kernels import vmath  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import table  # noqa: E402

F32, F64 = np.float32, np.float64
# max ulp allowed (the contract), on |x| <= 2**16 and on every input alike; the max on
# |x| <= 2**16 is reported apart.
BOUNDS = {"exp": 2, "expm1": 3, "log": 2, "log1p": 3, "tanh": 2, "sigmoid": 2, "erf": 2, "sin": 2,
          "cos": 2, "softplus": 3, "pow": 2}
LIMIT = 65536.0


@numba.njit(nogil=True)
def _erf64(x):
    out = np.empty(x.size, np.float64)
    for i in range(x.size):
        out[i] = math.erf(x[i])
    return out


def _sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus64(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


REFERENCE = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
             "sigmoid": _sigmoid64, "erf": _erf64, "sin": np.sin, "cos": np.cos, "softplus": _softplus64}
FUNCS = list(REFERENCE) + ["pow"]


def _loop(fn):
    """out[i] = fn(x[i]) as the vectorizable loop a kernel would contain."""
    @numba.njit(nogil=True, error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])
    return loop


def _loop2(fn):
    @numba.njit(nogil=True, error_model="numpy")
    def loop(x, y, out):
        for i in range(x.size):
            out[i] = fn(x[i], y[i])
    return loop


@numba.njit(nogil=True, inline="always")
def _ordered(bits):
    """float32 bits -> an integer order: adjacent floats differ by 1, -0 and +0 map to 0."""
    b = np.int64(bits)
    return b if b < 0x80000000 else np.int64(0x80000000) - b


@numba.njit(nogil=True)
def _stats(xbits, ours, ref, limit):
    """(max ulp, its x bits, max ulp on |x| <= limit, its x bits, special mismatches, first such
    x bits, count of ulp > 1, min x where ours is +inf, max x < 0 where ours is +-0)."""
    worst, worst_x, worst_in, worst_in_x = 0, np.uint32(0), 0, np.uint32(0)
    bad, bad_x, over1 = 0, np.uint32(0), 0
    inf_at, zero_at = np.inf, -np.inf
    for i in range(xbits.size):
        o, r = ours[i], ref[i]
        x = np.float64(xbits.view(np.float32)[i])
        o_abs, r_abs = o & np.uint32(0x7FFFFFFF), r & np.uint32(0x7FFFFFFF)
        if o == np.uint32(0x7F800000) and x < inf_at:
            inf_at = x
        if o_abs == 0 and x < 0 and x > zero_at:
            zero_at = x
        if r_abs > np.uint32(0x7F800000) or o_abs > np.uint32(0x7F800000):  # a NaN on either side
            ok = r_abs > np.uint32(0x7F800000) and o_abs > np.uint32(0x7F800000) and (o & np.uint32(0x00400000)) != 0
        elif r_abs == np.uint32(0x7F800000) or o_abs == np.uint32(0x7F800000) or r_abs == 0 or o_abs == 0:
            ok = o == r
        else:
            ok = True
            ulp = abs(_ordered(o) - _ordered(r))
            if ulp > 1:
                over1 += 1
            if ulp > worst:
                worst, worst_x = ulp, xbits[i]
            if abs(x) <= limit and ulp > worst_in:
                worst_in, worst_in_x = ulp, xbits[i]
        if not ok:
            if bad == 0:
                bad_x = xbits[i]
            bad += 1
    return worst, worst_x, worst_in, worst_in_x, bad, bad_x, over1, inf_at, zero_at


def _reference(name, x):
    with np.errstate(all="ignore"):
        return REFERENCE[name](x.astype(F64)).astype(F32)


class Result:
    def __init__(self):
        self.worst = self.worst_in = self.bad = self.over1 = self.count = 0
        self.worst_x = self.worst_in_x = self.bad_x = None
        self.inf_at, self.zero_at = math.inf, -math.inf
        self.ref_inf_at, self.ref_zero_at = math.inf, -math.inf

    def add(self, stats, ref_stats, count):
        worst, wx, worst_in, wix, bad, bx, over1, inf_at, zero_at = stats
        if worst > self.worst or self.worst_x is None:
            self.worst, self.worst_x = worst, wx
        if worst_in > self.worst_in or self.worst_in_x is None:
            self.worst_in, self.worst_in_x = worst_in, wix
        if bad and not self.bad:
            self.bad_x = bx
        self.bad += bad
        self.over1 += over1
        self.count += count
        self.inf_at, self.zero_at = min(self.inf_at, inf_at), max(self.zero_at, zero_at)
        self.ref_inf_at, self.ref_zero_at = min(self.ref_inf_at, ref_stats[7]), max(self.ref_zero_at, ref_stats[8])


def _as_float(bits):
    return float(np.array([bits], np.uint32).view(F32)[0]) if bits is not None else float("nan")


def _ranges(min_abs):
    """Bit-pattern ranges [start, end) holding every float32 with |x| >= min_abs (NaNs included)."""
    if not min_abs:
        return [(0, 1 << 32)]
    low = int(np.array([min_abs], F32).view(np.uint32)[0])
    return [(low, 1 << 31), ((1 << 31) + low, 1 << 32)]


def sweep(name, stride, chunk=1 << 24, threads=1, progress=False, min_abs=0.0):
    """Sweep one single-argument function over bit patterns 0, stride, 2 stride, ... < 2**32 (or
    those with |x| >= min_abs), in chunks, ``threads`` chunks at a time (the loops, numpy's ufuncs
    and _stats release the GIL)."""
    loop = _loop(getattr(vmath, name + "_f32"))
    step = chunk * stride

    def one_chunk(span):
        start, end = span
        bits = np.arange(start, end, stride, dtype=np.uint64).astype(np.uint32)
        x = bits.view(F32)
        ours = np.empty_like(x)
        loop(x, ours)
        ref = _reference(name, x)
        return (_stats(bits, ours.view(np.uint32), ref.view(np.uint32), LIMIT),
                _stats(bits, ref.view(np.uint32), ref.view(np.uint32), LIMIT), x.size)

    result = Result()
    starts = [(s, min(s + step, end)) for start, end in _ranges(min_abs) for s in range(start, end, step)]
    with ThreadPoolExecutor(threads) as pool:
        for done, stats in enumerate(pool.map(one_chunk, starts)):
            result.add(*stats)
            if progress:
                print(f"  {name}: {(done + 1) / len(starts):.0%}", file=sys.stderr, end="\r")
    return result


POW_Y = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, -1.5, 2.5, 10.0, -10.0, 11.0, -11.0,
         1 / 3, 0.1, -0.1, 7.25, 100.0, -100.0, 127.0, -127.0, 149.0, -149.0, 1e-7, -1e-7, 1e4, -1e4,
         16777215.0, 16777216.0, 1e10, -1e10, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 1e-45, 2.0**-20,
         65537.0, -65537.0, 0.75, 1.0000001, 0.99999994]


def sweep_pow(stride, chunk=1 << 22):
    """pow over (every stride-th float32 x) x POW_Y; special mismatches also against numpy float32."""
    loop = _loop2(vmath.pow_f32)
    result = Result()
    numpy_bad = 0
    for yv in POW_Y:
        y0 = F32(yv)
        for start in range(0, 1 << 32, chunk * stride):
            bits = np.arange(start, min(start + chunk * stride, 1 << 32), stride, dtype=np.uint64).astype(np.uint32)
            x = bits.view(F32)
            y = np.full(x.size, y0, F32)
            o = np.empty_like(x)
            loop(x, y, o)
            with np.errstate(all="ignore"):
                ref = np.power(x.astype(F64), F64(y0)).astype(F32)
                ref32 = np.power(x, y)
            stats = _stats(bits, o.view(np.uint32), ref.view(np.uint32), LIMIT)
            result.add(stats, _stats(bits, ref.view(np.uint32), ref.view(np.uint32), LIMIT), x.size)
            special = ~np.isfinite(ref32) | (ref32 == 0) | ~np.isfinite(x) | (x == 0)
            a, b = o[special], ref32[special]
            numpy_bad += int(np.sum(~((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b)))))
    return result, numpy_bad


# +-0, +-inf, quiet and signalling NaNs of both signs
SPECIAL_X = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                      0xFFBFFFFF, 0x7FFFFFFF], np.uint32).view(F32)


def special_vs_numpy_f32(name):
    """Bits of our results on SPECIAL_X against numpy's float32 evaluation (sigmoid / softplus:
    their formulas in float32; erf: math.erf rounded). Returns the mismatching inputs."""
    x = SPECIAL_X
    ours = np.empty_like(x)
    _loop(getattr(vmath, name + "_f32"))(x, ours)
    with np.errstate(all="ignore"):
        formulas = {"sigmoid": lambda v: F32(1) / (F32(1) + np.exp(-v)),
                    "softplus": lambda v: np.log1p(np.exp(v)),
                    "erf": lambda v: _erf64(v.astype(F64)).astype(F32)}
        want = (formulas[name] if name in formulas else getattr(np, name))(x).astype(F32)
    quiet = (ours.view(np.uint32) & 0x00400000) != 0
    same = (ours.view(np.uint32) == want.view(np.uint32)) | (np.isnan(ours) & np.isnan(want) & quiet)
    return [float(v) for v in x[~same]]


def _fmt_bad(res):
    return str(res.bad) + (f" (first at {_fmt_x(res.bad_x)})" if res.bad else "")


def _fmt_x(bits):
    v = _as_float(bits)
    return f"{v:.9g} (0x{int(bits):08X})" if bits is not None else "-"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("funcs", nargs="*", default=FUNCS, help=f"of {FUNCS}")
    parser.add_argument("--stride", type=int, default=1, help="sweep every N-th bit pattern (1: all 2**32)")
    parser.add_argument("--pow-stride", type=int, default=4099, help="x stride of the pow grid")
    parser.add_argument("--min-abs", type=float, default=0.0, help="sweep only |x| >= this (not pow)")
    parser.add_argument("--threads", type=int, default=1, help="chunks swept at a time (default 1: the full sweep "
                        "takes ~3 min per function on one core; sin / cos ~5)")
    parser.add_argument("--fit", action="store_true", help="re-derive the polynomial coefficients and exit")
    args = parser.parse_args(argv)
    if args.fit:
        return fit()
    rows, failed = [], []
    for name in args.funcs:
        start = time.perf_counter()
        if name == "pow":
            res, numpy_bad = sweep_pow(args.pow_stride)
            specials = numpy_bad
        else:
            res = sweep(name, args.stride, threads=args.threads, progress=sys.stderr.isatty(), min_abs=args.min_abs)
            mism = special_vs_numpy_f32(name)
            specials = len(mism)
        seconds = time.perf_counter() - start
        bound = BOUNDS[name]
        ok = res.worst_in <= bound and res.worst <= bound and res.bad == 0 and specials == 0
        if not ok:
            failed.append(name)
        thresholds = "-"
        if name in ("exp", "expm1", "sigmoid", "softplus"):
            thresholds = (f"inf from {res.inf_at:.9g} (ref {res.ref_inf_at:.9g}); "
                          f"0 at/below {res.zero_at:.9g} (ref {res.ref_zero_at:.9g})")
        rows.append((name, res.count, res.worst_in, _fmt_x(res.worst_in_x), res.worst, _fmt_x(res.worst_x),
                     f"{res.over1 / res.count:.2e}", _fmt_bad(res), specials, thresholds, f"{seconds:.0f}",
                     "ok" if ok else "FAIL"))
        print(f"{name}: done in {seconds:.0f} s: {rows[-1]}", file=sys.stderr, flush=True)
    subset = f", |x| >= {args.min_abs:g}" if args.min_abs else ""
    print(f"stride {args.stride}{subset} (pow: x stride {args.pow_stride} x {len(POW_Y)} y values), "
          f"{args.threads} thread(s)\n")
    print(table(rows, ("function", "inputs", "max ulp |x|<=2^16", "at x", "max ulp all", "at x",
                       "share > 1 ulp", "special mismatches vs f64 ref", "vs numpy f32 specials",
                       "overflow / underflow", "seconds", "bound")))
    return 1 if failed else 0


# ---- coefficient fitting ---------------------------------------------------------------------
def remez(target, weight, a, b, powers, grid=20001, iters=40, fixed=None):
    """Weighted minimax coefficients c of sum c_j t**powers[j] ~ target on [a, b] (Remez
    exchange on a Chebyshev-clustered grid); ``fixed`` maps powers to coefficients held fixed."""
    fixed = fixed or {}
    free = [p for p in powers if p not in fixed]
    n = len(free)
    t = (a + b) / 2 - (b - a) / 2 * np.cos(np.pi * np.arange(grid) / (grid - 1))
    f = target(t) - sum(v * t ** p for p, v in fixed.items())
    w = weight(t)
    basis = np.stack([t ** p for p in free], axis=1)
    ref = np.round((grid - 1) * (1 - np.cos(np.pi * np.arange(n + 1) / n)) / 2).astype(int)
    best = None
    for _ in range(iters):
        system = np.concatenate([basis[ref], ((-1.0) ** np.arange(n + 1) / w[ref])[:, None]], axis=1)
        coef = np.linalg.solve(system, f[ref])[:n]
        err = w * (f - basis @ coef)
        if best is None or np.max(np.abs(err)) < best[0]:
            best = (np.max(np.abs(err)), coef)
        runs = np.split(np.arange(grid), np.flatnonzero(np.diff(np.where(err >= 0, 1, -1))) + 1)
        extrema = [r[np.argmax(np.abs(err[r]))] for r in runs]
        while len(extrema) > n + 1:  # keep n + 1 alternating extrema: drop the smaller end
            extrema.pop(0 if abs(err[extrema[0]]) < abs(err[extrema[-1]]) else -1)
        if len(extrema) < n + 1 or np.array_equal(extrema, ref):
            break
        ref = np.array(extrema)
    out = dict(fixed)
    out.update(zip(free, best[1]))
    return [out[p] for p in powers]


def fit_float32(target, weight, a, b, powers):
    """Coefficients rounded to float32 one at a time (lowest power first), the rest refitted;
    returns them and the weighted max error on a fine grid."""
    fixed = {}
    for p in powers:
        fixed[p] = float(F32(remez(target, weight, a, b, powers, fixed=fixed)[powers.index(p)]))
    t = np.linspace(a, b, 200001)
    err = weight(t) * (target(t) - sum(fixed[p] * t ** p for p in powers))
    return [fixed[p] for p in powers], float(np.max(np.abs(err)))


def _series_near_zero(v, series, ratio):
    """ratio(v) with its float64 cancellation near 0 replaced by the Taylor series (|v| < 1e-2)."""
    small = np.abs(v) < 1e-2
    safe = np.where(small, 0.5, v)
    return np.where(small, series(v), ratio(safe))


def fit():
    """Print each polynomial of kernels/vmath.py, re-derived (highest degree last)."""
    verf = np.vectorize(math.erf)
    verfc = np.vectorize(math.erfc)
    ln2 = math.log(2)
    fits = {}
    r = ln2 / 2 + 1e-4  # exp: e**r = 1 + r + r**2 Q(r), weight: relative error of e**r
    fits["_exp_poly Q"] = fit_float32(
        lambda v: _series_near_zero(v, lambda u: sum(u ** (n - 2) / math.factorial(n) for n in range(2, 12)),
                                    lambda u: (np.expm1(u) - u) / (u * u)),
        lambda v: v * v / np.exp(v), -r, r, list(range(5)))
    lo, hi = math.sqrt(0.5) - 1, math.sqrt(2) - 1  # log1p(f) = f - f**2/2 + f**3 P(f)
    for name, n in (("_log_poly P", 8), ("_log_poly_short P", 7)):
        fits[name] = fit_float32(
            lambda f: _series_near_zero(f, lambda u: sum((-1) ** (n + 1) * u ** (n - 3) / n for n in range(3, 16)),
                                        lambda u: (np.log1p(u) - u + u * u / 2) / u ** 3),
            lambda f: f * f * _series_near_zero(f, lambda u: 1 + u / 2 - u * u / 12, lambda u: u / np.log1p(u)),
            lo, hi, list(range(n)))
    s = np.sqrt
    t_max = 0.601 ** 2  # tanh x = x + x**3 P(x**2) below 0.6, fit in t = x**2 (tiny t excluded: 0/0 there)
    fits["_tanh_poly P"] = fit_float32(
        lambda t: (np.tanh(s(t)) - s(t)) / t ** 1.5, lambda t: t * s(t) / np.tanh(s(t)), 1e-6, t_max, list(range(5)))
    c0 = 2 / math.sqrt(math.pi)  # erf x = x (c0 + t Q(t)), |x| < 0.75
    fits["_erf_small Q"] = fit_float32(
        lambda t: (verf(s(t)) / s(t) - c0) / t, lambda t: t * s(t) / verf(s(t)), 1e-6, 0.751 ** 2, list(range(5)))
    # erf = 1 - 2**h(a), h = log2 erfc in a - 0.75 on [0.75, 3.95]; weight: erfc ln2 / erf (erf's relative error)
    fits["_log2_erfc h"] = fit_float32(
        lambda u: np.log2(verfc(u + 0.75)), lambda u: verfc(u + 0.75) * ln2 / verf(u + 0.75),
        -1e-3, 3.95 - 0.75, list(range(7)))
    fits["_exp2_frac P"] = fit_float32(  # 2**f = 1 + f P(f), |f| <= 1/2, relative error of 2**f
        lambda f: _series_near_zero(f, lambda u: sum(ln2 ** n * u ** (n - 1) / math.factorial(n) for n in range(1, 8)),
                                    lambda u: np.expm1(u * ln2) / u),
        lambda f: np.abs(f) / np.exp2(f) + 1e-30, -0.5 - 1e-4, 0.5 + 1e-4, list(range(5)))
    # sin / cos of pi/2 y, |y| <= 0.59 (k from x h0 alone: y overshoots 1/2 by |x h1| <= 0.081),
    # float64 coefficients (evaluated in float64): sin = y P(y**2), cos = 1 + y**2 Q(y**2)
    half_pi, t_max = math.pi / 2, 0.59 ** 2
    for name, target, weight in (
            ("_sin_cos_quarter sin P", lambda t: np.sin(half_pi * s(t)) / s(t), lambda t: s(t) / np.sin(half_pi * s(t))),
            ("_sin_cos_quarter cos Q", lambda t: (np.cos(half_pi * s(t)) - 1) / t, lambda t: t / np.cos(half_pi * s(t)))):
        coef = remez(target, weight, 1e-9, t_max, list(range(4)))
        t = np.linspace(1e-9, t_max, 200001)
        fits[name + " (float64)"] = (coef, float(np.max(np.abs(weight(t) * (target(t) - np.polyval(coef[::-1], t))))))
    z_max = ((math.sqrt(2) - 1) / (math.sqrt(2) + 1)) ** 2 + 1e-6  # log m = 2s + s**3 L(s**2), float64
    target = lambda z: (2 * np.arctanh(s(z)) - 2 * s(z)) / z ** 1.5
    weight = lambda z: z * s(z) / (2 * np.arctanh(s(z)))
    coef = remez(target, weight, 1e-6, z_max, list(range(5)))
    z = np.linspace(1e-6, z_max, 200001)
    fits["_log_f64 L (float64)"] = (coef, float(np.max(np.abs(weight(z) * (target(z) - np.polyval(coef[::-1], z))))))
    for name, (coefs, err) in fits.items():
        print(f"{name}: weighted max error 2**{math.log2(err):.1f}")
        print("    " + ", ".join(repr(float(c)) for c in coefs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
