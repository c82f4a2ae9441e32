"""`score_predictions`: one benchmark's predictions -> the fields of the score JSON (docs/formats.md).

The metric is found by name in `vlmgrid.metrics.METRICS`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import Metric, checked_records
from vlmgrid.metrics.bootstrap import (
    bootstrap_indices,
    identity_indices,
    percentile_ci,
    strata_from_codes,
    stratum_slices,
)

DECIMALS = 4


def _r(x: float) -> float:
    return round(float(x), DECIMALS)


def _strata(metric: Metric, records: pd.DataFrame) -> list[np.ndarray]:
    custom = metric.strata_codes(records)
    if custom is not None:
        codes, _ = pd.factorize(pd.Series(np.asarray(custom)), sort=True, use_na_sentinel=False)
        return strata_from_codes(codes)
    column = metric.stratify_by
    if column is None or column not in records.columns:
        return [np.arange(len(records), dtype=np.int64)]
    codes, _ = pd.factorize(records[column], sort=True, use_na_sentinel=False)
    return strata_from_codes(codes)


def _align(records: pd.DataFrame, preds: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The variant's prediction rows in records order (row i is the prediction for record i)."""
    ids = pd.Index(preds["id"])
    if not ids.is_unique:
        dup = ids[ids.duplicated()][0]
        raise VlmgridError(f'predictions for variant "{variant}" hold item "{dup}" more than once')
    pos = ids.get_indexer(pd.Index(records["id"]))
    if (pos < 0).any():
        raise VlmgridError(
            f'predictions for variant "{variant}" lack item "{records["id"].iloc[int(np.argmax(pos < 0))]}"; '
            f"rerun infer for this benchmark"
        )
    return preds.iloc[pos].reset_index(drop=True)


def aligned_by_variant(records: pd.DataFrame, predictions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """{variant: its predictions in the records' order}, the variants sorted ("default" for a row that names
    none, and for every row of a file without the column); {} when there are no predictions."""
    if "variant" in predictions.columns:
        variant_col = predictions["variant"].fillna("default").astype(str)
    else:
        variant_col = pd.Series("default", index=predictions.index)
    return {v: _align(records, predictions[variant_col == v], v) for v in sorted(variant_col.unique())}


def _evaluate(
    metric: Metric,
    data: dict[str, dict[str, np.ndarray]],
    strata: list[np.ndarray],
    samples: int,
    seed: int,
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, np.ndarray]]]:
    """Point values and bootstrap draws, per variant and metric name. One set of resamples serves all
    variants (paired bootstrap)."""
    # Lay the items out stratum by stratum so that each stratum is a contiguous range of positions: the
    # resamples pick the same items, but positions come from a shift instead of a gather.
    order = np.concatenate(strata)
    if not np.array_equal(order, np.arange(len(order))):
        data = {v: {k: a[order] for k, a in d.items()} for v, d in data.items()}
        bounds = np.cumsum([0] + [len(p) for p in strata])
        strata = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(strata))]
    slices = stratum_slices(strata)
    ident = identity_indices(strata)
    point = {
        v: {k: float(a[0]) for k, a in metric.compute(d, ident, slices).items()} for v, d in data.items()
    }
    draws = {v: {k: np.empty(samples) for k in metric.names} for v in data}
    start = 0
    for idx in bootstrap_indices(strata, samples, seed):
        stop = start + idx.shape[0]
        for v, d in data.items():
            for k, a in metric.compute(d, idx, slices).items():
                draws[v][k][start:stop] = a
        start = stop
    return point, draws


def _combine(metric: Metric, point, draws) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Mean over variants of each metric's value and (elementwise) of its draws."""
    variants = list(point)
    value = {k: float(np.mean([point[v][k] for v in variants])) for k in metric.names}
    mean_draws = {k: np.mean([draws[v][k] for v in variants], axis=0) for k in metric.names}
    return value, mean_draws


def _entry(value: float, draws: np.ndarray) -> dict[str, Any]:
    lo, hi = percentile_ci(draws)
    return {"value": _r(value), "ci95": [_r(lo), _r(hi)]}


def _errors(valid: dict[str, np.ndarray], positions: np.ndarray | None = None) -> dict[str, Any]:
    """`n_valid` (the items whose prediction is valid in every variant) and `format_error_rate` (the percent
    of their prediction rows, over all variants, that are format errors) of the items at `positions` (all of
    them when None); `valid` holds each variant's validity per item."""
    masks = [v if positions is None else v[positions] for v in valid.values()]
    rows = sum(len(mask) for mask in masks)
    invalid = sum(int((~mask).sum()) for mask in masks)
    return {
        "n_valid": int(np.logical_and.reduce(masks).sum()),
        "format_error_rate": _r(100.0 * invalid / rows),
    }


def _group_key(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    return str(value)


def score_predictions(
    metric: str,
    records: pd.DataFrame,
    predictions: pd.DataFrame,
    *,
    breakdown_by: Sequence[str] = (),
    samples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Score one benchmark's predictions with the named metric (see `METRICS`).

    Each variant is scored separately on the records' items, in records order; the headline (and every
    other number) is the mean over the variants, its bootstrap draws the elementwise mean of theirs, with
    the same resampled items for every variant. The CI is the percentile bootstrap over items
    (`samples` resamples, `numpy.random.default_rng(seed)`), resampled within each stratum when the
    metric averages over strata (POPE splits).

    Returns the score-JSON fields: metric, value, ci95, n, n_valid, n_errors, format_error_rate, metrics,
    breakdown, variants, bootstrap. `n` counts items; `n_errors` counts prediction rows with an `error`
    (over all variants); `format_error_rate` is the percent of prediction rows that are format errors
    (null prediction, error rows, and whatever else the metric treats as unparsable); `n_valid` counts
    the items whose prediction is valid in every variant. Each breakdown group and each variant carries its
    own `n_valid` and `format_error_rate` (a variant's over its own rows), so a part whose every row is a
    format error is told from one answered wrong.
    """
    from vlmgrid.metrics import (
        METRICS,  # the package's registry, built from the metric modules beside this one
    )

    m = METRICS.get(metric)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise VlmgridError(f"bootstrap samples must be a positive integer, got {samples!r}")
    records = checked_records(m, records, "score", predictions)

    aligned = aligned_by_variant(records, predictions)
    if not aligned:
        raise VlmgridError("there are no predictions to score")
    variants = list(aligned)

    valid = {v: m.valid(records, aligned[v]) for v in variants}
    data = {v: m.prepare(records, aligned[v]) for v in variants}

    n = len(records)
    n_errors = sum(int(aligned[v]["error"].notna().sum()) for v in variants if "error" in aligned[v].columns)
    errors = _errors(valid)

    strata = _strata(m, records)
    point, draws = _evaluate(m, data, strata, samples, seed)
    value, mean_draws = _combine(m, point, draws)

    breakdown_cols = list(dict.fromkeys(breakdown_by))
    if m.stratify_by and m.stratify_by in records.columns and m.stratify_by not in breakdown_cols:
        breakdown_cols.append(m.stratify_by)
    breakdown: dict[str, dict[str, Any]] = {}
    for col in breakdown_cols:
        if col not in records.columns:
            continue
        codes, uniques = pd.factorize(records[col], sort=True, use_na_sentinel=False)
        groups: dict[str, Any] = {}
        for positions in strata_from_codes(codes) if n else []:
            sub = records.iloc[positions].reset_index(drop=True)
            sub_data = {v: {k: a[positions] for k, a in d.items()} for v, d in data.items()}
            sub_point, sub_draws = _evaluate(m, sub_data, _strata(m, sub), samples, seed)
            sub_value, sub_mean = _combine(m, sub_point, sub_draws)
            key = _group_key(records[col].iloc[int(positions[0])])
            groups[key] = {
                "n": int(len(positions)),
                **_errors(valid, positions),
                "metrics": {k: _entry(sub_value[k], sub_mean[k]) for k in m.names},
            }
        breakdown[col] = groups

    headline = _entry(value[m.headline], mean_draws[m.headline])
    return {
        "metric": m.headline,
        "value": headline["value"],
        "ci95": headline["ci95"],
        "n": int(n),
        "n_valid": errors["n_valid"],
        "n_errors": int(n_errors),
        "format_error_rate": errors["format_error_rate"],
        "metrics": {k: _entry(value[k], mean_draws[k]) for k in m.names},
        "breakdown": breakdown,
        "variants": (
            {
                v: {**_entry(point[v][m.headline], draws[v][m.headline]), **_errors({v: valid[v]})}
                for v in variants
            }
            if len(variants) > 1
            else {}
        ),
        "bootstrap": {
            "samples": int(samples),
            "seed": int(seed),
            "draws": [_r(x) for x in mean_draws[m.headline]],
        },
    }
