"""The hf backend's continuation scoring prepares the next request (prompt inputs, option tokens) in a thread
while the current one runs, with the tokenizer used on that thread alone, and gives the same scores."""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from PIL import Image


def _image(seed: int):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (36, 40, 3), dtype=np.uint8))


def test_continuations_prefetched_give_the_same_scores_and_keep_the_tokenizer_on_one_thread(
    llava, monkeypatch
):
    from vlmgrid.model_requests import OptionRequest

    requests = [
        OptionRequest(
            f"r{i}",
            _image(i),
            f"Which riddle fits picture {i}?",
            [" a cat on a mat", " a dog", " two birds in a tree"],
        )
        for i in range(4)
    ]
    expected = llava.score_options(requests)

    monkeypatch.setattr(llava, "_prefetch", ThreadPoolExecutor(max_workers=1))
    prepared = []
    inputs = llava._continuation_inputs
    monkeypatch.setattr(
        llava,
        "_continuation_inputs",
        lambda chunk: (
            prepared.append(([r.id for r in chunk], threading.current_thread() is threading.main_thread()))
            or inputs(chunk)
        ),
    )
    events = []  # ("encode" or "run", on the main thread?)
    encode, run = llava.tokenizer.encode, llava._score_continuations
    monkeypatch.setattr(
        llava.tokenizer,
        "encode",
        lambda *args, **kwargs: (
            events.append(("encode", threading.current_thread() is threading.main_thread()))
            or encode(*args, **kwargs)
        ),
    )
    monkeypatch.setattr(
        llava, "_score_continuations", lambda *args: events.append(("run", True)) or run(*args)
    )

    assert llava.score_options(requests) == expected
    # the first request prepared where it runs, each next one in the thread while the one before it ran
    assert prepared == [(["r0"], True), (["r1"], False), (["r2"], False), (["r3"], False)]
    # the device loop never tokenises: once it has started, options are tokenised on the preparing thread only
    first_run = events.index(("run", True))
    assert ("encode", True) not in events[first_run:]
    assert ("encode", False) in events[first_run:]


def _riddles(count: int):
    from vlmgrid.model_requests import OptionRequest

    return [
        OptionRequest(f"r{i}", _image(30 + i), f"Which riddle fits picture {i}?", [" a cat", " two birds"])
        for i in range(count)
    ]


def test_each_request_s_scores_are_read_once_the_next_one_is_launched(llava, monkeypatch):
    """A request's scores are read back after the next request's prefix and options are launched (on a GPU
    the device runs those while the host waits for the copy), and are the scores it gets alone."""
    from vlmgrid.models import host_device

    requests = _riddles(3)
    alone = [llava.score_options([request])[0] for request in requests]
    assert llava._packable(llava._text_model())  # the packed path, whose copies are read later

    events = []
    forward = llava.model.forward

    @functools.wraps(forward)  # the signature kept: the backend reads which cache argument it takes
    def watched(*args, **kwargs):
        events.append("prefix" if kwargs.get("pixel_values") is not None else "options")
        return forward(*args, **kwargs)

    values = host_device.HostCopy.values
    monkeypatch.setattr(llava.model, "forward", watched)
    monkeypatch.setattr(host_device.HostCopy, "values", lambda self: events.append("read") or values(self))
    assert llava.score_options(requests) == alone
    assert events == ["prefix", "options", "prefix", "options", "read", "prefix", "options", "read", "read"]


@pytest.mark.parametrize("cuda", [True, False])
def test_a_cuda_error_reported_when_scores_are_read_stops_the_job(llava, monkeypatch, cuda):
    """An error the device reports only when a request's scores are read back (an illegal memory access of
    a kernel launched earlier) is the device's failure, as in the batches; any other error stays itself."""
    from vlmgrid.errors import InferenceFailed
    from vlmgrid.models import host_device

    message = "CUDA error: an illegal memory access was encountered" if cuda else "mismatched sizes"

    def failing(self):
        raise RuntimeError(message)

    monkeypatch.setattr(host_device.HostCopy, "values", failing)
    if cuda:
        with pytest.raises(InferenceFailed, match=r"hit a CUDA error \(CUDA error: an illegal memory") as err:
            llava.score_options(_riddles(2))
        assert err.value.stop
    else:
        with pytest.raises(RuntimeError, match="mismatched sizes"):
            llava.score_options(_riddles(2))


def test_a_copy_from_a_gpu_is_read_after_its_event_on_that_gpu_s_stream(monkeypatch):
    """Scores copied from cuda:1 (the last GPU of a model spread over two) are read only once an event
    recorded on cuda:1's stream has completed, not the current device's, which would let them be read
    before the copy."""
    import torch

    from vlmgrid.models import host_device

    done = []

    class Event:
        def record(self, stream):
            done.append(("record", stream))

        def synchronize(self):
            done.append(("synchronize",))

    class OnGpu:
        device = torch.device("cuda", 1)

        def to(self, device, non_blocking=False):
            done.append(("copy", device, non_blocking))
            return "host values"

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: ("stream of", device))
    copied = host_device.HostCopy(OnGpu())
    assert done == [("copy", "cpu", True), ("record", ("stream of", torch.device("cuda", 1)))]
    assert copied.values() == "host values" and done[-1] == ("synchronize",)


@pytest.mark.parametrize("device, pinned", [(torch.device("cuda", 1), True), ("cpu", False)])
def test_small_tensors_go_to_a_gpu_from_pinned_memory_without_blocking(monkeypatch, device, pinned):
    """A copy from pageable memory may wait for the GPU's queue even with non_blocking; the options' token
    ids, positions and indices are staged in pinned memory first (only where the device is a GPU: pinning
    needs CUDA)."""
    from vlmgrid.models import host_device

    done = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: done.append("pin") or self)
    monkeypatch.setattr(
        torch.Tensor,
        "to",
        lambda self, target, non_blocking=False: done.append((str(target), non_blocking)) or self,
    )
    assert host_device.on_device(device, [3, 4], torch.long).tolist() == [3, 4]
    assert done == (["pin"] if pinned else []) + [(str(device), True)]


def _bench(tmp_path, broken: bool):
    import pandas as pd

    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.benchmarks.dataset import Benchmark

    names = []
    for k in range(5):
        name = f"img_{k}.jpg"
        _image(20 + k).resize((40 + 7 * k, 36)).save(tmp_path / name, quality=90)
        names.append(name)
    if broken:
        (tmp_path / names[2]).write_bytes(b"not a jpeg at all")
    records = pd.DataFrame({"id": [f"i{k}" for k in range(6)], "image": [*names[:4], None, names[4]]})
    return Benchmark(
        name="b", kind=BENCHMARKS.get("food101"), root=tmp_path, records=records, classes=None, manifest={}
    )


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("broken", [False, True])
def test_images_opened_while_the_model_runs_give_the_same_rows(
    llava, monkeypatch, tmp_path, broken, prefetch
):
    """A part's images handed to the model as futures (opened while the first batches run) give the answers
    and error rows of images opened first, a broken image included (the part is then answered the usual
    way)."""
    from vlmgrid.protocols.base import generate_items, score_items

    bench = _bench(tmp_path, broken)
    records = bench.records
    ask = {
        "letters": lambda: score_items(
            llava,
            bench,
            records,
            lambda i: f"Picture {i}: A. cat B. dog?",
            lambda i: ["cat", "dog"],
            lambda i: "AB",
        ),
        "continuations": lambda: score_items(
            llava, bench, records, lambda i: f"Picture {i}?", lambda i: [" a cat", " a dog on a mat"]
        ),
        "generation": lambda: generate_items(llava, bench, records, lambda i: f"Describe picture {i}."),
    }
    monkeypatch.setattr(llava, "accepts_image_futures", False)
    expected = {name: run() for name, run in ask.items()}
    monkeypatch.setattr(llava, "accepts_image_futures", True)
    if prefetch:
        monkeypatch.setattr(llava, "_prefetch", ThreadPoolExecutor(max_workers=1))
    got = {name: run() for name, run in ask.items()}
    assert got == expected
    problems = [problem for _, problem in expected["letters"]]
    assert [problem is not None for problem in problems] == [False, False, broken, False, False, False]
    if broken:
        assert problems[2].startswith("image unreadable: ")
