"""open_clip models loaded from disk: where each source's files lie and how open_clip builds a model of them.

Every source is loaded as a folder in open_clip's hub layout (open_clip_config.json + weights) through
open_clip's own `local-dir:` loading path, so a fixture model (a tiny random checkpoint, which `fetch` has the
writer it is handed build) and a real checkpoint are loaded by the same code and inference never needs the
network. Every other source is read where it lies (`in_place`), never copied: a local folder in that layout,
or one weights file with its architecture, loaded as `open_clip.create_model_and_transforms(arch,
pretrained=<file>)` loads it (CLIP_benchmark's `--model ARCH --pretrained FILE`); a `pretrained` tag's weights
file and an `hf_hub` repo's open_clip_config.json and weights in the Hugging Face cache (`hf_hub_download` at
the pinned revision), with a transformers text tower's config and tokenizer from its own repo there. At load,
a temporary folder of links to those cached files (and, for a tag, the open_clip_config.json open_clip builds
for it: the architecture's model config and the tag's preprocessing) is what `local-dir:` reads.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from vlmgrid.dvc_outputs import or_pull
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import write_json
from vlmgrid.hub import hub_errors
from vlmgrid.models.base import MANIFEST
from vlmgrid.models.checkpoints import Checkpoint, open_clip_checkpoint

CONFIG_NAME = "open_clip_config.json"
WEIGHTS_NAME = "open_clip_model.safetensors"
_WEIGHT_CANDIDATES = (
    "open_clip_model.safetensors",
    "open_clip_pytorch_model.safetensors",
    "open_clip_pytorch_model.bin",
)
TEXT_TOWER_DIR = "text_tower"  # the transformers config of a multilingual (xlm-roberta-like) text tower


def local_text_tower(model_cfg: dict, model_dir: Path) -> dict:
    """create_model arguments that build a transformers text tower from the copy in model_dir, offline.

    open_clip would otherwise ask the hub for the tower's config by name (e.g. "xlm-roberta-base") at every
    load; its weights come from the CLIP checkpoint anyway.
    """
    text_cfg = model_cfg.get("text_cfg", {})
    if not text_cfg.get("hf_model_name"):
        return {}
    tower = model_dir / TEXT_TOWER_DIR
    if not (tower / "config.json").is_file():
        raise VlmgridError(
            f"{tower / 'config.json'} is missing: the model's text tower ({text_cfg['hf_model_name']}) "
            "needs its config there; run `vlmgrid fetch-model` for this model again"
        )
    return {
        "text_cfg": {**text_cfg, "hf_model_name": str(tower), "hf_model_pretrained": False},
        "pretrained_text": False,
    }


# torch.nn.init's in-place initialisers: while open_clip builds a model whose checkpoint it then loads, they
# need not run (`_checkpoint_sets_every_weight`).
_INITIALISERS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
)


def _keep(tensor, *args, **kwargs):
    return tensor


@contextlib.contextmanager
def _checkpoint_sets_every_weight(loading: bool) -> Iterator[None]:
    """While open_clip builds a model it then loads a checkpoint into, skip the random initialisation.

    open_clip loads a full checkpoint strictly (a weight it lacks is an error), so every parameter and saved
    buffer is overwritten, and drawing random values first costs time only (ViT-B/32: about 1.4 s of CPU).
    Without a checkpoint (`loading` false) the model is initialised as usual.
    """
    import torch

    if not loading:
        yield
        return
    saved = {name: getattr(torch.nn.init, name) for name in _INITIALISERS if hasattr(torch.nn.init, name)}
    for name in saved:
        setattr(torch.nn.init, name, _keep)
    try:
        yield
    finally:
        for name, initialiser in saved.items():
            setattr(torch.nn.init, name, initialiser)


_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentencepiece.bpe.model",
)
_HUB_SOURCES = ("pretrained", "hf_hub")


def _hub_file(repo: str, filename: str, revision: str, download: bool) -> Path | None:
    """The file of the repo at `revision` in the Hugging Face cache (downloaded there first when `download`);
    None when the repo has no such file (or, without `download`, when the cache does not hold it)."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    if not download:
        found = try_to_load_from_cache(repo, filename, revision=revision)
        return Path(found) if isinstance(found, str) else None
    try:
        return Path(hf_hub_download(repo_id=repo, filename=filename, revision=revision))
    except LocalEntryNotFoundError:
        raise  # the hub could not be asked: hub_errors says so
    except EntryNotFoundError:
        return None


def _hub_repo(source: dict) -> tuple[str, tuple[str, ...]]:
    """The hub repo of a pretrained tag or hf_hub source, and its weight file names in order of preference."""
    if source["type"] == "hf_hub":
        return source["repo"], _WEIGHT_CANDIDATES
    hub = (_pretrained_cfg(source)[1] or {}).get("hf_hub", "")
    parts = hub.strip("/").split("/")
    filename = "/".join(parts[2:])
    return "/".join(parts[:2]), (filename,) if filename else _WEIGHT_CANDIDATES


def _pretrained_cfg(source: dict) -> tuple[dict, dict]:
    """(the architecture's model config, the tag's pretrained config) of a `pretrained` source, from
    open_clip."""
    import open_clip

    arch, tag = source["arch"], source["tag"]
    model_cfg = open_clip.get_model_config(arch)
    if model_cfg is None:
        raise VlmgridError(f'open_clip has no architecture "{arch}"; `python -m open_clip list` shows them')
    pretrained = open_clip.get_pretrained_cfg(arch, tag)
    if not (pretrained or {}).get("hf_hub"):
        raise VlmgridError(
            f'open_clip has no hub-hosted pretrained tag "{tag}" for {arch}; see open_clip.list_pretrained()'
        )
    return model_cfg, pretrained


def hub_checkpoint(source: dict, download: bool = True) -> Checkpoint:
    """The weights (and, for an hf_hub repo, its open_clip_config.json) of a pretrained tag or hf_hub source
    where they lie in the Hugging Face cache (HF_HOME / HF_HUB_CACHE): the repo's snapshot folder and the
    files read there. With `download` they (and a text tower's files) are downloaded there first when missing,
    as `hf_hub_download` does (a pinned commit already in the cache, or HF_HUB_OFFLINE=1, asks the hub
    nothing); without (or with HF_HUB_OFFLINE=1), only the cache is read. Never copied elsewhere."""
    from huggingface_hub import constants

    fetching, download = download, download and not constants.is_offline_mode()
    repo, candidates = _hub_repo(source)
    revision = source["revision"]
    again = "; run `vlmgrid fetch-model` for this model where the hub is reachable"
    files: dict[str, Path] = {}
    with hub_errors(repo, revision, f"model {repo}"):
        if source["type"] == "hf_hub":
            config = _hub_file(repo, CONFIG_NAME, revision, download)
            if config is None:
                raise VlmgridError(
                    f"the hub repo {repo}@{revision} has no {CONFIG_NAME}"
                    + (
                        "; it is not in open_clip's layout"
                        if download
                        else f" in the Hugging Face cache{again}"
                    )
                )
            files[CONFIG_NAME] = config
        for name in candidates:  # the first weights file the repo has
            weights = _hub_file(repo, name, revision, download)
            if weights is not None:
                files[name] = weights
                break
        else:
            where = "has none" if download else "has none in the Hugging Face cache"
            raise VlmgridError(
                f"the hub repo {repo}@{revision} {where} of the weight files {', '.join(candidates)}"
                + ("" if download else again)
            )
    if fetching:  # the text tower's files in the cache too, or what is missing said now rather than at load
        _text_tower_files(_model_cfg(source, files), source, download=True)
    name, path = next(iter(files.items()))
    return Checkpoint(path.parents[len(Path(name).parts) - 1], files)


def _model_cfg(source: dict, files: dict[str, Path]) -> dict:
    """open_clip_config.json's contents: the hf_hub repo's own, or a pretrained tag's as open_clip builds it
    (the architecture's model config, the tag's preprocessing)."""
    if source["type"] == "hf_hub":
        return json.loads(files[CONFIG_NAME].read_text(encoding="utf-8"))
    model_cfg, pretrained = _pretrained_cfg(source)
    preprocess = {
        key: pretrained[key] for key in ("mean", "std", "interpolation", "resize_mode") if key in pretrained
    }
    return {"model_cfg": model_cfg, "preprocess_cfg": preprocess}


def _text_tower_files(config: dict, source: dict, download: bool) -> dict[str, Path]:
    """For a transformers text tower: its config (pinned by `text_tower_revision`) and tokenizer files in the
    Hugging Face cache, by their names in open_clip's layout (text_tower/config.json, tokenizer files at the
    top)."""
    tower_repo = config["model_cfg"].get("text_cfg", {}).get("hf_model_name")
    if not tower_repo:
        return {}
    revision = source.get("text_tower_revision")
    if not revision:
        raise VlmgridError(
            f"this model's text tower comes from the hub repo {tower_repo}; pin it with "
            f"`text_tower_revision` (a commit of {tower_repo}) in the model's source"
        )
    from huggingface_hub import constants

    download = download and not constants.is_offline_mode()
    found = {}
    with hub_errors(tower_repo, revision, f"text tower {tower_repo}"):
        for filename, name in (
            ("config.json", f"{TEXT_TOWER_DIR}/config.json"),
            *((name, name) for name in _TOKENIZER_FILES),
        ):
            path = _hub_file(tower_repo, filename, revision, download)
            if path is not None:
                found[name] = path
    if f"{TEXT_TOWER_DIR}/config.json" not in found:
        raise VlmgridError(
            f"the config.json of the text tower {tower_repo}@{revision} is not in the Hugging Face "
            f"cache; run `vlmgrid fetch-model` for this model where the hub is reachable"
        )
    return found


@contextlib.contextmanager
def _hub_layout(settings: dict, location: Path) -> Iterator[Path]:
    """A temporary folder in open_clip's hub layout for a pretrained or hf_hub model read from the Hugging
    Face cache: links to the cached weights, config and text tower files, and a pretrained tag's generated
    open_clip_config.json, so open_clip's own `local-dir:` loading reads them; nothing is copied."""
    source = settings["source"]
    checkpoint = hub_checkpoint(source, download=False)
    if checkpoint.location.resolve() != Path(location).resolve():
        raise VlmgridError(
            f"{location} is not where the Hugging Face cache holds {_hub_repo(source)[0]}@"
            f"{source['revision']} ({checkpoint.location}); run `vlmgrid fetch-model` again"
        )
    config = _model_cfg(source, checkpoint.files)
    with tempfile.TemporaryDirectory(prefix="open-clip-") as folder:
        folder = Path(folder)
        write_json(folder / CONFIG_NAME, config)
        for name, path in checkpoint.files.items():
            if name == CONFIG_NAME:
                continue
            link = Path(name).name
            if not link.endswith((".safetensors", ".bin", ".pth")):
                # the name open_clip's folder loading looks for (torch.load)
                link = "open_clip_pytorch_model.bin"
            (folder / link).symlink_to(path.resolve())
        for name, path in _text_tower_files(config, source, download=False).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(path.resolve())
        yield folder


def _weights_fingerprint(settings: dict, model_dir: Path) -> str:
    """The fingerprint fetch-model recorded for these files (their hashes), or a hash of the files now (a
    local checkpoint's or a hub checkpoint's in the cache: remembered by their sizes and times)."""
    from vlmgrid.fileio import sha256_file, sha256_json

    source_type = settings["source"]["type"]
    if source_type == "local":
        return sha256_json(open_clip_checkpoint(settings["source"]).hashes())
    manifest = model_dir / MANIFEST
    if manifest.is_file():
        return json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]
    if source_type in _HUB_SOURCES:
        return sha256_json(hub_checkpoint(settings["source"], download=False).hashes())
    return sha256_file(next(model_dir.glob("*.safetensors"), model_dir / CONFIG_NAME))


#: How each source type other than a fixture is read in place.
_IN_PLACE = {"local": open_clip_checkpoint, "pretrained": hub_checkpoint, "hf_hub": hub_checkpoint}


def in_place_checkpoint(source: dict) -> Checkpoint | None:
    """A local source's folder or file, or a pretrained tag's or hf_hub repo's files in the Hugging Face
    cache, read where they lie (a fixture is written by fetch)."""
    reader = _IN_PLACE.get(source["type"])
    return reader(source) if reader is not None else None


def load_model(settings: dict, model_dir: Path, device: str) -> tuple:
    """(model, preprocess, tokenizer, dtype, weights fingerprint) of the model at model_dir (settings with the
    backend's defaults filled in)."""
    model_dir = Path(model_dir)
    if model_dir.is_file():
        return _load_file(settings, model_dir, device)
    if settings["source"]["type"] in _HUB_SOURCES and not (model_dir / MANIFEST).is_file():
        with _hub_layout(settings, model_dir) as folder:  # not a copy an earlier version fetched
            return _load_folder(settings, folder, device, _weights_fingerprint(settings, model_dir))
    if not (model_dir / CONFIG_NAME).is_file():
        raise VlmgridError(
            f"{model_dir / CONFIG_NAME} is missing; "
            f"{or_pull(model_dir, 'run `vlmgrid fetch-model` for this model first')}"
        )
    return _load_folder(settings, model_dir, device, _weights_fingerprint(settings, model_dir))


def _dtype(settings: dict, device: str):
    import torch

    if device == "cpu":
        return torch.float32  # half precision on the CPU is slow and not what a reference run uses
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[settings["precision"]]


def _load_folder(settings: dict, model_dir: Path, device: str, fingerprint: str) -> tuple:
    """A folder in open_clip's hub layout, through open_clip's own `local-dir:` loading."""
    import open_clip

    dtype = _dtype(settings, device)
    name = f"local-dir:{model_dir}"
    model_cfg = json.loads((model_dir / CONFIG_NAME).read_text(encoding="utf-8"))["model_cfg"]
    weights = any((model_dir / candidate).is_file() for candidate in _WEIGHT_CANDIDATES)
    with _checkpoint_sets_every_weight(weights):
        model, _, preprocess = open_clip.create_model_and_transforms(
            name, device=device, **local_text_tower(model_cfg, model_dir)
        )
    model = model.to(dtype=dtype).eval()
    return model, preprocess, open_clip.get_tokenizer(name), dtype, fingerprint


def _load_file(settings: dict, weights: Path, device: str) -> tuple:
    """One weights file (a local source with its arch), as `open_clip.create_model_and_transforms(arch,
    pretrained=<file>)` takes it: a training checkpoint's `state_dict` key and `module.` prefixes included."""
    import open_clip

    arch = settings["source"]["arch"]
    if open_clip.get_model_config(arch) is None:
        raise VlmgridError(
            f'open_clip has no architecture "{arch}" for {weights}; set the source\'s arch to '
            f"one of `python -m open_clip list`, the one the checkpoint was trained as"
        )
    dtype = _dtype(settings, device)
    with _checkpoint_sets_every_weight(True):
        model, _, preprocess = open_clip.create_model_and_transforms(
            arch, pretrained=str(weights), device=device
        )
    model = model.to(dtype=dtype).eval()
    return model, preprocess, open_clip.get_tokenizer(arch), dtype, _weights_fingerprint(settings, weights)
