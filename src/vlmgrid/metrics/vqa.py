"""VQA accuracy (TextVQA), scored the way facebookresearch/mmf's `TextVQAAccuracyEvaluator` does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import Metric
from vlmgrid.metrics.vqa_normalise import normalise_answer


def _answer_list(value) -> list[str]:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        return [value]
    return [str(a) for a in value if a is not None]


def vqa_score(prediction: str, answers: Sequence[str]) -> float:
    """Soft score in [0, 1] of one normalised prediction against the normalised human answers.

    With n answers of which m equal the prediction: the mean, over the n answers left out in turn, of
    min(1, matches among the other n - 1 / 3), i.e. (m x min(1, (m - 1) / 3) + (n - m) x min(1, m / 3)) / n.
    With the usual 10 answers: m = 0 -> 0, 1 -> 0.3, 2 -> 0.6, 3 -> 0.9, 4 or more -> 1. No answers -> 0.
    """
    n = len(answers)
    if n == 0:
        return 0.0
    m = sum(1 for a in answers if a == prediction)
    return (m * min(1.0, (m - 1) / 3) + (n - m) * min(1.0, m / 3)) / n


class VQAAccuracy(Metric):
    """VQA accuracy (headline `vqa_accuracy`, percent), the TextVQA rule of mmf.

    Source: facebookresearch/mmf `mmf/utils/m4c_evaluators.py` (`TextVQAAccuracyEvaluator`; the VQA rule of
    GT-Vision-Lab/VQA `vqaEval.py`; see docs: official-scorers). Records: `answers` (the human answers, 10
    for TextVQA). Predictions: `prediction` (the model's raw short answer text).

    - The prediction and every answer are normalised alike by `vqa_normalise.normalise_answer`.
    - Question score: for each answer left out in turn, min(1, matches of the prediction among the other
      answers / 3); the mean over the left-out answers (`vqa_score`). mmf asserts exactly 10 answers; an
      item with another number n of answers is scored by the same formula over its n answers (n - 1 others
      each time), and an item with no answers scores 0.
    - `vqa_accuracy` = 100 x the mean question score.

    Format errors: a row with an `error` or a null `prediction` scores 0 and counts as a format error.

    Bootstrap: resamples items.
    """

    name = "vqa_accuracy"
    headline = "vqa_accuracy"
    names = ("vqa_accuracy",)
    record_columns = ("answers",)
    prediction_columns = ("prediction",)

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        valid = self.valid(records, preds)
        scores = np.zeros(len(records))
        predictions = preds["prediction"].tolist()
        answers = records["answers"].tolist()
        for i in np.flatnonzero(valid):
            gold = [normalise_answer(a) for a in _answer_list(answers[i])]
            scores[i] = vqa_score(normalise_answer(predictions[i]), gold)
        return {"score": scores}

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        return {"vqa_accuracy": 100.0 * data["score"][idx].mean(axis=1)}
