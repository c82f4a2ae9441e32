"""The fork server: it imports a command's heavy modules once, then runs each command sent to its socket in a
forked child.

Most of a small job's time is its imports (torch, open_clip, transformers, pandas, pyarrow, jsonschema), not
its work. The server imports them once, then forks one child per job; the child runs the entry point the
server was given (`run`: the `vlmgrid` command's `main`) with the job's argv, working folder, environment and
stdin/stdout/stderr, exactly as the job's own process would, and shares the imported modules with the server
copy-on-write. This is the classic warm-start pattern (multiprocessing's forkserver, Nailgun, Ruby's spring).
What the client sends and the server answers is vlmgrid.forkserver.protocol's; the socket's file,
vlmgrid.forkserver.sockets'.

A job runs as its caller and runs the code on disk (vlmgrid.forkserver.context): before each fork the server
compares the client's process context (read from the kernel) with its own, refusing a job that differs, and
the package's files with those it imported, by content; once the code differs it refuses every job, its socket
goes, and it ends when its running jobs have, so the next command runs the new code (in a fresh server, or its
own process).

Fork safety: the server runs no thread of its own (one `selectors` loop, signals through a wakeup fd) and only
imports (no computation, no thread pool, no CUDA), so a forked child starts as clean as a fresh process. The
one library that starts threads at import is pyarrow (its jemalloc allocator's background thread and one more;
the log's `ready` line counts them): Arrow and jemalloc register fork handlers (pthread_atfork) for exactly
this, as multiprocessing's forkserver relies on when it preloads pandas.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable

from vlmgrid import codeversion, messages
from vlmgrid.errors import VlmgridError
from vlmgrid.forkserver.context import context_difference, import_paths, process_context
from vlmgrid.forkserver.protocol import ENV, environment_difference, interpreter, receive_request, reply
from vlmgrid.forkserver.sockets import clear_the_way, remove_folder, remove_socket

KILL_GRACE_S = 5.0  # a job whose client is gone gets SIGTERM, then SIGKILL after this long
PARENT_POLL_S = 1.0  # how often a server started with a parent's pid looks whether that parent is still there
# The signals whose handling a job takes from the server as it was when the server started (a fresh Python
# process's, less what it inherited ignored, as the job's own process would), not as the server set it since
CHILD_SIGNALS = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CODE_CHANGED = "the code on disk changed since the server started"


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _preload(modules: Iterable[str]) -> None:
    """Import the jobs' heavy modules, without running anything (no threads, no CUDA): forking stays safe."""
    import importlib
    import importlib.util

    for name in modules:
        if importlib.util.find_spec(name.split(".")[0]) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # a broken optional module: the jobs that need it fail as they would anyway
            _log(f"preload: {name} not imported ({type(exc).__name__}: {exc})")


class _Job:
    """A running child: its pid, its client's connection (None once the client is gone), when it started, its
    command line, and when it gets SIGKILL (after the SIGTERM that a gone client brings)."""

    def __init__(self, pid: int, conn: socket.socket, argv: list[str]):
        self.pid, self.conn, self.argv = pid, conn, argv
        self.started = time.monotonic()
        self.kill_at: float | None = None


def serve(
    path: str,
    run: Callable[[list[str]], int],
    preload: Iterable[str] = (),
    idle_timeout: float = 300.0,
    parent_pid: int | None = None,
) -> int:
    """Serve jobs on the Unix socket `path`, each `run` with its argv in a child, once the modules named in
    `preload` (each where installed) are imported, until SIGTERM (or SIGINT), until `idle_timeout` seconds
    pass with no job running, until the code on disk changes and its jobs have ended, or, given `parent_pid`
    (the pid of the process that started it), once that process has ended, however it ended; returns the exit
    code. Nothing but a stale socket of ours may be at `path` (`clear_the_way`); at the end the socket goes,
    and the folder it was in, where empty."""
    import select
    import selectors

    # The signals' handling as this process started, before it sets its own below: a job gets it back, as its
    # own process would have it (so the ignored signals are compared as they were then).
    handlers = {signum: signal.getsignal(signum) for signum in CHILD_SIGNALS}
    ignored = process_context()["ignored signals"]
    # The code, before it is imported: the jobs, forked after the imports, inherit this version (their outputs
    # record it); a file changed since that reading changes what the disk's check below gives, which reads
    # again only the files whose stat changed.
    entries = list(sys.path)
    disk, version = codeversion.running_code()
    imported = (version, import_paths(entries))
    clear_the_way(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    binding = f"{path}.{os.getpid()}"
    umask = os.umask(0o177)  # the socket is the user's alone (0600) from its creation
    try:
        listener.bind(binding)
    finally:
        os.umask(umask)
    listener.listen(128)  # clients that come while the modules load wait in the backlog
    # The path appears only once the socket listens, so a client that finds it is always queued (`start` waits
    # for it); one that came between bind and listen would be refused and run in its own process. A link, not
    # a rename: a rename would replace whatever appeared at the path meanwhile.
    made = os.lstat(binding)
    try:
        os.link(binding, path)
    except FileExistsError:
        raise VlmgridError(
            f"{path} appeared while the server started; give --socket a path where nothing is"
        ) from None
    finally:
        os.unlink(binding)
    _log(f"listening on {path}; importing the jobs' modules")
    reference = dict(os.environ)  # the environment the modules are imported under: a job's must equal it
    _preload(preload)
    # What the imports set in the environment (open_clip sets TOKENIZERS_PARALLELISM): a job's process gets it
    # too, as the modules, already imported in it, do not set it again.
    set_by_imports = {name: value for name, value in os.environ.items() if reference.get(name) != value}
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else "?"
    _log(f"ready: {len(sys.modules)} modules imported, {threads} threads (the libraries')")

    # Signals reach the loop through a wakeup socket (no work in handlers, no threads).
    wake_read, wake_write = socket.socketpair()
    wake_read.setblocking(False)
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    stopping: list[int] = []
    retiring: list[
        bool
    ] = []  # the code on disk changed: no job any more, and the server ends once its jobs have
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
            _log(
                f"job {pid} exit {code} in {time.monotonic() - job.started:.2f} s "
                f"({usage.ru_utime + usage.ru_stime:.2f} s CPU): vlmgrid {' '.join(job.argv)}"
            )
            if job.conn is not None:
                selector.unregister(job.conn)
                try:
                    reply(job.conn, {"exit": code})
                except OSError:
                    pass
                job.conn.close()

    def others() -> list[socket.socket]:
        """What a child must not keep: the server's sockets and the other jobs' connections."""
        return [listener, wake_read, wake_write] + [job.conn for job in jobs.values() if job.conn is not None]

    def retire() -> None:
        """The code on disk is not what this server imported: it takes no job any more, and its socket goes,
        so that the next command finds none (and starts a fresh server, or runs in its own process)."""
        if not retiring:
            retiring.append(True)
            _log(f"{CODE_CHANGED}: no more jobs; stopping once the {len(jobs)} running end")
            remove_socket(path, made)

    def refusal(request: dict, fds: list[int], environ: dict[str, str], client: int) -> str | None:
        """Why the job cannot run here as it would in its own process; None where it can."""
        if len(fds) != 3:
            return f"{len(fds)} file descriptors were sent, not stdin, stdout and stderr"
        if request.get("python") != interpreter():
            return f"Python {request.get('python')} is not the server's {interpreter()}"
        if retiring or (disk.version(), import_paths(entries)) != imported:
            retire()
            return CODE_CHANGED
        if (name := environment_difference(environ, reference)) is not None:
            return f"{name} differs"
        if client <= 0:  # in a pid namespace this one does not see: its context cannot be read
            return "its process cannot be seen from the server's pid namespace"
        # What a forked job would have: this process's context as it is now (renice or prlimit may have
        # changed it), with the signals' handling the job gets back
        own = {**process_context(), "ignored signals": ignored}
        if (name := context_difference(process_context(client), own)) is not None:
            return f"{name} differs"
        return None

    def accept() -> None:
        conn, _ = listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(10)  # a client sends its request at once; one that does not cannot hold the loop
            # The process that connected, as the kernel names it: its context is read from there, never from
            # what it says
            client = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            )[0]
            request, fds = receive_request(conn)
            argv = [str(arg) for arg in request["argv"]]
            environ = dict(request["environ"])
            reason = refusal(request, fds, environ, client)
            if reason is not None:
                _log(f"refused ({reason}): vlmgrid {' '.join(argv)}")
                reply(conn, {"refused": f"{reason}"})
                conn.close()
                return
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child
                _child(
                    run,
                    argv,
                    str(request["cwd"]),
                    {**environ, **set_by_imports},
                    fds,
                    others() + [conn],
                    selector,
                    handlers,
                )
            reply(conn, {"pid": pid})
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
        """A client's connection closed (or spoke) while its job runs: the client was killed, so is the
        job."""
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
        if (
            parent_pid is not None and os.getppid() != parent_pid
        ):  # it ended: this process was given to another
            _log(f"its parent (pid {parent_pid}) ended: stopping {len(jobs)} job(s)")
            break
        now = time.monotonic()
        if jobs:
            idle_since = now
        elif retiring or now - idle_since >= idle_timeout:
            # The socket goes first: a client that comes now finds none (and runs in its own process), and one
            # that connected before is in the backlog, to be answered rather than left without a reply.
            remove_socket(path, made)
            if not select.select([listener], [], [], 0)[0]:
                _log("its jobs ended: stopping" if retiring else f"no job for {idle_timeout:g} s: stopping")
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
    remove_socket(path, made)
    remove_folder(path)
    return 0


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _child(
    run: Callable[[list[str]], int],
    argv: list[str],
    cwd: str,
    environ: dict[str, str],
    fds: list[int],
    server_sockets: list,
    selector,
    handlers: dict,
) -> None:
    """In the forked child: become the job's process (its stdio, folder, environment, the signals' `handlers`
    as the server's were when it started), run the command as `run` would in a process of its own, and exit
    with its code. Never returns."""
    import atexit
    import traceback

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum, handler in handlers.items():  # Ctrl-C: KeyboardInterrupt, as in python, unless ignored
            signal.signal(signum, handler)
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
        # The server's own command showed the package's messages on its stderr, which is now the job's: left
        # in place, the job's own would print every line twice.
        messages.off()
        code = run(argv)
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
