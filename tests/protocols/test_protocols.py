"""Protocols turn model results into prediction rows; a failed item becomes an error row, never a lost one."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from vlmgrid.model_requests import OptionScores, ScoreResult
from vlmgrid.models.base import Backend
from vlmgrid.protocols import make_runner


class FlakyScorer(Backend):
    """Scores every option by its position, but fails the item whose id is "bad"."""

    name = "flaky"
    capabilities = frozenset({"score_options"})

    def score_results(self, requests):
        return [
            ScoreResult(None, "HTTP 500: overloaded (gave up after 3 attempts)")
            if r.id == "bad"
            else ScoreResult(
                OptionScores(total=[-float(i) for i in range(len(r.options))], tokens=[1] * len(r.options))
            )
            for r in requests
        ]


def _bench(protocol: str):
    records = pd.DataFrame(
        {
            "id": ["good", "bad"],
            "image": [None, None],
            "question": ["q1", "q2"],
            "options": [["x", "y"], ["x", "y"]],
            "answer": ["x", "y"],
            "answer_index": [0, 1],
        }
    )
    return SimpleNamespace(
        root=Path("."), records=records, classes=["x", "y"], kind=SimpleNamespace(templates=())
    )


def test_failed_item_becomes_an_error_row_and_the_rest_is_scored():
    for protocol in (
        "multiple_choice",
        "yes_no",
    ):  # classification: tests/protocols/test_classification_prompts.py
        bench = _bench(protocol)
        rows = make_runner(protocol, FlakyScorer({}), bench)[0](bench.records)
        assert [row["id"] for row in rows] == ["good", "bad"]
        assert rows[0]["prediction"] == "x" and rows[0]["error"] is None
        assert rows[1]["prediction"] is None and rows[1]["prediction_index"] == -1
        assert rows[1]["error"].startswith("HTTP 500")


class RecordingScorer(FlakyScorer):
    def __init__(self, settings):
        super().__init__(settings)
        self.requests = []

    def score_results(self, requests):
        self.requests.extend(requests)
        return super().score_results(requests)


def test_multiple_choice_shows_context_and_lettered_options_and_scores_letters():
    bench = _bench("multiple_choice")
    bench.records["hint"] = ["The picture shows a farm.", ""]
    bench.records["options"] = [["x", "y", "z"], ["x", "y"]]
    model = RecordingScorer({})
    make_runner("multiple_choice", model, bench)[0](bench.records)
    first, second = model.requests
    assert first.prompt == (
        "Context: The picture shows a farm.\nq1\nA. x\nB. y\nC. z\n"
        "Answer with the option's letter from the given choices directly."
    )
    assert tuple(first.letters) == ("A", "B", "C") and list(first.options) == ["x", "y", "z"]
    assert not second.prompt.startswith("Context") and tuple(second.letters) == ("A", "B")


def test_yes_no_asks_for_one_word_and_scores_yes_against_no():
    bench = _bench("yes_no")
    bench.records["options"] = [["yes", "no"], ["yes", "no"]]
    model = RecordingScorer({})
    make_runner("yes_no", model, bench)[0](bench.records.iloc[:1])
    request = model.requests[0]
    assert request.prompt == "q1\nAnswer the question using a single word or phrase."
    assert tuple(request.letters) == ("yes", "no")


class CannedGenerator(Backend):
    """Answers from a table keyed by item id; the item "down" fails like an API after its retries."""

    name = "canned"
    capabilities = frozenset({"generate"})

    def __init__(self, answers):
        super().__init__({})
        self.answers = answers
        self.prompts = []

    def generate_results(self, requests):
        from vlmgrid.model_requests import GenerationResult

        self.prompts.extend(r.prompt for r in requests)
        return [
            GenerationResult(None, "HTTP 503 (gave up after 5 attempts)")
            if r.id == "down"
            else GenerationResult(self.answers[r.id])
            for r in requests
        ]


def test_generated_answers_are_parsed_and_kept_raw():
    bench = _bench("multiple_choice")
    bench.records = pd.concat([bench.records, bench.records.iloc[:1].assign(id="down")], ignore_index=True)
    bench.kind = SimpleNamespace(templates=(), parser="letter")
    model = CannedGenerator({"good": "The answer is B.", "bad": "I am not sure."})
    runner, strategy = make_runner("multiple_choice", model, bench)
    rows = runner(bench.records)
    assert strategy == "generate"
    assert (rows[0]["prediction"], rows[0]["prediction_index"], rows[0]["raw"]) == (
        "y",
        1,
        "The answer is B.",
    )
    assert rows[1]["prediction"] is None and rows[1]["raw"] == "I am not sure." and rows[1]["error"] is None
    assert rows[2]["error"].startswith("HTTP 503") and rows[2]["raw"] is None
    assert model.prompts[0].endswith("Answer with the option's letter from the given choices directly.")


def test_yes_no_generation_uses_the_benchmarks_official_parser():
    bench = _bench("yes_no")
    bench.records["options"] = [["yes", "no"], ["yes", "no"]]
    bench.kind = SimpleNamespace(templates=(), parser="mme")
    rows = make_runner("yes_no", CannedGenerator({"good": "Yes, it is.", "bad": "Nope"}), bench)[0](
        bench.records
    )
    assert [(r["prediction"], r["prediction_index"]) for r in rows] == [("yes", 0), ("no", 1)]


def test_the_yes_no_prompt_puts_the_short_answer_instruction_in_place_of_mmes_own():
    from vlmgrid.protocols.choice import yes_no_prompt

    short = "\nAnswer the question using a single word or phrase."
    # MME's questions end with its own instruction: LLaVA-1.5's question file replaces it, it is not asked
    # twice
    question = "Is there a dog in this image?"
    assert yes_no_prompt(f"{question} Please answer yes or no.") == question + short
    assert yes_no_prompt("Is there a dog? Please answer yes or no. \n") == "Is there a dog?" + short
    # POPE's and any other question stay as they are
    assert yes_no_prompt("Is there a dog in the image?") == "Is there a dog in the image?" + short
    assert (
        yes_no_prompt("Please answer yes or no. Is it red?") == "Please answer yes or no. Is it red?" + short
    )
