"""The compare stage with a cell that answers a subset of the benchmark (an imported MME eval-tool folder's
predictions, whose metadata record the coverage): no comparison by default, compared on the items both models
answered with `report.partial_cells: include`."""

import json

import pandas as pd
import pytest
from helpers.compare import FAIR, GOOD, grid_data, write_bench, write_preds

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.predictions import rows_to_table, write_predictions


def write_partial(path, indices, data_fingerprint, total):
    """Rows for the first len(indices) items only, the coverage in the metadata as the import writes it."""
    rows = [
        {
            "id": f"q{i}",
            "variant": "default",
            "raw": None,
            "prediction": ["yes", "no"][k],
            "prediction_index": k,
            "scores": None,
            "topk": None,
            "error": None,
        }
        for i, k in enumerate(indices)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_predictions(
        path,
        rows_to_table(rows),
        {
            "applicable": True,
            "data_fingerprint": data_fingerprint,
            "coverage": {"answered": len(rows), "total": total},
        },
    )


@pytest.fixture
def partial_grid(tmp_path):
    data = grid_data(tmp_path, ["good", "part"])
    data_fp = write_bench(tmp_path / "data" / "tiny")
    results = tmp_path / "results"
    write_preds(paths.predictions_path(results, "good", "tiny"), GOOD, data_fp)
    # "part" answers q0-q9 only, as "fair" would: 5 right, 5 wrong.
    write_partial(paths.predictions_path(results, "part", "tiny"), FAIR[:10], data_fp, 20)
    return data


def compare(tmp_path, data) -> dict:
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps(data))
    assert main(["compare", "tiny", "--config", str(config)]) == 0
    return json.loads(paths.comparison_path(data["results_dir"], "tiny").read_text())["pairs"][0]


def test_a_partial_cell_is_not_compared_by_default(tmp_path, partial_grid):
    pair = compare(tmp_path, partial_grid)
    assert pair["comparable"] is False and "difference" not in pair
    assert pair["reason"] == (
        "part answers 10 of the 20 items of tiny (a partial import; report.partial_cells: "
        "include compares it on the items both answered)"
    )


def test_include_compares_on_the_items_both_answered(tmp_path, partial_grid):
    partial_grid["report"] = {"partial_cells": "include"}
    pair = compare(tmp_path, partial_grid)
    # Hand-computed on q0-q9: good right on all 10 (100.0), part on q0-q4 (50.0).
    assert pair["comparable"] is True
    assert (pair["value_a"], pair["value_b"], pair["difference"]) == (100.0, 50.0, 50.0)
    assert pair["units"] == 10 and pair["coverage"] == {"answered": 10, "total": 20}
    assert pair["mcnemar"]["a_only"] == 5 and pair["mcnemar"]["b_only"] == 0


def comparison_tables(data) -> tuple[str, str, pd.DataFrame]:
    """The comparisons table's Markdown, LaTeX and CSV frame, as the report writes them from the file."""
    from vlmgrid.report.comparisons import read_comparisons
    from vlmgrid.report.tables.comparisons import comparisons_frame, comparisons_latex, comparisons_markdown

    comparisons = read_comparisons(
        {"tiny": paths.comparison_path(data["results_dir"], "tiny")}, ["good", "part"], ["tiny"]
    )
    return (
        comparisons_markdown(comparisons, "t"),
        comparisons_latex(comparisons, "t"),
        comparisons_frame(comparisons),
    )


def test_the_comparisons_table_gives_the_coverage_of_a_pair_compared_under_include(tmp_path, partial_grid):
    partial_grid["report"] = {"partial_cells": "include"}
    compare(tmp_path, partial_grid)
    markdown, latex, frame = comparison_tables(partial_grid)
    row = next(line for line in markdown.splitlines() if line.startswith("| good"))
    assert "+50.0 [" in row and row.count("\u2021") == 1  # the difference marked
    assert (
        "\u2021: compared on the items both models answered, a cell of the pair answering a subset of the "
        "benchmark (report.partial_cells: include): good \u2212 part on tiny, 10 of 20 items."
    ) in markdown
    assert r"$^{\ddagger}$" in latex and "10 of 20 items" in latex
    assert frame[["coverage_answered", "coverage_total"]].values.tolist() == [[10, 20]]


def test_the_comparisons_table_says_why_a_partial_pair_is_not_compared_under_exclude(tmp_path, partial_grid):
    compare(tmp_path, partial_grid)
    markdown, latex, frame = comparison_tables(partial_grid)
    row = next(line for line in markdown.splitlines() if line.startswith("| good"))
    # a short mark in the difference column, the reason in the numbered note under the table
    assert "| n/a [1] |" in row and "answers" not in row
    assert (
        "n/a: no comparison. [1] part answers 10 of the 20 items of tiny (a partial import; "
        "report.partial_cells: include compares it on the items both answered)."
    ) in markdown
    assert r"n/a$^{1}$" in latex
    assert "\u2021" not in markdown and frame["difference"].isna().all()
    assert frame["coverage_answered"].isna().all() and "10 of the 20 items of tiny" in frame["reason"][0]
