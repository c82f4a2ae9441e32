"""A cell: its identity (a model on a benchmark, or one shard of it), where its files go, and the plan of its
run.

`Shard` is "I of N" of a cell's parts (vlmgrid.cellrun.shards merges them). `Cell.running()` holds the cell's
lock (vlmgrid.cellrun.lock) for a whole job. `CellPlan` is everything decided about a cell before it runs,
once, by the plan (`vlmgrid.stages.plan.cell_plan`): whether the model can run the benchmark, how many GPUs
its job holds, where the weights are read (a checkpoint read in place, and its fingerprint), the model's
server, and the settings of the job; the infer stage's run, the merge of shards and the current-cell check
all take it as given.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vlmgrid import paths
from vlmgrid.cellrun.job import Job, write_not_applicable
from vlmgrid.cellrun.lock import cell_lock
from vlmgrid.errors import VlmgridError

if TYPE_CHECKING:
    from vlmgrid.serving import ServerPlan

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # from 1
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise VlmgridError(
                f"shard {self.index}/{self.count} does not "
                "exist: a shard is I/N with N >= 1 and I from 1 to N"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        found = _SHARD.match(text)
        if not found:
            raise VlmgridError(f'--shard "{text}" is not I/N (shard I of N, counted from 1, e.g. 2/3)')
        return cls(int(found.group(1)), int(found.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def parts(self, n_parts: int) -> range:
        """This shard's part indices: the count splits the parts into contiguous ranges whose sizes differ by
        one at most (empty when there are fewer parts than shards)."""
        return range((self.index - 1) * n_parts // self.count, self.index * n_parts // self.count)

    def metadata(self, job: Job) -> dict:
        """What a shard file records besides a predictions file's metadata: which shard of which job it is."""
        parts = self.parts(job.n_parts)
        return {
            "index": self.index,
            "count": self.count,
            "parts": [parts.start, parts.stop],
            "n_parts": job.n_parts,
            "part_size": job.part_size,
            "job": job.fingerprint,
        }


@dataclass(frozen=True)
class Cell:
    """A model on a benchmark (or one shard of it) and where its files go."""

    model: str
    benchmark: str
    out_path: Path  # the predictions file, or the shard's file
    partial_dir: Path  # the parts of an unfinished job
    shard: Shard | None = None

    @classmethod
    def in_results(cls, results_dir: Path, model: str, benchmark: str, shard: Shard | None = None) -> Cell:
        if shard is None:
            return cls(
                model,
                benchmark,
                paths.predictions_path(results_dir, model, benchmark),
                paths.partial_dir(results_dir, model, benchmark),
            )
        return cls(
            model,
            benchmark,
            paths.shard_path(results_dir, model, benchmark, shard.index, shard.count),
            paths.shard_partial_dir(results_dir, model, benchmark, shard.index, shard.count),
            shard,
        )

    def __str__(self) -> str:
        return f"{self.model} on {self.benchmark}" + (
            f", shard {self.shard}" if self.shard is not None else ""
        )

    @contextlib.contextmanager
    def running(self) -> Iterator[Cell]:
        """Hold the cell's lock while the block runs: a second run of the cell refuses at once, naming this
        one. Folders the job leaves empty (`results/partial/<model>/`, then `results/partial/`) are removed as
        it ends."""
        try:
            with cell_lock(self.partial_dir, str(self)):
                yield self
        finally:
            _remove_empty_folders(self.partial_dir.parent, levels=2)

    def write_not_applicable(self, model_settings: dict, reason: str) -> Path:
        """The file of a cell the model cannot run: no rows, and why (any parts left belong to other
        settings)."""
        return write_not_applicable(
            model_name=self.model,
            model_settings=model_settings,
            benchmark=self.benchmark,
            reason=reason,
            out_path=self.out_path,
            partial_dir=self.partial_dir,
        )


def _remove_empty_folders(folder: Path, levels: int) -> None:
    """`folder` and then its parents, `levels` of them at most, while each is empty."""
    for empty in [folder, *folder.parents][:levels]:
        try:
            empty.rmdir()
        except OSError:
            return


@dataclass(frozen=True)
class InPlace:
    """A checkpoint the model's manifest records in place: where loading reads it, and its files'
    fingerprint."""

    location: Path
    fingerprint: str


@dataclass(frozen=True)
class CellPlan:
    """A cell's run as the plan decided it (vlmgrid.stages.plan.cell_plan)."""

    cell: Cell
    model_settings: dict
    not_applicable: str | None  # why the model cannot run the benchmark, in one sentence; None when it can
    gpus: int  # how many GPUs the job holds (0: it runs on the CPU)
    bench_dir: Path
    model_dir: Path  # where the backend loads the weights: the model's folder, or a checkpoint read in place
    checkpoint: (
        InPlace | None
    )  # the checkpoint read in place, whose fingerprint is part of the job's identity
    server: ServerPlan | None  # the server the job starts (a `serve` model), or None
    part_size: int
    check_items: int  # the batch check's sample size (`infer.invariance_items`; 0: no check)
    threads: int
    prompts_dir: Path | None

    @property
    def weights(self) -> str | None:
        """The fingerprint of the checkpoint read in place, part of the job's identity (None: none is)."""
        return self.checkpoint.fingerprint if self.checkpoint is not None else None
