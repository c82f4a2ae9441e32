"""Decoded, resized pixels of image files, cached so that a second pass over the same files is a memory copy.

Decoding JPEGs is the slow part of a CLIP run; another model or template set at the same image size, or a
rerun, needs exactly the same pixels again. An entry holds the uint8 pixels of one list of files after the
preprocessing's PIL steps (`<key>.npy`, N x H x W x 3, zeros where a file is unreadable) and, per file, why
it is unreadable (`<key>.json`, the decoder's own error text).

The key hashes each file's absolute path, size and mtime_ns, the description of the PIL steps and the PIL
version, so a changed file, another preprocessing or another resampler misses. Absolute paths, not paths
relative to the benchmark: the error texts kept in an entry name the file by its path. The JSON is written
last and only once every row is in the .npy, so an entry without it (a killed run) is never read.

An entry is one call's list of files: `vlmgrid infer` calls with one part (at most `infer.part_size` model
requests) at a time, so a rerun with the same parts finds every part's entry, and other parts decode again.
Nothing is evicted: at 224 x 224 an image takes 150 KB (ImageNet's 50,000 validation images 7.5 GB).
"""

from __future__ import annotations

import json
import logging
import os
import types
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from vlmgrid.cache import cache_root
from vlmgrid.fileio import create_temporary, sha256_json, write_json

log = logging.getLogger(__name__)

PIXELS_DIR = "pixels"
_LAYOUT = 2  # bump when the entry's layout or the pixels' meaning changes (2: transparency dropped)


def describe_steps(steps: Sequence) -> str:
    """What the PIL steps do, stable across processes: each step's class and public settings."""
    return "; ".join(_describe_step(step) for step in steps)


def _describe_step(step) -> str:
    if isinstance(step, types.FunctionType):
        return f"{step.__module__}.{step.__qualname__}"
    kind = type(step)
    settings = {
        name: repr(value)
        for name, value in sorted(getattr(step, "__dict__", {}).items())
        if not name.startswith("_")
    }
    return f"{kind.__module__}.{kind.__qualname__}{settings or repr(step)}"


def _identity(path) -> list:
    path = os.path.abspath(path)
    try:
        stat = os.stat(path)
    except OSError:
        return [path, None, None]  # missing now: the key changes when it appears
    return [path, stat.st_size, stat.st_mtime_ns]


def entry_key(paths: Sequence, geometry: str) -> str:
    from PIL import __version__ as pil_version

    return sha256_json(
        {
            "layout": _LAYOUT,
            "pil": pil_version,
            "geometry": geometry,
            "files": [_identity(path) for path in paths],
        }
    )


def entry_paths(key: str, root: Path | None = None) -> tuple[Path, Path]:
    folder = (root or cache_root()) / PIXELS_DIR
    return folder / f"{key}.npy", folder / f"{key}.json"


def load(key: str, n: int, root: Path | None = None) -> tuple[np.ndarray, list[str | None]] | None:
    """(pixels opened read-only from disk, problems) of a complete entry for n files, or None."""
    pixels_path, problems_path = entry_paths(key, root)
    if not problems_path.is_file():
        return None
    try:
        problems = json.loads(problems_path.read_text(encoding="utf-8"))["problems"]
        pixels = np.load(pixels_path, mmap_mode="r")
    except (OSError, ValueError, KeyError):
        return None  # damaged: decode again, and the entry is rewritten
    if len(problems) != n or pixels.shape[0] != n or pixels.dtype != np.uint8:
        return None
    return pixels, problems


def batches(pixels: np.ndarray, problems: list[str | None], batch_size: int) -> Iterator[tuple[int, list]]:
    """(start, [(pixels, problem), ...]) per batch, as the decoders yield them, from an entry."""
    for start in range(0, len(problems), batch_size):
        yield (
            start,
            [
                (None if problem is not None else pixels[i], problem)
                for i, problem in enumerate(problems[start : start + batch_size], start)
            ],
        )


def filling(
    key: str, n: int, decoded: Iterable[tuple[int, list]], geometry: str, root: Path | None = None
) -> Iterator[tuple[int, list]]:
    """Pass the decoded batches through, writing their rows into a new entry that appears when all are
    through.

    Rows go into a temporary .npy as they come, so the whole set is never held in memory. A batch's rows are
    written in a thread of their own while the consumer runs the batch (work the thread feeding the device
    would otherwise wait for), one batch at a time, in order, with plain writes: copying into a memory-mapped
    file took a page fault per 4 KB, 0.2 to 0.7 CPU s per 1,024 images at 336 pixels against 0.07. A consumer
    that stops early leaves no entry; pixels of differing shapes (a preprocessing without a crop) are not
    cached.
    """
    pixels_path, problems_path = entry_paths(key, root)
    tmp = create_temporary(pixels_path)
    problems: list[str | None] = [None] * n
    entry, shape, cacheable = _EntryFile(tmp, n), None, True
    writer = ThreadPoolExecutor(max_workers=1)
    writing = None  # the write of the batch before this one, still running
    try:
        for start, batch in decoded:
            for i, (row, problem) in enumerate(batch, start):
                problems[i] = problem
                if row is not None and cacheable:
                    shape = row.shape if shape is None else shape
                    cacheable = row.shape == shape
            cacheable = _written(writing, tmp) and cacheable
            writing = None
            if shape is not None and cacheable:
                writing = writer.submit(_write_rows, entry, start, batch)
            yield start, batch
        cacheable = _written(writing, tmp) and cacheable
        if shape is not None and cacheable:  # else nothing decoded, or rows that do not stack
            entry.finish()
            os.replace(tmp, pixels_path)
            write_json(problems_path, {"geometry": geometry, "problems": problems})
    finally:
        writer.shutdown(wait=True)  # a write still running ends before its file goes
        entry.close()
        tmp.unlink(missing_ok=True)


class _EntryFile:
    """An entry's .npy being written row after row, in order: zeros for the rows of unusable files."""

    def __init__(self, path: Path, n: int) -> None:
        self.path, self.n = path, n
        self.file = None
        self.written = 0  # rows in the file so far
        self.zeros = b""

    def write(self, i: int, row: np.ndarray) -> None:
        if self.file is None:
            self.file = open(self.path, "wb")  # noqa: SIM115 (closed by close(), after the last batch)
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)), "fortran_order": False}
            np.lib.format.write_array_header_1_0(self.file, {**header, "shape": (self.n, *row.shape)})
            self.zeros = bytes(row.size)
        self._zeros_to(i)
        self.file.write(np.ascontiguousarray(row, dtype=np.uint8).data)
        self.written = i + 1

    def _zeros_to(self, i: int) -> None:
        for _ in range(self.written, i):
            self.file.write(self.zeros)
        self.written = max(self.written, i)

    def finish(self) -> None:
        """The rows after the last usable one, and the file closed."""
        if self.file is not None:
            self._zeros_to(self.n)
        self.close()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _written(writing, tmp: Path) -> bool:
    """Whether the write of a batch's rows (a future, or None) went through; a cache that cannot be written
    (a full disk) costs the run its entry, not its answers."""
    try:
        if writing is not None:
            writing.result()
        return True
    except OSError as exc:
        log.warning("pixel cache: could not write %s (%s); these files are not cached", tmp.parent, exc)
        return False


def _write_rows(entry: _EntryFile, start: int, batch: list) -> None:
    for i, (row, _) in enumerate(batch, start):
        if row is not None:
            entry.write(i, row)
