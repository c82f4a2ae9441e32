"""Multiple-choice accuracy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import IndexMetric, count_true, int_column, safe_ratio


class Accuracy(IndexMetric):
    """Multiple-choice accuracy over option indices.

    Rules (the usual multiple-choice rule, e.g. ScienceQA, MMMU, CV-Bench's per-source accuracy and
    Kaleidoscope's `compute_accuracy`):

    - `accuracy` (headline): `prediction_index == answer_index`, over all items; an unparsable answer
      counts as wrong (the official rule of CV-Bench and Kaleidoscope).
    - `valid_accuracy`: the same, among the rows with a valid prediction only (Kaleidoscope's "valid
      accuracy"); 0 when no row is valid.

    Format errors: a row with an `error`, a null `prediction` or `prediction_index` -1 is a format error;
    it counts as wrong for `accuracy` and is left out of `valid_accuracy`. A gold index of -1 is never
    matched.
    """

    name = "accuracy"
    headline = "accuracy"
    names = ("accuracy", "valid_accuracy")
    record_columns = ("answer_index",)
    prediction_columns = ("prediction", "prediction_index")

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        gold = int_column(records, "answer_index")
        pred = int_column(preds, "prediction_index")
        valid = self.valid(records, preds)
        return {"correct": valid & (gold >= 0) & (pred == gold), "valid": valid}

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        right = count_true(data["correct"][idx])
        return {
            "accuracy": 100.0 * right / idx.shape[1],
            "valid_accuracy": 100.0 * safe_ratio(right, count_true(data["valid"][idx])),
        }
