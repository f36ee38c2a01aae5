"""A pool of large result buffers, 64-byte aligned, reused once nothing refers to them."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np


ALIGN = 64  # a cache line: streaming stores write whole aligned lines


class BufferPool:
    """Reuses large output buffers whose results the caller has dropped.

    A fresh multi-megabyte np.empty costs a page fault per 4 KiB on first write (about as much
    as the kernel itself); a pooled buffer is reused only when nothing but the pool refers to
    it. Every large buffer is a 64-byte aligned slice of a byte array (so kernels may stream
    whole cache lines into it); numpy gives every view of it, and every view of a view, that
    byte array as its base, so a live result, or any view of it, keeps its buffer out of reuse.
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
        if count * dtype.itemsize < self.MIN_BYTES:
            return np.empty(count, dtype)
        if not self.ENABLED:
            return aligned_empty(count, dtype)
        with self._lock:
            held = self._free.setdefault((count, dtype.str), [])
            for buffer in held:
                # the buffer: the list, the loop variable, the call's argument (a running kernel's
                # output list would be a fourth); its byte array: the buffer, the argument
                if sys.getrefcount(buffer) <= 3 and sys.getrefcount(buffer.base) <= 2:
                    return buffer
            buffer = aligned_empty(count, dtype)
            if len(held) < self.PER_SIZE:
                held.append(buffer)
            return buffer


def aligned_empty(count: int, dtype, align: int = ALIGN) -> np.ndarray:
    """An uninitialized 1-d array whose data starts on an ``align``-byte boundary."""
    dtype = np.dtype(dtype)
    raw = np.empty(count * dtype.itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + count * dtype.itemsize].view(dtype)


POOL = BufferPool()


def _renew_lock_in_child() -> None:
    POOL._lock = threading.Lock()  # another thread may have held it when the process forked


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock_in_child)
