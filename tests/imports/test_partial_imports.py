"""A partial MME eval-tool folder (its release lacks some questions' images): imported as it is, scored as the
tool scores it over the questions it holds, its coverage in the predictions file's metadata and the score
file; every other format, and a predictions file made by inference, still refused when items are missing."""

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers.imports import MODEL_ID, mmbench_answers, mme_tool_folder, refused, run, small_grid, write_jsonl

from vlmgrid.cli import main
from vlmgrid.predictions import read_metadata

# Five images: existence/0000, count/0000, color/0000, OCR/0000, existence/0001; two questions each (yes, no).
SIZES = {"mme-fixture": 5, "mmbench-fixture": 2}


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return small_grid(tmp_path_factory.mktemp("partial"), SIZES)


def texts(frame: pd.DataFrame) -> list[str]:
    """Per record: existence/0000 and OCR/0000 both right, count/0000 "Yes" to its no-question, color/0000
    "No" to its yes-question (existence/0001, where kept, right)."""
    return [
        "Yes" if image.startswith("count/") else "No" if image.startswith("color/") else answer.capitalize()
        for image, answer in zip(frame["image_id"], frame["answer"])
    ]


def partial_folder(tmp_path, records, keep) -> str:
    """existence/0001 is not in the folder (its image missing from the release)."""
    kept = records["mme-fixture"][keep].reset_index(drop=True)
    return mme_tool_folder(tmp_path / "llava-v1.5-13b", kept, texts(kept))


def test_partial_eval_tool_folder_imports_and_scores_the_answered_questions(grid, tmp_path, capsys):
    config, records = grid
    mme = records["mme-fixture"]
    assert (mme["image_id"] == "existence/0001.jpg").sum() == 2  # the fixture's layout, as the test needs
    answered = mme["image_id"] != "existence/0001.jpg"
    folder = partial_folder(tmp_path, records, answered)
    out = tmp_path / "p.parquet"
    assert run(config, MODEL_ID, "mme-fixture", folder, "--out", str(out)) == 0
    rows = pq.read_table(out).to_pandas()
    assert (
        rows["id"].tolist() == mme["id"][answered].astype(str).tolist()
    )  # the two unanswered items: no rows
    assert read_metadata(out)["coverage"] == {"answered": 8, "total": 10}
    score = tmp_path / "score.json"
    assert (
        main(
            [
                "score",
                MODEL_ID,
                "mme-fixture",
                "--predictions",
                str(out),
                "--out",
                str(score),
                "--config",
                config,
            ]
        )
        == 0
    )
    assert "n=8 of 10 items (a partial import)" in capsys.readouterr().err
    result = json.loads(score.read_text())
    # Hand-computed as calculation.py does, over the questions present: existence acc 100 + acc+ 100 = 200
    # (its second image absent, not wrong: counted it would be 50 + 50), count 50 + 0, color 50 + 0, OCR 200;
    # total 500 points over 4 subtasks of 200: scaled 62.5; pooled acc 6/8, acc+ 2/4.
    assert result["coverage"] == {"answered": 8, "total": 10}
    assert result["n"] == 8
    assert result["metrics"]["total"]["value"] == 500.0 and result["metrics"]["perception"]["value"] == 500.0
    assert result["value"] == 62.5
    assert (
        result["metrics"]["accuracy"]["value"] == 75.0 and result["metrics"]["accuracy_plus"]["value"] == 50.0
    )
    by_subtask = result["breakdown"]["category"]
    assert by_subtask["existence"]["metrics"]["total"]["value"] == 200.0
    assert by_subtask["existence"]["n"] == 2


def test_an_image_with_one_of_its_questions_missing_is_refused(grid, tmp_path, capsys):
    config, records = grid
    mme = records["mme-fixture"]
    # existence/0001's no-question left out: the tool would pair its yes-question with nothing
    keep = ~((mme["image_id"] == "existence/0001.jpg") & (mme["answer"] == "no"))
    kept = mme[keep].reset_index(drop=True)
    folder = mme_tool_folder(tmp_path / "mme", kept, texts(kept))
    message = refused(capsys, config, MODEL_ID, "mme-fixture", folder, "--out", str(tmp_path / "o.parquet"))
    assert "answers 1 of the 2 questions of image existence/0001.jpg" in message
    assert not (tmp_path / "o.parquet").exists()


def test_a_subset_in_another_format_is_still_refused(grid, tmp_path, capsys):
    config, records = grid
    answers = write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"])[:3])
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", answers, "--out", str(tmp_path / "o.parquet")
    )
    assert 'answers 3 of the 5 items of mmbench-fixture: 2 missing, the first "1000018"' in message


def test_a_predictions_file_without_a_recorded_coverage_that_lacks_items_is_refused(grid, tmp_path, capsys):
    """A file inference made (no coverage in its metadata) that lacks items is an error, as always."""
    config, records = grid
    folder = partial_folder(tmp_path, records, records["mme-fixture"]["image_id"] != "existence/0001.jpg")
    out = tmp_path / "p.parquet"
    assert run(config, MODEL_ID, "mme-fixture", folder, "--out", str(out)) == 0
    table = pq.read_table(out)
    metadata = read_metadata(out)
    del metadata["coverage"]
    stripped = tmp_path / "stripped.parquet"
    pq.write_table(table.replace_schema_metadata({"vlmgrid": json.dumps(metadata)}), stripped)
    assert (
        main(
            [
                "score",
                MODEL_ID,
                "mme-fixture",
                "--predictions",
                str(stripped),
                "--out",
                str(tmp_path / "s.json"),
                "--config",
                config,
            ]
        )
        == 2
    )
    assert "misses 2 item(s)" in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()
