"""The comparisons table: per pair of models and benchmark, the difference of the headlines with its paired
bootstrap CI, the minimum detectable difference (MDD), the paired permutation test's p, the Holm-adjusted p
and whether it is significant (Markdown, LaTeX, CSV)."""

from __future__ import annotations

import pandas as pd

from vlmgrid.escaping import markdown_text
from vlmgrid.report.comparisons import ALPHA, Comparison, Comparisons
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.tables.format import (
    BATCH_MARK,
    COPY_MARK,
    DAGGER,
    DASH,
    NA,
    PARTIAL,
    batch_flag,
    copy_columns,
    fmt,
    is_flagged,
    latex_escape,
    latex_name,
    latex_stack,
    latex_table,
    md_table,
)
from vlmgrid.report.tables.notes import batch_note, copy_note, flag_note

HEADER = [
    "Model A",
    "Model B",
    "Benchmark",
    "A",
    "B",
    "A \u2212 B [95% CI]",
    "MDD",
    "p",
    "Holm p",
    "Significant",
]
# The Markdown table names the metric of each row and, in its header, the CI's resampling and the test (the
# LaTeX table, held to the page's width, says so in its caption).
MD_HEADER = [
    "Model A",
    "Model B",
    "Benchmark",
    "Metric",
    "A",
    "B",
    "A \u2212 B [95% CI, paired bootstrap]",
    "MDD",
    "p (paired permutation)",
    "Holm p",
    "Significant",
]
# The LaTeX header: each pair heads its rows, so the table has one name column, the benchmark's; the MDD sits
# under the difference's CI rather than in a column of its own, which the page's width has no room for.
LATEX_HEADER = ["Benchmark", "A", "B", "A \u2212 B [95% CI] MDD", "p", "Holm p", "Significant"]
# The value columns' shares of their part of the line: the difference holds its CI and MDD under it, A and B
# their cells' marks (a value with both a not-equal sign and a pilcrow fits).
LATEX_WEIGHTS = [1.05, 1.05, 1.8, 1.0, 1.0, 1.8]
# A Holm p below ALPHA on a difference under the MDD: not significant, and the cell says why.
BELOW_MDD = "no (below MDD)"


def fmt_p(p: float | None) -> str:
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def reasons(comparisons: Comparisons) -> list[str]:
    """The reasons the pairs without a comparison give, each once, in table order: note k is reasons[k -
    1]."""
    return list(dict.fromkeys(row.reason for row in comparisons.rows if row.difference is None))


def _value(grid: Grid | None, model: str, benchmark: str, value: float | None) -> str:
    """A model's value with its cell's marks, as in the main table: the dagger where its format error rate is
    above the report's flag_error_rate, the not-equal sign where its answers depend on the batch, the pilcrow
    where its copy of the benchmark is partial (the double dagger of a partial cell marks the difference: the
    pair is compared on the items both answered)."""
    if grid is None or value is None:
        return fmt(value)
    return (
        fmt(value)
        + (DAGGER if grid.flag(model, benchmark) is not None else "")
        + (BATCH_MARK if grid.batch_dependent(model, benchmark) else "")
        + (COPY_MARK if grid.partial_copy(model, benchmark) is not None else "")
    )


def _cells(row: Comparison, notes: list[str], grid: Grid | None = None) -> list[str]:
    """The row's displayed cells after the names; a pair without a comparison reads n/a with the number of the
    note that gives its reason, one compared on the items both answered (a partial cell under `include`) is
    marked (the legend says how many), and each value carries its cell's marks in the `grid` (`_value`)."""
    if row.difference is None:
        return [DASH, DASH, f"{NA} [{notes.index(row.reason) + 1}]", DASH, DASH, DASH, DASH]
    sign = "+" if row.difference > 0 and fmt(row.difference) != "0.0" else ""
    mark = PARTIAL if row.coverage is not None else ""
    passes_p = row.p_holm is not None and row.p_holm < ALPHA
    significant = "yes" if row.significant else BELOW_MDD if passes_p and row.below_mdd else "no"
    return [
        _value(grid, row.model_a, row.benchmark, row.value_a),
        _value(grid, row.model_b, row.benchmark, row.value_b),
        f"{sign}{fmt(row.difference)} [{fmt(row.ci_low)}, {fmt(row.ci_high)}]{mark}",
        fmt(row.mdd),
        fmt_p(row.p_value),
        fmt_p(row.p_holm),
        significant,
    ]


def _latex_cells(row: Comparison, notes: list[str], grid: Grid | None = None) -> list[str]:
    """`_cells` in LaTeX: the CI and the MDD under the difference, the note's number raised after n/a, "(below
    MDD)" under the "no" it explains (the columns are too narrow for either on one line)."""
    plain = _cells(row, notes, grid)
    cells = [latex_escape(cell) for cell in plain[:3] + plain[4:]]
    if row.difference is None:
        cells[2] = rf"{NA}$^{{{notes.index(row.reason) + 1}}}$"
    else:
        difference, _, interval = plain[2].partition(" ")
        interval, mark = interval.rstrip(PARTIAL), PARTIAL if interval.endswith(PARTIAL) else ""
        cells[2] = latex_stack(
            [
                latex_escape(difference + mark),
                rf"{{\scriptsize {latex_escape(interval)}}}",
                rf"{{\scriptsize MDD {latex_escape(plain[3])}}}",
            ]
        )
        answer, _, why = plain[-1].partition(" ")
        if why:
            cells[-1] = latex_stack([answer, rf"{{\scriptsize {latex_escape(why)}}}"])
    return cells


def na_notes(comparisons: Comparisons) -> str:
    """The notes on the pairs without a comparison, numbered as their n/a cells say ("" when every pair has
    one)."""
    notes = reasons(comparisons)
    if not notes:
        return ""
    listed = " ".join(f"[{k}] {reason}." for k, reason in enumerate(notes, 1))
    return f"{NA}: no comparison. {listed}"


def _compared_cells(comparisons: Comparisons) -> set[tuple[str, str]]:
    """(model, benchmark) of each value the table shows: both sides of every pair with a comparison."""
    return {
        (model, row.benchmark)
        for row in comparisons.rows
        if row.difference is not None
        for model in (row.model_a, row.model_b)
    }


def legend(comparisons: Comparisons, grid: Grid | None = None) -> str:
    permutations = sorted({row.permutations for row in comparisons.rows if row.permutations})
    count = f"{permutations[0]} " if len(permutations) == 1 else ""
    family = (
        f"each model against the reference model {comparisons.reference_model}"
        if comparisons.reference_model
        else "every pair of models of the grid"
    )
    text = (
        f"Pairs: {family}. A \u2212 B: the difference of the benchmark's headline (points of its unit, "
        "percent for most); 95% CI: paired bootstrap, both models on the same resampled items (whole groups "
        "where the metric scores groups: MME images, MMBench circular groups, MMVP pairs), the score files' "
        f"own resamples. p: two-sided paired sign-flip permutation test ({count}permutations; a permutation "
        "swaps the two models' answers on a random half of the items or groups). Holm p: Holm's step-down "
        "correction whose family is one pair's benchmarks (those with a comparison). MDD: the minimum "
        f"detectable difference, the smallest true difference a two-sided test at {ALPHA:g} finds with 80% "
        "power on these items or groups (from the per-item or per-group differences where the headline is "
        f"their mean, else from the permutations' spread). Significant: Holm p < {ALPHA:g} and a difference "
        f"at least as large as the MDD; marked {BELOW_MDD} where the p alone would pass but the benchmark is "
        "too small to tell a difference this size. The CSV adds "
        "the exact McNemar p where the headline is a plain accuracy."
    )
    covered = [row for row in comparisons.rows if row.coverage is not None and row.difference is not None]
    if covered:
        listed = "; ".join(
            f"{row.model_a} \u2212 {row.model_b} on {row.benchmark}, {row.coverage[0]:,} of "
            f"{row.coverage[1]:,} items"
            for row in covered
        )
        text += (
            f" {PARTIAL}: compared on the items both models answered, a cell of the pair answering a subset "
            f"of the benchmark (report.partial_cells: include): {listed}."
        )
    if grid is not None:
        shown = _compared_cells(comparisons)
        for note in (
            flag_note(grid, [entry for entry in grid.flagged() if entry[:2] in shown]),
            batch_note([entry for entry in grid.batch_dependents() if entry[:2] in shown]),
            copy_note([entry for entry in grid.partial_copies() if entry[:2] in shown]),
        ):
            if note:
                text += f" {note}"
    if comparisons.unavailable:
        listed = "; ".join(f"{bench}: {why}" for bench, why in comparisons.unavailable.items())
        text += f" Benchmarks without comparisons: {listed}."
    return text


def comparisons_markdown(comparisons: Comparisons, title: str, grid: Grid | None = None) -> str:
    """`grid`: the grid whose cells' marks the values carry, as in the main table (None: no marks)."""
    notes = reasons(comparisons)
    rows = [
        [row.model_a, row.model_b, row.benchmark, metric_label(row.metric) if row.metric else DASH]
        + _cells(row, notes, grid)
        for row in comparisons.rows
    ]
    if not rows:
        body = "No comparisons: the grid has fewer than two models, or no comparison file to read."
    else:
        body = md_table(MD_HEADER, rows, [":---"] * 4 + ["---:"] * 7)
    na = na_notes(comparisons)
    return f"# {markdown_text(title)}: comparisons\n\n{body}\n\n{legend(comparisons, grid)}\n" + (
        f"\n{na}\n" if na else ""
    )


def comparisons_latex(comparisons: Comparisons, title: str, grid: Grid | None = None) -> str:
    """At the document's size: each pair heads its rows (one per benchmark), the CI sits under the difference,
    a pair without a comparison reads n/a with a numbered note under the table. Differences, not scores:
    nothing is bold and the table is never split. `grid`: as for `comparisons_markdown`."""
    notes = reasons(comparisons)
    body: list[list[str]] = []
    for model_a, model_b in dict.fromkeys((row.model_a, row.model_b) for row in comparisons.rows):
        body.append([rf"\textit{{{latex_name(model_a)} $-$ {latex_name(model_b)}}}"])
        body += [
            [latex_name(row.benchmark)] + _latex_cells(row, notes, grid)
            for row in comparisons.rows
            if (row.model_a, row.model_b) == (model_a, model_b)
        ]
    header = [[latex_escape(cell) for cell in LATEX_HEADER]]
    after = (
        [
            r"\par\medskip",
            rf"{{\footnotesize {NA}: no comparison. "
            + " ".join(rf"$^{{{k}}}${latex_escape(reason)}." for k, reason in enumerate(notes, 1))
            + r"\par}",
        ]
        if notes
        else []
    )
    return latex_table(
        f"{title}: comparisons. {legend(comparisons, grid)}",
        "comparisons",
        header,
        body,
        align="rrcrrc",
        split=False,
        weights=LATEX_WEIGHTS,
        after=after,
    )


def _flagged(grid: Grid | None, row: Comparison, model: str) -> bool | None:
    """Whether the cell of `model` in the pair is marked with the dagger (`is_flagged`); None without a grid,
    a comparison or a format error rate."""
    return None if grid is None or row.difference is None else is_flagged(grid, model, row.benchmark)


def comparisons_frame(comparisons: Comparisons, grid: Grid | None = None) -> pd.DataFrame:
    """One row per pair and benchmark; the numbers are empty and `reason` says why where there is no
    comparison; `coverage_answered` and `coverage_total` are the items a pair with a partial cell was
    compared on, of all; `flagged_a` and `flagged_b` say whether each side's cell is above the report's
    flag_error_rate, as main.csv's `<bench>_flagged` does (empty without a comparison or a format error rate).
    Where a cell of the `grid` is batch-dependent, `batch_dependent_a` and `batch_dependent_b` say whether
    each side's is (empty without a batch check or a comparison), as main.csv does; where one was scored on a
    partial copy, `copy_items` and `published_items` give the pair's copy (empty where both are whole)."""
    columns = [
        "model_a",
        "model_b",
        "benchmark",
        "metric",
        "value_a",
        "value_b",
        "difference",
        "ci_low",
        "ci_high",
        "mdd",
        "p_value",
        "p_holm",
        "significant",
        "test",
        "unit",
        "permutations",
        "mcnemar_p",
        "mdd_from",
        "reason",
        "coverage_answered",
        "coverage_total",
        "flagged_a",
        "flagged_b",
    ]
    derived = ("significant", "coverage_answered", "coverage_total", "flagged_a", "flagged_b")
    frame = pd.DataFrame(
        [
            {name: getattr(row, name, None) for name in columns if name not in derived}
            | {
                "significant": row.significant,
                "coverage_answered": row.coverage[0] if row.coverage else None,
                "coverage_total": row.coverage[1] if row.coverage else None,
                "flagged_a": _flagged(grid, row, row.model_a),
                "flagged_b": _flagged(grid, row, row.model_b),
            }
            for row in comparisons.rows
        ],
        columns=columns,
    )
    for name in (
        "value_a",
        "value_b",
        "difference",
        "ci_low",
        "ci_high",
        "mdd",
        "p_value",
        "p_holm",
        "mcnemar_p",
    ):
        frame[name] = frame[name].astype("float64")
    for name in ("significant", "flagged_a", "flagged_b"):
        frame[name] = frame[name].astype("boolean")
    for name in ("permutations", "coverage_answered", "coverage_total"):
        frame[name] = frame[name].astype("Int64")
    if grid is not None and grid.batch_dependents():
        for side in ("a", "b"):
            frame[f"batch_dependent_{side}"] = pd.array(
                [
                    None
                    if row.difference is None
                    else batch_flag(grid, getattr(row, f"model_{side}"), row.benchmark)
                    for row in comparisons.rows
                ],
                dtype="boolean",
            )
    if grid is not None and grid.partial_copies():
        # the two cells of a pair are scored on the benchmark's one copy; either side's, where one is partial
        frame = frame.assign(
            **copy_columns(
                [
                    grid.partial_copy(row.model_a, row.benchmark)
                    or grid.partial_copy(row.model_b, row.benchmark)
                    for row in comparisons.rows
                ]
            )
        )
    return frame
