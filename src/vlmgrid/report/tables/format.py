"""What every table of the report shares: the words and marks of cells without a (plain) number, number
formatting, and Markdown, LaTeX and CSV output (the notes that explain the marks are in `notes`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from vlmgrid.escaping import markdown_text, spreadsheet_frame
from vlmgrid.fileio import atomic_path
from vlmgrid.report.grid import Grid
from vlmgrid.report.score_file import Estimate, Group, PartialCopy, Variant

DASH = "\u2013"  # en dash: a cell that is not in the grid
NA = "n/a"  # a cell whose model cannot run the benchmark (and that model's average)
AVERAGE = "Average"
NA_NOTE = f"{NA}: the model cannot run this benchmark; its average is then {NA}."
HIDDEN = "hidden"  # a cell whose benchmark hides its labels (and that model's average)
HIDDEN_NOTE = (
    f"{HIDDEN}: the benchmark's labels are not public; the submission file was written "
    f"(that model's average is then {HIDDEN} too)."
)
DAGGER = "\u2020"  # marks a number built on too many format errors; the footnote gives the rate
METHOD_MARK = "\u00a7"  # marks a published number the grid reproduced by another method; the note names both
BATCH_MARK = "\u2260"  # marks a number of a cell whose answers changed when items were answered one at a time
PARTIAL = (
    "\u2021"  # marks a number of a cell that answers a subset of its benchmark; the footnote gives how many
)
COPY_MARK = (
    "\u00b6"  # marks a number of a cell scored on a copy holding fewer items than the published benchmark
)
# a cell (or a part of one) whose every prediction row is an error or unparsable, or without an item readable
# in every prompt variant: no number (nor an average)
FAILED = "failed"
MISSING = "missing"  # a cell without a score file, reported with allow_missing (and that model's average)

# A main-table entry: an estimate (its `flag` set when it is marked), None (not in the grid) or a status word.
Entry = Estimate | str | None


def threshold(grid: Grid) -> str:
    return f"{grid.flag_error_rate:g}%"


def fmt(x: float | None) -> str:
    """One decimal, never "-0.0"."""
    if x is None:
        return DASH
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def fmt_estimate(est: Entry) -> str:
    """ "51.2 [44.0, 58.1]", "51.2" without a CI, "–" for no value, "n/a" for a cell that cannot run; a
    dagger after a marked one ("51.2 [44.0, 58.1]†")."""
    if isinstance(est, str):
        return est
    if est is None or est.value is None:
        return DASH
    mark = marks(est)
    if est.ci_low is None or est.ci_high is None:
        return fmt(est.value) + mark
    return f"{fmt(est.value)} [{fmt(est.ci_low)}, {fmt(est.ci_high)}]{mark}"


def marks(est: Estimate) -> str:
    """The marks written after a value: a dagger when it is built on too many format errors, a double dagger
    when on a cell that answers a subset of its benchmark, a not-equal sign when on one whose answers depend
    on the batch, a pilcrow when on one scored on a partial copy of its benchmark."""
    return (
        (DAGGER if est.flag is not None else "")
        + (PARTIAL if est.coverage is not None else "")
        + (BATCH_MARK if est.batch else "")
        + (COPY_MARK if est.partial_copy else "")
    )


def flagged(
    estimate: Estimate | None,
    rate: float | None,
    coverage: tuple[int, int] | None = None,
    batch: bool = False,
    partial_copy: bool = False,
) -> Estimate | None:
    """The estimate marked with `rate`, `coverage`, `batch` and `partial_copy` (None / False: unmarked)."""
    if estimate is None or (rate is None and coverage is None and not batch and not partial_copy):
        return estimate
    return replace(estimate, flag=rate, coverage=coverage, batch=batch, partial_copy=partial_copy)


def status(grid: Grid, model: str, benchmark: str) -> str | None:
    """The word a cell without a number reads (n/a, hidden, missing, failed† where its rate is above the
    threshold, else failed); None for a scored cell or one that is not in the grid."""
    if grid.is_not_applicable(model, benchmark):
        return NA
    if grid.is_hidden(model, benchmark):
        return HIDDEN
    if grid.is_missing(model, benchmark):
        return MISSING
    if grid.is_failed(model, benchmark):
        return FAILED + (DAGGER if grid.flag(model, benchmark) is not None else "")
    return None


def part_entry(
    grid: Grid, model: str, benchmark: str, part: Group | Variant, *, cell_marks: bool = True
) -> Entry:
    """How a part of a cell (a breakdown group, a prompt variant) reads: FAILED when it has no number
    (`Grid.part_failed`), else its estimate; either marked with the dagger by the part's own format error rate
    (`Grid.part_flag`: the cell's where the score gives the part none). With `cell_marks` the estimate carries
    the cell's other marks too (`Grid.marked`); without (a paper table, whose row or column names carry the
    cell's marks) only a rate of the part's own marks it."""
    own = cell_marks or part.format_error_rate is not None
    flag = grid.part_flag(model, benchmark, part) if own else None
    if grid.part_failed(model, benchmark, part):
        return FAILED + (DAGGER if flag is not None else "")
    if cell_marks:
        return replace(grid.marked(model, benchmark, part.estimate), flag=flag)
    return flagged(part.estimate, flag)


def model_status(grid: Grid, model: str) -> str | None:
    """The word a model's average reads when a cell of it has no number (None: the average is computed)."""
    if grid.model_has_not_applicable(model):
        return NA
    if grid.model_has_hidden(model):
        return HIDDEN
    if grid.model_has_missing(model):
        return MISSING
    if grid.model_has_failed(model):
        return FAILED
    return None


def entry_value(entry: Entry) -> float | None:
    return entry.value if isinstance(entry, Estimate) else None


# --- Markdown ------------------------------------------------------------------------------------


def md_table(header: list[str], rows: list[list[str]], align: list[str]) -> str:
    lines = ["| " + " | ".join(markdown_text(h) for h in header) + " |"]
    lines.append("|" + "|".join(align) + "|")
    for row in rows:
        lines.append("| " + " | ".join(markdown_text(c) for c in row) + " |")
    return "\n".join(lines)


# --- LaTeX ---------------------------------------------------------------------------------------

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    DASH: "--",
    DAGGER: r"$^{\dagger}$",
    PARTIAL: r"$^{\ddagger}$",
    BATCH_MARK: r"$^{\neq}$",
    COPY_MARK: r"$^{\P}$",
    METHOD_MARK: r"$^{\S}$",
    "\u2192": r"$\rightarrow$",
    "\u2212": "$-$",
    "\u207a": r"$^{+}$",
    "\u207b": r"$^{-}$",
}

# The preamble a report table needs, said in each .tex file (booktabs for the rules, longtable for tables that
# run past a page).
LATEX_PACKAGES = ("booktabs", "longtable")

# Value columns one longtable holds; a wider table is split into blocks set one after the other. Every table
# is set at the document's size, never scaled: a value sits over its CI (about 1.6 cm), a page's text is 12-17
# cm wide.
BLOCK_COLUMNS = 4

# The share of the line the row names take; the value columns share the rest (names wrap within their width).
NAME_SHARE = 0.22

# The space either side of a column (LaTeX's default is 6pt).
TABCOLSEP = "4pt"

# Best and second best, as the papers mark them.
BEST, SECOND = "best", "second"


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def emphasis(values: Sequence[float | None], *, lower_is_better: bool = False) -> list[str | None]:
    """BEST / SECOND / None per value, compared as displayed (one decimal, so equal-looking values share a
    mark): the best only where at least two different values compete, the second only where three do (so the
    second is never the last: with two different values, or ties on them, only the best is marked)."""
    shown = [None if value is None else float(fmt(value)) for value in values]
    present = [value for value in shown if value is not None]
    ranked = sorted(set(present), reverse=not lower_is_better)
    best = ranked[0] if len(ranked) >= 2 else None
    second = ranked[1] if len(ranked) >= 3 else None
    return [
        BEST
        if value is not None and value == best
        else SECOND
        if value is not None and value == second
        else None
        for value in shown
    ]


def latex_cell(est: Entry, mark: str | None = None, suffix: str = "") -> str:
    """The value (bold when BEST, underlined when SECOND) with its marks (`marks`) and `suffix` (plain text),
    its CI small under it, so a column is as wide as a CI."""
    if isinstance(est, str):
        return latex_escape(est + suffix)
    if est is None or est.value is None:
        return "--" + latex_escape(suffix)
    value = fmt(est.value)
    if mark == BEST:
        value = rf"\textbf{{{value}}}"
    elif mark == SECOND:
        value = rf"\underline{{{value}}}"
    flag = latex_escape(marks(est) + suffix)
    if est.ci_low is None or est.ci_high is None:
        return value + flag
    return latex_stack([value + flag, rf"{{\scriptsize [{fmt(est.ci_low)}, {fmt(est.ci_high)}]}}"])


def _blocks(n_columns: int, block_columns: int) -> list[range]:
    """The value columns split into as few blocks of at most `block_columns` as can be, their sizes differing
    by one at most."""
    n_blocks = max(1, -(-n_columns // block_columns))
    size, extra = divmod(n_columns, n_blocks)
    blocks, start = [], 0
    for k in range(n_blocks):
        end = start + size + (k < extra)
        blocks.append(range(start, end))
        start = end
    return blocks


def latex_stack(lines: Sequence[str], align: str = "c") -> str:
    """LaTeX lines set one above the other in one cell (a nested tabular without side space, its first line on
    the row's baseline), so a cell grows down rather than across; one line is returned as it is."""
    if len(lines) == 1:
        return lines[0]
    # "{}" after each line break: a next line starting with "[" is text, not the break's optional length
    return rf"\begin{{tabular}}[t]{{@{{}}{align}@{{}}}}" + r" \\{} ".join(lines) + r"\end{tabular}"


def latex_name(text: str) -> str:
    """Plain `text` (a model, benchmark or group name) escaped, a line break allowed after each hyphen,
    underscore and slash (the part after them hyphenated where it must), so a long name wraps in its
    column."""
    return "".join(latex_escape(ch) + (r"\hspace{0pt}" if ch in "-_/" else "") for ch in text)


def _widths(weights: Sequence[float], name_share: float) -> list[str]:
    """The widths of a tabular's columns, the row names' then the value columns' (shared by `weights`), as TeX
    dimensions that add up, with the space between the columns, to a point under the line's width."""
    total, k = sum(weights), len(weights)
    share = rf"({1 - name_share:g}\linewidth-{2 * k}\tabcolsep-1pt)"
    return [rf"\dimexpr{name_share:g}\linewidth-2\tabcolsep\relax"] + [
        rf"\dimexpr{share}*{int(1000 * w / total)}/1000\relax" for w in weights
    ]


def _box(width: str, cell: str, position: str, alignment: str) -> str:
    return rf"\parbox[{position}]{{{width}}}{{{alignment}\hspace{{0pt}}{cell}}}"


def latex_table(
    caption: str,
    label: str,
    header: Sequence[Sequence[str]],
    rows: Sequence[Sequence[str]],
    *,
    align: str = "c",
    split: bool = True,
    after: Sequence[str] = (),
    weights: Sequence[float] | None = None,
    name_share: float = NAME_SHARE,
) -> str:
    """A booktabs longtable set at the document's size, never scaled, that runs on over as many pages as its
    rows need: the caption on the first page, the `header` rows repeated on each page under "(continued)", and
    "continued on the next page" at the foot of each page but the last. `rows` are body rows of LaTeX cells (a
    row's first cell names it, the others are value columns aligned by `align`: one letter for all, or one per
    value column; a row of one cell is a heading across the table, kept on the page of the row under it). Each
    longtable is as wide as the line: the row names take `name_share` of it, the value columns share the rest
    by `weights` (equal by default); the names, the header and the cells of "l" columns wrap in their width
    (`latex_name` lets names break). With `split`, more than BLOCK_COLUMNS value columns are cut into blocks
    set one after the other, each repeating the row names, all under the caption's number. `caption` is plain
    text (escaped here); `after`: LaTeX lines under the table (notes). Everything is set in a group, so the
    column spacing and the notes' alignment end with the table."""
    n_values = max(len(row) for row in [*header, *rows]) - 1
    blocks = _blocks(n_values, BLOCK_COLUMNS) if split else [range(n_values)]
    aligns = align * n_values if len(align) == 1 else align
    weights = list(weights) if weights is not None else [1.0] * n_values
    lines = [
        "% vlmgrid report; needs " + ", ".join(rf"\usepackage{{{name}}}" for name in LATEX_PACKAGES),
        r"\begingroup",
        r"\centering",
        r"\setlength{\parindent}{0pt}",
        rf"\setlength{{\tabcolsep}}{{{TABCOLSEP}}}",
        r"\setlength{\LTcapwidth}{\linewidth}",
    ]
    for k, block in enumerate(blocks):
        n_columns = len(block) + 1
        widths = _widths([weights[j] for j in block], name_share)
        head = [r"\toprule"]
        for row in header:
            cells = [_box(widths[0], row[0], "b", r"\raggedright")]
            cells += [_box(widths[1 + i], row[1 + j], "b", r"\centering") for i, j in enumerate(block)]
            head.append(" & ".join(cells) + r" \\")
        head.append(r"\midrule")
        if k:
            lines.append(r"\addtocounter{table}{-1}")  # a further block of the same table: the same number
        lines.append(rf"\begin{{longtable}}{{l{''.join(aligns[j] for j in block)}}}")
        if not k:
            lines.append(rf"\caption{{{latex_escape(caption)}}}\label{{tab:{label}}} \\")
        lines += [
            *head,
            r"\endfirsthead",
            r"\caption[]{(continued)} \\",
            *head,
            r"\endhead",
            r"\bottomrule",
            rf"\multicolumn{{{n_columns}}}{{r}}{{\footnotesize continued on the next page}} \\",
            r"\endfoot",
            r"\bottomrule",
            r"\endlastfoot",
        ]
        for row in rows:
            if len(row) == 1:
                heading = _box(r"\dimexpr\linewidth-2\tabcolsep-1pt\relax", row[0], "t", r"\raggedright")
                lines.append(rf"\multicolumn{{{n_columns}}}{{l}}{{{heading}}} \\*")  # no page break under it
                continue
            cells = [_box(widths[0], row[0], "t", r"\raggedright")]
            cells += [
                _box(widths[1 + i], row[1 + j], "t", r"\raggedright") if aligns[j] == "l" else row[1 + j]
                for i, j in enumerate(block)
            ]
            lines.append(" & ".join(cells) + r" \\")
        lines.append(r"\end{longtable}")
    lines += [*after, r"\par", r"\endgroup"]
    return "\n".join(lines) + "\n"


# --- CSV -----------------------------------------------------------------------------------------


def estimate_frame(
    row_header: str, value_columns: Sequence[str], rows: Iterable[tuple[str, Sequence[Entry]]]
) -> pd.DataFrame:
    """One CSV row per table row: its name, then a value and its two CI bounds per column, all float64."""
    columns = [row_header]
    for name in value_columns:
        columns += [name, f"{name}_ci_low", f"{name}_ci_high"]
    records = []
    for name, entries in rows:
        record: list[object] = [name]
        for entry in entries:
            # n/a, hidden, not in the grid and missing are all empty, like any cell without a number.
            record += (
                [None, None, None]
                if entry_value(entry) is None
                else [entry.value, entry.ci_low, entry.ci_high]
            )
        records.append(record)
    frame = pd.DataFrame(records, columns=columns)
    for name in columns[1:]:
        frame[name] = frame[name].astype("float64")
    return frame


def typed_frame(
    frame: pd.DataFrame, *, floats: Sequence[str] = (), ints: Sequence[str] = (), booleans: Sequence[str] = ()
) -> pd.DataFrame:
    """The table with its number and flag columns typed (float64, Int64, boolean), so that a column that is
    empty in every row is written the same as one that is not."""
    return frame.astype(
        {
            **{name: "float64" for name in floats},
            **{name: "Int64" for name in ints},
            **{name: "boolean" for name in booleans},
        }
    )


def error_rate(grid: Grid, model: str, benchmark: str) -> float | None:
    """The format error rate of a cell with a score (a failed one too); None for the others."""
    cell = grid.cell(model, benchmark) or grid.failed.get((model, benchmark))
    return None if cell is None else cell.format_error_rate


def is_flagged(grid: Grid, model: str, benchmark: str) -> bool | None:
    """Whether the cell is marked; None (empty in a CSV) for a cell without a format error rate."""
    return None if error_rate(grid, model, benchmark) is None else grid.flag(model, benchmark) is not None


def batch_flag(grid: Grid, model: str, benchmark: str) -> bool | None:
    """Whether the cell's answers depend on the batch; None (empty in a CSV) for a cell without a batch
    check."""
    return None if grid.batch_check(model, benchmark) is None else grid.batch_dependent(model, benchmark)


def with_batch_column(grid: Grid, frame: pd.DataFrame) -> pd.DataFrame:
    """A table of one row per cell or part of one (its `model` and `benchmark` columns) with `batch_dependent`
    (`batch_flag`) added, where a cell of the grid is batch-dependent: a grid without such a cell keeps its
    columns, as main.csv does."""
    if grid.batch_dependents():
        frame["batch_dependent"] = pd.array(
            [
                batch_flag(grid, model, benchmark)
                for model, benchmark in zip(frame["model"], frame["benchmark"])
            ],
            dtype="boolean",
        )
    return frame


def copy_columns(copies: Sequence[PartialCopy | None]) -> dict[str, pd.arrays.IntegerArray]:
    """`copy_items` and `published_items` of each row's partial copy (empty for a whole one)."""
    return {
        "copy_items": pd.array([c.items if c else None for c in copies], dtype="Int64"),
        "published_items": pd.array([c.published if c else None for c in copies], dtype="Int64"),
    }


def with_copy_columns(grid: Grid, frame: pd.DataFrame) -> pd.DataFrame:
    """A table of one row per cell or part of one (its `model` and `benchmark` columns) with `copy_columns`
    added, where a cell of the grid was scored on a partial copy of its benchmark: a grid without such a cell
    keeps its columns."""
    if grid.partial_copies():
        for name, column in copy_columns(
            [
                grid.partial_copy(model, benchmark)
                for model, benchmark in zip(frame["model"], frame["benchmark"])
            ]
        ).items():
            frame[name] = column
    return frame


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    """The frame as CSV; a text that a spreadsheet would run as a formula is written as text."""
    with atomic_path(path) as tmp:
        spreadsheet_frame(frame).to_csv(tmp, index=False, na_rep="", lineterminator="\n")


def fmt_count(x: int | None) -> str:
    return DASH if x is None else str(x)


def natural_key(name: str) -> list:
    """ "open-2" before "open-10": digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
