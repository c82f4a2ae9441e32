"""What a metric is, and the column helpers the metrics share.

A metric turns one variant's predictions, aligned to the records (row i of each is item i), into
per-item arrays (`prepare`), and per-item arrays plus a matrix of resampled item positions into one
value per resample for each of its numbers (`compute`). The same `compute` gives the point estimate
(the identity resample) and the bootstrap draws, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError


class LabelsHidden(VlmgridError):
    """The records' gold labels are hidden (a leaderboard's test copy): there is no number to compute, and the
    score stage writes the metric's `submission` tables instead."""


class Metric:
    """Base class. Values are percent (0-100)."""

    name: ClassVar[str]
    #: the metric reported as the score's `metric`/`value`; first of `names`
    headline: ClassVar[str]
    #: every number the metric reports, headline first
    names: ClassVar[tuple[str, ...]]
    #: records column whose groups the headline averages over (resampled within each group), if present
    stratify_by: ClassVar[str | None] = None
    #: records columns the metric reads
    record_columns: ClassVar[tuple[str, ...]] = ()
    #: predictions columns the metric reads (besides id, variant, error)
    prediction_columns: ClassVar[tuple[str, ...]] = ()

    def strata_codes(self, records: pd.DataFrame) -> np.ndarray | None:
        """Per record, a code for the stratum it is resampled within; None (the default): one stratum per
        value of the `stratify_by` column, or a single stratum when there is none."""
        return None

    def valid(self, records: pd.DataFrame, preds: pd.DataFrame) -> np.ndarray:
        """Per row: True when the row is not a format error (no `error`, a non-null `prediction`)."""
        return no_error(preds) & preds["prediction"].notna().to_numpy()

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        """Per-item arrays (first axis = item, records order) that `compute` reads."""
        raise NotImplementedError

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        """Each of `names` -> one value (percent) per row of the (rows, n) index matrix `idx`.

        `slices` gives the columns of each stratum (a single slice over all columns when unstratified).
        """
        raise NotImplementedError

    def submission(self, records: pd.DataFrame, predictions: pd.DataFrame) -> dict[str, pd.DataFrame] | None:
        """What to hand a leaderboard when `prepare` raised `LabelsHidden`: one table per prediction variant,
        by variant name. None (the default): the benchmark has no leaderboard to submit to."""
        return None


def _check_columns(m: Metric, frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    for col in ("id", *columns):
        if col not in frame.columns:
            raise VlmgridError(f'{what} lack the column "{col}" that the {m.name} metric needs')


def checked_records(
    m: Metric, records: pd.DataFrame, purpose: str, predictions: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The records, indexed 0..n-1, when they (and the predictions, if given) hold an id and the metric's
    columns, and the records hold at least one item (`purpose`: "score") and each id once."""
    _check_columns(m, records, m.record_columns, "records")
    if predictions is not None:
        _check_columns(m, predictions, m.prediction_columns, "predictions")
    if len(records) == 0:
        raise VlmgridError(f"there are no records to {purpose}")
    if records["id"].duplicated().any():
        dup = records.loc[records["id"].duplicated(), "id"].iloc[0]
        raise VlmgridError(f'records hold item id "{dup}" more than once')
    return records.reset_index(drop=True)


def no_error(preds: pd.DataFrame) -> np.ndarray:
    """Per row: True when `error` is null (or there is no `error` column)."""
    if "error" not in preds.columns:
        return np.ones(len(preds), dtype=bool)
    return preds["error"].isna().to_numpy()


class IndexMetric(Metric):
    """A metric over `prediction_index`: a row with index -1 is a format error too."""

    def valid(self, records: pd.DataFrame, preds: pd.DataFrame) -> np.ndarray:
        return super().valid(records, preds) & (int_column(preds, "prediction_index") >= 0)


def yes_no_text(series: pd.Series) -> pd.Series:
    """Answers as lowercase stripped text, for reading "yes"/"no" case-insensitively."""
    return series.astype("string").str.strip().str.lower()


def valid_yes_no(preds: pd.DataFrame) -> np.ndarray:
    """Per row: no error and a prediction that reads "yes" or "no"."""
    return no_error(preds) & yes_no_text(preds["prediction"]).isin(["yes", "no"]).fillna(False).to_numpy(
        dtype=bool
    )


def gold_yes_no(records: pd.DataFrame, benchmark: str) -> pd.Series:
    """The records' gold answers as "yes"/"no"; any other gold answer is an error naming the item."""
    gold = yes_no_text(records["answer"])
    bad = ~gold.isin(["yes", "no"]).fillna(False).to_numpy(dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise VlmgridError(
            f'{benchmark} record "{records["id"].iloc[i]}" has answer {records["answer"].iloc[i]!r}; '
            f'every {benchmark} answer must be "yes" or "no"'
        )
    return gold


def int_column(frame: pd.DataFrame, column: str, missing: int = -1) -> np.ndarray:
    """An integer column as int64, nulls as `missing`."""
    col = frame[column]
    try:
        return pd.to_numeric(col).fillna(missing).to_numpy(dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise VlmgridError(f"column {column!r} must hold integers ({exc})") from None


def count_true(mask: np.ndarray) -> np.ndarray:
    """Number of True per row of a 2-D boolean matrix, as float."""
    return np.count_nonzero(mask, axis=1).astype(float)


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise, with 0/0 (and x/0) defined as 0."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den != 0)
