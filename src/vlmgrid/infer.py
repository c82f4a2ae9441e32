"""The infer stage: run one model on one benchmark and write its predictions.

Work is written in parts of `part_size` items as it goes (atomically, one parquet file per part), so a killed
job resumes at the first missing part and loses at most one part of work. When every part is there they are
merged, in record order, into the predictions file, which appears atomically; then the parts are removed.

A cell whose model cannot run its benchmark gets a predictions file too, with no rows and metadata that
say so (`write_not_applicable`): every cell of the grid has its files, and the report shows "n/a".
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid.config import prompt_file_hashes
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_json, write_json
from vlmgrid.predictions import METADATA_KEY, SCHEMA, rows_to_table, write_table

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


def run_inference(*, model_name: str, model_settings: dict, bench_dir: Path, model_dir: Path,
                  out_path: Path, partial_dir: Path, part_size: int, threads: int,
                  prompts_dir: Path | None = None, device: str = "cpu", progress: bool = True,
                  say: Say = _stderr) -> Path:
    """Predict every item of the benchmark in bench_dir with the model; returns the predictions path.

    `prompts_dir` is where the protocols read their prompt sets (the benchmark's default when None); the
    hashes of its prompt sets are part of the job's identity, so edited prompts never resume old parts.
    """
    from tqdm import tqdm

    from vlmgrid.benchmarks import load_benchmark
    from vlmgrid.models import BACKENDS
    from vlmgrid.protocols import make_runner

    bench = load_benchmark(bench_dir)  # checks that the files are there and the records intact
    if prompts_dir is not None:
        bench = dataclasses.replace(bench, prompts_dir=Path(prompts_dir))
    prompts = prompt_file_hashes(bench.prompts_dir)
    records = bench.records
    protocol = bench.kind.protocol
    store = PartStore(partial_dir, job_fingerprint(model_settings, bench.manifest, protocol, part_size, prompts),
                      say)
    store.open()

    n_parts = (len(records) + part_size - 1) // part_size
    tables: dict[int, pa.Table] = {}
    for index in range(n_parts):
        chunk_len = len(records.iloc[index * part_size:(index + 1) * part_size])
        table = store.load(index, chunk_len)
        if table is not None:
            tables[index] = table
    done_items = sum(min(part_size, len(records) - i * part_size) for i in tables)
    if tables:
        say(f"resuming: {len(tables)} of {n_parts} parts ({done_items} of {len(records)} items) already done")

    if len(tables) < n_parts:
        backend = BACKENDS.get(model_settings["backend"])
        started = time.monotonic()
        model = backend.load(model_settings, model_dir, device)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
        say(f"loaded {model_name} ({model.describe()}) in {time.monotonic() - started:.1f}s")
        store.save_provenance(dataclasses.asdict(model.provenance()))
        model.set_answer_prior(records["answer_index"].tolist())
        runner, strategy = make_runner(protocol, model, bench)
        store.save_strategy(strategy)
        bar = tqdm(total=len(records), initial=done_items, unit="item", desc=f"{model_name} on {bench.name}",
                   disable=not progress, file=sys.stderr, mininterval=2.0, dynamic_ncols=True)
        for index in range(n_parts):
            if index in tables:
                continue
            chunk = records.iloc[index * part_size:(index + 1) * part_size]
            rows = runner(chunk)
            _check_rows(rows, chunk, model_name, bench.name)
            tables[index] = rows_to_table(rows)
            store.save(index, tables[index])
            bar.update(len(chunk))
        bar.close()

    merged = pa.concat_tables([tables[i] for i in range(n_parts)]) if n_parts else rows_to_table([])
    metadata = {
        "model": model_name,
        "benchmark": bench.name,
        "model_settings": model_settings,
        "data_fingerprint": bench.manifest.get("fingerprint"),
        "protocol": protocol,
        "prompts": prompts,
        "applicable": True,
        "strategy": store.strategy(),
        "provenance": store.provenance(),
    }
    write_table(out_path, merged.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()}))
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
