"""What every benchmark source shares: what a fetch returns, a source type's entry, the fixture a fixture
source is handed, and the clean-up of a download folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vlmgrid.benchmarks.kinds import BenchmarkKind

# The source types, in the order messages list them (the SOURCES registry holds one entry for each).
SOURCE_TYPES: tuple[str, ...] = ("fixture", "url", "hf_hub", "local")


class Fixture(Protocol):
    """What a fixture source needs of a kind's fixture (vlmgrid.fixtures.kinds.BenchmarkFixture): its writer
    and the settings a source may leave out. The prepare stage passes it in; benchmarks never import
    fixtures."""

    name: str
    defaults: Mapping[str, Any]

    def write(self, raw_dir: Path, settings: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class Fetched:
    raw_dir: Path
    external: bool  # True: raw_dir lies outside the benchmark folder (a local source)
    resolved_revision: str | None = None  # hf_hub: the commit the files were read at


@dataclass(frozen=True)
class Source:
    """One source type: its own keys, check(kind, source, label), and
    fetch(kind, source, bench_dir, label, fixture) -> Fetched (`fixture`: the kind's fixture for a fixture
    source, None for the others)."""

    name: str
    keys: tuple[str, ...]
    check: Callable[[BenchmarkKind, dict, str], None]
    fetch: Callable[[BenchmarkKind, dict, Path, str, Fixture | None], Fetched]


def prune(raw_dir: Path, keep: set[str]) -> None:
    """Remove files under raw_dir that are not in `keep` (relative posix paths), then empty folders."""
    if not raw_dir.is_dir():
        return
    for path in sorted(raw_dir.rglob("*"), reverse=True):
        rel = path.relative_to(raw_dir).as_posix()
        if path.is_file() or path.is_symlink():
            if rel not in keep:
                path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
