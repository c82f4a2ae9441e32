"""DVC's metrics and plots files (vlmgrid.report.dvc_files) from hand-made score files: the headline, CI, n and
format error rate of each cell, and no number at all for a cell without one (n/a, hidden, failed, missing)."""

import csv
import json
from pathlib import Path

from vlmgrid.report import build_report
from vlmgrid.report.dvc_files import headline_rows, metrics
from vlmgrid.report.grid import load_grid

MODELS = ["clip", "vlm"]
BENCHES = ["pope-fixture", "sqa", "cvqa"]


def scored(model: str, bench: str, metric: str, value: float, ci: list, draws: list, error_rate: float = 2.0) -> dict:
    return {"model": model, "benchmark": bench, "metric": metric, "value": value, "ci95": ci, "n": 40,
            "n_valid": 38, "format_error_rate": error_rate, "metrics": {metric: {"value": value, "ci95": ci}},
            "breakdown": {}, "variants": {}, "bootstrap": {"samples": 4, "seed": 0, "draws": draws}}


def score_files(root: Path) -> dict:
    """clip: pope scored, sqa n/a, cvqa hidden; vlm: pope scored, sqa failed (every row an error), cvqa missing."""
    objects = {
        ("clip", "pope-fixture"): scored("clip", "pope-fixture", "f1", 61.23456, [50.0, 72.5], [50, 60, 65, 70]),
        ("clip", "sqa"): {"model": "clip", "benchmark": "sqa", "applicable": False, "metric": "accuracy",
                          "reason": "clip cannot run sqa"},
        ("clip", "cvqa"): {"model": "clip", "benchmark": "cvqa", "labels_hidden": True, "metric": "accuracy",
                           "n": 12, "submission": {"loc-en": "cvqa.submission-loc-en.csv"}},
        ("vlm", "pope-fixture"): scored("vlm", "pope-fixture", "f1", 40.0, [30.0, 50.0], [30, 40, 45, 45], 20.0),
        ("vlm", "sqa"): scored("vlm", "sqa", "accuracy", 0.0, [0.0, 0.0], [0, 0, 0, 0], 100.0),
    }
    files = {}
    for (model, bench), obj in objects.items():
        path = root / "scores" / model / f"{bench}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
        files[(model, bench)] = path
    files[("vlm", "cvqa")] = root / "scores" / "vlm" / "cvqa.json"  # never written
    return files


def grid(tmp_path):
    return load_grid(score_files(tmp_path), MODELS, BENCHES, allow_missing=True)


def test_metrics_give_each_cell_its_headline_or_its_status_never_a_zero(tmp_path):
    assert metrics(grid(tmp_path)) == {
        "pope-fixture": {
            "clip": {"f1": 61.2346, "ci_low": 50.0, "ci_high": 72.5, "n": 40, "format_error_rate": 2.0},
            # a flagged cell keeps its number, with its error rate beside it
            "vlm": {"f1": 40.0, "ci_low": 30.0, "ci_high": 50.0, "n": 40, "format_error_rate": 20.0},
        },
        "sqa": {"clip": {"status": "n/a"}, "vlm": {"status": "failed"}},
        "cvqa": {"clip": {"status": "hidden"}, "vlm": {"status": "missing"}},
        # no model has a number on every benchmark: no average
    }


def test_average_is_the_mean_of_the_headlines_with_the_ci_of_the_averaged_draws(tmp_path):
    files = score_files(tmp_path)
    both = load_grid(files, MODELS, ["pope-fixture"])
    # clip alone: its pope value; draws [50, 60, 65, 70] -> 2.5th percentile 50 + 0.075 * 10 = 50.75,
    # 97.5th 65 + 0.925 * 5 = 69.625
    assert metrics(both)["Average"] == {
        "clip": {"mean": 61.2346, "ci_low": 50.75, "ci_high": 69.625},
        "vlm": {"mean": 40.0, "ci_low": 30.75, "ci_high": 45.0},
    }


def test_plot_rows_hold_only_cells_with_a_number(tmp_path):
    assert headline_rows(grid(tmp_path)) == [
        {"model": "clip", "benchmark": "pope-fixture", "cell": "pope-fixture / clip", "metric": "f1",
         "value": 61.2346, "ci_low": 50.0, "ci_high": 72.5},
        {"model": "vlm", "benchmark": "pope-fixture", "cell": "pope-fixture / vlm", "metric": "f1",
         "value": 40.0, "ci_low": 30.0, "ci_high": 50.0},
    ]


def test_the_report_writes_both_files_beside_its_tables(tmp_path):
    written = build_report(score_files(tmp_path), MODELS, BENCHES, tmp_path / "tables", tmp_path / "figures",
                           allow_missing=True)
    assert written[-2:] == [tmp_path / "metrics.json", tmp_path / "plots" / "headline.csv"]
    data = json.loads((tmp_path / "metrics.json").read_text())
    assert data["sqa"] == {"clip": {"status": "n/a"}, "vlm": {"status": "failed"}}
    with open(tmp_path / "plots" / "headline.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["cell"], row["value"], row["ci_low"]) for row in rows] == [("pope-fixture / clip", "61.2346", "50.0"),
                                                                          ("pope-fixture / vlm", "40.0", "30.0")]
    assert not any(path.name.endswith(".tmp") for path in tmp_path.rglob("*"))


def partial_grid(tmp_path, partial_cells: str):
    """pope-fixture and sqa: clip answers every item of both; vlm answers 30 of pope's 40 items (an imported
    answer set that lacks 10 by construction), and every item of sqa."""
    objects = {
        ("clip", "pope-fixture"): scored("clip", "pope-fixture", "f1", 61.0, [50.0, 72.0], [50, 60, 65, 70]),
        ("clip", "sqa"): scored("clip", "sqa", "accuracy", 50.0, [40.0, 60.0], [40, 50, 50, 60]),
        ("vlm", "pope-fixture"): scored("vlm", "pope-fixture", "f1", 80.0, [70.0, 90.0], [70, 80, 85, 85], 0.0)
        | {"n": 30, "n_valid": 30, "coverage": {"answered": 30, "total": 40}},
        ("vlm", "sqa"): scored("vlm", "sqa", "accuracy", 70.0, [60.0, 80.0], [60, 70, 70, 80]),
    }
    files = {}
    for (model, bench), obj in objects.items():
        files[(model, bench)] = tmp_path / f"{model}-{bench}.json"
        files[(model, bench)].write_text(json.dumps(obj))
    return load_grid(files, MODELS, ["pope-fixture", "sqa"], partial_cells=partial_cells)


def test_a_partial_cell_carries_its_coverage_and_its_models_average_says_what_it_did_with_it(tmp_path):
    tree = metrics(partial_grid(tmp_path, "exclude"))
    assert tree["pope-fixture"]["vlm"] == {"f1": 80.0, "ci_low": 70.0, "ci_high": 90.0, "n": 30,
                                           "format_error_rate": 0.0, "coverage": {"answered": 30, "total": 40}}
    assert "coverage" not in tree["pope-fixture"]["clip"] and "coverage" not in tree["sqa"]["vlm"]
    # exclude: vlm's average is its sqa alone (70.0, draws 60 70 70 80), and says the partial cell is left out
    assert tree["Average"]["vlm"] == {"mean": 70.0, "ci_low": 60.75, "ci_high": 79.25, "partial_cells": "exclude"}
    assert tree["Average"]["clip"] == {"mean": 55.5, "ci_low": 45.75, "ci_high": 64.4375}
    # include: (80 + 70) / 2, draws 65 75 77.5 82.5
    included = metrics(partial_grid(tmp_path, "include"))["Average"]["vlm"]
    assert included["mean"] == 75.0 and included["partial_cells"] == "include"
