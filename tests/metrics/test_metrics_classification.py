"""Classification metric (top-1, top-5, mean per-class recall) against hand-computed values."""

import numpy as np
import pandas as pd
import pytest

from vlmgrid.metrics import score_predictions


def case():
    gold = [0, 0, 1, 2, 2, 2]
    records = pd.DataFrame(
        {
            "id": [f"img{i}" for i in range(6)],
            "question": "",
            "options": [[] for _ in range(6)],
            "answer": [f"c{g}" for g in gold],
            "answer_index": gold,
        }
    )
    predictions = pd.DataFrame(
        {
            "id": [f"img{i}" for i in range(6)],
            "variant": "default",
            "raw": None,
            "prediction": ["c0", "c1", "c1", "c0", None, "c2"],
            "prediction_index": [0, 1, 1, 0, -1, 2],
            "scores": None,
            "topk": [
                [0, 1, 2, 3, 4],  # hit at rank 1
                np.array([1, 0, 3, 4, 5]),  # hit at rank 2
                None,  # no topk: falls back to prediction_index (1 == gold 1)
                [0, 1, 3, 4, 5, 2],  # gold only at rank 6: not top-5
                [2, 0, 1, 3, 4],  # error row: wrong whatever its topk says
                [2, 0, 1, 3, 4],
            ],
            "error": [None, None, None, None, "unreadable image", None],
        }
    )
    return records, predictions


def test_top1_top5_and_mean_per_class_recall_by_hand():
    r = score_predictions("classification", *case(), samples=200)
    assert r["metric"] == "top1"
    assert r["value"] == 50.0  # right: img0, img2, img5
    vals = {k: v["value"] for k, v in r["metrics"].items()}
    assert list(vals) == ["top1", "top5", "mean_per_class_recall"]
    assert vals["top5"] == pytest.approx(66.6667, abs=1e-4)  # img0, img1, img2, img5
    # class 0: 1/2, class 1: 1/1, class 2: 1/3 -> mean 11/18
    assert vals["mean_per_class_recall"] == pytest.approx(100 * 11 / 18, abs=1e-4)
    assert r["n"] == 6 and r["n_valid"] == 5 and r["n_errors"] == 1
    assert r["format_error_rate"] == pytest.approx(16.6667, abs=1e-4)


def test_prediction_order_does_not_matter():
    records, preds = case()
    shuffled = preds.iloc[[5, 3, 1, 0, 4, 2]].reset_index(drop=True)
    assert score_predictions("classification", records, shuffled, samples=100) == score_predictions(
        "classification", records, preds, samples=100
    )


def test_minus_one_without_error_is_wrong_and_a_format_error():
    records, preds = case()
    preds.loc[0, ["prediction", "prediction_index"]] = [None, -1]
    r = score_predictions("classification", records, preds, samples=50)
    assert r["value"] == pytest.approx(100 * 2 / 6, abs=1e-4)
    assert r["metrics"]["top5"]["value"] == 50.0  # img0's topk no longer counts
    assert r["format_error_rate"] == pytest.approx(100 * 2 / 6, abs=1e-4)
    assert r["n_errors"] == 1


def test_mean_per_class_recall_differs_from_top1_on_imbalanced_classes():
    # 9 items of class 0 all right, 1 item of class 1 wrong: top1 90, mean per-class recall 50
    records = pd.DataFrame({"id": list("abcdefghij"), "answer_index": [0] * 9 + [1], "answer": ""})
    preds = pd.DataFrame(
        {
            "id": list("abcdefghij"),
            "variant": "default",
            "prediction": "x",
            "prediction_index": [0] * 10,
            "topk": None,
            "error": None,
        }
    )
    r = score_predictions("classification", records, preds, samples=100)
    assert r["value"] == 90.0
    assert r["metrics"]["mean_per_class_recall"]["value"] == 50.0
    assert r["metrics"]["top5"]["value"] == 90.0  # topk null everywhere: top5 == top1
