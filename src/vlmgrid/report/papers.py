"""The paper tables and figures of a benchmark kind (Kaleidoscope, CVQA, DANCE), one set per benchmark of that kind.

`PAPERS` maps a kind to its writer; the files each writes are named in `vlmgrid.paths.PAPER_FILES`, so the
workflow knows them before the report runs. A grid without a benchmark of a kind gets none of its files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from vlmgrid import paths
from vlmgrid.fileio import write_text
from vlmgrid.report.figures import write_grouped_bars
from vlmgrid.report.scores import Estimate, Grid, ScoreCell, answered_label, decoding_label
from vlmgrid.report.tables import (
    DAGGER, DASH, FAILED, HIDDEN, MISSING, NA, Entry, _latex_cell, _md_table, error_rate, estimate_frame, flagged,
    fmt_estimate, is_flagged, latex_escape, natural_key, status, threshold, write_csv,
)


@dataclass(frozen=True)
class Marks:
    """Which cells a table's rows (or columns) stand for are marked: per row (column), the cell's format error
    rate and whether it is over the threshold (None, None: no score with a rate)."""

    rates: Sequence[float | None]
    flagged: Sequence[bool | None]

    @classmethod
    def of(cls, grid: Grid, benchmark: str, models: Sequence[str]) -> "Marks":
        return cls([error_rate(grid, m, benchmark) for m in models], [is_flagged(grid, m, benchmark) for m in models])

    def name(self, i: int, name: str) -> str:
        return name + DAGGER if self.flagged[i] else name


@dataclass(frozen=True)
class Table:
    """Rows of entries under named columns: Markdown, LaTeX and CSV (a value and two CI columns per column).

    One marked cell per row (`row_marks`: models as rows) or per column (`column_marks`: models as columns):
    its row or column name carries a dagger, and the CSV adds `format_error_rate` (where the table has no such
    column) and `flagged`, once per row or per marked column (`<column>_format_error_rate`, `<column>_flagged`).
    """

    title: str
    row_header: str
    columns: Sequence[str]
    csv_columns: Sequence[str]
    rows: Sequence[tuple[str, Sequence[Entry]]]
    caption: str
    row_marks: Marks | None = None
    column_marks: Marks | None = None

    def _row_name(self, i: int, name: str) -> str:
        return self.row_marks.name(i, name) if self.row_marks is not None else name

    def _columns(self) -> list[str]:
        if self.column_marks is None:
            return list(self.columns)
        return [self.column_marks.name(j, column) for j, column in enumerate(self.columns)]

    def markdown(self) -> str:
        header = [self.row_header, *self._columns()]
        rows = [[self._row_name(i, name), *(fmt_estimate(e) for e in entries)]
                for i, (name, entries) in enumerate(self.rows)]
        table = _md_table(header, rows, [":---"] + ["---:"] * len(self.columns))
        return f"# {self.title}\n\n{table}\n\n{self.caption}\n"

    def latex(self, label: str) -> str:
        lines = [
            r"% vlmgrid report; requires \usepackage{booktabs}",
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{latex_escape(self.title)}. {latex_escape(self.caption)}}}",
            rf"\label{{tab:{label}}}",
            r"\begin{tabular}{l" + "c" * len(self.columns) + "}",
            r"\toprule",
            " & ".join(latex_escape(h) for h in [self.row_header, *self._columns()]) + r" \\",
            r"\midrule",
        ]
        for i, (name, entries) in enumerate(self.rows):
            lines.append(" & ".join([latex_escape(self._row_name(i, name))]
                                    + [_latex_cell(e, False) for e in entries]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines) + "\n"

    def frame(self) -> pd.DataFrame:
        frame = estimate_frame(self.row_header.lower().replace(" ", "_"), self.csv_columns, self.rows)
        if self.row_marks is not None:
            if "format_error_rate" not in self.csv_columns:
                frame["format_error_rate"] = pd.array(list(self.row_marks.rates), dtype="float64")
            frame["flagged"] = pd.array(list(self.row_marks.flagged), dtype="boolean")
        if self.column_marks is not None:
            for j, column in enumerate(self.csv_columns):
                frame[f"{column}_format_error_rate"] = pd.array([self.column_marks.rates[j]] * len(frame),
                                                                dtype="float64")
                frame[f"{column}_flagged"] = pd.array([self.column_marks.flagged[j]] * len(frame), dtype="boolean")
        return frame


def _status(grid: Grid, model: str, benchmark: str) -> str | None:
    """The status word of a cell without numbers (n/a, hidden, missing, failed: its row or column name carries
    the dagger), DASH when not in the grid, None for a scored cell."""
    if grid.is_failed(model, benchmark):
        return FAILED
    word = status(grid, model, benchmark)
    if word is not None:
        return word
    return None if grid.cell(model, benchmark) is not None else DASH


def _model_rows(grid: Grid, benchmark: str, width: int, entries_of: Callable[[ScoreCell], list[Entry]]) -> list:
    """(model, entries) per model: entries_of(cell) for a scored cell, its status in all `width` columns for a
    cell without numbers."""
    rows = []
    for model in grid.models:
        status = _status(grid, model, benchmark)
        rows.append((model, [status] * width if status is not None else entries_of(grid.cell(model, benchmark))))
    return rows


def _group(cell: ScoreCell, column: str, name: str) -> Estimate | None:
    for group in cell.breakdown.get(column, []):
        if group.name == name:
            return group.estimate
    return None


def _groups(grid: Grid, benchmark: str, column: str) -> list[str]:
    """The group names of a breakdown column over the benchmark's cells, in first-seen order."""
    names: list[str] = []
    for model in grid.models:
        cell = grid.cell(model, benchmark)
        if cell is not None:
            names += [g.name for g in cell.breakdown.get(column, []) if g.name not in names]
    return names


def _answered(grid: Grid, benchmark: str) -> str:
    """Per model, how it answered and, for generated answers, how they were decoded."""
    parts = []
    for model in grid.models:
        source = (grid.cell(model, benchmark) or grid.failed.get((model, benchmark))
                  or grid.hidden.get((model, benchmark)))
        if source is None or source.strategy is None:
            continue
        decoding = decoding_label(source.strategy, source.generation)
        # Only generated answers are decoded; say so, since the sampling settings move the numbers.
        parts.append(f"{model}: {answered_label(source.strategy, source.backend, source.model_id)}, "
                     f"{decoding or 'nothing generated, no sampling'}")
    return "How each model answered: " + "; ".join(parts) + "." if parts else ""


def _notes(grid: Grid, benchmark: str) -> str:
    notes = []
    if any(grid.is_not_applicable(m, benchmark) for m in grid.models):
        notes.append(f"{NA}: the model cannot run this benchmark.")
    if any(grid.is_hidden(m, benchmark) for m in grid.models):
        notes.append(f"{HIDDEN}: the benchmark's labels are not public; the submission file was written.")
    marked = [(m, rate) for m in grid.models if (rate := grid.flag(m, benchmark)) is not None]
    if marked:
        listed = ", ".join(f"{m} {rate:.1f}%" + (f" ({FAILED})" if grid.is_failed(m, benchmark) else "")
                           for m, rate in marked)
        notes.append(f"{DAGGER}: more than {threshold(grid)} of the model's prediction rows are errors or unparsable "
                     f"answers (format errors, counted as the benchmark's rule says, usually as wrong), so its "
                     f"numbers are built on them: {listed}.")
    if any(grid.is_failed(m, benchmark) for m in grid.models):
        notes.append(f"{FAILED}: every prediction row is an error or unparsable, so the cell has no number.")
    if any(grid.is_missing(m, benchmark) for m in grid.models):
        notes.append(f"{MISSING}: the cell has no score file (it failed or has not run).")
    return " ".join(notes)


def _caption(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def _write_table(table: Table, tables_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
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


def _series(grid: Grid, benchmark: str, groups: Sequence[str], column: str) -> list:
    """Per model (its name marked when its cell is), its estimate per group (hatched when the cell is marked)."""
    series = []
    for model in grid.models:
        cell = grid.cell(model, benchmark)
        flag = grid.flag(model, benchmark)
        word = status(grid, model, benchmark)  # written where the bars would stand
        series.append((model + (DAGGER if flag is not None else ""),
                       [flagged(_group(cell, column, g), flag) if cell is not None else word for g in groups]))
    return series


def _figure_note(grid: Grid, benchmark: str) -> str:
    """What the figure's marks mean: the table's notes on marked, failed and missing cells."""
    notes = []
    marked = [(m, rate) for m in grid.models
              if (rate := grid.flag(m, benchmark)) is not None and not grid.is_failed(m, benchmark)]
    if marked:
        notes.append(f"{DAGGER} and hatched bars: format errors above {threshold(grid)} of the prediction rows ("
                     + ", ".join(f"{m} {rate:.1f}%" for m, rate in marked) + ").")
    failed = [m for m in grid.models if grid.is_failed(m, benchmark)]
    if failed:
        notes.append(f"No bar, {FAILED}: every prediction row is an error or unparsable ({', '.join(failed)}).")
    missing = [m for m in grid.models if grid.is_missing(m, benchmark)]
    if missing:
        notes.append(f"No bar, {MISSING}: no score file ({', '.join(missing)}).")
    return " ".join(notes)


# --- Kaleidoscope --------------------------------------------------------------------------------------------

MODALITIES = ("multimodal", "text-only")


def kaleidoscope_table(grid: Grid, benchmark: str) -> Table:
    """Models x (accuracy, format error rate, multimodal, text-only, one column per language)."""
    languages = _groups(grid, benchmark, "language")

    def entries_of(cell: ScoreCell) -> list[Entry]:
        errors = cell.metrics.get("format_error_rate") or Estimate(cell.format_error_rate)
        return ([cell.estimate, errors] + [_group(cell, "modality", m) for m in MODALITIES]
                + [_group(cell, "language", lang) for lang in languages])

    rows = _model_rows(grid, benchmark, 2 + len(MODALITIES) + len(languages), entries_of)
    caption = _caption(
        f"{benchmark}. Values in percent, 95% bootstrap CI in brackets. Accuracy: the mean over languages of each "
        f"language's accuracy, an answer that could not be read counting as wrong (the headline); format errors: "
        f"the share of all questions without a valid answer; {', '.join(MODALITIES)} and the language columns: "
        f"accuracy within that group. {DASH}: not reported.",
        _answered(grid, benchmark),
        _notes(grid, benchmark),
    )
    return Table(
        title=f"Kaleidoscope: {benchmark}",
        row_header="Model",
        columns=["Accuracy", "Format errors", "Multimodal", "Text-only", *languages],
        csv_columns=["accuracy", "format_error_rate", "multimodal", "text_only", *languages],
        rows=rows,
        caption=caption,
        row_marks=Marks.of(grid, benchmark, grid.models),
    )


def write_kaleidoscope(grid: Grid, benchmark: str, stems: dict[str, str], tables_dir: Path,
                       figures_dir: Path) -> list[Path]:
    written = _write_table(kaleidoscope_table(grid, benchmark), tables_dir, stems["kaleidoscope"],
                           ("md", "tex", "csv"))
    languages = _groups(grid, benchmark, "language")
    written += write_grouped_bars(figures_dir, stems["kaleidoscope"], f"Kaleidoscope ({benchmark}): accuracy per language",
                                  languages, _series(grid, benchmark, languages, "language"), "accuracy (%)",
                                  note=_figure_note(grid, benchmark))
    return written


# --- CVQA ----------------------------------------------------------------------------------------------------

# The paper's four prompt settings, in its order; a score with other variant names lists them naturally sorted.
CVQA_SETTINGS = {
    "loc-en": "location-aware prompt, English question and options",
    "loc-local": "location-aware prompt, local-language question and options",
    "noloc-en": "location-agnostic prompt, English",
    "noloc-local": "location-agnostic prompt, local language",
}
PAIR = "country_language"
MEAN = "Mean"
ALL = "(all)"


def _settings(grid: Grid, benchmark: str) -> list[str]:
    found: set[str] = set()
    for model in grid.models:
        cell = grid.cell(model, benchmark)
        if cell is not None:
            found.update(cell.variants)
        hidden = grid.hidden.get((model, benchmark))
        if hidden is not None:
            found.update(hidden.submission)  # one submission file per setting
    known = [name for name in CVQA_SETTINGS if name in found]
    return known + sorted(found - set(known), key=natural_key)


def cvqa_table(grid: Grid, benchmark: str) -> Table:
    """Models x (each prompt setting, their mean: the headline)."""
    settings = _settings(grid, benchmark)
    rows = _model_rows(grid, benchmark, len(settings) + 1,
                       lambda cell: [cell.variants.get(s) for s in settings] + [cell.estimate])
    legend = "; ".join(f"{s}: {CVQA_SETTINGS[s]}" for s in settings if s in CVQA_SETTINGS)
    caption = _caption(
        f"{benchmark}. Accuracy in percent, 95% bootstrap CI in brackets, per prompt setting ({legend}); "
        f"{MEAN}: the mean over the settings (the headline, its CI from the averaged bootstrap draws)."
        if legend else
        f"{benchmark}. Accuracy in percent, 95% bootstrap CI in brackets, per prompt setting; {MEAN}: their mean.",
        _answered(grid, benchmark),
        _notes(grid, benchmark),
    )
    return Table(title=f"CVQA: {benchmark}", row_header="Model", columns=[*settings, MEAN],
                 csv_columns=[*settings, "mean"], rows=rows, caption=caption,
                 row_marks=Marks.of(grid, benchmark, grid.models))


def cvqa_pairs_table(grid: Grid, benchmark: str) -> Table:
    """Country-language pairs x models: each pair's accuracy, the mean over the settings, then every item."""
    pairs = sorted(_groups(grid, benchmark, PAIR))
    models = list(grid.models)
    rows = []
    for pair in [*pairs, ALL]:
        entries: list[Entry] = []
        for model in models:
            status = _status(grid, model, benchmark)
            cell = grid.cell(model, benchmark)
            if status is not None:
                entries.append(status)
            else:
                entries.append(cell.estimate if pair == ALL else _group(cell, PAIR, pair))
        rows.append((pair, entries))
    caption = _caption(
        f"{benchmark}. Accuracy in percent per country-language pair, 95% bootstrap CI in brackets: the mean over "
        f"the prompt settings, as the score file's breakdown gives it; {ALL}: every item (the headline).",
        _notes(grid, benchmark),
    )
    return Table(title=f"CVQA per country-language pair: {benchmark}", row_header="Country-language",
                 columns=models, csv_columns=models, rows=rows, caption=caption,
                 column_marks=Marks.of(grid, benchmark, models))


def write_cvqa(grid: Grid, benchmark: str, stems: dict[str, str], tables_dir: Path,
               figures_dir: Path) -> list[Path]:
    written = _write_table(cvqa_table(grid, benchmark), tables_dir, stems["cvqa"], ("md", "tex", "csv"))
    written += _write_table(cvqa_pairs_table(grid, benchmark), tables_dir, stems["cvqa-pairs"], ("md", "tex", "csv"))
    pairs = sorted(_groups(grid, benchmark, PAIR))
    written += write_grouped_bars(figures_dir, stems["cvqa-pairs"],
                                  f"CVQA ({benchmark}): accuracy per country-language pair (mean over settings)",
                                  pairs, _series(grid, benchmark, pairs, PAIR), "accuracy (%)",
                                  note=_figure_note(grid, benchmark))
    return written


# --- DANCE ---------------------------------------------------------------------------------------------------

DANCE_SPLITS = ("test-seen", "test-unseen")
DANCE_DIRECTIONS = ("riddle-to-image", "image-to-riddle")


def dance_table(grid: Grid, benchmark: str) -> Table:
    """Models x (test-seen, test-unseen) x (riddle -> image, image -> riddle) Acc@50, then the headline."""
    subsets = [f"{split} {direction}" for split in DANCE_SPLITS for direction in DANCE_DIRECTIONS]
    found = _groups(grid, benchmark, "subset")
    subsets = [s for s in subsets if s in found] + sorted(set(found) - set(subsets), key=natural_key)
    rows = _model_rows(grid, benchmark, len(subsets) + 1,
                       lambda cell: [_group(cell, "subset", s) for s in subsets] + [cell.estimate])
    caption = _caption(
        f"{benchmark}. Acc@50 in percent, 95% bootstrap CI in brackets: per query with n positives among its 50 "
        f"candidates, the share of the positives ranked within the top n, averaged over the queries; per split "
        f"(whether the riddle's knowledge triple occurs in training) and direction (a riddle ranks 50 pictures, a "
        f"picture ranks 50 riddles); All: the mean of the two directions over both splits (the headline). The "
        f"score files also hold hit@1 and hit@5 (the share of queries with a positive ranked first / within the "
        f"top 5), recall@5 (the share of a query's positives ranked within its top 5, averaged over queries) and "
        f"MRR (of the best-ranked positive).",
        _answered(grid, benchmark),
        _notes(grid, benchmark),
    )
    return Table(title=f"DANCE: {benchmark}", row_header="Model",
                 columns=[s.replace("riddle-to-image", "riddle→image").replace("image-to-riddle", "image→riddle")
                          for s in subsets] + ["All"],
                 csv_columns=[s.replace(" ", "_") for s in subsets] + ["all"], rows=rows, caption=caption,
                 row_marks=Marks.of(grid, benchmark, grid.models))


def write_dance(grid: Grid, benchmark: str, stems: dict[str, str], tables_dir: Path,
                figures_dir: Path) -> list[Path]:
    return _write_table(dance_table(grid, benchmark), tables_dir, stems["dance"], ("md", "tex", "csv"))


Writer = Callable[[Grid, str, dict, Path, Path], list[Path]]
PAPERS: dict[str, Writer] = {"kaleidoscope": write_kaleidoscope, "cvqa": write_cvqa, "dance": write_dance}


def write_papers(grid: Grid, tables_dir: Path, figures_dir: Path) -> list[Path]:
    """Every paper table and figure of the grid's benchmark kinds, named as `paths.PAPER_FILES` says."""
    written = []
    for kind, writer in PAPERS.items():
        benchmarks = grid.benchmarks_of_kind(kind)
        for benchmark in benchmarks:
            stems = {stem: paths.paper_stem(stem, benchmark, len(benchmarks))
                     for _, stem, _, _ in paths.PAPER_FILES[kind]}
            written += writer(grid, benchmark, stems, Path(tables_dir), Path(figures_dir))
    return written
