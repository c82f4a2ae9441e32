"""perf/grid.py: Snakemake's job table and the jobs' benchmark files read into per-rule figures, and the table
of a run, on hand-made logs and files (no grid runs here)."""

import importlib.util
import json
import sys

import pytest
from helpers.common import REPO

_spec = importlib.util.spec_from_file_location("grid", REPO / "perf" / "grid.py")
grid = importlib.util.module_from_spec(_spec)
sys.modules["grid"] = grid
_spec.loader.exec_module(grid)

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"

# Snakemake 9's log of a run: its job table, as printed before the first job
LOG = """Building DAG of jobs...
Using shell: /usr/bin/bash
Provided cores: 2
Job stats:
job            count
-----------  -------
fetch_model        3
prepare           14
infer             42
score             42
all                1
total            102

Select jobs to execute...
Execute 2 jobs...
"""


def write_tsv(path, seconds, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        HEADER + f"{seconds}\t0:00:01\t120.5\t900.1\t80.2\t90.3\t0.00\t0.01\t40.0\t{cpu}\n", encoding="utf-8"
    )


def test_the_job_counts_are_read_from_snakemakes_job_table():
    assert grid.job_counts(LOG) == {
        "fetch_model": 3,
        "prepare": 14,
        "infer": 42,
        "score": 42,
        "all": 1,
        "total": 102,
    }
    assert (
        grid.job_counts("Building DAG of jobs...\nNothing to be done (all requested files are present).\n")
        == {}
    )


def test_a_benchmark_file_gives_its_wall_and_cpu_seconds_and_none_for_a_job_without_a_sample(tmp_path):
    write_tsv(tmp_path / "a.tsv", "19.90", "8.48")
    write_tsv(tmp_path / "b.tsv", "0.61", "NA")
    assert grid.read_benchmark(tmp_path / "a.tsv") == (19.90, 8.48)
    assert grid.read_benchmark(tmp_path / "b.tsv") == (0.61, None)


def test_each_rule_sums_and_maxes_its_jobs_and_counts_those_without_a_cpu_sample(tmp_path):
    bench = tmp_path / "benchmarks"
    write_tsv(bench / "infer" / "clip" / "pope.tsv", "10.0", "7.5")
    write_tsv(bench / "infer" / "clip" / "mme.tsv", "4.0", "3.0")
    write_tsv(bench / "infer" / "llava" / "dance" / "1-of-2.tsv", "6.0", "5.5")  # a shard is infer's
    write_tsv(bench / "score" / "clip" / "pope.tsv", "1.5", "1.25")
    write_tsv(bench / "score" / "clip" / "mme.tsv", "0.5", "NA")
    write_tsv(bench / "report.tsv", "3.0", "2.0")  # a rule of one job
    rules = grid.rule_times(bench)
    assert list(rules) == ["infer", "report", "score"]  # the costliest first
    assert rules["infer"] == {
        "jobs": 3,
        "wall_sum": 20.0,
        "wall_max": 10.0,
        "cpu_sum": 16.0,
        "cpu_max": 7.5,
        "cpu_unsampled": 0,
    }
    assert rules["score"] == {
        "jobs": 2,
        "wall_sum": 2.0,
        "wall_max": 1.5,
        "cpu_sum": 1.25,
        "cpu_max": 1.25,
        "cpu_unsampled": 1,
    }
    assert rules["report"] == {
        "jobs": 1,
        "wall_sum": 3.0,
        "wall_max": 3.0,
        "cpu_sum": 2.0,
        "cpu_max": 2.0,
        "cpu_unsampled": 0,
    }


def test_the_summary_is_the_median_run_and_the_table_shows_it():
    def run(wall, cpu, score_wall):
        return {
            "wall_s": wall,
            "cpu_s": cpu,
            "jobs": {"score": 2, "all": 1, "total": 3},
            "rules": {
                "score": {
                    "jobs": 2,
                    "wall_sum": score_wall,
                    "wall_max": score_wall / 2,
                    "cpu_sum": 1.0,
                    "cpu_max": 0.5,
                    "cpu_unsampled": 0,
                }
            },
        }

    figures = grid.summary(
        [run(130.0, 200.0, 9.0), run(110.0, 180.0, 7.0), run(120.0, 190.0, 8.0)],
        {"wall_s": 2.5, "cpu_s": 2.25},
    )
    assert figures["cold_wall_median"] == 120.0 and figures["cold_cpu_median"] == 190.0
    assert figures["rules"]["score"]["wall_sum"] == 8.0  # the per-rule figures of the 120 s run
    assert figures["noop_wall"] == 2.5 and figures["runs"] == 3
    # of two runs, the faster one's rules (the lower middle)
    assert (
        grid.summary([run(130.0, 200.0, 9.0), run(110.0, 180.0, 7.0)], {"wall_s": 2.5, "cpu_s": 2.25})[
            "rules"
        ]["score"]["wall_sum"]
        == 7.0
    )

    meta = {
        "date": "2026-12-03 12:00 UTC",
        "cpus": 2,
        "libraries": "snakemake 9",
        "command": "python perf/grid.py",
        "notes": ["load 1.0"],
    }
    text = grid.render_markdown(meta, figures)
    assert "| cold, median of 3 (each: 130.0, 110.0, 120.0 s) | 120.0 | 190.0 |" in text
    assert "| nothing to do | 2.5 | 2.2 |" in text
    assert "Jobs: 3 (score 2, all 1)." in text
    assert "| score | 2 | 8.0 | 4.0 | 1.0 | 0.5 | 0 |" in text
    assert text.endswith("- load 1.0\n")


# The fork server's log of a run (vlmgrid.forkserver): a start line and an end line per job, and its own lines
SERVER_LOG = """2026-12-03 15:17:39 listening on /tmp/vlmgrid-forkserver-vb57fxex/socket; \
importing the jobs' modules
2026-12-03 15:17:47 ready: 3557 modules imported
2026-12-03 15:17:47 job 4137 started: vlmgrid prepare flowers102-fixture --config config/config.yaml
2026-12-03 15:17:47 job 4137 exit 0 in 0.70 s (0.32 s CPU): vlmgrid prepare flowers102-fixture --config c.yaml
2026-12-03 15:17:48 job 4205 exit 0 in 0.40 s (0.18 s CPU): vlmgrid prepare food101-fixture \
--config config/config.yaml
2026-12-03 15:18:51 job 12287 exit 0 in 5.09 s (1.49 s CPU): vlmgrid infer llava-tiny mme-fixture --threads 1
2026-12-03 15:18:52 job 12290 exit 2 in 0.25 s (0.25 s CPU): vlmgrid fetch-model clip-tiny \
--config config/config.yaml
2026-12-03 15:18:53 refused (HF_HOME differs): vlmgrid score random mme-fixture --config config/config.yaml
2026-12-03 15:20:03 signal 15: stopping 0 job(s)
"""


def test_the_fork_servers_log_gives_each_rules_served_jobs_and_their_exact_cpu():
    served = grid.served_times(SERVER_LOG)
    assert list(served) == [
        "infer",
        "prepare",
        "fetch_model",
    ]  # the costliest first; a refused job ran elsewhere
    assert served["prepare"] == {"jobs": 2, "wall_sum": 1.1, "cpu_sum": 0.5, "cpu_max": 0.32}
    assert served["infer"] == {"jobs": 1, "wall_sum": 5.09, "cpu_sum": 1.49, "cpu_max": 1.49}
    assert served["fetch_model"]["jobs"] == 1
    meta = {"date": "d", "cpus": 2, "libraries": "l", "command": "c"}
    figures = {
        "runs": 1,
        "cold_walls": [100.0],
        "cold_wall_median": 100.0,
        "cold_cpu_median": 90.0,
        "noop_wall": 2.0,
        "noop_cpu": 1.0,
        "jobs": {"total": 4},
        "rules": {},
        "served": served,
    }
    text = grid.render_markdown(meta, figures)
    assert "| prepare | 2 | 1.1 | 0.5 | 0.3 |" in text and "| infer | 1 | 5.1 | 1.5 | 1.5 |" in text


def test_fewer_than_one_run_is_refused():
    with pytest.raises(SystemExit):
        grid.main(["--runs", "0"])


def test_a_measurement_runs_each_cold_run_in_a_fresh_copy_then_a_noop_and_writes_its_results(
    tmp_path, monkeypatch
):
    """The measurement's course with Snakemake replaced by a stand-in that writes one job's benchmark file."""
    calls = []

    def fake_snakemake(args, cwd):
        assert (cwd / "Snakefile").is_file() and (cwd / "config" / "config.yaml").is_file()  # a workflow copy
        calls.append(cwd)
        fresh = not (cwd / grid.BENCHMARKS_DIR).exists()
        if fresh:
            write_tsv(cwd / grid.BENCHMARKS_DIR / "score" / "m" / "b.tsv", "2.0", "1.5")
        return grid.Run(
            wall_s=100.0 + len(calls) if fresh else 2.0,
            cpu_s=150.0 if fresh else 1.0,
            stderr=LOG if fresh else "Nothing to be done",
        )

    def fake_dvc_runs(work, cores):
        calls.append(work / "dvc")
        return dict(DVC_FIGURES), work / "dvc"

    monkeypatch.setattr(grid, "snakemake", fake_snakemake)
    monkeypatch.setattr(grid, "dvc_runs", fake_dvc_runs)
    monkeypatch.setattr(grid.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "work"))
    out = tmp_path / "results" / "grid.md"
    assert grid.main(["--runs", "2", "--out", str(out)]) == 0
    # two fresh copies, then the no-op, then DVC in a copy of its own
    assert [path.name for path in calls] == ["grid-1", "grid-2", "grid-2", "dvc"]
    assert not (tmp_path / "work").exists()  # the copies are removed
    saved = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["figures"]["cold_walls"] == [101.0, 102.0] and saved["figures"]["noop_wall"] == 2.0
    assert saved["figures"]["jobs"]["total"] == 102
    assert saved["figures"]["rules"]["score"]["cpu_sum"] == 1.5
    assert "| score | 1 | 2.0 | 2.0 | 1.5 | 1.5 | 0 |" in out.read_text(encoding="utf-8")
    assert saved["figures"]["dvc"]["wall_s"] == 204.0
    assert "| DVC cold (2 stages, 131 jobs) | 204.0 | 180.0 | 2.01 wall, 1.20 CPU |" in out.read_text(
        encoding="utf-8"
    )  # of 101.5 s
    assert saved["figures"]["dvc"]["differing_tables"] == []


# What dvc_runs gives: the cold run (the Snakemake run inside it and its jobs are its children), and the no-op
DVC_FIGURES = {
    "wall_s": 204.0,
    "cpu_s": 180.0,
    "stages": 2,
    "jobs": {"infer": 42, "total": 131},
    "noop_wall": 2.5,
    "noop_cpu": 2.25,
    "noop_stages": 1,
}


def test_the_dvc_rows_give_both_doors_times_their_ratio_and_whether_the_tables_are_the_same_bytes():
    figures = {
        "cold_wall_median": 100.0,
        "cold_cpu_median": 150.0,
        "dvc": {**DVC_FIGURES, "differing_tables": []},
    }
    text = "\n".join(grid.render_dvc(figures))
    assert "| Snakemake cold, median | 100.0 | 150.0 | |" in text
    assert "| DVC cold (2 stages, 131 jobs) | 204.0 | 180.0 | 2.04 wall, 1.20 CPU |" in text
    assert "| DVC, nothing to do (1 stage run) | 2.5 | 2.2 | |" in text
    assert "Tables: every file of results/tables/ byte-identical between the two doors." in text
    figures["dvc"]["differing_tables"] = ["main.md"]
    assert "Tables: 1 file(s) of results/tables/ differ: main.md." in "\n".join(grid.render_dvc(figures))


def test_the_tables_that_differ_between_two_copies_are_named(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for root, text in ((first, "x"), (second, "y")):
        (root / "results" / "tables").mkdir(parents=True)
        (root / "results" / "tables" / "same.md").write_text("same")
        (root / "results" / "tables" / "main.md").write_text(text)
    (first / "results" / "tables" / "only-here.csv").write_text("1")
    assert grid.differing_tables(first, second) == ["main.md", "only-here.csv"]


def test_dvcs_log_gives_the_stages_it_ran():
    log = (
        "Running stage 'stamp_sources':\n> vlmgrid stamp-sources\nRunning stage 'prepare@pope-fixture':\n"
        "Stage 'fetch_model@random' didn't change, skipping\n"
    )
    assert grid.stages_run(log) == 2


ORPHAN = """
import subprocess, sys
burn = "import time\\nstart = time.process_time()\\nwhile time.process_time() - start < 0.4: pass"
subprocess.Popen([sys.executable, "-c", burn])  # left running: its parent exits at once
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
def test_a_measured_command_counts_the_cpu_of_the_processes_it_leaves_running(tmp_path):
    # as vlmgrid leaves the DataLoader workers' fork server, with its workers' CPU time, when it exits
    run = grid.timed([sys.executable, "-c", ORPHAN], tmp_path, dict(grid.os.environ))
    assert run.cpu_s >= 0.4
    assert sys.modules["gridrun"]._children() == []  # waited for: no zombie left
