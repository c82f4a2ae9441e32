"""The score stage on a benchmark whose labels are hidden: no number, one submission file per setting."""

import copy
import json

import pandas as pd
import pytest
import yaml

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.metrics import METRICS
from vlmgrid.metrics import cvqa as cvqa_metric
from vlmgrid.metrics.base import LabelsHidden, Metric
from vlmgrid.report import build_report
from vlmgrid.report.outputs import report_files
from vlmgrid.stages.score import _write_submission

SETTINGS = ["loc-en", "loc-local", "noloc-en", "noloc-local"]


def test_labels_hidden_lives_in_the_metric_base():
    assert cvqa_metric.LabelsHidden is LabelsHidden
    assert Metric().submission(pd.DataFrame(), pd.DataFrame()) is None
    assert METRICS.get("accuracy").submission(pd.DataFrame(), pd.DataFrame()) is None


def test_a_metric_without_a_submission_lets_hidden_labels_fail(tmp_path):
    hidden = LabelsHidden("the labels are hidden")
    with pytest.raises(LabelsHidden, match="the labels are hidden"):
        _write_submission(Metric(), pd.DataFrame(), pd.DataFrame(), tmp_path / "bench.json", hidden)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def hidden_grid(small_config, tmp_path):
    data = copy.deepcopy(small_config)
    data["benchmarks"] = {
        "cvqa-hidden": {"kind": "cvqa", "source": {"type": "fixture", "size": 2, "hidden_labels": True}},
        "pope-fixture": data["benchmarks"]["pope-fixture"],
    }
    data["grid"] = {"models": ["random"], "benchmarks": ["cvqa-hidden", "pope-fixture"]}
    path = tmp_path / "hidden.yaml"
    path.write_text(yaml.safe_dump(data))
    config = ["--config", str(path)]
    for bench in data["grid"]["benchmarks"]:
        assert main(["prepare", bench, *config]) == 0
        assert main(["infer", "random", bench, "--no-progress", *config]) == 0
    return data, config


def test_score_writes_the_submission_files_and_a_score_without_numbers(hidden_grid, capsys):
    data, config = hidden_grid
    capsys.readouterr()
    assert main(["score", "random", "cvqa-hidden", *config]) == 0
    said = capsys.readouterr().err.strip()
    out = paths.score_path(data["results_dir"], "random", "cvqa-hidden")
    assert said.count("\n") == 0 and "labels are hidden" in said and str(out.parent) in said
    score = json.loads(out.read_text())
    assert score["labels_hidden"] is True and score["applicable"] is True
    assert score["n"] == 14 and score["strategy"] == "score_options" and score["metric"] == "accuracy"
    assert not {"value", "ci95", "bootstrap", "metrics", "breakdown"} & set(score)
    assert score["submission"] == {s: f"cvqa-hidden.submission-{s}.csv" for s in SETTINGS}
    for name in score["submission"].values():
        table = pd.read_csv(out.parent / name, keep_default_na=False, dtype=str)
        assert list(table.columns) == ["ID", "prediction"] and len(table) == 14
        assert set(table["prediction"]) <= set("ABCD")
    # the files are complete: no temporary files are left beside them
    assert sorted(p.name for p in out.parent.iterdir()) == sorted([out.name, *score["submission"].values()])


def test_the_report_shows_a_hidden_cell(hidden_grid):
    data, config = hidden_grid
    for bench in data["grid"]["benchmarks"]:
        assert main(["score", "random", bench, *config]) == 0
    results = data["results_dir"]
    files = {("random", b): paths.score_path(results, "random", b) for b in data["grid"]["benchmarks"]}
    kinds = {"cvqa-hidden": "cvqa", "pope-fixture": "pope"}
    written = build_report(
        files, ["random"], list(kinds), paths.tables_dir(results), paths.figures_dir(results), kinds=kinds
    )
    assert written == [path for path, _ in report_files(results, kinds)]
    main_md = (paths.tables_dir(results) / "main.md").read_text()
    assert "| random | hidden | " in main_md and main_md.count("hidden") >= 3
    assert "hidden: the benchmark's labels are not public; the submission file was written" in main_md
    cvqa_md = (paths.tables_dir(results) / "cvqa.md").read_text()
    assert "| random | hidden | hidden | hidden | hidden | hidden |" in cvqa_md
