"""A benchmark kind's raw fixture files as a source of another type would serve them (a local folder, a URL,
a hub repo), for the tests of benchmark sources and of a grid that uses them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vlmgrid.benchmarks import BENCHMARKS
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES


def raw_fixture(kind: str, folder: Path, **settings) -> Path:
    """A kind's fixture raw files written into `folder` (as a user's own copy would be laid out)."""
    fixture = BENCHMARK_FIXTURES.get(kind)
    fixture.write(folder, {**fixture.defaults, **settings})
    return folder


def with_kind(monkeypatch, kind: str, **changes):
    """Replace a registered kind for one test (e.g. expected_count to match a fixture-sized copy)."""
    new = dataclasses.replace(BENCHMARKS.get(kind), **changes)
    monkeypatch.setitem(BENCHMARKS._items, kind, new)
    return new
