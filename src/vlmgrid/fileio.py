"""Atomic writes and hashing: a killed process never leaves a half-written file that looks complete."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vlmgrid.errors import VlmgridError

_CHUNK = 1 << 20

# A temporary is a hidden file beside its output, in the same folder so that the rename is atomic, named
# `.<output name>.vlmgrid-<pid>@<host>.<8 hex>.tmp`: no output is hidden or ends in `.vlmgrid-...tmp`, and the
# name says which process wrote it. A temporary is stale when its process is gone: on this host, when no
# process has its pid (a live one, even another user's, is left alone; a reused pid only delays the removal);
# from another host sharing the folder, when it has not changed for a day, as that host's pids cannot be seen.
_TEMPORARY = re.compile(r"\..+\.vlmgrid-(?P<pid>\d+)@(?P<host>.*)\.[0-9a-f]{8}\.tmp")
_OTHER_HOST_STALE_S = 24 * 3600
_HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:32] or "host"
_swept: set[str] = set()  # folders whose stale temporaries this process has removed

# The errors of a write that the user fixes on their side (space, quota, a read-only or locked folder).
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NOT_WRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM}


def temporary_name(path: Path) -> Path:
    """A fresh temporary's path beside `path`."""
    return path.with_name(f".{path.name}.vlmgrid-{os.getpid()}@{_HOST}.{secrets.token_hex(4)}.tmp")


def create_temporary(path: str | os.PathLike) -> Path:
    """Create an empty temporary beside `path`, first removing the folder's stale ones (once per process).

    It is created with mode 0666 less the umask, as a plain open() creates a file, so the output renamed from
    it can be read by whoever could read a file the user writes (0644 under umask 022), never mkstemp's 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    while True:
        tmp = temporary_name(path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


def _stale(entry: os.DirEntry, now: float) -> bool:
    match = _TEMPORARY.fullmatch(entry.name)
    if match is None or not entry.is_file(follow_symlinks=False):
        return False
    if match["host"] != _HOST:
        return now - entry.stat(follow_symlinks=False).st_mtime > _OTHER_HOST_STALE_S
    pid = int(match["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # the process exists but is another user's
        return False
    return False


def remove_stale_temporaries(folder: str | os.PathLike) -> None:
    """Remove the temporaries a killed writer left in `folder`; a folder is looked at once per process."""
    key = os.path.abspath(folder)
    if key in _swept:
        return
    now = time.time()
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                if _stale(entry, now):
                    Path(entry.path).unlink(missing_ok=True)
            except FileNotFoundError:  # renamed or removed by its writer meanwhile
                pass
    _swept.add(key)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def unwritable(path: str | os.PathLike, error: OSError, wanted: str | None = None) -> VlmgridError | None:
    """The one sentence for a write of `path` that failed on the user's side (a full disk or quota, a
    read-only or locked folder), or None when `error` is not such a failure. `wanted` says how much space the
    write needed, when known."""
    path = Path(path)
    if error.errno in _NO_SPACE:
        space = [wanted + " wanted"] if wanted else []
        try:
            existing = next(p for p in (path.parent, *path.parents) if p.exists())
            space.append(f"{_size(shutil.disk_usage(existing).free)} free")
        except (OSError, StopIteration):
            pass
        reason = (
            "the disk quota is exceeded" if error.errno == errno.EDQUOT else "no space is left on its disk"
        )
        detail = f" ({', '.join(space)})" if space else ""
        return VlmgridError(
            f"{path}: cannot write it, {reason}{detail}; free some space there (or write the "
            "outputs elsewhere) and run again"
        )
    if error.errno in _NOT_WRITABLE:
        reason = (
            "its folder is on a read-only file system"
            if error.errno == errno.EROFS
            else "its folder is not writable by this user"
        )
        detail = f" ({wanted} wanted)" if wanted else ""
        return VlmgridError(
            f"{path}: cannot write it{detail}, {reason}; make {path.parent} writable (or write "
            "the outputs elsewhere) and run again"
        )
    return None


def failed_write(error: OSError) -> VlmgridError | None:
    """The one sentence for an OSError that only a write raises (a full disk or quota, a read-only file
    system) wherever it came from, e.g. a library writing its own file; None for any other error, which is
    not the user's disk and must stay a traceback."""
    if error.errno not in _NO_SPACE | {errno.EROFS}:
        return None
    if error.filename is not None:
        return unwritable(error.filename, error)
    reason = os.strerror(error.errno).lower()
    return VlmgridError(
        f"a write failed ({reason}) on a file the error does not name; free some space on the "
        "disk of the outputs (or make it writable) and run again"
    )


def user_error(error: BaseException) -> VlmgridError | None:
    """The one sentence a command ends with for `error`: a VlmgridError as it is, a failed write (a full or
    read-only disk) as failed_write says it; None for anything else, a bug whose traceback must stay."""
    if isinstance(error, VlmgridError):
        return error
    return failed_write(error) if isinstance(error, OSError) else None


def _ours(error: OSError, *paths: Path) -> bool:
    """Whether `error` is about one of `paths` (an error without a file name is a write to an open file)."""
    return error.filename is None or os.fspath(error.filename) in {os.fspath(p) for p in paths}


@contextmanager
def atomic_path(path: str | os.PathLike, size: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed onto `path`, on failure removed.

    A full disk or an unwritable folder becomes one sentence naming `path` and the space wanted (`size` bytes
    when the caller knows it, else more than what the temporary held when the disk filled); `path` is left as
    it was and no temporary stays.
    """
    path = Path(path)
    wanted = _size(size) if size is not None else None
    try:
        tmp = create_temporary(path)
    except OSError as exc:
        failure = unwritable(path, exc, wanted)
        if failure is None:
            raise
        raise failure from exc
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        failure = None
        if exc.errno in _NO_SPACE or (exc.errno in _NOT_WRITABLE and _ours(exc, tmp, path)):
            if wanted is None and exc.errno in _NO_SPACE:
                try:
                    wanted = f"more than {_size(tmp.stat().st_size)}"
                except OSError:
                    pass
            tmp.unlink(missing_ok=True)  # first, so that the free space said is what the user has
            failure = unwritable(path, exc, wanted)
        if failure is None:
            raise
        raise failure from exc
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path, size=len(data)) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_parquet(path: str | os.PathLike, frame) -> None:
    """Write a pandas DataFrame as parquet, atomically."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(obj: Any) -> str:
    """A stable fingerprint of a JSON-able object (key order does not matter)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
