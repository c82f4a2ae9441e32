"""A failure is never a number, for a part of a cell too: a breakdown group or a prompt variant whose every
row is a format error reads "failed" in every table (by its own counts, from the score file), one above the
threshold is marked by its own rate, and a cell without an item readable in every variant (n_valid 0) reads
failed. Score files written before parts had counts are read as before."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
from helpers.report import _write, cvqa_obj, dance_obj, kaleidoscope_obj, md_rows, plain_latex, read_csv

from vlmgrid.metrics import score_predictions
from vlmgrid.report import build_report
from vlmgrid.report.grid import load_grid
from vlmgrid.report.papers.base import figure_note, group_series, shown_groups

DAGGER = "\u2020"


def _report(tmp_path: Path, objs: list[dict], kinds: dict | None = None) -> Path:
    files = {(obj["model"], obj["benchmark"]): _write(tmp_path, obj) for obj in objs}
    models = list(dict.fromkeys(obj["model"] for obj in objs))
    benchmarks = list(dict.fromkeys(obj["benchmark"] for obj in objs))
    build_report(files, models, benchmarks, tmp_path / "tables", tmp_path / "figures", kinds=kinds)
    return tmp_path / "tables"


def _scored(model: str, bench: str, metric: str, records, predictions, **kwargs) -> dict:
    score = score_predictions(metric, records, predictions, samples=200, seed=0, **kwargs)
    return {"model": model, "benchmark": bench, "applicable": True, **score}


def _subject_cell() -> dict:
    """18 answered (12 right) in "language", 2 error rows in "social": the cell at 10% (not above 10%)."""
    n = 20
    records = pd.DataFrame({"id": [f"q{i}" for i in range(n)], "answer_index": [0] * n})
    records["subject"] = ["language"] * 18 + ["social"] * 2
    predictions = pd.DataFrame(
        {
            "id": records["id"],
            "prediction": ["A"] * 18 + [None] * 2,
            "prediction_index": [0] * 12 + [1] * 6 + [-1] * 2,
            "error": [None] * 18 + ["image fetch timed out"] * 2,
        }
    )
    return _scored("m", "sqa", "accuracy", records, predictions, breakdown_by=("subject",))


def _template_cell() -> dict:
    """20 prompt templates of 10 items, every request of t07 failed: the cell at 5%, n_valid 0."""
    records = pd.DataFrame({"id": [f"q{i}" for i in range(10)], "answer_index": [0] * 10})
    rows = [
        {
            "id": f"q{i}",
            "variant": f"t{k:02d}",
            "prediction": None if k == 7 else "a",
            "prediction_index": -1 if k == 7 else 0,
            "error": "context too long" if k == 7 else None,
        }
        for k in range(20)
        for i in range(10)
    ]
    return _scored("m", "b", "accuracy", records, pd.DataFrame(rows))


# --- the breakdown table ------------------------------------------------------------------------------------


def test_a_breakdown_group_whose_every_row_is_an_error_reads_failed(tmp_path):
    tables = _report(tmp_path, [_subject_cell()])
    md = (tables / "breakdown.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| m |")}
    assert rows["social"] == f"| m | social | Acc. | failed{DAGGER} | 2 | 0 | 100.0 |"
    assert rows["language"] == "| m | language | Acc. | 66.7 [44.4, 83.5] | 18 | 18 | 0.0 |"
    assert rows["(all)"] == "| m | (all) | Acc. | 60.0 [40.0, 80.0] | 20 | 18 | 10.0 |"  # 10%: not above
    assert "failed: every prediction row of the group is an error or unparsable" in md
    assert f"{DAGGER}: more than 10% of the prediction rows" in md
    social = next(r for r in read_csv(tables / "breakdown.csv") if r["group"] == "social")
    assert (social["value"], social["ci_low"], social["ci_high"]) == ("", "", "")
    assert (social["n_valid"], social["format_error_rate"], social["flagged"]) == ("0", "100.0", "True")


def test_a_group_above_the_threshold_is_marked_though_its_cell_is_not(tmp_path):
    obj = _subject_cell()
    social = obj["breakdown"]["subject"]["social"]
    social.update(n_valid=1, format_error_rate=50.0)  # one of two answered
    tables = _report(tmp_path, [obj])
    md = (tables / "breakdown.md").read_text(encoding="utf-8")
    assert f"| m | social | Acc. | 0.0 [0.0, 0.0]{DAGGER} | 2 | 1 | 50.0 |" in md
    assert "| m | (all) | Acc. | 60.0 [40.0, 80.0] | 20 |" in md  # the cell unmarked
    flags = {r["group"]: r["flagged"] for r in read_csv(tables / "breakdown.csv")}
    assert flags == {"language": "False", "social": "True"}


def test_an_older_score_file_without_group_counts_reads_as_before(tmp_path):
    obj = _subject_cell()
    for group in obj["breakdown"]["subject"].values():
        del group["n_valid"], group["format_error_rate"]
    tables = _report(tmp_path, [obj])
    md = (tables / "breakdown.md").read_text(encoding="utf-8")
    # no counts of its own: judged by its cell (10%: neither failed nor marked), its number as the file has it
    assert "| m | social | Acc. | 0.0 [0.0, 0.0] | 2 | \u2013 | \u2013 |" in md
    social = next(r for r in read_csv(tables / "breakdown.csv") if r["group"] == "social")
    assert (social["value"], social["n_valid"], social["format_error_rate"]) == ("0.0", "", "10.0")


# --- the variants and main tables ---------------------------------------------------------------------------


def test_a_variant_whose_every_row_is_an_error_reads_failed_and_so_does_its_cell(tmp_path):
    tables = _report(tmp_path, [_template_cell()])
    md = (tables / "variants.md").read_text(encoding="utf-8")
    rows = {
        line.split(" | ")[2]: line.split(" | ")[-1].rstrip(" |")
        for line in md.splitlines()
        if "| m |" in line
    }
    assert rows["t06"] == "100.0 [100.0, 100.0]"
    assert rows["t07"] == f"failed{DAGGER}"
    assert rows["(mean)"] == "failed"  # n_valid 0; its 5% is not above the threshold: no dagger
    assert "m on b t07 100.0% (failed)" in md
    variants = {r["variant"]: r for r in read_csv(tables / "variants.csv")}
    assert (variants["t07"]["value"], variants["t07"]["flagged"], variants["t07"]["n_valid"]) == (
        "",
        "True",
        "0",
    )
    assert (variants["t06"]["value"], variants["t06"]["flagged"]) == ("100.0", "False")
    assert (variants["(mean)"]["value"], variants["(mean)"]["format_error_rate"]) == ("", "5.0")
    # the headline: no number where no item has a readable answer in every variant
    assert md_rows(tables / "main.md")["m"] == ["failed", "failed"]
    main = read_csv(tables / "main.csv")[0]
    assert (main["b"], main["b_format_error_rate"], main["b_flagged"]) == ("", "5.0", "False")


def test_a_cell_whose_n_valid_is_zero_is_failed(tmp_path):
    obj = _template_cell()
    obj["variants"] = {}  # a hand-made single-variant file: every item unreadable, yet a rate under 100
    obj.update(n_valid=0, format_error_rate=5.0)
    grid = load_grid({("m", "b"): _write(tmp_path, obj)}, ["m"], ["b"])
    assert grid.is_failed("m", "b") and grid.cell("m", "b") is None


def test_an_older_score_file_without_variant_counts_reads_as_before(tmp_path):
    obj = _template_cell()
    obj.update(n_valid=10)  # as if every item were readable: the cell scored
    for entry in obj["variants"].values():
        del entry["n_valid"], entry["format_error_rate"]
    tables = _report(tmp_path, [obj])
    md = (tables / "variants.md").read_text(encoding="utf-8")
    assert "| m | b | t07 | Acc. | 0.0 [0.0, 0.0] |" in md
    assert {r["format_error_rate"] for r in read_csv(tables / "variants.csv")} == {"5.0"}


# --- the paper tables and figures ---------------------------------------------------------------------------


def _with_counts(entry: dict, n_valid: int, rate: float) -> dict:
    return {**entry, "n_valid": n_valid, "format_error_rate": rate}


def test_a_kaleidoscope_language_whose_every_row_is_an_error_reads_failed(tmp_path):
    langs = {"ar": (50.0, 0.0, 100.0), "te": (0.0, 0.0, 0.0), "bn": (40.0, 10.0, 70.0)}
    obj = kaleidoscope_obj("m", "kal", langs)
    obj["format_error_rate"] = 9.0  # the cell: not marked
    groups = obj["breakdown"]["language"]
    groups["ar"] = _with_counts(groups["ar"], 4, 0.0)
    groups["te"] = _with_counts(groups["te"], 0, 100.0)
    groups["bn"] = _with_counts(groups["bn"], 2, 50.0)
    tables = _report(tmp_path, [obj], kinds={"kal": "kaleidoscope"})
    rows = md_rows(tables / "kaleidoscope.md")
    assert rows["Model"][-3:] == ["ar", "te", "bn"]
    assert rows["m"][-3:] == ["50.0 [0.0, 100.0]", f"failed{DAGGER}", f"40.0 [10.0, 70.0]{DAGGER}"]
    text = (tables / "kaleidoscope.md").read_text(encoding="utf-8")
    assert "m te 100.0% (failed), m bn 50.0%" in text and "failed in a group's column" in text
    row = read_csv(tables / "kaleidoscope.csv")[0]
    assert (row["te"], row["te_ci_low"], row["bn"]) == ("", "", "40.0")
    assert f"failed{DAGGER}" in (tables / "kaleidoscope.md").read_text()
    assert r"failed$^{\dagger}$" in plain_latex((tables / "kaleidoscope.tex").read_text())


def test_the_figure_bars_of_a_failed_or_marked_group(tmp_path):
    """The per-group bars: a failed group's word where its bar would stand, a group marked by its own rate
    hatched (its flag set), the others as their cell; the note under the figure names both."""
    langs = {"ar": (50.0, 0.0, 100.0), "te": (0.0, 0.0, 0.0), "bn": (40.0, 10.0, 70.0)}
    obj = kaleidoscope_obj("m", "kal", langs)
    groups = obj["breakdown"]["language"]
    groups["te"] = _with_counts(groups["te"], 0, 100.0)
    groups["bn"] = _with_counts(groups["bn"], 2, 50.0)
    grid = load_grid({("m", "kal"): _write(tmp_path, obj)}, ["m"], ["kal"], {"kal": "kaleidoscope"})
    [(name, [ar, te, bn])] = group_series(grid, "kal", ["ar", "te", "bn"], "language")
    assert name == f"m{DAGGER}"
    assert ar.value == 50.0 and ar.flag == 12.5  # the cell's rate (12.5%) marks it, as before
    assert te == f"failed{DAGGER}"
    assert bn.value == 40.0 and bn.flag == 50.0
    note = figure_note(grid, "kal", shown_groups(grid, "kal", "language", ["ar", "te", "bn"]), "language")
    assert "m bn 50.0%" in note and "No bar, failed" in note and "(m te)" in note


def test_a_cvqa_setting_whose_every_row_is_an_error_reads_failed(tmp_path):
    obj = cvqa_obj("m", 0.0)
    obj["variants"] = {name: _with_counts(entry, 21, 0.0) for name, entry in obj["variants"].items()}
    obj["variants"]["loc-local"] = _with_counts(obj["variants"]["loc-local"], 0, 100.0)
    obj["variants"]["loc-local"].update(value=0.0, ci95=[0.0, 0.0])
    obj.update(n_valid=0, format_error_rate=25.0)  # so the cell has no headline
    other = copy.deepcopy(cvqa_obj("n", 5.0))
    other["breakdown"]["country_language"]["India-Telugu"].update(n_valid=0, format_error_rate=100.0)
    tables = _report(tmp_path, [obj, other], kinds={"cvqa": "cvqa"})
    rows = md_rows(tables / "cvqa.md")
    assert rows[f"m{DAGGER}"] == ["failed"] * 5  # a failed cell: its word in every column, as before
    assert rows["n"][0] == "45.0 [30.0, 50.0]"
    pairs = md_rows(tables / "cvqa-pairs.md")
    assert pairs["India-Telugu"][1] == f"failed{DAGGER}" and pairs["Japan-Japanese"][1] == "55.0 [0.0, 100.0]"
    assert "n India-Telugu 100.0% (failed)" in (tables / "cvqa-pairs.md").read_text()
    # the variants table names the setting that failed
    variants = {(r["model"], r["variant"]): r for r in read_csv(tables / "variants.csv")}
    assert variants[("m", "loc-local")]["value"] == "" and variants[("m", "loc-en")]["value"] == "40.0"


def test_a_cvqa_setting_above_the_threshold_is_marked(tmp_path):
    obj = cvqa_obj("m", 0.0)
    obj["variants"]["noloc-en"] = _with_counts(obj["variants"]["noloc-en"], 10, 52.381)
    tables = _report(tmp_path, [obj], kinds={"cvqa": "cvqa"})
    rows = md_rows(tables / "cvqa.md")
    assert rows["m"] == [
        "40.0 [30.0, 50.0]",
        "30.0 [20.0, 40.0]",
        f"20.0 [10.0, 30.0]{DAGGER}",
        "10.0 [0.0, 20.0]",
        "25.0 [15.0, 35.0]",
    ]
    assert "m noloc-en 52.4%" in (tables / "cvqa.md").read_text()


def test_a_dance_subset_whose_every_row_is_an_error_reads_failed(tmp_path):
    obj = dance_obj(
        "clip", {"test-seen riddle-to-image": (60.0, 40.0, 80.0), "test-seen image-to-riddle": (0, 0, 0)}
    )
    obj["breakdown"]["subset"]["test-seen image-to-riddle"].update(n_valid=0, format_error_rate=100.0)
    tables = _report(tmp_path, [obj], kinds={"dance": "dance"})
    assert md_rows(tables / "dance.md")["clip"] == [
        "60.0 [40.0, 80.0]",
        f"failed{DAGGER}",
        "40.0 [30.0, 50.0]",
    ]
    row = read_csv(tables / "dance.csv")[0]
    assert row["test-seen_image-to-riddle"] == "" and row["flagged"] == "False"
    text = (tables / "dance.md").read_text()
    assert "failed in a subset's column" in text and "clip test-seen image-to-riddle" in text
