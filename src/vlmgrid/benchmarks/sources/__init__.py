"""Where a benchmark's raw files come from: a fixture generator, URLs with checksums, the HF hub at a pinned
revision, or a local folder that already holds them in the published layout.

Source settings (the `source:` entry of a benchmark in the config), by type:
  fixture: seed (int, 0), size (int, per class / per split / total), classes (int, kinds with classes only),
           corrupt (int, 0: images written deliberately unreadable), and the kind's own fixture settings
           (the keys of its fixture's defaults: cvqa's hidden_labels); the kind's fixture (a writer from
           vlmgrid.fixtures, which the prepare stage passes in) writes the files
  url:     files (optional list of {url, md5 or sha256, name}; default: the kind's published files)
  hf_hub:  revision (required: a commit, or a branch or tag, which prepare resolves to the commit it reads and
           records in the manifest), repo (default: the kind's repo), config, split (only the kind's own
           config/split are supported; they may be written out for clarity)
  local:   path (a folder holding the raw files in one of the kind's layouts, the hub copy's or the authors'
           release (benchmarks/layouts.py), or a kind's one data file (MMBench's TSV); read in place, hashed
           into the manifest by absolute path; an edited, added or removed raw file is a new version of the
           data, which prepare prepares again)
Every source but the fixture may also say `expected_items`: the item count of the copy it points at, for a
published variant of the benchmark (LLaVA's POPE label files hold 8,910 questions, POPE's own 9,000); without
it prepare checks the kind's published count.

One module per source type (fixture.py, url.py, hub.py, local.py), each holding its `SOURCE`; this package
lists them in `SOURCES` and checks and fetches through them. (Source stamps, the workflows' view of a local
source's files, are in benchmarks/stamps.py.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.sources import fixture as fixture_source
from vlmgrid.benchmarks.sources import hub, local, url
from vlmgrid.benchmarks.sources.base import SOURCE_TYPES, Fetched, Fixture, Source
from vlmgrid.benchmarks.sources.local import local_folder, local_raw_files
from vlmgrid.errors import VlmgridError
from vlmgrid.registry import Registry, closest

SOURCES: Registry[Source] = Registry(
    "source type", [fixture_source.SOURCE, url.SOURCE, hub.SOURCE, local.SOURCE]
)

__all__ = [
    "SOURCES",
    "SOURCE_TYPES",
    "Fetched",
    "Fixture",
    "Source",
    "check_source",
    "data_settings",
    "expected_items",
    "fetch_source",
    "local_folder",
    "local_raw_files",
]


def check_source(kind: BenchmarkKind, source: Any, label: str, fixture: Fixture | None = None) -> dict:
    """Validate a source entry (type, keys, values); returns it as a plain dict. A fixture source needs the
    kind's `fixture` (its defaults name the keys it may set)."""
    if not isinstance(source, Mapping):
        raise VlmgridError(
            f"{label}: `source` must be a mapping with a `type` ({', '.join(SOURCE_TYPES)}); fix the config"
        )
    source = dict(source)
    kind_of_source = source.get("type")
    if kind_of_source not in SOURCES:
        raise VlmgridError(
            f"{label}: source type {kind_of_source!r} is unknown{closest(str(kind_of_source), SOURCES)}; "
            f"use one of {', '.join(SOURCE_TYPES)}"
        )
    spec = SOURCES.get(kind_of_source)
    keys = ("type",) + spec.keys
    if kind_of_source == "fixture":  # a kind's own fixture settings (CVQA's hidden_labels) are valid too
        if fixture is None:
            raise VlmgridError(fixture_source.missing_fixture(kind, label))
        keys += tuple(key for key in fixture.defaults if key not in keys)
    if kind_of_source == "fixture" and not kind.shape.has_classes:
        keys = tuple(k for k in keys if k != "classes")
    for key in source:
        if key not in keys:
            raise VlmgridError(
                f"{label}: source key `{key}` is not valid for a {kind_of_source} source of a {kind.name} "
                f"benchmark{closest(str(key), keys)}; valid keys: {', '.join(keys)}"
            )
    if "expected_items" in source:
        count = source["expected_items"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise VlmgridError(
                f"{label}: source key `expected_items` must be a positive whole number (the item count of "
                f"the copy), not {count!r}; fix the config"
            )
    spec.check(kind, source, label)
    return source


def expected_items(kind: BenchmarkKind, source: Mapping[str, Any]) -> int | None:
    """The item count a prepared copy must have: the source's `expected_items`, else the kind's published
    count; None for a fixture (a stand-in of any size) or a kind without a published count."""
    if source.get("type") == "fixture":
        return None
    return source.get("expected_items") or kind.expected_count or None


def data_settings(source: Mapping[str, Any]) -> dict:
    """The source settings that decide the data (all but `expected_items`, which only checks it); a local
    source's path as the folder it reads (absolute, links followed), so that the same release, named through a
    link or by a relative path, is the same source."""
    settings = {key: value for key, value in source.items() if key != "expected_items"}
    if settings.get("type") == "local" and isinstance(settings.get("path"), str):
        settings["path"] = str(local_folder(settings))
    return settings


def fetch_source(
    kind: BenchmarkKind, source: dict, bench_dir: Path, label: str, fixture: Fixture | None = None
) -> Fetched:
    """The raw files of a checked source (`fixture`: the kind's fixture, for a fixture source)."""
    return SOURCES.get(source["type"]).fetch(kind, source, Path(bench_dir), label, fixture)
