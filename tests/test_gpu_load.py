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

from helpers.common import lock_is_free

HOLDER = textwrap.dedent("""
    import logging, os, sys, time
    from vlmgrid.gpu import acquire_gpus
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    lease = acquire_gpus(poll_seconds=0.05)
    print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    time.sleep(60)
""")


def _start(env):
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


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
        assert all(
            holder.poll() is None for i, holder in enumerate(holders) if i != victim
        )  # the others hold on
    finally:
        for process in holders + [fifth]:
            if process is not None:
                process.kill()
                process.wait()


# A job that needs argv[1] GPUs, holds them argv[2] seconds (forever if negative) and journals what it held.
SIZED_HOLDER = textwrap.dedent("""
    import logging, os, sys, time
    from vlmgrid.gpu import acquire_gpus
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    count, hold, journal = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    lease = acquire_gpus(count, poll_seconds=0.02)
    start = time.monotonic()
    print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    time.sleep(hold if hold >= 0 else 3600)
    with open(journal, "a") as out:
        out.write(f"{count} {os.environ['CUDA_VISIBLE_DEVICES']} {start} {time.monotonic()}\\n")
    lease.release()
""")


def _start_sized(env, count, hold, journal):
    return subprocess.Popen(
        [sys.executable, "-c", SIZED_HOLDER, str(count), str(hold), str(journal)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _env(tmp_path, gpus):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({"VLMGRID_GPU_COUNT": str(gpus), "VLMGRID_GPU_LOCK_DIR": str(tmp_path / "locks")})
    return env


def test_two_gpu_and_one_gpu_jobs_competing_never_share_a_gpu_and_all_finish(tmp_path):
    env, journal = _env(tmp_path, 4), tmp_path / "journal"
    sizes = [2, 1, 2, 1, 1, 2, 1, 2, 2, 1]
    jobs = [_start_sized(env, count, 0.3, journal) for count in sizes]
    try:
        for job in jobs:
            assert job.wait(timeout=60) == 0, job.stderr.read()  # no deadlock: every job got its GPUs
    finally:
        for job in jobs:
            job.kill()
    held = [line.split() for line in journal.read_text().splitlines()]
    assert sorted(int(count) for count, *_ in held) == sorted(sizes)
    intervals: dict[str, list[tuple[float, float]]] = {}
    for count, gpus, start, end in held:
        assert len(gpus.split(",")) == int(count)  # each job saw exactly the GPUs it needs
        for gpu in gpus.split(","):
            intervals.setdefault(gpu, []).append((float(start), float(end)))
    assert set(intervals) <= {"0", "1", "2", "3"}
    for gpu, spans in intervals.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"GPU {gpu} was held by two jobs at once"


def test_a_job_waiting_for_two_gpus_holds_none_and_is_not_overtaken(tmp_path):
    env, journal = _env(tmp_path, 2), tmp_path / "journal"
    first = _start_sized(env, 1, -1, journal)
    wide = late = None
    try:
        assert _line(first.stdout, 15) == "0"
        wide = _start_sized(env, 2, -1, journal)
        assert (
            _line(wide.stderr, 15) == "fewer than 2 of the 2 GPUs are free; waiting for 2 to be free at once"
        )
        # all or none: while it waits, the free GPU is nobody's
        assert lock_is_free(tmp_path / "locks" / "gpu1.lock")
        late = _start_sized(env, 1, -1, journal)
        # a one-GPU job arriving later waits behind it, though GPU 1 is free
        assert _line(late.stderr, 15) == "another job is waiting for GPUs; waiting behind it"
        assert _line(late.stdout, 1.0) is None
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert _line(wide.stdout, 5) == "0,1"
        assert _line(late.stdout, 1.0) is None and late.poll() is None
        wide.send_signal(signal.SIGKILL)
        wide.wait()
        assert _line(late.stdout, 5) in {"0", "1"}
    finally:
        for process in (first, wide, late):
            if process is not None:
                process.kill()
                process.wait()
