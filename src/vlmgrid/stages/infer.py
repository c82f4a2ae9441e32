"""The infer stage: run one model on one benchmark (or one shard of it) and write its predictions; and the
merge of a sharded cell's files.

The stage asks the plan for the cell's `CellPlan` (vlmgrid.stages.plan.cell_plan: whether the model can run
the benchmark, its GPUs, where its weights are read, its server, the job's settings), decided once, and runs
it: it holds the cell's lock and its GPUs, starts the model's server when it has one, loads the model and
hands the cell's `CellRun` (vlmgrid.cellrun.run) a way to answer a chunk of records; the run owns the job from
its first part to its file (its parts, the retries, the record of which run made which rows, the batch check,
the atomic write). Given a shard, the job computes only that shard's contiguous range of parts and writes a
shard file; `merge_cell` joins the shard files into the predictions file an unsharded job writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time
from pathlib import Path

from vlmgrid import paths
from vlmgrid.cellrun.cell import Cell, CellPlan, InPlace
from vlmgrid.cellrun.job import Job, make_job
from vlmgrid.cellrun.run import CellRun
from vlmgrid.cellrun.shards import merge_shards
from vlmgrid.config import Config
from vlmgrid.errors import CapabilityMissing, VlmgridError
from vlmgrid.serving import ServerPlan, served_settings
from vlmgrid.stages.plan import cell_plan

log = logging.getLogger(__name__)


def infer_cell(
    config: Config,
    model: str,
    benchmark: str,
    *,
    shard: str | None = None,
    threads: int | None = None,
    progress: bool = True,
) -> Path:
    """`vlmgrid infer`: the cell's predictions file (or, with `shard` "I/N", that shard's file)."""
    plan = cell_plan(config, model, benchmark, shard=shard, threads=threads)
    return run_cell(plan, progress=progress)


def merge_cell(config: Config, model: str, benchmark: str) -> Path:
    """`vlmgrid merge-shards`: join the cell's shard files (its benchmark's `shards`) into its predictions
    file."""
    plan = cell_plan(config, model, benchmark)
    if plan.not_applicable is not None:
        # No shard ran a model: the cell's file only records why, as an unsharded infer writes it.
        return plan.cell.write_not_applicable(plan.model_settings, plan.not_applicable)
    count = config.shards(benchmark)
    return merge_shards(
        job=planned_job(plan),
        model_name=model,
        model_settings=plan.model_settings,
        shard_paths=[
            paths.shard_path(config.results_dir, model, benchmark, index, count)
            for index in range(1, count + 1)
        ],
        out_path=plan.cell.out_path,
    )


def open_job(
    *,
    model_settings: dict,
    bench_dir: Path,
    part_size: int,
    prompts_dir: Path | None = None,
    weights: str | None = None,
) -> Job:
    """The job of one model on the benchmark in bench_dir (vlmgrid.cellrun.job): its records, cut into parts
    by their model requests as the cost plan counts them (vlmgrid.stages.cost_work.item_requests).

    `prompts_dir` is where the protocols read their prompt sets (the benchmark's default when None); the
    hashes of its prompt sets are part of the job's identity; so are the model's settings that its answers
    depend on (`answer_settings`: a worker count or a retry limit changed resumes the parts), and `weights`,
    the fingerprint of a checkpoint read in place.
    """
    from vlmgrid.models import answer_settings
    from vlmgrid.stages.cost import check_costs, load_throughput
    from vlmgrid.stages.cost_work import item_work, pass_requests

    bench = open_benchmark(bench_dir, prompts_dir)
    data, works = item_work(bench, model_settings)
    return make_job(
        bench,
        pass_requests(data, works),
        model_settings=answer_settings(model_settings),
        part_size=part_size,
        weights=weights,
        check_costs=check_costs(data, works, model_settings, bench.kind.protocol, load_throughput()),
    )


def open_benchmark(bench_dir: Path, prompts_dir: Path | None = None):
    """The prepared benchmark in bench_dir (its files checked, its records intact), its protocols reading
    their prompt sets from `prompts_dir` (the benchmark's default when None)."""
    from vlmgrid.benchmarks import load_benchmark

    bench = load_benchmark(bench_dir)
    return bench if prompts_dir is None else dataclasses.replace(bench, prompts_dir=Path(prompts_dir))


def planned_job(plan: CellPlan) -> Job:
    """The job of a cell as its plan names it."""
    return open_job(
        model_settings=plan.model_settings,
        bench_dir=plan.bench_dir,
        part_size=plan.part_size,
        prompts_dir=plan.prompts_dir,
        weights=plan.weights,
    )


def run_cell(plan: CellPlan, *, progress: bool = True) -> Path:
    """The cell's predictions file (or its shard's file), made as `plan` says.

    A cell the model cannot run gets a file that says so, with no model loaded and no GPU held. A model that
    uses GPUs holds its `gpus` of them (`vlmgrid.gpu`) for the whole job, and sees exactly those. The cell's
    lock is held throughout (`Cell.running`): a second run of the same cell refuses at once.
    """
    from vlmgrid.gpu import acquire_gpus

    cell = plan.cell
    # One run of a cell at a time, taken before any GPU is held: a second run stops at once, writing nothing.
    with cell.running():
        if plan.not_applicable is not None:
            # No model, no GPU: the file only records that this cell cannot run.
            return cell.write_not_applicable(plan.model_settings, plan.not_applicable)
        lease = acquire_gpus(plan.gpus) if plan.gpus else None
        try:
            return run_inference(
                cell=cell,
                model_settings=plan.model_settings,
                bench_dir=plan.bench_dir,
                model_dir=plan.model_dir,
                prompts_dir=plan.prompts_dir,
                part_size=plan.part_size,
                check_items=plan.check_items,
                threads=plan.threads,
                device=_device(lease, plan.model_settings, cell.model),
                progress=progress,
                server=plan.server,
                checkpoint=plan.checkpoint,
            )
        finally:
            if lease is not None:
                lease.release()


def _device(lease, settings: dict, model: str) -> str:
    """Where the model runs: "cuda" on the GPUs the job holds, else the CPU."""
    if "serve" in settings:
        return "cpu"  # the job only sends requests: its server runs on the GPUs
    if lease is None or not lease.gpus:
        if settings.get("device") == "cuda":
            raise VlmgridError(f"model {model} asks for device: cuda, but no GPU is visible to this job")
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if lease.pretend:
        log.info(
            "the GPUs are pretended (VLMGRID_GPU_COUNT) and torch sees no CUDA device: running on the CPU"
        )
        return "cpu"
    raise VlmgridError(
        f"model {model}: this job holds GPU(s) {', '.join(lease.gpus)}, but torch sees no CUDA "
        f"device (a CPU-only torch build, or a driver problem); install a CUDA build of torch, or "
        f"set device: cpu for the model"
    )


def run_inference(
    *,
    cell: Cell,
    model_settings: dict,
    bench_dir: Path,
    model_dir: Path,
    part_size: int,
    threads: int,
    prompts_dir: Path | None = None,
    device: str = "cpu",
    progress: bool = True,
    server: ServerPlan | None = None,
    checkpoint: InPlace | None = None,
    check_items: int = 0,
) -> Path:
    """Predict every item of the benchmark in bench_dir (or of the cell's shard) with the model; returns the
    cell's file. The caller holds the cell's lock.

    `prompts_dir` is where the protocols read their prompt sets (see `open_job`). With `server`, the model's
    server is started for the parts still to do, the backend sent to it, and the server stopped after them.
    With `checkpoint` (weights read in place, at model_dir), its files' fingerprint is part of the job's
    identity and its path and fingerprint go into the provenance. With `check_items`
    (`infer.invariance_items`), that many items are answered again one at a time once every part is done, and
    compared (the batch check, `vlmgrid.cellrun.invariance`).
    """
    from vlmgrid.models import BACKENDS

    job = open_job(
        model_settings=model_settings,
        bench_dir=bench_dir,
        part_size=part_size,
        prompts_dir=prompts_dir,
        weights=checkpoint.fingerprint if checkpoint is not None else None,
    )
    run = CellRun(cell, job, model_settings, check_items)
    if run.pending or run.check_pending:
        backend = BACKENDS.get(model_settings["backend"])
        # the model's server, when it has one, is stopped once the parts are done or the job fails
        with server.run() if server is not None else contextlib.nullcontext() as running:
            started = time.monotonic()
            model = _load(
                backend,
                served_settings(model_settings, running) if running else model_settings,
                model_dir,
                device,
                cell.model,
            )
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(threads)
            log.info(f"loaded {cell.model} ({model.describe()}) in {time.monotonic() - started:.1f}s")
            provenance = dataclasses.asdict(model.provenance())
            if running is not None:
                provenance["server"] = running.provenance()
            if checkpoint is not None:
                provenance["checkpoint"] = {
                    "path": str(checkpoint.location),
                    "fingerprint": checkpoint.fingerprint,
                }
            run.begin(provenance)
            # The prior is the whole benchmark's in every shard, so a shard answers as the whole job would.
            model.set_answer_prior(job.bench.records["answer_index"].tolist())
            answering = _Answering(model, job.bench, run)
            run.answer(answering.run, progress=progress)
            if run.check_pending:
                _check_batches(run, model, answering)
    return run.finish()


def _check_batches(run: CellRun, model, answering: _Answering) -> None:
    """The batch check: the sample answered again through the same runner, every request alone."""
    if model.unbatched is not None:
        run.check_batches(None, None, model.unbatched)
        return
    batch_size = model.provenance().batch_size  # what the batched run used ("auto": the size that worked)

    def one_at_a_time(records) -> list[dict]:
        with model.one_at_a_time():
            return answering.run(records)

    started = time.monotonic()
    run.check_batches(one_at_a_time, batch_size)
    log.info(f"batch check took {time.monotonic() - started:.1f}s")


def _load(backend, settings: dict, model_dir: Path, device: str, model: str):
    """The backend's model. A library's error loading the checkpoint (a damaged file, weights of another
    architecture) becomes one sentence naming the file and the likely cause; the machine's own faults (memory,
    CUDA, a full disk, a missing package) stay as they are."""
    from vlmgrid.fileio import failed_write
    from vlmgrid.models.checkpoints import load_failure

    try:
        return backend.load(settings, model_dir, device)
    except (VlmgridError, ImportError, MemoryError):
        raise
    except Exception as exc:
        text = str(exc).lower()
        if (
            "out of memory" in text
            or "cuda" in text
            or (isinstance(exc, OSError) and failed_write(exc) is not None)
        ):
            raise
        raise load_failure(model, model_dir, exc) from exc


class _Answering:
    """The model's runner on the benchmark. With `answer_mode: auto`, a capability the server turns out to
    lack (an API without logprobs) is dropped and the items are answered the next way (generation); the cell's
    run records the strategy and the fallback, so the predictions say how they were made."""

    def __init__(self, model, bench, run: CellRun) -> None:
        self.model, self.bench, self.cell_run = model, bench, run
        self._build()

    def _build(self) -> None:
        from vlmgrid.protocols import make_runner

        self.runner, self.strategy = make_runner(self.bench.kind.protocol, self.model, self.bench)
        self.cell_run.set_strategy(self.strategy)

    def run(self, chunk) -> list[dict]:
        try:
            return self.runner(chunk)
        except CapabilityMissing as missing:
            if self.model.settings.get("answer_mode") != "auto" or not self.model.drop_capability(
                missing.capability
            ):
                raise
            lost = self.strategy
            self._build()
            self.cell_run.note_fallback(f"answer_mode auto: {lost} fell back to {self.strategy} ({missing})")
            log.info(f"answer_mode auto: answering by {self.strategy} instead of {lost}: {missing}")
            return self.runner(chunk)
