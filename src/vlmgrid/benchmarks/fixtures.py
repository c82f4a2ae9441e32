"""Building blocks for fixture generators: deterministic drawings, encodings and raw containers.

Everything here is a pure function of its arguments (and the seed inside them): the same seed gives
byte-identical files, so fixture benchmarks have stable fingerprints.
"""

from __future__ import annotations

import functools
import gzip
import io
import math
import random
import tarfile
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vlmgrid import fileio
from vlmgrid.errors import VlmgridError

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "blue": (40, 80, 220),
    "yellow": (240, 210, 40),
    "purple": (140, 60, 180),
    "orange": (245, 140, 30),
    "white": (245, 245, 245),
    "pink": (240, 130, 180),
    "green": (40, 170, 70),
    "black": (20, 20, 20),
    "brown": (130, 80, 40),
}

SHAPES = ("circle", "ring", "star", "square", "diamond", "cross", "triangle", "hexagon", "arrow")


def rng_for(seed: int, *salt: object) -> random.Random:
    """A private random stream per (seed, purpose), so adding draws in one place never shifts another."""
    return random.Random("|".join(map(str, (int(seed), *salt))))


@functools.lru_cache(maxsize=None)
def font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def canvas(size: int, background: tuple[int, int, int]) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGB", (size, size), background)
    return image, ImageDraw.Draw(image)


def _regular(cx: float, cy: float, r: float, n: int, phase: float = -math.pi / 2) -> list[tuple[float, float]]:
    return [(cx + r * math.cos(phase + 2 * math.pi * k / n), cy + r * math.sin(phase + 2 * math.pi * k / n)) for k in range(n)]


def draw_shape(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, fill) -> None:
    """Draw one named shape of radius r centred at (cx, cy)."""
    box = (cx - r, cy - r, cx + r, cy + r)
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "ring":
        draw.ellipse(box, outline=fill, width=max(2, int(r / 3)))
    elif shape == "square":
        draw.rectangle((cx - r * 0.8, cy - r * 0.8, cx + r * 0.8, cy + r * 0.8), fill=fill)
    elif shape == "diamond":
        draw.polygon(_regular(cx, cy, r, 4), fill=fill)
    elif shape == "triangle":
        draw.polygon(_regular(cx, cy, r, 3), fill=fill)
    elif shape == "hexagon":
        draw.polygon(_regular(cx, cy, r, 6, phase=0.0), fill=fill)
    elif shape == "star":
        outer = _regular(cx, cy, r, 5)
        inner = _regular(cx, cy, r * 0.45, 5, phase=-math.pi / 2 + math.pi / 5)
        draw.polygon([p for pair in zip(outer, inner) for p in pair], fill=fill)
    elif shape == "cross":
        w = r * 0.35
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=fill)
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=fill)
    elif shape == "arrow":
        w = r * 0.3
        draw.rectangle((cx - r, cy - w, cx + r * 0.2, cy + w), fill=fill)
        draw.polygon([(cx + r * 0.1, cy - r * 0.8), (cx + r, cy), (cx + r * 0.1, cy + r * 0.8)], fill=fill)
    else:  # pragma: no cover - a programming error, not a user error
        raise ValueError(f"unknown shape {shape!r}")


def draw_label(draw: ImageDraw.ImageDraw, text: str, cx: float, top: float, size: int = 10, fill=(0, 0, 0)) -> None:
    f = font(size)
    left, _, right, _ = draw.textbbox((0, 0), text, font=f)
    draw.text((cx - (right - left) / 2, top), text, font=f, fill=fill)


def encode(image: Image.Image, fmt: str) -> bytes:
    """JPEG (quality 90) or PNG bytes; PIL writes no timestamps, so the bytes depend on the pixels only."""
    buffer = io.BytesIO()
    if fmt == "JPEG":
        image.save(buffer, format="JPEG", quality=90)
    elif fmt == "PNG":
        image.save(buffer, format="PNG")
    else:  # pragma: no cover
        raise ValueError(fmt)
    return buffer.getvalue()


def truncate(data: bytes) -> bytes:
    """Deliberately broken image bytes: the first third of a real encoding (PIL cannot load them)."""
    return data[: max(16, len(data) // 3)]


def pick_corrupt(seed: int, candidates: list, count: int, what: str) -> set:
    """The `count` candidates (e.g. image numbers) a fixture writes unreadable, chosen by seed."""
    if count > len(candidates):
        raise VlmgridError(
            f"fixture source: `corrupt: {count}` is more than the {len(candidates)} {what} this fixture "
            f"writes; lower `corrupt` or raise `size`"
        )
    return set(rng_for(seed, "corrupt").sample(sorted(candidates), count))


def write_mat(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """A MATLAB 5 .mat file (scipy.io.savemat) with a fixed header text instead of the creation time."""
    import scipy.io

    buffer = io.BytesIO()
    scipy.io.savemat(buffer, dict(arrays), format="5", do_compression=False, oned_as="row")
    data = bytearray(buffer.getvalue())
    header = b"MATLAB 5.0 MAT-file, Platform: posix, Created by: vlmgrid fixture"
    data[:116] = header.ljust(116, b" ")
    fileio.write_bytes(path, bytes(data))


def write_tgz(path: Path, members: Iterable[tuple[str, bytes]], directories: Iterable[str] = ()) -> None:
    """A .tgz whose bytes depend on the members only (mtime 0, no owner names, no gzip timestamp)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in directories:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0) as gz:
        gz.write(raw.getvalue())
    fileio.write_bytes(path, packed.getvalue())


def fixture_int(settings: Mapping, key: str, minimum: int) -> int:
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise VlmgridError(f"fixture source: `{key}` must be an integer >= {minimum}, not {value!r}; fix it in the config")
    return value
