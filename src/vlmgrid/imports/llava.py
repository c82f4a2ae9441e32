"""`llava-answers`: the answer files of LLaVA's evaluation scripts (haotian-liu/LLaVA `llava/eval/model_vqa_loader.py`,
`model_vqa_science.py`, `model_vqa_mmbench.py`): JSON lines `{"question_id", "prompt", "text", "answer_id",
"model_id", "metadata"}` (MMBench adds `round_id`, `options`, `option_char`).

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
- POPE (`llava/eval/eval_pope.py`): `question_id` numbers the questions of `llava_pope_test.jsonl`, whose lines
  give `category` (the split), `image` and `text`; the answers name nothing else, so that question file is
  needed (`questions`). An answer is the record of that split, image (`image_source`, by file name without
  extension) and question.
- ScienceQA-IMG (`llava/eval/eval_science_qa.py`): `question_id` is ScienceQA's problem id, which the hub copy
  our records come from does not keep. Answers whose prompt has no "<image>" are text-only problems (not in
  ScienceQA-IMG; LLaVA's IMG accuracy leaves them out too) and are skipped. The others are matched by their
  prompt, "Context: <hint or N/A>\n<question>\nA. <option>\n...": the record with that question, hint and
  options. Records with the same question, hint and options (other images) take those answers in file order,
  the order of ScienceQA's test split that both files follow.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from pathlib import Path

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import (
    Answer, Importer, first_json_object, read_json_lines, squeeze, stem, unique_index,
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
                f"{path} {_where(n, item)} is round {round_id}: LLaVA's --all-rounds rotations are not MMBench's "
                f"published circular copies (which the dev file holds as rows of their own); keep the round-0 lines"
            )
        record_id = str(item["question_id"])
        shown = item.get("options")
        if record_id in options_of and isinstance(shown, list) and [str(o) for o in shown] != options_of[record_id]:
            raise VlmgridError(
                f"{path} {_where(n, item)} answers the options {shown!r}, but item {record_id} has "
                f"{options_of[record_id]!r}: the file was made from another MMBench version; import it into that one"
            )
        answers.append(Answer(record_id if record_id in options_of else None, _text(item), _where(n, item)))
    return answers


def mme_question(text: str) -> str:
    """An MME question as both LLaVA's prompt and the release word it, without the answer instruction."""
    return squeeze(str(text).replace(LLAVA_INSTRUCTION, "").replace(MME_INSTRUCTION, ""))


def mme_index(records: pd.DataFrame) -> dict[tuple, str]:
    return unique_index(records, lambda r: (str(r["category"]), stem(str(r["image_id"]).split("/")[-1]),
                                            mme_question(r["question"])), "subtask, image and question")


def _mme(path, lines, records, questions) -> list[Answer]:
    index = mme_index(records)
    answers = []
    for n, item in lines:
        parts = str(item["question_id"]).split("/")
        key = (parts[0], stem(parts[-1]), mme_question(item.get("prompt", "")))
        answers.append(Answer(index.get(key), _text(item), _where(n, item)))
    return answers


def textvqa_question(prompt: str) -> str:
    """The question of a LLaVA TextVQA prompt: its first line that is not the OCR-token line, lowercased."""
    lines = [line for line in str(prompt).split("\n") if line.strip() and not line.startswith(OCR_LINE)]
    return squeeze(lines[0]).lower() if lines else ""


def _textvqa(path, lines, records, questions) -> list[Answer]:
    index = unique_index(records, lambda r: (str(r["image_id"]), squeeze(r["question"]).lower()),
                         "image and question")
    return [Answer(index.get((str(item["question_id"]), textvqa_question(item.get("prompt", "")))),
                   _text(item), _where(n, item)) for n, item in lines]


def _pope(path, lines, records, questions) -> list[Answer]:
    if questions is None:
        raise VlmgridError(
            f"{path}: LLaVA's POPE answers name their questions only by the question_id of LLaVA's question file; "
            f"give that file with --questions (llava_pope_test.jsonl)"
        )
    asked = {item["question_id"]: item for _, item in
             read_json_lines(questions, ("question_id", "image", "text", "category"), "LLaVA's POPE question file")}
    index = unique_index(records, lambda r: (str(r["split"]), stem(r["image_source"]),
                                             squeeze(str(r["question"]).split("\n")[0])), "split, image and question")
    answers = []
    for n, item in lines:
        question = asked.get(item["question_id"])
        if question is None:
            raise VlmgridError(
                f"{path} {_where(n, item)} is not a question of {questions}: give the question file the answers "
                f"were made from"
            )
        key = (str(question["category"]), stem(question["image"]), squeeze(str(question["text"]).split("\n")[0]))
        answers.append(Answer(index.get(key), _text(item), _where(n, item)))
    return answers


_OPTION = re.compile(r"^([A-Z])\. (.*)$")


def scienceqa_content(prompt: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(question, hint, options) of a LLaVA ScienceQA prompt, or None when it is not in that form."""
    lines = [line for line in str(prompt).replace("<image>", "").split("\n")
             if line.strip() and line.strip() != LETTER_INSTRUCTION]
    if not lines or not lines[0].startswith("Context:"):
        return None
    hint = squeeze(lines[0][len("Context:"):])
    options, question = [], []
    for line in lines[1:]:
        match = _OPTION.match(line.strip())
        if match and match.group(1) == chr(ord("A") + len(options)):
            options.append(squeeze(match.group(2)))
        elif options:
            return None  # text after the options: not the CQM-A form
        else:
            question.append(line)
    if not options or not question:
        return None
    return squeeze(" ".join(question)), "" if hint == "N/A" else hint, tuple(options)


def _scienceqa(path, lines, records, questions) -> list[Answer]:
    waiting: dict[tuple, list[str]] = defaultdict(list)  # content -> record ids not answered yet, in record order
    for _, record in records.iterrows():
        key = (squeeze(record["question"]), squeeze(record.get("hint", "") or ""),
               tuple(squeeze(option) for option in record["options"]))
        waiting[key].append(str(record["id"]))
    answers, text_only, shared = [], 0, 0
    for n, item in lines:
        prompt = str(item.get("prompt", ""))
        if "<image>" not in prompt:
            text_only += 1
            continue
        content = scienceqa_content(prompt)
        if content is None:
            raise VlmgridError(
                f"{path} {_where(n, item)}: its prompt is not LLaVA's ScienceQA form (\"Context: ...\" then the "
                f"question, then \"A. ...\" options), so it cannot be matched to an item"
            )
        ids = waiting.get(content)
        shared += bool(ids) and len(ids) > 1
        answers.append(Answer(ids.pop(0) if ids else None, _text(item), _where(n, item)))
    if text_only:
        log.info(f"{path}: skipped {text_only} answers to text-only problems (no <image> in the prompt), which "
                 f"ScienceQA-IMG does not hold")
    if shared:
        log.info(f"{path}: {shared} answers went to items that share their question, hint and options with "
                 f"others, in file order")
    return answers


MATCHERS = {"mmbench": _mmbench, "mme": _mme, "textvqa": _textvqa, "pope": _pope, "pope_coco": _pope,
            "scienceqa_img": _scienceqa}


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    lines = read_json_lines(path, REQUIRED, "a LLaVA answer file")
    return MATCHERS[kind](path, lines, records, questions)


IMPORTER = Importer(
    name="llava-answers",
    description="LLaVA's evaluation answer files (JSON lines: question_id, prompt, text, answer_id, model_id)",
    kinds=tuple(MATCHERS),
    looks_like=looks_like,
    read=read,
)
