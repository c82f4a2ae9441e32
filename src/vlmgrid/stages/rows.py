"""Whole rows of the grid in one command, their pieces side by side: DVC's stages.

DVC runs one stage at a time, so its pipeline has a stage per model (`vlmgrid row`: the model's cell on every
benchmark of the grid, inferred and scored) and one for all the comparisons and one for all the inspect pages
(`vlmgrid compare --all`, `vlmgrid inspect --all`), each running its pieces side by side
(`vlmgrid.stages.sidebyside`). The files are the ones the per-cell commands write, byte for byte.

A row's outputs persist between runs, so that adding a benchmark or changing one benchmark's data does not
answer every other cell again: a cell whose predictions file records exactly the inputs a run would use now
(the model's settings, the data's fingerprint, the protocol, the prompt sets, a checkpoint read in place, the
batch check's sample) and holds the rows vlmgrid wrote (the hash its metadata record) is left as it is, and
only scored again. The version of the code that wrote the file is no input: an edit of vlmgrid's code answers
no cell again.
"""

from __future__ import annotations

import logging
from functools import partial

from vlmgrid import paths
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import read_metadata, rows_intact
from vlmgrid.serving import recorded_settings
from vlmgrid.stages.sidebyside import Task, cpu_jobs, run_side_by_side

log = logging.getLogger(__name__)

__all__ = ["compare_all", "inspect_all", "predictions_current", "row_jobs", "run_row"]

# What a predictions file records of the inputs that made it (vlmgrid.cellrun.job.predictions_metadata)
_INPUT_KEYS = ("model", "benchmark", "model_settings", "data_fingerprint", "protocol", "prompts", "applicable")


def row_jobs(config: Config, model: str) -> int:
    """How many of a model's cells run at once: one per group of the GPUs its jobs hold, or on the CPU as many
    as the cores hold jobs of `infer.threads` threads."""
    from vlmgrid.gpu import visible_gpus
    from vlmgrid.stages.plan import gpus

    held = gpus(config, model)
    if held:
        return max(1, len(visible_gpus()) // held)
    return cpu_jobs(int(config.infer["threads"]))


def predictions_current(config: Config, model: str, benchmark: str) -> bool:
    """Whether the cell's predictions file is what inference would write now: it records the same inputs and
    holds the rows vlmgrid wrote (see the module's docstring). Anything unreadable, missing or edited counts as
    not current, so the cell runs again."""
    path = paths.predictions_path(config.results_dir, model, benchmark)
    if not path.is_file():
        return False
    # The rows' hash goes last: it reads and hashes the whole file, the checks of its inputs only its footer.
    return _inputs_current(config, model, benchmark, read_metadata(path)) and rows_intact(path)


def _inputs_current(config: Config, model: str, benchmark: str, recorded: dict) -> bool:
    """Whether a predictions file's metadata (`recorded`) record the inputs a run of the cell would use now."""
    from vlmgrid.cellrun.invariance import sample_positions
    from vlmgrid.cellrun.job import predictions_metadata
    from vlmgrid.stages.infer import planned_job
    from vlmgrid.stages.plan import cell_plan

    try:
        plan = cell_plan(config, model, benchmark)
        if plan.not_applicable is not None:
            return (recorded.get("applicable") is False and recorded.get("reason") == plan.not_applicable
                    and recorded.get("model_settings") == recorded_settings(plan.model_settings))
        job = planned_job(plan)
    except VlmgridError:
        return False  # the run itself says what is wrong
    expected = predictions_metadata(model_name=model, model_settings=plan.model_settings, job=job, strategy=None,
                                    provenance=None)
    if any(recorded.get(key) != expected.get(key) for key in _INPUT_KEYS):
        return False
    runs = recorded.get("runs") or [{"provenance": recorded.get("provenance")}]
    if any(((run.get("provenance") or {}).get("checkpoint") or {}).get("fingerprint") != plan.weights for run in runs):
        return False
    items = plan.check_items
    check = recorded.get("invariance")
    if not items:
        return check is None
    return isinstance(check, dict) and (bool(check.get("skipped")) or check.get(
        "checked") == len(sample_positions(benchmark, len(job.bench.records), items)))


def _cell(config: Config, model: str, benchmark: str, progress: bool) -> None:
    from vlmgrid.stages.infer import infer_cell
    from vlmgrid.stages.score import score_grid_cell

    if predictions_current(config, model, benchmark):
        log.info(f"{paths.predictions_path(config.results_dir, model, benchmark)} is current: left as it is")
    else:
        # The row's files persist: the cell's score is of inputs that changed, so it goes before the run, and
        # a run that fails leaves the cell without a number (as Snakemake and DVC remove a job's outputs).
        paths.score_path(config.results_dir, model, benchmark).unlink(missing_ok=True)
        infer_cell(config, model, benchmark, progress=progress)
    score_grid_cell(config, model, benchmark)


def run_row(config: Config, model: str, *, jobs: int | None = None, progress: bool = False) -> None:
    """`vlmgrid row MODEL`: the model's cell on every benchmark of the grid, inferred (a current one left as
    it is) and scored, `jobs` cells at a time (default: `row_jobs`)."""
    if model not in config.models:
        raise VlmgridError(f'model "{model}" is not in the grid of {config.path}; the grid has '
                           f"{', '.join(config.models)}")
    tasks = [Task(f"{model} on {bench}", partial(_cell, config, model, bench, progress))
             for bench in config.benchmarks]
    run_side_by_side(tasks, jobs or row_jobs(config, model), f"cells of {model}")


def compare_all(config: Config, *, jobs: int | None = None) -> None:
    """`vlmgrid compare --all`: every benchmark's comparisons, side by side."""
    from vlmgrid.stages.compare import compare_benchmark

    tasks = [Task(f"comparisons on {bench}", partial(compare_benchmark, config, bench))
             for bench in config.benchmarks]
    run_side_by_side(tasks, jobs or cpu_jobs(), "comparisons")


def inspect_all(config: Config, *, max_items: int, seed: int, jobs: int | None = None) -> None:
    """`vlmgrid inspect --all`: every benchmark's inspect page, side by side."""
    from vlmgrid.stages.inspect import inspect_benchmark

    tasks = [Task(f"inspect page of {bench}", partial(inspect_benchmark, config, bench, max_items=max_items,
                                                      seed=seed))
             for bench in config.benchmarks]
    run_side_by_side(tasks, jobs or cpu_jobs(), "inspect pages")

