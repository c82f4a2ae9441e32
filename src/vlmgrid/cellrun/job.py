"""A cell's inference job: its identity (the fingerprint its parts carry), its parts' bounds, and the
predictions file it writes.

Work is written in parts as it goes (vlmgrid.cellrun.parts), so a killed job resumes at the first missing part
and loses at most one part of work. A part is a contiguous run of records holding at most `part_size` model
requests, counted per record as the cost plan counts them (`vlmgrid.stages.cost_work`, the requests that
take a model pass of their own: not the continuations scored on a cached prefix), or one record that alone
asks more: a classification item under CARPE's protocol asks 20 templates and a yes/no item one, so a part is
about the same work whatever the benchmark. The parts are valid only for the inputs named by the job's
fingerprint (model settings, data, protocol, part boundaries, prompt sets, an in-place checkpoint's files):
anything else discards them.

A cell whose model cannot run its benchmark gets a predictions file too, with no rows and metadata that
say so (`write_not_applicable`): every cell of the grid has its files, and the report shows "n/a".
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from vlmgrid.fileio import sha256_json
from vlmgrid.predictions import rows_to_table, write_predictions
from vlmgrid.prompts import prompt_file_hashes
from vlmgrid.serving import recorded_settings

log = logging.getLogger(__name__)


class PreparedBenchmark(Protocol):
    """What a job reads of a prepared benchmark (vlmgrid.benchmarks.dataset.Benchmark, which the stage loads):
    this package imports no domain package."""

    name: str
    records: pd.DataFrame
    manifest: dict
    kind: Any  # its protocol: kind.protocol
    prompts_dir: Path


def job_fingerprint(
    model_settings: dict,
    manifest: dict,
    protocol: str,
    bounds: Sequence[int],
    prompts: dict[str, str] | None = None,
    weights: str | None = None,
) -> str:
    """`weights`: the fingerprint of a checkpoint read in place, whose files can change under the same
    settings."""
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


def write_not_applicable(
    *, model_name: str, model_settings: dict, benchmark: str, reason: str, out_path: Path, partial_dir: Path
) -> Path:
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
    write_predictions(out_path, rows_to_table([]), metadata)
    # Parts left from when the cell could run belong to other settings.
    shutil.rmtree(partial_dir, ignore_errors=True)
    log.info(f"wrote {out_path}: not applicable, {reason}")
    return out_path


@dataclass(frozen=True)
class Job:
    """One cell's inference job: the benchmark as the protocols see it, and the identity its parts carry."""

    bench: PreparedBenchmark
    prompts: dict[str, str]
    part_size: int
    bounds: tuple[int, ...]  # part_bounds: where each part starts, then the end
    fingerprint: str
    # each record's model requests as the parts are cut by them (the batch check's share is counted in them);
    # empty for rows that were not answered here (an import)
    requests: tuple[int, ...] = ()
    # each record's cost answered alone by the batch check, in batched requests' time
    # (vlmgrid.cellrun.invariance); empty: its requests
    check_costs: tuple[float, ...] = ()

    @property
    def n_parts(self) -> int:
        return max(len(self.bounds) - 1, 0)

    def chunk(self, index: int):
        return self.bench.records.iloc[self.bounds[index] : self.bounds[index + 1]]


def make_job(
    bench: PreparedBenchmark,
    requests: Sequence[int],
    *,
    model_settings: dict,
    part_size: int,
    weights: str | None = None,
    check_costs: Sequence[float] | None = None,
) -> Job:
    """The job of one model on a prepared benchmark whose records ask `requests` model requests each (as the
    cost plan counts them: vlmgrid.stages.cost_work.item_requests), costing the batch check `check_costs` each
    (vlmgrid.stages.cost.check_costs; their requests when None). `model_settings` are those the answers depend
    on (vlmgrid.models.answer_settings), part of the job's identity. The hashes of the benchmark's prompt sets
    are part of the job's identity, so edited prompts never resume old parts; so is `weights`, the fingerprint
    of a checkpoint read in place, so parts of edited weights are never resumed."""
    prompts = prompt_file_hashes(bench.prompts_dir)
    bounds = part_bounds(requests, part_size)
    fingerprint = job_fingerprint(
        model_settings, bench.manifest, bench.kind.protocol, bounds, prompts, weights
    )
    return Job(
        bench=bench,
        prompts=prompts,
        part_size=part_size,
        bounds=bounds,
        fingerprint=fingerprint,
        requests=tuple(int(count) for count in requests),
        check_costs=tuple(float(cost) for cost in check_costs) if check_costs is not None else (),
    )


def predictions_metadata(
    *,
    model_name: str,
    model_settings: dict,
    job: Job,
    strategy: str | None,
    provenance: dict | None,
    fallback: str | None = None,
    invariance: dict | None = None,
) -> dict:
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
    if invariance is not None:  # the batch check's result (vlmgrid.cellrun.invariance); absent when it is off
        metadata["invariance"] = invariance
    return metadata


def merge_runs(runs: list[dict]) -> list[dict]:
    """Runs with the same strategy and provenance joined into one, their row ranges joined where they touch;
    ordered by their first row. The runs of shard files merge into the runs their cell's file would list."""
    merged: dict[str, dict] = {}
    for run in runs:
        key = json.dumps({"strategy": run["strategy"], "provenance": run["provenance"]}, sort_keys=True)
        into = merged.setdefault(
            key, {"strategy": run["strategy"], "provenance": run["provenance"], "rows": []}
        )
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
