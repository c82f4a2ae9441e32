"""`llava-answers`: the answer files of LLaVA's evaluation scripts (haotian-liu/LLaVA
`llava/eval/model_vqa_loader.py`, `model_vqa_science.py`, `model_vqa_mmbench.py`): JSON lines `{"question_id",
"prompt", "text", "answer_id", "model_id", "metadata"}` (MMBench adds `round_id`, `options`, `option_char`).

`question_id` is the id of LLaVA's own question file, which is not always the published dataset's id; each
benchmark kind is matched as LLaVA's own scorer matches it:

- MMBench (`scripts/convert_mmbench_for_submission.py`): `question_id` is the row's `index` in the dev TSV,
  circular copies included (1000001, ...), i.e. our record id. Only round 0 is read: the later rounds of
  `--all-rounds` are LLaVA's own rotations (options shifted left), which are not the published copies.
- MME (`convert_answer_to_mme.py`): `question_id` is "<subtask>/<image file>" of the MME release; an answer is
  the record of that subtask whose image has that file name and whose question is the prompt (without LLaVA's
  "Answer the question using a single word or phrase." and MME's "Please answer yes or no.").
- TextVQA (`llava/eval/eval_textvqa.py`): in `llava_textvqa_val_v051_ocr.jsonl`, `question_id` is TextVQA's
  *image* id; an answer is the record with that `image_id` whose question (lowercased) is the prompt's first
  line that is not the "Reference OCR token:" line.
- POPE (`llava/eval/eval_pope.py`): `question_id` numbers the questions of `llava_pope_test.jsonl`, whose
  lines give `category` (the split), `image` and `text`; the answers name nothing else, so that question file
  is needed (`questions`). An answer is the record of that split, image (`image_source`, by file name without
  extension) and question.
- ScienceQA-IMG (`llava/eval/eval_science_qa.py`): `question_id` is ScienceQA's problem id. Records that
  carry it (a `pid` column, or problem ids as ids: the release's problems.json) are matched by it, and the
  prompt must be the item's; the hub copy keeps no problem id, so there an answer is the record whose question
  text is the prompt's (`scienceqa_prompts`: LLaVA-1.5's `llava_test_CQM-A.json`, or the "CQM-A" form of
  `scripts/convert_sqa_to_llava.py`). Answers whose prompt has no "<image>" are text-only problems (not in
  ScienceQA-IMG; LLaVA's IMG accuracy leaves them out too) and are skipped.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import (
    Answer,
    Importer,
    check_questions,
    first_json_object,
    places,
    read_json_lines,
    read_line_breaks,
    squeeze,
    stem,
    unique_index,
)

log = logging.getLogger(__name__)

REQUIRED = ("question_id", "text")
LLAVA_INSTRUCTION = "Answer the question using a single word or phrase."
LETTER_INSTRUCTION = "Answer with the option's letter from the given choices directly."
MME_INSTRUCTION = "Please answer yes or no."
OCR_LINE = "Reference OCR token:"


def looks_like(path: Path) -> bool:
    if not path.is_file():
        return False
    item = first_json_object(path)
    return item is not None and all(key in item for key in REQUIRED + ("prompt",))


def _text(item: dict) -> str:
    text = item["text"]
    return text if isinstance(text, str) else json.dumps(text)


def _where(n: int, item: dict) -> str:
    return f"line {n} (question_id {item['question_id']!r})"


# ---------------------------------------------------------------------------------------------- per kind


def _mmbench(path, lines, records, questions) -> list[Answer]:
    options_of = {str(r["id"]): [str(o) for o in r["options"]] for _, r in records.iterrows()}
    answers = []
    for n, item in lines:
        round_id = item.get("round_id", item.get("round_idx", 0))
        if round_id not in (0, None):
            raise VlmgridError(
                f"{path} {_where(n, item)} is round {round_id}: LLaVA's --all-rounds rotations are not "
                "MMBench's published circular copies (which the dev file "
                "holds as rows of their own); keep the round-0 lines"
            )
        record_id = str(item["question_id"])
        shown = item.get("options")
        if (
            record_id in options_of
            and isinstance(shown, list)
            and [str(o) for o in shown] != options_of[record_id]
        ):
            raise VlmgridError(
                f"{path} {_where(n, item)} answers the options {shown!r}, but item {record_id} has "
                f"{options_of[record_id]!r}: the file was made "
                "from another MMBench version; import it into that one"
            )
        answers.append(Answer(record_id if record_id in options_of else None, _text(item), _where(n, item)))
    return answers


def mme_question(text: str) -> str:
    """An MME question as both LLaVA's prompt and the release word it, without the answer instruction."""
    return squeeze(str(text).replace(LLAVA_INSTRUCTION, "").replace(MME_INSTRUCTION, ""))


def mme_index(records: pd.DataFrame) -> dict[tuple, str]:
    return unique_index(
        records,
        lambda r: (str(r["category"]), stem(str(r["image_id"]).split("/")[-1]), mme_question(r["question"])),
        "subtask, image and question",
    )


def _by_question(
    path, keyed: list[tuple[tuple, str, str]], index: dict[tuple, str], place: str
) -> list[Answer]:
    """Answers matched by their keys (place..., question), each given as (key, raw text, where); an answer
    whose question differs from that of a record of its place is refused showing both (`check_questions`)."""
    answers = [Answer(index.get(key), raw, where) for key, raw, where in keyed]
    check_questions(path, answers, [(key[:-1], key[-1]) for key, _, _ in keyed], places(index), place)
    return answers


def _mme(path, lines, records, questions) -> list[Answer]:
    keyed = []
    for n, item in lines:
        parts = str(item["question_id"]).split("/")
        keyed.append(
            ((parts[0], stem(parts[-1]), mme_question(item.get("prompt", ""))), _text(item), _where(n, item))
        )
    return _by_question(path, keyed, mme_index(records), "subtask and image")


def textvqa_question(prompt: str) -> str:
    """The question of a LLaVA TextVQA prompt: its first line that is not the OCR-token line, lowercased."""
    lines = [line for line in str(prompt).split("\n") if line.strip() and not line.startswith(OCR_LINE)]
    return squeeze(lines[0]).lower() if lines else ""


def _textvqa(path, lines, records, questions) -> list[Answer]:
    index = unique_index(
        records, lambda r: (str(r["image_id"]), squeeze(r["question"]).lower()), "image and question"
    )
    keyed = [
        ((str(item["question_id"]), textvqa_question(item.get("prompt", ""))), _text(item), _where(n, item))
        for n, item in lines
    ]
    return _by_question(path, keyed, index, "image")


def _pope_id(path: Path, n: int, item: dict) -> str | int:
    """The line's question_id, a number or a text as LLaVA writes it; any other value names no question."""
    value = item["question_id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)):  # True would be taken for 1
        raise VlmgridError(
            f"{path} line {n} has the question_id {value!r}, which is neither a whole number nor a text, so "
            "it names no question; give the files LLaVA wrote"
        )
    return value


def _pope(path, lines, records, questions) -> list[Answer]:
    if questions is None:
        raise VlmgridError(
            f"{path}: LLaVA's POPE answers name their questions only by the question_id of LLaVA's question "
            "file; give that file with --questions (llava_pope_test.jsonl)"
        )
    asked = {
        _pope_id(questions, n, item): item
        for n, item in read_line_breaks(
            questions,
            read_json_lines(
                questions, ("question_id", "image", "text", "category"), "LLaVA's POPE question file"
            ),
            "text",
        )
    }
    index = unique_index(
        records,
        lambda r: (str(r["split"]), stem(r["image_source"]), squeeze(str(r["question"]).split("\n")[0])),
        "split, image and question",
    )
    keyed = []
    for n, item in lines:
        question = asked.get(_pope_id(path, n, item))
        if question is None:
            raise VlmgridError(
                f"{path} {_where(n, item)} is not a question of {questions}: give the question file the "
                "answers were made from"
            )
        key = (
            str(question["category"]),
            stem(question["image"]),
            squeeze(str(question["text"]).split("\n")[0]),
        )
        keyed.append((key, _text(item), _where(n, item)))
    return _by_question(path, keyed, index, "split and image")


LETTERS = "ABCDE"


def scienceqa_prompts(record: pd.Series) -> tuple[str, str]:
    """The two question texts LLaVA asks a ScienceQA item with, squeezed (without "<image>" and the letter
    instruction, which `model_vqa_science.py` adds):

    - LLaVA-1.5's `llava_test_CQM-A.json`: "Context: <hint>\n" only when the hint is not empty (it may span
      lines), the question, then one "A. <option>" line per option;
    - `scripts/convert_sqa_to_llava.py` with "CQM-A": "Context: <hint or N/A>\nQuestion: <question>\nOptions:
      (A) <option> (B) <option> ..." (double spaces made one)."""
    hint = squeeze(record.get("hint", "") or "")
    question = squeeze(record["question"])
    options = [squeeze(option) for option in record["options"]]
    lines = (
        ([f"Context: {hint}"] if hint else [])
        + [question]
        + [f"{LETTERS[i]}. {o}" for i, o in enumerate(options)]
    )
    choices = " ".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))
    converted = f"Context: {hint or 'N/A'}\nQuestion: {question}\nOptions: {choices}"
    return squeeze("\n".join(lines)), squeeze(converted)


def scienceqa_asked(prompt: str) -> str:
    """The question text of an answer's prompt: without "<image>" and the letter instruction, squeezed."""
    return squeeze(str(prompt).replace("<image>", "").replace(LETTER_INSTRUCTION, ""))


def problem_ids(records: pd.DataFrame) -> dict[str, str] | None:
    """{ScienceQA problem id: record id} when the records carry the problem ids (a `pid` column, or ids that
    are problem ids, as problems.json keys them); None for records without them (the hub copy)."""
    if "pid" in records.columns:
        return dict(zip(records["pid"].astype(str), records["id"].astype(str)))
    ids = records["id"].astype(str)
    return dict(zip(ids, ids)) if len(ids) and ids.str.fullmatch(r"\d+").all() else None


@dataclass(frozen=True)
class Asked:
    """One answer to a ScienceQA problem as a LLaVA file gives it: the problem id, the prompt (None where the
    file keeps none), the model's text and where it stands."""

    problem: str
    prompt: str | None
    raw: str
    where: str


def match_scienceqa(path: Path, asked: list[Asked], records: pd.DataFrame) -> list[Answer]:
    """Answers to ScienceQA-IMG's items: by problem id where the records carry them (the prompt, when given,
    must be the item's), by the prompt's content otherwise. Text-only problems (no "<image>" in the prompt;
    LLaVA's IMG accuracy leaves them out too) are skipped. Records with the same question, hint and options
    (other images) take those answers in file order, the order of ScienceQA's test split."""
    pids = problem_ids(records)
    prompts = {str(r["id"]): scienceqa_prompts(r) for _, r in records.iterrows()}
    waiting: dict[str, list[str]] = defaultdict(list)  # question text -> record ids, in record order
    for record_id, texts in prompts.items():
        for text in dict.fromkeys(texts):
            waiting[text].append(record_id)
    taken: set[str] = set()
    answers, text_only, elsewhere = [], 0, 0
    for answer in asked:
        if answer.prompt is None:
            if pids is None:
                raise VlmgridError(
                    f"{path} names its answers only by ScienceQA's problem id, which the records of this "
                    "benchmark do not keep (a copy prepared from the hub's parquet files has none); prepare "
                    "it from the authors' release (problems.json, pid_splits.json), or import the answers "
                    "file or its _output.jsonl, whose prompts name the questions"
                )
            if answer.problem not in pids:
                elsewhere += 1  # a text-only problem of the split: not in ScienceQA-IMG
                continue
            answers.append(Answer(pids[answer.problem], answer.raw, answer.where))
            continue
        if "<image>" not in answer.prompt:
            text_only += 1
            continue
        text = scienceqa_asked(answer.prompt)
        if pids is not None:
            record_id = pids.get(answer.problem)
            if record_id is not None and text not in prompts[record_id]:
                raise VlmgridError(
                    f"{path} {answer.where} asks {text[:80]!r}..., which is not the question of item "
                    f"{record_id} (problem {answer.problem}) in either of LLaVA's prompt forms: the answers "
                    "were made from another ScienceQA copy; import them into that one"
                )
        else:
            record_id = next((item for item in waiting.get(text, []) if item not in taken), None)
        if record_id is not None:
            taken.add(record_id)
        answers.append(Answer(record_id, answer.raw, answer.where))
    if text_only or elsewhere:
        log.info(
            f"{path}: skipped {text_only + elsewhere} answers to text-only problems "
            f"({'no <image> in the prompt' if text_only else 'not items of the benchmark'}), which "
            f"ScienceQA-IMG does not hold"
        )
    return answers


def _scienceqa(path, lines, records, questions) -> list[Answer]:
    asked = [
        Asked(str(item["question_id"]), str(item.get("prompt", "")), _text(item), _where(n, item))
        for n, item in lines
    ]
    return match_scienceqa(path, asked, records)


MATCHERS = {
    "mmbench": _mmbench,
    "mme": _mme,
    "textvqa": _textvqa,
    "pope": _pope,
    "pope_coco": _pope,
    "scienceqa_img": _scienceqa,
}


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    lines = read_line_breaks(path, read_json_lines(path, REQUIRED, "a LLaVA answer file"), "prompt")
    return MATCHERS[kind](path, lines, records, questions)


IMPORTER = Importer(
    "llava-answers",
    "LLaVA's evaluation answer files (JSON lines: question_id, prompt, text, answer_id, model_id)",
    tuple(MATCHERS),
    looks_like,
    read,
)
