"""A cell that answers a subset of its benchmark (an imported MME eval-tool folder): marked with its coverage
in every table and the main figure, kept out of its model's average unless `report.partial_cells: include`."""

from __future__ import annotations

import json

import pytest
from helpers.common import heatmap_cells
from helpers.report import build, latex_rows, md_rows, read_csv, write_scores

from vlmgrid.report import load_grid
from vlmgrid.report.figures import main_heatmap, main_note
from vlmgrid.report.tables.main import main_markdown

PARTIAL = "\u2021"
TEX_PARTIAL = r"$^{\ddagger}$"


def make_partial(files: dict, model: str, bench: str, answered: int, total: int) -> None:
    path = files[(model, bench)]
    obj = json.loads(path.read_text())
    obj["coverage"], obj["n"] = {"answered": answered, "total": total}, answered
    path.write_text(json.dumps(obj))


@pytest.fixture
def partial_files(tmp_path):
    """big-vlm on sqa_img (20.04) answers 2,350 of 2,374 items; every other cell answers all."""
    files = write_scores(tmp_path)
    make_partial(files, "big-vlm", "sqa_img", 2350, 2374)
    return files


def test_the_main_table_marks_the_cell_and_leaves_it_out_of_the_average(tmp_path, partial_files):
    build(tmp_path, partial_files)
    rows = md_rows(tmp_path / "tables" / "main.md")
    assert rows["big-vlm"][1] == f"20.0 [15.5, 25.0]{PARTIAL}"
    assert (
        PARTIAL not in "".join(rows["clip_tiny"]) and PARTIAL not in rows["big-vlm"][0] + rows["big-vlm"][2]
    )
    assert rows["big-vlm"][3].endswith(PARTIAL)
    legend = (tmp_path / "tables" / "main.md").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert "big-vlm on sqa_img 2,350 of 2,374 answered" in legend
    assert "leaves such a cell out (report.partial_cells: exclude)" in legend
    csv = {row["model"]: row for row in read_csv(tmp_path / "tables" / "main.csv")}
    # Hand-computed: big-vlm's average over pope 51.2 and flowers 33.3 only = 42.25; with sqa_img's 20.04 it
    # would be 34.8467. clip_tiny's keeps its three cells: (50 + 25 + 18) / 3 = 31.0.
    assert float(csv["big-vlm"]["average"]) == pytest.approx(42.25)
    assert float(csv["clip_tiny"]["average"]) == pytest.approx(31.0)
    assert csv["big-vlm"]["sqa_img_answered"] == "2350" and csv["big-vlm"]["sqa_img_items"] == "2374"
    assert csv["clip_tiny"]["sqa_img_answered"] == "" and "pope-fixture_answered" not in csv["big-vlm"]
    tex = (tmp_path / "tables" / "main.tex").read_text(encoding="utf-8")
    cells = latex_rows(tex)["big-vlm"]
    assert cells[2].endswith(TEX_PARTIAL) and TEX_PARTIAL not in cells[1]
    assert r"big-vlm on sqa\_img 2,350 of 2,374 answered" in tex


def test_include_puts_the_cell_back_into_the_average(tmp_path, partial_files):
    build(tmp_path, partial_files, partial_cells="include")
    csv = {row["model"]: row for row in read_csv(tmp_path / "tables" / "main.csv")}
    assert float(csv["big-vlm"]["average"]) == pytest.approx((51.2 + 20.04 + 33.3) / 3)
    legend = (tmp_path / "tables" / "main.md").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert "takes such a cell in as it is (report.partial_cells: include)" in legend
    assert md_rows(tmp_path / "tables" / "main.md")["big-vlm"][1].endswith(PARTIAL)  # still marked


def test_a_grid_without_partial_cells_has_no_mark_nor_note(tmp_path):
    files = write_scores(tmp_path)
    build(tmp_path, files)
    text = (tmp_path / "tables" / "main.md").read_text(encoding="utf-8")
    assert PARTIAL not in text and "answered" not in text
    assert "sqa_img_answered" not in read_csv(tmp_path / "tables" / "main.csv")[0]


def test_the_cells_and_breakdown_tables_give_the_coverage(tmp_path, partial_files):
    build(tmp_path, partial_files)
    cells = tmp_path.joinpath("tables", "cells.md").read_text(encoding="utf-8")
    assert f"| 2350 of 2374{PARTIAL} |" in cells and "big-vlm on sqa_img 2,350 of 2,374 answered" in cells
    rows = {(r["model"], r["benchmark"]): r for r in read_csv(tmp_path / "tables" / "cells.csv")}
    assert rows[("big-vlm", "sqa_img")]["n"] == "2350" and rows[("big-vlm", "sqa_img")]["items"] == "2374"
    assert rows[("clip_tiny", "sqa_img")]["items"] == rows[("clip_tiny", "sqa_img")]["n"] == "90"


def test_the_main_figure_marks_the_cell_and_its_note_says_so(tmp_path, partial_files):
    grid = load_grid(partial_files, ["clip_tiny", "big-vlm"], ["pope-fixture", "sqa_img", "flowers"])
    cells = heatmap_cells(main_heatmap(grid, "t"), ["clip_tiny", "big-vlm"])
    assert cells[("big-vlm", "sqa_img")][0] == f"20.0{PARTIAL}"
    assert cells[("clip_tiny", "sqa_img")][0] == "25.0"
    assert cells[("big-vlm", "Average")][0] == f"42.2{PARTIAL}"  # 42.25, the partial cell left out
    note = main_note(grid)
    assert (
        f"{PARTIAL}: the cell answers a subset" in note
        and "big-vlm on sqa_img 2,350 of 2,374 answered" in note
    )
    assert main_markdown(grid, "t").count(PARTIAL) >= 3  # the cell, the average, the note
