"""Shards: one cell's inference split over several jobs, then merged into its one predictions file.

A shard is a contiguous range of whole parts (the parts of the unsharded job, at most `infer.part_size` model
requests each: vlmgrid.cellrun.job), so every model batch sees the items it would see unsharded, and the
merged file is byte for byte the file an unsharded `vlmgrid infer` writes. Shard `index` of `count` (from 1)
writes `results/shards/<model>/<bench>/<index>-of-<count>.parquet` (docs/formats.md); `merge_shards` checks
that all of them are there and were made by the job the config describes now, and writes the predictions file.

A benchmark with more shards than parts gives some shards no parts: they write a valid shard file with no
rows, because how many parts a benchmark has is known only once it is prepared, after the workflow has planned
its jobs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa

from vlmgrid.cellrun import invariance
from vlmgrid.cellrun.job import Job, merge_runs, predictions_metadata
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import read_metadata, read_table, rows_to_table, write_predictions

log = logging.getLogger(__name__)


def merge_shards(
    *, job: Job, model_name: str, model_settings: dict, shard_paths: list[Path], out_path: Path
) -> Path:
    """Join the shard files (shard 1 to N, in order) into out_path, as the unsharded `job` writes it."""
    count = len(shard_paths)
    rerun = f"vlmgrid infer {model_name} {job.bench.name} --shard"
    missing = [index for index, path in enumerate(shard_paths, 1) if not Path(path).is_file()]
    if missing:
        raise VlmgridError(
            f"{model_name} on {job.bench.name}: shard file(s) {', '.join(map(str, missing))} of {count} "
            f"missing (first: {shard_paths[missing[0] - 1]}); run "
            f"`{rerun} {missing[0]}/{count}` for each before merging"
        )
    tables: list[pa.Table] = []
    made_by: tuple[int, dict] | None = None  # the first shard that ran the model: its strategy and provenance
    runs: list[dict] = []  # every model run of every shard, with its rows (record positions)
    checks: list[dict] = []  # each shard's batch check, over the sample's items in its rows
    for index, path in enumerate(shard_paths, 1):
        # Read first: a truncated file is called unreadable, not made with other settings.
        tables.append(read_table(path, f"run `{rerun} {index}/{count}` again"))
        recorded = read_metadata(path)
        shard = recorded.get("shard") or {}
        if shard.get("job") != job.fingerprint:
            raise VlmgridError(
                f"shard file {path} was made with other model settings, data, prompts or part size than "
                f"{model_name} on {job.bench.name} has now; run `{rerun} {index}/{count}` again"
            )
        if (shard.get("index"), shard.get("count")) != (index, count):
            raise VlmgridError(
                f"shard file {path} holds shard {shard.get('index')}/{shard.get('count')}, but is merged as "
                f"shard {index}/{count}; run `{rerun} {index}/{count}` again"
            )
        if shard["parts"][0] == shard["parts"][1]:
            continue  # no parts, no model: it records no strategy or provenance
        runs.extend(recorded.get("runs") or [])
        if recorded.get("invariance") is not None:
            checks.append(recorded["invariance"])
        ran = {
            "strategy": recorded.get("strategy"),
            "provenance": recorded.get("provenance"),
            "fallback": recorded.get("fallback"),
        }
        if made_by is None:
            made_by = (index, ran)
        elif ran != made_by[1]:
            raise VlmgridError(
                f"shard file {path} differs from shard {made_by[0]} in how the model ran "
                f"({_difference(ran, made_by[1])}); run every shard of a cell on the same kind of device "
                "with the same software, then merge"
            )
    merged = pa.concat_tables(tables) if tables else rows_to_table([])
    ran = made_by[1] if made_by else {"strategy": None, "provenance": None, "fallback": None}
    metadata = predictions_metadata(
        model_name=model_name,
        model_settings=model_settings,
        job=job,
        **ran,
        invariance=invariance.merge(checks),
    )
    if runs:
        metadata["runs"] = merge_runs(runs)
    write_predictions(out_path, merged, metadata)
    log.info(f"wrote {out_path}: {merged.num_rows} rows from {count} shard(s)")
    return out_path


def _difference(one: dict, other: dict) -> str:
    """The first field in which two shards' strategy and provenance differ:
    `provenance.device: 'A' vs 'B'`."""
    flat_one, flat_other = _flatten(one), _flatten(other)
    key = next(k for k in sorted(set(flat_one) | set(flat_other)) if flat_one.get(k) != flat_other.get(k))
    return f"{key}: {flat_one.get(key)!r} vs {flat_other.get(key)!r}"


def _flatten(value, prefix: str = "") -> dict:
    if not isinstance(value, dict):
        return {prefix: value}
    flat: dict = {}
    for key, item in value.items():
        flat.update(_flatten(item, f"{prefix}.{key}" if prefix else key))
    return flat
