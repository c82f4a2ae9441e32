"""MMBench circular evaluation, scored the way VLMEvalKit's `mcq_circular_eval` does without a judge."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import IndexMetric, int_column, safe_ratio
from vlmgrid.metrics.grouped import GroupedMetric, group_arrays


class MMBenchCircular(GroupedMetric, IndexMetric):
    """MMBench circular accuracy (headline) and vanilla accuracy, in percent.

    Source: open-compass/VLMEvalKit `vlmeval/dataset/utils/multiple_choice.py` (`mcq_circular_eval`; see
    docs: official-scorers). Records: `circular_group` (the question's index mod 1,000,000: the original
    question and its rotated copies share it), `circular_shift` (0 for the original option order),
    `answer_index`. Predictions: `prediction_index`.

    - `circular_accuracy` (headline): percent of groups whose every row is right
      (`prediction_index == answer_index` on each rotation present).
    - `vanilla_accuracy`: accuracy over the shift-0 rows only (the original order), i.e. plain single-pass
      MMBench accuracy; groups without a shift-0 row are left out of it.

    Format errors: a row with an `error`, a null `prediction` or `prediction_index` -1 cannot be read; as in
    VLMEvalKit without a judge model it is wrong, so its whole group scores 0. A gold index of -1 is never
    matched.

    Bootstrap: resamples groups (all rotations together), stratified by group size (number of rotations).
    """

    name = "mmbench_circular"
    headline = "circular_accuracy"
    names = ("circular_accuracy", "vanilla_accuracy")
    group_by = "circular_group"
    record_columns = ("circular_group", "circular_shift", "answer_index")
    prediction_columns = ("prediction", "prediction_index")

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        gold = int_column(records, "answer_index")
        pred = int_column(preds, "prediction_index")
        right = self.valid(records, preds) & (gold >= 0) & (pred == gold)
        codes = self.group_codes(records)
        original = int_column(records, "circular_shift") == 0
        # The shift-0 rows alone give the vanilla (non-circular) accuracy of the same groups.
        vanilla = group_arrays(codes, original & right)
        return {
            **group_arrays(codes, right),
            "g_van_n": group_arrays(codes, original)["g_right"],
            "g_van_right": vanilla["g_right"],
        }

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        groups, t = self.drawn_totals(data, idx, slices, ("g_all", "g_van_n", "g_van_right"))
        return {
            "circular_accuracy": 100.0 * safe_ratio(t["g_all"], np.full(idx.shape[0], float(groups))),
            "vanilla_accuracy": 100.0 * safe_ratio(t["g_van_right"], t["g_van_n"]),
        }
