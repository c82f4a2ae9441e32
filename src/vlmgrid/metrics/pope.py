"""POPE: yes/no object-hallucination probing, scored the way RUCAIBox/POPE `evaluate.py` does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import Metric, count_true, gold_yes_no, safe_ratio, valid_yes_no, yes_no_text


class Pope(Metric):
    """POPE F1 (headline), accuracy, precision, recall and yes-ratio, with "yes" as the positive class.

    Source: RUCAIBox/POPE `evaluate.py` (see docs: official-scorers). Gold is the record's `answer`
    ("yes"/"no", case-insensitive). The prediction is the parsed `prediction` text, read case-insensitively
    as "yes" or "no".

    Format errors: the official rule reads every answer that is not "no" as "yes"; vlmgrid follows it so
    that its numbers compare with published ones: a null prediction, an error row (whatever its
    prediction) or any text other than "yes"/"no" is read as "yes", and is counted as a format error.

    - `precision` = TP / (TP + FP), `recall` = TP / (TP + FN), `f1` = 2 TP / (2 TP + FP + FN)
      (= 2PR / (P + R)); each is defined as 0 when its denominator is 0 (0/0 = 0: no predicted or no
      gold positives give precision/recall/F1 0, not an error).
    - `accuracy` = (TP + TN) / n, `yes_ratio` = (TP + FP) / n, the share of predictions read as yes.

    Splits: when the records have a `split` column (random / popular / adversarial), every number is
    computed within each split and then averaged over the splits, as the POPE papers report it
    (headline = mean F1 over the splits); the bootstrap resamples within each split.
    """

    name = "pope"
    headline = "f1"
    names = ("f1", "accuracy", "precision", "recall", "yes_ratio")
    stratify_by = "split"
    record_columns = ("answer",)
    prediction_columns = ("prediction",)

    def valid(self, records: pd.DataFrame, preds: pd.DataFrame) -> np.ndarray:
        return valid_yes_no(preds)

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        gold = gold_yes_no(records, "POPE")
        said_no = self.valid(records, preds) & (yes_no_text(preds["prediction"]) == "no").fillna(
            False
        ).to_numpy(dtype=bool)
        return {"pred_yes": ~said_no, "gold_yes": (gold == "yes").to_numpy(dtype=bool)}

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        totals = {name: np.zeros(idx.shape[0]) for name in self.names}
        for sl in slices:
            cols = idx[:, sl]
            p = data["pred_yes"][cols]
            g = data["gold_yes"][cols]
            n = cols.shape[1]
            tp = count_true(p & g)
            fp = count_true(p & ~g)
            fn = count_true(~p & g)
            totals["f1"] += safe_ratio(2 * tp, 2 * tp + fp + fn)
            totals["accuracy"] += (n - fp - fn) / n
            totals["precision"] += safe_ratio(tp, tp + fp)
            totals["recall"] += safe_ratio(tp, tp + fn)
            totals["yes_ratio"] += (tp + fp) / n
        return {name: 100.0 * v / len(slices) for name, v in totals.items()}
