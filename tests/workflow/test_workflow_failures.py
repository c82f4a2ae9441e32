"""A failed inference job through the workflows: Snakemake (with --keep-going) and `dvc repro` (Snakemake's
--keep-going through VLMGRID_SNAKEMAKE_ARGS) stop without a number for the failed cell, finish the others, and
the next run, once the server answers, reruns exactly that cell and gives the predictions of a clean run. A
small grid (the random baseline and an API model on a POPE fixture) in temporary copies of the repo; the API
is the project's scripted server, on 127.0.0.1. And a failed fetch or prepare (a mistyped path), fixed back,
answers
no cell again: the cells' inputs never changed."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml
from helpers.common import REPO, copy_workflow, dvc_grid_repo, mtimes, run, workflow_env
from helpers.fake_openai_server import FakeOpenAIServer, Reply
from helpers.workflow import GRID_RUN, UP_TO_DATE, jobs_run, local_grid, stages_run

pytestmark = pytest.mark.integration

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
FAILING = [Reply(500, json.dumps({"error": {"message": "overloaded"}}))] * 40


@pytest.fixture
def server():
    fake = FakeOpenAIServer().start()
    fake.reply = lambda body: "No."
    yield fake
    fake.stop()


def grid(server, results_dir="results") -> dict:
    return {
        **{key: DEFAULT[key] for key in ("title", "bootstrap")},
        "infer": {**DEFAULT["infer"], "part_size": 2},
        "data_dir": "data",
        "results_dir": results_dir,
        "benchmarks": {"pope-small": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 2}}},
        "models": {
            "random": DEFAULT["models"]["random"],
            "api": {
                "backend": "openai",
                "base_url": server.base_url,
                "model": "fake-vlm",
                "max_retries": 0,
                "concurrency": 1,
                "circuit_breaker": 3,
                "cache": False,
            },
        },
        "grid": {"models": ["random", "api"], "benchmarks": ["pope-small"]},
    }


def env(tmp_path):
    return workflow_env({"VLMGRID_CACHE_DIR": str(tmp_path / "cache")})


def test_snakemake_keeps_going_reports_the_missing_cell_and_reruns_only_it(server, tmp_path):
    root = copy_workflow(tmp_path / "repo")
    config = tmp_path / "grid.yaml"
    config.write_text(yaml.safe_dump(grid(server)))
    server.script.extend(FAILING)
    failed = run(
        ["snakemake", "--cores", "2", "--keep-going", "--configfile", str(config)],
        root,
        check=False,
        env=env(tmp_path),
    )
    assert failed.returncode != 0
    results = root / "results"
    log = (results / "logs/infer/api/pope-small.log").read_text()
    assert "Traceback" not in log and log.strip().splitlines()[-1].startswith(
        "vlmgrid: error: api on pope-small:"
    )
    assert "the job stopped: the last 3 requests" in log
    assert not (results / "predictions/api/pope-small.parquet").exists()
    assert (results / "scores/random/pope-small.json").is_file()  # the other cell finished
    # Tables of what could run, written after the failure to a folder of their own, show no number for the
    # failed cell and say it is missing; the grid's own report files are not written.
    main = (results / "report-partial/tables/main.md").read_text()
    assert "missing" in main and "api" in main
    assert not (results / "tables").exists()

    server.script.clear()  # the server answers again
    plan = run(
        ["snakemake", "-n", "--quiet", "rules", "--configfile", str(config)], root, env=env(tmp_path)
    ).stdout
    assert "infer" in plan and "prepare" not in plan and "fetch_model" not in plan
    run(["snakemake", "--cores", "2", "--configfile", str(config)], root, env=env(tmp_path))
    assert "missing" not in (results / "tables/main.md").read_text()
    assert not (results / "report-partial").exists()
    clean = tmp_path / "clean.yaml"
    clean.write_text(yaml.safe_dump(grid(server, "results-clean")))
    run(
        ["vlmgrid", "infer", "api", "pope-small", "--config", str(clean), "--no-progress"],
        root,
        env=env(tmp_path),
    )
    assert (results / "predictions/api/pope-small.parquet").read_bytes() == (
        root / "results-clean/predictions/api/pope-small.parquet"
    ).read_bytes()


def test_dvc_repro_stops_at_the_failed_cell_and_the_next_repro_runs_only_it(server, tmp_path):
    root = dvc_grid_repo(copy_workflow(tmp_path / "repo"), grid(server))
    server.script.extend(FAILING)
    keep_going = {**env(tmp_path), "VLMGRID_SNAKEMAKE_ARGS": "--keep-going"}
    failed = run(["dvc", "repro"], root, check=False, env=keep_going)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    assert "ERROR: failed to reproduce 'grid'" in output
    # Snakemake prints the failed job's log (show-failed-logs): vlmgrid's one sentence, naming the cell
    said = [line for line in output.splitlines() if line.startswith("vlmgrid: error: api on pope-small:")]
    assert said and "the last 3 requests" in said[0] and "Traceback" not in output
    assert not (root / "results/predictions/api/pope-small.parquet").exists()
    assert (root / "results/scores/random/pope-small.json").is_file()  # the other cell finished
    assert "missing" in (root / "results/report-partial/tables/main.md").read_text()

    server.script.clear()
    again = run(["dvc", "repro"], root, env=env(tmp_path))
    assert stages_run(again.stdout) == GRID_RUN
    jobs = jobs_run(again.stdout + again.stderr)
    assert ("infer", "model=api, bench=pope-small") in jobs and ("report", "") in jobs
    assert not [job for job in jobs if job[0] in ("prepare", "fetch_model") or "model=random" in job[1]]
    assert (root / "results/predictions/api/pope-small.parquet").is_file()
    assert not (root / "results/report-partial").exists()
    assert stages_run(run(["dvc", "repro"], root, env=env(tmp_path)).stdout) == UP_TO_DATE


def with_paths(grid: dict, checkpoint, tsv) -> dict:
    """The local grid (test_touch_reruns_nothing.local_grid) with its checkpoint's and its TSV's paths."""
    grid = copy.deepcopy(grid)
    grid["models"]["mine"]["source"]["path"] = str(checkpoint)
    grid["benchmarks"]["mmbench-mine"]["source"]["path"] = str(tsv)
    return grid


def test_snakemake_a_failed_fetch_or_prepare_fixed_back_answers_no_cell_again(tmp_path):
    # Snakemake removes a failed job's outputs and records its params (the mistyped path): fixed back, the
    # fetch or prepare runs again, and makes the manifest it made before, which reruns no cell.
    grid, checkpoint, tsv = local_grid(tmp_path)
    root = copy_workflow(tmp_path / "repo")
    config = tmp_path / "grid.yaml"
    args = ["--configfile", str(config)]
    config.write_text(yaml.safe_dump(grid, sort_keys=False))
    run(["snakemake", "--cores", "2", *args], root)
    cells = mtimes(root, "results/predictions/*/*.parquet")
    assert len(cells) == 2
    manifests = {
        path: (root / path).read_bytes()
        for path in ("data/models/mine/model.json", "data/mmbench-mine/manifest.json")
    }

    for rule, mistyped in (
        ("fetch_model", with_paths(grid, checkpoint.with_name("llava-mistyped"), tsv)),
        ("prepare", with_paths(grid, checkpoint, tsv.with_name("mistyped.tsv"))),
    ):
        config.write_text(yaml.safe_dump(mistyped, sort_keys=False))
        failed = run(["snakemake", "--cores", "2", *args], root, check=False)
        assert failed.returncode != 0 and "mistyped" in failed.stdout + failed.stderr
        config.write_text(yaml.safe_dump(grid, sort_keys=False))
        fixed = run(["snakemake", "--cores", "2", *args], root)
        assert re.search(
            rf"^(local)?(rule|checkpoint) {rule}:$", fixed.stdout + fixed.stderr, re.M
        )  # it ran again
        assert mtimes(root, "results/predictions/*/*.parquet") == cells, rule
        assert {path: (root / path).read_bytes() for path in manifests} == manifests
    assert "Nothing to be done" in run(["snakemake", "-n", *args], root).stdout


def test_dvc_a_failed_fetch_or_prepare_fixed_back_answers_no_cell_again(tmp_path):
    # The same failures at DVC's door, where Snakemake runs the grid stage
    grid, checkpoint, tsv = local_grid(tmp_path)
    root = dvc_grid_repo(copy_workflow(tmp_path / "repo"), grid)
    run(["dvc", "repro"], root)
    cells = mtimes(root, "results/predictions/*/*.parquet")
    assert len(cells) == 2

    for rule, mistyped in (
        ("fetch_model", with_paths(grid, checkpoint.with_name("llava-mistyped"), tsv)),
        ("prepare", with_paths(grid, checkpoint, tsv.with_name("mistyped.tsv"))),
    ):
        (root / "config/config.yaml").write_text(yaml.safe_dump(mistyped, sort_keys=False))
        failed = run(["dvc", "repro"], root, check=False)
        assert failed.returncode != 0 and "mistyped" in failed.stdout + failed.stderr
        (root / "config/config.yaml").write_text(yaml.safe_dump(grid, sort_keys=False))
        fixed = run(["dvc", "repro"], root)
        jobs = jobs_run(fixed.stdout + fixed.stderr)
        assert not [job for job in jobs if job[0] == "infer"], rule
        assert mtimes(root, "results/predictions/*/*.parquet") == cells, rule
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE
