"""Reading ONNX external tensor data without trusting the model: dsl reads it itself (onnx never
resolves it). The file must be a regular, single-link file below the model directory, reached
without any symlink, and the byte range must lie inside it."""
from __future__ import annotations

import os
import re
import stat
from pathlib import PureWindowsPath

from .errors import InputError, UnsupportedError

# dsl reads external data itself (onnx never resolves it): the file must be a regular,
# single-link file below the model directory, reached without any symlink.
_EXTERNAL_KEYS = ("location", "offset", "length", "checksum")  # checksum: optional, not verified


def external_bytes(proto, dt, count: int, label: str, base_dir: str | None, inline: bool) -> bytearray:
    """The raw bytes of TensorProto ``proto`` (``count`` elements of ``dt``) stored in an external
    file (ONNX ExternalData.md); ``inline``: the proto also holds data of its own."""
    if dt.kind == "string":
        raise InputError(f"{label} is a string tensor with external data; ONNX stores strings in "
                         f"string_data")
    if inline:
        raise InputError(f"{label} has data_location EXTERNAL but also holds data in the model; "
                         f"expected one or the other")
    info = _external_info(proto, label)
    location = info.get("location", "")
    need = dt.packed_nbytes(count)
    offset = _external_int(info, "offset", 0, label)
    length = _external_int(info, "length", need, label)
    if length != need:
        raise InputError(f"{label} {dt.onnx_name}{list(proto.dims)} has external length {length}; "
                         f"expected {need} bytes")
    parts = _location_parts(location, label)
    if base_dir is None:
        raise UnsupportedError(f"{label} stores its data in external file {location!r:.80}, and the "
                               f"model directory is unknown; load the model from its file path or pass "
                               f"base_dir= to dsl.from_onnx")
    path, expected = _checked_path(base_dir, parts, location, label)
    return _read_exactly(path, expected, offset, length, location, label)


def _external_info(proto, label: str) -> dict:
    info = {}
    for entry in proto.external_data:
        if entry.key not in _EXTERNAL_KEYS:
            raise InputError(f"{label} has unknown external_data key {entry.key!r:.80}; expected "
                             f"one of {list(_EXTERNAL_KEYS)}")
        if entry.key in info:
            raise InputError(f"{label} has external_data key {entry.key!r} twice")
        info[entry.key] = entry.value
    if not info.get("location"):
        raise InputError(f"{label} has data_location EXTERNAL but no external_data 'location'")
    return info


def _external_int(info: dict, key: str, default: int, label: str) -> int:
    text = info.get(key)
    if text is None:
        return default
    if not re.fullmatch(r"[0-9]{1,20}", text):  # not int(): it takes '+1', ' 1', '1_0' and '-1'
        raise InputError(f"{label} has external_data {key} {text!r:.80}; expected a non-negative "
                         f"decimal integer of at most 20 digits")
    return int(text)


def _location_parts(location: str, label: str) -> list[str]:
    """The components of a relative POSIX location; refuses anything that could leave the folder."""
    def bad(why: str):
        raise InputError(f"{label} has external data location {location!r:.120}: {why}; expected a "
                         f"relative path inside the model directory")

    if "\0" in location:
        bad("it contains a NUL character")
    if location.startswith("/") or os.path.isabs(location) or PureWindowsPath(location).drive \
            or "\\" in location:
        bad("it is an absolute path or uses backslashes")
    parts = [p for p in location.split("/") if p not in ("", ".")]
    if ".." in parts:
        bad("it contains a '..' component")
    if not parts:
        bad("it names no file")
    return parts


def _checked_path(base_dir: str, parts: list[str], location: str, label: str):
    """The path of the external file and its lstat result, after refusing symlinks, non-regular
    files, hardlinks and anything whose real path is outside the real model directory."""
    def bad(why: str):
        raise InputError(f"{label} has external data location {location!r:.120}: {why}; expected a "
                         f"regular file inside the model directory, reached without symlinks")

    path, status = base_dir, None
    for index, part in enumerate(parts):  # lstat each component from the model folder down
        path, shown = os.path.join(path, part), "/".join(parts[:index + 1])
        try:
            status = os.lstat(path)
        except OSError as exc:
            bad(f"cannot stat {shown!r} ({exc.strerror or exc})")
        if stat.S_ISLNK(status.st_mode):
            bad(f"{shown!r} is a symlink")
        if index < len(parts) - 1 and not stat.S_ISDIR(status.st_mode):
            bad(f"{shown!r} is not a directory")
    if not stat.S_ISREG(status.st_mode):
        bad("it is not a regular file")
    if status.st_nlink != 1:
        bad(f"the file has {status.st_nlink} hard links")
    real_dir, real = os.path.realpath(base_dir), os.path.realpath(path)
    if real == real_dir or not _inside(real, real_dir):
        bad(f"it resolves to {real!r}, outside {real_dir!r}")
    return path, status


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([folder, path]) == folder
    except ValueError:  # different Windows drives
        return False


def _read_exactly(path: str, expected, offset: int, length: int, location: str, label: str) -> bytearray:
    # O_NOFOLLOW: a symlink swapped in after the checks fails to open; O_NONBLOCK: a FIFO swapped
    # in never blocks the open. fstat then proves the opened file is the one that was checked.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"{label}: cannot open external data {location!r:.120}: "
                         f"{exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        if (status.st_dev, status.st_ino) != (expected.st_dev, expected.st_ino) \
                or not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
            raise InputError(f"{label}: external data {location!r:.120} changed while it was opened; "
                             f"expected a stable regular file")
        if offset + length > status.st_size:
            raise InputError(f"{label} reads bytes [{offset}, {offset + length}) of external data "
                             f"{location!r:.120}, which has {status.st_size} bytes; expected a range "
                             f"inside the file")
        data = _pread(fd, length, offset)
    except OSError as exc:
        raise InputError(f"{label}: cannot read external data {location!r:.120}: "
                         f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) != length:
        raise InputError(f"{label}: external data {location!r:.120} ended after {len(data)} of "
                         f"{length} bytes; expected the whole range")
    return data


def _pread(fd: int, length: int, offset: int) -> bytearray:
    data = bytearray()
    if not hasattr(os, "pread"):  # Windows
        os.lseek(fd, offset, os.SEEK_SET)
    while len(data) < length:
        want = min(length - len(data), 1 << 26)
        chunk = os.pread(fd, want, offset + len(data)) if hasattr(os, "pread") else os.read(fd, want)
        if not chunk:
            break
        data += chunk
    return data
