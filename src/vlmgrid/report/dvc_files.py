"""The report's files for DVC: a metrics file (`dvc metrics show`, `dvc exp show`) and a plots file
(`dvc plots show`), both from the `Grid` (docs/formats.md).

`metrics(grid)` nests {benchmark: {model: {<metric>: value, ci_low, ci_high, n, format_error_rate}}}, so DVC
prints columns like `pope-fixture.random.f1`, and adds each model's average under `Average` (a name no benchmark
can have: the config's names are lower case). A cell without a number (n/a, hidden, failed, missing) gives its
status instead and never a value: DVC prints a missing value as "-", which a 0 would hide. A partial cell (one
that answers a subset of its benchmark) adds its `coverage` {answered, total}, which DVC prints as the columns
`<benchmark>.<model>.coverage.answered` and `.total`, and its model's average says `partial_cells` (exclude: it
is over the other benchmarks; include: it takes the cell in). `headline_rows(grid)`
is the long table the plot draws: one row per cell with a number, none for the others.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from vlmgrid import fileio
from vlmgrid.report.grid import Grid
from vlmgrid.report.score_file import Estimate

METRICS_FILE = "metrics.json"
PLOTS_FILE = Path("plots") / "headline.csv"
AVERAGE = "Average"
PLOT_COLUMNS = ("model", "benchmark", "cell", "metric", "value", "ci_low", "ci_high")


def _rounded(number: float | None) -> float | None:
    # Four decimals of a percent: the tables show one, and the bootstrap interval is far wider than this.
    return None if number is None else round(float(number), 4)


def _status(grid: Grid, model: str, benchmark: str) -> str | None:
    """Why a cell of the grid has no number; None when it has one or is not in the grid."""
    if grid.is_not_applicable(model, benchmark):
        return "n/a"
    if grid.is_hidden(model, benchmark):
        return "hidden"
    if grid.is_failed(model, benchmark):
        return "failed"
    if grid.is_missing(model, benchmark):
        return "missing"
    return None


def _estimate(name: str, estimate: Estimate) -> dict:
    return {name: _rounded(estimate.value), "ci_low": _rounded(estimate.ci_low),
            "ci_high": _rounded(estimate.ci_high)}


def metrics(grid: Grid) -> dict:
    """The metrics file's object: per benchmark and model the headline (named by its metric), its 95% CI, n and
    format error rate; a cell without a number gives {"status": ...}; each model's average under `Average`
    (left out when the model has none: a benchmark without a number, or draws that cannot be averaged)."""
    tree: dict = {}
    for benchmark in grid.benchmarks:
        cells = {}
        for model in grid.models:
            cell = grid.cell(model, benchmark)
            if cell is not None:
                cells[model] = {**_estimate(cell.metric, cell.estimate), "n": cell.n,
                                "format_error_rate": _rounded(cell.format_error_rate)}
                if cell.coverage is not None:  # a partial cell: its number is over the answered items alone
                    cells[model]["coverage"] = {"answered": cell.coverage[0], "total": cell.coverage[1]}
            elif (status := _status(grid, model, benchmark)) is not None:
                cells[model] = {"status": status}
        if cells:
            tree[benchmark] = cells
    averages = {model: _estimate("mean", average) for model in grid.models
                if (average := grid.average(model)) is not None}
    for model, average in averages.items():
        if grid.model_coverage(model) is not None:  # what the average did with the model's partial cells
            average["partial_cells"] = grid.partial_cells
    if averages:
        tree[AVERAGE] = averages
    return tree


def headline_rows(grid: Grid) -> list[dict]:
    """The plot's rows, grid order: model, benchmark, `cell` ("benchmark / model", the plot's axis), metric,
    value and CI; only cells with a number."""
    rows = []
    for benchmark in grid.benchmarks:
        for model in grid.models:
            cell = grid.cell(model, benchmark)
            if cell is None:
                continue
            rows.append({"model": model, "benchmark": benchmark, "cell": f"{benchmark} / {model}",
                         "metric": cell.metric, "value": _rounded(cell.estimate.value),
                         "ci_low": _rounded(cell.estimate.ci_low), "ci_high": _rounded(cell.estimate.ci_high)})
    return rows


def write_dvc_files(grid: Grid, results_dir: Path) -> list[Path]:
    """Write the metrics and plots files under results_dir, atomically; returns their paths."""
    metrics_path = Path(results_dir) / METRICS_FILE
    fileio.write_json(metrics_path, metrics(grid))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=PLOT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(headline_rows(grid))
    plots_path = Path(results_dir) / PLOTS_FILE
    fileio.write_text(plots_path, buffer.getvalue())
    return [metrics_path, plots_path]
