"""The infer stage: run one model on one benchmark and write its predictions.

Work is written in parts of `part_size` items as it goes (atomically, one parquet file per part), so a killed
job resumes at the first missing part and loses at most one part of work. When every part is there they are
merged, in record order, into the predictions file, which appears atomically; then the parts are removed.

A cell whose model cannot run its benchmark gets a predictions file too, with no rows and metadata that
say so (`write_not_applicable`): every cell of the grid has its files, and the report shows "n/a".

Given a shard (vlmgrid.shards), a job computes only that shard's contiguous range of parts and writes a shard
file; `vlmgrid.shards.merge_shards` joins the shard files into the predictions file an unsharded job writes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid.config import prompt_file_hashes
from vlmgrid.errors import CapabilityMissing, InferenceFailed, VlmgridError
from vlmgrid.fileio import sha256_json, write_json
from vlmgrid.predictions import METADATA_KEY, SCHEMA, rows_to_table, write_table

if TYPE_CHECKING:  # shards imports this module to write the merged file
    from vlmgrid.benchmarks.prepare import Benchmark
    from vlmgrid.shards import Shard

Say = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class PartStore:
    """The parts of one unfinished job, valid only for the inputs named by `fingerprint`."""

    directory: Path
    fingerprint: str
    say: Say = _stderr

    def open(self) -> None:
        meta_path = self.directory / "meta.json"
        if self.directory.exists():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                meta = {}
            if meta.get("fingerprint") != self.fingerprint:
                self.say(f"discarding parts in {self.directory}: they were made with other settings or data")
                shutil.rmtree(self.directory)
        if not self.directory.exists():
            self.directory.mkdir(parents=True)
            write_json(meta_path, {"fingerprint": self.fingerprint})

    def path(self, index: int) -> Path:
        return self.directory / f"part-{index:06d}.parquet"

    def load(self, index: int, expected_rows_min: int) -> pa.Table | None:
        """The part's table, or None when it is absent or unreadable (a torn write is redone, not trusted)."""
        path = self.path(index)
        if not path.is_file():
            return None
        try:
            table = pq.read_table(path).cast(SCHEMA)
        except (pa.ArrowException, OSError, ValueError):
            self.say(f"part {path} is unreadable; redoing it")
            path.unlink()
            return None
        if table.num_rows < expected_rows_min:
            self.say(f"part {path} is incomplete; redoing it")
            path.unlink()
            return None
        return table

    def save(self, index: int, table: pa.Table) -> None:
        write_table(self.path(index), table)

    def save_provenance(self, provenance: dict) -> None:
        write_json(self.directory / "provenance.json", provenance)

    def save_strategy(self, strategy: str) -> None:
        write_json(self.directory / "strategy.json", {"strategy": strategy})

    def save_fallback(self, note: str) -> None:
        write_json(self.directory / "fallback.json", {"fallback": note})

    def fallback(self) -> str | None:
        path = self.directory / "fallback.json"
        return json.loads(path.read_text(encoding="utf-8"))["fallback"] if path.is_file() else None

    def strategy(self) -> str | None:
        path = self.directory / "strategy.json"
        return json.loads(path.read_text(encoding="utf-8"))["strategy"] if path.is_file() else None

    def provenance(self) -> dict | None:
        path = self.directory / "provenance.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def job_fingerprint(model_settings: dict, manifest: dict, protocol: str, part_size: int,
                    prompts: dict[str, str] | None = None) -> str:
    return sha256_json({
        "model": model_settings,
        "data": manifest.get("fingerprint"),
        "protocol": protocol,
        "part_size": part_size,
        "prompts": prompts or {},
    })


def write_not_applicable(*, model_name: str, model_settings: dict, benchmark: str, reason: str,
                         out_path: Path, partial_dir: Path, say: Say = _stderr) -> Path:
    """The predictions file of a cell that cannot run: no rows; its metadata say so and why."""
    metadata = {
        "model": model_name,
        "benchmark": benchmark,
        "model_settings": model_settings,
        "applicable": False,
        "reason": reason,
        "strategy": None,
        "provenance": None,
    }
    write_table(out_path, rows_to_table([], metadata))
    # Parts left from when the cell could run belong to other settings.
    shutil.rmtree(partial_dir, ignore_errors=True)
    say(f"wrote {out_path}: not applicable, {reason}")
    return out_path


@dataclass(frozen=True)
class Job:
    """One cell's inference job: the benchmark as the protocols see it, and the identity its parts carry."""

    bench: Benchmark
    prompts: dict[str, str]
    part_size: int
    fingerprint: str

    @property
    def n_parts(self) -> int:
        return (len(self.bench.records) + self.part_size - 1) // self.part_size

    def chunk(self, index: int):
        return self.bench.records.iloc[index * self.part_size:(index + 1) * self.part_size]


def open_job(*, model_settings: dict, bench_dir: Path, part_size: int, prompts_dir: Path | None = None) -> Job:
    """The job of one model on the benchmark in bench_dir.

    `prompts_dir` is where the protocols read their prompt sets (the benchmark's default when None); the
    hashes of its prompt sets are part of the job's identity, so edited prompts never resume old parts.
    """
    from vlmgrid.benchmarks import load_benchmark

    bench = load_benchmark(bench_dir)  # checks that the files are there and the records intact
    if prompts_dir is not None:
        bench = dataclasses.replace(bench, prompts_dir=Path(prompts_dir))
    prompts = prompt_file_hashes(bench.prompts_dir)
    fingerprint = job_fingerprint(model_settings, bench.manifest, bench.kind.protocol, part_size, prompts)
    return Job(bench=bench, prompts=prompts, part_size=part_size, fingerprint=fingerprint)


def predictions_metadata(*, model_name: str, model_settings: dict, job: Job, strategy: str | None,
                         provenance: dict | None, fallback: str | None = None) -> dict:
    """What a predictions file records about the job that made it (docs/formats.md); `fallback` says how
    `answer_mode: auto` changed the way the model answers, when it did."""
    metadata = {
        "model": model_name,
        "benchmark": job.bench.name,
        "model_settings": model_settings,
        "data_fingerprint": job.bench.manifest.get("fingerprint"),
        "protocol": job.bench.kind.protocol,
        "prompts": job.prompts,
        "applicable": True,
        "strategy": strategy,
        "provenance": provenance,
    }
    if fallback:
        metadata["fallback"] = fallback
    return metadata


def write_predictions(out_path: Path, table: pa.Table, metadata: dict) -> None:
    """The final write of a predictions (or shard) file, atomic."""
    # One chunk: parquet's page boundaries follow the chunks, and the same rows must give the same bytes
    # whether they came from fresh parts, resumed parts or merged shards.
    table = table.combine_chunks()
    write_table(out_path, table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()}))


def run_inference(*, model_name: str, model_settings: dict, bench_dir: Path, model_dir: Path,
                  out_path: Path, partial_dir: Path, part_size: int, threads: int,
                  prompts_dir: Path | None = None, device: str = "cpu", progress: bool = True,
                  shard: Shard | None = None, say: Say = _stderr) -> Path:
    """Predict every item of the benchmark in bench_dir with the model; returns the predictions path.

    With `shard`, only that shard's parts are predicted and out_path is its shard file (vlmgrid.shards).
    `prompts_dir` is where the protocols read their prompt sets (see `open_job`).
    """
    from tqdm import tqdm

    from vlmgrid.models import BACKENDS

    job = open_job(model_settings=model_settings, bench_dir=bench_dir, part_size=part_size, prompts_dir=prompts_dir)
    bench, records = job.bench, job.bench.records
    store = PartStore(partial_dir, job.fingerprint, say)
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
        say(f"resuming: {len(tables)} of {len(indices)} parts ({done_items} of {n_items} items) already done")

    if len(tables) < len(indices):
        backend = BACKENDS.get(model_settings["backend"])
        started = time.monotonic()
        model = backend.load(model_settings, model_dir, device)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
        say(f"loaded {model_name} ({model.describe()}) in {time.monotonic() - started:.1f}s")
        store.save_provenance(dataclasses.asdict(model.provenance()))
        # The prior is the whole benchmark's in every shard, so a shard answers as the whole job would.
        model.set_answer_prior(records["answer_index"].tolist())
        desc = f"{model_name} on {bench.name}" + (f" (shard {shard})" if shard is not None else "")
        bar = tqdm(total=n_items, initial=done_items, unit="item", desc=desc,
                   disable=not progress, file=sys.stderr, mininterval=2.0, dynamic_ncols=True)
        answering = _Answering(model, bench, store, say)
        failures: dict[str, str] = {}
        stopped: InferenceFailed | None = None
        pending = [index for index in indices if index not in tables]
        # A second pass retries the parts whose items failed to run (the response cache answers again what
        # succeeded); a systemic fault ends the job at once. Either way no failed item becomes a row.
        for attempt in range(2):
            if attempt:
                if not pending or stopped is not None:
                    break
                say(f"retrying {len(pending)} part(s) whose items failed to run")
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
    say(f"wrote {out_path}: {merged.num_rows} rows, {errors} error rows")
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

    def __init__(self, model, bench, store: PartStore, say: Say) -> None:
        self.model, self.bench, self.store, self.say = model, bench, store, say
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
            self.say(f"answer_mode auto: answering by {self.strategy} instead of {lost}: {missing}")
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
