"""Input files' sha256, remembered: a checkpoint's weights or a local benchmark's raw files are hashed once
and remembered under the cache folder (vlmgrid.cache) by resolved path, size and modification time, as DVC
remembers its own, so a file is read again only when one of those changed. Hashing a 140 GB checkpoint takes
minutes."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from vlmgrid import cache
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file, sha256_json, write_json

log = logging.getLogger(__name__)

HASHES_DIR = "file-hashes"  # under the cache folder: one small JSON file per hashed file
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _entry_path(path: Path) -> Path:
    key = sha256_json(str(path))
    return cache.cache_root() / HASHES_DIR / key[:2] / f"{key}.json"


def unreadable(path: Path, error: Exception, denied: str | None = None) -> VlmgridError:
    """The one sentence for an input file that could not be read: no permission, not UTF-8, another OS error.
    `denied`: the caller's own words after the path where permission is denied (an answer file's,
    vlmgrid.imports)."""
    if isinstance(error, UnicodeDecodeError):
        return VlmgridError(
            f"{path} is not UTF-8 text (byte {error.object[error.start]:#04x} at position "
            f"{error.start}); save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) and run again"
        )
    if isinstance(error, PermissionError):
        return VlmgridError(
            f"{path} {denied}"
            if denied
            else f"{path} cannot be read by this user (permission "
            f"denied); make it readable (`chmod a+r {path}`) and run again"
        )
    reason = getattr(error, "strerror", None) or str(error)
    return VlmgridError(f"{path} cannot be read ({reason}); check the file and run again")


def content_hash(path: Path) -> str:
    """sha256 of the file as it is now (read, never remembered); one that cannot be read (no permission, a
    disk error, removed since it was listed) is one sentence naming it."""
    try:
        return sha256_file(path)
    except OSError as exc:
        raise unreadable(Path(path), exc) from None


def _remembered(entry_path: Path, path: Path, stat: os.stat_result) -> str | None:
    """The sha256 remembered for the file at this size and mtime; None when there is none (or the entry is
    damaged: it only costs reading the file again)."""
    try:
        entry = json.loads(entry_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or (entry.get("path"), entry.get("size"), entry.get("mtime_ns")) != (
        str(path),
        stat.st_size,
        stat.st_mtime_ns,
    ):
        return None
    digest = entry.get("sha256")
    return digest if isinstance(digest, str) and _SHA256.fullmatch(digest) else None


def _hash(path: Path) -> tuple[str, str | None]:
    """(sha256 of the file, why it could not be remembered in the cache, or None)."""
    path = Path(path).resolve()
    stat = path.stat()
    entry_path = _entry_path(path)
    digest = _remembered(entry_path, path, stat)
    if digest is not None:
        return digest, None
    digest = content_hash(path)
    try:
        write_json(
            entry_path,
            {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest},
        )
    except (OSError, VlmgridError) as exc:  # an unwritable or full cache folder only costs hashing again
        return digest, str(exc)
    return digest, None


def _warn_unremembered(problem: str) -> None:
    log.warning(
        "the cache folder %s (%s) cannot be written, so the file hashes are not remembered "
        "and the files are hashed again next time (%s); set %s to a writable folder to avoid that",
        cache.cache_root(),
        cache.CACHE_ENV,
        problem,
        cache.CACHE_ENV,
    )


def file_hash(path: Path) -> str:
    """sha256 of the file, read only when its (resolved path, size, mtime) is not remembered in the cache."""
    digest, problem = _hash(path)
    if problem is not None:
        _warn_unremembered(problem)
    return digest


def file_hashes(files: Mapping[str, Path]) -> dict[str, str]:
    """{name: sha256} of the files, in name order (see file_hash); a cache that cannot be written is one
    warning, not one per file."""
    hashes, problems = {}, []
    for name, path in sorted(files.items()):
        hashes[name], problem = _hash(path)
        problems.append(problem)
    problem = next((problem for problem in problems if problem is not None), None)
    if problem is not None:
        _warn_unremembered(problem)
    return hashes


def file_stamp(files: Mapping[str, Path]) -> list[list]:
    """[name, size, sha256] of each file: what a workflow watches to see the files change. Their contents, not
    their times, so that a file touched with the same bytes (rsync, a copy, a backup restore) reruns nothing;
    hashed only when its size or time changed (file_hash), so an unchanged folder is only listed."""
    entries = []
    for name, path in sorted(files.items()):
        try:
            size = Path(path).stat().st_size
        except OSError:  # removed while listed: the next run sees it gone
            continue
        try:
            digest = file_hash(path)
        except (OSError, VlmgridError):  # unreadable: the stage that reads it says why, in its own sentence
            digest = None
        entries.append([name, size, digest])
    return entries
