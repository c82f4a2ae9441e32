"""The DANCE metric: Acc@50 (positives within the top n), Hit@1/5, Recall@5, MRR, averaged per direction."""

import pandas as pd
import pytest

from vlmgrid.metrics import METRICS, score_predictions
from vlmgrid.metrics.dance import rank_query


def test_acc_at_50_counts_the_positives_within_the_top_n():
    # candidates ranked 3, 1, 0, 2, 4 (by score); positives 1 and 2: one of the two within the top 2
    scores = [0.5, 0.8, 0.1, 0.9, 0.0]
    assert rank_query(scores, [1, 2]) == {
        "acc_at_50": 0.5,
        "hit_at_1": 0.0,
        "hit_at_5": 1.0,
        "recall_at_5": 1.0,
        "mrr": 0.5,
    }
    assert rank_query(scores, [3]) == {
        "acc_at_50": 1.0,
        "hit_at_1": 1.0,
        "hit_at_5": 1.0,
        "recall_at_5": 1.0,
        "mrr": 1.0,
    }
    assert rank_query(scores, [1, 3]) == {
        "acc_at_50": 1.0,
        "hit_at_1": 1.0,
        "hit_at_5": 1.0,
        "recall_at_5": 1.0,
        "mrr": 1.0,
    }


def test_hit_at_k_is_a_hit_rate_and_recall_at_5_the_share_of_the_positives():
    scores = [float(50 - k) for k in range(50)]  # candidate k ranked k-th
    # 8 positives, two of them in the top 5: a hit at 5, but 2 of 8 positives recalled
    many = rank_query(scores, [0, 4, 10, 11, 12, 13, 14, 15])
    assert (many["hit_at_1"], many["hit_at_5"], many["recall_at_5"]) == (1.0, 1.0, 0.25)
    assert many["acc_at_50"] == 2 / 8  # positives 0 and 4 within the top 8
    assert rank_query(scores, [5, 6])["hit_at_5"] == 0.0


def test_a_single_positive_must_be_first_and_top_50_of_50_would_say_nothing():
    scores = [float(50 - k) for k in range(50)]  # candidate k ranked k-th
    assert rank_query(scores, [6]) == {
        "acc_at_50": 0.0,
        "hit_at_1": 0.0,
        "hit_at_5": 0.0,
        "recall_at_5": 0.0,
        "mrr": pytest.approx(1 / 7),
    }
    assert rank_query(scores, [49])["acc_at_50"] == 0.0  # last of 50: "within the top 50", yet wrong


def test_ties_rank_in_candidate_order():
    assert rank_query([1.0, 1.0, 1.0], [1])["mrr"] == pytest.approx(0.5)


def frame(rows):
    records = pd.DataFrame(
        [
            {
                "id": i,
                "positives": p,
                "options": ["a", "b", "c", "d"],
                "direction": d,
                "split": s,
                "subset": f"{s} {d}",
            }
            for i, p, _, d, s in rows
        ]
    )
    preds = pd.DataFrame(
        [
            {
                "id": i,
                "variant": "default",
                "prediction": None if sc is None else "a",
                "scores": sc,
                "error": None,
            }
            for i, _, sc, _, _ in rows
        ]
    )
    return records, preds


ROWS = [
    # id, positives, scores, direction, split
    ("q1", [0], [0.9, 0.1, 0.2, 0.3], "riddle-to-image", "test-seen"),  # acc 1, rr 1
    ("q2", [0, 1], [0.1, 0.9, 0.8, 0.0], "riddle-to-image", "test-unseen"),  # acc 1/2, rr 1
    ("q3", [2], [0.9, 0.8, 0.7, 0.0], "image-to-riddle", "test-seen"),  # acc 0, rr 1/3
    ("q4", [3], None, "image-to-riddle", "test-unseen"),  # format error: 0
]


def test_headline_is_the_mean_of_the_directions_with_a_cell_per_split_and_direction():
    records, preds = frame(ROWS)
    score = score_predictions("dance", records, preds, breakdown_by=("split", "subset"), samples=200, seed=0)
    assert score["metric"] == "acc_at_50"
    # riddle-to-image (1 + 0.5) / 2 = 75, image-to-riddle (0 + 0) / 2 = 0 -> 37.5
    assert score["value"] == pytest.approx(37.5)
    assert score["metrics"]["mrr"]["value"] == pytest.approx(100 * ((1 + 1) / 2 + (1 / 3 + 0) / 2) / 2)
    assert score["metrics"]["hit_at_1"]["value"] == pytest.approx(50.0)
    # q2's two positives are both within its top 5 (4 candidates): recall 1, like q1's single one
    assert score["metrics"]["recall_at_5"]["value"] == pytest.approx(100 * ((1 + 1) / 2 + (1 + 0) / 2) / 2)
    assert score["n"] == 4 and score["n_valid"] == 3 and score["format_error_rate"] == pytest.approx(25.0)
    assert score["breakdown"]["direction"]["riddle-to-image"]["metrics"]["acc_at_50"][
        "value"
    ] == pytest.approx(75.0)
    assert score["breakdown"]["split"]["test-seen"]["metrics"]["acc_at_50"]["value"] == pytest.approx(50.0)
    cells = score["breakdown"]["subset"]
    assert set(cells) == {
        "test-seen riddle-to-image",
        "test-unseen riddle-to-image",
        "test-seen image-to-riddle",
        "test-unseen image-to-riddle",
    }
    assert cells["test-unseen riddle-to-image"]["metrics"]["acc_at_50"]["value"] == pytest.approx(50.0)
    assert score["ci95"][0] <= score["value"] <= score["ci95"][1]


def test_scores_of_the_wrong_length_are_a_format_error():
    records, preds = frame(ROWS[:1])
    preds.at[0, "scores"] = [0.9, 0.1]
    score = score_predictions("dance", records, preds, samples=20, seed=0)
    assert score["value"] == 0.0 and score["format_error_rate"] == 100.0


def test_registered():
    assert METRICS.get("dance").headline == "acc_at_50"
