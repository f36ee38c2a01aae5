"""How many threads a kernel's own parallel (numba prange) loop may run on, asked at each launch.

The kernels never import dsl; dsl/thread_policy.py installs its policy here when dsl is
imported (``dsl.set_threads`` / ``$DSL_THREADS``, ``single_threaded()`` blocks, and one thread
in a forked child of a process whose numba team ran: GNU OpenMP terminates such a child at its
first parallel region). Without an installed policy a kernel uses numba's whole team.
"""
from __future__ import annotations

from typing import Callable

import numba

_POLICY: list[Callable[[], int]] = []


def install(policy: Callable[[], int]) -> None:
    """Ask ``policy()`` (threads a launch from the calling thread may use now) from now on."""
    _POLICY[:] = [policy]


def threads() -> int:
    """Threads a parallel loop launched from this thread may use now; 1: run the serial kernel."""
    return _POLICY[0]() if _POLICY else numba.get_num_threads()
