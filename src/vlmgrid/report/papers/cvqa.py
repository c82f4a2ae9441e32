"""CVQA's paper tables (models x prompt settings; country-language pairs x models) and its figure (accuracy
per country-language pair)."""

from __future__ import annotations

from pathlib import Path

from vlmgrid.report.bars import write_grouped_bars
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.papers.base import (
    Marks,
    Table,
    answered_note,
    cell_notes,
    entry_status,
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
from vlmgrid.report.tables.format import Entry, natural_key

# The paper's four prompt settings, in its order; a score with other variant names lists them naturally
# sorted.
CVQA_SETTINGS = {
    "loc-en": "location-aware prompt, English question and options",
    "loc-local": "location-aware prompt, local-language question and options",
    "noloc-en": "location-agnostic prompt, English",
    "noloc-local": "location-agnostic prompt, local language",
}
PAIR = "country_language"
MEAN = "Mean"
ALL = "(all)"


def _settings(grid: Grid, benchmark: str) -> list[str]:
    found: set[str] = set()
    for model in grid.models:
        cell = grid.cell(model, benchmark)
        if cell is not None:
            found.update(cell.variants)
        hidden = grid.hidden.get((model, benchmark))
        if hidden is not None:
            found.update(hidden.submission)  # one submission file per setting
    known = [name for name in CVQA_SETTINGS if name in found]
    return known + sorted(found - set(known), key=natural_key)


def cvqa_table(grid: Grid, benchmark: str) -> Table:
    """Models x (each prompt setting, their mean: the headline)."""
    settings = _settings(grid, benchmark)
    rows = model_rows(
        grid,
        benchmark,
        len(settings) + 1,
        lambda cell: (
            [part_value(grid, cell.model, benchmark, cell.variants.get(s)) for s in settings]
            + [cell.estimate]
        ),
    )
    shown = [
        (model, name, cell.variants[name])
        for model in grid.models
        if (cell := grid.cell(model, benchmark)) is not None
        for name in settings
        if name in cell.variants
    ]
    legend = "; ".join(f"{s}: {CVQA_SETTINGS[s]}" for s in settings if s in CVQA_SETTINGS)
    caption = join_caption(
        f"Accuracy in percent, 95% bootstrap CI in brackets, per prompt setting ({legend}); "
        f"{MEAN}: the mean over the settings (the headline, its CI from the averaged bootstrap draws)."
        if legend
        else f"Accuracy in percent, 95% bootstrap CI in brackets, per prompt setting; {MEAN}: their mean.",
        answered_note(grid, benchmark),
        cell_notes(grid, benchmark, shown, "prompt setting"),
    )
    return Table(
        title=f"CVQA: {benchmark}",
        row_header="Model",
        columns=[*settings, MEAN],
        csv_columns=[*settings, "mean"],
        rows=rows,
        caption=caption,
        row_marks=Marks.of(grid, benchmark, grid.models),
    )


def cvqa_pairs_table(grid: Grid, benchmark: str) -> Table:
    """Country-language pairs x models: each pair's accuracy, the mean over the settings, then every item."""
    pairs = sorted(group_names(grid, benchmark, PAIR))
    models = list(grid.models)
    rows = []
    for pair in [*pairs, ALL]:
        entries: list[Entry] = []
        for model in models:
            status = entry_status(grid, model, benchmark)
            cell = grid.cell(model, benchmark)
            if status is not None:
                entries.append(status)
            else:
                entries.append(
                    cell.estimate
                    if pair == ALL
                    else part_value(grid, model, benchmark, group_part(cell, PAIR, pair))
                )
        rows.append((pair, entries))
    caption = join_caption(
        f"Accuracy in percent per country-language pair, 95% bootstrap CI in brackets: the mean over "
        f"the prompt settings, as the score file's breakdown gives it; {ALL}: every item (the headline).",
        cell_notes(grid, benchmark, shown_groups(grid, benchmark, PAIR, pairs), "country-language pair"),
    )
    return Table(
        title=f"CVQA per country-language pair: {benchmark}",
        row_header="Country-language",
        columns=models,
        csv_columns=models,
        rows=rows,
        caption=caption,
        column_marks=Marks.of(grid, benchmark, models),
    )


def write_cvqa(
    grid: Grid, benchmark: str, stems: dict[str, str], tables_dir: Path, figures_dir: Path
) -> list[Path]:
    written = write_table(cvqa_table(grid, benchmark), tables_dir, stems["cvqa"], ("md", "tex", "csv"))
    written += write_table(
        cvqa_pairs_table(grid, benchmark), tables_dir, stems["cvqa-pairs"], ("md", "tex", "csv")
    )
    pairs = sorted(group_names(grid, benchmark, PAIR))
    written += write_grouped_bars(
        figures_dir,
        stems["cvqa-pairs"],
        f"CVQA ({benchmark}): accuracy per country-language pair (mean over settings)",
        pairs,
        group_series(grid, benchmark, pairs, PAIR),
        f"{metric_label(grid.metric(benchmark) or 'accuracy')} (%)",
        note=figure_note(
            grid, benchmark, shown_groups(grid, benchmark, PAIR, pairs), "country-language pair"
        ),
    )
    return written
