"""The notes that explain the report's marks and words, shared by the tables and figures: the dagger (format
errors), the double dagger (partial cells), the not-equal sign (batch-dependent answers), the pilcrow (partial
copies of a benchmark), failed and missing."""

from __future__ import annotations

from vlmgrid.report.grid import Grid, cell_list
from vlmgrid.report.score_file import PartialCopy, ToolFigure
from vlmgrid.report.tables.format import BATCH_MARK, COPY_MARK, DAGGER, FAILED, MISSING, PARTIAL, threshold


def tool_reading_note(cells: list[tuple[str, str, ToolFigure, float]]) -> str:
    """The figure each cell's publishing tool gives its answers by its own reading, beside the headline (""
    when no cell has one): the headline reads them by the benchmark authors' rule, the tool by its matcher and
    judge model (`vlmgrid diff BENCH A --tool-reading` gives the items they read differently)."""
    if not cells:
        return ""
    listed = "; ".join(
        f"{model} on {benchmark} {figure.value:.1f} by {figure.tool} ({figure.n_read_by_judge:,} "
        f"answers read by its judge), {headline:.1f} by the official rule"
        for model, benchmark, figure, headline in cells
    )
    return (
        f"The tool that published the answers reads them its own way (its option matcher, and a judge model "
        f"where that reads nothing), a second figure, never the headline: {listed}."
    )


def flag_note(grid: Grid, cells: list[tuple[str, str, float]], *, average: bool = False) -> str:
    """The footnote of the dagger: the threshold and each marked cell with its rate ("" when none is)."""
    if not cells:
        return ""
    listed = ", ".join(
        f"{model} on {benchmark} {rate:.1f}%" + (f" ({FAILED})" if grid.is_failed(model, benchmark) else "")
        for model, benchmark, rate in cells
    )
    note = (
        f"{DAGGER}: more than {threshold(grid)} of the cell's prediction rows are errors or unparsable "
        f"answers (format errors, counted as the benchmark's rule says, usually as wrong): {listed}."
    )
    if average:
        note += " An average over such a cell is marked too."
    return note


def coverage_note(grid: Grid, cells: list[tuple[str, str, tuple[int, int]]], *, average: bool = False) -> str:
    """The footnote of the double dagger: each cell that answers a subset, with its coverage ("" when none
    does); with `average`, what the averages do with such cells (`report.partial_cells`)."""
    if not cells:
        return ""
    imported = [(m, b, counts) for m, b, counts in cells if grid.coverage_reason(m, b) is None]
    scoped = [(m, b, counts) for m, b, counts in cells if grid.coverage_reason(m, b) is not None]
    notes = []
    if imported:
        listed = ", ".join(
            f"{model} on {benchmark} {answered:,} of {total:,} answered"
            for model, benchmark, (answered, total) in imported
        )
        notes.append(
            f"the cell answers a subset of the benchmark's items (its published answer file lacks the "
            f"others, which are absent, not wrong; its numbers are over the answered items): {listed}"
        )
    if scoped:
        listed = "; ".join(
            f"{model} on {benchmark}, {answered:,} of {total:,} answered "
            f"({total - answered:,} not applicable: {grid.coverage_reason(model, benchmark)})"
            for model, benchmark, (answered, total) in scoped
        )
        notes.append(
            f"items the model cannot answer at all are not applicable, not wrong, and left out: {listed}"
        )
    note = f"{PARTIAL}: " + "; and ".join(notes) + "."
    if average:
        note += (
            " An average marked so leaves such a cell out (report.partial_cells: exclude)."
            if grid.partial_cells == "exclude"
            else " An average marked so takes such a cell in as it is (report.partial_cells: include)."
        )
    return note


def batch_note(cells: list[tuple[str, str, tuple[int, int]]], *, average: bool = False) -> str:
    """The footnote of the not-equal sign: each cell whose answers depend on the batch, with how many of its
    checked items differ ("" when none does)."""
    if not cells:
        return ""
    listed = ", ".join(
        f"{model} on {benchmark} {differing} of {checked}" for model, benchmark, (differing, checked) in cells
    )
    note = (
        f"{BATCH_MARK}: answers depend on the batch: items answered again one at a time (batch size 1, no "
        f"padding) got other answers than in their batch, so the numbers depend on how items were batched "
        f"(a batching bug such as padding on the wrong side; the inspect page lists the items): {listed}."
    )
    if average:
        note += " An average over such a cell is marked too."
    return note


def _copy_words(copy: PartialCopy) -> str:
    return (
        f"{copy.items:,} items standing in for {copy.published:,}"
        if copy.fixture
        else f"{copy.items:,} of {copy.published:,} items"
    )


def copy_note(cells: list[tuple[str, str, PartialCopy]], *, average: bool = False) -> str:
    """The footnote of the pilcrow: each benchmark whose cells were scored on a copy holding fewer items than
    the published benchmark, with the count, named once for its cells (each cell where their copies differ);
    "" when none was."""
    if not cells:
        return ""
    by_benchmark: dict[str, list[tuple[str, PartialCopy]]] = {}
    for model, benchmark, copy in cells:
        by_benchmark.setdefault(benchmark, []).append((model, copy))
    named = []
    for benchmark, entries in by_benchmark.items():
        if len({copy for _, copy in entries}) == 1:
            named.append((benchmark, entries[0][1]))
        else:
            named += [(f"{model} on {benchmark}", copy) for model, copy in entries]
    notes = []
    copies = ", ".join(f"{name} {_copy_words(copy)}" for name, copy in named if not copy.fixture)
    if copies:
        notes.append(
            f"the benchmark's prepared copy holds fewer items than the published benchmark, so the number "
            f"is over those items alone: {copies}"
        )
    fixtures = ", ".join(f"{name} {_copy_words(copy)}" for name, copy in named if copy.fixture)
    if fixtures:
        notes.append(
            f"a fixture: generated stand-ins in the benchmark's format, none of its items, so the number is "
            f"not the benchmark's: {fixtures}"
        )
    note = f"{COPY_MARK}: " + "; and ".join(notes) + "."
    if average:
        note += " An average over such a cell is marked too."
    return note


def status_notes(grid: Grid, cells: list[tuple[str, str]] | None = None, *, average: bool = False) -> str:
    """The notes on failed and missing cells among `cells` (default: the whole grid); "" when there are
    none."""
    keys = cells if cells is not None else [(m, b) for m in grid.models for b in grid.benchmarks]
    failed = [key for key in keys if grid.is_failed(*key)]
    missing = [key for key in keys if grid.is_missing(*key)]
    notes = []
    if failed:
        notes.append(
            f"{FAILED}: every prediction row of the cell is an error or unparsable, so it has no number"
            + (f" (that model's average is then {FAILED} too)" if average else "")
            + "."
        )
    if missing:
        notes.append(
            f"{MISSING}: the cell has no score file, or one made from predictions it no longer has (it "
            f"failed or has not run since): {cell_list(missing)}"
            + (f" (that model's average is then {MISSING} too)" if average else "")
            + "."
        )
    return " ".join(notes)
