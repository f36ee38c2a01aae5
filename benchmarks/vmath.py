"""kernels/vmath.py speed: a numba loop over 16M float32 calling each function, against numpy on
float32, the same loop calling libm (np.exp / math.erf inside numba), and a y = x * 2 loop (the
memory floor). One thread, and two threads (the array split in halves, one nogil call each).

Run: python benchmarks/vmath.py [--n 16777216] [--repeat 9] [funcs...]
Candidates are interleaved round by round after a warm-up; the table shows medians.
"""
import argparse
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]  # benchmarks/kernels.py shadows kernels
sys.path.insert(0, os.path.dirname(_HERE))
import numba  # noqa: E402
import numpy as np  # noqa: E402

from kernels import vmath  # noqa: E402

sys.path.insert(0, _HERE)
from _timing import median_seconds, table  # noqa: E402

F32 = np.float32


@numba.njit(nogil=True, inline="always")
def _sigmoid_libm(x):
    return F32(1.0) / (F32(1.0) + np.exp(-x))


@numba.njit(nogil=True, inline="always")
def _softplus_libm(x):
    return max(x, F32(0.0)) + np.log1p(np.exp(-abs(x)))


@numba.njit(nogil=True, inline="always")
def _erf_libm(x):
    return F32(math.erf(x))


LIBM = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
        "sigmoid": _sigmoid_libm, "erf": _erf_libm, "sin": np.sin, "cos": np.cos, "softplus": _softplus_libm,
        "pow": np.power}
NUMPY = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin,
         "cos": np.cos, "sigmoid": lambda x, out: np.divide(1, np.add(1, np.exp(np.negative(x, out=out), out=out),
                                                                    out=out), out=out),
         "softplus": lambda x, out: np.logaddexp(0, x, out=out), "pow": np.power}  # erf: numpy has none
INPUT = {"exp": (-10, 10), "expm1": (-10, 10), "log": (1e-3, 100), "log1p": (-0.9, 100), "tanh": (-5, 5),
         "sigmoid": (-10, 10), "erf": (-4, 4), "sin": (-100, 100), "cos": (-100, 100), "softplus": (-20, 20),
         "pow": (1e-3, 10)}


def _unary(fn):
    @numba.njit(nogil=True, error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])
    return loop


def _binary(fn):
    @numba.njit(nogil=True, error_model="numpy")
    def loop(x, y, out):
        for i in range(x.size):
            out[i] = fn(x[i], y[i])
    return loop


@numba.njit(nogil=True, error_model="numpy")
def _double(x, out):
    for i in range(x.size):
        out[i] = x[i] * F32(2.0)


_POOL = ThreadPoolExecutor(2)


def _two_threads(loop, *arrays):
    """loop over each half of the arrays on its own thread (the loops release the GIL)."""
    half = arrays[0].size // 2
    parts = [[a[:half] for a in arrays], [a[half:] for a in arrays]]
    list(_POOL.map(lambda p: loop(*p), parts))


def interleaved(candidates, repeat):
    """{label: median seconds}: each round runs every candidate once, after one warm-up round."""
    for fn in candidates.values():
        fn()
    times = {label: [] for label in candidates}
    for _ in range(repeat):
        for label, fn in candidates.items():
            times[label].append(median_seconds(fn, repeat=1, warmup=0))
    return {label: float(np.median(t)) for label, t in times.items()}


def bench(name, n, repeat, rng):
    low, high = INPUT[name]
    x = rng.uniform(low, high, n).astype(F32)
    out = np.empty_like(x)
    ours, libm = getattr(vmath, name + "_f32"), LIBM[name]
    if name == "pow":
        y = rng.uniform(-4, 4, n).astype(F32)
        args = (x, y, out)
        loop, libm_loop = _binary(ours), _binary(libm)
    else:
        args = (x, out)
        loop, libm_loop = _unary(ours), _unary(libm)
    candidates = {"vmath": lambda: loop(*args), "libm loop": lambda: libm_loop(*args),
                  "x*2 loop": lambda: _double(x, out),
                  "vmath 2T": lambda: _two_threads(loop, *args), "libm 2T": lambda: _two_threads(libm_loop, *args),
                  "x*2 2T": lambda: _two_threads(_double, x, out)}
    if name in NUMPY:
        candidates["numpy"] = lambda: NUMPY[name](*args[:-1], out=out)
    t = interleaved(candidates, repeat)
    ms = lambda label: f"{t[label] * 1e3:.1f}" if label in t else "n/a"
    ratio = lambda label: f"{t[label] / t['vmath']:.2f}x" if label in t else "n/a"
    return (name, ms("vmath"), ms("numpy"), ratio("numpy"), ms("libm loop"), ratio("libm loop"), ms("x*2 loop"),
            ms("vmath 2T"), ms("libm 2T"), f"{t['libm 2T'] / t['vmath 2T']:.2f}x", ms("x*2 2T"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("funcs", nargs="*", default=list(LIBM))
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = [bench(name, args.n, args.repeat, rng) for name in args.funcs]
    print(f"{args.n} float32 elements, median of {args.repeat} interleaved rounds, ms "
          f"(ratios: that candidate's time / vmath's; > 1 means vmath is faster); numba {numba.__version__}, "
          f"numpy {np.__version__}\n")
    print(table(rows, ("function", "vmath 1T", "numpy", "numpy/vmath", "libm loop 1T", "libm/vmath",
                       "x*2 loop 1T", "vmath 2T", "libm loop 2T", "libm/vmath 2T", "x*2 loop 2T")))


if __name__ == "__main__":
    main()
