"""Where a benchmark's raw files come from: a fixture generator, URLs with checksums, the HF hub at a pinned
revision, or a local folder that already holds them in the published layout.

Source settings (the `source:` entry of a benchmark in the config), by type:
  fixture: seed (int, 0), size (int, per class / per split / total), classes (int, classification only),
           corrupt (int, 0: images written deliberately unreadable), and the kind's own fixture settings
           (the keys of its fixture_defaults: cvqa's hidden_labels)
  url:     files (optional list of {url, md5 or sha256, name}; default: the kind's published files)
  hf_hub:  revision (required: a commit, or a branch or tag, which prepare resolves to the commit it reads and
           records in the manifest), repo (default: the kind's repo), config, split (only the kind's own
           config/split are supported; they may be written out for clarity)
  local:   path (a folder holding the raw files; read in place, hashed into the manifest by absolute path;
           an edited, added or removed raw file is a new version of the data, which prepare prepares again)
Every source but the fixture may also say `expected_items`: the item count of the copy it points at, for a
published variant of the benchmark (LLaVA's POPE label files hold 8,910 questions, POPE's own 9,000); without
it prepare checks the kind's published count.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import posixpath
import re
import shutil
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Mapping

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import BENCHMARKS, BenchmarkKind
from vlmgrid.errors import VlmgridError
from vlmgrid.hub import hub_errors
from vlmgrid.registry import Registry, closest

log = logging.getLogger(__name__)
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Fetched:
    raw_dir: Path
    external: bool  # True: raw_dir lies outside the benchmark folder (a local source)
    resolved_revision: str | None = None  # hf_hub: the commit the files were read at


@dataclass(frozen=True)
class Source:
    name: str
    keys: tuple[str, ...]
    check: Callable[[BenchmarkKind, dict, str], None]
    fetch: Callable[[BenchmarkKind, dict, Path, str], Fetched]


SOURCES: Registry[Source] = Registry("source type")


def check_source(kind: BenchmarkKind, source: Any, label: str) -> dict:
    """Validate a source entry (type, keys, values); returns it as a plain dict."""
    if not isinstance(source, Mapping):
        raise VlmgridError(f"{label}: `source` must be a mapping with a `type` ({', '.join(SOURCE_TYPES)}); fix the config")
    source = dict(source)
    kind_of_source = source.get("type")
    if kind_of_source not in SOURCES:
        raise VlmgridError(
            f"{label}: source type {kind_of_source!r} is unknown{closest(str(kind_of_source), SOURCES)}; "
            f"use one of {', '.join(SOURCE_TYPES)}"
        )
    spec = SOURCES.get(kind_of_source)
    keys = ("type",) + spec.keys
    if kind_of_source == "fixture":  # a kind's own fixture settings (CVQA's hidden_labels) are valid too
        keys += tuple(key for key in kind.fixture_defaults if key not in keys)
    if kind_of_source == "fixture" and kind.protocol != "classification":
        keys = tuple(k for k in keys if k != "classes")
    for key in source:
        if key not in keys:
            raise VlmgridError(
                f"{label}: source key `{key}` is not valid for a {kind_of_source} source of a {kind.name} "
                f"benchmark{closest(str(key), keys)}; valid keys: {', '.join(keys)}"
            )
    if "expected_items" in source:
        count = source["expected_items"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise VlmgridError(f"{label}: source key `expected_items` must be a positive whole number (the item count of the copy), not {count!r}; fix the config")
    spec.check(kind, source, label)
    return source


def expected_items(kind: BenchmarkKind, source: Mapping[str, Any]) -> int | None:
    """The item count a prepared copy must have: the source's `expected_items`, else the kind's published count;
    None for a fixture (a stand-in of any size) or a kind without a published count."""
    if source.get("type") == "fixture":
        return None
    return source.get("expected_items") or kind.expected_count or None


def data_settings(source: Mapping[str, Any]) -> dict:
    """The source settings that decide the data (all but `expected_items`, which only checks it)."""
    return {key: value for key, value in source.items() if key != "expected_items"}


def fetch_source(kind: BenchmarkKind, source: dict, bench_dir: Path, label: str) -> Fetched:
    return SOURCES.get(source["type"]).fetch(kind, source, Path(bench_dir), label)


def _prune(raw_dir: Path, keep: set[str]) -> None:
    """Remove files under raw_dir that are not in `keep` (relative posix paths), then empty folders."""
    if not raw_dir.is_dir():
        return
    for path in sorted(raw_dir.rglob("*"), reverse=True):
        rel = path.relative_to(raw_dir).as_posix()
        if path.is_file() or path.is_symlink():
            if rel not in keep:
                path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


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


# ---------------------------------------------------------------------------------------------- fixture

def _check_fixture(kind: BenchmarkKind, source: dict, label: str) -> None:
    for key in ("seed", "size", "classes", "corrupt"):
        if key in source:
            value = source[key]
            minimum = 0 if key in ("seed", "corrupt") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise VlmgridError(f"{label}: source key `{key}` must be an integer >= {minimum}, not {value!r}; fix the config")


def _fetch_fixture(kind: BenchmarkKind, source: dict, bench_dir: Path, label: str) -> Fetched:
    settings = {**kind.fixture_defaults, **{k: v for k, v in source.items() if k != "type"}}
    raw_dir = bench_dir / "raw"
    kind.write_fixture(raw_dir, settings)
    return Fetched(raw_dir, external=False)


# ---------------------------------------------------------------------------------------------- url

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
        raise VlmgridError(f"{label}: source key `files` must be a non-empty list of {{url, md5 or sha256, name}}; fix the config")
    files = _url_files(kind, source)
    if not files:
        raise VlmgridError(f"{label}: {kind.name} has no published URL list; set `files` in the source, or use another source type")
    for spec in files:
        if not isinstance(spec, Mapping) or not isinstance(spec.get("url"), str) or not (spec.get("md5") or spec.get("sha256")):
            raise VlmgridError(f"{label}: every entry of `files` needs `url`, `name` and `md5` or `sha256`, not {spec!r}; fix the config")
        extra = set(spec) - {"url", "md5", "sha256", "name"}
        if extra:
            raise VlmgridError(f"{label}: `files` entry key `{sorted(extra)[0]}` is unknown; valid keys: url, md5, sha256, name")
        _safe_relative(spec.get("name"), label, "`files` name")


def _fetch_url(kind: BenchmarkKind, source: dict, bench_dir: Path, label: str) -> Fetched:
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
                    f"{dest}: could not download {spec['url']} ({exc}); check the network, or download the files "
                    f"by hand into a folder and point a `local` source at it"
                ) from None
            got = _file_hash(tmp, algorithm)
            if got != expected:
                raise VlmgridError(
                    f"{dest}: the download from {spec['url']} has {algorithm} {got}, expected {expected}; the download "
                    f"is damaged or the file changed upstream: run prepare again, or fix `files` in the source"
                )
    _prune(raw_dir, names)
    return Fetched(raw_dir, external=False)


# ---------------------------------------------------------------------------------------------- hf_hub

def _hub_settings(kind: BenchmarkKind, source: dict) -> tuple[str, str]:
    return source.get("repo") or kind.hub["repo"], source["revision"]


def _check_hub(kind: BenchmarkKind, source: dict, label: str) -> None:
    if not kind.hub:
        raise VlmgridError(f"{label}: {kind.name} has no hub copy; use a {', '.join(t for t in SOURCE_TYPES if t != 'hf_hub')} source")
    revision = source.get("revision")
    if not isinstance(revision, str) or not revision.strip():
        raise VlmgridError(
            f"{label}: source key `revision` is required for an hf_hub source; pin a commit or tag "
            f"(e.g. revision: {kind.hub['revision']})"
        )
    if "repo" in source and (not isinstance(source["repo"], str) or source["repo"].count("/") != 1):
        raise VlmgridError(f"{label}: source key `repo` must look like owner/name, not {source['repo']!r}; fix the config")
    for key in ("config", "split"):
        if key in source and source[key] != kind.hub.get(key):
            raise VlmgridError(
                f"{label}: source key `{key}: {source[key]}` is not supported; {kind.name} reads "
                f"{key} {kind.hub.get(key)!r} of the hub copy: remove the key or set it to that"
            )


def _hub_errors(repo: str, revision: str, label: str):
    return hub_errors(repo, revision, label, repo_type="dataset", alternative="point a `local` source at a copy")


def hub_commit(repo: str, revision: str) -> str:
    """The commit sha that `revision` (a commit, branch or tag) of the hub dataset `repo` names now."""
    import huggingface_hub

    return huggingface_hub.HfApi().dataset_info(repo, revision=revision).sha


def hub_listing(repo: str, revision: str, folders: set[str]) -> dict[str, str | None]:
    """{path: LFS sha256 or None} for the files under `folders` ("" = the repo root) at `revision`."""
    import huggingface_hub

    api = huggingface_hub.HfApi()
    listing: dict[str, str | None] = {}
    for folder in sorted(folders):
        for item in api.list_repo_tree(repo, path_in_repo=folder or None, recursive=False, repo_type="dataset", revision=revision):
            if isinstance(item, huggingface_hub.hf_api.RepoFile):
                listing[item.path] = item.lfs.sha256 if item.lfs else None
    return listing


def hub_download(repo: str, revision: str, filename: str, raw_dir: Path) -> Path:
    import huggingface_hub

    return Path(
        huggingface_hub.hf_hub_download(
            repo_id=repo, filename=filename, repo_type="dataset", revision=revision, local_dir=raw_dir
        )
    )


def _fetch_hub(kind: BenchmarkKind, source: dict, bench_dir: Path, label: str) -> Fetched:
    repo, revision = _hub_settings(kind, source)
    raw_dir = bench_dir / "raw"
    with _hub_errors(repo, revision, label):
        # Every read below is at this commit, so a branch that moves mid-prepare cannot mix two versions.
        commit = hub_commit(repo, revision)
        listing = hub_listing(repo, commit, {posixpath.dirname(p) for p in kind.raw_files})
    if not COMMIT_SHA.fullmatch(revision):
        log.warning(
            "%s: revision %r of %s is not a commit, so the data is not pinned; to pin it to the commit read "
            "now, set `revision: %s` in the source", label, revision, repo, commit,
        )
    wanted: dict[str, str | None] = {}
    for pattern in kind.raw_files:
        matches = {path: sha for path, sha in listing.items() if fnmatch(path, pattern)}
        if not matches:
            raise VlmgridError(
                f"{label}: the hub dataset {repo} at revision {revision} has no file matching {pattern}; check "
                f"`revision` and `repo` (the layout differs there)"
            )
        wanted.update(matches)
    for path, sha in sorted(wanted.items()):
        dest = raw_dir / path
        if sha and dest.is_file() and fileio.sha256_file(dest) == sha:
            continue  # left by an interrupted prepare, and verified
        with _hub_errors(repo, revision, label):
            got_path = hub_download(repo, commit, path, raw_dir)
        if got_path.resolve() != dest.resolve():
            shutil.move(str(got_path), dest)
        if sha and fileio.sha256_file(dest) != sha:
            dest.unlink()
            raise VlmgridError(
                f"{dest}: the download of {path} from {repo}@{revision} does not match the hub's sha256 {sha}; the "
                f"download is damaged: run prepare again"
            )
    shutil.rmtree(raw_dir / ".cache", ignore_errors=True)  # huggingface_hub's local_dir bookkeeping
    _prune(raw_dir, set(wanted))
    return Fetched(raw_dir, external=False, resolved_revision=commit)


# ---------------------------------------------------------------------------------------------- local

def _check_local(kind: BenchmarkKind, source: dict, label: str) -> None:
    path = source.get("path")
    if not isinstance(path, str) or not path:
        raise VlmgridError(f"{label}: source key `path` is required for a local source; set it to the folder holding the raw files")


def _fetch_local(kind: BenchmarkKind, source: dict, bench_dir: Path, label: str) -> Fetched:
    raw_dir = local_folder(source)
    if not raw_dir.is_dir():
        raise VlmgridError(f"{source['path']}: not a folder ({label}, local source `path`); point `path` at the folder holding the raw files")
    return Fetched(raw_dir, external=True)


def local_folder(source: Mapping[str, Any]) -> Path:
    """The folder a local source reads in place (its `path`, absolute)."""
    return Path(str(source["path"])).expanduser().resolve()


def local_raw_files(kind: BenchmarkKind, raw_dir: Path) -> list[Path]:
    """The files under raw_dir that the kind reads (its `raw_files` patterns, matched as the adapters match
    them), sorted; [] when raw_dir is not a folder. Prepare hashes exactly these into the manifest."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        return []
    found: set[Path] = set()
    for pattern in kind.raw_files:
        found.update(Path(p) for p in glob.glob(glob.escape(str(raw_dir)) + "/" + pattern) if Path(p).is_file())
    return sorted(found)


def source_stamp(settings: Mapping[str, Any]) -> dict:
    """What a benchmark's prepare reads from outside vlmgrid's own folders, in a form that changes when that does.

    For a `local` source: the folder and every file of it that the kind reads, as [path relative to the folder,
    size in bytes, modification time in ns], so that an edited, added or removed raw file changes the stamp
    (the workflows give it to prepare as an input: Snakemake as a param, DVC as a stamp file). The files are
    only listed, never read: this runs on every workflow start. Any other source is stamped by its type alone,
    as its settings (a param of prepare already) decide its files, and prepare checks them itself.
    """
    source = settings.get("source") if isinstance(settings, Mapping) else None
    kind_name = settings.get("kind") if isinstance(settings, Mapping) else None
    if not isinstance(source, Mapping) or source.get("type") != "local" or not source.get("path"):
        return {"type": source.get("type") if isinstance(source, Mapping) else None}
    raw_dir = local_folder(source)
    if kind_name not in BENCHMARKS:
        return {"type": "local", "path": str(raw_dir), "files": []}
    files = []
    for path in local_raw_files(BENCHMARKS.get(kind_name), raw_dir):
        try:
            stat = path.stat()
        except OSError:  # removed while listed: the next run sees it gone
            continue
        files.append([path.relative_to(raw_dir).as_posix(), stat.st_size, stat.st_mtime_ns])
    return {"type": "local", "path": str(raw_dir), "files": files}


def source_fingerprint(settings: Mapping[str, Any]) -> str:
    """sha256 of source_stamp(settings): one short value that changes when a local source's files do."""
    return fileio.sha256_json(source_stamp(settings))


for _source in (
    Source("fixture", ("seed", "size", "classes", "corrupt"), _check_fixture, _fetch_fixture),
    Source("url", ("files", "expected_items"), _check_url, _fetch_url),
    Source("hf_hub", ("repo", "revision", "config", "split", "expected_items"), _check_hub, _fetch_hub),
    Source("local", ("path", "expected_items"), _check_local, _fetch_local),
):
    SOURCES.register(_source.name, _source)

SOURCE_TYPES: tuple[str, ...] = ("fixture", "url", "hf_hub", "local")


def write_source_stamps(benchmarks: Mapping[str, Mapping[str, Any]], folder: Path) -> list[str]:
    """Write `<name>.json` (source_stamp, with the benchmark's name) into `folder` for each benchmark, and remove
    any other stamp there; a stamp whose text is unchanged is not rewritten. Returns the names written."""
    folder = Path(folder)
    written = []
    for name, settings in benchmarks.items():
        path = folder / f"{name}.json"
        # one file entry a line: a stamp of a big folder stays readable, and a diff shows what changed
        stamp = {"benchmark": name, **source_stamp(settings)}
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
