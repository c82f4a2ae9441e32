"""Papers' published numbers (`config/reported/*.csv`, docs/formats.md): read and checked (`load_reported`),
matched to the grid's cells (`match_reported`) and set beside the reproduced figure (`compare`).

A grid model is the paper's model when its `reported_as` names it; a grid benchmark is the row's benchmark
when its kind is the row's `benchmark` and, where the row gives a split, its split is that split. A cell
without a number (n/a, hidden, failed, missing) or a score file without the figure is never compared: its
comparison carries the word that says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vlmgrid.errors import VlmgridError
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.score_file import Estimate

COLUMNS = (
    "paper",
    "table",
    "model",
    "benchmark",
    "split",
    "figure",
    "value",
    "source",
    "note",
    "answering",
    "decoding",
    "prompt_suffix",
    "method_source",
)

# What each column holds, for the sentence that refuses a bad cell.
_COLUMN_HINTS = {
    "paper": "the paper's arXiv id, e.g. 2310.03744",
    "table": "where in the source the number stands, e.g. Table 4",
    "model": "the model as the paper names it",
    "benchmark": "a vlmgrid benchmark kind (`vlmgrid benchmarks` lists them)",
    "split": "the split's name, or leave the cell empty",
    "figure": "a metric name of the kind's score files (docs/formats.md), e.g. perception for MME points",
    "value": "the published number as a plain decimal, e.g. 85.9",
    "source": "a URL and where in it, e.g. https://arxiv.org/abs/2310.03744 Table 4",
    "note": "free text, or leave the cell empty",
    "answering": "how the paper answered: generation, likelihood or similarity",
    "decoding": "greedy or sampled for generation, and nothing for likelihood or similarity",
    "prompt_suffix": "the instruction the paper put after the question, or leave the cell empty",
    "method_source": "a URL and where in it the paper's code or docs say how it answered",
}

# A score file's `strategy` as a method of answering (the words of the `answering` column).
ANSWERING = {"generate": "generation", "score_options": "likelihood", "embed": "similarity"}

# Figures that are points, not percent ({kind: figure names}); everything else is in percent.
POINTS = {"mme": ("perception", "cognition", "total")}

# Benchmark kinds in words, for the figure column; a kind not listed is shown as it is spelled.
KIND_LABELS = {
    "mme": "MME",
    "pope": "POPE",
    "pope_coco": "POPE (COCO)",
    "scienceqa_img": "ScienceQA-IMG",
    "textvqa": "TextVQA",
    "mmbench": "MMBench",
    "cvbench": "CV-Bench",
    "mmvp": "MMVP",
    "kaleidoscope": "Kaleidoscope",
    "cvqa": "CVQA",
    "dance": "DANCE",
    "imagenet": "ImageNet",
    "imagenet_ilsvrc2012": "ImageNet",
    "caltech101": "Caltech101",
    "flowers102": "Flowers102",
    "food101": "Food101",
}


@dataclass(frozen=True)
class Method:
    """How one side of a comparison answered: `answering` (generation, likelihood, similarity; for the grid a
    strategy without such a word is kept as it is spelled), `decoding` (greedy or sampled; generation only)
    and `prompt_suffix`, the instruction after the question (None: not given, or not recorded)."""

    answering: str
    decoding: str | None = None
    prompt_suffix: str | None = None

    def words(self) -> str:
        """ "generation (greedy)", "likelihood"."""
        return self.answering + (f" ({self.decoding})" if self.decoding else "")

    def same_as(self, other: Method) -> bool:
        """The same way of answering and, for generation, the same decoding; the prompt is not compared (a
        score file does not record it)."""
        return (self.answering, self.decoding) == (other.answering, other.decoding)


def grid_method(
    strategy: str | None, generation: Mapping[str, Any], backend: str | None = None
) -> Method | None:
    """The grid's method from its score file: None when the file records no strategy; a reference baseline
    answers by a guess, whatever its strategy says."""
    if backend == "baseline":
        return Method("baseline guess")
    if strategy is None:
        return None
    answering = ANSWERING.get(strategy, strategy)
    if answering != "generation":
        return Method(answering)
    return Method(answering, "sampled" if generation.get("do_sample") else "greedy")


@dataclass(frozen=True)
class ReportedRow:
    """One published number (a row of a `config/reported/*.csv` file)."""

    paper: str
    table: str
    model: str
    benchmark: str  # a benchmark kind
    split: str | None
    figure: str  # a metric name of the kind's score files
    value: float
    source: str
    note: str | None
    path: Path  # the file and row it was read from, for messages
    row: int
    method: Method | None = (
        None  # how the paper answered (always given in a file; None only when built in code)
    )
    method_source: str | None = None


@dataclass(frozen=True)
class Published:
    """What the report compares the grid with: the published rows, the paper's name of each grid model that
    has one (its `reported_as`), and the split each grid benchmark holds (None: the kind's only one)."""

    rows: tuple[ReportedRow, ...] = ()
    reported_as: Mapping[str, str] = field(default_factory=dict)
    splits: Mapping[str, str | None] = field(default_factory=dict)
    # Where the rows were read from (the no-match sentence names it); None when no folder was read.
    folder: Path | None = None


@dataclass(frozen=True)
class Comparison:
    """One published number beside the grid cell that reproduces it.

    `reproduced` is the score file's figure (its flag set when the cell is marked); None, with `status`
    saying why, when the cell has no number to compare. `difference` is reproduced - reported; `inside` says
    whether the reported value lies within the reproduced 95% CI (None: not compared, or no CI).
    """

    row: ReportedRow
    model: str  # the grid model
    benchmark: str  # the grid benchmark
    reproduced: Estimate | None
    status: str | None
    method: Method | None = None  # how the grid answered (its score file's strategy and decoding)

    @property
    def same_method(self) -> bool | None:
        """Whether both sides answered the same way; None when not compared, or when a side's method is
        unknown."""
        if self.reproduced is None or self.method is None or self.row.method is None:
            return None
        return self.row.method.same_as(self.method)

    @property
    def coverage(self) -> tuple[int, int] | None:
        """(answered, total) where the reproduced cell answers a subset of its benchmark (its number is over
        the answered items, the published one over the benchmark); None when it answers every item or was not
        compared."""
        return None if self.reproduced is None else self.reproduced.coverage

    @property
    def difference(self) -> float | None:
        if self.reproduced is None or self.reproduced.value is None:
            return None
        # rounded as the score files round their numbers, so no float noise reaches the CSV
        return round(self.reproduced.value - self.row.value, 4)

    @property
    def inside(self) -> bool | None:
        est = self.reproduced
        if est is None or est.ci_low is None or est.ci_high is None:
            return None
        return est.ci_low <= self.row.value <= est.ci_high


def is_points(kind: str, figure: str) -> bool:
    return figure in POINTS.get(kind, ())


def figure_label(kind: str, figure: str, split: str | None = None) -> str:
    """The figure in words with its unit: "MME perception (points)", "MMBench circular acc., dev (%)"."""
    kind_words, figure_words = KIND_LABELS.get(kind, kind), metric_label(figure)
    # A label that already names its benchmark ("MME scaled") is not prefixed twice.
    words = figure_words if figure_words.startswith(kind_words) else f"{kind_words} {figure_words}"
    if split:
        words += f", {split}"
    return f"{words} ({'points' if is_points(kind, figure) else '%'})"


# --- reading ------------------------------------------------------------------------------------------------


def _schema() -> dict:
    text = resources.files("vlmgrid").joinpath("schemas/reported.schema.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _number(text: str) -> float | str:
    """The cell as a finite number; the text itself when it is none (the schema then refuses it)."""
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def _row_object(raw: Mapping[str, str]) -> dict[str, Any]:
    """The row as the schema reads it: empty cells left out, `value` a number."""
    obj: dict[str, Any] = {key: text.strip() for key, text in raw.items() if text.strip()}
    if "value" in obj:
        obj["value"] = _number(obj["value"])
    return obj


def _refusal(path: Path, row: int, error) -> VlmgridError:
    if error.validator == "required":
        column = error.message.split("'")[1]
        problem = "is empty"
    else:
        column = str(error.absolute_path[0]) if error.absolute_path else "?"
        problem = f"{error.instance!r} " + {
            "enum": "is not one of the allowed names",
            "type": "is not a number",
            "pattern": "is not of the right form",
            "minimum": f"is below {error.validator_value}",
            "maximum": f"is above {error.validator_value}, the largest value this figure can take",
            "not": "is given where it has no meaning",
        }.get(error.validator, f"is refused ({error.message})")
    return VlmgridError(
        f"{path} row {row}, column {column}: {problem}; give {_COLUMN_HINTS.get(column, 'a value')}"
    )


def read_reported_file(path: Path) -> list[ReportedRow]:
    """The rows of one published-numbers CSV, each checked against the schema; VlmgridError naming the file,
    row (1 = the first row under the header) and column of the first bad cell."""
    import jsonschema
    import pandas as pd

    path = Path(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise VlmgridError(
            f"{path} is not a readable CSV file ({exc.__class__.__name__}); save it as UTF-8 CSV "
            f"with the header {','.join(COLUMNS)}"
        ) from None
    missing = [column for column in COLUMNS if column not in frame.columns]
    extra = [str(column) for column in frame.columns if column not in COLUMNS]
    if missing or extra:
        problem = (
            f"lacks the column {missing[0]!r}" if missing else f"has a column {extra[0]!r} it should not"
        )
        raise VlmgridError(f"{path} {problem}; its header must be {','.join(COLUMNS)}")
    validator = jsonschema.Draft202012Validator(_schema())
    rows = []
    for index, raw in enumerate(frame.to_dict(orient="records"), start=1):
        obj = _row_object(raw)
        error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
        if error is not None:
            raise _refusal(path, index, error)
        method = Method(obj["answering"], obj.get("decoding"), obj.get("prompt_suffix"))
        rows.append(
            ReportedRow(
                obj["paper"],
                obj["table"],
                obj["model"],
                obj["benchmark"],
                obj.get("split"),
                obj["figure"],
                float(obj["value"]),
                obj["source"],
                obj.get("note"),
                path,
                index,
                method,
                obj["method_source"],
            )
        )
    return rows


def load_reported(folder: str | Path) -> tuple[ReportedRow, ...]:
    """Every row of the folder's `*.csv` files (file name order); VlmgridError for a folder that does not
    exist, a bad row, or one number given twice (same paper, model, benchmark, split and figure)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise VlmgridError(
            f"the folder of published numbers {folder} does not exist; create it (it may be empty) "
            f"or point the config's report.reported at it"
        )
    rows: list[ReportedRow] = []
    seen: dict[tuple, ReportedRow] = {}
    for path in sorted(folder.glob("*.csv")):
        for row in read_reported_file(path):
            key = (row.paper, row.model, row.benchmark, row.split, row.figure)
            if key in seen:
                first = seen[key]
                raise VlmgridError(
                    f"{row.path} row {row.row} gives the same number as {first.path} row {first.row} "
                    f"({row.model}, {row.benchmark} {row.figure} in arXiv {row.paper}); keep one"
                )
            seen[key] = row
            rows.append(row)
    return tuple(rows)


# --- matching -----------------------------------------------------------------------------------------------


def match_reported(
    published: Published, models: Sequence[str], benchmarks: Sequence[str], kinds: Mapping[str, str]
) -> list[tuple[ReportedRow, str, str]]:
    """(row, grid model, grid benchmark) for every published row a grid cell reproduces, in grid order
    (models, then benchmarks, then the rows' order)."""
    matches = []
    for model in models:
        name = published.reported_as.get(model)
        if name is None:
            continue
        for benchmark in benchmarks:
            for row in published.rows:
                if row.model != name or row.benchmark != kinds.get(benchmark):
                    continue
                if row.split is not None and row.split != published.splits.get(benchmark):
                    continue
                matches.append((row, model, benchmark))
    return matches


def _status(grid: Grid, model: str, benchmark: str) -> str | None:
    status = grid.status(model, benchmark)
    if status is None and grid.cell(model, benchmark) is None:
        return "not in the grid"
    return status


def compare(grid: Grid, published: Published) -> list[Comparison]:
    """Each matched published number beside its grid cell's figure (see `Comparison`)."""
    comparisons = []
    for row, model, benchmark in match_reported(published, grid.models, grid.benchmarks, grid.kinds):
        status = _status(grid, model, benchmark)
        reproduced, method = None, None
        if status is None:
            cell = grid.cell(model, benchmark)
            # A score file may list only its headline (older files have no `metrics`).
            estimate = cell.metrics.get(row.figure, cell.estimate if row.figure == cell.metric else None)
            if estimate is None or estimate.value is None:
                status = "not in the score file"
            else:
                reproduced = grid.marked(model, benchmark, estimate)
                method = grid_method(cell.strategy, cell.generation, cell.backend)
        comparisons.append(Comparison(row, model, benchmark, reproduced, status, method))
    return comparisons
