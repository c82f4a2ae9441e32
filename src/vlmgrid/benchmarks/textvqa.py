"""TextVQA (reading text in images, short answers) from the hub copy lmms-lab/textvqa, split validation, or
from the authors' release files.

Raw layouts (`LAYOUTS`):
- hub (the hub repo): data/validation-0000N-of-00003.parquet, 5,000 rows, columns image_id, question_id
  (int), question, question_tokens, image (struct {bytes, path}), image_width, image_height,
  flickr_original_url, flickr_300k_url, answers (list of 10 human answers), image_classes, set_name,
  ocr_tokens (list);
- release (textvqa.org's files): TextVQA_0.5.1_val.json ({"dataset_type", "dataset_name",
  "dataset_version", "data": [{question, image_id, image_classes, flickr_original_url, flickr_300k_url,
  image_width, image_height, answers, question_tokens, question_id, set_name}, ...]}) and the images
  train_images/<image_id>.jpg (the validation images are in the train/val archive's train_images/). The
  OCR tokens are a file of their own, TextVQA_Rosetta_OCR_v0.2_val.json ({"data": [{image_id, ocr_tokens,
  ocr_info}, ...]}), read by image_id when it lies beside the questions; without it a record's
  ocr_tokens are [] (no protocol reads them).
Records: id = str(question_id), options [], answer = the most common human answer (ties: the first given),
answer_index -1, answers (all 10, scored with VQA accuracy), ocr_tokens, image_id.
"""

from __future__ import annotations

import json
from collections import Counter
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
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/validation-*.parquet"
COLUMNS = ("image_id", "question_id", "question", "image", "answers", "ocr_tokens")
N_ANSWERS = 10
STRINGS = pa.list_(pa.string())
SCHEMA = pa.schema(
    [
        ("image_id", pa.string()),
        ("question_id", pa.int64()),
        ("question", pa.string()),
        ("question_tokens", STRINGS),
        ("image", IMAGE_TYPE),
        ("image_width", pa.int64()),
        ("image_height", pa.int64()),
        ("flickr_original_url", pa.string()),
        ("flickr_300k_url", pa.string()),
        ("answers", STRINGS),
        ("image_classes", STRINGS),
        ("set_name", pa.string()),
        ("ocr_tokens", STRINGS),
    ]
)
_SEQ = {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}
FEATURES = {
    "image_id": {"dtype": "string", "_type": "Value"},
    "question_id": {"dtype": "int64", "_type": "Value"},
    "question": {"dtype": "string", "_type": "Value"},
    "question_tokens": _SEQ,
    "image": {"_type": "Image"},
    "image_width": {"dtype": "int64", "_type": "Value"},
    "image_height": {"dtype": "int64", "_type": "Value"},
    "flickr_original_url": {"dtype": "string", "_type": "Value"},
    "flickr_300k_url": {"dtype": "string", "_type": "Value"},
    "answers": _SEQ,
    "image_classes": _SEQ,
    "set_name": {"dtype": "string", "_type": "Value"},
    "ocr_tokens": _SEQ,
}


# ---------------------------------------------------------------------------------------------- adapter


def majority_answer(answers: list[str]) -> str:
    """The most common answer (exact strings); a tie goes to the one given first."""
    return Counter(answers).most_common(1)[0][0]


QUESTIONS = "TextVQA_0.5.1_val.json"
OCR = "TextVQA_Rosetta_OCR_v0.2_val.json"
IMAGE_DIR = "train_images"


def _hub_rows(raw_dir: Path) -> Iterator[tuple[dict, str]]:
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            yield row, f"{path} row {n}"


RESTORE = "restore it from textvqa.org's release"


def _data(path: Path) -> list:
    try:
        data = json.loads(read_text(path, RESTORE)).get("data")
    except (ValueError, AttributeError, RecursionError) as exc:
        raise VlmgridError(f"{path}: not readable TextVQA JSON ({exc}); {RESTORE}") from None
    if not isinstance(data, list) or not all(isinstance(entry, dict) for entry in data):
        raise VlmgridError(
            f"{path}: has no `data` list of entries; it is not TextVQA's release file: restore it from "
            "textvqa.org"
        )
    return data


def _release_rows(raw_dir: Path) -> Iterator[tuple[dict, str]]:
    """The questions of the release's validation file as the hub's rows (image and OCR tokens by image_id)."""
    path = raw_dir / QUESTIONS
    questions = _data(path)
    ocr: dict[str, Any] = {}
    if (raw_dir / OCR).is_file():
        ocr = {str(entry.get("image_id")): entry.get("ocr_tokens") for entry in _data(raw_dir / OCR)}
    for n, entry in enumerate(questions):
        where = f"{path} entry {n}"
        image_id = str(entry.get("image_id") or "")
        image = within(raw_dir / IMAGE_DIR, f"{image_id}.jpg", f"{where} (its image_id)")
        if not image_id or not image.is_file():
            raise VlmgridError(
                f"{image}: missing (the image of {where}); unpack the release's train_val_images archive "
                f"into {raw_dir}"
            )
        row = {key: entry.get(key) for key in COLUMNS if key not in ("image", "ocr_tokens")}
        data = read_bytes(image, f"restore the image of {where}")
        yield (
            {**row, "image": {"bytes": data, "path": image.name}, "ocr_tokens": ocr.get(image_id) or []},
            where,
        )


def _adapt_rows(rows_of: Iterator[tuple[dict, str]], bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for row, where in rows_of:
        answers = row["answers"]
        if not isinstance(answers, list) or len(answers) != N_ANSWERS or any(a is None for a in answers):
            raise VlmgridError(
                f"{where}: `answers` must hold the {N_ANSWERS} human answers, not {answers!r}; the file is "
                "damaged or not TextVQA: re-download it"
            )
        if row["question_id"] is None:
            raise VlmgridError(f"{where}: has no question_id; re-download the file")
        answers = [str(a) for a in answers]
        rows.append(
            {
                "id": str(row["question_id"]),
                "image": store.add(row["image"], where),
                "question": row["question"],
                "options": [],
                "answer": majority_answer(answers),
                "answer_index": -1,
                "answers": answers,
                "ocr_tokens": [str(t) for t in (row["ocr_tokens"] or [])],
                "image_id": str(row["image_id"] or ""),
            }
        )
    return Adapted(records=pd.DataFrame(rows))


LAYOUTS = Layouts(
    "textvqa",
    [
        hub_layout(FILE_PATTERN, rows_adapter(_hub_rows, _adapt_rows)),
        Layout(
            "release",
            f"the release's {QUESTIONS} and {IMAGE_DIR}/<image_id>.jpg",
            (QUESTIONS,),
            (QUESTIONS, OCR, f"{IMAGE_DIR}/*.jpg"),
            rows_adapter(_release_rows, _adapt_rows),
        ),
    ],
)


KIND = question_kind(
    "textvqa",
    "short_answer",
    metric="vqa_accuracy",
    breakdown_by=(),
    description=(
        "TextVQA (validation): short answers to questions that need reading text in the image, VQA accuracy "
        "over 10 answers."
    ),
    expected_count=5000,
    **LAYOUTS.kind_fields(),
    parser="short_answer",
    lenient_parsers={"*": "short_answer_lenient"},
    # The pin is the commit a public build script downloads data/validation-0000{0,1,2}-of-00003.parquet
    # from (with their sha256 491649b5..., 909ad12a..., a770d03e...).
    hub={
        "repo": "lmms-lab/textvqa",
        "revision": "9c0699cd19768ac5ab97568f6b3cbac4c0062884",
        "split": "validation",
    },
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
