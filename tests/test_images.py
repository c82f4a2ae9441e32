import errno

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from vlmgrid import images
from vlmgrid.images import ImageError, ImageReadFailed, open_rgb


def _save(tmp_path, image, name):
    path = tmp_path / name
    image.save(path)
    return path


@pytest.mark.parametrize("mode", ["L", "P", "RGBA", "CMYK", "LA", "I;16", "1"])
def test_unusual_modes_become_rgb(tmp_path, mode):
    source = Image.new("RGB", (8, 6), (200, 100, 50)).convert(mode)
    name = "x.tiff" if mode == "CMYK" else "x.png"
    result = open_rgb(_save(tmp_path, source, name))
    assert result.mode == "RGB" and result.size == (8, 6)


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path):
    grey = Image.fromarray(np.full((4, 4), 32768, dtype=np.uint16))
    result = open_rgb(_save(tmp_path, grey, "g.png"))
    assert result.getpixel((0, 0)) == (128, 128, 128)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_transparency_is_composited_onto_white_or_dropped_as_the_models_evaluation_did(tmp_path, mode):
    """A transparent pixel whose stored colour is dark red: "drop", the default, shows the stored colour, as
    PIL's convert("RGB") does in the authors' evaluations; "white" shows white (transformers' processors from
    5.21)."""
    if mode == "P":
        source = Image.new("P", (2, 2), 1)
        source.putpalette([255, 255, 255, 120, 0, 0] + [0] * 762)
        source.info["transparency"] = 1
        stored = (120, 0, 0)
    else:
        source = Image.new("RGBA", (2, 2), (120, 0, 0, 0)).convert(mode)
        stored = (120, 0, 0) if mode == "RGBA" else (36, 36, 36)  # LA keeps the grey of dark red
    path = _save(tmp_path, source, "t.png")
    assert open_rgb(path).getpixel((0, 0)) == stored
    assert open_rgb(path, "white").getpixel((0, 0)) == (255, 255, 255)
    assert open_rgb(path, "drop").getpixel((0, 0)) == stored
    with pytest.raises(ValueError, match="image_alpha 'black'"):
        open_rgb(path, "black")


def test_each_model_opens_its_images_as_its_entry_or_backend_says(tmp_path):
    from vlmgrid.models.base import Backend
    from vlmgrid.models.open_clip_backend import OpenClip
    from vlmgrid.protocols.base import image_alpha, load_images

    _save(tmp_path, Image.new("RGBA", (2, 2), (120, 0, 0, 0)), "t.png")
    bench = type("Bench", (), {"root": tmp_path})()
    records = pd.DataFrame({"id": ["q"], "image": ["t.png"]})

    def model(cls, **settings):
        backend = cls.__new__(cls)
        backend.settings = settings
        return backend

    assert image_alpha(model(Backend)) == image_alpha(model(OpenClip)) == image_alpha(object()) == "drop"
    assert image_alpha(model(Backend, image_alpha="white")) == "white"
    (image,), _ = load_images(bench, records, image_alpha(model(Backend, image_alpha="white")))
    assert image.getpixel((0, 0)) == (255, 255, 255)
    (image,), _ = load_images(bench, records, image_alpha(model(Backend)))
    assert image.getpixel((0, 0)) == (120, 0, 0)


def test_truncated_jpeg_is_an_image_error(tmp_path):
    path = _save(tmp_path, Image.new("RGB", (64, 64), (1, 2, 3)), "t.jpg")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ImageError, match="image unreadable: .*t.jpg"):
        open_rgb(path)


def test_missing_image(tmp_path):
    with pytest.raises(ImageError, match="image missing"):
        open_rgb(tmp_path / "none.png")


def test_decompression_bomb_is_refused(tmp_path, monkeypatch):
    path = _save(tmp_path, Image.new("L", (100, 100)), "big.png")
    monkeypatch.setattr(images, "MAX_PIXELS", 1000)
    with pytest.raises(ImageError, match="too large"):
        open_rgb(path)


@pytest.mark.parametrize("code", [errno.EMFILE, errno.EIO, errno.EACCES])
def test_a_system_error_reading_a_good_image_is_never_the_images_error(tmp_path, monkeypatch, code):
    """Too many open files, an I/O error or no permission say nothing of the image: not an error row (which
    the metric would count as the item's wrong answer, and the pixel cache would keep), the job stops."""
    import os

    from vlmgrid.protocols.base import load_images

    path = _save(tmp_path, Image.new("RGB", (8, 8), (1, 2, 3)), "ok.png")

    def failing(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(images.Image, "open", failing)
    with pytest.raises(ImageReadFailed, match=f"^the image {path} could not be read: {os.strerror(code)} "):
        open_rgb(path)
    bench = type("Bench", (), {"root": tmp_path})()
    with pytest.raises(ImageReadFailed):
        load_images(bench, pd.DataFrame({"id": ["q1"], "image": ["ok.png"]}))
