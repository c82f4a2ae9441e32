"""The grid's comparison files (`vlmgrid compare`, docs/formats.md), read and checked, with Holm's correction.

Holm's family is one pair of models: its p-values over the benchmarks where the pair has a comparison. It is
applied here, where every benchmark's file meets, not in the compare stage, which sees one benchmark.

A comparison file that does not exist, that was made from other predictions than the cell's score file
(its `inputs.predictions_sha256` differ), or that predates the minimum detectable difference (its pairs have
no `mdd`), gives no comparison: the tables say so and name the command that makes it again, and no cell is
marked by it.

A comparison is significant when its Holm-adjusted p is below 0.05 and its difference is at least its minimum
detectable difference (MDD): a p just under 0.05 on a difference the benchmark is too small to tell reliably
(it would be found in fewer than 80% of runs) is not marked as a win.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vlmgrid.errors import VlmgridError
from vlmgrid.report.score_file import recorded_predictions_sha

ALPHA = 0.05


def comparison_pairs(models: Sequence[str], reference_model: str | None) -> list[tuple[str, str]]:
    """The (A, B) pairs a grid compares, A - B: every other model against the reference model, else every
    pair of models in grid order."""
    if reference_model:
        return [(model, reference_model) for model in models if model != reference_model]
    return list(itertools.combinations(models, 2))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest p times (m - i + 1), made
    monotone (never below an adjusted p of a smaller p) and capped at 1."""
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, position in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[position]))
        adjusted[position] = running
    return adjusted


@dataclass(frozen=True)
class Comparison:
    """One pair of models on one benchmark: A - B with its CI and p-values, or the reason there is none."""

    model_a: str
    model_b: str
    benchmark: str
    metric: str | None
    value_a: float | None = None
    value_b: float | None = None
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    test: str | None = None
    unit: str | None = None
    permutations: int | None = None
    mcnemar_p: float | None = None
    # the minimum detectable difference (5% two-sided, 80% power) in the headline's unit, and how it was found
    mdd: float | None = None
    mdd_from: str | None = None
    reason: str | None = None
    # (answered, total): compared on the items both models answered, where a cell of the pair answers a subset
    # of the benchmark (`report.partial_cells: include`; the file's `coverage`); None when both answer every
    # item
    coverage: tuple[int, int] | None = None

    @property
    def below_mdd(self) -> bool | None:
        """The difference is smaller than the benchmark can tell (|A - B| < MDD); None where there is no
        comparison."""
        return None if self.difference is None or self.mdd is None else abs(self.difference) < self.mdd

    @property
    def significant(self) -> bool | None:
        """Holm-adjusted p below 0.05 and a difference of at least the MDD; None where there is no
        comparison."""
        return None if self.p_holm is None else self.p_holm < ALPHA and not self.below_mdd


@dataclass(frozen=True)
class Comparisons:
    reference_model: str | None
    rows: list[Comparison] = field(default_factory=list)
    # benchmark -> why it has no comparison file to read (missing, or made from other predictions)
    unavailable: dict[str, str] = field(default_factory=dict)

    def row(self, model_a: str, model_b: str, benchmark: str) -> Comparison | None:
        for row in self.rows:
            if (row.model_a, row.model_b, row.benchmark) == (model_a, model_b, benchmark):
                return row
        return None

    def any_numbers(self) -> bool:
        return any(row.difference is not None for row in self.rows)

    def versus_reference(self, model: str, benchmark: str) -> int:
        """+1 / -1 when the model is significantly better / worse than the reference model on the benchmark
        (Holm-adjusted p < 0.05 and a difference of at least the MDD), 0 otherwise (no reference, no
        comparison, or not significant)."""
        if not self.reference_model or model == self.reference_model:
            return 0
        row = self.row(model, self.reference_model, benchmark)
        if row is None or not row.significant:
            return 0
        return 1 if row.difference > 0 else -1


class _Invalid(Exception):
    """Internal: why a comparison file is invalid."""


class _Outdated(_Invalid):
    """Internal: the comparison file was written before comparisons had an MDD."""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(f"{where} is {value!r}, not a finite number")
    return float(value)


def _p(value: Any, where: str) -> float:
    p = _number(value, where)
    if not 0.0 < p <= 1.0:
        raise _Invalid(f"{where} is {p!r}, not a p-value in (0, 1]")
    return p


def _coverage(raw: Any, where: str) -> tuple[int, int] | None:
    """(answered, total) of a pair compared on a subset of the items; None when the entry has no
    `coverage`."""
    if raw is None:
        return None
    answered = raw.get("answered") if isinstance(raw, Mapping) else None
    total = raw.get("total") if isinstance(raw, Mapping) else None
    if (
        isinstance(answered, bool)
        or isinstance(total, bool)
        or not isinstance(answered, int)
        or not isinstance(total, int)
        or not 0 < answered <= total
    ):
        raise _Invalid(f"{where}.coverage is {raw!r}, not {{answered, total}} with 0 < answered <= total")
    return answered, total


def _pair(entry: Any, benchmark: str, metric: str | None, where: str) -> Comparison:
    if not isinstance(entry, Mapping):
        raise _Invalid(f"{where} is not an object")
    a, b = entry.get("model_a"), entry.get("model_b")
    if not isinstance(a, str) or not isinstance(b, str):
        raise _Invalid(f"{where} does not name model_a and model_b")
    if entry.get("comparable") is False:
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason:
            raise _Invalid(f"{where} is not comparable but gives no reason")
        return Comparison(a, b, benchmark, metric, reason=reason)
    if entry.get("comparable") is not True:
        raise _Invalid(f"{where}.comparable is {entry.get('comparable')!r}, not true or false")
    ci = entry.get("ci95")
    if not isinstance(ci, list) or len(ci) != 2:
        raise _Invalid(f"{where}.ci95 is {ci!r}, not a [low, high] pair")
    mcnemar = entry.get("mcnemar")
    if mcnemar is not None and not isinstance(mcnemar, Mapping):
        raise _Invalid(f"{where}.mcnemar is not an object")
    permutations = entry.get("permutations")
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise _Invalid(f"{where}.permutations is {permutations!r}, not a count")
    p_value = _p(entry.get("p_value"), f"{where}.p_value")
    if "mdd" not in entry:
        raise _Outdated("predates the minimum detectable difference")
    mdd = _number(entry["mdd"], f"{where}.mdd")
    if mdd < 0:
        raise _Invalid(f"{where}.mdd is {mdd!r}, not a difference of at least 0")
    return Comparison(
        a,
        b,
        benchmark,
        metric,
        value_a=_number(entry.get("value_a"), f"{where}.value_a"),
        value_b=_number(entry.get("value_b"), f"{where}.value_b"),
        difference=_number(entry.get("difference"), f"{where}.difference"),
        ci_low=_number(ci[0], f"{where}.ci95[0]"),
        ci_high=_number(ci[1], f"{where}.ci95[1]"),
        p_value=p_value,
        test=str(entry.get("test") or ""),
        unit=str(entry.get("unit") or ""),
        permutations=permutations,
        mcnemar_p=None if mcnemar is None else _p(mcnemar.get("p_value"), f"{where}.mcnemar.p_value"),
        mdd=mdd,
        mdd_from=str(entry.get("mdd_from") or ""),
        coverage=_coverage(entry.get("coverage"), where),
    )


def _read_file(
    path: Path, benchmark: str, expected: list[tuple[str, str]], reference_model: str | None
) -> tuple[list[Comparison], dict[str, str]]:
    """The file's rows in the grid's pair order, and its {model: predictions sha256}."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _Invalid(f"cannot be read as JSON: {exc.__class__.__name__}") from exc
    if not isinstance(data, Mapping):
        raise _Invalid("the top level is not a JSON object")
    if data.get("benchmark") != benchmark:
        raise _Invalid(f"its benchmark is {data.get('benchmark')!r}, expected {benchmark!r}")
    if data.get("reference_model") != reference_model:
        raise _Invalid(
            f"it compares against the reference model {data.get('reference_model')!r}, but the config "
            f"names {reference_model!r}"
        )
    pairs = data.get("pairs")
    if not isinstance(pairs, list):
        raise _Invalid("pairs is not a list")
    metric = data.get("metric") if isinstance(data.get("metric"), str) else None
    rows = [_pair(entry, benchmark, metric, f"pairs[{i}]") for i, entry in enumerate(pairs)]
    by_pair = {(row.model_a, row.model_b): row for row in rows}
    if sorted(by_pair) != sorted(expected) or len(by_pair) != len(rows):
        raise _Invalid("its pairs of models are not the grid's (the grid's models changed)")
    inputs = data.get("inputs") if isinstance(data.get("inputs"), Mapping) else {}
    shas = inputs.get("predictions_sha256") if isinstance(inputs.get("predictions_sha256"), Mapping) else {}
    return [by_pair[pair] for pair in expected], dict(shas)


def read_comparisons(
    files: Mapping[str, Path],
    models: Sequence[str],
    benchmarks: Sequence[str],
    reference_model: str | None = None,
    score_files: Mapping[tuple[str, str], Path] | None = None,
) -> Comparisons:
    """Read each benchmark's comparison file ({benchmark: path}) and apply Holm over each pair's benchmarks.

    A file that does not exist, whose recorded predictions differ from those the cells' score files were made
    from, or that has no MDD (an older vlmgrid wrote it), leaves its benchmark without comparisons (listed in
    `unavailable`); a file that does not fit the
    grid raises VlmgridError naming it and the command that rebuilds it."""
    if reference_model is not None and reference_model not in models:
        raise VlmgridError(
            f"report.reference_model {reference_model!r} is not a model of the grid; name one of "
            f"{', '.join(models)}"
        )
    expected = comparison_pairs(models, reference_model)
    rows: list[Comparison] = []
    unavailable: dict[str, str] = {}
    for benchmark in benchmarks:
        path = files.get(benchmark)
        if path is None:
            continue
        path = Path(path)
        if not path.is_file():
            unavailable[benchmark] = f"no comparison file (run `vlmgrid compare {benchmark}`)"
            continue
        try:
            bench_rows, shas = _read_file(path, benchmark, expected, reference_model)
        except _Outdated as exc:
            unavailable[benchmark] = f"the comparison file {exc} (rerun `vlmgrid compare {benchmark}`)"
            continue
        except _Invalid as exc:
            raise VlmgridError(
                f"{path} is not a valid comparison file ({exc}); rerun `vlmgrid compare "
                f"{benchmark}` to rebuild it"
            ) from None
        unscored = [
            model
            for model in shas
            if score_files is not None
            and (score := score_files.get((model, benchmark))) is not None
            and not Path(score).is_file()
        ]
        if unscored:  # its cell reads "missing": no number of it is compared
            unavailable[benchmark] = (
                f"{', '.join(unscored)} {'has' if len(unscored) == 1 else 'have'} no score file here, so "
                f"{'its' if len(unscored) == 1 else 'their'} comparisons are not shown (run `vlmgrid score`)"
            )
            continue
        recorded = {
            model: recorded_predictions_sha((score_files or {}).get((model, benchmark))) for model in shas
        }
        stale = [
            model for model, sha in shas.items() if recorded[model] is not None and recorded[model] != sha
        ]
        if stale:
            unavailable[benchmark] = (
                f"the comparison file was made from other predictions of {', '.join(stale)} "
                f"than the score files (rerun `vlmgrid compare {benchmark}`)"
            )
            continue
        rows += bench_rows
    adjusted: dict[int, float] = {}
    for pair in expected:
        positions = [
            i for i, row in enumerate(rows) if (row.model_a, row.model_b) == pair and row.p_value is not None
        ]
        adjusted.update(zip(positions, holm([rows[i].p_value for i in positions])))
    rows = [replace(row, p_holm=adjusted.get(i)) for i, row in enumerate(rows)]
    return Comparisons(reference_model, rows, unavailable)
