"""Where every stage reads and writes. The Snakefile, dvc.yaml and the CLI all follow this layout."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping


def bench_dir(data_dir: Path, bench: str) -> Path:
    return Path(data_dir) / bench


def model_dir(data_dir: Path, model: str) -> Path:
    return Path(data_dir) / "models" / model


def source_stamps_dir(data_dir: Path) -> Path:
    """The stamps of the grid's benchmark sources (`vlmgrid stamp-sources`), one `<bench>.json` each: DVC's
    prepare stages depend on them, so an edit of a local source's files prepares that benchmark again. The
    leading dot keeps the folder apart from the benchmark folders (a benchmark name cannot start with one)."""
    return Path(data_dir) / ".source-stamps"


def source_stamp_path(data_dir: Path, bench: str) -> Path:
    return source_stamps_dir(data_dir) / f"{bench}.json"


def logs_dir(results_dir: Path) -> Path:
    """The workflow's job logs and benchmark (timing) files: each grid keeps its own, beside its results."""
    return Path(results_dir) / "logs"


def predictions_path(results_dir: Path, model: str, bench: str) -> Path:
    return Path(results_dir) / "predictions" / model / f"{bench}.parquet"


def partial_dir(results_dir: Path, model: str, bench: str) -> Path:
    """Parts of an unfinished inference job; removed once the predictions file is complete."""
    return Path(results_dir) / "partial" / model / bench


def shard_path(results_dir: Path, model: str, bench: str, index: int, count: int) -> Path:
    """One shard's predictions (shard `index` of `count`, from 1); `vlmgrid merge-shards` joins them."""
    return Path(results_dir) / "shards" / model / bench / f"{index}-of-{count}.parquet"


def shard_partial_dir(results_dir: Path, model: str, bench: str, index: int, count: int) -> Path:
    """Parts of an unfinished shard job, beside its shard file: a whole cell's parts folder is its own job's."""
    return Path(results_dir) / "shards" / model / bench / f"{index}-of-{count}.parts"


def score_path(results_dir: Path, model: str, bench: str) -> Path:
    return Path(results_dir) / "scores" / model / f"{bench}.json"


def submission_path(score_file: Path, variant: str) -> Path:
    """A leaderboard submission table written beside the score file of a benchmark whose labels are hidden."""
    score_file = Path(score_file)
    return score_file.with_name(f"{score_file.stem}.submission-{variant}.csv")


def tables_dir(results_dir: Path) -> Path:
    return Path(results_dir) / "tables"


def figures_dir(results_dir: Path) -> Path:
    return Path(results_dir) / "figures"


def partial_report_dir(results_dir: Path) -> Path:
    """Where `vlmgrid report --allow-missing` writes its tables/ and figures/: never the report's own files, so
    a grid with missing cells never looks complete (and its real report is still made once they are there)."""
    return Path(results_dir) / "report-partial"


REPORT_TABLES = ("main.md", "main.tex", "main.csv", "breakdown.md", "breakdown.csv", "variants.md", "variants.csv",
                 "cells.md", "cells.csv")
REPORT_FIGURES = ("main.png", "main.pdf")
_CAPTIONS = {"main": "main_table", "breakdown": "breakdown", "variants": "variants", "cells": "cells"}

# The paper tables and figures a benchmark kind adds to the report: (folder, file stem, suffixes, caption), one
# set per benchmark of that kind. Written only when the grid has such a benchmark.
PAPER_FILES: dict[str, tuple[tuple[str, str, tuple[str, ...], str], ...]] = {
    "kaleidoscope": (
        ("tables", "kaleidoscope", ("md", "tex", "csv"), "kaleidoscope_table"),
        ("figures", "kaleidoscope", ("png", "pdf"), "kaleidoscope_figure"),
    ),
    "cvqa": (
        ("tables", "cvqa", ("md", "tex", "csv"), "cvqa_table"),
        ("tables", "cvqa-pairs", ("md", "tex", "csv"), "cvqa_pairs_table"),
        ("figures", "cvqa-pairs", ("png", "pdf"), "cvqa_pairs_figure"),
    ),
    "dance": (
        ("tables", "dance", ("md", "tex", "csv"), "dance_table"),
    ),
}


def paper_stem(stem: str, benchmark: str, same_kind: int) -> str:
    """The file stem of one benchmark's paper table: the kind's own name ("kaleidoscope") when the grid has one
    benchmark of that kind, else the benchmark's name after it ("kaleidoscope-<benchmark>")."""
    return stem if same_kind == 1 else f"{stem}-{benchmark}"


def report_files(results_dir: Path, kinds: Mapping[str, str]) -> list[tuple[Path, str]]:
    """Every file `vlmgrid report` writes for a grid whose benchmarks have these kinds ({benchmark: kind}, grid
    order), each with the caption that describes it (a name in workflow/report/)."""
    files = [(tables_dir(results_dir) / name, _CAPTIONS[name.split(".")[0]]) for name in REPORT_TABLES]
    files += [(figures_dir(results_dir) / name, "main_figure") for name in REPORT_FIGURES]
    for kind, entries in PAPER_FILES.items():
        benchmarks = [name for name, k in kinds.items() if k == kind]
        for benchmark in benchmarks:
            for folder, stem, suffixes, caption in entries:
                name = paper_stem(stem, benchmark, len(benchmarks))
                files += [(Path(results_dir) / folder / f"{name}.{suffix}", caption) for suffix in suffixes]
    return files
