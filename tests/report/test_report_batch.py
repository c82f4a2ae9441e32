"""A cell whose batch check found differing answers (its score file's `invariance.differing`) is marked with
the not-equal sign in every table, figure and note, as a format-error flag is; a cell whose check found none,
or that records no check, is not."""

from __future__ import annotations

import copy
import json

from helpers.common import heatmap_cells
from helpers.report import (
    _capture_figures,
    _write,
    build,
    cvqa_obj,
    kaleidoscope_obj,
    latex_rows,
    md_rows,
    plain_latex,
    read_csv,
    write_scores,
)

from vlmgrid.report import build_report

NE = "\u2260"
TEX_NE = r"$^{\neq}$"


def _checked(obj: dict, differing: list[str]) -> dict:
    obj = copy.deepcopy(obj)
    obj["invariance"] = {
        "checked": 8,
        "same": 8 - len(differing),
        "differing": differing,
        "max_logprob_delta": None,
        "batch_size": 16,
    }
    return obj


def test_breakdown_variants_and_main_figure_mark_the_cell(tmp_path, monkeypatch):
    figures = _capture_figures(monkeypatch)
    files = write_scores(tmp_path)
    for model, differing in (("big-vlm", ["q1", "q7"]), ("clip_tiny", [])):
        obj = json.loads(files[(model, "pope-fixture")].read_text())
        obj["variants"] = {
            "a": {"value": 50.0, "ci95": [40.0, 60.0]},
            "b": {"value": 52.4, "ci95": [45.0, 60.0]},
        }
        files[(model, "pope-fixture")].write_text(json.dumps(_checked(obj, differing)))
    build(tmp_path, files)
    tables = tmp_path / "tables"
    breakdown = tables.joinpath("breakdown.md").read_text(encoding="utf-8")
    assert f"| big-vlm | (all) | F1 | 51.2 [44.0, 58.1]{NE} |" in breakdown
    assert f"| big-vlm | adversarial | F1 | 52.0 [32.0, 57.5]{NE} |" in breakdown
    assert "| clip_tiny | (all) | F1 | 50.0 [5.0, 85.0] |" in breakdown
    assert f"{NE}: answers depend on the batch" in breakdown and "big-vlm on pope-fixture 2 of 8" in breakdown
    variants = tables.joinpath("variants.md").read_text(encoding="utf-8")
    assert f"| big-vlm | pope-fixture | a | F1 | 50.0 [40.0, 60.0]{NE} |" in variants
    assert "| clip_tiny | pope-fixture | a | F1 | 50.0 [40.0, 60.0] |" in variants
    assert "big-vlm on pope-fixture 2 of 8" in variants and "clip_tiny on pope-fixture" not in variants
    # the main figure: the value carries the mark, and the note under it names the cell
    fig = figures[0]
    cells = heatmap_cells(fig, ["clip_tiny", "big-vlm"])
    assert cells[("big-vlm", "pope-fixture")][0].endswith(NE)
    assert not cells[("clip_tiny", "pope-fixture")][0].endswith(NE)
    note = " ".join(t.get_text() for t in [*fig.texts, *fig.axes[-1].texts]).replace("\n", " ")
    assert "answers depend on the batch" in note and "big-vlm on pope-fixture 2 of 8" in note


def test_a_grid_whose_checks_found_nothing_has_no_mark(tmp_path):
    files = write_scores(tmp_path)
    for path in files.values():
        path.write_text(json.dumps(_checked(json.loads(path.read_text()), [])))
    build(tmp_path, files)
    for path in (tmp_path / "tables").iterdir():
        text = path.read_text(encoding="utf-8")
        assert NE not in text and TEX_NE not in text and "depend on the batch" not in text, path.name


def test_kaleidoscope_table_and_figure_mark_the_model(tmp_path, monkeypatch):
    figures = _capture_figures(monkeypatch)
    langs = {"ar": (50.0, 0.0, 100.0), "te": (25.0, 0.0, 75.0)}
    objs = {
        model: {**kaleidoscope_obj(model, "kal", langs), "format_error_rate": 3.0}
        for model in ("vlm-a", "vlm-b")
    }
    files = {
        ("vlm-a", "kal"): _write(tmp_path, _checked(objs["vlm-a"], [])),
        ("vlm-b", "kal"): _write(tmp_path, _checked(objs["vlm-b"], ["x"])),
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
    assert "vlm-a" in rows and f"vlm-b{NE}" in rows and "vlm-b" not in rows
    assert "vlm-b on kal 1 of 8" in (tables / "kaleidoscope.md").read_text(encoding="utf-8")
    tex = (tables / "kaleidoscope.tex").read_text(encoding="utf-8")
    assert latex_rows(tex)[f"vlm-b{TEX_NE}"][1] == "30.0" and f"vlm-a{TEX_NE}" not in plain_latex(tex)
    assert [r["batch_dependent"] for r in read_csv(tables / "kaleidoscope.csv")] == ["False", "True"]
    fig = figures[-1]  # the per-language bars: the legend names the model with the mark, the note says why
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["vlm-a", f"vlm-b{NE}"]
    note = " ".join(t.get_text() for t in [*fig.texts, *fig.axes[-1].texts]).replace("\n", " ")
    assert "answers depend on the batch" in note and "vlm-b on kal 1 of 8" in note


def test_cvqa_pairs_mark_the_model_column(tmp_path):
    files = {
        ("vlm-a", "cvqa"): _write(tmp_path, cvqa_obj("vlm-a", 0.0)),  # no check recorded: unmarked
        ("vlm-b", "cvqa"): _write(tmp_path, _checked(cvqa_obj("vlm-b", 5.0), ["y", "z"])),
    }
    build_report(
        files, ["vlm-a", "vlm-b"], ["cvqa"], tmp_path / "tables", tmp_path / "figures", kinds={"cvqa": "cvqa"}
    )
    tables = tmp_path / "tables"
    assert f"vlm-b{NE}" in md_rows(tables / "cvqa.md")
    assert md_rows(tables / "cvqa-pairs.md")["Country-language"] == ["vlm-a", f"vlm-b{NE}"]
    assert f"vlm-b{TEX_NE}" in plain_latex((tables / "cvqa-pairs.tex").read_text(encoding="utf-8"))
    pairs_csv = read_csv(tables / "cvqa-pairs.csv")
    assert {r["vlm-b_batch_dependent"] for r in pairs_csv} == {"True"}
    assert {r["vlm-a_batch_dependent"] for r in pairs_csv} == {"False"}


def _pope_with_variants(files: dict, checks: dict[str, list[str]]) -> None:
    """Two prompt variants on each model's pope-fixture cell, and a batch check that found `checks[model]`."""
    for model, differing in checks.items():
        obj = json.loads(files[(model, "pope-fixture")].read_text())
        obj["variants"] = {
            "a": {"value": 50.0, "ci95": [40.0, 60.0]},
            "b": {"value": 52.4, "ci95": [45.0, 60.0]},
        }
        files[(model, "pope-fixture")].write_text(json.dumps(_checked(obj, differing)))


def test_the_breakdown_and_variants_csv_files_say_which_cells_depend_on_the_batch(tmp_path):
    files = write_scores(tmp_path)
    _pope_with_variants(files, {"big-vlm": ["q1", "q7"], "clip_tiny": []})
    build(tmp_path, files)
    tables = tmp_path / "tables"
    for name in ("breakdown.csv", "variants.csv"):
        rows = read_csv(tables / name)
        assert {(row["model"], row["batch_dependent"]) for row in rows} == {
            ("clip_tiny", "False"),
            ("big-vlm", "True"),
        }, name


def test_the_comparisons_tables_mark_the_value_of_a_batch_dependent_cell(tmp_path):
    from helpers.compare import write_comparison
    from helpers.report import BENCHES

    files = write_scores(tmp_path)
    files[("big-vlm", "sqa_img")].write_text(
        json.dumps(_checked(json.loads(files[("big-vlm", "sqa_img")].read_text()), ["q3"]))
    )
    comparisons = {
        bench: write_comparison(tmp_path / "results", bench, None, [("clip_tiny", "big-vlm", 4.0, 0.01)])
        for bench in BENCHES
    }
    build(tmp_path, files, comparison_files=comparisons)
    tables = tmp_path / "tables"
    md = tables.joinpath("comparisons.md").read_text(encoding="utf-8")
    # A (clip_tiny) 54.0 unmarked; B (big-vlm) 50.0 carries the mark on sqa_img alone, as in the main table
    assert "| clip_tiny | big-vlm | sqa_img | Acc. | 54.0 | 50.0\u2260 | +4.0 [1.0, 7.0] |" in md
    assert "| clip_tiny | big-vlm | pope-fixture | Acc. | 54.0 | 50.0 | +4.0 [1.0, 7.0] |" in md
    assert f"{NE}: answers depend on the batch" in md and "big-vlm on sqa_img 1 of 8" in md
    tex = plain_latex(tables.joinpath("comparisons.tex").read_text(encoding="utf-8"))
    assert f"50.0{TEX_NE}" in tex and tex.count(TEX_NE) == 2  # the cell, and the note in the caption
    rows = read_csv(tables / "comparisons.csv")
    assert [(row["benchmark"], row["batch_dependent_a"], row["batch_dependent_b"]) for row in rows] == [
        ("pope-fixture", "", ""),
        ("sqa_img", "", "True"),
        ("flowers", "", ""),
    ]
