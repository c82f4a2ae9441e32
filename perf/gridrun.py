"""What perf/speed.py and perf/grid.py share: a fresh copy of the repository's workflow, and Snakemake (or
DVC) run in it with its wall time and the CPU time (user + system) of everything it started."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
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


def timed(command: list[str], cwd: Path, env: dict) -> Run:
    """`command` run in `cwd`: its wall time and the CPU time of it and of every process it waited for; a
    failure stops the measurement with its last words."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed in {cwd}:\n{(result.stdout + result.stderr)[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(wall_s=wall, cpu_s=cpu, stderr=result.stderr, stdout=result.stdout)


def render_saved(json_path: str, out: str | None, render) -> int:
    """`--render`: measure nothing, write the Markdown that `render` makes of a saved results JSON to `out`
    (default: beside the JSON, as .md) and print it."""
    results = json.loads(Path(json_path).read_text(encoding="utf-8"))
    text = render(results)
    Path(out or Path(json_path).with_suffix(".md")).write_text(text, encoding="utf-8")
    print(text)
    return 0


def save_results(out: str, text: str, results: dict) -> None:
    """`--out`: the Markdown `text` at `out` and the figures it was made from, `results`, beside it as .json
    (what `render_saved` reads back)."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
