"""The inspect stage: the items on the page, each answer judged by the benchmark's rule at item level."""

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.dvc_lock import write_dvc_repo
from helpers.inspect_page import BENCH, make_grid, write_predictions

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import METRICS
from vlmgrid.predictions import read_metadata, read_table
from vlmgrid.predictions import write_predictions as write_file
from vlmgrid.report.inspect_page import FORMAT_ERROR, NO_GOLD, PARTIAL, RIGHT, WRONG, render_page
from vlmgrid.stages.inspect import ITEM_RULES, _answers, build_page, sample_positions


@pytest.fixture
def grid(default_config_data, tmp_path):
    return make_grid(default_config_data, tmp_path)


def _verdicts(metric: str, records: pd.DataFrame, predictions: pd.DataFrame) -> list[tuple[str, str]]:
    answers, _ = _answers(ITEM_RULES.get(metric), METRICS.get(metric), records, predictions)
    return [(answer.verdict, answer.note) for item_id in records["id"] for answer in answers[item_id]]


def _predictions(ids, predictions, indices=None, errors=None, scores=None):
    n = len(ids)
    return pd.DataFrame(
        {
            "id": ids,
            "variant": "default",
            "raw": predictions,
            "prediction": predictions,
            "prediction_index": indices if indices is not None else [-1] * n,
            "scores": scores if scores is not None else [None] * n,
            "topk": [None] * n,
            "error": errors if errors is not None else [None] * n,
        }
    )


def test_the_page_judges_each_answer_and_says_the_na_model_once(grid):
    config, config_path, records, wrong_id, error_id = grid
    page = build_page(config, BENCH)
    assert page.models == ["alpha", "beta"]
    assert list(page.not_applicable) == ["clip"]
    assert [item.item_id for item in page.items] == list(records["id"])
    verdicts = {
        item.item_id: {model: [a.verdict for a in answers] for model, answers in item.answers.items()}
        for item in page.items
    }
    assert verdicts[wrong_id] == {"alpha": [WRONG], "beta": [RIGHT]}
    assert verdicts[error_id] == {"alpha": [RIGHT], "beta": [FORMAT_ERROR]}
    others = [item_id for item_id in records["id"] if item_id not in (wrong_id, error_id)]
    assert all(verdicts[item_id] == {"alpha": [RIGHT], "beta": [RIGHT]} for item_id in others)
    # the models disagree on the wrong answer only: a format error is no reading to disagree with
    assert [item.item_id for item in page.items if item.disagree] == [wrong_id]
    gold = records.set_index("id").loc[wrong_id]
    item = next(item for item in page.items if item.item_id == wrong_id)
    assert item.gold == f"{'ABCD'[gold['answer_index']]}. {gold['answer']}"
    assert all(item.thumbnail.startswith("data:image/jpeg;base64,") for item in page.items)


def test_the_cli_writes_the_page(grid):
    config, config_path, records, wrong_id, error_id = grid
    assert main(["inspect", BENCH, "--config", str(config_path)]) == 0
    html = paths.inspect_page_path(config.results_dir, BENCH).read_text("utf-8")
    assert re.findall(r'data-id="([^"]+)"', html) == list(records["id"])
    assert "I cannot tell &lt;b&gt;which&lt;/b&gt;" in html


def test_a_capped_page_shows_a_seeded_sample_and_says_so(grid):
    config, *_ = grid
    page = build_page(config, BENCH, max_items=3, seed=1)
    expected = sample_positions(6, 3, 1)
    assert [item.item_id for item in page.items] == [f"test-{i}" for i in expected]
    assert "shows 3 of the 6 items" in page.sample_note and "seed 1" in page.sample_note


def test_sample_positions():
    assert list(sample_positions(4, 500, 0)) == [0, 1, 2, 3]
    drawn = sample_positions(1000, 500, 0)
    assert len(set(drawn)) == 500 and list(drawn) == sorted(drawn)
    assert np.array_equal(drawn, sample_positions(1000, 500, 0))
    assert not np.array_equal(drawn, sample_positions(1000, 500, 1))


def test_a_missing_predictions_file_stops_with_the_command_that_makes_it(grid):
    config, *_ = grid
    paths.predictions_path(config.results_dir, "beta", BENCH).unlink()
    with pytest.raises(
        VlmgridError,
        match=r"predictions file .*beta/scienceqa-fixture.parquet not found; run "
        r"`vlmgrid infer beta scienceqa-fixture`",
    ):
        build_page(config, BENCH)


def test_a_missing_predictions_file_dvc_tracks_says_dvc_pull_first(grid, tmp_path, monkeypatch):
    config, *_ = grid
    monkeypatch.chdir(write_dvc_repo(tmp_path))  # results_dir is tmp_path/results
    path = paths.predictions_path(config.results_dir, "beta", BENCH)
    path.unlink()
    with pytest.raises(VlmgridError) as caught:
        build_page(config, BENCH)
    assert str(caught.value) == (
        f"predictions file {path} not found; `dvc pull results/predictions/beta/{BENCH}.parquet` "
        f"fetches it (DVC tracks it: dvc.lock), or run `vlmgrid infer beta {BENCH}` (or "
        f"snakemake) to make it"
    )


def test_predictions_of_other_data_are_refused(grid):
    config, config_path, records, *_ = grid
    rows = [
        {
            "id": item_id,
            "variant": "default",
            "raw": "A",
            "prediction": "x",
            "prediction_index": 0,
            "scores": None,
            "topk": None,
            "error": None,
        }
        for item_id in records["id"]
    ]
    write_predictions(config, "beta", rows, "0" * 64)
    with pytest.raises(VlmgridError, match="was made from data with fingerprint 000000000000"):
        build_page(config, BENCH)


def test_a_benchmark_outside_the_grid_and_a_bad_cap_are_refused(grid):
    config, *_ = grid
    with pytest.raises(VlmgridError, match='benchmark "pope-fixture" is not in the grid'):
        build_page(config, "pope-fixture")
    with pytest.raises(VlmgridError, match="--max-items must be at least 1"):
        build_page(config, BENCH, max_items=0)


def test_yes_no_answers_by_the_pope_rule():
    records = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "answer": ["yes", "no", "yes", "no"],
            "options": [["yes", "no"]] * 4,
            "answer_index": [0, 1, 0, 1],
        }
    )
    predictions = _predictions(
        ["a", "b", "c", "d"],
        ["Yes", "yes", "maybe", None],
        errors=[None, None, None, "image unreadable: x.jpg"],
    )
    # "maybe" is a format error here, though POPE's scorer reads it as "yes" for its numbers
    assert _verdicts("pope", records, predictions) == [
        (RIGHT, ""),
        (WRONG, ""),
        (FORMAT_ERROR, "not an answer the rule reads"),
        (FORMAT_ERROR, "image unreadable: x.jpg"),
    ]


def test_short_answers_by_the_vqa_rule():
    human = ["exit"] * 2 + ["way out"] * 8
    records = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "answer": ["way out"] * 3,
            "answers": [human] * 3,
            "options": [[]] * 3,
            "answer_index": [-1] * 3,
        }
    )
    # 2 of 10 say "exit": (2 x min(1, 1/3) + 8 x min(1, 2/3)) / 10 = 0.6; "Way out." normalises to "way out"
    predictions = _predictions(["a", "b", "c"], ["exit", "Way out.", "door"])
    assert _verdicts("vqa_accuracy", records, predictions) == [
        (PARTIAL, "VQA score 0.60"),
        (RIGHT, "VQA score 1.00"),
        (WRONG, "VQA score 0.00"),
    ]
    assert (
        ITEM_RULES.get("vqa_accuracy").gold(records.iloc[0].to_dict())
        == "way out (human answers: way out ×8, exit ×2)"
    )


def test_rankings_by_dances_acc_at_50():
    options = ["r0", "r1", "r2", "r3"]
    records = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "options": [options] * 3,
            "positives": [[0, 2]] * 3,
            "direction": ["image-to-riddle"] * 3,
            "answer": ["r0"] * 3,
            "answer_index": [0] * 3,
        }
    )
    scores = [[0.9, 0.1, 0.8, 0.0], [0.9, 0.8, 0.1, 0.0], [0.0, 0.9, 0.1, 0.8]]
    predictions = _predictions(["a", "b", "c"], ["r0", "r0", "r1"], indices=[0, 0, 1], scores=scores)
    # top 2 of a query with 2 positives: {0, 2} -> 2/2; {0, 1} -> 1/2; {1, 3} -> 0/2
    assert _verdicts("dance", records, predictions) == [
        (RIGHT, "Acc@50 1.00"),
        (PARTIAL, "Acc@50 0.50"),
        (WRONG, "Acc@50 0.00"),
    ]


def test_hidden_labels_have_no_right_or_wrong():
    records = pd.DataFrame(
        {"id": ["a"], "options": [["w", "x", "y", "z"]], "answer": [""], "answer_index": [-1]}
    )
    assert _verdicts("cvqa", records, _predictions(["a"], ["x"], indices=[1])) == [(NO_GOLD, "")]
    assert ITEM_RULES.get("cvqa").gold(records.iloc[0].to_dict()) == "hidden"


def test_every_metric_has_an_item_rule():
    assert ITEM_RULES.names() == METRICS.names()


def test_a_partial_cell_shows_no_answer_for_an_unanswered_item_and_its_coverage(
    default_config_data, tmp_path
):
    """alpha's predictions are an imported answer set that lacks two of the ten items by construction (its
    metadata's coverage, as an MME eval-tool folder records it): those items have no answer of alpha on the
    page, not a format error, and the page says how many alpha answered."""
    config, _, records, _, _ = make_grid(default_config_data, tmp_path, size=10)
    path = paths.predictions_path(config.results_dir, "alpha", BENCH)
    table = read_table(path, "")
    left_out = list(records["id"][[3, 7]])
    kept = table.filter(pc.invert(pc.is_in(table["id"], value_set=pa.array(left_out))))
    metadata = read_metadata(path)
    metadata["coverage"] = {"answered": 8, "total": 10}
    write_file(path, kept, metadata)
    page = build_page(config, BENCH)
    by_id = {item.item_id: item for item in page.items}
    for item_id in left_out:
        assert by_id[item_id].answers["alpha"] == []
        assert [answer.verdict for answer in by_id[item_id].answers["beta"]] == [RIGHT]
    assert all(len(item.answers["alpha"]) == 1 for item in page.items if item.item_id not in left_out)
    assert any("alpha: 8 of 10 answered" in note for note in page.notes)
    html = render_page(page)
    row = re.search(rf'<tr class="item" data-id="{left_out[0]}".*?</tr>', html).group(0)
    assert FORMAT_ERROR not in row and 'data-error=""' in row
    assert re.findall(r"<td>(.*?)</td>", row)[0] == '<span class="dim">not answered</span>'
    assert "alpha: 8 of 10 answered" in html


def test_the_page_shows_the_context_the_prompt_showed(default_config_data, tmp_path):
    """MMBench's hint and ScienceQA's context are in the multiple-choice prompt ("Context: ..."): the page
    shows them, labelled as the prompt labels them, for the items that have one, and nothing for the
    others."""
    from vlmgrid.config import load_config
    from vlmgrid.predictions import rows_to_table
    from vlmgrid.protocols.choice import multiple_choice_prompt
    from vlmgrid.stages.prepare import prepare

    kinds = {"mmbench-fixture": "mmbench", "scienceqa-fixture": "scienceqa_img"}
    data = dict(default_config_data, data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"))
    data["benchmarks"] = {
        name: {"kind": kind, "source": {"type": "fixture", "seed": 0, "size": 6}}
        for name, kind in kinds.items()
    }
    data["models"] = {"alpha": {"backend": "baseline", "strategy": "first"}}
    data["grid"] = {"models": ["alpha"], "benchmarks": list(kinds)}
    (tmp_path / "config.yaml").write_text(json.dumps(data))
    config = load_config(tmp_path / "config.yaml")
    for name in kinds:
        fingerprint = prepare(config, name)["fingerprint"]
        records = pd.read_parquet(paths.bench_dir(config.data_dir, name) / "records.parquet")
        rows = [
            {
                "id": item_id,
                "variant": "default",
                "raw": "A",
                "prediction": str(options[0]),
                "prediction_index": 0,
                "scores": None,
                "topk": None,
                "error": None,
            }
            for item_id, options in zip(records["id"], records["options"])
        ]
        metadata = {"model": "alpha", "benchmark": name, "data_fingerprint": fingerprint, "applicable": True}
        write_file(paths.predictions_path(config.results_dir, "alpha", name), rows_to_table(rows), metadata)
        hints = dict(zip(records["id"], records["hint"]))
        assert any(hints.values()) and not all(
            hints.values()
        )  # the fixture has items with a context and without
        page = build_page(config, name)
        for item in page.items:
            hint = hints[item.item_id]
            assert item.context == ([("Context", hint)] if hint else [])
            # what the page shows is what the prompt showed
            prompt = multiple_choice_prompt(item.question, item.options, hint or None)
            assert all(f"{label}: {text}" in prompt for label, text in item.context)
        html = render_page(page)
        for item_id, hint in hints.items():
            row = re.search(rf'<tr class="item" data-id="{re.escape(item_id)}".*?</tr>', html).group(0)
            shown = re.findall(
                r'<div class="context"><span class="label">Context</span> '
                r'<span class="text">(.*?)</span>',
                row,
            )
            assert shown == ([hint] if hint else [])
