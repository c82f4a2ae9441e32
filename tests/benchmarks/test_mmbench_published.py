"""MMBench read as the authors publish it: the rows of question groups 1 and 34 of the authors' dev file
(`mmbench_dev_20230712`), laid out as the hub copy lmms-lab/MMBench holds them, become records verbatim and
score by the circular rule over the rows the file has.

Group 1 ("What is correct Python code to generate the content of the image?", gold D) has three copies; copy
k holds at position i the original option (i - k) mod 4, so rows 1000001, 2000001, 3000001 have gold A, B, C.
Group 34 ("Which one is the correct caption of this image?", gold A) is one of the 53 four-option questions
with two copies only, which rotate A-C and keep D: rows 34, 1000034, 2000034 have gold A, B, C. Indices,
questions, letters and group 1's option texts are the published ones; group 34's four caption texts stand in
for the published captions, and the images are placeholders.
"""

from __future__ import annotations

import pandas as pd
import pytest

from vlmgrid.benchmarks import mmbench
from vlmgrid.benchmarks.rawio import write_hub_parquet
from vlmgrid.fixtures import drawing as fx
from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture
from vlmgrid.metrics import score_predictions
from vlmgrid.protocols.parsing import parse_mmbench

CODE = (
    'for x in range(6):\n  print(x)\nelse:\n  print("Finally finished!")\n',
    'thisdict = {\n  "brand": "Ford",\n  "model": "Mustang",\n  "year": 1964\n}\n\nprint(len(thisdict))',
    "x = 1\ny = 2.8\nz = 1j\n\nprint(type(x))\nprint(type(y))\nprint(type(z))\n",
    'fruits = ["apple", "banana", "cherry"]\nfor x in fruits:\n  print(x)',
)
CAPTIONS = (
    "A man riding a horse on a beach.",
    "A plate of food with broccoli and rice.",
    "Two dogs playing in the snow.",
    "A red bus parked beside the road.",
)
# (index, question, options A-D as published in that row, gold letter)
PUBLISHED_ROWS = (
    (1, "What is correct Python code to generate the content of the image?", CODE, "D"),
    (
        1000001,
        "What is correct Python code to generate the content of the image?",
        (CODE[3], CODE[0], CODE[1], CODE[2]),
        "A",
    ),
    (
        2000001,
        "What is correct Python code to generate the content of the image?",
        (CODE[2], CODE[3], CODE[0], CODE[1]),
        "B",
    ),
    (
        3000001,
        "What is correct Python code to generate the content of the image?",
        (CODE[1], CODE[2], CODE[3], CODE[0]),
        "C",
    ),
    (34, "Which one is the correct caption of this image?", CAPTIONS, "A"),
    (
        1000034,
        "Which one is the correct caption of this image?",
        (CAPTIONS[2], CAPTIONS[0], CAPTIONS[1], CAPTIONS[3]),
        "B",
    ),
    (
        2000034,
        "Which one is the correct caption of this image?",
        (CAPTIONS[1], CAPTIONS[2], CAPTIONS[0], CAPTIONS[3]),
        "C",
    ),
)


def _write_published(raw_dir) -> None:
    image, _ = fx.canvas(16, (200, 200, 200))
    data = fx.encode(image, "JPEG")
    rows = [
        {
            "index": index,
            "question": question,
            "hint": None,
            **dict(zip("ABCD", options)),
            "answer": gold,
            "category": "image_topic"
            if index % 1_000_000 == 34
            else "structuralized_imagetext_understanding",
            "image": {"bytes": data, "path": None},
            "source": None,
            "L2-category": "coarse_perception" if index % 1_000_000 == 34 else "logic_reasoning",
            "comment": None,
            "split": "dev",
        }
        for index, question, options, gold in PUBLISHED_ROWS
    ]
    write_hub_parquet(raw_dir / mmbench_fixture.FIXTURE_FILE, mmbench.SCHEMA, rows, mmbench.FEATURES)


@pytest.fixture
def published(tmp_path) -> pd.DataFrame:
    _write_published(tmp_path / "raw")
    return mmbench.adapt(tmp_path / "raw", tmp_path / "bench").records


def test_records_are_the_published_rows(published):
    assert list(published["id"]) == [str(index) for index, *_ in PUBLISHED_ROWS]
    for (index, question, options, gold), (_, record) in zip(PUBLISHED_ROWS, published.iterrows()):
        assert record["question"] == question
        assert list(record["options"]) == list(options)
        assert "ABCD"[record["answer_index"]] == gold
        assert record["answer"] == options["ABCD".index(gold)]
        assert record["circular_group"] == index % 1_000_000
        assert record["circular_shift"] == index // 1_000_000
    # Row 1000001 holds the original D first, so its gold is A (the copy convention the authors publish).
    assert published.set_index("id").loc["1000001", "options"][0] == CODE[3]


def _score(records: pd.DataFrame, letters: dict[str, str]) -> dict:
    rows = []
    for _, record in records.iterrows():
        parsed = parse_mmbench(letters[record["id"]], list(record["options"]))
        rows.append(
            {
                "id": record["id"],
                "variant": "default",
                "raw": letters[record["id"]],
                "prediction": parsed.prediction,
                "prediction_index": parsed.index,
                "error": None,
            }
        )
    return score_predictions("mmbench_circular", records, pd.DataFrame(rows), samples=50, seed=0)


def test_answers_to_the_published_rows_score_by_the_circular_rule(published):
    # Right on every row of group 1; group 34 right on rows 34 and 1000034, wrong on 2000034.
    answers = {
        "1": "D",
        "1000001": "A",
        "2000001": "B",
        "3000001": "C",
        "34": "A",
        "1000034": "B",
        "2000034": "D",
    }
    score = _score(published, answers)
    assert score["metrics"]["circular_accuracy"]["value"] == 50.0
    assert score["metrics"]["vanilla_accuracy"]["value"] == 100.0
    assert score["n"] == 7 and score["n_valid"] == 7
    # All seven rows right: both questions count, the two-copy group over the three rows it has.
    answers["2000034"] = "C"
    assert _score(published, answers)["value"] == 100.0


def test_the_other_rotation_would_score_group_1_wrong(published):
    # Answers that follow the opposite rotation (copy k holding the original option (i + k) mod n, the
    # adapter's old reading) miss copies 1 and 3 of group 1 (copy 2 is the same either way): the rows are
    # scored as published, not rebuilt.
    answers = {
        "1": "D",
        "1000001": "C",
        "2000001": "B",
        "3000001": "A",
        "34": "A",
        "1000034": "B",
        "2000034": "C",
    }
    assert _score(published, answers)["value"] == 50.0
