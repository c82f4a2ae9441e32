"""The Kaleidoscope metric against values computed by hand."""

import numpy as np
import pandas as pd
import pytest

from vlmgrid.metrics import METRICS, score_predictions

# en: right, right, unparsable, wrong -> accuracy 2/4, valid accuracy 2/3
# ar: error row, unparsable        -> accuracy 0/2, no valid answer
# ru: right, wrong                 -> accuracy 1/2, valid accuracy 1/2
LANGUAGES = ["en", "en", "en", "en", "ar", "ar", "ru", "ru"]
GOLD = [0, 1, 2, 3, 0, 1, 0, 1]
PRED = [0, 1, -1, 0, -1, -1, 0, 0]
ERROR = [None, None, None, None, "image could not be read", None, None, None]
MODALITY = [
    "multimodal",
    "multimodal",
    "text-only",
    "text-only",
    "multimodal",
    "text-only",
    "multimodal",
    "text-only",
]


def records() -> pd.DataFrame:
    options = [["w", "x", "y", "z"]] * len(GOLD)
    return pd.DataFrame(
        {
            "id": [f"train-{i}" for i in range(len(GOLD))],
            "image": None,
            "question": "q",
            "options": options,
            "answer": [o[g] for o, g in zip(options, GOLD)],
            "answer_index": GOLD,
            "language": LANGUAGES,
            "modality": MODALITY,
        }
    )


def predictions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"train-{i}" for i in range(len(GOLD))],
            "variant": "json",
            "raw": ['{"choice": "A"}'] * len(GOLD),
            "prediction": [None if p < 0 else "wxyz"[p] for p in PRED],
            "prediction_index": PRED,
            "scores": None,
            "topk": None,
            "error": ERROR,
        }
    )


@pytest.fixture(scope="module")
def score():
    return score_predictions(
        "kaleidoscope", records(), predictions(), breakdown_by=("language", "modality"), samples=200, seed=0
    )


def test_headline_is_the_mean_over_languages(score):
    assert score["metric"] == "accuracy"
    # (2/4 + 0/2 + 1/2) / 3; the micro accuracy 3/8 would be 37.5
    assert score["value"] == pytest.approx(100 * (0.5 + 0 + 0.5) / 3, abs=1e-3)


def test_valid_accuracy_averages_the_languages_with_a_valid_answer(score):
    # (2/3 + 1/2) / 2; Arabic has no valid answer; the micro 3/5 would be 60
    assert score["metrics"]["valid_accuracy"]["value"] == pytest.approx(100 * (2 / 3 + 1 / 2) / 2, abs=1e-3)


def test_format_error_rate_is_over_all_questions(score):
    # 3 invalid answers (one unparsable in en, an error row and an unparsable in ar) of 8
    assert score["metrics"]["format_error_rate"]["value"] == pytest.approx(37.5)
    assert score["format_error_rate"] == pytest.approx(37.5)
    assert score["n"] == 8 and score["n_valid"] == 5 and score["n_errors"] == 1


def test_breakdowns_per_language_and_modality(score):
    by_language = score["breakdown"]["language"]
    assert {k: v["n"] for k, v in by_language.items()} == {"ar": 2, "en": 4, "ru": 2}
    assert by_language["en"]["metrics"]["accuracy"]["value"] == pytest.approx(50.0)
    assert by_language["en"]["metrics"]["valid_accuracy"]["value"] == pytest.approx(200 / 3, abs=1e-3)
    assert by_language["ar"]["metrics"]["format_error_rate"]["value"] == pytest.approx(100.0)
    assert by_language["ar"]["metrics"]["valid_accuracy"]["value"] == 0.0
    multimodal = score["breakdown"]["modality"]["multimodal"]["metrics"]
    # en: 2 of 2 right, ar: its one item an error, ru: 1 of 1 right -> (1 + 0 + 1) / 3
    assert multimodal["accuracy"]["value"] == pytest.approx(200 / 3, abs=1e-3)
    text_only = score["breakdown"]["modality"]["text-only"]["metrics"]
    # en: unparsable and wrong, ar: unparsable, ru: wrong -> accuracy 0; 2 of the 4 answers invalid
    assert text_only["accuracy"]["value"] == 0.0
    assert text_only["format_error_rate"]["value"] == pytest.approx(50.0)


def test_ci_brackets_every_value(score):
    for entry in score["metrics"].values():
        assert entry["ci95"][0] <= entry["value"] <= entry["ci95"][1]


def test_perfect_and_all_invalid_answers():
    metric = METRICS.get("kaleidoscope")
    recs = records()
    perfect = predictions().assign(prediction_index=GOLD, prediction="x", error=None)
    data = metric.prepare(recs, perfect)
    slices = [slice(0, 4), slice(4, 6), slice(6, 8)]
    values = metric.compute(data, np.arange(8)[None, :], slices)
    assert values["accuracy"][0] == 100.0 and values["valid_accuracy"][0] == 100.0
    assert values["format_error_rate"][0] == 0.0
    nothing = predictions().assign(prediction_index=-1, prediction=None)
    values = metric.compute(metric.prepare(recs, nothing), np.arange(8)[None, :], slices)
    assert (values["accuracy"][0], values["valid_accuracy"][0], values["format_error_rate"][0]) == (
        0.0,
        0.0,
        100.0,
    )


def test_without_a_language_column_the_records_are_one_language():
    recs = records().drop(columns=["language"])
    score = score_predictions("kaleidoscope", recs, predictions(), samples=50, seed=0)
    assert score["value"] == pytest.approx(100 * 3 / 8)  # plain accuracy over all questions
