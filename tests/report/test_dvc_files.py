"""DVC's metrics files (vlmgrid.report.dvc_files) from hand-made score files: per benchmark its metric and
each model's headline, and no number at all for a cell without one (n/a, hidden, failed, missing); then the
averages."""

import json
from pathlib import Path

from vlmgrid.report import build_report
from vlmgrid.report.dvc_files import metrics
from vlmgrid.report.grid import load_grid

MODELS = ["clip", "vlm"]
BENCHES = ["pope-fixture", "sqa", "cvqa"]


def scored(
    model: str, bench: str, metric: str, value: float, ci: list, draws: list, error_rate: float = 2.0
) -> dict:
    return {
        "model": model,
        "benchmark": bench,
        "metric": metric,
        "value": value,
        "ci95": ci,
        "n": 40,
        "n_valid": 38,
        "format_error_rate": error_rate,
        "metrics": {metric: {"value": value, "ci95": ci}},
        "breakdown": {},
        "variants": {},
        "bootstrap": {"samples": 4, "seed": 0, "draws": draws},
    }


def score_files(root: Path) -> dict:
    """clip: pope scored, sqa n/a, cvqa hidden; vlm: pope scored, sqa failed (every row an error), cvqa
    missing."""
    objects = {
        ("clip", "pope-fixture"): scored(
            "clip", "pope-fixture", "f1", 61.23456, [50.0, 72.5], [50, 60, 65, 70]
        ),
        ("clip", "sqa"): {
            "model": "clip",
            "benchmark": "sqa",
            "applicable": False,
            "metric": "accuracy",
            "reason": "clip cannot run sqa",
        },
        ("clip", "cvqa"): {
            "model": "clip",
            "benchmark": "cvqa",
            "labels_hidden": True,
            "metric": "accuracy",
            "n": 12,
            "submission": {"loc-en": "cvqa.submission-loc-en.csv"},
        },
        ("vlm", "pope-fixture"): scored(
            "vlm", "pope-fixture", "f1", 40.0, [30.0, 50.0], [30, 40, 45, 45], 20.0
        ),
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
        # a flagged cell (vlm's, 20% errors) keeps its number; 61.23456 rounds to four decimals
        "pope-fixture": {"metric": "f1", "clip": 61.2346, "vlm": 40.0},
        "sqa": {"metric": "accuracy", "clip": "n/a", "vlm": "failed"},
        "cvqa": {"metric": "accuracy", "clip": "hidden", "vlm": "missing"},
        # no model has a number on every benchmark: no average, said as the main table says it (a cell n/a
        # first, then hidden, missing, failed)
        "Average": {"metric": "mean", "clip": "n/a", "vlm": "missing"},
    }


def test_average_is_the_mean_of_the_headlines(tmp_path):
    files = score_files(tmp_path)
    assert metrics(load_grid(files, MODELS, ["pope-fixture"]))["Average"] == {
        "metric": "mean",
        "clip": 61.2346,
        "vlm": 40.0,
    }


def test_the_report_writes_a_metrics_file_per_benchmark_and_one_of_the_averages(tmp_path):
    written = build_report(
        score_files(tmp_path), MODELS, BENCHES, tmp_path / "tables", tmp_path / "figures", allow_missing=True
    )
    folder = tmp_path / "metrics"
    assert written[-4:] == [
        folder / "pope-fixture.json",
        folder / "sqa.json",
        folder / "cvqa.json",
        folder / "Average.json",
    ]
    assert json.loads((folder / "sqa.json").read_text()) == {
        "metric": "accuracy",
        "clip": "n/a",
        "vlm": "failed",
    }
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "plots").exists()
    assert not any(path.name.endswith(".tmp") for path in tmp_path.rglob("*"))


def partial_grid(tmp_path, partial_cells: str):
    """pope-fixture and sqa: clip answers every item of both; vlm answers 30 of pope's 40 items (an imported
    answer set that lacks 10 by construction), and every item of sqa."""
    objects = {
        ("clip", "pope-fixture"): scored("clip", "pope-fixture", "f1", 61.0, [50.0, 72.0], [50, 60, 65, 70]),
        ("clip", "sqa"): scored("clip", "sqa", "accuracy", 50.0, [40.0, 60.0], [40, 50, 50, 60]),
        ("vlm", "pope-fixture"): scored(
            "vlm", "pope-fixture", "f1", 80.0, [70.0, 90.0], [70, 80, 85, 85], 0.0
        )
        | {"n": 30, "n_valid": 30, "coverage": {"answered": 30, "total": 40}},
        ("vlm", "sqa"): scored("vlm", "sqa", "accuracy", 70.0, [60.0, 80.0], [60, 70, 70, 80]),
    }
    files = {}
    for (model, bench), obj in objects.items():
        files[(model, bench)] = tmp_path / f"{model}-{bench}.json"
        files[(model, bench)].write_text(json.dumps(obj))
    return load_grid(files, MODELS, ["pope-fixture", "sqa"], partial_cells=partial_cells)


def test_a_partial_cell_gives_its_headline_and_its_models_average_follows_partial_cells(tmp_path):
    tree = metrics(partial_grid(tmp_path, "exclude"))
    assert tree["pope-fixture"] == {"metric": "f1", "clip": 61.0, "vlm": 80.0}
    # exclude: vlm's average is its sqa alone; include: (80 + 70) / 2; either way `partial` names vlm
    assert tree["Average"] == {"metric": "mean", "clip": 55.5, "vlm": 70.0, "partial": "vlm"}
    assert metrics(partial_grid(tmp_path, "include"))["Average"] == {
        "metric": "mean",
        "clip": 55.5,
        "vlm": 75.0,
        "partial": "vlm",
    }


def test_the_metrics_files_name_the_models_whose_answers_depend_on_the_batch(tmp_path):
    files = score_files(tmp_path)
    obj = json.loads(files[("vlm", "pope-fixture")].read_text())
    obj["invariance"] = {
        "checked": 8,
        "same": 7,
        "differing": ["q3"],
        "max_logprob_delta": None,
        "batch_size": 16,
    }
    files[("vlm", "pope-fixture")].write_text(json.dumps(obj))
    tree = metrics(load_grid(files, MODELS, BENCHES, allow_missing=True))
    # the number stays a number (dvc metrics diff compares it); the mark is a key of its own, as the main
    # table's
    assert tree["pope-fixture"] == {"metric": "f1", "clip": 61.2346, "vlm": 40.0, "batch_dependent": "vlm"}
    assert "batch_dependent" not in tree["sqa"]
    # the average over such a cell is marked too, as in the main table
    assert metrics(load_grid(files, MODELS, ["pope-fixture"]))["Average"] == {
        "metric": "mean",
        "clip": 61.2346,
        "vlm": 40.0,
        "batch_dependent": "vlm",
    }


def test_a_failed_cell_leaves_its_model_no_average_even_where_it_answers_part_of_the_benchmark(tmp_path):
    """As the main table: a failed cell's model reads failed, never a mean over its other cells (with
    partial_cells: exclude, a failed partial cell was left out and the rest averaged)."""
    partial_grid(tmp_path, "exclude")
    path = tmp_path / "vlm-pope-fixture.json"
    obj = json.loads(path.read_text())
    obj.update(format_error_rate=100.0, n_valid=0)
    path.write_text(json.dumps(obj))
    files = {(m, b): tmp_path / f"{m}-{b}.json" for m in MODELS for b in ("pope-fixture", "sqa")}
    averages = metrics(load_grid(files, MODELS, ["pope-fixture", "sqa"], partial_cells="exclude"))["Average"]
    assert averages == {"metric": "mean", "clip": 55.5, "vlm": "failed"}
