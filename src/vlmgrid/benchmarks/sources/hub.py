"""The `hf_hub` source: the kind's files of a hub dataset at a pinned revision, read at the commit it names
now, into raw/, each checked against the hub's sha256."""

from __future__ import annotations

import logging
import posixpath
import re
import shutil
from fnmatch import fnmatch
from pathlib import Path

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.benchmarks.sources.base import SOURCE_TYPES, Fetched, Fixture, Source, prune
from vlmgrid.errors import VlmgridError
from vlmgrid.hub import hub_errors

log = logging.getLogger(__name__)
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


def _hub_settings(kind: BenchmarkKind, source: dict) -> tuple[str, str]:
    return source.get("repo") or kind.hub["repo"], source["revision"]


def _check_hub(kind: BenchmarkKind, source: dict, label: str) -> None:
    if not kind.hub:
        raise VlmgridError(
            f"{label}: {kind.name} has no hub copy; use a "
            f"{', '.join(t for t in SOURCE_TYPES if t != 'hf_hub')} source"
        )
    revision = source.get("revision")
    if not isinstance(revision, str) or not revision.strip():
        raise VlmgridError(
            f"{label}: source key `revision` is required for an hf_hub source; pin a commit or tag "
            f"(e.g. revision: {kind.hub['revision']})"
        )
    if "repo" in source and (not isinstance(source["repo"], str) or source["repo"].count("/") != 1):
        raise VlmgridError(
            f"{label}: source key `repo` must look like owner/name, not {source['repo']!r}; fix the config"
        )
    for key in ("config", "split"):
        if key in source and source[key] != kind.hub.get(key):
            raise VlmgridError(
                f"{label}: source key `{key}: {source[key]}` is not supported; {kind.name} reads "
                f"{key} {kind.hub.get(key)!r} of the hub copy: remove the key or set it to that"
            )


def _hub_errors(repo: str, revision: str, label: str):
    return hub_errors(
        repo, revision, label, repo_type="dataset", alternative="point a `local` source at a copy"
    )


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
        for item in api.list_repo_tree(
            repo, path_in_repo=folder or None, recursive=False, repo_type="dataset", revision=revision
        ):
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


def _fetch_hub(
    kind: BenchmarkKind, source: dict, bench_dir: Path, label: str, fixture: Fixture | None
) -> Fetched:
    repo, revision = _hub_settings(kind, source)
    raw_dir = bench_dir / "raw"
    with _hub_errors(repo, revision, label):
        # Every read below is at this commit, so a branch that moves mid-prepare cannot mix two versions.
        commit = hub_commit(repo, revision)
        listing = hub_listing(repo, commit, {posixpath.dirname(p) for p in kind.hub_raw_files})
    if not COMMIT_SHA.fullmatch(revision):
        log.warning(
            "%s: revision %r of %s is not a commit, so the data is not pinned; to pin it to the commit read "
            "now, set `revision: %s` in the source",
            label,
            revision,
            repo,
            commit,
        )
    wanted: dict[str, str | None] = {}
    for pattern in kind.hub_raw_files:
        matches = {path: sha for path, sha in listing.items() if fnmatch(path, pattern)}
        if not matches:
            raise VlmgridError(
                f"{label}: the hub dataset {repo} at revision {revision} has no file matching {pattern}; "
                "check `revision` and `repo` (the layout differs there)"
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
                f"{dest}: the download of {path} from {repo}@{revision} does not match the hub's sha256 "
                f"{sha}; the download is damaged: run prepare again"
            )
    shutil.rmtree(raw_dir / ".cache", ignore_errors=True)  # huggingface_hub's local_dir bookkeeping
    prune(raw_dir, set(wanted))
    return Fetched(raw_dir, external=False, resolved_revision=commit)


SOURCE = Source("hf_hub", ("repo", "revision", "config", "split", "expected_items"), _check_hub, _fetch_hub)
