"""The grid the report draws from: every cell's score file read and checked (`load_grid`), with the rules on
which cells are marked, failed, not applicable, hidden or missing, and each model's average."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from vlmgrid.errors import VlmgridError
from vlmgrid.report.score_file import (
    Estimate,
    Group,
    Hidden,
    NotApplicable,
    PartialCopy,
    ScoreCell,
    ToolFigure,
    Variant,
    read_score,
)

# A cell whose format error rate exceeds this many percent is marked in every table and figure (the config's
# `report.flag_error_rate`).
FLAG_ERROR_RATE = 10.0

# What the averages do with a cell that answers a subset of its benchmark (the config's
# `report.partial_cells`): leave it out (default), or take it in as it is; either way the cell and the average
# are marked.
PARTIAL_CELLS = ("exclude", "include")


def is_failed(cell: ScoreCell | Group | Variant) -> bool:
    """Every prediction row is an error or unparsable, or no item has a readable answer in every prompt
    variant (`n_valid` 0): the cell, or the part of one, has no number (its value only counts failures)."""
    return (cell.format_error_rate is not None and cell.format_error_rate >= 100.0) or cell.n_valid == 0


@dataclass(frozen=True)
class Grid:
    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    cells: dict[tuple[str, str], ScoreCell]
    not_applicable: dict[tuple[str, str], NotApplicable] = field(default_factory=dict)
    hidden: dict[tuple[str, str], Hidden] = field(default_factory=dict)
    # {benchmark: kind}; empty when the caller does not say (then no paper tables are written)
    kinds: dict[str, str] = field(default_factory=dict)
    # Cells whose every prediction row is an error or unparsable (format_error_rate 100), or without an item
    # readable in every prompt variant (n_valid 0): no number.
    failed: dict[tuple[str, str], ScoreCell] = field(default_factory=dict)
    # Cells whose score file does not exist or is outdated, read with allow_missing: {cell: its score file}.
    missing: dict[tuple[str, str], Path] = field(default_factory=dict)
    # Percent of format errors above which a cell's numbers are marked.
    flag_error_rate: float = FLAG_ERROR_RATE
    # "exclude": a partial cell (one that answers a subset) stays out of its model's average; "include": in.
    partial_cells: str = PARTIAL_CELLS[0]

    def cell(self, model: str, benchmark: str) -> ScoreCell | None:
        """The scored cell; None when it is not in the grid, not applicable, hidden, failed or missing."""
        return self.cells.get((model, benchmark))

    def is_failed(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.failed

    def is_missing(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.missing

    def model_has_failed(self, model: str) -> bool:
        return any(self.is_failed(model, benchmark) for benchmark in self.benchmarks)

    def model_has_missing(self, model: str) -> bool:
        return any(self.is_missing(model, benchmark) for benchmark in self.benchmarks)

    def flag(self, model: str, benchmark: str) -> float | None:
        """The cell's format error rate when it exceeds the threshold (a failed cell's too); None
        otherwise."""
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        if cell is None or cell.format_error_rate is None:
            return None
        return cell.format_error_rate if cell.format_error_rate > self.flag_error_rate else None

    def part_rate(self, model: str, benchmark: str, part: Group | Variant) -> float | None:
        """A part's (a breakdown group's, a prompt variant's) own format error rate, or its cell's where the
        score gives the part none (a score file written before parts had one)."""
        if part.format_error_rate is not None:
            return part.format_error_rate
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        return None if cell is None else cell.format_error_rate

    def part_flag(self, model: str, benchmark: str, part: Group | Variant) -> float | None:
        """`part_rate` when it exceeds the threshold; None otherwise."""
        rate = self.part_rate(model, benchmark, part)
        return rate if rate is not None and rate > self.flag_error_rate else None

    def part_failed(self, model: str, benchmark: str, part: Group | Variant) -> bool:
        """Whether a part has no number (`is_failed`), by its own counts where the score gives them, else as
        its cell."""
        if part.format_error_rate is not None or part.n_valid is not None:
            return is_failed(part)
        return self.is_failed(model, benchmark)

    def flagged(self) -> list[tuple[str, str, float]]:
        """(model, benchmark, format error rate) of every marked cell, failed ones included, in grid order."""
        return [
            (model, benchmark, rate)
            for model in self.models
            for benchmark in self.benchmarks
            if (rate := self.flag(model, benchmark)) is not None
        ]

    def model_flag(self, model: str) -> float | None:
        """The highest rate among the model's marked cells (its average is built on them); None when none
        is."""
        rates = [rate for benchmark in self.benchmarks if (rate := self.flag(model, benchmark)) is not None]
        return max(rates) if rates else None

    def coverage(self, model: str, benchmark: str) -> tuple[int, int] | None:
        """(answered, total) of a scored cell that answers a subset of its benchmark; None otherwise."""
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        return None if cell is None else cell.coverage

    def coverage_reason(self, model: str, benchmark: str) -> str | None:
        """Why a partial cell's strategy leaves out the other items; None for an import that lacks them."""
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        return None if cell is None else getattr(cell, "coverage_reason", None)

    def partial(self) -> list[tuple[str, str, tuple[int, int]]]:
        """(model, benchmark, (answered, total)) of every partial cell, in grid order."""
        return [
            (model, benchmark, coverage)
            for model in self.models
            for benchmark in self.benchmarks
            if (coverage := self.coverage(model, benchmark)) is not None
        ]

    def model_coverage(self, model: str) -> tuple[int, int] | None:
        """The answered and total items summed over the model's partial cells (its average leaves them out, or
        takes them in: it is marked either way); None when it has none."""
        covered = [c for benchmark in self.benchmarks if (c := self.coverage(model, benchmark)) is not None]
        return (sum(a for a, _ in covered), sum(t for _, t in covered)) if covered else None

    def averaged(self, model: str) -> list[str]:
        """The benchmarks the model's average is over: all, but its partial cells with
        `partial_cells: exclude`."""
        return [
            benchmark
            for benchmark in self.benchmarks
            if self.partial_cells == "include" or self.coverage(model, benchmark) is None
        ]

    def batch_check(self, model: str, benchmark: str) -> dict | None:
        """The batch check's result of a scored (or failed) cell; None when it records none."""
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        return None if cell is None else cell.invariance

    def batch_dependent(self, model: str, benchmark: str) -> bool:
        """Whether an item of the cell was answered otherwise one at a time than in its batch."""
        check = self.batch_check(model, benchmark)
        return bool(check and check["differing"])

    def batch_dependents(self) -> list[tuple[str, str, tuple[int, int]]]:
        """(model, benchmark, (differing, checked)) of every cell the batch check marks, in grid order."""
        return [
            (model, benchmark, (len(check["differing"]), check["checked"]))
            for model in self.models
            for benchmark in self.benchmarks
            if self.batch_dependent(model, benchmark) and (check := self.batch_check(model, benchmark))
        ]

    def model_batch_dependent(self, model: str) -> bool:
        """Whether a cell the model's average is over is batch-dependent (the average is marked too)."""
        return any(self.batch_dependent(model, benchmark) for benchmark in self.averaged(model))

    def partial_copy(self, model: str, benchmark: str) -> PartialCopy | None:
        """The copy a scored (or failed) cell was scored on, where it holds fewer items than the published
        benchmark; None otherwise."""
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        return None if cell is None else cell.partial_copy

    def tool_readings(self) -> list[tuple[str, str, ToolFigure, float]]:
        """(model, benchmark, the tool's figure, the headline) of every scored cell whose score gives the
        publishing tool's own reading, in grid order."""
        return [
            (model, benchmark, cell.tool_reading, cell.estimate.value)
            for model in self.models
            for benchmark in self.benchmarks
            if (cell := self.cells.get((model, benchmark))) is not None and cell.tool_reading is not None
        ]

    def partial_copies(self) -> list[tuple[str, str, PartialCopy]]:
        """(model, benchmark, copy) of every cell scored on a partial copy, in grid order."""
        return [
            (model, benchmark, copy)
            for model in self.models
            for benchmark in self.benchmarks
            if (copy := self.partial_copy(model, benchmark)) is not None
        ]

    def model_partial_copy(self, model: str) -> bool:
        """Whether a cell the model's average is over was scored on a partial copy (the average is marked
        too)."""
        return any(self.partial_copy(model, benchmark) is not None for benchmark in self.averaged(model))

    def marked(self, model: str, benchmark: str, estimate: Estimate | None) -> Estimate | None:
        """`estimate` (of the cell or a part of it) with the cell's marks: its format error rate over the
        threshold, its coverage, whether its answers depend on the batch, whether its copy of the benchmark is
        partial. Every table and figure marks a cell's numbers through this, so a mark reaches them all."""
        if estimate is None:
            return None
        return replace(
            estimate,
            flag=self.flag(model, benchmark),
            coverage=self.coverage(model, benchmark),
            batch=self.batch_dependent(model, benchmark),
            partial_copy=self.partial_copy(model, benchmark) is not None,
        )

    def batch_checked(self) -> bool:
        """Whether any cell records a batch check (the tables then say what it found)."""
        return any(
            self.batch_check(model, benchmark) is not None
            for model in self.models
            for benchmark in self.benchmarks
        )

    def is_not_applicable(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.not_applicable

    def model_has_not_applicable(self, model: str) -> bool:
        return any(self.is_not_applicable(model, benchmark) for benchmark in self.benchmarks)

    def is_hidden(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.hidden

    def status(self, model: str, benchmark: str) -> str | None:
        """Why a cell has no number: "n/a", "hidden", "failed" or "missing"; None when it has one or is not in
        the grid."""
        for status, holds in (
            ("n/a", self.is_not_applicable),
            ("hidden", self.is_hidden),
            ("failed", self.is_failed),
            ("missing", self.is_missing),
        ):
            if holds(model, benchmark):
                return status
        return None

    def model_has_hidden(self, model: str) -> bool:
        return any(self.is_hidden(model, benchmark) for benchmark in self.benchmarks)

    def benchmarks_of_kind(self, kind: str) -> list[str]:
        """The grid's benchmarks of this kind, in grid order."""
        return [benchmark for benchmark in self.benchmarks if self.kinds.get(benchmark) == kind]

    def metric(self, benchmark: str) -> str | None:
        for model in self.models:
            cell = self.cell(model, benchmark)
            if cell is not None:
                return cell.metric
        for model in self.models:
            other = (
                self.failed.get((model, benchmark))
                or self.not_applicable.get((model, benchmark))
                or self.hidden.get((model, benchmark))
            )
            if other is not None and other.metric:
                return other.metric
        return None

    def average(self, model: str) -> Estimate | None:
        """Mean headline over the grid's benchmarks (`averaged`: a partial cell only with `partial_cells:
        include`); CI from the elementwise mean of the bootstrap draws.

        None when the model lacks a benchmark of the grid (missing or not applicable), every cell is left out,
        or its draws cannot be averaged (different lengths, or none).
        """
        cells = [self.cell(model, bench) for bench in self.averaged(model)]
        if not cells or any(cell is None for cell in cells):
            return None
        lengths = {len(cell.draws) for cell in cells}
        if len(lengths) != 1 or 0 in lengths:
            return None
        value = float(np.mean([cell.estimate.value for cell in cells]))
        draws = np.mean(np.array([cell.draws for cell in cells], dtype=float), axis=0)
        low, high = np.percentile(draws, [2.5, 97.5])
        return Estimate(value, float(low), float(high))

    def bootstrap_samples(self) -> list[int]:
        return sorted({cell.samples for cell in self.cells.values()})


def cell_list(cells: Sequence[tuple[str, str]]) -> str:
    """ "m on b, m2 on b2": the cells a footnote is about."""
    return ", ".join(f"{model} on {benchmark}" for model, benchmark in cells)


def load_grid(
    score_files: Mapping[tuple[str, str], Path],
    models: Sequence[str],
    benchmarks: Sequence[str],
    kinds: Mapping[str, str] | None = None,
    *,
    flag_error_rate: float = FLAG_ERROR_RATE,
    allow_missing: bool = False,
    partial_cells: str = PARTIAL_CELLS[0],
    outdated: Collection[tuple[str, str]] = (),
) -> Grid:
    """Read every score file of the grid (keys outside models x benchmarks are ignored); `kinds` gives each
    benchmark's kind ({benchmark: kind}).

    A cell whose format error rate exceeds `flag_error_rate` (percent) is marked; one at 100%, or without an
    item readable in every prompt variant (`n_valid` 0), is failed (no number). With `allow_missing`, a score
    file that does not exist makes its cell missing instead of an error, and so does one in `outdated` (made
    from predictions the cell no longer has: its rerun failed).
    `partial_cells` (exclude / include): whether a model's average takes in its cells that answer a subset.
    """
    if partial_cells not in PARTIAL_CELLS:
        raise VlmgridError(
            f"the report's partial_cells is {partial_cells!r}; give one of {', '.join(PARTIAL_CELLS)}"
        )
    if (
        isinstance(flag_error_rate, bool)
        or not isinstance(flag_error_rate, (int, float))
        or not 0 <= flag_error_rate <= 100
    ):
        raise VlmgridError(
            f"the report's flag_error_rate is {flag_error_rate!r}; give a percent from 0 to 100"
        )
    models = tuple(models)
    benchmarks = tuple(benchmarks)
    for kind, names in (("model", models), ("benchmark", benchmarks)):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise VlmgridError(f"the report lists the {kind} {duplicates[0]!r} twice; list each {kind} once")
    cells: dict[tuple[str, str], ScoreCell] = {}
    not_applicable: dict[tuple[str, str], NotApplicable] = {}
    hidden: dict[tuple[str, str], Hidden] = {}
    missing: dict[tuple[str, str], Path] = {}
    for model in models:
        for benchmark in benchmarks:
            path = score_files.get((model, benchmark))
            if path is None:
                continue
            if allow_missing and (not Path(path).exists() or (model, benchmark) in outdated):
                missing[(model, benchmark)] = Path(path)
                continue
            read = read_score(path, model, benchmark)
            if isinstance(read, NotApplicable):
                not_applicable[(model, benchmark)] = read
            elif isinstance(read, Hidden):
                hidden[(model, benchmark)] = read
            else:
                cells[(model, benchmark)] = read
    if not cells and not not_applicable and not hidden and not missing:
        raise VlmgridError("the report has no score files to read; run `vlmgrid score <model> <bench>` first")
    for benchmark in benchmarks:
        first: ScoreCell | None = None
        for model in models:
            cell = cells.get((model, benchmark))
            if cell is None:
                continue
            if first is None:
                first = cell
            elif cell.metric != first.metric:
                raise VlmgridError(
                    f"{cell.path} scores {benchmark} by {cell.metric!r} but {first.path} by "
                    f"{first.metric!r}; rerun `vlmgrid score {model} {benchmark}` so both use the "
                    "benchmark's metric"
                )
    failed = {key: cell for key, cell in cells.items() if is_failed(cell)}
    cells = {key: cell for key, cell in cells.items() if key not in failed}
    return Grid(
        models,
        benchmarks,
        cells,
        not_applicable,
        hidden,
        dict(kinds or {}),
        failed,
        missing,
        float(flag_error_rate),
        partial_cells,
    )
