"""The grid a workflow runs is exactly one config file; a changed local source is prepared again (Snakemake
and DVC); each grid keeps its own logs. Small grids in temporary copies of the repo."""

import hashlib
import json
import os
import re

import pytest
import yaml
from helpers.common import REPO, copy_workflow, dvc_grid_repo, run, workflow_env
from helpers.sources import raw_fixture
from helpers.workflow import GRID_RUN, UP_TO_DATE, changed_stages, jobs_run, stages_run

pytestmark = pytest.mark.integration

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def planned(output: str) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run plans."""
    return set(re.findall(r"^(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    wildcards: (.*)$", output, re.M))


def write(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("grids") / "repo")


def test_a_dry_run_inside_a_dvc_stage_is_refused_and_snakemakes_own_runs(workflow):
    # DVC would record the stage as run with its outputs as they are (VLMGRID_SNAKEMAKE_ARGS=-n dvc repro)
    refused = run(
        ["snakemake", "-n", "--cores", "1"], workflow, check=False, env=workflow_env({"DVC_STAGE": "grid"})
    )
    said = "a dry run inside DVC's stage grid would be recorded as a run; take -n (or --dry-run) out of "
    assert refused.returncode != 0 and said in refused.stdout + refused.stderr
    assert "Job stats" not in refused.stdout + refused.stderr
    assert "Job stats" in run(["snakemake", "-n", "--cores", "1"], workflow).stdout  # a plain dry run plans


# ----------------------------------------------------------------------------------------- one grid, one file


def test_snakemake_plans_exactly_the_given_files_grid(workflow, tmp_path):
    # clip-tiny is also a model of config/config.yaml, with other settings: merged, it would carry open_clip
    # keys
    other = write(
        tmp_path / "other.yaml",
        {
            "results_dir": "results-other",
            "benchmarks": {
                "pope-small": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 2}}
            },
            "models": {"clip-tiny": {"backend": "baseline", "seed": 3}},
            "grid": {"models": ["clip-tiny"], "benchmarks": ["pope-small"]},
        },
    )
    result = run(["snakemake", "-n", "--printshellcmds", "--configfile", str(other)], workflow)
    assert planned(result.stdout) == {
        ("prepare", "bench=pope-small"),
        ("fetch_model", "model=clip-tiny"),
        ("infer", "model=clip-tiny, bench=pope-small"),
        ("score", "model=clip-tiny, bench=pope-small"),
        ("compare", "bench=pope-small"),
        ("inspect", "bench=pope-small"),
    }
    assert "rule report:" in result.stdout
    assert "-fixture" not in result.stdout  # none of the default grid's benchmarks
    commands = re.findall(r"^Shell command: (vlmgrid .*)$", result.stdout, re.M)
    assert len(commands) == 7 and all(f"--config {other} " in command for command in commands)
    assert "results-other/logs/infer/clip-tiny/pope-small.log" in result.stdout


def test_a_grid_naming_a_benchmark_it_does_not_define_stops_at_once(workflow, tmp_path):
    # pope-fixture is defined in config/config.yaml only: the jobs, which read this file, would not find it
    typo = write(
        tmp_path / "typo.yaml",
        {
            "benchmarks": {"pope-small": {"kind": "pope", "source": {"type": "fixture", "size": 2}}},
            "models": {"random": {"backend": "baseline"}},
            "grid": {"models": ["random"], "benchmarks": ["pope-fixture"]},
        },
    )
    result = run(["snakemake", "-n", "--configfile", str(typo)], workflow, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Building DAG" not in output
    sentence = (
        f'{typo}: grid.benchmarks names "pope-fixture", which is not defined under benchmarks; defined: '
        "pope-small"
    )
    assert [line for line in output.splitlines() if "pope-fixture" in line] == [sentence]


@pytest.mark.parametrize("how", ["one option", "two options"])
def test_more_than_one_configfile_is_refused(workflow, tmp_path, how):
    first = write(tmp_path / "a.yaml", DEFAULT)
    second = write(tmp_path / "b.yaml", DEFAULT)
    files = (
        ["--configfile", str(first), str(second)]
        if how == "one option"
        else ["--configfile", str(first), "--configfile", str(second)]
    )
    result = run(["snakemake", "-n", *files], workflow, check=False)
    assert result.returncode != 0
    assert "--configfile was given 2 files" in result.stdout + result.stderr
    assert "put the grid in one file and pass only that one" in result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------- local sources


def local_grid(raw, results_dir="results"):
    """The random baseline on one flowers102 benchmark read from a local folder (6 items)."""
    return {
        **{key: DEFAULT[key] for key in ("title", "bootstrap", "infer")},
        "data_dir": "data",
        "results_dir": results_dir,
        "benchmarks": {
            "flowers-local": {
                "kind": "flowers102",
                "source": {"type": "local", "path": str(raw), "expected_items": 6},
            }
        },
        "models": {"random": DEFAULT["models"]["random"]},
        "grid": {"models": ["random"], "benchmarks": ["flowers-local"]},
    }


def new_version(raw):
    """The user's copy replaced by another version of the data (other images and labels)."""
    raw_fixture("flowers102", raw, size=2, classes=3, seed=1)


def touch(path):
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_snakemake_prepares_a_changed_local_source_again_and_keeps_the_grids_logs(workflow, tmp_path):
    raw = raw_fixture("flowers102", tmp_path / "my-flowers", size=2, classes=3)
    grid = ["--configfile", str(write(tmp_path / "local.yaml", local_grid(raw, "results-local")))]
    root = workflow
    run(["snakemake", "--cores", "2", *grid], root)
    records = root / "data/flowers-local/records.parquet"
    first = sha(records)
    logs = root / "results-local/logs"
    for log in (
        "prepare/flowers-local.log",
        "fetch_model/random.log",
        "infer/random/flowers-local.log",
        "score/random/flowers-local.log",
        "report.log",
        "benchmarks/infer/random/flowers-local.tsv",
        # every job's timing (perf/grid.py reads them)
        "benchmarks/prepare/flowers-local.tsv",
        "benchmarks/fetch_model/random.tsv",
        "benchmarks/score/random/flowers-local.tsv",
        "benchmarks/compare/flowers-local.tsv",
        "benchmarks/inspect/flowers-local.tsv",
        "benchmarks/report.tsv",
    ):
        assert (logs / log).is_file(), log
    assert not (root / "logs").exists()
    assert "Nothing to be done" in run(["snakemake", "-n", *grid], root).stdout

    new_version(raw)
    plan = run(["snakemake", "-n", "--quiet", "rules", *grid], root).stdout
    assert "prepare" in plan and "infer" in plan
    run(["snakemake", "--cores", "2", *grid], root)
    assert sha(records) != first
    run(["vlmgrid", "verify", "flowers-local", "--config", grid[1]], root)  # the manifest holds the new files
    assert "Nothing to be done" in run(["snakemake", "-n", *grid], root).stdout


@pytest.fixture(scope="module")
def dvc_local(tmp_path_factory):
    """dvc repro of the local-source grid, written as the repo's config/config.yaml (dvc.yaml reads that)."""
    base = tmp_path_factory.mktemp("dvc-local")
    raw = raw_fixture("flowers102", base / "my-flowers", size=2, classes=3)
    root = dvc_grid_repo(copy_workflow(base / "repo"), local_grid(raw))
    run(["dvc", "repro"], root)
    return root, raw


def test_dvc_reruns_only_the_stamp_when_nothing_changed(dvc_local):
    root, _ = dvc_local
    status = run(["dvc", "status"], root).stdout
    assert changed_stages(status) == UP_TO_DATE and "always changed" in status
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE


def test_dvc_reruns_nothing_for_a_touched_local_source(dvc_local):
    root, raw = dvc_local
    predictions = root / "results/predictions/random/flowers-local.parquet"
    before = predictions.stat().st_mtime_ns
    touch(raw / "setid.mat")  # the same bytes: the stamp holds their hash, so it does not change
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == UP_TO_DATE
    assert "preparing it again" not in result.stdout + result.stderr
    assert predictions.stat().st_mtime_ns == before


def test_dvc_prepares_a_changed_local_source_again(dvc_local):
    root, raw = dvc_local
    records = root / "data/flowers-local/records.parquet"
    first = sha(records)
    new_version(raw)
    # the source lies outside the repo, where DVC cannot see it change: `dvc status` sees the edit once the
    # stamp stage has stamped it
    assert changed_stages(run(["dvc", "status"], root).stdout) == UP_TO_DATE
    run(["dvc", "repro", "dvc.yaml:stamp_sources"], root)
    status = run(["dvc", "status"], root).stdout
    assert (
        changed_stages(status) == UP_TO_DATE | {"grid"}
        and "modified:           data/.source-stamps" in status
    )
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == GRID_RUN
    jobs = jobs_run(result.stdout + result.stderr)
    assert {
        ("prepare", "bench=flowers-local"),
        ("infer", "model=random, bench=flowers-local"),
        ("report", ""),
    } <= set(jobs)
    assert ("fetch_model", "model=random") not in jobs
    assert sha(records) != first
    run(["vlmgrid", "verify", "flowers-local"], root)  # the manifest holds the new files
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE


# ------------------------------------------------------------------------------------ two grids, one checkout


def two_grids(root, data_dirs=("data/a", "data/b")):
    """Grid A and grid B in grids/: the same benchmark names (pope, mme) from other sources (other fixture
    seeds), each in a data folder of its own, as the README's own-model example beside CARPE's."""
    (root / "grids").mkdir(exist_ok=True)
    configs = []
    for name, seed, data_dir in zip("ab", (0, 1), data_dirs):
        write(
            root / "grids" / f"{name}.yaml",
            {
                **{key: DEFAULT[key] for key in ("title", "bootstrap", "infer")},
                "data_dir": data_dir,
                "results_dir": f"results/{name}",
                "benchmarks": {
                    bench: {"kind": bench, "source": {"type": "fixture", "seed": seed, "size": 2}}
                    for bench in ("pope", "mme")
                },
                "models": {"random": DEFAULT["models"]["random"]},
                "grid": {"models": ["random"], "benchmarks": ["pope", "mme"]},
            },
        )
        configs.append(f"grids/{name}.yaml")
    return configs


def test_two_grids_in_one_checkout_under_snakemake(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    a, b = two_grids(root)
    for config in (a, b):
        run(["snakemake", "--cores", "2", "--configfile", config], root)
    third = run(["snakemake", "--cores", "2", "--configfile", a], root)
    assert "Nothing to be done" in third.stdout + third.stderr
    for name, seed in (("a", 0), ("b", 1)):
        manifest = json.loads((root / f"data/{name}/mme/manifest.json").read_text())
        assert manifest["source"]["seed"] == seed and manifest["grid_config"] == f"grids/{name}.yaml"

    # grid B in A's data folder is refused in one sentence before any job, and A's data stays as it was
    write(root / "grids/c.yaml", {**yaml.safe_load((root / b).read_text()), "data_dir": "data/a"})
    before = sha(root / "data/a/pope/records.parquet")
    result = run(["snakemake", "--cores", "2", "--configfile", "grids/c.yaml"], root, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Building DAG" not in output
    said = [line for line in output.splitlines() if "data/a/pope" in line]
    assert len(said) == 1 and said[0].startswith(
        "benchmark pope: data/a/pope holds the data grids/a.yaml prepared for it (pope from {"
    )
    assert (
        '"seed": 0' in said[0]
        and '"seed": 1' in said[0]
        and said[0].endswith(
            "which would overwrite it; give grids/c.yaml a data_dir of its own (data_dir: data/c)"
        )
    )
    assert sha(root / "data/a/pope/records.parquet") == before
    assert "Nothing to be done" in run(["snakemake", "-n", "--configfile", a], root).stdout


def test_two_grids_in_one_checkout_under_dvc(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    a, b = two_grids(root)
    run(["git", "init", "-q"], root)
    run(["vlmgrid", "dvc-pipelines", "--config", a, "--config", b], root)
    first = run(["dvc", "repro", "pipelines/a/dvc.yaml"], root)
    assert stages_run(first.stdout) == {"pipelines/a/dvc.yaml:stamp_sources", "pipelines/a/dvc.yaml:grid"}
    second = run(["dvc", "repro", "pipelines/b/dvc.yaml"], root)
    assert stages_run(second.stdout) == {"pipelines/b/dvc.yaml:stamp_sources", "pipelines/b/dvc.yaml:grid"}
    # B's own data: its benchmarks prepared into data/b, from its own sources
    assert {job for job in jobs_run(second.stdout + second.stderr) if job[0] == "prepare"} == {
        ("prepare", "bench=pope"),
        ("prepare", "bench=mme"),
    }
    for name, seed in (("a", 0), ("b", 1)):
        assert json.loads((root / f"data/{name}/mme/manifest.json").read_text())["source"]["seed"] == seed
    third = run(["dvc", "repro", "pipelines/a/dvc.yaml"], root)
    assert stages_run(third.stdout) == {"pipelines/a/dvc.yaml:stamp_sources"}
    # a grid that would prepare into A's data folder is refused before DVC reads it
    c = write(
        root / "grids/c.yaml",
        {**yaml.safe_load((root / b).read_text()), "data_dir": "data/a", "results_dir": "results/c"},
    )
    result = run(["vlmgrid", "dvc-pipelines", "--config", str(c.relative_to(root))], root, check=False)
    assert (
        result.returncode == 2
        and ("grids/c.yaml and grids/a.yaml both evaluate the benchmark 'pope' in data/a/pope")
        in result.stderr
    )
    assert not (root / "pipelines/c").exists()
