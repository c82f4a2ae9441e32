"""`llava-scienceqa-eval`: the two files LLaVA's ScienceQA scorer writes (haotian-liu/LLaVA
`llava/eval/eval_science_qa.py`, `--output-file` and `--output-result`), for when the answers file itself is
not published.

- `<model>_output.jsonl` (one JSON object, despite the name): `{"correct": [...], "incorrect": [...]}`, one
  analysis per problem of the split: `question_id` (ScienceQA's problem id), `parsed_ans`, `ground_truth`,
  `question` (the prompt), `pred` (the model's text), `is_multimodal`. A problem the answers file did not
  answer is written with the prompt "Unknown" and the text "FAILED": it is no answer, and is left out (so the
  item is reported missing, never scored wrong).
- `<model>_result.json`: `{"acc", "correct", "count", "results": {problem id: option index},
  "outputs": {problem id: the model's text}}`: no prompts, so it is read only into records that carry
  ScienceQA's problem ids (a benchmark prepared from the authors' release keeps them as `pid`); an output
  "FAILED" with the index -1 is the same unanswered problem.

Both are matched as LLaVA's answers file is (`vlmgrid.imports.llava.match_scienceqa`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import unreadable
from vlmgrid.imports.base import Answer, Importer, cut_short, too_deep
from vlmgrid.imports.llava import Asked, match_scienceqa
from vlmgrid.imports.reading import DENIED, read_text

log = logging.getLogger(__name__)

UNANSWERED_PROMPT, UNANSWERED_TEXT = "Unknown", "FAILED"
ANALYSIS = ("question_id", "question", "pred")


def _load(path: Path) -> object:
    """The file's JSON document; a file that cannot be read, is not UTF-8, is cut short or is not JSON is
    refused naming the file."""
    if not path.is_file():
        raise VlmgridError(f"{path} is not a file; LLaVA's ScienceQA scorer writes one JSON document")
    text = read_text(path)
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(path) from None
    except json.JSONDecodeError as error:
        if cut_short(error, text):
            raise VlmgridError(
                f"{path} is cut short (its JSON document ends at line {error.lineno} before it "
                f"is closed); copy the whole file again"
            ) from None
        raise VlmgridError(
            f"{path} is not JSON (line {error.lineno}: {error.msg}): it is not a file of LLaVA's "
            f"ScienceQA scorer (give the right --format)"
        ) from None


def _is_output(data: object) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("correct"), list)
        and isinstance(data.get("incorrect"), list)
    )


def _is_result(data: object) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("outputs"), dict)
        and isinstance(data.get("results"), dict)
    )


def looks_like(path: Path) -> bool:
    if not path.is_file() or path.suffix not in (".json", ".jsonl"):
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            # the scorer's indent=2: "{" alone on line 1
            if handle.read(1) != "{" or handle.readline().strip():
                return False
    except OSError as error:
        raise unreadable(path, error, DENIED) from None
    try:
        # opened as the scorer's, a file that is not UTF-8 is refused naming its line, not taken for no format
        data = json.loads(read_text(path))
    except RecursionError:
        raise too_deep(path) from None
    except ValueError:
        return False
    return _is_output(data) or _is_result(data)


def _from_output(path: Path, data: dict) -> list[Asked]:
    asked = []
    for group in ("correct", "incorrect"):
        for i, item in enumerate(data[group]):
            where = f"{group}[{i}]"
            if not isinstance(item, dict) or any(key not in item for key in ANALYSIS):
                raise VlmgridError(
                    f"{path} {where} is not an analysis of LLaVA's ScienceQA scorer (question_id, "
                    f"question, pred); give the right --format"
                )
            if item["question"] == UNANSWERED_PROMPT and item["pred"] == UNANSWERED_TEXT:
                continue
            asked.append(
                Asked(
                    str(item["question_id"]),
                    str(item["question"]),
                    str(item["pred"]),
                    f"{where} (question_id {item['question_id']!r})",
                )
            )
    # The scorer lists the correct answers first; the split's order (by problem id) is the answers file's. A
    # superscript "²" is a digit (str.isdigit) that int() refuses; a decimal is one it takes.
    return sorted(
        asked, key=lambda a: (not a.problem.isdecimal(), int(a.problem) if a.problem.isdecimal() else 0)
    )


def _from_result(path: Path, data: dict) -> list[Asked]:
    return [
        Asked(str(problem), None, str(text), f"outputs[{problem!r}]")
        for problem, text in data["outputs"].items()
        if not (text == UNANSWERED_TEXT and data["results"].get(problem) == -1)
    ]


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    data = _load(path)
    if _is_output(data):
        asked = _from_output(path, data)
    elif _is_result(data):
        asked = _from_result(path, data)
    else:
        raise VlmgridError(
            f"{path} has neither `correct` and `incorrect` lists (the scorer's --output-file) nor "
            f"`results` and `outputs` (its --output-result): it is not a file of LLaVA's ScienceQA "
            f"scorer (give the right --format)"
        )
    return match_scienceqa(path, asked, records)


IMPORTER = Importer(
    "llava-scienceqa-eval",
    "the files LLaVA's ScienceQA scorer writes (<model>_output.jsonl, <model>_result.json)",
    ("scienceqa_img",),
    looks_like,
    read,
)
