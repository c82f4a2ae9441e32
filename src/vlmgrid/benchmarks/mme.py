"""MME (perception and cognition, yes/no) from the hub copy lmms-lab/MME, split test, or from the authors'
release folder.

Raw layouts (`LAYOUTS`):
- hub (the hub repo): data/test-0000N-of-00004-<hash>.parquet, 2,374 rows in all, columns question_id (the
  image's path in the original release, e.g. "code_reasoning/0020.png": shared by the image's two
  questions, one answered "Yes" and one "No"), image (struct {bytes, path}), question (ends "Please answer
  yes or no."), answer ("Yes"/"No"), category (one of 14 subtasks);
- release (MME_Benchmark_release_version/, as BradyFU's eval_tool and LLaVA's convert_answer_to_mme.py read
  it): one folder per subtask, named as `category`. A subtask folder that holds both images/ and
  questions_answers_YN/ (artwork, celebrity, landmark, posters, scene) has <name>.jpg|png in images/ and
  <name>.txt in questions_answers_YN/; the others hold <name>.jpg|png beside <name>.txt. Each text file has
  one question a line, `question<TAB>Yes|No` (blank lines skipped). The subtask folders may also sit one
  level down, in MME_Benchmark/ (as the release archive unpacks). Read subtask by subtask in `CATEGORIES`
  order, question files by name, lines in order; question_id = "<subtask>/<image file name>", the hub's.

Records get ids "<question_id>#<k>", k the question's position (0, 1) among its image's questions in file
order; `image_id` keeps the question_id.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

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
from vlmgrid.benchmarks.records import yes_no_record
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
    "existence",
    "count",
    "position",
    "color",
    "posters",
    "celebrity",
    "scene",
    "landmark",
    "artwork",
    "OCR",
    "commonsense_reasoning",
    "numerical_calculation",
    "text_translation",
    "code_reasoning",
)


# The release's two folders of a subtask that keeps its images apart from its question files.
IMAGES, QUESTIONS = "images", "questions_answers_YN"
IMAGE_SUFFIXES = (".jpg", ".png")
NESTED = "MME_Benchmark/"  # the release archive's inner folder
RESTORE = "restore it from MME_Benchmark_release_version"


# ---------------------------------------------------------------------------------------------- adapter


def _hub_rows(raw_dir: Path):
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            yield row, f"{path} row {n}"


def _release_rows(root: Path):
    """The release folder's questions as the hub's rows (the image's bytes read from its file)."""
    for category in CATEGORIES:
        folder = root / category
        if not folder.is_dir():
            continue
        try:
            split = (folder / IMAGES).is_dir() and (folder / QUESTIONS).is_dir()
            image_dir, question_dir = (folder / IMAGES, folder / QUESTIONS) if split else (folder, folder)
            for listed in (question_dir, image_dir):
                os.listdir(listed)  # a glob passes over a folder it cannot read as if it were empty
        except PermissionError as exc:
            raise VlmgridError(
                f"{exc.filename} cannot be read by this user (permission denied); make the release "
                f"readable (`chmod -R a+rX {root}`) and run again"
            ) from None
        for path in sorted(question_dir.glob("*.txt")):
            within(question_dir, path.name, f"MME subtask {category}")
            images = [image_dir / (path.stem + suffix) for suffix in IMAGE_SUFFIXES]
            image = next((candidate for candidate in images if candidate.is_file()), None)
            if image is None:
                raise VlmgridError(
                    f"{path}: its image {path.stem}.jpg (or .png) is missing from {image_dir}; the release "
                    "folder is incomplete: restore the image from MME_Benchmark_release_version"
                )
            within(image_dir, image.name, f"MME subtask {category}")
            lines = read_text(path, RESTORE).splitlines()
            data = read_bytes(image, RESTORE)
            for n, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                where = f"{path} line {n}"
                parts = line.strip().split("\t")
                if len(parts) != 2:
                    raise VlmgridError(
                        f"{where}: is not `question<TAB>Yes|No` ({line!r}); restore the file from "
                        "MME_Benchmark_release_version"
                    )
                yield (
                    {
                        "question_id": f"{category}/{image.name}",
                        "question": parts[0],
                        "answer": parts[1],
                        "category": category,
                        "image": {"bytes": data, "path": image.name},
                    },
                    where,
                )


def _adapt_rows(rows_of, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    seen: Counter = Counter()
    rows = []
    for row, where in rows_of:
        answer = str(row["answer"] or "").strip().lower()
        if answer not in ("yes", "no"):
            raise VlmgridError(
                f"{where}: answer {row['answer']!r} is not Yes/No; the file is damaged or not MME: "
                "re-download it"
            )
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
                **yes_no_record(
                    f"{question_id}#{k}", store.add(row["image"], where), row["question"], answer
                ),
                "category": category,
                "image_id": question_id,
            }
        )
    return Adapted(records=pd.DataFrame(rows))


def _release_layout(name: str, prefix: str) -> Layout:
    markers = tuple(
        f"{prefix}{c}/{pattern}" for c in CATEGORIES for pattern in ("*.txt", f"{QUESTIONS}/*.txt")
    )
    images = tuple(
        f"{prefix}{c}/{folder}*{suffix}"
        for c in CATEGORIES
        for folder in ("", f"{IMAGES}/")
        for suffix in IMAGE_SUFFIXES
    )
    where = f"{prefix}<subtask>/" if prefix else "<subtask>/"
    return Layout(
        name,
        f"the release's subtask folders ({where}<name>.txt beside <name>.jpg|png, or in "
        f"{QUESTIONS}/ and {IMAGES}/)",
        markers,
        markers + images,
        lambda raw_dir, bench_dir: _adapt_rows(_release_rows(raw_dir / prefix), bench_dir),
    )


LAYOUTS = Layouts(
    "mme",
    [
        hub_layout(FILE_PATTERN, rows_adapter(_hub_rows, _adapt_rows)),
        _release_layout("release", ""),
        _release_layout("release_nested", NESTED),
    ],
)


KIND = question_kind(
    "mme",
    "yes_no",
    metric="mme",
    breakdown_by=("category",),
    description=(
        "MME: yes/no perception and cognition questions over 14 subtasks, two questions per image (2,374 "
        "items)."
    ),
    expected_count=2374,
    group_size=2,  # the two questions of an image
    **LAYOUTS.kind_fields(),
    parser="mme",
    lenient_parsers={"*": "mme_lenient"},
    # sha: hub cache snapshot datasets--lmms-lab--MME/snapshots/d6c9023f017b564f7b3ccccf5348166bce8fdbcd, and
    # a public build script's pin of lmms-lab-encoder/MME (the repo's new name) to it with the 4 data/test-*
    # files.
    hub={"repo": "lmms-lab/MME", "revision": "d6c9023f017b564f7b3ccccf5348166bce8fdbcd", "split": "test"},
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
