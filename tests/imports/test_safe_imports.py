"""`vlmgrid import-predictions` with the user's files at stake: the output never overwrites an input or a file
that is not this cell's predictions, a cell's predictions are replaced only on request and never while its
inference runs, and answer files are read as their tools wrote them (raw line separators inside JSON strings,
prompts whose line breaks are escaped)."""

import json
import os
import socket

import pytest
from helpers.imports import (
    DATE,
    LLAVA_SHORT,
    MODEL_ID,
    grid,  # noqa: F401 (a fixture)
    imported,
    llava_line,
    mmbench_answers,
    mme_answers,
    mme_samples,
    mme_tool_folder,
    pope_files,
    refused,
    run,
    write_jsonl,
    write_samples,
)
from helpers.locks import _hold_in_subprocess

from vlmgrid.benchmarks import dance, load_benchmark
from vlmgrid.benchmarks.dance_build import build_dance
from vlmgrid.cellrun.lock import lock_path
from vlmgrid.cli import main
from vlmgrid.config import load_config
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES
from vlmgrid.fixtures.kinds import dance as dance_fixture
from vlmgrid.predictions import read_metadata
from vlmgrid.stages.prepare import prepare_benchmark


def _snapshot(path) -> dict:
    """The bytes of a file, or of every file under a folder, to show that nothing of them changed."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------- --out an input


@pytest.mark.parametrize("given", ["the same path", "another path to it", "a symbolic link", "a hard link"])
def test_an_out_that_is_the_answer_file_is_refused_and_the_answers_are_kept(grid, tmp_path, capsys, given):
    config, records = grid
    answers = tmp_path / "answers" / "mmbench.jsonl"
    answers.parent.mkdir()
    write_jsonl(answers, mmbench_answers(records["mmbench-fixture"]))
    before = answers.read_bytes()
    out = {
        "the same path": answers,
        "another path to it": tmp_path / "answers" / ".." / "answers" / "mmbench.jsonl",
        "a symbolic link": tmp_path / "link.parquet",
        "a hard link": tmp_path / "hard.parquet",
    }[given]
    if given == "a symbolic link":
        out.symlink_to(answers)
    elif given == "a hard link":
        os.link(answers, out)
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", str(answers), "--out", str(out))
    assert message == (
        f"vlmgrid: error: --out {out} is the answer file {answers} itself (the same file, by another "
        f"path or a link), which would be lost; give --out another path"
    )
    assert answers.read_bytes() == before


def test_an_out_that_is_the_question_file_is_refused(grid, tmp_path, capsys):
    config, records = grid
    questions, answers = pope_files(tmp_path, records["pope-fixture"], ["yes"] * 6)
    before = _snapshot(tmp_path)
    message = refused(
        capsys, config, MODEL_ID, "pope-fixture", answers, "--questions", questions, "--out", questions
    )
    assert f"--out {questions} is the question file {questions} itself" in message
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("folder", ["mme-eval-tool", "lmms-eval-samples"])
def test_an_out_inside_an_answer_folder_is_refused_and_the_folder_is_kept(grid, tmp_path, capsys, folder):
    config, records = grid
    mme = records["mme-fixture"]
    if folder == "mme-eval-tool":
        answers = tmp_path / "mme"
        mme_tool_folder(answers, mme, ["Yes", "No"])
    else:
        answers = tmp_path / "run"
        write_samples(answers, "mme", mme_samples(mme, ["Yes", "No"]))
    before = _snapshot(answers)
    out = answers / "predictions.parquet"
    message = refused(capsys, config, MODEL_ID, "mme-fixture", str(answers), "--out", str(out))
    assert message == (
        f"vlmgrid: error: --out {out} is inside the answer folder {answers}, which is read, not "
        f"written; give --out a path outside it"
    )
    assert _snapshot(answers) == before


# --------------------------------------------------------------------------------------------- existing files


def test_an_existing_file_that_is_not_a_predictions_file_is_kept(grid, tmp_path, capsys):
    config, records = grid
    answers = write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"]))
    notes = tmp_path / "notes.parquet"
    notes.write_text("a researcher's notes\n")
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", answers, "--out", str(notes))
    assert message == (
        f"vlmgrid: error: {notes} exists and is not a predictions file of vlmgrid; it is kept: give "
        f"--out another path, or move it away and import again"
    )
    assert notes.read_text() == "a researcher's notes\n"


def test_the_predictions_of_another_cell_are_kept(grid, tmp_path, capsys):
    config, records = grid
    out = tmp_path / "p.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "mmbench-fixture",
            write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"])),
            "--out",
            str(out),
        )
        == 0
    )
    before = out.read_bytes()
    mme = write_jsonl(tmp_path / "mme.jsonl", mme_answers(records["mme-fixture"], ["Yes", "No"]))
    for model, bench, answers in [
        ("other-model", "mmbench-fixture", tmp_path / "a.jsonl"),
        (MODEL_ID, "mme-fixture", mme),
    ]:
        message = refused(capsys, config, model, bench, str(answers), "--out", str(out))
        assert message == (
            f"vlmgrid: error: {out} holds the predictions of {MODEL_ID} on mmbench-fixture, not of "
            f"{model} on {bench}; it is kept: give --out another path"
        )
    assert out.read_bytes() == before


def test_inference_predictions_of_a_grid_cell_are_replaced_only_with_replace(grid, tmp_path, capsys):
    config, records = grid
    assert main(["infer", "random", "pope-fixture", "--no-progress", "--config", config]) == 0
    predictions = load_config(config).results_dir / "predictions" / "random" / "pope-fixture.parquet"
    inferred = predictions.read_bytes()
    questions, answers = pope_files(tmp_path, records["pope-fixture"], ["yes", "no"] * 3)
    message = refused(capsys, config, "random", "pope-fixture", answers, "--questions", questions)
    assert message == (
        f"vlmgrid: error: {predictions} already holds the predictions of random on pope-fixture "
        f"(made by vlmgrid infer); give --replace to replace them with the imported answers"
    )
    assert predictions.read_bytes() == inferred
    assert run(config, "random", "pope-fixture", answers, "--questions", questions, "--replace") == 0
    assert read_metadata(predictions)["provenance"]["imported"] == f"imported from {answers} (llava-answers)"
    # an import is replaced on request too, and only then
    message = refused(capsys, config, "random", "pope-fixture", answers, "--questions", questions)
    assert f"(imported from {answers} (llava-answers)); give --replace" in message


def test_an_import_into_a_cell_whose_inference_runs_is_refused_naming_it(grid, tmp_path, capsys):
    config, records = grid
    results = load_config(config).results_dir
    partial = results / "partial" / "llava-tiny" / "mmbench-fixture"
    predictions = results / "predictions" / "llava-tiny" / "mmbench-fixture.parquet"
    answers = write_jsonl(tmp_path / "a.jsonl", mmbench_answers(records["mmbench-fixture"]))
    holder = _hold_in_subprocess(partial)  # a running `vlmgrid infer llava-tiny mmbench-fixture`
    try:
        message = refused(capsys, config, "llava-tiny", "mmbench-fixture", answers)
        assert message.startswith(
            f"vlmgrid: error: llava-tiny on mmbench-fixture: another run of this cell is in "
            f"progress (pid {holder.pid} on {socket.gethostname()}, since "
        )
        assert message.endswith(
            f"holding its lock {lock_path(partial)}; wait for it to finish, or stop it "
            f"(`kill {holder.pid}` on {socket.gethostname()}) and run this again"
        )
        assert not predictions.exists()
    finally:
        holder.kill()
        holder.wait()
    assert run(config, "llava-tiny", "mmbench-fixture", answers) == 0  # the killed run's lock is taken over
    assert not lock_path(partial).exists()


# ---------------------------------------------------------------------------------------------- reading


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
@pytest.mark.parametrize("file_format", ["llava-answers", "lmms-eval-samples"])
def test_an_answer_holding_a_raw_line_separator_imports_as_it_is(
    grid, tmp_path, capsys, separator, file_format
):
    config, records = grid
    texts = [f"Yes{separator}it is", "No"]
    if file_format == "llava-answers":
        lines = mme_answers(records["mme-fixture"], texts)
        answers = tmp_path / "a.jsonl"
        answers.write_text(
            "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
        )
    else:
        answers = write_samples(tmp_path / "run", "mme", mme_samples(records["mme-fixture"], texts))
    out = tmp_path / "o.parquet"
    assert run(config, MODEL_ID, "mme-fixture", str(answers), "--out", str(out)) == 0, capsys.readouterr().err
    frame = imported(out)
    assert list(frame["raw"]) == texts and list(frame["prediction"]) == ["yes", "no"]


def _with_separator(path, n: int, key: str, separator: str) -> str:
    """Line `n` of a JSON-lines file with `separator` written raw into its `key` text; the new text."""
    lines = path.read_text("utf-8").split("\n")
    item = json.loads(lines[n])
    item[key] = f"{item[key]}{separator}(as published)"
    lines[n] = json.dumps(item, ensure_ascii=False)
    path.write_text("\n".join(lines), "utf-8")
    return item[key]


@pytest.mark.parametrize("separator", ["\u2028", "\u0085"])
def test_a_pope_label_file_holding_a_raw_line_separator_is_read_as_it_is(tmp_path, separator):
    fixture = BENCHMARK_FIXTURES.get("pope_coco")
    fixture.write(tmp_path / "pope", {**fixture.defaults, "size": 12})
    text = _with_separator(tmp_path / "pope" / "coco" / "coco_pope_popular.json", 0, "text", separator)
    prepare_benchmark(
        "pope",
        {
            "kind": "pope_coco",
            "source": {"type": "local", "path": str(tmp_path / "pope"), "expected_items": 36},
        },
        tmp_path / "bench",
    )
    assert text in set(load_benchmark(tmp_path / "bench").records["question"])


@pytest.mark.parametrize("separator", ["\u2028", "\u0085"])
def test_a_dance_query_holding_a_raw_line_separator_is_read_as_it_is(tmp_path, separator):
    build_dance(
        *dance_fixture.write_fixture_inputs(tmp_path / "in", seed=0),
        tmp_path / "set",
        relations=dance_fixture.FIXTURE_TEMPLATES,
        max_triples=2,
    )
    path = tmp_path / "set" / "queries.jsonl"
    n = next(
        n
        for n, line in enumerate(path.read_text().split("\n"))
        if json.loads(line)["direction"] == "riddle-to-image"
    )  # its query is a riddle's text
    text = _with_separator(path, n, "query", separator)
    _, queries = dance.load_dance(tmp_path / "set")
    assert queries[n]["query"] == text


def test_pope_prompts_whose_line_breaks_are_escaped_import_and_the_log_says_so(grid, tmp_path, capsys):
    config, records = grid
    pope = records["pope-fixture"]
    questions = [
        {
            "question_id": n,
            "image": f"{r['image_source']}.jpg",
            "text": f"{r['question']}\\n{LLAVA_SHORT}",
            "category": r["split"],
        }
        for n, (_, r) in enumerate(pope.iterrows(), start=1)
    ]
    answers = [
        llava_line(q["question_id"], q["text"], text, n)
        for n, (q, text) in enumerate(zip(questions, ["Yes", "No", "yes", "no", "Yes", "No"]))
    ]
    questions_path = write_jsonl(tmp_path / "llava_pope_test.jsonl", questions)
    answers_path = write_jsonl(tmp_path / "answers.jsonl", answers)
    out = tmp_path / "o.parquet"
    assert (
        run(config, MODEL_ID, "pope-fixture", answers_path, "--questions", questions_path, "--out", str(out))
        == 0
    )
    assert list(imported(out)["prediction"]) == ["yes", "no"] * 3
    said = capsys.readouterr().err
    assert (
        f"{questions_path}: 6 of 6 `text` texts write their line breaks as the two characters \\n; they are "
        f"read as line breaks"
    ) in said


def test_mme_prompts_whose_line_breaks_are_escaped_import(grid, tmp_path, capsys):
    config, records = grid
    lines = mme_answers(records["mme-fixture"], ["Yes", "No"])
    for line in lines:
        line["prompt"] = line["prompt"].replace("\n", "\\n")
    out = tmp_path / "o.parquet"
    assert (
        run(config, MODEL_ID, "mme-fixture", write_jsonl(tmp_path / "a.jsonl", lines), "--out", str(out)) == 0
    )
    assert list(imported(out)["prediction"]) == ["yes", "no"]
    assert (
        "2 of 2 `prompt` texts write their line breaks as the two characters \\n" in capsys.readouterr().err
    )


def test_answers_to_other_questions_show_the_first_pair_side_by_side(grid, tmp_path, capsys):
    config, records = grid
    pope = records["pope-fixture"]
    questions_path, answers_path = pope_files(tmp_path, pope, ["yes"] * 6)
    questions = [json.loads(line) for line in open(questions_path)]
    questions[3]["text"] = f"Is there a dog in the image?\n{LLAVA_SHORT}"  # popular-2 asks of a circle
    write_jsonl(tmp_path / "llava_pope_test.jsonl", questions)
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "pope-fixture",
        answers_path,
        "--questions",
        questions_path,
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert message == (
        f"vlmgrid: error: {answers_path} line 4 (question_id 4) asks 'Is there a dog in the image?', "
        f"but item popular-2, of the same split and image, asks 'Is there a circle in the image?' and "
        f"no answer matches it: the file's questions differ from the benchmark's; import answers "
        f"made from this benchmark's questions"
    )


def test_lmms_eval_samples_of_other_questions_show_the_pair_side_by_side(grid, tmp_path, capsys):
    config, records = grid
    lines = mme_samples(records["mme-fixture"], ["Yes", "No"])
    lines[1]["input"] = lines[1]["input"].replace("cross", "square")
    samples = write_samples(tmp_path, "mme", lines)
    message = refused(capsys, config, MODEL_ID, "mme-fixture", samples, "--out", str(tmp_path / "o.parquet"))
    assert message.startswith(
        f"vlmgrid: error: {samples} {DATE}_samples_mme.jsonl line 2 (doc_id 1) asks 'Is there "
        f"a square in this image?', but item existence/0000.jpg#1, of the same image, asks 'Is "
        f"there a cross in this image?'"
    )
    assert not (tmp_path / "o.parquet").exists()
