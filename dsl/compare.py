"""``dsl.compare``: run a jit function's compiled kernels and the eager numpy engine side by side."""
from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from . import engine
from .dtypes import of_array
from .errors import InputError
from .tensor import Tensor


_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def _ordered(values: np.ndarray) -> np.ndarray:
    """Float bit patterns (any width, in the array's own format) mapped to integers that count
    ulps monotonically (-0 == +0)."""
    size = values.dtype.itemsize
    raw = values.view(_SIGNED[size]).astype(np.int64)
    return np.where(raw < 0, -(raw & ((1 << (8 * size - 1)) - 1)), raw)


def _ulp_distances(got: np.ndarray, want: np.ndarray) -> np.ndarray | None:
    """Per-element distance in units in the last place of the output type (NaN vs NaN: 0);
    None when the formats differ or have no integer view."""
    if got.dtype != want.dtype or got.dtype.itemsize not in _SIGNED:
        return None
    distance = np.abs(_ordered(got) - _ordered(want))
    nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    return np.where(nan, 0, distance)


def _ulp_distance(got: np.ndarray, want: np.ndarray) -> int:
    """Max distance in units in the last place of the output type (NaN vs NaN counts 0)."""
    if not got.size:
        return 0
    distances = _ulp_distances(got, want)
    return -1 if distances is None else int(distances.max())


@dataclass
class OutputReport:
    """One output: do shape and dtype match, and how far apart are the values.

    ``max_ulp_error`` counts only elements whose expected magnitude is at least ``ulp_floor``
    (near zero a tiny absolute error is millions of ulps: those elements are judged by the
    absolute tolerance). ``worst_abs`` / ``worst_ulp`` are (index, got, want) of the worst
    element by each measure, or None."""

    name: str
    shape_ok: bool
    dtype_ok: bool
    max_abs_error: float
    max_ulp_error: int
    close: bool
    ulp_floor: float = 0.0
    worst_abs: tuple | None = None
    worst_ulp: tuple | None = None

    def __str__(self) -> str:
        flag = "ok " if self.close and self.shape_ok and self.dtype_ok else "BAD"
        text = (f"  [{flag}] {self.name}: shape {'ok' if self.shape_ok else 'MISMATCH'}, dtype "
                f"{'ok' if self.dtype_ok else 'MISMATCH'}, max abs err {self.max_abs_error:.3g}, "
                f"max ulp err {self.max_ulp_error}")
        if self.ulp_floor:
            text += f" (where |want| >= {self.ulp_floor:.3g})"
        for what, worst in (("abs", self.worst_abs), ("ulp", self.worst_ulp)):
            if worst is not None:
                text += f"; worst {what} at {list(worst[0])}: got {worst[1]!r}, want {worst[2]!r}"
        return text


@dataclass
class CompareReport:
    """Result of ``dsl.compare``; ``ok`` is True when every output matches within tolerance."""

    outputs: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.close and o.shape_ok and o.dtype_ok for o in self.outputs)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"dsl.compare: {'OK' if self.ok else 'MISMATCH'} ({len(self.outputs)} outputs)"
        return "\n".join([head, *map(str, self.outputs)])


def _ulp_floor(want: np.ndarray, atol: float) -> float:
    """The magnitude below which ulps are not counted: the absolute tolerance, at least the
    format's smallest normal number (subnormals have too few digits for ulps to mean much)."""
    try:
        tiny = float(ml_dtypes.finfo(want.dtype).smallest_normal)
    except (ValueError, TypeError):
        tiny = 0.0
    return max(float(atol), tiny)


def _worst(errors: np.ndarray, got: np.ndarray, want: np.ndarray) -> tuple | None:
    """(index, got, want) of the largest error, or None when every error is 0."""
    if not errors.size or not np.any(errors):
        return None
    index = np.unravel_index(int(np.argmax(errors)), errors.shape)
    return tuple(int(i) for i in index), got[index].item(), want[index].item()


def _compare_one(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> OutputReport:
    shape_ok = got.shape == want.shape
    dtype_ok = got.dtype == want.dtype
    if not shape_ok:
        return OutputReport(name, False, dtype_ok, float("inf"), -1, False)
    kind = of_array(want).kind
    if kind in ("float", "complex"):
        g = got.astype(np.complex128 if kind == "complex" else np.float64)
        w = want.astype(g.dtype)
        nan_same = np.isnan(g) == np.isnan(w)
        finite = ~np.isnan(g) & ~np.isnan(w)
        with np.errstate(invalid="ignore"):
            diff = np.where(finite & (g != w), np.abs(g - w), 0.0)
        max_abs = float(diff.max()) if diff.size else 0.0
        close = bool(np.all(nan_same) and np.allclose(g[finite], w[finite], rtol=rtol, atol=atol, equal_nan=True))
        if kind != "float":
            return OutputReport(name, True, dtype_ok, max_abs, 0, close, worst_abs=_worst(diff, got, want))
        floor = _ulp_floor(want, atol)
        if not got.size:
            return OutputReport(name, True, dtype_ok, 0.0, 0, close, floor)
        distances = _ulp_distances(got, want)
        if distances is None:
            return OutputReport(name, True, dtype_ok, max_abs, -1, close, floor, _worst(diff, got, want))
        counted = np.where(np.abs(w) >= floor, distances, 0) if floor else distances
        ulp = int(counted.max()) if counted.size else 0
        return OutputReport(name, True, dtype_ok, max_abs, ulp, close, floor, _worst(diff, got, want),
                            _worst(counted, got, want))
    equal = np.array_equal(got, want)
    diff = 0.0 if equal or kind == "string" else float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    return OutputReport(name, True, dtype_ok, diff, 0 if equal else -1, bool(equal))


def compare(fn, *args, rtol: float = 1e-5, atol: float = 1e-6) -> CompareReport:
    """Run ``fn`` (a dsl.jit function) compiled and on the eager numpy engine; compare outputs.

    Args:
        fn: a JitFunction.
        args: its inputs (numpy arrays or dsl.Tensors).
        rtol, atol: tolerance for float outputs (other types must be equal).

    Returns:
        A CompareReport: ``.ok``, ``.outputs`` (per output: shape/dtype match, max abs and ulp
        error), printable.

    Example:
        >>> report = dsl.compare(f, mask, scores); assert report.ok, report
    """
    from .jit import JitFunction, native_args
    if not isinstance(fn, JitFunction):
        raise InputError(f"dsl.compare: {fn!r:.60} is a {type(fn).__name__}; expected a @dsl.jit function")
    args = native_args(args)
    executable = fn.executable(*args)
    feeds = dict(zip([v.name for v in executable.graph.inputs], args))
    got = executable.run(feeds)
    eager_feeds = {k: v.numpy() if isinstance(v, Tensor) else v for k, v in feeds.items()}
    want = engine.run_graph(executable.graph, eager_feeds)
    report = CompareReport()
    for value, g, w in zip(executable.graph.outputs, got, want):
        report.outputs.append(_compare_one(value.name, np.asarray(g), np.asarray(w), rtol, atol))
    return report
