"""The fetch-model stage: put a model's weights under data/models/<model>/ and record their hashes."""

from __future__ import annotations

import shutil
from pathlib import Path

from vlmgrid import __version__
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file, sha256_json, write_json

MANIFEST = "model.json"


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


def fetch_model(name: str, settings: dict, model_dir: Path) -> dict:
    """Build or download the model's files (nothing is rewritten when they are already there and intact)."""
    from vlmgrid.models import BACKENDS

    manifest_path = model_dir / MANIFEST
    manifest = _up_to_date(manifest_path, settings)
    if manifest is not None:
        return manifest
    if model_dir.exists():
        shutil.rmtree(model_dir)
    model_dir.mkdir(parents=True)
    backend = BACKENDS.get(settings["backend"])
    files = backend.fetch(settings, model_dir)
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
