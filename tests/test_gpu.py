import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helpers.common import lock_is_free

from vlmgrid.gpu import acquire_gpus, lock_dir, visible_gpus

HOLDER = textwrap.dedent("""
    import os, sys, time
    from vlmgrid.gpu import acquire_gpus
    lease = acquire_gpus(poll_seconds=0.1)
    print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    time.sleep(60)
""")


def _env(tmp_path, count):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({"VLMGRID_GPU_COUNT": str(count), "VLMGRID_GPU_LOCK_DIR": str(tmp_path / "locks")})
    return env


def test_no_gpu_means_cpu():
    environ = {"VLMGRID_GPU_COUNT": "0"}
    lease = acquire_gpus(1, environ)
    assert lease.gpus == () and environ["CUDA_VISIBLE_DEVICES"] == ""


def test_inherited_visible_devices_are_the_candidates():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5"}) == ["3", "5"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_each_job_gets_its_own_gpu_and_a_killed_jobs_gpu_is_freed(tmp_path):
    env = _env(tmp_path, 2)

    def start():
        return subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE, text=True)

    first, second = start(), start()
    try:
        gpus = {first.stdout.readline().strip(), second.stdout.readline().strip()}
        assert gpus == {"0", "1"}
        third = start()
        time.sleep(1.0)
        assert third.poll() is None  # still waiting: both GPUs are held
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert third.stdout.readline().strip() in {"0", "1"}
        third.kill()
    finally:
        for process in (first, second):
            process.kill()


def test_a_job_needing_more_gpus_than_there_are_is_refused_at_once():
    import pytest

    from vlmgrid.errors import VlmgridError

    with pytest.raises(VlmgridError, match=r"needs 3 GPUs at once, but this machine shows only 2 \(0, 1\)"):
        acquire_gpus(3, {"VLMGRID_GPU_COUNT": "2"})
    # no GPU at all: the job runs on the CPU, however many it would take on GPUs
    environ = {"VLMGRID_GPU_COUNT": "0"}
    assert acquire_gpus(4, environ).gpus == () and environ["CUDA_VISIBLE_DEVICES"] == ""


def test_a_slurm_allocation_has_locks_of_its_own():
    # Two Slurm jobs on one node each see their own GPU as GPU 0: their locks must not meet.
    assert lock_dir({"SLURM_JOB_ID": "41"}) != lock_dir({"SLURM_JOB_ID": "42"})
    assert lock_dir({"SLURM_JOB_ID": "41"}).name == "slurm-41"
    assert lock_dir({"SLURM_JOB_ID": "41", "VLMGRID_GPU_LOCK_DIR": "/x/locks"}) == Path("/x/locks")


def test_several_gpus_are_held_and_exposed_together(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as in a fresh infer job, before torch loads
    environ = {"VLMGRID_GPU_COUNT": "4", "VLMGRID_GPU_LOCK_DIR": str(tmp_path)}
    two = acquire_gpus(2, environ, poll_seconds=0.01)
    assert two.gpus == ("0", "1") and environ["CUDA_VISIBLE_DEVICES"] == "0,1" and two.pretend
    other = dict(environ)
    three = acquire_gpus(2, other, poll_seconds=0.01)
    assert three.gpus == ("2", "3") and other["CUDA_VISIBLE_DEVICES"] == "2,3"
    for gpu in "0123":
        assert not lock_is_free(tmp_path / f"gpu{gpu}.lock")
    two.release()
    assert lock_is_free(tmp_path / "gpu0.lock") and lock_is_free(tmp_path / "gpu1.lock")
    assert not lock_is_free(tmp_path / "gpu2.lock")
    three.release()
