"""CV-Bench (vision-centric multiple choice) from the hub copy nyu-visionx/CV-Bench.

Raw layout (the hub repo root): test_2d.parquet (type "2D": tasks Count and Relation, sources ADE20K and
COCO) and test_3d.parquet (type "3D": tasks Depth and Distance, source Omni3D), 2,638 rows in all, columns
idx, type, task, image (struct {bytes, path}), choices (list), question, prompt (the question with its
lettered choices and an instruction), answer ("(A)"), filename, source, source_dataset, ... `idx` is
numbered within each file, so records get ids "<type>-<idx>". Records keep source, task and type: the
official score averages accuracy within sources ((ADE20K + COCO) / 2 + Omni3D) / 2.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows
from vlmgrid.benchmarks.records import checked_options, choice_record
from vlmgrid.errors import VlmgridError

FILES = {"2D": "test_2d.parquet", "3D": "test_3d.parquet"}
TASKS = {"2D": ("Count", "Relation"), "3D": ("Depth", "Distance")}
SOURCES = ("ADE20K", "COCO", "Omni3D")
COLUMNS = ("idx", "type", "task", "image", "choices", "question", "prompt", "answer", "source")
SCHEMA = pa.schema(
    [
        ("idx", pa.int64()),
        ("type", pa.string()),
        ("task", pa.string()),
        ("image", IMAGE_TYPE),
        ("choices", pa.list_(pa.string())),
        ("question", pa.string()),
        ("prompt", pa.string()),
        ("answer", pa.string()),
        ("filename", pa.string()),
        ("source", pa.string()),
        ("source_dataset", pa.string()),
    ]
)
FEATURES = (
    {"idx": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in ("type", "task")}
    | {
        "image": {"_type": "Image"},
        "choices": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    }
    | {
        name: {"dtype": "string", "_type": "Value"}
        for name in ("question", "prompt", "answer", "filename", "source", "source_dataset")
    }
)
ANSWER = re.compile(r"^\(([A-Z])\)$")


# ---------------------------------------------------------------------------------------------- adapter


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for kind_type, name in FILES.items():
        for path in find_raw(raw_dir, name):
            for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
                where = f"{path} row {n}"
                if row["type"] != kind_type or row["task"] not in TASKS[kind_type]:
                    raise VlmgridError(
                        f"{where}: type/task {row['type']!r}/{row['task']!r} do not belong in {name} "
                        f"(expected type {kind_type}, task one of {', '.join(TASKS[kind_type])}); the file "
                        "is not CV-Bench: check the source"
                    )
                if row["source"] not in SOURCES:
                    raise VlmgridError(
                        f"{where}: source {row['source']!r} is not one of {', '.join(SOURCES)}; the file is "
                        "not CV-Bench: check the source"
                    )
                choices = checked_options(where, row["choices"], "choices")
                match = ANSWER.match(str(row["answer"] or "").strip())
                index = ord(match.group(1)) - 65 if match else -1
                if not 0 <= index < len(choices):
                    raise VlmgridError(
                        f"{where}: answer {row['answer']!r} is not one of its {len(choices)} choices (A)..; "
                        "re-download the file"
                    )
                if row["idx"] is None:
                    raise VlmgridError(f"{where}: has no idx; re-download the file")
                rows.append(
                    {
                        **choice_record(
                            f"{kind_type}-{int(row['idx'])}",
                            store.add(row["image"], where),
                            row["question"],
                            choices,
                            index,
                        ),
                        "source": row["source"],
                        "task": row["task"],
                        "type": kind_type,
                        "prompt": row["prompt"] or "",
                    }
                )
    return Adapted(records=pd.DataFrame(rows))


KIND = question_kind(
    "cvbench",
    "multiple_choice",
    metric="cvbench",
    breakdown_by=("source", "task"),
    description=(
        "CV-Bench: vision-centric multiple choice (2D count/relation on ADE20K/COCO, 3D depth/distance on "
        "Omni3D)."
    ),
    expected_count=2638,
    raw_files=tuple(FILES.values()),
    adapt=adapt,
    parser="cvbench",
    lenient_parsers={"*": "cvbench_lenient"},
    # The pin is the commit a public build script downloads test_2d.parquet from (with the file's sha256
    # 33196034ef4bf3265cae4a7ff5c4071b2ff1cc21123e8e285c6a91393897ecbc); that test_3d.parquet is at the
    # same commit was not checked.
    hub={
        "repo": "nyu-visionx/CV-Bench",
        "revision": "bc284db50d036958861cb60cdd7b77612052ce0d",
        "split": "test",
    },
)
