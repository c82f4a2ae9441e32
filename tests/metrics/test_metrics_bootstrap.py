"""The seeded percentile bootstrap and the public entry points."""

import numpy as np
import pandas as pd
import pytest

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import METRICS, bootstrap_indices, percentile_ci, score_predictions


def mc(correct, seed=0):
    n = len(correct)
    gold = np.zeros(n, dtype=np.int64)
    records = pd.DataFrame({"id": [f"i{i}" for i in range(n)], "answer": "A", "answer_index": gold})
    preds = pd.DataFrame(
        {
            "id": records["id"],
            "variant": "default",
            "prediction": "x",
            "prediction_index": np.where(np.asarray(correct), 0, 1),
            "error": None,
        }
    )
    return records, preds


def test_ci_contains_value_and_draws_have_samples_entries():
    correct = np.random.default_rng(5).random(300) < 0.6
    r = score_predictions("accuracy", *mc(correct), samples=500, seed=1)
    lo, hi = r["ci95"]
    assert lo < r["value"] < hi
    assert 3 < hi - lo < 20  # about +-5.5 points for n=300, p=0.6
    assert len(r["bootstrap"]["draws"]) == 500
    assert r["bootstrap"]["samples"] == 500 and r["bootstrap"]["seed"] == 1


def test_deterministic_for_a_seed_and_changes_with_it():
    correct = np.arange(100) % 3 != 0
    a = score_predictions("accuracy", *mc(correct), samples=200, seed=11)
    b = score_predictions("accuracy", *mc(correct), samples=200, seed=11)
    c = score_predictions("accuracy", *mc(correct), samples=200, seed=12)
    assert a == b
    assert a["bootstrap"]["draws"] != c["bootstrap"]["draws"]
    assert a["value"] == c["value"]


def test_draws_are_the_documented_resamples():
    correct = np.arange(40) % 4 == 0
    r = score_predictions("accuracy", *mc(correct), samples=64, seed=9)
    idx = np.concatenate(list(bootstrap_indices([np.arange(40)], 64, 9)))
    expected = 100 * correct[idx].mean(axis=1)
    assert np.allclose(r["bootstrap"]["draws"], expected, atol=1e-4)
    lo, hi = np.percentile(expected, [2.5, 97.5])
    assert r["ci95"] == pytest.approx([lo, hi], abs=1e-4)


def test_all_right_gives_degenerate_ci():
    r = score_predictions("accuracy", *mc([True] * 25), samples=100)
    assert r["value"] == 100.0
    assert r["ci95"] == [100.0, 100.0]
    assert set(r["bootstrap"]["draws"]) == {100.0}


def test_stratified_indices_keep_each_stratum_size():
    strata = [np.array([0, 3, 5]), np.array([1, 2, 4, 6, 7, 8, 9])]
    chunks = list(bootstrap_indices(strata, 50, 0, chunk_entries=100))
    assert len(chunks) > 1  # chunking is exercised
    idx = np.concatenate(chunks)
    assert idx.shape == (50, 10)
    assert np.isin(idx[:, :3], strata[0]).all()
    assert np.isin(idx[:, 3:], strata[1]).all()
    # the draws vary within a stratum (it is a resample, not a copy)
    assert len(np.unique(idx[:, 3:])) == 7


def test_percentile_ci():
    assert percentile_ci(np.arange(101.0)) == pytest.approx((2.5, 97.5))


def test_unknown_metric_names_the_closest():
    assert list(METRICS) == [
        "accuracy",
        "classification",
        "cvbench",
        "cvqa",
        "dance",
        "kaleidoscope",
        "mmbench_circular",
        "mme",
        "mmvp",
        "pope",
        "vqa_accuracy",
    ]
    with pytest.raises(VlmgridError, match='did you mean "accuracy"'):
        score_predictions("acuracy", *mc([True, False]))


def test_bad_inputs_raise_vlmgrid_errors():
    records, preds = mc([True, False, True])
    with pytest.raises(VlmgridError, match="i2"):
        score_predictions("accuracy", records, preds.iloc[:2])
    with pytest.raises(VlmgridError, match="samples"):
        score_predictions("accuracy", records, preds, samples=0)
    with pytest.raises(VlmgridError, match="answer_index"):
        score_predictions("accuracy", records.drop(columns="answer_index"), preds)


def test_fifty_thousand_items_give_a_narrow_interval():
    correct = np.random.default_rng(0).random(50_000) < 0.7
    records, preds = mc(correct)
    r = score_predictions("accuracy", records, preds, samples=1000, seed=0)
    assert r["value"] == pytest.approx(100 * correct.mean(), abs=1e-4)
    assert r["ci95"][1] - r["ci95"][0] < 1.0
