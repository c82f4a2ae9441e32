"""ScienceQA-IMG (multiple choice) from the hub copy lmms-lab/ScienceQA, config `ScienceQA-IMG`, split test.

Raw layout (the hub repo): ScienceQA-IMG/test-00000-of-00001.parquet, 2,017 rows, columns image (struct
{bytes, path}), question, choices (list), answer (0-based index), hint, task, grade, subject, topic,
category, skill, lecture, solution. Records keep the question as the question; hint/subject/grade/... are
metadata (a protocol decides how to use the hint). Items have no id column: ids are "test-<row>".
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows
from vlmgrid.benchmarks.shapes import MULTIPLE_CHOICE
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "ScienceQA-IMG/test-*.parquet"
TEXT_COLUMNS = ("question", "hint", "task", "grade", "subject", "topic", "category", "skill", "lecture", "solution")
COLUMNS = ("image", "question", "choices", "answer") + TEXT_COLUMNS[1:]
SCHEMA = pa.schema(
    [("image", IMAGE_TYPE), ("question", pa.string()), ("choices", pa.list_(pa.string())), ("answer", pa.int8())]
    + [(name, pa.string()) for name in TEXT_COLUMNS[1:]]
)
FEATURES = (
    {"image": {"_type": "Image"}, "question": {"dtype": "string", "_type": "Value"}}
    | {"choices": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}}
    | {"answer": {"dtype": "int8", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in TEXT_COLUMNS[1:]}
)
METADATA = ("hint", "subject", "grade", "topic", "category", "skill", "task")


# ---------------------------------------------------------------------------------------------- adapter

def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for path in find_raw(raw_dir, FILE_PATTERN):
        for row in iter_parquet_rows(path, COLUMNS):
            n = len(rows)
            where = f"{path} row {n}"
            choices = row["choices"]
            if not isinstance(choices, list) or len(choices) < 2:
                raise VlmgridError(f"{where}: `choices` must list at least 2 options, not {choices!r}; re-download the file")
            answer = row["answer"]
            if answer is None or not 0 <= int(answer) < len(choices):
                raise VlmgridError(f"{where}: answer index {answer!r} is outside its {len(choices)} choices; re-download the file")
            rows.append(
                {
                    "id": f"test-{n}",
                    "image": store.add(row["image"], where),
                    "question": row["question"],
                    "options": [str(c) for c in choices],
                    "answer": str(choices[int(answer)]),
                    "answer_index": int(answer),
                    **{key: row[key] if row[key] is not None else "" for key in METADATA},
                }
            )
    return Adapted(records=pd.DataFrame(rows))


KIND = BenchmarkKind(
    name="scienceqa_img",
    protocol="multiple_choice",
    shape=MULTIPLE_CHOICE,
    metric="accuracy",
    breakdown_by=("subject",),
    description="ScienceQA-IMG: multiple-choice science questions about an image (2,017 test items, 2-5 choices).",
    templates=(),
    expected_count=2017,
    raw_files=(FILE_PATTERN,),
    adapt=adapt,
    # LLaVA-1.5's reading (llava/eval/eval_science_qa.py), which CARPE's evaluation follows; an unreadable
    # answer is wrong. The ScienceQA authors' own GPT-3 script picks a random option instead.
    parser="scienceqa",
    lenient_parsers={"*": "letter"},
    # lmms-lab moved to lmms-lab-encoder in 2026 (history kept); the pin is the commit that uploaded
    # ScienceQA-IMG/ (pufanyi, "Upload dataset").
    hub={"repo": "lmms-lab/ScienceQA", "revision": "df59f11e9fd34bc02e24b4d5314bb1c86dcd21c0", "config": "ScienceQA-IMG", "split": "test"},
)
