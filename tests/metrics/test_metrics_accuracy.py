"""Multiple-choice accuracy, variants and breakdowns against hand-computed values."""

import json

import numpy as np
import pandas as pd
import pytest

from vlmgrid.metrics import score_predictions


def records_frame(gold, **meta):
    n = len(gold)
    return pd.DataFrame(
        {
            "id": [f"m{i}" for i in range(n)],
            "question": ["Which?"] * n,
            "options": [["A", "B", "C", "D"]] * n,
            "answer": ["ABCD"[g] if g >= 0 else "" for g in gold],
            "answer_index": gold,
            **meta,
        }
    )


def preds_frame(pred, variant="default", errors=None):
    n = len(pred)
    return pd.DataFrame(
        {
            "id": [f"m{i}" for i in range(n)],
            "variant": variant,
            "raw": None,
            "prediction": ["ABCD"[p] if p >= 0 else None for p in pred],
            "prediction_index": pred,
            "scores": None,
            "topk": None,
            "error": errors if errors is not None else [None] * n,
        }
    )


def test_accuracy_counts_minus_one_rows_wrong():
    # m2 and m5 unparsed (-1); m5's gold is -1 too, which must not count as a match
    r = score_predictions(
        "accuracy", records_frame([0, 1, 2, 3, 1, -1]), preds_frame([0, 1, -1, 2, 1, -1]), samples=100
    )
    assert r["metric"] == "accuracy"
    assert r["value"] == 50.0  # 3 / 6
    assert r["metrics"]["valid_accuracy"]["value"] == 75.0  # 3 / 4 valid
    assert r["n_valid"] == 4
    assert r["format_error_rate"] == pytest.approx(33.3333, abs=1e-4)
    assert r["variants"] == {}


def test_error_row_is_wrong_even_with_matching_index():
    preds = preds_frame([0, 1, 2, 3], errors=[None, None, None, "timeout"])
    r = score_predictions("accuracy", records_frame([0, 1, 2, 3]), preds, samples=50)
    assert r["value"] == 75.0
    assert r["metrics"]["valid_accuracy"]["value"] == 100.0
    assert r["n_errors"] == 1 and r["format_error_rate"] == 25.0


def test_variants_are_averaged_with_paired_draws():
    records = records_frame([0, 1, 2, 3])
    v1 = preds_frame([0, 1, 2, 0], "v1")  # 75
    v2 = preds_frame([0, 0, 0, 0], "v2")  # 25
    both = pd.concat([v2.iloc[::-1], v1], ignore_index=True)
    r = score_predictions("accuracy", records, both, samples=300, seed=7)
    assert r["value"] == 50.0
    assert r["variants"]["v1"]["value"] == 75.0 and r["variants"]["v2"]["value"] == 25.0
    one = score_predictions("accuracy", records, v1, samples=300, seed=7)
    two = score_predictions("accuracy", records, v2, samples=300, seed=7)
    assert r["variants"]["v1"]["ci95"] == one["ci95"]
    expected = (np.array(one["bootstrap"]["draws"]) + np.array(two["bootstrap"]["draws"])) / 2
    assert np.allclose(r["bootstrap"]["draws"], expected, atol=1e-3)
    # paired: v1 and v2 see the same items, so item 0 (right in both) moves both together; an unpaired
    # mean of two independent bootstraps would not reproduce these draws
    assert r["n"] == 4 and r["format_error_rate"] == 0.0


def test_breakdown_by_metadata_column():
    records = records_frame([0, 1, 2, 3, 0], subject=["physics", "physics", "biology", "biology", "biology"])
    r = score_predictions(
        "accuracy", records, preds_frame([0, 0, 2, -1, 0]), breakdown_by=("subject", "absent"), samples=100
    )
    assert r["value"] == 60.0
    assert list(r["breakdown"]) == ["subject"]  # columns missing from records are skipped
    bd = r["breakdown"]["subject"]
    assert bd["physics"]["n"] == 2 and bd["physics"]["metrics"]["accuracy"]["value"] == 50.0
    assert bd["biology"]["n"] == 3
    assert bd["biology"]["metrics"]["accuracy"]["value"] == pytest.approx(66.6667, abs=1e-4)
    assert bd["biology"]["metrics"]["valid_accuracy"]["value"] == 100.0


def test_result_is_plain_json_with_all_fields():
    records = records_frame([0, 1, 2, 3], grade=[1, 1, 2, 2])
    r = score_predictions("accuracy", records, preds_frame([0, 1, 0, 0]), breakdown_by=["grade"], samples=20)
    assert set(r) == {
        "metric",
        "value",
        "ci95",
        "n",
        "n_valid",
        "n_errors",
        "format_error_rate",
        "metrics",
        "breakdown",
        "variants",
        "bootstrap",
    }
    assert json.loads(json.dumps(r)) == r
    assert type(r["value"]) is float and all(type(x) is float for x in r["ci95"])
    assert type(r["n"]) is int
    assert all(type(x) is float for x in r["bootstrap"]["draws"])
    assert set(r["breakdown"]["grade"]) == {"1", "2"}
    assert r["breakdown"]["grade"]["1"]["metrics"]["accuracy"]["value"] == 100.0
