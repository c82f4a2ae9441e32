"""The report's metrics files for DVC (`dvc metrics show`, `dvc metrics diff`, `dvc exp show`), from the
`Grid` (docs/formats.md).

One small file per benchmark, `metrics/<benchmark>.json` = {"metric": <its headline metric>, <model>:
headline}, and one of the models' averages, `metrics/Average.json` = {"metric": "mean", <model>: mean}: DVC
prints a metrics file as a row and its keys as columns, so `dvc metrics show` reads as a table of benchmarks
by models. The headline alone: the CI, n, error rate and coverage of a cell are in the report's tables
(cells.csv). A cell without a number (n/a, hidden, failed, missing) gives its status instead and never a
value, which a 0 would hide; a model without an average gives the main table's word for it (failed, missing,
n/a, hidden) or "-". A mark of the main table
that says a number is not what it seems is a key of its own, the numbers staying numbers for
`dvc metrics diff`: `batch_dependent` names the models whose cell (in `Average.json`, whose average) the main
table marks with the not-equal sign, and `items` and `published` count a benchmark's copy where it holds fewer
items than the published benchmark (short names: `dvc metrics show` makes each key a column, and the default
grid's table stays within 120 columns); in `Average.json`, `partial` names the models whose average leaves out
or takes in a cell that answers part of its benchmark.
"""

from __future__ import annotations

from pathlib import Path

from vlmgrid import fileio
from vlmgrid.report.grid import Grid
from vlmgrid.report.score_file import PartialCopy

METRICS_DIR = Path("metrics")
AVERAGE = "Average"  # the averages' file: no benchmark can be called that (the config's names are lower case)
NO_AVERAGE = "-"


def metrics_file(results_dir: Path, name: str) -> Path:
    """Where a benchmark's metrics (or, named AVERAGE, the averages) lie under a grid's results_dir."""
    return Path(results_dir) / METRICS_DIR / f"{name}.json"


def metrics_names(benchmarks: list[str]) -> list[str]:
    """The metrics files of a grid, grid order: one per benchmark, then the averages."""
    return [*benchmarks, AVERAGE]


def _rounded(number: float | None) -> float | None:
    # Four decimals of a percent: the tables show one, and the bootstrap interval is far wider than this.
    return None if number is None else round(float(number), 4)


def _models(models: list[str], key: str = "batch_dependent") -> dict[str, str]:
    """The `key` naming these models ("a, b"); none when there are none."""
    return {key: ", ".join(models)} if models else {}


def _copy(copies: list[PartialCopy]) -> dict[str, int]:
    """`items` and `published`: the item counts of the benchmark's partial copy and of the published
    benchmark; none when its cells were scored on a
    whole one. The cells of a benchmark share its prepared copy; where their score files say otherwise (one
    scored before the copy changed), the smallest is given: the tables mark each cell with its own."""
    if not copies:
        return {}
    copy = min(copies, key=lambda c: (c.items, c.published))
    return {"items": copy.items, "published": copy.published}


def metrics(grid: Grid) -> dict[str, dict]:
    """{file name: its object}: per benchmark its metric and each model's headline (or the cell's status),
    then the averages (AVERAGE) with "-" for a model that has none (a benchmark without a number, or draws
    that cannot be averaged). A model without a cell in the grid is left out of the benchmark's file; the
    models whose number the main table marks as batch-dependent are named under `batch_dependent`, and a
    partial copy of the benchmark is counted under `items` and `published`."""
    files: dict[str, dict] = {}
    for benchmark in grid.benchmarks:
        row: dict = {"metric": grid.metric(benchmark) or "-"}
        for model in grid.models:
            cell = grid.cell(model, benchmark)
            if cell is not None:
                row[model] = _rounded(cell.estimate.value)
            elif (status := grid.status(model, benchmark)) is not None:
                row[model] = status
        row.update(
            _models(
                [
                    model
                    for model in grid.models
                    if grid.cell(model, benchmark) is not None and grid.batch_dependent(model, benchmark)
                ]
            )
        )
        row.update(
            _copy(
                [
                    copy
                    for model, name, copy in grid.partial_copies()
                    if name == benchmark and grid.cell(model, benchmark) is not None
                ]
            )
        )
        files[benchmark] = row
    from vlmgrid.report.tables.format import model_status  # pandas: not when the report's files are listed

    averages: dict = {"metric": "mean"}
    averaged = []
    for model in grid.models:
        # as the main table: a cell without a number (failed, missing, n/a, hidden) leaves no average
        status, average = model_status(grid, model), grid.average(model)
        if status is None and average is not None:
            averaged.append(model)
        averages[model] = status or (NO_AVERAGE if average is None else _rounded(average.value))
    averages.update(_models([model for model in averaged if grid.model_batch_dependent(model)]))
    # the averages that leave out (partial_cells: exclude) or take in a cell answering part of its benchmark
    averages.update(_models([model for model in averaged if grid.model_coverage(model)], "partial"))
    files[AVERAGE] = averages
    return files


def write_dvc_files(grid: Grid, results_dir: Path) -> list[Path]:
    """Write the metrics files under results_dir/metrics, atomically; returns their paths (grid order, then
    the averages)."""
    written = []
    for name, data in metrics(grid).items():
        path = metrics_file(results_dir, name)
        fileio.write_json(path, data)
        written.append(path)
    return written
