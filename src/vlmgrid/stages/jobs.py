"""What the infer and shards stages share: a job's identity, its part store, and the predictions file it writes.

Work is written in parts as it goes (atomically, one parquet file per part), so a killed job resumes at the
first missing part and loses at most one part of work. A part is a contiguous run of records holding at most
`part_size` model requests, counted per record as the cost plan counts them (`vlmgrid.stages.cost`, the
requests that take a model pass of their own: not the continuations scored on a cached prefix), or one
record that alone asks more: a classification item under CARPE's protocol asks 20 templates and a yes/no
item one, so a part is about the same work whatever the benchmark. The parts are valid only for the inputs
named by the job's fingerprint (model settings, data, protocol, part boundaries, prompt sets): anything else
discards them.

A cell whose model cannot run its benchmark gets a predictions file too, with no rows and metadata that
say so (`write_not_applicable`): every cell of the grid has its files, and the report shows "n/a".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid.fileio import sha256_json, write_json
from vlmgrid.predictions import METADATA_KEY, SCHEMA, rows_to_table, write_table
from vlmgrid.prompts import prompt_file_hashes
from vlmgrid.serving import recorded_settings
from vlmgrid.stages.cost import item_requests

if TYPE_CHECKING:
    from vlmgrid.benchmarks.dataset import Benchmark

log = logging.getLogger(__name__)

# the schema metadata key of a part file holding the run that made it (its strategy and provenance)
PART_RUN_KEY = b"vlmgrid.part.run"


@dataclass
class PartStore:
    """The parts of one unfinished job, valid only for the inputs named by `fingerprint`."""

    directory: Path
    fingerprint: str

    def open(self) -> None:
        meta_path = self.directory / "meta.json"
        if self.directory.exists():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                meta = {}
            if meta.get("fingerprint") != self.fingerprint:
                log.info(f"discarding parts in {self.directory}: they were made with other settings or data")
                shutil.rmtree(self.directory)
        if not self.directory.exists():
            self.directory.mkdir(parents=True)
            write_json(meta_path, {"fingerprint": self.fingerprint})

    def path(self, index: int) -> Path:
        return self.directory / f"part-{index:06d}.parquet"

    def load(self, index: int, expected_rows_min: int) -> tuple[pa.Table, dict] | None:
        """The part's table and the run that made it, or None when the part is absent or unreadable (a torn
        write is redone, not trusted), or was saved without its run."""
        path = self.path(index)
        if not path.is_file():
            return None
        try:
            table = pq.read_table(path)
            recorded = table.schema.metadata or {}
            table = table.replace_schema_metadata(None).cast(SCHEMA)
        except (pa.ArrowException, OSError, ValueError):
            log.info(f"part {path} is unreadable; redoing it")
            path.unlink()
            return None
        try:
            made_by = json.loads(recorded[PART_RUN_KEY])
        except (KeyError, ValueError):
            log.info(f"part {path} does not say which model run made it; redoing it")
            path.unlink()
            return None
        if table.num_rows < expected_rows_min:
            log.info(f"part {path} is incomplete; redoing it")
            path.unlink()
            return None
        return table, made_by

    def save(self, index: int, table: pa.Table, made_by: dict) -> None:
        """`made_by`: the strategy and provenance of the model run that answered the part, saved with it."""
        metadata = {PART_RUN_KEY: json.dumps(made_by, sort_keys=True).encode()}
        write_table(self.path(index), table.replace_schema_metadata(metadata))

    def save_fallback(self, note: str) -> None:
        write_json(self.directory / "fallback.json", {"fallback": note})

    def fallback(self) -> str | None:
        path = self.directory / "fallback.json"
        return json.loads(path.read_text(encoding="utf-8"))["fallback"] if path.is_file() else None

    def save_invariance(self, items: int, result: dict) -> None:
        """The batch check's result, kept so that a job resumed after it reuses it (`items`: the sample size it
        was asked for; another size checks again)."""
        write_json(self.directory / "invariance.json", {"items": items, "result": result})

    def invariance(self, items: int) -> dict | None:
        path = self.directory / "invariance.json"
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return saved.get("result") if saved.get("items") == items else None

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def job_fingerprint(model_settings: dict, manifest: dict, protocol: str, bounds: Sequence[int],
                    prompts: dict[str, str] | None = None, weights: str | None = None) -> str:
    """`weights`: the fingerprint of a checkpoint read in place, whose files can change under the same settings."""
    identity = {
        "model": recorded_settings(model_settings),
        "data": manifest.get("fingerprint"),
        "protocol": protocol,
        "parts": list(bounds),
        "prompts": prompts or {},
    }
    if weights is not None:
        identity["weights"] = weights
    return sha256_json(identity)


def part_bounds(requests: Sequence[int], part_size: int) -> tuple[int, ...]:
    """Where each part starts, then the end: contiguous runs of records cut greedily so that a part holds at
    most `part_size` requests (`requests`: each record's), or a single record that alone holds more."""
    bounds, held = [0], 0
    for index, count in enumerate(requests):
        if index > bounds[-1] and held + count > part_size:
            bounds.append(index)
            held = 0
        held += count
    if requests:
        bounds.append(len(requests))
    return tuple(bounds)


def write_not_applicable(*, model_name: str, model_settings: dict, benchmark: str, reason: str,
                         out_path: Path, partial_dir: Path) -> Path:
    """The predictions file of a cell that cannot run: no rows; its metadata say so and why."""
    metadata = {
        "model": model_name,
        "benchmark": benchmark,
        "model_settings": recorded_settings(model_settings),
        "applicable": False,
        "reason": reason,
        "strategy": None,
        "provenance": None,
    }
    write_table(out_path, rows_to_table([], metadata))
    # Parts left from when the cell could run belong to other settings.
    shutil.rmtree(partial_dir, ignore_errors=True)
    log.info(f"wrote {out_path}: not applicable, {reason}")
    return out_path


@dataclass(frozen=True)
class Job:
    """One cell's inference job: the benchmark as the protocols see it, and the identity its parts carry."""

    bench: Benchmark
    prompts: dict[str, str]
    part_size: int
    bounds: tuple[int, ...]  # part_bounds: where each part starts, then the end
    fingerprint: str

    @property
    def n_parts(self) -> int:
        return max(len(self.bounds) - 1, 0)

    def chunk(self, index: int):
        return self.bench.records.iloc[self.bounds[index]:self.bounds[index + 1]]


def open_job(*, model_settings: dict, bench_dir: Path, part_size: int, prompts_dir: Path | None = None,
             weights: str | None = None) -> Job:
    """The job of one model on the benchmark in bench_dir.

    `prompts_dir` is where the protocols read their prompt sets (the benchmark's default when None); the
    hashes of its prompt sets are part of the job's identity, so edited prompts never resume old parts; so is
    `weights`, the fingerprint of a checkpoint read in place, so parts of edited weights are never resumed.
    """
    from vlmgrid.benchmarks import load_benchmark

    bench = load_benchmark(bench_dir)  # checks that the files are there and the records intact
    if prompts_dir is not None:
        bench = dataclasses.replace(bench, prompts_dir=Path(prompts_dir))
    prompts = prompt_file_hashes(bench.prompts_dir)
    bounds = part_bounds(item_requests(bench, model_settings), part_size)
    fingerprint = job_fingerprint(model_settings, bench.manifest, bench.kind.protocol, bounds, prompts, weights)
    return Job(bench=bench, prompts=prompts, part_size=part_size, bounds=bounds, fingerprint=fingerprint)


def predictions_metadata(*, model_name: str, model_settings: dict, job: Job, strategy: str | None,
                         provenance: dict | None, fallback: str | None = None,
                         invariance: dict | None = None) -> dict:
    """What a predictions file records about the job that made it (docs/formats.md); `fallback` says how
    `answer_mode: auto` changed the way the model answers, when it did; `invariance` is the batch check's."""
    metadata = {
        "model": model_name,
        "benchmark": job.bench.name,
        "model_settings": recorded_settings(model_settings),
        "data_fingerprint": job.bench.manifest.get("fingerprint"),
        "protocol": job.bench.kind.protocol,
        "prompts": job.prompts,
        "applicable": True,
        "strategy": strategy,
        "provenance": provenance,
    }
    if fallback:
        metadata["fallback"] = fallback
    if invariance is not None:  # the batch check's result (vlmgrid.stages.invariance); absent when it is off
        metadata["invariance"] = invariance
    return metadata


def write_predictions(out_path: Path, table: pa.Table, metadata: dict) -> None:
    """The final write of a predictions (or shard) file, atomic."""
    # One chunk: parquet's page boundaries follow the chunks, and the same rows must give the same bytes
    # whether they came from fresh parts, resumed parts or merged shards.
    table = table.combine_chunks()
    write_table(out_path, table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()}))


def merge_runs(runs: list[dict]) -> list[dict]:
    """Runs with the same strategy and provenance joined into one, their row ranges joined where they touch;
    ordered by their first row. The runs of shard files merge into the runs their cell's file would list."""
    merged: dict[str, dict] = {}
    for run in runs:
        key = json.dumps({"strategy": run["strategy"], "provenance": run["provenance"]}, sort_keys=True)
        into = merged.setdefault(key, {"strategy": run["strategy"], "provenance": run["provenance"], "rows": []})
        into["rows"].extend([list(rows) for rows in run["rows"]])
    result = []
    for run in merged.values():
        ranges: list[list[int]] = []
        for start, stop in sorted(run["rows"]):
            if ranges and ranges[-1][1] == start:
                ranges[-1][1] = stop
            elif start < stop:
                ranges.append([start, stop])
        if ranges:
            result.append({**run, "rows": ranges})
    return sorted(result, key=lambda run: run["rows"][0][0])
