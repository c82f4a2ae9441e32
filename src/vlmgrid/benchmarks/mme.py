"""MME (perception and cognition, yes/no) from the hub copy lmms-lab/MME, split test.

Raw layout (the hub repo): data/test-0000N-of-00004-<hash>.parquet, 2,374 rows in all, columns question_id
(the image's path in the original release, e.g. "code_reasoning/0020.png": shared by the image's two
questions, one answered "Yes" and one "No"), image (struct {bytes, path}), question (ends "Please answer
yes or no."), answer ("Yes"/"No"), category (one of 14 subtasks). Records get ids "<question_id>#<k>", k the
question's position (0, 1) among its image's questions in file order; `image_id` keeps the question_id.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows
from vlmgrid.benchmarks.shapes import YES_NO
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/test-*.parquet"
COLUMNS = ("question_id", "image", "question", "answer", "category")
SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("image", IMAGE_TYPE),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("category", pa.string()),
    ]
)
FEATURES = {name: {"dtype": "string", "_type": "Value"} for name in COLUMNS} | {"image": {"_type": "Image"}}
# The 14 subtasks, spelled as in the dataset (perception: the first 10; cognition: the last 4).
CATEGORIES = (
    "existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork", "OCR",
    "commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning",
)


# ---------------------------------------------------------------------------------------------- adapter

def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    seen: Counter = Counter()
    rows = []
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            where = f"{path} row {n}"
            answer = str(row["answer"] or "").strip().lower()
            if answer not in ("yes", "no"):
                raise VlmgridError(f"{where}: answer {row['answer']!r} is not Yes/No; the file is damaged or not MME: re-download it")
            question_id = str(row["question_id"] or "").strip()
            if not question_id:
                raise VlmgridError(f"{where}: has no question_id; the file is damaged or not MME: re-download it")
            category = str(row["category"] or "")
            if category not in CATEGORIES:
                raise VlmgridError(
                    f"{where}: category {category!r} is not one of MME's 14 subtasks ({', '.join(CATEGORIES)}); "
                    f"the file is not MME: check the source"
                )
            k = seen[question_id]
            seen[question_id] += 1
            rows.append(
                {
                    "id": f"{question_id}#{k}",
                    "image": store.add(row["image"], where),
                    "question": row["question"],
                    "options": ["yes", "no"],
                    "answer": answer,
                    "answer_index": 0 if answer == "yes" else 1,
                    "category": category,
                    "image_id": question_id,
                }
            )
    return Adapted(records=pd.DataFrame(rows))


KIND = BenchmarkKind(
    name="mme",
    protocol="yes_no",
    shape=YES_NO,
    metric="mme",
    breakdown_by=("category",),
    description="MME: yes/no perception and cognition questions over 14 subtasks, two questions per image (2,374 items).",
    templates=(),
    expected_count=2374,
    raw_files=(FILE_PATTERN,),
    adapt=adapt,
    parser="mme",
    lenient_parsers={"*": "mme_lenient"},
    # sha: hub cache snapshot datasets--lmms-lab--MME/snapshots/d6c9023f017b564f7b3ccccf5348166bce8fdbcd, and a
    # public build script's pin of lmms-lab-encoder/MME (the repo's new name) to it with the 4 data/test-* files.
    hub={"repo": "lmms-lab/MME", "revision": "d6c9023f017b564f7b3ccccf5348166bce8fdbcd", "split": "test"},
)
