"""Give each inference job the GPUs of its own: one, or several for a model bigger than one GPU.

Snakemake's `--resources gpu=N` only limits how many GPUs the running jobs ask for in all; it does not say
which GPUs a job should use. Each job therefore takes an exclusive lock on each GPU it uses (an flock on a
file per GPU, released by the kernel when the process dies, even on SIGKILL) and sets CUDA_VISIBLE_DEVICES
to exactly those GPUs before torch is imported.

A job that needs several GPUs takes them all at once or none: it never holds some while it waits for the
rest, so two such jobs cannot deadlock, each holding half of what the other needs. Jobs take their GPUs one
at a time in order of arrival (a queue lock), so a job waiting for two GPUs is not starved by one-GPU jobs
that would otherwise take each GPU as soon as it frees.

Under Slurm the locks of one allocation live in a folder of that allocation's own (its job id): two Slurm
jobs on one node that were each given their own GPU (both seeing it as GPU 0) never wait for each other,
while the jobs of one allocation (a local run inside `salloc`) share the allocation's GPUs through the locks.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from vlmgrid.errors import VlmgridError

log = logging.getLogger(__name__)

# Pretend this many GPUs exist (tests, and machines where nvidia-smi is absent but GPUs are known).
GPU_COUNT_ENV = "VLMGRID_GPU_COUNT"
LOCK_DIR_ENV = "VLMGRID_GPU_LOCK_DIR"
QUEUE_LOCK = "queue.lock"


def visible_gpus(environ=os.environ) -> list[str]:
    """The GPU ids this process may use: the parent's CUDA_VISIBLE_DEVICES, else all GPUs nvidia-smi sees."""
    if GPU_COUNT_ENV in environ:
        return [str(i) for i in range(int(environ[GPU_COUNT_ENV]))]
    inherited = environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is not None:
        return [gpu.strip() for gpu in inherited.split(",") if gpu.strip() and gpu.strip() != "-1"]
    try:
        listing = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listing.splitlines() if line.strip()]


def pretended(environ=os.environ) -> bool:
    """Whether the GPUs are only pretended (VLMGRID_GPU_COUNT): a job holds their locks but may see no CUDA
    device."""
    return GPU_COUNT_ENV in environ


def lock_dir(environ=os.environ) -> Path:
    if LOCK_DIR_ENV in environ:
        return Path(environ[LOCK_DIR_ENV])
    base = Path(tempfile.gettempdir()) / "vlmgrid-gpu-locks"
    # The GPU ids a Slurm job sees are its own allocation's: another allocation's "GPU 0" is another device.
    job = environ.get("SLURM_JOB_ID")
    return base / f"slurm-{job}" if job else base


def shortfall(needed: int, visible: list[str]) -> str | None:
    """Why a job that needs `needed` GPUs could never start among `visible` ones; None when it can.

    No GPU at all is no shortfall: the job runs on the CPU, as every model with `device: auto` does there.
    """
    if visible and needed > len(visible):
        return (
            f"it needs {needed} GPUs at once, but this machine shows only {len(visible)} "
            f"({', '.join(visible)}), so it would wait forever"
        )
    return None


@dataclass
class GpuLease:
    """The GPUs a job holds (none: it runs on the CPU), until `release` or the end of the process."""

    gpus: tuple[str, ...] = ()
    pretend: bool = False
    handles: list[IO] = field(default_factory=list, repr=False)

    def release(self) -> None:
        for handle in self.handles:
            handle.close()  # closing the file drops the flock
        self.handles = []


def _try_lock(path: Path) -> IO | None:
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _take_all_or_none(directory: Path, gpus: list[str], count: int) -> dict[str, IO] | None:
    """Lock `count` of the GPUs if that many are free; otherwise lock none (what was taken is let go)."""
    taken: dict[str, IO] = {}
    for gpu in gpus:
        handle = _try_lock(directory / f"gpu{gpu}.lock")
        if handle is not None:
            taken[gpu] = handle
            if len(taken) == count:
                return taken
    for handle in taken.values():
        handle.close()
    return None


def _queue(directory: Path) -> IO:
    """Wait for this job's turn to take GPUs (an flock too, so a killed job never blocks the queue)."""
    handle = open(directory / QUEUE_LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("another job is waiting for GPUs; waiting behind it")
        fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def acquire_gpus(count: int = 1, environ=os.environ, poll_seconds: float = 5.0) -> GpuLease:
    """Lock `count` free GPUs at once, waiting while fewer are free; with no GPU, return a lease for the CPU.

    Sets CUDA_VISIBLE_DEVICES in `environ` to exactly the locked GPUs (or to "" on the CPU), so it must run
    before torch initialises CUDA. Logs the GPUs it took, and once that it waits when too few are free. A
    job that needs more GPUs than there are is refused at once instead of waiting forever.
    """
    if count < 1:
        raise VlmgridError(f"a job cannot hold {count} GPUs: a model's gpus is 1 or more")
    gpus = visible_gpus(environ)
    if not gpus:
        environ["CUDA_VISIBLE_DEVICES"] = ""
        return GpuLease()
    problem = shortfall(count, gpus)
    if problem is not None:
        raise VlmgridError(
            f"this job cannot start: {problem}; give the model fewer gpus, or run it where it fits"
        )
    if "torch" in sys.modules:
        raise RuntimeError(
            "acquire_gpus must run before torch is imported, or CUDA_VISIBLE_DEVICES has no effect"
        )
    directory = lock_dir(environ)
    directory.mkdir(parents=True, exist_ok=True)
    queue = _queue(directory)
    try:
        waited = False
        while True:
            taken = _take_all_or_none(directory, gpus, count)
            if taken is not None:
                break
            if not waited:
                log.info(
                    f"all {len(gpus)} GPUs are busy; waiting for one to be free"
                    if count == 1
                    else (
                        f"fewer than {count} of the {len(gpus)} GPUs are free; waiting for {count} to be "
                        "free at once"
                    )
                )
                waited = True
            time.sleep(poll_seconds)
    finally:
        queue.close()  # the next job in the queue may take GPUs now
    environ["CUDA_VISIBLE_DEVICES"] = ",".join(taken)
    log.info(f"using GPU{'s' if count > 1 else ''} {', '.join(taken)}")
    return GpuLease(gpus=tuple(taken), pretend=pretended(environ), handles=list(taken.values()))
