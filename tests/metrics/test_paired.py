"""Paired comparisons of two models (vlmgrid.metrics.paired) against hand-computed values and the metrics'
rules."""

import numpy as np
import pandas as pd
import pytest

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import score_predictions
from vlmgrid.metrics.base import LabelsHidden
from vlmgrid.metrics.bootstrap import percentile_ci
from vlmgrid.metrics.paired import NotComparable, mcnemar_exact, paired_difference


def choice_records(gold, **columns):
    n = len(gold)
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "options": [["A", "B", "C", "D"]] * n,
            "answer": ["x"] * n,
            "answer_index": list(gold),
            **columns,
        }
    )


def choice_preds(indices, variant="default"):
    """One prediction row per item: -1 (or None) is an unparsable answer."""
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(len(indices))],
            "variant": variant,
            "prediction": [None if i is None or i < 0 else "x" for i in indices],
            "prediction_index": [-1 if i is None else i for i in indices],
            "error": [None] * len(indices),
        }
    )


def outcomes(right):
    """Predicted indices that are right (gold 0 -> 0) or wrong (1) per item, for gold all 0."""
    return [0 if r else 1 for r in right]


# --- McNemar by hand -------------------------------------------------------------------------------------


def test_mcnemar_exact_on_hand_computed_tables():
    # 8 vs 2 discordant: 2 x (C(10,0) + C(10,1) + C(10,2)) / 2^10 = 2 x 56 / 1024
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    assert mcnemar_exact(3, 3) == 1.0  # the doubled tail passes 1: capped
    assert mcnemar_exact(0, 0) == 1.0  # no discordant item: nothing tells the models apart
    with pytest.raises(VlmgridError, match="non-negative"):
        mcnemar_exact(-1, 2)


def test_a_two_by_two_table_by_hand_through_the_accuracy_metric():
    # 20 items, gold 0: both right on 5, only A on 8, only B on 2, both wrong on 5
    a = [True] * 5 + [True] * 8 + [False] * 2 + [False] * 5
    b = [True] * 5 + [False] * 8 + [True] * 2 + [False] * 5
    records = choice_records([0] * 20)
    result = paired_difference(
        "accuracy", records, choice_preds(outcomes(a)), choice_preds(outcomes(b)), samples=4000, seed=3
    )
    assert result.value_a == pytest.approx(65.0) and result.value_b == pytest.approx(35.0)
    assert result.difference == pytest.approx(30.0)
    assert (result.mcnemar.a_only, result.mcnemar.b_only) == (8, 2)
    assert result.mcnemar.p_value == pytest.approx(112 / 1024)
    # On right/wrong items the sign-flip test is a Monte Carlo version of the exact McNemar test.
    assert result.p_value == pytest.approx(112 / 1024, abs=0.03)
    assert result.test == "paired sign-flip permutation" and result.unit == "item" and result.units == 20
    assert result.ci95[0] <= 30.0 <= result.ci95[1]


def test_no_mcnemar_where_the_headline_is_not_a_plain_accuracy():
    records = choice_records([0] * 6, language=["ar", "ar", "ar", "bn", "bn", "bn"])
    preds = choice_preds([0, 1, 0, 0, 0, 1])
    assert paired_difference("kaleidoscope", records, preds, preds, samples=20).mcnemar is None
    # ... nor where a model answered in several variants (an item is then not simply right or wrong)
    two = pd.concat([choice_preds([0] * 6, "t1"), choice_preds([1] * 6, "t2")])
    assert paired_difference("accuracy", choice_records([0] * 6), two, preds, samples=20).mcnemar is None


# --- the permutation test --------------------------------------------------------------------------------


def test_identical_answers_give_p_one_and_a_zero_difference():
    records = choice_records([0, 1, 2, 3, 0, 1, 2, 3])
    preds = choice_preds([0, 1, 0, 3, 2, 1, -1, 3])
    result = paired_difference("accuracy", records, preds, preds.copy(), samples=200, seed=1)
    assert result.difference == 0.0 and result.ci95 == (0.0, 0.0)
    assert result.p_value == 1.0
    assert result.mcnemar.p_value == 1.0


def test_a_clear_win_gives_the_smallest_p_the_permutations_allow():
    records = choice_records([0] * 50)
    result = paired_difference(
        "accuracy", records, choice_preds([0] * 50), choice_preds([1] * 50), samples=500, seed=0
    )
    assert result.difference == pytest.approx(100.0)
    assert result.p_value == pytest.approx(1 / 501)
    assert result.mcnemar.p_value == pytest.approx(2 / 2**50)


def test_the_p_value_is_symmetric_in_the_models_and_the_difference_changes_sign():
    rng = np.random.default_rng(7)
    gold = rng.integers(0, 4, 40)
    a = np.where(rng.random(40) < 0.7, gold, (gold + 1) % 4)
    b = np.where(rng.random(40) < 0.5, gold, (gold + 1) % 4)
    records = choice_records(gold)
    ab = paired_difference("accuracy", records, choice_preds(list(a)), choice_preds(list(b)), samples=300)
    ba = paired_difference("accuracy", records, choice_preds(list(b)), choice_preds(list(a)), samples=300)
    assert ab.difference == pytest.approx(-ba.difference)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert ab.ci95 == pytest.approx((-ba.ci95[1], -ba.ci95[0]))


def test_groups_swap_whole_in_the_permutation_test():
    # MMVP, 2 pairs: A gets all 4 questions right, B none. Flipping whole pairs, |difference| stays 100 when
    # both pairs flip alike (2 of 4 patterns): p near 1/2. Flipping single questions it would be 2 of 16.
    records = pd.DataFrame(
        {
            "id": ["a1", "a2", "b1", "b2"],
            "pair_id": [1, 1, 2, 2],
            "answer_index": [0, 1, 0, 1],
            "options": [["x", "y"]] * 4,
            "answer": ["x", "y", "x", "y"],
        }
    )

    def preds(idx):
        return pd.DataFrame(
            {
                "id": ["a1", "a2", "b1", "b2"],
                "prediction": ["x"] * 4,
                "prediction_index": idx,
                "error": [None] * 4,
            }
        )

    result = paired_difference(
        "mmvp", records, preds([0, 1, 0, 1]), preds([1, 0, 1, 0]), samples=4000, seed=2
    )
    assert result.difference == pytest.approx(100.0)
    assert result.unit == "pair_id" and result.units == 2
    assert result.p_value == pytest.approx(0.5, abs=0.03)
    assert result.mcnemar is None


# --- the paired bootstrap --------------------------------------------------------------------------------


def test_the_paired_ci_is_narrower_than_the_unpaired_one_for_correlated_models():
    # B answers as A does on 190 of 200 items: the two scores move together from resample to resample.
    rng = np.random.default_rng(0)
    n = 200
    a_right = rng.random(n) < 0.6
    b_right = a_right.copy()
    b_right[:10] = ~b_right[:10]
    records = choice_records([0] * n)
    pa, pb = choice_preds(outcomes(a_right)), choice_preds(outcomes(b_right))
    paired = paired_difference("accuracy", records, pa, pb, samples=1000, seed=0)
    # unpaired: each model resampled on its own (other seeds), the difference of independent draws
    draws_a = np.array(score_predictions("accuracy", records, pa, samples=1000, seed=1)["bootstrap"]["draws"])
    draws_b = np.array(score_predictions("accuracy", records, pb, samples=1000, seed=2)["bootstrap"]["draws"])
    low, high = percentile_ci(draws_a - draws_b)
    assert paired.ci95[1] - paired.ci95[0] < (high - low) / 3


def pope_frames(n_per_split=12, seed=0):
    rng = np.random.default_rng(seed)
    splits = np.repeat(["adversarial", "popular", "random"], n_per_split)
    # shuffled, so the strata are not contiguous in records order
    order = rng.permutation(len(splits))
    splits = splits[order]
    gold = np.where(rng.random(len(splits)) < 0.5, "yes", "no")
    records = pd.DataFrame({"id": [f"p{i}" for i in range(len(splits))], "answer": gold, "split": splits})

    def preds(p_right, s):
        r = np.random.default_rng(s)
        said = np.where(r.random(len(gold)) < p_right, gold, np.where(gold == "yes", "no", "yes"))
        said = np.where(r.random(len(gold)) < 0.1, "maybe", said)
        return pd.DataFrame({"id": records["id"], "prediction": said, "error": [None] * len(gold)})

    return "pope", records, preds(0.8, 1), preds(0.6, 2)


def mme_frames():
    rng = np.random.default_rng(5)
    rows = []
    for category in ("existence", "count", "code_reasoning"):
        for image in range(6):
            for gold in ("yes", "no"):
                rows.append((category, f"{category}-{image}", gold))
    records = pd.DataFrame(
        {
            "id": [f"m{i}" for i in range(len(rows))],
            "category": [r[0] for r in rows],
            "image_id": [r[1] for r in rows],
            "answer": [r[2] for r in rows],
        }
    )

    def preds(p_right):
        gold = records["answer"].to_numpy()
        said = np.where(rng.random(len(gold)) < p_right, gold, np.where(gold == "yes", "no", "yes"))
        return pd.DataFrame({"id": records["id"], "prediction": said, "error": [None] * len(gold)})

    return "mme", records, preds(0.9), preds(0.6)


def mmbench_frames():
    rng = np.random.default_rng(9)
    rows = [(g, s) for g in range(15) for s in range(4 if g % 3 else 2)]
    gold = rng.integers(0, 4, len(rows))
    records = pd.DataFrame(
        {
            "id": [f"{g + s * 1_000_000}" for g, s in rows],
            "circular_group": [g for g, _ in rows],
            "circular_shift": [s for _, s in rows],
            "answer_index": gold,
            "options": [["a", "b", "c", "d"]] * len(rows),
            "answer": ["a"] * len(rows),
        }
    )

    def preds(p_right):
        said = np.where(rng.random(len(gold)) < p_right, gold, (gold + 1) % 4)
        return pd.DataFrame(
            {"id": records["id"], "prediction": "a", "prediction_index": said, "error": [None] * len(gold)}
        )

    return "mmbench_circular", records, preds(0.85), preds(0.5)


def dance_frames():
    # 2 directions x 10 queries of 6 candidates with 1 to 3 positives; A scores its positives higher than B
    # does
    rng = np.random.default_rng(11)
    n = 20
    positives = [
        sorted(rng.choice(6, size=int(rng.integers(1, 4)), replace=False).tolist()) for _ in range(n)
    ]
    records = pd.DataFrame(
        {
            "id": [f"d{i}" for i in range(n)],
            "options": [[f"c{k}" for k in range(6)]] * n,
            "positives": positives,
            "direction": ["riddle_to_image", "image_to_riddle"] * (n // 2),
        }
    )

    def preds(boost):
        scores = [(rng.random(6) + boost * np.isin(np.arange(6), pos)).tolist() for pos in positives]
        return pd.DataFrame(
            {"id": records["id"], "prediction": "ranked", "scores": scores, "error": [None] * n}
        )

    return "dance", records, preds(0.6), preds(0.1)


@pytest.mark.parametrize(
    "frames", [pope_frames, mme_frames, mmbench_frames, dance_frames], ids=["pope", "mme", "mmbench", "dance"]
)
def test_the_difference_and_its_draws_are_the_scores_own(frames):
    """The bootstrap pairs the two models exactly as their score files do: the same strata, seed and n, so a
    draw of the difference is A's score draw minus B's, and the point difference the scores' difference."""
    metric, records, pa, pb = frames()
    score_a = score_predictions(metric, records, pa, samples=300, seed=4)
    score_b = score_predictions(metric, records, pb, samples=300, seed=4)
    result = paired_difference(metric, records, pa, pb, samples=300, seed=4)
    assert result.value_a == pytest.approx(score_a["value"], abs=1e-4)
    assert result.value_b == pytest.approx(score_b["value"], abs=1e-4)
    assert result.difference == pytest.approx(score_a["value"] - score_b["value"], abs=2e-4)
    draws = np.array(score_a["bootstrap"]["draws"]) - np.array(score_b["bootstrap"]["draws"])
    np.testing.assert_allclose(result.draws, draws, atol=2e-4)  # the score draws are rounded to 4 decimals
    assert result.ci95 == pytest.approx(percentile_ci(draws), abs=2e-4)
    assert 0.0 < result.p_value <= 1.0 and result.n == len(records)


def test_grouped_metrics_flip_their_groups():
    assert paired_difference(*mme_frames(), samples=50).unit == "image_id"
    result = paired_difference(*mmbench_frames(), samples=50)
    assert result.unit == "circular_group" and result.units == 15


def test_models_with_other_prompt_variants_compare_by_their_means():
    records = choice_records([0] * 8)
    one = choice_preds([0, 0, 0, 0, 1, 1, 1, 1], "default")
    # B: two templates, one like A's answers and one all right: mean 75 against A's 50
    two = pd.concat([choice_preds([0, 0, 0, 0, 1, 1, 1, 1], "t1"), choice_preds([0] * 8, "t2")])
    result = paired_difference("accuracy", records, one, two, samples=200)
    assert (result.value_a, result.value_b) == pytest.approx((50.0, 75.0))
    assert result.difference == pytest.approx(-25.0)
    # the same answers in every template of both models: nothing to tell apart
    same = pd.concat(
        [choice_preds([0, 0, 0, 0, 1, 1, 1, 1], "t1"), choice_preds([0, 0, 0, 0, 1, 1, 1, 1], "t2")]
    )
    tie = paired_difference("accuracy", records, one, same, samples=200)
    assert tie.difference == 0.0 and tie.p_value == 1.0


# --- what has no comparison ------------------------------------------------------------------------------


def test_a_model_whose_every_answer_is_a_format_error_has_no_comparison():
    records = choice_records([0, 1, 2])
    with pytest.raises(NotComparable, match="every answer of model B is a format error"):
        paired_difference(
            "accuracy", records, choice_preds([0, 1, 2]), choice_preds([-1, None, -1]), samples=10
        )


def test_hidden_labels_have_no_comparison():
    records = choice_records([-1, -1, -1])
    with pytest.raises(LabelsHidden):
        paired_difference("cvqa", records, choice_preds([0, 1, 2]), choice_preds([1, 1, 2]), samples=10)


def test_bad_input_is_one_sentence():
    records = choice_records([0, 1])
    with pytest.raises(VlmgridError, match='lack item "q1"'):
        paired_difference("accuracy", records, choice_preds([0, 1]), choice_preds([0]), samples=10)
    with pytest.raises(VlmgridError, match="positive integer"):
        paired_difference("accuracy", records, choice_preds([0, 1]), choice_preds([0, 1]), samples=0)
    with pytest.raises(VlmgridError, match='predictions of model A lack the column "prediction_index"'):
        paired_difference(
            "accuracy",
            records,
            choice_preds([0, 1]).drop(columns="prediction_index"),
            choice_preds([0, 1]),
            samples=10,
        )


# --- the minimum detectable difference --------------------------------------------------------------------

# z_{0.975} + z_{0.8} (normal tables)
Z = 1.959964 + 0.841621


def test_the_mdd_of_right_or_wrong_items_comes_from_their_discordance():
    # the 2 x 2 table above: 10 of 20 items discordant; 100 x 2.801585 x sqrt(0.5 / 20) = 44.297 points
    a = [True] * 13 + [False] * 7
    b = [True] * 5 + [False] * 8 + [True] * 2 + [False] * 5
    result = paired_difference(
        "accuracy",
        choice_records([0] * 20),
        choice_preds(outcomes(a)),
        choice_preds(outcomes(b)),
        samples=200,
    )
    assert result.mdd == pytest.approx(100 * Z * (0.5 / 20) ** 0.5, abs=1e-3)
    assert result.mdd == pytest.approx(44.297, abs=1e-3) and result.mdd_from == "unit differences"
    # the difference of 30 points has a McNemar p of 0.109 and is below the MDD: 20 items cannot tell it
    assert abs(result.difference) < result.mdd


def test_the_mdd_of_a_grouped_metric_counts_its_groups():
    # MMVP, 4 pairs: A right on pairs 1-3, B on pairs 1 and 4 (its pair 2 half right): pairs 2, 3 and 4 are
    # discordant; 100 x 2.801585 x sqrt(3/4 / 4) = 121.31 points (a pair, not a question, is the unit)
    records = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(8)],
            "pair_id": [1, 1, 2, 2, 3, 3, 4, 4],
            "answer_index": [0] * 8,
            "options": [["x", "y"]] * 8,
            "answer": ["x"] * 8,
        }
    )

    def preds(right):
        return pd.DataFrame(
            {
                "id": [f"q{i}" for i in range(8)],
                "prediction": ["x"] * 8,
                "prediction_index": outcomes(right),
                "error": [None] * 8,
            }
        )

    a = [True] * 6 + [False] * 2
    b = [True, True, True, False, False, False, True, True]
    result = paired_difference("mmvp", records, preds(a), preds(b), samples=50)
    assert result.mdd == pytest.approx(100 * Z * (0.75 / 4) ** 0.5, abs=1e-3)
    assert result.mdd_from == "unit differences"


def test_the_mdd_of_other_headlines_comes_from_the_permutations():
    # Kaleidoscope with a single language is a plain accuracy, but its MDD is read off the permutation test's
    # spread: an estimate of the exact 44.297 of 10 discordant items out of 20
    records = choice_records([0] * 20, language=["ar"] * 20)
    a = [True] * 13 + [False] * 7
    b = [True] * 5 + [False] * 8 + [True] * 2 + [False] * 5
    result = paired_difference(
        "kaleidoscope", records, choice_preds(outcomes(a)), choice_preds(outcomes(b)), samples=4000, seed=1
    )
    assert result.mdd_from == "permutations"
    assert result.mdd == pytest.approx(44.297, rel=0.05)
