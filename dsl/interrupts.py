"""Ctrl-C during a numba compile is held back until the compile ends, then delivered.

A KeyboardInterrupt raised inside numba's compiler or cache loader leaves half-built LLVM
libraries behind: later calls in the same process then failed with "no compiled object yet"
or segfaulted when the garbage collector disposed of them (3 of 162 trials). numba brackets
every compile and cache load with its global compiler lock, and announces each acquire and
release as a "numba:compiler_lock" event; while the main thread holds the lock, a SIGINT only
sets a flag. When the outermost hold ends, the previous handler is restored and the signal is
raised again, so the KeyboardInterrupt (or the user's own handler) runs after the compile is
complete and numba's state is whole. Other threads need nothing: Python runs signal handlers
on the main thread only.
"""
from __future__ import annotations

import signal
import threading

from numba.core import event

_MAIN = threading.main_thread()


class _DeferSigint(event.Listener):
    """Swaps a deferring SIGINT handler in for the main thread's outermost compiler-lock hold."""

    def __init__(self):
        self.depth = 0
        self.previous = None
        self.pending = False

    def _holding(self, signum, frame) -> None:
        self.pending = True

    def on_start(self, ev) -> None:
        if threading.current_thread() is not _MAIN:
            return
        self.depth += 1
        if self.depth == 1:
            current = signal.getsignal(signal.SIGINT)
            if callable(current):  # a Python-level handler (not SIG_DFL / SIG_IGN / None)
                self.previous, self.pending = current, False
                signal.signal(signal.SIGINT, self._holding)

    def on_end(self, ev) -> None:
        if threading.current_thread() is not _MAIN or self.depth == 0:
            return
        self.depth -= 1
        if self.depth == 0 and self.previous is not None:
            previous, self.previous = self.previous, None
            signal.signal(signal.SIGINT, previous)
            if self.pending:
                self.pending = False
                signal.raise_signal(signal.SIGINT)  # delivered now: the compile is complete


_LISTENER: list[_DeferSigint] = []


def install() -> None:
    """Hold SIGINT back during numba compiles from now on (idempotent)."""
    if not _LISTENER:
        _LISTENER.append(_DeferSigint())
        event.register("numba:compiler_lock", _LISTENER[0])
