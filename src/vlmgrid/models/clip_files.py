"""open_clip's image files to pixels on the host: each file opened (vlmgrid.images.open_rgb) and put through
the preprocessing's PIL steps, batch by batch in the files' order, a few batches ahead of the model.

A call with many files decodes in worker processes (torch's DataLoader), as many as the process may use cores,
so the host's rate grows with its cores: threads of one process stop scaling long before 16 cores (the GIL
between PIL's steps). The workers start on a model's first such call and serve its later calls (`WorkerPool`:
`vlmgrid infer` calls once per part of at most 1024 requests, and 16 workers take a few hundred ms to start).
A call with few files (under IN_PROCESS_BELOW, such as the default grid's fixtures) decodes in threads of
this process instead, which start at no cost.

A worker reads a chunk of a batch's files, not the whole batch (`chunk_size`): workers each making whole
batches would hand over their first batches together, after one core's decoding of a whole batch (64 files at
336 pixels: 0.43 s on a 148-decodes-per-second core, with the device idle), where chunks make the first batch
ready after its share of the workers' time.

A batch is `(start, rows)`: rows is a list of (pixels, problem) per file, pixels a uint8 array (height, width,
3) or None where the file is unusable and problem the sentence why. Rows from the workers also carry their
usable pixels as the chunks' stacked tensors (`rows.stacked`, pinned on CUDA), so the batch goes to the
device in a copy per chunk and is joined there: joining them here would cost the thread feeding the device a
copy of every batch.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from vlmgrid.errors import VlmgridError
from vlmgrid.images import ImageError, open_rgb

DECODE_AHEAD = 3  # batches the threads decode ahead of the one the model is running
# Chunks each worker holds ready, in shared memory: with a batch split over the workers, a few batches ahead
# of the model (16 workers at 336 pixels and batch 64: 4 chunks of 8 files each, 0.17 GB of /dev/shm)
WORKER_AHEAD = 4
# Files a worker reads at a time, at least: each chunk costs the main process a hand-over (0.3 ms of its time
# here, 0.05 ms more per file), which smaller chunks of ViT-B/32's thousands of files a second would make a
# good part of its time
MIN_CHUNK = 8
MAX_AUTO_WORKERS = 32  # beyond this, the workers' shared memory grows and the device is long since fed
# Fewer files than this decode in threads of this process: the workers' fork server costs a second or two
# the first time in a process (importing torch) and the workers tens of ms each, a few hundred decodes' worth.
IN_PROCESS_BELOW = 256
# Imported once by the fork server the workers are forked from, so that no worker imports them again.
# "__main__": the calling script's module, run as `__mp_main__` (a worker needs it, as any multiprocessing
# child started without fork: a script calling this needs the `if __name__ == "__main__":` guard). Python
# 3.11's fork server does not preload it, so each worker imports the script's own imports once (vlmgrid's
# CLI: 20 ms; a script importing open_clip at its top: a second).
WORKER_PRELOAD = ["__main__", "torch", "numpy", "PIL.Image", "vlmgrid.models.clip_files"]
# Steps after the crop that leave an RGB image as it is (open_clip's MaybeConvertMode and _convert_to_rgb):
# the workers do without them, and without importing open_clip (seconds) to unpickle them.
NO_OPS = {"MaybeConvertMode", "_convert_to_rgb"}


class Rows(list):
    """A batch's (pixels, problem) per file; `stacked`: the usable pixels in order, as a list of tensors
    (n, height, width, 3) of one shape, or None."""

    stacked = None


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_count(setting, n_files: int) -> int:
    """Worker processes for a call of n_files: `decode_workers` ("auto": the usable cores, at most
    MAX_AUTO_WORKERS; 0: none), none under IN_PROCESS_BELOW files."""
    workers = min(usable_cores(), MAX_AUTO_WORKERS) if setting == "auto" else int(setting)
    return 0 if n_files < IN_PROCESS_BELOW else workers


def chunk_size(batch_size: int, workers: int) -> int:
    """Files per worker chunk: a batch split over the workers, at least MIN_CHUNK."""
    return max(MIN_CHUNK, -(-batch_size // max(workers, 1)))


def load_pixels(path, geometric) -> tuple[np.ndarray | None, str | None]:
    """The image at `path` after the PIL steps, as uint8 (height, width, 3), or None and why it is
    unusable."""
    try:
        image = open_rgb(Path(path))  # transparency dropped, as CLIP_benchmark's loaders' convert("RGB")
    except ImageError as exc:
        return None, str(exc)
    for step in geometric:
        image = step(image)
    return np.asarray(image, dtype=np.uint8), None  # open_rgb gave RGB; resizing and cropping keep it


def threaded_batches(paths: Sequence, geometric, batch_size: int, threads: int) -> Iterator:
    """(start, rows) per batch, decoded by `threads` threads a few batches ahead (PIL releases the GIL while
    it decodes and resamples); 0 threads: here, one batch at a time."""
    starts = range(0, len(paths), batch_size)
    if threads == 0:
        for start in starts:
            yield start, Rows(load_pixels(path, geometric) for path in paths[start : start + batch_size])
        return
    starts = iter(starts)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending: deque = deque()

        def submit() -> None:
            start = next(starts, None)
            if start is not None:
                batch = paths[start : start + batch_size]
                pending.append((start, [pool.submit(load_pixels, path, geometric) for path in batch]))

        for _ in range(DECODE_AHEAD + 1):
            submit()
        while pending:
            start, futures = pending.popleft()
            submit()
            yield start, Rows(future.result() for future in futures)


def steps_for_workers(geometric) -> list:
    """The PIL steps that change an RGB image (open_rgb gives RGB): what a worker runs."""
    return [step for step in geometric if getattr(step, "__name__", type(step).__name__) not in NO_OPS]


class FilePixels:
    """The map-style dataset the workers read, indexed by path: load_pixels of it."""

    def __init__(self, geometric) -> None:
        self.geometric = steps_for_workers(geometric)

    def __getitem__(self, path: str):
        return load_pixels(path, self.geometric)


class _Chunks:
    """The pool's batch sampler: the current call's paths, batch by batch, each batch in chunks of at most
    `chunk` paths (the workers are handed each path itself); no chunk spans two batches."""

    def __init__(self, batch_size: int, chunk: int) -> None:
        self.batch_size, self.chunk = batch_size, chunk
        self.paths: list[str] = []

    def pieces(self, size: int) -> int:
        """Chunks of a batch of `size` paths."""
        return -(-size // self.chunk)

    def __iter__(self):
        for start in range(0, len(self.paths), self.batch_size):
            batch = self.paths[start : start + self.batch_size]
            for offset in range(0, len(batch), self.chunk):
                yield batch[offset : offset + self.chunk]

    def __len__(self) -> int:
        return sum(
            self.pieces(min(self.batch_size, len(self.paths) - start))
            for start in range(0, len(self.paths), self.batch_size)
        )


def collate_pixels(items: list) -> tuple:
    """A worker's chunk as (usable pixels stacked in one tensor, or a list of tensors where their shapes
    differ; problems): tensors travel to the main process through shared memory, arrays would be pickled.
    torch's default_collate stacks them straight into shared memory in a worker (not into a tensor that is
    then copied there)."""
    import torch
    from torch.utils.data import default_collate

    with warnings.catch_warnings():
        # PIL's arrays are read-only; their tensors are only read, stacked into the chunk
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        usable = [torch.from_numpy(pixels) for pixels, problem in items if problem is None]
    problems = [problem for _, problem in items]
    if usable and all(pixels.shape == usable[0].shape for pixels in usable):
        return default_collate(usable), problems
    return usable, problems


def worker_context(geometric=()):
    """The start method of the decoding workers: a fork server.

    Not fork: this process may have CUDA initialised, and may itself be a child of vlmgrid's fork server with
    library threads running, and a forked copy of either can deadlock or fail. Not spawn: every worker of
    every call would import torch again (2 s of CPU each). The fork server is a fresh interpreter (started
    by exec, inheriting neither CUDA nor threads) that imports WORKER_PRELOAD once, on this process's first
    call, with the modules of the workers' PIL steps; each worker is then a fork of it, tens of ms. The
    preload list is multiprocessing's, for the fork server this process starts (once: a later list is not
    read)."""
    context = multiprocessing.get_context("forkserver")
    modules = (getattr(step, "__module__", None) for step in steps_for_workers(geometric))
    steps = sorted({module for module in modules if module})
    context.set_forkserver_preload([*WORKER_PRELOAD, *steps])
    return context


def start_fork_server(geometric) -> None:
    """Start the workers' fork server now: it imports its modules (a second or two) while the caller goes on
    loading its model, instead of on the first call with many files."""
    from multiprocessing import forkserver

    worker_context(geometric)
    forkserver.ensure_running()


class WorkerPool:
    """`workers` processes reading files with `dataset` (FilePixels, or the device path's FileBytes) in chunks
    made by `collate` (chunk_size), joined into batches of `batch_size` by `join`: started on the first call,
    serving every later one, stopped with the pool (its DataLoader's persistent workers)."""

    def __init__(
        self, dataset, collate, join, geometric, batch_size: int, workers: int, pin: bool = False
    ) -> None:
        from torch.utils.data import DataLoader

        self.workers, self.batch_size, self.join = workers, batch_size, join
        self._chunks = _Chunks(batch_size, chunk_size(batch_size, workers))
        self._loader = DataLoader(
            dataset,
            batch_sampler=self._chunks,
            num_workers=workers,
            collate_fn=collate,
            pin_memory=pin,
            # each worker holds chunks ready, so that the device does not wait on a slow file
            prefetch_factor=WORKER_AHEAD,
            persistent_workers=True,
            multiprocessing_context=worker_context(geometric),
        )

    def batches(self, paths: Sequence) -> Iterator[tuple[int, object]]:
        """(start, the joined chunks of the batch) per batch of paths, in order."""
        self._chunks.paths = [str(path) for path in paths]
        chunks = iter(self._loader)
        for start in range(0, len(paths), self.batch_size):
            size = min(self.batch_size, len(paths) - start)
            try:
                pieces = [next(chunks) for _ in range(self._chunks.pieces(size))]
            except Exception as exc:  # a worker killed (out of memory), or failing outside an image's errors
                raise VlmgridError(
                    f"decoding image files in {self.workers} worker processes failed ({_last_line(exc)}); "
                    "`decode_workers: 0` in the model's entry decodes them in this process instead"
                ) from exc
            yield start, self.join(pieces)


def join_pixels(chunks: list) -> tuple:
    """collate_pixels' chunks of one batch as one: (the usable pixels: the chunks' stacked tensors where they
    share one shape, else a list of one tensor per image; the problems)."""
    problems = [problem for _, chunk_problems in chunks for problem in chunk_problems]
    stacks = [pixels for pixels, _ in chunks if not isinstance(pixels, list)]
    lists = [pixels for pixels, _ in chunks if isinstance(pixels, list)]
    if any(lists) or len({tuple(stack.shape[1:]) for stack in stacks}) > 1:
        return [image for pixels, _ in chunks for image in pixels], problems
    return Stacks(stacks), problems


class Stacks(list):
    """A batch's usable pixels as chunks of stacked tensors of one shape."""


def join_lists(chunks: list) -> list:
    """Chunks that are lists of items, as one list."""
    return [item for chunk in chunks for item in chunk]


def pixel_batches(pool: WorkerPool, paths: Sequence) -> Iterator[tuple[int, Rows]]:
    """(start, rows) per batch of paths, decoded by the pool's FilePixels workers."""
    for start, (pixels, problems) in pool.batches(paths):
        yield start, _rows(pixels, problems)


def _rows(pixels, problems: list) -> Rows:
    images = [image for stack in pixels for image in stack] if isinstance(pixels, Stacks) else pixels
    arrays = iter([image.numpy() for image in images])  # views of the tensors, no copy
    rows = Rows((None, problem) if problem is not None else (next(arrays), None) for problem in problems)
    rows.stacked = list(pixels) if isinstance(pixels, Stacks) and pixels else None
    return rows


def _last_line(exc: Exception) -> str:
    """The failure itself: a worker's exception comes with the worker's traceback, ending in it."""
    lines = str(exc).strip().splitlines()
    return lines[-1] if lines else type(exc).__name__
