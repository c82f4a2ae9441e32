"""POPE (object hallucination, yes/no) from the hub copy lmms-lab/POPE, config `Full`.

Raw layout (the hub repo): Full/{random,popular,adversarial}-*.parquet, 3,000 rows each, columns
id, question_id (restarts per split), question ("Is there a {object} in the image?"), answer ("yes"/"no"),
image_source, image (struct {bytes, path}), category. Records get ids "<split>-<question_id>".
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows
from vlmgrid.benchmarks.records import yes_no_record
from vlmgrid.errors import VlmgridError

SPLITS = ("random", "popular", "adversarial")
FILE_PATTERN = "Full/{split}-*.parquet"
COLUMNS = ("id", "question_id", "question", "answer", "image_source", "image", "category")
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("image_source", pa.string()),
        ("image", IMAGE_TYPE),
        ("category", pa.string()),
    ]
)
FEATURES = {name: {"dtype": "string", "_type": "Value"} for name in COLUMNS} | {"image": {"_type": "Image"}}


# ---------------------------------------------------------------------------------------------- adapter


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for split in SPLITS:
        for path in find_raw(raw_dir, FILE_PATTERN.format(split=split)):
            for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
                where = f"{path} row {n}"
                answer = str(row["answer"] or "").strip().lower()
                if answer not in ("yes", "no"):
                    raise VlmgridError(
                        f"{where}: answer {row['answer']!r} is not yes/no; the file is damaged or not POPE: "
                        "re-download it"
                    )
                if row["question_id"] in (None, ""):
                    raise VlmgridError(
                        f"{where}: has no question_id; the file is damaged or not POPE: re-download it"
                    )
                rows.append(
                    {
                        **yes_no_record(
                            f"{split}-{row['question_id']}",
                            store.add(row["image"], where),
                            row["question"],
                            answer,
                        ),
                        "split": split,
                        "category": row["category"],
                        "image_source": row["image_source"],
                        "question_id": str(row["question_id"]),
                    }
                )
    return Adapted(records=pd.DataFrame(rows))


KIND = question_kind(
    "pope",
    "yes_no",
    metric="pope",
    breakdown_by=("split",),
    description=(
        "POPE: yes/no questions on whether an object is in a COCO image (random, popular, adversarial "
        "negatives)."
    ),
    expected_count=9000,
    raw_files=tuple(FILE_PATTERN.format(split=split) for split in SPLITS),
    adapt=adapt,
    # lmms-lab moved to lmms-lab-encoder in 2026 (history kept; the hub redirects); the pin is the commit
    # that added Full/ (kcz358, "Upload dataset").
    hub={"repo": "lmms-lab/POPE", "revision": "4db1276663dfa5eb8ad16a52d24c31a09e470896", "config": "Full"},
)
