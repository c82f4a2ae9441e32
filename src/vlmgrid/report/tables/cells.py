"""The cells table: how each cell's numbers were answered (log-likelihood, generation + parser, embedding
similarity, a baseline), its decoding, n, valid answers, format error rate and lenient reading (Markdown,
CSV)."""

from __future__ import annotations

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import answered_label, decoding_label
from vlmgrid.report.tables.format import (
    BATCH_MARK,
    COPY_MARK,
    DAGGER,
    DASH,
    FAILED,
    HIDDEN,
    MISSING,
    NA,
    PARTIAL,
    fmt,
    fmt_count,
    is_flagged,
    md_table,
    threshold,
    with_copy_columns,
)
from vlmgrid.report.tables.notes import batch_note, copy_note, coverage_note, tool_reading_note

CELL_COLUMNS = [
    "model",
    "benchmark",
    "status",
    "strategy",
    "answered_by",
    "decoding",
    "n",
    "n_valid",
    "format_error_rate",
    "lenient",
    "flagged",
    "items",
]


def _lenient(cell) -> float | None:
    """The headline under the benchmark's more lenient reading of generated answers, where the score has
    one."""
    estimate = cell.metrics.get(f"{cell.metric}_lenient")
    return None if estimate is None else estimate.value


def _cell_rows(grid: Grid) -> list[list]:
    """One row per cell of the grid that has a score file (or misses one, with allow_missing), in grid order
    (CELL_COLUMNS)."""
    rows = []
    for model in grid.models:
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark) or grid.failed.get((model, benchmark))
            if cell is not None:
                rows.append(
                    [
                        model,
                        benchmark,
                        FAILED if grid.is_failed(model, benchmark) else "scored",
                        cell.strategy,
                        answered_label(cell.strategy, cell.backend, cell.model_id),
                        decoding_label(cell.strategy, cell.generation),
                        cell.n,
                        cell.n_valid,
                        cell.format_error_rate,
                        _lenient(cell),
                        is_flagged(grid, model, benchmark),
                        cell.coverage[1] if cell.coverage else cell.n,
                    ]
                )
            elif grid.is_hidden(model, benchmark):
                hidden = grid.hidden[(model, benchmark)]
                rows.append(
                    [
                        model,
                        benchmark,
                        HIDDEN,
                        hidden.strategy,
                        answered_label(hidden.strategy, hidden.backend, hidden.model_id),
                        decoding_label(hidden.strategy, hidden.generation),
                        hidden.n,
                        None,
                        None,
                        None,
                        None,
                        hidden.n,
                    ]
                )
            elif grid.is_not_applicable(model, benchmark):
                rows.append([model, benchmark, NA, None, None, None, None, None, None, None, None, None])
            elif grid.is_missing(model, benchmark):
                rows.append([model, benchmark, MISSING, None, None, None, None, None, None, None, None, None])
    return rows


def batch_check_text(check: dict | None) -> str:
    """The batch check of a cell in words: "32 same", "3 of 32 differ≠", "skipped" ({DASH}: not checked)."""
    if check is None:
        return DASH
    if check.get("skipped"):
        return "skipped"
    differing = len(check["differing"])
    return (
        f"{differing} of {check['checked']} differ{BATCH_MARK}" if differing else f"{check['checked']} same"
    )


def cells_frame(grid: Grid) -> pd.DataFrame:
    frame = pd.DataFrame(_cell_rows(grid), columns=CELL_COLUMNS)
    for name in ("n", "n_valid", "items"):
        frame[name] = frame[name].astype("Int64")
    for name in ("format_error_rate", "lenient"):
        frame[name] = frame[name].astype("float64")
    frame["flagged"] = frame["flagged"].astype("boolean")
    frame = with_copy_columns(grid, frame)
    if grid.tool_readings():
        # The publishing tool's own reading, only where a cell's score gives one (other grids keep their
        # table).
        figures = {(model, benchmark): figure for model, benchmark, figure, _ in grid.tool_readings()}
        found = [figures.get(key) for key in zip(frame["model"], frame["benchmark"])]
        frame["tool_reading"] = pd.array([f.value if f else None for f in found], dtype="Float64").astype(
            "float64"
        )
        frame["tool_reading_tool"] = [f.tool if f else None for f in found]
        frame["tool_reading_by_judge"] = pd.array(
            [f.n_read_by_judge if f else None for f in found], dtype="Int64"
        )
    if grid.batch_checked():
        # The batch check's columns, only where a cell records one (a grid without the check keeps its table).
        checks = [
            grid.batch_check(model, benchmark) for model, benchmark in zip(frame["model"], frame["benchmark"])
        ]
        frame["batch_checked"] = pd.array([c["checked"] if c else None for c in checks], dtype="Int64")
        frame["batch_differing"] = pd.array(
            [len(c["differing"]) if c else None for c in checks], dtype="Int64"
        )
        frame["batch_dependent"] = pd.array(
            [bool(c["differing"]) if c else None for c in checks], dtype="boolean"
        )
    return frame


def cells_markdown(grid: Grid, title: str) -> str:
    header = [
        "Model",
        "Benchmark",
        "Answered by",
        "Decoding",
        "n",
        "Valid answers",
        "Format errors (%)",
        "Lenient reading",
    ]
    checked = grid.batch_checked()
    if checked:
        header.append("Batch check")
    rows = []
    for model, benchmark, word, _, answered, decoding, n, n_valid, errors, lenient, mark, items in _cell_rows(
        grid
    ):
        answered = word if word in (NA, MISSING) else (answered or DASH)
        n = fmt_count(n) if n is None or items is None or n == items else f"{n} of {items}{PARTIAL}"
        copy = grid.partial_copy(model, benchmark)
        if copy is not None:  # the published count beside n, unless n counts a subset already or stand-ins
            n += COPY_MARK if PARTIAL in n or copy.fixture else f" of {copy.published}{COPY_MARK}"
        errors = DASH if errors is None else fmt(errors) + (DAGGER if mark else "")
        rows.append(
            [
                model,
                benchmark,
                answered,
                decoding or DASH,
                n,
                fmt_count(n_valid),
                errors,
                DASH if lenient is None else fmt(lenient),
            ]
            + ([batch_check_text(grid.batch_check(model, benchmark))] if checked else [])
        )
    align = [":---"] * 4 + ["---:"] * 4 + ([":---"] if checked else [])
    lines = [
        f"# {markdown_text(title)}: how each number was answered\n",
        md_table(header, rows, align) + "\n",
    ]
    lines.append(
        "Answered by: log-likelihood = the option (or letter) the model gives the highest log-likelihood; "
        "generation + parser = the model's generated text read by the benchmark's parser (unreadable text is "
        "a format error); embedding similarity = the option whose text embedding is closest to the image's; "
        "random guess, first option or majority answer (baseline) = a reference baseline, which picks an "
        "option without reading the item. "
        f"Decoding: how generated text was sampled ({DASH}: nothing was generated). Valid answers: items "
        "with a readable answer in every prompt variant. Lenient reading: the headline when the generated "
        "answers are read by the benchmark's more lenient parser instead of its authors' rule (a second "
        f"figure, never the headline; {DASH}: the benchmark has none, or nothing was generated). {NA}: the "
        f"model cannot run the benchmark. {HIDDEN}: the benchmark's labels are not public; the submission "
        f"file was written. {DAGGER}: format errors above {threshold(grid)}, so every table marks the cell's "
        f"numbers ({FAILED} at 100%: the cell has no number). {MISSING}: the cell has no score file."
        + "".join(
            f" {note}"
            for note in [coverage_note(grid, grid.partial()), copy_note(grid.partial_copies())]
            if note
        )
        + (
            " Batch check: a seeded sample of the cell's items answered again one at a time (batch size 1) "
            "and compared with their batched answers (N same; skipped: the model does not batch its "
            "requests, or the copy is too small for a sample within a tenth of the cell's time)."
            if checked
            else ""
        )
        + "".join(
            f" {note}"
            for note in [batch_note(grid.batch_dependents()), tool_reading_note(grid.tool_readings())]
            if note
        )
        + "\n"
    )
    return "\n".join(lines)
