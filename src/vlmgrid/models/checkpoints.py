"""Checkpoints read where they lie: a local folder or file checked and listed, and its files' hashes
remembered.

A model whose source is read in place (`source: {type: local}`, or a hub repo in the Hugging Face cache) is
never copied: `vlmgrid fetch-model` records its location and its files' hashes in the model's manifest, and
inference loads it from there. Hashing a 140 GB checkpoint takes minutes, so each file's sha256 is remembered
under the cache folder (vlmgrid.cache) by its resolved path, size and modification time, as DVC remembers its
own: a file is read again only when one of those changed.

The layouts checked here:
- a transformers checkpoint folder (`hf`): config.json and weights, either one file (model.safetensors,
  pytorch_model.bin) or shards named by an index (model.safetensors.index.json, pytorch_model.bin.index.json),
  which may lie in a subfolder but never outside the folder; every file at the folder's top level belongs to
  it (config, tokenizer, processor, chat template), and every shard the index names;
- an open_clip checkpoint (`open_clip`): a folder in open_clip's hub layout (open_clip_config.json and a
  weights file, and a transformers text tower's text_tower/config.json), or one weights file (a training
  checkpoint `epoch_32.pt`, which may hold a `state_dict` key and DDP's `module.` prefixes, as open_clip's own
  loader takes it) with its architecture's name.

Listing a checkpoint reads none of its files but a shard index. `check_files` (fetch-model) reads what is
cheap to read: every JSON file parses, a safetensors file's header covers the file, a PyTorch file starts as
one; `load_failure` says, in one sentence naming the file, why a checkpoint did not load at inference.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import file_hashes, unreadable

HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
HF_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
OPEN_CLIP_CONFIG = "open_clip_config.json"
OPEN_CLIP_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt")
OPEN_CLIP_TEXT_TOWER_CONFIG = "text_tower/config.json"  # a transformers text tower's config, read at load


@dataclass(frozen=True)
class Checkpoint:
    """A model's weights where they lie: `location` (the folder, or the one weights file, that loading reads)
    and its files by name (relative to the folder; a single file by its own name)."""

    location: Path
    files: dict[str, Path]

    def hashes(self) -> dict[str, str]:
        return file_hashes(self.files)


# ---------------------------------------------------------------------------------------------- layouts


def local_path(source: Mapping) -> Path:
    """The source's `path`, with ~ expanded and made absolute."""
    return Path(os.path.expanduser(str(source["path"]))).absolute()


def _top_level_files(folder: Path) -> dict[str, Path]:
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise unreadable(folder, exc) from exc
    return {path.name: path for path in entries if path.is_file() and not path.name.startswith(".")}


def _outside(name: str) -> bool:
    """Whether a file name an index holds points outside its folder (an absolute path, a `..`)."""
    return Path(name).is_absolute() or name.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", name)


def _shards(folder: Path, index_name: str) -> list[str]:
    """The shard files an index names (its weight_map's values), checked to lie in the folder and be there."""
    index_path = folder / index_name
    try:
        text = index_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(index_path, exc) from exc
    try:
        shards = sorted(set(json.loads(text)["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        shards = None
    if not shards or not all(isinstance(name, str) and name for name in shards):
        raise VlmgridError(
            f"{index_path} is not a shard index (a JSON object with a weight_map); restore it "
            f"from the checkpoint's release"
        )
    outside = next((name for name in shards if _outside(name)), None)
    if outside is not None:
        raise VlmgridError(
            f"{index_path} names the shard {outside!r}, outside the checkpoint folder {folder}; "
            f"a checkpoint's index names files inside its folder: restore the index from the "
            f"checkpoint's release, or move the shard into the folder and name it relative to it"
        )
    missing = [name for name in shards if not (folder / name).is_file()]
    if missing:
        more = f" and {len(missing) - 1} more of its {len(shards)} shards" if len(missing) > 1 else ""
        raise VlmgridError(
            f"{folder / missing[0]}{more} named by {index_path} is missing; copy the missing shard "
            f"files into {folder}"
        )
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
        raise VlmgridError(
            f"{folder} is a file, but an hf model's local source is a checkpoint folder (config.json "
            f"and weights, as save_pretrained writes it); set path to its folder"
        )
    if not (folder / "config.json").is_file():
        raise VlmgridError(f"{folder} has no config.json; point path at the folder save_pretrained wrote")
    files = _top_level_files(folder)
    for index_name in HF_INDEXES:
        if (folder / index_name).is_file():
            # a shard may lie in a subfolder: it is read at load, so it is hashed with the rest
            files.update({name: folder / name for name in _shards(folder, index_name)})
            break
    else:
        if not any((folder / name).is_file() for name in HF_WEIGHTS):
            raise VlmgridError(
                f"{folder} has no weights ({', '.join(HF_WEIGHTS + HF_INDEXES)}); copy the "
                f"checkpoint's weight files into it"
            )
    return Checkpoint(folder, files)


def open_clip_checkpoint(source: Mapping) -> Checkpoint:
    """An open_clip checkpoint (`source: {type: local, path[, arch]}`), checked: a folder in open_clip's hub
    layout with a weights file, or one weights file with its architecture (`arch`)."""
    path = _folder(
        local_path(source), "open_clip checkpoint (open_clip_config.json and weights, or one file)"
    )
    if path.is_file():
        if not source.get("arch"):
            raise VlmgridError(
                f"{path} is a single weights file, which does not say its architecture; set the "
                f"source's arch to its open_clip model name (e.g. arch: ViT-B-32)"
            )
        return Checkpoint(path, {path.name: path})
    files = _top_level_files(path)
    if OPEN_CLIP_CONFIG not in files:
        raise VlmgridError(
            f"{path} has no {OPEN_CLIP_CONFIG}; point path at a folder in open_clip's hub layout, or "
            f"at the weights file itself with the source's arch"
        )
    if not any(name.endswith(OPEN_CLIP_WEIGHT_SUFFIXES) for name in files):
        raise VlmgridError(
            f"{path} has no weights (a {', '.join(OPEN_CLIP_WEIGHT_SUFFIXES)} file); copy the "
            f"checkpoint's weights file into it"
        )
    if (path / OPEN_CLIP_TEXT_TOWER_CONFIG).is_file():  # read at load: hashed with the rest
        files[OPEN_CLIP_TEXT_TOWER_CONFIG] = path / OPEN_CLIP_TEXT_TOWER_CONFIG
    return Checkpoint(path, files)


# ---------------------------------------------------------------------------------------------- cheap checks

_ZIP_START, _ZIP_END = b"PK\x03\x04", b"PK\x05\x06"  # torch.save's zip archive: its first and last records
_PICKLE_START = b"\x80"  # torch.save's legacy format: a pickle (protocol 2 and later)
_ZIP_TAIL = 22 + 65535  # the end record and the longest comment a zip archive may end with
_AGAIN = "copy it again from the checkpoint's release (or save it again)"
_MAX_HEADER = 100_000_000  # the safetensors library's own limit on a header's length


def _check_json(path: Path) -> None:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise VlmgridError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {_AGAIN}"
        ) from None
    except RecursionError:
        raise VlmgridError(
            f"{path} nests its JSON deeper than any checkpoint's file does; {_AGAIN}"
        ) from None


def _check_safetensors(path: Path) -> None:
    """The header (8 bytes of length, then JSON) describes tensors that end exactly where the file does. A
    header longer than the safetensors library reads is refused unread: a damaged length would otherwise
    have the whole file read into memory."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else None
        fits = length is not None and length <= _MAX_HEADER and 8 + length <= size
        header = handle.read(length) if fits else b""
    try:
        tensors = json.loads(header.decode("utf-8"))
        end = max(
            [0, *(int(entry["data_offsets"][1]) for key, entry in tensors.items() if key != "__metadata__")]
        )
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
        raise VlmgridError(
            f"{path} is not a safetensors file, or is cut short within its header (its first "
            f"bytes are no whole safetensors header); {_AGAIN}"
        ) from None
    if 8 + length + end != size:
        raise VlmgridError(
            f"{path} is not a whole safetensors file (its header describes {8 + length + end} bytes, "
            f"the file has {size}: it was cut short or changed); {_AGAIN}"
        )


def _check_torch(path: Path) -> None:
    """A torch.save file starts as a zip archive (and then ends as one) or as a pickle."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        start = handle.read(4)
        handle.seek(max(0, size - _ZIP_TAIL))
        tail = handle.read()
    if start == _ZIP_START and _ZIP_END not in tail:
        raise VlmgridError(f"{path} is cut short (a PyTorch zip archive without its end); {_AGAIN}")
    if start != _ZIP_START and not start.startswith(_PICKLE_START):
        raise VlmgridError(
            f"{path} is not a PyTorch weights file (it starts as neither a zip archive nor a "
            f"pickle, as torch.save writes them); {_AGAIN}"
        )


#: What `check_files` reads of a file, by the end of its name.
_CHECKS: dict[tuple[str, ...], Callable[[Path], None]] = {
    (".json",): _check_json,
    (".safetensors",): _check_safetensors,
    (".bin", ".pt", ".pth"): _check_torch,
}


def check_files(checkpoint: Checkpoint) -> None:
    """What is cheap to check of the checkpoint's files (never the weights themselves): each JSON file parses
    (as UTF-8), each safetensors file's header covers the file, each PyTorch file starts (and, as a zip, ends)
    as torch.save writes it; the first problem is one sentence naming the file."""
    for name, path in sorted(checkpoint.files.items()):
        check = next((check for suffixes, check in _CHECKS.items() if name.endswith(suffixes)), None)
        if check is None:
            continue
        try:
            check(Path(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise unreadable(Path(path), exc) from exc


# ---------------------------------------------------------------------------------------------- load failures


@dataclass(frozen=True)
class _LoadFailure:
    """A kind of error a library raises loading a checkpoint: the words that tell it, its likely cause, the
    fix."""

    words: tuple[str, ...]
    cause: str
    fix: str


_LOAD_FAILURES = (
    _LoadFailure(
        ("size mismatch", "missing key", "unexpected key", "error(s) in loading state_dict"),
        "its weights do not match the architecture the model is built as (an open_clip source's arch, "
        "or the checkpoint's config)",
        "set the architecture the checkpoint was trained as, or point the model at the matching weights",
    ),
    _LoadFailure(
        ("safetensor", "header", "deserializ"),
        "a weights file is damaged or cut short",
        "copy the checkpoint again from its release",
    ),
    _LoadFailure(
        ("pytorchstreamreader", "zip archive", "invalid load key", "unpickl", "pickle"),
        "a weights file is not a PyTorch checkpoint or is damaged",
        "copy the checkpoint again from its release",
    ),
    _LoadFailure(
        ("json", "utf-8", "codec can't decode"),
        "a JSON file of the checkpoint (its config) is damaged or not UTF-8",
        "restore it from the checkpoint's release",
    ),
    _LoadFailure(
        ("permission denied",),
        "a file of the checkpoint cannot be read by this user",
        "make the checkpoint's files readable (`chmod -R a+r`)",
    ),
    _LoadFailure(
        ("model_type", "unrecognized", "does not recognize", "config"),
        "its config does not describe a model this library version knows",
        "restore the checkpoint's config.json, or set the model's model_class",
    ),
)


def _listing(location: Path) -> Checkpoint:
    """Every file under the location (or the one file), for the cheap checks."""
    if location.is_file():
        return Checkpoint(location, {location.name: location})
    files = {
        path.relative_to(location).as_posix(): path
        for path in sorted(location.rglob("*"))
        if path.is_file() and not path.relative_to(location).parts[0].startswith(".")
    }
    return Checkpoint(location, files)


_TORCH_REFUSED = (
    "weights only load failed"  # torch.load's safe loading (weights_only, its default) refused a pickle
)
_CALLED = re.compile(
    r"GLOBAL ([\w.]+)"
)  # the function or class that pickle would have called, as torch names it
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth")


def _unsafe(model: str, location: Path, error: Exception) -> VlmgridError | None:
    """The sentence for a pickle that torch's safe loading refused, None for any other error. Such a pickle
    calls code on load (a function or class: os.system as well as argparse.Namespace), so it is unsafe,
    whether it names the call or uses an operation torch does not know. torch's own words are not quoted: they
    advise loading it unsafely."""
    text = str(error)
    if _TORCH_REFUSED not in text.lower():
        return None
    try:
        pickles = [path for name, path in _listing(location).files.items() if name.endswith(_PICKLE_SUFFIXES)]
    except OSError:  # a folder that cannot be listed: named as a whole
        pickles = []
    where = pickles[0] if len(pickles) == 1 else f"a PyTorch weights file of {location}"
    called = _CALLED.search(text)
    held = (
        f"calls {called.group(1)} when loaded"
        if called
        else "holds more than tensors, which torch's safe loading refuses"
    )
    return VlmgridError(
        f"model {model}: {where} is unsafe: its pickle {held} (a pickle that calls code can run any "
        f"code), so vlmgrid refuses it; use the weights as a safetensors file, or, if the checkpoint "
        f"comes from a source you trust, convert it to safetensors, then run `vlmgrid fetch-model "
        f"{model}` again"
    )


def load_failure(model: str, location: Path, error: Exception) -> VlmgridError:
    """The one sentence for a checkpoint at `location` that a library failed to load with `error`: the file a
    cheap check finds at fault, else a pickle that would run code (`_unsafe`), else the file the error names
    (or the location), with the likely cause."""
    location = Path(location)
    try:
        check_files(_listing(location))
    except VlmgridError as found:
        return VlmgridError(f"model {model} could not be loaded: {found}")
    except OSError:
        pass
    unsafe = _unsafe(model, location, error)
    if unsafe is not None:
        return unsafe
    if isinstance(error, (OSError, UnicodeDecodeError)) and getattr(error, "filename", None):
        return VlmgridError(f"model {model} could not be loaded: {unreadable(Path(error.filename), error)}")
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    lowered = f"{type(error).__name__} {text}".lower()
    failure = next(
        (failure for failure in _LOAD_FAILURES if any(word in lowered for word in failure.words)), None
    )
    cause = failure.cause if failure else "the checkpoint is damaged or does not match the model's settings"
    fix = failure.fix if failure else "check the checkpoint and the model's settings"
    said = text if len(text) <= 300 else text[:300] + "..."
    return VlmgridError(
        f"model {model}: {location} could not be loaded, likely because {cause} "
        f"({type(error).__name__}: {said}); {fix}, then run `vlmgrid fetch-model {model}` again"
    )
