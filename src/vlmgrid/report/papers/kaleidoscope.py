"""Kaleidoscope's paper table (models x accuracy, format errors, modality and language columns) and its figure
(accuracy per language)."""

from __future__ import annotations

from pathlib import Path

from vlmgrid.report.bars import write_grouped_bars
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.papers.base import (
    Marks,
    Shown,
    Table,
    answered_note,
    cell_notes,
    figure_note,
    group_names,
    group_part,
    group_series,
    join_caption,
    model_rows,
    part_value,
    shown_groups,
    write_table,
)
from vlmgrid.report.score_file import Estimate, ScoreCell
from vlmgrid.report.tables.format import DASH, Entry

MODALITIES = ("multimodal", "text-only")


def kaleidoscope_table(grid: Grid, benchmark: str) -> Table:
    """Models x (accuracy, format error rate, multimodal, text-only, one column per language)."""
    languages = group_names(grid, benchmark, "language")

    def entries_of(cell: ScoreCell) -> list[Entry]:
        errors = cell.metrics.get("format_error_rate") or Estimate(cell.format_error_rate)
        return (
            [cell.estimate, errors]
            + [part_value(grid, cell.model, benchmark, group_part(cell, "modality", m)) for m in MODALITIES]
            + [part_value(grid, cell.model, benchmark, group_part(cell, "language", g)) for g in languages]
        )

    rows = model_rows(grid, benchmark, 2 + len(MODALITIES) + len(languages), entries_of)
    caption = join_caption(
        f"Values in percent, 95% bootstrap CI in brackets. Accuracy: the mean over languages of each "
        "language's accuracy, an answer that could not be read counting as wrong (the headline); format "
        f"errors: the share of all questions without a valid answer; {', '.join(MODALITIES)} and the "
        f"language columns: accuracy within that group. {DASH}: not reported.",
        answered_note(grid, benchmark),
        cell_notes(grid, benchmark, _shown(grid, benchmark, languages), "group"),
    )
    return Table(
        title=f"Kaleidoscope: {benchmark}",
        row_header="Model",
        columns=["Accuracy", "Format errors", "Multimodal", "Text-only", *languages],
        csv_columns=["accuracy", "format_error_rate", "multimodal", "text_only", *languages],
        rows=rows,
        caption=caption,
        row_marks=Marks.of(grid, benchmark, grid.models),
        lower_is_better=["Format errors"],
    )


def _shown(grid: Grid, benchmark: str, languages: list[str]) -> list[Shown]:
    """The modality and language groups the table shows."""
    return shown_groups(grid, benchmark, "modality", MODALITIES) + shown_groups(
        grid, benchmark, "language", languages
    )


def write_kaleidoscope(
    grid: Grid, benchmark: str, stems: dict[str, str], tables_dir: Path, figures_dir: Path
) -> list[Path]:
    written = write_table(
        kaleidoscope_table(grid, benchmark), tables_dir, stems["kaleidoscope"], ("md", "tex", "csv")
    )
    languages = group_names(grid, benchmark, "language")
    written += write_grouped_bars(
        figures_dir,
        stems["kaleidoscope"],
        f"Kaleidoscope ({benchmark}): accuracy per language",
        languages,
        group_series(grid, benchmark, languages, "language"),
        f"{metric_label(grid.metric(benchmark) or 'accuracy')} (%)",
        note=figure_note(grid, benchmark, shown_groups(grid, benchmark, "language", languages), "language"),
    )
    return written
