"""Two prediction sets of one benchmark, item by item: where they differ, why, and what each kind of
difference does to the headline (`vlmgrid diff`, docs/diff.md).

Rows are paired by (item, variant). A pair whose readings differ (the columns the benchmark's metric reads,
and whether the row is an error row) is one of:

- ``error``: either row carries an `error` (a failed request, an unreadable image);
- ``reading``: the same answer read differently: both raw texts are the same answer (equal once the white
  space at both ends, which every reader trims, is trimmed), yet the recorded readings differ;
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import Metric, no_error

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
_RANK = {c.name: k for k, c in enumerate(CLASSES)}
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
    gold_index: int  # the gold option's index, -1 where the records have none (yes/no, short answers)


@dataclass(frozen=True)
class ClassEffect:
    name: str
    label: str
    items: int  # rows (item, variant) of the class
    effect: (
        float | None
    )  # headline change when A's rows are put in after the classes before it; None: no headline
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
    # rows without an `error` whose answer the metric cannot read (`Metric.valid`): with the error rows, the
    # score's format errors
    unreadable_a: int
    unreadable_b: int
    n_rows: int  # rows each set has among the common items: items times variants
    order_matters: bool  # the effects depend on the substitution order (a set-level headline)
    own_value_a: float | None = None  # A's headline over all the items it answers, when B lacks some of them
    own_value_b: float | None = None
    variant_pairing: tuple[str, str] | None = (
        None  # (A's, B's) when the one variant of each is named differently
    )
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


def _variants(preds: pd.DataFrame) -> pd.Series:
    if "variant" in preds.columns:
        return preds["variant"].fillna("default").astype(str)
    return pd.Series("default", index=preds.index)


def _checked(m: Metric, records: pd.DataFrame, preds: pd.DataFrame, which: str) -> pd.DataFrame:
    for col in ("id", *m.prediction_columns):
        if col not in preds.columns:
            raise VlmgridError(
                f'predictions of {which} lack the column "{col}" that the {m.name} metric needs'
            )
    preds = preds.assign(id=preds["id"].astype(str), variant=_variants(preds))
    unknown = sorted(set(preds["id"].unique()) - set(records["id"].unique()))
    if unknown:
        raise VlmgridError(
            f"predictions of {which} name {len(unknown)} item(s) the benchmark does not have, e.g. "
            f'"{unknown[0]}": they were made for other data; diff sets of this benchmark only'
        )
    twice = preds[preds.duplicated(["id", "variant"])]
    if len(twice):
        raise VlmgridError(
            f'predictions of {which} hold item "{twice["id"].iloc[0]}" more than once in variant '
            f'"{twice["variant"].iloc[0]}"; each item must appear once per variant'
        )
    return preds


def _answered(preds: pd.DataFrame, variants: list[str]) -> set[str]:
    """The items with a row in every variant."""
    rows = preds.loc[
        preds["variant"].isin(variants), "id"
    ].value_counts()  # an item is once per variant at most
    return set(rows.index[rows == len(variants)])


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


def _column(frame: pd.DataFrame, col: str) -> pd.Series:
    """A column of the aligned rows; all missing where the set has no such column."""
    return frame[col] if col in frame.columns else pd.Series(None, index=frame.index, dtype=object)


def _holds_arrays(col: pd.Series) -> bool:
    return col.dtype == object and any(
        isinstance(v, (list, tuple, np.ndarray)) for v in col[col.notna()].to_numpy()
    )


def _same_values(col_a: pd.Series, col_b: pd.Series) -> np.ndarray:
    """`_equal` of two aligned columns, row by row: both missing, or equal (list values as arrays)."""
    missing_a, missing_b = col_a.isna().to_numpy(), col_b.isna().to_numpy()
    values_a, values_b = col_a.to_numpy(dtype=object), col_b.to_numpy(dtype=object)
    same = missing_a & missing_b
    both = ~missing_a & ~missing_b
    if _holds_arrays(col_a) or _holds_arrays(col_b):
        same[both] = [_equal(x, y) for x, y in zip(values_a[both], values_b[both])]
    else:
        same[both] = values_a[both] == values_b[both]
    return same


def _same_answers(raw_a: pd.Series, raw_b: pd.Series) -> np.ndarray:
    """`same_answer` of two aligned raw text columns, row by row."""

    def stripped(col: pd.Series) -> np.ndarray:
        return np.array(
            [v.strip() if isinstance(v, str) else None for v in col.to_numpy(dtype=object)], dtype=object
        )

    a, b = stripped(raw_a), stripped(raw_b)
    texts = np.not_equal(a, None) & np.not_equal(b, None)
    same = np.zeros(len(a), dtype=bool)
    same[texts] = a[texts] == b[texts]
    return same


def _classes_of(m: Metric, rows_a: pd.DataFrame, rows_b: pd.DataFrame) -> np.ndarray:
    """The class of each pair of aligned rows, as its position in `CLASSES`, -1 where the two are the same:
    whether the error rows and the metric's columns agree, then whether the raw texts are the same answer."""
    fine_a = _column(rows_a, "error").isna().to_numpy()
    fine_b = _column(rows_b, "error").isna().to_numpy()
    same_reading = fine_a == fine_b
    for col in m.prediction_columns:
        same_reading &= _same_values(rows_a[col], rows_b[col])
    raw_a, raw_b = _column(rows_a, "raw"), _column(rows_b, "raw")
    answer = _same_answers(raw_a, raw_b)
    same_text = _same_values(raw_a, raw_b) | answer
    return np.select(
        [same_reading & same_text, same_reading, ~(fine_a & fine_b), answer],
        [-1, _RANK["same_reading"], _RANK["error"], _RANK["reading"]],
        default=_RANK["answer"],
    )


def _texts(col: pd.Series) -> np.ndarray:
    """Each value of a column as text, None where it is missing."""
    missing = col.isna().to_numpy()
    values = col.to_numpy(dtype=object)
    if isinstance(col.dtype, pd.StringDtype):  # strings already
        values[missing] = None
        return values
    return np.array([None if gone else str(v) for v, gone in zip(values, missing)], dtype=object)


def _indices(col: pd.Series) -> np.ndarray:
    """Each value of a column as an index, -1 where it is missing."""
    missing = col.isna().to_numpy()
    return np.array(
        [-1 if gone else int(v) for v, gone in zip(col.to_numpy(dtype=object), missing)], dtype=np.int64
    )


def diff_predictions(
    metric: str,
    records: pd.DataFrame,
    preds_a: pd.DataFrame,
    preds_b: pd.DataFrame,
    names: tuple[str, str] = ("A", "B"),
    causes: Mapping[tuple[str, str], str] | None = None,
    cause_classes: Sequence[DiffClass] = (),
) -> Differences:
    """Set A against set B on the same records, by the named metric (`METRICS`); see the module docstring.

    `names` name the two sets in messages. Raises VlmgridError for sets that cannot be paired (other variants,
    items the benchmark does not have, an item twice, no item in common). `causes` ({(id, variant): class
    name}) split the pairs read differently by why (two readings of one set: the tool's judge, its matcher):
    each such pair is of its cause's class, one of `cause_classes`, which come first in the table and in the
    order A's rows are put in.
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
                f"{', '.join(variants_b) or 'none'}; a diff pairs the rows of one variant, so diff sets of "
                "the same prompt variants"
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
    gold = _texts(_column(common, "answer"))
    gold_index = _indices(_column(common, "answer_index"))

    # Each variant's rows compared column by column; the differing pairs in class order, then records order,
    # then variant.
    classes_here = tuple(cause_classes) + CLASSES
    rank_of = {c.name: k for k, c in enumerate(classes_here)}
    positions: dict[str, dict[str, list[int]]] = {c.name: {} for c in classes_here}
    found = []
    common_ids = common["id"].to_numpy(dtype=object)
    for k, v in enumerate(variants):
        ranks = _classes_of(m, aligned_a[v], aligned_b[v])
        ranks = np.where(ranks >= 0, ranks + len(cause_classes), ranks)
        if causes:
            for at in np.flatnonzero(ranks == rank_of["reading"]):
                cause = causes.get((common_ids[at], v))
                if cause is not None:
                    ranks[at] = rank_of[cause]
        for c in classes_here:
            positions[c.name][v] = np.flatnonzero(ranks == rank_of[c.name]).tolist()
        at = np.flatnonzero(ranks >= 0)
        found.append((np.full(len(at), k), at, ranks[at]))
    variant_key, row_key, class_key = (np.concatenate(parts) for parts in zip(*found))
    order = np.lexsort((variant_key, row_key, class_key))
    variant_key, row_key, class_key = variant_key[order], row_key[order], class_key[order]

    def side(frames: dict[str, pd.DataFrame], col: str, convert) -> list:  # a column of the items, in order
        out = np.empty(len(order), dtype=object)
        for k, v in enumerate(variants):
            here = variant_key == k
            out[here] = convert(_column(frames[v], col).iloc[row_key[here]])
        return out.tolist()

    ids = common["id"].to_numpy(dtype=object)
    items = [
        ItemDifference(*fields)
        for fields in zip(
            ids[row_key].tolist(),
            [variants[k] for k in variant_key.tolist()],
            [classes_here[r].name for r in class_key.tolist()],
            side(aligned_a, "raw", _texts),
            side(aligned_b, "raw", _texts),
            side(aligned_a, "prediction", _texts),
            side(aligned_b, "prediction", _texts),
            side(aligned_a, "prediction_index", _indices),
            side(aligned_b, "prediction_index", _indices),
            side(aligned_a, "error", _texts),
            side(aligned_b, "error", _texts),
            gold[row_key].tolist(),
            gold_index[row_key].tolist(),
        )
    ]

    value_a = headline_value(m, common, aligned_a)
    value_b = headline_value(m, common, aligned_b)
    classes, order_matters = _effects(
        m, common, aligned_a, aligned_b, positions, value_a, value_b, classes_here
    )

    def own(preds, answered) -> float | None:
        subset = records[records["id"].isin(answered)].reset_index(drop=True)
        return headline_value(
            m, subset, {v: _align(subset, preds[preds["variant"] == v], v) for v in variants}
        )

    def errors(frames) -> int:
        return sum(int(frame["error"].notna().sum()) for frame in frames.values() if "error" in frame.columns)

    def unreadable(frames) -> int:
        return sum(int((no_error(frame) & ~m.valid(common, frame)).sum()) for frame in frames.values())

    return Differences(
        metric=m.name,
        headline=m.headline,
        n_common=len(common),
        value_a=value_a,
        value_b=value_b,
        classes=classes,
        items=items,
        only_a=only_a,
        only_b=only_b,
        error_rows_a=errors(aligned_a),
        error_rows_b=errors(aligned_b),
        unreadable_a=unreadable(aligned_a),
        unreadable_b=unreadable(aligned_b),
        n_rows=len(common) * len(variants),
        order_matters=order_matters,
        own_value_a=own(preds_a, answered_a) if only_a else None,
        own_value_b=own(preds_b, answered_b) if only_b else None,
        variant_pairing=pairing,
        variants=list(variants),
    )


def _substituted(
    base: dict[str, pd.DataFrame], source: dict[str, pd.DataFrame], rows: dict[str, list[int]]
) -> dict[str, pd.DataFrame]:
    """`base` with `source`'s rows at `rows` ({variant: positions})."""
    out = {}
    for v, frame in base.items():
        if rows.get(v):
            take = np.arange(len(frame))
            take[rows[v]] += len(frame)  # the row of `source`, which follows `base`'s rows
            frame = pd.concat([frame, source[v][frame.columns]]).iloc[take]
        out[v] = frame
    return out


def _effects(
    m: Metric,
    common: pd.DataFrame,
    aligned_a,
    aligned_b,
    positions,
    value_a,
    value_b,
    classes: Sequence[DiffClass] = CLASSES,
):
    """Per class its effect on the headline (in `classes` order, and alone), and whether the order matters."""
    if value_a is None or value_b is None:  # a failed cell has no headline to explain
        counts = {c.name: sum(len(p) for p in positions[c.name].values()) for c in classes}
        return [ClassEffect(c.name, c.label, counts[c.name], None, None) for c in classes], False
    effects, current, before = [], dict(aligned_b), value_b
    order_matters = False
    for c in classes:
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
        raise VlmgridError(
            f"the {m.name} headline of B with every differing row of A put in is {before}, not A's "
            f"{value_a}; the metric reads a column the diff does not compare"
        )
    return effects, order_matters
