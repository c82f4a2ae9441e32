"""The host side of a simulated run: the CPU seconds of this process and of its worker processes (decoding
workers are children of a fork server, which waits for them), and all of them held to a set of cores.
Linux's /proc."""

from __future__ import annotations

import os
import resource
import time


def descendants(pid: int) -> list[int]:
    """The live processes below `pid`, children first."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it ended meanwhile
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as handle:
                children = [int(child) for child in handle.read().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def _ticks(pid: int) -> int:
    """A process's user and system clock ticks, its own and those of the children it waited for."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime


def cpu_seconds() -> float:
    """CPU seconds so far of this process, the children it waited for and every live process below it (with
    the children those waited for): a difference of two is the CPU a stretch of work took, its worker
    processes' included."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    below = sum(_ticks(pid) for pid in descendants(os.getpid()))
    return time.process_time() + children.ru_utime + children.ru_stime + below / os.sysconf("SC_CLK_TCK")


def hold_to(cpus: set[int]) -> None:
    """Every thread of this process and of the processes below it on `cpus`; those started later inherit
    it."""
    for pid in [os.getpid(), *descendants(os.getpid())]:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:  # a thread that ended meanwhile
                pass
