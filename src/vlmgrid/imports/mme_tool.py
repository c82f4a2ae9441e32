"""`mme-eval-tool`: a result folder of MME's official eval tool (BradyFU's `eval_tool/calculation.py` reads
it): one `<subtask>.txt` per subtask, each line `image<TAB>question<TAB>gold (Yes/No)<TAB>model answer`.

An answer is the record of that subtask whose image has that file name (without extension: LLaVA's
`convert_answer_to_mme.py` writes the question file's name, "10002.txt", where the tool's examples name the
image, "10002.jpg") and whose question is the line's (without "Please answer yes or no."). A gold answer that
is not the record's means the folder was made from another MME version, and is refused.

The folders are partial by construction: a release lacks the images of a few questions (LLaVA-1.5's folders
answer 2,350 to 2,372 of the 2,374), so a folder is imported as it is (`partial`), and scored as the tool
scores it, over the questions it holds. The tool reads a subtask's lines in consecutive pairs, one image's two
questions, for acc+; so an image is answered whole or not at all, and one with a question missing is refused.
A `.txt` saved with a byte-order mark (Notepad on Windows) reads as without one; one that cannot be read, or
is not UTF-8, is refused naming it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from vlmgrid.benchmarks.mme import CATEGORIES
from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import Answer, Importer, stem
from vlmgrid.imports.llava import mme_index, mme_question
from vlmgrid.imports.reading import files_in, read_text

# MME's 14 subtasks: the release and the tool name their folders and result files so.
SUBTASKS = CATEGORIES


def looks_like(path: Path) -> bool:
    return path.is_dir() and any(p.suffix == ".txt" and p.stem in SUBTASKS for p in files_in(path))


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    if not path.is_dir():
        raise VlmgridError(
            f"{path} is not a folder: an MME eval-tool result is a folder of <subtask>.txt files "
            f"(give the right --format)"
        )
    files = {p.name: p for p in files_in(path)}
    others = sorted(p.name for p in files.values() if p.suffix == ".txt" and p.stem not in SUBTASKS)
    if others:
        raise VlmgridError(
            f"{path}/{others[0]} is not named after one of MME's 14 subtasks "
            f"({', '.join(SUBTASKS)}); rename or remove it"
        )
    index = mme_index(records)
    gold = dict(zip(records["id"].astype(str), records["answer"].astype(str)))
    answers = []
    for subtask in SUBTASKS:
        file = files.get(f"{subtask}.txt")
        if file is None:
            continue
        for n, line in enumerate(read_text(file).splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            where = f"{file.name} line {n}"
            if len(fields) != 4:
                raise VlmgridError(
                    f"{path}/{where} has {len(fields)} tab-separated fields, not 4 (image, question, gold "
                    "answer, model answer): the folder is not an MME eval-tool result"
                )
            image, question, truth, raw = fields
            record_id = index.get((subtask, stem(image), mme_question(question)))
            if record_id is not None and truth.strip().lower() != gold[record_id]:
                raise VlmgridError(
                    f"{path}/{where} gives the gold answer {truth!r}, but item {record_id} is "
                    f"{gold[record_id]!r}: the folder was made from another MME version"
                )
            answers.append(Answer(record_id, raw, where))
    _check_whole_images(path, answers, records)
    return answers


def _check_whole_images(path: Path, answers: list[Answer], records: pd.DataFrame) -> None:
    """Every image with an answer has all its questions answered (the tool pairs them for acc+)."""
    answered = {answer.record_id: answer for answer in answers if answer.record_id is not None}
    for (_, image), group in records.groupby(["category", "image_id"], sort=False):
        ids = group["id"].astype(str).tolist()
        given = [item for item in ids if item in answered]
        if given and len(given) < len(ids):
            lacking = next(item for item in ids if item not in answered)
            raise VlmgridError(
                f"{path}/{answered[given[0]].where} answers {len(given)} of the {len(ids)} questions of "
                f'image {image}, item "{lacking}" has no line: the eval tool scores an image\'s questions '
                "together (acc+), so give the folder all of them or none"
            )


IMPORTER = Importer(
    "mme-eval-tool",
    "a result folder of MME's eval tool (<subtask>.txt: image, question, gold, answer; tab-separated)",
    ("mme",),
    looks_like,
    read,
    partial=True,
)
