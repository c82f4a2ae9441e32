"""The main table (Markdown, LaTeX, CSV), the breakdown table and the per-variant table (Markdown, CSV)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from vlmgrid.fileio import atomic_path, write_text
from vlmgrid.report.scores import METRIC_NOTES, Estimate, Grid, decoding_label, metric_label, strategy_label

DASH = "\u2013"  # en dash: a cell that is not in the grid
NA = "n/a"  # a cell whose model cannot run the benchmark (and that model's average)
AVERAGE = "Average"
NA_NOTE = f"{NA}: the model cannot run this benchmark; its average is then {NA}."
HIDDEN = "hidden"  # a cell whose benchmark hides its labels (and that model's average)
HIDDEN_NOTE = (f"{HIDDEN}: the benchmark's labels are not public; the submission file was written "
               f"(that model's average is then {HIDDEN} too).")

# A main-table entry: an estimate, None (not in the grid) or NA.
Entry = Estimate | str | None


def fmt(x: float | None) -> str:
    """One decimal, never "-0.0"."""
    if x is None:
        return DASH
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def fmt_estimate(est: Entry) -> str:
    """"51.2 [44.0, 58.1]", "51.2" without a CI, "–" for no value, "n/a" for a cell that cannot run."""
    if isinstance(est, str):
        return est
    if est is None or est.value is None:
        return DASH
    if est.ci_low is None or est.ci_high is None:
        return fmt(est.value)
    return f"{fmt(est.value)} [{fmt(est.ci_low)}, {fmt(est.ci_high)}]"


def benchmark_header(grid: Grid, benchmark: str) -> str:
    metric = grid.metric(benchmark)
    return f"{benchmark} ({metric_label(metric)})" if metric else benchmark


def legend(grid: Grid) -> str:
    samples = grid.bootstrap_samples()
    if not samples:
        boot = ""
    elif len(samples) == 1:
        boot = f" ({samples[0]} bootstrap samples)"
    else:
        boot = f" ({samples[0]}{DASH}{samples[-1]} bootstrap samples)"
    metrics = {grid.metric(benchmark) for benchmark in grid.benchmarks}
    notes = "".join(f" {METRIC_NOTES[m]}." for m in sorted(metrics - {None}) if m in METRIC_NOTES)
    na = f" {NA_NOTE}" if grid.not_applicable else ""
    hidden = f" {HIDDEN_NOTE}" if grid.hidden else ""
    return (
        f"Values in percent; 95% bootstrap CI in brackets{boot}; {AVERAGE}: mean over the benchmarks, "
        f"CI from the averaged bootstrap draws; {DASH}: not in the grid.{na}{hidden}{notes}"
    )


def cell_entry(grid: Grid, model: str, benchmark: str) -> Entry:
    """The headline of a cell: its estimate, NA, HIDDEN, or None when it is not in the grid."""
    if grid.is_not_applicable(model, benchmark):
        return NA
    if grid.is_hidden(model, benchmark):
        return HIDDEN
    cell = grid.cell(model, benchmark)
    return cell.estimate if cell is not None else None


def _rows(grid: Grid) -> list[tuple[str, list[Entry]]]:
    """Per model: its entry per benchmark, then its average."""
    rows = []
    for model in grid.models:
        entries: list[Entry] = [cell_entry(grid, model, benchmark) for benchmark in grid.benchmarks]
        if grid.model_has_not_applicable(model):
            entries.append(NA)
        elif grid.model_has_hidden(model):
            entries.append(HIDDEN)
        else:
            entries.append(grid.average(model))
        rows.append((model, entries))
    return rows


def _value(entry: Entry) -> float | None:
    return entry.value if isinstance(entry, Estimate) else None


# --- Markdown ------------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[str]], align: list[str]) -> str:
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |"]
    lines.append("|" + "|".join(align) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_md_escape(c) for c in row) + " |")
    return "\n".join(lines)


def main_markdown(grid: Grid, title: str) -> str:
    header = ["Model"] + [benchmark_header(grid, b) for b in grid.benchmarks] + [AVERAGE]
    rows = [[model] + [fmt_estimate(e) for e in estimates] for model, estimates in _rows(grid)]
    align = [":---"] + ["---:"] * (len(header) - 1)
    return f"# {title}\n\n{_md_table(header, rows, align)}\n\n{legend(grid)}\n"


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
    DASH: "--",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex_cell(est: Entry, bold: bool) -> str:
    if isinstance(est, str):
        return latex_escape(est)
    if est is None or est.value is None:
        return "--"
    value = fmt(est.value)
    if bold:
        value = rf"\textbf{{{value}}}"
    if est.ci_low is None or est.ci_high is None:
        return value
    return rf"{value}\,{{\scriptsize [{fmt(est.ci_low)}, {fmt(est.ci_high)}]}}"


def main_latex(grid: Grid, title: str) -> str:
    rows = _rows(grid)
    n_cols = len(grid.benchmarks) + 1
    # The best value of each column (as displayed, so ties are all bold); only when there is a choice.
    best: list[str | None] = []
    for j in range(n_cols):
        shown = [fmt(value) for _, ests in rows if (value := _value(ests[j])) is not None]
        best.append(max(shown, key=float) if len(shown) > 1 else None)
    header = ["Model"] + [latex_escape(benchmark_header(grid, b)) for b in grid.benchmarks] + [AVERAGE]
    lines = [
        r"% vlmgrid report; requires \usepackage{booktabs}",
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(title)}. {latex_escape(legend(grid))}}}",
        r"\label{tab:main}",
        r"\begin{tabular}{l" + "c" * n_cols + "}",
        r"\toprule",
        " & ".join(header) + r" \\",
        r"\midrule",
    ]
    for model, ests in rows:
        cells = [
            _latex_cell(est, _value(est) is not None and fmt(_value(est)) == best[j])
            for j, est in enumerate(ests)
        ]
        lines.append(" & ".join([latex_escape(model)] + cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


# --- CSV -----------------------------------------------------------------------------------------


def estimate_frame(row_header: str, value_columns: Sequence[str], rows: Iterable[tuple[str, Sequence[Entry]]]
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
            record += [None, None, None] if _value(entry) is None else [entry.value, entry.ci_low, entry.ci_high]
        records.append(record)
    frame = pd.DataFrame(records, columns=columns)
    for name in columns[1:]:
        frame[name] = frame[name].astype("float64")
    return frame


def main_frame(grid: Grid) -> pd.DataFrame:
    return estimate_frame("model", list(grid.benchmarks) + ["average"], _rows(grid))


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, na_rep="", lineterminator="\n")


# --- breakdown -----------------------------------------------------------------------------------

BREAKDOWN_COLUMNS = ["model", "benchmark", "column", "group", "metric", "value", "ci_low", "ci_high", "n"]


def _breakdown_benchmarks(grid: Grid) -> list[tuple[str, list[str]]]:
    """Benchmarks with a breakdown in any of their score files, with their breakdown columns in order."""
    found = []
    for benchmark in grid.benchmarks:
        columns: list[str] = []
        for model in grid.models:
            cell = grid.cell(model, benchmark)
            if cell is not None:
                columns += [c for c in cell.breakdown if c not in columns]
        if columns:
            found.append((benchmark, columns))
    return found


def breakdown_frame(grid: Grid) -> pd.DataFrame:
    records = []
    for benchmark, columns in _breakdown_benchmarks(grid):
        for column in columns:
            for model in grid.models:
                cell = grid.cell(model, benchmark)
                if cell is None:
                    continue
                for group in cell.breakdown.get(column, []):
                    est = group.estimate
                    records.append(
                        [model, benchmark, column, group.name, group.metric, est.value, est.ci_low, est.ci_high,
                         group.n]
                    )
    frame = pd.DataFrame(records, columns=BREAKDOWN_COLUMNS)
    for name in ("value", "ci_low", "ci_high"):
        frame[name] = frame[name].astype("float64")
    frame["n"] = frame["n"].astype("Int64")
    return frame


def _count(x: int | None) -> str:
    return DASH if x is None else str(x)


def breakdown_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {title}: breakdown\n"]
    found = _breakdown_benchmarks(grid)
    if not found:
        parts.append("No benchmark of this grid has a breakdown.\n")
        return "\n".join(parts)
    for benchmark, columns in found:
        metric = grid.metric(benchmark) or ""
        parts.append(f"## {benchmark}\n")
        for column in columns:
            header = ["Model", column, "Metric", "Value [95% CI]", "n", "n_valid", "Format errors (%)"]
            rows = []
            for model in grid.models:
                cell = grid.cell(model, benchmark)
                if cell is None:
                    continue
                rows.append(
                    [model, "(all)", metric_label(cell.metric), fmt_estimate(cell.estimate), _count(cell.n),
                     _count(cell.n_valid), fmt(cell.format_error_rate)]
                )
                for group in cell.breakdown.get(column, []):
                    rows.append(
                        [model, group.name, metric_label(group.metric), fmt_estimate(group.estimate),
                         _count(group.n), _count(group.n_valid), fmt(group.format_error_rate)]
                    )
            align = [":---", ":---", ":---"] + ["---:"] * 4
            parts.append(f"### by {column} (headline: {metric_label(metric)})\n")
            parts.append(_md_table(header, rows, align) + "\n")
    parts.append(
        f"Values in percent; 95% bootstrap CI in brackets; (all): the benchmark's headline; {DASH}: not reported.\n"
    )
    return "\n".join(parts)


# --- variants ------------------------------------------------------------------------------------

VARIANT_COLUMNS = ["model", "benchmark", "variant", "metric", "value", "ci_low", "ci_high"]
MEAN_VARIANT = "(mean)"


def natural_key(name: str) -> list:
    """"open-2" before "open-10": digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _variant_rows(grid: Grid) -> list[tuple[str, str, str, str, Estimate]]:
    """(model, benchmark, variant, metric, estimate) for the cells with several variants, then their mean."""
    rows = []
    for model in grid.models:
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark)
            if cell is None or len(cell.variants) < 2:
                continue
            for name in sorted(cell.variants, key=natural_key):
                rows.append((model, benchmark, name, cell.metric, cell.variants[name]))
            rows.append((model, benchmark, MEAN_VARIANT, cell.metric, cell.estimate))
    return rows


def variants_frame(grid: Grid) -> pd.DataFrame:
    records = [[m, b, v, metric, e.value, e.ci_low, e.ci_high] for m, b, v, metric, e in _variant_rows(grid)]
    frame = pd.DataFrame(records, columns=VARIANT_COLUMNS)
    for name in ("value", "ci_low", "ci_high"):
        frame[name] = frame[name].astype("float64")
    return frame


def variants_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {title}: prompt variants\n"]
    rows = _variant_rows(grid)
    if not rows:
        parts.append("No cell of this grid has more than one prompt variant.\n")
        return "\n".join(parts)
    header = ["Model", "Benchmark", "Variant", "Metric", "Value [95% CI]"]
    table = [[m, b, v, metric_label(metric), fmt_estimate(e)] for m, b, v, metric, e in rows]
    parts.append(_md_table(header, table, [":---"] * 4 + ["---:"]) + "\n")
    parts.append(
        f"Values in percent; 95% bootstrap CI in brackets; {MEAN_VARIANT}: the cell's headline, the mean over "
        f"its variants (its CI from their averaged bootstrap draws).\n"
    )
    return "\n".join(parts)


# --- cells: how each number was answered ---------------------------------------------------------------

CELL_COLUMNS = ["model", "benchmark", "status", "strategy", "answered_by", "decoding", "n", "n_valid",
                "format_error_rate", "lenient"]


def _lenient(cell) -> float | None:
    """The headline under the benchmark's more lenient reading of generated answers, where the score has one."""
    estimate = cell.metrics.get(f"{cell.metric}_lenient")
    return None if estimate is None else estimate.value


def _cell_rows(grid: Grid) -> list[list]:
    """One row per cell of the grid that has a score file, in grid order (CELL_COLUMNS)."""
    rows = []
    for model in grid.models:
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark)
            if cell is not None:
                rows.append([model, benchmark, "scored", cell.strategy, strategy_label(cell.strategy),
                             decoding_label(cell.strategy, cell.generation), cell.n, cell.n_valid,
                             cell.format_error_rate, _lenient(cell)])
            elif grid.is_hidden(model, benchmark):
                hidden = grid.hidden[(model, benchmark)]
                rows.append([model, benchmark, HIDDEN, hidden.strategy, strategy_label(hidden.strategy),
                             decoding_label(hidden.strategy, hidden.generation), hidden.n, None, None, None])
            elif grid.is_not_applicable(model, benchmark):
                rows.append([model, benchmark, NA, None, None, None, None, None, None, None])
    return rows


def cells_frame(grid: Grid) -> pd.DataFrame:
    frame = pd.DataFrame(_cell_rows(grid), columns=CELL_COLUMNS)
    for name in ("n", "n_valid"):
        frame[name] = frame[name].astype("Int64")
    for name in ("format_error_rate", "lenient"):
        frame[name] = frame[name].astype("float64")
    return frame


def cells_markdown(grid: Grid, title: str) -> str:
    header = ["Model", "Benchmark", "Answered by", "Decoding", "n", "Valid answers", "Format errors (%)",
              "Lenient reading"]
    rows = []
    for model, benchmark, status, _, answered, decoding, n, n_valid, errors, lenient in _cell_rows(grid):
        answered = status if status == NA else (answered or DASH)
        rows.append([model, benchmark, answered, decoding or DASH, _count(n), _count(n_valid),
                     DASH if errors is None else fmt(errors), DASH if lenient is None else fmt(lenient)])
    lines = [f"# {title}: how each number was answered\n", _md_table(header, rows, [":---"] * 4 + ["---:"] * 4) + "\n"]
    lines.append(
        "Answered by: log-likelihood = the option (or letter) the model gives the highest log-likelihood; "
        "generation + parser = the model's generated text read by the benchmark's parser (unreadable text is a "
        "format error); embedding similarity = the option whose text embedding is closest to the image's. "
        f"Decoding: how generated text was sampled ({DASH}: nothing was generated). Valid answers: items with a "
        f"readable answer in every prompt variant. Lenient reading: the headline when the generated answers are "
        f"read by the benchmark's more lenient parser instead of its authors' rule (a second figure, never the "
        f"headline; {DASH}: the benchmark has none, or nothing was generated). {NA}: the model cannot run the "
        f"benchmark. {HIDDEN}: the benchmark's labels are not public; the submission file was written.\n"
    )
    return "\n".join(lines)


def write_tables(grid: Grid, tables_dir: Path, title: str) -> list[Path]:
    tables_dir = Path(tables_dir)
    written = []
    for name, text in (("main.md", main_markdown(grid, title)), ("main.tex", main_latex(grid, title))):
        write_text(tables_dir / name, text)
        written.append(tables_dir / name)
    write_csv(tables_dir / "main.csv", main_frame(grid))
    written.append(tables_dir / "main.csv")
    write_text(tables_dir / "breakdown.md", breakdown_markdown(grid, title))
    written.append(tables_dir / "breakdown.md")
    write_csv(tables_dir / "breakdown.csv", breakdown_frame(grid))
    written.append(tables_dir / "breakdown.csv")
    write_text(tables_dir / "variants.md", variants_markdown(grid, title))
    written.append(tables_dir / "variants.md")
    write_csv(tables_dir / "variants.csv", variants_frame(grid))
    written.append(tables_dir / "variants.csv")
    write_text(tables_dir / "cells.md", cells_markdown(grid, title))
    written.append(tables_dir / "cells.md")
    write_csv(tables_dir / "cells.csv", cells_frame(grid))
    written.append(tables_dir / "cells.csv")
    return written
