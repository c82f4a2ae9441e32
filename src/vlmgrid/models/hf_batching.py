"""Batching for the `hf` backend: consecutive chunks of requests, the next chunk prepared while one runs.

With batch_size "auto" a chunk that runs out of GPU memory is halved and run again, and the largest size that
worked is kept for the next call; with a fixed size, running out of memory (or any CUDA error) is an
InferenceFailed that stops the job, keeping its finished parts.

On an accelerator, the next batch's inputs (image processing, tokenising, the copy to the device) are prepared
by a thread while the current batch runs (`Prefetched`), so the accelerator does not wait on the processor;
the inputs are the same either way. Requests with images and requests without are batched apart (`_by_image`;
results come back in request order).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from vlmgrid.errors import InferenceFailed

log = logging.getLogger(__name__)

AUTO_START = 64  # the first batch size tried with batch_size "auto"


def _is_cuda_error(exc: BaseException) -> bool:
    """A RuntimeError raised by the CUDA runtime or a CUDA library (the device failed, not the input)."""
    text = str(exc)
    return any(
        mark in text
        for mark in (
            "CUDA error",
            "CUBLAS_STATUS",
            "CUDNN_STATUS",
            "cuDNN error",
            "NCCL error",
            "device-side assert",
        )
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Prefetched:
    """A batch step in two halves, `compute(chunk, prepare(chunk))`, whose next chunk's `prepare` (image
    processing, tokenising, the copy to the device) runs in a thread while the accelerator runs this one.

    `_batched` announces the next chunk with `ahead` before it runs the current one; its preparation starts
    once the current chunk's inputs are ready, so the processor is never used by two threads at once. A chunk
    that comes other than announced (the batch size halved after running out of memory) is prepared when it is
    run. Either way the inputs are the same, so the outputs are too.
    """

    def __init__(self, prepare: Callable, compute: Callable, pool: ThreadPoolExecutor | None) -> None:
        self.prepare, self.compute, self.pool = prepare, compute, pool
        self._queued: list | None = None
        self._next: tuple[list, object] | None = None

    def ahead(self, chunk: Sequence) -> None:
        self._queued = list(chunk) if self.pool is not None and len(chunk) else None

    def __call__(self, chunk: Sequence) -> list:
        announced, self._next = self._next, None
        queued, self._queued = self._queued, None
        ready = None
        if (
            announced is not None
            and len(announced[0]) == len(chunk)
            and all(a is b for a, b in zip(announced[0], chunk))
        ):
            ready = announced[1]
        elif announced is not None:
            wait([announced[1]])
        # The inputs are taken before the next chunk is submitted: the one worker prepares them in turn
        # anyway, and a preparation that fails (an image that cannot be opened) leaves no other running behind
        # it.
        inputs = self.prepare(chunk) if ready is None else ready.result()
        if queued is not None:
            self._next = (queued, self.pool.submit(self.prepare, queued))
        return self.compute(chunk, inputs)


class HfBatching:
    """The batching methods of the `hf` backend (mixed into `Hf`, whose `_limit`, `auto_batch`, `batch_size`
    and `_model_id()` they use)."""

    _requests_alone = False  # the batch check (Hf.one_at_a_time): every batch of requests holds one

    def _batched(self, items: Sequence, run: Callable[[Sequence], list], *, options: bool = False) -> list:
        """Run `run` over consecutive chunks of items; with batch_size "auto", halve the chunk on
        out-of-memory. `options`: the items are one request's options on its prefix, chunked by the batch size
        even while the requests go one at a time."""
        import torch

        results: list = []
        start = 0
        size = min(1 if self._requests_alone and not options else self._limit, max(len(items), 1))
        while start < len(items):
            chunk = items[start : start + size]
            announce = getattr(run, "ahead", None)
            if announce is not None:
                announce(items[start + size : start + 2 * size])
            try:
                results.extend(run(chunk))
            except torch.cuda.OutOfMemoryError:
                if not self.auto_batch or size == 1:
                    # An inference error, not the items': the job stops, keeping its finished parts.
                    raise InferenceFailed(
                        f"{self._model_id()} ran out of GPU memory with batch size {size}; "
                        "set the model's batch_size lower (or to auto) or use a smaller precision",
                        stop=True,
                    ) from None
                size = self._limit = max(size // 2, 1)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                log.info("out of memory: batch size now %d", size)
                continue
            except RuntimeError as exc:
                if not _is_cuda_error(exc):
                    raise
                raise self._cuda_failure(exc) from None
            start += len(chunk)
            if self.auto_batch:
                self.batch_size = size
        return results

    def _cuda_failure(self, exc: RuntimeError) -> InferenceFailed:
        """A CUDA error as what stops the job: the device failed, not the items."""
        return InferenceFailed(
            f"{self._model_id()} hit a CUDA error ({_first_line(exc)}); the GPU or its driver "
            "failed, not the items: check the GPU (nvidia-smi) and rerun, which resumes at the "
            "first unfinished part",
            stop=True,
        )

    def _on_device(self, call: Callable[[], object], what: str):
        """`call()`: a forward outside the batches (a ranking request's prefix, `what`); running out of GPU
        memory or a CUDA error stops the job in one sentence, as in `_batched`."""
        import torch

        try:
            return call()
        except torch.cuda.OutOfMemoryError:
            raise InferenceFailed(
                f"{self._model_id()} ran out of GPU memory on {what}; use a smaller precision, fewer image "
                "tokens or a GPU with more memory",
                stop=True,
            ) from None
        except RuntimeError as exc:
            if not _is_cuda_error(exc):
                raise
            raise self._cuda_failure(exc) from None

    def _read_back(self, read: Callable[[], object]):
        """`read()`: results read back after later calls were launched. A CUDA error that their wait
        reports is the device's failure, as in `_batched`."""
        try:
            return read()
        except RuntimeError as exc:
            if not _is_cuda_error(exc):
                raise
            raise self._cuda_failure(exc) from None

    def _by_image(self, requests: Sequence, run: Callable[[Sequence], list]) -> list:
        """Batch requests with images and requests without separately; results come back in request order."""
        results: list = [None] * len(requests)
        for has_image in (True, False):
            indices = [i for i, r in enumerate(requests) if (r.image is not None) == has_image]
            if not indices:
                continue
            outputs = self._batched([requests[i] for i in indices], run)
            for index, output in zip(indices, outputs):
                results[index] = output
        return results
