"""A cell whose score gives the publishing tool's own reading (`tool_reading`, VLMEvalKit's matcher and judge
on ScienceQA) shows it beside the headline: in the main table's legend (Markdown, LaTeX), the cells table's
note and its CSV columns; a grid without one keeps its tables."""

from __future__ import annotations

import json

from helpers.report import build, plain_latex, read_csv, write_scores


def with_tool_reading(files: dict) -> None:
    path = files[("big-vlm", "sqa_img")]
    obj = json.loads(path.read_text())
    obj["tool_reading"] = {"tool": "VLMEvalKit", "value": 94.1, "n_read_by_judge": 210, "source": "verdicts"}
    path.write_text(json.dumps(obj))


def test_the_tool_reading_is_named_beside_the_headline_in_the_notes_and_cells_csv(tmp_path):
    files = write_scores(tmp_path)
    with_tool_reading(files)
    build(tmp_path, files)
    tables = tmp_path / "tables"
    said = "big-vlm on sqa_img 94.1 by VLMEvalKit (210 answers read by its judge), 20.0 by the official rule"
    assert said in (tables / "main.md").read_text(encoding="utf-8")
    assert said.replace("sqa_img", r"sqa\_img") in plain_latex(
        (tables / "main.tex").read_text(encoding="utf-8")
    )
    assert said in (tables / "cells.md").read_text(encoding="utf-8")
    rows = {(row["model"], row["benchmark"]): row for row in read_csv(tables / "cells.csv")}
    assert (
        rows[("big-vlm", "sqa_img")]["tool_reading"],
        rows[("big-vlm", "sqa_img")]["tool_reading_tool"],
        rows[("big-vlm", "sqa_img")]["tool_reading_by_judge"],
    ) == ("94.1", "VLMEvalKit", "210")
    assert rows[("clip_tiny", "sqa_img")]["tool_reading"] == ""


def test_a_grid_without_a_tool_reading_keeps_its_tables(tmp_path):
    build(tmp_path, write_scores(tmp_path))
    tables = tmp_path / "tables"
    assert "tool_reading" not in read_csv(tables / "cells.csv")[0]
    assert "reads them its own way" not in (tables / "main.md").read_text(encoding="utf-8")
