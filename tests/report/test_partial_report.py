"""The partial report (`vlmgrid report --allow-missing`, what a run that failed somewhere writes): a cell
whose rerun failed keeps the score file of the predictions before it, which is not the cell's result and
reads "missing"."""

import pandas as pd
from helpers.chain import infer_cell, prepared_grid, score_of
from helpers.report import md_rows

from vlmgrid import paths
from vlmgrid.stages.report import outdated_cells, write_report

BENCHMARKS = ("pope-fixture", "mmvp-fixture")


def scored_grid(small_config):
    base = {
        **small_config,
        "models": {**small_config["models"], "random2": {"backend": "baseline", "seed": 1}},
    }
    config = prepared_grid(
        base, {name: small_config["benchmarks"][name] for name in BENCHMARKS}, ["random", "random2"]
    )
    for model in ("random", "random2"):
        for bench in BENCHMARKS:
            score_of(config, model, bench, infer_cell(config, model, bench, part_size=1000), samples=50)
    return config


def test_a_cell_whose_predictions_are_gone_or_changed_reads_missing_in_the_partial_report(small_config):
    config = scored_grid(small_config)
    write_report(config, allow_missing=True)
    partial = paths.partial_report_dir(config.results_dir) / "tables" / "main.md"
    assert "missing" not in "".join(sum(md_rows(partial).values(), []))
    assert outdated_cells(config) == []

    # the rerun of random on POPE failed: Snakemake removed its predictions, its old score file stays
    paths.predictions_path(config.results_dir, "random", "pope-fixture").unlink()
    # random2 on MMVP was answered again, and not scored yet
    again = paths.predictions_path(config.results_dir, "random2", "mmvp-fixture")
    frame = pd.read_parquet(again)
    frame.iloc[::-1].to_parquet(again, index=False)

    assert outdated_cells(config) == [("random", "pope-fixture"), ("random2", "mmvp-fixture")]
    write_report(config, allow_missing=True)
    rows = md_rows(partial)
    assert rows["random"][0] == "missing" and rows["random"][1] != "missing"
    assert rows["random2"][0] != "missing" and rows["random2"][1] == "missing"
    assert "made from predictions it no longer has" in partial.read_text(encoding="utf-8")
