"""Each part of a score (a breakdown group, a prompt variant) carries its own `n_valid` and
`format_error_rate`, so a part whose every row is a format error is told from one answered wrong."""

import pandas as pd
import pytest

from vlmgrid.metrics import score_predictions


def records(n: int, **meta) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "answer_index": [0] * n, **meta})


def preds(indices: list[int], variant: str = "default", errors: list | None = None) -> pd.DataFrame:
    n = len(indices)
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "variant": variant,
            "prediction": ["ABCD"[k] if k >= 0 else None for k in indices],
            "prediction_index": indices,
            "error": errors if errors is not None else [None] * n,
        }
    )


def test_a_group_whose_every_row_is_an_error_says_so():
    # 18 answered (12 right), 2 error rows, all in the "social" group
    recs = records(20, subject=["language"] * 18 + ["social"] * 2)
    score = score_predictions(
        "accuracy",
        recs,
        preds([0] * 12 + [1] * 6 + [-1] * 2, errors=[None] * 18 + ["image fetch timed out"] * 2),
        breakdown_by=("subject",),
        samples=50,
    )
    assert (score["n_valid"], score["format_error_rate"]) == (18, 10.0)
    groups = score["breakdown"]["subject"]
    assert {k: groups["social"][k] for k in ("n", "n_valid", "format_error_rate")} == {
        "n": 2,
        "n_valid": 0,
        "format_error_rate": 100.0,
    }
    assert (groups["language"]["n_valid"], groups["language"]["format_error_rate"]) == (18, 0.0)


def test_each_variant_has_its_own_counts_and_a_group_counts_over_every_variant():
    recs = records(4, split=["a", "a", "b", "b"])
    frame = pd.concat(
        [
            preds([0, 0, 0, 0], "v1"),
            preds([0, -1, -1, 0], "v2"),  # two unparsable answers
            preds([-1, -1, -1, -1], "v3", errors=["context too long"] * 4),  # every request failed
        ]
    )
    score = score_predictions("accuracy", recs, frame, breakdown_by=("split",), samples=50)
    variants = score["variants"]
    assert (variants["v1"]["n_valid"], variants["v1"]["format_error_rate"]) == (4, 0.0)
    assert (variants["v2"]["n_valid"], variants["v2"]["format_error_rate"]) == (2, 50.0)
    assert (variants["v3"]["n_valid"], variants["v3"]["format_error_rate"]) == (0, 100.0)
    assert variants["v1"]["value"] == 100.0 and variants["v3"]["value"] == 0.0
    # the cell: no item is valid in every variant; 6 of its 12 rows are format errors
    assert (score["n_valid"], score["format_error_rate"]) == (0, 50.0)
    # a group: over its items' rows in every variant (a: 1 + 2 of 6 rows, b: 1 + 2 of 6)
    for name in ("a", "b"):
        group = score["breakdown"]["split"][name]
        assert (group["n"], group["n_valid"]) == (2, 0)
        assert group["format_error_rate"] == pytest.approx(50.0)


def test_one_variant_has_no_variant_entries():
    score = score_predictions("accuracy", records(3), preds([0, 1, -1]), samples=20)
    assert score["variants"] == {}
    assert score["n_valid"] == 2 and score["format_error_rate"] == pytest.approx(33.3333)
