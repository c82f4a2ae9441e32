"""Checkpoints read where they lie: a local folder or file checked and listed, and its files' hashes remembered.

A model whose source is read in place (`source: {type: local}`, or a hub repo in the Hugging Face cache) is
never copied: `vlmgrid fetch-model` records its location and its files' hashes in the model's manifest, and
inference loads it from there. Hashing a 140 GB checkpoint takes minutes, so each file's sha256 is remembered
under the cache folder (vlmgrid.cache) by its resolved path, size and modification time, as DVC remembers its
own: a file is read again only when one of those changed.

The layouts checked here:
- a transformers checkpoint folder (`hf`): config.json and weights, either one file (model.safetensors,
  pytorch_model.bin) or shards named by an index (model.safetensors.index.json, pytorch_model.bin.index.json);
  every file at the folder's top level belongs to it (config, tokenizer, processor, chat template);
- an open_clip checkpoint (`open_clip`): a folder in open_clip's hub layout (open_clip_config.json and a
  weights file), or one weights file (a training checkpoint `epoch_32.pt`, which may hold a `state_dict` key
  and DDP's `module.` prefixes, as open_clip's own loader takes it) with its architecture's name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from vlmgrid import cache
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file, sha256_json, write_json

HASHES_DIR = "file-hashes"  # under the cache folder: one small JSON file per hashed file

HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
HF_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
OPEN_CLIP_CONFIG = "open_clip_config.json"
OPEN_CLIP_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt")


@dataclass(frozen=True)
class Checkpoint:
    """A model's weights where they lie: `location` (the folder, or the one weights file, that loading reads)
    and its files by name (relative to the folder; a single file by its own name)."""

    location: Path
    files: dict[str, Path]

    def hashes(self) -> dict[str, str]:
        return file_hashes(self.files)


# ---------------------------------------------------------------------------------------------- hashes

def _entry_path(path: Path) -> Path:
    key = sha256_json(str(path))
    return cache.cache_root() / HASHES_DIR / key[:2] / f"{key}.json"


def file_hash(path: Path) -> str:
    """sha256 of the file, read only when its (resolved path, size, mtime) is not remembered in the cache."""
    path = Path(path).resolve()
    stat = path.stat()
    entry_path = _entry_path(path)
    try:
        entry = json.loads(entry_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        entry = {}
    if entry.get("path") == str(path) and entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns:
        return entry["sha256"]
    digest = sha256_file(path)
    try:
        write_json(entry_path, {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                "sha256": digest})
    except OSError:  # a read-only cache folder only costs hashing again next time
        pass
    return digest


def file_hashes(files: Mapping[str, Path]) -> dict[str, str]:
    """{name: sha256} of the files, in name order (see file_hash)."""
    return {name: file_hash(path) for name, path in sorted(files.items())}


def file_stamp(files: Mapping[str, Path]) -> list[list]:
    """[name, size, mtime_ns] of each file, never read: what a workflow watches to see the checkpoint change."""
    entries = []
    for name, path in sorted(files.items()):
        try:
            stat = Path(path).stat()
        except OSError:
            continue
        entries.append([name, stat.st_size, stat.st_mtime_ns])
    return entries


# ---------------------------------------------------------------------------------------------- layouts

def local_path(source: Mapping) -> Path:
    """The source's `path`, with ~ expanded and made absolute."""
    return Path(os.path.expanduser(str(source["path"]))).absolute()


def _top_level_files(folder: Path) -> dict[str, Path]:
    return {path.name: path for path in sorted(folder.iterdir()) if path.is_file() and not path.name.startswith(".")}


def _shards(folder: Path, index_name: str) -> list[str]:
    """The shard files an index names (its weight_map's values), checked to be there."""
    index_path = folder / index_name
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise VlmgridError(f"{index_path} is not a shard index (a JSON object with a weight_map); restore it "
                           f"from the checkpoint's release") from None
    missing = [name for name in shards if not (folder / name).is_file()]
    if missing:
        more = f" and {len(missing) - 1} more of its {len(shards)} shards" if len(missing) > 1 else ""
        raise VlmgridError(f"{folder / missing[0]}{more} named by {index_path} is missing; copy the missing shard "
                           f"files into {folder}")
    return shards


def _folder(path: Path, what: str) -> Path:
    if not path.exists():
        raise VlmgridError(f"{path} does not exist; set the model's source path to the folder of its {what}")
    return path


def hf_folder(source: Mapping) -> Checkpoint:
    """A transformers checkpoint folder (`source: {type: local, path}`), checked: its config and its weights
    (every shard its index names) are there."""
    folder = _folder(local_path(source), "transformers checkpoint (config.json and weights)")
    if not folder.is_dir():
        raise VlmgridError(f"{folder} is a file, but an hf model's local source is a checkpoint folder (config.json "
                           f"and weights, as save_pretrained writes it); set path to its folder")
    if not (folder / "config.json").is_file():
        raise VlmgridError(f"{folder} has no config.json; point path at the folder save_pretrained wrote")
    for index_name in HF_INDEXES:
        if (folder / index_name).is_file():
            _shards(folder, index_name)
            break
    else:
        if not any((folder / name).is_file() for name in HF_WEIGHTS):
            raise VlmgridError(f"{folder} has no weights ({', '.join(HF_WEIGHTS + HF_INDEXES)}); copy the "
                               f"checkpoint's weight files into it")
    return Checkpoint(folder, _top_level_files(folder))


def open_clip_checkpoint(source: Mapping) -> Checkpoint:
    """An open_clip checkpoint (`source: {type: local, path[, arch]}`), checked: a folder in open_clip's hub
    layout with a weights file, or one weights file with its architecture (`arch`)."""
    path = _folder(local_path(source), "open_clip checkpoint (open_clip_config.json and weights, or one file)")
    if path.is_file():
        if not source.get("arch"):
            raise VlmgridError(f"{path} is a single weights file, which does not say its architecture; set the "
                               f"source's arch to its open_clip model name (e.g. arch: ViT-B-32)")
        return Checkpoint(path, {path.name: path})
    files = _top_level_files(path)
    if OPEN_CLIP_CONFIG not in files:
        raise VlmgridError(f"{path} has no {OPEN_CLIP_CONFIG}; point path at a folder in open_clip's hub layout, or "
                           f"at the weights file itself with the source's arch")
    if not any(name.endswith(OPEN_CLIP_WEIGHT_SUFFIXES) for name in files):
        raise VlmgridError(f"{path} has no weights (a {', '.join(OPEN_CLIP_WEIGHT_SUFFIXES)} file); copy the "
                           f"checkpoint's weights file into it")
    return Checkpoint(path, files)
