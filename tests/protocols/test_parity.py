"""Parity tables: vlmgrid's headline parsers read raw model outputs exactly as the benchmarks' authors do.

Each `tests/protocols/parity/<name>.yaml` lists raw outputs with the reading the authors' own code gives, and
cites the file and commit the readings were derived from (read from the authors' code, not from vlmgrid's).
The test runs vlmgrid's headline parser on every case and compares:

- `compare: letter`: the option letter read (A = the first option), or null when the authors' code reads no
  option (their "FAILED" / "other" / invalid choice: a format error, counted wrong);
- `compare: text`: the parsed answer text ("yes"/"no" for yes/no benchmarks), or null;
- `compare: vqa_answer`: the answer string the authors' scorer compares with the human answers, after its
  own processing (vlmgrid: the parsed answer through `normalise_answer`); null for an answer that processes
  to nothing.

`unparsable_reads` (optional) is what the benchmark's metric makes of an unparsable answer when the authors'
rule reads it as an answer (POPE: "yes"); `test_unparsable_reading_is_the_metrics` holds the metric to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vlmgrid.metrics.vqa_normalise import normalise_answer
from vlmgrid.protocols.parsing import LETTERS, PARSERS, Parsed

PARITY_DIR = Path(__file__).parent / "parity"
COMPARERS = {
    "letter": lambda parsed: (
        LETTERS[parsed.index] if parsed.prediction is not None and parsed.index >= 0 else None
    ),
    "text": lambda parsed: parsed.prediction,
    "vqa_answer": lambda parsed: (
        (normalise_answer(parsed.prediction) or None) if parsed.prediction is not None else None
    ),
}
SOURCE_KEYS = {"repository", "path", "commit", "rule"}


def _tables() -> dict[str, dict]:
    return {
        path.stem: yaml.safe_load(path.read_text(encoding="utf-8"))
        for path in sorted(PARITY_DIR.glob("*.yaml"))
    }


TABLES = _tables()
CASES = [
    pytest.param(name, i, id=f"{name}-{i}")
    for name, table in TABLES.items()
    for i in range(len(table["cases"]))
]


def test_every_table_cites_its_source_and_names_a_registered_parser():
    assert TABLES, f"no parity tables in {PARITY_DIR}"
    for name, table in TABLES.items():
        assert table["parser"] in PARSERS, name
        assert table["compare"] in COMPARERS, name
        assert SOURCE_KEYS <= set(table["source"]), f"{name}: source needs {sorted(SOURCE_KEYS)}"
        assert all(str(table["source"][key]).strip() for key in SOURCE_KEYS), name
        assert len(table["cases"]) >= 5, f"{name}: a parity table needs cases"


@pytest.mark.parametrize("name, i", CASES)
def test_headline_parser_reads_as_the_authors(name, i):
    table = TABLES[name]
    case = table["cases"][i]
    options = case.get("options", table.get("options", []))
    parsed = PARSERS.get(table["parser"])(case["output"], options)
    assert isinstance(parsed, Parsed)
    reading = COMPARERS[table["compare"]](parsed)
    if reading is None and "unparsable_reads" in table:
        reading = table["unparsable_reads"]
    assert reading == case["reads"], (
        f"{name} case {i}: {case['output']!r} reads {reading!r} in vlmgrid, {case['reads']!r} in "
        f"{table['source']['repository']} {table['source']['path']}"
        + (f" ({case['why']})" if case.get("why") else "")
    )


def test_unparsable_reading_is_the_metrics():
    """Where a table says the authors read an unparsable answer as an answer (POPE: "yes"), the metric
    does."""
    import pandas as pd

    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.metrics import score_predictions

    metric_of = {
        BENCHMARKS.get(name).parser or "pope": BENCHMARKS.get(name).metric
        for name in BENCHMARKS
        if BENCHMARKS.get(name).protocol == "yes_no"
    }
    checked = 0
    for name, table in TABLES.items():
        if "unparsable_reads" not in table:
            continue
        reading = table["unparsable_reads"]
        other = next(option for option in table["options"] if option != reading)
        golds = [reading, reading, other]
        records = pd.DataFrame(
            {
                "id": ["a", "b", "c"],
                "answer": golds,
                "options": [table["options"]] * 3,
                "answer_index": [table["options"].index(gold) for gold in golds],
            }
        )
        predictions = pd.DataFrame(
            {
                "id": ["a", "b", "c"],
                "variant": "default",
                "prediction": [None, None, None],
                "prediction_index": [-1, -1, -1],
                "error": [None, None, None],
            }
        )
        score = score_predictions(metric_of[table["parser"]], records, predictions, samples=10, seed=0)
        # every unparsable answer reads as `reading`: right on "a" and "b", wrong on "c"
        assert score["metrics"]["accuracy"]["value"] == 66.6667, name
        assert score["format_error_rate"] == 100.0, name
        checked += 1
    assert checked
