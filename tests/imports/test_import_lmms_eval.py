"""`vlmgrid import-predictions` of lmms-eval's logged samples (`--log_samples`): one line per document as
lmms-eval's evaluator builds it and `EvaluationTracker.save_results_samples` writes it, with the values each
task's `process_results` returns, imported into the prepared fixture benchmarks, matched by the ids those
values keep, refused in one sentence when they do not answer exactly the benchmark's items, and scored like
a local run."""

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.imports import (
    DATE,
    MME_PERCEPTION,
    MODEL_ID,
    RELEASES,
    SHORT,
    grid,  # noqa: F401 (a fixture)
    imported,
    logged,
    mme_samples,
    parse_pred_ans,
    refused,
    run,
    score_of,
    small_grid,
    write_logs_json,
    write_samples,
)

from vlmgrid.errors import VlmgridError
from vlmgrid.imports import guess_format
from vlmgrid.imports.lmms_eval import IMPORTER, read_samples
from vlmgrid.predictions import read_metadata

LETTER = "\nAnswer with the option's letter from the given choices directly."
POPE_TASKS = {"adversarial": "pope_adv", "popular": "pope_pop", "random": "pope_random"}


# ------------------------------------------------------------------------------------------- samples per task


def pope_samples(records, texts, release="0.4") -> dict[str, list[dict]]:
    """lmms_eval/tasks/pope: pope_adv, pope_pop, pope_random read the Full config's split of that name;
    process_results writes the same object under its five metrics."""
    by_task: dict[str, list[dict]] = {}
    for (_, r), text in zip(records.iterrows(), texts):
        lines = by_task.setdefault(POPE_TASKS[r["split"]], [])
        doc = {
            "id": r["id"],
            "question_id": r["question_id"],
            "question": r["question"],
            "answer": r["answer"],
            "image_source": r["image_source"],
            "category": r["category"],
        }
        pred = text.lower().strip()
        value = {
            "question_id": r["question_id"],
            "score": float(pred == r["answer"]),
            "prediction": pred,
            "ground_truth": r["answer"],
        }
        metrics = {
            f"pope_{name}": value for name in ("accuracy", "precision", "recall", "f1_score", "yes_ratio")
        }
        lines.append(
            logged(
                len(lines),
                doc,
                r["answer"],
                f"{r['question'].strip()}{SHORT}",
                text,
                metrics,
                release,
                POPE_TASKS[r["split"]],
            )
        )
    return by_task


def textvqa_samples(records, texts, release="0.4") -> list[dict]:
    """lmms_eval/tasks/textvqa (textvqa_val): the prompt capitalises the question; doc_to_target "answer" is
    no column of TextVQA, so the target is the template's text itself; `submission` keeps question_id."""
    lines = []
    for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts)):
        doc = {
            "image_id": r["image_id"],
            "question_id": int(r["id"]),
            "question": r["question"],
            "answers": list(r["answers"]),
            "ocr_tokens": list(r["ocr_tokens"]),
        }
        metrics = {"exact_match": 0.0, "submission": {"question_id": int(r["id"]), "answer": text.lower()}}
        lines.append(
            logged(
                n,
                doc,
                "answer",
                f"{r['question'].capitalize()}{SHORT}",
                text,
                metrics,
                release,
                "textvqa_val",
            )
        )
    return lines


def scienceqa_samples(records, texts, release="0.4") -> list[dict]:
    """lmms_eval/tasks/scienceqa (scienceqa_img): "Context: <hint>\\n" when there is one, the question, the
    lettered choices, the letter instruction; process_results returns exact_match alone."""
    lines = []
    for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts)):
        choices = "\n".join(f"{'ABCDE'[i]}. {c}" for i, c in enumerate(r["options"]))
        context = f"Context: {r['hint']}\n" if r["hint"] else ""
        target = "ABCDE"[r["answer_index"]]
        doc = {
            "question": r["question"],
            "choices": list(r["options"]),
            "answer": int(r["answer_index"]),
            "hint": r["hint"],
        }
        metrics = {"exact_match": sqa_exact_match(text, target, release)}
        lines.append(
            logged(
                n,
                doc,
                target,
                f"{context}{r['question']}\n{choices}{LETTER}",
                text,
                metrics,
                release,
                "scienceqa_img",
            )
        )
    return lines


def sqa_exact_match(text: str, target: str, release: str) -> float:
    """lmms_eval/tasks/scienceqa/utils.py sqa_process_results, restated per release: right when the answer is
    the target letter, or starts with a capital letter and a dot and that letter is the target. v0.1.0 to
    v0.2.0 compare as written; f06f8e67 (v0.2.2 to v0.3.4) strips and lower-cases both first, so no answer
    starts with a capital; 8ada8050 (v0.3.5 on) lower-cases the answer only to compare it whole."""
    if release == "0.2.0":
        pred = text
    elif release in ("0.2.4", "0.3.0"):
        pred, target = text.strip().lower(), target.strip().lower()
    else:
        pred, target = text.strip(), target.strip().lower()
        if pred.lower() == target:
            return 1.0
    if pred == target:
        return 1.0
    starts = len(pred) >= 2 and pred[0].isupper() and pred[1] == "."
    return float(starts and (pred[0] if release == "0.2.0" else pred[0].lower()) == target)


def mmbench_samples(records, texts, release="0.4") -> list[dict]:
    """lmms_eval/tasks/mmbench (mmbench_en_dev): "<hint> <question> There are several options:\\nA. ..." and
    the same row under gpt_eval_score and submission, its options A-E ("nan" where the row has none)."""
    lines = []
    for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts)):
        options = {letter: option for letter, option in zip("ABCD", r["options"])}
        listed = "\n".join(f"{letter}. {option}" for letter, option in options.items())
        hint = r["hint"] or None
        query = f"{hint} {r['question']} " if hint else f"{r['question']} "
        row = {
            "index": int(r["id"]),
            "question": r["question"],
            "answer": "ABCD"[r["answer_index"]],
            "prediction": text.strip(),
            "hint": hint,
            "source": "fixture",
            "split": "dev",
            "category": r["category"],
            "L2-category": r["l2_category"],
        }
        row |= {letter: options.get(letter, "nan") for letter in "ABCDE"}
        lines.append(
            logged(
                n,
                row,
                row["answer"],
                f"{query}There are several options:\n{listed}{LETTER}",
                text,
                {"gpt_eval_score": dict(row), "submission": dict(row)},
                release,
                "mmbench_en_dev",
            )
        )
    return lines


# ---------------------------------------------------------------------------------------------- imports


def test_mme_samples_match_their_image_and_question_and_score(grid, tmp_path, capsys):
    config, records = grid
    mme = records["mme-fixture"]
    lines = mme_samples(mme, ["Yes", "No"])
    samples = write_samples(tmp_path / "llava-v1.5-13b", "mme", list(reversed(lines)))
    out = tmp_path / "mme.parquet"
    assert run(config, MODEL_ID, "mme-fixture", samples, "--out", str(out)) == 0
    assert "read as lmms-eval-samples (guessed" in capsys.readouterr().err
    frame = imported(out)
    assert list(frame["id"]) == list(mme["id"]) and list(frame["raw"]) == ["Yes", "No"]
    assert list(frame["prediction"]) == ["yes", "no"]
    result = score_of(config, tmp_path, "mme-fixture", out)
    assert result["metrics"]["total"]["value"] == 200.0  # acc 100 + acc+ 100 on the one image


def test_pope_split_tasks_are_imported_from_a_run_folder(grid, tmp_path, capsys):
    config, records = grid
    pope = records["pope-fixture"]
    texts = ["Yes", "No", "yes", "no", "No", "no"]
    run_folder = tmp_path / "llava-v1.5-13b"
    for task, lines in pope_samples(pope, texts).items():
        write_samples(run_folder, task, lines)
    write_samples(run_folder, "mme", mme_samples(records["mme-fixture"], ["Yes", "No"]))
    (run_folder / f"{DATE}_results.json").write_text(json.dumps({"results": {"pope_adv": {}}}))
    out = tmp_path / "pope.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "pope-fixture",
            str(run_folder),
            "--format",
            "lmms-eval-samples",
            "--out",
            str(out),
        )
        == 0
    )
    assert "samples of lmms-eval task mme do not answer pope benchmarks" in capsys.readouterr().err
    frame = imported(out)
    assert list(frame["id"]) == list(pope["id"]) and list(frame["raw"]) == texts
    # Gold per split: yes, no. F1 per split: adversarial 1, popular 1, random 0 (its one "yes" answered "No"):
    # the headline, their mean, is 2/3.
    assert list(pope["answer"]) == ["yes", "no"] * 3
    assert score_of(config, tmp_path, "pope-fixture", out)["value"] == pytest.approx(round(2 / 3 * 100, 4))


def test_the_pope_task_is_refused_when_its_question_ids_restart_per_split(grid, tmp_path, capsys):
    config, records = grid
    pope = records["pope-fixture"]
    lines = [line for task_lines in pope_samples(pope, ["yes"] * 6).values() for line in task_lines]
    samples = write_samples(tmp_path, "pope", lines)
    message = refused(capsys, config, MODEL_ID, "pope-fixture", samples, "--out", str(tmp_path / "o.parquet"))
    assert "lmms-eval's pope task, whose question_id restarts in each of POPE's splits" in message
    assert "question_id 1 names 3 items" in message and "pope_adv, pope_pop and pope_random" in message


def test_the_pope_task_is_read_when_its_question_ids_name_one_item_each(tmp_path):
    records = pd.DataFrame(
        {
            "id": ["random-1", "random-2"],
            "question_id": ["1", "2"],
            "answer": ["yes", "no"],
            "split": ["random"] * 2,
            "question": ["Is there a star in the image?"] * 2,
            "image_source": ["a", "b"],
            "category": ["random"] * 2,
        }
    )
    lines = pope_samples(records, ["no", "No"])["pope_random"]
    samples = write_samples(tmp_path, "pope", list(reversed(lines)))
    answers = IMPORTER.read(Path(samples), records, "pope", None)
    assert [(a.record_id, a.raw) for a in answers] == [("random-2", "No"), ("random-1", "no")]
    assert guess_format(Path(samples)) == "lmms-eval-samples"


def test_textvqa_samples_match_by_submission_question_id(grid, tmp_path):
    config, records = grid
    textvqa = records["textvqa-fixture"]
    texts = ["Exit", "84", "the bus"]
    lines = textvqa_samples(textvqa, texts, "0.7")  # v0.7 writes a single response bare, not in a list
    assert lines[0]["filtered_resps"] == "Exit"
    samples = write_samples(tmp_path, "textvqa_val", [lines[2], lines[0], lines[1]])
    out = tmp_path / "textvqa.parquet"
    assert run(config, MODEL_ID, "textvqa-fixture", samples, "--out", str(out)) == 0
    frame = imported(out)
    assert list(frame["id"]) == list(textvqa["id"]) and list(frame["raw"]) == texts


def test_scienceqa_samples_match_their_row_and_score(grid, tmp_path):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    gold = ["ABCDE"[i] for i in sqa["answer_index"]]
    texts = [gold[0], "I am not sure.", f"{gold[2]}. yes", "E", gold[4], "B" if gold[5] != "B" else "A"]
    samples = write_samples(tmp_path, "scienceqa_img", scienceqa_samples(sqa, texts))
    out = tmp_path / "sqa.parquet"
    assert run(config, MODEL_ID, "scienceqa-fixture", samples, "--out", str(out)) == 0
    frame = imported(out)
    assert list(frame["id"]) == [f"test-{n}" for n in range(6)] and list(frame["raw"]) == texts
    assert frame["prediction"].isna().tolist() == [False, True, False, True, False, False]
    assert score_of(config, tmp_path, "scienceqa-fixture", out)["value"] == pytest.approx(
        round(3 / 6 * 100, 4)
    )


@pytest.mark.parametrize("task", ["mmbench_en_dev", "mmbench_en_dev_static"])
def test_mmbench_samples_match_by_index_and_score(grid, tmp_path, task):
    config, records = grid
    mmbench = records["mmbench-fixture"]
    texts = ["B", "A", "A", "B", "The answer is C"]
    samples = write_samples(tmp_path, task, mmbench_samples(mmbench, texts))
    out = tmp_path / "mmbench.parquet"
    assert run(config, MODEL_ID, "mmbench-fixture", samples, "--out", str(out)) == 0
    frame = imported(out)
    assert list(frame["id"]) == list(mmbench["id"]) and list(frame["prediction_index"]) == [1, 0, 0, 1, 2]
    assert score_of(config, tmp_path, "mmbench-fixture", out)["value"] == 100.0  # as the LLaVA import's test


def test_an_older_logs_json_is_read_like_the_jsonl(grid, tmp_path):
    config, records = grid
    mme = records["mme-fixture"]
    path = write_logs_json(tmp_path, "mme", mme_samples(mme, ["yes", "Yes"], "0.2.0"))
    assert "mme_percetion_score" in json.loads(Path(path).read_text())["logs"][0]
    assert guess_format(Path(path)) == "lmms-eval-samples"
    out = tmp_path / "mme.parquet"
    assert run(config, MODEL_ID, "mme-fixture", path, "--out", str(out)) == 0
    assert list(imported(out)["prediction"]) == ["yes", "yes"]
    assert [s.where for s in read_samples(Path(path))] == [
        "mme.json logs[0] (doc_id 0)",
        "mme.json logs[1] (doc_id 1)",
    ]


# ---------------------------------------------------------------------------------------------- refusals


def test_a_task_that_cannot_be_matched_is_refused(grid, tmp_path, capsys):
    config, records = grid
    samples = write_samples(
        tmp_path, "textvqa_test", textvqa_samples(records["textvqa-fixture"], ["a", "b", "c"])
    )
    message = refused(
        capsys, config, MODEL_ID, "textvqa-fixture", samples, "--out", str(tmp_path / "o.parquet")
    )
    assert "samples of lmms-eval task textvqa_test, whose documents cannot be matched to items" in message
    assert (
        "mme, pope, pope_adv, pope_pop, pope_random, textvqa_val, scienceqa_img, mmbench_en_dev, "
        "mmbench_en_dev_static, cv_bench, cv_bench_2d, cv_bench_3d, mmvp"
    ) in message


def test_samples_of_another_kind_are_refused(grid, tmp_path, capsys):
    config, records = grid
    samples = write_samples(tmp_path, "mme", mme_samples(records["mme-fixture"], ["Yes", "No"]))
    message = refused(capsys, config, MODEL_ID, "pope-fixture", samples, "--out", str(tmp_path / "o.parquet"))
    assert "task mme, which answer mme benchmarks, not pope ones" in message
    assert "pope, pope_adv, pope_pop, pope_random" in message


def test_a_folder_without_samples_for_the_kind_is_refused(grid, tmp_path, capsys):
    config, records = grid
    write_samples(tmp_path / "run", "mme", mme_samples(records["mme-fixture"], ["Yes", "No"]))
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "scienceqa-fixture",
        str(tmp_path / "run"),
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert "holds no samples of an lmms-eval task for scienceqa_img benchmarks (it holds mme)" in message


def test_a_limited_run_is_refused(grid, tmp_path, capsys):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    samples = write_samples(tmp_path, "scienceqa_img", scienceqa_samples(sqa, ["A"] * 6)[:4])  # --limit 4
    message = refused(
        capsys, config, MODEL_ID, "scienceqa-fixture", samples, "--out", str(tmp_path / "o.parquet")
    )
    assert 'answers 4 of the 6 items of scienceqa-fixture: 2 missing, the first "test-4"' in message


def test_two_runs_of_a_task_in_one_folder_are_refused(grid, tmp_path, capsys):
    config, records = grid
    lines = mme_samples(records["mme-fixture"], ["Yes", "No"])
    write_samples(tmp_path / "run", "mme", lines)
    (tmp_path / "run" / "20240616_101500_samples_mme.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines)
    )
    message = refused(
        capsys, config, MODEL_ID, "mme-fixture", str(tmp_path / "run"), "--out", str(tmp_path / "o.parquet")
    )
    assert (
        f"twice ({DATE}_samples_mme.jsonl line 1 (doc_id 0) and 20240616_101500_samples_mme.jsonl line 1"
        in message
    )


def test_a_sample_of_an_image_the_benchmark_lacks_is_refused(grid, tmp_path, capsys):
    config, records = grid
    lines = mme_samples(records["mme-fixture"], ["Yes", "No"])
    lines[1][MME_PERCEPTION["0.4"]]["question_id"] = "existence/0099.jpg"
    samples = write_samples(tmp_path, "mme", lines)
    message = refused(capsys, config, MODEL_ID, "mme-fixture", samples, "--out", str(tmp_path / "o.parquet"))
    assert "1 answer(s) to items that benchmark mme-fixture does not have" in message
    assert f"{DATE}_samples_mme.jsonl line 2 (doc_id 1)" in message


@pytest.mark.parametrize(
    "bench, task, make, change, expected",
    [
        (
            "mme-fixture",
            "mme",
            mme_samples,
            lambda line: line.update(target="No"),
            "gives the gold answer 'No'",
        ),
        (
            "scienceqa-fixture",
            "scienceqa_img",
            scienceqa_samples,
            lambda line: line.update(input="Which is it?\nA. x\nB. y"),
            "gives a prompt without the question",
        ),
        (
            "scienceqa-fixture",
            "scienceqa_img",
            scienceqa_samples,
            lambda line: line.update(target="E"),
            "gives the gold letter 'E'",
        ),
        (
            "mmbench-fixture",
            "mmbench_en_dev",
            mmbench_samples,
            lambda line: line["submission"].update(A="a dog"),
            "gives the options ['a dog'",
        ),
        (
            "pope-fixture",
            "pope_adv",
            lambda records, texts: pope_samples(records, texts)["pope_adv"],
            lambda line: line["pope_accuracy"].update(ground_truth="no"),
            "gives the gold answer 'no'",
        ),
    ],
)
def test_samples_of_another_copy_of_the_benchmark_are_refused(
    grid, tmp_path, capsys, bench, task, make, change, expected
):
    config, records = grid
    lines = make(records[bench], ["yes"] * len(records[bench]))
    change(lines[0])
    samples = write_samples(tmp_path, task, lines)
    message = refused(
        capsys,
        config,
        MODEL_ID,
        bench,
        samples,
        "--format",
        "lmms-eval-samples",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert f"{DATE}_samples_{task}.jsonl line 1 (doc_id 0) {expected}" in message
    assert "made from another" in message and "copy; import them into that one" in message


def test_a_file_that_is_not_samples_is_refused(grid, tmp_path, capsys):
    config, records = grid
    out = str(tmp_path / "o.parquet")
    lines = mme_samples(records["mme-fixture"], ["Yes", "No"])
    del lines[1]["filtered_resps"]
    samples = write_samples(tmp_path, "mme", lines)
    message = refused(
        capsys, config, MODEL_ID, "mme-fixture", samples, "--format", "lmms-eval-samples", "--out", out
    )
    assert (
        "line 2 has no `filtered_resps`: the file is not a samples file logged by lmms-eval 0.1 to 0.7 (an "
        "object with doc_id and filtered_resps a line)"
    ) in message
    renamed = tmp_path / "answers.jsonl"
    renamed.write_text(
        "".join(json.dumps(line) + "\n" for line in mme_samples(records["mme-fixture"], ["a", "b"]))
    )
    message = refused(capsys, config, MODEL_ID, "mme-fixture", str(renamed), "--out", out)
    assert (
        "is neither lmms-eval's `<date>_samples_<task>.jsonl` (0.2.4 to 0.7; the name says the task: keep "
        "it) nor an older `<task>.json` with a `logs` list (0.1 to 0.2.3)"
    ) in message


# --------------------------------------------------------------------------------------------- CV-Bench, MMVP

CVBENCH = pd.DataFrame({"id": ["2D-0", "2D-1", "3D-0"], "answer_index": [1, 0, 0]})


def cvbench_samples(rows, texts, release="0.7") -> list[dict]:
    """lmms_eval/tasks/cv_bench: doc_to_target is the row's answer "(B)"; process_results keys cv_bench_acc
    with the row's idx as `id`, its type, task, source and the gold letter without parentheses."""
    lines = []
    for n, ((kind, idx, gold), text) in enumerate(zip(rows, texts)):
        doc = {
            "idx": idx,
            "type": kind,
            "task": "Count" if kind == "2D" else "Depth",
            "answer": f"({gold})",
            "source": "ADE20K" if kind == "2D" else "Omni3D",
            "prompt": "How many chairs are in the image?",
        }
        prompt = (
            "Note: You only need to respond with A, B without providing any additional "
            f"information.\n{doc['prompt']}"
        )
        result = {
            "id": idx,
            "gt_content": gold,
            "pred_parsed": text[:1],
            "pred": text,
            "type": kind,
            "task": doc["task"],
            "source": doc["source"],
            "is_correct": text[:1] == gold,
        }
        lines.append(
            logged(n, doc, doc["answer"], prompt, text, {"cv_bench_acc": result}, release, "cv_bench")
        )
    return lines


def test_cv_bench_samples_match_by_type_and_idx_from_one_task_or_its_two_halves(tmp_path):
    rows = [("2D", 0, "B"), ("2D", 1, "A"), ("3D", 0, "A")]
    single = write_samples(tmp_path / "one", "cv_bench", cvbench_samples(rows, ["B", "(C)", "A"]))
    answers = IMPORTER.read(Path(single), CVBENCH, "cvbench", None)
    assert [(a.record_id, a.raw) for a in answers] == [("2D-0", "B"), ("2D-1", "(C)"), ("3D-0", "A")]
    write_samples(tmp_path / "two", "cv_bench_2d", cvbench_samples(rows[:2], ["B", "(C)"]))
    write_samples(tmp_path / "two", "cv_bench_3d", cvbench_samples(rows[2:], ["A"]))
    answers = IMPORTER.read(tmp_path / "two", CVBENCH, "cvbench", None)
    assert [a.record_id for a in answers] == ["2D-0", "2D-1", "3D-0"]
    other = write_samples(tmp_path / "other", "cv_bench", cvbench_samples([("2D", 0, "A")], ["A"]))
    with pytest.raises(VlmgridError, match="gives the gold letter 'A', but item 2D-0 has 'B'"):
        IMPORTER.read(Path(other), CVBENCH, "cvbench", None)


def mmvp_samples(indices, golds, texts, release="0.7") -> list[dict]:
    """lmms_eval/tasks/mmvp (v0.7): process_results makes the 1-based Index 0-based and writes the same object
    under mmvp_accuracy and mmvp_pair_accuracy, with the gold letter of lmms-lab-eval/MMVP (its four label
    corrections applied). v0.6 added original_gt and correction_applied, its gt corrected at 0-based 99 and
    279 only (to A), on MMVP/MMVP."""
    lines = []
    for n, (index, gold, text) in enumerate(zip(indices, golds, texts)):
        doc = {
            "Index": index,
            "Question": "Is the dog facing left?",
            "Options": "(a) Yes (b) No",
            "Correct Answer": f"({gold.lower()})",
        }
        result = {
            "index": index - 1,
            "pair_index": (index - 1) // 2,
            "pred": text,
            "pred_letter": text[:1],
            "gt": gold,
            "is_correct": text[:1] == gold,
        }
        if release == "0.6":
            original = doc["Correct Answer"][1].upper()
            result = {
                **{k: v for k, v in result.items() if k != "is_correct"},
                "original_gt": original,
                "is_correct": text[:1] == gold,
                "correction_applied": index - 1 in (99, 279),
            }
        lines.append(
            logged(
                n,
                doc,
                gold,
                f"{doc['Question']}\n{doc['Options']}{LETTER}",
                text,
                {"mmvp_accuracy": result, "mmvp_pair_accuracy": result},
                "0.4" if release == "0.6" else release,
                "mmvp",
            )
        )
    return lines


def test_mmvp_samples_match_by_index(tmp_path):
    records = pd.DataFrame({"id": ["1", "2"], "answer_index": [0, 1]})
    samples = write_samples(tmp_path, "mmvp", mmvp_samples([2, 1], ["B", "A"], ["(b) No", "A"]))
    answers = IMPORTER.read(Path(samples), records, "mmvp", None)
    assert [(a.record_id, a.raw) for a in answers] == [("2", "(b) No"), ("1", "A")]
    uncorrected = write_samples(tmp_path / "o", "mmvp", mmvp_samples([1], ["B"], ["A"]))
    with pytest.raises(VlmgridError, match="gives the gold letter 'B', but item 1 has 'A'"):
        IMPORTER.read(Path(uncorrected), records, "mmvp", None)


# ---------------------------------------------------------------------------------------------- releases

MME_TEXTS = [
    "Yes",
    "No",
    "yes",
    "Yes",
    "No",
    "No",
    "Yes.",
    "no",
    "No",
    "No.",
    "yes",
    "no",
    "Yes",
    "yes",
    "no",
    "Yes",
]


@pytest.fixture(scope="module")
def mme_grid(tmp_path_factory):
    """MME's fixture at its default size: 8 images of 4 perception subtasks, two questions each."""
    return small_grid(tmp_path_factory.mktemp("mme"), {"mme-fixture": 8})


def samples_of(path: Path) -> list[dict]:
    """The samples of a file as lmms-eval wrote it: its lines, or an older `<task>.json`'s logs."""
    if path.suffix == ".json":
        return json.loads(path.read_text())["logs"]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def mme_aggregate(values: list[dict]) -> dict[str, float]:
    """lmms_eval/tasks/mme/utils.py mme_aggregate_results, restated (the same in every release): the values of
    one key grouped by category, then by question_id (the image), whose two scores give acc (their mean) and
    acc+ (both right), each times 100 and summed per image; a category's score is its images' mean of that
    sum, the key's aggregate the sum over its categories. {category: score}."""
    by_category: dict[str, dict[str, list[float]]] = {}
    for value in values:
        by_category.setdefault(value["category"], {}).setdefault(value["question_id"], []).append(
            value["score"]
        )
    scores = {}
    for category, images in by_category.items():
        assert all(len(pair) == 2 for pair in images.values())  # "MME only supports pairwise evaluation"
        per_image = [sum(pair) / 2 * 100 + (sum(pair) == 2) * 100 for pair in images.values()]
        scores[category] = sum(per_image) / len(images)
    return scores


@pytest.mark.parametrize("release", RELEASES)
def test_mme_samples_of_each_release_score_as_lmms_eval_aggregates_them(mme_grid, tmp_path, release):
    config, records = mme_grid
    mme = records["mme-fixture"]
    lines = mme_samples(mme, MME_TEXTS, release)
    if release == "0.2.0":
        path = Path(write_logs_json(tmp_path / "run", "mme", lines))
    else:
        path = Path(write_samples(tmp_path / "run", "mme", lines))
    written = samples_of(path)
    perception_key = "mme_perception_score" if release not in ("0.2.0", "0.2.4") else "mme_percetion_score"
    assert all(perception_key in sample for sample in written)  # the fixture's categories are all perception
    out = tmp_path / "mme.parquet"
    assert run(config, MODEL_ID, "mme-fixture", str(path), "--out", str(out)) == 0
    assert list(imported(out)["raw"]) == MME_TEXTS
    theirs = mme_aggregate([sample[perception_key] for sample in written])
    assert [parse_pred_ans(text) == gold for text, gold in zip(MME_TEXTS, mme["answer"])].count(False) == 6
    ours = score_of(config, tmp_path, "mme-fixture", out)
    for category, score in theirs.items():
        assert ours["breakdown"]["category"][category]["metrics"]["total"]["value"] == pytest.approx(score)
    assert ours["metrics"]["perception"]["value"] == pytest.approx(sum(theirs.values()))
    assert ours["metrics"]["total"]["value"] == pytest.approx(sum(theirs.values()))
    assert sum(theirs.values()) < 800  # some answers are wrong, so the comparison tells something


@pytest.mark.parametrize("release", ["0.2.4", "0.4", "0.7"])
def test_each_tasks_samples_import_in_each_release_layout(grid, tmp_path, release):
    _, records = grid
    pope = records["pope-fixture"]
    for task, lines in pope_samples(pope, ["yes", "no"] * 3, release).items():
        write_samples(tmp_path / "pope", task, lines)
    answers = IMPORTER.read(tmp_path / "pope", pope, "pope", None)
    assert sorted(a.record_id for a in answers) == sorted(pope["id"])
    cases = [
        ("textvqa_val", "textvqa", textvqa_samples, "textvqa-fixture"),
        ("scienceqa_img", "scienceqa_img", scienceqa_samples, "scienceqa-fixture"),
        ("mmbench_en_dev", "mmbench", mmbench_samples, "mmbench-fixture"),
    ]
    for task, kind, make, bench in cases:
        texts = ["A"] * len(records[bench])
        path = write_samples(tmp_path / task, task, make(records[bench], texts, release))
        answers = IMPORTER.read(Path(path), records[bench], kind, None)
        assert [a.record_id for a in answers] == list(records[bench]["id"]) and [
            a.raw for a in answers
        ] == texts


def test_mmvp_samples_of_v0_6_and_v0_7_import_though_they_correct_other_labels(tmp_path):
    # Index 99 and 100 (a pair): the original labels (a), (b); both releases' gold as their code writes it.
    records = pd.DataFrame(
        {"id": ["99", "100", "101"], "answer_index": [1, 0, 0], "label_corrected": [True, True, False]}
    )
    v06 = write_samples(
        tmp_path / "v06", "mmvp", mmvp_samples([99, 100, 101], ["A", "A", "A"], ["B", "A", "A"], "0.6")
    )
    assert json.loads(Path(v06).read_text().splitlines()[0])["mmvp_accuracy"]["original_gt"] == "A"
    v07 = write_samples(
        tmp_path / "v07", "mmvp", mmvp_samples([99, 100, 101], ["B", "A", "A"], ["B", "A", "A"])
    )
    for path in (v06, v07):
        answers = IMPORTER.read(Path(path), records, "mmvp", None)
        assert [(a.record_id, a.raw) for a in answers] == [("99", "B"), ("100", "A"), ("101", "A")]
    other = write_samples(tmp_path / "o", "mmvp", mmvp_samples([101], ["B"], ["A"], "0.6"))
    with pytest.raises(VlmgridError, match="gives the gold letter 'B', but item 101 has 'A'"):
        IMPORTER.read(Path(other), records, "mmvp", None)


@pytest.mark.parametrize(
    "task, make, key, expected",
    [
        (
            "mme",
            lambda records: mme_samples(records["mme-fixture"], ["Yes", "No"], "0.7"),
            "mme_perception_score",
            "has no `mme_perception_score` (lmms-eval >= 0.3, since bb3fd82) nor `mme_percetion_score` "
            "(lmms-eval 0.1 to 0.2, before bb3fd82) nor `mme_cognition_score` (every release) object: it is "
            "not the samples of the task mme its name says; vlmgrid reads lmms-eval 0.1 to 0.7",
        ),
        (
            "pope_adv",
            lambda records: pope_samples(records["pope-fixture"], ["yes"] * 6)["pope_adv"],
            "pope_accuracy",
            "has no `pope_accuracy` (every release) object: it is not the samples of the task pope_adv its "
            "name says; vlmgrid reads lmms-eval 0.1 to 0.7",
        ),
        (
            "mmbench_en_dev",
            lambda records: mmbench_samples(records["mmbench-fixture"], ["A", "B"]),
            "submission",
            "has no `submission` (every release) object: it is not the samples of the task mmbench_en_dev",
        ),
    ],
)
def test_samples_of_an_unknown_variant_are_refused_naming_the_key_and_the_releases(
    grid, tmp_path, capsys, task, make, key, expected
):
    config, records = grid
    lines = make(records)
    for line in lines:  # a release that would have renamed the key again
        line[f"{key}_v2"] = line.pop(key)
    bench = {"mme": "mme-fixture", "pope_adv": "pope-fixture", "mmbench_en_dev": "mmbench-fixture"}[task]
    samples = write_samples(tmp_path, task, lines)
    message = refused(
        capsys,
        config,
        MODEL_ID,
        bench,
        samples,
        "--format",
        "lmms-eval-samples",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert message.startswith(f"vlmgrid: error: {samples} {Path(samples).name} line 1 (doc_id 0) {expected}")


# ------------------------------------------------------------------------------------ lmms-eval's own reading


def tool_reading_of(path) -> dict | None:
    return read_metadata(Path(path)).get("tool_reading")


def pope_f1(values: list[dict]) -> float:
    """lmms_eval/tasks/pope/utils.py pope_aggregate_f1_score, restated (the same in every release): precision
    and recall of "yes" over the values' `prediction` and `ground_truth`, an answer neither "yes" nor "no"
    counted in neither, 0 where a denominator is 0."""
    tp = sum(v["prediction"] == "yes" and v["ground_truth"] == "yes" for v in values)
    fp = sum(v["prediction"] == "yes" and v["ground_truth"] == "no" for v in values)
    fn = sum(v["prediction"] == "no" and v["ground_truth"] == "yes" for v in values)
    precision = tp / (tp + fp) if tp + fp else 0
    recall = tp / (tp + fn) if tp + fn else 0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0


@pytest.mark.parametrize("release", ["0.2.0", "0.7"])
def test_mme_values_are_lmms_evals_reading_and_the_tool_figure_its_aggregation(mme_grid, tmp_path, release):
    config, records = mme_grid
    mme = records["mme-fixture"]
    lines = mme_samples(mme, MME_TEXTS, release)
    key = MME_PERCEPTION[release]
    lines[0][key]["score"] = (
        1.0 - lines[0][key]["score"]
    )  # a value other than vlmgrid's rule gives: read, not redone
    if release == "0.2.0":
        path = write_logs_json(tmp_path / "run", "mme", lines)
    else:
        path = write_samples(tmp_path / "run", "mme", lines)
    out = tmp_path / "mme.parquet"
    assert run(config, MODEL_ID, "mme-fixture", path, "--out", str(out)) == 0
    entry = tool_reading_of(out)
    assert entry["tool"] == "lmms-eval" and [f["file"] for f in entry["files"]] == [path]
    assert [(i["id"], i["hit"], i["judge"]) for i in entry["items"]] == [
        (record_id, int(line[key]["score"]), False) for record_id, line in zip(mme["id"], lines)
    ]
    theirs = sum(mme_aggregate([line[key] for line in lines]).values())
    score = score_of(config, tmp_path, "mme-fixture", out)
    tool = score["tool_reading"]
    assert tool["metrics"]["total"] == pytest.approx(theirs)  # lmms-eval's figure: the categories' sum
    assert tool["value"] == pytest.approx(theirs / (200 * 4) * 100)  # the scaled headline, of 4 subtasks
    assert tool["tool"] == "lmms-eval" and tool["n_read_by_judge"] == 0
    assert score["metrics"]["total"]["value"] != pytest.approx(
        theirs
    )  # the headline stays the official reading


def test_pope_values_are_lmms_evals_reading_and_the_tool_figure_its_f1(grid, tmp_path):
    config, records = grid
    pope = records["pope-fixture"]
    texts = ["Yes", "Yes", "yes ", "no", "No", "no"]
    by_task = pope_samples(pope, texts)
    for task, lines in by_task.items():
        write_samples(tmp_path / "run", task, lines)
    out = tmp_path / "pope.parquet"
    assert run(config, MODEL_ID, "pope-fixture", str(tmp_path / "run"), "--out", str(out)) == 0
    entry = tool_reading_of(out)
    assert entry["tool"] == "lmms-eval" and len(entry["files"]) == 3
    values = {
        line["pope_accuracy"]["question_id"] + task: line["pope_accuracy"]
        for task, lines in by_task.items()
        for line in lines
    }
    assert sorted((i["hit"], i["option"]) for i in entry["items"]) == sorted(
        (int(v["score"]), v["prediction"]) for v in values.values()
    )
    theirs = sum(pope_f1([line["pope_accuracy"] for line in lines]) for lines in by_task.values()) / 3 * 100
    score = score_of(config, tmp_path, "pope-fixture", out)
    assert score["tool_reading"]["value"] == pytest.approx(theirs)
    # pope_aggregate_accuracy: the mean of the values' scores (per split task, then the splits' mean, as all
    # three hold as many items)
    accuracy = sum(v["score"] for v in values.values()) / len(values) * 100
    assert score["tool_reading"]["metrics"]["accuracy"] == pytest.approx(accuracy)


@pytest.mark.parametrize("release", ["0.2.4", "0.4"])
def test_scienceqa_exact_match_is_lmms_evals_reading_and_the_tool_figure_its_mean(
    grid, tmp_path, capsys, release
):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    gold = ["ABCDE"[i] for i in sqa["answer_index"]]
    texts = [
        gold[0],
        "I am not sure.",
        f"{gold[2]}. yes",
        "E",
        gold[4].lower(),
        "B" if gold[5] != "B" else "A",
    ]
    lines = scienceqa_samples(sqa, texts, release)
    path = write_samples(tmp_path, "scienceqa_img", lines)
    out = tmp_path / "sqa.parquet"
    assert run(config, MODEL_ID, "scienceqa-fixture", path, "--out", str(out)) == 0
    entry = tool_reading_of(out)
    assert [i["hit"] for i in entry["items"]] == [int(line["exact_match"]) for line in lines]
    mean = sum(line["exact_match"] for line in lines) / len(lines) * 100  # exact_match's aggregation: mean
    assert mean == pytest.approx(50.0 if release == "0.4" else 33.3333, abs=1e-3)  # 0.2.4 misses "C. yes"
    score = score_of(config, tmp_path, "scienceqa-fixture", out)
    assert score["tool_reading"]["value"] == pytest.approx(mean)
    assert score["tool_reading"]["source"] == "verdicts"
    assert f"; lmms-eval reads {mean:.1f} (0 by its judge)) -> " in capsys.readouterr().err


def test_textvqa_values_give_no_tool_reading(grid, tmp_path):
    config, records = grid
    textvqa = records["textvqa-fixture"]
    path = write_samples(tmp_path, "textvqa_val", textvqa_samples(textvqa, ["Exit", "84", "the bus"]))
    out = tmp_path / "textvqa.parquet"
    assert run(config, MODEL_ID, "textvqa-fixture", path, "--out", str(out)) == 0
    assert tool_reading_of(out) is None
    assert "tool_reading" not in score_of(config, tmp_path, "textvqa-fixture", out)


def test_samples_whose_values_hold_no_verdict_import_without_a_tool_reading(grid, tmp_path, capsys):
    config, records = grid
    lines = mme_samples(records["mme-fixture"], ["Yes", "No"])
    del lines[1][MME_PERCEPTION["0.4"]]["score"]
    path = write_samples(tmp_path, "mme", lines)
    out = tmp_path / "mme.parquet"
    assert run(config, MODEL_ID, "mme-fixture", path, "--out", str(out)) == 0
    assert tool_reading_of(out) is None
    assert (
        f"{Path(path).name} line 2 (doc_id 1) has no `score` of 1.0 or 0.0 under `mme_perception_score`, so "
        f"lmms-eval's own reading is not kept"
    ) in capsys.readouterr().err
