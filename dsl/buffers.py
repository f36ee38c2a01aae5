"""A pool of large result buffers, reused once nothing refers to them."""
from __future__ import annotations

import sys
import threading

import numpy as np


class BufferPool:
    """Reuses large output buffers whose results the caller has dropped.

    A fresh multi-megabyte np.empty costs a page fault per 4 KiB on first write (about as much
    as the kernel itself); a pooled buffer is reused only when nothing but the pool refers to
    it (every array handed out is a view whose base is the pooled buffer, so a live result,
    or any view of it, keeps its buffer out of reuse).
    """

    MIN_BYTES = 1 << 20
    PER_SIZE = 4
    # The reuse test counts references; that is sound on CPython up to 3.13 (tested). Later
    # interpreters may borrow references on the stack, so pooling is off there.
    ENABLED = sys.implementation.name == "cpython" and sys.version_info < (3, 14)

    def __init__(self):
        self._free: dict = {}
        self._lock = threading.Lock()

    def empty(self, count: int, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        if count * dtype.itemsize < self.MIN_BYTES or not self.ENABLED:
            return np.empty(count, dtype)
        with self._lock:
            held = self._free.setdefault((count, dtype.str), [])
            for buffer in held:
                if sys.getrefcount(buffer) <= 3:  # the list, the loop variable, the call's argument
                    return buffer
            buffer = np.empty(count, dtype)
            if len(held) < self.PER_SIZE:
                held.append(buffer)
            return buffer


POOL = BufferPool()
