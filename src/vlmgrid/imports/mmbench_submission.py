"""`mmbench-submission`: the .xlsx uploaded to MMBench's evaluation server, as LLaVA's
`scripts/convert_mmbench_for_submission.py` writes it: the dev (or test) TSV's rows with `hint`, `category`,
`source`, `image`, `comment` and `l2-category` dropped and a `prediction` column inserted seventh, i.e. the
columns index, question, A, B, C, D, prediction, answer, split; one row per question index, circular copies
(1000001, ...) included; written by pandas through openpyxl (`index=False`).

A row is the record whose id is its `index`; the question, options and gold letter it repeats must be the
record's (else the file was made from another MMBench version). A row whose `prediction` cell is empty was not
answered (the script leaves the rows its answers file lacks empty): it is left out, so the item is reported
missing, never scored wrong.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import Answer, Importer, squeeze
from vlmgrid.imports.reading import check_workbook, read_workbook

REQUIRED = ("index", "question", "A", "B", "prediction")
# The columns the script writes (a test file has option E too).
WRITTEN = ("index", "question", "A", "B", "C", "D", "E", "prediction", "answer", "split")
LETTERS = "ABCDE"


def _given(value) -> bool:
    return not pd.isna(value) and str(value).strip() != ""


def _read(path: Path, **kwargs) -> pd.DataFrame:
    """The cells as text, an empty one NaN (an unanswered row)."""
    return read_workbook(path, na_values=[""], **kwargs)


def looks_like(path: Path) -> bool:
    if not path.is_file() or path.suffix.lower() != ".xlsx":
        return False
    check_workbook(path)  # a hostile workbook (a bomb, a DTD) is refused, not taken for another format
    try:
        columns = _read(path, nrows=0).columns
    except VlmgridError:
        return False
    # Exactly the script's columns: VLMEvalKit's prediction files also hold index, question, options and
    # prediction, but keep columns the script drops (hint, category) or lack its `split`.
    return set(REQUIRED) | {"split"} <= set(columns) <= set(WRITTEN)


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    table = _read(path)
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise VlmgridError(
            f"{path} has no `{missing[0]}` column: it is not an MMBench submission file (index, "
            f"question, A-D, prediction, answer; give the right --format)"
        )
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for n, row in table.iterrows():
        where = f"row {n + 2} (index {row['index']})"  # row 1 is the header
        if not _given(row["prediction"]):
            continue
        record_id = str(row["index"]).strip()
        record = by_id.get(record_id)
        if record is not None:
            options = [squeeze(o) for o in record["options"]]
            shown = [squeeze(row[c]) for c in LETTERS if c in table.columns and _given(row[c])]
            if squeeze(row["question"]) != squeeze(record["question"]) or shown != options:
                raise VlmgridError(
                    f"{path} {where} asks {squeeze(row['question'])[:60]!r} with the options {shown!r}, but "
                    f"item {record_id} asks {squeeze(record['question'])[:60]!r} with {options!r}: the file "
                    "was made from another MMBench version; import it into that one"
                )
            letter = LETTERS[int(record["answer_index"])]
            if "answer" in table.columns and _given(row["answer"]) and str(row["answer"]).strip() != letter:
                raise VlmgridError(
                    f"{path} {where} gives the gold letter {row['answer']!r}, but item {record_id} has "
                    f"{letter!r}: the file was made from another MMBench version"
                )
        answers.append(Answer(record_id if record is not None else None, str(row["prediction"]), where))
    return answers


IMPORTER = Importer(
    "mmbench-submission",
    "an MMBench submission .xlsx (convert_mmbench_for_submission.py: index, question, A-D, prediction)",
    ("mmbench",),
    looks_like,
    read,
)
