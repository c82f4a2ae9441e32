"""A local source's copy of a benchmark (the user's own files) as prepare reads it: where it may lie beside
the folder prepare writes (`check_local_folder`), and whether its raw files changed since they were hashed
(`local_change`) or while prepare read them (`local_state`, `first_change`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.sources import local_folder, local_raw_files
from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import content_hash


def local_change(kind: BenchmarkKind, source: Mapping[str, Any], manifest: dict) -> str | None:
    """How a local source's raw files differ from those its manifest hashed, in words ("<file> changed", the
    first difference, and how many more there are); None when they are the same files with the same
    contents."""
    recorded = {key: sha for key, sha in manifest["files"].items() if Path(key).is_absolute()}
    current = {str(path.resolve()): path for path in local_raw_files(kind, local_folder(source))}
    changes = [f"{key} is gone" for key in sorted(set(recorded) - set(current))]
    changes += [f"{key} is new" for key in sorted(set(current) - set(recorded))]
    for key in sorted(set(recorded) & set(current)):
        if content_hash(current[key]) != recorded[key]:
            changes.append(f"{key} changed")
    if not changes:
        return None
    more = len(changes) - 1
    return changes[0] + (f", and {more} more raw file{'s' if more > 1 else ''}" if more else "")


def check_local_folder(source: Mapping[str, Any], bench_dir: Path, label: str) -> None:
    """Refuse a local source that shares the folder prepare writes into (but for its raw/, which prepare never
    writes for a local source): prepare would mix its images/ with the copy's, or read its own outputs as raw
    files."""
    read, home = local_folder(source), bench_dir.resolve()
    if read == home / "raw" or home / "raw" in read.parents:
        return
    if read == home:
        where = "is the folder"
    elif home in read.parents:
        where = "lies inside the folder"
    elif read in home.parents:
        where = "holds the folder"
    else:
        return
    raise VlmgridError(
        f"{source['path']}: the local source of {label} {where} {bench_dir} that prepare writes the "
        "benchmark into (images/, records.parquet, manifest.json); move the copy out of it (or into "
        f"{bench_dir / 'raw'}), or set data_dir to another folder"
    )


def local_state(kind: BenchmarkKind, raw_dir: Path) -> dict[str, tuple[int, ...]]:
    """Each raw file a local source reads (absolute path): its size, times, inode and device, which any write
    to it changes (ctime included, which no tool sets back)."""
    state = {}
    for path in local_raw_files(kind, raw_dir):
        st = path.stat()
        state[str(path.resolve())] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    return state


def first_change(before: dict, after: dict) -> str:
    for key in sorted(set(before) | set(after)):
        if key not in after:
            return f"{key} is gone"
        if key not in before:
            return f"{key} is new"
        if before[key] != after[key]:
            return f"{key} changed"
    return ""
