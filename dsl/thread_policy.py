"""How many threads a kernel may split over: ``dsl.set_threads`` / ``$DSL_THREADS`` (default:
the cores), ``single_threaded()`` blocks, and whether numba's thread team may run at all in
this process (dsl/codegen/threads.py). Its own module so that every kernel that splits, the
runtime's span launchers and the kernels' own parallel loops (kernels/attention.py, matvec.py,
copy.py, floats.py, packed.py, through kernels/parallel.py, where this module installs
``available``), asks the one policy.

numba's team has NUMBA_NUM_THREADS threads (default: the cores), fixed when it starts; a
prange loop splits over all of them unless the launching thread lowered its own count
(``numba.set_num_threads``, per thread). ``available`` sets that count to the policy's, so
``set_threads(2)`` under a team of 4 runs every kernel on 2 threads, not only the launchers'
2 spans.
"""
from __future__ import annotations

import contextlib
import os
import threading

import numba
import numpy as np

from kernels import parallel as kernel_parallel

from .codegen import threads
from .errors import InputError


def _thread_setting() -> int:
    """Threads a large kernel splits over: ``$DSL_THREADS`` (a positive int), else the cores."""
    setting = os.environ.get("DSL_THREADS", "").strip()
    if setting:
        if not setting.isdigit() or int(setting) < 1:
            raise InputError(f"DSL_THREADS={setting!r}; expected a positive integer")
        return int(setting)
    return max(1, os.cpu_count() or 1)


_THREADS = _thread_setting()
_LOCAL = threading.local()


def set_threads(count: int) -> None:
    """Split large kernels over ``count`` threads from now on (replaces DSL_THREADS / the core count)."""
    global _THREADS
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise InputError(f"set_threads: count {count!r}; expected a positive int")
    _THREADS = int(count)


def available() -> int:
    """The threads a large kernel called from this thread may split over now: one inside
    single_threaded() or where numba's team cannot be used (a forked child of a process that
    used it, a numba with no thread-safe layer), else the set_threads / DSL_THREADS count;
    this thread's launches then use at most that many of numba's team."""
    if _THREADS < 2 or getattr(_LOCAL, "serial", False) or not threads.usable():
        return 1
    team = min(_THREADS, numba.config.NUMBA_NUM_THREADS)
    if getattr(_LOCAL, "team", None) != team:  # (numba.get_num_threads() costs ~2 us a call)
        numba.set_num_threads(team)
        _LOCAL.team = team
    return _THREADS


@contextlib.contextmanager
def single_threaded():
    """Kernels called from this thread run on it alone (no row split over dsl's pool): for
    callers that schedule their own threads, e.g. dask tasks, so cores are not oversubscribed."""
    before = getattr(_LOCAL, "serial", False)
    _LOCAL.serial = True
    try:
        yield
    finally:
        _LOCAL.serial = before


kernel_parallel.install(available)
