"""open_clip contrastive models: image and text embeddings (loading them: vlmgrid.models.open_clip_loading).

`embed_image_files` reads images from their files: worker processes sized to the cores decode them and run
the preprocessing's PIL steps a few batches ahead of the model (vlmgrid.models.clip_files), and the tensor
steps (to float, normalise) run on whole batches on the device, so the pixels, and the embeddings, are those
of `embed_images` on the opened images. The decoded pixels are kept in the pixel cache (vlmgrid.pixel_cache,
unless `pixel_cache: false`), so the next pass over the same files at the same preprocessing reads them
instead of decoding again. `image_decode: device` decodes and resizes JPEGs on a CUDA device instead
(vlmgrid.models.clip_device_decode): faster, with slightly different pixels, so it is part of the model's
identity and bypasses the pixel cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vlmgrid import pixel_cache
from vlmgrid.images import ImageError, open_rgb
from vlmgrid.models import clip_device_decode, clip_files
from vlmgrid.models.base import Backend, require_finite, write_fixture
from vlmgrid.models.checkpoints import Checkpoint
from vlmgrid.models.open_clip_loading import in_place_checkpoint, load_model


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
        "decode_workers": "auto",  # worker processes decoding image files: the usable cores, or a number
        "image_decode": "host",  # or "device": JPEGs decoded and resized on a CUDA device
    }
    # the workers' and the cache's pixels are those of the images opened one by one (image_decode's are not)
    run_only = frozenset({"decode_workers", "pixel_cache"})

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
        self._pools: dict = {}  # decoding workers by path ("host", "device"), once a call needs them

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
        split = _split_preprocess(preprocess)
        if device == "cuda" and settings["decode_workers"] != 0 and split is not None:
            # a GPU job is worth the workers: their fork server starts while the model loads and the
            # classifier is built (a CPU job, such as the default grid's, may never need it)
            clip_files.start_fork_server(split[0])
        return cls(settings, model, preprocess, tokenizer, device, dtype, fingerprint)

    def decodes_on_device(self) -> bool:
        """JPEGs decoded on the device: asked for, and a CUDA device to do it (elsewhere the host decodes)."""
        return self.settings["image_decode"] == "device" and self.device == "cuda"

    def identity(self) -> str | None:
        # the device's decoding gives other pixels: its embeddings are never mixed with the host's
        decoded = ":jpeg-decoded-on-device" if self.decodes_on_device() else ""
        return f"open_clip:{self.weights_fingerprint}:{self.dtype}:{self.device}{decoded}"

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
            device=(torch.cuda.get_device_name() if self.device == "cuda" else "cpu")
            + (", JPEG decoded on the device" if self.decodes_on_device() else ""),
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
        embeddings = np.concatenate(outputs) if outputs else np.zeros((0, 0), dtype=np.float32)
        names = [f"image {i + 1} of the {len(images)} in the call" for i in range(len(embeddings))]
        require_finite(embeddings, names, "the image embedding", self._nonfinite_fix())
        return embeddings

    def embed_image_files(self, paths: Sequence[Path]) -> tuple[np.ndarray, list[str | None]]:
        """Embeddings of the image files (a zero row where one is unreadable) and, per file, why it is
        unreadable.

        The same pixels as `embed_images` on the opened images: the preprocessing's PIL steps (resize, crop)
        run in decoding workers, its tensor steps (to float, normalise) on whole batches on the device. With
        `image_decode: device` on CUDA, JPEGs are decoded, resized and cropped on the device (pixels within
        the documented tolerance of these).
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
        # Each batch's embeddings stay on the device until every batch is launched: reading one back waits for
        # the device, and the host would then fetch and cache the next batch while the device idles.
        launched: list = []  # (start, the usable files' positions in the batch, their embeddings)
        with torch.inference_mode():
            for start, batch_problems, pixels in self._usable_pixels(paths, geometric):
                problems[start : start + len(batch_problems)] = batch_problems
                if pixels is None:
                    continue
                # torchvision's to_tensor and normalize, on the whole batch: the same float32 operations
                pixels = pixels.to(torch.float32).div(255).sub_(mean).div_(std)
                encoded = self.model.encode_image(pixels.to(self.dtype), normalize=True).float()
                usable = [k for k, problem in enumerate(batch_problems) if problem is None]
                launched.append((start, usable, encoded))
            for start, usable, encoded in launched:
                for row, k in zip(encoded.cpu().numpy(), usable):
                    features[start + k] = row
        embeddings = _stack_rows(features)
        names = [str(path) for path in paths]
        require_finite(embeddings, names, "the image embedding", self._nonfinite_fix())
        return embeddings, problems

    def _usable_pixels(self, paths: Sequence[Path], geometric):
        """(start, problems, the usable files' pixels as one uint8 tensor (n, 3, height, width) on the device,
        or None) per batch."""
        import torch

        batch_size = int(self.settings["batch_size"])
        geometry = clip_device_decode.device_geometry(geometric) if self.decodes_on_device() else None
        if geometry is not None:
            pool = self._pool("device", geometric, len(paths))
            yield from clip_device_decode.device_batches(
                paths, geometric, geometry, batch_size, pool, self.device
            )
            return
        for start, rows in self._pixel_batches(paths, geometric):
            usable = [pixels for pixels, problem in rows if problem is None]
            if not usable:
                yield start, [problem for _, problem in rows], None
                continue
            stacks = getattr(rows, "stacked", None) or [torch.from_numpy(np.stack(usable))]
            on_device = [stack.to(self.device, non_blocking=True) for stack in stacks]
            pixels = (on_device[0] if len(on_device) == 1 else torch.cat(on_device)).permute(0, 3, 1, 2)
            yield start, [problem for _, problem in rows], pixels

    def _pixel_batches(self, paths: Sequence[Path], geometric):
        """The files' pixels batch by batch: from the pixel cache, or decoded (filling the cache on the
        way)."""
        batch_size = int(self.settings["batch_size"])
        if self.settings["pixel_cache"]:
            geometry = pixel_cache.describe_steps(geometric)
            key = pixel_cache.entry_key(paths, geometry)
            cached = pixel_cache.load(key, len(paths))
            if cached is not None:
                return pixel_cache.batches(*cached, batch_size)
        pool = self._pool("host", geometric, len(paths))
        if pool is None:
            decoded = clip_files.threaded_batches(paths, geometric, batch_size, clip_files.usable_cores())
        else:
            decoded = clip_files.pixel_batches(pool, paths)
        if not self.settings["pixel_cache"]:
            return decoded
        return pixel_cache.filling(key, len(paths), decoded, geometry)

    def _pool(self, path: str, geometric, n_files: int):
        """The worker processes of the host or the device path, started by the first call with enough files;
        None: decode in this process."""
        workers = clip_files.worker_count(self.settings["decode_workers"], n_files)
        if workers == 0:
            return None
        if path not in self._pools:
            batch_size = int(self.settings["batch_size"])
            if path == "device":
                self._pools[path] = clip_device_decode.worker_pool(geometric, batch_size, workers)
            else:
                self._pools[path] = clip_files.WorkerPool(
                    clip_files.FilePixels(geometric),
                    clip_files.collate_pixels,
                    clip_files.join_pixels,
                    geometric,
                    batch_size,
                    workers,
                    pin=self.device == "cuda",
                )
        return self._pools[path]

    def _embed_files_plainly(self, paths: Sequence[Path]) -> tuple[np.ndarray, list[str | None]]:
        images, problems = [], []
        for path in paths:
            try:
                images.append(open_rgb(Path(path)))  # transparency dropped, as convert("RGB") does
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
        embeddings = np.concatenate(outputs) if outputs else np.zeros((0, 0), dtype=np.float32)
        names = [repr(text) for text in texts]
        require_finite(embeddings, names, "the text embedding", self._nonfinite_fix())
        return embeddings

    def _nonfinite_fix(self) -> str:
        """What to do where an embedding is not finite (vlmgrid.models.base.require_finite)."""
        return (
            f"{self.describe()} overflowed at its precision (precision: fp32 avoids that) or its weights "
            "are damaged; nothing of this call was written"
        )


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


def _stack_rows(rows: list) -> np.ndarray:
    """The rows as one float32 array; a missing row (an unreadable image) is zeros."""
    present = next((row for row in rows if row is not None), None)
    if present is None:
        return np.zeros((len(rows), 0), dtype=np.float32)
    return np.stack([np.zeros_like(present) if row is None else row for row in rows]).astype(np.float32)
