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
# Present while a prepare builds the folder (written before its first file, removed after the manifest): what a
# prepare left without a manifest is its own, and the next one may remove it.
UNFINISHED = ".prepare-unfinished"
# The files a prepare wrote into the folder, kept beside the manifest: Snakemake deletes a job's outputs (the
# manifest, the records) before it runs it again, and the next prepare must still know what it may remove.
WRITTEN = ".prepare-written.json"
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
        if path.is_file() and rel not in (MANIFEST, UNFINISHED, WRITTEN):
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

def _own_files(bench_dir: Path, manifest: dict) -> set[str]:
    """The files (relative posix paths) that the prepare of `manifest` wrote: its own files, less a local
    source's raw files lying in the folder (the user's copy, which prepare reads and never writes)."""
    source = manifest.get("source") if isinstance(manifest.get("source"), dict) else {}
    read = local_folder(source) if source.get("type") == "local" and source.get("path") else None
    written = set()
    for key in manifest["files"]:
        if Path(key).is_absolute():
            continue
        path = (bench_dir / key).resolve()
        if read is None or not (path == read or read in path.parents):
            written.add(key)
    return written


def _written(bench_dir: Path, old: dict | None) -> set[str]:
    """The files (relative posix paths) that earlier prepares wrote into bench_dir: the old manifest's own, and
    those its list of written files names (which outlives a manifest that Snakemake removed before a rerun)."""
    written = _own_files(bench_dir, old) if old is not None else set()
    try:
        listed = json.loads((bench_dir / WRITTEN).read_text("utf-8"))
    except (OSError, ValueError):  # none yet (or damaged): only the manifest says what prepare wrote
        listed = []
    home = bench_dir.resolve()
    for key in listed if isinstance(listed, list) else ():
        if isinstance(key, str) and not Path(key).is_absolute() and home in (home / key).resolve().parents:
            written.add(key)
    return written


def _clear(bench_dir: Path, old: dict | None, writes_raw: bool, keep_raw: bool, label: str) -> None:
    """Remove what an earlier prepare wrote into bench_dir (its images/, records, classes, and raw/ unless
    `keep_raw`), and never anything else: a file there that no prepare wrote (the user's own, or a copy a local
    source reads) is refused in one sentence, before anything is removed; so is one in raw/ when the source
    writes raw/ (`writes_raw`), whose clean-up would remove it."""
    names = DERIVED + (() if keep_raw else ("raw",))
    if not (bench_dir / UNFINISHED).is_file():  # else every file under those names is an unfinished prepare's
        written = _written(bench_dir, old)
        for name in DERIVED + (("raw",) if writes_raw else ()):
            path = bench_dir / name
            found = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() and not path.is_symlink() else [path]
            for file in found:
                rel = file.relative_to(bench_dir).as_posix()
                if (file.exists() or file.is_symlink()) and rel not in written:
                    raise VlmgridError(
                        f"{file}: {label} is prepared into {bench_dir}, and prepare did not write this file "
                        f"(no manifest there lists it), so it will not remove it; move it out of {bench_dir} (or "
                        f"point the source at its own folder elsewhere) and run prepare again"
                    )
    bench_dir.mkdir(parents=True, exist_ok=True)
    fileio.write_text(bench_dir / UNFINISHED, "")
    (bench_dir / MANIFEST).unlink(missing_ok=True)
    for name in names:
        path = bench_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _check_local_folder(source: Mapping[str, Any], bench_dir: Path, label: str) -> None:
    """Refuse a local source that shares the folder prepare writes into (but for its raw/, which prepare never
    writes for a local source): prepare would mix its images/ with the copy's, or read its own outputs as raw
    files."""
    read, home = local_folder(source), bench_dir.resolve()
    if read == home / "raw" or home / "raw" in read.parents:
        return
    if read == home:
        where = "is the folder"
    elif home in read.parents:
        where = "lies inside the folder"
    elif read in home.parents:
        where = "holds the folder"
    else:
        return
    raise VlmgridError(
        f"{source['path']}: the local source of {label} {where} {bench_dir} that prepare writes the benchmark into "
        f"(images/, records.parquet, manifest.json); move the copy out of it (or into {bench_dir / 'raw'}), or set "
        f"data_dir to another folder"
    )


def _local_state(kind: BenchmarkKind, raw_dir: Path) -> dict[str, tuple[int, ...]]:
    """Each raw file a local source reads (absolute path): its size, times, inode and device, which any write to
    it changes (ctime included, which no tool sets back)."""
    state = {}
    for path in local_raw_files(kind, raw_dir):
        st = path.stat()
        state[str(path.resolve())] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    return state


def _first_change(before: dict, after: dict) -> str:
    for key in sorted(set(before) | set(after)):
        if key not in after:
            return f"{key} is gone"
        if key not in before:
            return f"{key} is new"
        if before[key] != after[key]:
            return f"{key} changed"
    return ""


def _check_count(n_items: Any, source: Mapping[str, Any], kind: BenchmarkKind, where: Path) -> str | None:
    """Raise unless the copy holds the items it should; returns the published variant whose count it holds
    (kind.variants), None for the kind's own count (or the source's `expected_items`)."""
    expected = expected_items(kind, source)
    if expected is None or n_items == expected:
        return None
    if not source.get("expected_items"):
        for variant, count in kind.variants.items():
            if n_items == count:
                return variant
    if source.get("expected_items"):
        raise VlmgridError(
            f"{where}: holds {n_items} {kind.name} items, but the source's `expected_items` is {expected}; the copy "
            f"is incomplete or another version: fix the source or re-download it, or correct `expected_items`"
        )
    raise VlmgridError(
        f"{where}: holds {n_items} {kind.name} items, but the published benchmark has {expected}; the copy is "
        f"incomplete or another version: fix the source or re-download it, or, for a published variant with "
        f"another count, set `expected_items` in the source"
        + "".join(f" (known variant {name}: {count} items)" for name, count in kind.variants.items())
    )


def _counted(expected: int | None, variant: str | None, kind: BenchmarkKind) -> int | None:
    """The count a copy was checked against: its variant's, else the expected one."""
    return kind.variants[variant] if variant is not None else expected


def _json_plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def prepare_benchmark(name: str, settings: Mapping[str, Any], bench_dir: Path, *, fixture: Fixture | None = None,
                      grid_config: str | None = None) -> dict:
    """Fetch, adapt, validate and hash one benchmark into bench_dir; returns its manifest. `fixture`: the kind's
    fixture (vlmgrid.fixtures.kinds.BENCHMARK_FIXTURES), needed by a fixture source only. `grid_config`: the grid
    config it is prepared for, recorded in a new manifest (the prepare stage refuses to prepare over another
    grid config's data: vlmgrid.stages.plan.another_grids_data)."""
    bench_dir = Path(bench_dir)
    label = f"benchmark {name}"
    if not isinstance(settings, Mapping) or "kind" not in settings:
        raise VlmgridError(f"{label}: `kind` is missing; set it to one of {', '.join(BENCHMARKS)}")
    kind = BENCHMARKS.get(settings["kind"])
    if "source" not in settings:
        raise VlmgridError(f"{label}: `source` is missing; add one (e.g. source: {{type: fixture}}, or {json.dumps(kind.default_source)})")
    source = _json_plain(check_source(kind, settings["source"], label, fixture))
    if source["type"] == "local":
        _check_local_folder(source, bench_dir, label)

    expected = expected_items(kind, source)
    old = _read_manifest(bench_dir)
    if (old is not None and isinstance(old.get("source"), dict) and old.get("kind") == kind.name
            and data_settings(old["source"]) == data_settings(source)):
        # A file of the folder itself (images, records) that no longer matches is an error, never rebuilt over.
        verify_benchmark(bench_dir, full=True, external=source["type"] != "local")
        changed = _local_change(kind, source, old) if source["type"] == "local" else None
        if changed is None:
            # The count is checked again: the expected count may have changed since (the source's or the kind's).
            variant = _check_count(old.get("n_items"), source, kind, bench_dir)
            updated = {**old, "benchmark": name, "source": source, "expected_items": _counted(expected, variant, kind)}
            if variant is not None or "variant" in old:
                updated["variant"] = variant
            if updated != old:  # same data under a new name or another expected count: only the manifest changes
                fileio.write_json(bench_dir / MANIFEST, updated)
            return updated
        # The user's own copy changed since it was prepared: a new version of the data, prepared from scratch.
        log.warning("%s: its local source changed since it was prepared (%s); preparing it again", label, changed)
    # Settings changed (or no complete prepare): start from scratch. Downloads left by an interrupted prepare
    # are kept: the url and hf_hub sources re-verify their checksums before reusing them. A local source never
    # writes raw/, and its `path` may point there: leave raw/ alone.
    keep_raw = source["type"] == "local" or (old is None and source["type"] in ("url", "hf_hub"))
    _clear(bench_dir, old, source["type"] != "local", keep_raw, label)

    fetched = fetch_source(kind, source, bench_dir, label, fixture)
    if fetched.external:
        # The raw files are hashed before they are read and must be the same files after: the manifest then
        # hashes the bytes the records were built from, even if the user's copy is edited meanwhile.
        before = _local_state(kind, fetched.raw_dir)
        raw_hashes = {key: fileio.sha256_file(key) for key in before}
    adapted = kind.adapt(fetched.raw_dir, bench_dir)
    table = _records_table(adapted.records, kind, adapted.classes, bench_dir, label)
    variant = _check_count(table.num_rows, source, kind, fetched.raw_dir)
    with fileio.atomic_path(bench_dir / RECORDS) as tmp:
        pq.write_table(table, tmp)
    if kind.shape.has_classes:
        fileio.write_json(bench_dir / CLASSES, list(adapted.classes or []))
        fileio.write_json(bench_dir / SYNONYMS, {name: list(alternatives) for name, alternatives in (adapted.synonyms or {}).items()})

    files = _hash_tree(bench_dir)
    if fetched.external:  # every raw file the kind reads there (the files of the layout it holds)
        changed = _first_change(before, _local_state(kind, fetched.raw_dir))
        if changed:
            raise VlmgridError(
                f"{label}: its local source {source['path']} changed while prepare read it ({changed}), so the records "
                f"may mix two versions of it and none is recorded; run prepare again once nothing writes there"
            )
        files.update(raw_hashes)
    files = dict(sorted(files.items()))
    manifest = {
        "benchmark": name,
        "kind": kind.name,
        "source": source,
        # the grid config it was prepared for, kept while another grid reuses the same data
        **({"grid_config": grid_config} if grid_config is not None else {}),
        "resolved_revision": fetched.resolved_revision,
        "n_items": table.num_rows,
        # the count this copy was checked against (fixtures are stand-ins of any size)
        "expected_items": _counted(expected, variant, kind),
        "files": files,
        "fingerprint": fingerprint(files),
        "vlmgrid_version": vlmgrid.__version__,
    }
    if variant is not None:  # a published variant of the benchmark (kind.variants), known by its count
        manifest["variant"] = variant
    fileio.write_json(bench_dir / WRITTEN, sorted(_own_files(bench_dir, manifest)))
    fileio.write_json(bench_dir / MANIFEST, manifest)
    (bench_dir / UNFINISHED).unlink()
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
