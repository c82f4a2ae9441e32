"""LVLM classification (CARPE's protocol): the template set, and how each template's answers become rows."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from vlmgrid.errors import VlmgridError
from vlmgrid.model_requests import GenerationResult, OptionScores, ScoreResult
from vlmgrid.models.base import Backend
from vlmgrid.protocols import make_runner
from vlmgrid.protocols.classification import ClassificationPrompts, answer_methods, classification_prompts

REPO = Path(__file__).resolve().parents[2]
CLASSES = ["sunflower", "daisy", "red rose"]


def test_the_shipped_set_has_ten_open_and_ten_closed_templates():
    prompts = classification_prompts(REPO / "config" / "prompts")
    assert len(prompts.open) == 10 and len(prompts.closed) == 10
    assert prompts.open["open-01"] == "Identify the object in this image:"
    assert list(prompts.open)[:2] == ["open-01", "open-02"] and list(prompts.closed)[0] == "closed-01"
    assert all(
        prompts.fill(t, CLASSES).count("sunflower, daisy, red rose") == 1 for t in prompts.closed.values()
    )
    assert not any("{candidates}" in t for t in prompts.open.values())
    assert prompts.max_candidates == 128


def test_closed_world_lists_every_class_up_to_the_limit_then_gold_and_seeded_others():
    prompts = ClassificationPrompts(open={}, closed={"c": "{candidates}"}, max_candidates=4)
    assert prompts.candidates(4, "item-1", 2) == [0, 1, 2, 3]
    drawn = prompts.candidates(1000, "item-1", 917)
    assert len(drawn) == 4 and 917 in drawn and drawn == sorted(drawn)
    assert prompts.candidates(1000, "item-1", 917) == drawn  # seeded by the item id
    assert prompts.candidates(1000, "item-2", 917) != drawn
    assert ClassificationPrompts(open={}, closed={"c": "{candidates}"}).candidates(1000, "x", 5) == list(
        range(1000)
    )


@pytest.mark.parametrize(
    "data, message",
    [
        ({"open": {"o-1": "Name it: {candidates}"}}, "must not hold {candidates}"),
        ({"closed": {"c-1": "Which one is it?"}}, "must hold {candidates} exactly once"),
        ({"closed": {"c-1": "{candidates} or {candidates}"}}, "must hold {candidates} exactly once"),
        ({"open": {"x": "a"}, "closed": {"x": "{candidates}"}}, "both open and closed"),
        ({"open": {"Open 1": "a"}}, "variant name"),
        ({"open": {"o-1": ""}}, "non-empty string"),
        ({"opne": {"o-1": "a"}}, "unknown key 'opne'"),
        ({}, "holds no template"),
        ({"closed": {"c-1": "{candidates}"}, "max_candidates": 1}, "at least 2"),
    ],
)
def test_a_malformed_template_set_is_one_clear_error(data, message):
    with pytest.raises(VlmgridError, match=message) as error:
        ClassificationPrompts.from_mapping(data, "prompts.yaml")
    assert str(error.value).startswith("prompts.yaml")


def test_a_missing_prompt_file_names_it_and_the_fix(tmp_path):
    with pytest.raises(VlmgridError, match="lvlm_classification.yaml.*prompts_dir"):
        classification_prompts(tmp_path)


class Both(Backend):
    """Generates from a table keyed by (item, prompt start); scores the continuation " daisy" best."""

    name = "both"
    capabilities = frozenset({"generate", "score_options"})

    def __init__(self, settings=None, answers=None):
        super().__init__(settings or {})
        self.answers = answers or {}
        self.generated, self.scored = [], []

    def generate_results(self, requests):
        self.generated.extend(requests)
        return [
            GenerationResult(None, "HTTP 503")
            if r.id == "down"
            else GenerationResult(self.answers.get(r.id, "Sunflowers."))
            for r in requests
        ]

    def score_results(self, requests):
        self.scored.extend(requests)
        return [
            ScoreResult(
                OptionScores(
                    total=[-2.0 if o == " daisy" else -5.0 for o in r.options], tokens=[1] * len(r.options)
                )
            )
            for r in requests
        ]


class ScoresOnly(Both):
    capabilities = frozenset({"score_options"})


def _bench(tmp_path, ids=("a", "b")):
    (tmp_path / "lvlm_classification.yaml").write_text(
        yaml.safe_dump(
            {
                "open": {"open-01": "Identify the object in this image:", "open-02": "What is this?"},
                "closed": {"closed-01": "Choose one of: {candidates}."},
            }
        )
    )
    records = pd.DataFrame(
        {
            "id": list(ids),
            "image": [None] * len(ids),
            "question": "",
            "options": [[]] * len(ids),
            "answer": "daisy",
            "answer_index": 1,
        }
    )
    return SimpleNamespace(
        root=tmp_path,
        records=records,
        classes=CLASSES,
        prompts_dir=tmp_path,
        kind=SimpleNamespace(templates=(), parser="open_class"),
    )


def test_open_world_generates_and_matches_closed_world_scores_the_class_names(tmp_path, monkeypatch):
    bench = _bench(tmp_path)
    monkeypatch.setattr(
        "vlmgrid.protocols.classification.load_images",
        lambda bench, records, alpha: (["img"] * len(records), [None] * len(records)),
    )
    model = Both(answers={"a": "It is a sunflower.", "b": "A rose, probably."})
    runner, strategy = make_runner("classification", model, bench)
    rows = runner(bench.records)
    assert strategy == "open-world: generate; closed-world: score_options"
    assert [(r["variant"], r["id"]) for r in rows] == [
        ("open-01", "a"),
        ("open-01", "b"),
        ("open-02", "a"),
        ("open-02", "b"),
        ("closed-01", "a"),
        ("closed-01", "b"),
    ]
    by = {(r["variant"], r["id"]): r for r in rows}
    assert (by["open-01", "a"]["prediction"], by["open-01", "a"]["prediction_index"]) == ("sunflower", 0)
    assert by["open-01", "a"]["raw"] == "It is a sunflower."
    # "A rose" names no class ("red rose" is the class): kept raw, a format error, not a guess
    assert by["open-02", "b"]["prediction"] is None and by["open-02", "b"]["raw"] == "A rose, probably."
    assert (by["closed-01", "a"]["prediction"], by["closed-01", "a"]["topk"][0]) == ("daisy", 1)
    assert (
        model.scored[0].prompt == "Choose one of: sunflower, daisy, red rose."
        and model.scored[0].letters is None
    )
    assert [r.prompt for r in model.generated[:2]] == ["Identify the object in this image:"] * 2


def test_answer_mode_moves_every_template_to_one_method():
    assert answer_methods(Both({"answer_mode": "likelihood"})) == ("score_options", "score_options")
    assert answer_methods(Both({"answer_mode": "generate"})) == ("generate", "generate")
    assert answer_methods(Both()) == ("generate", "score_options")
    assert answer_methods(ScoresOnly()) == ("score_options", "score_options")


def test_a_limited_closed_world_question_maps_its_answers_back_to_class_indices(tmp_path, monkeypatch):
    bench = _bench(tmp_path, ids=("a",))
    bench.classes = ["sunflower", "tulip", "daisy", "iris", "orchid", "lily"]
    bench.records["answer_index"] = 2
    (tmp_path / "lvlm_classification.yaml").write_text(
        yaml.safe_dump({"closed": {"closed-01": "Choose one of: {candidates}."}, "max_candidates": 3})
    )
    monkeypatch.setattr(
        "vlmgrid.protocols.classification.load_images",
        lambda bench, records, alpha: (["img"] * len(records), [None] * len(records)),
    )
    model = Both()
    row = make_runner("classification", model, bench)[0](bench.records)[0]
    shown = [c.strip() for c in model.scored[0].prompt.removeprefix("Choose one of: ").rstrip(".").split(",")]
    assert len(shown) == 3 and "daisy" in shown
    assert list(model.scored[0].options) == [f" {name}" for name in shown]
    # the scorer likes " daisy" best: its class index (2), not its position among the candidates
    assert (row["prediction"], row["prediction_index"], row["topk"][0]) == ("daisy", 2, 2)
    assert sorted(row["topk"]) == sorted(bench.classes.index(name) for name in shown)


def test_a_broken_image_and_a_failed_request_are_error_rows_in_every_variant(tmp_path, monkeypatch):
    bench = _bench(tmp_path, ids=("a", "down", "broken"))
    monkeypatch.setattr(
        "vlmgrid.protocols.classification.load_images",
        lambda bench, records, alpha: (["img", "img", None], [None, None, "image is truncated"]),
    )
    rows = make_runner("classification", Both({"answer_mode": "generate"}), bench)[0](bench.records)
    assert len(rows) == 9
    errors = {(r["variant"], r["id"]): r["error"] for r in rows if r["error"]}
    assert set(errors) == {(v, i) for v in ("open-01", "open-02", "closed-01") for i in ("down", "broken")}
    assert errors["closed-01", "broken"] == "image is truncated" and errors["open-01", "down"] == "HTTP 503"
