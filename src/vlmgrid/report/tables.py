"""The main table (Markdown, LaTeX, CSV), the breakdown table and the per-variant table (Markdown, CSV)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from vlmgrid.fileio import atomic_path, write_text
from vlmgrid.report.scores import (
    METRIC_NOTES, Estimate, Grid, answered_label, cell_list, decoding_label, metric_label,
)

DASH = "\u2013"  # en dash: a cell that is not in the grid
NA = "n/a"  # a cell whose model cannot run the benchmark (and that model's average)
AVERAGE = "Average"
NA_NOTE = f"{NA}: the model cannot run this benchmark; its average is then {NA}."
HIDDEN = "hidden"  # a cell whose benchmark hides its labels (and that model's average)
HIDDEN_NOTE = (f"{HIDDEN}: the benchmark's labels are not public; the submission file was written "
               f"(that model's average is then {HIDDEN} too).")
DAGGER = "\u2020"  # marks a number built on too many format errors; the footnote gives the rate
FAILED = "failed"  # a cell whose every prediction row is an error or unparsable: no number (nor an average)
MISSING = "missing"  # a cell without a score file, reported with allow_missing (and that model's average)

# A main-table entry: an estimate (its `flag` set when it is marked), None (not in the grid) or a status word.
Entry = Estimate | str | None


def threshold(grid: Grid) -> str:
    return f"{grid.flag_error_rate:g}%"


def flag_note(grid: Grid, cells: list[tuple[str, str, float]], *, average: bool = False) -> str:
    """The footnote of the dagger: the threshold and each marked cell with its rate ("" when none is)."""
    if not cells:
        return ""
    listed = ", ".join(f"{model} on {benchmark} {rate:.1f}%" + (f" ({FAILED})" if grid.is_failed(model, benchmark)
                                                                  else "")
                       for model, benchmark, rate in cells)
    note = (f"{DAGGER}: more than {threshold(grid)} of the cell's prediction rows are errors or unparsable answers "
            f"(format errors, counted as the benchmark's rule says, usually as wrong): {listed}.")
    if average:
        note += " An average over such a cell is marked too."
    return note


def status_notes(grid: Grid, cells: list[tuple[str, str]] | None = None, *, average: bool = False) -> str:
    """The notes on failed and missing cells among `cells` (default: the whole grid); "" when there are none."""
    keys = cells if cells is not None else [(m, b) for m in grid.models for b in grid.benchmarks]
    failed = [key for key in keys if grid.is_failed(*key)]
    missing = [key for key in keys if grid.is_missing(*key)]
    notes = []
    if failed:
        notes.append(f"{FAILED}: every prediction row of the cell is an error or unparsable, so it has no number"
                     + (f" (that model's average is then {FAILED} too)" if average else "") + ".")
    if missing:
        notes.append(f"{MISSING}: the cell has no score file (it failed or has not run): {cell_list(missing)}"
                     + (f" (that model's average is then {MISSING} too)" if average else "") + ".")
    return " ".join(notes)


def fmt(x: float | None) -> str:
    """One decimal, never "-0.0"."""
    if x is None:
        return DASH
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def fmt_estimate(est: Entry) -> str:
    """"51.2 [44.0, 58.1]", "51.2" without a CI, "–" for no value, "n/a" for a cell that cannot run; a
    dagger after a marked one ("51.2 [44.0, 58.1]†")."""
    if isinstance(est, str):
        return est
    if est is None or est.value is None:
        return DASH
    mark = DAGGER if est.flag is not None else ""
    if est.ci_low is None or est.ci_high is None:
        return fmt(est.value) + mark
    return f"{fmt(est.value)} [{fmt(est.ci_low)}, {fmt(est.ci_high)}]{mark}"


def flagged(estimate: Estimate | None, rate: float | None) -> Estimate | None:
    """The estimate marked with `rate` (None: unmarked)."""
    return estimate if estimate is None or rate is None else replace(estimate, flag=rate)


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
    averages = any(model_status(grid, m) is None and grid.average(m) is not None and grid.model_flag(m) is not None
                   for m in grid.models)
    flags = " ".join(part for part in (flag_note(grid, grid.flagged(), average=averages),
                                      status_notes(grid, average=True)) if part)
    return (
        f"Values in percent; 95% bootstrap CI in brackets{boot}; {AVERAGE}: mean over the benchmarks, "
        f"CI from the averaged bootstrap draws; {DASH}: not in the grid.{na}{hidden}"
        + (f" {flags}" if flags else "") + notes
    )


def status(grid: Grid, model: str, benchmark: str) -> str | None:
    """The word a cell without a number reads (n/a, hidden, missing, failed†); None for a scored cell or one
    that is not in the grid."""
    if grid.is_not_applicable(model, benchmark):
        return NA
    if grid.is_hidden(model, benchmark):
        return HIDDEN
    if grid.is_missing(model, benchmark):
        return MISSING
    if grid.is_failed(model, benchmark):
        return FAILED + DAGGER
    return None


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


def cell_entry(grid: Grid, model: str, benchmark: str) -> Entry:
    """The headline of a cell: its estimate (marked when its format error rate is over the threshold), a
    status word, or None when it is not in the grid."""
    word = status(grid, model, benchmark)
    if word is not None:
        return word
    cell = grid.cell(model, benchmark)
    return flagged(cell.estimate, grid.flag(model, benchmark)) if cell is not None else None


def average_entry(grid: Grid, model: str) -> Entry:
    """The model's average: a status word, None when it cannot be computed, else marked when a cell is."""
    return model_status(grid, model) or flagged(grid.average(model), grid.model_flag(model))


def _rows(grid: Grid) -> list[tuple[str, list[Entry]]]:
    """Per model: its entry per benchmark, then its average."""
    return [(model, [cell_entry(grid, model, benchmark) for benchmark in grid.benchmarks]
             + [average_entry(grid, model)]) for model in grid.models]


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
    DAGGER: r"$^{\dagger}$",
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
    mark = _LATEX_SPECIAL[DAGGER] if est.flag is not None else ""
    if est.ci_low is None or est.ci_high is None:
        return value + mark
    return rf"{value}\,{{\scriptsize [{fmt(est.ci_low)}, {fmt(est.ci_high)}]}}{mark}"


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


def error_rate(grid: Grid, model: str, benchmark: str) -> float | None:
    """The format error rate of a cell with a score (a failed one too); None for the others."""
    cell = grid.cell(model, benchmark) or grid.failed.get((model, benchmark))
    return None if cell is None else cell.format_error_rate


def is_flagged(grid: Grid, model: str, benchmark: str) -> bool | None:
    """Whether the cell is marked; None (empty in a CSV) for a cell without a format error rate."""
    return None if error_rate(grid, model, benchmark) is None else grid.flag(model, benchmark) is not None


def main_frame(grid: Grid) -> pd.DataFrame:
    """The values and CIs, then per benchmark the cell's format error rate and whether it is marked, then
    whether each average is marked (empty where there is no number to mark)."""
    rows = _rows(grid)
    frame = estimate_frame("model", list(grid.benchmarks) + ["average"], rows)
    for benchmark in grid.benchmarks:
        frame[f"{benchmark}_format_error_rate"] = pd.array(
            [error_rate(grid, model, benchmark) for model in grid.models], dtype="float64")
        frame[f"{benchmark}_flagged"] = pd.array(
            [is_flagged(grid, model, benchmark) for model in grid.models], dtype="boolean")
    frame["average_flagged"] = pd.array(
        [None if _value(entries[-1]) is None else entries[-1].flag is not None for _, entries in rows],
        dtype="boolean")
    return frame


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, na_rep="", lineterminator="\n")


# --- breakdown -----------------------------------------------------------------------------------

BREAKDOWN_COLUMNS = ["model", "benchmark", "column", "group", "metric", "value", "ci_low", "ci_high", "n",
                     "format_error_rate", "flagged"]


def _group_flag(grid: Grid, model: str, benchmark: str, group) -> tuple[float | None, float | None]:
    """(rate, flag) of a breakdown group: by its own format error rate where the score gives one, else by the
    cell's."""
    rate = group.format_error_rate
    if rate is None:
        return error_rate(grid, model, benchmark), grid.flag(model, benchmark)
    return rate, rate if rate > grid.flag_error_rate else None


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
                    rate, flag = _group_flag(grid, model, benchmark, group)
                    records.append(
                        [model, benchmark, column, group.name, group.metric, est.value, est.ci_low, est.ci_high,
                         group.n, rate, None if rate is None else flag is not None]
                    )
    frame = pd.DataFrame(records, columns=BREAKDOWN_COLUMNS)
    for name in ("value", "ci_low", "ci_high", "format_error_rate"):
        frame[name] = frame[name].astype("float64")
    frame["n"] = frame["n"].astype("Int64")
    frame["flagged"] = frame["flagged"].astype("boolean")
    return frame


def _count(x: int | None) -> str:
    return DASH if x is None else str(x)


def breakdown_markdown(grid: Grid, title: str) -> str:
    parts = [f"# {title}: breakdown\n"]
    found = _breakdown_benchmarks(grid)
    if not found:
        parts.append("No benchmark of this grid has a breakdown.\n")
        return "\n".join(parts)
    marked = failed = False
    for benchmark, columns in found:
        metric = grid.metric(benchmark) or ""
        parts.append(f"## {benchmark}\n")
        for column in columns:
            header = ["Model", column, "Metric", "Value [95% CI]", "n", "n_valid", "Format errors (%)"]
            rows = []
            for model in grid.models:
                gone = grid.failed.get((model, benchmark))
                if gone is not None:  # no number, but its rate says why
                    failed = True
                    rows.append([model, "(all)", metric_label(gone.metric), FAILED + DAGGER, _count(gone.n),
                                 _count(gone.n_valid), fmt(gone.format_error_rate)])
                cell = grid.cell(model, benchmark)
                if cell is None:
                    continue
                flag = grid.flag(model, benchmark)
                marked = marked or flag is not None
                rows.append(
                    [model, "(all)", metric_label(cell.metric), fmt_estimate(flagged(cell.estimate, flag)),
                     _count(cell.n), _count(cell.n_valid), fmt(cell.format_error_rate)]
                )
                for group in cell.breakdown.get(column, []):
                    _, flag = _group_flag(grid, model, benchmark, group)
                    marked = marked or flag is not None
                    rows.append(
                        [model, group.name, metric_label(group.metric), fmt_estimate(flagged(group.estimate, flag)),
                         _count(group.n), _count(group.n_valid), fmt(group.format_error_rate)]
                    )
            align = [":---", ":---", ":---"] + ["---:"] * 4
            parts.append(f"### by {column} (headline: {metric_label(metric)})\n")
            parts.append(_md_table(header, rows, align) + "\n")
    notes = ""
    if marked or failed:
        notes += (f" {DAGGER}: more than {threshold(grid)} of the prediction rows are errors or unparsable answers "
                  f"(format errors: the group's own rate where the score gives one, else the cell's; a group row "
                  f"without its own rate shows {DASH} there).")
    if failed:
        notes += f" {FAILED}: every prediction row of the cell is an error or unparsable, so it has no number."
    parts.append(
        f"Values in percent; 95% bootstrap CI in brackets; (all): the benchmark's headline; {DASH}: not reported."
        f"{notes}\n"
    )
    return "\n".join(parts)


# --- variants ------------------------------------------------------------------------------------

VARIANT_COLUMNS = ["model", "benchmark", "variant", "metric", "value", "ci_low", "ci_high", "format_error_rate",
                   "flagged"]
MEAN_VARIANT = "(mean)"


def natural_key(name: str) -> list:
    """"open-2" before "open-10": digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _variant_rows(grid: Grid) -> list[tuple[str, str, str, str, Estimate]]:
    """(model, benchmark, variant, metric, estimate) for the cells with several variants, then their mean; a
    marked cell's estimates are marked (the score has no per-variant format error rate)."""
    rows = []
    for model in grid.models:
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark)
            if cell is None or len(cell.variants) < 2:
                continue
            flag = grid.flag(model, benchmark)
            for name in sorted(cell.variants, key=natural_key):
                rows.append((model, benchmark, name, cell.metric, flagged(cell.variants[name], flag)))
            rows.append((model, benchmark, MEAN_VARIANT, cell.metric, flagged(cell.estimate, flag)))
    return rows


def variants_frame(grid: Grid) -> pd.DataFrame:
    records = [[m, b, v, metric, e.value, e.ci_low, e.ci_high, error_rate(grid, m, b), is_flagged(grid, m, b)]
               for m, b, v, metric, e in _variant_rows(grid)]
    frame = pd.DataFrame(records, columns=VARIANT_COLUMNS)
    for name in ("value", "ci_low", "ci_high", "format_error_rate"):
        frame[name] = frame[name].astype("float64")
    frame["flagged"] = frame["flagged"].astype("boolean")
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
    shown = {(m, b) for m, b, *_ in rows}
    note = flag_note(grid, [entry for entry in grid.flagged() if (entry[0], entry[1]) in shown])
    parts.append(
        f"Values in percent; 95% bootstrap CI in brackets; {MEAN_VARIANT}: the cell's headline, the mean over "
        f"its variants (its CI from their averaged bootstrap draws)." + (f" {note}" if note else "") + "\n"
    )
    return "\n".join(parts)


# --- cells: how each number was answered ---------------------------------------------------------------

CELL_COLUMNS = ["model", "benchmark", "status", "strategy", "answered_by", "decoding", "n", "n_valid",
                "format_error_rate", "lenient", "flagged"]


def _lenient(cell) -> float | None:
    """The headline under the benchmark's more lenient reading of generated answers, where the score has one."""
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
                rows.append([model, benchmark, FAILED if grid.is_failed(model, benchmark) else "scored",
                             cell.strategy, answered_label(cell.strategy, cell.backend, cell.model_id),
                             decoding_label(cell.strategy, cell.generation), cell.n, cell.n_valid,
                             cell.format_error_rate, _lenient(cell), is_flagged(grid, model, benchmark)])
            elif grid.is_hidden(model, benchmark):
                hidden = grid.hidden[(model, benchmark)]
                rows.append([model, benchmark, HIDDEN, hidden.strategy,
                             answered_label(hidden.strategy, hidden.backend, hidden.model_id),
                             decoding_label(hidden.strategy, hidden.generation), hidden.n, None, None, None, None])
            elif grid.is_not_applicable(model, benchmark):
                rows.append([model, benchmark, NA, None, None, None, None, None, None, None, None])
            elif grid.is_missing(model, benchmark):
                rows.append([model, benchmark, MISSING, None, None, None, None, None, None, None, None])
    return rows


def cells_frame(grid: Grid) -> pd.DataFrame:
    frame = pd.DataFrame(_cell_rows(grid), columns=CELL_COLUMNS)
    for name in ("n", "n_valid"):
        frame[name] = frame[name].astype("Int64")
    for name in ("format_error_rate", "lenient"):
        frame[name] = frame[name].astype("float64")
    frame["flagged"] = frame["flagged"].astype("boolean")
    return frame


def cells_markdown(grid: Grid, title: str) -> str:
    header = ["Model", "Benchmark", "Answered by", "Decoding", "n", "Valid answers", "Format errors (%)",
              "Lenient reading"]
    rows = []
    for model, benchmark, word, _, answered, decoding, n, n_valid, errors, lenient, mark in _cell_rows(grid):
        answered = word if word in (NA, MISSING) else (answered or DASH)
        errors = DASH if errors is None else fmt(errors) + (DAGGER if mark else "")
        rows.append([model, benchmark, answered, decoding or DASH, _count(n), _count(n_valid), errors,
                     DASH if lenient is None else fmt(lenient)])
    lines = [f"# {title}: how each number was answered\n", _md_table(header, rows, [":---"] * 4 + ["---:"] * 4) + "\n"]
    lines.append(
        "Answered by: log-likelihood = the option (or letter) the model gives the highest log-likelihood; "
        "generation + parser = the model's generated text read by the benchmark's parser (unreadable text is a "
        "format error); embedding similarity = the option whose text embedding is closest to the image's; "
        "random guess, first option or majority answer (baseline) = a reference baseline, which picks an option "
        "without reading the item. "
        f"Decoding: how generated text was sampled ({DASH}: nothing was generated). Valid answers: items with a "
        f"readable answer in every prompt variant. Lenient reading: the headline when the generated answers are "
        f"read by the benchmark's more lenient parser instead of its authors' rule (a second figure, never the "
        f"headline; {DASH}: the benchmark has none, or nothing was generated). {NA}: the model cannot run the "
        f"benchmark. {HIDDEN}: the benchmark's labels are not public; the submission file was written. "
        f"{DAGGER}: format errors above {threshold(grid)}, so every table marks the cell's numbers ({FAILED} at "
        f"100%: the cell has no number). {MISSING}: the cell has no score file.\n"
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
