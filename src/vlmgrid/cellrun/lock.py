"""One run at a time per cell: an exclusive `flock` on a lock file beside the cell's parts folder.

`vlmgrid infer` takes the lock of its cell (or of its shard, a job of its own) before it holds a GPU or reads
a part, and keeps it until the predictions file is written and the parts are removed. A second run of the same
cell finds the lock held and stops at once, writing nothing, with one sentence naming the running process: the
holder writes its pid, host, start time and command line into the lock file. The kernel drops the lock of a
process that dies, a SIGKILL included, so a killed run never blocks the next one; its lock file, still naming
it, is taken over and rewritten. A run that ends (normally or by an exception) removes the lock file while it
still holds the lock, and a run that took the lock of a file removed meanwhile opens the new one instead, so
two runs never hold locks on two different files.

The prepare stage locks a benchmark folder by the same mechanism (`exclusive_lock`), but waits for the
holder instead of refusing.

The lock file is written in place, never through `vlmgrid.fileio`'s atomic rename: a rename would put a new
file, unlocked, in the locked one's place.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import shlex
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from vlmgrid.errors import VlmgridError


def lock_path(partial_dir: Path) -> Path:
    """The lock file of the job whose parts are in `partial_dir`: beside it, `<folder name>.lock`."""
    partial_dir = Path(partial_dir)
    return partial_dir.with_name(f"{partial_dir.name}.lock")


@contextlib.contextmanager
def cell_lock(partial_dir: Path, cell: str) -> Iterator[Path]:
    """Hold the lock of the job whose parts are in `partial_dir` while the block runs; `cell` names the job in
    the refusal ("random on pope", "random on pope, shard 2/3"). Raises VlmgridError at once when another
    process holds it."""

    def refuse(path: Path, holder: dict) -> None:
        raise VlmgridError(_refusal(path, cell, holder))

    with exclusive_lock(lock_path(partial_dir), refuse) as path:
        yield path


@contextlib.contextmanager
def exclusive_lock(path: Path, held: Callable[[Path, dict], None]) -> Iterator[Path]:
    """Hold an exclusive lock on the file `path` while the block runs, writing who holds it into the file.
    When another process holds it, `held(path, holder)` is called with what that process wrote ({} when it has
    not yet): it raises to refuse, or returns to wait until the lock is dropped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _take(path, held)
    try:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": shlex.join(sys.argv),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # still locked: whoever opened this file meanwhile sees it gone and opens anew
        os.close(fd)


def _take(path: Path, held: Callable[[Path, dict], None]) -> int:
    """An open descriptor of `path`, locked; `held` says whether to wait when another process holds it."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            # another cell's run removed the folder as it ended, finding it empty: make it again
            path.parent.mkdir(parents=True, exist_ok=True)
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held(path, _holder(fd))
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)  # its holder removed this file as it ended: lock the one now at the path


def _holder(fd: int) -> dict:
    try:
        holder = json.loads(os.pread(fd, 65536, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _refusal(path: Path, cell: str, holder: dict) -> str:
    if "pid" not in holder:
        return (
            f"{cell}: another run of this cell holds its lock {path} (a process that has not yet written who "
            f"it is); wait for it to finish, or stop it, and run this again"
        )
    pid, host = holder.get("pid"), holder.get("host", "an unknown host")
    return (
        f"{cell}: another run of this cell is in progress (pid {pid} on {host}, since "
        f"{holder.get('started')}: `{holder.get('command')}`), holding its lock {path}; wait for it to "
        f"finish, or stop it (`kill {pid}` on {host}) and run this again"
    )
