"""Benchmark kinds: what a benchmark is (protocol, record shape, metric, raw layout, real source) as one
declarative entry.

Each kind module (flowers102.py, pope.py, ..., dance.py) builds its `KIND = BenchmarkKind(...)`, and
benchmarks/catalog.py lists them all in the `BENCHMARKS` registry; adding a benchmark is one new module, one
line in that list and its tests, never an edit to an if-chain. (A kind's fixture, the small fake copy the
tests and the offline grid use, lives in vlmgrid.fixtures.kinds.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from vlmgrid.benchmarks.shapes import (
    CLASSIFICATION,
    MULTIPLE_CHOICE,
    RANKING,
    SHORT_ANSWER,
    YES_NO,
    RecordShape,
)


@dataclass(frozen=True)
class Adapted:
    """What an adapter returns: canonical records (formats.md) and, for classification, the class names and
    synonyms."""

    records: pd.DataFrame
    classes: list[str] | None = None
    # other names of a class, {class name: [alternatives]}, where the raw data has them (ImageNet's WordNet
    # lemmas); the open-world matcher accepts them as that class
    synonyms: Mapping[str, list[str]] | None = None


@dataclass(frozen=True, eq=False)
class BenchmarkKind:
    """One kind of benchmark.

    name:            registry name ("pope")
    protocol:        how a model is asked ("classification", "yes_no", "multiple_choice", "short_answer",
                     "ranking", "exam_choice", "cvqa": a name in vlmgrid.protocols)
    shape:           the shape of its canonical records (shapes.py): what prepare checks, and whether the
                     kind keeps classes.json
    metric:          "classification" | "pope" | "accuracy"
    breakdown_by:    record columns the score is broken down by (("split",) for POPE)
    description:     one line
    templates:       classification: CLIP prompt templates holding "{c}"; () otherwise
    expected_count:  the number of items the real benchmark has (checked for every non-fixture source)
    raw_files:       glob patterns, relative to the raw folder, of the files the adapter reads (the real
                     layout)
    adapt:           adapt(raw_dir, bench_dir) -> Adapted: reads raw files, writes bench_dir/images/..
    url_files:       the real files for a `url` source: ({"url", "md5" or "sha256", "name"}, ...)
    hub:             the real hub copy for an `hf_hub` source: {"repo", "revision" (a known-good pin),
                     "config", "split"}
    parser:          how a generated answer is read (a parser name); "" for the protocol's default. It follows
                     the benchmark authors' own scorer: the headline reading
    lenient_parsers: a more lenient reading of generated answers, scored beside the headline as
                     `<headline>_lenient`: {prediction variant: parser name}, "*" for every variant; {} for
                     none
    local_only:      nothing vlmgrid can download: a `local` source (or the fixture) only; expected_count 0
                     when there is no published count (DANCE)
    hub_files:       the raw_files patterns an hf_hub source downloads, for a kind that also reads the
                     authors' release layout (benchmarks/layouts.py); () when they are all of raw_files
    variants:        other published copies with another item count, {variant name: count} (MMBench's
                     2023-07-12 dev file): a copy of that count needs no `expected_items`, and its manifest
                     names the variant
    class_count:     classification: the number of classes of the real benchmark; None where it is not fixed
    option_count:    the options every item of the real benchmark has, where that number is the same for all
                     (yes/no: 2); None where it varies per item (then only the records tell). With
                     class_count, what `vlmgrid plan` counts an unprepared benchmark's requests by
    group_size:      the items of every group the metric scores as one (MMVP's pairs, MME's images: 2), where
                     all groups of the real benchmark have the same number; None where the metric scores
                     items, or the groups vary (MMBench's rotations). What `vlmgrid plan` counts an unprepared
                     benchmark's scoring units by
    layouts:         the forms its raw files come in (benchmarks/layouts.py: the hub copy, the authors'
                     release, an archive, the same files extracted), told apart by the files present; None for
                     a kind with one layout. Where set, raw_files is their union and a local source hashes the
                     detected layout's files only
    """

    name: str
    protocol: str
    metric: str
    breakdown_by: tuple[str, ...]
    description: str
    templates: tuple[str, ...]
    expected_count: int
    raw_files: tuple[str, ...]
    shape: RecordShape
    adapt: Callable[[Path, Path], Adapted] = field(repr=False)
    url_files: tuple[Mapping[str, str], ...] = ()
    hub: Mapping[str, str] | None = None
    # how generated text becomes an answer (a name in vlmgrid.protocols.parsing); "" = the protocol's default
    parser: str = ""
    lenient_parsers: Mapping[str, str] = field(
        default_factory=dict
    )  # variant ("*": any) -> parser of the lenient figure
    local_only: bool = False  # no published copy (DANCE): read from a `local` folder (or made by a fixture)
    variants: Mapping[str, int] = field(default_factory=dict)  # other published copies: {name: item count}
    hub_files: tuple[str, ...] = ()  # the raw_files of the hub copy's layout; () = all of raw_files
    layouts: Any = None  # a layouts.Layouts registry; None = one layout, raw_files as given
    class_count: int | None = None  # classification: the real benchmark's classes
    option_count: int | None = None  # options of every item, where all have the same number
    group_size: int | None = None  # items of every scored group, where all have the same number

    def __post_init__(self) -> None:
        if self.protocol == "classification" and not all("{c}" in t for t in self.templates):
            raise ValueError(f"benchmark kind {self.name!r}: every template must hold '{{c}}'")
        if not self.url_files and not self.hub and not self.local_only:
            raise ValueError(f"benchmark kind {self.name!r}: needs a real source (url_files or hub)")

    @property
    def hub_raw_files(self) -> tuple[str, ...]:
        """The raw_files patterns an hf_hub source downloads (the hub copy's layout)."""
        return self.hub_files or self.raw_files

    @property
    def default_source(self) -> dict[str, Any]:
        """The real source as config settings (hub sources carry the known-good pinned revision)."""
        if self.hub:
            source = {"type": "hf_hub", "repo": self.hub["repo"], "revision": self.hub["revision"]}
            for key in ("config", "split"):
                if self.hub.get(key):
                    source[key] = self.hub[key]
            return source
        if self.local_only:
            return {"type": "local", "path": f"<a {self.name} folder>"}
        return {"type": "url"}


def classification_kind(name: str, **fields) -> BenchmarkKind:
    """A classification kind: the protocol, record shape, metric, breakdown and parser that every
    classification set shares."""
    return BenchmarkKind(
        name=name,
        protocol="classification",
        shape=CLASSIFICATION,
        metric="classification",
        breakdown_by=(),
        parser="open_class",
        **fields,
    )


# What a question protocol fixes of every kind that uses it: the record shape, and the options every item
# has where the protocol fixes them (yes/no: 2).
QUESTION_PROTOCOLS: Mapping[str, Mapping[str, Any]] = {
    "multiple_choice": {"shape": MULTIPLE_CHOICE},
    "exam_choice": {"shape": MULTIPLE_CHOICE},
    "cvqa": {"shape": MULTIPLE_CHOICE},
    "yes_no": {"shape": YES_NO, "option_count": 2},
    "short_answer": {"shape": SHORT_ANSWER},
    "ranking": {"shape": RANKING},
}


def question_kind(name: str, protocol: str, **fields) -> BenchmarkKind:
    """A kind whose items are questions (every protocol but classification): no templates, and the record
    shape (and option count) its protocol fixes (QUESTION_PROTOCOLS)."""
    return BenchmarkKind(name=name, protocol=protocol, templates=(), **QUESTION_PROTOCOLS[protocol], **fields)
