"""The `local` source: a folder that already holds the raw files in the published layout, read in place."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, Mapping

from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.layouts import present_layouts
from vlmgrid.benchmarks.sources.base import Fetched, Fixture, Source
from vlmgrid.errors import VlmgridError


def _check_local(kind: BenchmarkKind, source: dict, label: str) -> None:
    path = source.get("path")
    if not isinstance(path, str) or not path:
        raise VlmgridError(f"{label}: source key `path` is required for a local source; set it to the folder holding the raw files")


def _fetch_local(kind: BenchmarkKind, source: dict, bench_dir: Path, label: str, fixture: Fixture | None) -> Fetched:
    raw_dir = local_folder(source)
    if not raw_dir.is_dir():
        raise VlmgridError(f"{source['path']}: not a folder ({label}, local source `path`); point `path` at the folder holding the raw files")
    return Fetched(raw_dir, external=True)


def local_folder(source: Mapping[str, Any]) -> Path:
    """The folder a local source reads in place (its `path`, absolute)."""
    return Path(str(source["path"])).expanduser().resolve()


def local_raw_files(kind: BenchmarkKind, raw_dir: Path) -> list[Path]:
    """The files under raw_dir that the kind reads (its `raw_files` patterns, matched as the adapters match
    them), sorted; [] when raw_dir is not a folder. Prepare hashes exactly these into the manifest. A kind with
    layouts reads one of them: where raw_dir holds exactly one, its patterns alone (else all, and prepare
    says which files are missing or too many)."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        return []
    present = present_layouts(kind.layouts, raw_dir) if kind.layouts else []
    patterns = present[0].raw_files if len(present) == 1 else kind.raw_files
    found: set[Path] = set()
    for pattern in patterns:
        found.update(Path(p) for p in glob.glob(glob.escape(str(raw_dir)) + "/" + pattern) if Path(p).is_file())
    return sorted(found)


SOURCE = Source("local", ("path", "expected_items"), _check_local, _fetch_local)
