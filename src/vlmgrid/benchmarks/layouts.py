"""The layouts a kind's raw files come in (the hub copy's parquet files, the authors' own release, an archive
or the same files extracted), and which one a folder holds.

A kind that reads more than one layout lists them once, in a `Layouts` registry: each layout names the files
that mark it (`markers`), every file it reads (`files`) and its adapter. The kind's `raw_files` are the union
of the layouts' files, and a local source hashes and stamps the files of the layout its folder holds alone, so
an archive kept beside nothing else is never hashed twice. The kind's `adapt` is the registry's: it finds the
one layout whose markers a folder holds and runs that layout's adapter; a folder holding the markers of no
layout, or of two, is an error that names them: the choice is never a guess. A layout whose data is one file
(MMBench's TSV, `one_file`) may also be handed that file itself (a local source's `path` naming it); its
adapter then reads only that file. A file so named is known by its name or, under any other name (a copy
renamed, saved from a browser), by its content (`sniff`).
"""

from __future__ import annotations

import fnmatch
import glob
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vlmgrid.benchmarks.kinds import Adapted
from vlmgrid.errors import VlmgridError
from vlmgrid.registry import Registry


@dataclass(frozen=True)
class Layout:
    """One layout of a kind's raw files.

    name:        short name ("hub", "release", "tsv", "102flowers.tgz archive")
    description: what a folder in this layout holds, in words (error messages list it); "" = the name and
                 its markers
    markers:     patterns relative to the raw folder; a folder holding a file that matches one is in this
                 layout
    files:       patterns of every file the layout's adapter reads (markers included)
    adapt:       adapt(raw, bench_dir) -> Adapted; `raw` is the folder, or for a one_file layout the file
    one_file:    the data is one file, matched by a marker: a folder holding two such files is ambiguous, and
                 a local source's `path` may name the file itself
    sniff:       sniff(path) -> whether a file named directly is this one-file layout's data by its content,
                 whatever its name; None: by its name only
    """

    name: str
    description: str
    markers: tuple[str, ...]
    files: tuple[str, ...]
    adapt: Callable[[Path, Path], Adapted] = field(repr=False)
    one_file: bool = False
    sniff: Callable[[Path], bool] | None = field(default=None, repr=False)

    @property
    def words(self) -> str:
        return self.description or f"{self.name} ({' or '.join(self.markers)})"

    def marked(self, raw_dir: Path) -> list[Path]:
        """The files under raw_dir that match one of the markers, sorted."""
        found: set[Path] = set()
        for pattern in self.markers:
            for name in glob.glob(glob.escape(str(raw_dir)) + "/" + pattern):
                try:
                    if Path(name).is_file():
                        found.add(Path(name))
                except (
                    PermissionError
                ):  # a folder whose names can be listed but whose files cannot be reached
                    folder = Path(name).parent
                    raise VlmgridError(
                        f"{folder} cannot be entered by this user (permission denied), so its files "
                        f"cannot be read; make the release readable (`chmod -R a+rX {raw_dir}`) and "
                        "run again"
                    ) from None
        return sorted(found)

    def names_file(self, path: Path) -> bool:
        """Whether `path` itself is this one-file layout's data file (its name matches a marker, or its
        content is the layout's)."""
        if not self.one_file:
            return False
        named = any("/" not in m and fnmatch.fnmatchcase(Path(path).name, m) for m in self.markers)
        return named or (self.sniff is not None and self.sniff(Path(path)))


class Layouts:
    """A kind's layouts: its raw_files, and its adapt (detect the layout, run its adapter)."""

    def __init__(self, kind: str, layouts: list[Layout]) -> None:
        self.kind = kind
        self.registry: Registry[Layout] = Registry(f"{kind} layout", layouts)
        self.order = tuple(layout.name for layout in layouts)

    def __iter__(self):
        return (self.registry.get(name) for name in self.order)

    @property
    def raw_files(self) -> tuple[str, ...]:
        """Every layout's files, each pattern once, in the layouts' order."""
        return tuple(dict.fromkeys(pattern for layout in self for pattern in layout.files))

    def _expected(self) -> str:
        return "; or ".join(layout.words for layout in self)

    def present(self, raw_dir: Path) -> list[Layout]:
        """The layouts whose markers the folder raw_dir holds, in the registry's order."""
        return [layout for layout in self if layout.marked(Path(raw_dir))]

    def detect(self, raw: Path) -> tuple[Layout, Path]:
        """The layout `raw` (a folder, or a one-file layout's file) holds, and what its adapter reads."""
        raw = Path(raw)
        if raw.is_file():
            named = [layout for layout in self if layout.names_file(raw)]
            if not named:
                raise VlmgridError(
                    f"{raw}: is not a {self.kind} data file, by its name or its content; point `path` at "
                    f"{self._expected()}"
                )
            return named[0], raw
        found = [(layout, layout.marked(raw)) for layout in self]
        found = [(layout, files) for layout, files in found if files]
        if not found:
            raise VlmgridError(
                f"{raw}: holds no {self.kind} data in a layout vlmgrid reads; it needs {self._expected()}"
            )
        if len(found) > 1:
            names = ", ".join(
                f"{files[0].relative_to(raw).as_posix()} ({layout.name})" for layout, files in found
            )
            raise VlmgridError(
                f"{raw}: holds {self.kind} data in more than one layout ({names}); point `path` at a folder "
                f"holding one of them"
            )
        layout, files = found[0]
        if layout.one_file:
            if len(files) > 1:
                names = ", ".join(f.name for f in files)
                raise VlmgridError(
                    f"{raw}: holds {len(files)} {self.kind} files ({names}); point `path` at the one to read"
                )
            return layout, files[0]
        return layout, raw

    def adapt(self, raw: Path, bench_dir: Path) -> Adapted:
        layout, path = self.detect(raw)
        return layout.adapt(path, bench_dir)

    def kind_fields(self) -> dict:
        """The BenchmarkKind fields of a kind read through these layouts: `layouts`, `raw_files` (their union,
        in order), `adapt` (the detected layout's adapter) and `hub_files` (the files of the layout named
        "hub", what an hf_hub source downloads; () without one)."""
        hub = self.registry.get("hub").files if "hub" in self.order else ()
        return {"layouts": self, "raw_files": self.raw_files, "adapt": self.adapt, "hub_files": hub}


def rows_adapter(read_rows: Callable, adapt_rows: Callable) -> Callable[[Path, Path], Adapted]:
    """A layout's adapter for a kind with one row adapter: read_rows(raw) gives the layout's rows, and
    adapt_rows(rows, bench_dir) makes them records, whichever layout they came from."""
    return lambda raw, bench_dir: adapt_rows(read_rows(raw), bench_dir)


def hub_layout(pattern: str, adapt: Callable[[Path, Path], Adapted]) -> Layout:
    """The hub copy's layout: its parquet files (`pattern`) mark it and are all it reads."""
    return Layout("hub", f"the hub copy's {pattern}", (pattern,), (pattern,), adapt)


def layout_fields(layouts: Sequence[Layout], kind: str) -> dict:
    """The BenchmarkKind fields of a kind read through layouts: `layouts` (their registry), `raw_files` (their
    union, in order) and `adapt` (the detected layout's adapter). `kind` names the data in messages."""
    return Layouts(kind, list(layouts)).kind_fields()
