"""MMBench circular metric: a group scores only if every rotation is right."""

import numpy as np
import pandas as pd
import pytest
from helpers.metrics import values

from vlmgrid.metrics import score_predictions


def frames(rows, errors=None):
    """rows: (circular_group, circular_shift, gold index, predicted index or None)."""
    n = len(rows)
    ids = [f"{g + s * 1_000_000}" for g, s, _, _ in rows]
    records = pd.DataFrame(
        {
            "id": ids,
            "question": ["Which option?"] * n,
            "options": [["A", "B", "C", "D"]] * n,
            "answer": ["x"] * n,
            "answer_index": [r[2] for r in rows],
            "circular_group": [r[0] for r in rows],
            "circular_shift": [r[1] for r in rows],
            "category": ["ocr" if r[0] % 2 else "scene" for r in rows],
        }
    )
    preds = pd.DataFrame(
        {
            "id": ids,
            "variant": "default",
            "prediction": [None if r[3] is None else "x" for r in rows],
            "prediction_index": [-1 if r[3] is None else r[3] for r in rows],
            "error": errors if errors is not None else [None] * n,
        }
    )
    return records, preds


def two_groups(b_shift0=2, b_shift2=1):
    # group 7: all four rotations right; group 8: rotation 2 wrong
    rows = [(7, s, (s + 1) % 4, (s + 1) % 4) for s in range(4)]
    rows += [(8, 0, 2, b_shift0), (8, 1, 3, 3), (8, 2, 0, b_shift2), (8, 3, 1, 1)]
    return rows


def test_one_wrong_rotation_zeroes_the_group():
    r = score_predictions("mmbench_circular", *frames(two_groups()), samples=100)
    assert r["metric"] == "circular_accuracy"
    assert values(r) == {"circular_accuracy": 50.0, "vanilla_accuracy": 100.0}
    assert r["n"] == 8 and r["format_error_rate"] == 0.0


def test_all_rotations_right_scores_every_group():
    r = score_predictions("mmbench_circular", *frames(two_groups(b_shift2=0)), samples=10)
    assert values(r) == {"circular_accuracy": 100.0, "vanilla_accuracy": 100.0}


def test_unreadable_rotation_makes_the_group_wrong():
    rows = two_groups(b_shift0=None, b_shift2=0)  # group 8: the original order cannot be read
    r = score_predictions("mmbench_circular", *frames(rows), samples=10)
    assert values(r) == {"circular_accuracy": 50.0, "vanilla_accuracy": 50.0}
    assert r["format_error_rate"] == pytest.approx(12.5)
    assert r["n_valid"] == 7
    # an error row is wrong even if its index matches
    rows = two_groups(b_shift2=0)
    errors = [None] * 8
    errors[1] = "timeout"
    r = score_predictions("mmbench_circular", *frames(rows, errors=errors), samples=10)
    assert values(r) == {"circular_accuracy": 50.0, "vanilla_accuracy": 100.0}


def test_breakdown_by_category_scores_groups():
    r = score_predictions("mmbench_circular", *frames(two_groups()), breakdown_by=("category",), samples=10)
    cats = r["breakdown"]["category"]
    assert cats["ocr"]["n"] == 4 and cats["scene"]["n"] == 4
    assert cats["ocr"]["metrics"]["circular_accuracy"]["value"] == 100.0  # group 7
    assert cats["scene"]["metrics"]["circular_accuracy"]["value"] == 0.0  # group 8


def test_bootstrap_draws_whole_groups_within_each_group_size():
    # group 1 (4 rotations) right; groups 2 and 3 (2 rotations each) wrong
    rows = [(1, s, 0, 0) for s in range(4)] + [(2, 0, 0, 1), (2, 1, 1, 1), (3, 0, 1, 0), (3, 1, 0, 0)]
    a = score_predictions("mmbench_circular", *frames(rows), samples=300, seed=5)
    assert a["value"] == pytest.approx(100 / 3, abs=1e-4)
    # the only 4-rotation group is drawn once in every resample, the 2-rotation ones are both wrong
    assert np.allclose(a["bootstrap"]["draws"], 100 / 3, atol=1e-4)


def test_bootstrap_ci_contains_value_and_is_deterministic():
    rng = np.random.default_rng(0)
    rows = []
    for g in range(40):
        for s in range(4):
            gold = int(rng.integers(0, 4))
            rows.append((g, s, gold, gold if rng.random() < 0.85 else (gold + 1) % 4))
    records, preds = frames(rows)
    a = score_predictions("mmbench_circular", records, preds, samples=500, seed=0)
    b = score_predictions("mmbench_circular", records, preds, samples=500, seed=0)
    c = score_predictions("mmbench_circular", records, preds, samples=500, seed=1)
    assert a == b
    assert a["bootstrap"]["draws"] != c["bootstrap"]["draws"]
    assert a["ci95"][0] < a["value"] < a["ci95"][1]
    for m in a["metrics"].values():
        assert m["ci95"][0] <= m["value"] <= m["ci95"][1]
    # group draws: the circular accuracy of each resample is a whole number of the 40 groups
    draws = np.array(a["bootstrap"]["draws"]) * 40 / 100
    assert np.allclose(draws, np.round(draws), atol=1e-3)
