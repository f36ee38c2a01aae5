"""Compile generated kernel source, with an in-memory and an on-disk cache.

Each source text is written once to ``<cache dir>/k_<sha256>.py`` and imported from there, so
numba's ``cache=True`` stores the machine code beside it and a new process skips LLVM. The
directory is ``$DSL_CACHE_DIR`` if set (``DSL_CACHE_DIR=off`` keeps generated modules in a
per-process temporary directory), else ``~/.cache/dsl/kernels``. Cached code is executed:
point the variable at a directory only you can write.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

_LOCK = threading.Lock()
_KEY_LOCKS: dict[str, threading.Lock] = {}
_COMPILED: dict[str, object] = {}
_TEMP_DIR: list[str] = []
STATS = {"compiled": 0, "memory_hits": 0}


def cache_dir() -> Path:
    """Where generated modules (and numba's cache files) live."""
    setting = os.environ.get("DSL_CACHE_DIR", "")
    if setting.lower() == "off":
        if not _TEMP_DIR:
            _TEMP_DIR.append(tempfile.mkdtemp(prefix="dsl-kernels-"))
        return Path(_TEMP_DIR[0])
    if setting:
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dsl" / "kernels"


def _write_once(path: Path, source: str) -> None:
    """Write ``source`` atomically unless an identical file is already there (an existing file
    keeps its mtime, which numba's cache index checks)."""
    try:
        if path.read_text() == source:
            return
    except (OSError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(source)
    os.replace(tmp, path)


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tolerate_damaged_cache(function) -> None:
    """numba raises (e.g. UnpicklingError) on a damaged cache index or data file instead of
    compiling again; treat one as a miss and drop the index so the fresh result is saved."""
    cache = getattr(function, "_cache", None)
    load = getattr(cache, "load_overload", None)
    index_path = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    if load is None or index_path is None:
        return

    def load_overload(signature, target_context):
        try:
            return load(signature, target_context)
        except Exception:  # noqa: BLE001  (whatever the damaged bytes make pickle raise)
            with contextlib.suppress(OSError):
                os.remove(index_path)
            return None

    cache.load_overload = load_overload


_BACKEND_READY: list[bool] = []


def prepare_backend() -> None:
    """numba's once-per-process CPU target set-up: importing and registering its typing and
    lowering implementations and compiling its runtime (about 0.13 s here). numba runs it on
    its first compile or cache load, which made it most of a new process's first call even
    with every kernel cached (145 ms of 150); jit functions run it when they are created
    instead, so a first call costs what the cache leaves (about 25 ms)."""
    if _BACKEND_READY:
        return
    from numba.core import compiler_lock
    from numba.core.registry import cpu_target
    with compiler_lock.global_compiler_lock:
        if not _BACKEND_READY:
            cpu_target.target_context.refresh()  # (refreshes the typing context too)
            _BACKEND_READY.append(True)


def compile_kernel(source: str, entry: str = "kernel"):
    """The numba function ``entry`` defined by ``source``, compiled at most once per process."""
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    found = _COMPILED.get(key)
    if found is not None:
        STATS["memory_hits"] += 1
        return found
    with _LOCK:
        key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with key_lock:  # concurrent first calls of one kernel compile it once
        found = _COMPILED.get(key)
        if found is not None:
            return found
        name = f"k_{key}"
        path = cache_dir() / f"{name}.py"
        _write_once(path, source)
        function = getattr(_import(path, f"dsl_kernels.{name}"), entry)
        _tolerate_damaged_cache(function)
        _COMPILED[key] = function
        STATS["compiled"] += 1
        return function
