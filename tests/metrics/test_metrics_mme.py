"""MME metric against hand-computed acc / acc+ scores (points) and the scaled headline."""

import numpy as np
import pytest
from helpers.metrics import values, yes_no_frames

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import score_predictions
from vlmgrid.metrics.mme import COGNITION, PERCEPTION, SUBTASKS


def frames(rows, errors=None):
    """rows: (category, image_id, gold, prediction)."""
    return yes_no_frames(
        "Is this ...? Please answer yes or no.",
        [r[2] for r in rows],
        [r[3] for r in rows],
        errors,
        category=[r[0] for r in rows],
        image_id=[r[1] for r in rows],
    )


TOY = [
    # existence (perception): image e1 both right, image e2 one right
    ("existence", "e1", "yes", "yes"),
    ("existence", "e1", "no", "no"),
    ("existence", "e2", "yes", "yes"),
    ("existence", "e2", "no", "yes"),
    # code_reasoning (cognition): image c1, second answer null (official "other": wrong)
    ("code_reasoning", "c1", "yes", "Yes"),
    ("code_reasoning", "c1", "no", None),
]


def test_two_subtasks_three_images_by_hand():
    r = score_predictions("mme", *frames(TOY), samples=200)
    # existence: acc 3/4 = 75, acc+ 1/2 = 50 -> 125 points; code_reasoning: acc 1/2 = 50, acc+ 0 -> 50 points
    assert r["metric"] == "scaled"
    assert values(r) == pytest.approx(
        {
            "scaled": 175 / 400 * 100,  # total / (200 x 2 subtasks present) x 100 = 43.75
            "total": 175.0,
            "perception": 125.0,
            "cognition": 50.0,
            "accuracy": 100 * 4 / 6,
            "accuracy_plus": 100 * 1 / 3,
        },
        abs=1e-4,
    )
    cats = r["breakdown"]["category"]  # per-subtask breakdown always there
    assert set(cats) == {"existence", "code_reasoning"}
    assert cats["existence"]["metrics"]["total"]["value"] == 125.0
    assert cats["existence"]["metrics"]["perception"]["value"] == 125.0
    assert cats["code_reasoning"]["metrics"]["total"]["value"] == 50.0
    assert cats["code_reasoning"]["metrics"]["cognition"]["value"] == 50.0
    assert cats["code_reasoning"]["metrics"]["scaled"]["value"] == 25.0
    assert r["n"] == 6 and r["n_valid"] == 5
    assert r["format_error_rate"] == pytest.approx(100 / 6, abs=1e-4)


def test_error_rows_and_other_text_are_wrong():
    rows = [
        ("count", "i1", "yes", "yes"),
        ("count", "i1", "no", "no"),
        ("count", "i2", "yes", "maybe"),
        ("count", "i2", "no", "no"),
    ]
    errors = [None, "API failure", None, None]
    r = score_predictions("mme", *frames(rows, errors=errors), samples=10)
    # right: q0, q3 -> acc 50; no image all right -> acc+ 0
    assert values(r)["total"] == 50.0
    assert r["n_errors"] == 1 and r["format_error_rate"] == 50.0


def full_grid(subtasks, wrong):
    rows = []
    for s in subtasks:
        bad = s in wrong
        rows += [
            (s, f"{s}-img", "yes", "no" if bad else "yes"),
            (s, f"{s}-img", "no", "yes" if bad else "no"),
        ]
    return rows


def test_scaled_uses_all_14_subtasks_or_those_present():
    assert len(PERCEPTION) == 10 and len(COGNITION) == 4
    r = score_predictions("mme", *frames(full_grid(SUBTASKS, {"OCR"})), samples=10)
    v = values(r)
    assert v["perception"] == 1800.0 and v["cognition"] == 800.0 and v["total"] == 2600.0
    assert v["scaled"] == pytest.approx(2600 / 2800 * 100, abs=1e-4)
    subset = ("existence", "count", "position", "color", "OCR", "text_translation", "code_reasoning")
    r = score_predictions("mme", *frames(full_grid(subset, {"OCR"})), samples=10)
    v = values(r)
    assert v["total"] == 1200.0
    assert v["scaled"] == pytest.approx(1200 / 1400 * 100, abs=1e-4)


def many_images(n_images=20):
    rows = []
    for i in range(n_images):
        cat = "color" if i % 2 else "scene"
        # every image: exactly one of its two questions right
        rows += [(cat, f"im{i}", "yes", "yes"), (cat, f"im{i}", "no", "yes")]
    return rows


def test_bootstrap_resamples_images_and_is_deterministic():
    records, preds = frames(many_images())
    a = score_predictions("mme", records, preds, samples=300, seed=3)
    b = score_predictions("mme", records, preds, samples=300, seed=3)
    assert a == b
    # one right question per image: any resample of whole images keeps acc at exactly 50 and acc+ at 0,
    # so the headline never moves (an item-level resample would)
    assert set(a["bootstrap"]["draws"]) == {25.0}
    assert a["ci95"] == [25.0, 25.0]


def test_bootstrap_ci_contains_value_and_depends_on_seed():
    rows = []
    for i in range(30):
        cat = ("existence", "celebrity", "numerical_calculation")[i % 3]
        rows += [
            (cat, f"x{i}", "yes", "yes" if i % 4 else "no"),
            (cat, f"x{i}", "no", "no" if i % 5 else "yes"),
        ]
    records, preds = frames(rows)
    a = score_predictions("mme", records, preds, samples=400, seed=0)
    c = score_predictions("mme", records, preds, samples=400, seed=1)
    for k, m in a["metrics"].items():
        assert m["ci95"][0] <= m["value"] <= m["ci95"][1], k
    assert a["ci95"][0] < a["value"] < a["ci95"][1]
    assert a["bootstrap"]["draws"] != c["bootstrap"]["draws"]
    draws = np.array(a["bootstrap"]["draws"])
    assert draws.min() >= 0 and draws.max() <= 100


def test_bad_records_raise():
    records, preds = frames(TOY)
    records.loc[0, "category"] = "humour"
    with pytest.raises(VlmgridError, match="humour"):
        score_predictions("mme", records, preds, samples=10)
    records, preds = frames(TOY)
    records.loc[0, "answer"] = "maybe"
    with pytest.raises(VlmgridError, match="yes"):
        score_predictions("mme", records, preds, samples=10)
    with pytest.raises(VlmgridError, match="image_id"):
        score_predictions("mme", records.drop(columns="image_id"), preds, samples=10)
