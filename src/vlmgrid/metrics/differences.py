"""Two prediction sets of one benchmark, item by item: where they differ, why, and what each kind of difference
does to the headline (`vlmgrid diff`, docs/diff.md).

Rows are paired by (item, variant). A pair whose readings differ (the columns the benchmark's metric reads, and
whether the row is an error row) is one of:

- ``error``: either row carries an `error` (a failed request, an unreadable image);
- ``reading``: the same answer read differently: both raw texts are the same answer (equal once the white space
  at both ends, which every reader trims, is trimmed), yet the recorded readings differ;
- ``answer``: a different answer: the raw texts differ (or there are none: answers by scores), and so do the
  readings.

A pair whose readings are equal but whose raw texts are not the same answer ("A" and "A. cat") is
``same_reading``: listed, but it cannot move the score. Pairs of the same reading and the same answer are not
listed.

The effects are computed with the metric itself (`prepare` and `compute` on the identity resample, the point
value `score_predictions` reports), never by a second scorer: starting from B, A's rows are put in on each
class's items in turn (`CLASSES` order), and a class's effect is the headline after minus before. The
effects therefore add up to A - B exactly. Where the headline is not a sum over items (POPE's F1 per split,
MME's acc+ per image), a class's effect depends on the classes put in before it; `alone` gives each class's
effect put in on its own, and `order_matters` says whether the two differ.

The headlines are over the items both sets answer; an item only one set answers is coverage, listed apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import Metric
# The score's own alignment and strata, so that a headline here is the one the score file gives.
from vlmgrid.metrics.compute import _align, _strata


@dataclass(frozen=True)
class DiffClass:
    name: str
    label: str  # in words, for the summary table


# The order in which A's rows are put into B; `same_reading` last (its effect is 0 by construction).
CLASSES = (
    DiffClass("reading", "same answer, read differently"),
    DiffClass("answer", "different answer"),
    DiffClass("error", "error rows"),
    DiffClass("same_reading", "other text, same reading"),
)
# Two headlines closer than this are equal: they were summed in another order.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ItemDifference:
    id: str
    variant: str
    diff_class: str
    raw_a: str | None
    raw_b: str | None
    prediction_a: str | None
    prediction_b: str | None
    prediction_index_a: int
    prediction_index_b: int
    error_a: str | None
    error_b: str | None
    gold: str | None


@dataclass(frozen=True)
class ClassEffect:
    name: str
    label: str
    items: int  # rows (item, variant) of the class
    effect: float | None  # headline change when A's rows are put in after the classes before it; None: no headline
    alone: float | None  # headline change when only this class's rows are put in


@dataclass(frozen=True)
class Differences:
    metric: str  # the metric's name ("pope")
    headline: str  # its headline number ("f1")
    n_common: int  # items both sets answer: the headlines are over these
    value_a: float | None  # None: every answer of the set is a format error (its cell failed)
    value_b: float | None
    classes: list[ClassEffect]
    items: list[ItemDifference]
    only_a: list[str]  # item ids only A answers (records order)
    only_b: list[str]
    error_rows_a: int  # rows with an `error` among the common items
    error_rows_b: int
    order_matters: bool  # the effects depend on the substitution order (a set-level headline)
    own_value_a: float | None = None  # A's headline over all the items it answers, when B lacks some of them
    own_value_b: float | None = None
    variant_pairing: tuple[str, str] | None = None  # (A's, B's) when the one variant of each is named differently
    variants: list[str] = field(default_factory=list)

    @property
    def difference(self) -> float | None:
        if self.value_a is None or self.value_b is None:
            return None
        return self.value_a - self.value_b


def same_answer(raw_a, raw_b) -> bool:
    """Two raw texts are the same answer when they are equal once the white space at both ends is trimmed."""
    return isinstance(raw_a, str) and isinstance(raw_b, str) and raw_a.strip() == raw_b.strip()


def _missing(value) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _equal(a, b) -> bool:
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def _text(value) -> str | None:
    return None if _missing(value) else str(value)


def _variants(preds: pd.DataFrame) -> pd.Series:
    if "variant" in preds.columns:
        return preds["variant"].fillna("default").astype(str)
    return pd.Series("default", index=preds.index)


def _checked(m: Metric, records: pd.DataFrame, preds: pd.DataFrame, which: str) -> pd.DataFrame:
    for col in ("id", *m.prediction_columns):
        if col not in preds.columns:
            raise VlmgridError(f'predictions of {which} lack the column "{col}" that the {m.name} metric needs')
    preds = preds.assign(id=preds["id"].astype(str), variant=_variants(preds))
    unknown = sorted(set(preds["id"]) - set(records["id"]))
    if unknown:
        raise VlmgridError(f'predictions of {which} name {len(unknown)} item(s) the benchmark does not have, e.g. '
                           f'"{unknown[0]}": they were made for other data; diff sets of this benchmark only')
    twice = preds[preds.duplicated(["id", "variant"])]
    if len(twice):
        raise VlmgridError(f'predictions of {which} hold item "{twice["id"].iloc[0]}" more than once in variant '
                           f'"{twice["variant"].iloc[0]}"; each item must appear once per variant')
    return preds


def _answered(preds: pd.DataFrame, variants: list[str]) -> set[str]:
    """The items with a row in every variant."""
    ids = [set(preds.loc[preds["variant"] == v, "id"]) for v in variants]
    return set.intersection(*ids) if ids else set()


def _layout(m: Metric, records: pd.DataFrame) -> tuple[np.ndarray, list[slice]]:
    """The item order and stratum slices `score_predictions` evaluates the point value with."""
    strata = _strata(m, records)
    order = np.concatenate(strata)
    bounds = np.cumsum([0] + [len(p) for p in strata])
    return order, [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(len(strata))]


def headline_value(m: Metric, records: pd.DataFrame, frames: dict[str, pd.DataFrame]) -> float | None:
    """The headline of {variant: rows aligned to `records`}: the mean over the variants of the metric's point
    value, as `score_predictions` computes it; None when every row is a format error (a failed cell)."""
    if not any(m.valid(records, frame).any() for frame in frames.values()):
        return None
    return _point(m, records, frames)


def _point(m: Metric, records: pd.DataFrame, frames: dict[str, pd.DataFrame]) -> float:
    """The metric's headline point value, mean over the variants (whatever the share of format errors)."""
    order, slices = _layout(m, records)
    identity = np.arange(len(records), dtype=np.int64)[None, :]
    values = []
    for frame in frames.values():
        data = {k: a[order] for k, a in m.prepare(records, frame).items()}
        values.append(float(m.compute(data, identity, slices)[m.headline][0]))
    return float(np.mean(values))


def _same_reading(m: Metric, row_a, row_b) -> bool:
    if _missing(row_a.get("error")) != _missing(row_b.get("error")):
        return False
    return all(_equal(row_a[col], row_b[col]) for col in m.prediction_columns)


def _classify(m: Metric, row_a, row_b) -> str | None:
    """The class of a pair of rows (`CLASSES`), or None when they are the same."""
    if _same_reading(m, row_a, row_b):
        same_text = _equal(row_a.get("raw"), row_b.get("raw")) or same_answer(row_a.get("raw"), row_b.get("raw"))
        return None if same_text else "same_reading"
    if not (_missing(row_a.get("error")) and _missing(row_b.get("error"))):
        return "error"
    return "reading" if same_answer(row_a.get("raw"), row_b.get("raw")) else "answer"


def _index(value) -> int:
    return -1 if _missing(value) else int(value)


def diff_predictions(metric: str, records: pd.DataFrame, preds_a: pd.DataFrame, preds_b: pd.DataFrame,
                     names: tuple[str, str] = ("A", "B")) -> Differences:
    """Set A against set B on the same records, by the named metric (`METRICS`); see the module docstring.

    `names` name the two sets in messages. Raises VlmgridError for sets that cannot be paired (other variants,
    items the benchmark does not have, an item twice, no item in common).
    """
    from vlmgrid.metrics import METRICS

    m = METRICS.get(metric)
    for col in ("id", *m.record_columns):
        if col not in records.columns:
            raise VlmgridError(f'records lack the column "{col}" that the {m.name} metric needs')
    records = records.assign(id=records["id"].astype(str)).reset_index(drop=True)
    preds_a = _checked(m, records, preds_a, names[0])
    preds_b = _checked(m, records, preds_b, names[1])

    variants_a, variants_b = sorted(preds_a["variant"].unique()), sorted(preds_b["variant"].unique())
    pairing = None
    if variants_a != variants_b:
        if len(variants_a) == 1 and len(variants_b) == 1:
            pairing = (variants_a[0], variants_b[0])  # one answer per item each: paired whatever their names
            preds_b = preds_b.assign(variant=variants_a[0])
        else:
            raise VlmgridError(
                f"{names[0]} answers in the variant(s) {', '.join(variants_a) or 'none'} and {names[1]} in "
                f"{', '.join(variants_b) or 'none'}; a diff pairs the rows of one variant, so diff sets of the same "
                f"prompt variants"
            )
    variants = variants_a
    answered_a, answered_b = _answered(preds_a, variants), _answered(preds_b, variants)
    all_ids = records["id"].tolist()
    only_a = [i for i in all_ids if i in answered_a and i not in answered_b]
    only_b = [i for i in all_ids if i in answered_b and i not in answered_a]
    common = records[records["id"].isin(answered_a & answered_b)].reset_index(drop=True)
    if not len(common):
        raise VlmgridError(f"{names[0]} and {names[1]} answer no item in common, so there is nothing to diff")

    aligned_a = {v: _align(common, preds_a[preds_a["variant"] == v], v) for v in variants}
    aligned_b = {v: _align(common, preds_b[preds_b["variant"] == v], v) for v in variants}
    gold = common["answer"] if "answer" in common.columns else pd.Series(None, index=common.index)

    items: list[ItemDifference] = []
    positions: dict[str, dict[str, list[int]]] = {c.name: {v: [] for v in variants} for c in CLASSES}
    for v in variants:
        rows_a, rows_b = aligned_a[v].to_dict("records"), aligned_b[v].to_dict("records")
        for i, (row_a, row_b) in enumerate(zip(rows_a, rows_b)):
            found = _classify(m, row_a, row_b)
            if found is None:
                continue
            positions[found][v].append(i)
            items.append(ItemDifference(
                id=common["id"].iloc[i], variant=v, diff_class=found,
                raw_a=_text(row_a.get("raw")), raw_b=_text(row_b.get("raw")),
                prediction_a=_text(row_a["prediction"]), prediction_b=_text(row_b["prediction"]),
                prediction_index_a=_index(row_a.get("prediction_index")),
                prediction_index_b=_index(row_b.get("prediction_index")),
                error_a=_text(row_a.get("error")), error_b=_text(row_b.get("error")), gold=_text(gold.iloc[i]),
            ))
    rank = {c.name: k for k, c in enumerate(CLASSES)}
    order_of = {i: k for k, i in enumerate(common["id"])}
    items.sort(key=lambda d: (rank[d.diff_class], order_of[d.id], d.variant))

    value_a = headline_value(m, common, aligned_a)
    value_b = headline_value(m, common, aligned_b)
    classes, order_matters = _effects(m, common, aligned_a, aligned_b, positions, value_a, value_b)

    def own(preds, answered) -> float | None:
        subset = records[records["id"].isin(answered)].reset_index(drop=True)
        return headline_value(m, subset, {v: _align(subset, preds[preds["variant"] == v], v) for v in variants})

    def errors(frames) -> int:
        return sum(int(frame["error"].notna().sum()) for frame in frames.values() if "error" in frame.columns)

    return Differences(
        metric=m.name, headline=m.headline, n_common=len(common), value_a=value_a, value_b=value_b,
        classes=classes, items=items, only_a=only_a, only_b=only_b,
        error_rows_a=errors(aligned_a), error_rows_b=errors(aligned_b), order_matters=order_matters,
        own_value_a=own(preds_a, answered_a) if only_a else None,
        own_value_b=own(preds_b, answered_b) if only_b else None,
        variant_pairing=pairing, variants=list(variants),
    )


def _substituted(base: dict[str, pd.DataFrame], source: dict[str, pd.DataFrame],
                 rows: dict[str, list[int]]) -> dict[str, pd.DataFrame]:
    """`base` with `source`'s rows at `rows` ({variant: positions})."""
    out = {}
    for v, frame in base.items():
        if rows.get(v):
            frame = pd.concat([frame.drop(index=rows[v]), source[v].loc[rows[v], frame.columns]]).sort_index()
        out[v] = frame
    return out


def _effects(m: Metric, common: pd.DataFrame, aligned_a, aligned_b, positions, value_a, value_b):
    """Per class its effect on the headline (in `CLASSES` order, and alone), and whether the order matters."""
    if value_a is None or value_b is None:  # a failed cell has no headline to explain
        counts = {c.name: sum(len(p) for p in positions[c.name].values()) for c in CLASSES}
        return [ClassEffect(c.name, c.label, counts[c.name], None, None) for c in CLASSES], False
    effects, current, before = [], dict(aligned_b), value_b
    order_matters = False
    for c in CLASSES:
        rows = positions[c.name]
        count = sum(len(p) for p in rows.values())
        if not count:
            effects.append(ClassEffect(c.name, c.label, 0, 0.0, 0.0))
            continue
        current = _substituted(current, aligned_a, rows)
        after = _point(m, common, current)
        alone = _point(m, common, _substituted(aligned_b, aligned_a, rows)) - value_b
        effect = after - before
        order_matters = order_matters or abs(effect - alone) > _TOLERANCE
        effects.append(ClassEffect(c.name, c.label, count, effect, alone))
        before = after
    # Every differing row of A is in now, and the others read the same: the chain ends at A's headline.
    if abs(before - value_a) > _TOLERANCE:
        raise VlmgridError(f"the {m.name} headline of B with every differing row of A put in is {before}, not A's "
                           f"{value_a}; the metric reads a column the diff does not compare")
    return effects, order_matters
