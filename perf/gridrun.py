"""What perf/speed.py and perf/grid.py share: a fresh copy of the repository's workflow, and Snakemake (or
DVC) run in it with its wall time and the CPU time (user + system) of everything it started."""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = (
    "Snakefile",
    "dvc.yaml",
    ".dvcignore",
    "workflow",
    "profiles",
    "config",
    ".dvc/config",
    ".dvc/.gitignore",
)


@dataclass(frozen=True)
class Run:
    """One `snakemake` (or `dvc`) run: its wall seconds, the CPU seconds of it and of every process it waited
    for, its stderr (Snakemake's log, which holds the job counts) and its stdout (DVC's log)."""

    wall_s: float
    cpu_s: float
    stderr: str
    stdout: str = ""


def workflow_copy(destination: Path, repo: Path = REPO) -> Path:
    """The repository's workflow files (Snakefile, rules, configs, dvc.yaml) copied to a new folder: a grid
    that has never run."""
    destination.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        source, target = repo / name, destination / name
        if not source.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
    return destination


def snakemake(args: list[str], cwd: Path) -> Run:
    """`snakemake <args>` in `cwd` with no GPU, with this interpreter's `vlmgrid` first on PATH; a failure
    stops the measurement with Snakemake's last words."""
    return timed(["snakemake", *args], cwd, tool_env())


def tool_env(**extra: str) -> dict:
    """The environment of a measured run: no GPU, this interpreter's `vlmgrid` first on PATH, and `extra`."""
    env = dict(os.environ, VLMGRID_GPU_COUNT="0", **extra)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


# Seconds to wait, after a measured command, for the processes it left running to end (a fork server ends
# when the process that started it does)
ORPHANS_WAIT_S = 10.0
PR_SET_CHILD_SUBREAPER = 36  # prctl(2), Linux


def timed(command: list[str], cwd: Path, env: dict) -> Run:
    """`command` run in `cwd`: its wall time and the CPU time of it and of every process it or its descendants
    waited for, and of those it left running (orphans_waited); a failure stops the measurement with its last
    words."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with orphans_waited():
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed in {cwd}:\n{(result.stdout + result.stderr)[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(wall_s=wall, cpu_s=cpu, stderr=result.stderr, stdout=result.stdout)


@contextmanager
def orphans_waited(wait_s: float = ORPHANS_WAIT_S):
    """This process as the subreaper of what the block's commands leave running (Linux): a process one of
    them started and did not wait for (the DataLoader workers' fork server, left when vlmgrid exits, with the
    CPU time of every worker it waited for) is handed to this process, which waits for it (up to `wait_s`) so
    that its CPU time counts in RUSAGE_CHILDREN. Elsewhere, or where prctl is refused, the block runs as it
    is."""
    libc = _libc()
    held = libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    ours = set(_children())
    try:
        yield
    finally:
        if held:
            libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
            deadline = time.monotonic() + wait_s
            left = set(_children()) - ours
            while left and time.monotonic() < deadline:
                for pid in list(left):
                    try:
                        done, _ = os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        done = pid
                    if done:
                        left.discard(pid)
                if left:
                    time.sleep(0.02)
                    left |= set(_children()) - ours  # the orphans' own orphans, handed here in turn


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _children() -> list[int]:
    """This process's live children (every thread's), from /proc; none where it is not there."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as handle:
                pids += [int(pid) for pid in handle.read().split()]
        except OSError:
            continue
    return pids


def render_saved(json_path: str, out: str | None, render) -> int:
    """`--render`: measure nothing, write the Markdown that `render` makes of a saved results JSON to `out`
    (default: beside the JSON, as .md) and print it."""
    from vlmgrid.fileio import write_text

    results = json.loads(Path(json_path).read_text(encoding="utf-8"))
    text = render(results)
    write_text(out or Path(json_path).with_suffix(".md"), text)
    print(text)
    return 0


def save_results(out: str, text: str, results: dict) -> None:
    """`--out`: the Markdown `text` at `out` and the figures it was made from, `results`, beside it as .json
    (what `render_saved` reads back). Each file is written whole or not at all (a temporary file renamed)."""
    from vlmgrid.fileio import write_text

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path.with_suffix(".json"), json.dumps(results, indent=1) + "\n")
    write_text(path, text)
