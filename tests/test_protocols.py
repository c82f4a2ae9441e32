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
