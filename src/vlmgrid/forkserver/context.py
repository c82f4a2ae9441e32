"""What a job forked from a fork server takes from the server rather than from the process that sent it: the
process's context and the code. A job must run as its caller and run the code on disk, as it would in a
process of its own, so the server compares both before every fork and refuses a job where either differs.

The context (`process_context`) is everything a forked child inherits from its parent that changes what it may
do or what it writes: the umask; the user and group ids and the supplementary groups; the capabilities
(inheritable, permitted, effective, bounding, ambient), no_new_privs and seccomp; the blocked and ignored
signals; the allowed CPUs and memory nodes; the nice value and the scheduling policy; every resource limit;
the namespaces (network, mount, user, pid, ...); the root folder; the cgroups; the LSM label (SELinux,
AppArmor: where the kernel has one to show); and the OOM score adjustment. The I/O priority (`ionice`) has no
interface to read it from here and is not compared. Before each fork a server reads the client's context from
the kernel (/proc/<pid> of the process at the other end of its socket), so a client cannot misstate it, and
its own, as the forked job would have it.

The code is the package's files, by content (vlmgrid.codeversion), and the import path's folders
(`import_paths`: a package installed or removed there changes their modification times).
"""

from __future__ import annotations

import os
import resource
import signal

# The lines of /proc/<pid>/status that a forked child inherits and that change what it may do or write, by the
# name a refusal gives them
STATUS = {
    "Umask": "umask",
    "Uid": "user ids",
    "Gid": "group ids",
    "Groups": "supplementary groups",
    "CapInh": "CapInh",
    "CapPrm": "CapPrm",
    "CapEff": "CapEff",
    "CapBnd": "CapBnd",
    "CapAmb": "CapAmb",
    "NoNewPrivs": "no_new_privs",
    "Seccomp": "seccomp mode",
    "Seccomp_filters": "seccomp filters",
    "SigBlk": "blocked signals",
    "SigIgn": "ignored signals",
    "Cpus_allowed_list": "allowed CPUs",
    "Mems_allowed_list": "allowed memory nodes",
}
# Every resource limit (RLIMIT_OFILE is RLIMIT_NOFILE's other name)
LIMITS = sorted(name for name in dir(resource) if name.startswith("RLIMIT_") and name != "RLIMIT_OFILE")


def process_context(pid: int | None = None) -> dict[str, str]:
    """The context of the process `pid` (None or 0: this one), item by item as text; an item that cannot be
    read (another user's process, a kernel without it) is the reason, so it is equal only to one unreadable
    alike."""
    proc = f"/proc/{pid or 'self'}"
    context = {}
    status = _read(f"{proc}/status")
    lines = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    for field, name in STATUS.items():
        context[name] = " ".join(lines[field].split()) if field in lines else ("absent" if lines else status)
    for name in ("blocked signals", "ignored signals"):
        context[name] = _signals(context[name])
    target = pid or 0
    context["nice"] = _call(os.getpriority, os.PRIO_PROCESS, target)
    context["scheduling policy"] = _call(
        lambda: (os.sched_getscheduler(target), os.sched_getparam(target).sched_priority)
    )
    for name in LIMITS:
        context[name] = _call(resource.prlimit, target, getattr(resource, name))
    try:
        namespaces = sorted(os.listdir(f"{proc}/ns"))
    except OSError as error:
        namespaces, context["namespaces"] = [], _reason(error)
    for name in namespaces:
        context[f"{name} namespace"] = _call(os.readlink, f"{proc}/ns/{name}")
    context["root folder"] = _call(os.readlink, f"{proc}/root")
    context["cgroups"] = _read(f"{proc}/cgroup")
    context["LSM label"] = _read(f"{proc}/attr/current")
    context["OOM score adjustment"] = _read(f"{proc}/oom_score_adj")
    return context


def context_difference(job: dict[str, str], server: dict[str, str]) -> str | None:
    """The first item (in the server's order) in which a job's context differs from the server's; None when
    none does."""
    for name in [*server, *(name for name in job if name not in server)]:
        if job.get(name) != server.get(name):
            return name
    return None


def import_paths(entries: list[str]) -> list:
    """The folders `entries` of the import path (sys.path, as it was when a server started: an import may add
    one) with their modification times, which a package installed or removed there changes."""
    paths = []
    for entry in entries:
        try:
            paths.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            pass
    return paths


def _signals(mask: str) -> str:
    """A signal mask of /proc/<pid>/status as the signals' numbers, those a program may handle only: the C
    library's own (32 and 33 in glibc, which posix_spawn leaves ignored in the process it starts) are not a
    program's."""
    try:
        bits = int(mask, 16)
    except ValueError:  # unreadable
        return mask
    return " ".join(str(int(number)) for number in sorted(signal.valid_signals()) if bits >> (number - 1) & 1)


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError as error:
        return _reason(error)


def _call(function, *args) -> str:
    try:
        return str(function(*args))
    except OSError as error:
        return _reason(error)


def _reason(error: OSError) -> str:
    return f"unreadable ({error.strerror})"
