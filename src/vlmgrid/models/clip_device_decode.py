"""open_clip's JPEG files decoded and resized on the device (`image_decode: device`), the opt-in fast path.

The workers only read each JPEG's bytes; the device decodes a batch of them at once
(torchvision.io.decode_jpeg), resizes each image's shorter side with the preprocessing's own interpolation
(antialiased, as PIL resamples) and crops its centre, with torchvision's tensor functions: the geometry of
open_clip's Resize + CenterCrop exactly (the same output sizes and crop offsets), the pixel values not
exactly. The resampling runs in float on the device where PIL's runs in fixed point, and nvjpeg's inverse
DCT is not libjpeg-turbo's, so a pixel may differ by a level or a few (docs/models.md states by how much, and
how many answers it changes). The default, `image_decode: host`, decodes every file with PIL.

Everything here takes the device as a parameter and runs on CPU tensors too (where decode_jpeg is
libjpeg-turbo), which is how the tests check it. A file the device path does not take (not a JPEG, a
greyscale or CMYK JPEG, a truncated one, one decode_jpeg refuses) goes the host path, in the worker or here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from vlmgrid.images import MAX_PIXELS
from vlmgrid.models.clip_files import WorkerPool, join_lists, load_pixels, steps_for_workers


def device_geometry(geometric) -> tuple | None:
    """(resize size, interpolation, crop size) where the PIL steps are a Resize of the shorter side and a
    CenterCrop that this module reproduces, else None (the host path decodes every file)."""
    from torchvision.transforms import CenterCrop, InterpolationMode, Resize

    steps = steps_for_workers(geometric)
    if len(steps) != 2 or type(steps[0]) is not Resize or type(steps[1]) is not CenterCrop:
        return None
    resize, crop = steps
    size = resize.size if isinstance(resize.size, int) else list(resize.size)
    if isinstance(size, list) and len(size) != 1:  # both sides given: a squash, not a shorter-side resize
        return None
    if resize.max_size is not None or resize.antialias is False:
        return None
    if resize.interpolation not in (InterpolationMode.BICUBIC, InterpolationMode.BILINEAR):
        return None
    return size, resize.interpolation, list(crop.size)


def read_for_device(path, geometric) -> tuple:
    """What a worker hands over for one file: ("jpeg", path, its bytes as a uint8 tensor) for a complete
    3-channel JPEG, else ("host", path, (pixels, problem)) from the host path."""
    import torch
    from PIL import Image

    try:
        with Image.open(path) as image:
            size = image.width * image.height
            takes = image.format == "JPEG" and image.mode == "RGB" and size <= MAX_PIXELS
        data = Path(path).read_bytes() if takes else b""
    except Exception:  # missing, unreadable, not an image: the host path says why, in its own words
        takes, data = False, b""
    # a truncated file ends without its end-of-image marker: libjpeg would fill it in where PIL refuses it
    if takes and data.rstrip(b"\0").endswith(b"\xff\xd9"):
        return "jpeg", str(path), torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return "host", str(path), load_pixels(path, geometric)


class FileBytes:
    """The map-style dataset of the device path's workers, indexed by path: read_for_device of it."""

    def __init__(self, geometric) -> None:
        self.geometric = steps_for_workers(geometric)

    def __getitem__(self, path: str):
        return read_for_device(path, self.geometric)


def worker_pool(geometric, batch_size: int, workers: int) -> WorkerPool:
    return WorkerPool(FileBytes(geometric), collate_items, join_lists, geometric, batch_size, workers)


def collate_items(items: list) -> list:
    """A batch as the items themselves, host pixels as tensors (shared memory, not pickles)."""
    import torch

    return [
        (kind, path, payload)
        if kind == "jpeg" or payload[0] is None
        else (kind, path, (torch.from_numpy(payload[0].copy()), None))  # PIL's arrays are read-only
        for kind, path, payload in items
    ]


def device_batches(
    paths: Sequence, geometric, geometry: tuple, batch_size: int, pool: WorkerPool | None, device: str
) -> Iterator[tuple[int, list, object]]:
    """(start, problems, usable pixels as one uint8 tensor (n, 3, height, width) on `device`) per batch: the
    files read by the pool's workers (worker_pool), or here where there is none."""
    if pool is None:
        dataset = FileBytes(geometric)
        batches = (
            (start, collate_items([dataset[str(path)] for path in paths[start : start + batch_size]]))
            for start in range(0, len(paths), batch_size)
        )
    else:
        batches = pool.batches(paths)
    for start, items in batches:
        yield (start, *decode_batch(items, geometric, geometry, device))


def decode_batch(items: list, geometric, geometry: tuple, device: str) -> tuple[list, object]:
    """(problems, usable pixels (n, 3, height, width) uint8 on `device`) of one batch of worker items."""
    import torch

    jpegs = [k for k, (kind, _, _) in enumerate(items) if kind == "jpeg"]
    decoded = dict(zip(jpegs, _decode_jpegs([items[k][2] for k in jpegs], device)))
    problems, images = [], []
    for k, (kind, path, payload) in enumerate(items):
        image = decoded.get(k)
        if kind == "jpeg" and image is None:  # decode_jpeg refused it: the host path, here
            kind, payload = "host", load_pixels(path, geometric)
        if kind == "jpeg":
            images.append(resize_and_crop(image, geometry))
            problems.append(None)
            continue
        pixels, problem = payload
        problems.append(problem)
        if problem is None:
            pixels = torch.as_tensor(pixels)
            images.append(pixels.to(device, non_blocking=True).permute(2, 0, 1))
    stacked = torch.stack(images) if images else None
    return problems, stacked


def _decode_jpegs(datas: list, device: str) -> list:
    """Each JPEG decoded to RGB (3, height, width) uint8 on `device`, or None where the decoder refuses it:
    the batch at once, or one by one where the batch fails."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if not datas:
        return []
    try:
        return list(decode_jpeg(datas, mode=ImageReadMode.RGB, device=device))
    except RuntimeError:
        pass
    decoded = []
    for data in datas:
        try:
            decoded.append(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))
        except RuntimeError:
            decoded.append(None)
    return decoded


def resize_and_crop(image, geometry: tuple):
    """open_clip's Resize (shorter side, antialiased) and CenterCrop of one (3, height, width) uint8 image,
    with the same output sizes and offsets as on a PIL image; uint8 out."""
    import torchvision.transforms.functional as F

    size, interpolation, crop = geometry
    resized = F.resize(image, size, interpolation=interpolation, antialias=True)
    return F.center_crop(resized, crop)
