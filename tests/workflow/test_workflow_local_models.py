"""A checkpoint in a folder of one's own (`vlmgrid make-tiny-models`, no fixture source) runs through
Snakemake and DVC, read where it lies; editing one of its files reruns its cells and no other model's."""

import json

import pytest
import yaml
from helpers.common import REPO, copy_workflow, dvc_grid_repo, mtimes, run
from helpers.workflow import GRID_RUN, UP_TO_DATE, jobs_run, stages_run

pytestmark = pytest.mark.integration

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
CELLS = {"results/predictions/mine/pope-small.parquet", "results/predictions/random/pope-small.parquet"}


def make_checkpoint(base):
    """The tiny LLaVA checkpoint `vlmgrid make-tiny-models` writes (save_pretrained's layout)."""
    run(["vlmgrid", "make-tiny-models", str(base / "ckpts"), "--families", "llava"], base)
    return base / "ckpts" / "llava"


def grid(folder):
    return {
        **{key: DEFAULT[key] for key in ("title", "bootstrap", "infer")},
        "data_dir": "data",
        "results_dir": "results",
        "benchmarks": {"pope-small": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 2}}},
        "models": {
            "mine": {
                "backend": "hf",
                "source": {"type": "local", "path": str(folder)},
                "precision": "fp32",
                "batch_size": 4,
            },
            "random": DEFAULT["models"]["random"],
        },
        "grid": {"models": ["mine", "random"], "benchmarks": ["pope-small"]},
    }


def edit(folder):
    """A new version of one file of the checkpoint (its config, rewritten with other indentation)."""
    config = folder / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()), indent=3))


def no_copy(root, folder):
    names = {path.name for path in folder.iterdir()}
    assert [p.name for p in (root / "data/models/mine").iterdir()] == ["model.json"]
    assert not [p for p in (root / "data").rglob("*") if p.name in names - {"config.json"}]


def test_snakemake_runs_a_local_checkpoint_and_an_edit_reruns_only_its_cells(tmp_path):
    folder = make_checkpoint(tmp_path)
    root = copy_workflow(tmp_path / "repo")
    config = root / "config" / "local.yaml"
    config.write_text(yaml.safe_dump(grid(folder), sort_keys=False))
    args = ["--configfile", str(config)]
    run(["snakemake", "--cores", "2", *args], root)
    no_copy(root, folder)
    assert "Nothing to be done" in run(["snakemake", "-n", *args], root).stdout
    before = mtimes(root, "results/predictions/*/*.parquet")
    assert set(before) == CELLS

    edit(folder)
    run(["snakemake", "--cores", "2", *args], root)
    after = mtimes(root, "results/predictions/*/*.parquet")
    assert {path for path in after if after[path] != before[path]} == {
        "results/predictions/mine/pope-small.parquet"
    }
    manifest = json.loads((root / "data/models/mine/model.json").read_text())
    assert manifest["location"] == str(folder)
    assert "Nothing to be done" in run(["snakemake", "-n", *args], root).stdout


def test_dvc_runs_a_local_checkpoint_and_an_edit_reruns_only_its_cells(tmp_path):
    folder = make_checkpoint(tmp_path)
    root = dvc_grid_repo(copy_workflow(tmp_path / "repo"), grid(folder))
    run(["dvc", "repro"], root)
    no_copy(root, folder)
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE
    before = mtimes(root, "results/predictions/*/*.parquet")
    assert set(before) == CELLS

    edit(folder)
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == GRID_RUN
    # the checkpoint is recorded again, and its cells alone are answered again
    jobs = jobs_run(result.stdout + result.stderr)
    assert [job for job in jobs if job[0] in ("prepare", "fetch_model", "infer")] == [
        ("fetch_model", "model=mine"),
        ("infer", "model=mine, bench=pope-small"),
    ]
    assert not [job for job in jobs if "model=random" in job[1]]
    after = mtimes(root, "results/predictions/*/*.parquet")
    assert {path for path in after if after[path] != before[path]} == {
        "results/predictions/mine/pope-small.parquet"
    }
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE
