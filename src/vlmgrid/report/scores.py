"""Read and validate score JSON files (docs/formats.md) into the grid the report draws from."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from vlmgrid.errors import VlmgridError

# Display names for headline metrics; an unknown metric is shown as it is spelled in the score file.
METRIC_LABELS = {
    "f1": "F1",
    "accuracy": "Acc.",
    "acc": "Acc.",
    "top1": "Top-1",
    "top5": "Top-5",
    "top1_accuracy": "Top-1",
    "top5_accuracy": "Top-5",
    "precision": "Precision",
    "recall": "Recall",
    "exact_match": "EM",
    "vqa_accuracy": "VQA acc.",
    "scaled": "scaled",
    "circular_accuracy": "circular acc.",
    "cvbench": "CV-Bench",
    "pair_accuracy": "pair acc.",
    "acc_at_50": "Acc@50",
}

# What a headline that is not a plain accuracy means, for the table's footnote.
METRIC_NOTES = {
    "f1": "F1: POPE's F1 with yes as positive, mean over its splits",
    "scaled": "scaled: MME's perception + cognition points / 2800 x 100",
    "circular_accuracy": "circular acc.: MMBench, a question counts only when every row the file holds for it (the original and its rotated copies) is right",
    "cvbench": "CV-Bench: ((ADE20K + COCO) / 2 + Omni3D) / 2 of the per-source accuracies",
    "pair_accuracy": "pair acc.: MMVP, a pair counts only when both its questions are right",
    "vqa_accuracy": "VQA acc.: min(1, matching human answers / 3), averaged over the leave-one-out subsets",
    "acc_at_50": "Acc@50: DANCE, per query with n positives among 50 candidates the share of them ranked within "
                 "the top n, mean of the two directions",
}


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


# How a model answered, in words: the score file's `strategy` names the model capability that was used.
STRATEGY_LABELS = {
    "score_options": "log-likelihood",
    "generate": "generation + parser",
    "embed": "embedding similarity",
}


def strategy_label(strategy: str | None) -> str | None:
    """The strategy in words; a composite one ("open-world: generate; closed-world: score_options") word by
    word; an unknown capability as it is spelled."""
    if strategy is None:
        return None
    return re.sub(r"[a-z_]+", lambda m: STRATEGY_LABELS.get(m.group(0), m.group(0)), strategy)


# A reference baseline ranks the options without reading them; its `model_id` says how.
BASELINE_LABELS = {
    "baseline:random": "random guess (baseline)",
    "baseline:first": "first option (baseline)",
    "baseline:majority": "majority answer (baseline)",
}


def answered_label(strategy: str | None, backend: str | None = None, model_id: str | None = None) -> str | None:
    """How the cell's answers were obtained, in words: a baseline says which guess it is (its strategy is
    `score_options` only because it ranks options), any other model its strategy in words."""
    if backend == "baseline":
        return BASELINE_LABELS.get(model_id or "", "baseline")
    return strategy_label(strategy)


def decoding_label(strategy: str | None, generation: Mapping[str, Any]) -> str | None:
    """How generated answers were decoded ("greedy", "sampled: kaleidoscope preset, temperature 0.7, top-p
    0.9"); None when the model generated nothing (log-likelihood and embeddings do not sample)."""
    if strategy is None or "generate" not in strategy:
        return None
    if not generation.get("do_sample"):
        return "greedy"
    parts = [f"{generation['preset']} preset"] if generation.get("preset") else []
    parts += [f"{label} {generation[key]}" for key, label in (("temperature", "temperature"), ("top_p", "top-p"))
              if generation.get(key) is not None]
    return "sampled" + (": " + ", ".join(parts) if parts else "")


@dataclass(frozen=True)
class Estimate:
    """A value with an optional 95% interval, all in percent."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    # The format error rate of the cell(s) the value is built on, when it exceeds the report's threshold: the
    # tables mark the value (a dagger and a footnote), the figures hatch its bar. None: nothing to mark.
    flag: float | None = None


@dataclass(frozen=True)
class Group:
    """One group of a breakdown column (e.g. POPE split "random")."""

    name: str
    metric: str
    estimate: Estimate
    n: int | None
    n_valid: int | None
    format_error_rate: float | None


@dataclass(frozen=True)
class ScoreCell:
    """The parts of one score file the report uses."""

    path: Path
    model: str
    benchmark: str
    metric: str
    estimate: Estimate
    draws: tuple[float, ...]
    samples: int
    n: int | None
    n_valid: int | None
    format_error_rate: float | None
    breakdown: dict[str, list[Group]] = field(default_factory=dict)
    # Per prompt variant, when the protocol ran several (the headline is then their mean).
    variants: dict[str, Estimate] = field(default_factory=dict)
    # Every number the metric reports (headline included), by name.
    metrics: dict[str, Estimate] = field(default_factory=dict)
    # How the model answered (a capability name, or "open-world: generate; closed-world: score_options").
    strategy: str | None = None
    # The decoding settings it answered with ({} when greedy or not recorded).
    generation: dict[str, Any] = field(default_factory=dict)
    # The model's backend and the id it recorded (None in score files written before they were recorded).
    backend: str | None = None
    model_id: str | None = None


@dataclass(frozen=True)
class NotApplicable:
    """The score file of a cell whose model cannot run the benchmark: a reason, no numbers."""

    path: Path
    model: str
    benchmark: str
    reason: str
    metric: str | None


@dataclass(frozen=True)
class Hidden:
    """The score file of a cell whose benchmark hides its labels: no numbers, the submission files written."""

    path: Path
    model: str
    benchmark: str
    metric: str | None
    n: int | None
    submission: dict[str, str]
    strategy: str | None = None
    generation: dict[str, Any] = field(default_factory=dict)
    backend: str | None = None
    model_id: str | None = None


# A cell whose format error rate exceeds this many percent is marked in every table and figure (the config's
# `report.flag_error_rate`).
FLAG_ERROR_RATE = 10.0


def is_failed(cell: ScoreCell) -> bool:
    """Every prediction row is an error or unparsable: the cell has no number (its value only counts failures)."""
    return cell.format_error_rate is not None and cell.format_error_rate >= 100.0


@dataclass(frozen=True)
class Grid:
    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    cells: dict[tuple[str, str], ScoreCell]
    not_applicable: dict[tuple[str, str], NotApplicable] = field(default_factory=dict)
    hidden: dict[tuple[str, str], Hidden] = field(default_factory=dict)
    # {benchmark: kind}; empty when the caller does not say (then no paper tables are written)
    kinds: dict[str, str] = field(default_factory=dict)
    # Cells whose every prediction row is an error or unparsable (format_error_rate 100): no number.
    failed: dict[tuple[str, str], ScoreCell] = field(default_factory=dict)
    # Cells whose score file does not exist, read with allow_missing: {cell: the path looked for}.
    missing: dict[tuple[str, str], Path] = field(default_factory=dict)
    # Percent of format errors above which a cell's numbers are marked.
    flag_error_rate: float = FLAG_ERROR_RATE

    def cell(self, model: str, benchmark: str) -> ScoreCell | None:
        """The scored cell; None when it is not in the grid, not applicable, hidden, failed or missing."""
        return self.cells.get((model, benchmark))

    def is_failed(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.failed

    def is_missing(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.missing

    def model_has_failed(self, model: str) -> bool:
        return any(self.is_failed(model, benchmark) for benchmark in self.benchmarks)

    def model_has_missing(self, model: str) -> bool:
        return any(self.is_missing(model, benchmark) for benchmark in self.benchmarks)

    def flag(self, model: str, benchmark: str) -> float | None:
        """The cell's format error rate when it exceeds the threshold (a failed cell's too); None otherwise."""
        cell = self.cells.get((model, benchmark)) or self.failed.get((model, benchmark))
        if cell is None or cell.format_error_rate is None:
            return None
        return cell.format_error_rate if cell.format_error_rate > self.flag_error_rate else None

    def flagged(self) -> list[tuple[str, str, float]]:
        """(model, benchmark, format error rate) of every marked cell, failed ones included, in grid order."""
        return [(model, benchmark, rate) for model in self.models for benchmark in self.benchmarks
                if (rate := self.flag(model, benchmark)) is not None]

    def model_flag(self, model: str) -> float | None:
        """The highest rate among the model's marked cells (its average is built on them); None when none is."""
        rates = [rate for benchmark in self.benchmarks if (rate := self.flag(model, benchmark)) is not None]
        return max(rates) if rates else None

    def is_not_applicable(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.not_applicable

    def model_has_not_applicable(self, model: str) -> bool:
        return any(self.is_not_applicable(model, benchmark) for benchmark in self.benchmarks)

    def is_hidden(self, model: str, benchmark: str) -> bool:
        return (model, benchmark) in self.hidden

    def model_has_hidden(self, model: str) -> bool:
        return any(self.is_hidden(model, benchmark) for benchmark in self.benchmarks)

    def benchmarks_of_kind(self, kind: str) -> list[str]:
        """The grid's benchmarks of this kind, in grid order."""
        return [benchmark for benchmark in self.benchmarks if self.kinds.get(benchmark) == kind]

    def metric(self, benchmark: str) -> str | None:
        for model in self.models:
            cell = self.cell(model, benchmark)
            if cell is not None:
                return cell.metric
        for model in self.models:
            other = (self.failed.get((model, benchmark)) or self.not_applicable.get((model, benchmark))
                     or self.hidden.get((model, benchmark)))
            if other is not None and other.metric:
                return other.metric
        return None

    def average(self, model: str) -> Estimate | None:
        """Mean headline over the grid's benchmarks; CI from the elementwise mean of the bootstrap draws.

        None when the model lacks a benchmark of the grid (missing or not applicable) or its draws cannot
        be averaged (different lengths, or none).
        """
        cells = [self.cell(model, bench) for bench in self.benchmarks]
        if not cells or any(cell is None for cell in cells):
            return None
        lengths = {len(cell.draws) for cell in cells}
        if len(lengths) != 1 or 0 in lengths:
            return None
        value = float(np.mean([cell.estimate.value for cell in cells]))
        draws = np.mean(np.array([cell.draws for cell in cells], dtype=float), axis=0)
        low, high = np.percentile(draws, [2.5, 97.5])
        return Estimate(value, float(low), float(high))

    def bootstrap_samples(self) -> list[int]:
        return sorted({cell.samples for cell in self.cells.values()})


def cell_list(cells: Sequence[tuple[str, str]]) -> str:
    """"m on b, m2 on b2": the cells a footnote is about."""
    return ", ".join(f"{model} on {benchmark}" for model, benchmark in cells)


class _Invalid(Exception):
    """Internal: why a score file is invalid (becomes the parenthesis of the VlmgridError)."""


def _number(obj: Any, where: str, *, allow_none: bool = False) -> float | None:
    if obj is None and allow_none:
        return None
    if isinstance(obj, bool) or not isinstance(obj, (int, float)) or not math.isfinite(obj):
        raise _Invalid(f"{where} is {obj!r}, not a finite number")
    return float(obj)


def _count(obj: Any, where: str) -> int | None:
    if obj is None:
        return None
    if isinstance(obj, bool) or not isinstance(obj, int) or obj < 0:
        raise _Invalid(f"{where} is {obj!r}, not a count")
    return obj


def _ci(obj: Any, where: str, *, allow_none: bool = False) -> tuple[float | None, float | None]:
    if obj is None and allow_none:
        return None, None
    if not isinstance(obj, (list, tuple)) or len(obj) != 2:
        raise _Invalid(f"{where} is {obj!r}, not a [low, high] pair")
    return _number(obj[0], f"{where}[0]"), _number(obj[1], f"{where}[1]")


def _group(name: str, entry: Any, headline: str, where: str) -> Group:
    if not isinstance(entry, Mapping):
        raise _Invalid(f"{where} is not an object")
    metrics = entry.get("metrics")
    if not isinstance(metrics, Mapping) or not metrics:
        raise _Invalid(f"{where}.metrics is missing or empty")
    metric = headline if headline in metrics else next(iter(metrics))
    result = metrics[metric]
    if not isinstance(result, Mapping):
        raise _Invalid(f"{where}.metrics.{metric} is not an object")
    value = _number(result.get("value"), f"{where}.metrics.{metric}.value", allow_none=True)
    low, high = _ci(result.get("ci95"), f"{where}.metrics.{metric}.ci95", allow_none=True)
    fer = entry.get("format_error_rate")
    return Group(
        name=str(name),
        metric=str(metric),
        estimate=Estimate(value, low, high),
        n=_count(entry.get("n"), f"{where}.n"),
        n_valid=_count(entry.get("n_valid"), f"{where}.n_valid"),
        format_error_rate=_number(fer, f"{where}.format_error_rate", allow_none=True),
    )


def _variants(raw: Any) -> dict[str, Estimate]:
    """Each variant's headline value and CI."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _Invalid("variants is not an object")
    variants = {}
    for name, entry in raw.items():
        where = f"variants.{name}"
        if not isinstance(entry, Mapping):
            raise _Invalid(f"{where} is not an object")
        value = _number(entry.get("value"), f"{where}.value")
        low, high = _ci(entry.get("ci95"), f"{where}.ci95", allow_none=True)
        variants[str(name)] = Estimate(value, low, high)
    return variants


def _parse_not_applicable(data: Mapping, model: str, benchmark: str, path: Path) -> NotApplicable:
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason:
        raise _Invalid("applicable is false but there is no reason")
    metric = data.get("metric")
    return NotApplicable(path, model, benchmark, reason, metric if isinstance(metric, str) and metric else None)


def _strategy(data: Mapping) -> str | None:
    strategy = data.get("strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise _Invalid(f"strategy is {strategy!r}, not a name")
    return strategy


def _generation(data: Mapping) -> dict[str, Any]:
    generation = data.get("generation") or {}
    if not isinstance(generation, Mapping):
        raise _Invalid("generation is not an object")
    return dict(generation)


def _name(data: Mapping, key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _Invalid(f"{key} is {value!r}, not a name")
    return value


def _metrics(raw: Any) -> dict[str, Estimate]:
    """Each reported number's value and CI."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _Invalid("metrics is not an object")
    metrics = {}
    for name, entry in raw.items():
        where = f"metrics.{name}"
        if not isinstance(entry, Mapping):
            raise _Invalid(f"{where} is not an object")
        value = _number(entry.get("value"), f"{where}.value", allow_none=True)
        low, high = _ci(entry.get("ci95"), f"{where}.ci95", allow_none=True)
        metrics[str(name)] = Estimate(value, low, high)
    return metrics


def _parse_hidden(data: Mapping, model: str, benchmark: str, path: Path) -> Hidden:
    submission = data.get("submission")
    if not isinstance(submission, Mapping) or not submission or not all(
            isinstance(name, str) and name for name in submission.values()):
        raise _Invalid("labels_hidden is true but submission does not name the submission files")
    metric = data.get("metric")
    return Hidden(path, model, benchmark, metric if isinstance(metric, str) and metric else None,
                  _count(data.get("n"), "n"), {str(k): v for k, v in submission.items()}, _strategy(data),
                  _generation(data), _name(data, "backend"), _name(data, "model_id"))


def _parse(data: Any, model: str, benchmark: str, path: Path) -> ScoreCell | NotApplicable | Hidden:
    if not isinstance(data, Mapping):
        raise _Invalid("the top level is not a JSON object")
    for key in ("model", "benchmark"):
        if key not in data:
            raise _Invalid(f"missing key {key!r}")
    if data["model"] != model:
        raise _Invalid(f"its model is {data['model']!r}, expected {model!r}")
    if data["benchmark"] != benchmark:
        raise _Invalid(f"its benchmark is {data['benchmark']!r}, expected {benchmark!r}")
    applicable = data.get("applicable", True)
    if not isinstance(applicable, bool):
        raise _Invalid(f"applicable is {applicable!r}, not true or false")
    if not applicable:
        return _parse_not_applicable(data, model, benchmark, path)
    hidden = data.get("labels_hidden", False)
    if not isinstance(hidden, bool):
        raise _Invalid(f"labels_hidden is {hidden!r}, not true or false")
    if hidden:
        return _parse_hidden(data, model, benchmark, path)
    missing = [key for key in ("metric", "value", "ci95", "bootstrap") if key not in data]
    if missing:
        raise _Invalid("missing key " + ", ".join(repr(key) for key in missing))
    metric = data["metric"]
    if not isinstance(metric, str) or not metric:
        raise _Invalid(f"metric is {metric!r}, not a name")
    value = _number(data["value"], "value")
    low, high = _ci(data["ci95"], "ci95")
    bootstrap = data["bootstrap"]
    if not isinstance(bootstrap, Mapping) or "draws" not in bootstrap:
        raise _Invalid("missing key 'bootstrap.draws'")
    raw_draws = bootstrap["draws"]
    if not isinstance(raw_draws, list):
        raise _Invalid("bootstrap.draws is not a list")
    draws = tuple(_number(draw, f"bootstrap.draws[{i}]") for i, draw in enumerate(raw_draws))
    samples = bootstrap.get("samples", len(draws))
    samples = _count(samples, "bootstrap.samples")
    breakdown: dict[str, list[Group]] = {}
    raw_breakdown = data.get("breakdown") or {}
    if not isinstance(raw_breakdown, Mapping):
        raise _Invalid("breakdown is not an object")
    for column, groups in raw_breakdown.items():
        if not isinstance(groups, Mapping):
            raise _Invalid(f"breakdown.{column} is not an object")
        breakdown[str(column)] = [
            _group(name, entry, metric, f"breakdown.{column}.{name}") for name, entry in groups.items()
        ]
    return ScoreCell(
        path=path,
        model=model,
        benchmark=benchmark,
        metric=metric,
        estimate=Estimate(value, low, high),
        draws=draws,
        samples=samples if samples is not None else len(draws),
        n=_count(data.get("n"), "n"),
        n_valid=_count(data.get("n_valid"), "n_valid"),
        format_error_rate=_number(data.get("format_error_rate"), "format_error_rate", allow_none=True),
        breakdown=breakdown,
        variants=_variants(data.get("variants")),
        metrics=_metrics(data.get("metrics")),
        strategy=_strategy(data),
        generation=_generation(data),
        backend=_name(data, "backend"),
        model_id=_name(data, "model_id"),
    )


def _invalid(path: Path, model: str, benchmark: str, reason: str) -> VlmgridError:
    return VlmgridError(
        f"{path} is not a valid score file ({reason}); rerun `vlmgrid score {model} {benchmark}` to rebuild it"
    )


def read_score(path: str | Path, model: str, benchmark: str) -> ScoreCell | NotApplicable | Hidden:
    """Read one score file and check it is the score of (model, benchmark); VlmgridError otherwise.

    A file with `"applicable": false` reads as NotApplicable, one with `"labels_hidden": true` as Hidden.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(path, model, benchmark, f"cannot be read: {exc.__class__.__name__}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _invalid(path, model, benchmark, f"not JSON: {exc}") from exc
    try:
        return _parse(data, model, benchmark, path)
    except _Invalid as exc:
        raise _invalid(path, model, benchmark, str(exc)) from None


def load_grid(
    score_files: Mapping[tuple[str, str], Path],
    models: Sequence[str],
    benchmarks: Sequence[str],
    kinds: Mapping[str, str] | None = None,
    *,
    flag_error_rate: float = FLAG_ERROR_RATE,
    allow_missing: bool = False,
) -> Grid:
    """Read every score file of the grid (keys outside models x benchmarks are ignored); `kinds` gives each
    benchmark's kind ({benchmark: kind}).

    A cell whose format error rate exceeds `flag_error_rate` (percent) is marked; one at 100% is failed (no
    number). With `allow_missing`, a score file that does not exist makes its cell missing instead of an error.
    """
    if isinstance(flag_error_rate, bool) or not isinstance(flag_error_rate, (int, float)) \
            or not 0 <= flag_error_rate <= 100:
        raise VlmgridError(f"the report's flag_error_rate is {flag_error_rate!r}; give a percent from 0 to 100")
    models = tuple(models)
    benchmarks = tuple(benchmarks)
    for kind, names in (("model", models), ("benchmark", benchmarks)):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise VlmgridError(f"the report lists the {kind} {duplicates[0]!r} twice; list each {kind} once")
    cells: dict[tuple[str, str], ScoreCell] = {}
    not_applicable: dict[tuple[str, str], NotApplicable] = {}
    hidden: dict[tuple[str, str], Hidden] = {}
    missing: dict[tuple[str, str], Path] = {}
    for model in models:
        for benchmark in benchmarks:
            path = score_files.get((model, benchmark))
            if path is None:
                continue
            if allow_missing and not Path(path).exists():
                missing[(model, benchmark)] = Path(path)
                continue
            read = read_score(path, model, benchmark)
            if isinstance(read, NotApplicable):
                not_applicable[(model, benchmark)] = read
            elif isinstance(read, Hidden):
                hidden[(model, benchmark)] = read
            else:
                cells[(model, benchmark)] = read
    if not cells and not not_applicable and not hidden and not missing:
        raise VlmgridError("the report has no score files to read; run `vlmgrid score <model> <bench>` first")
    for benchmark in benchmarks:
        first: ScoreCell | None = None
        for model in models:
            cell = cells.get((model, benchmark))
            if cell is None:
                continue
            if first is None:
                first = cell
            elif cell.metric != first.metric:
                raise VlmgridError(
                    f"{cell.path} scores {benchmark} by {cell.metric!r} but {first.path} by {first.metric!r}; "
                    f"rerun `vlmgrid score {model} {benchmark}` so both use the benchmark's metric"
                )
    failed = {key: cell for key, cell in cells.items() if is_failed(cell)}
    cells = {key: cell for key, cell in cells.items() if key not in failed}
    return Grid(models, benchmarks, cells, not_applicable, hidden, dict(kinds or {}), failed, missing,
                float(flag_error_rate))
