"""Where prepare read each image it stored: `image_sources.jsonl` in a prepared benchmark's folder.

Prepare writes a line per stored image (`vlmgrid.benchmarks.rawio`); an error about an unreadable image names
where it came from (`vlmgrid.protocols.base`). Below both, so that a protocol need not import the benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["IMAGE_SOURCES", "image_source"]

IMAGE_SOURCES = "image_sources.jsonl"

_SOURCES_CACHE: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}


def image_source(bench_dir: Path, image: str) -> str | None:
    """Where prepare read a stored image (image_sources.jsonl), e.g. "raw/x.parquet row 7, '7.jpg'"; None
    when the folder does not say (images extracted under their own names, or a folder prepared before)."""
    path = Path(bench_dir) / IMAGE_SOURCES
    try:
        stat = path.stat()
    except OSError:
        return None
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _SOURCES_CACHE.get(str(path))
    if cached is None or cached[0] != stamp:
        sources: dict[str, str] = {}
        try:
            for line in path.read_text("utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    sources.setdefault(str(entry["image"]), str(entry["from"]))
                except (ValueError, TypeError, KeyError):
                    continue  # only ever read to explain an error: a damaged line is skipped, not fatal
        except (OSError, UnicodeDecodeError):
            return None
        cached = (stamp, sources)
        _SOURCES_CACHE[str(path)] = cached
    return cached[1].get(image)
