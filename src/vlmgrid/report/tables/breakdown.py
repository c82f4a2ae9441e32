"""The breakdown table: per-group results (e.g. POPE's splits) of the benchmarks whose score files have them
(Markdown, CSV)."""

from __future__ import annotations

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.tables.format import (
    DAGGER,
    DASH,
    FAILED,
    fmt,
    fmt_count,
    fmt_estimate,
    md_table,
    part_entry,
    status,
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
    "n_valid",
    "format_error_rate",
    "flagged",
]


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
                    # a failed group's value columns are empty, as a failed cell's are in main.csv
                    est = None if grid.part_failed(model, benchmark, group) else group.estimate
                    rate = grid.part_rate(model, benchmark, group)
                    records.append(
                        [
                            model,
                            benchmark,
                            column,
                            group.name,
                            group.metric,
                            *((None, None, None) if est is None else (est.value, est.ci_low, est.ci_high)),
                            group.n,
                            group.n_valid,
                            rate,
                            None if rate is None else grid.part_flag(model, benchmark, group) is not None,
                        ]
                    )
    frame = typed_frame(
        pd.DataFrame(records, columns=BREAKDOWN_COLUMNS),
        floats=("value", "ci_low", "ci_high", "format_error_rate"),
        ints=("n", "n_valid"),
        booleans=("flagged",),
    )
    return with_copy_columns(grid, with_batch_column(grid, frame))


def breakdown_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {markdown_text(title)}: breakdown\n"]
    found = _breakdown_benchmarks(grid)
    if not found:
        parts.append("No benchmark of this grid has a breakdown.\n")
        return "\n".join(parts)
    marked = failed = failed_part = False
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
                    marked = marked or grid.flag(model, benchmark) is not None
                    rows.append(
                        [
                            model,
                            "(all)",
                            metric_label(gone.metric),
                            status(grid, model, benchmark),
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
                    # the group's own rate where it has one, the cell's other marks; "failed" without a number
                    marked = marked or grid.part_flag(model, benchmark, group) is not None
                    failed_part = failed_part or grid.part_failed(model, benchmark, group)
                    rows.append(
                        [
                            model,
                            group.name,
                            metric_label(group.metric),
                            fmt_estimate(part_entry(grid, model, benchmark, group)),
                            fmt_count(group.n),
                            fmt_count(group.n_valid),
                            fmt(group.format_error_rate),
                        ]
                    )
            align = [":---", ":---", ":---"] + ["---:"] * 4
            parts.append(f"### by {markdown_text(column)} (headline: {metric_label(metric)})\n")
            parts.append(md_table(header, rows, align) + "\n")
    notes = ""
    if marked:
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
    if failed or failed_part:
        notes += (
            f" {FAILED}: every prediction row of the {'cell' if failed else 'group'}"
            f"{' or group' if failed and failed_part else ''} is an error or unparsable (with several prompt "
            f"variants: no item has a readable answer in all of them), so it has no number."
        )
    parts.append(
        f"Values in percent; 95% bootstrap CI in brackets; (all): the benchmark's headline; {DASH}: not "
        f"reported.{notes}\n"
    )
    return "\n".join(parts)
