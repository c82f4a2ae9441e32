"""The report stage: the grid's score files -> its tables and figures (`vlmgrid.report`, docs/formats.md).

`vlmgrid.report.outputs.report_files` lists the files it writes, so the workflow knows them before it runs.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vlmgrid import paths
from vlmgrid.config import Config

log = logging.getLogger(__name__)


def write_report(config: Config, allow_missing: bool) -> list[Path]:
    """`vlmgrid report`: read every cell's score file (and each benchmark's comparison file, where there is
    one) and write the report; logs and returns the files written.

    With `allow_missing`, a cell without a score file reads "missing" instead of failing the report, and the
    tables and figures go to `paths.partial_report_dir` instead: the grid's report files only ever hold it
    whole. So does a cell whose score file was made from other predictions than the cell has now (none, after
    a failed rerun): its number is no longer the cell's.
    """
    from vlmgrid.report import build_report

    published = published_numbers(config)
    score_files = {
        (cell.model, cell.benchmark): paths.score_path(config.results_dir, cell.model, cell.benchmark)
        for cell in config.cells
    }
    # With missing cells the tables go to a folder of their own: the grid's report files only ever hold it
    # whole.
    root = paths.partial_report_dir(config.results_dir) if allow_missing else Path(config.results_dir)
    written = build_report(
        score_files,
        config.models,
        config.benchmarks,
        paths.tables_dir(root),
        paths.figures_dir(root),
        title=config.title,
        kinds={name: config.benchmark(name)["kind"] for name in config.benchmarks},
        flag_error_rate=float(config.report["flag_error_rate"]),
        partial_cells=config.report.get("partial_cells", "exclude"),
        allow_missing=allow_missing,
        published=published,
        results_dir=root,
        comparison_files={
            bench: paths.comparison_path(config.results_dir, bench) for bench in config.benchmarks
        },
        reference_model=config.report.get("reference_model"),
        outdated=outdated_cells(config) if allow_missing else (),
    )
    for path in written:
        log.info(f"wrote {path}")
    return written


def outdated_cells(config: Config) -> list[tuple[str, str]]:
    """The cells whose score file records other predictions than the cell's own file holds, or whose
    predictions file is gone: a rerun whose inference failed (Snakemake removes its output) leaves the score
    of the predictions before it, which is not the cell's result."""
    from vlmgrid.fileio import sha256_file
    from vlmgrid.report.score_file import recorded_predictions_sha

    outdated = []
    for cell in config.cells:
        score = paths.score_path(config.results_dir, cell.model, cell.benchmark)
        recorded = recorded_predictions_sha(score)
        if recorded is None:
            continue  # no score file (missing anyway), or none that records its predictions
        predictions = paths.predictions_path(config.results_dir, cell.model, cell.benchmark)
        if not predictions.is_file() or sha256_file(predictions) != recorded:
            outdated.append((cell.model, cell.benchmark))
    return outdated


def benchmark_split(settings: dict) -> str | None:
    """The split a grid benchmark holds: its source's `split`, else the one its kind publishes (a fixture or a
    local copy stands for that one); None for a kind without a hub copy."""
    from vlmgrid.benchmarks.catalog import BENCHMARKS

    split = settings["source"].get("split")
    if split is None:
        split = (BENCHMARKS.get(settings["kind"]).hub or {}).get("split")
    return split


def published_numbers(config: Config):
    """The papers' numbers in the config's `report.reported` folder, with the paper's name of each grid model
    that sets `reported_as` and each grid benchmark's split: what the report compares with."""
    from vlmgrid.report.reported import Published, load_reported

    folder = Path(config.report["reported"])
    return Published(
        rows=load_reported(folder),
        reported_as={
            name: config.model(name)["reported_as"]
            for name in config.models
            if "reported_as" in config.model(name)
        },
        splits={name: benchmark_split(config.benchmark(name)) for name in config.benchmarks},
        folder=folder,
    )
