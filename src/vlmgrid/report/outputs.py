"""Every file `vlmgrid report` writes, known before it runs: the workflow's report rule lists them as its
outputs.

Cheap to import (the Snakefile imports it on every run): no pandas, no matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vlmgrid import paths
from vlmgrid.report.dvc_files import metrics_file, metrics_names
from vlmgrid.report.papers import PAPER_LIST, paper_stem

REPORT_TABLES = (
    "main.md",
    "main.tex",
    "main.html",
    "main.csv",
    "breakdown.md",
    "breakdown.csv",
    "variants.md",
    "variants.csv",
    "cells.md",
    "cells.csv",
    "comparisons.md",
    "comparisons.tex",
    "comparisons.csv",
    "reported.md",
    "reported.tex",
    "reported.csv",
)
REPORT_FIGURES = ("main.png", "main.pdf", "main-embedded.html", "reported.png", "reported.pdf")
_CAPTIONS = {
    "main": "main_table",
    "breakdown": "breakdown",
    "variants": "variants",
    "cells": "cells",
    "comparisons": "comparisons",
    "reported": "reported",
}
_FIGURE_CAPTIONS = {"main": "main_figure", "main-embedded": "main_figure", "reported": "reported"}


def report_files(results_dir: Path, kinds: Mapping[str, str]) -> list[tuple[Path, str]]:
    """Every file `vlmgrid report` writes for a grid whose benchmarks have these kinds ({benchmark: kind},
    grid order), each with the caption that describes it (a name in workflow/report/)."""
    files = [(paths.tables_dir(results_dir) / name, _CAPTIONS[name.split(".")[0]]) for name in REPORT_TABLES]
    files += [
        (paths.figures_dir(results_dir) / name, _FIGURE_CAPTIONS[name.split(".")[0]])
        for name in REPORT_FIGURES
    ]
    for paper in PAPER_LIST:
        benchmarks = [name for name, k in kinds.items() if k == paper.name]
        for benchmark in benchmarks:
            for file in paper.files:
                name = paper_stem(file.stem, benchmark, len(benchmarks))
                files += [
                    (Path(results_dir) / file.folder / f"{name}.{suffix}", file.caption)
                    for suffix in file.suffixes
                ]
    # DVC's metrics files (dvc.yaml's grid stage lists their folder as its metrics)
    files += [(metrics_file(results_dir, name), "dvc_metrics") for name in metrics_names(list(kinds))]
    return files
