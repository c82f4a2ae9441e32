"""The fetch-model stage: put a model's weights under data/models/<model>/ and record their hashes.

The backend downloads or builds the files; a `source: {type: fixture}` model is a tiny test model, whose writer
(vlmgrid.fixtures.models.MODEL_FIXTURES, by backend name) this stage hands to the backend, which never imports
the fixtures itself. The manifest (MANIFEST) is written last, so a present manifest means a complete fetch.
Also here: `vlmgrid make-tiny-models` (write_tiny_models), the tiny checkpoints written into a folder of one's own.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Sequence

from vlmgrid import __version__, paths
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file, sha256_json, write_json
from vlmgrid.models import BACKENDS
from vlmgrid.models.base import MANIFEST

log = logging.getLogger(__name__)

__all__ = ["MANIFEST", "fetch", "fetch_model", "write_tiny_models"]


def _up_to_date(manifest_path: Path, settings: dict) -> dict | None:
    import json

    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("source") != settings.get("source") or manifest.get("backend") != settings["backend"]:
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


def fetch_model(name: str, settings: dict, model_dir: Path) -> dict:
    """Build or download the model's files (nothing is rewritten when they are already there and intact)."""
    manifest_path = model_dir / MANIFEST
    manifest = _up_to_date(manifest_path, settings)
    if manifest is not None:
        return manifest
    if model_dir.exists():
        shutil.rmtree(model_dir)
    model_dir.mkdir(parents=True)
    backend = BACKENDS.get(settings["backend"])
    files = backend.fetch(settings, model_dir, fixture=_fixture_for(settings))
    hashes = {file_name: sha256_file(path) for file_name, path in sorted(files.items())}
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
