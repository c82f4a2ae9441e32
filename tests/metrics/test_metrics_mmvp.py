"""MMVP: a pair scores only if both of its questions are right."""

import numpy as np
import pytest
from helpers.metrics import choice_frames, values

from vlmgrid.metrics import score_predictions


def frames(rows, errors=None):
    """rows: (pair_id, gold index, predicted index; -1 = unparsable)."""
    return choice_frames(rows, "Is the dog facing left or right?", ["left", "right"], "pair_id", errors)


def test_pairs_by_hand():
    # pair 1 both right, pair 2 one right, pair 3 none right
    rows = [(1, 0, 0), (1, 1, 1), (2, 0, 0), (2, 1, 0), (3, 0, 1), (3, 1, 0)]
    r = score_predictions("mmvp", *frames(rows), samples=100)
    assert r["metric"] == "pair_accuracy"
    assert values(r) == pytest.approx({"pair_accuracy": 100 / 3, "question_accuracy": 50.0}, abs=1e-4)


def test_unparsable_and_error_rows_break_their_pair():
    rows = [(1, 0, 0), (1, 1, 1), (2, 0, 0), (2, 1, -1), (3, 0, 0), (3, 1, 1)]
    errors = [None, None, None, None, "API failure", None]
    r = score_predictions("mmvp", *frames(rows, errors=errors), samples=10)
    assert values(r) == pytest.approx({"pair_accuracy": 100 / 3, "question_accuracy": 100 * 4 / 6}, abs=1e-4)
    assert r["format_error_rate"] == pytest.approx(100 * 2 / 6, abs=1e-4)
    assert r["n_errors"] == 1


def test_pair_ids_in_any_order():
    rows = [("b", 0, 0), ("a", 0, 0), ("b", 1, 1), ("a", 1, 0)]
    assert values(score_predictions("mmvp", *frames(rows), samples=10)) == {
        "pair_accuracy": 50.0,
        "question_accuracy": 75.0,
    }


def test_bootstrap_resamples_pairs():
    # every pair has exactly one right question: any resample of whole pairs has question accuracy 50
    rows = [row for p in range(30) for row in ((p, 0, 0), (p, 1, 0))]
    r = score_predictions("mmvp", *frames(rows), samples=300, seed=0)
    assert r["metrics"]["question_accuracy"]["ci95"] == [50.0, 50.0]
    assert r["value"] == 0.0


def test_bootstrap_ci_contains_value_and_is_deterministic():
    rng = np.random.default_rng(4)
    rows = [
        row
        for p in range(50)
        for row in ((p, 0, int(rng.random() < 0.2)), (p, 1, 1 - int(rng.random() < 0.3)))
    ]
    records, preds = frames(rows)
    a = score_predictions("mmvp", records, preds, samples=500, seed=0)
    assert a == score_predictions("mmvp", records, preds, samples=500, seed=0)
    assert (
        a["bootstrap"]["draws"]
        != score_predictions("mmvp", records, preds, samples=500, seed=1)["bootstrap"]["draws"]
    )
    assert a["ci95"][0] < a["value"] < a["ci95"][1]
    assert a["metrics"]["question_accuracy"]["ci95"][0] < a["metrics"]["question_accuracy"]["value"]
    # pair draws: the pair accuracy of every resample is a whole number of the 50 pairs
    draws = np.array(a["bootstrap"]["draws"]) * 50 / 100
    assert np.allclose(draws, np.round(draws), atol=1e-3)
