"""A fork server's socket on the disk, and the server a run starts for its jobs.

The socket lives in a private folder that `start` makes (FOLDER_PREFIX, mode 0700): a server makes way only
for a stale socket of its own there (`clear_the_way`) and removes only its own socket, and that folder where
it leaves it empty, at its end (`remove_socket`, `remove_folder`), never a file that may be someone's. `start`
and `stop`: a Snakemake run's server, which ends with the run.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from dataclasses import dataclass
from typing import Any

from vlmgrid.errors import VlmgridError

FOLDER_PREFIX = "vlmgrid-forkserver-"  # the private folder `start` makes for a server's socket


@dataclass(frozen=True)
class Started:
    """A fork server started by `start`: its process (a subprocess.Popen), its private folder, and its
    socket."""

    process: Any
    folder: str
    socket_path: str


def start(log_path: str, wait_s: float = 60.0) -> Started | None:
    """Start `vlmgrid forkserver` with its log at `log_path` (truncated) and return it once its socket takes
    connections, so that the run's first jobs are served too; None where none can start here (no `vlmgrid` on
    PATH, a socket path too long) or where it ended or did not listen within `wait_s` seconds (it is stopped:
    the jobs then run in their own processes, as without one)."""
    import shutil
    import subprocess
    import tempfile

    from vlmgrid import fileio

    vlmgrid = shutil.which("vlmgrid")
    if vlmgrid is None:
        return None
    try:  # the log first: a log that cannot be written leaves no folder behind
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        log = open(log_path, "w")
    except OSError as error:
        raise fileio.unwritable(log_path, error) or error from None
    with log:
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        # A Unix socket's path holds at most 107 bytes: a short folder of its own under /tmp (or the runtime
        # one)
        try:
            folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=runtime if os.path.isdir(runtime) else "/tmp")
        except OSError:
            return None
        socket_path = os.path.join(folder, "socket")
        if len(socket_path.encode()) > 100:
            os.rmdir(folder)
            return None
        # os.environ, given as it is: the jobs' commands get it so, and a library's C-level setenv (which
        # os.environ does not see) must not make the server's differ from theirs. The server ends with this
        # process, even one killed by SIGKILL, which runs no `stop`.
        process = subprocess.Popen(
            [vlmgrid, "forkserver", "--socket", socket_path, "--parent-pid", str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(os.environ),
            start_new_session=True,
        )
    server = Started(process, folder, socket_path)
    deadline = time.monotonic() + wait_s
    while not os.path.exists(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(server)
            return None
        time.sleep(0.02)
    return server


def stop(server: Started) -> None:
    """Stop a server from `start` (it stops its jobs first, if any are left) and remove its folder."""
    import shutil
    import subprocess

    server.process.terminate()
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    shutil.rmtree(server.folder, ignore_errors=True)


def ours(folder: str) -> bool:
    """Whether `folder` is one that `start` made for a server's socket (private to this user)."""
    try:
        found = os.lstat(folder)
    except OSError:
        return False
    return (
        os.path.basename(folder).startswith(FOLDER_PREFIX)
        and stat.S_ISDIR(found.st_mode)
        and found.st_uid == os.getuid()
        and found.st_mode & 0o077 == 0
    )


def clear_the_way(path: str) -> None:
    """Make way for a server's socket at `path`: nothing there, or a stale socket of ours (one nobody listens
    on, in a folder `start` made), which is removed. Anything else is refused: it may be someone's file."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise VlmgridError(
            f"{path} exists and is not a socket; give --socket a path where nothing is (the "
            "server makes its socket there)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        listening = False
    except OSError as error:
        raise VlmgridError(
            f"{path} is a socket this user cannot connect to ({error.strerror}); give --socket a "
            "path where nothing is"
        ) from None
    else:
        listening = True
    finally:
        probe.close()
    if listening:
        raise VlmgridError(
            f"{path} is the socket of a server that is running; stop that one first, or give "
            "--socket another path"
        )
    if found.st_uid != os.getuid() or not ours(os.path.dirname(os.path.abspath(path))):
        raise VlmgridError(
            f"{path} is a socket that nobody listens on, outside a folder of vlmgrid's own; "
            "remove it if it is a stale server's, or give --socket another path"
        )
    os.unlink(path)


def remove_socket(path: str, made: os.stat_result) -> None:
    """Remove the server's socket at `path` if it is still the one it made: never anything else."""
    try:
        if os.path.samestat(os.lstat(path), made):
            os.unlink(path)
    except FileNotFoundError:
        pass


def remove_folder(socket_path: str) -> None:
    """Remove the folder of ours that the socket at `socket_path` was in, if nothing is left in it."""
    folder = os.path.dirname(os.path.abspath(socket_path))
    if ours(folder):
        try:
            os.rmdir(folder)
        except OSError:  # something else is in it: it stays
            pass
