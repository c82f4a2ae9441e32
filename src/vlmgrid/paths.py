"""Where every stage reads and writes. The Snakefile, dvc.yaml and the CLI all follow this layout."""

from __future__ import annotations

from pathlib import Path


def bench_dir(data_dir: Path, bench: str) -> Path:
    return Path(data_dir) / bench


def model_dir(data_dir: Path, model: str) -> Path:
    return Path(data_dir) / "models" / model


def predictions_path(results_dir: Path, model: str, bench: str) -> Path:
    return Path(results_dir) / "predictions" / model / f"{bench}.parquet"


def partial_dir(results_dir: Path, model: str, bench: str) -> Path:
    """Parts of an unfinished inference job; removed once the predictions file is complete."""
    return Path(results_dir) / "partial" / model / bench


def score_path(results_dir: Path, model: str, bench: str) -> Path:
    return Path(results_dir) / "scores" / model / f"{bench}.json"


def tables_dir(results_dir: Path) -> Path:
    return Path(results_dir) / "tables"


def figures_dir(results_dir: Path) -> Path:
    return Path(results_dir) / "figures"


REPORT_TABLES = ("main.md", "main.tex", "main.csv", "breakdown.md", "breakdown.csv", "variants.md", "variants.csv")
REPORT_FIGURES = ("main.png", "main.pdf")
