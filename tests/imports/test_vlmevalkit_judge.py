"""VLMEvalKit's own reading of its ScienceQA_TEST predictions beside the official one: its judge file read at
import into the predictions metadata (`tool_reading`), or its option matcher applied to the raw answers where
there is none; `vlmgrid score` gives the tool's figure beside the headline."""

import json

import pyarrow.parquet as pq
import pytest
from helpers.imports import (
    LETTERS,
    MODEL_ID,
    NAN,
    dump,
    imported,
    options,
    refused,
    run,
    score_of,
    small_grid,
)
from helpers.vlmevalkit_judge import write_judge_file


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return small_grid(tmp_path_factory.mktemp("judge"), {"scienceqa-fixture": 6})


def scienceqa_rows(records) -> list[dict]:
    """ScienceQA_TEST.tsv: index, question, hint (NaN when none), A-E, answer letter, category, split."""
    return [
        {
            "index": n,
            "question": r["question"],
            "hint": r["hint"] or NAN,
            **options(r, 5),
            "answer": LETTERS[r["answer_index"]],
            "category": r["category"],
            "split": "test",
        }
        for n, (_, r) in enumerate(records.iterrows())
    ]


def answers_and_verdicts(records) -> tuple[list[str], dict]:
    """Six answers and VLMEvalKit's verdicts on them, worked by hand. The official rule (LLaVA-1.5's) reads
    items 0 and 4 (right); the matcher reads 0, 1 (right: "**Answer:** D. diamond") and 3 (wrong: "(B)"); the
    judge reads 2 (right) and fails on 5 (a random letter, wrong)."""
    gold = [LETTERS[i] for i in records["answer_index"]]
    texts = [r["options"][r["answer_index"]] for _, r in records.iterrows()]
    wrong = "B" if gold[3] != "B" else "C"
    answers = [
        gold[0],
        f"**Answer:** {gold[1]}. {texts[1]}",
        "I cannot tell from the image.",
        f"({wrong})",
        f"{gold[4]}. {texts[4]}",
        "Hmm",
    ]
    verdicts = {
        0: (1, ("matcher",)),
        1: (1, ("matcher",)),
        2: (1, ("judge", gold[2])),
        3: (0, ("matcher",)),
        4: (1, ("matcher",)),
        5: (0, ("random",)),
    }
    return answers, verdicts


def test_the_judge_file_beside_the_predictions_is_kept_in_the_metadata_and_scored(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    answers, verdicts = answers_and_verdicts(sqa)
    path = dump(scienceqa_rows(sqa), answers, tmp_path, "ScienceQA_TEST")
    judge = write_judge_file(path, "openai", verdicts)
    out = tmp_path / "sqa.parquet"
    assert run(config, MODEL_ID, "scienceqa-fixture", path, "--out", str(out)) == 0
    assert list(imported(out)["raw"]) == answers  # the rows are a predictions file's, no column added
    reading = json.loads(pq.read_schema(out).metadata[b"vlmgrid"])["tool_reading"]
    assert reading["tool"] == "VLMEvalKit" and reading["files"][0]["file"] == str(judge)
    assert [(item["id"], item["hit"], item["judge"]) for item in reading["items"]] == [
        ("test-0", 1, False),
        ("test-1", 1, False),
        ("test-2", 1, True),
        ("test-3", 0, False),
        ("test-4", 1, False),
        ("test-5", 0, True),
    ]
    assert [item["option"] for item in reading["items"]][:4] == [
        LETTERS[i] for i in sqa["answer_index"][:3]
    ] + [answers[3][1]]
    score = score_of(config, tmp_path, "scienceqa-fixture", out)
    assert score["value"] == pytest.approx(round(2 / 6 * 100, 4))
    assert score["tool_reading"] == {
        "tool": "VLMEvalKit",
        "value": pytest.approx(round(4 / 6 * 100, 4)),
        "n_read_by_judge": 2,
        "source": "verdicts",
        "files": [str(judge)],
        "metrics": {"accuracy": pytest.approx(round(4 / 6 * 100, 4)), "valid_accuracy": pytest.approx(80.0)},
    }
    assert "format errors 66.7%; VLMEvalKit reads 66.7 (2 by its judge)) -> " in capsys.readouterr().err


def test_without_a_judge_file_the_matcher_rule_gives_the_tools_figure(grid, tmp_path):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    answers, _ = answers_and_verdicts(sqa)
    out = tmp_path / "sqa.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "scienceqa-fixture",
            dump(scienceqa_rows(sqa), answers, tmp_path, "ScienceQA_TEST"),
            "--out",
            str(out),
        )
        == 0
    )
    assert "tool_reading" not in json.loads(pq.read_schema(out).metadata[b"vlmgrid"])
    score = score_of(config, tmp_path, "scienceqa-fixture", out)
    # items 0, 1 and 4 read right by the matcher; 2 and 5 read nothing, so "Z", wrong, as without a judge
    assert score["tool_reading"]["value"] == pytest.approx(round(3 / 6 * 100, 4))
    assert score["tool_reading"]["n_read_by_judge"] == 0 and score["tool_reading"]["source"] == "rule"
    assert score["value"] == pytest.approx(round(2 / 6 * 100, 4))


def test_two_judge_files_are_refused(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    answers, verdicts = answers_and_verdicts(sqa)
    path = dump(scienceqa_rows(sqa), answers, tmp_path, "ScienceQA_TEST")
    write_judge_file(path, "openai", verdicts)
    write_judge_file(path, "gpt-4o-mini", verdicts)
    message = refused(
        capsys, config, MODEL_ID, "scienceqa-fixture", path, "--out", str(tmp_path / "o.parquet")
    )
    assert "has 2 VLMEvalKit judge files beside it" in message and "move away all but" in message


def test_a_judge_file_of_other_predictions_is_refused(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    answers, verdicts = answers_and_verdicts(sqa)
    path = dump(scienceqa_rows(sqa), answers, tmp_path, "ScienceQA_TEST")
    write_judge_file(path, "openai", verdicts)
    dump(scienceqa_rows(sqa), ["A"] * 6, tmp_path, "ScienceQA_TEST")  # the predictions made again since
    message = refused(
        capsys, config, MODEL_ID, "scienceqa-fixture", path, "--out", str(tmp_path / "o.parquet")
    )
    assert (
        "the judge file was made from other predictions" in message and "row 2 (index 1)" in message
    )  # row 1 answers "A" in both


def test_a_judge_file_without_match_logs_is_refused(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    answers, verdicts = answers_and_verdicts(sqa)
    path = dump(scienceqa_rows(sqa), answers, tmp_path, "ScienceQA_TEST")
    judge = write_judge_file(path, "openai", verdicts)
    import pandas as pd

    frame = pd.read_excel(judge)
    frame["log"] = "Succeed During Pre-fetching"  # a circular evaluation's log
    frame.to_excel(judge, index=False)
    message = refused(
        capsys, config, MODEL_ID, "scienceqa-fixture", path, "--out", str(tmp_path / "o.parquet")
    )
    assert 'not VLMEvalKit\'s "Match Log: ..."' in message


def test_diff_accounts_for_the_two_readings_item_by_item(grid, tmp_path, capsys):
    from vlmgrid.cli import main

    config, records = grid
    sqa = records["scienceqa-fixture"]
    answers, verdicts = answers_and_verdicts(sqa)
    path = dump(scienceqa_rows(sqa), answers, tmp_path, "ScienceQA_TEST")
    write_judge_file(path, "openai", verdicts)
    out, diff = tmp_path / "sqa.parquet", tmp_path / "diff.json"
    assert run(config, MODEL_ID, "scienceqa-fixture", path, "--out", str(out)) == 0
    capsys.readouterr()
    assert (
        main(
            ["diff", "scienceqa-fixture", str(out), "--tool-reading", "--json", str(diff), "--config", config]
        )
        == 0
    )
    printed = capsys.readouterr().out
    document = json.loads(diff.read_text())
    assert document["reading"] == "tool"
    assert document["tool"] == {"tool": "VLMEvalKit", "source": "verdicts", "n_read_by_judge": 2}
    assert document["a"]["value"] == pytest.approx(4 / 6 * 100, abs=1e-4)
    assert document["b"]["value"] == pytest.approx(2 / 6 * 100, abs=1e-4)
    effects = {c["class"]: (c["items"], c["effect"]) for c in document["classes"]}
    # the judge read item 2 right where the rule read nothing; the matcher read item 1 right and item 3 wrong
    # where the rule read nothing (item 3 moves no point); item 5, the judge's random miss, reads as the
    # rule's
    assert effects["judge"] == (1, pytest.approx(100 / 6, abs=1e-4))
    assert effects["matcher"] == (2, pytest.approx(100 / 6, abs=1e-4))
    assert sum(effect for _, effect in effects.values()) == pytest.approx(document["difference"], abs=1e-3)
    assert [(item["id"], item["class"]) for item in document["items"]] == [
        ("test-2", "judge"),
        ("test-1", "matcher"),
        ("test-3", "matcher"),
    ]
    assert "VLMEvalKit's own reading of the set (the verdicts it wrote; 2 items read by its judge)" in printed
    assert "read by the tool's judge" in printed and "read by the tool's matcher" in printed


def test_diff_of_a_set_without_a_tool_reading_is_refused(grid, tmp_path, capsys):
    from vlmgrid.cli import main

    config, records = grid
    sqa = records["scienceqa-fixture"]
    out = tmp_path / "sqa.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "scienceqa-fixture",
            dump(scienceqa_rows(sqa), ["A"] * 6, tmp_path, "ScienceQA_TEST"),
            "--out",
            str(out),
        )
        == 0
    )
    assert main(["diff", "scienceqa-fixture", str(out), str(out), "--tool-reading", "--config", config]) == 2
    assert "give one set, without B" in capsys.readouterr().err
