"""The reported table: each published number a grid cell reproduces, beside the reproduced figure with its 95%
CI, the difference and whether the published value lies inside the CI (Markdown, LaTeX, CSV). Sources and
notes are footnotes under the table. A cell without a number is never compared: it reads its word (n/a,
hidden, failed, missing, not in the score file). A comparison whose two sides answered by different methods
(generation or likelihood, greedy or sampled) carries the section sign, and a note under the table names both
methods. A cell that answers a subset of its benchmark carries the double dagger, and its comparison says it
is partial (the published figure is over the benchmark, the reproduced one over the answered items). With
nothing to compare, the table is one sentence saying so."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.fileio import write_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.reported import Comparison, Method, Published, compare, figure_label, is_points
from vlmgrid.report.tables.format import (
    METHOD_MARK,
    copy_columns,
    fmt,
    fmt_estimate,
    latex_cell,
    latex_escape,
    latex_name,
    latex_stack,
    latex_table,
    md_table,
    typed_frame,
    write_csv,
)
from vlmgrid.report.tables.notes import batch_note, copy_note, coverage_note, flag_note

CSV_COLUMNS = [
    "paper",
    "table",
    "model",
    "reported_as",
    "benchmark",
    "figure",
    "split",
    "unit",
    "reproduced",
    "ci_low",
    "ci_high",
    "reported",
    "difference",
    "inside_ci",
    "status",
    "flagged",
    "answered",
    "items",
    "reported_method",
    "reported_prompt_suffix",
    "reproduced_method",
    "same_method",
    "source",
    "note",
]
HEADER = [
    "Paper",
    "Table",
    "Model",
    "Benchmark",
    "Figure",
    "Reproduced [95% CI]",
    "Reported",
    "Difference",
    "Inside CI",
]
NOT_COMPARED = "not compared"
# A compared row whose cell answers a subset of its benchmark: the Inside CI verdict says so, and the CSV's
# status reads PARTIAL_STATUS instead of "compared".
PARTIAL_WORDS = "(partial)"
PARTIAL_STATUS = "partial"


def no_match_sentence(published: Published) -> str:
    folder = published.folder if published.folder is not None else "config/reported"
    return (
        f"No published number matches this grid's models: to compare one, add its row to a CSV file in "
        f"{folder}/ and set `reported_as` on the grid model "
        "to the model's name in that row (docs/formats.md)."
    )


def _footnotes(comparisons: list[Comparison]) -> dict[tuple[str, str | None], int]:
    """A number for each distinct (source, note), in the order the rows cite them."""
    numbers: dict[tuple[str, str | None], int] = {}
    for comparison in comparisons:
        numbers.setdefault((comparison.row.source, comparison.row.note), len(numbers) + 1)
    return numbers


def _footnote_lines(numbers: dict[tuple[str, str | None], int]) -> list[str]:
    return [f"[{n}] {source}" + (f". Note: {note}" if note else "") for (source, note), n in numbers.items()]


def _difference(comparison: Comparison) -> str:
    difference = comparison.difference
    if difference is None:
        return NOT_COMPARED
    text = fmt(difference)
    return text if text.startswith("-") or text == "0.0" else f"+{text}"


def _verdict(comparison: Comparison) -> str:
    inside = comparison.inside
    return "no CI" if inside is None else ("yes" if inside else "no")


def _inside(comparison: Comparison) -> str:
    """yes / no / no CI; followed by "(partial)" where the cell answers a subset of its benchmark, so the
    verdict is not read as a match of the same figure."""
    if comparison.reproduced is None:
        return NOT_COMPARED
    return _verdict(comparison) + (f" {PARTIAL_WORDS}" if comparison.coverage is not None else "")


def _method_words(method: Method | None) -> str:
    return "not recorded" if method is None else method.words()


def method_note(comparisons: list[Comparison]) -> str:
    """The section sign's note: each comparison whose sides answered differently, with both methods, and the
    compared ones whose grid side records no method; "" when every compared pair answered alike."""
    other = [c for c in comparisons if c.same_method is False]
    unknown = [
        c for c in comparisons if c.reproduced is not None and c.method is None and c.row.method is not None
    ]
    notes = []
    if other:
        notes.append(
            f"{METHOD_MARK}: the paper and the grid answered by different methods, so the difference is "
            "not the model's alone: "
            + "; ".join(
                f"{c.model} on {c.benchmark}: paper {_method_words(c.row.method)}, grid "
                f"{_method_words(c.method)}"
                for c in other
            )
            + " (to answer as the paper did, see docs/models.md)."
        )
    if unknown:
        notes.append(
            "Method not recorded (the score file has no strategy), so not checked: "
            + ", ".join(f"{c.model} on {c.benchmark}" for c in unknown)
            + "."
        )
    return " ".join(notes)


def _cells(comparison: Comparison, footnote: int) -> list[str]:
    """The row's cells as text (HEADER order); the reproduced cell is its status word when there is no number,
    and carries the section sign when the two sides answered by different methods."""
    row = comparison.row
    reproduced = comparison.status if comparison.reproduced is None else fmt_estimate(comparison.reproduced)
    if comparison.same_method is False:
        reproduced += METHOD_MARK
    return [
        f"arXiv {row.paper} [{footnote}]",
        row.table,
        f"{row.model} ({comparison.model})",
        comparison.benchmark,
        figure_label(row.benchmark, row.figure, row.split),
        reproduced,
        fmt(row.value),
        _difference(comparison),
        _inside(comparison),
    ]


def _legend(grid: Grid, comparisons: list[Comparison]) -> str:
    notes = [
        "Reproduced: the grid's score with its 95% bootstrap CI; Difference: reproduced - reported; Inside "
        "CI: whether the reported value lies within the reproduced CI. A cell without a number (n/a, hidden, "
        "failed, missing, or a figure its score file lacks) is not compared."
    ]
    flagged = sorted(
        {
            (c.model, c.benchmark, c.reproduced.flag)
            for c in comparisons
            if c.reproduced is not None and c.reproduced.flag is not None
        }
    )
    if flagged:
        notes.append(flag_note(grid, [(m, b, rate) for m, b, rate in flagged]))
    covered = {(c.model, c.benchmark) for c in comparisons if c.coverage is not None}
    if covered:
        notes.append(
            coverage_note(grid, [entry for entry in grid.partial() if entry[:2] in covered])
            + " Such a cell's number is over the items it answers, the published one over the whole "
            f"benchmark, so the two are not the same figure: its Inside CI reads {PARTIAL_WORDS}, and its "
            f"status in the CSV {PARTIAL_STATUS}, the answered and items columns giving the counts."
        )
    batched = {(c.model, c.benchmark) for c in comparisons if c.reproduced is not None and c.reproduced.batch}
    if batched:
        notes.append(batch_note([entry for entry in grid.batch_dependents() if entry[:2] in batched]))
    copied = {
        (c.model, c.benchmark) for c in comparisons if c.reproduced is not None and c.reproduced.partial_copy
    }
    if copied:
        notes.append(copy_note([entry for entry in grid.partial_copies() if entry[:2] in copied]))
    if method := method_note(comparisons):
        notes.append(method)
    return " ".join(notes)


def reported_markdown(grid: Grid, published: Published, title: str) -> str:
    comparisons = compare(grid, published)
    heading = f"# {markdown_text(title)}: reproduced vs reported\n\n"
    if not comparisons:
        return heading + no_match_sentence(published) + "\n"
    numbers = _footnotes(comparisons)
    rows = [_cells(c, numbers[(c.row.source, c.row.note)]) for c in comparisons]
    align = [":---"] * 5 + ["---:"] * 3 + [":---:"]
    footnotes = "\n".join(f"- {line}" for line in _footnote_lines(numbers))
    return (
        f"{heading}{md_table(HEADER, rows, align)}\n\n{_legend(grid, comparisons)}\n\n"
        f"Sources:\n\n{footnotes}\n"
    )


def reported_latex(grid: Grid, published: Published, title: str) -> str:
    comparisons = compare(grid, published)
    caption = f"{title}: reproduced vs reported."
    if not comparisons:
        return (
            "\n".join(
                [
                    r"% vlmgrid report",
                    r"\begin{table}[t]",
                    r"\centering",
                    rf"\caption{{{latex_escape(caption)}}}",
                    r"\label{tab:reported}",
                    latex_escape(no_match_sentence(published)),
                    r"\end{table}",
                ]
            )
            + "\n"
        )
    # the paper and its table go into the source's note, so the table keeps to six columns at the document's
    # size
    numbers: dict[tuple[str, str, str, str | None], int] = {}
    for c in comparisons:
        numbers.setdefault((c.row.paper, c.row.table, c.row.source, c.row.note), len(numbers) + 1)
    # a reason longer than a word ("not in the score file") is a short mark in the cell and a lettered note
    reasons = list(dict.fromkeys(c.status for c in comparisons if c.reproduced is None and " " in c.status))
    letters = {reason: chr(ord("a") + k) for k, reason in enumerate(reasons)}
    body = []
    for comparison in comparisons:
        row = comparison.row
        footnote = numbers[(row.paper, row.table, row.source, row.note)]
        cells = [latex_escape(text) for text in _cells(comparison, footnote)]
        if comparison.reproduced is not None:
            method_mark = METHOD_MARK if comparison.same_method is False else ""
            cells[5] = latex_cell(comparison.reproduced, suffix=method_mark)
        elif comparison.status in letters:
            cells[5] = rf"--$^{{{letters[comparison.status]}}}$"
        # the model over its grid name, the benchmark over its figure and source's number; a dash where
        # nothing was compared (the reproduced cell says why)
        model = rf"{latex_name(row.model)} ({latex_name(comparison.model)})"
        benchmark = rf"{latex_name(comparison.benchmark)}: {cells[4]} [{footnote}]"
        words = ["--" if cell == NOT_COMPARED else cell for cell in cells[7:]]
        if comparison.coverage is not None:
            # "(partial)" under the verdict, as the narrow column has no room for both on one line
            words[-1] = latex_stack(
                [latex_escape(_verdict(comparison)), rf"{{\scriptsize {latex_escape(PARTIAL_WORDS)}}}"]
            )
        body.append([model, benchmark, *cells[5:7], *words])
    footnotes = [
        r"\par\smallskip{\footnotesize "
        + latex_escape(f"[{n}] arXiv {paper}, {table}: {source}" + (f". Note: {note}" if note else ""))
        + "}"
        for (paper, table, source, note), n in numbers.items()
    ]
    footnotes += [
        rf"\par\smallskip{{\footnotesize $^{{{letter}}}$not compared: {latex_escape(reason)}.}}"
        for reason, letter in letters.items()
    ]
    # one row per published number: a record, not a ranking, so nothing is bold and the table is never split
    header = ["Model", "Benchmark: figure [source]", "Reproduced [95% CI]", "Reported", "Diff.", "In CI"]
    return latex_table(
        caption + " " + _legend(grid, comparisons) + " [n] after a figure: its source (the paper, "
        "its table), below.",
        "reported",
        [[latex_escape(h) for h in header]],
        body,
        align="l" + "r" * 3 + "c",
        split=False,
        after=footnotes,
        weights=[2.1, 1.8, 1.0, 0.9, 0.8],
        name_share=0.24,
    )


def reported_frame(grid: Grid, published: Published) -> pd.DataFrame:
    """One row per comparison (CSV_COLUMNS); the reproduced columns, difference and inside_ci are empty where
    the cell was not compared, and `status` says why (`compared` otherwise, `partial` where the cell answers
    a subset of its benchmark, `answered` and `items` then giving how many of how many). Where a cell of the
    grid was scored on a partial copy of its benchmark, `copy_items` and `published_items` follow (empty for
    a whole copy)."""
    comparisons = compare(grid, published)
    records = []
    for c in comparisons:
        est = c.reproduced
        records.append(
            [
                c.row.paper,
                c.row.table,
                c.row.model,
                c.model,
                c.benchmark,
                c.row.figure,
                c.row.split,
                "points" if is_points(c.row.benchmark, c.row.figure) else "percent",
                None if est is None else est.value,
                None if est is None else est.ci_low,
                None if est is None else est.ci_high,
                c.row.value,
                c.difference,
                c.inside,
                c.status or (PARTIAL_STATUS if c.coverage is not None else "compared"),
                None if est is None else est.flag is not None,
                None if c.coverage is None else c.coverage[0],
                None if c.coverage is None else c.coverage[1],
                None if c.row.method is None else c.row.method.words(),
                None if c.row.method is None else c.row.method.prompt_suffix,
                None if c.method is None else c.method.words(),
                c.same_method,
                c.row.source,
                c.row.note,
            ]
        )
    frame = typed_frame(
        pd.DataFrame(records, columns=CSV_COLUMNS),
        floats=("reproduced", "ci_low", "ci_high", "reported", "difference"),
        ints=("answered", "items"),
        booleans=("inside_ci", "flagged", "same_method"),
    )
    if grid.partial_copies():
        frame = frame.assign(**copy_columns([grid.partial_copy(c.model, c.benchmark) for c in comparisons]))
    return frame


def write_reported_tables(grid: Grid, published: Published, tables_dir: Path, title: str) -> list[Path]:
    """`reported.md`, `reported.tex`, `reported.csv` in `tables_dir`; always written (one sentence when no
    published number matches)."""
    tables_dir = Path(tables_dir)
    write_text(tables_dir / "reported.md", reported_markdown(grid, published, title))
    write_text(tables_dir / "reported.tex", reported_latex(grid, published, title))
    write_csv(tables_dir / "reported.csv", reported_frame(grid, published))
    return [tables_dir / name for name in ("reported.md", "reported.tex", "reported.csv")]
