"""Copies between the host and a model's device that never make the host wait for the device's queue.

On a GPU the host launches kernels ahead of the device; a copy that waits for every queued kernel stops it
there, and the device idles while the host prepares what comes next. `torch.tensor(list, device=cuda)` and
`.to(cuda)` wait so, and so may a copy from pageable memory even when it is asynchronous: CUDA may
synchronise with the stream to stage it. So a host tensor goes to a GPU from pinned memory without blocking
(`to_device`; torch's host allocator keeps the pinned block until the copy is done), and results come back
into pinned memory, read once their own copy is done (`HostCopy`). On a CPU both are plain tensors.
"""

from __future__ import annotations


def to_device(tensor, device):
    """A host tensor on `device`, copied without waiting for the device's queue."""
    import torch

    if torch.device(device).type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def on_device(device, values, dtype=None):
    """A host list as a tensor on `device`, copied without waiting for the device's queue."""
    import torch

    return to_device(torch.tensor(values, dtype=dtype), device)


class HostCopy:
    """A device tensor's copy to the host, queued after the calls that make it without waiting for them:
    `values()` waits for this copy alone, not for what was queued after it (on a CPU there is nothing to wait
    for). The copy lands in pinned memory (what `non_blocking` gives from CUDA) and is read only after its
    event, recorded on the stream of the values' own device: with a model spread over GPUs that is not the
    current one."""

    def __init__(self, values) -> None:
        import torch

        self._host = values.to("cpu", non_blocking=True)
        self._copied = None
        if values.device.type == "cuda":
            self._copied = torch.cuda.Event()
            self._copied.record(torch.cuda.current_stream(values.device))

    def values(self):
        if self._copied is not None:
            self._copied.synchronize()
        return self._host
