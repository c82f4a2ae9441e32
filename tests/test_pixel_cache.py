"""The pixel cache: a second pass over the same image files reads their pixels instead of decoding, and gives
exactly the embeddings and error texts that decoding gives."""

import os

import numpy as np
import pytest
from PIL import Image

from vlmgrid import pixel_cache
from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip
from vlmgrid.models import BACKENDS, clip_files, open_clip_backend

SETTINGS = {"backend": "open_clip", "source": {"type": "fixture"}, "batch_size": 2}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clip")
    write_tiny_open_clip(folder, seed=0)
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder per test: every test starts cold."""
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / pixel_cache.PIXELS_DIR


def _load(model_dir, **settings):
    return BACKENDS.get("open_clip").load({**SETTINGS, **settings}, model_dir, "cpu")


@pytest.fixture
def pictures(tmp_path):
    """Five JPEGs of odd sizes, a broken and a missing file."""
    rng = np.random.default_rng(1)
    paths = []
    for k, (width, height) in enumerate([(50, 37), (37, 50), (64, 64), (33, 90), (120, 45)]):
        path = tmp_path / "images" / f"img_{k}.JPEG"
        path.parent.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path, quality=90)
        paths.append(path)
    broken = tmp_path / "images" / "broken.JPEG"
    broken.write_bytes(b"not a jpeg at all")
    return [paths[0], broken, *paths[1:3], tmp_path / "images" / "missing.JPEG", *paths[3:]]


def _entries(cache):
    return sorted(path.name for path in cache.iterdir()) if cache.is_dir() else []


def _no_decoding(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an image was decoded although its pixels are cached")

    monkeypatch.setattr(clip_files, "load_pixels", refuse)


def test_cached_pixels_embed_exactly_as_decoded(model_dir, cache, pictures, monkeypatch):
    clip = _load(model_dir)
    decoded, decoded_problems = clip.embed_image_files(pictures)
    names = _entries(cache)
    assert len(names) == 2 and {name.rsplit(".", 1)[1] for name in names} == {"npy", "json"}
    pixels = np.load(cache / names[1], mmap_mode="r")
    assert pixels.shape == (7, 32, 32, 3) and pixels.dtype == np.uint8
    assert not pixels[[1, 4]].any()  # unreadable files: zeros

    _no_decoding(monkeypatch)
    cached, cached_problems = clip.embed_image_files(pictures)
    assert cached_problems == decoded_problems
    assert decoded_problems[1].startswith("image unreadable") and decoded_problems[4].startswith(
        "image missing"
    )
    assert [problem is None for problem in cached_problems] == [True, False, True, True, False, True, True]
    assert np.array_equal(cached, decoded)
    assert _entries(cache) == names


def test_cache_off_decodes_as_before_and_writes_nothing(model_dir, cache, pictures):
    fresh, fresh_problems = _load(model_dir, pixel_cache=False).embed_image_files(pictures)
    assert _entries(cache) == []
    filled, problems = _load(model_dir).embed_image_files(pictures)  # the cache's first pass
    assert problems == fresh_problems and np.array_equal(filled, fresh)


def test_a_changed_file_misses_the_cache(model_dir, cache, pictures):
    clip = _load(model_dir)
    before, _ = clip.embed_image_files(pictures)
    Image.fromarray(np.full((40, 40, 3), 200, dtype=np.uint8)).save(pictures[0], quality=90)
    changed, _ = clip.embed_image_files(pictures)
    assert not np.array_equal(changed[0], before[0]) and np.array_equal(changed[2:], before[2:])
    assert len(_entries(cache)) == 4  # a second entry, for the files as they are now

    stat = os.stat(pictures[2])
    os.utime(pictures[2], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # touched: same bytes, another mtime
    key = pixel_cache.entry_key(
        pictures, pixel_cache.describe_steps(open_clip_backend._split_preprocess(clip.preprocess)[0])
    )
    assert pixel_cache.load(key, len(pictures)) is None


def test_a_half_written_entry_is_ignored(model_dir, cache, pictures, monkeypatch):
    clip = _load(model_dir, pixel_cache=False)
    expected, expected_problems = clip.embed_image_files(pictures)
    key = pixel_cache.entry_key(
        pictures, pixel_cache.describe_steps(open_clip_backend._split_preprocess(clip.preprocess)[0])
    )
    pixels_path, problems_path = pixel_cache.entry_paths(key)
    cache.mkdir(parents=True)
    # a killed run: its temporary file, and a .npy of zeros without the JSON that completes an entry
    (cache / f".{pixels_path.name}.abc.tmp").write_bytes(b"\x93NUMPY half")
    np.save(pixels_path, np.zeros((len(pictures), 32, 32, 3), dtype=np.uint8))
    assert pixel_cache.load(key, len(pictures)) is None

    features, problems = _load(model_dir).embed_image_files(pictures)
    assert problems == expected_problems and np.array_equal(features, expected)
    assert problems_path.is_file()  # the entry completed by this pass, and read by the next
    _no_decoding(monkeypatch)
    again, _ = _load(model_dir).embed_image_files(pictures)
    assert np.array_equal(again, expected)


def test_a_stopped_pass_leaves_no_entry(model_dir, cache, pictures, monkeypatch):
    clip = _load(model_dir)
    original = clip_files.load_pixels

    def dies_on_the_fifth(path, geometric):
        if path == pictures[5]:
            raise KeyboardInterrupt
        return original(path, geometric)

    monkeypatch.setattr(clip_files, "load_pixels", dies_on_the_fifth)
    monkeypatch.setattr(clip_files, "usable_cores", lambda: 0)  # decoded here, so that the interrupt is too
    with pytest.raises(KeyboardInterrupt):
        clip.embed_image_files(pictures)
    assert _entries(cache) == []


def test_steps_are_described_by_class_and_settings(model_dir):
    steps = open_clip_backend._split_preprocess(_load(model_dir).preprocess)[0]
    text = pixel_cache.describe_steps(steps)
    assert "Resize" in text and "'size': '32'" in text and "bicubic" in text.lower() and " at 0x" not in text
    assert pixel_cache.describe_steps([os.path.join]) == "posixpath.join"


def test_the_setting_is_a_boolean_of_open_clip_models(default_config_data):
    from vlmgrid.config import validate_config
    from vlmgrid.errors import VlmgridError

    default_config_data["models"]["clip-tiny"]["pixel_cache"] = False
    assert validate_config(default_config_data).model("clip-tiny")["pixel_cache"] is False
    default_config_data["models"]["clip-tiny"]["pixel_cache"] = "off"
    with pytest.raises(VlmgridError, match="pixel_cache"):
        validate_config(default_config_data)


def test_rows_are_written_into_the_entry_beside_the_consumer_one_batch_at_a_time(tmp_path, monkeypatch):
    import threading
    import time

    written, write = [], pixel_cache._write_rows

    def slow_write(entry, start, batch):
        time.sleep(0.05)
        write(entry, start, batch)
        written.append((start, threading.get_ident()))

    monkeypatch.setattr(pixel_cache, "_write_rows", slow_write)
    batches = [
        (start, [(np.full((2, 2, 3), start + k, np.uint8), None) for k in range(2)]) for start in (0, 2, 4)
    ]
    seen = []
    for start, _ in pixel_cache.filling("key", 6, iter(batches), "steps", tmp_path):
        seen.append((start, len(written)))
    # a batch reaches the consumer while its own write runs, once the batch before it is written
    assert seen == [(0, 0), (2, 1), (4, 2)]
    assert {thread for _, thread in written} != {threading.get_ident()} and len(written) == 3
    pixels, problems = pixel_cache.load("key", 6, tmp_path)
    assert [int(pixels[i, 0, 0, 0]) for i in range(6)] == [0, 1, 2, 3, 4, 5] and problems == [None] * 6


def _row(value):
    return np.full((2, 3, 3), value, np.uint8), None


def test_unusable_files_are_zero_rows_wherever_they_fall(tmp_path):
    broken = (None, "broken")
    batches = [(0, [broken, broken]), (2, [_row(7), broken]), (4, [_row(9), broken]), (6, [broken])]
    list(pixel_cache.filling("key", 7, iter(batches), "steps", tmp_path))
    pixels, problems = pixel_cache.load("key", 7, tmp_path)
    assert pixels.shape == (7, 2, 3, 3)
    assert [int(pixels[i].max()) for i in range(7)] == [0, 0, 7, 0, 9, 0, 0]
    assert problems == ["broken", "broken", None, "broken", None, "broken", "broken"]


def test_a_cache_that_cannot_be_written_costs_the_entry_not_the_batches(tmp_path, monkeypatch, caplog):
    def full_disk(entry, start, batch):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pixel_cache, "_write_rows", full_disk)
    batches = [(start, [_row(start)]) for start in range(3)]
    passed = pixel_cache.filling("key", 3, iter(batches), "steps", tmp_path)
    assert [start for start, _ in passed] == [0, 1, 2]
    assert "No space left on device" in caplog.text and "not cached" in caplog.text
    assert pixel_cache.load("key", 3, tmp_path) is None
    assert list((tmp_path / pixel_cache.PIXELS_DIR).iterdir()) == []


def test_rows_of_differing_shapes_are_not_cached(tmp_path):
    batches = [(0, [_row(1)]), (1, [(np.zeros((4, 4, 3), np.uint8), None)])]
    assert len(list(pixel_cache.filling("key", 2, iter(batches), "steps", tmp_path))) == 2
    assert pixel_cache.load("key", 2, tmp_path) is None
    assert list((tmp_path / pixel_cache.PIXELS_DIR).iterdir()) == []
