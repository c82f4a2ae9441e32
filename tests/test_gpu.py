import os
import signal
import subprocess
import sys
import textwrap
import time

from vlmgrid.gpu import acquire_gpu, visible_gpus

HOLDER = textwrap.dedent("""
    import os, sys, time
    from vlmgrid.gpu import acquire_gpu
    lease = acquire_gpu(poll_seconds=0.1)
    print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    time.sleep(60)
""")


def _env(tmp_path, count):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({"VLMGRID_GPU_COUNT": str(count), "VLMGRID_GPU_LOCK_DIR": str(tmp_path / "locks")})
    return env


def test_no_gpu_means_cpu():
    environ = {"VLMGRID_GPU_COUNT": "0"}
    lease = acquire_gpu(environ)
    assert lease.gpu is None and environ["CUDA_VISIBLE_DEVICES"] == ""


def test_inherited_visible_devices_are_the_candidates():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5"}) == ["3", "5"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_each_job_gets_its_own_gpu_and_a_killed_jobs_gpu_is_freed(tmp_path):
    env = _env(tmp_path, 2)
    start = lambda: subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE, text=True)
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
