"""Read, check and write predictions files (docs/formats.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import atomic_path

SCHEMA = pa.schema([
    ("id", pa.string()),
    ("variant", pa.string()),
    ("raw", pa.string()),
    ("prediction", pa.string()),
    ("prediction_index", pa.int64()),
    ("scores", pa.list_(pa.float64())),
    ("topk", pa.list_(pa.int64())),
    ("error", pa.string()),
])
METADATA_KEY = b"vlmgrid"


def rows_to_table(rows: Iterable[dict], metadata: dict | None = None) -> pa.Table:
    table = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    if metadata is not None:
        table = table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()})
    return table


def write_table(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_table(path: Path, rebuild_hint: str) -> pa.Table:
    if not Path(path).is_file():
        raise VlmgridError(f"predictions file {path} not found; {rebuild_hint}")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise VlmgridError(
            f"predictions file {path} is unreadable (truncated or not parquet: {exc}); delete it and {rebuild_hint}"
        ) from None
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise VlmgridError(
            f"predictions file {path} lacks the column(s) {', '.join(missing)}; docs/formats.md lists the columns"
        )
    return table.select(SCHEMA.names).cast(SCHEMA)


def read_metadata(path: Path) -> dict:
    """What inference recorded in the file (model settings, protocol, strategy, provenance); {} if none."""
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError):
        return {}
    try:
        return json.loads(metadata.get(METADATA_KEY, b"{}"))
    except ValueError:
        return {}


def not_applicable_reason(metadata: dict) -> str | None:
    """The recorded reason when the file is the record of a cell that cannot run; None for real predictions."""
    if metadata.get("applicable", True) is False:
        return str(metadata.get("reason") or "the model cannot run this benchmark")
    return None


def read_predictions(path: Path, rebuild_hint: str = "run inference again") -> pd.DataFrame:
    return read_table(path, rebuild_hint).to_pandas()


def check_data_fingerprint(metadata: dict, fingerprint: str | None, path: Path, rebuild_hint: str) -> None:
    """Predictions made from other data (same ids, other items: a re-prepared benchmark) are refused; a file
    made elsewhere, which records no fingerprint, is taken as it is."""
    recorded = metadata.get("data_fingerprint")
    if recorded and fingerprint and recorded != fingerprint:
        raise VlmgridError(
            f"predictions file {path} was made from data with fingerprint {recorded[:12]}, but the benchmark's "
            f"manifest now says {fingerprint[:12]} (it was prepared again); {rebuild_hint}"
        )


def check_against_records(predictions: pd.DataFrame, records: pd.DataFrame, path: Path) -> None:
    """Every record id exactly once per variant, no id that the benchmark does not have, and no option index
    that the item does not have (it would count as a valid wrong answer instead of a format error)."""
    expected = set(records["id"])
    unknown = set(predictions["id"]) - expected
    if unknown:
        example = sorted(unknown)[0]
        raise VlmgridError(
            f'predictions file {path} has {len(unknown)} id(s) that the benchmark does not have, e.g. "{example}"; '
            f"it was made for other data: rerun inference"
        )
    for variant, group in predictions.groupby("variant", sort=False):
        duplicated = group["id"][group["id"].duplicated()]
        if len(duplicated):
            raise VlmgridError(
                f'predictions file {path} has id "{duplicated.iloc[0]}" more than once in variant "{variant}"; '
                f"each item must appear once per variant"
            )
        missing = expected - set(group["id"])
        if missing:
            raise VlmgridError(
                f'predictions file {path} misses {len(missing)} item(s) in variant "{variant}", e.g. '
                f'"{sorted(missing)[0]}"; rerun inference (missing rows are never scored as if absent)'
            )
    if len(predictions) and "options" in records.columns and "prediction_index" in predictions.columns:
        n_options = predictions["id"].map(records.set_index("id")["options"].map(len)).astype("int64")
        index = pd.to_numeric(predictions["prediction_index"]).fillna(-1)
        bad = (n_options > 0) & ((index < -1) | (index >= n_options))
        if bad.any():
            row = predictions[bad].iloc[0]
            raise VlmgridError(
                f'predictions file {path} gives item "{row["id"]}" (variant "{row["variant"]}") prediction_index '
                f'{row["prediction_index"]}, but it has {int(n_options[bad].iloc[0])} options; the index is 0-based '
                f"(-1 for none): fix the file or rerun inference"
            )
