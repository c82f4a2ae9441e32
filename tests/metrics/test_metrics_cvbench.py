"""CV-Bench combined score: ((ADE20K + COCO) / 2 + Omni3D) / 2 over per-source accuracies."""

import numpy as np
import pytest
from helpers.metrics import choice_frames, values

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import score_predictions


def frames(rows, errors=None):
    """rows: (source, gold index, predicted index; -1 = unparsable)."""
    return choice_frames(rows, "How many chairs?", ["1", "2", "3"], "source", errors)


# ADE20K 3/4 right, COCO 1/2 right (one unparsable), Omni3D 1/4 right
TOY = (
    [("ADE20K", 0, 0), ("ADE20K", 1, 1), ("ADE20K", 2, 2), ("ADE20K", 0, 1)]
    + [("COCO", 1, 1), ("COCO", 2, -1)]
    + [("Omni3D", 0, 0), ("Omni3D", 1, 0), ("Omni3D", 1, 0), ("Omni3D", 0, 1)]
)


def test_formula_with_unequal_source_sizes_differs_from_pooled_accuracy():
    r = score_predictions("cvbench", *frames(TOY), samples=200)
    assert r["metric"] == "cvbench"
    v = values(r)
    assert v == pytest.approx(
        {
            "cvbench": ((75 + 50) / 2 + 25) / 2,  # 43.75
            "accuracy_2d": 62.5,
            "accuracy_3d": 25.0,
            "accuracy_ade20k": 75.0,
            "accuracy_coco": 50.0,
            "accuracy_omni3d": 25.0,
        }
    )
    pooled = 100 * 5 / 10
    assert v["cvbench"] != pytest.approx(pooled)
    assert score_predictions("accuracy", *frames(TOY), samples=10)["value"] == pooled
    assert r["format_error_rate"] == 10.0  # the unparsable COCO answer counts wrong and as a format error
    src = r["breakdown"]["source"]  # per-source breakdown always there
    assert {k: g["n"] for k, g in src.items()} == {"ADE20K": 4, "COCO": 2, "Omni3D": 4}
    assert src["COCO"]["metrics"]["accuracy_coco"]["value"] == 50.0


def test_source_names_are_case_insensitive_and_checked():
    rows = [(s.lower(), g, p) for s, g, p in TOY]
    assert score_predictions("cvbench", *frames(rows), samples=10)["value"] == 43.75
    rows[0] = ("KITTI", 0, 0)
    with pytest.raises(VlmgridError, match="KITTI"):
        score_predictions("cvbench", *frames(rows), samples=10)


def test_missing_source_averages_the_parts_present():
    rows = [r for r in TOY if r[0] != "Omni3D"]
    v = values(score_predictions("cvbench", *frames(rows), samples=10))
    assert v["cvbench"] == 62.5 and v["accuracy_3d"] == 0.0


def test_bootstrap_stratified_by_source_and_deterministic():
    rng = np.random.default_rng(1)
    rows = [
        (s, 0, 0 if rng.random() < p else 1)
        for s, n, p in (("ADE20K", 30, 0.8), ("COCO", 20, 0.6), ("Omni3D", 50, 0.5))
        for _ in range(n)
    ]
    records, preds = frames(rows)
    a = score_predictions("cvbench", records, preds, samples=400, seed=0)
    b = score_predictions("cvbench", records, preds, samples=400, seed=0)
    c = score_predictions("cvbench", records, preds, samples=400, seed=2)
    assert a == b and a["bootstrap"]["draws"] != c["bootstrap"]["draws"]
    assert a["ci95"][0] < a["value"] < a["ci95"][1]
    for m in a["metrics"].values():
        assert m["ci95"][0] <= m["value"] <= m["ci95"][1]
    # each source keeps its size (30, 20, 50) in every resample, so every draw is
    # ((a/30 + c/20) / 2 + o/50) / 2 x 100 = (10a + 15c + 12o) / 12 for whole counts a, c, o
    twelfths = np.array(a["bootstrap"]["draws"]) * 12
    assert np.allclose(twelfths, np.round(twelfths), atol=2e-3)
    assert len(set(a["bootstrap"]["draws"])) > 10
