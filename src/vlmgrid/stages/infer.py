"""The infer stage: run one model on one benchmark (or one shard of it) and write its predictions.

The job's parts are kept as they are done (`vlmgrid.stages.jobs`), so a killed job resumes at the first
missing part; when every part is there they are merged, in record order, into the predictions file, which
appears atomically, and the parts are removed. Items that failed to run (a dead server, an out-of-memory) are
retried once and otherwise stop the job with one sentence: they never become rows.

Given a shard (`vlmgrid.stages.shards`), a job computes only that shard's contiguous range of parts and writes
a shard file; `merge_shards` joins the shard files into the predictions file an unsharded job writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time
from pathlib import Path

import pyarrow as pa

from vlmgrid import paths
from vlmgrid.config import Config
from vlmgrid.errors import CapabilityMissing, InferenceFailed, VlmgridError
from vlmgrid.predictions import rows_to_table
from vlmgrid.serving import ServerPlan, ServeSpec, served_settings
from vlmgrid.stages.celllock import cell_lock
from vlmgrid.stages.fetch import InPlace, in_place_weights
from vlmgrid.stages.jobs import PartStore, open_job, predictions_metadata, write_not_applicable, write_predictions
from vlmgrid.stages.plan import gpus, not_applicable
from vlmgrid.stages.shards import Shard

log = logging.getLogger(__name__)


def infer_cell(config: Config, model: str, benchmark: str, *, shard: str | None = None, threads: int | None = None,
               progress: bool = True) -> Path:
    """`vlmgrid infer`: the cell's predictions file (or, with `shard` "I/N", that shard's file).

    A cell the model cannot run gets a file that says so, with no model loaded and no GPU held. A model that
    uses GPUs holds its `gpus` of them (`vlmgrid.gpu`) for the whole job, and sees exactly those. The cell's
    lock (`vlmgrid.stages.celllock`) is held throughout: a second run of the same cell refuses at once.
    """
    settings = config.model(model)
    config.benchmark(benchmark)  # a clear error for an unknown name before any work
    # Without a shard the cell runs whole whatever its benchmark's `shards` says: sharding is the workflow's
    # choice of jobs (dvc.yaml runs cells whole), and the file is the same either way.
    part = None
    out_path = paths.predictions_path(config.results_dir, model, benchmark)
    partial_dir = paths.partial_dir(config.results_dir, model, benchmark)
    if shard is not None:
        part = Shard.parse(shard)
        out_path = paths.shard_path(config.results_dir, model, benchmark, part.index, part.count)
        partial_dir = paths.shard_partial_dir(config.results_dir, model, benchmark, part.index, part.count)
    cell = f"{model} on {benchmark}" + (f", shard {part}" if part is not None else "")
    # One run of a cell at a time, taken before any GPU is held: a second run stops at once, writing nothing.
    with cell_lock(partial_dir, cell):
        return _infer_locked(config, model, benchmark, settings, part, out_path, partial_dir, threads, progress)


def _infer_locked(config: Config, model: str, benchmark: str, settings: dict, part: Shard | None, out_path: Path,
                  partial_dir: Path, threads: int | None, progress: bool) -> Path:
    from vlmgrid.gpu import acquire_gpus

    reason = not_applicable(config, model, benchmark)
    if reason is not None:
        # No model, no GPU: the file only records that this cell cannot run.
        return write_not_applicable(model_name=model, model_settings=settings, benchmark=benchmark,
                                    reason=reason, out_path=out_path, partial_dir=partial_dir)
    count = gpus(config, model)
    lease = acquire_gpus(count) if count else None
    # a checkpoint read in place (a local folder or file, the Hugging Face cache) is loaded where it lies
    checkpoint = in_place_weights(model, settings, paths.model_dir(config.data_dir, model))
    model_dir = checkpoint.location if checkpoint is not None else paths.model_dir(config.data_dir, model)
    server = None
    if "serve" in settings:
        shard_of = (part.index, part.count) if part is not None else None
        server = ServerPlan(ServeSpec.of(settings["serve"]), model=model, model_dir=model_dir, gpus=count,
                            log_path=paths.serve_log_path(config.results_dir, model, benchmark, shard_of))
    try:
        device = _device(lease, settings, model)
        return run_inference(
            model_name=model,
            model_settings=settings,
            bench_dir=paths.bench_dir(config.data_dir, benchmark),
            model_dir=model_dir,
            out_path=out_path,
            partial_dir=partial_dir,
            prompts_dir=config.prompts_dir,
            part_size=int(config.infer["part_size"]),
            threads=int(threads or config.infer["threads"]),
            device=device,
            progress=progress,
            shard=part,
            server=server,
            checkpoint=checkpoint,
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
        log.info("the GPUs are pretended (VLMGRID_GPU_COUNT) and torch sees no CUDA device: running on the CPU")
        return "cpu"
    raise VlmgridError(f"model {model}: this job holds GPU(s) {', '.join(lease.gpus)}, but torch sees no CUDA "
                       f"device (a CPU-only torch build, or a driver problem); install a CUDA build of torch, or "
                       f"set device: cpu for the model")


def run_inference(*, model_name: str, model_settings: dict, bench_dir: Path, model_dir: Path,
                  out_path: Path, partial_dir: Path, part_size: int, threads: int,
                  prompts_dir: Path | None = None, device: str = "cpu", progress: bool = True,
                  shard: Shard | None = None, server: ServerPlan | None = None,
                  checkpoint: InPlace | None = None) -> Path:
    """Predict every item of the benchmark in bench_dir with the model; returns the predictions path.

    With `shard`, only that shard's parts are predicted and out_path is its shard file (vlmgrid.stages.shards).
    `prompts_dir` is where the protocols read their prompt sets (see `open_job`). With `server`, the model's
    server is started for the parts still to do, the backend sent to it, and the server stopped after them.
    With `checkpoint` (weights read in place, at model_dir), its files' fingerprint is part of the job's
    identity and its path and fingerprint go into the provenance.
    """
    from tqdm import tqdm

    from vlmgrid.models import BACKENDS

    job = open_job(model_settings=model_settings, bench_dir=bench_dir, part_size=part_size, prompts_dir=prompts_dir,
                   weights=checkpoint.fingerprint if checkpoint is not None else None)
    bench, records = job.bench, job.bench.records
    store = PartStore(partial_dir, job.fingerprint)
    store.open()

    indices = shard.parts(job.n_parts) if shard is not None else range(job.n_parts)
    n_items = sum(len(job.chunk(index)) for index in indices)
    tables: dict[int, pa.Table] = {}
    for index in indices:
        table = store.load(index, len(job.chunk(index)))
        if table is not None:
            tables[index] = table
    done_items = sum(len(job.chunk(index)) for index in tables)
    if tables:
        log.info(f"resuming: {len(tables)} of {len(indices)} parts ({done_items} of {n_items} items) already done")

    if len(tables) < len(indices):
        backend = BACKENDS.get(model_settings["backend"])
        # the model's server, when it has one, is stopped once the parts are done or the job fails
        with server.run() if server is not None else contextlib.nullcontext() as running:
            started = time.monotonic()
            model = backend.load(served_settings(model_settings, running) if running else model_settings, model_dir,
                                 device)
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(threads)
            log.info(f"loaded {model_name} ({model.describe()}) in {time.monotonic() - started:.1f}s")
            provenance = dataclasses.asdict(model.provenance())
            if running is not None:
                provenance["server"] = running.provenance()
            if checkpoint is not None:
                provenance["checkpoint"] = {"path": str(checkpoint.location), "fingerprint": checkpoint.fingerprint}
            store.save_provenance(provenance)
            # The prior is the whole benchmark's in every shard, so a shard answers as the whole job would.
            model.set_answer_prior(records["answer_index"].tolist())
            desc = f"{model_name} on {bench.name}" + (f" (shard {shard})" if shard is not None else "")
            bar = tqdm(total=n_items, initial=done_items, unit="item", desc=desc,
                       disable=not progress, file=sys.stderr, mininterval=2.0, dynamic_ncols=True)
            answering = _Answering(model, bench, store)
            failures: dict[str, str] = {}
            stopped: InferenceFailed | None = None
            pending = [index for index in indices if index not in tables]
            # A second pass retries the parts whose items failed to run (the response cache answers again what
            # succeeded); a systemic fault ends the job at once. Either way no failed item becomes a row.
            for attempt in range(2):
                if attempt:
                    if not pending or stopped is not None:
                        break
                    log.info(f"retrying {len(pending)} part(s) whose items failed to run")
                    failures = {}
                failed_parts = []
                for index in pending:
                    chunk = job.chunk(index)
                    try:
                        rows = answering.run(chunk)
                    except InferenceFailed as failed:
                        failures.update(failed.failures)
                        failed_parts.append(index)
                        if failed.stop:
                            stopped = failed
                            break
                        continue
                    _check_rows(rows, chunk, model_name, bench.name)
                    tables[index] = rows_to_table(rows)
                    store.save(index, tables[index])
                    bar.update(len(chunk))
                pending = failed_parts
            bar.close()
            if stopped is not None or pending:
                raise VlmgridError(_failure_sentence(model_name, bench.name, failures, stopped, len(tables),
                                                     len(indices), out_path))

    merged = pa.concat_tables([tables[i] for i in indices]) if len(indices) else rows_to_table([])
    metadata = predictions_metadata(model_name=model_name, model_settings=model_settings, job=job,
                                    strategy=store.strategy(), provenance=store.provenance(),
                                    fallback=store.fallback())
    if shard is not None:
        metadata["shard"] = shard.metadata(job)
    write_predictions(out_path, merged, metadata)
    store.remove()
    errors = sum(1 for value in merged.column("error").to_pylist() if value is not None)
    log.info(f"wrote {out_path}: {merged.num_rows} rows, {errors} error rows")
    return out_path


def _check_rows(rows: list[dict], chunk, model_name: str, bench_name: str) -> None:
    ids = {row["id"] for row in rows}
    if ids != set(chunk["id"]):
        raise VlmgridError(
            f"{model_name} on {bench_name}: the protocol returned rows for other items than it was given; "
            f"this is a bug, please report it"
        )


class _Answering:
    """The model's runner on the benchmark. With `answer_mode: auto`, a capability the server turns out to lack
    (an API without logprobs) is dropped and the items are answered the next way (generation); the part store
    records the strategy and the fallback, so the predictions say how they were made."""

    def __init__(self, model, bench, store: PartStore) -> None:
        self.model, self.bench, self.store = model, bench, store
        self._build()

    def _build(self) -> None:
        from vlmgrid.protocols import make_runner

        self.runner, self.strategy = make_runner(self.bench.kind.protocol, self.model, self.bench)
        self.store.save_strategy(self.strategy)

    def run(self, chunk) -> list[dict]:
        try:
            return self.runner(chunk)
        except CapabilityMissing as missing:
            if self.model.settings.get("answer_mode") != "auto" or not self.model.drop_capability(missing.capability):
                raise
            lost = self.strategy
            self._build()
            self.store.save_fallback(f"answer_mode auto: {lost} fell back to {self.strategy} ({missing})")
            log.info(f"answer_mode auto: answering by {self.strategy} instead of {lost}: {missing}")
            return self.runner(chunk)


def _failure_sentence(model_name: str, bench_name: str, failures: dict[str, str], stopped: InferenceFailed | None,
                      n_done: int, n_parts: int, out_path: Path) -> str:
    """One sentence: what failed to run (items, distinct causes, the first ids), what is kept, what to do."""
    from collections import Counter

    said = f"{model_name} on {bench_name}: "
    if failures:
        causes = Counter(failures.values()).most_common()
        shown = "; ".join(f"{cause}: {count}x" for cause, count in causes[:3])
        more = f"; {len(causes) - 3} other causes" if len(causes) > 3 else ""
        said += (f"{len(failures)} item(s) failed to run ({shown}{more}; the first: "
                 f"{', '.join(list(failures)[:5])})")
    if stopped is not None:
        said += f"{' and ' if failures else ''}the job stopped: {stopped}"
    return (f"{said}. No predictions file was written ({out_path}); {n_done} of {n_parts} parts are done and kept, "
            f"so once the cause is fixed the same command (or snakemake / dvc repro) runs only the missing parts")
