"""A prepared benchmark folder's files (docs/formats.md): their names, and what a prepare wrote there and so
may remove when it prepares the folder again (`clear`), never anything else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from vlmgrid import fileio
from vlmgrid.benchmarks.sources import local_folder
from vlmgrid.errors import VlmgridError
from vlmgrid.image_sources import IMAGE_SOURCES

MANIFEST = "manifest.json"
RECORDS = "records.parquet"
CLASSES = "classes.json"
SYNONYMS = "synonyms.json"
DERIVED = ("images", RECORDS, CLASSES, SYNONYMS, IMAGE_SOURCES)
# Present while a prepare builds the folder (written before its first file, removed after the manifest): what
# a prepare left without a manifest is its own, and the next one may remove it.
UNFINISHED = ".prepare-unfinished"
# The files a prepare wrote into the folder, kept beside the manifest: Snakemake deletes a job's outputs (the
# manifest, the records) before it runs it again, and the next prepare must still know what it may remove.
WRITTEN = ".prepare-written.json"


def own_files(bench_dir: Path, manifest: dict) -> set[str]:
    """The files (relative posix paths) that the prepare of `manifest` wrote: its own files, less a local
    source's raw files lying in the folder (the user's copy, which prepare reads and never writes)."""
    source = manifest.get("source") if isinstance(manifest.get("source"), dict) else {}
    read = local_folder(source) if source.get("type") == "local" and source.get("path") else None
    written = set()
    for key in manifest["files"]:
        if Path(key).is_absolute():
            continue
        path = (bench_dir / key).resolve()
        if read is None or not (path == read or read in path.parents):
            written.add(key)
    return written


def _written(bench_dir: Path, old: dict | None) -> set[str]:
    """The files (relative posix paths) that earlier prepares wrote into bench_dir: the old manifest's own,
    and those its list of written files names (which outlives a manifest that Snakemake removed before a
    rerun)."""
    written = own_files(bench_dir, old) if old is not None else set()
    try:
        listed = json.loads((bench_dir / WRITTEN).read_text("utf-8"))
    except (OSError, ValueError):  # none yet (or damaged): only the manifest says what prepare wrote
        listed = []
    home = bench_dir.resolve()
    for key in listed if isinstance(listed, list) else ():
        if isinstance(key, str) and not Path(key).is_absolute() and home in (home / key).resolve().parents:
            written.add(key)
    return written


def clear(bench_dir: Path, old: dict | None, writes_raw: bool, keep_raw: bool, label: str) -> None:
    """Remove what an earlier prepare wrote into bench_dir (its images/, records, classes, and raw/ unless
    `keep_raw`), and never anything else: a file there that no prepare wrote (the user's own, or a copy a
    local source reads) is refused in one sentence, before anything is removed; so is one in raw/ when the
    source writes raw/ (`writes_raw`), whose clean-up would remove it."""
    names = DERIVED + (() if keep_raw else ("raw",))
    if not (bench_dir / UNFINISHED).is_file():  # else every file under those names is an unfinished prepare's
        written = _written(bench_dir, old)
        for name in DERIVED + (("raw",) if writes_raw else ()):
            path = bench_dir / name
            found = (
                sorted(p for p in path.rglob("*") if not p.is_dir())
                if path.is_dir() and not path.is_symlink()
                else [path]
            )
            for file in found:
                rel = file.relative_to(bench_dir).as_posix()
                if (file.exists() or file.is_symlink()) and rel not in written:
                    raise VlmgridError(
                        f"{file}: {label} is prepared into {bench_dir}, and prepare did not write this file "
                        "(no manifest there lists it), so it will not remove it; move it out of "
                        f"{bench_dir} (or point the source at its own folder elsewhere) and run prepare "
                        "again"
                    )
    bench_dir.mkdir(parents=True, exist_ok=True)
    fileio.write_text(bench_dir / UNFINISHED, "")
    (bench_dir / MANIFEST).unlink(missing_ok=True)
    for name in names:
        path = bench_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
