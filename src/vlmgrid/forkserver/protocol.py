"""What a fork server and its client say to each other, and the client.

Over a Unix stream socket, the client sends a 4-byte big-endian length and a JSON request
{"argv", "cwd", "environ", "python"} with its fds 0, 1 and 2 (SCM_RIGHTS); the server answers JSON lines:
{"pid": N} when the job started, then {"exit": code}; or one {"refused": reason}.

The client (`run_through_server`) is the start of the `vlmgrid` command: when `VLMGRID_FORKSERVER` names the
server's socket (a Snakemake run's: workflow/rules/common.smk), the command is sent there and the client only
waits for its exit code (forwarding SIGTERM, SIGINT and SIGHUP to the job, but one this process ignores, as
the job's own process would). When the socket cannot be reached, the command runs in the client's own process,
silently (a Slurm job on another node, a server that ended); when the server refuses it (an environment that
differs from the server's where modules read it at import, a process context that differs from the server's,
code on disk that changed since the server started: vlmgrid.forkserver.context), it runs there too, and says
why in one line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

ENV = "VLMGRID_FORKSERVER"  # the socket's path; "off" (or empty) runs every command in its own process
# What Snakemake sets per shell job (snakemake/shell.py: the threads variables, and the tmpdir resource's),
# and what the shell running a job's command line sets for itself (bash drops PS1 and PS2 where not
# interactive): a job may differ from the server in these. Every other variable must be equal, as modules read
# some at import (HF_HOME, HF_HUB_OFFLINE, TORCH_HOME, ...).
PER_JOB = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "GOTO_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "TMPDIR",
        "TMP",
        "TEMP",
        "TEMPDIR",
        "_",
        "SHLVL",
        "PWD",
        "OLDPWD",
        "PS1",
        "PS2",
        ENV,
    }
)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STDIO = 3  # the fds a request carries: stdin, stdout and stderr
REQUEST_MAX = 1 << 16  # what one read of a request takes; a longer one is read on until its length


def per_job(name: str) -> bool:
    """Whether a job may differ from its server in the environment variable `name`."""
    return name in PER_JOB


def environment_difference(environ: dict[str, str], reference: dict[str, str]) -> str | None:
    """The first variable (by name) that differs between a job's environment and the server's, beside the
    per-job ones; None when none does."""
    for name in sorted(set(environ) | set(reference)):
        if not per_job(name) and environ.get(name) != reference.get(name):
            return name
    return None


def interpreter() -> list[str]:
    """The interpreter and its environment (a virtualenv's prefix): a job runs in a server of the same
    ones."""
    return [os.path.realpath(sys.executable), sys.prefix]


def send_request(client: socket.socket, argv: list[str]) -> None:
    """Send the command `argv` with this process's folder, environment, interpreter and stdio."""
    request = json.dumps(
        {"argv": argv, "cwd": os.getcwd(), "environ": dict(os.environ), "python": interpreter()}
    ).encode()
    socket.send_fds(client, [struct.pack(">I", len(request)) + request], [0, 1, 2])


def receive_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """A client's request and the fds it sent (the caller closes them); ValueError, OSError or struct.error
    where it is not one."""
    data, fds, _, _ = socket.recv_fds(conn, REQUEST_MAX, STDIO)
    try:
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = conn.recv(REQUEST_MAX)
            if not chunk:
                raise ValueError("the request ended early")
            data += chunk
        return json.loads(data[4:]), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def reply(conn: socket.socket, message: dict) -> None:
    """One JSON line to the client: {"pid"}, {"exit"} or {"refused"}."""
    conn.sendall(json.dumps(message).encode() + b"\n")


def run_through_server(
    argv: list[str], path: str | None = None, client: socket.socket | None = None
) -> int | None:
    """Run the command `argv` in the fork server at `path` (default: the one VLMGRID_FORKSERVER names) and
    return its exit code; None where it should run in this process instead (no server set or reachable, or the
    server refused it). `client`: a connection to that server already made."""
    path = os.environ.get(ENV, "") if path is None else path
    if path in ("", "off") or argv[:1] == ["forkserver"]:
        return None
    job: dict = {"pid": None, "pending": []}

    def forward(signum, frame):
        """SIGTERM, SIGINT and SIGHUP go to the job (Snakemake's cancel, Ctrl-C), which answers as it
        would."""
        if job["pid"] is None:
            job["pending"].append(signum)
            return
        try:
            os.kill(job["pid"], signum)
        except ProcessLookupError:
            pass

    # A signal this process ignores (`nohup`, a script's background job) stays ignored: the server compares
    # the ignored signals with its own (vlmgrid.forkserver.context), and the job's own process would ignore
    # it.
    previous = {
        signum: signal.signal(signum, forward)
        for signum in FORWARDED
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    connected = client is not None
    client = client or socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not connected:
            client.connect(path)
        send_request(client, argv)
        replies = client.makefile("rb")
        first = json.loads(replies.readline() or b"{}")
    except (OSError, ValueError):
        client.close()
        _restore(previous, job["pending"])
        return None  # no server there (another node, or it ended): the command runs here, as without one
    if "pid" not in first:
        client.close()
        _restore(previous, job["pending"])
        print(
            f"vlmgrid: the fork server at {path} did not run this command "
            f"({first.get('refused', 'no reply')}); it runs in its own process",
            file=sys.stderr,
        )
        return None
    job["pid"] = first["pid"]
    for signum in job["pending"]:  # signals that came before the job's pid: the job gets them now
        forward(signum, None)
    line = replies.readline()  # the job's exit code when it ends; a forwarded signal does not end the wait
    client.close()
    try:
        return int(json.loads(line)["exit"])
    except (ValueError, KeyError, TypeError):
        print(
            f"vlmgrid: error: the fork server at {path} ended before job {job['pid']} did; run the command "
            f"again",
            file=sys.stderr,
        )
        return 1


def _restore(handlers: dict, pending: list[int]) -> None:
    """The signal handlers back as they were, for a command that runs in this process after all; a signal that
    came meanwhile is raised again."""
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    for signum in pending:
        signal.raise_signal(signum)
