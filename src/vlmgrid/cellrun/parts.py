"""The parts of an unfinished inference job: one parquet file each, written atomically as it is done, with the
model run that made it; kept until the job's predictions file is written.

The store is valid only for the job whose fingerprint it records (vlmgrid.cellrun.job): a store of other
inputs is discarded when the job opens it. Besides the parts it keeps what the run learned on the way: an
`answer_mode: auto` fallback and the batch check's result, so a resumed job reuses both.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid.fileio import write_json
from vlmgrid.predictions import SCHEMA, rows_digest, write_table

log = logging.getLogger(__name__)

# the schema metadata key of a part file holding the run that made it (its strategy and provenance)
PART_RUN_KEY = b"vlmgrid.part.run"
# ... and the one holding the SHA-256 of its rows as written (vlmgrid.predictions.rows_digest)
PART_ROWS_KEY = b"vlmgrid.part.rows_sha256"


@dataclass
class PartStore:
    """The parts of one unfinished job, valid only for the inputs named by `fingerprint`."""

    directory: Path
    fingerprint: str

    def open(self) -> None:
        meta_path = self.directory / "meta.json"
        if self.directory.exists():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                meta = {}
            if meta.get("fingerprint") != self.fingerprint:
                log.info(f"discarding parts in {self.directory}: they were made with other settings or data")
                shutil.rmtree(self.directory)
        if not self.directory.exists():
            self.directory.mkdir(parents=True)
            write_json(meta_path, {"fingerprint": self.fingerprint})

    def path(self, index: int) -> Path:
        return self.directory / f"part-{index:06d}.parquet"

    def load(self, index: int, expected_rows_min: int) -> tuple[pa.Table, dict] | None:
        """The part's table and the run that made it, or None when the part is absent or unreadable (a torn
        write is redone, not trusted), was saved without its run, or holds other rows than were written (an
        edited part is redone, never merged as the model's answers)."""
        path = self.path(index)
        if not path.is_file():
            return None
        try:
            table = pq.read_table(path)
            recorded = table.schema.metadata or {}
            table = table.replace_schema_metadata(None).cast(SCHEMA)
        except (pa.ArrowException, OSError, ValueError):
            log.info(f"part {path} is unreadable; redoing it")
            path.unlink()
            return None
        try:
            made_by = json.loads(recorded[PART_RUN_KEY])
        except (KeyError, ValueError):
            log.info(f"part {path} does not say which model run made it; redoing it")
            path.unlink()
            return None
        if table.num_rows < expected_rows_min:
            log.info(f"part {path} is incomplete; redoing it")
            path.unlink()
            return None
        if recorded.get(PART_ROWS_KEY, b"").decode() != rows_digest(table):
            log.warning(f"part {path} holds other rows than the model wrote (edited since); redoing it")
            path.unlink()
            return None
        return table, made_by

    def save(self, index: int, table: pa.Table, made_by: dict) -> None:
        """`made_by`: the strategy and provenance of the model run that answered the part, saved with it."""
        metadata = {
            PART_RUN_KEY: json.dumps(made_by, sort_keys=True).encode(),
            PART_ROWS_KEY: rows_digest(table).encode(),
        }
        write_table(self.path(index), table.replace_schema_metadata(metadata))

    def save_fallback(self, note: str) -> None:
        write_json(self.directory / "fallback.json", {"fallback": note})

    def fallback(self) -> str | None:
        path = self.directory / "fallback.json"
        return json.loads(path.read_text(encoding="utf-8"))["fallback"] if path.is_file() else None

    def save_invariance(self, items: int, result: dict) -> None:
        """The batch check's result, kept so that a job resumed after it reuses it (`items`: the sample size
        it was asked for; another size checks again)."""
        write_json(self.directory / "invariance.json", {"items": items, "result": result})

    def invariance(self, items: int) -> dict | None:
        path = self.directory / "invariance.json"
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return saved.get("result") if saved.get("items") == items else None

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
