"""The `fixture` source: the kind's fixture writes a small fake copy in the real raw format into raw/."""

from __future__ import annotations

from pathlib import Path

from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.sources.base import Fetched, Fixture, Source
from vlmgrid.errors import VlmgridError


def _check_fixture(kind: BenchmarkKind, source: dict, label: str) -> None:
    for key in ("seed", "size", "classes", "corrupt"):
        if key in source:
            value = source[key]
            minimum = 0 if key in ("seed", "corrupt") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise VlmgridError(
                    f"{label}: source key `{key}` must be an integer >= {minimum}, not {value!r}; fix the "
                    "config"
                )


def _fetch_fixture(
    kind: BenchmarkKind, source: dict, bench_dir: Path, label: str, fixture: Fixture | None
) -> Fetched:
    if fixture is None:
        raise VlmgridError(missing_fixture(kind, label))
    settings = {**fixture.defaults, **{k: v for k, v in source.items() if k != "type"}}
    raw_dir = bench_dir / "raw"
    fixture.write(raw_dir, settings)
    return Fetched(raw_dir, external=False)


def missing_fixture(kind: BenchmarkKind, label: str) -> str:
    return (
        f"{label}: a fixture source needs the {kind.name} fixture writer, and none was given; prepare "
        "fixture benchmarks through vlmgrid.stages.prepare (`vlmgrid prepare`), which hands it down"
    )


SOURCE = Source("fixture", ("seed", "size", "classes", "corrupt"), _check_fixture, _fetch_fixture)
