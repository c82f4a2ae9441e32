"""The variants table: per prompt variant, for the cells that ran several, and their mean (Markdown, CSV)."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.tables.format import (
    DAGGER,
    FAILED,
    Entry,
    entry_value,
    error_rate,
    fmt_estimate,
    is_flagged,
    md_table,
    natural_key,
    part_entry,
    status,
    threshold,
    typed_frame,
    with_batch_column,
    with_copy_columns,
)
from vlmgrid.report.tables.notes import batch_note, copy_note, coverage_note, flag_note

VARIANT_COLUMNS = [
    "model",
    "benchmark",
    "variant",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n_valid",
    "format_error_rate",
    "flagged",
]
MEAN_VARIANT = "(mean)"


class _Row(NamedTuple):
    model: str
    benchmark: str
    variant: str
    metric: str
    entry: Entry  # the estimate with its marks, or "failed"
    n_valid: int | None
    rate: float | None  # the variant's own format error rate, the cell's where the score gives none
    flagged: bool | None
    own_rate: bool  # whether `rate` is the variant's own


def _variant_rows(grid: Grid) -> list[_Row]:
    """The rows of the cells with several variants (a failed cell's too: which variant failed), then each
    cell's mean. A variant is marked by its own format error rate where the score gives one, else by its
    cell's, and reads "failed" where it has no number."""
    rows = []
    for model in grid.models:
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark) or grid.failed.get((model, benchmark))
            if cell is None or len(cell.variants) < 2:
                continue
            for name in sorted(cell.variants, key=natural_key):
                variant = cell.variants[name]
                rate = grid.part_rate(model, benchmark, variant)
                rows.append(
                    _Row(
                        model,
                        benchmark,
                        name,
                        cell.metric,
                        part_entry(grid, model, benchmark, variant),
                        variant.n_valid,
                        rate,
                        None if rate is None else grid.part_flag(model, benchmark, variant) is not None,
                        variant.format_error_rate is not None,
                    )
                )
            mean = status(grid, model, benchmark) or grid.marked(model, benchmark, cell.estimate)
            rows.append(
                _Row(
                    model,
                    benchmark,
                    MEAN_VARIANT,
                    cell.metric,
                    mean,
                    cell.n_valid,
                    error_rate(grid, model, benchmark),
                    is_flagged(grid, model, benchmark),
                    False,
                )
            )
    return rows


def variants_frame(grid: Grid) -> pd.DataFrame:
    """One row per variant and mean; a row without a number (failed) has empty value columns."""
    records = []
    for row in _variant_rows(grid):
        est = row.entry if entry_value(row.entry) is not None else None
        values = (None, None, None) if est is None else (est.value, est.ci_low, est.ci_high)
        records.append(
            [row.model, row.benchmark, row.variant, row.metric, *values, row.n_valid, row.rate, row.flagged]
        )
    frame = typed_frame(
        pd.DataFrame(records, columns=VARIANT_COLUMNS),
        floats=("value", "ci_low", "ci_high", "format_error_rate"),
        ints=("n_valid",),
        booleans=("flagged",),
    )
    return with_copy_columns(grid, with_batch_column(grid, frame))


def _part_notes(grid: Grid, rows: list[_Row]) -> list[str]:
    """The notes on the variants marked by their own format error rate, and on those without a number."""
    notes = []
    own = [row for row in rows if row.own_rate and row.flagged]
    if own:
        listed = ", ".join(
            f"{row.model} on {row.benchmark} {row.variant} {row.rate:.1f}%"
            + (f" ({FAILED})" if isinstance(row.entry, str) else "")
            for row in own
        )
        notes.append(
            f"{DAGGER} on a variant: more than {threshold(grid)} of the variant's prediction rows are "
            f"errors or unparsable answers: {listed}."
        )
    if any(isinstance(row.entry, str) for row in rows):
        notes.append(
            f"{FAILED}: no number: every prediction row of the variant is an error or unparsable, or, in a "
            f"{MEAN_VARIANT} row, no item of the cell has a readable answer in every variant."
        )
    return notes


def variants_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {markdown_text(title)}: prompt variants\n"]
    rows = _variant_rows(grid)
    if not rows:
        parts.append("No cell of this grid has more than one prompt variant.\n")
        return "\n".join(parts)
    header = ["Model", "Benchmark", "Variant", "Metric", "Value [95% CI]"]
    table = [[r.model, r.benchmark, r.variant, metric_label(r.metric), fmt_estimate(r.entry)] for r in rows]
    parts.append(md_table(header, table, [":---"] * 4 + ["---:"]) + "\n")
    shown = {(r.model, r.benchmark) for r in rows}
    note = " ".join(
        part
        for part in (
            flag_note(grid, [entry for entry in grid.flagged() if (entry[0], entry[1]) in shown]),
            *_part_notes(grid, rows),
            coverage_note(grid, [entry for entry in grid.partial() if (entry[0], entry[1]) in shown]),
            batch_note([entry for entry in grid.batch_dependents() if (entry[0], entry[1]) in shown]),
            copy_note([entry for entry in grid.partial_copies() if (entry[0], entry[1]) in shown]),
        )
        if part
    )
    parts.append(
        "Values in percent; 95% bootstrap CI in brackets; "
        f"{MEAN_VARIANT}: the cell's headline, the mean over "
        f"its variants (its CI from their averaged bootstrap draws)." + (f" {note}" if note else "") + "\n"
    )
    return "\n".join(parts)
