"""One running cell: the object that owns an inference job from its first part to its predictions file.

`CellRun` holds the parts done and to do, the loop that answers the missing ones (a part whose items failed to
run is retried once; what still fails stops the job with one sentence and never becomes a row), the record of
which model run made each part, the batch check, and the atomic write of the file once every part is there.
The infer stage (vlmgrid.stages.infer) loads the model and hands the run a way to answer a chunk of records.

Each part is saved with the run that made it: the strategy the protocol answered by and the model's provenance
(versions, device, the server and its version). A job resumed on another server or software version keeps its
earlier parts, so the file's metadata lists every run with the rows it made (`runs`, docs/formats.md).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from vlmgrid.cellrun import invariance
from vlmgrid.cellrun.cell import Cell
from vlmgrid.cellrun.job import Job, merge_runs, predictions_metadata
from vlmgrid.cellrun.parts import PartStore
from vlmgrid.errors import InferenceFailed, VlmgridError
from vlmgrid.predictions import rows_to_table, write_predictions

log = logging.getLogger(__name__)


class CellRun:
    """A cell's job while it runs: its parts (kept as they are done, so a killed job resumes at the first
    missing one), the model run answering now, and the final write."""

    def __init__(self, cell: Cell, job: Job, model_settings: dict, check_items: int = 0) -> None:
        self.cell, self.job, self.model_settings = cell, job, model_settings
        self.check_items = check_items
        self.store = PartStore(cell.partial_dir, job.fingerprint)
        self.store.open()
        self.indices = cell.shard.parts(job.n_parts) if cell.shard is not None else range(job.n_parts)
        self._tables: dict[int, pa.Table] = {}
        self._made_by: dict[int, dict] = {}  # part index: {"strategy", "provenance"} of the run that made it
        for index in self.indices:
            loaded = self.store.load(index, len(job.chunk(index)))
            if loaded is not None:
                self._tables[index], self._made_by[index] = loaded
        self._run: dict | None = None
        self._fallback = self.store.fallback()
        self._invariance = self.store.invariance(check_items) if check_items else None
        if self._tables:
            log.info(
                f"resuming: {len(self._tables)} of {len(self.indices)} parts ({self.done_items} of "
                f"{self.n_items} items) already done"
            )

    @property
    def n_items(self) -> int:
        return sum(len(self.job.chunk(index)) for index in self.indices)

    @property
    def done_items(self) -> int:
        return sum(len(self.job.chunk(index)) for index in self._tables)

    @property
    def pending(self) -> list[int]:
        """The parts still to answer, in order."""
        return [index for index in self.indices if index not in self._tables]

    @property
    def check_pending(self) -> bool:
        """The batch check is asked for and has not run (it runs once every part is done)."""
        return self.check_items > 0 and self._invariance is None

    def check_batches(
        self, reanswer: Callable | None, batch_size: int | None, reason: str | None = None
    ) -> dict:
        """The batch check (`vlmgrid.cellrun.invariance`): the sample's items of this cell (or shard) answered
        again by `reanswer` (records -> rows, one request at a time) and compared with their rows; without
        `reanswer` the model does not batch, and `reason` says so. Kept with the parts until the file is
        written.
        """
        if self.pending:
            raise RuntimeError("the batch check runs once every part is done")
        records = self.job.bench.records
        start, stop = (
            (self.job.bounds[self.indices[0]], self.job.bounds[self.indices[-1] + 1])
            if len(self.indices)
            else (0, 0)
        )
        # The sample is drawn over the whole benchmark: a shard checks the sample's items in its rows, so its
        # shards together check what the unsharded job does.
        drawn = invariance.sample_positions(
            self.job.bench.name, self.job.requests, self.check_items, self.job.check_costs or None
        )
        sample = records.iloc[[p for p in drawn if start <= p < stop]]
        ids = [str(item) for item in sample["id"]]
        if reanswer is None:
            result = invariance.skipped(reason or "the model does not batch its requests")
        elif not drawn and len(records):
            result = invariance.skipped(invariance.too_small(self.job.requests))
        elif not ids:
            result = invariance.compare([], [], [], batch_size)
        else:
            wanted = set(ids)
            batched = [
                row
                for index in self.indices
                for row in self._tables[index].to_pylist()
                if str(row["id"]) in wanted
            ]
            result = invariance.compare(batched, reanswer(sample), ids, batch_size)
        self.store.save_invariance(self.check_items, result)
        self._invariance = result
        if result.get("skipped"):
            log.info(f"batch check skipped: {result['skipped']}")
        elif result["differing"]:
            log.warning(
                f"batch check: {len(result['differing'])} of {result['checked']} item(s) answered one at "
                f"a time differ from their batched answers (batch size {batch_size}): "
                f"{', '.join(result['differing'][:5])}; the cell is marked in the report"
            )
        else:
            log.info(
                f"batch check: {result['checked']} item(s) answered one at a time match their batched "
                f"answers (largest log-probability difference {result['max_logprob_delta']})"
            )
        return result

    def begin(self, provenance: dict) -> None:
        """A model run starts answering: the parts it saves from now on are recorded as its own."""
        self._run = {"strategy": None, "provenance": provenance}

    def set_strategy(self, strategy: str) -> None:
        """How the running model answers from now on (a fallback changes it mid-run)."""
        if self._run is None:
            raise RuntimeError("set_strategy before begin: a run must start before it answers")
        self._run = {**self._run, "strategy": strategy}

    def note_fallback(self, note: str) -> None:
        """`answer_mode: auto` dropped a capability: the sentence goes into the file's metadata."""
        self.store.save_fallback(note)
        self._fallback = note

    def answer(self, answer_chunk: Callable, *, progress: bool = True) -> None:
        """Answer every missing part with `answer_chunk` (records -> rows), saving each as it is done.

        A second pass retries the parts whose items failed to run (a response cache answers again what
        succeeded); a failure that says the job must stop ends it at once. Either way no failed item becomes a
        row: what is left raises one sentence naming the items, the causes and the parts kept.
        """
        from tqdm import tqdm

        if self._run is None:
            raise RuntimeError("answer before begin: the run that answers must be named first")
        desc = f"{self.cell.model} on {self.job.bench.name}" + (
            f" (shard {self.cell.shard})" if self.cell.shard is not None else ""
        )
        bar = tqdm(
            total=self.n_items,
            initial=self.done_items,
            unit="item",
            desc=desc,
            disable=not progress,
            file=sys.stderr,
            mininterval=2.0,
            dynamic_ncols=True,
        )
        failures: dict[str, str] = {}
        stopped: InferenceFailed | None = None
        pending = self.pending
        for attempt in range(2):
            if attempt:
                if not pending or stopped is not None:
                    break
                log.info(f"retrying {len(pending)} part(s) whose items failed to run")
                failures = {}
            failed_parts = []
            for index in pending:
                chunk = self.job.chunk(index)
                try:
                    rows = answer_chunk(chunk)
                except InferenceFailed as failed:
                    failures.update(failed.failures)
                    failed_parts.append(index)
                    if failed.stop:
                        stopped = failed
                        break
                    continue
                self._check_rows(rows, chunk)
                self._save(index, rows_to_table(rows))
                bar.update(len(chunk))
            pending = failed_parts
        bar.close()
        if stopped is not None or pending:
            raise VlmgridError(self._failure_sentence(failures, stopped))

    def _save(self, index: int, table: pa.Table) -> None:
        self.store.save(index, table, self._run)
        self._tables[index], self._made_by[index] = table, self._run

    def finish(self) -> Path:
        """Write the file (every part there, in record order), atomically, then remove the parts."""
        if self.pending:
            raise RuntimeError(f"finish with {len(self.pending)} part(s) still to answer")
        merged = (
            pa.concat_tables([self._tables[i] for i in self.indices])
            if len(self.indices)
            else rows_to_table([])
        )
        last = (
            self._made_by[self.indices[-1]] if len(self.indices) else {"strategy": None, "provenance": None}
        )
        metadata = predictions_metadata(
            model_name=self.cell.model,
            model_settings=self.model_settings,
            job=self.job,
            strategy=last["strategy"],
            provenance=last["provenance"],
            fallback=self._fallback,
            invariance=self._invariance,
        )
        if len(self.indices):
            metadata["runs"] = self.runs()
        if self.cell.shard is not None:
            metadata["shard"] = self.cell.shard.metadata(self.job)
        write_predictions(self.cell.out_path, merged, metadata)
        self.store.remove()
        errors = sum(1 for value in merged.column("error").to_pylist() if value is not None)
        log.info(f"wrote {self.cell.out_path}: {merged.num_rows} rows, {errors} error rows")
        return self.cell.out_path

    def runs(self) -> list[dict]:
        """Every model run that made rows, with its rows (record positions, half-open ranges), in row
        order."""
        return merge_runs(
            [
                {**self._made_by[index], "rows": [[self.job.bounds[index], self.job.bounds[index + 1]]]}
                for index in self.indices
            ]
        )

    def _check_rows(self, rows: list[dict], chunk) -> None:
        if {row["id"] for row in rows} != set(chunk["id"]):
            raise VlmgridError(
                f"{self.cell.model} on {self.job.bench.name}: the protocol returned rows for other items "
                "than it was given; this is a bug, please report it"
            )

    def _failure_sentence(self, failures: dict[str, str], stopped: InferenceFailed | None) -> str:
        """One sentence: what failed to run (items, distinct causes, the first ids), what is kept, what to
        do."""
        from collections import Counter

        said = f"{self.cell.model} on {self.job.bench.name}: "
        if failures:
            causes = Counter(failures.values()).most_common()
            shown = "; ".join(f"{cause}: {count}x" for cause, count in causes[:3])
            more = f"; {len(causes) - 3} other causes" if len(causes) > 3 else ""
            said += (
                f"{len(failures)} item(s) failed to run ({shown}{more}; the first: "
                f"{', '.join(list(failures)[:5])})"
            )
        if stopped is not None:
            said += f"{' and ' if failures else ''}the job stopped: {stopped}"
        return (
            f"{said}. No predictions file was written ({self.cell.out_path}); {len(self._tables)} of "
            f"{len(self.indices)} parts are done and kept, so once the cause is fixed the same command (or "
            f"snakemake / dvc repro) runs only the missing parts"
        )
