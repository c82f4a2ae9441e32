"""The variants table: per prompt variant, for the cells that ran several, and their mean (Markdown, CSV)."""

from __future__ import annotations

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.score_file import Estimate
from vlmgrid.report.tables.format import (
    error_rate,
    fmt_estimate,
    is_flagged,
    md_table,
    natural_key,
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
    "format_error_rate",
    "flagged",
]
MEAN_VARIANT = "(mean)"


def _variant_rows(grid: Grid) -> list[tuple[str, str, str, str, Estimate]]:
    """(model, benchmark, variant, metric, estimate) for the cells with several variants, then their mean; a
    marked cell's estimates are marked (the score has no per-variant format error rate)."""
    rows = []
    for model in grid.models:
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark)
            if cell is None or len(cell.variants) < 2:
                continue
            for name in sorted(cell.variants, key=natural_key):
                rows.append(
                    (model, benchmark, name, cell.metric, grid.marked(model, benchmark, cell.variants[name]))
                )
            rows.append(
                (model, benchmark, MEAN_VARIANT, cell.metric, grid.marked(model, benchmark, cell.estimate))
            )
    return rows


def variants_frame(grid: Grid) -> pd.DataFrame:
    records = [
        [m, b, v, metric, e.value, e.ci_low, e.ci_high, error_rate(grid, m, b), is_flagged(grid, m, b)]
        for m, b, v, metric, e in _variant_rows(grid)
    ]
    frame = typed_frame(
        pd.DataFrame(records, columns=VARIANT_COLUMNS),
        floats=("value", "ci_low", "ci_high", "format_error_rate"),
        booleans=("flagged",),
    )
    return with_copy_columns(grid, with_batch_column(grid, frame))


def variants_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {markdown_text(title)}: prompt variants\n"]
    rows = _variant_rows(grid)
    if not rows:
        parts.append("No cell of this grid has more than one prompt variant.\n")
        return "\n".join(parts)
    header = ["Model", "Benchmark", "Variant", "Metric", "Value [95% CI]"]
    table = [[m, b, v, metric_label(metric), fmt_estimate(e)] for m, b, v, metric, e in rows]
    parts.append(md_table(header, table, [":---"] * 4 + ["---:"]) + "\n")
    shown = {(m, b) for m, b, *_ in rows}
    note = " ".join(
        part
        for part in (
            flag_note(grid, [entry for entry in grid.flagged() if (entry[0], entry[1]) in shown]),
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
