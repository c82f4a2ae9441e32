"""Canonical records (docs/formats.md) checked and typed before a prepare writes them: the columns every
record has, the checks an adapter's records must pass, and their exact Arrow types."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.errors import VlmgridError

CANONICAL = pa.schema(
    [
        ("id", pa.string()),
        ("image", pa.string()),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("answer_index", pa.int64()),
    ]
)


def records_table(
    records: pd.DataFrame, kind: BenchmarkKind, classes: list[str] | None, bench_dir: Path, label: str
) -> pa.Table:
    """Validate canonical records (formats.md) and give them their exact column types."""
    missing = [f.name for f in CANONICAL if f.name not in records.columns]
    if missing:
        raise VlmgridError(
            f"{label}: the {kind.name} adapter gave records without a `{missing[0]}` column; the adapter "
            "needs a fix"
        )
    records = records.reset_index(drop=True)
    if len(records) == 0:
        raise VlmgridError(f"{label}: the raw files hold no items; check the source")
    ids = records["id"].astype(str)
    duplicated = ids[ids.duplicated()]
    if len(duplicated):
        example = duplicated.iloc[0]
        raise VlmgridError(
            f"{label}: item id {example!r} appears {int((ids == example).sum())} times; ids must be unique "
            f"(the raw files repeat an item: re-download them, or fix the {kind.name} adapter)"
        )
    for row in records.itertuples(index=False):
        options, index, answer = list(row.options), int(row.answer_index), row.answer
        where = f"{label}: item {row.id!r}"
        if not isinstance(row.question, str):
            raise VlmgridError(
                f'{where} has question {row.question!r}, not text; the adapter needs a fix ("" when there '
                "is none)"
            )
        if kind.shape.needs_question and not row.question.strip():
            # the question is all there is to answer: a model asked nothing would be scored on noise
            raise VlmgridError(
                f"{where} has an empty question; the raw file is damaged (re-download it) or the adapter "
                "needs a fix"
            )
        labels = kind.shape.labels(options, index, classes, where)  # the shape's own checks
        if index != -1 and not 0 <= index < len(labels):
            raise VlmgridError(
                f"{where} has answer_index {index}, outside 0..{len(labels) - 1}; the raw file is damaged "
                "or the adapter needs a fix"
            )
        if index != -1 and labels[index] != answer:
            raise VlmgridError(
                f"{where}: answer {answer!r} is not option {index} ({labels[index]!r}); the adapter needs a "
                "fix"
            )
        if row.image is not None and not (bench_dir / row.image).is_file():
            raise VlmgridError(
                f"{bench_dir / row.image}: missing, though item {row.id!r} points at it; the adapter needs "
                "a fix"
            )
    arrays, fields = [], []
    for field in CANONICAL:
        column = records[field.name]
        if field.name == "options":
            values = [[str(o) for o in v] for v in column]
        elif field.name == "answer_index":
            values = [int(v) for v in column]
        else:
            values = [None if v is None or (isinstance(v, float) and pd.isna(v)) else str(v) for v in column]
        arrays.append(pa.array(values, type=field.type))
        fields.append(field)
    for name in records.columns:
        if name not in CANONICAL.names:
            array = pa.array(records[name].tolist())
            arrays.append(array)
            fields.append(pa.field(name, array.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
