"""Kaleidoscope (in-language exam multiple choice, 18 languages) from the hub copy CohereLabs/kaleidoscope.

Raw layout (the hub repo; formerly CohereForAI/kaleidoscope): `data/train-*.parquet`, 20,911 rows, one
question each, columns language (ar, bn, de, en, es, fa, fr, hi, hr, hu, lt, ne, nl, pt, ru, sr, te, uk),
country, file_name, source, license (per row), level, category_en, category_original_lang,
original_question_num, question, options (list of strings), answer (0-based index), image_png,
image_information, image_type, parallel_question_id, image, general_category_en. The pixels are not in the
parquet: `image` is a path into `data.zip` at the repo root, whose members lie under `final_data/`; an empty
`image` (null, "" or "None") marks a text-only question (the card: 11,459 with an image, 9,452 text-only).
Two questions have image paths as option texts; they are kept as text, as the authors' prompts show them.

Records: id "train-<row>" (the rows in file order; the dataset has no id column), the image extracted to
images/<sha256>.<ext> (null for text-only), question, options, answer; metadata `language`, `country`,
`level`, `category_en`, `general_category_en`, `image_type`, `image_information`, `parallel_question_id`,
`license` (missing values as ""), and `modality` ("multimodal" or "text-only").

An `image` is looked up in the archive as given and, failing that, under `final_data/` (a leading "./" is
ignored), so both spellings of the path read the same image.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.rawio import ImageStore, find_raw, iter_parquet_rows, raw_file, zip_file
from vlmgrid.benchmarks.records import checked_answer_index, checked_options, choice_record
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/train-*.parquet"
ARCHIVE = "data.zip"
ARCHIVE_ROOT = "final_data/"
TEXT_COLUMNS = (
    "language",
    "country",
    "file_name",
    "source",
    "license",
    "level",
    "category_en",
    "category_original_lang",
    "original_question_num",
    "question",
)
AFTER_ANSWER = (
    "image_png",
    "image_information",
    "image_type",
    "parallel_question_id",
    "image",
    "general_category_en",
)
SCHEMA = pa.schema(
    [(name, pa.string()) for name in TEXT_COLUMNS]
    + [("options", pa.list_(pa.string())), ("answer", pa.int64())]
    + [(name, pa.string()) for name in AFTER_ANSWER]
)
FEATURES = (
    {name: {"dtype": "string", "_type": "Value"} for name in TEXT_COLUMNS}
    | {"options": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}}
    | {"answer": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in AFTER_ANSWER}
)
COLUMNS = ("language", "question", "options", "answer", "image")
METADATA = (
    "country",
    "level",
    "category_en",
    "general_category_en",
    "image_type",
    "image_information",
    "parallel_question_id",
    "license",
)
TEXT_ONLY_MARKS = ("", "none", "nan", "null")


# ---------------------------------------------------------------------------------------------- adapter


def _is_text_only(image: Any) -> bool:
    return image is None or str(image).strip().lower() in TEXT_ONLY_MARKS


def _member(image: str, names: set[str]) -> str | None:
    path = image.strip().removeprefix("./")
    for candidate in (path, ARCHIVE_ROOT + path):
        if candidate in names:
            return candidate
    return None


def _plain(value: Any) -> str:
    return "" if value is None else str(value)


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    archive_path = raw_file(raw_dir, ARCHIVE)
    try:
        archive = zipfile.ZipFile(archive_path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise VlmgridError(
            f"{archive_path}: not a readable zip archive ({exc}); delete it and run prepare again"
        ) from None
    store = ImageStore(bench_dir)
    rows = []
    with archive:
        names = set(archive.namelist())
        for path in find_raw(raw_dir, FILE_PATTERN):
            for row in iter_parquet_rows(path, COLUMNS + METADATA):
                n = len(rows)
                where = f"{path} row {n}"
                options = checked_options(where, row["options"], "options")
                answer = checked_answer_index(where, row["answer"], options, "options")
                language = _plain(row["language"]).strip()
                if not language:
                    raise VlmgridError(
                        f"{where}: has no `language`; the file is not Kaleidoscope's: check the source"
                    )
                image = None
                if not _is_text_only(row["image"]):
                    member = _member(str(row["image"]), names)
                    if member is None:
                        raise VlmgridError(
                            f"{where}: image {row['image']!r} is not in {archive_path} (looked for it as "
                            f"given and under {ARCHIVE_ROOT}); the archive is incomplete or another "
                            "version: re-download it"
                        )
                    image = store.add(
                        {"bytes": zip_file(archive_path, archive, member), "path": member}, where
                    )
                rows.append(
                    {
                        **choice_record(f"train-{n}", image, _plain(row["question"]), options, answer),
                        "language": language,
                        **{key: _plain(row[key]) for key in METADATA},
                        "modality": "text-only" if image is None else "multimodal",
                    }
                )
    records = pd.DataFrame(rows)
    # pandas would turn the text-only items' None into NaN next to strings; records keep null paths.
    records["image"] = pd.Series([row["image"] for row in rows], dtype=object)
    return Adapted(records=records)


KIND = question_kind(
    "kaleidoscope",
    "exam_choice",
    metric="kaleidoscope",
    breakdown_by=("language", "modality", "image_type", "category_en", "general_category_en"),
    description=(
        "Kaleidoscope: in-language exam questions in 18 languages, with and without an image (20,911, "
        "multiple choice)."
    ),
    expected_count=20911,
    raw_files=(FILE_PATTERN, ARCHIVE),
    adapt=adapt,
    # The headline reads the prompt mode's answers as the authors' code does (exam_json / exam_tag, by the
    # predictions' variant); the lenient readers accept more ways of writing a letter.
    lenient_parsers={"json": "exam_json_lenient", "tag": "exam_tag_lenient"},
    # unpinned: "main" until a commit of CohereLabs/kaleidoscope is confirmed; pin `revision` in the config.
    hub={"repo": "CohereLabs/kaleidoscope", "revision": "main", "split": "train"},
)
