"""The fetch-model stage: a model's weights on disk, their hashes recorded in data/models/<model>/model.json.

A checkpoint read in place (a `local` source, a hub repo in the Hugging Face cache; the backend's `in_place`)
is never copied: the manifest records its location and its files' hashes (remembered by size and modification
time, vlmgrid.models.checkpoints), and inference loads it from there; a changed local checkpoint is recorded
again, so the cells of that model run again. Any other source is downloaded or built into data/models/<model>/
by the backend; a `source: {type: fixture}` model is a tiny test model, whose writer
(vlmgrid.fixtures.models.MODEL_FIXTURES, by backend name) this stage hands to the backend, which never imports
the fixtures itself. The manifest (MANIFEST) is written last, so a present manifest means a complete fetch.
Nothing is ever written into a checkpoint read in place, and nothing is removed from data/models/<model>/ but
the files an earlier fetch wrote there (as its manifest records them).
Also here: the stamp a workflow watches to see a local checkpoint change (model_stamp), and
`vlmgrid make-tiny-models` (write_tiny_models), the tiny checkpoints written into a folder of one's own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vlmgrid import __version__, paths
from vlmgrid.cellrun.cell import InPlace
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import file_hashes, file_stamp
from vlmgrid.fileio import remove_stale_temporaries, sha256_file, sha256_json, write_json
from vlmgrid.models import BACKENDS
from vlmgrid.models.base import MANIFEST
from vlmgrid.models.checkpoints import Checkpoint, check_files, local_path

log = logging.getLogger(__name__)

# What fetch-model wrote into a model's folder, beside model.json: Snakemake removes a job's declared output
# (model.json) before it runs the job, and the fetch that follows must still tell its own files from a user's.
WRITTEN = ".fetched.json"

__all__ = [
    "MANIFEST",
    "InPlace",
    "fetch",
    "fetch_model",
    "in_place_weights",
    "model_stamp",
    "write_tiny_models",
]


def _up_to_date(manifest_path: Path, settings: dict) -> dict | None:
    manifest = _read_manifest(manifest_path)
    if not _same(manifest, settings):
        return None  # settings that do not change the weights (batch size, precision) keep them
    for name, digest in manifest["files"].items():
        path = manifest_path.parent / name
        if not path.is_file() or sha256_file(path) != digest:
            raise VlmgridError(
                f"{path} does not match its manifest {manifest_path}; delete {manifest_path.parent} "
                f"and run `vlmgrid fetch-model {manifest['model']}` again"
            )
    return manifest


def _fixture_for(settings: dict):
    """The tiny-model writer of a `source: {type: fixture}` model; None for any other source."""
    if (settings.get("source") or {}).get("type") != "fixture":
        return None
    from vlmgrid.fixtures.models import MODEL_FIXTURES

    return MODEL_FIXTURES.get(settings["backend"])


def _read_manifest(manifest_path: Path) -> dict | None:
    """The manifest fetch-model wrote; None when there is none, or it is damaged (then it is fetched
    again)."""
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else None
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _refuse_overlap(name: str, model_dir: Path, location: Path) -> None:
    """A checkpoint read in place must lie apart from the model's folder, which fetch-model writes (its
    record) and DVC keeps as an output: nothing is ever written into a checkpoint."""
    folder, checkpoint = model_dir.resolve(), location.resolve()
    if _inside(checkpoint, folder) or _inside(folder, checkpoint):
        raise VlmgridError(
            f"model {name}: its checkpoint {location} lies in {model_dir} (or holds it), the folder "
            f"fetch-model writes the model's record into, and nothing is ever written into a "
            f"checkpoint; move the checkpoint elsewhere (e.g. checkpoints/{name}) and set the "
            f"model's source path there"
        )


def _remove_own_files(model_dir: Path) -> None:
    """Remove what an earlier fetch wrote into model_dir: the files its manifest (or, where that is gone, its
    record of the files it wrote) names, each only while it still has the bytes recorded, then both records
    and the folders left empty. Nothing else is ever removed."""
    remove_stale_temporaries(model_dir)  # what a killed write of fetch's own left
    manifest_path = model_dir / MANIFEST
    manifest = _read_manifest(manifest_path) or _read_manifest(model_dir / WRITTEN)
    if manifest is not None and "location" not in manifest:  # a record in place names files elsewhere
        for file_name, digest in manifest["files"].items():
            path = model_dir / str(file_name)
            if (
                _inside(path.resolve(), model_dir.resolve())
                and path.is_file()
                and sha256_file(path) == digest
            ):
                path.unlink()
    manifest_path.unlink(missing_ok=True)
    (model_dir / WRITTEN).unlink(missing_ok=True)
    for folder in sorted(
        (path for path in model_dir.rglob("*") if path.is_dir() and not path.is_symlink()),
        key=lambda path: len(path.parts),
        reverse=True,
    ):
        if not any(folder.iterdir()):
            folder.rmdir()


def _in_place_manifest(name: str, settings: dict, checkpoint: Checkpoint) -> dict:
    hashes = checkpoint.hashes()
    return {
        "model": name,
        "backend": settings["backend"],
        "source": settings.get("source"),
        "location": str(checkpoint.location),
        "files": hashes,
        "fingerprint": sha256_json(hashes),
        "vlmgrid_version": __version__,
    }


def _same(manifest: dict | None, settings: dict) -> bool:
    return (
        manifest is not None
        and manifest.get("source") == settings.get("source")
        and manifest.get("backend") == settings["backend"]
    )


def _recorded_hub_checkpoint(manifest: dict) -> bool:
    """Whether a hub snapshot recorded in place is still whole in the cache (so the hub is not asked
    again)."""
    location = Path(manifest["location"])
    present = {name: location / name for name in manifest["files"] if (location / name).is_file()}
    hashes = file_hashes(present)  # one warning, not one a file, where the cache cannot be written
    for name, digest in manifest["files"].items():
        path = location / name
        if hashes.get(name) != digest:
            raise VlmgridError(
                f"{path} does not match the manifest {manifest['model']} was fetched with; delete it "
                f"from the Hugging Face cache and run `vlmgrid fetch-model {manifest['model']}` again"
            )
    return True


def _fetch_in_place(name: str, settings: dict, model_dir: Path, backend) -> dict | None:
    """The manifest of a checkpoint read where it lies, written only when it changed; None when the source
    is not read in place."""
    manifest_path = model_dir / MANIFEST
    old = _read_manifest(manifest_path)
    source_type = (settings.get("source") or {}).get("type")
    if (
        _same(old, settings)
        and "location" in old
        and source_type != "local"
        and _recorded_hub_checkpoint(old)
    ):
        return old  # a hub snapshot already in the cache: no request to the hub
    checkpoint = backend.in_place(settings)
    if checkpoint is None:
        return None
    _refuse_overlap(name, model_dir, checkpoint.location)
    check_files(checkpoint)
    manifest = _in_place_manifest(name, settings, checkpoint)
    if _same(old, settings) and old.get("location") == manifest["location"]:
        if old.get("files") == manifest["files"]:
            return old
        changed = sorted(set(old.get("files", {}).items()) ^ set(manifest["files"].items()))
        log.info(
            "model %s: its checkpoint %s changed since it was fetched (%s, %d file(s) in all); recording it "
            "again",
            name,
            checkpoint.location,
            changed[0][0],
            len({entry[0] for entry in changed}),
        )
    if model_dir.exists():
        _remove_own_files(model_dir)  # a copy an earlier source left there
    write_json(manifest_path, manifest)
    return manifest


def in_place_weights(name: str, settings: dict, model_dir: Path) -> InPlace | None:
    """The in-place checkpoint fetch-model recorded for the model (None when its weights are in model_dir). A
    local checkpoint is checked against the record (by sizes and times, hashing only what changed): one that
    changed since is an error, not a run on other weights than the record names."""
    manifest = _read_manifest(Path(model_dir) / MANIFEST)
    if manifest is None or "location" not in manifest or not _same(manifest, settings):
        return None
    if (settings.get("source") or {}).get("type") == "local":
        checkpoint = BACKENDS.get(settings["backend"]).in_place(settings)
        if checkpoint.hashes() != manifest["files"]:
            raise VlmgridError(
                f"model {name}: its checkpoint {checkpoint.location} changed since `vlmgrid "
                f"fetch-model {name}` recorded it; run that again (snakemake and dvc repro do)"
            )
    return InPlace(Path(manifest["location"]), manifest["fingerprint"])


def model_stamp(settings: Mapping[str, Any]) -> dict:
    """What a model's fetch reads from outside vlmgrid's own folders, in a form that changes when that does:
    for a `local` source its path and each of its checkpoint's files as [name, size in bytes, sha256], each
    read only when its size or time changed since it was hashed (file_stamp), so that a touched file with the
    same bytes changes nothing (the workflows run fetch-model again when it changes: Snakemake as a param, DVC
    as a stamp file); any other source by its type alone, as its settings (a param of fetch-model already)
    decide its files."""
    source = settings.get("source") if isinstance(settings, Mapping) else None
    if not isinstance(source, Mapping) or source.get("type") != "local" or not source.get("path"):
        return {"type": source.get("type") if isinstance(source, Mapping) else None}
    try:
        files = BACKENDS.get(settings["backend"]).in_place(dict(settings)).files
    except VlmgridError:  # not (yet) a whole checkpoint: fetch-model says what is missing
        files = {}
    return {"type": "local", "path": str(local_path(source)), "files": file_stamp(files)}


def fetch_model(name: str, settings: dict, model_dir: Path) -> dict:
    """Build or download the model's files (nothing is rewritten when they are already there and intact), or
    record a checkpoint read in place."""
    manifest = _fetch_in_place(name, settings, Path(model_dir), BACKENDS.get(settings["backend"]))
    if manifest is not None:
        return manifest
    manifest_path = model_dir / MANIFEST
    manifest = _up_to_date(manifest_path, settings)
    if manifest is not None:
        return manifest
    if model_dir.exists():
        _remove_own_files(model_dir)
        left = sorted(
            path.relative_to(model_dir).as_posix() for path in model_dir.rglob("*") if not path.is_dir()
        )
        if left:
            more = f" and {len(left) - 1} more file(s)" if len(left) > 1 else ""
            raise VlmgridError(
                f"{model_dir} holds {left[0]}{more} that fetch-model did not write (or that changed "
                f"since); it removes only what it wrote, so move them out of {model_dir} (a "
                f"checkpoint of your own is read where it lies: give the model a local source with "
                f"its path) or delete them, and run `vlmgrid fetch-model {name}` again"
            )
    model_dir.mkdir(parents=True, exist_ok=True)
    backend = BACKENDS.get(settings["backend"])
    files = backend.fetch(settings, model_dir, fixture=_fixture_for(settings))
    hashes = {file_name: sha256_file(path) for file_name, path in sorted(files.items())}
    write_json(model_dir / WRITTEN, {"files": hashes})
    manifest = {
        "model": name,
        "backend": settings["backend"],
        "source": settings.get("source"),
        "files": hashes,
        "fingerprint": sha256_json(hashes),
        "vlmgrid_version": __version__,
    }
    write_json(manifest_path, manifest)  # last, so a present manifest means a complete fetch
    return manifest


def fetch(config: Config, model: str) -> dict:
    """`vlmgrid fetch-model`: the config's model fetched into data/models/<model>/; returns its manifest."""
    manifest = fetch_model(model, config.model(model), paths.model_dir(config.data_dir, model))
    log.info("%s: %d file(s), fingerprint %s", model, len(manifest["files"]), manifest["fingerprint"][:12])
    return manifest


def write_tiny_models(out: Path, families: Sequence[str] | None = None, seed: int = 0) -> None:
    """`vlmgrid make-tiny-models`: a tiny checkpoint of each transformers family (default: all) and a tiny
    open_clip model, one folder each under out."""
    from vlmgrid.fixtures.models.tiny_hf import FAMILIES, write_tiny_checkpoint
    from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip

    out = Path(out)
    for family in families or list(FAMILIES):
        write_tiny_checkpoint(family, out / family, seed=seed)
        log.info("wrote %s (transformers, %s)", out / family, family)
    write_tiny_open_clip(out / "open_clip", seed=seed)
    log.info("wrote %s (open_clip)", out / "open_clip")
