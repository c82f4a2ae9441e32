"""Kaleidoscope: accuracy averaged over languages, valid-only accuracy, and the format error rate."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vlmgrid.metrics.accuracy import Accuracy
from vlmgrid.metrics.base import count_true, safe_ratio


class Kaleidoscope(Accuracy):
    """Kaleidoscope's numbers, in percent, as the authors compute them (israfelsr/kaleidoscope `eval_utils.py`
    `compute_accuracy` and `get_summary`, and the summary cell of `evaluation.ipynb`).

    Per question: valid when the answer was read as one of the item's options (no `error`, a non-null
    `prediction`, `prediction_index` >= 0); correct when valid and `prediction_index == answer_index`.
    Per language: accuracy = correct / questions (an invalid answer counts as wrong); valid accuracy =
    correct / valid questions.

    - `accuracy` (headline): the mean of the languages' accuracies (macro: every language weighs the same);
    - `valid_accuracy`: the mean of the languages' valid accuracies, over the languages with at least one
      valid answer (the authors' mean would be undefined otherwise); 0 when no answer is valid;
    - `format_error_rate`: invalid answers / all questions, over all languages together (micro), as the
      authors' "failure rate" 1 - sum(valid) / sum(total).

    Records: `language` (the strata), `answer_index`. Without a `language` column the records form one
    language. Bootstrap: questions are resampled within each language.
    """

    name = "kaleidoscope"
    headline = "accuracy"
    names = ("accuracy", "valid_accuracy", "format_error_rate")
    stratify_by = "language"
    # `prepare` (per item: right, valid) is Accuracy's; only the averaging over languages differs.

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        rows = idx.shape[0]
        accuracy, valid_accuracy = np.zeros(rows), np.zeros(rows)
        languages_with_valid, valid_total = np.zeros(rows), np.zeros(rows)
        for sl in slices:
            cols = idx[:, sl]
            right = count_true(data["correct"][cols])
            valid = count_true(data["valid"][cols])
            accuracy += right / cols.shape[1]
            valid_accuracy += safe_ratio(right, valid)
            languages_with_valid += valid > 0
            valid_total += valid
        return {
            "accuracy": 100.0 * accuracy / len(slices),
            "valid_accuracy": 100.0 * safe_ratio(valid_accuracy, languages_with_valid),
            "format_error_rate": 100.0 * (1.0 - valid_total / idx.shape[1]),
        }
