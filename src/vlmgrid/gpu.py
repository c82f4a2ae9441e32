"""Give each inference job a GPU of its own.

Snakemake's `--resources gpu=N` only limits how many GPU jobs run at once; it does not say which GPU a job
should use. Each job therefore takes an exclusive lock on one GPU (an flock on a file per GPU, released by
the kernel when the process dies, even on SIGKILL) and sets CUDA_VISIBLE_DEVICES before torch is imported.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

# Pretend this many GPUs exist (tests, and machines where nvidia-smi is absent but GPUs are known).
GPU_COUNT_ENV = "VLMGRID_GPU_COUNT"
LOCK_DIR_ENV = "VLMGRID_GPU_LOCK_DIR"


def visible_gpus(environ=os.environ) -> list[str]:
    """The GPU ids this process may use: the parent's CUDA_VISIBLE_DEVICES, else all GPUs nvidia-smi sees."""
    if GPU_COUNT_ENV in environ:
        return [str(i) for i in range(int(environ[GPU_COUNT_ENV]))]
    inherited = environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is not None:
        return [gpu for gpu in inherited.split(",") if gpu.strip() and gpu.strip() != "-1"]
    try:
        listing = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listing.splitlines() if line.strip()]


def lock_dir(environ=os.environ) -> Path:
    return Path(environ.get(LOCK_DIR_ENV, Path(tempfile.gettempdir()) / "vlmgrid-gpu-locks"))


@dataclass
class GpuLease:
    gpu: str | None
    handle: IO | None = None

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()  # closing the file drops the flock
            self.handle = None


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


def acquire_gpu(environ=os.environ, poll_seconds: float = 5.0) -> GpuLease:
    """Lock a free GPU, waiting while all are busy; with no GPU, return a lease for the CPU.

    Sets CUDA_VISIBLE_DEVICES in `environ` to the locked GPU (or to "" on the CPU), so it must run before
    torch initialises CUDA. Logs the GPU it took, and once that it waits when all are busy.
    """
    gpus = visible_gpus(environ)
    if not gpus:
        environ["CUDA_VISIBLE_DEVICES"] = ""
        return GpuLease(gpu=None)
    if "torch" in sys.modules:
        raise RuntimeError("acquire_gpu must run before torch is imported, or CUDA_VISIBLE_DEVICES has no effect")
    directory = lock_dir(environ)
    directory.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        for gpu in gpus:
            handle = _try_lock(directory / f"gpu{gpu}.lock")
            if handle is not None:
                environ["CUDA_VISIBLE_DEVICES"] = gpu
                log.info("using GPU %s", gpu)
                return GpuLease(gpu=gpu, handle=handle)
        if not waited:
            log.info("all %d GPUs are busy; waiting for one to be free", len(gpus))
            waited = True
        time.sleep(poll_seconds)
