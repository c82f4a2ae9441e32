"""The guard of an inference server: `python -m vlmgrid.serve_guard STOP_SECONDS -- COMMAND...`.

The infer job that needs a server starts it through this small process and holds the write end of its stdin.
The guard starts COMMAND in a process group of its own, prints the server's pid and then waits. When its stdin
closes (the job stopped the server, or ended in any way, SIGKILL included: the kernel closes a dead process's
files) or it is asked to stop (SIGTERM, SIGINT, SIGHUP), it sends SIGTERM to the server's whole group, waits
STOP_SECONDS and then kills what is left. So no server outlives its job holding a GPU. When the server exits
by itself, the guard exits with its code, which the job reads as "the server died". The server's output goes
to the guard's stderr (the job's server log).

Kept free of the package's imports, so it starts in a fraction of a second.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys


def _die_with_guard() -> None:
    """In the server's process: Linux kills it should the guard itself be killed (a SIGKILL leaves the guard
    no chance to stop it)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_group(process: subprocess.Popen, stop_seconds: float) -> None:
    """SIGTERM to the server's process group, then SIGKILL to what is still there after stop_seconds."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=stop_seconds)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the leader's children that outlived it, too
    except ProcessLookupError:
        pass
    process.wait()


class _Stop(Exception):
    pass


def _raise_stop(signum, frame) -> None:
    raise _Stop


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m vlmgrid.serve_guard STOP_SECONDS -- COMMAND...", file=sys.stderr)
        return 2
    stop_seconds, command = float(argv[0]), argv[2:]
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _raise_stop)
    try:
        # The server writes to the guard's stderr (the job's server log); the guard's stdout is the job's
        # pipe.
        server = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(),
            start_new_session=True,
            preexec_fn=_die_with_guard,
        )
    except OSError as error:
        print(f"cannot start {command[0]}: {error}", file=sys.stderr, flush=True)
        return 127
    try:
        print(server.pid, flush=True)
        while True:
            if server.poll() is not None:
                code = server.returncode
                return code if code >= 0 else 128 - code  # killed by a signal: the shell's 128 + signal
            ready, _, _ = select.select([sys.stdin], [], [], 0.5)
            if ready and not os.read(sys.stdin.fileno(), 4096):
                break  # the job closed its end: stop the server
    except _Stop:
        pass
    stop_group(server, stop_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
