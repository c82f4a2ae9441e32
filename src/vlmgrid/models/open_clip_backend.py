"""open_clip contrastive models: image and text embeddings.

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

`embed_image_files` reads images from their files: threads decode them and run the preprocessing's PIL steps
a few batches ahead of the model, and the tensor steps (to float, normalise) run on
whole batches on the device, so the pixels, and the embeddings, are those of `embed_images` on the opened images.
The decoded pixels are kept in the pixel cache (vlmgrid.pixel_cache, unless `pixel_cache: false`), so the
next pass over the same files at the same preprocessing reads them instead of decoding again.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from vlmgrid import pixel_cache
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import write_json
from vlmgrid.hub import hub_errors
from vlmgrid.images import ImageError, open_rgb
from vlmgrid.models.base import MANIFEST, Backend, write_fixture
from vlmgrid.models.checkpoints import Checkpoint, open_clip_checkpoint

CONFIG_NAME = "open_clip_config.json"
WEIGHTS_NAME = "open_clip_model.safetensors"
_WEIGHT_CANDIDATES = ("open_clip_model.safetensors", "open_clip_pytorch_model.safetensors",
                      "open_clip_pytorch_model.bin")
# Image files are decoded and resized by this many threads (PIL releases the GIL while it decodes and
# resamples), a few batches ahead of the model, so the accelerator does not wait on one CPU core.
DECODE_WORKERS = min(16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
DECODE_AHEAD = 3  # batches decoded ahead of the one the model is running
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
            f"{tower / 'config.json'} is missing: the model's text tower ({text_cfg['hf_model_name']}) needs its "
            f"config there; run `vlmgrid fetch-model` for this model again"
        )
    return {"text_cfg": {**text_cfg, "hf_model_name": str(tower), "hf_model_pretrained": False},
            "pretrained_text": False}


# torch.nn.init's in-place initialisers: while open_clip builds a model whose checkpoint it then loads, they
# need not run (`_checkpoint_sets_every_weight`).
_INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                 "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_")


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


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "sentencepiece.bpe.model")
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
    """(the architecture's model config, the tag's pretrained config) of a `pretrained` source, from open_clip."""
    import open_clip

    arch, tag = source["arch"], source["tag"]
    model_cfg = open_clip.get_model_config(arch)
    if model_cfg is None:
        raise VlmgridError(f'open_clip has no architecture "{arch}"; `python -m open_clip list` shows them')
    pretrained = open_clip.get_pretrained_cfg(arch, tag)
    if not (pretrained or {}).get("hf_hub"):
        raise VlmgridError(f'open_clip has no hub-hosted pretrained tag "{tag}" for {arch}; see open_clip.list_pretrained()')
    return model_cfg, pretrained


def hub_checkpoint(source: dict, download: bool = True) -> Checkpoint:
    """The weights (and, for an hf_hub repo, its open_clip_config.json) of a pretrained tag or hf_hub source
    where they lie in the Hugging Face cache (HF_HOME / HF_HUB_CACHE): the repo's snapshot folder and the files
    read there. With `download` they (and a text tower's files) are downloaded there first when missing, as
    `hf_hub_download` does (a pinned commit already in the cache, or HF_HUB_OFFLINE=1, asks the hub nothing);
    without (or with HF_HUB_OFFLINE=1), only the cache is read. Never copied elsewhere."""
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
                raise VlmgridError(f"the hub repo {repo}@{revision} has no {CONFIG_NAME}" + (
                    "; it is not in open_clip's layout" if download else f" in the Hugging Face cache{again}"))
            files[CONFIG_NAME] = config
        for name in candidates:  # the first weights file the repo has
            weights = _hub_file(repo, name, revision, download)
            if weights is not None:
                files[name] = weights
                break
        else:
            where = "has none" if download else "has none in the Hugging Face cache"
            raise VlmgridError(f"the hub repo {repo}@{revision} {where} of the weight files {', '.join(candidates)}"
                               + ("" if download else again))
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
    preprocess = {key: pretrained[key] for key in ("mean", "std", "interpolation", "resize_mode") if key in pretrained}
    return {"model_cfg": model_cfg, "preprocess_cfg": preprocess}


def _text_tower_files(config: dict, source: dict, download: bool) -> dict[str, Path]:
    """For a transformers text tower: its config (pinned by `text_tower_revision`) and tokenizer files in the
    Hugging Face cache, by their names in open_clip's layout (text_tower/config.json, tokenizer files at the top)."""
    tower_repo = config["model_cfg"].get("text_cfg", {}).get("hf_model_name")
    if not tower_repo:
        return {}
    revision = source.get("text_tower_revision")
    if not revision:
        raise VlmgridError(
            f"this model's text tower comes from the hub repo {tower_repo}; pin it with `text_tower_revision` "
            f"(a commit of {tower_repo}) in the model's source"
        )
    from huggingface_hub import constants

    download = download and not constants.is_offline_mode()
    found = {}
    with hub_errors(tower_repo, revision, f"text tower {tower_repo}"):
        for filename, name in (("config.json", f"{TEXT_TOWER_DIR}/config.json"),
                               *((name, name) for name in _TOKENIZER_FILES)):
            path = _hub_file(tower_repo, filename, revision, download)
            if path is not None:
                found[name] = path
    if f"{TEXT_TOWER_DIR}/config.json" not in found:
        raise VlmgridError(f"the config.json of the text tower {tower_repo}@{revision} is not in the Hugging Face "
                           f"cache; run `vlmgrid fetch-model` for this model where the hub is reachable")
    return found


@contextlib.contextmanager
def _hub_layout(settings: dict, location: Path) -> Iterator[Path]:
    """A temporary folder in open_clip's hub layout for a pretrained or hf_hub model read from the Hugging Face
    cache: links to the cached weights, config and text tower files, and a pretrained tag's generated
    open_clip_config.json, so open_clip's own `local-dir:` loading reads them; nothing is copied."""
    source = settings["source"]
    checkpoint = hub_checkpoint(source, download=False)
    if checkpoint.location.resolve() != Path(location).resolve():
        raise VlmgridError(f"{location} is not where the Hugging Face cache holds {_hub_repo(source)[0]}@"
                           f"{source['revision']} ({checkpoint.location}); run `vlmgrid fetch-model` again")
    config = _model_cfg(source, checkpoint.files)
    with tempfile.TemporaryDirectory(prefix="open-clip-") as folder:
        folder = Path(folder)
        write_json(folder / CONFIG_NAME, config)
        for name, path in checkpoint.files.items():
            if name == CONFIG_NAME:
                continue
            link = Path(name).name
            if not link.endswith((".safetensors", ".bin", ".pth")):
                link = "open_clip_pytorch_model.bin"  # the name open_clip's folder loading looks for (torch.load)
            (folder / link).symlink_to(path.resolve())
        for name, path in _text_tower_files(config, source, download=False).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(path.resolve())
        yield folder


def _weights_fingerprint(settings: dict, model_dir: Path) -> str:
    """The fingerprint fetch-model recorded for these files (their hashes), or a hash of the files now (a local
    checkpoint's or a hub checkpoint's in the cache: remembered by their sizes and times)."""
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


class OpenClip(Backend):
    name = "open_clip"
    capabilities = frozenset({"embed"})
    uses_gpu = True
    # Images are resized to one size and texts padded to the fixed context length, so nothing a batch pads
    # reaches an embedding.
    unbatched = "a contrastive model embeds at fixed sizes, with no padding that depends on the batch"
    defaults = {"batch_size": 64, "text_batch_size": 1024, "precision": "fp32", "device": "auto", "pixel_cache": True}

    def __init__(self, settings: dict, model, preprocess, tokenizer, device: str, dtype,
                 weights_fingerprint: str) -> None:
        super().__init__(settings)
        self.weights_fingerprint = weights_fingerprint
        self.model = model
        self.preprocess = preprocess
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path, fixture=None) -> dict[str, Path]:
        source = settings["source"]
        """A fixture's tiny checkpoint, written into model_dir (the other sources are read in place)."""
        return write_fixture(cls.name, settings["source"], model_dir, fixture)

    @classmethod
    def in_place(cls, settings: dict) -> Checkpoint | None:
        """A local source's folder or file, or a pretrained tag's or hf_hub repo's files in the Hugging Face
        cache, read where they lie (a fixture is written by fetch)."""
        source = settings["source"]
        reader = _IN_PLACE.get(source["type"])
        return reader(source) if reader is not None else None

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> "OpenClip":
        settings = {**cls.defaults, **settings}
        model_dir = Path(model_dir)
        if model_dir.is_file():
            return cls._load_file(settings, model_dir, device)
        if settings["source"]["type"] in _HUB_SOURCES and not (model_dir / MANIFEST).is_file():
            with _hub_layout(settings, model_dir) as folder:  # not a copy an earlier version fetched
                return cls._load_folder(settings, folder, device, _weights_fingerprint(settings, model_dir))
        if not (model_dir / CONFIG_NAME).is_file():
            raise VlmgridError(f"{model_dir / CONFIG_NAME} is missing; run `vlmgrid fetch-model` for this model first")
        return cls._load_folder(settings, model_dir, device, _weights_fingerprint(settings, model_dir))

    @classmethod
    def _load_folder(cls, settings: dict, model_dir: Path, device: str, fingerprint: str) -> "OpenClip":
        """A folder in open_clip's hub layout, through open_clip's own `local-dir:` loading."""
        import open_clip
        import torch

        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[settings["precision"]]
        if device == "cpu":
            dtype = torch.float32  # half precision on the CPU is slow and not what a reference run uses
        name = f"local-dir:{model_dir}"
        model_cfg = json.loads((model_dir / CONFIG_NAME).read_text(encoding="utf-8"))["model_cfg"]
        weights = any((model_dir / candidate).is_file() for candidate in _WEIGHT_CANDIDATES)
        with _checkpoint_sets_every_weight(weights):
            model, _, preprocess = open_clip.create_model_and_transforms(
                name, device=device, **local_text_tower(model_cfg, model_dir))
        model = model.to(dtype=dtype).eval()
        tokenizer = open_clip.get_tokenizer(name)
        return cls(settings, model, preprocess, tokenizer, device, dtype, fingerprint)

    @classmethod
    def _load_file(cls, settings: dict, weights: Path, device: str) -> "OpenClip":
        """One weights file (a local source with its arch), as `open_clip.create_model_and_transforms(arch,
        pretrained=<file>)` takes it: a training checkpoint's `state_dict` key and `module.` prefixes included."""
        import open_clip
        import torch

        arch = settings["source"]["arch"]
        if open_clip.get_model_config(arch) is None:
            raise VlmgridError(f'open_clip has no architecture "{arch}" for {weights}; set the source\'s arch to '
                               f'one of `python -m open_clip list`, the one the checkpoint was trained as')
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[settings["precision"]]
        if device == "cpu":
            dtype = torch.float32
        with _checkpoint_sets_every_weight(True):
            model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=str(weights), device=device)
        model = model.to(dtype=dtype).eval()
        return cls(settings, model, preprocess, open_clip.get_tokenizer(arch), device, dtype,
                   _weights_fingerprint(settings, weights))

    def identity(self) -> str | None:
        return f"open_clip:{self.weights_fingerprint}:{self.dtype}:{self.device}"

    def provenance(self):
        import open_clip
        import torch

        from vlmgrid.models.base import Provenance

        source = self.settings["source"]
        model_id = {"fixture": "fixture", "pretrained": f"{source.get('arch')}/{source.get('tag')}",
                    "hf_hub": source.get("repo"), "local": str(source.get("path"))}[source["type"]]
        return Provenance(
            backend=self.name, model_id=model_id, revision=source.get("revision"),
            dtype=str(self.dtype).replace("torch.", ""),
            device=torch.cuda.get_device_name() if self.device == "cuda" else "cpu",
            batch_size=int(self.settings["batch_size"]),
            libraries={"torch": torch.__version__, "open_clip": open_clip.__version__},
        )

    def describe(self) -> str:
        return f"open_clip on {self.device} ({self.settings['precision'] if self.device != 'cpu' else 'fp32'})"

    def _batches(self, items: Sequence, key: str = "batch_size") -> list[Sequence]:
        size = int(self.settings[key])
        return [items[start:start + size] for start in range(0, len(items), size)]

    def embed_images(self, images: Sequence) -> np.ndarray:
        import torch

        outputs = []
        with torch.inference_mode():
            for batch in self._batches(images):
                pixels = torch.stack([self.preprocess(image) for image in batch]).to(self.device, self.dtype)
                features = self.model.encode_image(pixels, normalize=True)
                outputs.append(features.float().cpu().numpy())
        return np.concatenate(outputs) if outputs else np.zeros((0, 0), dtype=np.float32)

    def embed_image_files(self, paths: Sequence[Path]) -> tuple[np.ndarray, list[str | None]]:
        """Embeddings of the image files (a zero row where one is unreadable) and, per file, why it is unreadable.

        The same pixels as `embed_images` on the opened images: the preprocessing's PIL steps (resize, crop)
        run in decoding threads, its tensor steps (to float, normalise) on whole batches on the device.
        """
        import torch

        split = _split_preprocess(self.preprocess)
        if split is None:  # a preprocessing this path does not know: open each image and go the plain way
            return self._embed_files_plainly(paths)
        geometric, mean, std = split
        mean = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, -1, 1, 1)
        std = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, -1, 1, 1)
        problems: list[str | None] = [None] * len(paths)
        features: list = [None] * len(paths)
        with torch.inference_mode():
            for start, loaded in self._pixel_batches(paths, geometric):
                usable = [k for k, (_, problem) in enumerate(loaded) if problem is None]
                for k, (_, problem) in enumerate(loaded):
                    problems[start + k] = problem
                if not usable:
                    continue
                pixels = torch.from_numpy(np.stack([loaded[k][0] for k in usable])).to(self.device, non_blocking=True)
                # torchvision's to_tensor and normalize, on the whole batch: the same float32 operations
                pixels = pixels.permute(0, 3, 1, 2).to(torch.float32).div(255).sub_(mean).div_(std)
                encoded = self.model.encode_image(pixels.to(self.dtype), normalize=True).float().cpu().numpy()
                for row, k in zip(encoded, usable):
                    features[start + k] = row
        return _stack_rows(features), problems

    def _pixel_batches(self, paths: Sequence[Path], geometric):
        """The files' pixels batch by batch: from the pixel cache, or decoded (filling the cache on the way)."""
        batch_size = int(self.settings["batch_size"])
        decoded = _decoded_batches(paths, geometric, batch_size, DECODE_WORKERS)
        if not self.settings["pixel_cache"]:
            return decoded
        geometry = pixel_cache.describe_steps(geometric)
        key = pixel_cache.entry_key(paths, geometry)
        cached = pixel_cache.load(key, len(paths))
        if cached is not None:
            return pixel_cache.batches(*cached, batch_size)
        return pixel_cache.filling(key, len(paths), decoded, geometry)

    def _embed_files_plainly(self, paths: Sequence[Path]) -> tuple[np.ndarray, list[str | None]]:
        images, problems = [], []
        for path in paths:
            try:
                images.append(open_rgb(Path(path)))
                problems.append(None)
            except ImageError as exc:
                images.append(None)
                problems.append(str(exc))
        usable = [i for i, image in enumerate(images) if image is not None]
        features: list = [None] * len(paths)
        if usable:
            for i, row in zip(usable, self.embed_images([images[i] for i in usable])):
                features[i] = row
        return _stack_rows(features), problems

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        outputs = []
        with torch.inference_mode():
            # Prompts are short and ImageNet's classifier alone is 80,000 of them: they go in large batches.
            for batch in self._batches(list(texts), "text_batch_size"):
                tokens = self.tokenizer(list(batch)).to(self.device)
                features = self.model.encode_text(tokens, normalize=True)
                outputs.append(features.float().cpu().numpy())
        return np.concatenate(outputs) if outputs else np.zeros((0, 0), dtype=np.float32)


def _split_preprocess(preprocess):
    """(the PIL steps before ToTensor, mean, std) of open_clip's Compose, or None if it is not of that shape."""
    steps = list(getattr(preprocess, "transforms", []))
    names = [type(step).__name__ for step in steps]
    to_tensor = next((i for i, name in enumerate(names) if name in ("ToTensor", "MaybeToTensor")), None)
    if to_tensor is None or names[to_tensor + 1:] != ["Normalize"]:
        return None
    normalize = steps[-1]
    return steps[:to_tensor], tuple(normalize.mean), tuple(normalize.std)


def _load_pixels(path, geometric) -> tuple[np.ndarray | None, str | None]:
    """The image at `path` after the PIL steps, as uint8 (height, width, 3), or None and why it is unusable."""
    try:
        image = open_rgb(Path(path))
    except ImageError as exc:
        return None, str(exc)
    for step in geometric:
        image = step(image)
    return np.asarray(image, dtype=np.uint8), None  # open_rgb gave RGB; resizing and cropping keep it


def _decoded_batches(paths: Sequence, geometric, batch_size: int, workers: int):
    """(start, [(pixels, problem), ...]) per batch of paths, decoded by `workers` threads a few batches ahead
    (0: decoded here, one batch at a time)."""
    starts = range(0, len(paths), batch_size)
    if workers == 0:
        for start in starts:
            yield start, [_load_pixels(path, geometric) for path in paths[start:start + batch_size]]
        return
    starts = iter(starts)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()

        def submit() -> None:
            start = next(starts, None)
            if start is not None:
                pending.append((start, [pool.submit(_load_pixels, path, geometric)
                                        for path in paths[start:start + batch_size]]))

        for _ in range(DECODE_AHEAD + 1):
            submit()
        while pending:
            start, futures = pending.popleft()
            submit()
            yield start, [future.result() for future in futures]


def _stack_rows(rows: list) -> np.ndarray:
    """The rows as one float32 array; a missing row (an unreadable image) is zeros."""
    present = next((row for row in rows if row is not None), None)
    if present is None:
        return np.zeros((len(rows), 0), dtype=np.float32)
    return np.stack([np.zeros_like(present) if row is None else row for row in rows]).astype(np.float32)
