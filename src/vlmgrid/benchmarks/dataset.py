"""A prepared benchmark folder (data/<bench>/, see docs/formats.md): its manifest, verify, load, and prepare.
The folder's file names and its clean-up are vlmgrid.benchmarks.folder's, the checks of canonical records
vlmgrid.benchmarks.canonical's, a local source's copy vlmgrid.benchmarks.local_copy's.

prepare_benchmark is idempotent: a folder whose manifest matches the settings and whose files all match
their hashes is left untouched; a tampered folder is an error (never a silent re-download); changed settings
rebuild from scratch, and so does an edit of a local source's raw files (a new version of the user's data).
manifest.json is written last, so a present manifest means a complete prepare. A fixture source needs the
kind's fixture writer, which the caller passes in (`fixture=`; the prepare stage does,
vlmgrid.stages.prepare).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

import vlmgrid
from vlmgrid import fileio
from vlmgrid.benchmarks.canonical import records_table
from vlmgrid.benchmarks.catalog import BENCHMARKS
from vlmgrid.benchmarks.folder import (
    CLASSES,
    MANIFEST,
    RECORDS,
    SYNONYMS,
    UNFINISHED,
    WRITTEN,
    clear,
    own_files,
)
from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.local_copy import check_local_folder, first_change, local_change, local_state
from vlmgrid.benchmarks.sources import Fixture, check_source, data_settings, expected_items, fetch_source
from vlmgrid.dvc_outputs import or_pull
from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import content_hash
from vlmgrid.prompts import DEFAULT_PROMPTS_DIR

log = logging.getLogger(__name__)


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
    """Manifest keys are paths relative to the benchmark folder, or absolute for a local source's raw
    files."""
    return Path(key) if Path(key).is_absolute() else bench_dir / key


def _read_manifest(bench_dir: Path) -> dict | None:
    path = bench_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise VlmgridError(
            f"{path}: not readable JSON ({exc}); delete {bench_dir} and run prepare again"
        ) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise VlmgridError(
            f"{path}: has no `files` table, so it is not a vlmgrid manifest; delete {bench_dir} and run "
            "prepare again"
        )
    return manifest


def _require_manifest(bench_dir: Path) -> dict:
    manifest = _read_manifest(bench_dir)
    if manifest is None:
        raise VlmgridError(
            f"{bench_dir / MANIFEST}: missing, so {bench_dir} is not a prepared benchmark (or its prepare "
            f"was interrupted); {or_pull(bench_dir, 'run `vlmgrid prepare` for it')}"
        )
    return manifest


def verify_benchmark(bench_dir: Path, full: bool = True, external: bool = True) -> None:
    """Check every file listed in the manifest: present (and, when `full`, matching its sha256).

    Without `full`, only records.parquet and classes.json are hashed (cheap) and the rest checked for
    presence. Without `external`, a local source's raw files (the absolute keys) are left out: only the
    folder's own. Raises VlmgridError naming the first missing or mismatching file.
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
            raise VlmgridError(
                f"{path}: missing (it is listed in {bench_dir / MANIFEST}); {or_pull(path, fix)}"
            )
        if full or key in (RECORDS, CLASSES, SYNONYMS):
            got = content_hash(path)
            if got != files[key]:
                raise VlmgridError(
                    f"{path}: does not match its manifest (sha256 {got}, expected {files[key]}); {fix}"
                )
    if full and manifest.get("fingerprint") != fingerprint(files):
        raise VlmgridError(
            f"{bench_dir / MANIFEST}: its fingerprint does not match its file list (edited by hand?); "
            f"delete {bench_dir} and run prepare again"
        )


# ---------------------------------------------------------------------------------------------- prepare


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
            f"{where}: holds {n_items} {kind.name} items, but the source's `expected_items` is {expected}; "
            "the copy is incomplete or another version: fix the source or re-download it, or correct "
            "`expected_items`"
        )
    raise VlmgridError(
        f"{where}: holds {n_items} {kind.name} items, but the published benchmark has {expected}; the copy "
        "is incomplete or another version: fix the source or re-download it, or, for a published variant "
        "with another count, set `expected_items` in the source"
        + "".join(f" (known variant {name}: {count} items)" for name, count in kind.variants.items())
    )


def _counted(expected: int | None, variant: str | None, kind: BenchmarkKind) -> int | None:
    """The count a copy was checked against: its variant's, else the expected one."""
    return kind.variants[variant] if variant is not None else expected


def _json_plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def prepare_benchmark(
    name: str,
    settings: Mapping[str, Any],
    bench_dir: Path,
    *,
    fixture: Fixture | None = None,
    grid_config: str | None = None,
) -> dict:
    """Fetch, adapt, validate and hash one benchmark into bench_dir; returns its manifest. `fixture`: the
    kind's fixture (vlmgrid.fixtures.kinds.BENCHMARK_FIXTURES), needed by a fixture source only.
    `grid_config`: the grid config it is prepared for, recorded in a new manifest (the prepare stage refuses
    to prepare over another grid config's data: vlmgrid.stages.plan.another_grids_data)."""
    bench_dir = Path(bench_dir)
    label = f"benchmark {name}"
    if not isinstance(settings, Mapping) or "kind" not in settings:
        raise VlmgridError(f"{label}: `kind` is missing; set it to one of {', '.join(BENCHMARKS)}")
    kind = BENCHMARKS.get(settings["kind"])
    if "source" not in settings:
        raise VlmgridError(
            f"{label}: `source` is missing; add one (e.g. source: {{type: fixture}}, or "
            f"{json.dumps(kind.default_source)})"
        )
    source = _json_plain(check_source(kind, settings["source"], label, fixture))
    if source["type"] == "local":
        check_local_folder(source, bench_dir, label)

    expected = expected_items(kind, source)
    old = _read_manifest(bench_dir)
    if (
        old is not None
        and isinstance(old.get("source"), dict)
        and old.get("kind") == kind.name
        and data_settings(old["source"]) == data_settings(source)
    ):
        # A file of the folder itself (images, records) that no longer matches is an error, never rebuilt
        # over.
        verify_benchmark(bench_dir, full=True, external=source["type"] != "local")
        changed = local_change(kind, source, old) if source["type"] == "local" else None
        if changed is None:
            # The count is checked again: the expected count may have changed since (the source's or the
            # kind's).
            variant = _check_count(old.get("n_items"), source, kind, bench_dir)
            updated = {
                **old,
                "benchmark": name,
                "source": source,
                "expected_items": _counted(expected, variant, kind),
            }
            if variant is not None or "variant" in old:
                updated["variant"] = variant
            if (
                updated != old
            ):  # same data under a new name or another expected count: only the manifest changes
                fileio.write_json(bench_dir / MANIFEST, updated)
            return updated
        # The user's own copy changed since it was prepared: a new version of the data, prepared from scratch.
        log.warning(
            "%s: its local source changed since it was prepared (%s); preparing it again", label, changed
        )
    # Settings changed (or no complete prepare): start from scratch. Downloads left by an interrupted prepare
    # are kept: the url and hf_hub sources re-verify their checksums before reusing them. A local source never
    # writes raw/, and its `path` may point there: leave raw/ alone.
    keep_raw = source["type"] == "local" or (old is None and source["type"] in ("url", "hf_hub"))
    clear(bench_dir, old, source["type"] != "local", keep_raw, label)

    fetched = fetch_source(kind, source, bench_dir, label, fixture)
    if fetched.external:
        # The raw files are hashed before they are read and must be the same files after: the manifest then
        # hashes the bytes the records were built from, even if the user's copy is edited meanwhile.
        before = local_state(kind, fetched.raw_dir)
        raw_hashes = {key: content_hash(Path(key)) for key in before}
    adapted = kind.adapt(fetched.raw_dir, bench_dir)
    table = records_table(adapted.records, kind, adapted.classes, bench_dir, label)
    variant = _check_count(table.num_rows, source, kind, fetched.raw_dir)
    with fileio.atomic_path(bench_dir / RECORDS) as tmp:
        pq.write_table(table, tmp)
    if kind.shape.has_classes:
        fileio.write_json(bench_dir / CLASSES, list(adapted.classes or []))
        fileio.write_json(
            bench_dir / SYNONYMS,
            {name: list(alternatives) for name, alternatives in (adapted.synonyms or {}).items()},
        )

    files = _hash_tree(bench_dir)
    if fetched.external:  # every raw file the kind reads there (the files of the layout it holds)
        changed = first_change(before, local_state(kind, fetched.raw_dir))
        if changed:
            raise VlmgridError(
                f"{label}: its local source {source['path']} changed while prepare read it ({changed}), so "
                "the records may mix two versions of it and none is recorded; run prepare again once "
                "nothing writes there"
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
    fileio.write_json(bench_dir / WRITTEN, sorted(own_files(bench_dir, manifest)))
    fileio.write_json(bench_dir / MANIFEST, manifest)
    (bench_dir / UNFINISHED).unlink()
    return manifest


def load_benchmark(bench_dir: Path) -> Benchmark:
    """A prepared benchmark: its records, classes and manifest (files are checked for presence, records
    hashed)."""
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
