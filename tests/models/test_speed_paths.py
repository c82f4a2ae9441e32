"""The speed paths give the same answers as the plain ones: open_clip reading image files in decoding threads
or worker processes, hf preparing the next batch's inputs while the current one runs."""

import threading

import numpy as np
import pandas as pd
import pytest
from helpers.images import open_problem
from PIL import Image

from vlmgrid.benchmarks import BENCHMARKS
from vlmgrid.benchmarks.dataset import Benchmark
from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip
from vlmgrid.images import open_rgb
from vlmgrid.models import BACKENDS, clip_files, open_clip_backend
from vlmgrid.protocols.classification import embed_strategy

# no pixel cache: every call here decodes, so the decoding paths are the ones compared
SETTINGS = {"backend": "open_clip", "source": {"type": "fixture"}, "batch_size": 2, "pixel_cache": False}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("clip")
    write_tiny_open_clip(model_dir, seed=0)
    return BACKENDS.get("open_clip").load(SETTINGS, model_dir, "cpu")


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    """Files of every kind the decoders meet: JPEGs of odd sizes, RGBA and greyscale PNGs, a broken and a
    missing file."""
    folder = tmp_path_factory.mktemp("pictures")
    rng = np.random.default_rng(0)
    paths = []
    for k, (width, height) in enumerate([(50, 37), (37, 50), (64, 64), (33, 90), (120, 45)]):
        path = folder / f"n0000000{k}" / f"img_{k}.JPEG"
        path.parent.mkdir()
        Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path, quality=90)
        paths.append(path)
    rgba = folder / "alpha.png"
    Image.fromarray(rng.integers(0, 255, (40, 40, 4), dtype=np.uint8), "RGBA").save(rgba)
    grey = folder / "grey.png"
    Image.fromarray(rng.integers(0, 255, (40, 30), dtype=np.uint8), "L").save(grey)
    broken = folder / "broken.JPEG"
    broken.write_bytes(b"not a jpeg at all")
    return [*paths[:3], rgba, broken, grey, folder / "missing.JPEG", *paths[3:]]


def test_image_files_embed_exactly_as_opened_images(clip, pictures):
    features, problems = clip.embed_image_files(pictures)

    assert problems == [open_problem(path) for path in pictures]
    assert problems[4].startswith("image unreadable") and problems[6].startswith("image missing")
    readable = [i for i, problem in enumerate(problems) if problem is None]
    expected = clip.embed_images([open_rgb(pictures[i]) for i in readable])
    # batches of another size may sum in another order (last-bit float differences); another image differs by
    # far more
    np.testing.assert_allclose(features[readable], expected, rtol=1e-5, atol=1e-6)
    assert not features[[4, 6]].any()  # an unreadable file's row is zeros, never another image's


@pytest.mark.parametrize("threads,ahead", [(1, 0), (3, 1), (4, 3)])
def test_decoding_threads_give_the_same_pixels_in_order(pictures, threads, ahead, monkeypatch):
    geometric = [lambda image: image.resize((8, 8))]
    inline = list(clip_files.threaded_batches(pictures, geometric, 3, 0))
    monkeypatch.setattr(clip_files, "DECODE_AHEAD", ahead)
    threaded = list(clip_files.threaded_batches(pictures, geometric, 3, threads))
    assert [start for start, _ in threaded] == [start for start, _ in inline] == [0, 3, 6]
    for (_, got), (_, want) in zip(threaded, inline):
        assert [problem for _, problem in got] == [problem for _, problem in want]
        for (pixels, _), (expected, _) in zip(got, want):
            assert (pixels is None and expected is None) or np.array_equal(pixels, expected)


def test_image_files_decoded_in_threads_embed_as_decoded_inline(clip, pictures, monkeypatch):
    assert clip.settings["decode_workers"] == "auto" and clip_files.usable_cores() >= 1
    threaded, threaded_problems = clip.embed_image_files(pictures)  # under IN_PROCESS_BELOW files: threads
    monkeypatch.setattr(clip_files, "usable_cores", lambda: 0)  # no threads: one file after another
    features, problems = clip.embed_image_files(pictures)
    assert threaded_problems == problems
    np.testing.assert_array_equal(threaded, features)


def test_unknown_preprocessing_goes_the_plain_way(clip, pictures, monkeypatch):
    features, problems = clip.embed_image_files(pictures)
    compose = clip.preprocess
    # a function, not a Compose of known steps: nothing to split, so every image is opened and preprocessed
    # whole
    monkeypatch.setattr(clip, "preprocess", lambda image: compose(image))
    assert open_clip_backend._split_preprocess(clip.preprocess) is None
    plain, plain_problems = clip.embed_image_files(pictures)
    assert plain_problems == problems
    np.testing.assert_allclose(plain, features, rtol=1e-5, atol=1e-6)


def test_classification_reads_files_as_it_read_opened_images(clip, pictures):
    root = pictures[0].parent.parent
    names = [str(path.relative_to(root)) for path in pictures] + [None]
    records = pd.DataFrame(
        {
            "id": [f"i{k}" for k in range(len(names))],
            "image": names,
            "question": "",
            "options": [[] for _ in names],
            "answer": "cat",
            "answer_index": 0,
        }
    )
    bench = Benchmark(
        name="speed",
        kind=BENCHMARKS.get("food101"),
        root=root,
        records=records,
        classes=["cat", "dog", "car"],
        manifest={},
    )

    class Opened:
        """The same model without `embed_image_files`: the protocol opens the images itself."""

        def __init__(self, model):
            self.embed_images, self.embed_texts, self.identity = (
                model.embed_images,
                model.embed_texts,
                model.identity,
            )

    rows = embed_strategy(clip, bench)(records)
    assert rows == embed_strategy(Opened(clip), bench)(records)
    assert [row["error"] is not None for row in rows] == [False] * 4 + [True, False, True, False, False, True]
    assert rows[-1]["error"] == "item has no image"


def test_ranking_reads_picture_files_as_it_read_opened_pictures(clip, pictures):
    from vlmgrid.protocols.ranking import embed_strategy as ranking_strategy

    root = pictures[0].parent.parent
    names = [str(path.relative_to(root)) for path in pictures]
    readable = [names[k] for k in (0, 1, 2, 3, 5, 7)]
    records = pd.DataFrame(
        [
            {
                "id": "r2i",
                "direction": "riddle-to-image",
                "image": None,
                "question": "a red cat",
                "options": readable,
            },
            {
                "id": "i2r",
                "direction": "image-to-riddle",
                "image": names[2],
                "question": "",
                "options": ["a red cat", "a dog", "a tree"],
            },
            {
                "id": "bad",
                "direction": "riddle-to-image",
                "image": None,
                "question": "a dog",
                "options": [names[0], names[4], names[1]],
            },  # names[4] is the broken file
            {
                "id": "gone",
                "direction": "image-to-riddle",
                "image": names[6],
                "question": "",
                "options": ["a dog"],
            },
        ]
    )
    bench = Benchmark(
        name="dance", kind=BENCHMARKS.get("dance"), root=root, records=records, classes=None, manifest={}
    )

    class Opened:
        def __init__(self, model):
            self.embed_images, self.embed_texts = model.embed_images, model.embed_texts

    rows = ranking_strategy(clip, bench)(records)
    expected = ranking_strategy(Opened(clip), bench)(records)
    assert [row["error"] for row in rows] == [row["error"] for row in expected]
    assert rows[2]["error"].startswith("image unreadable") and rows[3]["error"].startswith("image missing")
    for row, want in zip(rows[:2], expected[:2]):
        assert row["prediction_index"] == want["prediction_index"]
        np.testing.assert_allclose(row["scores"], want["scores"], rtol=0, atol=1e-6)


# --- hf: the next batch's inputs prepared in a thread ------------------------------------------------------


def _hf_image(seed: int):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (36, 40, 3), dtype=np.uint8))


def _prefetching(model, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(model, "_prefetch", pool)
    prepared = []
    inputs = model._inputs
    monkeypatch.setattr(
        model,
        "_inputs",
        lambda requests: (
            prepared.append([r.id for r in requests])
            or in_thread.append(threading.current_thread() is not threading.main_thread())
            or inputs(requests)
        ),
    )
    in_thread = []
    return prepared, in_thread


def test_letters_and_generation_prefetched_give_the_same_outputs(llava, monkeypatch):
    from vlmgrid.model_requests import GenerateRequest, OptionRequest

    assert llava._prefetch is None  # on the CPU nothing is prepared ahead
    letters = [
        OptionRequest(f"q{i}", _hf_image(i), f"Question {i}? A. cat B. dog", ["cat", "dog"], "AB")
        for i in range(5)
    ]
    prompts = [GenerateRequest(f"g{i}", _hf_image(10 + i), "Describe the image.") for i in range(5)]
    scores, texts = llava.score_options(letters), llava.generate(prompts)

    prepared, in_thread = _prefetching(llava, monkeypatch)
    assert llava.score_options(letters) == scores
    assert llava.generate(prompts) == texts
    # every batch of 2 prepared once, the next one (in the thread) while the current one ran
    assert prepared == [["q0", "q1"], ["q2", "q3"], ["q4"], ["g0", "g1"], ["g2", "g3"], ["g4"]]
    assert in_thread == [False, True, True] * 2


def test_prefetched_batches_survive_running_out_of_memory(llava, monkeypatch):
    import torch

    from vlmgrid.model_requests import OptionRequest

    requests = [OptionRequest(f"q{i}", _hf_image(i), f"Question {i}?", ["a", "b"], "AB") for i in range(5)]
    expected = llava.score_options(requests)
    prepared, in_thread = _prefetching(llava, monkeypatch)
    forward = llava.model.forward

    def limited(*args, **kwargs):
        if kwargs["input_ids"].shape[0] > 1:
            raise torch.cuda.OutOfMemoryError("simulated")
        return forward(*args, **kwargs)

    monkeypatch.setattr(llava.model, "forward", limited)
    monkeypatch.setattr(llava, "auto_batch", True)
    monkeypatch.setattr(llava, "_limit", 2)
    got = llava.score_options(requests)
    for one, want in zip(got, expected):
        np.testing.assert_allclose(one.total, want.total, atol=1e-5)
    assert llava._limit == 1
    # the batch of 2 failed and its announced successor was dropped: then one at a time, each prepared once
    assert prepared[:2] == [["q0", "q1"], ["q2", "q3"]]
    assert prepared[2:] == [["q0"], ["q1"], ["q2"], ["q3"], ["q4"]]
    assert in_thread == [False, True, False, True, True, True, True]


def test_images_of_a_chunk_are_opened_by_threads_in_record_order(pictures, monkeypatch):
    from vlmgrid.protocols import base

    root = pictures[0].parent.parent
    names = [str(path.relative_to(root)) for path in pictures]
    records = pd.DataFrame({"image": [names[0], None, *names[1:], float("nan")]})
    bench = Benchmark(
        name="b", kind=BENCHMARKS.get("food101"), root=root, records=records, classes=None, manifest={}
    )
    images, problems = base.load_images(bench, records)
    monkeypatch.setattr(base, "IMAGE_THREADS", 1)
    one_by_one = base.load_images(bench, records)
    assert problems == one_by_one[1] == [None, None, *[open_problem(path) for path in pictures[1:]], None]
    assert [image is None for image in images] == [
        problem is not None or name is None for name, problem in zip([0, None, *names[1:], None], problems)
    ]
    for image, alone, path in zip(
        [images[0], *images[2:-1]], [one_by_one[0][0], *one_by_one[0][2:-1]], pictures
    ):
        if image is not None:
            assert image.tobytes() == alone.tobytes() == open_rgb(path).tobytes()
