"""`vlmevalkit`: the prediction files of VLMEvalKit (open-compass/VLMEvalKit), `<model>_<dataset>.xlsx`.

Layout (`vlmeval/inference.py` `infer_data_job`, `vlmeval/smp/file.py` `dump` and `get_pred_file_path`): the
dataset's TSV as VLMEvalKit loads it, without its `image` column, plus a `prediction` column, one row per
`index`, in the TSV's order. The file is `<work_dir>/<model>_<dataset>.xlsx` (pandas through xlsxwriter), or
`.tsv` (tab-separated, every field quoted) or `.json` (a list of one object per row, `indent=4`) when
`PRED_FORMAT` says so. The rows never name their dataset, so the file name does: keep VLMEvalKit's name.
FILE is such a file or a folder of them (a run's folder: the files whose dataset answers the benchmark's kind
are read, so that CV-Bench's 2D and 3D files are imported together; VLMEvalKit's score and judge files there,
`<model>_<dataset>_<suffix>.*`, are not prediction files).
(VLMEvalKit writes `.csv` only for its scores and judge files, which hold no answers.)

Each dataset's rows are matched to the records by the ids and texts both keep, and the row's gold checked
against the record's (a mismatch means the file was made from another version of the dataset):

- `MMBench_DEV_EN`, `MMBench_DEV_EN_V11` (mmbench): `index` is the dev file's index, circular copies included
  (q + k * 1,000,000), i.e. our record id; options `A`-`E` (empty where the question has fewer) and the
  `answer` letter must be the record's. V11 is another release of the questions: its rows are not those of a
  v1.0 benchmark, and are refused as such.
- `MME` (mme): `category` (the subtask) and `question` (ending "Please answer yes or no."); gold `answer`
  "Yes"/"No". The image's two questions differ, so the question tells them apart.
- `POPE` (pope, pope_coco): one row per distinct question of an image, `category` listing the splits that ask
  it, comma-separated (VLMEvalKit's POPE_rating splits it on ","): the row answers that question in each split
  it names (split and question; gold `answer` "Yes"/"No").
- `ScienceQA_TEST`, `ScienceQA_VAL` (scienceqa_img): `question`, `hint` (empty when none) and options `A`-`E`;
  gold `answer` letter. Our records hold the test split, so a VAL file's rows answer none of them.
- `TextVQA_VAL` (textvqa): `question`; gold `answer`, the ten human answers as a Python list.
- `CV-Bench-2D`, `CV-Bench-3D` (cvbench): the dataset's type (2D, 3D), `question` and options `A`-`F`; gold
  `answer` letter.
- `MMVP` (mmvp): `question` and options `A`, `B`; gold `answer` letter. VLMEvalKit's copy has the original
  labels, so for the four items whose label our records correct either letter is taken as the gold.

Texts are compared with white space squeezed and case folded. Rows and records that share these texts (POPE
asks "Is there a person in the image?" of many images, an MMVP pair asks one question of two images) are
matched in the order of the rows' `index`, the order of the dataset that both keep (not the file's order,
which a spreadsheet may have re-sorted); where the file keeps `image_path` the row goes first to the record of
that image (by file name without extension).

Where VLMEvalKit's judge file lies beside a ScienceQA prediction file
(`<model>_<dataset>_<judge>_result.xlsx`, `vlmevalkit_judge`), its per-row verdicts ride with the answers
(`Answer.verdict`), read, never re-run.

Cells are text: a prediction or option "None", "NA" or "null" is that text; a `.tsv` or `.json` saved with a
byte-order mark (Excel on Windows) reads as without one; a workbook is read only once `imports.reading` has
checked how far it unpacks. A `.tsv` row with other than its header's number of fields, or a `.json` row
without the `index` or `prediction` that other rows have, is refused: read as empty, it would be an empty
answer (an empty text in a present `prediction` field is one).

Releases (VLMEvalKit's history, first commit to 2026-08): the file name `<model>_<dataset>.xlsx` is the same
since 1711b013 (2023-11); since 4ff78b62 (2024-11) it lies in `<work_dir>/<model>/<eval id>/`, linked from
`<work_dir>/<model>/`; `.tsv` and `.json` came with `PRED_FORMAT` (9cc14cd0, 2025-09), as did an optional
`thinking` column (`SPLIT_THINK`), and `extra_records` with agent models (bf02d66b): both ignored here. The
datasets read kept their names and TSVs (the MD5 in `vlmeval/dataset/image_*.py`) since they were added. Until
63a279f1 (2026-07) the workbook was written with xlsxwriter's default `strings_to_formulas`, so a prediction
beginning with "=" became a formula whose stored value is 0: such a cell reads as the formula's text with
its "=" put back, the text the model wrote (`reading.read_workbook`), or, where xlsxwriter rewrote the formula
(`_xlfn.`), is an error row naming the cell.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import Answer, Importer, Verdict, squeeze, stem, too_deep
from vlmgrid.imports.llava import mme_question
from vlmgrid.imports.reading import check_workbook, files_in, read_text, read_workbook
from vlmgrid.imports.vlmevalkit_judge import JUDGED, judge_file, read_verdicts

log = logging.getLogger(__name__)

SUFFIXES = (".xlsx", ".tsv", ".json")
REQUIRED = ("index", "prediction")
LETTERS = "ABCDEF"
WHAT = "a VLMEvalKit prediction file (the dataset's columns, `index` and `prediction`)"

# VLMEvalKit's dataset name (the file name's tail) -> the benchmark kinds its rows answer.
DATASETS = {
    "MMBench_DEV_EN": ("mmbench",),
    "MMBench_DEV_EN_V11": ("mmbench",),
    "MME": ("mme",),
    "POPE": ("pope", "pope_coco"),
    "ScienceQA_TEST": ("scienceqa_img",),
    "ScienceQA_VAL": ("scienceqa_img",),
    "TextVQA_VAL": ("textvqa",),
    "CV-Bench-2D": ("cvbench",),
    "CV-Bench-3D": ("cvbench",),
    "MMVP": ("mmvp",),
}


@dataclass(frozen=True)
class Row:
    """One row of the file: its cells as text ("" where empty) and where it stands, for messages."""

    cells: dict[str, str]
    where: str
    verdict: Verdict | None = None  # VLMEvalKit's own, from its judge file beside this one
    error: str | None = None  # why its prediction cannot be told (a formula xlsxwriter rewrote)

    def get(self, column: str) -> str:
        return self.cells.get(column, "")


# ---------------------------------------------------------------------------------------------- reading


def dataset_name(path: Path) -> str:
    """The dataset a file answers, told by its name `<model>_<dataset>.<ext>` (the longest name that fits)."""
    name = next((n for n in sorted(DATASETS, key=len, reverse=True) if path.stem.endswith(f"_{n}")), None)
    if name is not None:
        return name
    raise VlmgridError(
        f"{path} is not named <model>_<dataset>{path.suffix} for a dataset whose rows can be matched to "
        "items (VLMEvalKit's file name says the dataset: keep it); the datasets read are "
        f"{', '.join(DATASETS)}"
    )


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _tsv(text: str, **kwargs) -> pd.DataFrame:
    """The TSV's cells as text: a prediction "None" or "NA" is that text, an empty cell ""."""
    return pd.read_csv(io.StringIO(text), sep="\t", dtype=str, keep_default_na=False, **kwargs)


def _check_fields(path: Path, text: str) -> None:
    """Refuse a TSV row whose fields are not as many as the header's. pandas fills a row cut short with ""
    (an empty prediction, scored as a format error) and takes a first row with a field more as the header
    shifted by one, so the fields are counted here, as csv parses them."""
    limit = csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # a prediction may pass 128 kB
    try:
        rows = (row for row in csv.reader(io.StringIO(text), delimiter="\t") if row)  # pandas skips blanks
        header = next(rows, [])
        for n, row in enumerate(rows, start=1):
            if len(row) != len(header):
                raise VlmgridError(
                    f"{path} row {n} has {len(row)} tab-separated fields where the header has "
                    f"{len(header)}: the row is cut short or damaged, so its prediction cannot be told; copy "
                    "the whole file again"
                )
    finally:
        csv.field_size_limit(limit)  # the process's limit as it was


def _check_keys(path: Path, data: list[dict]) -> None:
    """Refuse a JSON row without the `index` or `prediction` that other rows have (a key lost or misspelt):
    read as an empty cell, it would be an empty answer. A file whose rows all lack it is another format, which
    `read_rows` says."""
    keys = set().union(*data)
    for n, item in enumerate(data, start=1):
        lost = [key for key in REQUIRED if key in keys and key not in item]
        if lost:
            raise VlmgridError(
                f"{path} row {n} has no `{lost[0]}` key, which the other rows have (it has "
                f"{', '.join(item) or 'none'}): its answer cannot be told; write the key again or copy the "
                "whole file again"
            )


def _frame(path: Path) -> pd.DataFrame:
    """The whole file as a table of texts: an empty cell is "" (xlsx, tsv) or null (json)."""
    if path.suffix == ".xlsx":
        return read_workbook(path)
    try:
        if path.suffix == ".tsv":
            text = read_text(path)
            frame = _tsv(text)  # first: it refuses a field whose quote never closes, which csv takes
            _check_fields(path, text)
            return frame
        data = json.loads(read_text(path))
    except RecursionError:
        raise too_deep(path) from None
    except (ValueError, csv.Error) as error:  # parser and JSON errors
        raise VlmgridError(
            f"{path} cannot be read as {path.suffix[1:]} ({error}): the file is not {WHAT}"
        ) from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise VlmgridError(
            f"{path} is not a JSON list of objects: the file is not {WHAT} (give the right --format)"
        )
    _check_keys(path, data)
    return pd.DataFrame(data)


def read_rows(path: Path) -> list[Row]:
    """The file's rows, read whole; a file without `index` or `prediction` is refused."""
    if not path.is_file() or path.suffix not in SUFFIXES:
        raise VlmgridError(
            f"{path} is not a .xlsx, .tsv or .json file: the file is not {WHAT} (give the right --format)"
        )
    frame = _frame(path)
    missing = [column for column in REQUIRED if column not in frame.columns]
    if missing:
        raise VlmgridError(
            f"{path} has no `{missing[0]}` column (it has {', '.join(map(str, frame.columns))}): the "
            f"file is not {WHAT} (give the right --format)"
        )
    untold = frame.attrs.get(
        "formulas", {}
    )  # formula cells whose text cannot be told (reading.read_workbook)
    other = next(((at, why) for at, why in untold.items() if at[1] != "prediction"), None)
    if other is not None:
        raise VlmgridError(
            f"{path}: {other[1]}; write that {other[0][1]} again as text in the workbook (or import "
            f"the .tsv of a later VLMEvalKit)"
        )
    rows = []
    for n, values in enumerate(frame.to_dict("records"), start=1):
        cells = {str(column): _text(value) for column, value in values.items()}
        error = untold.get((n - 1, "prediction"))
        if error is not None:  # an error row naming the cell, never its stored "0"
            cells["prediction"] = ""
        rows.append(Row(cells, f"row {n} (index {cells['index']})", error=error))
    return rows


def looks_like(path: Path) -> bool:
    if path.is_dir():
        return any(looks_like(file) for file in prediction_files(path))
    if not path.is_file() or path.suffix not in SUFFIXES:
        return False
    try:
        dataset_name(path)  # VLMEvalKit names every prediction file after its dataset
    except VlmgridError:
        return False
    if path.suffix == ".xlsx":
        check_workbook(path)  # a hostile workbook (a bomb, a DTD) is refused, not taken for another format
    try:
        if path.suffix == ".xlsx":
            columns = set(read_workbook(path, nrows=0).columns)
        elif path.suffix == ".tsv":
            columns = set(_tsv(read_text(path), nrows=0).columns)
        else:
            data = json.loads(read_text(path))
            columns = set(data[0]) if isinstance(data, list) and data and isinstance(data[0], dict) else set()
    except RecursionError:
        raise too_deep(path) from None
    except (VlmgridError, ValueError):
        return False
    return all(column in columns for column in REQUIRED)


# ---------------------------------------------------------------------------------------------- matching


def norm(text: Any) -> str:
    return squeeze(_text(text)).casefold()


def _options(row: Row) -> tuple[str, ...]:
    return tuple(norm(row.get(letter)) for letter in LETTERS if row.get(letter).strip())


def _record_options(record: pd.Series) -> tuple[str, ...]:
    return tuple(norm(option) for option in record["options"])


def _letter(record: pd.Series) -> str:
    return LETTERS[int(record["answer_index"])]


def _other_version(
    path: Path, row: Row, what: str, theirs: Any, record_ids: list[str], ours: Any, dataset: str
) -> VlmgridError:
    items = f"item {record_ids[0]} has" if len(record_ids) == 1 else f"items {', '.join(record_ids[:3])} have"
    return VlmgridError(
        f"{path} {row.where} gives {what} {theirs!r}, but {items} {ours!r}: the file was made from another "
        f"version of {dataset}; import it into that one"
    )


def _mmbench(path: Path, rows: list[Row], records: pd.DataFrame, dataset: str) -> list[Answer]:
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for row in rows:
        record = by_id.get(row.get("index"))
        if record is not None:
            if _options(row) != _record_options(record):
                raise _other_version(
                    path,
                    row,
                    "the options",
                    list(_options(row)),
                    [str(record["id"])],
                    list(_record_options(record)),
                    dataset,
                )
            if row.get("answer").strip() != _letter(record):
                raise _other_version(
                    path,
                    row,
                    "the gold letter",
                    row.get("answer"),
                    [str(record["id"])],
                    _letter(record),
                    dataset,
                )
        answers.append(
            Answer(
                None if record is None else str(record["id"]), row.get("prediction"), row.where, row.verdict
            )
        )
    return answers


@dataclass(frozen=True)
class Texts:
    """How the rows of a dataset name their records: the texts both keep (`record_key`, `row_keys`: one key
    per record the row answers), the gold both give (`record_gold`, `row_gold`; `accepts` says whether a row's
    gold is the record's) and the image's file name where both keep one."""

    record_key: Callable[[pd.Series], tuple]
    row_keys: Callable[[Row, str], list[tuple]]
    record_gold: Callable[[pd.Series], Any]
    row_gold: Callable[[Row], Any]
    record_image: Callable[[pd.Series], str] | None = None
    accepts: Callable[[pd.Series, Any, Any], bool] = lambda record, ours, theirs: ours == theirs


def _yes_no(row: Row) -> str:
    return norm(row.get("answer"))


def _answers(row: Row) -> list[str]:
    """TextVQA's gold: the ten human answers, written as a Python list (VLMEvalKit evals it)."""
    text = row.get("answer")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text
    return sorted(norm(answer) for answer in (value if isinstance(value, list) else [value]))


def _mmvp_accepts(record: pd.Series, ours: Any, theirs: Any) -> bool:
    return ours == theirs or bool(record.get("label_corrected", False))


TEXTS = {
    "mme": Texts(
        record_key=lambda r: (norm(r["category"]), norm(mme_question(r["question"]))),
        row_keys=lambda row, dataset: [(norm(row.get("category")), norm(mme_question(row.get("question"))))],
        record_gold=lambda r: norm(r["answer"]),
        row_gold=_yes_no,
        record_image=lambda r: stem(r["image_id"]),
    ),
    "pope": Texts(
        record_key=lambda r: (norm(r["split"]), norm(r["question"])),
        row_keys=lambda row, dataset: [
            (norm(split), norm(row.get("question")))
            for split in row.get("category").split(",")
            if split.strip()
        ],
        record_gold=lambda r: norm(r["answer"]),
        row_gold=_yes_no,
        record_image=lambda r: stem(r["image_source"]),
    ),
    "scienceqa_img": Texts(
        record_key=lambda r: (norm(r["question"]), norm(r.get("hint", "")), _record_options(r)),
        row_keys=lambda row, dataset: [(norm(row.get("question")), norm(row.get("hint")), _options(row))],
        record_gold=_letter,
        row_gold=lambda row: row.get("answer").strip(),
    ),
    "textvqa": Texts(
        record_key=lambda r: (norm(r["question"]),),
        row_keys=lambda row, dataset: [(norm(row.get("question")),)],
        record_gold=lambda r: sorted(norm(answer) for answer in r["answers"]),
        row_gold=_answers,
        record_image=lambda r: stem(r["image_id"]),
    ),
    "cvbench": Texts(
        record_key=lambda r: (norm(r["type"]), norm(r["question"]), _record_options(r)),
        row_keys=lambda row, dataset: [
            (norm(dataset.rsplit("-", 1)[-1]), norm(row.get("question")), _options(row))
        ],
        record_gold=_letter,
        row_gold=lambda row: row.get("answer").strip(),
    ),
    "mmvp": Texts(
        record_key=lambda r: (norm(r["question"]), _record_options(r)),
        row_keys=lambda row, dataset: [(norm(row.get("question")), _options(row))],
        record_gold=_letter,
        row_gold=lambda row: row.get("answer").strip(),
        record_image=lambda r: str(r["id"]),
        accepts=_mmvp_accepts,
    ),
}
TEXTS["pope_coco"] = TEXTS["pope"]


def _in_index_order(rows: list[Row]) -> list[Row]:
    """The rows in the order of their `index`, the dataset's order: VLMEvalKit writes them so, and a file
    whose rows were sorted otherwise since (in a spreadsheet) still gives each row to the record in its place.
    A file whose indices are not all numbers stays in file order."""
    try:
        return sorted(rows, key=lambda row: int(row.get("index")))
    except ValueError:
        return rows


def _by_texts(texts: Texts, path: Path, rows: list[Row], records: pd.DataFrame, dataset: str) -> list[Answer]:
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    every: dict[tuple, list[str]] = defaultdict(list)  # key -> its records' ids, in record order
    for item, record in by_id.items():
        every[texts.record_key(record)].append(item)
    waiting = {key: list(ids) for key, ids in every.items()}  # those not answered yet
    answers, shared, corrected = [], 0, 0
    for row in _in_index_order(rows):
        gold = texts.row_gold(row)
        image = stem(row.get("image_path")) if row.get("image_path") else None

        def gives(item: str, gold: Any = gold) -> bool:
            """Whether the row's gold is the record's."""
            return texts.accepts(by_id[item], texts.record_gold(by_id[item]), gold)

        for key in texts.row_keys(row, dataset):
            if key not in every:
                answers.append(Answer(None, row.get("prediction"), row.where, row.verdict))
                continue
            fits = [item for item in waiting[key] if gives(item)]
            if not fits:  # all answered already (check_answers refuses the second answer), or another gold
                fits = [item for item in every[key] if gives(item)]
                if not fits:
                    raise _other_version(
                        path,
                        row,
                        "the gold answer",
                        row.get("answer"),
                        every[key],
                        texts.record_gold(by_id[every[key][0]]),
                        dataset,
                    )
            if image is not None and texts.record_image is not None:
                fits = [item for item in fits if texts.record_image(by_id[item]) == image] or fits
            chosen = fits[0]
            waiting[key] = [item for item in waiting[key] if item != chosen]
            shared += len(every[key]) > 1
            corrected += texts.record_gold(by_id[chosen]) != gold
            answers.append(Answer(chosen, row.get("prediction"), row.where, row.verdict))
    if shared:
        log.info(f"{path}: {shared} answers went to items that share their texts with others, in index order")
    if corrected:
        log.info(f"{path}: {corrected} rows give the label that the benchmark's records correct")
    return answers


def _for_kind(kind: str) -> str:
    return ", ".join(name for name, kinds in DATASETS.items() if kind in kinds)


def prediction_files(folder: Path) -> dict[Path, str]:
    """{file: dataset} of a folder's prediction files, told by their names (VLMEvalKit's other files there,
    `<model>_<dataset>_<suffix>.xlsx` and `.csv` scores, are not)."""
    found = {}
    for path in files_in(folder):
        if path.suffix in SUFFIXES:
            try:
                found[path] = dataset_name(path)
            except VlmgridError:
                continue
    return found


def _judged(path: Path, dataset: str, rows: list[Row]) -> list[Row]:
    """The rows with VLMEvalKit's verdicts, where its judge file lies beside the prediction file
    (`vlmevalkit_judge`); as they are where there is none."""
    judge = judge_file(path) if dataset in JUDGED else None
    if judge is None:
        return rows
    verdicts = read_verdicts(
        judge, read_rows(judge), {row.get("index"): row.get("prediction") for row in rows}
    )
    log.info(
        f"{path}: VLMEvalKit's verdicts read from {judge.name} ({sum(v.judge for v in verdicts.values())} of "
        f"{len(verdicts)} read by its judge)"
    )
    return [replace(row, verdict=verdicts[row.get("index")]) for row in rows]


def _read_file(path: Path, dataset: str, records: pd.DataFrame, kind: str) -> list[Answer]:
    rows = _judged(path, dataset, read_rows(path))
    if kind == "mmbench":
        answers = _mmbench(path, rows, records, dataset)
    else:
        answers = _by_texts(TEXTS[kind], path, rows, records, dataset)
    errors = {row.where: row.error for row in rows if row.error is not None}
    return [
        replace(answer, error=errors[answer.where]) if answer.where in errors else answer
        for answer in answers
    ]


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    if path.is_dir():
        found = prediction_files(path)
        files = {file: dataset for file, dataset in found.items() if kind in DATASETS[dataset]}
        for file, dataset in found.items():
            if file not in files:
                log.info(
                    f"{file}: skipped, VLMEvalKit's predictions for {dataset} do not answer {kind} benchmarks"
                )
        if not files:
            raise VlmgridError(
                f"{path} holds no VLMEvalKit prediction file for {kind} benchmarks (it holds "
                f"{', '.join(found.values()) or 'none'}); the datasets read for {kind} are "
                f"{_for_kind(kind)}, in files named <model>_<dataset>.xlsx"
            )
        return [
            answer for file, dataset in files.items() for answer in _read_file(file, dataset, records, kind)
        ]
    dataset = dataset_name(path)
    if kind not in DATASETS[dataset]:
        raise VlmgridError(
            f"{path} holds VLMEvalKit's predictions for {dataset}, whose rows answer {DATASETS[dataset][0]} "
            f"benchmarks, not {kind} ones (the datasets read for {kind} are {_for_kind(kind)}); import it "
            f"into a {DATASETS[dataset][0]} benchmark"
        )
    return _read_file(path, dataset, records, kind)


IMPORTER = Importer(
    "vlmevalkit",
    "VLMEvalKit's prediction files (<model>_<dataset>.xlsx, .tsv or .json: the dataset's columns and "
    "prediction)",
    tuple(dict.fromkeys(kind for kinds in DATASETS.values() for kind in kinds)),
    looks_like,
    read,
    tool="VLMEvalKit",
)
