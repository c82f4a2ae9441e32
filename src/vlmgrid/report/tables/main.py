"""The main table: models x benchmarks, each cell's headline with its 95% CI, then each model's average
(Markdown, LaTeX, CSV)."""

from __future__ import annotations

import html

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.comparisons import ALPHA, Comparisons
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import METRIC_NOTES, count_range, metric_label
from vlmgrid.report.tables.format import (
    AVERAGE,
    DASH,
    HIDDEN_NOTE,
    NA_NOTE,
    Entry,
    batch_flag,
    copy_columns,
    emphasis,
    entry_value,
    error_rate,
    estimate_frame,
    flagged,
    fmt_estimate,
    is_flagged,
    latex_cell,
    latex_escape,
    latex_name,
    latex_table,
    md_table,
    model_status,
    status,
)
from vlmgrid.report.tables.notes import (
    batch_note,
    copy_note,
    coverage_note,
    flag_note,
    status_notes,
    tool_reading_note,
)

# The decimals the score files round their numbers to (docs/formats.md); the average columns of the CSV are
# rounded alike, so an average does not read as more precise than the cells it is computed from.
DECIMALS = 4

# Marks of a cell significantly better / worse than the reference model (superscript plus / minus).
BETTER, WORSE = "\u207a", "\u207b"


def _has_number(grid: Grid, model: str, benchmark: str) -> bool:
    """Whether the cell shows a number (not a status word such as missing or failed, nor a dash)."""
    return entry_value(cell_entry(grid, model, benchmark)) is not None


def versus_reference(grid: Grid, comparisons: Comparisons, model: str, benchmark: str) -> int:
    """`Comparisons.versus_reference`, but 0 where the model's cell or the reference model's has no number in
    the grid: a cell without a number is never marked better or worse, and none is marked against one."""
    side = comparisons.versus_reference(model, benchmark)
    if side and not (
        _has_number(grid, model, benchmark) and _has_number(grid, comparisons.reference_model, benchmark)
    ):
        return 0
    return side


def reference_marks(grid: Grid, comparisons: Comparisons | None, model: str) -> list[str]:
    """Per benchmark of the row, then its average: BETTER / WORSE where the model is significantly better /
    worse than the reference model (Holm-adjusted p < 0.05 over the pair's benchmarks, and a difference of at
    least the minimum detectable one) and both cells have a number, else ""."""
    if comparisons is None:
        return [""] * (len(grid.benchmarks) + 1)
    marks = {1: BETTER, -1: WORSE, 0: ""}
    return [marks[versus_reference(grid, comparisons, model, benchmark)] for benchmark in grid.benchmarks] + [
        ""
    ]


def reference_note(comparisons: Comparisons | None) -> str:
    """The legend's sentence on the marks; "" when there are no comparisons to speak of."""
    if comparisons is None or not comparisons.any_numbers():
        return ""
    if not comparisons.reference_model:
        return (
            " No cell is marked for significance: the config names no report.reference_model (the "
            "comparisons table compares every pair of models)."
        )
    return (
        f" {BETTER} / {WORSE}: significantly better / worse than the reference model "
        f"{comparisons.reference_model} (paired permutation test, Holm-adjusted p < {ALPHA:g} over the "
        f"benchmarks of the pair, and a difference of at least the minimum detectable one; the comparisons "
        f"table gives the differences)."
    )


def benchmark_header(grid: Grid, benchmark: str) -> str:
    metric = grid.metric(benchmark)
    return f"{benchmark} ({metric_label(metric)})" if metric else benchmark


def legend(grid: Grid) -> str:
    samples = count_range(grid.bootstrap_samples(), spec="")
    boot = f" ({samples} bootstrap samples)" if samples else ""
    metrics = {grid.metric(benchmark) for benchmark in grid.benchmarks}
    notes = "".join(f" {METRIC_NOTES[m]}." for m in sorted(metrics - {None}) if m in METRIC_NOTES)
    na = f" {NA_NOTE}" if grid.not_applicable else ""
    hidden = f" {HIDDEN_NOTE}" if grid.hidden else ""
    averages = any(
        model_status(grid, m) is None and grid.average(m) is not None and grid.model_flag(m) is not None
        for m in grid.models
    )
    partial = any(model_status(grid, m) is None and grid.model_coverage(m) is not None for m in grid.models)
    batched = any(model_status(grid, m) is None and grid.model_batch_dependent(m) for m in grid.models)
    copied = any(model_status(grid, m) is None and grid.model_partial_copy(m) for m in grid.models)
    flags = " ".join(
        part
        for part in (
            flag_note(grid, grid.flagged(), average=averages),
            coverage_note(grid, grid.partial(), average=partial),
            batch_note(grid.batch_dependents(), average=batched),
            copy_note(grid.partial_copies(), average=copied),
            status_notes(grid, average=True),
            tool_reading_note(grid.tool_readings()),
        )
        if part
    )
    return (
        f"Values in percent; 95% bootstrap CI in brackets{boot}; {AVERAGE}: mean over the benchmarks, "
        f"CI from the averaged bootstrap draws; {DASH}: not in the grid.{na}{hidden}"
        + (f" {flags}" if flags else "")
        + notes
    )


def cell_entry(grid: Grid, model: str, benchmark: str) -> Entry:
    """The headline of a cell: its estimate (with the cell's marks, `Grid.marked`), a status word, or None
    when it is not in the grid."""
    word = status(grid, model, benchmark)
    if word is not None:
        return word
    cell = grid.cell(model, benchmark)
    return None if cell is None else grid.marked(model, benchmark, cell.estimate)


def average_entry(grid: Grid, model: str) -> Entry:
    """The model's average: a status word, None when it cannot be computed, else marked when a cell is (a
    partial cell marks it whether it is left out or taken in)."""
    return model_status(grid, model) or flagged(
        grid.average(model),
        grid.model_flag(model),
        grid.model_coverage(model),
        grid.model_batch_dependent(model),
        grid.model_partial_copy(model),
    )


def _rows(grid: Grid) -> list[tuple[str, list[Entry]]]:
    """Per model: its entry per benchmark, then its average."""
    return [
        (
            model,
            [cell_entry(grid, model, benchmark) for benchmark in grid.benchmarks]
            + [average_entry(grid, model)],
        )
        for model in grid.models
    ]


def main_markdown(grid: Grid, title: str, comparisons: Comparisons | None = None) -> str:
    header = ["Model"] + [benchmark_header(grid, b) for b in grid.benchmarks] + [AVERAGE]
    rows = [
        [model]
        + [fmt_estimate(e) + mark for e, mark in zip(estimates, reference_marks(grid, comparisons, model))]
        for model, estimates in _rows(grid)
    ]
    align = [":---"] + ["---:"] * (len(header) - 1)
    return (
        f"# {markdown_text(title)}\n\n{md_table(header, rows, align)}\n\n"
        f"{legend(grid)}{reference_note(comparisons)}\n"
    )


def main_html(grid: Grid, title: str, comparisons: Comparisons | None = None) -> str:
    """The Markdown table's cells turned a quarter (benchmarks as rows, models as columns), as an HTML
    fragment with the legend open under it: the Snakemake report's first page shows it under the main figure.
    Turned, it keeps each value and its CI on one line and fits a laptop's screen in width (a column per
    model, not per benchmark); the figure above has the models as rows."""
    rows = _rows(grid)
    signs = {model: reference_marks(grid, comparisons, model) for model, _ in rows}
    labels = [benchmark_header(grid, b) for b in grid.benchmarks] + [AVERAGE]
    turned = [
        [label] + [fmt_estimate(entries[j]) + signs[model][j] for model, entries in rows]
        for j, label in enumerate(labels)
    ]
    table = pd.DataFrame(turned, columns=["Benchmark"] + [model for model, _ in rows]).to_html(
        index=False, border=0, classes="vlmgrid-main"
    )
    return (
        f"<div><p><b>{html.escape(title)}</b></p>\n{table}</div>\n"
        f"<details open><summary>Legend</summary><p>{html.escape(legend(grid) + reference_note(comparisons))}"
        f"</p></details>\n"
    )


def main_latex(grid: Grid, title: str, comparisons: Comparisons | None = None) -> str:
    """Benchmarks as columns, named on one header row and their metric on the next; per column the best value
    bold and the second underlined, each CI under its value; a wide grid is split into blocks
    (`latex_table`)."""
    rows = _rows(grid)
    columns = [[entries[j] for _, entries in rows] for j in range(len(grid.benchmarks) + 1)]
    marks = [emphasis([entry_value(entry) for entry in column]) for column in columns]
    metrics = [grid.metric(b) for b in grid.benchmarks]
    header = [["Model"] + [latex_name(b) for b in grid.benchmarks] + [AVERAGE]]
    if any(metrics):
        header.append(
            [""]
            + [rf"{{\footnotesize {latex_escape(metric_label(m))}}}" if m else "" for m in metrics]
            + [""]
        )
    body = []
    for i, (model, entries) in enumerate(rows):
        signs = reference_marks(grid, comparisons, model)
        body.append(
            [latex_name(model)]
            + [latex_cell(entry, marks[j][i], signs[j]) for j, entry in enumerate(entries)]
        )
    return latex_table(
        f"{title}. {legend(grid)}{reference_note(comparisons)} Bold: the best value of a column; "
        f"underlined: the second.",
        "main",
        header,
        body,
    )


def main_frame(grid: Grid, comparisons: Comparisons | None = None) -> pd.DataFrame:
    """The values and CIs, then per benchmark the cell's format error rate and whether it is marked, then
    whether each average is marked (empty where there is no number to mark); with a reference model, per
    benchmark "better" / "worse" where the cell is significantly so (empty otherwise)."""
    rows = _rows(grid)
    frame = estimate_frame("model", list(grid.benchmarks) + ["average"], rows)
    averages = ["average", "average_ci_low", "average_ci_high"]
    frame[averages] = frame[averages].round(DECIMALS)
    for benchmark in grid.benchmarks:
        frame[f"{benchmark}_format_error_rate"] = pd.array(
            [error_rate(grid, model, benchmark) for model in grid.models], dtype="float64"
        )
        frame[f"{benchmark}_flagged"] = pd.array(
            [is_flagged(grid, model, benchmark) for model in grid.models], dtype="boolean"
        )
    frame["average_flagged"] = pd.array(
        [None if entry_value(entries[-1]) is None else entries[-1].flag is not None for _, entries in rows],
        dtype="boolean",
    )
    for benchmark in grid.benchmarks:
        if any(grid.coverage(model, benchmark) for model in grid.models):
            covered = [grid.coverage(model, benchmark) for model in grid.models]
            frame[f"{benchmark}_answered"] = pd.array([c[0] if c else None for c in covered], dtype="Int64")
            frame[f"{benchmark}_items"] = pd.array([c[1] if c else None for c in covered], dtype="Int64")
    for benchmark in grid.benchmarks:
        if any(grid.partial_copy(model, benchmark) for model in grid.models):
            columns = copy_columns([grid.partial_copy(model, benchmark) for model in grid.models])
            frame[f"{benchmark}_copy_items"] = columns["copy_items"]
            frame[f"{benchmark}_published_items"] = columns["published_items"]
    if any(grid.batch_dependent(model, benchmark) for model in grid.models for benchmark in grid.benchmarks):
        # only when a cell is marked: a grid without the check (or where it found nothing) keeps its columns
        for benchmark in grid.benchmarks:
            frame[f"{benchmark}_batch_dependent"] = pd.array(
                [batch_flag(grid, model, benchmark) for model in grid.models], dtype="boolean"
            )
    if comparisons is not None and comparisons.reference_model:
        words = {1: "better", -1: "worse", 0: None}
        for benchmark in grid.benchmarks:
            frame[f"{benchmark}_vs_reference"] = pd.array(
                [words[versus_reference(grid, comparisons, model, benchmark)] for model in grid.models],
                dtype="string",
            )
    return frame
