"""Open benchmark images the same way everywhere; a bad image becomes a reason string, never a crash."""

from __future__ import annotations

import warnings
from pathlib import Path

from PIL import Image

from vlmgrid.errors import VlmgridError

# Larger images than this are refused rather than decoded: a decompression bomb would exhaust memory.
MAX_PIXELS = 178_956_970
#: The key of an opened image's `info` that names the file it was read from.
SOURCE_KEY = "vlmgrid_source"
#: How transparency becomes RGB, as a model entry's `image_alpha` says: "drop" discards the alpha channel and
#: keeps the colours stored under it, as PIL's convert("RGB") does, which is what the evaluations vlmgrid
#: reproduces did (LLaVA's, lmms-eval's, VLMEvalKit's, LAVIS's, CLIP_benchmark's loaders; transformers'
#: processors before 5.21); "white" composites the image onto white (transformers' processors from 5.21).
ALPHA_MODES = ("drop", "white")


class ImageError(Exception):
    """An image that cannot be used; the message says why, for the predictions' error column."""


class ImageReadFailed(VlmgridError):
    """The system could not read an image file (too many open files, an I/O error, no permission): not the
    image's fault, so never an error row, and never remembered as one; the job stops, and its rerun reads the
    image again."""


def open_rgb(path: Path, alpha: str = "drop") -> Image.Image:
    """Decode `path` fully and return an RGB image (palette, alpha, CMYK and 16-bit modes converted; a
    transparent one as `alpha` says: ALPHA_MODES)."""
    if alpha not in ALPHA_MODES:
        raise ValueError(f"image_alpha {alpha!r}: one of {', '.join(ALPHA_MODES)}")
    if not path.is_file():
        raise ImageError(f"image missing: {path}")
    try:
        with warnings.catch_warnings():
            # MAX_PIXELS decides; PIL's warning from half of it would refuse images under the limit.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.width * image.height > MAX_PIXELS:
                    raise ImageError(
                        f"image too large ({image.width}x{image.height} pixels, over {MAX_PIXELS}): {path}"
                    )
                image.load()
                rgb = _to_rgb(image, alpha)
                rgb.info[SOURCE_KEY] = str(path)  # which file it is, for `vlmgrid inputs` (copies keep it)
                return rgb
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:  # PIL refuses before the size is known to us
        raise ImageError(f"image too large ({exc}): {path}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        # PIL's own decoding errors carry no errno; one that does came from the system, not the file's bytes
        if isinstance(exc, OSError) and exc.errno is not None:
            raise ImageReadFailed(
                f"the image {path} could not be read: {exc.strerror or exc} (the system's error, not the "
                "image's); fix that and run again"
            ) from None
        raise ImageError(f"image unreadable: {path}: {exc}") from None


def _to_rgb(image: Image.Image, alpha: str) -> Image.Image:
    if image.mode == "RGB":
        return image.copy()
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit greyscale: scale to 8 bits instead of clipping everything to white.
        image = image.point(lambda value: value / 256).convert("L")
    if alpha == "drop":
        return image.convert("RGB")
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA"):
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image.convert("RGBA"), mask=image.convert("RGBA").getchannel("A"))
        return background
    return image.convert("RGB")


def pad_to_square(image: Image.Image, fill: tuple[int, ...]) -> Image.Image:
    """The image centred on a square canvas of colour `fill`, as wide as its longer side (LLaVA-1.5's
    `image_aspect_ratio: pad`): the shorter side is padded by half the difference on the top or left (rounded
    down) and the rest on the bottom or right. A square image is returned as it is."""
    width, height = image.size
    if width == height:
        return image
    side = max(width, height)
    canvas = Image.new(image.mode, (side, side), fill)
    canvas.paste(image, ((side - width) // 2, (side - height) // 2))
    canvas.info.update(image.info)
    return canvas
