"""CV-Bench: accuracy within each source, combined by the dataset card's formula."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import IndexMetric, count_true, int_column

SOURCES = ("ADE20K", "COCO", "Omni3D")
_LOOKUP = {name.lower(): i for i, name in enumerate(SOURCES)}


class CVBench(IndexMetric):
    """CV-Bench combined score (headline), 2D and 3D accuracy and each source's accuracy, in percent.

    Source: the nyu-visionx/CV-Bench dataset card (see docs: official-scorers). Records: `source` (ADE20K,
    COCO or Omni3D, case-insensitive), `answer_index`. Predictions: `prediction_index`.

    - `accuracy_ade20k`, `accuracy_coco`, `accuracy_omni3d`: `prediction_index == answer_index` within the
      source (0 when the sample has no item of that source, e.g. in a breakdown group).
    - `accuracy_2d` = (acc_ADE20K + acc_COCO) / 2; `accuracy_3d` = acc_Omni3D.
    - `cvbench` (headline) = (accuracy_2d + accuracy_3d) / 2
      = ((acc_ADE20K + acc_COCO) / 2 + acc_Omni3D) / 2 (the dataset card's formula). This is a mean of
      per-source accuracies, not the accuracy pooled over all items. When a source is absent, each average
      runs over the parts present (2D: the 2D sources present; headline: the 2D and 3D parts present).

    Format errors: a row with an `error`, a null `prediction` or `prediction_index` -1 (unparsable) counts as
    wrong, as in the Cambrian scorers. A gold index of -1 is never matched.

    Bootstrap: resamples items within each source.
    """

    name = "cvbench"
    headline = "cvbench"
    names = ("cvbench", "accuracy_2d", "accuracy_3d", "accuracy_ade20k", "accuracy_coco", "accuracy_omni3d")
    stratify_by = "source"
    record_columns = ("source", "answer_index")
    prediction_columns = ("prediction", "prediction_index")

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        keys = records["source"].astype("string").str.strip().str.lower()
        codes = keys.map(_LOOKUP)
        if codes.isna().any():
            bad = records["source"][codes.isna()].iloc[0]
            raise VlmgridError(f"CV-Bench source {bad!r} is not one of {', '.join(SOURCES)}")
        gold = int_column(records, "answer_index")
        pred = int_column(preds, "prediction_index")
        return {
            "correct": self.valid(records, preds) & (gold >= 0) & (pred == gold),
            "source": codes.to_numpy(dtype=np.int64),
        }

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        rows = idx.shape[0]
        right = np.zeros((rows, len(SOURCES)))
        n = np.zeros(len(SOURCES))
        for sl in slices:
            if sl.stop <= sl.start:
                continue
            s = int(data["source"][sl.start])
            right[:, s] += count_true(data["correct"][idx[:, sl]])
            n[s] += sl.stop - sl.start
        acc = 100.0 * right / np.maximum(n, 1.0)
        present = n > 0
        two_d = [i for i in (0, 1) if present[i]]
        acc_2d = acc[:, two_d].mean(axis=1) if two_d else np.zeros(rows)
        acc_3d = acc[:, 2]
        parts = [a for a, ok in ((acc_2d, bool(two_d)), (acc_3d, bool(present[2]))) if ok]
        return {
            "cvbench": np.mean(parts, axis=0) if parts else np.zeros(rows),
            "accuracy_2d": acc_2d,
            "accuracy_3d": acc_3d,
            "accuracy_ade20k": acc[:, 0],
            "accuracy_coco": acc[:, 1],
            "accuracy_omni3d": acc[:, 2],
        }
