"""A prepared benchmark folder (data/<bench>/, see docs/formats.md): its manifest, verify, load, the checks of
canonical records, and prepare.

prepare_benchmark is idempotent: a folder whose manifest matches the settings and whose files all match
their hashes is left untouched; a tampered folder is an error (never a silent re-download); changed settings
rebuild from scratch, and so does an edit of a local source's raw files (a new version of the user's data).
manifest.json is written last, so a present manifest means a complete prepare. A fixture source needs the
kind's fixture writer, which the caller passes in (`fixture=`; the prepare stage does, vlmgrid.stages.prepare).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import vlmgrid
from vlmgrid import fileio
from vlmgrid.benchmarks.catalog import BENCHMARKS
from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.rawio import IMAGE_SOURCES
from vlmgrid.benchmarks.sources import (Fixture, check_source, data_settings, expected_items, fetch_source,
                                        local_folder, local_raw_files)
from vlmgrid.errors import VlmgridError
from vlmgrid.prompts import DEFAULT_PROMPTS_DIR

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
RECORDS = "records.parquet"
CLASSES = "classes.json"
SYNONYMS = "synonyms.json"
DERIVED = ("images", RECORDS, CLASSES, SYNONYMS, IMAGE_SOURCES)
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


@dataclass
class Benchmark:
    name: str
    kind: BenchmarkKind
    root: Path
    records: pd.DataFrame
    classes: list[str] | None
    manifest: dict
    synonyms: dict[str, list[str]] | None = None  # classification: other names of a class (synonyms.json)
    # Where the protocols read their prompt sets (config data); set from the config when a job runs.
    prompts_dir: Path = DEFAULT_PROMPTS_DIR

    def image_path(self, image: str) -> Path:
        """The absolute path of a record's `image` (which is relative to the benchmark folder)."""
        return self.root / image


# ---------------------------------------------------------------------------------------------- manifest

def fingerprint(files: Mapping[str, str]) -> str:
    """sha256 over the sorted (path, sha256) pairs (as the canonical JSON [[path, sha256], ...])."""
    return fileio.sha256_json([[path, files[path]] for path in sorted(files)])


def _hash_tree(bench_dir: Path) -> dict[str, str]:
    files = {}
    for path in sorted(bench_dir.rglob("*")):
        rel = path.relative_to(bench_dir).as_posix()
        if path.is_file() and rel != MANIFEST:
            files[rel] = fileio.sha256_file(path)
    return files


def _resolve(bench_dir: Path, key: str) -> Path:
    """Manifest keys are paths relative to the benchmark folder, or absolute for a local source's raw files."""
    return Path(key) if Path(key).is_absolute() else bench_dir / key


def _read_manifest(bench_dir: Path) -> dict | None:
    path = bench_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise VlmgridError(f"{path}: not readable JSON ({exc}); delete {bench_dir} and run prepare again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise VlmgridError(f"{path}: has no `files` table, so it is not a vlmgrid manifest; delete {bench_dir} and run prepare again")
    return manifest


def _require_manifest(bench_dir: Path) -> dict:
    manifest = _read_manifest(bench_dir)
    if manifest is None:
        raise VlmgridError(
            f"{bench_dir / MANIFEST}: missing, so {bench_dir} is not a prepared benchmark (or its prepare was "
            f"interrupted); run `vlmgrid prepare` for it"
        )
    return manifest


def verify_benchmark(bench_dir: Path, full: bool = True, external: bool = True) -> None:
    """Check every file listed in the manifest: present (and, when `full`, matching its sha256).

    Without `full`, only records.parquet and classes.json are hashed (cheap) and the rest checked for presence.
    Without `external`, a local source's raw files (the absolute keys) are left out: only the folder's own.
    Raises VlmgridError naming the first missing or mismatching file.
    """
    bench_dir = Path(bench_dir)
    manifest = _require_manifest(bench_dir)
    files = manifest["files"]
    fix = f"restore it, or delete {bench_dir} and run prepare again"
    for key in sorted(files):
        if not external and Path(key).is_absolute():
            continue
        path = _resolve(bench_dir, key)
        if not path.is_file():
            raise VlmgridError(f"{path}: missing (it is listed in {bench_dir / MANIFEST}); {fix}")
        if full or key in (RECORDS, CLASSES, SYNONYMS):
            got = fileio.sha256_file(path)
            if got != files[key]:
                raise VlmgridError(f"{path}: does not match its manifest (sha256 {got}, expected {files[key]}); {fix}")
    if full and manifest.get("fingerprint") != fingerprint(files):
        raise VlmgridError(f"{bench_dir / MANIFEST}: its fingerprint does not match its file list (edited by hand?); delete {bench_dir} and run prepare again")


def _local_change(kind: BenchmarkKind, source: Mapping[str, Any], manifest: dict) -> str | None:
    """How a local source's raw files differ from those its manifest hashed, in words ("<file> changed", the
    first difference, and how many more there are); None when they are the same files with the same contents."""
    recorded = {key: sha for key, sha in manifest["files"].items() if Path(key).is_absolute()}
    current = {str(path.resolve()): path for path in local_raw_files(kind, local_folder(source))}
    changes = [f"{key} is gone" for key in sorted(set(recorded) - set(current))]
    changes += [f"{key} is new" for key in sorted(set(current) - set(recorded))]
    for key in sorted(set(recorded) & set(current)):
        if fileio.sha256_file(current[key]) != recorded[key]:
            changes.append(f"{key} changed")
    if not changes:
        return None
    more = len(changes) - 1
    return changes[0] + (f", and {more} more raw file{'s' if more > 1 else ''}" if more else "")


# ---------------------------------------------------------------------------------------------- records

def _records_table(records: pd.DataFrame, kind: BenchmarkKind, classes: list[str] | None, bench_dir: Path, label: str) -> pa.Table:
    """Validate canonical records (formats.md) and give them their exact column types."""
    missing = [f.name for f in CANONICAL if f.name not in records.columns]
    if missing:
        raise VlmgridError(f"{label}: the {kind.name} adapter gave records without a `{missing[0]}` column; the adapter needs a fix")
    records = records.reset_index(drop=True)
    if len(records) == 0:
        raise VlmgridError(f"{label}: the raw files hold no items; check the source")
    ids = records["id"].astype(str)
    duplicated = ids[ids.duplicated()]
    if len(duplicated):
        example = duplicated.iloc[0]
        raise VlmgridError(
            f"{label}: item id {example!r} appears {int((ids == example).sum())} times; ids must be unique (the raw "
            f"files repeat an item: re-download them, or fix the {kind.name} adapter)"
        )
    for n, row in enumerate(records.itertuples(index=False)):
        options, index, answer = list(row.options), int(row.answer_index), row.answer
        where = f"{label}: item {row.id!r}"
        if not isinstance(row.question, str):
            raise VlmgridError(f"{where} has question {row.question!r}, not text; the adapter needs a fix (\"\" when there is none)")
        if kind.shape.needs_question and not row.question.strip():
            # the question is all there is to answer: a model asked nothing would be scored on noise
            raise VlmgridError(f"{where} has an empty question; the raw file is damaged (re-download it) or the adapter needs a fix")
        labels = kind.shape.labels(options, index, classes, where)  # the shape's own checks
        if index != -1 and not 0 <= index < len(labels):
            raise VlmgridError(f"{where} has answer_index {index}, outside 0..{len(labels) - 1}; the raw file is damaged or the adapter needs a fix")
        if index != -1 and labels[index] != answer:
            raise VlmgridError(f"{where}: answer {answer!r} is not option {index} ({labels[index]!r}); the adapter needs a fix")
        if row.image is not None and not (bench_dir / row.image).is_file():
            raise VlmgridError(f"{bench_dir / row.image}: missing, though item {row.id!r} points at it; the adapter needs a fix")
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


# ---------------------------------------------------------------------------------------------- prepare

def _clear(bench_dir: Path, keep_raw: bool) -> None:
    """Remove what a prepare writes (never anything else: bench_dir may be a user's folder by mistake)."""
    (bench_dir / MANIFEST).unlink(missing_ok=True)
    for name in DERIVED + (() if keep_raw else ("raw",)):
        path = bench_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _check_count(n_items: Any, source: Mapping[str, Any], kind: BenchmarkKind, where: Path) -> None:
    expected = expected_items(kind, source)
    if expected is None or n_items == expected:
        return
    if source.get("expected_items"):
        raise VlmgridError(
            f"{where}: holds {n_items} {kind.name} items, but the source's `expected_items` is {expected}; the copy "
            f"is incomplete or another version: fix the source or re-download it, or correct `expected_items`"
        )
    raise VlmgridError(
        f"{where}: holds {n_items} {kind.name} items, but the published benchmark has {expected}; the copy is "
        f"incomplete or another version: fix the source or re-download it, or, for a published variant with "
        f"another count, set `expected_items` in the source"
    )


def _json_plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def prepare_benchmark(name: str, settings: Mapping[str, Any], bench_dir: Path, *, fixture: Fixture | None = None) -> dict:
    """Fetch, adapt, validate and hash one benchmark into bench_dir; returns its manifest. `fixture`: the kind's
    fixture (vlmgrid.fixtures.kinds.BENCHMARK_FIXTURES), needed by a fixture source only."""
    bench_dir = Path(bench_dir)
    label = f"benchmark {name}"
    if not isinstance(settings, Mapping) or "kind" not in settings:
        raise VlmgridError(f"{label}: `kind` is missing; set it to one of {', '.join(BENCHMARKS)}")
    kind = BENCHMARKS.get(settings["kind"])
    if "source" not in settings:
        raise VlmgridError(f"{label}: `source` is missing; add one (e.g. source: {{type: fixture}}, or {json.dumps(kind.default_source)})")
    source = _json_plain(check_source(kind, settings["source"], label, fixture))

    expected = expected_items(kind, source)
    old = _read_manifest(bench_dir)
    if (old is not None and isinstance(old.get("source"), dict) and old.get("kind") == kind.name
            and data_settings(old["source"]) == data_settings(source)):
        # A file of the folder itself (images, records) that no longer matches is an error, never rebuilt over.
        verify_benchmark(bench_dir, full=True, external=source["type"] != "local")
        changed = _local_change(kind, source, old) if source["type"] == "local" else None
        if changed is None:
            # The count is checked again: the expected count may have changed since (the source's or the kind's).
            _check_count(old.get("n_items"), source, kind, bench_dir)
            updated = {**old, "benchmark": name, "source": source, "expected_items": expected}
            if updated != old:  # same data under a new name or another expected count: only the manifest changes
                fileio.write_json(bench_dir / MANIFEST, updated)
            return updated
        # The user's own copy changed since it was prepared: a new version of the data, prepared from scratch.
        log.warning("%s: its local source changed since it was prepared (%s); preparing it again", label, changed)
    # Settings changed (or no complete prepare): start from scratch. Downloads left by an interrupted prepare
    # are kept: the url and hf_hub sources re-verify their checksums before reusing them. A local source never
    # writes raw/, and its `path` may point there: leave raw/ alone.
    keep_raw = source["type"] == "local" or (old is None and source["type"] in ("url", "hf_hub"))
    _clear(bench_dir, keep_raw=keep_raw)
    bench_dir.mkdir(parents=True, exist_ok=True)

    fetched = fetch_source(kind, source, bench_dir, label, fixture)
    adapted = kind.adapt(fetched.raw_dir, bench_dir)
    table = _records_table(adapted.records, kind, adapted.classes, bench_dir, label)
    _check_count(table.num_rows, source, kind, fetched.raw_dir)
    with fileio.atomic_path(bench_dir / RECORDS) as tmp:
        pq.write_table(table, tmp)
    if kind.shape.has_classes:
        fileio.write_json(bench_dir / CLASSES, list(adapted.classes or []))
        fileio.write_json(bench_dir / SYNONYMS, {name: list(alternatives) for name, alternatives in (adapted.synonyms or {}).items()})

    files = _hash_tree(bench_dir)
    if fetched.external:
        for path in local_raw_files(kind, fetched.raw_dir):
            files[str(path.resolve())] = fileio.sha256_file(path)
    files = dict(sorted(files.items()))
    manifest = {
        "benchmark": name,
        "kind": kind.name,
        "source": source,
        "resolved_revision": fetched.resolved_revision,
        "n_items": table.num_rows,
        # the count this copy was checked against (fixtures are stand-ins of any size)
        "expected_items": expected,
        "files": files,
        "fingerprint": fingerprint(files),
        "vlmgrid_version": vlmgrid.__version__,
    }
    fileio.write_json(bench_dir / MANIFEST, manifest)
    return manifest


def load_benchmark(bench_dir: Path) -> Benchmark:
    """A prepared benchmark: its records, classes and manifest (files are checked for presence, records hashed)."""
    bench_dir = Path(bench_dir)
    manifest = _require_manifest(bench_dir)
    kind = BENCHMARKS.get(manifest.get("kind", ""))
    verify_benchmark(bench_dir, full=False)
    records = pd.read_parquet(bench_dir / RECORDS)
    classes, synonyms = None, None
    if kind.shape.has_classes:
        classes = json.loads((bench_dir / CLASSES).read_text("utf-8"))
        if (bench_dir / SYNONYMS).is_file():  # absent in folders prepared before synonyms were kept
            synonyms = json.loads((bench_dir / SYNONYMS).read_text("utf-8"))
    return Benchmark(
        name=manifest.get("benchmark", bench_dir.name),
        kind=kind,
        root=bench_dir,
        records=records,
        classes=classes,
        manifest=manifest,
        synonyms=synonyms,
    )
