"""Compile generated kernel source, with an in-memory and an on-disk cache.

Each source text is written once to ``<cache dir>/k_<sha256>.py`` and imported from there, so
numba's ``cache=True`` stores the machine code beside it and a new process skips LLVM. The
directory is ``$DSL_CACHE_DIR`` if set (``DSL_CACHE_DIR=off`` keeps generated modules in a
per-process temporary directory), else ``~/.cache/dsl/kernels``. Cached code is executed, so a
directory that is not ours, that others may write, or that cannot be created or written (a
dangling symlink, a path under a file, no permission) is not used: dsl warns once and keeps
this process's kernels in a temporary directory instead. Only regular files are read there,
so a FIFO planted in the cache cannot block a compile.
"""
from __future__ import annotations

import _thread
import contextlib
import hashlib
import os
import signal
import stat
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path

# Every module a generated kernel imports (fused.PREAMBLE) is imported with dsl, not first by a
# kernel load on some thread: an import in progress holds that module's import lock, and a
# process forked meanwhile would wait on it forever (CPython does not reset module locks).
import kernels.bits  # noqa: F401
import kernels.copy  # noqa: F401
import kernels.floats  # noqa: F401
import kernels.packed  # noqa: F401
import kernels.vmath  # noqa: F401

from .. import interrupts
from ..lru import LRU

_KEY_LOCKS = [threading.Lock() for _ in range(64)]  # striped: concurrent compiles of one key wait
_COMPILED = LRU("kernels", on_evict=lambda key, _: sys.modules.pop(f"dsl_kernels.k_{key}", None))
_TEMP_DIR: list[str] = []
_REFUSED: dict[str, str] = {}  # cache directories found unusable -> why (warned once each)
STATS = {"compiled": 0, "memory_hits": 0}


class CacheDirWarning(UserWarning):
    """The kernel cache directory cannot be used; this process compiles into a temporary one."""


def _temporary_dir() -> Path:
    if not _TEMP_DIR:
        _TEMP_DIR.append(tempfile.mkdtemp(prefix="dsl-kernels-"))
    return Path(_TEMP_DIR[0])


def _configured_dir() -> Path | None:
    setting = os.environ.get("DSL_CACHE_DIR", "")
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dsl" / "kernels"


def _unusable(directory: Path) -> str | None:
    """Why ``directory`` cannot hold executable cached kernels (None: it can, or it does not
    exist yet: the first write creates it, and a failure then is refused in _load)."""
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        return "it is a dangling symbolic link" if os.path.islink(directory) else None
    except OSError as exc:
        return f"cannot inspect it ({exc.__class__.__name__}: {exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return f"it belongs to user id {info.st_uid}, not to this process's user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        return "other users may write to it"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def cache_dir() -> Path:
    """Where generated modules (and numba's cache files) live: the configured directory when
    it is usable, else this process's temporary directory."""
    directory = _configured_dir()
    if directory is None:
        return _temporary_dir()
    key = str(directory)
    if key not in _REFUSED:
        reason = _unusable(directory)
        if reason is None:
            return directory
        _refuse(key, reason)
    return _temporary_dir()


def _refuse(key: str, reason: str) -> None:
    _REFUSED[key] = reason
    warnings.warn(f"dsl: kernel cache directory {key!r} is not used ({reason}); compiled kernels of this "
                  f"process go to {str(_temporary_dir())!r} and are not kept (set DSL_CACHE_DIR to a "
                  f"directory of your own)", CacheDirWarning, stacklevel=3)


def _regular_text(path: Path) -> str | None:
    """The text of ``path`` if it is a regular file (never opens a FIFO or device)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _write_once(path: Path, source: str) -> None:
    """Write ``source`` atomically unless an identical file is already there (an existing file
    keeps its mtime, which numba's cache index checks)."""
    if _regular_text(path) == source:
        return
    _make_private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        os.replace(tmp, path)  # (replaces whatever was there, a FIFO or symlink included)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _import(path: Path, name: str):
    """The module of the generated file ``path``, compiled from its text here: Python's own import
    would read (and write) a bytecode file under __pycache__, and a FIFO planted there blocked
    it. numba's cache keys on the file, which stays the code's file name."""
    source = _regular_text(path)
    if source is None:
        raise OSError(f"generated kernel {path} is not a readable regular file")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 (our generated kernel)
    return module


def _make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents readable and writable by this user only (mode
    0o700, whatever the umask: a cache others may write is refused, see _unusable)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        os.chmod(path, 0o700)


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
    interrupts.install()
    from numba.core import compiler_lock
    from numba.core.registry import cpu_target
    with compiler_lock.global_compiler_lock:
        if not _BACKEND_READY:
            cpu_target.target_context.refresh()  # (refreshes the typing context too)
            _BACKEND_READY.append(True)


_FORK_MASK: list = []  # the signal mask to restore after a fork (SIGINT blocked around it)


def _hold_compiler_for_fork() -> None:
    """Fork only between compiles: a child forked while another thread held numba's compiler
    lock (or was inside LLVM) would wait for that lock forever. SIGINT is blocked while this
    waits: a KeyboardInterrupt raised here would be swallowed by os.fork and the fork would go
    on without the lock; blocked, it stays pending and reaches the parent after the fork."""
    try:
        _FORK_MASK.append(signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}))
    except (AttributeError, OSError, ValueError):  # (no pthread_sigmask on this platform)
        _FORK_MASK.append(None)
    from numba.core.compiler_lock import global_compiler_lock
    global_compiler_lock._lock.acquire()


def _restore_signal_mask(parent: bool) -> None:
    """Undo _hold_compiler_for_fork's SIGINT block. In the parent a SIGINT that arrived meanwhile
    is taken off first and sent again from a short-lived thread: unblocked here it would raise
    inside this hook, where os.fork prints and drops the KeyboardInterrupt."""
    mask = _FORK_MASK.pop() if _FORK_MASK else None
    if mask is None:
        return
    pending = parent and signal.SIGINT not in mask and signal.SIGINT in signal.sigpending()
    if pending:
        signal.sigtimedwait({signal.SIGINT}, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if pending:
        # (a bare thread: Thread.start() would wait for it to run, and that wait would take the signal)
        _thread.start_new_thread(signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))


def _release_compiler_after_fork() -> None:
    from numba.core.compiler_lock import global_compiler_lock
    global_compiler_lock._lock.release()
    _restore_signal_mask(parent=True)


def _renew_locks_in_child() -> None:
    from numba.core.compiler_lock import global_compiler_lock
    global_compiler_lock._lock._at_fork_reinit()
    for index in range(len(_KEY_LOCKS)):
        _KEY_LOCKS[index] = threading.Lock()
    _restore_signal_mask(parent=False)  # (a child starts with no pending signal)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_hold_compiler_for_fork, after_in_parent=_release_compiler_after_fork,
                        after_in_child=_renew_locks_in_child)


def compile_kernel(source: str, entry: str = "kernel"):
    """The numba function ``entry`` defined by ``source``, compiled at most once per process
    (while it stays among the ``dsl.set_cache_limits(kernels=...)`` most recently used)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    found = _COMPILED.get(key)
    if found is not None:
        STATS["memory_hits"] += 1
        return found
    prepare_backend()
    with _KEY_LOCKS[int(key[:8], 16) % len(_KEY_LOCKS)]:  # concurrent first calls compile it once
        found = _COMPILED.get(key)
        if found is not None:
            return found
        function = _load(key, source, entry)
        _COMPILED[key] = function
        STATS["compiled"] += 1
        return function


def _load(key: str, source: str, entry: str):
    """Write and import the module of ``source``; a cache directory that fails on the way is
    dropped for this process's temporary one (with a warning)."""
    name = f"k_{key}"
    directory = cache_dir()
    try:
        _write_once(directory / f"{name}.py", source)
    except OSError as exc:
        _refuse(str(directory), f"writing a kernel failed ({exc.__class__.__name__}: {exc.strerror or exc})")
        directory = cache_dir()
        _write_once(directory / f"{name}.py", source)
    function = getattr(_import(directory / f"{name}.py", f"dsl_kernels.{name}"), entry)
    compile_guards(function)
    return function


def compile_guards(function) -> None:
    """Guard a generated numba function against damaged or planted cache files."""
    _tolerate_damaged_cache(function)
    _drop_irregular_cache_files(function)


def _drop_irregular_cache_files(function) -> None:
    """numba opens its cache index and data files without checking what they are: a FIFO or
    device planted under those names would block the first call forever. Remove any such entry
    (numba then compiles and writes regular files); if that fails, compile without the cache."""
    index_path = getattr(getattr(getattr(function, "_cache", None), "_cache_file", None), "_index_path", None)
    if index_path is None:
        return
    folder, stem = os.path.split(index_path)
    stem = stem.rsplit(".", 2)[0]  # <module>.<qualname>-<line>
    try:
        names = [n for n in os.listdir(folder) if n.startswith(stem)]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                os.remove(path)
        except OSError:
            from numba.core.caching import NullCache
            function._cache = NullCache()
            return
