"""The fork server (`vlmgrid forkserver`, vlmgrid.forkserver): real `vlmgrid` commands run through it give the
bytes and exit codes that they give in their own process; a job whose client is killed is killed; signals
reach the job; a refusal or a missing server runs the command in the client's process; a command in another
process context (umask, nice, limits, ignored signals) is refused, and so is every job once the code on disk
changed, even by an edit that keeps the files' times."""

import fcntl
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pandas as pd
import pytest
from helpers.common import copy_workflow, wait_for
from helpers.forkserver import (
    REPO,
    VLMGRID,
    Server,
    _base_env,
    _run,
    _served,
    edit_keeping_times,
    package_copy,
    package_version,
    server,  # noqa: F401 (a fixture: the tests take it as a parameter)
)

from vlmgrid import forkserver
from vlmgrid.forkserver.protocol import PER_JOB, environment_difference


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # a zombie would still answer: gone means reaped as well
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    "args, code",
    [
        (["benchmarks"], 0),
        (["models"], 0),
        # the grid's default config, read from the client's folder (the server runs in /), and no such
        # benchmark
        (["score", "clip-tiny", "no-such-bench"], 2),
        (["no-such-command"], 2),  # argparse's own error and exit status
    ],
)
def test_same_bytes_and_exit_code_as_in_process(server, args, code):
    own = _run(args)
    before = _served(server, " ".join(args))
    served = _run(args, env=server.env())
    assert own.returncode == code
    assert (served.returncode, served.stdout, served.stderr) == (own.returncode, own.stdout, own.stderr)
    assert _served(server, " ".join(args)) == before + 1  # it did run in the server
    if code == 2 and args[0] == "score":
        assert served.stderr.decode().startswith("vlmgrid: error: ")
        assert served.stderr.decode().count("\n") == 1


def test_a_jobs_messages_are_printed_once_as_in_its_own_process(server, tmp_path):
    # the server's own command shows the package's messages on its stderr, which a forked job's is
    command = ["stamp-sources", "--out", str(tmp_path / "stamps")]
    own = _run(command)
    shutil.rmtree(tmp_path / "stamps")
    served = _run(command, env=server.env())
    assert served.returncode == own.returncode == 0, served.stderr
    assert len(own.stderr.decode().splitlines()) == 2, own.stderr
    assert served.stderr == own.stderr


def test_a_tiny_cell_prepared_inferred_and_scored_in_the_server_gives_the_same_files(server, tmp_path):
    own, served = copy_workflow(tmp_path / "own"), copy_workflow(tmp_path / "served")
    for command in (
        ["prepare", "pope-fixture"],
        ["fetch-model", "clip-tiny"],
        ["infer", "clip-tiny", "pope-fixture", "--threads", "1", "--no-progress"],
        ["score", "clip-tiny", "pope-fixture"],
    ):
        before = _served(server, " ".join(command))
        in_process, in_server = _run(command, cwd=own), _run(command, env=server.env(), cwd=served)
        assert in_process.returncode == in_server.returncode == 0, in_server.stderr
        assert in_server.stdout == in_process.stdout
        assert _served(server, " ".join(command)) == before + 1
    score = "results/scores/clip-tiny/pope-fixture.json"
    assert (served / score).read_bytes() == (own / score).read_bytes()
    predictions = "results/predictions/clip-tiny/pope-fixture.parquet"
    pd.testing.assert_frame_equal(pd.read_parquet(served / predictions), pd.read_parquet(own / predictions))


def test_a_different_environment_is_refused_and_runs_in_the_client(server):
    own = _run(["benchmarks"], env=_base_env(HF_HOME="/elsewhere/hf"))
    served = _run(["benchmarks"], env=server.env(HF_HOME="/elsewhere/hf"))
    assert served.returncode == 0
    assert served.stdout == own.stdout
    assert served.stderr.decode() == (
        f"vlmgrid: the fork server at {server.socket} did not run this command "
        "(HF_HOME differs); it runs in its own process\n"
    )
    assert "refused (HF_HOME differs): vlmgrid benchmarks" in server.text()


def test_the_per_job_variables_are_the_jobs_own(server):
    # Snakemake's threads variables for a 3-thread job: served, and the job sees them
    served = _run(["benchmarks"], env=server.env(OMP_NUM_THREADS="3", MKL_NUM_THREADS="3", TMPDIR="/tmp"))
    assert served.returncode == 0 and served.stderr == b""
    assert environment_difference({"OMP_NUM_THREADS": "3", "A": "1"}, {"A": "1"}) is None
    assert environment_difference({"A": "1"}, {"A": "2", "B": "1"}) == "A"
    assert environment_difference({"A": "1", "B": "1"}, {"A": "1"}) == "B"
    assert {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "GOTO_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    } <= PER_JOB


def _fewer_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256) - 1, hard))


@pytest.mark.parametrize(
    "change, differs",
    [
        (lambda: os.umask(0o077), "umask"),
        (lambda: os.nice(2), "nice"),
        (_fewer_files, "RLIMIT_NOFILE"),
        (lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN), "ignored signals"),  # as `nohup` starts it
    ],
    ids=["umask", "nice", "rlimit", "nohup"],
)
def test_a_command_in_another_process_context_is_refused_and_runs_in_its_own_process(server, change, differs):
    # A forked job inherits these from the server, not from its caller: it would write 0644 files under umask
    # 077, run at the server's priority and limits, and die of a hangup that its caller ignores.
    def benchmarks(env):
        return subprocess.run(
            [*VLMGRID, "benchmarks"], capture_output=True, env=env, cwd=REPO, timeout=300, preexec_fn=change
        )

    own, served = benchmarks(_base_env()), benchmarks(server.env())
    assert (served.returncode, served.stdout) == (own.returncode, own.stdout) == (0, own.stdout)
    assert served.stderr.decode() == (
        f"vlmgrid: the fork server at {server.socket} did not run this command "
        f"({differs} differs); it runs in its own process\n"
    )
    assert f"refused ({differs} differs): vlmgrid benchmarks" in server.text()


def test_an_edit_that_keeps_the_files_times_ends_a_runs_server_and_the_next_jobs_run_the_new_code(
    tmp_path, monkeypatch
):
    package = package_copy(tmp_path / "code")
    version = package_version(package)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # the server's environment is this process's
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "code"))
    log = tmp_path / "forkserver.log"
    started = forkserver.start(str(log))  # as Snakemake's onstart
    assert started is not None
    try:
        env = {**os.environ, "VLMGRID_FORKSERVER": started.socket_path}

        def version_printed() -> subprocess.CompletedProcess:
            return subprocess.run(
                [*VLMGRID, "--version"], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
            )

        served = version_printed()
        assert (served.returncode, served.stdout, served.stderr) == (0, f"vlmgrid {version}\n", "")
        edit_keeping_times(package / "__init__.py", f'"{version}"', f'"{version}+edited"')
        refused = version_printed()
        assert (refused.returncode, refused.stdout) == (0, f"vlmgrid {version}+edited\n")
        assert refused.stderr == (
            f"vlmgrid: the fork server at {started.socket_path} did not run this command "
            "(the code on disk changed since the server started); it runs in its own process\n"
        )
        # its socket went with the refusal: the next job runs in its own process, silently, and the server
        # ends
        later = version_printed()
        assert (later.returncode, later.stdout, later.stderr) == (0, f"vlmgrid {version}+edited\n", "")
        assert started.process.wait(timeout=60) == 0
        assert not Path(started.folder).exists()
    finally:
        forkserver.stop(started)
    text = log.read_text()
    assert text.count("started: vlmgrid --version\n") == 1
    assert (
        "the code on disk changed since the server started: no more jobs; stopping once the 0 running end"
        in text
    )
    assert text.splitlines()[-1].endswith(" its jobs ended: stopping")


def test_no_server_at_the_socket_runs_in_the_client_silently(tmp_path):
    own = _run(["benchmarks"])
    gone = _run(["benchmarks"], env=_base_env(VLMGRID_FORKSERVER=str(tmp_path / "no-socket")))
    off = _run(["benchmarks"], env=_base_env(VLMGRID_FORKSERVER="off"))
    assert (gone.returncode, gone.stdout, gone.stderr) == (own.returncode, own.stdout, own.stderr)
    assert (off.returncode, off.stdout, off.stderr) == (own.returncode, own.stdout, own.stderr)


def _blocked_job(server):
    """A served `vlmgrid plan` (10 kB of output) whose stdout is a pipe of 4 kB that nobody reads yet: the job
    waits in its write. Returns the client, the job's pid and the pipe's read end."""
    before = server.text().count("started: vlmgrid plan\n")
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    client = subprocess.Popen(
        [*VLMGRID, "plan"], env=server.env(), cwd=REPO, stdout=write_end, stderr=subprocess.PIPE
    )
    os.close(write_end)
    pid = server.started_pid("plan", after=before)
    wait_for(lambda: _unread(read_end) >= 4096, "the job to fill its stdout")  # now it waits in its write
    return client, pid, read_end


def _unread(read_end: int) -> int:
    """The bytes in a pipe not read yet."""
    return struct.unpack("i", fcntl.ioctl(read_end, termios.FIONREAD, b"\0\0\0\0"))[0]


def _drain(read_end: int) -> bytes:
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read()


def test_a_killed_clients_job_is_killed_and_reaped(server):
    client, pid, read_end = _blocked_job(server)
    assert _alive(pid)
    client.kill()  # SIGKILL: the client forwards nothing; the server sees its connection close
    client.communicate()
    wait_for(lambda: f"job {pid}: its client is gone" in server.text(), "the server to see the client gone")
    _drain(read_end)
    # the server logs a job's end just after reaping it: wait for the line, then the pid is gone
    wait_for(lambda: f"job {pid} exit 143 " in server.text(), f"job {pid} to end by SIGTERM")
    assert not _alive(pid)
    assert f"job {pid}: its client is gone; SIGTERM" in server.text()


def test_sigterm_to_the_client_reaches_the_job(server):
    client, pid, read_end = _blocked_job(server)
    client.send_signal(signal.SIGTERM)
    client.wait(timeout=120)  # the job cannot end by itself: its output is not read
    _drain(read_end)
    assert client.returncode == 143  # the job died of SIGTERM: 128 + 15, as a shell shows it
    wait_for(lambda: not _alive(pid), f"job {pid} to end")


def test_sigint_to_the_client_interrupts_the_job_as_in_its_own_process(server):
    client, pid, read_end = _blocked_job(server)
    client.send_signal(signal.SIGINT)
    stderr = client.stderr.readline()  # the job's KeyboardInterrupt, caught by the CLI, said so
    _drain(read_end)  # then its exit flushes the rest of its output
    client.wait(timeout=120)
    assert client.returncode == 130
    assert stderr == b"vlmgrid: interrupted\n"
    client.stderr.close()


def test_the_idle_timeout_and_sigterm_end_the_server():
    idle = Server(idle_timeout=1)
    try:
        assert idle.process.wait(timeout=120) == 0
        assert "no job for 1 s: stopping" in idle.text()
        assert not idle.socket.exists()
    finally:
        idle.stop()
    stopped = Server()
    try:
        stopped.process.terminate()
        assert stopped.process.wait(timeout=120) == 0
        assert "signal 15: stopping 0 job(s)" in stopped.text()
        assert not stopped.socket.exists()
    finally:
        stopped.stop()


def test_start_returns_once_the_socket_takes_jobs_so_the_first_one_is_served(tmp_path, monkeypatch):
    # Snakemake's onstart calls `start` and dispatches the first jobs at once: each must find the socket
    # listening. Before, the first few (one per core) found no socket yet and silently ran in their own
    # process.
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # the server's environment is this process's
    # the `vlmgrid` it starts is the one on PATH, as the jobs' is: this interpreter's
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "logs" / "forkserver.log"
    started = forkserver.start(str(log))
    assert started is not None
    try:
        assert Path(started.socket_path).exists() and not list(Path(started.folder).glob("socket.*"))
        sent = subprocess.run(
            [*VLMGRID, "benchmarks"],
            capture_output=True,
            cwd=REPO,
            timeout=300,
            env={**os.environ, "VLMGRID_FORKSERVER": started.socket_path},
        )
        assert (sent.returncode, sent.stderr) == (0, b"")  # served, not refused
    finally:
        forkserver.stop(started)
    assert "started: vlmgrid benchmarks\n" in log.read_text()
    assert log.read_text().splitlines()[-1].endswith("stopping 0 job(s)")
    assert not Path(started.folder).exists()


def test_start_without_a_vlmgrid_command_starts_none(tmp_path, monkeypatch):
    runtime = tmp_path / "run"  # where the server's private folder would be made
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("PATH", str(tmp_path))  # no `vlmgrid` on it: the jobs run in their own processes
    assert forkserver.start(str(tmp_path / "forkserver.log")) is None
    assert list(runtime.iterdir()) == []  # its folder is not left behind
