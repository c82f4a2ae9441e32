"""MMBench (multiple choice, circular evaluation) from the hub copy lmms-lab/MMBench, config `en`, split dev,
or from the authors' TSV file.

Raw layouts (`LAYOUTS`):
- hub (the hub repo, a conversion of the authors' TSV): en/dev-*.parquet, columns index (int; may be a
  string: cast), question, hint, A, B, C, D (missing options are None/NaN/"nan"), answer (a letter),
  category, L2-category, image (struct {bytes, path}), plus source/comment/split (not read);
- tsv (the file the MMBench authors and VLMEvalKit distribute: mmbench_dev_20230712.tsv, the dev file
  LLaVA-1.5 was scored on, 4,377 rows, the published variant `dev_20230712`; mmbench_dev_en_<date>.tsv;
  MMBench_DEV_EN.tsv, MMBench_DEV_EN_V11.tsv; a file `path` names directly may have any name, its header
  tells it): tab-separated with a header (a UTF-8 byte-order mark before it is allowed), columns index,
  question, hint, A, B, C, D, answer, category, image (base64 of the image file; in VLMEvalKit's files a row
  may instead hold the index of the row whose image it shares, a string of at most 64 characters), source,
  l2-category (lower case, unlike the hub's L2-category), comment, split. A local source's `path` may name the
  file itself; a folder must hold exactly one such file. Read as text, cell by cell (an option spelled "None"
  stays text; an empty cell is a missing option or hint).

Circular evaluation asks a question once per rotation of its options. The published dev file already holds
those copies (the maintainers in open-compass/MMBench#8: "the MMBench-Dev tsv ... also includes CircularEval
cases with choice shifted"): copy k of question q has index q + k * 1,000,000, and its options are rotated
the authors' way: at position i it holds the original option (i - k) mod n, so the gold letter moves one
place down per copy (question 1 of the dev file, gold D: copies 1000001, 2000001, 3000001 have gold A, B,
C). Not every question has n - 1 copies: in the authors' dev file 53 four-option questions have two, which
rotate options A-C among themselves and keep D in place (question 34: rows 34, 1000034, 2000034, gold A, B,
C).

So a file that holds copies is read verbatim: one record per row, id = the row's index, options in the
row's order, gold = the row's answer, circular_group = index mod 1,000,000 (what VLMEvalKit groups by) and
circular_shift = index // 1,000,000. Each copy is checked against its original question (the same option
texts and the same correct option text), which catches a damaged file but never reorders a row. Only a raw
file of originals alone (no index >= 1,000,000) is expanded, into the n rotations of the published
convention (`rotate`).

Records: id, circular_group, circular_shift, hint, category, l2_category, in the raw files' row order.
expected_count counts records, i.e. the raw rows of the published dev split with its circular copies.
"""

from __future__ import annotations

import base64
import binascii
import csv
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.layouts import Layout, Layouts, hub_layout, rows_adapter
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "en/dev-*.parquet"
# The authors' and VLMEvalKit's English dev files (the 2023-07-12 one is LLaVA-1.5's).
TSV_PATTERNS = (
    "mmbench_dev_20230712.tsv",
    "mmbench_dev_en_*.tsv",
    "MMBench_DEV_EN.tsv",
    "MMBench_DEV_EN_V11.tsv",
)
TSV_HEADER = (
    "index",
    "question",
    "hint",
    "A",
    "B",
    "C",
    "D",
    "answer",
    "category",
    "image",
    "source",
    "l2-category",
    "comment",
    "split",
)
TSV_COLUMNS = ("index", "question", "hint", "A", "B", "C", "D", "answer", "category", "l2-category", "image")
IMAGE_REFERENCE = 64  # VLMEvalKit: an image cell this short holds the index of the row that has the image
LETTERS = ("A", "B", "C", "D")
GROUP = 1_000_000
COLUMNS = ("index", "question", "hint", "A", "B", "C", "D", "answer", "category", "L2-category", "image")
TEXT = (
    "question",
    "hint",
    "A",
    "B",
    "C",
    "D",
    "answer",
    "category",
    "source",
    "L2-category",
    "comment",
    "split",
)
SCHEMA = pa.schema(
    [("index", pa.int64())]
    + [(name, pa.string()) for name in TEXT[:8]]
    + [("image", IMAGE_TYPE)]
    + [(name, pa.string()) for name in TEXT[8:]]
)
FEATURES = (
    {"index": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in TEXT[:8]}
    | {"image": {"_type": "Image"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in TEXT[8:]}
)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip().lower() in ("", "nan")


def rotate(
    options: list[str], answer_index: int, shift: int, span: int | None = None
) -> tuple[list[str], int]:
    """Copy `shift` of a circular question in the authors' convention: position i holds the original option
    (i - shift) mod span, for the first `span` options (all of them by default); later options keep their
    place (the authors' two-copy questions rotate A-C and keep D). Returns the options and the gold index."""
    span = len(options) if span is None else span
    rotated = [options[(i - shift) % span] if i < span else options[i] for i in range(len(options))]
    return rotated, (answer_index + shift) % span if answer_index < span else answer_index


# ---------------------------------------------------------------------------------------------- adapter


def _options(row: Mapping[str, Any], where: str) -> list[str]:
    present = [not _missing(row[letter]) for letter in LETTERS]
    n = sum(present)
    if n < 2 or not all(present[:n]):
        raise VlmgridError(
            f"{where}: options A-D must be at least 2 given in order (A, B, ...), not "
            f"{[row[letter] for letter in LETTERS]!r}; re-download the file"
        )
    return [str(row[letter]) for letter in LETTERS[:n]]


def _answer_index(row: Mapping[str, Any], n: int, where: str) -> int:
    answer = str(row["answer"] or "").strip().upper()
    if answer not in LETTERS[:n]:
        raise VlmgridError(
            f"{where}: answer {row['answer']!r} is not one of its options {', '.join(LETTERS[:n])}; "
            "re-download the file"
        )
    return LETTERS.index(answer)


def _index(value: Any, where: str) -> int:
    try:
        index = int(str(value).strip())
    except ValueError:
        raise VlmgridError(
            f"{where}: index {value!r} is not an integer; the file is not MMBench: check the source"
        ) from None
    if index < 0:
        raise VlmgridError(f"{where}: index {index} is negative; the file is not MMBench: check the source")
    return index


def _record(row: Mapping[str, Any], index: int, image: str, options: list[str], answer: int) -> dict:
    return {
        "id": str(index),
        "image": image,
        "question": row["question"],
        "options": options,
        "answer": options[answer],
        "answer_index": answer,
        "hint": "" if _missing(row["hint"]) else str(row["hint"]),
        "category": str(row["category"] or ""),
        "l2_category": str(row["L2-category"] or ""),
        "circular_group": index % GROUP,
        "circular_shift": index // GROUP,
    }


def _check_copy(row: Mapping[str, Any], where: str, index: int, original: tuple[dict, str] | None) -> None:
    """A copy must hold its original question's option texts and correct option text (in any order)."""
    group = index % GROUP
    if original is None:
        raise VlmgridError(
            f"{where}: circular copy {index} has no original question {group}; the copy is incomplete: "
            "re-download it"
        )
    base, base_where = original
    base_options = _options(base, base_where)
    options = _options(row, where)
    answer = _answer_index(row, len(options), where)
    if (
        sorted(options) != sorted(base_options)
        or options[answer] != base_options[_answer_index(base, len(base_options), base_where)]
    ):
        raise VlmgridError(
            f"{where}: circular copy {index} does not hold the options and correct answer of question "
            f"{group} ({base_where}); the file is damaged or another MMBench version: check the source"
        )


def _hub_rows(raw_dir: Path) -> Iterator[tuple[dict, str]]:
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            yield row, f"{path} row {n}"


def _tsv_rows(path: Path) -> Iterator[tuple[dict, str]]:
    """The TSV's rows as the hub's columns (L2-category; image as {bytes, path}), each image decoded from its
    base64 or from the row it refers to. Rows are numbered as lines of the file (the header is line 1)."""
    try:
        with open(
            path, encoding="utf-8-sig", newline=""
        ) as handle:  # -sig: a byte-order mark (Excel) is no header
            csv.field_size_limit(sys.maxsize)  # an image cell is far longer than csv's default limit
            reader = csv.reader(handle, delimiter="\t")
            header = next(reader, None)
            missing = [c for c in TSV_COLUMNS if c not in (header or [])]
            if missing:
                raise VlmgridError(
                    f"{path}: has no column {missing[0]!r} (its header has "
                    f"{', '.join(header or []) or 'nothing'}); MMBench's TSV has {', '.join(TSV_HEADER)}: "
                    "use the file as its authors or VLMEvalKit publish it"
                )
            rows = []
            for n, cells in enumerate(reader, start=2):
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise VlmgridError(
                        f"{path} line {n}: has {len(cells)} cells, not the header's {len(header)}; the file "
                        "is damaged: re-download it"
                    )
                rows.append((dict(zip(header, cells)), f"{path} line {n}"))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise VlmgridError(
            f"{path}: not a readable tab-separated UTF-8 file ({exc}); re-download it"
        ) from None
    images = {row["index"].strip(): row["image"] for row, _ in rows}
    for row, where in rows:
        data = row["image"].strip()
        if len(data) <= IMAGE_REFERENCE:  # the index of the row holding this row's image
            if len(images.get(data, "")) <= IMAGE_REFERENCE:
                raise VlmgridError(
                    f"{where}: image {data!r} is neither an image nor the index of a row with one; the file "
                    "is damaged: re-download it"
                )
            data = images[data].strip()
        try:
            image = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise VlmgridError(
                f"{where}: image is not base64 text; the file is damaged: re-download it"
            ) from None
        yield {**row, "L2-category": row["l2-category"], "image": {"bytes": image, "path": None}}, where


def _is_tsv(path: Path) -> bool:
    """Whether a file's first line is MMBench's TSV header: a file `path` names is read by its content, under
    whatever name it was saved."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
            header = handle.readline(1 << 16).rstrip("\r\n").split("\t")
    except OSError:
        return False
    return all(column in header for column in TSV_COLUMNS)


def _adapt_rows(rows_of: Iterator[tuple[dict, str]], bench_dir: Path) -> Adapted:
    rows: list[tuple[int, dict, str]] = []
    seen: set[int] = set()
    for row, where in rows_of:
        index = _index(row["index"], where)
        if index in seen:
            raise VlmgridError(
                f"{where}: index {index} appears twice; the raw files repeat a row: re-download them"
            )
        seen.add(index)
        rows.append((index, row, where))
    originals = {index: (row, where) for index, row, where in rows if index < GROUP}
    verbatim = len(originals) < len(rows)  # the file holds the published copies

    store = ImageStore(bench_dir)
    records = []
    for index, row, where in rows:
        options = _options(row, where)
        answer = _answer_index(row, len(options), where)
        image = store.add(row["image"], where)
        if verbatim:
            if index >= GROUP:
                _check_copy(row, where, index, originals.get(index % GROUP))
            records.append(_record(row, index, image, options, answer))
            continue
        for k in range(len(options)):
            records.append(_record(row, index + k * GROUP, image, *rotate(options, answer, k)))
    return Adapted(records=pd.DataFrame(records))


LAYOUTS = Layouts(
    "mmbench",
    [
        hub_layout(FILE_PATTERN, rows_adapter(_hub_rows, _adapt_rows)),
        Layout(
            "tsv",
            f"one of the authors' TSV files ({', '.join(TSV_PATTERNS)})",
            TSV_PATTERNS,
            TSV_PATTERNS,
            rows_adapter(_tsv_rows, _adapt_rows),
            one_file=True,
            sniff=_is_tsv,
        ),
    ],
)


KIND = question_kind(
    "mmbench",
    "multiple_choice",
    metric="mmbench_circular",
    breakdown_by=("category",),
    description=(
        "MMBench (en dev): multiple-choice perception and reasoning questions, scored with circular "
        "evaluation."
    ),
    # Records == raw rows of the published dev split, which holds the copies.
    # 4,329 is the count harnesses report for MMBench_DEV_EN (one user report says 4,330): NOT confirmed
    # against the hub files; a mismatch makes prepare fail loudly rather than score a different set.
    expected_count=4329,
    **LAYOUTS.kind_fields(),
    # mmbench_dev_20230712.tsv (LLaVA's scripts/v1_5/eval/mmbench.sh reads it): 4,377 rows with the copies
    variants={"dev_20230712": 4377},
    parser="mmbench",
    # sha: pinned as lmms-lab/MMBench@56ba1af8954932c4804bd3f522e05ed96e63b654 in a public revision table, and
    # as lmms-lab-encoder/MMBench (the repo's new name, history kept) at the same commit, config en, split
    # dev.
    hub={
        "repo": "lmms-lab/MMBench",
        "revision": "56ba1af8954932c4804bd3f522e05ed96e63b654",
        "config": "en",
        "split": "dev",
    },
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
