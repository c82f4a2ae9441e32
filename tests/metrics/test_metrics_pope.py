"""POPE metric against hand-computed confusion counts."""

import pytest
from helpers.metrics import values, yes_no_frames

from vlmgrid.metrics import score_predictions


def frames(gold, pred, split=None, errors=None):
    columns = {} if split is None else {"split": split}
    return yes_no_frames("Is there a dog in the image?", gold, pred, errors, **columns)


def test_six_items_by_hand_with_null_read_as_yes():
    # TP: q0, q2; FN: q1; FP: q3 and q5 (null -> yes); TN: q4
    records, preds = frames(["yes", "yes", "yes", "no", "no", "no"], ["yes", "no", "yes", "yes", "no", None])
    r = score_predictions("pope", records, preds, samples=200)
    assert r["metric"] == "f1"
    assert r["value"] == pytest.approx(100 * 4 / 7, abs=1e-4)  # 2TP / (2TP + FP + FN) = 4/7
    assert values(r) == pytest.approx(
        {"f1": 57.1429, "accuracy": 50.0, "precision": 50.0, "recall": 66.6667, "yes_ratio": 66.6667},
        abs=1e-4,
    )
    assert r["n"] == 6
    assert r["n_valid"] == 5
    assert r["n_errors"] == 0
    assert r["format_error_rate"] == pytest.approx(16.6667, abs=1e-4)
    assert r["breakdown"] == {}  # no split column, nothing asked for


def test_null_counts_as_yes_not_as_no():
    gold = ["yes", "yes", "yes", "no", "no", "no"]
    as_null = score_predictions("pope", *frames(gold, ["yes", "no", "yes", "yes", "no", None]), samples=10)
    as_no = score_predictions("pope", *frames(gold, ["yes", "no", "yes", "yes", "no", "no"]), samples=10)
    as_yes = score_predictions("pope", *frames(gold, ["yes", "no", "yes", "yes", "no", "yes"]), samples=10)
    assert as_no["value"] == pytest.approx(100 * 4 / 6, abs=1e-4)  # FP 1 -> F1 = 4/6
    assert values(as_null) == values(as_yes)
    assert as_null["format_error_rate"] > 0 and as_yes["format_error_rate"] == 0


def test_error_rows_and_unparsable_text_read_as_yes_and_count_as_format_errors():
    gold = ["yes", "no", "no", "no"]
    # q1 is an error row whose prediction says "no": still read as yes; q2 "maybe" -> yes
    records, preds = frames(gold, ["YES", " No ", "maybe", "no"], errors=[None, "API failure", None, None])
    preds.loc[1, "prediction"] = "no"
    r = score_predictions("pope", records, preds, samples=10)
    # pred as read: yes, yes, yes, no -> TP 1, FP 2, TN 1
    assert values(r) == pytest.approx(
        {"f1": 50.0, "accuracy": 50.0, "precision": 33.3333, "recall": 100.0, "yes_ratio": 75.0}, abs=1e-4
    )
    assert r["n_errors"] == 1
    assert r["n_valid"] == 2
    assert r["format_error_rate"] == 50.0


def test_headline_is_mean_over_splits_and_split_breakdown_is_always_there():
    gold = ["yes", "yes", "no", "no", "yes", "no"]
    pred = ["yes", "no", "no", "no", "no", "yes"]
    split = ["random"] * 4 + ["adversarial"] * 2
    r = score_predictions("pope", *frames(gold, pred, split), samples=100)
    # random: TP1 FN1 TN2 -> F1 2/3, acc 3/4, P 1, R 1/2, yes 1/4
    # adversarial: FN1 FP1 -> F1 0, acc 0, P 0, R 0, yes 1/2
    assert values(r) == pytest.approx(
        {"f1": 33.3333, "accuracy": 37.5, "precision": 50.0, "recall": 25.0, "yes_ratio": 37.5}, abs=1e-4
    )
    # pooled over all six items F1 would be 2/5 = 40: the headline is not pooled
    assert r["value"] != pytest.approx(40.0, abs=1e-3)
    split_bd = r["breakdown"]["split"]
    assert set(split_bd) == {"random", "adversarial"}
    assert split_bd["random"]["n"] == 4 and split_bd["adversarial"]["n"] == 2
    assert split_bd["random"]["metrics"]["f1"]["value"] == pytest.approx(66.6667, abs=1e-4)
    assert split_bd["random"]["metrics"]["recall"]["value"] == 50.0
    assert split_bd["adversarial"]["metrics"]["yes_ratio"]["value"] == 50.0
    assert split_bd["adversarial"]["metrics"]["f1"]["value"] == 0.0


def test_zero_over_zero_is_zero():
    # no gold yes and no predicted yes: TP = FP = FN = 0
    r = score_predictions("pope", *frames(["no", "no", "no"], ["no", "no", "no"]), samples=50)
    assert values(r) == {"f1": 0.0, "accuracy": 100.0, "precision": 0.0, "recall": 0.0, "yes_ratio": 0.0}
    assert r["ci95"] == [0.0, 0.0]


def test_stratified_bootstrap_keeps_every_split():
    # split a (9 items): all correct yes -> F1 100; split b (1 item): gold yes, said no -> F1 0.
    # Resampling within each split keeps both splits in every resample: every draw is exactly 50.
    # (Resampling all 10 items together would drop split b in about a third of the resamples.)
    gold = ["yes"] * 10
    pred = ["yes"] * 9 + ["no"]
    split = ["a"] * 9 + ["b"]
    r = score_predictions("pope", *frames(gold, pred, split), samples=300, seed=3)
    assert r["value"] == 50.0
    assert set(r["bootstrap"]["draws"]) == {50.0}
    assert r["ci95"] == [50.0, 50.0]


def test_gold_must_be_yes_or_no():
    from vlmgrid.errors import VlmgridError

    records, preds = frames(["yes", "no"], ["yes", "no"])
    records.loc[1, "answer"] = "maybe"
    with pytest.raises(VlmgridError, match="q1"):
        score_predictions("pope", records, preds, samples=10)
