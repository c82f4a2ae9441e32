"""MME: yes/no questions in pairs per image, scored the way BradyFU's `eval_tool/calculation.py` does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import gold_yes_no, safe_ratio, valid_yes_no, yes_no_text
from vlmgrid.metrics.grouped import GroupedMetric, group_arrays

PERCEPTION = (
    "existence",
    "count",
    "position",
    "color",
    "posters",
    "celebrity",
    "scene",
    "landmark",
    "artwork",
    "OCR",
)
COGNITION = ("commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning")
SUBTASKS = PERCEPTION + COGNITION
_LOOKUP = {name.lower(): i for i, name in enumerate(SUBTASKS)}


def subtask_codes(categories: pd.Series) -> np.ndarray:
    """Index into `SUBTASKS` of each category (case-insensitive; spaces read as underscores)."""
    keys = categories.astype("string").str.strip().str.lower().str.replace(" ", "_", regex=False)
    codes = keys.map(_LOOKUP)
    if codes.isna().any():
        bad = categories[codes.isna()].iloc[0]
        raise VlmgridError(f"MME category {bad!r} is not one of the 14 MME subtasks: {', '.join(SUBTASKS)}")
    return codes.to_numpy(dtype=np.int64)


class MME(GroupedMetric):
    """MME perception / cognition scores (POINTS, not percent) and the scaled score (percent, headline).

    Source: BradyFU/Awesome-Multimodal-Large-Language-Models `tools/eval_tool/calculation.py` (see docs:
    official-scorers). Records: `category` (the subtask), `image_id` (the questions of one image share it),
    `answer` ("yes"/"no"). Predictions: `prediction` = "yes"/"no" as already parsed by the official rule
    (case-insensitive here).

    - Subtask score = 100 x acc + 100 x acc+, in points, max 200: acc = right questions / questions,
      acc+ = images whose questions are all right / images.
    - `perception` = sum of the scores of the perception subtasks present (existence, count, position, color,
      posters, celebrity, scene, landmark, artwork, OCR; max 2000 points with all 10); `cognition` = sum over
      the cognition subtasks present (commonsense_reasoning, numerical_calculation, text_translation,
      code_reasoning; max 800 points); `total` = perception + cognition (max 2800 points). POINTS, not
      percent.
    - `scaled` (headline, percent) = total / (200 x number of subtasks present) x 100; with all 14 subtasks,
      total / 2800 x 100. This is the number the CARPE average uses.
    - `accuracy` = right questions / questions and `accuracy_plus` = all-right images / images, pooled over
      all subtasks (percent).

    The breakdown by `category` is always included: there each subtask's `total` is its score (points), and
    its `perception` or `cognition` equals it.

    Format errors: a null prediction, an error row or any text other than yes/no is the official "other",
    which is always wrong (the question, and so its image for acc+), and counts as a format error.

    Bootstrap: resamples images (all of an image's questions together) within each subtask.
    """

    name = "mme"
    headline = "scaled"
    names = ("scaled", "total", "perception", "cognition", "accuracy", "accuracy_plus")
    stratify_by = "category"
    group_by = "image_id"
    record_columns = ("category", "image_id", "answer")
    prediction_columns = ("prediction",)

    def valid(self, records: pd.DataFrame, preds: pd.DataFrame) -> np.ndarray:
        return valid_yes_no(preds)

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        gold = gold_yes_no(records, "MME")
        pred = yes_no_text(preds["prediction"]).fillna("").to_numpy(dtype=object)
        right = self.valid(records, preds) & (pred == gold.to_numpy(dtype=object))
        out = group_arrays(self.group_codes(records), right)
        out["subtask"] = subtask_codes(records["category"])
        return out

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        rows = idx.shape[0]
        k = len(SUBTASKS)
        q_right, q_n = np.zeros((rows, k)), np.zeros((rows, k))
        i_right, i_n = np.zeros((rows, k)), np.zeros((rows, k))
        for sl in slices:
            if sl.stop <= sl.start:
                continue
            s = int(data["subtask"][sl.start])
            g = self.drawn_groups(data, idx, sl)
            q_right[:, s] += data["g_right"][g].sum(axis=1)
            q_n[:, s] += data["g_size"][g].sum(axis=1)
            i_right[:, s] += np.count_nonzero(data["g_all"][g], axis=1)
            i_n[:, s] += g.shape[1]
        present = i_n[0] > 0  # every resample keeps each stratum's groups
        score = 100.0 * safe_ratio(q_right, q_n) + 100.0 * safe_ratio(i_right, i_n)
        n_p = len(PERCEPTION)
        perception = score[:, :n_p].sum(axis=1)
        cognition = score[:, n_p:].sum(axis=1)
        total = perception + cognition
        return {
            "scaled": 100.0 * total / (200.0 * max(int(present.sum()), 1)),
            "total": total,
            "perception": perception,
            "cognition": cognition,
            "accuracy": 100.0 * safe_ratio(q_right.sum(axis=1), q_n.sum(axis=1)),
            "accuracy_plus": 100.0 * safe_ratio(i_right.sum(axis=1), i_n.sum(axis=1)),
        }
