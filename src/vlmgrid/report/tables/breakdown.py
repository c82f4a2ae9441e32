"""The breakdown table: per-group results (e.g. POPE's splits) of the benchmarks whose score files have them
(Markdown, CSV)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.tables.format import (
    DAGGER,
    DASH,
    FAILED,
    error_rate,
    fmt,
    fmt_count,
    fmt_estimate,
    md_table,
    threshold,
    typed_frame,
    with_batch_column,
    with_copy_columns,
)
from vlmgrid.report.tables.notes import batch_note, copy_note, coverage_note

BREAKDOWN_COLUMNS = [
    "model",
    "benchmark",
    "column",
    "group",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "format_error_rate",
    "flagged",
]


def _group_flag(grid: Grid, model: str, benchmark: str, group) -> tuple[float | None, float | None]:
    """(rate, flag) of a breakdown group: by its own format error rate where the score gives one, else by the
    cell's."""
    rate = group.format_error_rate
    if rate is None:
        return error_rate(grid, model, benchmark), grid.flag(model, benchmark)
    return rate, rate if rate > grid.flag_error_rate else None


def _breakdown_benchmarks(grid: Grid) -> list[tuple[str, list[str]]]:
    """Benchmarks with a breakdown in any of their score files, with their breakdown columns in order."""
    found = []
    for benchmark in grid.benchmarks:
        columns: list[str] = []
        for model in grid.models:
            cell = grid.cell(model, benchmark)
            if cell is not None:
                columns += [c for c in cell.breakdown if c not in columns]
        if columns:
            found.append((benchmark, columns))
    return found


def breakdown_frame(grid: Grid) -> pd.DataFrame:
    records = []
    for benchmark, columns in _breakdown_benchmarks(grid):
        for column in columns:
            for model in grid.models:
                cell = grid.cell(model, benchmark)
                if cell is None:
                    continue
                for group in cell.breakdown.get(column, []):
                    est = group.estimate
                    rate, flag = _group_flag(grid, model, benchmark, group)
                    records.append(
                        [
                            model,
                            benchmark,
                            column,
                            group.name,
                            group.metric,
                            est.value,
                            est.ci_low,
                            est.ci_high,
                            group.n,
                            rate,
                            None if rate is None else flag is not None,
                        ]
                    )
    frame = typed_frame(
        pd.DataFrame(records, columns=BREAKDOWN_COLUMNS),
        floats=("value", "ci_low", "ci_high", "format_error_rate"),
        ints=("n",),
        booleans=("flagged",),
    )
    return with_copy_columns(grid, with_batch_column(grid, frame))


def breakdown_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {markdown_text(title)}: breakdown\n"]
    found = _breakdown_benchmarks(grid)
    if not found:
        parts.append("No benchmark of this grid has a breakdown.\n")
        return "\n".join(parts)
    marked = failed = False
    for benchmark, columns in found:
        metric = grid.metric(benchmark) or ""
        parts.append(f"## {benchmark}\n")
        for column in columns:
            header = ["Model", column, "Metric", "Value [95% CI]", "n", "n_valid", "Format errors (%)"]
            rows = []
            for model in grid.models:
                gone = grid.failed.get((model, benchmark))
                if gone is not None:  # no number, but its rate says why
                    failed = True
                    rows.append(
                        [
                            model,
                            "(all)",
                            metric_label(gone.metric),
                            FAILED + DAGGER,
                            fmt_count(gone.n),
                            fmt_count(gone.n_valid),
                            fmt(gone.format_error_rate),
                        ]
                    )
                cell = grid.cell(model, benchmark)
                if cell is None:
                    continue
                marked = marked or grid.flag(model, benchmark) is not None
                rows.append(
                    [
                        model,
                        "(all)",
                        metric_label(cell.metric),
                        fmt_estimate(grid.marked(model, benchmark, cell.estimate)),
                        fmt_count(cell.n),
                        fmt_count(cell.n_valid),
                        fmt(cell.format_error_rate),
                    ]
                )
                for group in cell.breakdown.get(column, []):
                    _, flag = _group_flag(grid, model, benchmark, group)
                    marked = marked or flag is not None
                    rows.append(
                        [
                            model,
                            group.name,
                            metric_label(group.metric),
                            # the group's own rate where it has one, the cell's other marks
                            fmt_estimate(replace(grid.marked(model, benchmark, group.estimate), flag=flag)),
                            fmt_count(group.n),
                            fmt_count(group.n_valid),
                            fmt(group.format_error_rate),
                        ]
                    )
            align = [":---", ":---", ":---"] + ["---:"] * 4
            parts.append(f"### by {markdown_text(column)} (headline: {metric_label(metric)})\n")
            parts.append(md_table(header, rows, align) + "\n")
    notes = ""
    if marked or failed:
        notes += (
            f" {DAGGER}: more than {threshold(grid)} of the prediction rows are errors or unparsable answers "
            f"(format errors: the group's own rate where the score gives one, else the cell's; a group row "
            f"without its own rate shows {DASH} there)."
        )
    shown = {benchmark for benchmark, _ in found}
    partial = coverage_note(grid, [entry for entry in grid.partial() if entry[1] in shown])
    if partial:
        notes += f" {partial}"
    batched = batch_note([entry for entry in grid.batch_dependents() if entry[1] in shown])
    if batched:
        notes += f" {batched}"
    copied = copy_note([entry for entry in grid.partial_copies() if entry[1] in shown])
    if copied:
        notes += f" {copied}"
    if failed:
        notes += (
            f" {FAILED}: every prediction row of the cell is an error or unparsable, so it has no number."
        )
    parts.append(
        f"Values in percent; 95% bootstrap CI in brackets; (all): the benchmark's headline; {DASH}: not "
        f"reported.{notes}\n"
    )
    return "\n".join(parts)
