"""The `local` source: a folder that already holds the raw files in a published layout (the hub copy's, or the
authors' own release), read in place; or, for a kind whose data is one file (MMBench's TSV), that file."""

from __future__ import annotations

import glob
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.sources.base import Fetched, Fixture, Source
from vlmgrid.errors import VlmgridError


def _check_local(kind: BenchmarkKind, source: dict, label: str) -> None:
    path = source.get("path")
    if not isinstance(path, str) or not path:
        raise VlmgridError(
            f"{label}: source key `path` is required for a local source; set it to the folder holding the "
            "raw files"
        )


def _fetch_local(
    kind: BenchmarkKind, source: dict, bench_dir: Path, label: str, fixture: Fixture | None
) -> Fetched:
    raw_dir = local_folder(source)
    if raw_dir.is_file() and _one_file(kind, raw_dir):
        return Fetched(raw_dir, external=True)
    if not raw_dir.is_dir():
        what = f"not one of the {kind.name} files it may name" if raw_dir.is_file() else "not a folder"
        raise VlmgridError(
            f"{source['path']}: {what} ({label}, local source `path`); point `path` at the folder holding "
            "the raw files"
        )
    return Fetched(raw_dir, external=True)


def _one_file(kind: BenchmarkKind, path: Path) -> bool:
    """Whether `path` is a whole copy of the kind's data in one file: the data file of one of its one-file
    layouts (MMBench's TSV), told by its name as the layouts tell it."""
    return kind.layouts is not None and any(layout.names_file(path) for layout in kind.layouts)


def local_folder(source: Mapping[str, Any]) -> Path:
    """The folder (or the one data file) a local source reads in place (its `path`, absolute)."""
    return Path(str(source["path"])).expanduser().resolve()


def local_raw_files(kind: BenchmarkKind, raw_dir: Path) -> list[Path]:
    """The files under raw_dir that the kind reads (its `raw_files` patterns, matched as the adapters match
    them), sorted; raw_dir itself when it is the kind's one data file; [] when it is neither. A kind with
    layouts reads one of them: where raw_dir holds exactly one, its files alone (else all the kind's, and
    prepare says which layouts it found). Prepare hashes exactly these into the manifest."""
    raw_dir = Path(raw_dir)
    if raw_dir.is_file():
        return [raw_dir] if _one_file(kind, raw_dir) else []
    if not raw_dir.is_dir():
        return []
    present = kind.layouts.present(raw_dir) if kind.layouts else []
    patterns = present[0].files if len(present) == 1 else kind.raw_files
    found: set[Path] = set()
    for pattern in patterns:
        found.update(
            Path(p) for p in glob.glob(glob.escape(str(raw_dir)) + "/" + pattern) if Path(p).is_file()
        )
    return sorted(found)


SOURCE = Source("local", ("path", "expected_items"), _check_local, _fetch_local)
