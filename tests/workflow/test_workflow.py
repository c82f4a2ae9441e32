"""The whole default grid through Snakemake (run once per session: conftest.snakemake_run) and a small grid of
its cells (helpers.common.SMALL_GRID) through DVC, whose grid stage runs Snakemake, in temporary copies of the
repo."""

import csv
import hashlib
import io
import json
import re
import shutil
from types import SimpleNamespace

import pytest
import yaml
from helpers.common import (
    REPO,
    SMALL_GRID,
    copy_workflow,
    copy_workspace,
    mtimes,
    run,
    set_random_seed,
    small_grid_config,
    workflow_env,
    write_grid_pipeline,
)
from helpers.dvc import (
    cache_object,
    lock_outputs,
    moto_s3,
    output_files,
    output_mtimes,
    remote_objects,
    s3_remote_commands,
    transfer_counts,
)
from helpers.workflow import GRID_RUN, UP_TO_DATE, changed_stages, job_stats, jobs_run, stages_run

pytestmark = pytest.mark.integration

GRID = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["grid"]
MODELS, BENCHES = GRID["models"], GRID["benchmarks"]
# CLIP and the random baseline cannot write TextVQA's free answers
NOT_APPLICABLE = {("clip-tiny", "textvqa-fixture"), ("random", "textvqa-fixture")}


def test_default_grid_writes_tables_figures_and_scores(snakemake_run):
    root = snakemake_run
    table = (root / "results/tables/main.md").read_text()
    for name in MODELS + BENCHES + ["Average"]:
        assert name in table
    for suffix in ("png", "pdf"):
        assert (root / f"results/figures/main.{suffix}").stat().st_size > 1000
    for model in MODELS:
        for bench in BENCHES:
            score = yaml.safe_load((root / f"results/scores/{model}/{bench}.json").read_text())
            if (model, bench) in NOT_APPLICABLE:
                assert (
                    score["applicable"] is False and "cannot run" in score["reason"] and "value" not in score
                )
                continue
            assert 0 <= score["ci95"][0] <= score["value"] <= score["ci95"][1] <= 100
            # a tiny random model's free answers are often unreadable: kept, and counted as format errors
            assert score["n"] > 0 and 0 <= score["n_valid"] <= score["n"]
    assert "| n/a |" in table
    pope = yaml.safe_load((root / "results/scores/random/pope-fixture.json").read_text())
    assert pope["metric"] == "f1" and set(pope["breakdown"]["split"]) == {"random", "popular", "adversarial"}
    assert (root / "data/flowers102-fixture/manifest.json").is_file()
    assert (root / "results/logs/infer/clip-tiny/pope-fixture.log").is_file()


def test_the_grids_jobs_ran_in_the_fork_server(snakemake_run):
    # Snakemake's onstart started `vlmgrid forkserver`, and every job's command ran there (docs/speed.md): one
    # job line per rule's benchmark file, none refused, and the server stopped with the run.
    log = (snakemake_run / "results/logs/forkserver.log").read_text()
    served = re.findall(r"^\S+ \S+ job \d+ exit 0 in [0-9.]+ s \([0-9.]+ s CPU\): vlmgrid (\S+) ", log, re.M)
    jobs = list((snakemake_run / "results/logs/benchmarks").rglob("*.tsv"))
    assert len(served) == len(jobs) > 100
    assert set(served) == {"prepare", "fetch-model", "infer", "score", "compare", "inspect", "report"}
    assert "refused" not in log and "exit 0" in log.splitlines()[-2]
    assert log.splitlines()[-1].endswith("stopping 0 job(s)")


def test_noop_rerun_does_nothing(snakemake_run):
    result = run(["snakemake", "--cores", "2"], snakemake_run)
    assert "Nothing to be done" in result.stdout + result.stderr


def test_snakemake_report_html(snakemake_copy):
    run(["snakemake", "--cores", "1", "--report", "results/report.html"], snakemake_copy)
    page = (snakemake_copy / "results/report.html").read_text(encoding="utf-8")
    # the first page holds the main table and figure, not only the job graph
    description = page[page.index("var workflow_desc") :]
    description = description[: description.index("</script>")]
    assert "vlmgrid-main" in description and "textvqa-fixture (VQA acc.)" in description
    assert "data:image/png;base64," in description


def test_truncated_predictions_give_one_clear_error_and_lose_nothing(snakemake_run, tmp_path):
    broken = tmp_path / "broken.parquet"
    source = snakemake_run / "results/predictions/random/pope-fixture.parquet"
    broken.write_bytes(source.read_bytes()[:100])
    before = mtimes(snakemake_run, "results/scores/*/*.json")
    result = run(
        [
            "vlmgrid",
            "score",
            "random",
            "pope-fixture",
            "--predictions",
            str(broken),
            "--out",
            str(tmp_path / "s.json"),
        ],
        snakemake_run,
        check=False,
    )
    assert result.returncode == 2
    assert "is unreadable (truncated or not parquet" in result.stderr and "Traceback" not in result.stderr
    assert mtimes(snakemake_run, "results/scores/*/*.json") == before


def test_bad_config_stops_snakemake_with_the_closest_name(snakemake_run, tmp_path):
    config = yaml.safe_load((snakemake_run / "config/config.yaml").read_text())
    config["grid"]["models"] = ["clip-tny"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    result = run(["snakemake", "-n", "--configfile", str(bad)], snakemake_run, check=False)
    assert result.returncode != 0
    assert 'did you mean "clip-tiny"' in result.stdout + result.stderr


@pytest.fixture(scope="module")
def dvc_run(tmp_path_factory):
    """`dvc repro` of SMALL_GRID in a git repo (dvc.yaml reads config/config.yaml: the grid is written there).
    Tests only read it; those that change it work on a copy."""
    root = copy_workflow(tmp_path_factory.mktemp("dvc") / "repo")
    (root / "config/config.yaml").write_text(yaml.safe_dump(small_grid_config(SMALL_GRID), sort_keys=False))
    write_grid_pipeline(root)  # the grid changed: its benchmark lists written again, as docs/dvc.md says
    # the repo's own: results/ is ignored except the metrics and plot data that DVC keeps in git
    shutil.copy2(REPO / ".gitignore", root / ".gitignore")
    run(["git", "init", "-q"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-q", "-m", "grid"], root)
    run(["dvc", "repro"], root)
    return root


def test_dvc_repro_gives_the_same_tables_as_snakemake(dvc_run, small_grid_tables):
    local = small_grid_tables(SMALL_GRID)
    for name in ("main.md", "main.csv", "main.tex", "breakdown.csv"):
        assert (dvc_run / "results/tables" / name).read_text() == (local / name).read_text()


def test_dvc_cells_are_the_snakemake_default_grids_files(dvc_run, snakemake_run):
    for model in SMALL_GRID["models"]:
        for bench in SMALL_GRID["benchmarks"]:
            for cell in (
                f"results/predictions/{model}/{bench}.parquet",
                f"results/scores/{model}/{bench}.json",
            ):
                assert (dvc_run / cell).read_bytes() == (snakemake_run / cell).read_bytes(), cell


def test_dvc_runs_the_default_grid_as_one_snakemake_stage_that_declares_every_folder_it_writes(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    run(["git", "init", "-q"], root)
    # the stamps, then Snakemake over the grid: the default grid shares no model with another, so no fetch
    # stage
    assert run(["dvc", "stage", "list", "--names-only"], root).stdout.split() == ["stamp_sources", "grid"]
    grid = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]["grid"]
    assert grid["cmd"] == "snakemake --configfile config/config.yaml $VLMGRID_SNAKEMAKE_ARGS"
    assert {"config/config.yaml", "${data_dir}/.source-stamps", "config/prompts", "config/reported"} == set(
        grid["deps"]
    )
    # every benchmark's data, every model's weights and every results folder: DVC hashes, pushes and pulls
    # them, and none is deleted before a run (persist), so Snakemake decides what runs again
    outs = {path: settings for out in grid["outs"] for path, settings in out.items()}
    assert set(outs) == {
        *(f"${{data_dir}}/{bench}" for bench in BENCHES),
        *(f"${{data_dir}}/models/{model}" for model in MODELS),
        *(
            f"${{results_dir}}/{folder}"
            for folder in ("predictions", "scores", "comparisons", "tables", "figures", "inspect")
        ),
    }
    assert all(settings == {"persist": True} for settings in outs.values())
    assert grid["metrics"] == [{"${results_dir}/metrics": {"cache": False, "persist": True}}]


def test_dvc_second_repro_is_a_noop(dvc_run):
    assert changed_stages(run(["dvc", "status"], dvc_run).stdout) == UP_TO_DATE


def test_dvc_remakes_a_deleted_cell_alone_with_snakemakes_options_from_the_environment(dvc_run, tmp_path):
    """A deleted cell file: DVC sees the grid stage's output changed and runs it, and Snakemake runs the one
    missing file's job and what reads it, nothing else. VLMGRID_SNAKEMAKE_ARGS reaches Snakemake's command
    line (here: other cores than the profile's "all")."""
    from snakemake.utils import available_cpu_count

    root = copy_workspace(dvc_run, tmp_path / "repo")
    cell = "results/predictions/random/pope-fixture.parquet"
    before = mtimes(root, "results/predictions/*/*.parquet")
    (root / cell).unlink()
    assert changed_stages(run(["dvc", "status"], root).stdout) == UP_TO_DATE | {"grid"}
    cores = 1 if available_cpu_count() > 1 else 2
    result = run(["dvc", "repro"], root, env=workflow_env({"VLMGRID_SNAKEMAKE_ARGS": f"--cores {cores}"}))
    output = result.stdout + result.stderr
    assert stages_run(result.stdout) == GRID_RUN
    assert re.findall(r"^Provided cores: (\d+)", output, re.M) == [str(cores)]
    assert [job for job in jobs_run(output) if job[0] in ("prepare", "fetch_model", "infer", "score")] == [
        ("infer", "model=random, bench=pope-fixture"),
        ("score", "model=random, bench=pope-fixture"),
    ]
    after = mtimes(root, "results/predictions/*/*.parquet")
    assert {p for p in after if after[p] != before.get(p)} == {cell}
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE


def test_dvc_model_change_reruns_only_its_cells(dvc_run, tmp_path):
    root = copy_workspace(dvc_run, tmp_path / "repo")
    set_random_seed(root, 1)
    # the grid stage depends on the config file: `dvc status` sees the edit at once, and once the stamp stage
    # has run, the model's settings in the grid's settings stamp (its params)
    status = run(["dvc", "status"], root).stdout
    assert (
        changed_stages(status) == UP_TO_DATE | {"grid"} and "modified:           config/config.yaml" in status
    )
    run(["dvc", "repro", "dvc.yaml:stamp_sources"], root)
    status = run(["dvc", "status"], root).stdout
    assert re.search(r"grid/settings.json:\n\t+modified: +models\n", status), status

    before = mtimes(root, "results/predictions/*/*.parquet")
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == GRID_RUN
    # Snakemake reruns that model's cells, and what reads them, nothing else
    assert job_stats(result.stdout + result.stderr).get("infer") == len(SMALL_GRID["benchmarks"])
    jobs = jobs_run(result.stdout + result.stderr)
    assert {wildcards for rule, wildcards in jobs if rule in ("infer", "score")} == {
        f"model=random, bench={bench}" for bench in SMALL_GRID["benchmarks"]
    }
    assert not [job for job in jobs if job[0] in ("prepare", "fetch_model")]
    after = mtimes(root, "results/predictions/*/*.parquet")
    assert {p for p in after if after[p] != before[p]} == {
        f"results/predictions/random/{b}.parquet" for b in SMALL_GRID["benchmarks"]
    }
    assert stages_run(run(["dvc", "repro"], root).stdout) == UP_TO_DATE
    assert mtimes(root, "results/predictions/*/*.parquet") == after


def test_dvc_one_benchmarks_new_data_answers_only_its_cells(dvc_run, tmp_path):
    """The grid's files persist: one benchmark's new data prepares it again and answers only its cells
    (Snakemake finds the other benchmarks' cells up to date)."""
    root = copy_workspace(dvc_run, tmp_path / "repo")
    config = yaml.safe_load((root / "config/config.yaml").read_text())
    bench = SMALL_GRID["benchmarks"][0]
    config["benchmarks"][bench]["source"]["seed"] = 1
    (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    before = mtimes(root, "results/predictions/*/*.parquet")
    result = run(["dvc", "repro"], root)
    assert stages_run(result.stdout) == GRID_RUN
    jobs = jobs_run(result.stdout + result.stderr)
    assert {job for job in jobs if job[0] == "prepare"} == {("prepare", f"bench={bench}")}
    assert {wildcards for rule, wildcards in jobs if rule == "infer"} <= {
        f"model={model}, bench={bench}" for model in SMALL_GRID["models"]
    }
    after = mtimes(root, "results/predictions/*/*.parquet")
    changed = {p for p in after if after[p] != before[p]}
    # a cell the model cannot run records only that, whatever the data: it may be left as it is
    assert f"results/predictions/random/{bench}.parquet" in changed
    assert all(p.endswith(f"/{bench}.parquet") for p in changed), changed


def test_dvc_metrics_plots_and_an_experiment_of_one_model(dvc_run, tmp_path):
    root = copy_workspace(dvc_run, tmp_path / "repo")
    pope = json.loads((root / "results/scores/random/pope-fixture.json").read_text())
    lines = run(["dvc", "metrics", "show"], root).stdout.splitlines()
    header = lines[0].split()  # DVC sorts the columns by name
    row = dict(
        zip(header, next(line.split() for line in lines if line.startswith("results/metrics/pope-fixture")))
    )
    assert row["metric"] == "f1" and float(row["random"]) == round(pope["value"], 4)
    metrics = json.loads(run(["dvc", "metrics", "show", "--json"], root).stdout)[""]["data"]
    assert metrics["results/metrics/textvqa-fixture.json"]["data"] == {
        "metric": "vqa_accuracy",
        "clip-tiny": "n/a",
        "random": "n/a",
    }

    run(["git", "add", "dvc.lock", "results/metrics"], root)
    run(["git", "commit", "-q", "-m", "results"], root)
    before = mtimes(root, "results/predictions/*/*.parquet")
    result = run(["dvc", "exp", "run", "-n", "seed-1", "-S", "config/config.yaml:models.random.seed=1"], root)
    assert stages_run(result.stdout) == GRID_RUN
    after = mtimes(root, "results/predictions/*/*.parquet")  # the experiment's files, left in the workspace
    assert {p for p in after if after[p] != before[p]} == {
        f"results/predictions/random/{b}.parquet" for b in SMALL_GRID["benchmarks"]
    }
    table = list(
        csv.DictReader(io.StringIO(run(["dvc", "exp", "show", "--csv", "--only-changed"], root).stdout))
    )
    experiment = next(row for row in table if row["Experiment"] == "seed-1")
    assert experiment["models.random.seed"] == "1"
    assert "models.clip-tiny.batch_size" not in experiment  # unchanged: left out
    # docs/dvc.md's command: the params and metrics an experiment changed, without the dependencies' hashes
    shown = run(["dvc", "exp", "show", "--csv", "--only-changed", "--drop", "^[^:]*/[^:]*$"], root).stdout
    columns = next(csv.reader(io.StringIO(shown)))
    assert {"models.random.seed", "results/metrics/pope-fixture.json:random"} <= set(columns)
    assert not [column for column in columns if "/" in column and ":" not in column], columns
    new = json.loads((root / "results/scores/random/pope-fixture.json").read_text())
    assert (
        float(experiment["results/metrics/pope-fixture.json:random"])
        == round(new["value"], 4)
        != round(pope["value"], 4)
    )

    diff = run(["dvc", "metrics", "diff"], root).stdout
    assert "results/metrics/pope-fixture.json" in diff and "clip-tiny" not in diff


def test_dvc_metrics_show_of_the_default_grid_is_a_table_of_benchmarks_by_models(snakemake_copy):
    root = snakemake_copy
    run(["git", "init", "-q"], root)
    shown = run(["dvc", "metrics", "show"], root).stdout
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 120, max(len(line) for line in lines)
    header = lines[0].split()
    # DVC sorts the columns by name; every benchmark of the default grid but DANCE is a fixture's partial copy
    assert header == ["Path", *sorted(["metric", "items", "published", *MODELS])]
    assert [line.split()[0] for line in lines[1:]] == sorted(
        f"results/metrics/{name}.json" for name in [*BENCHES, "Average"]
    )
    textvqa = dict(zip(header, next(line.split() for line in lines if "/textvqa-fixture.json" in line)))
    assert (
        textvqa["metric"] == "vqa_accuracy" and textvqa["clip-tiny"] == "n/a"
    )  # CLIP cannot answer it: no 0


def test_dvc_plots_show_draws_the_figures_with_no_script_from_the_network(snakemake_copy):
    root = snakemake_copy
    run(["git", "init", "-q"], root)
    run(["dvc", "plots", "show"], root)
    page = (root / "dvc_plots/index.html").read_text()
    assert not re.search(r"<script[^>]*src=[\"']?(https?:)?//", page) and "cdn" not in page.lower()
    images = re.findall(r"<img [^>]*src=\"([^\"]+)\"", page)
    assert len(images) == 4  # main, reported, and the default grid's two paper figures (Kaleidoscope, CVQA)
    for source in images:
        assert not source.startswith(("http:", "https:", "//"))
        shown = (root / "dvc_plots" / source) if not source.startswith("data:") else None
        assert shown is None or shown.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", source


def test_config_overrides_are_refused(snakemake_run):
    result = run(["snakemake", "-n", "--config", "title=x"], snakemake_run, check=False)
    assert result.returncode != 0 and "--config overrides are not supported" in result.stdout + result.stderr


def test_one_model_change_reruns_only_its_cells(snakemake_copy):
    # The small grid in the default grid's workspace: its cells are done there, and a model change reruns
    # exactly that model's cells of the grid
    root = snakemake_copy
    (root / "config/config.yaml").write_text(yaml.safe_dump(small_grid_config(SMALL_GRID), sort_keys=False))
    before = mtimes(root, "results/predictions/*/*.parquet")
    set_random_seed(root, 1)
    run(["snakemake", "--cores", "2"], root)
    after = mtimes(root, "results/predictions/*/*.parquet")
    changed = {path for path in after if after[path] != before[path]}
    assert changed == {f"results/predictions/random/{bench}.parquet" for bench in SMALL_GRID["benchmarks"]}


def test_a_kinds_setting_reruns_only_the_cells_of_that_kind(snakemake_copy):
    # A model's `kinds` entry (what a recipe writes per benchmark kind) is part of that kind's cells' settings
    # only: a system text for POPE reruns the model's POPE cell and nothing else
    root = snakemake_copy
    config = yaml.safe_load((root / "config/config.yaml").read_text())
    config["models"]["llava-tiny"]["kinds"] = {"pope": {"system": "Answer briefly."}}
    (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    dry = run(["snakemake", "-n", "--quiet", "rules"], root).stdout
    counts = [line.split() for line in dry.splitlines() if line.strip()]
    jobs = {words[0]: words[-1] for words in counts if words[-1].isdigit()}
    assert jobs.get("infer") == "1", dry
    before = mtimes(root, "results/predictions/*/*.parquet")
    run(["snakemake", "--cores", "2"], root)
    after = mtimes(root, "results/predictions/*/*.parquet")
    changed = {path for path in after if after[path] != before[path]}
    assert changed == {"results/predictions/llava-tiny/pope-fixture.parquet"}


def test_a_setting_of_how_answers_are_computed_alone_reruns_nothing(snakemake_copy):
    # clip-tiny's decoding workers and pixel cache give the pixels of the images opened one by one: changing
    # them reruns no cell; its batch size reruns each of its cells
    root = snakemake_copy
    config = yaml.safe_load((root / "config/config.yaml").read_text())
    config["models"]["clip-tiny"].update(decode_workers=0, pixel_cache=False)
    (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    dry = run(["snakemake", "-n"], root).stdout
    assert "Nothing to be done" in dry, dry
    config["models"]["clip-tiny"]["batch_size"] = 7
    (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    dry = run(["snakemake", "-n", "--quiet", "rules"], root).stdout
    counts = [line.split() for line in dry.splitlines() if line.strip()]
    cells = str(len(config["grid"]["benchmarks"]))
    assert {words[0]: words[-1] for words in counts if words[-1].isdigit()}.get("infer") == cells, dry


@pytest.fixture(scope="module")
def dvc_clone(dvc_run, tmp_path_factory):
    """A copy of the DVC grid with its dvc.lock committed, pushed to a temporary folder remote, pulled into a
    fresh clone."""
    source = copy_workspace(dvc_run, tmp_path_factory.mktemp("dvc-source") / "repo")
    run(["git", "add", "-A"], source)
    run(["git", "commit", "-q", "--allow-empty", "-m", "grid results"], source)
    store = tmp_path_factory.mktemp("dvc-store")
    # --local: this checkout only, so the committed default store (next to the repo) is never written
    run(["dvc", "remote", "modify", "--local", "local", "url", str(store)], source)
    pushed = run(["dvc", "push"], source).stdout
    clone = tmp_path_factory.mktemp("dvc-clone") / "repo"
    run(["git", "clone", "-q", str(source), str(clone)], clone.parent)
    run(["dvc", "remote", "modify", "--local", "local", "url", str(store)], clone)
    pulled = run(["dvc", "pull"], clone).stdout
    return SimpleNamespace(source=source, root=clone, store=store, pushed=pushed, pulled=pulled)


def test_dvc_push_then_pull_into_a_fresh_clone_leaves_nothing_to_do(dvc_clone):
    clone = dvc_clone.root
    objects = remote_objects(dvc_clone.store)
    assert objects and transfer_counts(dvc_clone.pushed) == {"pushed": len(objects)}
    assert transfer_counts(dvc_clone.pulled) == {"fetched": len(objects), "added": len(output_files(clone))}
    for root in (dvc_clone.source, clone):
        assert not (root.parent / "vlmgrid-dvc-store").exists()

    assert changed_stages(run(["dvc", "status"], clone).stdout) == UP_TO_DATE
    assert "in sync" in run(["dvc", "status", "--cloud"], clone).stdout
    before = output_mtimes(clone)
    result = run(["dvc", "repro"], clone)
    assert stages_run(result.stdout) == UP_TO_DATE and "didn't change, skipping" in result.stdout
    assert output_mtimes(clone) == before


def test_dvc_pull_brings_back_only_the_deleted_cell(dvc_clone):
    clone = dvc_clone.root
    cell = "results/predictions/random/pope-fixture.parquet"
    assert "results/predictions" in lock_outputs(clone)  # the grid stage's folder: DVC caches each file in it
    md5 = hashlib.md5((clone / cell).read_bytes()).hexdigest()
    before = output_mtimes(clone)
    (clone / cell).unlink()
    cache_object(clone, md5).unlink()  # so that it comes from the remote, not the clone's own cache

    result = run(["dvc", "pull"], clone)
    assert re.findall(r"^[AM]\s+(\S+)$", result.stdout, re.M) == ["results/predictions/"]
    assert transfer_counts(result.stdout) == {"fetched": 1, "added": 1}
    after = output_mtimes(clone)
    assert {path for path in after if after[path] != before[path]} == {cell}
    assert hashlib.md5((clone / cell).read_bytes()).hexdigest() == md5
    assert changed_stages(run(["dvc", "status"], clone).stdout) == UP_TO_DATE


def test_dvc_push_and_pull_through_an_s3_remote(dvc_clone, tmp_path):
    pytest.importorskip("dvc_s3", reason="the S3 remote needs the s3 extra: pip install -e '.[s3]'")
    pytest.importorskip("moto.server", reason="a local S3 server needs moto: pip install 'moto[server]'")
    second = tmp_path / "repo"
    run(["git", "clone", "-q", str(dvc_clone.root), str(second)], tmp_path)
    with moto_s3("vlmgrid-test") as endpoint:
        for root in (dvc_clone.root, second):
            for command in s3_remote_commands("s3://vlmgrid-test/vlmgrid", endpoint):
                run(command, root)
        pushed = run(["dvc", "push", "-r", "s3"], dvc_clone.root).stdout
        pulled = run(["dvc", "pull", "-r", "s3"], second).stdout
    objects = len(remote_objects(dvc_clone.store))
    assert transfer_counts(pushed) == {"pushed": objects}
    assert transfer_counts(pulled) == {"fetched": objects, "added": len(output_files(second))}
    assert changed_stages(run(["dvc", "status"], second).stdout) == UP_TO_DATE
