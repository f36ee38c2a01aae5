"""Bounded caches: a thread-safe least-recently-used map, and the limits users set for dsl's caches.

Three caches hold compiled state: each jit function's executables (one per input signature),
each Program's executables, and the compiled kernels of the process. Each is an ``LRU`` whose
capacity comes from ``limits`` (``dsl.set_cache_limits`` or the environment variables
``DSL_SIGNATURE_CACHE`` and ``DSL_KERNEL_CACHE``), so a program called with ever new shapes
keeps a bounded amount of memory.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import MutableMapping

from .errors import InputError

_DEFAULTS = {"signatures": ("DSL_SIGNATURE_CACHE", 256), "kernels": ("DSL_KERNEL_CACHE", 1024)}


def _from_env(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


_LIMITS = {kind: _from_env(env, default) for kind, (env, default) in _DEFAULTS.items()}
_CACHES = {kind: weakref.WeakSet() for kind in _DEFAULTS}  # every live cache, to apply new limits


class LRU(MutableMapping):
    """A map that keeps at most ``limits[kind]`` entries, dropping the least recently used.

    ``get`` and ``[]`` count as uses; ``in`` does not. Safe to use from several threads.
    """

    __hash__ = object.__hash__  # (Mapping's __eq__ compares contents; identity is the hash)

    def __init__(self, kind: str, on_evict=None):
        assert kind in _LIMITS, kind
        self.kind = kind
        self.on_evict = on_evict  # (key, value) -> None, called for each entry dropped
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0
        _CACHES[kind].add(self)

    def get(self, key, default=None):
        # No lock: each OrderedDict call is atomic, and an entry another thread drops between
        # the two is still returned (this call's use of it is the last)
        found = self._items.get(key, _MISSING)
        if found is _MISSING:
            return default
        try:
            self._items.move_to_end(key)
        except KeyError:
            pass
        return found

    def __getitem__(self, key):
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return found

    def __setitem__(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._trim(_LIMITS[self.kind])

    def _trim(self, limit: int) -> None:
        while len(self._items) > limit:
            key, value = self._items.popitem(last=False)
            self.evictions += 1
            if self.on_evict is not None:
                self.on_evict(key, value)

    def __delitem__(self, key) -> None:
        with self._lock:
            del self._items[key]

    def __iter__(self):
        return iter(list(self._items))

    def __contains__(self, key) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def values(self) -> list:
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_MISSING = object()


def _renew_locks_in_child() -> None:
    """A cache lock another thread held when the process forked would stay held in the child."""
    for caches in _CACHES.values():
        for cache in list(caches):
            cache._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks_in_child)


def set_cache_limits(signatures: int | None = None, kernels: int | None = None) -> dict:
    """Bound dsl's caches of compiled state (least recently used entries go first).

    Args:
        signatures: executables kept per jit function and per Program (one per input
            signature; default 256, or ``$DSL_SIGNATURE_CACHE``).
        kernels: compiled kernels kept by the process (default 1024, or ``$DSL_KERNEL_CACHE``).
            A kernel an executable still uses stays alive through it.

    Returns:
        The limits now in force, ``{"signatures": n, "kernels": m}``.

    Raises:
        InputError: a limit that is not a positive int.

    Example:
        >>> dsl.set_cache_limits(signatures=16)
        {'signatures': 16, 'kernels': 1024}
    """
    for kind, value in (("signatures", signatures), ("kernels", kernels)):
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"dsl.set_cache_limits: {kind}={value!r}; expected a positive int")
        _LIMITS[kind] = value
        for cache in list(_CACHES[kind]):
            with cache._lock:
                cache._trim(value)
    return dict(_LIMITS)
