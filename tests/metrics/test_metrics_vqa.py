"""VQA accuracy (TextVQA rule of mmf): answer normalisation and the leave-one-out soft score."""

import itertools

import numpy as np
import pandas as pd
import pytest

from vlmgrid.metrics import normalise_answer, score_predictions
from vlmgrid.metrics.vqa import vqa_score


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Two", "2"),
        ("none", "0"),
        ("ten", "10"),
        ("the dog's", "dog 's"),  # "'s" split off, article dropped
        ("dont", "don't"),
        ("Wont", "won't"),
        ("1,000", "1000"),  # commas are deleted first
        ("hello.", "hello"),  # a period not followed by a digit is deleted
        ("3.5", "3.5"),  # ... followed by a digit it stays
        ("What?", "what"),
        ("A Red Car", "red car"),
        ("an apple", "apple"),
        ("red-white", "red white"),  # no mark next to a space: replaced by a space
        ("red - white", "red white"),  # next to a space: deleted
        ("(yes)", "yes"),
        ("yes!", "yes"),
        ("10:30", "10:30"),  # ':' is not in the punctuation list
        ("  Coca\tCola\n", "coca cola"),
        ("", ""),
    ],
)
def test_normalise_answer_official_examples(text, expected):
    assert normalise_answer(text) == expected


def brute_force(pred, answers):
    """The official loop: each answer left out in turn, min(1, matches among the others / 3), averaged."""
    accs = []
    for left_out in range(len(answers)):
        others = [a for j, a in enumerate(answers) if j != left_out]
        accs.append(min(1.0, sum(a == pred for a in others) / 3))
    return sum(accs) / len(accs)


@pytest.mark.parametrize(
    ("matches", "expected"), [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0), (7, 1.0), (10, 1.0)]
)
def test_leave_one_out_score_of_ten_answers(matches, expected):
    answers = ["cat"] * matches + ["dog"] * (10 - matches)
    assert vqa_score("cat", answers) == pytest.approx(expected)
    assert brute_force("cat", answers) == pytest.approx(expected)


def test_fewer_answers_follow_the_same_formula():
    for n, m in itertools.product(range(1, 10), range(0, 10)):
        if m > n:
            continue
        answers = ["cat"] * m + ["dog"] * (n - m)
        assert vqa_score("cat", answers) == pytest.approx(brute_force("cat", answers))
    # 5 answers, 2 match: (2 x 1/3 + 3 x 2/3) / 5
    assert vqa_score("cat", ["cat", "cat", "dog", "dog", "cow"]) == pytest.approx(8 / 15)
    assert vqa_score("cat", []) == 0.0


def frames(preds_text, answers, errors=None):
    n = len(preds_text)
    ids = [f"q{i}" for i in range(n)]
    records = pd.DataFrame(
        {
            "id": ids,
            "question": ["What does the sign say?"] * n,
            "options": [[]] * n,
            "answer": [a[0] for a in answers],
            "answer_index": -1,
            "answers": answers,
        }
    )
    preds = pd.DataFrame(
        {
            "id": ids,
            "variant": "default",
            "raw": preds_text,
            "prediction": preds_text,
            "prediction_index": -1,
            "error": errors if errors is not None else [None] * n,
        }
    )
    return records, preds


def test_score_predictions_with_normalisation_and_null():
    answers = [
        ["2 dogs"] * 2 + ["dogs"] * 8,  # "Two dogs." normalises to "2 dogs": 2 of 10 -> 0.6
        ["stop"] * 3 + ["halt"] * 7,  # "STOP" -> 3 of 10 -> 0.9
        ["coca cola"] * 4 + ["coke"] * 6,  # 4 of 10 -> 1.0
        ["yes"] * 10,  # null prediction: 0, a format error
    ]
    r = score_predictions(
        "vqa_accuracy", *frames(["Two dogs.", "STOP", "Coca-Cola", None], answers), samples=200
    )
    assert r["metric"] == "vqa_accuracy"
    # "Coca-Cola" -> "coca cola"
    assert r["value"] == pytest.approx(100 * (0.6 + 0.9 + 1.0 + 0.0) / 4, abs=1e-4)
    assert r["format_error_rate"] == 25.0 and r["n_valid"] == 3


def test_answers_are_normalised_too_and_error_rows_score_zero():
    answers = [["The Cat"] * 10, ["cat"] * 10]
    r = score_predictions(
        "vqa_accuracy", *frames(["cat", "cat"], answers, errors=[None, "timeout"]), samples=10
    )
    assert r["value"] == 50.0
    assert r["n_errors"] == 1


def test_numpy_answer_arrays_from_parquet():
    answers = [np.array(["two"] * 10, dtype=object)]
    assert score_predictions("vqa_accuracy", *frames(["2"], answers), samples=10)["value"] == 100.0


def test_bootstrap_ci_contains_value_and_is_deterministic():
    rng = np.random.default_rng(0)
    answers, preds = [], []
    for _ in range(60):
        m = int(rng.integers(0, 11))
        answers.append(["yes"] * m + ["no"] * (10 - m))
        preds.append("yes")
    records, p = frames(preds, answers)
    a = score_predictions("vqa_accuracy", records, p, samples=500, seed=0)
    assert a == score_predictions("vqa_accuracy", records, p, samples=500, seed=0)
    assert (
        a["bootstrap"]["draws"]
        != score_predictions("vqa_accuracy", records, p, samples=500, seed=1)["bootstrap"]["draws"]
    )
    assert a["ci95"][0] < a["value"] < a["ci95"][1]
