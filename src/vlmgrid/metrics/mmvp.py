"""MMVP: questions in pairs; a pair scores only if both of its questions are right."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import IndexMetric, int_column
from vlmgrid.metrics.grouped import GroupedMetric, group_arrays


class MMVP(GroupedMetric, IndexMetric):
    """MMVP pair accuracy (headline) and per-question accuracy, in percent.

    Source: tsb0601/MMVP `scripts/gpt_grader.py` (see docs: official-scorers): two questions about a pair
    of images form a pair, and the pair counts as right only if both answers are right; accuracy = right
    pairs / pairs. vlmgrid compares option indices directly instead of asking a GPT grader. Records:
    `pair_id` (the two questions of a pair share it), `answer_index`. Predictions: `prediction_index`.

    - `pair_accuracy` (headline): percent of pairs whose questions are all right.
    - `question_accuracy`: percent of questions right.

    Format errors: a row with an `error`, a null `prediction` or `prediction_index` -1 counts as wrong (and
    so its pair scores 0). A gold index of -1 is never matched.

    Bootstrap: resamples pairs (stratified by pair size, which is 2 for every well-formed pair).
    """

    name = "mmvp"
    headline = "pair_accuracy"
    names = ("pair_accuracy", "question_accuracy")
    group_by = "pair_id"
    record_columns = ("pair_id", "answer_index")
    prediction_columns = ("prediction", "prediction_index")

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        gold = int_column(records, "answer_index")
        pred = int_column(preds, "prediction_index")
        right = self.valid(records, preds) & (gold >= 0) & (pred == gold)
        return group_arrays(self.group_codes(records), right)

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        pairs, t = self.drawn_totals(data, idx, slices, ("g_all", "g_size", "g_right"))
        return {
            "pair_accuracy": 100.0 * t["g_all"] / max(pairs, 1),
            "question_accuracy": 100.0 * t["g_right"] / np.maximum(t["g_size"], 1.0),
        }
