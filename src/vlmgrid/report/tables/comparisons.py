"""The comparisons table: per pair of models and benchmark, the difference of the headlines with its paired
bootstrap CI, the paired permutation test's p, the Holm-adjusted p and whether it is significant (Markdown,
LaTeX, CSV)."""

from __future__ import annotations

import pandas as pd

from vlmgrid.report.comparisons import ALPHA, Comparison, Comparisons
from vlmgrid.report.labels import metric_label
from vlmgrid.report.tables.format import DASH, PARTIAL, fmt, latex_escape, latex_table, md_table

HEADER = ["Model A", "Model B", "Benchmark", "A", "B", "A \u2212 B [95% CI]", "p", "Holm p", "Significant"]
# The Markdown table names the metric of each row and, in its header, the CI's resampling and the test (the
# LaTeX table, held to the page's width, says so in its caption).
MD_HEADER = ["Model A", "Model B", "Benchmark", "Metric", "A", "B", "A \u2212 B [95% CI, paired bootstrap]",
             "p (paired permutation)", "Holm p", "Significant"]


def fmt_p(p: float | None) -> str:
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _cells(row: Comparison) -> list[str]:
    """The row's displayed cells after the names; a pair without a comparison says why in the difference cell,
    one compared on the items both answered (a partial cell under `include`) is marked (the legend says how many)."""
    if row.difference is None:
        return [DASH, DASH, f"no comparison: {row.reason}", DASH, DASH, DASH]
    sign = "+" if row.difference > 0 and fmt(row.difference) != "0.0" else ""
    mark = PARTIAL if row.coverage is not None else ""
    return [fmt(row.value_a), fmt(row.value_b),
            f"{sign}{fmt(row.difference)} [{fmt(row.ci_low)}, {fmt(row.ci_high)}]{mark}",
            fmt_p(row.p_value), fmt_p(row.p_holm), "yes" if row.significant else "no"]


def legend(comparisons: Comparisons) -> str:
    permutations = sorted({row.permutations for row in comparisons.rows if row.permutations})
    count = f"{permutations[0]} " if len(permutations) == 1 else ""
    family = (f"each model against the reference model {comparisons.reference_model}"
              if comparisons.reference_model else "every pair of models of the grid")
    text = (
        f"Pairs: {family}. A \u2212 B: the difference of the benchmark's headline (points of its unit, percent "
        f"for most); 95% CI: paired bootstrap, both models on the same resampled items (whole groups where the "
        f"metric scores groups: MME images, MMBench circular groups, MMVP pairs), the score files' own resamples. "
        f"p: two-sided paired sign-flip permutation test ({count}permutations; a permutation swaps the two models' "
        f"answers on a random half of the items or groups). Holm p: Holm's step-down correction whose family is "
        f"one pair's benchmarks (those with a comparison). Significant: Holm p < {ALPHA:g}. The CSV adds the exact "
        f"McNemar p where the headline is a plain accuracy."
    )
    covered = [row for row in comparisons.rows if row.coverage is not None and row.difference is not None]
    if covered:
        listed = "; ".join(f"{row.model_a} \u2212 {row.model_b} on {row.benchmark}, {row.coverage[0]:,} of "
                           f"{row.coverage[1]:,} items" for row in covered)
        text += (f" {PARTIAL}: compared on the items both models answered, a cell of the pair answering a subset "
                 f"of the benchmark (report.partial_cells: include): {listed}.")
    if comparisons.unavailable:
        listed = "; ".join(f"{bench}: {why}" for bench, why in comparisons.unavailable.items())
        text += f" Benchmarks without comparisons: {listed}."
    return text


def comparisons_markdown(comparisons: Comparisons, title: str) -> str:
    rows = [[row.model_a, row.model_b, row.benchmark, metric_label(row.metric) if row.metric else DASH]
            + _cells(row) for row in comparisons.rows]
    if not rows:
        body = "No comparisons: the grid has fewer than two models, or no comparison file to read."
    else:
        body = md_table(MD_HEADER, rows, [":---"] * 4 + ["---:"] * 6)
    return f"# {title}: comparisons\n\n{body}\n\n{legend(comparisons)}\n"


def comparisons_latex(comparisons: Comparisons, title: str) -> str:
    body = [[latex_escape(cell) for cell in [row.model_a, row.model_b, row.benchmark] + _cells(row)]
            for row in comparisons.rows]
    # one row per pair and benchmark: differences, not scores, so nothing is bold and the table is never split
    return latex_table(f"{title}: comparisons. {legend(comparisons)}", "comparisons",
                       [[latex_escape(h) for h in HEADER]], body, align="llrrlrrl", split=False)


def comparisons_frame(comparisons: Comparisons) -> pd.DataFrame:
    """One row per pair and benchmark; the numbers are empty and `reason` says why where there is no comparison;
    `coverage_answered` and `coverage_total` are the items a pair with a partial cell was compared on, of all."""
    columns = ["model_a", "model_b", "benchmark", "metric", "value_a", "value_b", "difference", "ci_low", "ci_high",
               "p_value", "p_holm", "significant", "test", "unit", "permutations", "mcnemar_p", "reason",
               "coverage_answered", "coverage_total"]
    derived = ("significant", "coverage_answered", "coverage_total")
    frame = pd.DataFrame([{name: getattr(row, name, None) for name in columns if name not in derived}
                          | {"significant": row.significant,
                             "coverage_answered": row.coverage[0] if row.coverage else None,
                             "coverage_total": row.coverage[1] if row.coverage else None}
                          for row in comparisons.rows], columns=columns)
    for name in ("value_a", "value_b", "difference", "ci_low", "ci_high", "p_value", "p_holm", "mcnemar_p"):
        frame[name] = frame[name].astype("float64")
    frame["significant"] = frame["significant"].astype("boolean")
    for name in ("permutations", "coverage_answered", "coverage_total"):
        frame[name] = frame[name].astype("Int64")
    return frame
