"""CVQA (culturally diverse multilingual VQA, Romero et al. 2024) from the hub copy afaji/cvqa, split test.

Raw layout (the hub repo): data/test-0000N-of-000MM.parquet, columns image (struct {bytes, path}), ID,
Subset (the language-country pair as a Python tuple repr, "('Japanese', 'Japan')"), Question and Options
(the local language), Translated Question and Translated Options (English), Label (0-based index; -1 in
the public copy, whose labels are hidden for the leaderboard), Category, Image Type, Image Source,
License (per item).

Records: id = ID; question/options are the local-language texts as written by the annotators and
question_en/options_en their English translations (the same option order, so one answer_index serves
both); language, country and country_language ("Japan-Japanese") come from Subset; category, image_type,
image_source and license are kept. A hidden label gives answer_index -1 and no answer: the metric refuses
to score such records (see vlmgrid.metrics.cvqa) instead of reading -1 as an option.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/test-*.parquet"
HIDDEN = -1
COLUMNS = (
    "image",
    "ID",
    "Subset",
    "Question",
    "Translated Question",
    "Options",
    "Translated Options",
    "Label",
    "Category",
    "Image Type",
    "Image Source",
    "License",
)
_TEXT = ("ID", "Subset", "Question", "Translated Question")
_META = ("Category", "Image Type", "Image Source", "License")
SCHEMA = pa.schema(
    [("image", IMAGE_TYPE)]
    + [(name, pa.string()) for name in _TEXT]
    + [
        ("Options", pa.list_(pa.string())),
        ("Translated Options", pa.list_(pa.string())),
        ("Label", pa.int64()),
    ]
    + [(name, pa.string()) for name in _META]
)
FEATURES = (
    {"image": {"_type": "Image"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in _TEXT}
    | {
        name: {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}
        for name in ("Options", "Translated Options")
    }
    | {"Label": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in _META}
)
METADATA = {
    "Category": "category",
    "Image Type": "image_type",
    "Image Source": "image_source",
    "License": "license",
}


# ---------------------------------------------------------------------------------------------- Subset


def parse_subset(value: Any, where: str) -> tuple[str, str]:
    """(language, country) from the Subset field, a Python tuple repr such as "('Japanese', 'Japan')"."""
    try:
        pair = ast.literal_eval(value) if isinstance(value, str) else None
    except (ValueError, SyntaxError):
        pair = None
    if not (
        isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p.strip() for p in pair)
    ):
        raise VlmgridError(
            f"{where}: Subset {value!r} is not a (language, country) pair such as \"('Japanese', 'Japan')\"; "
            f"the file is not CVQA's published format: check the source"
        )
    return pair[0].strip(), pair[1].strip()


def country_language(country: str, language: str) -> str:
    return f"{country}-{language}"


# ---------------------------------------------------------------------------------------------- adapter


def _options(row: Mapping[str, Any], column: str, where: str) -> list[str]:
    options = row[column]
    if not isinstance(options, list) or len(options) < 2 or any(not isinstance(o, str) for o in options):
        raise VlmgridError(
            f"{where}: `{column}` must list at least 2 option texts, not {options!r}; re-download the file"
        )
    return options


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            where = f"{path} row {n} (ID {row['ID']!r})"
            language, country = parse_subset(row["Subset"], where)
            options = _options(row, "Options", where)
            options_en = _options(row, "Translated Options", where)
            if len(options) != len(options_en):
                raise VlmgridError(
                    f"{where}: {len(options)} local options but {len(options_en)} translated ones; the file "
                    "is damaged: re-download it"
                )
            label = row["Label"]
            if label is None or not HIDDEN <= int(label) < len(options):
                raise VlmgridError(
                    f"{where}: Label {label!r} is neither -1 (hidden) nor an index into its {len(options)} "
                    "options; re-download the file"
                )
            label = int(label)
            rows.append(
                {
                    "id": str(row["ID"]),
                    "image": store.add(row["image"], where),
                    "question": row["Question"] or "",
                    "options": options,
                    "answer": None if label == HIDDEN else options[label],
                    "answer_index": label,
                    "question_en": row["Translated Question"] or "",
                    "options_en": options_en,
                    "language": language,
                    "country": country,
                    "country_language": country_language(country, language),
                    **{key: row[column] or "" for column, key in METADATA.items()},
                }
            )
    return Adapted(records=pd.DataFrame(rows))


KIND = question_kind(
    "cvqa",
    "cvqa",
    metric="cvqa",
    breakdown_by=("country_language",),
    description=(
        "CVQA: culturally diverse multiple-choice VQA in 31 languages and 30 countries, in four prompt "
        "settings (location-aware or not, English or local language); public labels are hidden."
    ),
    # The dataset card of the current hub copy (10.4k rows, data/test-*-of-00010.parquet); earlier revisions
    # of the card listed 8,031 and 10,268 items, so a pinned older revision has another count.
    expected_count=10374,
    raw_files=(FILE_PATTERN,),
    adapt=adapt,
    parser="letter",
    hub={"repo": "afaji/cvqa", "revision": "main", "split": "test"},  # unpinned: no commit sha verified yet
)
