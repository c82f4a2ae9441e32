"""A warm start for the grid's jobs: a fork server (`vlmgrid forkserver`) and its client.

Most of a small job's time is its imports (torch, open_clip, transformers, pandas, pyarrow, jsonschema), not its
work. The server imports them once, then forks one child per job; the child runs `vlmgrid.cli.main` with the
job's argv, working folder, environment and stdin/stdout/stderr, exactly as the job's own process would, and
shares the imported modules with the server copy-on-write. This is the classic warm-start pattern
(multiprocessing's forkserver, Nailgun, Ruby's spring).

The client is the start of `vlmgrid.cli.main`: when `VLMGRID_FORKSERVER` names the server's socket (or, unset,
where vlmgrid.warmstart finds or starts this user's server for the `vlmgrid` command), the command is sent
there and the client only waits for its exit code (forwarding SIGTERM, SIGINT and SIGHUP to the job). When the
socket cannot be reached, the command runs in the client's own process, silently (a Slurm job on
another node, a server that ended); when the server refuses it (an environment that differs from the server's
where modules read it at import), it runs there too, and says why in one line.

Fork safety: the server runs no thread of its own (one `selectors` loop, signals through a wakeup fd) and only
imports (no computation, no thread pool, no CUDA), so a forked child starts as clean as a fresh process. The one
library that starts threads at import is pyarrow (its jemalloc allocator's background thread and one more; the
log's `ready` line counts them): Arrow and jemalloc register fork handlers (pthread_atfork) for exactly this, as
multiprocessing's forkserver relies on when it preloads pandas.

Protocol, over a Unix stream socket: the client sends a 4-byte big-endian length and a JSON request
{"argv", "cwd", "environ", "python"} with its fds 0, 1 and 2 (SCM_RIGHTS); the server answers JSON lines:
{"pid": N} when the job started, then {"exit": code}; or one {"refused": reason}.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import stat
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any

from vlmgrid.errors import VlmgridError

ENV = "VLMGRID_FORKSERVER"  # the socket's path; "off" (or empty) runs every command in its own process
# What Snakemake sets per shell job (snakemake/shell.py: the threads variables, and the tmpdir resource's), and
# what the shell running a job's command line sets for itself (bash drops PS1 and PS2 where not interactive): a
# job may differ from the server in these. Every other variable must be equal, as modules read some at import
# (HF_HOME, HF_HUB_OFFLINE, TORCH_HOME, ...).
PER_JOB = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS", "TMPDIR", "TMP", "TEMP", "TEMPDIR", "_", "SHLVL", "PWD", "OLDPWD", "PS1", "PS2", ENV,
})
# What DVC sets per stage command (DVC_ROOT, DVC_STAGE; `dvc exp run` adds DVC_EXP_* and DVC_STUDIO_*): read by
# no module at import, so every stage shares one server (vlmgrid.warmstart).
PER_JOB_PREFIXES = ("DVC_",)
# The modules a job may import, imported once by the server (each only where installed).
PRELOAD = ("vlmgrid.cli", "vlmgrid.stages.prepare", "vlmgrid.stages.fetch", "vlmgrid.stages.infer",
           "vlmgrid.stages.shards", "vlmgrid.stages.score", "vlmgrid.stages.compare", "vlmgrid.stages.report",
           "vlmgrid.stages.inspect", "pandas", "pyarrow.parquet", "jsonschema", "matplotlib.pyplot", "torch",
           "torchvision", "open_clip", "transformers")
KILL_GRACE_S = 5.0  # a job whose client is gone gets SIGTERM, then SIGKILL after this long
PARENT_POLL_S = 1.0  # how often a server started with a parent's pid looks whether that parent is still there
FOLDER_PREFIX = "vlmgrid-forkserver-"  # the private folder `start` makes for a server's socket
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


# --- the client --------------------------------------------------------------------------------------------------

def run_through_server(argv: list[str], path: str | None = None, client: socket.socket | None = None) -> int | None:
    """Run the command `argv` in the fork server at `path` (default: the one VLMGRID_FORKSERVER names) and
    return its exit code; None where it should run in this process instead (no server set or reachable, or the
    server refused it). `client`: a connection to that server already made (vlmgrid.warmstart)."""
    path = os.environ.get(ENV, "") if path is None else path
    if path in ("", "off") or argv[:1] == ["forkserver"]:
        return None
    job: dict = {"pid": None, "pending": []}

    def forward(signum, frame):
        """SIGTERM, SIGINT and SIGHUP go to the job (Snakemake's cancel, Ctrl-C), which answers as it would."""
        if job["pid"] is None:
            job["pending"].append(signum)
            return
        try:
            os.kill(job["pid"], signum)
        except ProcessLookupError:
            pass

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    connected = client is not None
    client = client or socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not connected:
            client.connect(path)
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "environ": dict(os.environ),
                              "python": _python()}).encode()
        socket.send_fds(client, [struct.pack(">I", len(request)) + request], [0, 1, 2])
        replies = client.makefile("rb")
        first = json.loads(replies.readline() or b"{}")
    except (OSError, ValueError):
        client.close()
        _restore(previous, job["pending"])
        return None  # no server there (another node, or it ended): the command runs here, as without one
    if "pid" not in first:
        client.close()
        _restore(previous, job["pending"])
        print(f"vlmgrid: the fork server at {path} did not run this command ({first.get('refused', 'no reply')});"
              f" it runs in its own process", file=sys.stderr)
        return None
    job["pid"] = first["pid"]
    for signum in job["pending"]:  # signals that came before the job's pid: the job gets them now
        forward(signum, None)
    line = replies.readline()  # the job's exit code when it ends; a forwarded signal does not end the wait
    client.close()
    try:
        return int(json.loads(line)["exit"])
    except (ValueError, KeyError, TypeError):
        print(f"vlmgrid: error: the fork server at {path} ended before job {job['pid']} did; run the command "
              f"again", file=sys.stderr)
        return 1


def _python() -> list[str]:
    """The interpreter and its environment (a virtualenv's prefix): a job runs in a server of the same ones."""
    return [os.path.realpath(sys.executable), sys.prefix]


def _restore(handlers: dict, pending: list[int]) -> None:
    """The signal handlers back as they were, for a command that runs in this process after all; a signal that
    came meanwhile is raised again."""
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    for signum in pending:
        signal.raise_signal(signum)


# --- starting and stopping a server for a run ----------------------------------------------------------------------

@dataclass(frozen=True)
class Started:
    """A fork server started by `start`: its process (a subprocess.Popen), its private folder, and its socket."""

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
        # A Unix socket's path holds at most 107 bytes: a short folder of its own under /tmp (or the runtime one)
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
        process = subprocess.Popen([vlmgrid, "forkserver", "--socket", socket_path, "--parent-pid", str(os.getpid())],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=dict(os.environ),
                                   start_new_session=True)
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


# --- the server --------------------------------------------------------------------------------------------------

def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _preload() -> None:
    """Import the jobs' heavy modules, without running anything (no threads, no CUDA): forking stays safe."""
    import importlib
    import importlib.util

    for name in PRELOAD:
        if importlib.util.find_spec(name.split(".")[0]) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # a broken optional module: the jobs that need it fail as they would anyway
            _log(f"preload: {name} not imported ({type(exc).__name__}: {exc})")


def per_job(name: str) -> bool:
    """Whether a job may differ from its server in the environment variable `name`."""
    return name in PER_JOB or name.startswith(PER_JOB_PREFIXES)


def _environment_difference(environ: dict[str, str], reference: dict[str, str]) -> str | None:
    """The first variable (by name) that differs between a job's environment and the server's, beside the
    per-job ones; None when none does."""
    for name in sorted(set(environ) | set(reference)):
        if not per_job(name) and environ.get(name) != reference.get(name):
            return name
    return None


class _Job:
    """A running child: its pid, its client's connection (None once the client is gone), when it started, its
    command line, and when it gets SIGKILL (after the SIGTERM that a gone client brings)."""

    def __init__(self, pid: int, conn: socket.socket, argv: list[str]):
        self.pid, self.conn, self.argv = pid, conn, argv
        self.started = time.monotonic()
        self.kill_at: float | None = None


def _ours(folder: str) -> bool:
    """Whether `folder` is one that `start` made for a server's socket (private to this user)."""
    try:
        found = os.lstat(folder)
    except OSError:
        return False
    return (os.path.basename(folder).startswith(FOLDER_PREFIX) and stat.S_ISDIR(found.st_mode)
            and found.st_uid == os.getuid() and found.st_mode & 0o077 == 0)


def _clear_the_way(path: str) -> None:
    """Make way for a server's socket at `path`: nothing there, or a stale socket of ours (one nobody listens on,
    in a folder `start` made), which is removed. Anything else is refused: it may be someone's file."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise VlmgridError(f"{path} exists and is not a socket; give --socket a path where nothing is (the "
                           "server makes its socket there)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        listening = False
    except OSError as error:
        raise VlmgridError(f"{path} is a socket this user cannot connect to ({error.strerror}); give --socket a "
                           "path where nothing is") from None
    else:
        listening = True
    finally:
        probe.close()
    if listening:
        raise VlmgridError(f"{path} is the socket of a server that is running; stop that one first, or give "
                           "--socket another path")
    if found.st_uid != os.getuid() or not _ours(os.path.dirname(os.path.abspath(path))):
        raise VlmgridError(f"{path} is a socket that nobody listens on, outside a folder of vlmgrid's own; "
                           "remove it if it is a stale server's, or give --socket another path")
    os.unlink(path)


def _remove_socket(path: str, made: os.stat_result) -> None:
    """Remove the server's socket at `path` (if it is still the one it made) and the folder `start` made for it
    (if nothing else is in it): never anything else."""
    try:
        found = os.lstat(path)
        if (found.st_dev, found.st_ino) == (made.st_dev, made.st_ino):
            os.unlink(path)
    except FileNotFoundError:
        pass
    folder = os.path.dirname(os.path.abspath(path))
    if _ours(folder):
        try:
            os.rmdir(folder)
        except OSError:  # something else is in it: it stays
            pass


def serve(path: str, idle_timeout: float = 300.0, parent_pid: int | None = None) -> int:
    """Serve jobs on the Unix socket `path` until SIGTERM (or SIGINT), until `idle_timeout` seconds pass with
    no job running, or, given `parent_pid` (the pid of the process that started it), once that process has
    ended, however it ended; returns the exit code. Nothing but a stale socket of ours may be at `path`
    (`_clear_the_way`); at the end the socket goes, and so does the folder `start` made for it."""
    import select
    import selectors

    _clear_the_way(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    binding = f"{path}.{os.getpid()}"
    umask = os.umask(0o177)  # the socket is the user's alone (0600) from its creation
    try:
        listener.bind(binding)
    finally:
        os.umask(umask)
    listener.listen(128)  # clients that come while the modules load wait in the backlog
    # The path appears only once the socket listens, so a client that finds it is always queued (`start` waits
    # for it); one that came between bind and listen would be refused and run in its own process. A link, not a
    # rename: a rename would replace whatever appeared at the path meanwhile.
    made = os.lstat(binding)
    try:
        os.link(binding, path)
    except FileExistsError:
        raise VlmgridError(f"{path} appeared while the server started; give --socket a path where nothing "
                           "is") from None
    finally:
        os.unlink(binding)
    _log(f"listening on {path}; importing the jobs' modules")
    reference = dict(os.environ)  # the environment the modules are imported under: a job's must equal it
    _preload()
    # What the imports set in the environment (open_clip sets TOKENIZERS_PARALLELISM): a job's process gets it
    # too, as the modules, already imported in it, do not set it again.
    imported = {name: value for name, value in os.environ.items() if reference.get(name) != value}
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else "?"
    _log(f"ready: {len(sys.modules)} modules imported, {threads} threads (the libraries')")

    # Signals reach the loop through a wakeup socket (no work in handlers, no threads).
    wake_read, wake_write = socket.socketpair()
    wake_read.setblocking(False)
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    stopping: list[int] = []
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # a Python handler, so the wakeup fd is written
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stopping.append(signum))

    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(wake_read, selectors.EVENT_READ, "wakeup")
    jobs: dict[int, _Job] = {}
    idle_since = time.monotonic()

    def reap() -> None:
        while jobs:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = jobs.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell shows it
            _log(f"job {pid} exit {code} in {time.monotonic() - job.started:.2f} s "
                 f"({usage.ru_utime + usage.ru_stime:.2f} s CPU): vlmgrid {' '.join(job.argv)}")
            if job.conn is not None:
                selector.unregister(job.conn)
                try:
                    job.conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
                except OSError:
                    pass
                job.conn.close()

    def others() -> list[socket.socket]:
        """What a child must not keep: the server's sockets and the other jobs' connections."""
        return [listener, wake_read, wake_write] + [job.conn for job in jobs.values() if job.conn is not None]

    def accept() -> None:
        conn, _ = listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(10)  # a client sends its request at once; one that does not cannot hold the loop
            data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
            while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    raise ValueError("the request ended early")
                data += chunk
            request = json.loads(data[4:])
            argv = [str(arg) for arg in request["argv"]]
            environ = dict(request["environ"])
            reason = None
            if len(fds) != 3:
                reason = f"{len(fds)} file descriptors were sent, not stdin, stdout and stderr"
            elif request.get("python") != _python():
                reason = f"Python {request.get('python')} is not the server's {_python()}"
            elif (name := _environment_difference(environ, reference)) is not None:
                reason = f"{name} differs"
            if reason is not None:
                _log(f"refused ({reason}): vlmgrid {' '.join(argv)}")
                conn.sendall(json.dumps({"refused": f"{reason}"}).encode() + b"\n")
                conn.close()
                return
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child
                _child(argv, str(request["cwd"]), {**environ, **imported}, fds, others() + [conn], selector)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
            _log(f"a request failed: {type(exc).__name__}: {exc}")
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        _log(f"job {pid} started: vlmgrid {' '.join(argv)}")
        conn.setblocking(False)
        jobs[pid] = _Job(pid, conn, argv)
        selector.register(conn, selectors.EVENT_READ, pid)

    def client_gone(pid: int) -> None:
        """A client's connection closed (or spoke) while its job runs: the client was killed, so is the job."""
        job = jobs.get(pid)
        if job is None or job.conn is None:
            return
        selector.unregister(job.conn)
        job.conn.close()
        job.conn = None
        _log(f"job {pid}: its client is gone; SIGTERM")
        _signal(pid, signal.SIGTERM)
        job.kill_at = time.monotonic() + KILL_GRACE_S

    while not stopping:
        if parent_pid is not None and os.getppid() != parent_pid:  # it ended: this process was given to another
            _log(f"its parent (pid {parent_pid}) ended: stopping {len(jobs)} job(s)")
            break
        now = time.monotonic()
        if jobs:
            idle_since = now
        elif now - idle_since >= idle_timeout:
            # The socket goes first: a client that comes now finds none (vlmgrid.warmstart starts another server),
            # and one that connected before is in the backlog, to be served rather than left without a reply.
            _remove_socket(path, made)
            if not select.select([listener], [], [], 0)[0]:
                _log(f"no job for {idle_timeout:g} s: stopping")
                break
        deadlines = [job.kill_at for job in jobs.values() if job.kill_at is not None]
        timeout = min(deadlines) - now if deadlines else (None if jobs else idle_since + idle_timeout - now)
        if parent_pid is not None:
            timeout = PARENT_POLL_S if timeout is None else min(timeout, PARENT_POLL_S)
        for key, _ in selector.select(None if timeout is None else max(timeout, 0.0)):
            if key.data == "listener":
                accept()
            elif key.data == "wakeup":
                try:
                    while wake_read.recv(4096):
                        pass
                except BlockingIOError:
                    pass
            else:
                client_gone(key.data)
        busy = bool(jobs)
        reap()
        if busy:  # the idle time counts from the end of the last job, however long it ran
            idle_since = time.monotonic()
        for job in jobs.values():
            if job.kill_at is not None and job.kill_at <= time.monotonic():
                _signal(job.pid, signal.SIGKILL)
                job.kill_at = None

    if stopping:
        _log(f"signal {stopping[0]}: stopping {len(jobs)} job(s)")
    for job in jobs.values():
        _signal(job.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while jobs and time.monotonic() < deadline:
        reap()
        time.sleep(0.05)
    for job in jobs.values():
        _signal(job.pid, signal.SIGKILL)
    while jobs:
        reap()
        time.sleep(0.01)
    listener.close()
    _remove_socket(path, made)
    return 0


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _child(argv: list[str], cwd: str, environ: dict[str, str], fds: list[int], server_sockets: list,
           selector) -> None:
    """In the forked child: become the job's process (its stdio, folder, environment, default signals), run
    the command as `vlmgrid.cli.main` would in a process of its own, and exit with its code. Never returns."""
    import atexit
    import traceback

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C: KeyboardInterrupt, as in python
        selector.close()
        for sock in server_sockets:
            sock.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdout.reconfigure(line_buffering=os.isatty(1))  # as Python chooses at start, for this stdout
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update({name: value for name, value in environ.items() if name != ENV})  # no recursion
        sys.argv = ["vlmgrid", *argv]
        if "tempfile" in sys.modules:
            sys.modules["tempfile"].tempdir = None  # found again from this job's TMPDIR
        threads = environ.get("OMP_NUM_THREADS", "")
        if "torch" in sys.modules and threads.isdigit() and int(threads) > 0:
            sys.modules["torch"].set_num_threads(int(threads))  # what OpenMP reads from it when torch loads
        # The server's own command showed the package's messages on its stderr (cli._messages_on_stderr), which
        # is now the job's: left in place, the job's own would print every line twice.
        logging.getLogger("vlmgrid").handlers.clear()

        from vlmgrid import cli

        code = cli.main(argv)
    except SystemExit as exc:  # as the interpreter reads it: None is 0, a text is printed and is 1
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # outside the CLI's own handling: the interpreter ends by SIGINT then
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF if isinstance(code, int) else 1)
