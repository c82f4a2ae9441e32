"""A user's checkpoint or benchmark file touched with the same bytes (rsync, a copy without -p, a backup
restore) reruns no inference: the workflows watch what the files hold, so only a real edit runs the cells
again."""

import os
import re

import pytest
import yaml
from helpers.common import copy_workflow, dvc_grid_repo, mtimes, run
from helpers.workflow import GRID_RUN, UP_TO_DATE, job_stats, jobs_run, local_grid, stages_run

from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture

pytestmark = pytest.mark.integration

CELLS = {"results/predictions/mine/mmbench-mine.parquet", "results/predictions/random/mmbench-mine.parquet"}


def touch(path, seconds=10):
    """A new modification time, the same bytes."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


def planned_rules(output: str) -> set[str]:
    """The rules a `snakemake -n` would run (its job stats table), empty when it has nothing to do."""
    if "Nothing to be done" in output:
        return set()
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^(\w+)\s+\d+\s*$", table, re.M)) - {"total"}


def changed(before: dict, after: dict) -> set[str]:
    return {path for path in after if after[path] != before.get(path)}


@pytest.fixture
def workspace(tmp_path):
    """The local grid, run once by Snakemake."""
    grid, checkpoint, tsv = local_grid(tmp_path)
    root = copy_workflow(tmp_path / "repo")
    config = root / "config" / "local.yaml"
    config.write_text(yaml.safe_dump(grid, sort_keys=False))
    args = ["--configfile", str(config)]
    run(["snakemake", "--cores", "2", *args], root)
    assert set(mtimes(root, "results/predictions/*/*.parquet")) == CELLS
    return root, args, checkpoint, tsv


def test_a_touched_checkpoint_file_reruns_no_inference_and_an_edit_still_does(workspace):
    root, args, checkpoint, _ = workspace
    before = mtimes(root, "results/predictions/*/*.parquet")
    touch(checkpoint / "model.safetensors")
    assert planned_rules(run(["snakemake", "-n", *args], root).stdout) == set()
    run(["snakemake", "--cores", "2", *args], root)
    assert mtimes(root, "results/predictions/*/*.parquet") == before

    config = checkpoint / "config.json"
    config.write_text(config.read_text().replace("\n", "\n ", 1))  # a real edit: other bytes
    assert {"fetch_model", "infer"} <= planned_rules(run(["snakemake", "-n", *args], root).stdout)
    run(["snakemake", "--cores", "2", *args], root)
    assert changed(before, mtimes(root, "results/predictions/*/*.parquet")) == {
        "results/predictions/mine/mmbench-mine.parquet"
    }


def test_a_touched_benchmark_tsv_reruns_no_inference_and_an_edit_still_does(workspace):
    root, args, _, tsv = workspace
    before = mtimes(root, "results/predictions/*/*.parquet")
    touch(tsv)
    assert planned_rules(run(["snakemake", "-n", *args], root).stdout) == set()
    run(["snakemake", "--cores", "2", *args], root)
    assert mtimes(root, "results/predictions/*/*.parquet") == before

    mmbench_fixture.write_tsv_fixture(tsv.parent, {"seed": 1, "size": 2, "corrupt": 0})  # a new version
    assert {"prepare", "infer"} <= planned_rules(run(["snakemake", "-n", *args], root).stdout)
    run(["snakemake", "--cores", "2", *args], root)
    assert changed(before, mtimes(root, "results/predictions/*/*.parquet")) == CELLS


def test_dvc_reruns_no_stage_after_a_touch_and_an_edit_reruns_the_cells(tmp_path):
    grid, checkpoint, tsv = local_grid(tmp_path)
    root = dvc_grid_repo(copy_workflow(tmp_path / "repo"), grid)
    run(["dvc", "repro"], root)
    before = mtimes(root, "results/predictions/*/*.parquet")
    assert set(before) == CELLS

    touch(checkpoint / "model.safetensors")
    touch(tsv)
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE  # not even prepare or fetch_model
    assert mtimes(root, "results/predictions/*/*.parquet") == before

    mmbench_fixture.write_tsv_fixture(tsv.parent, {"seed": 1, "size": 2, "corrupt": 0})  # a new version
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == GRID_RUN
    stats = job_stats(result.stdout + result.stderr)
    assert stats.get("prepare") == 1 and stats.get("infer") == 2 and "fetch_model" not in stats, stats
    assert changed(before, mtimes(root, "results/predictions/*/*.parquet")) == CELLS


def test_a_deleted_cell_file_is_rebuilt_alone_by_the_plain_command(workspace):
    """Any cell rebuilt on its own: a deleted predictions (or score) file is made again by a plain
    `snakemake`, and no other cell's inference runs."""
    root, args, _, _ = workspace
    before = mtimes(root, "results/predictions/*/*.parquet")
    cell = root / "results/predictions/mine/mmbench-mine.parquet"
    cell.unlink()
    assert "infer" in planned_rules(run(["snakemake", "-n", *args], root).stdout)
    run(["snakemake", "--cores", "2", *args], root)
    after = mtimes(root, "results/predictions/*/*.parquet")
    assert changed(before, after) == {"results/predictions/mine/mmbench-mine.parquet"}

    score = root / "results/scores/random/mmbench-mine.json"
    score.unlink()
    assert planned_rules(run(["snakemake", "-n", *args], root).stdout) >= {"score"}
    run(["snakemake", "--cores", "2", *args], root)
    assert score.is_file() and mtimes(root, "results/predictions/*/*.parquet") == after


def test_dvc_rebuilds_a_deleted_cell_file_alone(tmp_path):
    """The same by a plain `dvc repro`: DVC sees the grid stage's outputs changed and runs Snakemake, which
    finds the missing files and runs their jobs and what reads them, nothing else."""
    grid, _, _ = local_grid(tmp_path)
    root = dvc_grid_repo(copy_workflow(tmp_path / "repo"), grid)
    run(["dvc", "repro"], root)
    before = mtimes(root, "results/predictions/*/*.parquet")
    (root / "results/predictions/mine/mmbench-mine.parquet").unlink()
    (root / "results/scores/random/mmbench-mine.json").unlink()
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == GRID_RUN
    jobs = jobs_run(result.stdout + result.stderr)
    assert [job for job in jobs if job[0] in ("prepare", "fetch_model", "infer")] == [
        ("infer", "model=mine, bench=mmbench-mine")
    ]
    assert {job for job in jobs if job[0] == "score"} == {
        ("score", "model=mine, bench=mmbench-mine"),
        ("score", "model=random, bench=mmbench-mine"),
    }
    assert changed(before, mtimes(root, "results/predictions/*/*.parquet")) == {
        "results/predictions/mine/mmbench-mine.parquet"
    }
    assert (root / "results/scores/random/mmbench-mine.json").is_file()
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE
