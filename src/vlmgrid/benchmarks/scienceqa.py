"""ScienceQA-IMG (multiple choice) from the hub copy lmms-lab/ScienceQA, config `ScienceQA-IMG`, split test,
or from the authors' release files.

Raw layouts (`LAYOUTS`):
- hub (the hub repo): ScienceQA-IMG/test-00000-of-00001.parquet, 2,017 rows, columns image (struct
  {bytes, path}), question, choices (list), answer (0-based index), hint, task, grade, subject, topic,
  category, skill, lecture, solution. Items have no id column: ids are "test-<row>".
- release (lupantech/ScienceQA's data/scienceqa, as LLaVA's ScienceQA evaluation folder holds it):
  problems.json ({pid: {question, choices, answer, hint, image ("image.png" or null), task, grade, subject,
  topic, category, skill, lecture, solution, split}}), pid_splits.json ({"test": [pid, ...], ...}) and
  images/test/<pid>/image.png. The hub's rows are the test split's problems that have an image, in the
  order pid_splits.json lists them; so a release record is the n-th such problem and gets the hub's id
  "test-<n>", and keeps its problem id as `pid` (LLaVA's ScienceQA files name their answers by it). Every
  field is checked for the JSON type the release gives it, naming the problem and the field.
Records keep the question as the question; hint/subject/grade/... are metadata (a protocol decides how to use
the hint).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.layouts import Layout, Layouts, hub_layout, rows_adapter
from vlmgrid.benchmarks.rawio import (
    IMAGE_TYPE,
    ImageStore,
    find_raw,
    iter_parquet_rows,
    read_bytes,
    read_text,
    within,
)
from vlmgrid.benchmarks.records import checked_answer_index, checked_options, choice_record
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "ScienceQA-IMG/test-*.parquet"
TEXT_COLUMNS = (
    "question",
    "hint",
    "task",
    "grade",
    "subject",
    "topic",
    "category",
    "skill",
    "lecture",
    "solution",
)
COLUMNS = ("image", "question", "choices", "answer") + TEXT_COLUMNS[1:]
SCHEMA = pa.schema(
    [
        ("image", IMAGE_TYPE),
        ("question", pa.string()),
        ("choices", pa.list_(pa.string())),
        ("answer", pa.int8()),
    ]
    + [(name, pa.string()) for name in TEXT_COLUMNS[1:]]
)
FEATURES = (
    {"image": {"_type": "Image"}, "question": {"dtype": "string", "_type": "Value"}}
    | {"choices": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}}
    | {"answer": {"dtype": "int8", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in TEXT_COLUMNS[1:]}
)
METADATA = ("hint", "subject", "grade", "topic", "category", "skill", "task")


PROBLEMS, SPLITS, SPLIT = "problems.json", "pid_splits.json", "test"
IMAGE_PATTERN = "images/test/*/image.png"


# ---------------------------------------------------------------------------------------------- adapter


def _hub_rows(raw_dir: Path) -> Iterator[tuple[dict, str]]:
    n = 0
    for path in find_raw(raw_dir, FILE_PATTERN):
        for row in iter_parquet_rows(path, COLUMNS):
            yield row, f"{path} row {n}"
            n += 1


RESTORE = "restore it from lupantech/ScienceQA's data/scienceqa"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path, RESTORE))
    except (ValueError, RecursionError) as exc:
        raise VlmgridError(f"{path}: not readable JSON ({exc}); {RESTORE}") from None


def _field_error(where: str, key: str, value: Any, wanted: str) -> VlmgridError:
    return VlmgridError(
        f"{where}: `{key}` is {json.dumps(value)}, not {wanted}; the file is damaged or edited: {RESTORE}"
    )


def _release_problem(problem: dict, where: str) -> dict:
    """One problem's fields as the hub's row, each checked for the JSON type the release gives it: a value
    of another type is refused rather than coerced (1.9 or true is no option index, null no option text)."""
    choices = problem.get("choices")
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise _field_error(where, "choices", choices, "a list of at least 2 option texts")
    answer = problem.get("answer")
    if type(answer) is not int or not 0 <= answer < len(choices):
        raise _field_error(
            where,
            "answer",
            answer,
            f"the index of one of its {len(choices)} choices (0 to {len(choices) - 1})",
        )
    question = problem.get("question")
    if not isinstance(question, str) or not question.strip():
        raise _field_error(where, "question", question, "the question's text")
    row = {"question": question, "choices": choices, "answer": answer}
    for key in TEXT_COLUMNS[1:]:
        value = problem.get(key)
        if value is not None and not isinstance(value, str):
            raise _field_error(where, key, value, "a text (or null)")
        row[key] = value
    return row


def _release_rows(raw_dir: Path) -> Iterator[tuple[dict, str]]:
    """The test split's problems with an image, in pid_splits.json's order, as the hub's rows (with `pid`)."""
    problems_path, splits_path = raw_dir / PROBLEMS, raw_dir / SPLITS
    if not splits_path.is_file():
        raise VlmgridError(
            f"{splits_path}: missing beside {PROBLEMS}; ScienceQA's release lists each split's problems "
            "there: put pid_splits.json from lupantech/ScienceQA's data/scienceqa beside problems.json"
        )
    problems, splits = _read_json(problems_path), _read_json(splits_path)
    if not isinstance(splits, dict) or not isinstance(splits.get(SPLIT), list):
        raise VlmgridError(f"{splits_path}: has no {SPLIT!r} list of problem ids; {RESTORE}")
    if not isinstance(problems, dict):
        raise VlmgridError(f"{problems_path}: is not an object of problems by id; {RESTORE}")
    images = raw_dir / "images" / SPLIT
    seen: set[str] = set()
    for pid in splits[SPLIT]:
        if str(pid) in seen:
            raise VlmgridError(
                f"{splits_path}: lists test problem {pid!r} twice; one problem is one item: {RESTORE}"
            )
        seen.add(str(pid))
        problem = problems.get(str(pid))
        if not isinstance(problem, dict):
            raise VlmgridError(
                f"{splits_path}: lists test problem {pid!r}, which {problems_path} does not hold; the two "
                "files are from different releases: restore both"
            )
        where = f"{problems_path} problem {pid}"
        name = problem.get("image")
        if not name:
            continue
        if not isinstance(name, str):
            raise _field_error(where, "image", name, "an image file name (or null)")
        image = within(images, Path(str(pid)) / name, f"{where} (its pid and `image`)")
        if not image.is_file():
            raise VlmgridError(
                f"{image}: missing (the image of {where}); unpack the release's test images into {images}"
            )
        row = _release_problem(problem, where)
        data = read_bytes(image, f"restore the image of {where}")
        yield {**row, "image": {"bytes": data, "path": f"{pid}/{image.name}"}, "pid": str(pid)}, where


def _adapt_rows(rows_of: Iterator[tuple[dict, str]], bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for row, where in rows_of:
        n = len(rows)
        choices = checked_options(where, row["choices"], "choices")
        answer = checked_answer_index(where, row["answer"], choices, "choices")
        rows.append(
            {
                **choice_record(
                    f"test-{n}", store.add(row["image"], where), row["question"], choices, answer
                ),
                **{key: row[key] if row[key] is not None else "" for key in METADATA},
                # the release's problem id, by which LLaVA's ScienceQA files name their answers (the hub has
                # none)
                **({"pid": row["pid"]} if "pid" in row else {}),
            }
        )
    return Adapted(records=pd.DataFrame(rows))


LAYOUTS = Layouts(
    "scienceqa_img",
    [
        hub_layout(FILE_PATTERN, rows_adapter(_hub_rows, _adapt_rows)),
        Layout(
            "release",
            f"the release's {PROBLEMS}, {SPLITS} and {IMAGE_PATTERN}",
            (PROBLEMS,),
            (PROBLEMS, SPLITS, IMAGE_PATTERN),
            rows_adapter(_release_rows, _adapt_rows),
        ),
    ],
)


KIND = question_kind(
    "scienceqa_img",
    "multiple_choice",
    metric="accuracy",
    breakdown_by=("subject",),
    description=(
        "ScienceQA-IMG: multiple-choice science questions about an image (2,017 test items, 2-5 choices)."
    ),
    expected_count=2017,
    **LAYOUTS.kind_fields(),
    # LLaVA-1.5's reading (llava/eval/eval_science_qa.py), which CARPE's evaluation follows; an unreadable
    # answer is wrong. The ScienceQA authors' own GPT-3 script picks a random option instead.
    parser="scienceqa",
    lenient_parsers={"*": "letter"},
    # lmms-lab moved to lmms-lab-encoder in 2026 (history kept); the pin is the commit that uploaded
    # ScienceQA-IMG/ (pufanyi, "Upload dataset").
    hub={
        "repo": "lmms-lab/ScienceQA",
        "revision": "df59f11e9fd34bc02e24b4d5314bb1c86dcd21c0",
        "config": "ScienceQA-IMG",
        "split": "test",
    },
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
