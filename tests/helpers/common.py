"""What conftest.py's fixtures and the tests share: the repo's paths, a copy of the workflow and the commands
run in it, and small grids of the default grid."""

import copy
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "config" / "config.yaml"
# What a copy of the repo needs to run the grid through Snakemake or DVC.
WORKFLOW_FILES = [
    "Snakefile",
    "dvc.yaml",
    ".dvcignore",
    "workflow",
    "profiles",
    "config",
    ".dvc/config",
    ".dvc/.gitignore",
]


def tiny_open_clip(seed: int, multilingual: bool = False) -> dict:
    """The settings of the smallest open_clip model the backend builds from a fixture source (a batch of 3);
    `multilingual` gives it a transformers text tower, as the multilingual CLIP models have."""
    source = {
        "type": "fixture",
        "seed": seed,
        "model_cfg": {
            "embed_dim": 16,
            "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 16, "heads": 1, "layers": 1},
        },
    }
    if multilingual:
        source["text_tower"] = {"width": 32, "layers": 1, "heads": 2}
    return {"backend": "open_clip", "source": source, "batch_size": 3}


def workflow_env(extra: dict | None = None) -> dict:
    """The environment of a workflow run: this venv's commands first, no GPU, fixed git identity."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "DVC_NO_ANALYTICS": "1",
            "VLMGRID_GPU_COUNT": "0",
        }
    )
    env.update(extra or {})
    return env


def run(args, cwd, check=True, env=None):
    """Run a command in `cwd` with `env` (default: workflow_env()); with check, fail the test on an error."""
    result = subprocess.run(args, cwd=cwd, env=env or workflow_env(), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def copy_workflow(destination: Path) -> Path:
    destination.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    return destination


def write_grid_pipeline(root: Path) -> None:
    """`vlmgrid dvc-pipelines` in a copy whose config/config.yaml a test rewrote, as a user runs it after
    editing the grid; the paper grids' pipelines it writes too are left out, as copy_workflow leaves them
    out."""
    had_pipelines = (root / "pipelines").exists()
    run(["vlmgrid", "dvc-pipelines"], root)
    if not had_pipelines:
        shutil.rmtree(root / "pipelines")


def wait_for(predicate, what: str, limit_s: float = 120.0):
    """Poll until `predicate()` is true (a bound on waiting, not a timed assertion)."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {limit_s} s for {what}")
        time.sleep(0.05)


def dvc_grid_repo(root: Path, config: dict) -> Path:
    """The workflow copy at `root` made a git repository for `dvc repro` of `config`: written as its
    config/config.yaml, its pipeline written again, its data and results ignored, all committed."""
    (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    write_grid_pipeline(root)
    (root / ".gitignore").write_text("/data/\n/results/\n/.snakemake/\n")
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "grid"]):
        run(command, root)
    return root


def lock_is_free(path: Path) -> bool:
    """Whether nobody holds the lock file (checked by taking it for an instant)."""
    import fcntl

    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def mtimes(root: Path, pattern: str) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.glob(pattern))}


def set_random_seed(root: Path, seed: int) -> None:
    path = root / "config" / "config.yaml"
    data = yaml.safe_load(path.read_text())
    data["models"]["random"]["seed"] = seed
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def copy_workspace(source: Path, destination: Path) -> Path:
    """A copy of a workflow run's whole folder (config, data, results, .snakemake, .git, .dvc), every file
    with its modification time, so that Snakemake and DVC find in the copy what they left in the source."""
    shutil.copytree(source, destination)
    return destination


# Small grids of the default grid's cells (the same settings, so the same files): a model on a GPU backend and
# the CPU baseline, every rule and stage kind, in a few jobs. SMALL_GRID (DVC, a model change) adds a
# benchmark that neither model can run (n/a cells); SLURM_GRID is the smallest with every kind of job, and a
# model that test_slurm.py makes hold two GPUs.
SMALL_GRID = {"models": ["clip-tiny", "random"], "benchmarks": ["pope-fixture", "textvqa-fixture"]}
SLURM_GRID = {"models": ["llava-tiny", "clip-tiny", "random"], "benchmarks": ["pope-fixture"]}


def small_grid_config(grid: dict, data: dict | None = None) -> dict:
    """The default config (or `data`) with its grid cut down to `grid`."""
    data = copy.deepcopy(data if data is not None else yaml.safe_load(DEFAULT_CONFIG.read_text()))
    data["grid"] = copy.deepcopy(grid)
    return data


def heatmap_cells(fig, models) -> dict[tuple[str, str], tuple[str, tuple]]:
    """The cells of a main heatmap: {(model, column header's first line): (the text written in it, its face
    colour as RGBA)}."""
    cells = {}
    for ax in fig.axes:
        patches = {tuple(p.get_xy()): p for p in ax.patches}
        if not patches:
            continue  # the colorbar, the note
        columns = [label.get_text().split("\n")[0] for label in ax.get_xticklabels()]
        for text in ax.texts:
            x, y = text.get_position()
            col, row = int(x), int(y)
            cells[(models[row], columns[col])] = (text.get_text(), tuple(patches[(col, row)].get_facecolor()))
    return cells


def pope_grid_file(
    small_config: dict, tmp_path: Path, models: dict, name: str = "grid.yaml", results: str = "results"
) -> str:
    """A grid of the given models on a 12-item POPE fixture in parts of 4, written to tmp_path/name."""
    data = copy.deepcopy(small_config)
    data["prompts_dir"] = str(REPO / "config" / "prompts")
    data["results_dir"] = str(tmp_path / results)
    data["infer"] = {**data["infer"], "part_size": 4}
    data["benchmarks"] = {
        "pope-fixture": {
            **data["benchmarks"]["pope-fixture"],
            "source": {"type": "fixture", "seed": 0, "size": 4},
        }
    }
    data["models"] = models
    data["grid"] = {"models": list(models), "benchmarks": ["pope-fixture"]}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)
