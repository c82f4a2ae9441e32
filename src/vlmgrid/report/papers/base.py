"""What the paper tables share: a `Table` of entries (Markdown, LaTeX, CSV) whose rows or columns carry
their cell's marks, the rows and notes built from the grid, and the grouped-bar series of the paper
figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.fileio import write_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import answered_label, decoding_label, interval_label
from vlmgrid.report.score_file import Group, PartialCopy, ScoreCell, Variant
from vlmgrid.report.tables.format import (
    BATCH_MARK,
    COPY_MARK,
    DAGGER,
    DASH,
    FAILED,
    HIDDEN,
    MISSING,
    NA,
    Entry,
    copy_columns,
    emphasis,
    entry_value,
    error_rate,
    estimate_frame,
    fmt_estimate,
    is_flagged,
    latex_cell,
    latex_name,
    latex_table,
    md_table,
    part_entry,
    status,
    threshold,
    write_csv,
)
from vlmgrid.report.tables.notes import batch_note, copy_note, coverage_note


@dataclass(frozen=True)
class Marks:
    """Which cells a table's rows (or columns) stand for are marked: per row (column), the cell's format error
    rate and whether it is over the threshold (None, None: no score with a rate), whether its answers
    depend on the batch, and the partial copy of the benchmark it was scored on (None: a whole one)."""

    rates: Sequence[float | None]
    flagged: Sequence[bool | None]
    batch: Sequence[bool] = ()
    copies: Sequence[PartialCopy | None] = ()

    @classmethod
    def of(cls, grid: Grid, benchmark: str, models: Sequence[str]) -> Marks:
        return cls(
            [error_rate(grid, m, benchmark) for m in models],
            [is_flagged(grid, m, benchmark) for m in models],
            [grid.batch_dependent(m, benchmark) for m in models],
            [grid.partial_copy(m, benchmark) for m in models],
        )

    def name(self, i: int, name: str) -> str:
        return (
            name
            + (DAGGER if self.flagged[i] else "")
            + (BATCH_MARK if self.batch and self.batch[i] else "")
            + (COPY_MARK if self.copies and self.copies[i] is not None else "")
        )


@dataclass(frozen=True)
class Table:
    """Rows of entries under named columns: Markdown, LaTeX and CSV (a value and two CI columns per column).

    One marked cell per row (`row_marks`: models as rows) or per column (`column_marks`: models as columns):
    its row or column name carries a dagger, and the CSV adds `format_error_rate` (where the table has no such
    column) and `flagged`, once per row or per marked column (`<column>_format_error_rate`,
    `<column>_flagged`).
    """

    title: str
    row_header: str
    columns: Sequence[str]
    csv_columns: Sequence[str]
    rows: Sequence[tuple[str, Sequence[Entry]]]
    caption: str
    row_marks: Marks | None = None
    column_marks: Marks | None = None
    lower_is_better: Sequence[str] = ()  # columns where the smaller value is the better one (format errors)

    def _row_name(self, i: int, name: str) -> str:
        return self.row_marks.name(i, name) if self.row_marks is not None else name

    def _columns(self) -> list[str]:
        if self.column_marks is None:
            return list(self.columns)
        return [self.column_marks.name(j, column) for j, column in enumerate(self.columns)]

    def markdown(self) -> str:
        header = [self.row_header, *self._columns()]
        rows = [
            [self._row_name(i, name), *(fmt_estimate(e) for e in entries)]
            for i, (name, entries) in enumerate(self.rows)
        ]
        table = md_table(header, rows, [":---"] + ["---:"] * len(self.columns))
        return f"# {markdown_text(self.title)}\n\n{table}\n\n{self.caption}\n"

    def _emphasis(self) -> list[list[str | None]]:
        """Per row, per column: BEST / SECOND among the models, that is down a column where models are rows
        and along a row where they are columns; lower is better in the `lower_is_better` columns."""
        values = [[entry_value(entry) for entry in entries] for _, entries in self.rows]
        if self.column_marks is not None:
            return [emphasis(row) for row in values]
        by_column = [
            emphasis([row[j] for row in values], lower_is_better=column in self.lower_is_better)
            for j, column in enumerate(self.columns)
        ]
        return [[by_column[j][i] for j in range(len(self.columns))] for i in range(len(values))]

    def latex(self, label: str) -> str:
        marks = self._emphasis()
        header = [[latex_name(h) for h in [self.row_header, *self._columns()]]]
        body = [
            [latex_name(self._row_name(i, name))]
            + [latex_cell(e, marks[i][j]) for j, e in enumerate(entries)]
            for i, (name, entries) in enumerate(self.rows)
        ]
        best = "the best model" + (
            ", lower is better for " + ", ".join(self.lower_is_better) if self.lower_is_better else ""
        )
        return latex_table(
            f"{self.title}. {self.caption} Bold: {best}; underlined: the second.", label, header, body
        )

    def frame(self) -> pd.DataFrame:
        frame = estimate_frame(self.row_header.lower().replace(" ", "_"), self.csv_columns, self.rows)
        if self.row_marks is not None:
            if "format_error_rate" not in self.csv_columns:
                frame["format_error_rate"] = pd.array(list(self.row_marks.rates), dtype="float64")
            frame["flagged"] = pd.array(list(self.row_marks.flagged), dtype="boolean")
            if any(self.row_marks.batch):
                frame["batch_dependent"] = pd.array(list(self.row_marks.batch), dtype="boolean")
            if any(self.row_marks.copies):
                frame = frame.assign(**copy_columns(self.row_marks.copies))
        if self.column_marks is not None:
            for j, column in enumerate(self.csv_columns):
                frame[f"{column}_format_error_rate"] = pd.array(
                    [self.column_marks.rates[j]] * len(frame), dtype="float64"
                )
                frame[f"{column}_flagged"] = pd.array(
                    [self.column_marks.flagged[j]] * len(frame), dtype="boolean"
                )
                if any(self.column_marks.batch):
                    frame[f"{column}_batch_dependent"] = pd.array(
                        [self.column_marks.batch[j]] * len(frame), dtype="boolean"
                    )
                if any(self.column_marks.copies):
                    for name, values in copy_columns([self.column_marks.copies[j]] * len(frame)).items():
                        frame[f"{column}_{name}"] = values
        return frame


def entry_status(grid: Grid, model: str, benchmark: str) -> str | None:
    """The status word of a cell without numbers (n/a, hidden, missing, failed: its row or column name carries
    the dagger), DASH when not in the grid, None for a scored cell."""
    if grid.is_failed(model, benchmark):
        return FAILED
    word = status(grid, model, benchmark)
    if word is not None:
        return word
    return None if grid.cell(model, benchmark) is not None else DASH


def model_rows(
    grid: Grid, benchmark: str, width: int, entries_of: Callable[[ScoreCell], list[Entry]]
) -> list:
    """(model, entries) per model: entries_of(cell) for a scored cell, its status in all `width` columns for a
    cell without numbers."""
    rows = []
    for model in grid.models:
        status = entry_status(grid, model, benchmark)
        rows.append(
            (model, [status] * width if status is not None else entries_of(grid.cell(model, benchmark)))
        )
    return rows


def group_part(cell: ScoreCell, column: str, name: str) -> Group | None:
    """The group `name` of the breakdown column; None when the score lacks it."""
    for group in cell.breakdown.get(column, []):
        if group.name == name:
            return group
    return None


# (model, what the table calls the part, the part): the parts of cells a paper table shows
Shown = tuple[str, str, Group | Variant]


def part_value(grid: Grid, model: str, benchmark: str, part: Group | Variant | None) -> Entry:
    """A part of a cell (a breakdown group, a prompt variant) in a paper table: None where the score lacks it,
    "failed" where it has no number, else its estimate; the dagger only by the part's own format error rate
    (the row or column name carries the cell's marks)."""
    return None if part is None else part_entry(grid, model, benchmark, part, cell_marks=False)


def shown_groups(grid: Grid, benchmark: str, column: str, names: Sequence[str]) -> list[Shown]:
    """The groups `names` of the breakdown column, of each scored cell of the benchmark, in grid order."""
    return [
        (model, name, group)
        for model in grid.models
        if (cell := grid.cell(model, benchmark)) is not None
        for name in names
        if (group := group_part(cell, column, name)) is not None
    ]


def part_notes(grid: Grid, benchmark: str, parts: Sequence[Shown], what: str) -> list[str]:
    """The notes on the parts a table shows (`what` they are, "language") that their own format error rate
    marks (above the threshold) or that have no number ("failed")."""
    own = [
        (model, name, part)
        for model, name, part in parts
        if part.format_error_rate is not None and grid.part_flag(model, benchmark, part) is not None
    ]
    failed = [(model, name) for model, name, part in parts if grid.part_failed(model, benchmark, part)]
    notes = []
    if own:
        listed = ", ".join(
            f"{model} {name} {part.format_error_rate:.1f}%"
            + (f" ({FAILED})" if grid.part_failed(model, benchmark, part) else "")
            for model, name, part in own
        )
        notes.append(
            f"{DAGGER} after a {what}'s value: more than {threshold(grid)} of that {what}'s prediction rows "
            f"are errors or unparsable answers: {listed}."
        )
    if failed:
        listed = ", ".join(f"{model} {name}" for model, name in failed)
        notes.append(
            f"{FAILED} in a {what}'s column: every prediction row of the {what} is an error or unparsable "
            f"(with several prompt variants: no item has a readable answer in all of them), so it has no "
            f"number: {listed}."
        )
    return notes


def group_names(grid: Grid, benchmark: str, column: str) -> list[str]:
    """The group names of a breakdown column over the benchmark's cells, in first-seen order."""
    names: list[str] = []
    for model in grid.models:
        cell = grid.cell(model, benchmark)
        if cell is not None:
            names += [g.name for g in cell.breakdown.get(column, []) if g.name not in names]
    return names


def answered_note(grid: Grid, benchmark: str) -> str:
    """Per model, how it answered and, for generated answers, how they were decoded."""
    parts = []
    for model in grid.models:
        source = (
            grid.cell(model, benchmark)
            or grid.failed.get((model, benchmark))
            or grid.hidden.get((model, benchmark))
        )
        if source is None or source.strategy is None:
            continue
        decoding = decoding_label(source.strategy, source.generation)
        # Only generated answers are decoded; say so, since the sampling settings move the numbers.
        parts.append(
            f"{model}: {answered_label(source.strategy, source.backend, source.model_id)}, "
            f"{decoding or 'nothing generated, no sampling'}"
        )
    return "How each model answered: " + "; ".join(parts) + "." if parts else ""


def cell_notes(grid: Grid, benchmark: str, parts: Sequence[Shown] = (), what: str = "group") -> str:
    """The notes on the benchmark's cells, and on the `parts` of them the table shows (`part_notes`)."""
    notes = []
    if any(grid.is_not_applicable(m, benchmark) for m in grid.models):
        notes.append(f"{NA}: the model cannot run this benchmark.")
    if any(grid.is_hidden(m, benchmark) for m in grid.models):
        notes.append(f"{HIDDEN}: the benchmark's labels are not public; the submission file was written.")
    marked = [(m, rate) for m in grid.models if (rate := grid.flag(m, benchmark)) is not None]
    if marked:
        listed = ", ".join(
            f"{m} {rate:.1f}%" + (f" ({FAILED})" if grid.is_failed(m, benchmark) else "")
            for m, rate in marked
        )
        notes.append(
            f"{DAGGER}: more than {threshold(grid)} of the model's prediction rows are errors or unparsable "
            f"answers (format errors, counted as the benchmark's rule says, usually as wrong), so its "
            f"numbers are built on them: {listed}."
        )
    notes += part_notes(grid, benchmark, parts, what)
    batched = batch_note([entry for entry in grid.batch_dependents() if entry[1] == benchmark])
    if batched:
        notes.append(batched)
    copied = copy_note([entry for entry in grid.partial_copies() if entry[1] == benchmark])
    if copied:
        notes.append(copied)
    if any(grid.is_failed(m, benchmark) for m in grid.models):
        notes.append(
            f"{FAILED}: every prediction row is an error or unparsable (with several prompt variants: no "
            f"item has a readable answer in all of them), so the cell has no number."
        )
    if any(grid.is_missing(m, benchmark) for m in grid.models):
        notes.append(f"{MISSING}: the cell has no score file (it failed or has not run).")
    return " ".join(notes)


def join_caption(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def write_table(table: Table, tables_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    written = []
    for suffix in formats:
        path = tables_dir / f"{stem}.{suffix}"
        if suffix == "md":
            write_text(path, table.markdown())
        elif suffix == "tex":
            write_text(path, table.latex(stem))
        else:
            write_csv(path, table.frame())
        written.append(path)
    return written


def group_series(grid: Grid, benchmark: str, groups: Sequence[str], column: str) -> list:
    """Per model (its name marked when its cell is), its estimate per group (hatched when the cell is marked,
    or the group by its own format error rate), "failed" where the group has no number."""
    series = []
    marks = Marks.of(grid, benchmark, grid.models)
    for i, model in enumerate(grid.models):
        cell = grid.cell(model, benchmark)
        word = status(grid, model, benchmark)  # written where the bars would stand
        entries: list[Entry] = []
        for name in groups:
            group = None if cell is None else group_part(cell, column, name)
            own = part_value(grid, model, benchmark, group)
            if cell is None or isinstance(own, str):
                entries.append(word if cell is None else own)
                continue
            est = grid.marked(model, benchmark, None if group is None else group.estimate)
            entries.append(est if own is None or own.flag is None else replace(est, flag=own.flag))
        series.append((marks.name(i, model), entries))
    return series


def figure_note(grid: Grid, benchmark: str, parts: Sequence[Shown] = (), what: str = "group") -> str:
    """What the figure's whiskers and marks mean: the interval, then the table's notes on marked, failed and
    missing cells, and on the `parts` (the groups the bars show) that their own rate marks or that failed."""
    samples = [cell.samples for m in grid.models if (cell := grid.cell(m, benchmark)) is not None]
    notes = [f"Whiskers: {interval_label(samples)}."]
    marked = [
        (m, rate)
        for m in grid.models
        if (rate := grid.flag(m, benchmark)) is not None and not grid.is_failed(m, benchmark)
    ]
    if marked:
        notes.append(
            f"{DAGGER} and hatched bars: format errors above {threshold(grid)} of the prediction rows ("
            + ", ".join(f"{m} {rate:.1f}%" for m, rate in marked)
            + ")."
        )
    # the bars of a cell that answers a subset carry the double dagger (Grid.marked), explained here
    partial = coverage_note(grid, [entry for entry in grid.partial() if entry[1] == benchmark])
    if partial:
        notes.append(partial)
    batched = batch_note([entry for entry in grid.batch_dependents() if entry[1] == benchmark])
    if batched:
        notes.append(batched)
    copied = copy_note([entry for entry in grid.partial_copies() if entry[1] == benchmark])
    if copied:
        notes.append(copied)
    own = [
        f"{m} {name} {part.format_error_rate:.1f}%"
        for m, name, part in parts
        if part.format_error_rate is not None
        and grid.part_flag(m, benchmark, part) is not None
        and not grid.part_failed(m, benchmark, part)
    ]
    if own:
        notes.append(
            f"{DAGGER} and hatched bars of a {what}: format errors above {threshold(grid)} of that {what}'s "
            f"prediction rows ({', '.join(own)})."
        )
    failed = [m for m in grid.models if grid.is_failed(m, benchmark)]
    if failed:
        notes.append(
            f"No bar, {FAILED}: every prediction row is an error or unparsable (with several prompt "
            f"variants: no item has a readable answer in all of them) ({', '.join(failed)})."
        )
    gone = [f"{m} {name}" for m, name, part in parts if grid.part_failed(m, benchmark, part)]
    if gone:
        notes.append(
            f"No bar, {FAILED}: every prediction row of the {what} is an error or unparsable (with several "
            f"prompt variants: no item has a readable answer in all of them) ({', '.join(gone)})."
        )
    missing = [m for m in grid.models if grid.is_missing(m, benchmark)]
    if missing:
        notes.append(f"No bar, {MISSING}: no score file ({', '.join(missing)}).")
    return " ".join(notes)
