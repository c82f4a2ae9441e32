"""perf/speed.py's CPU side: `snakemake -n` of the largest grid, and the default grid cold and with nothing to
do."""

from __future__ import annotations

from pathlib import Path

from gridrun import REPO, snakemake, workflow_copy
from speedreport import result_row

GRID_CONFIGS = ("config.yaml", "carpe.yaml", "kaleidoscope.yaml", "cvqa.yaml", "dance.yaml")


def largest_grid(repo: Path = REPO) -> dict:
    """A grid config of every catalog model x every benchmark of the shipped grid configs."""
    import yaml

    config = yaml.safe_load((repo / "config" / "carpe.yaml").read_text(encoding="utf-8"))
    benchmarks: dict = {}
    for name in GRID_CONFIGS:
        benchmarks.update(yaml.safe_load((repo / "config" / name).read_text(encoding="utf-8"))["benchmarks"])
    models = yaml.safe_load((repo / "config" / "models.yaml").read_text(encoding="utf-8"))["models"]
    config.update(
        benchmarks=benchmarks,
        models=models,
        results_dir="results/largest",
        grid={"models": list(models), "benchmarks": list(benchmarks)},
    )
    return config


def dag_section(work: Path) -> list[dict]:
    import yaml

    root = workflow_copy(work / "dag")
    config = largest_grid(REPO)
    (root / "config" / "largest.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    cells = len(config["grid"]["models"]) * len(config["grid"]["benchmarks"])
    seconds = snakemake(["-n", "--quiet", "--configfile", "config/largest.yaml"], root).wall_s
    return [
        result_row(
            "dag",
            f"`snakemake -n`, largest grid ({len(config['grid']['models'])} models x "
            f"{len(config['grid']['benchmarks'])} benchmarks = {cells} cells)",
            "s",
            seconds,
        )
    ]


def workflow_section(work: Path) -> list[dict]:
    root = workflow_copy(work / "grid")
    cold = snakemake(["--cores", "2"], root).wall_s
    noop = snakemake(["--cores", "2"], root).wall_s
    return [
        result_row("workflow cold", "default grid, cold (`snakemake --cores 2`)", "s", cold),
        result_row("workflow no-op", "default grid, nothing to do", "s", noop),
    ]
