"""Two models on one benchmark: the difference of their headlines, a paired bootstrap CI and a paired test.

Every number comes from the benchmark metric's own `prepare` and `compute` (`vlmgrid.metrics.base`), so each
benchmark's rule holds: POPE's F1 per split, MME's acc+ per image, MMBench's circular groups, MMVP's pairs,
DANCE's ranking.

- **CI**: the percentile bootstrap of the difference, with the score's resamples: the same strata, the same
  `numpy.random.default_rng(seed)` draws and the same variant averaging as `score_predictions`, applied to
  both models at once. A draw of the difference is therefore exactly model A's score draw minus model B's.
- **Test**: a two-sided paired sign-flip permutation test. Each permutation swaps the two models' per-item
  arrays on a random half of the units (items; whole groups where the metric scores groups, so the items of
  one group swap together) and scores the difference again; p = (1 + #{|permuted| >= |observed|}) /
  (1 + permutations). The flips are drawn by `numpy.random.default_rng([seed, 1])`.
- **McNemar**: where the headline is a plain accuracy and each model answered in one variant, the exact
  McNemar test (two-sided binomial on the discordant items) is given beside it.
- **MDD**: the minimum detectable difference at 5% two-sided and 80% power (`vlmgrid.metrics.power`), over
  the units the test flips. Where the headline is 100 x the plain mean of one score per unit (accuracies,
  classification top-1, VQA accuracy, MMVP pairs, MMBench circular groups) it is computed exactly from the
  per-unit differences (each model's score on a unit averaged over its variants): for 0/1 scores, the
  discordance. Elsewhere (a mean over strata, MME's acc + acc+, POPE's F1) the headline weighs its units
  unequally or is no sum of them, so the null's standard error is read off the permutation test itself: the
  root mean square of the permuted differences, which is the exact one's estimate where both exist.

Prompt variants: a model's headline is the mean over its variants. When both models ran the same variants, a
swap exchanges variant v of A with variant v of B; otherwise the statistic is averaged over every (variant of
A, variant of B) combination, which also gives back each model's mean over its variants when nothing is
swapped, so the swap stays an exchange of the two models' whole answers on an item.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import Metric, checked_records
from vlmgrid.metrics.bootstrap import CHUNK_ENTRIES, bootstrap_indices, percentile_ci

# The score's own alignment and strata: the same resamples as the score files, so the pairing is exact.
from vlmgrid.metrics.compute import _strata, aligned_by_variant
from vlmgrid.metrics.grouped import GroupedMetric
from vlmgrid.metrics.power import mdd_differences, mdd_from_se

PERMUTATION_TEST = "paired sign-flip permutation"

# Metrics whose headline is the share of items answered right (no strata, no groups): per item, right or not,
# read from the metric's prepared arrays. Only these get McNemar's test.
_RIGHT_OR_WRONG: dict[str, Callable[[dict[str, np.ndarray]], np.ndarray]] = {
    "accuracy": lambda data: data["correct"],
    "cvqa": lambda data: data["correct"],
    "classification": lambda data: data["class_top1"] % 2 == 1,
}

# Metrics whose headline is 100 x the plain mean of one score (0-1) per unit: per item, or per group where the
# metric scores groups (read at each group's first item). Their MDD is exact, from these scores.
_UNIT_SCORES: dict[str, Callable[[dict[str, np.ndarray]], np.ndarray]] = {
    **_RIGHT_OR_WRONG,
    "vqa_accuracy": lambda data: data["score"],
    "mmvp": lambda data: data["g_all"][data["is_rep"]],
    "mmbench_circular": lambda data: data["g_all"][data["is_rep"]],
}

# How a comparison's MDD was found (`PairedDifference.mdd_from`).
MDD_EXACT = "unit differences"
MDD_PERMUTATIONS = "permutations"


class NotComparable(VlmgridError):
    """The pair has no comparison (a model's answers are all format errors): a reason, never a number."""


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test: items only A got right, items only B got right, two-sided p."""

    a_only: int
    b_only: int
    p_value: float


@dataclass(frozen=True)
class PairedDifference:
    """Model A's headline minus model B's, in the metric's unit (percent points for percent metrics)."""

    value_a: float
    value_b: float
    difference: float
    ci95: tuple[float, float]
    p_value: float
    test: str
    # what a sign flip swaps: "item", or the records column whose groups swap whole
    unit: str
    units: int
    permutations: int
    samples: int
    seed: int
    n: int
    mcnemar: McNemar | None = None
    # the minimum detectable difference (5% two-sided, 80% power), in the headline's unit, and how it was
    # found
    mdd: float = math.nan
    mdd_from: str = ""
    # the bootstrap draws of the difference (A's score draws minus B's)
    draws: np.ndarray | None = field(default=None, repr=False, compare=False)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p: twice the binomial(a_only + b_only, 1/2) tail below the smaller count,
    capped at 1; 1 when no item is discordant."""
    for count in (a_only, b_only):
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise VlmgridError(f"McNemar counts must be non-negative integers, got {count!r}")
    n = int(a_only) + int(b_only)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(int(a_only), int(b_only)) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_difference(
    metric: str,
    records: pd.DataFrame,
    preds_a: pd.DataFrame,
    preds_b: pd.DataFrame,
    samples: int = 1000,
    seed: int = 0,
    names: tuple[str, str] = ("model A", "model B"),
) -> PairedDifference:
    """Compare model A's predictions with model B's on the same records by the named metric (`METRICS`).

    `samples` is both the number of bootstrap resamples and of permutations; `names` name the two models in
    messages. Raises `NotComparable` when every
    answer of a model is a format error (its cell has no number), `LabelsHidden` when the records hide their
    labels, and VlmgridError naming the problem for input that does not fit (as `score_predictions`).
    """
    from vlmgrid.metrics import METRICS

    m = METRICS.get(metric)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise VlmgridError(f"bootstrap samples must be a positive integer, got {samples!r}")
    records = checked_records(m, records, "compare on")
    data_a = _prepared(m, records, preds_a, names[0])
    data_b = _prepared(m, records, preds_b, names[1])

    strata = _strata(m, records)
    order = np.concatenate(strata)
    bounds = np.cumsum([0] + [len(p) for p in strata])
    # The layout score_predictions uses: items stratum by stratum, each stratum a contiguous range.
    data_a = {v: {k: a[order] for k, a in d.items()} for v, d in data_a.items()}
    data_b = {v: {k: a[order] for k, a in d.items()} for v, d in data_b.items()}
    strata = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(strata))]
    slices = [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(len(strata))]
    n = len(records)
    identity = np.arange(n, dtype=np.int64)[None, :]

    value_a = float(_headline(m, data_a, identity, slices)[0])
    value_b = float(_headline(m, data_b, identity, slices)[0])
    observed = value_a - value_b

    draws = np.empty(samples)
    start = 0
    for idx in bootstrap_indices(strata, samples, seed):
        draws[start : start + idx.shape[0]] = _headline(m, data_a, idx, slices) - _headline(
            m, data_b, idx, slices
        )
        start += idx.shape[0]
    low, high = percentile_ci(draws)

    unit, unit_codes = _units(m, records, order)
    permuted = _permuted_differences(m, data_a, data_b, unit_codes, slices, samples, seed)
    # Sums in another order may differ in the last bits: a tie within rounding counts as at least as extreme.
    tolerance = 1e-9 * max(1.0, abs(observed))
    p_value = (1 + int(np.count_nonzero(np.abs(permuted) >= abs(observed) - tolerance))) / (1 + samples)
    mdd, mdd_from = _mdd(m, data_a, data_b, permuted)

    return PairedDifference(
        value_a=value_a,
        value_b=value_b,
        difference=observed,
        ci95=(low, high),
        p_value=p_value,
        test=PERMUTATION_TEST,
        unit=unit,
        units=int(unit_codes.max()) + 1 if n else 0,
        permutations=int(samples),
        samples=int(samples),
        seed=int(seed),
        n=n,
        mcnemar=_mcnemar(m, data_a, data_b),
        mdd=mdd,
        mdd_from=mdd_from,
        draws=draws,
    )


def _prepared(
    m: Metric, records: pd.DataFrame, preds: pd.DataFrame, which: str
) -> dict[str, dict[str, np.ndarray]]:
    """{variant: the metric's per-item arrays}, records order; NotComparable when no answer is valid."""
    for col in ("id", *m.prediction_columns):
        if col not in preds.columns:
            raise VlmgridError(
                f'predictions of {which} lack the column "{col}" that the {m.name} metric needs'
            )
    aligned = aligned_by_variant(records, preds)
    if not aligned:
        raise NotComparable(f"{which} has no predictions")
    if not any(m.valid(records, frame).any() for frame in aligned.values()):
        # The score of such a cell is "failed" (no number), so a difference to it would be no number either.
        raise NotComparable(f"every answer of {which} is a format error (its cell failed)")
    return {v: m.prepare(records, frame) for v, frame in aligned.items()}


def _headline(m: Metric, data: dict[str, dict[str, np.ndarray]], idx: np.ndarray, slices) -> np.ndarray:
    """The headline per row of `idx`: the mean over the variants, as score_predictions averages them."""
    return np.mean([m.compute(d, idx, slices)[m.headline] for d in data.values()], axis=0)


def _units(m: Metric, records: pd.DataFrame, order: np.ndarray) -> tuple[str, np.ndarray]:
    """What one sign flip swaps, and per item (in the strata layout) the dense code of its unit."""
    if isinstance(m, GroupedMetric):
        _, codes = np.unique(m.group_codes(records)[order], return_inverse=True)
        return m.group_by, codes.ravel().astype(np.int64)
    return "item", np.arange(len(order), dtype=np.int64)


def _permuted_differences(
    m: Metric, data_a, data_b, unit_codes: np.ndarray, slices, permutations: int, seed: int
) -> np.ndarray:
    """The difference under `permutations` random sign flips of the units.

    A and B are stacked (positions 0..n-1 hold A's arrays, n..2n-1 B's), so a flip is just an index matrix:
    the A side reads position j + n where item j's unit is flipped, the B side the other one."""
    if sorted(data_a) == sorted(data_b):
        combos = [(v, v) for v in data_a]
    else:
        combos = list(itertools.product(data_a, data_b))
    stacked = [{k: np.concatenate([data_a[va][k], data_b[vb][k]]) for k in data_a[va]} for va, vb in combos]
    n = len(unit_codes)
    units = int(unit_codes.max()) + 1
    base = np.arange(n, dtype=np.int64)
    rng = np.random.default_rng([seed, 1])
    rows = max(1, CHUNK_ENTRIES // max(n, 1))
    out = np.empty(permutations)
    done = 0
    while done < permutations:
        b = min(rows, permutations - done)
        flipped = (rng.random((b, units)) < 0.5)[:, unit_codes]
        idx_a = base + n * flipped
        idx_b = base + n * ~flipped
        a_side = np.mean([m.compute(d, idx_a, slices)[m.headline] for d in stacked], axis=0)
        b_side = np.mean([m.compute(d, idx_b, slices)[m.headline] for d in stacked], axis=0)
        out[done : done + b] = a_side - b_side
        done += b
    return out


def _mcnemar(m: Metric, data_a, data_b) -> McNemar | None:
    """McNemar's exact test where the headline is a plain accuracy and each model answered in one variant."""
    right = _RIGHT_OR_WRONG.get(m.name)
    if right is None or len(data_a) != 1 or len(data_b) != 1:
        return None
    a = np.asarray(right(next(iter(data_a.values()))), dtype=bool)
    b = np.asarray(right(next(iter(data_b.values()))), dtype=bool)
    a_only, b_only = int(np.count_nonzero(a & ~b)), int(np.count_nonzero(~a & b))
    return McNemar(a_only, b_only, mcnemar_exact(a_only, b_only))


def _mdd(m: Metric, data_a, data_b, permuted: np.ndarray) -> tuple[float, str]:
    """The minimum detectable difference and how it was found (the module docstring)."""
    scores = _UNIT_SCORES.get(m.name)
    if scores is None:
        # Under the null the permuted differences centre on 0: their root mean square is its standard error.
        return mdd_from_se(float(np.sqrt(np.mean(permuted**2)))), MDD_PERMUTATIONS
    # A model's headline is the mean over its variants, so its score on a unit is too.
    a = np.mean([np.asarray(scores(d), dtype=float) for d in data_a.values()], axis=0)
    b = np.mean([np.asarray(scores(d), dtype=float) for d in data_b.values()], axis=0)
    return mdd_differences(100.0 * (a - b)), MDD_EXACT
