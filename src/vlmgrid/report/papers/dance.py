"""DANCE's paper table: models x (split, direction) Acc@50, then the headline."""

from __future__ import annotations

from pathlib import Path

from vlmgrid.report.grid import Grid
from vlmgrid.report.papers.base import (
    Marks,
    Table,
    answered_note,
    cell_notes,
    group_names,
    group_part,
    join_caption,
    model_rows,
    part_value,
    shown_groups,
    write_table,
)
from vlmgrid.report.tables.format import natural_key

DANCE_SPLITS = ("test-seen", "test-unseen")
DANCE_DIRECTIONS = ("riddle-to-image", "image-to-riddle")


def dance_table(grid: Grid, benchmark: str) -> Table:
    """Models x (test-seen, test-unseen) x (riddle -> image, image -> riddle) Acc@50, then the headline."""
    subsets = [f"{split} {direction}" for split in DANCE_SPLITS for direction in DANCE_DIRECTIONS]
    found = group_names(grid, benchmark, "subset")
    subsets = [s for s in subsets if s in found] + sorted(set(found) - set(subsets), key=natural_key)
    rows = model_rows(
        grid,
        benchmark,
        len(subsets) + 1,
        lambda cell: (
            [part_value(grid, cell.model, benchmark, group_part(cell, "subset", s)) for s in subsets]
            + [cell.estimate]
        ),
    )
    caption = join_caption(
        "Acc@50 in percent, 95% bootstrap CI in brackets: per query with n positives among its 50 "
        "candidates, the share of the positives ranked within the top n, averaged over the queries; per "
        "split (whether the riddle's knowledge triple occurs in training) and direction (a riddle ranks 50 "
        "pictures, a picture ranks 50 riddles); All: the mean of the two directions over both splits (the "
        "headline). The score files also hold hit@1 and hit@5 (the share of queries with a positive ranked "
        "first / within the top 5), recall@5 (the share of a query's positives ranked within its top 5, "
        "averaged over queries) and MRR (of the best-ranked positive).",
        answered_note(grid, benchmark),
        cell_notes(grid, benchmark, shown_groups(grid, benchmark, "subset", subsets), "subset"),
    )
    return Table(
        title=f"DANCE: {benchmark}",
        row_header="Model",
        columns=[
            s.replace("riddle-to-image", "riddle→image").replace("image-to-riddle", "image→riddle")
            for s in subsets
        ]
        + ["All"],
        csv_columns=[s.replace(" ", "_") for s in subsets] + ["all"],
        rows=rows,
        caption=caption,
        row_marks=Marks.of(grid, benchmark, grid.models),
    )


def write_dance(
    grid: Grid, benchmark: str, stems: dict[str, str], tables_dir: Path, figures_dir: Path
) -> list[Path]:
    return write_table(dance_table(grid, benchmark), tables_dir, stems["dance"], ("md", "tex", "csv"))
