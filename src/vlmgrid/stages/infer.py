"""The infer stage: run one model on one benchmark (or one shard of it) and write its predictions; and the
merge of a sharded cell's files.

The stage asks the plan for the cell's `CellPlan` (vlmgrid.stages.plan.cell_plan: whether the model can run
the benchmark, its GPUs, where its weights are read, its server, the job's settings), decided once, and hands
it to the cell's run (vlmgrid.cellrun.execute), which owns the job from its lock to its file.
"""

from __future__ import annotations

from pathlib import Path

from vlmgrid import paths
from vlmgrid.cellrun.execute import run_cell
from vlmgrid.cellrun.shards import merge_shards
from vlmgrid.config import Config
from vlmgrid.stages.plan import cell_plan


def infer_cell(config: Config, model: str, benchmark: str, *, shard: str | None = None, threads: int | None = None,
               progress: bool = True) -> Path:
    """`vlmgrid infer`: the cell's predictions file (or, with `shard` "I/N", that shard's file)."""
    plan = cell_plan(config, model, benchmark, shard=shard, threads=threads)
    return run_cell(plan, progress=progress)


def merge_cell(config: Config, model: str, benchmark: str) -> Path:
    """`vlmgrid merge-shards`: join the cell's shard files (its benchmark's `shards`) into its predictions file."""
    plan = cell_plan(config, model, benchmark)
    if plan.not_applicable is not None:
        # No shard ran a model: the cell's file only records why, as an unsharded infer writes it.
        return plan.cell.write_not_applicable(plan.model_settings, plan.not_applicable)
    count = config.shards(benchmark)
    return merge_shards(
        model_name=model,
        model_settings=plan.model_settings,
        bench_dir=plan.bench_dir,
        part_size=plan.part_size,
        shard_paths=[paths.shard_path(config.results_dir, model, benchmark, index, count)
                     for index in range(1, count + 1)],
        out_path=plan.cell.out_path,
        prompts_dir=plan.prompts_dir,
        weights=plan.checkpoint.fingerprint if plan.checkpoint is not None else None,
    )
