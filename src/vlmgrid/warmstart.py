"""The warm start outside Snakemake: the `vlmgrid` command finds this user's fork server, or starts one.

A Snakemake run starts a server of its own and names it to its jobs in VLMGRID_FORKSERVER
(workflow/rules/common.smk). Anywhere else (DVC's stage commands, a shell loop) that variable is unset, and the
`vlmgrid` command looks for a server at a well-known socket: `<key>.sock` in the private folder
`vlmgrid-forkserver-<uid>` under VLMGRID_FORKSERVER_DIR, else $XDG_RUNTIME_DIR, else /tmp. The key is a digest of
the interpreter, the environment less the per-job variables (vlmgrid.forkserver.protocol.per_job), the process's
context (umask, ids, capabilities, limits, nice, namespaces, cgroups, ...) and the code on disk (the content of
vlmgrid's files, vlmgrid.codeversion, and the import path's folders; vlmgrid.forkserver.context), so a server
only gets the jobs it runs as a fresh process would: another virtualenv, another HF_HOME, a command under another
umask or in a network namespace of its own, or an edited checkout finds a server of its own (which the server
checks again before each job, refusing one that differs). Where none answers, the command starts one, detached
(a session of its own, stdin from /dev/null, its log at `<key>.log` beside the socket), waits until it listens
and sends the command, unless it is one of the QUICK ones, which runs in its own process; the server stops
after VLMGRID_FORKSERVER_IDLE seconds (default 60) with no job, and removes its socket, log and lock, and the
private folder once nothing is left in it. An flock on `<key>.lock` keeps two commands that come at once from
both starting one.

None is started, and the command runs in its own process as before, where a job may hold GPUs (it sets
CUDA_VISIBLE_DEVICES before it imports torch, which a child of a server that has imported it cannot), in a
Slurm job (its allocation ends with it), for `python -m vlmgrid.cli` (the way to run one command in a process
of its own) and with VLMGRID_FORKSERVER=off; and, silently, wherever finding or starting one fails.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

from vlmgrid import forkserver
from vlmgrid.forkserver.context import import_paths, process_context
from vlmgrid.forkserver.protocol import interpreter
from vlmgrid.forkserver.sockets import ours

IDLE_ENV = "VLMGRID_FORKSERVER_IDLE"  # seconds with no job before an auto-started server stops
DIR_ENV = "VLMGRID_FORKSERVER_DIR"  # where its private folder is made (default $XDG_RUNTIME_DIR, else /tmp)
IDLE_DEFAULT_S = 60.0
LISTEN_WAIT_S = 30.0  # a started server listens once the CLI is imported, before its long imports
LOCK_TRIES = 10  # takes of the lock whose file a stopping server removed meanwhile, before giving up
SOCKET_PATH_MAX = 100  # a Unix socket's path holds at most 107 bytes
# Commands that take under a second in a process of their own, less than a server's imports (about 5 s), and
# often come alone (the first stage of every `dvc repro`, a question asked at the prompt): they use a server that
# is running, and start none.
QUICK = frozenset({"benchmarks", "models", "cells", "check-config", "stamp-sources", "verify", "dvc-pipelines"})


@dataclass(frozen=True)
class Place:
    """Where the server for this command lives: its socket, its log and the lock taken to start it."""

    socket: str
    log: str
    lock: str


def run_warm(argv: list[str]) -> int | None:
    """Run the command `argv` of the `vlmgrid` command line in a fork server and return its exit code: the one
    VLMGRID_FORKSERVER names, else this user's for this interpreter, environment, process context and code,
    started if none answers (by all but the QUICK commands). None where it should run in this process instead."""
    chosen = os.environ.get(forkserver.ENV, "")
    if chosen == "off" or argv[:1] == ["forkserver"]:
        return None
    if chosen:
        return forkserver.run_through_server(argv)
    idle = _idle_timeout()
    place = _place() if idle is not None and _wanted() else None
    if place is None:
        return None
    client = _connect(place.socket)
    if client is None and not (argv[:1] == [] or argv[0].startswith("-") or argv[0] in QUICK):
        client = _start(place, idle)
    if client is None:
        return None
    return forkserver.run_through_server(argv, place.socket, client)


def _wanted() -> bool:
    """Whether this command may use a shared server: the `vlmgrid` command, outside Slurm, with no GPU."""
    if os.path.basename(sys.argv[0]) != "vlmgrid" or os.environ.get("SLURM_JOB_ID"):
        return False
    from vlmgrid.gpu import visible_gpus

    return not visible_gpus()


def _idle_timeout() -> float | None:
    value = os.environ.get(IDLE_ENV, "")
    try:
        seconds = float(value) if value else IDLE_DEFAULT_S
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        print(f"vlmgrid: {IDLE_ENV}={value} is not a number of seconds above 0; this command runs in its own "
              "process", file=sys.stderr)
        return None
    return seconds


def _place() -> Place | None:
    """The socket, log and lock of this command's server, in this user's private folder (made if missing); None
    where that folder cannot be made or is not private, or the socket's path would be too long."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = os.environ.get(DIR_ENV) or (runtime if os.path.isdir(runtime) else "/tmp")
    folder = os.path.join(os.path.abspath(base), f"{forkserver.FOLDER_PREFIX}{os.getuid()}")
    try:
        os.makedirs(base, exist_ok=True)
    except OSError:
        return None
    if not _private(folder):
        return None
    stem = os.path.join(folder, server_key(os.environ))
    if len(f"{stem}.sock".encode()) > SOCKET_PATH_MAX:
        return None
    return Place(f"{stem}.sock", f"{stem}.log", f"{stem}.lock")


def _private(folder: str) -> bool:
    """Whether `folder`, made here if missing, is private to this user: never a socket in someone else's."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    return ours(folder)


def server_key(environ) -> str:
    """A short digest of what a server's jobs depend on beside their own arguments: the interpreter, the
    environment less the per-job variables, this process's context and the code on disk (the version this
    process runs, which it records in its outputs where it runs the command itself)."""
    import hashlib
    import json

    from vlmgrid import codeversion

    kept = {name: value for name, value in environ.items() if not forkserver.per_job(name)}
    text = json.dumps([interpreter(), kept, process_context(), codeversion.running_version(),
                       import_paths(sys.path)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _connect(path: str) -> socket.socket | None:
    """A connection to the server listening at `path`; None where none does."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
    except OSError:
        client.close()
        return None
    return client


def _start(place: Place, idle: float) -> socket.socket | None:
    """Start the server at `place` (unless another command did while this one waited for the lock) and return a
    connection to it once it listens; None where it could not start or ended first (its log says why)."""
    lock = _locked(place)
    if lock is None:
        return None
    with lock:  # closing it releases the lock
        client = _connect(place.socket)
        if client is not None:
            return client
        # The server's environment is the command's less the per-job variables: one started from a job with a
        # thread count or a TMPDIR of its own imports torch as the other jobs' processes would.
        environ = {name: value for name, value in os.environ.items() if not forkserver.per_job(name)}
        # The `vlmgrid` script itself, run by this interpreter: the same import path as this command's.
        command = [sys.executable, os.path.abspath(sys.argv[0]), "forkserver", "--socket", place.socket,
                   "--idle-timeout", str(idle), "--lock", place.lock, "--log", place.log]
        # Its log is a new file: a server of this key that is still stopping (its socket gone) removes its own log
        # at its end where the path still names it (vlmgrid.forkserver.sockets.remove_lock_and_log).
        try:
            os.unlink(place.log)
        except FileNotFoundError:
            pass
        except OSError:
            return None
        # Spawned, not a subprocess.Popen: it outlives this command, which never waits for it. It keeps none of
        # this process's files (a pipe its caller waits on would stay open); no --parent-pid: it serves the
        # commands that come after this one.
        try:
            inherited = [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds()]
            pid = os.posix_spawn(sys.executable, command, environ, setsid=True, file_actions=[
                *inherited, (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, place.log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600),
                (os.POSIX_SPAWN_DUP2, 1, 2)])
        except OSError:
            return None
        deadline = time.monotonic() + LISTEN_WAIT_S
        while (client := _connect(place.socket)) is None:
            if os.waitpid(pid, os.WNOHANG)[0] != 0:  # it ended
                return None
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGTERM)
                return None
            time.sleep(0.02)
        return client


def _locked(place: Place):
    """The lock at `place.lock`, taken (closing the file releases it); None where it cannot be. A server that stops
    removes its lock where nobody holds it, and its folder where that leaves it empty: a lock taken on the file it
    removed is no longer the one at the path, so it is taken again there (the folder made again if need be)."""
    import fcntl

    for _ in range(LOCK_TRIES):
        try:
            lock = open(os.open(place.lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600), "w")
        except FileNotFoundError:  # the folder went with the last server
            if not _private(os.path.dirname(place.lock)):
                return None
            continue
        except OSError:
            return None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(lock.fileno()), os.stat(place.lock)):
                return lock
        except FileNotFoundError:  # removed while this command waited for it
            pass
        except OSError:
            lock.close()
            return None
        lock.close()
    return None


def _inheritable_fds() -> list[int]:
    """This process's files beyond stdin, stdout and stderr that a process it starts would inherit."""
    fds = []
    for name in os.listdir("/dev/fd"):
        try:
            if int(name) > 2 and os.get_inheritable(int(name)):
                fds.append(int(name))
        except OSError:  # the listing's own, closed by now
            pass
    return fds
