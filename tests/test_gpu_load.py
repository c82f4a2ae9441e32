"""GPU binding under load: real concurrent processes against four pretended GPUs.

Four jobs hold four distinct GPUs, a fifth waits and says so, and when one holder is SIGKILLed the kernel
drops its lock and the waiting job gets exactly that GPU.
"""

import os
import select
import signal
import subprocess
import sys
import textwrap

HOLDER = textwrap.dedent("""
    import logging, os, sys, time
    from vlmgrid.gpu import acquire_gpu
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    lease = acquire_gpu(poll_seconds=0.05)
    print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    time.sleep(60)
""")


def _start(env):
    return subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _line(stream, timeout):
    """The next line of a child's stream, or None if none came within timeout seconds."""
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline().strip() if ready else None


def test_four_jobs_hold_four_gpus_and_a_fifth_gets_the_killed_jobs_gpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({"VLMGRID_GPU_COUNT": "4", "VLMGRID_GPU_LOCK_DIR": str(tmp_path / "locks")})
    holders = [_start(env) for _ in range(4)]
    fifth = None
    try:
        gpus = [_line(holder.stdout, 15) for holder in holders]
        assert sorted(gpus) == ["0", "1", "2", "3"]
        for holder, gpu in zip(holders, gpus):
            # each lock file names its holder
            assert (tmp_path / "locks" / f"gpu{gpu}.lock").read_text() == f"{holder.pid}\n"

        fifth = _start(env)
        assert _line(fifth.stderr, 15) == "all 4 GPUs are busy; waiting for one to be free"
        assert _line(fifth.stdout, 1.0) is None and fifth.poll() is None  # still waiting

        victim = gpus.index("2")
        holders[victim].send_signal(signal.SIGKILL)
        holders[victim].wait()
        assert _line(fifth.stdout, 5) == "2"  # it polls every 0.05 s
        assert _line(fifth.stderr, 1) == "using GPU 2"
        assert (tmp_path / "locks" / "gpu2.lock").read_text() == f"{fifth.pid}\n"
        assert all(holder.poll() is None for i, holder in enumerate(holders) if i != victim)  # the others hold on
    finally:
        for process in holders + [fifth]:
            if process is not None:
                process.kill()
                process.wait()
