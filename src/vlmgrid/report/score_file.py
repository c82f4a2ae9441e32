"""One score file (docs/formats.md), read and checked: a `ScoreCell` with its `Estimate`s, breakdown `Group`s
and prompt `Variant`s, or a `NotApplicable` or `Hidden` cell without numbers (`read_score`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlmgrid.dvc_outputs import or_pull
from vlmgrid.errors import VlmgridError

# The headline metric of every metric the scorer has (`vlmgrid.metrics`), all in percent (0-100): a score file
# naming one of them with a headline value, CI bound, bootstrap draw or variant value outside 0-100 is
# refused. No other number is checked (MME's subtask scores and totals are points, up to 200 and 2800).
PERCENT_HEADLINES = frozenset(
    {
        "top1",
        "accuracy",
        "f1",
        "scaled",
        "circular_accuracy",
        "cvbench",
        "pair_accuracy",
        "vqa_accuracy",
        "acc_at_50",
    }
)


@dataclass(frozen=True)
class Estimate:
    """A value with an optional 95% interval, all in percent."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    # The format error rate of the cell(s) the value is built on, when it exceeds the report's threshold: the
    # tables mark the value (a dagger and a footnote), the figures hatch its bar. None: nothing to mark.
    flag: float | None = None
    # (answered, total) items when the value is built on a cell that answers a subset of its benchmark (a
    # partial import), or an average that leaves such cells out: marked like `flag` (a double dagger and a
    # footnote). None: nothing to mark.
    coverage: tuple[int, int] | None = None
    # The value is built on a cell whose answers changed when items were answered one at a time instead of in
    # batches (the score file's `invariance`): marked (a not-equal sign and a footnote). False: nothing to
    # mark.
    batch: bool = False
    # The value is built on a cell scored on a copy of its benchmark that holds fewer items than the published
    # benchmark (the score file's `partial_copy`): marked (a pilcrow and a footnote with the count). False:
    # nothing to mark.
    partial_copy: bool = False


@dataclass(frozen=True)
class PartialCopy:
    """The copy of the benchmark a cell was scored on, where it holds fewer items than the published benchmark
    (score-JSON `partial_copy`): its numbers are over those items alone."""

    items: int
    published: int
    # generated stand-ins in the benchmark's format (a fixture source), none of the benchmark's own items
    fixture: bool


@dataclass(frozen=True)
class ToolFigure:
    """The headline as the tool that published the answers reads them (score-JSON `tool_reading`): its name,
    the value, how many answers its judge model read."""

    tool: str
    value: float
    n_read_by_judge: int


@dataclass(frozen=True)
class Group:
    """One group of a breakdown column (e.g. POPE split "random"); `n_valid` and `format_error_rate` are the
    group's own (None in score files written before they were recorded)."""

    name: str
    metric: str
    estimate: Estimate
    n: int | None
    n_valid: int | None
    format_error_rate: float | None


@dataclass(frozen=True)
class Variant:
    """One prompt variant of a cell: its headline alone, the items with a readable answer in it (`n_valid`)
    and the percent of its rows that are format errors (both None in score files written before they were
    recorded)."""

    name: str
    estimate: Estimate
    n_valid: int | None = None
    format_error_rate: float | None = None


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
    variants: dict[str, Variant] = field(default_factory=dict)
    # Every number the metric reports (headline included), by name.
    metrics: dict[str, Estimate] = field(default_factory=dict)
    # How the model answered (a capability name, or "open-world: generate; closed-world: score_options").
    strategy: str | None = None
    # The decoding settings it answered with ({} when greedy or not recorded).
    generation: dict[str, Any] = field(default_factory=dict)
    # The model's backend and the id it recorded (None in score files written before they were recorded).
    backend: str | None = None
    model_id: str | None = None
    # (answered, total) when the predictions answer a subset by construction (score-JSON `coverage`); None
    # when the cell answers every item.
    coverage: tuple[int, int] | None = None
    # why the others are left out, where its strategy cannot answer them (score-JSON `coverage.reason`); None
    # for an import that answers a subset by construction
    coverage_reason: str | None = None
    # The batch check's result (score-JSON `invariance`: checked, same, differing ids, ...); None when the
    # predictions file records none (the check was off, or the file was imported).
    invariance: dict[str, Any] | None = None
    # The copy it was scored on, where it holds fewer items than the published benchmark; None when it holds
    # them all (or the benchmark has no published count).
    partial_copy: PartialCopy | None = None
    # The publishing tool's own reading of imported answers, beside the headline (score-JSON `tool_reading`);
    # None when the predictions carry none.
    tool_reading: ToolFigure | None = None


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
    """A [low, high] pair, low not above high (a value need not lie inside it: a percentile bootstrap can
    miss its point estimate)."""
    if obj is None and allow_none:
        return None, None
    if not isinstance(obj, (list, tuple)) or len(obj) != 2:
        raise _Invalid(f"{where} is {obj!r}, not a [low, high] pair")
    low, high = _number(obj[0], f"{where}[0]"), _number(obj[1], f"{where}[1]")
    if low > high:
        raise _Invalid(f"{where} is {list(obj)!r}, its low above its high")
    return low, high


def _rate(obj: Any, where: str) -> float | None:
    """A format error rate: a percent from 0 to 100, or None where the score has none."""
    rate = _number(obj, where, allow_none=True)
    if rate is not None and not 0.0 <= rate <= 100.0:
        raise _Invalid(f"{where} is {obj!r}, not a percent from 0 to 100")
    return rate


def _valid_count(obj: Any, where: str, n: int | None, n_where: str) -> int | None:
    """`n_valid`: a count not above the items it counts among (`n`, where the score gives it)."""
    count = _count(obj, where)
    if count is not None and n is not None and count > n:
        raise _Invalid(f"{where} is {count}, above {n_where} ({n})")
    return count


def _percent(metric: str, numbers: Mapping[str, float | None]) -> None:
    """Refuse a number ({key: number}) of a percent headline metric outside 0-100 (`PERCENT_HEADLINES`)."""
    if metric not in PERCENT_HEADLINES:
        return
    for where, number in numbers.items():
        if number is not None and not 0.0 <= number <= 100.0:
            raise _Invalid(f"{where} is {number!r}, outside 0-100 for the percent metric {metric!r}")


def _estimate_percent(
    metric: str, where: str, value: float | None, low: float | None, high: float | None
) -> None:
    """`_percent` of a value (`<where>.value`) and its CI (`<where>.ci95`)."""
    _percent(metric, {f"{where}.value": value, f"{where}.ci95[0]": low, f"{where}.ci95[1]": high})


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
    n = _count(entry.get("n"), f"{where}.n")
    return Group(
        name=str(name),
        metric=str(metric),
        estimate=Estimate(value, low, high),
        n=n,
        n_valid=_valid_count(entry.get("n_valid"), f"{where}.n_valid", n, f"{where}.n"),
        format_error_rate=_rate(entry.get("format_error_rate"), f"{where}.format_error_rate"),
    )


def _variants(raw: Any, headline: str, n: int | None) -> dict[str, Variant]:
    """Each variant's headline value and CI, with its own `n_valid` and format error rate where the score
    gives them."""
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
        _estimate_percent(headline, where, value, low, high)
        variants[str(name)] = Variant(
            str(name),
            Estimate(value, low, high),
            _valid_count(entry.get("n_valid"), f"{where}.n_valid", n, "n"),
            _rate(entry.get("format_error_rate"), f"{where}.format_error_rate"),
        )
    return variants


def _parse_not_applicable(data: Mapping, model: str, benchmark: str, path: Path) -> NotApplicable:
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason:
        raise _Invalid("applicable is false but there is no reason")
    metric = data.get("metric")
    return NotApplicable(
        path, model, benchmark, reason, metric if isinstance(metric, str) and metric else None
    )


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


def _metrics(raw: Any, headline: str) -> dict[str, Estimate]:
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
        if name == headline:
            _estimate_percent(headline, where, value, low, high)
        metrics[str(name)] = Estimate(value, low, high)
    return metrics


def _coverage(raw: Any) -> tuple[int, int] | None:
    """(answered, total) of a cell that answers a subset; None when the score has no `coverage`."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _Invalid("coverage is not an object")
    answered, total = (
        _count(raw.get("answered"), "coverage.answered"),
        _count(raw.get("total"), "coverage.total"),
    )
    if answered is None or total is None or not 0 < answered <= total:
        raise _Invalid(f"coverage is {dict(raw)!r}, not {{answered, total}} with 0 < answered <= total")
    return answered, total


def _partial_copy(raw: Any) -> PartialCopy | None:
    """The copy a cell was scored on, where it holds fewer items than the published benchmark; None when the
    score has no `partial_copy`."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _Invalid("partial_copy is not an object")
    items = _count(raw.get("items"), "partial_copy.items")
    published = _count(raw.get("published_items"), "partial_copy.published_items")
    if items is None or published is None or not 0 < items < published:
        raise _Invalid(
            f"partial_copy is {dict(raw)!r}, not {{items, published_items}} with 0 < items < published_items"
        )
    return PartialCopy(items, published, raw.get("source") == "fixture")


def _tool_reading(raw: Any, headline: str) -> ToolFigure | None:
    """The tool's own figure (the headline metric on the tool's reading); None when the score has no
    `tool_reading`."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("tool"), str) or not raw["tool"]:
        raise _Invalid("tool_reading is not an object naming its tool")
    value = _number(raw.get("value"), "tool_reading.value")
    _percent(headline, {"tool_reading.value": value})
    judged = _count(raw.get("n_read_by_judge"), "tool_reading.n_read_by_judge")
    return ToolFigure(raw["tool"], value, judged or 0)


def _coverage_reason(raw: Any) -> str | None:
    """Why a cell's strategy leaves out the items it does not answer (`coverage.reason`); None without one."""
    reason = raw.get("reason") if isinstance(raw, Mapping) else None
    if reason is not None and not (isinstance(reason, str) and reason.strip()):
        raise _Invalid(f"coverage.reason is {reason!r}, not a sentence")
    return reason


def _parse_hidden(data: Mapping, model: str, benchmark: str, path: Path) -> Hidden:
    submission = data.get("submission")
    if (
        not isinstance(submission, Mapping)
        or not submission
        or not all(isinstance(name, str) and name for name in submission.values())
    ):
        raise _Invalid("labels_hidden is true but submission does not name the submission files")
    metric = data.get("metric")
    return Hidden(
        path,
        model,
        benchmark,
        metric if isinstance(metric, str) and metric else None,
        _count(data.get("n"), "n"),
        {str(k): v for k, v in submission.items()},
        _strategy(data),
        _generation(data),
        _name(data, "backend"),
        _name(data, "model_id"),
    )


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
    _percent(metric, {"value": value, "ci95[0]": low, "ci95[1]": high})
    n = _count(data.get("n"), "n")
    n_valid = _valid_count(data.get("n_valid"), "n_valid", n, "n")
    _count(data.get("n_errors"), "n_errors")
    bootstrap = data["bootstrap"]
    if not isinstance(bootstrap, Mapping) or "draws" not in bootstrap:
        raise _Invalid("missing key 'bootstrap.draws'")
    raw_draws = bootstrap["draws"]
    if not isinstance(raw_draws, list):
        raise _Invalid("bootstrap.draws is not a list")
    draws = tuple(_number(draw, f"bootstrap.draws[{i}]") for i, draw in enumerate(raw_draws))
    # the first draw outside 0-100 named, without a key made for each of thousands of draws
    outside = next((i for i, draw in enumerate(draws) if not 0.0 <= draw <= 100.0), None)
    if outside is not None:
        _percent(metric, {f"bootstrap.draws[{outside}]": draws[outside]})
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
        n=n,
        n_valid=n_valid,
        format_error_rate=_rate(data.get("format_error_rate"), "format_error_rate"),
        breakdown=breakdown,
        variants=_variants(data.get("variants"), metric, n),
        metrics=_metrics(data.get("metrics"), metric),
        strategy=_strategy(data),
        generation=_generation(data),
        backend=_name(data, "backend"),
        model_id=_name(data, "model_id"),
        coverage=_coverage(data.get("coverage")),
        coverage_reason=_coverage_reason(data.get("coverage")),
        invariance=_invariance(data.get("invariance")),
        partial_copy=_partial_copy(data.get("partial_copy")),
        tool_reading=_tool_reading(data.get("tool_reading"), metric),
    )


def _invariance(raw: Any) -> dict[str, Any] | None:
    """The batch check's result; None when the score has none."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _Invalid("invariance is not an object")
    checked, same = (
        _count(raw.get("checked"), "invariance.checked"),
        _count(raw.get("same"), "invariance.same"),
    )
    differing = raw.get("differing")
    if (
        checked is None
        or same is None
        or not isinstance(differing, list)
        or same > checked
        or len(differing) != checked - same
    ):
        raise _Invalid(
            f"invariance is {dict(raw)!r}, not {{checked, same, differing: [ids]}} with same + "
            f"len(differing) == checked"
        )
    return {**raw, "differing": [str(item) for item in differing]}


def _invalid(path: Path, model: str, benchmark: str, reason: str, missing: bool = False) -> VlmgridError:
    """`missing`: the file is not there, which `dvc pull` fetches where DVC tracks it."""
    rebuild = f"rerun `vlmgrid score {model} {benchmark}` to rebuild it"
    fix = or_pull(path, rebuild) if missing else rebuild
    return VlmgridError(f"{path} is not a valid score file ({reason}); {fix}")


def recorded_predictions_sha(path: Path | None) -> str | None:
    """The predictions hash a score file records (None when there is no such file or record)."""
    if path is None or not Path(path).is_file():
        return None
    try:
        inputs = json.loads(Path(path).read_text(encoding="utf-8")).get("inputs") or {}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, RecursionError):
        return None  # the report's own reading of the score file says what is wrong with it
    sha = inputs.get("predictions_sha256") if isinstance(inputs, Mapping) else None
    return sha if isinstance(sha, str) else None


def read_score(path: str | Path, model: str, benchmark: str) -> ScoreCell | NotApplicable | Hidden:
    """Read one score file and check it is the score of (model, benchmark); VlmgridError otherwise.

    A file with `"applicable": false` reads as NotApplicable, one with `"labels_hidden": true` as Hidden.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(
            path,
            model,
            benchmark,
            f"cannot be read: {exc.__class__.__name__}",
            missing=isinstance(exc, FileNotFoundError),
        ) from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _invalid(path, model, benchmark, f"not JSON: {exc}") from exc
    try:
        return _parse(data, model, benchmark, path)
    except _Invalid as exc:
        raise _invalid(path, model, benchmark, str(exc)) from None
