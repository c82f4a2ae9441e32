"""Open benchmark images the same way everywhere; a bad image becomes a reason string, never a crash."""

from __future__ import annotations

import warnings
from pathlib import Path

from PIL import Image

# Larger images than this are refused rather than decoded: a decompression bomb would exhaust memory.
MAX_PIXELS = 178_956_970


class ImageError(Exception):
    """An image that cannot be used; the message says why, for the predictions' error column."""


def open_rgb(path: Path) -> Image.Image:
    """Decode `path` fully and return an RGB image (palette, alpha, CMYK and 16-bit modes converted)."""
    if not path.is_file():
        raise ImageError(f"image missing: {path}")
    try:
        with warnings.catch_warnings():
            # MAX_PIXELS decides; PIL's warning from half of it would refuse images under the limit.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.width * image.height > MAX_PIXELS:
                    raise ImageError(f"image too large ({image.width}x{image.height} pixels, over {MAX_PIXELS}): {path}")
                image.load()
                return _to_rgb(image)
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:  # PIL refuses before the size is known to us
        raise ImageError(f"image too large ({exc}): {path}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise ImageError(f"image unreadable: {path}: {exc}") from None


def _to_rgb(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image.copy()
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit greyscale: scale to 8 bits instead of clipping everything to white.
        image = image.point(lambda value: value / 256).convert("L")
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA"):
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image.convert("RGBA"), mask=image.convert("RGBA").getchannel("A"))
        return background
    return image.convert("RGB")
