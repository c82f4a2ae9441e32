"""Protocols turn model results into prediction rows; a failed item becomes an error row, never a lost one."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from vlmgrid.models.base import Backend, OptionScores, ScoreResult
from vlmgrid.protocols import make_runner


class FlakyScorer(Backend):
    """Scores every option by its position, but fails the item whose id is "bad"."""

    name = "flaky"
    capabilities = frozenset({"score_options"})

    def score_results(self, requests):
        return [
            ScoreResult(None, "HTTP 500: overloaded (gave up after 3 attempts)") if r.id == "bad"
            else ScoreResult(OptionScores(total=[-float(i) for i in range(len(r.options))], tokens=[1] * len(r.options)))
            for r in requests
        ]


def _bench(protocol: str):
    records = pd.DataFrame({
        "id": ["good", "bad"], "image": [None, None], "question": ["q1", "q2"],
        "options": [["x", "y"], ["x", "y"]], "answer": ["x", "y"], "answer_index": [0, 1],
    })
    return SimpleNamespace(root=Path("."), records=records, classes=["x", "y"], kind=SimpleNamespace(templates=()))


def test_failed_item_becomes_an_error_row_and_the_rest_is_scored():
    for protocol in ("multiple_choice", "yes_no", "classification"):
        bench = _bench(protocol)
        rows = make_runner(protocol, FlakyScorer({}), bench)(bench.records)
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
    make_runner("multiple_choice", model, bench)(bench.records)
    first, second = model.requests
    assert first.prompt == ("Context: The picture shows a farm.\nq1\nA. x\nB. y\nC. z\n"
                            "Answer with the option's letter from the given choices directly.")
    assert tuple(first.letters) == ("A", "B", "C") and list(first.options) == ["x", "y", "z"]
    assert not second.prompt.startswith("Context") and tuple(second.letters) == ("A", "B")


def test_yes_no_asks_for_one_word_and_scores_yes_against_no():
    bench = _bench("yes_no")
    bench.records["options"] = [["yes", "no"], ["yes", "no"]]
    model = RecordingScorer({})
    make_runner("yes_no", model, bench)(bench.records.iloc[:1])
    request = model.requests[0]
    assert request.prompt == "q1\nAnswer the question using a single word or phrase."
    assert tuple(request.letters) == ("yes", "no")
