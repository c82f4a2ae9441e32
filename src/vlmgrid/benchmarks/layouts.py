"""A kind's raw layouts: the forms in which its authors ship its files (an archive, the same files extracted),
one small registry per kind, told apart by the files present.

A kind with layouts reads a folder through the one layout whose marker files it holds; its `raw_files` are
the union of the layouts' patterns, and a local source's raw files (hashed into the manifest, listed in the
source stamp) are the detected layout's alone, so an archive kept beside nothing else is never hashed twice.
A folder holding the markers of no layout, or of two, is an error that names them: the choice is never a guess.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from vlmgrid.errors import VlmgridError


@dataclass(frozen=True)
class Layout:
    """One form of a kind's raw files.

    name:       how the docs and errors call it ("102flowers.tgz archive", "extracted jpg/ folder")
    markers:    glob patterns (relative to the raw folder); the layout is present when one of them matches a file
    raw_files:  glob patterns of every file its reader may read (the markers among them)
    read:       read(raw_dir, bench_dir) -> Adapted, the adapter for this layout
    """

    name: str
    markers: tuple[str, ...]
    raw_files: tuple[str, ...]
    read: Callable = field(repr=False)


def _matches(raw_dir: Path, pattern: str) -> bool:
    return any(Path(p).is_file() for p in glob.iglob(glob.escape(str(raw_dir)) + "/" + pattern))


def present_layouts(layouts: Sequence[Layout], raw_dir: Path) -> list[Layout]:
    """The layouts whose markers raw_dir holds, in registry order."""
    return [layout for layout in layouts if any(_matches(Path(raw_dir), m) for m in layout.markers)]


def detect_layout(layouts: Sequence[Layout], raw_dir: Path, what: str) -> Layout:
    """The one layout raw_dir holds; none or several -> a VlmgridError naming the layouts and their files."""
    present = present_layouts(layouts, raw_dir)
    if len(present) == 1:
        return present[0]
    if not present:
        expected = "; ".join(f"{layout.name} ({' or '.join(layout.markers)})" for layout in layouts)
        raise VlmgridError(f"{raw_dir}: holds the files of no {what} layout; put them there as their authors ship them, one of: {expected}")
    found = " and ".join(f"{layout.name} ({layout.markers[0]})" for layout in present)
    raise VlmgridError(f"{raw_dir}: holds the files of two {what} layouts, {found}; keep one of them in the folder (or point `path` at a folder holding one)")


def layout_fields(layouts: Sequence[Layout], what: str) -> dict:
    """The BenchmarkKind fields of a kind read through layouts: `layouts`, `raw_files` (their union, in order)
    and `adapt` (the detected layout's reader)."""
    layouts = tuple(layouts)

    def adapt(raw_dir: Path, bench_dir: Path):
        return detect_layout(layouts, Path(raw_dir), what).read(Path(raw_dir), Path(bench_dir))

    patterns = tuple(dict.fromkeys(p for layout in layouts for p in layout.raw_files))
    return {"layouts": layouts, "raw_files": patterns, "adapt": adapt}
