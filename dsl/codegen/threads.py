"""Kernels split over threads: a numba ``parallel=True`` launcher per kernel runs its spans on
numba's thread team, the one piece of the runtime's threading that knows numba.

Why numba's team and not a pool of Python threads: a ThreadPoolExecutor round trip of a no-op
took 60-80 us on the 2-core machine here (a futex wake per task, then the GIL). The team (OpenMP
under numba's "omp" layer) hands spans over in about 2-3 us while its threads are still
spinning after the last launch; large kernels gained 5-20% from the switch (dsl/runtime.py
PARALLEL_THRESHOLD has the numbers).

The spin is bounded: ``GOMP_SPINCOUNT`` (unless the user set it) is 10000 iterations, measured
here as about 0.1-0.3 ms of spinning after a launch before the threads sleep; a launch on
sleeping threads costs 40-80 us. GNU OpenMP is not fork-safe (numba terminates a forked
child that enters a parallel region its parent used), so a forked child of a process that
launched runs its kernels serially; so does a process whose numba has no thread-safe layer
(workqueue would abort on concurrent launches from two Python threads).
"""
from __future__ import annotations

import os
import threading

os.environ.setdefault("GOMP_SPINCOUNT", "10000")  # (read when libgomp loads: at the first launch)

from .compile import compile_guards  # noqa: E402

# Launchers are module text appended to a kernel's own module (``with_launchers``): numba
# compiles one on its first call only, caches it beside the kernel (a file per kernel source, so
# the cache never serves another kernel's code), and a kernel never split costs nothing.
# kernel(start, stop, *rest) per span [bounds[i], bounds[i + 1]) (the row-range kernels)
_SPANS = """\
@numba.njit(parallel=True, nogil=True, cache=True)
def launch_spans(bounds, *rest):
    for span in numba.prange(bounds.shape[0] - 1):
        kernel(bounds[span], bounds[span + 1], *rest)
"""
# kernel(table[i], *rest) per row of a parameter table (reduction kernels writing shared
# outputs) and kernel(table[i], *rest, partials[i]) (a partial result row per span)
_TABLES = """\
@numba.njit(parallel=True, nogil=True, cache=True)
def launch_table(table, *rest):
    for span in numba.prange(table.shape[0]):
        kernel(table[span], *rest)


@numba.njit(parallel=True, nogil=True, cache=True)
def launch_table_partials(table, partials, *rest):
    for span in numba.prange(table.shape[0]):
        kernel(table[span], *rest, partials[span])
"""
_FORMS = {"spans": _SPANS, "table": _TABLES}


def with_launchers(source: str, forms: str) -> str:
    """A kernel module's text with the launchers of ``forms`` ("spans" or "table") appended."""
    return f"{source}\n\n{_FORMS[forms]}"


_STATE = {"usable": None, "launched": False, "forked": False}
_LOCK = threading.Lock()


def usable() -> bool:
    """Whether kernels may run on numba's team in this process (a thread-safe layer loads, and
    this is not a forked child of a process that used it)."""
    if _STATE["forked"]:
        return False
    found = _STATE["usable"]
    if found is None:
        with _LOCK:
            found = _STATE["usable"]
            if found is None:
                found = _STATE["usable"] = _layer_is_thread_safe()
    return found


def _layer_is_thread_safe() -> bool:
    import numba
    from numba.np.ufunc import parallel
    try:
        parallel._launch_threads()
    except (ValueError, ImportError, OSError):  # (no threading layer can be loaded here)
        return False
    _STATE["launched"] = True  # (the team's threads run from here on)
    return numba.threading_layer() in ("omp", "tbb")


def launcher(kernel, form: str):
    """The launcher ``launch_<form>`` defined beside ``kernel`` (with_launchers), with the
    kernel's own guards against a damaged or planted cache entry (dsl/codegen/compile.py)."""
    attribute = f"_dsl_launch_{form}"
    found = getattr(kernel, attribute, None)
    if found is None:
        found = kernel.py_func.__globals__[f"launch_{form}"]
        compile_guards(found)
        setattr(kernel, attribute, found)
    return found


def launch(kernel, form: str, *args) -> None:
    """Run ``kernel`` over its spans on the team: ``launcher(kernel, form)(*args)``."""
    launcher(kernel, form)(*args)


def _after_fork_in_child() -> None:
    _STATE["forked"] = _STATE["launched"]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
