"""Where every stage reads and writes. The Snakefile, dvc.yaml and the CLI all follow this layout.

The files of the report are listed by `vlmgrid.report.outputs.report_files` (its paper tables depend on the
grid's benchmark kinds)."""

from __future__ import annotations

from pathlib import Path


def bench_dir(data_dir: Path, bench: str) -> Path:
    return Path(data_dir) / bench


def model_dir(data_dir: Path, model: str) -> Path:
    return Path(data_dir) / "models" / model


def source_stamps_dir(data_dir: Path) -> Path:
    """The stamps of the grid's benchmark sources (`vlmgrid stamp-sources`), one `<bench>.json` each: DVC's
    grid stage depends on them, so `dvc status` sees an edit of a local source's files. The
    leading dot keeps the folder apart from the benchmark folders (a benchmark name cannot start with one)."""
    return Path(data_dir) / ".source-stamps"


def grid_settings_stamp(stamps_dir: Path) -> Path:
    """The grid's own settings (its title, bootstrap and batch check's size, with vlmgrid's defaults where the
    config leaves them out) and each model's settings, in a stamps folder: DVC's grid stage tracks them there
    as params, as DVC has no optional params of the config."""
    return Path(stamps_dir) / "grid" / "settings.json"


def model_stamps_dir(stamps_dir: Path) -> Path:
    """The stamps of the grid's model sources (a local checkpoint's files), one `<model>.json` each, in a
    stamps folder."""
    return Path(stamps_dir) / "models"


def source_stamp_path(data_dir: Path, bench: str) -> Path:
    return source_stamps_dir(data_dir) / f"{bench}.json"


def logs_dir(results_dir: Path) -> Path:
    """The workflow's job logs and benchmark (timing) files: each grid keeps its own, beside its results."""
    return Path(results_dir) / "logs"


def serve_log_path(results_dir: Path, model: str, bench: str, shard: tuple[int, int] | None = None) -> Path:
    """The output of the server a served model's infer job starts (for the whole cell, or shard (index,
    count))."""
    folder = logs_dir(results_dir) / "serve" / model
    return folder / bench / f"{shard[0]}-of-{shard[1]}.log" if shard else folder / f"{bench}.log"


def predictions_path(results_dir: Path, model: str, bench: str) -> Path:
    return Path(results_dir) / "predictions" / model / f"{bench}.parquet"


def partial_dir(results_dir: Path, model: str, bench: str) -> Path:
    """Parts of an unfinished inference job; removed once the predictions file is complete."""
    return Path(results_dir) / "partial" / model / bench


def shard_path(results_dir: Path, model: str, bench: str, index: int, count: int) -> Path:
    """One shard's predictions (shard `index` of `count`, from 1); `vlmgrid merge-shards` joins them."""
    return Path(results_dir) / "shards" / model / bench / f"{index}-of-{count}.parquet"


def shard_partial_dir(results_dir: Path, model: str, bench: str, index: int, count: int) -> Path:
    """Parts of an unfinished shard job, beside its shard file: a whole cell's parts folder is its own
    job's."""
    return Path(results_dir) / "shards" / model / bench / f"{index}-of-{count}.parts"


def score_path(results_dir: Path, model: str, bench: str) -> Path:
    return Path(results_dir) / "scores" / model / f"{bench}.json"


def submission_path(score_file: Path, variant: str) -> Path:
    """A leaderboard submission table written beside the score file of a benchmark whose labels are hidden."""
    score_file = Path(score_file)
    return score_file.with_name(f"{score_file.stem}.submission-{variant}.csv")


def comparison_path(results_dir: Path, bench: str) -> Path:
    """The paired comparisons of the grid's models on one benchmark (`vlmgrid compare`)."""
    return Path(results_dir) / "comparisons" / f"{bench}.json"


def tables_dir(results_dir: Path) -> Path:
    return Path(results_dir) / "tables"


def figures_dir(results_dir: Path) -> Path:
    return Path(results_dir) / "figures"


def inspect_page_path(results_dir: Path, bench: str) -> Path:
    """The benchmark's inspect page (`vlmgrid inspect`): its items and every grid model's answers."""
    return Path(results_dir) / "inspect" / bench / "index.html"


def partial_report_dir(results_dir: Path) -> Path:
    """Where `vlmgrid report --allow-missing` writes its tables/ and figures/: never the report's own files,
    so a grid with missing cells never looks complete (and its real report is still made once they are
    there)."""
    return Path(results_dir) / "report-partial"
