"""A comparison of a cell that has no score file (its score job failed, or has not run) is not shown: the
cell reads "missing" in the main table, and its numbers never reach the comparisons table."""

import yaml
from helpers.compare import grid_data, write_bench, write_preds
from helpers.report import md_rows

from vlmgrid import paths
from vlmgrid.cli import main


def test_a_comparison_of_a_cell_without_a_score_file_is_not_shown(tmp_path):
    data = grid_data(tmp_path, ["good", "fair"])
    data["report"] = {"reference_model": "fair"}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    fingerprint = write_bench(tmp_path / "data" / "tiny")
    results = tmp_path / "results"
    write_preds(paths.predictions_path(results, "good", "tiny"), [0] * 20, fingerprint)
    write_preds(paths.predictions_path(results, "fair", "tiny"), [1] * 20, fingerprint)
    assert main(["compare", "tiny", "--config", str(config)]) == 0
    assert main(["score", "fair", "tiny", "--config", str(config)]) == 0
    assert not paths.score_path(results, "good", "tiny").exists()

    assert main(["report", "--config", str(config), "--allow-missing"]) == 0
    tables = paths.tables_dir(paths.partial_report_dir(results))
    assert md_rows(tables / "main.md")["good"] == ["missing", "missing"]
    assert len((tables / "comparisons.csv").read_text().splitlines()) == 1  # the header alone
    assert (
        "tiny: good has no score file here, so its comparisons are not shown"
        in (tables / "comparisons.md").read_text()
    )
