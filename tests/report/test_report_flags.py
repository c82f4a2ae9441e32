"""No quiet numbers: cells built on too many format errors are marked in every table and figure, a cell whose
every row failed has no number, a missing score file is shown (with --allow-missing) or refused, and a
baseline says what it is."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers.common import heatmap_cells
from helpers.report import (
    DASH,
    _write,
    build,
    cvqa_obj,
    dance_obj,
    kaleidoscope_obj,
    latex_rows,
    md_rows,
    plain_latex,
    read_csv,
    write_scores,
)

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.report import build_report

DAGGER = "\u2020"
TEX_DAGGER = r"$^{\dagger}$"


def set_rate(files: dict, model: str, bench: str, rate: float) -> None:
    path = files[(model, bench)]
    obj = json.loads(path.read_text())
    obj["format_error_rate"] = rate
    path.write_text(json.dumps(obj))


def legend(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip().splitlines()[-1]


@pytest.fixture
def flagged_report(tmp_path):
    """clip_tiny on pope at 9% (under the default 10%), big-vlm on pope at 11% (over it)."""
    files = write_scores(tmp_path)
    set_rate(files, "clip_tiny", "pope-fixture", 9.0)
    set_rate(files, "big-vlm", "pope-fixture", 11.0)
    build(tmp_path, files)
    return tmp_path


# --- the main table -----------------------------------------------------------------------------------------


def test_only_the_cell_over_the_threshold_is_marked_in_markdown(flagged_report):
    rows = md_rows(flagged_report / "tables" / "main.md")
    assert rows["big-vlm"][0] == f"51.2 [44.0, 58.1]{DAGGER}"
    assert rows["clip_tiny"][0] == "50.0 [5.0, 85.0]"
    # the other cells (3.3%) are not marked; the average built on the marked cell is
    assert rows["big-vlm"][1:3] == ["20.0 [15.5, 25.0]", "33.3 [30.0, 36.6]"]
    assert rows["big-vlm"][3].endswith(DAGGER) and not rows["clip_tiny"][3].endswith(DAGGER)
    note = legend(flagged_report / "tables" / "main.md")
    assert f"{DAGGER}: more than 10% of the cell's prediction rows are errors or unparsable answers" in note
    assert "big-vlm on pope-fixture 11.0%" in note
    assert "clip_tiny on pope-fixture" not in note and "9.0%" not in note
    assert "An average over such a cell is marked too." in note


def test_only_the_cell_over_the_threshold_is_marked_in_latex(flagged_report):
    tex = (flagged_report / "tables" / "main.tex").read_text(encoding="utf-8")
    lines = latex_rows(tex)
    big, clip = lines["big-vlm"], lines[r"clip\_tiny"]
    assert big[1].endswith(TEX_DAGGER) and big[4].endswith(TEX_DAGGER)
    assert not any(TEX_DAGGER in cell for cell in clip) and TEX_DAGGER not in big[2] + big[3]
    caption = next(line for line in tex.splitlines() if line.startswith(r"\caption{"))
    assert f"{TEX_DAGGER}: more than 10\\% of the cell's prediction rows" in caption
    assert r"big-vlm on pope-fixture 11.0\%" in caption


def test_the_csv_says_the_rate_and_whether_each_cell_is_flagged(flagged_report):
    rows = {r["model"]: r for r in read_csv(flagged_report / "tables" / "main.csv")}
    big, clip = rows["big-vlm"], rows["clip_tiny"]
    assert big["pope-fixture"] == "51.2"  # the number stays, machine-readable; the flag is beside it
    assert big["pope-fixture_format_error_rate"] == "11.0" and big["pope-fixture_flagged"] == "True"
    assert clip["pope-fixture_format_error_rate"] == "9.0" and clip["pope-fixture_flagged"] == "False"
    assert big["sqa_img_flagged"] == "False" and float(big["sqa_img_format_error_rate"]) == pytest.approx(
        3.3333
    )
    assert big["average_flagged"] == "True" and clip["average_flagged"] == "False"


def test_breakdown_variants_and_cells_mark_the_cell(tmp_path):
    files = write_scores(tmp_path)
    set_rate(files, "big-vlm", "pope-fixture", 11.0)
    obj = json.loads(files[("big-vlm", "pope-fixture")].read_text())
    obj["variants"] = {"a": {"value": 50.0, "ci95": [40.0, 60.0]}, "b": {"value": 52.4, "ci95": [45.0, 60.0]}}
    for group in obj["breakdown"]["split"].values():  # the groups' own rates: only adversarial is over 10%
        group["format_error_rate"] = 3.3
    obj["breakdown"]["split"]["adversarial"]["format_error_rate"] = 26.7
    files[("big-vlm", "pope-fixture")].write_text(json.dumps(obj))
    build(tmp_path, files)
    tables = tmp_path / "tables"
    breakdown = tables.joinpath("breakdown.md").read_text(encoding="utf-8")
    assert f"| big-vlm | (all) | F1 | 51.2 [44.0, 58.1]{DAGGER} | 90 | 87 | 11.0 |" in breakdown
    assert f"| big-vlm | adversarial | F1 | 52.0 [32.0, 57.5]{DAGGER} | 30 | 29 | 26.7 |" in breakdown
    assert "| big-vlm | random | F1 | 50.0 [30.0, 55.5] | 30 | 29 | 3.3 |" in breakdown
    assert "| clip_tiny | (all) | F1 | 50.0 [5.0, 85.0] | 90 | 87 | 3.3 |" in breakdown
    assert f"{DAGGER}: more than 10% of the prediction rows" in breakdown
    flags = {(r["model"], r["group"]): r["flagged"] for r in read_csv(tables / "breakdown.csv")}
    assert flags[("big-vlm", "adversarial")] == "True" and flags[("big-vlm", "random")] == "False"
    assert flags[("clip_tiny", "adversarial")] == "False"
    variants = tables.joinpath("variants.md").read_text(encoding="utf-8")
    assert f"| big-vlm | pope-fixture | a | F1 | 50.0 [40.0, 60.0]{DAGGER} |" in variants
    assert "big-vlm on pope-fixture 11.0%" in variants
    assert {r["flagged"] for r in read_csv(tables / "variants.csv")} == {"True"}
    cells = {(r["model"], r["benchmark"]): r for r in read_csv(tables / "cells.csv")}
    assert cells[("big-vlm", "pope-fixture")]["flagged"] == "True"
    assert cells[("clip_tiny", "pope-fixture")]["flagged"] == "False"
    assert (
        f"| big-vlm | pope-fixture | {DASH} | {DASH} | 90 | 87 | 11.0{DAGGER} | {DASH} |"
        in tables.joinpath("cells.md").read_text(encoding="utf-8")
    )


def test_a_configured_threshold(tmp_path):
    files = write_scores(tmp_path)
    set_rate(files, "clip_tiny", "pope-fixture", 9.0)
    set_rate(files, "big-vlm", "pope-fixture", 11.0)
    build(tmp_path / "strict", files, flag_error_rate=5)
    rows = md_rows(tmp_path / "strict" / "tables" / "main.md")
    assert rows["clip_tiny"][0].endswith(DAGGER) and rows["big-vlm"][0].endswith(DAGGER)
    assert not rows["big-vlm"][1].endswith(DAGGER)  # 3.3% is under 5%
    assert "more than 5% of the cell's prediction rows" in legend(tmp_path / "strict" / "tables" / "main.md")
    build(tmp_path / "loose", files, flag_error_rate=12.5)
    text = (tmp_path / "loose" / "tables" / "main.md").read_text(encoding="utf-8")
    assert DAGGER not in text
    with pytest.raises(VlmgridError, match="flag_error_rate"):
        build(tmp_path / "bad", files, flag_error_rate=150)


# --- a cell whose every row failed --------------------------------------------------------------------------


def test_a_cell_with_every_row_failed_has_no_number_and_no_average(tmp_path, main_heatmaps):
    files = write_scores(tmp_path)
    set_rate(files, "clip_tiny", "sqa_img", 100.0)
    build(tmp_path, files)
    tables = tmp_path / "tables"
    rows = md_rows(tables / "main.md")
    assert rows["clip_tiny"] == ["50.0 [5.0, 85.0]", f"failed{DAGGER}", "18.0 [10.0, 29.0]", "failed"]
    assert rows["big-vlm"][3].startswith("34.8 [")  # the other model's average is untouched
    note = legend(tables / "main.md")
    assert "clip_tiny on sqa_img 100.0% (failed)" in note
    assert "failed: every prediction row of the cell is an error or unparsable, so it has no number" in note
    clip = read_csv(tables / "main.csv")[0]
    assert [clip["sqa_img"], clip["sqa_img_ci_low"], clip["average"], clip["average_ci_low"]] == [
        "",
        "",
        "",
        "",
    ]
    assert clip["sqa_img_format_error_rate"] == "100.0" and clip["sqa_img_flagged"] == "True"
    assert clip["average_flagged"] == ""
    tex = (tables / "main.tex").read_text(encoding="utf-8")
    assert latex_rows(tex)[r"clip\_tiny"][2:4] == [f"failed{TEX_DAGGER}", "18.0"]
    cells = {(r["model"], r["benchmark"]): r for r in read_csv(tables / "cells.csv")}
    assert cells[("clip_tiny", "sqa_img")]["status"] == "failed"
    [cells] = main_heatmaps  # the failed cell and its model's average are worded, not coloured
    assert [cells[("clip_tiny", b)][0] for b in ("pope-fixture", "sqa_img", "flowers", "Average")] == [
        "50.0",
        f"failed{DAGGER}",
        "18.0",
        "failed",
    ]
    assert (
        cells[("clip_tiny", "sqa_img")][1]
        == cells[("clip_tiny", "Average")][1]
        != cells[("big-vlm", "sqa_img")][1]
    )


def test_failed_cell_in_the_breakdown(tmp_path):
    files = write_scores(tmp_path)
    set_rate(files, "clip_tiny", "pope-fixture", 100.0)
    build(tmp_path, files)
    text = (tmp_path / "tables" / "breakdown.md").read_text(encoding="utf-8")
    assert f"| clip_tiny | (all) | F1 | failed{DAGGER} | 90 | 87 | 100.0 |" in text
    assert "| clip_tiny | random |" not in text
    assert {r["model"] for r in read_csv(tmp_path / "tables" / "breakdown.csv")} == {"big-vlm"}


# --- missing score files ------------------------------------------------------------------------------------


def test_a_missing_score_file_is_an_error_without_allow_missing(tmp_path):
    files = write_scores(tmp_path)
    files[("big-vlm", "flowers")].unlink()
    with pytest.raises(VlmgridError, match="flowers.json is not a valid score file"):
        build(tmp_path, files)
    assert not (tmp_path / "tables").exists()


def test_allow_missing_shows_and_lists_the_missing_cells(tmp_path):
    files = write_scores(tmp_path)
    files[("big-vlm", "flowers")].unlink()
    build(tmp_path, files, allow_missing=True)
    tables = tmp_path / "tables"
    rows = md_rows(tables / "main.md")
    assert rows["big-vlm"] == ["51.2 [44.0, 58.1]", "20.0 [15.5, 25.0]", "missing", "missing"]
    assert rows["clip_tiny"][3] == "31.0 [11.0, 49.0]"
    note = legend(tables / "main.md")
    assert (
        "missing: the cell has no score file, or one made from predictions it no longer has (it failed or "
        "has not run since): big-vlm on flowers" in note
    )
    big = read_csv(tables / "main.csv")[1]
    assert [big["flowers"], big["average"], big["flowers_flagged"]] == ["", "", ""]
    tex = (tables / "main.tex").read_text()
    assert latex_rows(tex)["big-vlm"][-2:] == ["missing", "missing"]
    cells = {(r["model"], r["benchmark"]): r for r in read_csv(tables / "cells.csv")}
    assert cells[("big-vlm", "flowers")]["status"] == "missing"


def test_allow_missing_with_no_score_file_at_all(tmp_path):
    files = write_scores(tmp_path)
    for path in files.values():
        path.unlink()
    build(tmp_path, files, allow_missing=True)
    assert md_rows(tmp_path / "tables" / "main.md")["big-vlm"] == ["missing"] * 4


# --- paper tables and figures -------------------------------------------------------------------------------


def _rated(obj: dict, rate: float) -> dict:
    obj = copy.deepcopy(obj)
    obj["format_error_rate"] = rate
    return obj


def test_kaleidoscope_table_and_figure_mark_the_model(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    langs = {"ar": (50.0, 0.0, 100.0), "te": (25.0, 0.0, 75.0)}
    files = {
        ("vlm-a", "kal"): _write(tmp_path, _rated(kaleidoscope_obj("vlm-a", "kal", langs), 9.0)),
        ("vlm-b", "kal"): _write(tmp_path, _rated(kaleidoscope_obj("vlm-b", "kal", langs), 11.0)),
    }
    build_report(
        files,
        ["vlm-a", "vlm-b"],
        ["kal"],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={"kal": "kaleidoscope"},
    )
    tables = tmp_path / "tables"
    rows = md_rows(tables / "kaleidoscope.md")
    assert "vlm-a" in rows and f"vlm-b{DAGGER}" in rows and "vlm-b" not in rows
    text = (tables / "kaleidoscope.md").read_text()
    assert "vlm-b 11.0%" in text and "vlm-a 9.0%" not in text
    tex = (tables / "kaleidoscope.tex").read_text()
    assert latex_rows(tex)[f"vlm-b{TEX_DAGGER}"][1] == "30.0" and f"vlm-a{TEX_DAGGER}" not in plain_latex(tex)
    assert r"vlm-b 11.0\%" in tex
    assert [r["flagged"] for r in read_csv(tables / "kaleidoscope.csv")] == ["False", "True"]
    # the per-language figure: vlm-b's bars hatched, the legend and the note say so; vlm-a's bars plain
    fig = figures[-1]
    ax = fig.axes[0]
    hatches = [patch.get_hatch() for patch in ax.patches]
    assert hatches == [None, None, "///", "///"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["vlm-a", f"vlm-b{DAGGER}"]
    note = " ".join(t.get_text() for t in [*fig.texts, *fig.axes[-1].texts]).replace(
        "\n", " "
    )  # under the bars
    assert "hatched bars: format errors above 10%" in note and "vlm-b 11.0%" in note
    # the main figure too: the marked value carries the dagger (a hatch there means "no number")
    cells = heatmap_cells(figures[0], ["vlm-a", "vlm-b"])
    assert [cells[(m, "kal")][0] for m in ("vlm-a", "vlm-b")] == ["30.0", f"30.0{DAGGER}"]


def test_cvqa_tables_and_figure_mark_the_model(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    files = {
        ("vlm-a", "cvqa"): _write(tmp_path, _rated(cvqa_obj("vlm-a", 0.0), 9.0)),
        ("vlm-b", "cvqa"): _write(tmp_path, _rated(cvqa_obj("vlm-b", 5.0), 11.0)),
    }
    build_report(
        files, ["vlm-a", "vlm-b"], ["cvqa"], tmp_path / "tables", tmp_path / "figures", kinds={"cvqa": "cvqa"}
    )
    tables = tmp_path / "tables"
    rows = md_rows(tables / "cvqa.md")
    assert f"vlm-b{DAGGER}" in rows and "vlm-a" in rows
    assert "vlm-b 11.0%" in (tables / "cvqa.md").read_text()
    cvqa_csv = read_csv(tables / "cvqa.csv")
    assert [(r["format_error_rate"], r["flagged"]) for r in cvqa_csv] == [("9.0", "False"), ("11.0", "True")]
    assert f"vlm-b{TEX_DAGGER}" in plain_latex((tables / "cvqa.tex").read_text())
    # pairs: models are the columns, so the column header carries the mark
    pairs = md_rows(tables / "cvqa-pairs.md")
    assert pairs["Country-language"] == ["vlm-a", f"vlm-b{DAGGER}"]
    assert "vlm-b 11.0%" in (tables / "cvqa-pairs.md").read_text()
    pairs_csv = read_csv(tables / "cvqa-pairs.csv")
    assert {r["vlm-b_flagged"] for r in pairs_csv} == {"True"} and {
        r["vlm-a_flagged"] for r in pairs_csv
    } == {"False"}
    assert {r["vlm-b_format_error_rate"] for r in pairs_csv} == {"11.0"}
    assert f"vlm-b{TEX_DAGGER}" in plain_latex((tables / "cvqa-pairs.tex").read_text())
    pairs_ax = figures[-1].axes[0]
    assert [p.get_hatch() for p in pairs_ax.patches] == [None, None, "///", "///"]


def test_dance_table_marks_the_model_and_a_failed_one_has_no_number(tmp_path):
    subsets = {"test-seen riddle-to-image": (60.0, 40.0, 80.0)}
    files = {
        ("clip", "dance"): _write(tmp_path, _rated(dance_obj("clip", subsets), 11.0)),
        ("siglip", "dance"): _write(tmp_path, _rated(dance_obj("siglip", subsets), 100.0)),
    }
    build_report(
        files,
        ["clip", "siglip"],
        ["dance"],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={"dance": "dance"},
    )
    rows = md_rows(tmp_path / "tables" / "dance.md")
    assert rows[f"clip{DAGGER}"] == ["60.0 [40.0, 80.0]", "40.0 [30.0, 50.0]"]
    assert rows[f"siglip{DAGGER}"] == ["failed", "failed"]
    text = (tmp_path / "tables" / "dance.md").read_text()
    assert "clip 11.0%, siglip 100.0% (failed)" in text
    assert [(r["all"], r["flagged"]) for r in read_csv(tmp_path / "tables" / "dance.csv")] == [
        ("40.0", "True"),
        ("", "True"),
    ]


def test_a_missing_cell_in_a_paper_table(tmp_path):
    langs = {"ar": (50.0, 0.0, 100.0)}
    files = {
        ("vlm-a", "kal"): _write(tmp_path, _rated(kaleidoscope_obj("vlm-a", "kal", langs), 0.0)),
        ("vlm-b", "kal"): tmp_path / "scores" / "vlm-b" / "kal.json",
    }
    build_report(
        files,
        ["vlm-a", "vlm-b"],
        ["kal"],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={"kal": "kaleidoscope"},
        allow_missing=True,
    )
    rows = md_rows(tmp_path / "tables" / "kaleidoscope.md")
    assert rows["vlm-b"] == ["missing"] * 5
    assert "missing: the cell has no score file" in (tmp_path / "tables" / "kaleidoscope.md").read_text()


# --- the baseline says what it is ---------------------------------------------------------------------------


def test_the_baseline_is_not_described_as_log_likelihood(tmp_path):
    files = write_scores(tmp_path)
    for bench, model_id in (("sqa_img", "baseline:random"), ("flowers", "baseline:majority")):
        obj = json.loads(files[("clip_tiny", bench)].read_text())
        obj.update(strategy="score_options", backend="baseline", model_id=model_id, generation={"seed": 0})
        files[("clip_tiny", bench)].write_text(json.dumps(obj))
    obj = json.loads(files[("big-vlm", "sqa_img")].read_text())
    obj.update(strategy="score_options", backend="hf", model_id="llava-hf/llava-1.5-7b-hf")
    files[("big-vlm", "sqa_img")].write_text(json.dumps(obj))
    build(tmp_path, files)
    cells = {(r["model"], r["benchmark"]): r for r in read_csv(tmp_path / "tables" / "cells.csv")}
    assert cells[("clip_tiny", "sqa_img")]["answered_by"] == "random guess (baseline)"
    assert cells[("clip_tiny", "flowers")]["answered_by"] == "majority answer (baseline)"
    assert cells[("clip_tiny", "sqa_img")]["strategy"] == "score_options"  # the strategy column is unchanged
    assert cells[("big-vlm", "sqa_img")]["answered_by"] == "log-likelihood"
    assert (
        "| clip_tiny | sqa_img | random guess (baseline) |" in (tmp_path / "tables" / "cells.md").read_text()
    )


# --- the config and the command -----------------------------------------------------------------------------


def test_the_config_default_and_its_check(default_config_data):
    assert validate_config(default_config_data).report == {
        "flag_error_rate": 10,
        "partial_cells": "exclude",
        "reported": "config/reported",
    }
    data = copy.deepcopy(default_config_data)
    data["report"] = {"flag_error_rate": 2.5}
    assert validate_config(data).report["flag_error_rate"] == 2.5
    data["report"] = {"flag_error_rate": 150}
    with pytest.raises(VlmgridError, match="flag_error_rate"):
        validate_config(data)
    data["report"] = {"flag_error_rat": 5}
    with pytest.raises(VlmgridError, match='unknown key "flag_error_rat" in report'):
        validate_config(data)


@pytest.fixture
def cli_grid(tmp_path, small_config, write_config):
    data = copy.deepcopy(small_config)
    data["grid"] = {"models": ["clip-tiny", "random"], "benchmarks": ["pope-fixture"]}
    results = Path(data["results_dir"])
    for model, rate in (("clip-tiny", 9.0), ("random", 11.0)):
        path = paths.score_path(results, model, "pope-fixture")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "model": model,
                    "benchmark": "pope-fixture",
                    "metric": "f1",
                    "value": 50.0,
                    "ci95": [40.0, 60.0],
                    "n": 30,
                    "n_valid": 27,
                    "format_error_rate": rate,
                    "bootstrap": {"samples": 3, "draws": [49, 50, 51]},
                }
            )
        )
    return data, results


def test_report_command_reads_the_threshold_from_the_config(cli_grid, write_config):
    data, results = cli_grid
    assert main(["report", "--config", str(write_config(data))]) == 0
    rows = md_rows(paths.tables_dir(results) / "main.md")
    assert rows["random"][0].endswith(DAGGER) and not rows["clip-tiny"][0].endswith(DAGGER)
    data["report"] = {"flag_error_rate": 5}
    assert main(["report", "--config", str(write_config(data))]) == 0
    rows = md_rows(paths.tables_dir(results) / "main.md")
    assert rows["random"][0].endswith(DAGGER) and rows["clip-tiny"][0].endswith(DAGGER)


def test_report_command_allow_missing(cli_grid, write_config, capsys):
    data, results = cli_grid
    paths.score_path(results, "random", "pope-fixture").unlink()
    config = str(write_config(data))
    assert main(["report", "--config", config]) == 2
    assert "pope-fixture.json is not a valid score file" in capsys.readouterr().err
    assert main(["report", "--config", config, "--allow-missing"]) == 0
    # The tables of an incomplete grid go to a folder of their own: the grid's report files stay unwritten.
    tables = paths.tables_dir(paths.partial_report_dir(results))
    rows = md_rows(tables / "main.md")
    assert rows["random"] == ["missing", "missing"]
    assert "random on pope-fixture" in legend(tables / "main.md")
    assert not paths.tables_dir(results).exists()


def test_score_records_the_backend_so_the_report_can_name_the_baseline(tmp_path, small_config, write_config):
    data = copy.deepcopy(small_config)
    data["benchmarks"]["pope-fixture"]["source"] = {"type": "fixture", "seed": 0, "size": 6}
    data["grid"] = {"models": ["random"], "benchmarks": ["pope-fixture"]}
    config = ["--config", str(write_config(data))]
    assert main(["prepare", "pope-fixture", *config]) == 0
    assert main(["infer", "random", "pope-fixture", "--no-progress", *config]) == 0
    assert main(["score", "random", "pope-fixture", *config]) == 0
    score = json.loads(paths.score_path(data["results_dir"], "random", "pope-fixture").read_text())
    assert score["backend"] == "baseline" and score["model_id"] == "baseline:random"
    assert score["strategy"] == "score_options"
    assert main(["report", *config]) == 0
    cells = read_csv(paths.tables_dir(data["results_dir"]) / "cells.csv")
    assert cells[0]["answered_by"] == "random guess (baseline)"
