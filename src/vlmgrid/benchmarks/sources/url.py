"""The `url` source: the kind's published files (or the source's own `files` list), downloaded into raw/ and
checked against their md5 or sha256."""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.sources.base import Fetched, Fixture, Source, prune
from vlmgrid.errors import VlmgridError


def _file_hash(path: Path, algorithm: str) -> str:
    if algorithm == "sha256":
        return fileio.sha256_file(path)
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _safe_relative(name: Any, label: str, what: str) -> str:
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in Path(name).parts:
        raise VlmgridError(f"{label}: {what} {name!r} must be a relative path inside raw/; fix the source")
    return posixpath.normpath(name)


def download_url(url: str, dest: Path) -> None:
    """Stream `url` into `dest` (the caller verifies the checksum). Tests replace this function."""
    import requests

    with requests.get(url, stream=True, timeout=60) as response:
        response.raise_for_status()
        with open(dest, "wb") as handle:
            for block in response.iter_content(1 << 20):
                handle.write(block)


def _url_files(kind: BenchmarkKind, source: dict) -> list[Mapping[str, str]]:
    return list(source["files"]) if "files" in source else list(kind.url_files)


def _check_url(kind: BenchmarkKind, source: dict, label: str) -> None:
    if "files" in source and (not isinstance(source["files"], list) or not source["files"]):
        raise VlmgridError(
            f"{label}: source key `files` must be a non-empty list of {{url, md5 or sha256, name}}; fix the "
            "config"
        )
    files = _url_files(kind, source)
    if not files:
        raise VlmgridError(
            f"{label}: {kind.name} has no published URL list; set `files` in the source, or use another "
            "source type"
        )
    for spec in files:
        if (
            not isinstance(spec, Mapping)
            or not isinstance(spec.get("url"), str)
            or not (spec.get("md5") or spec.get("sha256"))
        ):
            raise VlmgridError(
                f"{label}: every entry of `files` needs `url`, `name` and `md5` or `sha256`, not {spec!r}; "
                "fix the config"
            )
        extra = set(spec) - {"url", "md5", "sha256", "name"}
        if extra:
            raise VlmgridError(
                f"{label}: `files` entry key `{sorted(extra)[0]}` is unknown; valid keys: url, md5, sha256, "
                "name"
            )
        _safe_relative(spec.get("name"), label, "`files` name")


def _fetch_url(
    kind: BenchmarkKind, source: dict, bench_dir: Path, label: str, fixture: Fixture | None
) -> Fetched:
    import requests

    raw_dir = bench_dir / "raw"
    names = set()
    for spec in _url_files(kind, source):
        name = _safe_relative(spec["name"], label, "`files` name")
        names.add(name)
        algorithm = "sha256" if spec.get("sha256") else "md5"
        expected = str(spec[algorithm]).lower()
        dest = raw_dir / name
        if dest.is_file() and _file_hash(dest, algorithm) == expected:
            continue  # left by an interrupted prepare, and verified
        with fileio.atomic_path(dest) as tmp:
            try:
                download_url(spec["url"], tmp)
            except requests.RequestException as exc:
                raise VlmgridError(
                    f"{dest}: could not download {spec['url']} ({exc}); check the network, or download the "
                    "files by hand into a folder and point a `local` source at it"
                ) from None
            got = _file_hash(tmp, algorithm)
            if got != expected:
                raise VlmgridError(
                    f"{dest}: the download from {spec['url']} has {algorithm} {got}, expected {expected}; "
                    "the download is damaged or the file changed upstream: run prepare again, or fix "
                    "`files` in the source"
                )
    prune(raw_dir, names)
    return Fetched(raw_dir, external=False)


SOURCE = Source("url", ("files", "expected_items"), _check_url, _fetch_url)
