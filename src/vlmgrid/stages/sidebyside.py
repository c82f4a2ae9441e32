"""Several pieces of one command's work side by side, each in a forked child of its own.

DVC runs its stages one at a time, so a stage that holds a whole row of the grid (a model on every benchmark,
or every benchmark's comparisons) runs its pieces side by side itself, as many at once as the machine's
cores or GPUs allow, the way Snakemake runs jobs. Each piece runs in a child of its own, as a Snakemake job runs
in a process of its own: it holds its own memory (a GPU's is freed when it ends), its lock and its GPUs, and
one piece's failure leaves the others to finish; the command then fails naming every piece that did not end.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vlmgrid import fileio, messages
from vlmgrid.errors import VlmgridError

log = logging.getLogger(__name__)

__all__ = ["Task", "cpu_jobs", "run_side_by_side"]

# Signals that end the command (a cancelled job, a closed terminal): its pieces end with it, never left running
_ENDING = (signal.SIGTERM, signal.SIGHUP)


class _Ended(BaseException):
    """The command got one of _ENDING while its pieces ran."""


@dataclass(frozen=True)
class Task:
    label: str  # names the piece in its log lines and errors, e.g. "llava on mme"
    run: Callable[[], object]


def cpu_jobs(threads: int = 1) -> int:
    """How many pieces of `threads` CPU threads each fit this process's cores at once (at least one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, threads))


def _child(task: Task) -> None:
    """Run one piece; its package messages are prefixed with its label, as the pieces' lines interleave."""
    for signum in _ENDING:
        signal.signal(signum, signal.SIG_DFL)
    for handler in logging.getLogger("vlmgrid").handlers:
        handler.setFormatter(logging.Formatter(f"{task.label}: %(message)s"))
    try:
        task.run()
    except KeyboardInterrupt:
        sys.exit(130)
    except (VlmgridError, OSError) as exc:
        failure = fileio.user_error(exc)  # one sentence, as the command gives it
        if failure is None:
            raise
        print(messages.error_text(failure, task.label), file=sys.stderr, flush=True)
        sys.exit(2)


def _stop(children) -> None:
    for process in children:
        process.terminate()
    for process in children:
        process.join()


def run_side_by_side(tasks: Sequence[Task], jobs: int, what: str) -> None:
    """Run every task, at most `jobs` at a time, each in a forked child, and log the progress (`what` names
    the tasks as a whole, e.g. "cells of llava"). A task that fails does not stop the others; once all have
    ended, the failures are one error naming each task that failed (each one's own error is on stderr above)."""
    context = multiprocessing.get_context("fork")
    waiting = list(tasks)
    running: dict[int, tuple[multiprocessing.process.BaseProcess, Task]] = {}
    failed: list[str] = []
    started = time.monotonic()
    jobs = max(1, jobs)
    log.info(f"{what}: {len(tasks)} to run, {min(jobs, len(tasks))} at a time")

    def end(signum, frame):
        raise _Ended(signum)

    previous = {signum: signal.signal(signum, end) for signum in _ENDING}
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                task = waiting.pop(0)
                process = context.Process(target=_child, args=(task,), name=task.label)
                process.start()
                running[process.sentinel] = (process, task)
            for sentinel in multiprocessing.connection.wait(list(running)):
                process, task = running.pop(sentinel)
                process.join()
                if process.exitcode != 0:
                    failed.append(task.label)
                _progress(what, len(tasks) - len(waiting) - len(running), len(tasks), started)
    except BaseException as exc:
        _stop([process for process, _ in running.values()])
        if isinstance(exc, _Ended):
            raise SystemExit(128 + exc.args[0]) from None  # the status a shell gives a command that signal ended
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if failed:
        raise VlmgridError(f"{len(failed)} of the {len(tasks)} {what} failed ({', '.join(failed)}); each one's "
                           f"error is above")


def _progress(what: str, done: int, total: int, started: float) -> None:
    elapsed = time.monotonic() - started
    rate = done / elapsed if elapsed > 0 else 0.0
    left = f", about {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
    log.info(f"{what}: {done} of {total} done in {elapsed:.1f} s ({rate:.2f}/s){left}")
