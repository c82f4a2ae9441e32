"""open_clip contrastive models: image and text embeddings (loading them: vlmgrid.models.open_clip_loading).

`embed_image_files` reads images from their files: threads decode them and run the preprocessing's PIL steps
a few batches ahead of the model, and the tensor steps (to float, normalise) run on
whole batches on the device, so the pixels, and the embeddings, are those of `embed_images` on the opened
images. The decoded pixels are kept in the pixel cache (vlmgrid.pixel_cache, unless `pixel_cache: false`), so
the next pass over the same files at the same preprocessing reads them instead of decoding again.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from vlmgrid import pixel_cache
from vlmgrid.images import ImageError, open_rgb
from vlmgrid.models.base import Backend, write_fixture
from vlmgrid.models.checkpoints import Checkpoint
from vlmgrid.models.open_clip_loading import in_place_checkpoint, load_model

# Image files are decoded and resized by this many threads (PIL releases the GIL while it decodes and
# resamples), a few batches ahead of the model, so the accelerator does not wait on one CPU core.
DECODE_WORKERS = min(
    16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
)
DECODE_AHEAD = 3  # batches decoded ahead of the one the model is running


class OpenClip(Backend):
    name = "open_clip"
    capabilities = frozenset({"embed"})
    uses_gpu = True
    # Images are resized to one size and texts padded to the fixed context length, so nothing a batch pads
    # reaches an embedding.
    unbatched = "a contrastive model embeds at fixed sizes, with no padding that depends on the batch"
    defaults = {
        "batch_size": 64,
        "text_batch_size": 1024,
        "precision": "fp32",
        "device": "auto",
        "pixel_cache": True,
    }

    def __init__(
        self, settings: dict, model, preprocess, tokenizer, device: str, dtype, weights_fingerprint: str
    ) -> None:
        super().__init__(settings)
        self.weights_fingerprint = weights_fingerprint
        self.model = model
        self.preprocess = preprocess
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path, fixture=None) -> dict[str, Path]:
        """A fixture's tiny checkpoint, written into model_dir (the other sources are read in place)."""
        return write_fixture(cls.name, settings["source"], model_dir, fixture)

    @classmethod
    def in_place(cls, settings: dict) -> Checkpoint | None:
        """A local source's folder or file, or a pretrained tag's or hf_hub repo's files in the Hugging Face
        cache, read where they lie (a fixture is written by fetch)."""
        return in_place_checkpoint(settings["source"])

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> OpenClip:
        settings = {**cls.defaults, **settings}
        model, preprocess, tokenizer, dtype, fingerprint = load_model(settings, model_dir, device)
        return cls(settings, model, preprocess, tokenizer, device, dtype, fingerprint)

    def identity(self) -> str | None:
        return f"open_clip:{self.weights_fingerprint}:{self.dtype}:{self.device}"

    def provenance(self):
        import open_clip
        import torch

        from vlmgrid.models.base import Provenance

        source = self.settings["source"]
        model_id = {
            "fixture": "fixture",
            "pretrained": f"{source.get('arch')}/{source.get('tag')}",
            "hf_hub": source.get("repo"),
            "local": str(source.get("path")),
        }[source["type"]]
        return Provenance(
            backend=self.name,
            model_id=model_id,
            revision=source.get("revision"),
            dtype=str(self.dtype).replace("torch.", ""),
            device=torch.cuda.get_device_name() if self.device == "cuda" else "cpu",
            batch_size=int(self.settings["batch_size"]),
            libraries={"torch": torch.__version__, "open_clip": open_clip.__version__},
        )

    def describe(self) -> str:
        return (
            f"open_clip on {self.device} ({self.settings['precision'] if self.device != 'cpu' else 'fp32'})"
        )

    def _batches(self, items: Sequence, key: str = "batch_size") -> list[Sequence]:
        size = int(self.settings[key])
        return [items[start : start + size] for start in range(0, len(items), size)]

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
        """Embeddings of the image files (a zero row where one is unreadable) and, per file, why it is
        unreadable.

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
                pixels = torch.from_numpy(np.stack([loaded[k][0] for k in usable])).to(
                    self.device, non_blocking=True
                )
                # torchvision's to_tensor and normalize, on the whole batch: the same float32 operations
                pixels = pixels.permute(0, 3, 1, 2).to(torch.float32).div(255).sub_(mean).div_(std)
                encoded = self.model.encode_image(pixels.to(self.dtype), normalize=True).float().cpu().numpy()
                for row, k in zip(encoded, usable):
                    features[start + k] = row
        return _stack_rows(features), problems

    def _pixel_batches(self, paths: Sequence[Path], geometric):
        """The files' pixels batch by batch: from the pixel cache, or decoded (filling the cache on the
        way)."""
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
    """(the PIL steps before ToTensor, mean, std) of open_clip's Compose, or None if it is not of that
    shape."""
    steps = list(getattr(preprocess, "transforms", []))
    names = [type(step).__name__ for step in steps]
    to_tensor = next((i for i, name in enumerate(names) if name in ("ToTensor", "MaybeToTensor")), None)
    if to_tensor is None or names[to_tensor + 1 :] != ["Normalize"]:
        return None
    normalize = steps[-1]
    return steps[:to_tensor], tuple(normalize.mean), tuple(normalize.std)


def _load_pixels(path, geometric) -> tuple[np.ndarray | None, str | None]:
    """The image at `path` after the PIL steps, as uint8 (height, width, 3), or None and why it is
    unusable."""
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
            yield start, [_load_pixels(path, geometric) for path in paths[start : start + batch_size]]
        return
    starts = iter(starts)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()

        def submit() -> None:
            start = next(starts, None)
            if start is not None:
                pending.append(
                    (
                        start,
                        [
                            pool.submit(_load_pixels, path, geometric)
                            for path in paths[start : start + batch_size]
                        ],
                    )
                )

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
