"""Source stamps: what a benchmark's prepare reads from outside vlmgrid's own folders (a local source's raw
files, listed with their sizes and contents' hashes), so that a workflow prepares a benchmark again when
they change, and only then."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vlmgrid import fileio
from vlmgrid.benchmarks.catalog import BENCHMARKS
from vlmgrid.benchmarks.sources.local import local_folder, local_raw_files
from vlmgrid.filehashes import file_stamp


def source_stamp(settings: Mapping[str, Any]) -> dict:
    """What a benchmark's prepare reads from outside vlmgrid's own folders, in a form that changes when that
    does.

    For a `local` source: the folder and every file of it that the kind reads, as [path relative to the
    folder, size in bytes, sha256], so that an edited, added or removed raw file changes the stamp (the
    workflows give it to prepare as an input: Snakemake as a param, DVC as a stamp file), and a file touched
    with the same bytes does not. This runs on every workflow start, so a file is read only when its size or
    modification time changed since it was last hashed (vlmgrid.filehashes.file_hash). Any other source is
    stamped by its type alone, as its settings (a param of prepare already) decide its files, and prepare
    checks them itself.
    """
    source = settings.get("source") if isinstance(settings, Mapping) else None
    kind_name = settings.get("kind") if isinstance(settings, Mapping) else None
    if not isinstance(source, Mapping) or source.get("type") != "local" or not source.get("path"):
        return {"type": source.get("type") if isinstance(source, Mapping) else None}
    raw_dir = local_folder(source)
    if kind_name not in BENCHMARKS:
        return {"type": "local", "path": str(raw_dir), "files": []}
    # a `path` naming one file (MMBench's TSV) is that file, by its name
    files = {
        path.name if path == raw_dir else path.relative_to(raw_dir).as_posix(): path
        for path in local_raw_files(BENCHMARKS.get(kind_name), raw_dir)
    }
    return {"type": "local", "path": str(raw_dir), "files": file_stamp(files)}


def source_fingerprint(settings: Mapping[str, Any]) -> str:
    """sha256 of source_stamp(settings): one short value that changes when a local source's files do."""
    return fileio.sha256_json(source_stamp(settings))


def write_source_stamps(
    benchmarks: Mapping[str, Mapping[str, Any]],
    folder: Path,
    stamp_of: Callable[[Mapping[str, Any]], dict] = source_stamp,
    label: str = "benchmark",
) -> list[str]:
    """Write `<name>.json` (source_stamp, with the benchmark's name) into `folder` for each benchmark, and
    remove any other stamp there; a stamp whose text is unchanged is not rewritten. Returns the names written.
    (`stamp_of` and `label`: the same for other entries, e.g. the models' checkpoints, by the fetch stage.)"""
    folder = Path(folder)
    written = []
    for name, settings in benchmarks.items():
        path = folder / f"{name}.json"
        # one file entry a line: a stamp of a big folder stays readable, and a diff shows what changed
        stamp = {label: name, **stamp_of(settings)}
        files = stamp.pop("files", None)
        text = json.dumps(stamp, ensure_ascii=False)[:-1]
        if files is not None:
            lines = ",\n  ".join(json.dumps(entry, ensure_ascii=False) for entry in files)
            text += f', "files": [\n  {lines}\n]' if files else ', "files": []'
        text += "}\n"
        if path.is_file() and path.read_text("utf-8") == text:
            continue
        fileio.write_text(path, text)
        written.append(name)
    for path in folder.glob("*.json") if folder.is_dir() else ():
        if path.stem not in benchmarks:
            path.unlink()
    return written
