"""open_clip's image files decoded in worker processes give exactly the pixels and embeddings of the opened
images; decoded on the device (here: the same torch ops on CPU tensors) they stay within the documented
tolerance, and every file the device path does not take goes the host path."""

import os

import numpy as np
import pytest
from helpers.images import open_problem
from PIL import Image

from vlmgrid import pixel_cache
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip
from vlmgrid.images import open_rgb
from vlmgrid.models import BACKENDS, clip_device_decode, clip_files
from vlmgrid.models.open_clip_backend import _split_preprocess

SETTINGS = {"backend": "open_clip", "source": {"type": "fixture"}, "batch_size": 3, "pixel_cache": False}
# The device path's pixels against PIL's, in uint8 levels (docs/models.md: at most 5, under 0.25 on average;
# nvjpeg's inverse DCT may add a level on a GPU)
MAX_LEVELS, MEAN_LEVELS = 5, 0.25


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clip")
    write_tiny_open_clip(folder, seed=0)
    return folder


def _load(model_dir, **settings):
    return BACKENDS.get("open_clip").load({**SETTINGS, **settings}, model_dir, "cpu")


def _photo(path, width, height, seed, mode="RGB"):
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)).resize((width, height))
    noisy = np.asarray(small).astype(np.int16) + rng.integers(-12, 12, (height, width, 3))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).convert(mode).save(path, quality=90)
    return path


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    """Photo-like JPEGs of odd sizes, a PNG, CMYK and greyscale JPEGs, a broken, a truncated and a missing
    file."""
    folder = tmp_path_factory.mktemp("pictures")
    sizes = [(50, 37), (37, 50), (64, 64), (33, 90), (120, 45), (81, 60)]
    jpegs = [_photo(folder / f"img_{k}.JPEG", w, h, k) for k, (w, h) in enumerate(sizes)]
    png = _photo(folder / "picture.png", 40, 52, 10)
    cmyk = _photo(folder / "cmyk.jpg", 45, 40, 11, "CMYK")
    grey = _photo(folder / "grey.jpg", 45, 40, 12, "L")
    # transparent where its colour is dark: open_clip drops the alpha (convert("RGB")), never whitens it
    clear = np.dstack([np.asarray(Image.open(png)), np.tile(np.arange(52)[:, None] * 5, (1, 40))])
    Image.fromarray(clear.astype(np.uint8), "RGBA").save(folder / "clear.png")
    broken = folder / "broken.JPEG"
    broken.write_bytes(b"not a jpeg at all")
    truncated = folder / "truncated.JPEG"
    truncated.write_bytes(jpegs[0].read_bytes()[:400])
    return [
        *jpegs[:2],
        png,
        broken,
        cmyk,
        truncated,
        jpegs[2],
        grey,
        folder / "clear.png",
        folder / "missing.JPEG",
        *jpegs[2:],
    ]


@pytest.fixture
def in_workers(monkeypatch):
    """Worker processes however few the files."""
    monkeypatch.setattr(clip_files, "IN_PROCESS_BELOW", 0)


def test_workers_are_the_cores_and_few_files_start_none(monkeypatch):
    monkeypatch.setattr(clip_files, "usable_cores", lambda: 64)
    assert clip_files.worker_count("auto", 1000) == clip_files.MAX_AUTO_WORKERS == 32
    assert clip_files.worker_count(40, 1000) == 40 and clip_files.worker_count(0, 1000) == 0
    assert clip_files.worker_count("auto", clip_files.IN_PROCESS_BELOW - 1) == 0  # threads of this process


def test_files_decoded_in_workers_embed_exactly_as_opened_images(model_dir, pictures, in_workers):
    clip = _load(model_dir, decode_workers=2)
    assert clip_files.worker_count(clip.settings["decode_workers"], len(pictures)) == 2
    features, problems = clip.embed_image_files(pictures)

    assert problems == [open_problem(path) for path in pictures]
    assert [problem is not None for problem in problems].count(True) == 3  # broken, truncated, missing
    readable = [i for i, problem in enumerate(problems) if problem is None]
    opened = [open_rgb(pictures[i]) for i in readable]  # transparency dropped, as convert("RGB") does
    np.testing.assert_allclose(features[readable], clip.embed_images(opened), rtol=1e-5, atol=1e-6)
    assert pictures[8].name == "clear.png" and 8 in readable
    whitened = clip.embed_images([open_rgb(pictures[8], "white")])
    assert not np.allclose(whitened, features[8:9], atol=1e-4)  # the transparent picture: not whitened
    assert not features[[i for i in range(len(pictures)) if i not in readable]].any()
    in_process, in_process_problems = _load(model_dir, decode_workers=0).embed_image_files(pictures)
    assert in_process_problems == problems
    np.testing.assert_array_equal(features, in_process)  # the same pixels, the same batches


def _host_pool(steps, batch_size=4):
    return clip_files.WorkerPool(
        clip_files.FilePixels(steps),
        clip_files.collate_pixels,
        clip_files.join_pixels,
        steps,
        batch_size,
        workers=2,
    )


def test_a_batch_is_split_over_the_workers_in_chunks_of_at_least_the_minimum():
    assert clip_files.chunk_size(64, 16) == clip_files.MIN_CHUNK == 8
    assert clip_files.chunk_size(64, 2) == 32 and clip_files.chunk_size(64, 3) == 22
    assert clip_files.chunk_size(64, 32) == 8 and clip_files.chunk_size(5, 2) == 8


# chunks of 4, 6 and 10 files: a batch in one chunk; in two, the last batch in one; in two
@pytest.mark.parametrize("batch_size", [4, 11, 20])
def test_workers_pixels_equal_the_pil_steps_call_after_call(pictures, batch_size, monkeypatch):
    monkeypatch.setattr(clip_files, "MIN_CHUNK", 4)  # chunks of 4 files: a batch of several of them
    steps = [lambda_free_resize]
    pool = _host_pool(steps, batch_size)
    for files in (pictures, pictures[5:], pictures[::-1]):  # the same workers, each call its own files
        batches = list(clip_files.pixel_batches(pool, files))
        assert [start for start, _ in batches] == list(range(0, len(files), batch_size))
        assert [len(batch) for _, batch in batches[:-1]] == [batch_size] * (len(batches) - 1)
        rows = [row for _, batch in batches for row in batch]
        assert len(rows) == len(files)
        for path, (pixels, problem) in zip(files, rows):
            expected = clip_files.load_pixels(path, steps)
            assert problem == expected[1]
            assert (pixels is None and expected[0] is None) or np.array_equal(pixels, expected[0])
        for _, batch in batches:
            usable = [pixels for pixels, problem in batch if problem is None]
            stacked = np.concatenate([stack.numpy() for stack in batch.stacked])
            assert len(stacked) == len(usable) and all(map(np.array_equal, stacked, usable))
            assert len(batch.stacked) == -(-len(batch) // clip_files.chunk_size(batch_size, 2))  # one a chunk


def test_chunks_of_other_shapes_or_none_usable_join_as_the_batch():
    import torch

    square, wide = torch.zeros((2, 4, 4, 3), dtype=torch.uint8), torch.ones((1, 4, 6, 3), dtype=torch.uint8)
    pixels, problems = clip_files.join_pixels([(square, [None, None]), ([], ["broken"]), (wide, [None])])
    assert problems == [None, None, "broken", None]
    assert [tuple(image.shape) for image in pixels] == [(4, 4, 3)] * 2 + [(4, 6, 3)]
    rows = clip_files._rows(pixels, problems)
    assert rows.stacked is None and [row is None for row, _ in rows] == [False, False, True, False]
    pixels, problems = clip_files.join_pixels([([], ["broken"]), (square, [None, None]), (square, [None])])
    rows = clip_files._rows(pixels, problems)
    assert problems == ["broken", None, None, None] and len(rows.stacked) == 2
    assert [row is None for row, _ in rows] == [True, False, False, False]
    rows = clip_files._rows(*clip_files.join_pixels([([], ["a"]), ([], ["b"])]))
    assert rows.stacked is None and list(rows) == [(None, "a"), (None, "b")]


def lambda_free_resize(image):
    """A PIL step the worker processes can import (a lambda cannot be sent to them)."""
    return image.resize((8, 8))


def test_the_pixel_cache_is_filled_by_workers_and_read(
    model_dir, pictures, in_workers, tmp_path, monkeypatch
):
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))
    clip = _load(model_dir, pixel_cache=True, decode_workers=2)
    decoded, decoded_problems = clip.embed_image_files(pictures)
    assert len(list((tmp_path / "cache" / pixel_cache.PIXELS_DIR).glob("*.json"))) == 1

    def refuse(*args):
        raise AssertionError("decoded although cached")

    monkeypatch.setattr(clip_files, "pixel_batches", refuse)
    monkeypatch.setattr(clip_files, "threaded_batches", refuse)
    cached, cached_problems = clip.embed_image_files(pictures)
    assert cached_problems == decoded_problems and np.array_equal(cached, decoded)


def dies(image):
    """A PIL step that kills its worker, as running out of memory would."""
    os._exit(3)


def test_a_dead_worker_is_one_sentence(pictures, in_workers):
    with pytest.raises(VlmgridError, match=r"worker processes failed .*`decode_workers: 0`"):
        list(clip_files.pixel_batches(_host_pool([dies]), pictures))


# --- decoded on the device ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def geometric(model_dir):
    return _split_preprocess(_load(model_dir).preprocess)[0]


@pytest.mark.parametrize("workers", [0, 2])
def test_device_path_on_cpu_tensors_within_the_tolerance(pictures, geometric, workers, monkeypatch):
    monkeypatch.setattr(clip_files, "MIN_CHUNK", 2)  # each batch of 6 in two workers' chunks of 3
    geometry = clip_device_decode.device_geometry(geometric)
    assert geometry is not None
    pool = clip_device_decode.worker_pool(geometric, 6, workers) if workers else None
    batches = list(clip_device_decode.device_batches(pictures, geometric, geometry, 6, pool, "cpu"))
    assert [start for start, _, _ in batches] == list(range(0, len(pictures), 6))
    problems = [problem for _, batch_problems, _ in batches for problem in batch_problems]
    assert problems == [open_problem(path) for path in pictures]
    device = np.concatenate([pixels.numpy() for _, _, pixels in batches]).astype(int)
    readable = [path for path, problem in zip(pictures, problems) if problem is None]
    host = np.stack([clip_files.load_pixels(path, geometric)[0] for path in readable]).transpose(0, 3, 1, 2)
    difference = np.abs(device - host)
    assert 0 < difference.max() <= MAX_LEVELS and difference.mean() <= MEAN_LEVELS
    # the PNG, the CMYK and the greyscale JPEG went the host path: exactly PIL's pixels
    for name in ("picture.png", "cmyk.jpg", "grey.jpg"):
        k = [path.name for path in readable].index(name)
        assert not difference[k].any(), name


def test_what_the_device_path_takes(pictures, geometric):
    kinds = [clip_device_decode.read_for_device(path, geometric)[0] for path in pictures]
    names = [path.name for path, kind in zip(pictures, kinds) if kind == "jpeg"]
    assert names == [f"img_{k}.JPEG" for k in (0, 1, 2, 2, 3, 4, 5)]


def test_a_preprocessing_it_does_not_reproduce_goes_the_host_path():
    import open_clip

    def geometry(**kwargs):
        steps = _split_preprocess(open_clip.image_transform(32, is_train=False, **kwargs))[0]
        return clip_device_decode.device_geometry(steps)

    assert geometry() is not None and geometry(interpolation="bilinear") is not None
    assert geometry(resize_mode="squash") is None and geometry(resize_mode="longest") is None


def test_the_backend_decodes_on_the_device_only_where_asked_on_cuda(model_dir, pictures, monkeypatch):
    host = _load(model_dir)
    clip = _load(model_dir, image_decode="device")
    assert not clip.decodes_on_device() and clip.identity() == host.identity()  # the CPU decodes on the host
    expected, expected_problems = host.embed_image_files(pictures)

    monkeypatch.setattr(clip, "decodes_on_device", lambda: True)  # the CUDA path, on CPU tensors
    assert clip.identity() == host.identity() + ":jpeg-decoded-on-device"
    features, problems = clip.embed_image_files(pictures)
    assert problems == expected_problems
    readable = [i for i, problem in enumerate(problems) if problem is None]
    cosine = (features[readable] * expected[readable]).sum(axis=1)
    assert cosine.min() > 0.99 and not np.array_equal(features, expected)


@pytest.mark.parametrize(
    "setting,value", [("decode_workers", -1), ("decode_workers", "many"), ("image_decode", "gpu")]
)
def test_settings_are_checked(default_config_data, setting, value):
    from vlmgrid.config import validate_config

    default_config_data["models"]["clip-tiny"][setting] = 3 if setting == "decode_workers" else "device"
    validate_config(default_config_data)
    default_config_data["models"]["clip-tiny"][setting] = value
    with pytest.raises(VlmgridError, match=setting):
        validate_config(default_config_data)
