"""kernels/vmath.py speed: a numba loop over 16M float32 calling each function, against numpy on
float32, the same loop calling libm (np.exp / math.erf inside numba), and a y = x * 2 loop (the
memory floor). One thread, and two threads (the array split in halves, one nogil call each).

Run: python benchmarks/vmath.py [--n 16777216] [--repeat 9] [--inner 1] [--no-libm] [--huge]
                                [--baseline OLD_VMATH.py] [funcs...]
Candidates are interleaved round by round after a warm-up; two tables: the medians, then the
minima (the least disturbed round, for a machine shared with other work).
--baseline times another copy of the module in the same rounds ("before" columns), e.g.
    git show HEAD:kernels/vmath.py > /tmp/vmath_before.py
    python benchmarks/vmath.py --baseline /tmp/vmath_before.py --no-libm exp tanh
--huge: sin / cos inputs of magnitude 2**22 .. 2**127 (the table-reduction range) instead of |x| < 100.
--inner K: each timed call runs K times (times shown per run): with --n 32768 --inner 50 the arrays
stay in L2 and the table is the compute cost alone (the 2T columns then mostly thread overhead).
"""
import argparse
import importlib.util
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
    """{label: [seconds of each round]}: each round runs every candidate once, after one warm-up round."""
    for fn in candidates.values():
        fn()
    times = {label: [] for label in candidates}
    for _ in range(repeat):
        for label, fn in candidates.items():
            times[label].append(median_seconds(fn, repeat=1, warmup=0))
    return times


def load_baseline(path):
    """Another copy of kernels/vmath.py (imported as kernels._vmath_baseline: its relative imports resolve)."""
    spec = importlib.util.spec_from_file_location("kernels._vmath_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def inputs(name, n, rng, huge=False):
    if huge and name in ("sin", "cos"):  # |x| in [2**22, 2**127], random sign, log-uniform magnitude
        magnitude = rng.uniform(1, 2, n) * 2.0 ** rng.integers(22, 127, n)
        return (magnitude * rng.choice([-1.0, 1.0], n)).astype(F32)
    low, high = INPUT[name]
    return rng.uniform(low, high, n).astype(F32)


def _repeated(fn, inner):
    if inner == 1:
        return fn

    def run():
        for _ in range(inner):
            fn()
    return run


def bench(name, n, repeat, rng, baseline=None, libm=True, huge=False, inner=1):
    """(row of medians, row of minima) for one function."""
    x = inputs(name, n, rng, huge)
    out = np.empty_like(x)
    make = _binary if name == "pow" else _unary
    args = (x, rng.uniform(-4, 4, n).astype(F32), out) if name == "pow" else (x, out)
    loop = make(getattr(vmath, name + "_f32"))
    candidates = {"vmath": lambda: loop(*args), "x*2 loop": lambda: _double(x, out),
                  "vmath 2T": lambda: _two_threads(loop, *args), "x*2 2T": lambda: _two_threads(_double, x, out)}
    if baseline is not None:
        before = make(getattr(baseline, name + "_f32"))
        candidates["before"] = lambda: before(*args)
        candidates["before 2T"] = lambda: _two_threads(before, *args)
    if libm:
        libm_loop = make(LIBM[name])
        candidates["libm loop"] = lambda: libm_loop(*args)
        candidates["libm 2T"] = lambda: _two_threads(libm_loop, *args)
    if name in NUMPY:
        numpy_fn = NUMPY[name]
        candidates["numpy"] = lambda: numpy_fn(*args[:-1], out=out)
        candidates["numpy 2T"] = lambda: _two_threads(lambda *a: numpy_fn(*a[:-1], out=a[-1]), *args)
    times = interleaved({label: _repeated(fn, inner) for label, fn in candidates.items()}, repeat)
    rows = []
    for statistic in (np.median, np.min):
        t = {label: float(statistic(v)) / inner for label, v in times.items()}
        ms = lambda label: f"{t[label] * 1e3:.{1 if n >= 1 << 20 else 4}f}" if label in t else "n/a"
        over = lambda label, floor: f"{t[label] / t[floor]:.2f}x" if label in t else "n/a"
        row = [name + (" (huge x)" if huge and name in ("sin", "cos") else "")]
        for suffix, floor in (("", "x*2 loop"), (" 2T", "x*2 2T")):
            vm = "vmath" + suffix
            row += [ms("before" + suffix), ms(vm), ms("numpy" + suffix), ms(floor), over(vm, floor)]
            if libm:
                row += [ms("libm " + ("loop" if not suffix else "2T"))]
        rows.append(tuple(row))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("funcs", nargs="*", default=list(LIBM))
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--inner", type=int, default=1, help="runs of each candidate per timed call")
    parser.add_argument("--baseline", help="path of another vmath.py to time in the same rounds (before columns)")
    parser.add_argument("--no-libm", action="store_true", help="leave out the libm loops (slow: 60-400 ms each)")
    parser.add_argument("--huge", action="store_true", help="sin / cos on |x| in [2**22, 2**127]")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    baseline = load_baseline(args.baseline) if args.baseline else None
    libm = not args.no_libm
    load = lambda: " ".join(f"{v:.2f}" for v in os.getloadavg())
    load_before = load()
    rows = [bench(name, args.n, args.repeat, rng, baseline, libm, args.huge, args.inner) for name in args.funcs]
    print(f"{args.n} float32 elements, {args.repeat} interleaved rounds, ms; vmath/x*2: vmath's time over "
          f"the x * 2 loop's (the memory floor); numba {numba.__version__}, numpy {np.__version__}; "
          f"load average {load_before} before, {load()} after\n")
    headers = ["function"]
    for suffix in (" 1T", " 2T"):
        headers += ["before" + suffix, "vmath" + suffix, "numpy" + suffix, "x*2 loop" + suffix, "vmath/x*2" + suffix]
        if libm:
            headers += ["libm loop" + suffix]
    for k, label in enumerate(("median", "minimum")):
        print(f"{label} of the rounds\n")
        print(table([r[k] for r in rows], tuple(headers)) + "\n")


if __name__ == "__main__":
    main()
