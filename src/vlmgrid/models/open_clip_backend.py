"""open_clip contrastive models: image and text embeddings.

Every fetched source ends as a folder in open_clip's hub layout (open_clip_config.json + weights), and `load`
goes through open_clip's own `local-dir:` loading path, so a fixture model (a tiny random checkpoint, which
`fetch` has the writer it is handed build) and a real checkpoint are loaded by the same code and inference
never needs the network. A local source is read where it lies (`in_place`): a folder in that layout, or one
weights file with its architecture, loaded as `open_clip.create_model_and_transforms(arch, pretrained=<file>)`
loads it (CLIP_benchmark's `--model ARCH --pretrained FILE`).

`embed_image_files` reads images from their files: threads decode them and run the preprocessing's PIL steps
a few batches ahead of the model, and the tensor steps (to float, normalise) run on
whole batches on the device, so the pixels, and the embeddings, are those of `embed_images` on the opened images.
The decoded pixels are kept in the pixel cache (vlmgrid.pixel_cache, unless `pixel_cache: false`), so the
next pass over the same files at the same preprocessing reads them instead of decoding again.
"""

from __future__ import annotations

import json
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

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


def _fetch_text_tower(model_dir: Path, source: dict) -> dict[str, Path]:
    """For a transformers text tower: its config (pinned by `text_tower_revision`) and, where the CLIP repo
    lacks them, its tokenizer files, so that loading never needs the network."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    config = json.loads((model_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    tower_repo = config["model_cfg"].get("text_cfg", {}).get("hf_model_name")
    if not tower_repo:
        return {}
    revision = source.get("text_tower_revision")
    if not revision:
        raise VlmgridError(
            f"this model's text tower comes from the hub repo {tower_repo}; pin it with `text_tower_revision` "
            f"(a commit of {tower_repo}) in the model's source"
        )
    fetched = {}
    with hub_errors(tower_repo, revision, f"text tower {tower_repo}"):
        for filename, folder in (("config.json", model_dir / TEXT_TOWER_DIR),
                                 *((name, model_dir) for name in _TOKENIZER_FILES)):
            if (folder / filename).is_file():
                continue
            try:
                path = hf_hub_download(repo_id=tower_repo, filename=filename, revision=revision, local_dir=folder)
            except EntryNotFoundError:
                continue
            fetched[str(Path(path).relative_to(model_dir))] = Path(path)
    return fetched


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "sentencepiece.bpe.model")


def _hub_download(repo: str, revision: str, model_dir: Path, filenames: Sequence[str]) -> dict[str, Path]:
    """Download the first of `filenames` that the repo has (and its config if present) at a pinned revision."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    fetched: dict[str, Path] = {}
    with hub_errors(repo, revision, f"model {repo}"):
        for filename in (CONFIG_NAME, *filenames):
            try:
                fetched[filename] = Path(hf_hub_download(repo_id=repo, filename=filename, revision=revision,
                                                         local_dir=model_dir))
            except EntryNotFoundError:
                continue
            if filename != CONFIG_NAME:
                break
    if not set(fetched) - {CONFIG_NAME}:
        raise VlmgridError(f"the hub repo {repo}@{revision} has none of the weight files {', '.join(filenames)}")
    return fetched


def _fetch_pretrained(source: dict, model_dir: Path) -> dict[str, Path]:
    import open_clip

    arch, tag = source["arch"], source["tag"]
    model_cfg = open_clip.get_model_config(arch)
    if model_cfg is None:
        raise VlmgridError(f'open_clip has no architecture "{arch}"; `python -m open_clip list` shows them')
    pretrained = open_clip.get_pretrained_cfg(arch, tag)
    hub = (pretrained or {}).get("hf_hub", "")
    if not hub:
        raise VlmgridError(f'open_clip has no hub-hosted pretrained tag "{tag}" for {arch}; see open_clip.list_pretrained()')
    parts = hub.strip("/").split("/")
    repo, filename = "/".join(parts[:2]), "/".join(parts[2:]) or None
    fetched = _hub_download(repo, source["revision"], model_dir, (filename,) if filename else _WEIGHT_CANDIDATES)
    if CONFIG_NAME not in fetched:
        preprocess = {key: pretrained[key] for key in ("mean", "std", "interpolation", "resize_mode") if key in pretrained}
        write_json(model_dir / CONFIG_NAME, {"model_cfg": model_cfg, "preprocess_cfg": preprocess})
        fetched[CONFIG_NAME] = model_dir / CONFIG_NAME
    return {**fetched, **_fetch_text_tower(model_dir, source)}


def _fetch_hf_hub(source: dict, model_dir: Path) -> dict[str, Path]:
    fetched = _hub_download(source["repo"], source["revision"], model_dir, _WEIGHT_CANDIDATES)
    if CONFIG_NAME not in fetched:
        raise VlmgridError(f"the hub repo {source['repo']} has no {CONFIG_NAME}; it is not in open_clip's layout")
    return {**fetched, **_fetch_text_tower(model_dir, source)}


def _weights_fingerprint(settings: dict, model_dir: Path) -> str:
    """The fingerprint fetch-model recorded for these files (their hashes), or a hash of the files now (a local
    checkpoint's: remembered by their sizes and times)."""
    from vlmgrid.fileio import sha256_file, sha256_json

    if settings["source"]["type"] == "local":
        return sha256_json(open_clip_checkpoint(settings["source"]).hashes())
    manifest = model_dir / MANIFEST
    if manifest.is_file():
        return json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]
    return sha256_file(next(model_dir.glob("*.safetensors"), model_dir / CONFIG_NAME))


_FETCHERS = {"pretrained": _fetch_pretrained, "hf_hub": _fetch_hf_hub}


class OpenClip(Backend):
    name = "open_clip"
    capabilities = frozenset({"embed"})
    uses_gpu = True
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
        if source["type"] == "fixture":
            return write_fixture(cls.name, source, model_dir, fixture)
        return _FETCHERS[source["type"]](source, model_dir)

    @classmethod
    def in_place(cls, settings: dict) -> Checkpoint | None:
        """A local source's folder or file, read where it lies (the other sources are written by fetch)."""
        source = settings["source"]
        return open_clip_checkpoint(source) if source["type"] == "local" else None

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> "OpenClip":
        import open_clip
        import torch

        settings = {**cls.defaults, **settings}
        model_dir = Path(model_dir)
        if model_dir.is_file():
            return cls._load_file(settings, model_dir, device)
        if not (model_dir / CONFIG_NAME).is_file():
            raise VlmgridError(f"{model_dir / CONFIG_NAME} is missing; run `vlmgrid fetch-model` for this model first")
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[settings["precision"]]
        if device == "cpu":
            dtype = torch.float32  # half precision on the CPU is slow and not what a reference run uses
        name = f"local-dir:{model_dir}"
        model_cfg = json.loads((model_dir / CONFIG_NAME).read_text(encoding="utf-8"))["model_cfg"]
        model, _, preprocess = open_clip.create_model_and_transforms(
            name, device=device, **local_text_tower(model_cfg, model_dir))
        model = model.to(dtype=dtype).eval()
        tokenizer = open_clip.get_tokenizer(name)
        return cls(settings, model, preprocess, tokenizer, device, dtype, _weights_fingerprint(settings, model_dir))

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
