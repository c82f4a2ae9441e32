"""The report refuses a score file that no scorer could write (a CI whose low is above its high, n_valid above
n, a negative count, a format error rate outside 0-100, a percent headline outside 0-100), in one sentence
naming the file, the key and the fix; it reads what a scorer can write, older files included."""

from __future__ import annotations

import json
import re

import pytest
from helpers.report import score_obj

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import METRICS
from vlmgrid.report.score_file import PERCENT_HEADLINES, read_score


def _variants(obj: dict) -> dict:
    obj["variants"] = {
        "a": {"value": 20.0, "ci95": [15.0, 25.0], "n_valid": 80, "format_error_rate": 5.0},
        "b": {"value": 20.08, "ci95": [16.0, 24.0], "n_valid": 85, "format_error_rate": 1.6667},
    }
    return obj


def _read(tmp_path, obj: dict, model: str = "big-vlm", bench: str = "sqa_img"):
    path = tmp_path / f"{bench}.json"
    path.write_text(json.dumps(obj))
    return read_score(path, model, bench)


# (what is edited, how, the key the sentence names)
REFUSED = [
    ("a CI whose low is above its high", lambda o: o.update(ci95=[20.0, 10.0]), "ci95"),
    (
        "a metric's CI whose low is above its high",
        lambda o: o["metrics"]["accuracy"].update(ci95=[30.0, 10.0]),
        "metrics.accuracy.ci95",
    ),
    (
        "a variant's CI whose low is above its high",
        lambda o: _variants(o)["variants"]["a"].update(ci95=[25.0, 15.0]),
        "variants.a.ci95",
    ),
    ("n_valid above n", lambda o: o.update(n_valid=500), "n_valid"),
    ("a negative n", lambda o: o.update(n=-1), "n"),
    ("a negative n_valid", lambda o: o.update(n_valid=-2), "n_valid"),
    ("a negative n_errors", lambda o: o.update(n_errors=-3), "n_errors"),
    (
        "a variant's n_valid above the cell's n",
        lambda o: _variants(o)["variants"]["b"].update(n_valid=91),
        "variants.b.n_valid",
    ),
    ("a format error rate above 100", lambda o: o.update(format_error_rate=100.5), "format_error_rate"),
    ("a negative format error rate", lambda o: o.update(format_error_rate=-0.1), "format_error_rate"),
    (
        "a variant's format error rate above 100",
        lambda o: _variants(o)["variants"]["a"].update(format_error_rate=150.0),
        "variants.a.format_error_rate",
    ),
    ("a percent headline above 100", lambda o: o.update(value=150.0, ci95=[140.0, 160.0]), "value"),
    ("a negative percent headline", lambda o: o.update(value=-1.0, ci95=[-2.0, 0.0]), "value"),
    ("a percent CI bound above 100", lambda o: o.update(ci95=[15.0, 100.5]), "ci95[1]"),
    (
        "a percent bootstrap draw above 100",
        lambda o: o["bootstrap"].update(draws=[19, 21, 200, 22, 18]),
        "bootstrap.draws[2]",
    ),
    (
        "the headline's entry of metrics above 100",
        lambda o: o["metrics"]["accuracy"].update(value=101.0),
        "metrics.accuracy.value",
    ),
    (
        "a variant's percent value above 100",
        lambda o: _variants(o)["variants"]["b"].update(value=120.0, ci95=[110.0, 130.0]),
        "variants.b.value",
    ),
]


@pytest.mark.parametrize("what, edit, key", REFUSED, ids=[case[0] for case in REFUSED])
def test_a_score_no_scorer_could_write_is_refused_naming_the_file_key_and_fix(tmp_path, what, edit, key):
    obj = score_obj("big-vlm", "sqa_img")
    edit(obj)
    with pytest.raises(VlmgridError) as caught:
        _read(tmp_path, obj)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'sqa_img.json'} is not a valid score file (")
    assert re.search(rf"\({re.escape(key)} is ", message), message
    assert message.endswith("rerun `vlmgrid score big-vlm sqa_img` to rebuild it")
    assert "\n" not in message


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda g: g.update(n_valid=31), "breakdown.split.random.n_valid"),
        (lambda g: g.update(n_valid=-1), "breakdown.split.random.n_valid"),
        (lambda g: g.update(n=-30), "breakdown.split.random.n"),
        (lambda g: g.update(format_error_rate=101.0), "breakdown.split.random.format_error_rate"),
        (lambda g: g["metrics"]["f1"].update(ci95=[60.0, 30.0]), "breakdown.split.random.metrics.f1.ci95"),
    ],
    ids=["n_valid above n", "negative n_valid", "negative n", "rate above 100", "low above high"],
)
def test_a_breakdown_group_no_scorer_could_write_is_refused(tmp_path, edit, key):
    obj = score_obj("clip_tiny", "pope-fixture")
    edit(obj["breakdown"]["split"]["random"])
    with pytest.raises(VlmgridError, match=rf"\({re.escape(key)} is .*rerun `vlmgrid score clip_tiny pope-f"):
        _read(tmp_path, obj, "clip_tiny", "pope-fixture")


def test_a_value_outside_its_own_ci_is_read(tmp_path):
    """A percentile bootstrap can miss its point estimate: that is no error."""
    obj = score_obj("big-vlm", "sqa_img")
    obj.update(value=30.0, ci95=[10.0, 25.0])
    cell = _read(tmp_path, obj)
    assert (cell.estimate.value, cell.estimate.ci_low, cell.estimate.ci_high) == (30.0, 10.0, 25.0)


def test_the_edges_of_the_ranges_are_read(tmp_path):
    obj = score_obj("big-vlm", "sqa_img")
    obj.update(value=100.0, ci95=[0.0, 100.0], n_valid=90, format_error_rate=100.0)
    cell = _read(tmp_path, obj)
    assert cell.estimate.value == 100.0 and cell.n_valid == 90 and cell.format_error_rate == 100.0


def test_points_are_not_percent(tmp_path):
    """MME's totals are points (up to 2800): only its headline, `scaled`, is a percent."""
    obj = score_obj("big-vlm", "sqa_img")
    obj.update(metric="scaled", value=55.0, ci95=[50.0, 60.0])
    obj["metrics"] = {
        "scaled": {"value": 55.0, "ci95": [50.0, 60.0]},
        "total": {"value": 1540.0, "ci95": [1400.0, 1680.0]},
        "perception": {"value": 1200.0, "ci95": [1100.0, 1300.0]},
    }
    obj["breakdown"] = {
        "category": {
            "OCR": {"n": 40, "n_valid": 40, "metrics": {"total": {"value": 150.0, "ci95": [120.0, 180.0]}}}
        }
    }
    cell = _read(tmp_path, obj)
    assert cell.metrics["total"].value == 1540.0 and cell.breakdown["category"][0].estimate.value == 150.0
    obj["value"] = 155.0
    with pytest.raises(
        VlmgridError, match=r"\(value is 155\.0, outside 0-100 for the percent metric 'scaled'\)"
    ):
        _read(tmp_path, obj)


def test_a_metric_the_scorer_does_not_have_is_not_held_to_percent(tmp_path):
    obj = score_obj("big-vlm", "sqa_img")
    obj.update(metric="exact_match_points", value=150.0, ci95=[140.0, 160.0])
    assert _read(tmp_path, obj).estimate.value == 150.0


def test_every_headline_of_the_scorer_is_a_percent_the_reader_knows():
    assert PERCENT_HEADLINES == {METRICS.get(name).headline for name in METRICS.names()}


def test_part_counts_are_read_and_older_files_without_them_too(tmp_path):
    obj = _variants(score_obj("clip_tiny", "pope-fixture"))
    cell = _read(tmp_path, obj, "clip_tiny", "pope-fixture")
    assert [(v.n_valid, v.format_error_rate) for v in cell.variants.values()] == [(80, 5.0), (85, 1.6667)]
    assert cell.variants["a"].estimate.value == 20.0
    group = cell.breakdown["split"][0]
    assert (group.n, group.n_valid, group.format_error_rate) == (30, 29, 3.3)
    for entry in obj["variants"].values():
        del entry["n_valid"], entry["format_error_rate"]
    for entry in obj["breakdown"]["split"].values():
        del entry["n_valid"], entry["format_error_rate"]
    cell = _read(tmp_path, obj, "clip_tiny", "pope-fixture")
    assert [(v.n_valid, v.format_error_rate) for v in cell.variants.values()] == [(None, None)] * 2
    assert {(g.n_valid, g.format_error_rate) for g in cell.breakdown["split"]} == {(None, None)}
