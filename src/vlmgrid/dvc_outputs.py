"""Whether a missing file is one DVC tracks, so a message about it can say that `dvc pull` fetches it.

In a clone filled by `dvc pull` (or a partial one), a prepared benchmark, a model's weights folder or a result
that is missing is fetched, not recomputed. `pull_hint` reads the repo's dvc.lock files (the root's and each
paper grid's `pipelines/<grid>/dvc.lock`) with the dvc.yaml beside each, which gives a stage's `wdir` and
which outputs are kept in git (`cache: false`) rather than in DVC's cache. It is called only where a message
is built for a missing file: it reads a few small YAML files, never imports DVC, and never raises (a file it
cannot read or parse is passed over: it only improves a message).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OUTPUT_SECTIONS = (
    "outs",
    "metrics",
    "plots",
)  # a stage's outputs in dvc.yaml; dvc.lock lists all under `outs`
_TEMPLATE = re.compile(r"\\\$\\\{[^}]*\\\}")  # a `${...}` of dvc.yaml, as re.escape writes it


def pull_hint(path: str | os.PathLike) -> str | None:
    """The clause "`dvc pull <path>` fetches it (DVC tracks it: <lock file>)" when `path` (a missing file or
    folder) is, or lies inside, an output that a dvc.lock of the repo around the current folder records in
    DVC's cache; None otherwise (no DVC repo, an output kept in git, a path no stage outputs). The paths it
    names are relative to the current folder, as `dvc pull` reads them (at the repo root: relative to the
    root)."""
    try:
        cwd = os.getcwd()
        root = _repo_root(cwd)
        if root is None:
            return None
        for candidate in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
            rel = _inside(candidate, root)
            if rel is None:
                continue
            for lock in _lock_files(root):
                if any(rel == out or rel.startswith(out + "/") for out in _cached_outputs(lock, root)):
                    return (
                        f"`dvc pull {shlex.quote(os.path.relpath(candidate, cwd))}` fetches it "
                        f"(DVC tracks it: {os.path.relpath(lock, cwd)})"
                    )
    except (OSError, ValueError):  # a path the system refuses (a NUL in it, the current folder gone)
        return None
    return None


def or_pull(path: str | os.PathLike, advice: str) -> str:
    """`advice` (how to recompute the missing `path`), with the `dvc pull` that fetches it first where DVC
    tracks it: "`dvc pull X` fetches it (DVC tracks it: dvc.lock), or <advice>"."""
    hint = pull_hint(path)
    return advice if hint is None else f"{hint}, or {advice}"


def _repo_root(start: str) -> str | None:
    """The nearest folder at or above `start` that holds a `.dvc` folder."""
    folder = start
    while True:
        if os.path.isdir(os.path.join(folder, ".dvc")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _inside(path: str, root: str) -> str | None:
    """`path` relative to `root`, POSIX-style; None when it lies outside."""
    rel = os.path.relpath(path, root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return Path(rel).as_posix()


def _lock_files(root: str) -> list[str]:
    pipelines = os.path.join(root, "pipelines")
    try:
        grids = sorted(os.listdir(pipelines))
    except OSError:
        grids = []
    return [os.path.join(root, "dvc.lock")] + [os.path.join(pipelines, grid, "dvc.lock") for grid in grids]


def _load(path: str) -> Any:
    """The YAML file's content; None when it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as file:
            return yaml.load(file, Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError):
        return None


def _cached_outputs(lock_path: str, root: str) -> Iterator[str]:
    """The outputs (relative to `root`, POSIX-style) that the lock file records with a hash in DVC's cache;
    none when it or the dvc.yaml beside it cannot be read."""
    lock = _load(lock_path)
    if not isinstance(lock, dict) or not isinstance(lock.get("stages"), dict):
        return
    pipeline = _load(os.path.join(os.path.dirname(lock_path), "dvc.yaml"))
    if not isinstance(pipeline, dict) or not isinstance(pipeline.get("stages"), dict):
        return
    base = Path(os.path.relpath(os.path.dirname(lock_path), root)).as_posix()
    for name, locked in lock["stages"].items():
        definition = pipeline["stages"].get(str(name).split("@", 1)[0])
        if not isinstance(locked, dict) or not isinstance(definition, dict):
            continue
        if isinstance(definition.get("do"), dict):  # a foreach stage: its body is under `do`
            definition = definition["do"]
        wdir = definition.get("wdir", ".")
        if not isinstance(wdir, str):
            continue
        kept_in_git = _kept_in_git(definition)
        for out in locked.get("outs") or ():
            if (
                not isinstance(out, dict)
                or not isinstance(out.get("path"), str)
                or not isinstance(out.get("md5"), str)
            ):
                continue
            own = posixpath.normpath(out["path"])
            if any(pattern.fullmatch(own) for pattern in kept_in_git):
                continue
            joined = posixpath.normpath(posixpath.join(base, wdir, own))
            if joined != os.pardir and not joined.startswith(os.pardir + "/"):
                yield joined


def _kept_in_git(definition: dict) -> list[re.Pattern]:
    """The stage's outputs with `cache: false` (dvc.yaml's paths, relative to the stage's wdir, where a
    `${...}` stands for any text, as the lock's paths are those with the values filled in)."""
    patterns = []
    for section in _OUTPUT_SECTIONS:
        entries = definition.get(section)
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, dict):
                continue
            for key, options in entry.items():
                if isinstance(key, str) and isinstance(options, dict) and options.get("cache") is False:
                    template = _TEMPLATE.sub(".+?", re.escape(posixpath.normpath(key)))
                    patterns.append(re.compile(template))
    return patterns
