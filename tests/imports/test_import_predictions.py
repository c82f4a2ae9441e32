"""`vlmgrid import-predictions`: answer files as LLaVA's evaluation scripts and MME's eval tool write them,
imported into prepared fixture benchmarks, read by each benchmark's own parser, refused in one sentence when
they do not answer exactly the benchmark's items, and scored like a local run."""

import errno
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers.imports import (
    LLAVA_SHORT,
    MODEL_ID,
    grid,  # noqa: F401 (a fixture: the tests take it as a parameter)
    imported,
    llava_line,
    mmbench_answers,
    mme_answers,
    mme_tool_folder,
    pope_files,
    refused,
    run,
    write_jsonl,
)

from vlmgrid.cli import main
from vlmgrid.codeversion import running_version
from vlmgrid.config import load_config
from vlmgrid.errors import VlmgridError
from vlmgrid.imports.llava import _scienceqa
from vlmgrid.predictions import read_metadata, rows_digest

LLAVA_LETTER = "Answer with the option's letter from the given choices directly."


# ---------------------------------------------------------------------------------------------- answer files


def sqa_prompt(r, form="llava-1.5") -> str:
    """model_vqa_science.py --single-pred-prompt: "<image>\\n" + the question file's text + the letter
    instruction. LLaVA-1.5's llava_test_CQM-A.json: "Context: <hint>" only when there is a hint, the question,
    "A. x" lines; scripts/convert_sqa_to_llava.py "CQM-A":
    "Context: <hint or N/A>\\nQuestion: ...\\nOptions: (A) x (B) y"."""
    if form == "llava-1.5":
        text = "\n".join(
            ([f"Context: {r['hint']}"] if r["hint"] else [])
            + [r["question"]]
            + [f"{'ABCDE'[i]}. {o}" for i, o in enumerate(r["options"])]
        )
    else:
        choices = " ".join(f"({'ABCDE'[i]}) {o}" for i, o in enumerate(r["options"]))
        text = f"Context: {r['hint'] or 'N/A'}\nQuestion: {r['question']}\nOptions: {choices}"
    return "\n".join(["<image>", text, LLAVA_LETTER])


def sqa_answers(records, texts, form="llava-1.5") -> list[dict]:
    lines = [
        llava_line(str(4 + 3 * n), sqa_prompt(r, form), text, n)
        for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts))
    ]
    # A text-only problem of the test split (LLaVA-1.5's file puts its hint after the question): skipped.
    lines.insert(1, llava_line("5", "Which word rhymes with cat?\nA. hat\nB. dog\n" + LLAVA_LETTER, "A", 99))
    return lines


def sqa_output(lines, gold) -> dict:
    """eval_science_qa.py's --output-file: the analyses of every problem of the split, correct ones first."""
    result = {"correct": [], "incorrect": []}
    for line in lines:
        truth = gold.get(line["question_id"], "A")
        parsed = (
            line["text"]
            if line["text"] in "ABCDE"
            else line["text"][0]
            if line["text"][1:3] == ". "
            else "FAILED"
        )
        result["correct" if parsed == truth else "incorrect"].append(
            {
                "question_id": line["question_id"],
                "parsed_ans": parsed,
                "ground_truth": truth,
                "question": line["prompt"],
                "pred": line["text"],
                "is_multimodal": "<image>" in line["prompt"],
            }
        )
    return result


def textvqa_answers(records, texts) -> list[dict]:
    """llava_textvqa_val_v051_ocr.jsonl: question_id is the image id; the prompt adds the OCR tokens."""
    return [
        llava_line(
            r["image_id"],
            f"{r['question']}\nReference OCR token: {', '.join(r['ocr_tokens'])}\n{LLAVA_SHORT}",
            text,
            n,
        )
        for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts))
    ]


# ---------------------------------------------------------------------------------------------- imports


def _score(config, model, bench, predictions, tmp_path) -> dict:
    """The score file `vlmgrid score` writes for imported predictions."""
    score = tmp_path / "score.json"
    assert (
        main(
            [
                "score",
                model,
                bench,
                "--predictions",
                str(predictions),
                "--out",
                str(score),
                "--config",
                config,
            ]
        )
        == 0
    )
    return json.loads(score.read_text())


def test_mmbench_answers_map_to_the_published_rows_and_score(grid, tmp_path, capsys):
    config, records = grid
    texts = ["B", "A", "A", "B", "The answer is C"]
    answers = write_jsonl(tmp_path / "mmbench.jsonl", mmbench_answers(records["mmbench-fixture"], texts))
    out = tmp_path / "mmbench.parquet"
    assert run(config, MODEL_ID, "mmbench-fixture", answers, "--out", str(out)) == 0
    assert "read as llava-answers (guessed" in capsys.readouterr().err
    frame = imported(out)
    assert list(frame["id"]) == list(records["mmbench-fixture"]["id"])
    assert list(frame["raw"]) == texts
    assert list(frame["prediction_index"]) == [1, 0, 0, 1, 2]
    meta = read_metadata(out)
    assert (
        meta["model"] == MODEL_ID
        and meta["benchmark"] == "mmbench-fixture"
        and meta["strategy"] == "generate"
    )
    assert meta["provenance"]["imported"] == f"imported from {answers} (llava-answers)"
    assert len(meta["provenance"]["sha256"]) == 64 and meta["data_fingerprint"]
    assert (
        meta["rows_sha256"] == rows_digest(pq.read_table(out)) and meta["code_version"] == running_version()
    )
    # Question 1: both copies right; question 18: copy 2 (gold C) read as C -> right, so 2/2 groups.
    assert _score(config, MODEL_ID, "mmbench-fixture", out, tmp_path)["value"] == 100.0


def test_mme_llava_answers_and_eval_tool_folder_give_the_same_rows(grid, tmp_path, capsys):
    config, records = grid
    mme = records["mme-fixture"]
    texts = ["Yes", "maybe"]  # the second is no answer by MME's rule: a format error, never dropped
    jsonl = write_jsonl(tmp_path / "mme.jsonl", mme_answers(mme, texts))
    folder = mme_tool_folder(tmp_path / "llava-v1.5-13b", mme, texts)
    out_jsonl, out_folder = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert run(config, MODEL_ID, "mme-fixture", jsonl, "--out", str(out_jsonl)) == 0
    assert run(config, MODEL_ID, "mme-fixture", folder, "--out", str(out_folder)) == 0
    assert "read as mme-eval-tool (guessed" in capsys.readouterr().err
    a, b = imported(out_jsonl), imported(out_folder)
    assert a.equals(b)
    assert a["prediction"].isna().tolist() == [False, True] and a["prediction"][0] == "yes"
    assert list(a["raw"]) == texts and list(a["prediction_index"]) == [0, -1]
    # Hand-computed: existence acc 1/2 = 50, acc+ 0 (one image, one wrong) -> 50 points of the 200 of the one
    # subtask present: scaled 25%.
    result = _score(config, MODEL_ID, "mme-fixture", out_folder, tmp_path)
    assert result["metrics"]["total"]["value"] == 50.0 and result["value"] == 25.0
    assert result["format_error_rate"] == 50.0


def test_pope_answers_are_matched_through_llavas_question_file(grid, tmp_path):
    config, records = grid
    pope = records["pope-fixture"]
    texts = ["Yes, there is.", "No", "yes", "There is not.", "Yes", "no"]
    questions, answers = pope_files(tmp_path, pope, texts)
    out = tmp_path / "pope.parquet"
    assert run(config, MODEL_ID, "pope-fixture", answers, "--questions", questions, "--out", str(out)) == 0
    frame = imported(out)
    assert list(frame["id"]) == list(pope["id"])
    assert list(frame["prediction"]) == ["yes", "no", "yes", "no", "yes", "no"]


def test_pope_answers_without_the_question_file_are_refused(grid, tmp_path, capsys):
    config, records = grid
    _, answers = pope_files(tmp_path, records["pope-fixture"], ["yes"] * 6)
    message = refused(capsys, config, MODEL_ID, "pope-fixture", answers, "--out", str(tmp_path / "p.parquet"))
    assert "--questions" in message and "llava_pope_test.jsonl" in message


@pytest.mark.parametrize("value", [[2], True], ids=["a list", "true"])
@pytest.mark.parametrize("where", ["question file", "answers"])
def test_a_pope_question_id_neither_a_whole_number_nor_a_text_is_refused_naming_its_line(
    grid, tmp_path, capsys, where, value
):
    """A list cannot key a question, and true would be taken for question 1."""
    config, records = grid
    questions, answers = pope_files(tmp_path, records["pope-fixture"], ["yes"] * 6)
    file = questions if where == "question file" else answers
    lines = [json.loads(line) for line in Path(file).read_text().splitlines()]
    lines[1]["question_id"] = value
    write_jsonl(Path(file), lines)
    out = tmp_path / "p.parquet"
    message = refused(
        capsys, config, MODEL_ID, "pope-fixture", answers, "--questions", questions, "--out", str(out)
    )
    assert message == (
        f"vlmgrid: error: {file} line 2 has the question_id {value!r}, which is neither a whole number nor a "
        "text, so it names no question; give the files LLaVA wrote"
    )
    assert not out.exists()


def test_textvqa_answers_match_by_image_id_and_question(grid, tmp_path):
    config, records = grid
    textvqa = records["textvqa-fixture"]
    texts = ["Exit", "84", "the bus"]
    out = tmp_path / "textvqa.parquet"
    answers = write_jsonl(tmp_path / "textvqa.jsonl", list(reversed(textvqa_answers(textvqa, texts))))
    assert run(config, MODEL_ID, "textvqa-fixture", answers, "--out", str(out)) == 0
    frame = imported(out)
    assert list(frame["id"]) == list(textvqa["id"]) and list(frame["raw"]) == texts


@pytest.mark.parametrize("form", ["llava-1.5", "converter"])
def test_scienceqa_answers_skip_text_only_problems_and_score(grid, tmp_path, capsys, form):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    assert set(sqa["hint"] == "") == {True, False}  # items with and without a context line
    gold = ["ABCDE"[i] for i in sqa["answer_index"]]
    texts = [gold[0], "I am not sure.", f"{gold[2]}. yes", "E", gold[4], "B" if gold[5] != "B" else "A"]
    answers = write_jsonl(tmp_path / "sqa.jsonl", sqa_answers(sqa, texts, form))
    out = tmp_path / "sqa.parquet"
    assert run(config, "llava-tiny", "scienceqa-fixture", answers, "--out", str(out)) == 0
    assert "skipped 1 answers to text-only problems" in capsys.readouterr().err
    frame = imported(out)
    assert list(frame["raw"]) == texts
    assert frame["prediction"].isna().tolist() == [False, True, False, True, False, False]
    value = _score(config, "llava-tiny", "scienceqa-fixture", out, tmp_path)["value"]
    assert value == pytest.approx(round(3 / 6 * 100, 4))  # items 0, 2, 4


def test_scienceqa_scorer_output_file_imports_like_the_answers(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    gold = ["ABCDE"[i] for i in sqa["answer_index"]]
    texts = ["B" if gold[0] != "B" else "A", gold[1], f"{gold[2]}. yes", "E", gold[4], "I am not sure."]
    lines = sqa_answers(sqa, texts)
    output = tmp_path / "llava-v1.5-13b_output.jsonl"
    output.write_text(
        json.dumps(
            sqa_output(lines, {line["question_id"]: g for line, g in zip(lines[:1] + lines[2:], gold)}),
            indent=2,
        )
    )
    out_a, out_b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert run(config, "llava-tiny", "scienceqa-fixture", str(output), "--out", str(out_a)) == 0
    assert "read as llava-scienceqa-eval (guessed" in capsys.readouterr().err
    assert (
        run(
            config,
            "llava-tiny",
            "scienceqa-fixture",
            write_jsonl(tmp_path / "a.jsonl", lines),
            "--out",
            str(out_b),
        )
        == 0
    )
    a, b = imported(out_a), imported(out_b)
    assert a.equals(b) and list(a["raw"]) == texts  # the analyses, correct ones first, back in item order
    value = _score(config, "llava-tiny", "scienceqa-fixture", out_a, tmp_path)["value"]
    assert value == pytest.approx(round(3 / 6 * 100, 4))  # items 1, 2, 4


def test_scienceqa_scorer_unanswered_problems_are_missing_not_wrong(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    lines = sqa_answers(sqa, ["A"] * 6)
    output = sqa_output(lines, {})
    dropped = output["correct"].pop(2)  # the scorer's line for a problem the answers file lacked:
    output["incorrect"].append(
        {**dropped, "question": "Unknown", "pred": "FAILED", "parsed_ans": "FAILED", "is_multimodal": False}
    )
    path = tmp_path / "llava-v1.5-13b_output.jsonl"
    path.write_text(json.dumps(output, indent=2))
    message = refused(
        capsys, config, "llava-tiny", "scienceqa-fixture", str(path), "--out", str(tmp_path / "o.parquet")
    )
    assert 'answers 5 of the 6 items of scienceqa-fixture: 1 missing, the first "test-1"' in message
    assert not (tmp_path / "o.parquet").exists()


def test_scienceqa_scorer_result_file_needs_problem_ids(grid, tmp_path, capsys):
    config, records = grid
    path = tmp_path / "llava-v1.5-13b_result.json"
    path.write_text(
        json.dumps(
            {
                "acc": 50.0,
                "correct": 1,
                "count": 2,
                "results": {"4": 1, "5": -1},
                "outputs": {"4": "B", "5": "FAILED"},
            },
            indent=2,
        )
    )
    message = refused(
        capsys, config, "llava-tiny", "scienceqa-fixture", str(path), "--out", str(tmp_path / "o.parquet")
    )
    assert "only by ScienceQA's problem id" in message and "_output.jsonl" in message


def test_a_scorer_output_file_cut_short_is_named(grid, tmp_path, capsys):
    config, records = grid
    path = tmp_path / "llava-v1.5-13b_output.jsonl"
    text = json.dumps(sqa_output(sqa_answers(records["scienceqa-fixture"], ["A"] * 6), {}), indent=2)
    path.write_text(text[: len(text) // 2])
    message = refused(
        capsys,
        config,
        "llava-tiny",
        "scienceqa-fixture",
        str(path),
        "--format",
        "llava-scienceqa-eval",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert f"{path} is cut short" in message


def test_a_scorer_output_problem_id_of_a_superscript_digit_imports(grid, tmp_path):
    """ "²" is a digit to str.isdigit, which int() refuses: the analyses are ordered without it."""
    config, records = grid
    sqa = records["scienceqa-fixture"]
    texts = ["A", "B", "C", "A", "B", "C"]
    lines = sqa_answers(sqa, texts)
    lines[2]["question_id"] = "²"
    path = tmp_path / "llava-v1.5-13b_output.jsonl"
    path.write_text(json.dumps(sqa_output(lines, {}), indent=2))
    out = tmp_path / "o.parquet"
    assert run(config, "llava-tiny", "scienceqa-fixture", str(path), "--out", str(out)) == 0
    assert list(imported(out)["raw"]) == texts


@pytest.mark.parametrize("given", [False, True], ids=["guessed", "given"])
def test_a_scorer_output_file_not_in_utf8_is_one_sentence_naming_it_and_its_line(
    grid, tmp_path, capsys, given
):
    config, records = grid
    lines = sqa_answers(records["scienceqa-fixture"], ["A"] * 6)
    lines[0]["text"] = "A, évidemment"
    path = tmp_path / "llava-v1.5-13b_output.jsonl"
    text = json.dumps(sqa_output(lines, {}), indent=2, ensure_ascii=False)
    path.write_bytes(text.encode("latin-1"))  # saved in Latin-1
    line = text[: text.index("évidemment")].count("\n") + 1
    choice = ["--format", "llava-scienceqa-eval"] if given else []
    out = str(tmp_path / "o.parquet")
    message = refused(capsys, config, "llava-tiny", "scienceqa-fixture", str(path), *choice, "--out", out)
    assert message == (
        f"vlmgrid: error: {path} line {line} is not UTF-8 text (byte 0xe9); save the file as UTF-8"
    )


@pytest.mark.parametrize("given", [False, True], ids=["guessed", "given"])
def test_a_scorer_output_file_that_cannot_be_read_is_one_sentence_naming_it(
    grid, tmp_path, capsys, monkeypatch, given
):
    config, records = grid
    path = tmp_path / "llava-v1.5-13b_output.jsonl"
    lines = sqa_answers(records["scienceqa-fixture"], ["A"] * 6)
    path.write_text(json.dumps(sqa_output(lines, {}), indent=2))
    opened = Path.open

    def open_unless_locked(self, *args, **kwargs):  # mode 000: the tests run as root, who reads anything
        if self == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_unless_locked)
    choice = ["--format", "llava-scienceqa-eval"] if given else []
    out = str(tmp_path / "o.parquet")
    message = refused(capsys, config, "llava-tiny", "scienceqa-fixture", str(path), *choice, "--out", out)
    assert message == (
        f"vlmgrid: error: {path} cannot be read: permission denied; make it readable by this user "
        f"(chmod u+r) and run again"
    )


@pytest.mark.parametrize("given", [False, True], ids=["guessed", "given"])
def test_a_scorer_output_file_nested_too_deeply_is_one_sentence_naming_it(grid, tmp_path, capsys, given):
    config, records = grid
    path = tmp_path / "llava-v1.5-13b_output.jsonl"
    path.write_text('{\n  "correct": ' + "[" * 100_000 + "]" * 100_000 + ',\n  "incorrect": []\n}')
    choice = ["--format", "llava-scienceqa-eval"] if given else []
    out = str(tmp_path / "o.parquet")
    message = refused(capsys, config, "llava-tiny", "scienceqa-fixture", str(path), *choice, "--out", out)
    assert message == (
        f"vlmgrid: error: {path} nests its JSON arrays or objects too deeply to be read (about a thousand "
        "levels), as no tool's answers do; check that it is the file meant"
    )


def test_a_grid_model_is_written_to_its_predictions_file(grid, tmp_path):
    config, records = grid
    answers = write_jsonl(tmp_path / "mmbench.jsonl", mmbench_answers(records["mmbench-fixture"]))
    assert run(config, "llava-tiny", "mmbench-fixture", answers, "--format", "llava-answers") == 0
    path = load_config(config).results_dir / "predictions" / "llava-tiny" / "mmbench-fixture.parquet"
    assert read_metadata(path)["model_settings"]["backend"] == "hf"


SQA = pd.DataFrame(
    {
        "id": ["test-0", "test-1", "test-2", "test-3"],
        "question": [
            "Which is it?",
            "Which is it?",
            "Which tense does the sentence use?",
            "What is the capital of Ohio?",
        ],
        "hint": ["", "", "Mona will print her name with care.\n\nRead the sentence.", ""],
        "options": [["a", "b"], ["a", "b"], ["past tense", "future tense"], ["Columbus", "Austin", "Salem"]],
    }
)
MULTI_LINE = (
    "<image>\nContext: Mona will print her name with care.\n\nRead the sentence.\nWhich tense does the "
    "sentence use?\nA. past tense\nB. future tense\n" + LLAVA_LETTER
)
NO_CONTEXT = "<image>\nWhat is the capital of Ohio?\nA. Columbus\nB. Austin\nC. Salem\n" + LLAVA_LETTER
SAME = "<image>\nWhich is it?\nA. a\nB. b\n" + LLAVA_LETTER


def test_scienceqa_prompts_match_multi_line_and_empty_contexts_and_same_content_in_file_order():
    lines = [
        (1, llava_line("12", NO_CONTEXT, "A", 1)),
        (2, llava_line("7", SAME, "A", 2)),
        (3, llava_line("8", MULTI_LINE, "B", 3)),
        (4, llava_line("9", SAME, "B", 4)),
    ]
    answers = _scienceqa("f.jsonl", lines, SQA, None)
    assert [(a.record_id, a.raw) for a in answers] == [
        ("test-3", "A"),
        ("test-0", "A"),
        ("test-2", "B"),
        ("test-1", "B"),
    ]


def test_scienceqa_records_with_problem_ids_are_matched_by_them():
    records = SQA.assign(pid=["7", "9", "8", "12"])
    lines = [
        (1, llava_line("9", SAME, "B", 1)),
        (2, llava_line("12", NO_CONTEXT, "A", 2)),
        (3, llava_line("7", SAME, "A", 3)),
        (4, llava_line("8", MULTI_LINE, "B", 4)),
        (5, llava_line("30", SAME, "C", 5)),
    ]
    answers = _scienceqa("f.jsonl", lines, records, None)
    assert [a.record_id for a in answers] == ["test-1", "test-3", "test-0", "test-2", None]
    ids_are_pids = SQA.assign(id=["7", "9", "8", "12"])
    assert [a.record_id for a in _scienceqa("f.jsonl", lines[:4], ids_are_pids, None)] == [
        "9",
        "12",
        "7",
        "8",
    ]
    with pytest.raises(
        VlmgridError, match=r"line 1 \(question_id '12'\) asks .* not the question of item test-3"
    ):
        _scienceqa("f.jsonl", [(1, llava_line("12", SAME, "A", 1))], records, None)


# ---------------------------------------------------------------------------------------------- refusals


def test_an_id_the_benchmark_does_not_have_is_refused(grid, tmp_path, capsys):
    config, records = grid
    lines = mmbench_answers(records["mmbench-fixture"]) + [llava_line(77, "?", "A", 9, round_id=0)]
    answers = write_jsonl(tmp_path / "a.jsonl", lines)
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", answers, "--out", str(tmp_path / "o.parquet")
    )
    assert "1 answer(s) to items that benchmark mmbench-fixture does not have" in message
    assert "line 6 (question_id 77)" in message


def test_missing_items_are_refused(grid, tmp_path, capsys):
    config, records = grid
    answers = write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"])[:3])
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", answers, "--out", str(tmp_path / "o.parquet")
    )
    assert 'answers 3 of the 5 items of mmbench-fixture: 2 missing, the first "1000018"' in message
    assert not (tmp_path / "o.parquet").exists()


def test_duplicates_are_refused(grid, tmp_path, capsys):
    config, records = grid
    lines = mmbench_answers(records["mmbench-fixture"])
    answers = write_jsonl(tmp_path / "a.jsonl", lines + lines[:1])
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", answers, "--out", str(tmp_path / "o.parquet")
    )
    assert 'answers item "1" of mmbench-fixture twice (line 1 (question_id 1) and line 6' in message


def test_llavas_own_rotation_rounds_are_refused(grid, tmp_path, capsys):
    config, records = grid
    lines = mmbench_answers(records["mmbench-fixture"])
    lines[1]["round_id"] = 1
    answers = write_jsonl(tmp_path / "a.jsonl", lines)
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", answers, "--out", str(tmp_path / "o.parquet")
    )
    assert "round 1" in message and "keep the round-0 lines" in message


def test_a_file_of_another_format_is_refused(grid, tmp_path, capsys):
    config, records = grid
    csv = tmp_path / "answers.csv"
    csv.write_text("index,prediction\n1,A\n")
    out = str(tmp_path / "o.parquet")
    assert "looks like no known format; give --format" in refused(
        capsys, config, MODEL_ID, "mmbench-fixture", str(csv), "--out", out
    )
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", str(csv), "--format", "llava-answers", "--out", out
    )
    assert "line 1 is not a JSON object: the file is not a LLaVA answer file" in message
    jsonl = write_jsonl(tmp_path / "a.jsonl", mme_answers(records["mme-fixture"], ["Yes", "No"]))
    message = refused(
        capsys, config, MODEL_ID, "mme-fixture", jsonl, "--format", "mme-eval-tool", "--out", out
    )
    assert "is not a folder" in message


def test_a_format_the_benchmark_kind_cannot_hold_is_refused(grid, tmp_path, capsys):
    config, records = grid
    folder = mme_tool_folder(tmp_path / "mme", records["mme-fixture"], ["Yes", "No"])
    message = refused(capsys, config, MODEL_ID, "pope-fixture", folder, "--out", str(tmp_path / "o.parquet"))
    assert "format mme-eval-tool does not hold answers to pope benchmarks such as pope-fixture" in message


def test_a_model_outside_the_grid_needs_out(grid, tmp_path, capsys):
    config, records = grid
    answers = write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"]))
    assert "give --out" in refused(capsys, config, MODEL_ID, "mmbench-fixture", answers)


def test_an_eval_tool_gold_answer_of_another_version_is_refused(grid, tmp_path, capsys):
    config, records = grid
    mme = records["mme-fixture"].copy()
    mme["answer"] = ["no", "yes"]  # the folder's gold answers, the records' swapped
    folder = mme_tool_folder(tmp_path / "mme", mme, ["Yes", "No"])
    message = refused(capsys, config, MODEL_ID, "mme-fixture", folder, "--out", str(tmp_path / "o.parquet"))
    assert "another MME version" in message


def test_unknown_format_name_is_refused(grid, tmp_path, capsys):
    config, records = grid
    answers = write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"]))
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "mmbench-fixture",
        answers,
        "--format",
        "llava",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert 'unknown import format "llava"' in message


def test_an_answer_line_cut_short_is_named(grid, tmp_path, capsys):
    config, records = grid
    lines = [json.dumps(line) for line in mmbench_answers(records["mmbench-fixture"])]
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines[:2] + [lines[2][:40]]) + "\n")
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", str(path), "--out", str(tmp_path / "o.parquet")
    )
    assert f"{path} line 3 is cut short" in message


# ----------------------------------------------------------------------------------------- MMBench submission


def mmbench_submission(path, records, lines) -> str:
    """scripts/convert_mmbench_for_submission.py: the dev TSV (its columns, in its order) without hint,
    category, source, image, comment, l2-category; `prediction` inserted seventh and set per answer by index;
    to_excel."""
    tsv = pd.DataFrame(
        {
            "index": records["id"].astype(int),
            "question": records["question"],
            "hint": records["hint"],
            **{c: [o[i] if i < len(o) else None for o in records["options"]] for i, c in enumerate("ABCD")},
            "answer": ["ABCD"[i] for i in records["answer_index"]],
            "category": records["category"],
            "image": "iVBORw0KGgo=",
            "source": "scienceqa",
            "l2-category": records["l2_category"],
            "comment": None,
            "split": "dev",
        }
    )
    df = tsv.drop(columns=["hint", "category", "source", "image", "comment", "l2-category"])
    df.insert(6, "prediction", None)
    for line in lines:
        df.loc[tsv["index"] == line["question_id"], "prediction"] = line["text"]
    df.to_excel(path, index=False, engine="openpyxl")
    return str(path)


def test_mmbench_submission_file_imports_like_llavas_answers(grid, tmp_path, capsys):
    config, records = grid
    mmbench = records["mmbench-fixture"]
    texts = ["B", "A", "A", "B", "The answer is C"]
    lines = mmbench_answers(mmbench, texts)
    xlsx = mmbench_submission(tmp_path / "llava-v1.5-13b.xlsx", mmbench, lines)
    assert list(pd.read_excel(xlsx).columns) == [
        "index",
        "question",
        "A",
        "B",
        "C",
        "D",
        "prediction",
        "answer",
        "split",
    ]
    out, out_jsonl = tmp_path / "x.parquet", tmp_path / "j.parquet"
    assert run(config, MODEL_ID, "mmbench-fixture", xlsx, "--out", str(out)) == 0
    assert "read as mmbench-submission (guessed" in capsys.readouterr().err
    assert (
        run(
            config,
            MODEL_ID,
            "mmbench-fixture",
            write_jsonl(tmp_path / "a.jsonl", lines),
            "--out",
            str(out_jsonl),
        )
        == 0
    )
    frame = imported(out)
    assert frame.equals(imported(out_jsonl)) and list(frame["raw"]) == texts
    assert list(frame["prediction_index"]) == [1, 0, 0, 1, 2]


def test_mmbench_submission_rows_left_empty_are_missing(grid, tmp_path, capsys):
    config, records = grid
    mmbench = records["mmbench-fixture"]
    lines = mmbench_answers(mmbench)
    xlsx = mmbench_submission(tmp_path / "s.xlsx", mmbench, lines[:3] + lines[4:])
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", xlsx, "--out", str(tmp_path / "o.parquet"))
    assert (
        f'answers 4 of the 5 items of mmbench-fixture: 1 missing, the first "{mmbench["id"].iloc[3]}"'
        in message
    )
    assert not (tmp_path / "o.parquet").exists()


def test_mmbench_submission_of_another_version_is_refused(grid, tmp_path, capsys):
    config, records = grid
    other = records["mmbench-fixture"].copy()
    other["options"] = [list(reversed(o)) for o in other["options"]]
    xlsx = mmbench_submission(tmp_path / "s.xlsx", other, mmbench_answers(other))
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", xlsx, "--out", str(tmp_path / "o.parquet"))
    assert "row 2 (index 1)" in message and "another MMBench version" in message
    (tmp_path / "cut.xlsx").write_bytes((tmp_path / "s.xlsx").read_bytes()[:500])
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "mmbench-fixture",
        str(tmp_path / "cut.xlsx"),
        "--format",
        "mmbench-submission",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert "is not a readable .xlsx workbook" in message and "cut short" in message


@pytest.mark.parametrize("cut", ["inside a character", "inside a literal", "the only line, format guessed"])
def test_an_answer_file_cut_anywhere_is_named_cut_short_with_its_line(grid, tmp_path, capsys, cut):
    config, records = grid
    lines = mmbench_answers(records["mmbench-fixture"])
    lines[2]["text"] = "答案是 A"  # a UTF-8 answer, as a Chinese model writes it
    lines[2]["metadata"] = {"finished": True}
    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines[:3]).encode("utf-8")
    path = tmp_path / "a.jsonl"
    if cut == "inside a character":  # the copy stopped inside the three bytes of a character
        path.write_bytes(data[: data.index("案".encode()) + 2])
        line = 3
    elif cut == "inside a literal":  # the parser stops at the start of `true`, not at the line's end
        path.write_bytes(data[: data.index(b"true") + 2])
        line = 3
    else:  # no format can be told from the file, and the cause is the copy
        first = json.dumps(lines[0]).encode("utf-8")
        path.write_bytes(first[: first.index(b"prompt")])
        line = 1
    message = refused(
        capsys, config, MODEL_ID, "mmbench-fixture", str(path), "--out", str(tmp_path / "o.parquet")
    )
    assert (
        message
        == f"vlmgrid: error: {path} line {line} is cut short (its JSON object does not end); copy the "
        f"whole file again"
    )
    assert not (tmp_path / "o.parquet").exists()
