"""Read, check and write predictions files (docs/formats.md).

A file is the model's output only while its rows are the ones vlmgrid wrote: its metadata record the hash of
its rows (`rows_sha256`, `rows_digest`), which every reader checks, so a file edited after the run with its
metadata kept is refused (score, compare, diff, inspect, merge-shards), never taken for the model's. The
metadata also record the version of the code that wrote it (`code_version`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid.codeversion import running_version
from vlmgrid.dvc_outputs import or_pull
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import atomic_path

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("variant", pa.string()),
        ("raw", pa.string()),
        ("prediction", pa.string()),
        ("prediction_index", pa.int64()),
        ("scores", pa.list_(pa.float64())),
        ("topk", pa.list_(pa.int64())),
        ("error", pa.string()),
    ]
)
METADATA_KEY = b"vlmgrid"
ROWS_KEY = "rows_sha256"  # the metadata's hash of the rows (rows_digest)
ROWS_AT_ONCE = 8192  # rows turned into Python values at a time while hashing: bounds the memory it takes
# How to fix a predictions file the user made or named (`vlmgrid score --predictions`): inference did not
# write it.
GIVEN_HINT = (
    "write it again in the predictions format of docs/formats.md "
    "(`results/predictions/<model>/<bench>.parquet`: parquet, one row per item of this benchmark and variant)"
)


def rows_to_table(rows: Iterable[dict], metadata: dict | None = None) -> pa.Table:
    table = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    if metadata is not None:
        table = table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()})
    return table


def write_table(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def rows_digest(table: pa.Table) -> str:
    """The SHA-256 of a predictions table's rows, in order: each row a compact JSON array (ASCII) of its
    values in the columns' order of SCHEMA, followed by a line feed. The values are Python's (text, integers,
    floats as their shortest repr, lists, null), never Arrow's buffers, so the digest is the same whichever
    pyarrow or pandas wrote or read the file, and whatever its chunks."""
    digest = hashlib.sha256()
    rows = table.select(SCHEMA.names).cast(SCHEMA)
    for batch in rows.to_batches(max_chunksize=ROWS_AT_ONCE):
        columns = [column.to_pylist() for column in batch.columns]
        digest.update(
            "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in zip(*columns)).encode()
        )
    return digest.hexdigest()


def write_predictions(path: Path, table: pa.Table, metadata: dict) -> None:
    """The final write of a predictions (or shard) file, atomic; its metadata get the hash of its rows
    (`rows_sha256`) and the version of the code that wrote it (`code_version`)."""
    # One chunk: parquet's page boundaries follow the chunks, and the same rows must give the same bytes
    # whether they came from fresh parts, resumed parts or merged shards.
    table = table.combine_chunks()
    stamped = {**metadata, ROWS_KEY: rows_digest(table), "code_version": running_version()}
    write_table(
        path, table.replace_schema_metadata({METADATA_KEY: json.dumps(stamped, sort_keys=True).encode()})
    )


def read_table(path: Path, rebuild_hint: str, given: bool = False) -> pa.Table:
    """The predictions file's table. `given`: a file the user made or named (`vlmgrid score --predictions`),
    which is not deleted and rebuilt but fixed: the errors say what is wrong and `rebuild_hint` how to fix
    it."""
    if not Path(path).is_file():
        raise VlmgridError(
            f"predictions file {path} not found; {or_pull(path, 'check the path' if given else rebuild_hint)}"
        )
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        fix = rebuild_hint if given else f"delete it and {rebuild_hint}"
        raise VlmgridError(
            f"predictions file {path} is unreadable (truncated or not parquet: {exc}); {fix}"
        ) from None
    metadata = _parsed(table.schema.metadata)  # the read's own: the cast below drops it
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise VlmgridError(
            f"predictions file {path} lacks the column(s) {', '.join(missing)}; docs/formats.md lists the "
            "columns"
        )
    try:
        table = table.select(SCHEMA.names).cast(SCHEMA)
    except pa.ArrowException as exc:
        problem = str(exc)
        for field in SCHEMA:  # name the column that does not convert
            try:
                table.column(field.name).cast(field.type)
            except pa.ArrowException as column_exc:
                problem = (
                    f"column `{field.name}` is {table.schema.field(field.name).type}, not {field.type} "
                    f"({column_exc})"
                )
                break
        raise VlmgridError(
            f"predictions file {path}: {problem}; docs/formats.md gives each column's type"
        ) from None
    check_rows(table, metadata, path, rebuild_hint, given)
    return table


def check_rows(table: pa.Table, metadata: dict, path: Path, rebuild_hint: str, given: bool = False) -> None:
    """The rows are the ones vlmgrid wrote: the hash the metadata record is theirs. A file the user made or
    named (`given`) may record none (predictions made elsewhere); the grid's own file must."""
    recorded = metadata.get(ROWS_KEY)
    if recorded is None and given:
        return
    provenance = metadata.get("provenance")
    if isinstance(provenance, dict) and provenance.get("imported"):
        rebuild_hint = "import the answers again (`vlmgrid import-predictions ... --replace`)"
    if recorded is None:
        raise VlmgridError(
            f"predictions file {path} records no hash of its rows (`{ROWS_KEY}`: it was written by hand or "
            f"by an older vlmgrid), so they cannot be told from the ones the run wrote; {rebuild_hint}"
        )
    if recorded != rows_digest(table):
        fix = (
            "restore the file, or remove its vlmgrid metadata to take it as predictions made elsewhere "
            "(docs/formats.md)"
            if given
            else f"{rebuild_hint}, or restore the file"
        )
        raise VlmgridError(
            f"predictions file {path}: its rows are not the ones vlmgrid wrote (edited after the run); {fix}"
        )


def read_metadata(path: Path) -> dict:
    """What inference recorded in the file (model settings, protocol, strategy, provenance); {} if none."""
    try:
        return _parsed(pq.read_schema(path).metadata)
    except (pa.ArrowException, OSError):
        return {}


def _parsed(schema_metadata: dict | None) -> dict:
    """vlmgrid's record among a parquet schema's metadata; {} if none."""
    try:
        return json.loads((schema_metadata or {}).get(METADATA_KEY, b"{}"))
    except ValueError:
        return {}


def recorded_not_applicable(metadata: dict) -> str | None:
    """The recorded reason when the file is the record of a cell that cannot run; None for real
    predictions."""
    if metadata.get("applicable", True) is False:
        return str(metadata.get("reason") or "the model cannot run this benchmark")
    return None


def read_predictions(
    path: Path, rebuild_hint: str = "run inference again", given: bool = False
) -> pd.DataFrame:
    return read_table(path, rebuild_hint, given).to_pandas()


def check_data_fingerprint(metadata: dict, fingerprint: str | None, path: Path, rebuild_hint: str) -> None:
    """Predictions made from other data (same ids, other items: a re-prepared benchmark) are refused; a file
    made elsewhere, which records no fingerprint, is taken as it is."""
    recorded = metadata.get("data_fingerprint")
    if recorded and fingerprint and recorded != fingerprint:
        raise VlmgridError(
            f"predictions file {path} was made from data with fingerprint {recorded[:12]}, but the "
            f"benchmark's manifest now says {fingerprint[:12]} (it was prepared again); {rebuild_hint}"
        )


def answered_records(
    metadata: dict, predictions: pd.DataFrame, records: pd.DataFrame, path: Path
) -> tuple[pd.DataFrame, dict | None]:
    """The records a predictions file is scored on, and its coverage ({answered, total}; None when complete).

    Every record, unless the metadata record a `coverage`: a file imported from a format whose published files
    answer a subset by construction (MME's eval tool); then the records it answers, its unanswered items
    absent rather than wrong. A file without that record (inference's own) must answer every item.
    """
    coverage = metadata.get("coverage")
    if coverage is None:
        return records, None
    answered = set(predictions["id"].astype(str))
    subset = records[records["id"].astype(str).isin(answered)]
    if (
        not isinstance(coverage, dict)
        or coverage.get("total") != len(records)
        or coverage.get("answered") != len(answered)
        or not len(subset)
    ):
        raise VlmgridError(
            f"predictions file {path} records the coverage {coverage!r}, but it answers {len(answered)} of "
            f"the {len(records)} items of the benchmark; import the file again"
        )
    return subset.reset_index(drop=True), {"answered": int(len(subset)), "total": int(len(records))}


def check_against_records(
    predictions: pd.DataFrame,
    records: pd.DataFrame,
    path: Path,
    given: bool = False,
    classes: int | None = None,
) -> None:
    """Every record id exactly once per variant, no id that the benchmark does not have, and no option index
    that the item does not have (it would count as a valid wrong answer instead of a format error): an
    item's options, or for a classification item, which has none, the benchmark's `classes`.
    `given`: a file the user made or named, which the errors ask to fix, not to rebuild by inference."""
    rerun = GIVEN_HINT if given else "rerun inference"
    expected = set(records["id"])
    unknown = set(predictions["id"]) - expected
    if unknown:
        example = sorted(unknown)[0]
        raise VlmgridError(
            f"predictions file {path} has {len(unknown)} id(s) that the benchmark does not have, "
            f'e.g. "{example}"; it was made for other data: {rerun}'
        )
    for variant, group in predictions.groupby("variant", sort=False):
        duplicated = group["id"][group["id"].duplicated()]
        if len(duplicated):
            raise VlmgridError(
                f'predictions file {path} has id "{duplicated.iloc[0]}" more than once in variant '
                f'"{variant}"; each item must appear once per variant'
            )
        missing = expected - set(group["id"])
        if missing:
            raise VlmgridError(
                f'predictions file {path} misses {len(missing)} item(s) in variant "{variant}", e.g. '
                f'"{sorted(missing)[0]}" (missing rows are never scored as if absent); {rerun}'
            )
    if len(predictions) and "options" in records.columns and "prediction_index" in predictions.columns:
        options = predictions["id"].map(records.set_index("id")["options"].map(len)).astype("int64")
        n_options = options.where(options > 0, classes or 0)  # a classification item: the classes
        index = pd.to_numeric(predictions["prediction_index"]).fillna(-1)
        bad = (n_options > 0) & ((index < -1) | (index >= n_options))
        if bad.any():
            row = predictions[bad].iloc[0]
            listed = "options" if options[bad].iloc[0] else "classes"
            raise VlmgridError(
                f'predictions file {path} gives item "{row["id"]}" (variant "{row["variant"]}") '
                f"prediction_index {row['prediction_index']}, but it has {int(n_options[bad].iloc[0])} "
                f"{listed}; the index is 0-based (-1 for none): fix the file"
                f"{'' if given else ' or rerun inference'}"
            )
