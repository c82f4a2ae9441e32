"""The server a served model's job starts (vlmgrid.serving), with small real servers: Python's own
http.server, and commands that exit or never become ready. It becomes ready, is stopped after the job's work,
and is stopped too when the job fails or is SIGKILLed; what goes wrong is one sentence with the server log's
tail."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vlmgrid.errors import VlmgridError
from vlmgrid.serving import ServerPlan, ServeSpec, fill, served_settings

HTTP_SERVER = [sys.executable, "-m", "http.server", "{port}", "--bind", "{host}"]


def plan(tmp_path, command, **spec) -> ServerPlan:
    return ServerPlan(
        ServeSpec.of({"command": command, **spec}),
        model="served",
        model_dir=Path("data/models/served"),
        gpus=2,
        log_path=tmp_path / "logs" / "serve.log",
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) holds no GPU and no port
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:  # reaped since the signal above
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_placeholders_are_filled_and_an_unknown_one_is_named():
    values = {"port": 8123, "host": "127.0.0.1", "model_dir": "data/models/m", "gpus": 2}
    assert fill("--tensor-parallel-size={gpus}", values, "w") == "--tensor-parallel-size=2"
    assert fill('{{"image": 1}}', values, "w") == '{"image": 1}'  # vLLM's --limit-mm-per-prompt
    with pytest.raises(
        VlmgridError,
        match=r'^model m: a word of serve.command "--tp \{gpu\}" names \{gpu\}, which is '
        r"none of \{port\}, \{host\}, \{model_dir\}, \{gpus\}; a literal brace is written \{\{ or \}\}$",
    ):
        fill("--tp {gpu}", values, "model m: a word of serve.command")


def test_the_server_answers_for_the_body_of_the_with_and_is_stopped_after(tmp_path):
    with plan(tmp_path, HTTP_SERVER, ready_path="/").run() as server:
        port = server.values["port"]
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        assert server.command[-3:] == [str(port), "--bind", "127.0.0.1"]
        settings = served_settings({"backend": "openai", "model": "{model_dir}", "serve": {}}, server)
        assert settings["base_url"] == server.base_url and settings["model"] == "data/models/served"
        assert alive(server.server_pid)
        provenance = server.provenance()
        assert (
            provenance["command"] == server.command and provenance["version"] is None
        )  # http.server: no /version
    assert gone_within(server.server_pid, 5)
    assert "Serving HTTP on 127.0.0.1" in (tmp_path / "logs" / "serve.log").read_text()


def test_the_server_is_stopped_when_the_body_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with plan(tmp_path, HTTP_SERVER, ready_path="/").run() as server:
            raise RuntimeError("the job failed")
    assert gone_within(server.server_pid, 5)


def test_a_command_that_exits_before_it_is_ready_is_one_sentence_with_its_log(tmp_path):
    command = [
        sys.executable,
        "-c",
        "import sys; print('CUDA out of memory while loading', flush=True); sys.exit(3)",
    ]
    with pytest.raises(
        VlmgridError,
        match=r"^model served: the serve command exited \(code 3\) before it answered "
        r"http://127.0.0.1:\d+/v1/models; the last lines of its log .*serve.log:\n"
        r"(.*\n)*CUDA out of memory while loading$",
    ):
        with plan(tmp_path, command).run():
            pass


def test_a_command_that_cannot_start_is_one_sentence(tmp_path):
    with pytest.raises(
        VlmgridError,
        match=r"^model served: the serve command could not start \(no-such-server-x "
        r"--port \d+\); the last lines of its log .*:\n(.*\n)*cannot start "
        r"no-such-server-x",
    ):
        with plan(tmp_path, ["no-such-server-x", "--port", "{port}"]).run():
            pass


def test_a_server_that_never_becomes_ready_is_stopped_and_named(tmp_path):
    command = [sys.executable, "-c", "import time; print('loading shards', flush=True); time.sleep(600)"]
    started = time.monotonic()
    with pytest.raises(
        VlmgridError,
        match=r"^model served: the server did not answer http://127.0.0.1:\d+/v1/models "
        r"within 1.5 s \(serve.startup_timeout\); the last lines of its log "
        r".*:\n(.*\n)*loading shards$",
    ):
        with plan(tmp_path, command, startup_timeout=1.5, stop_timeout=1).run():
            pass
    assert time.monotonic() - started < 30
    pids = subprocess.run(["pgrep", "-f", "loading shards"], capture_output=True, text=True).stdout.split()
    assert not [pid for pid in pids if alive(int(pid))]


def test_a_fixed_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(
            VlmgridError,
            match=rf"^model served: serve.port {port} is in use on this machine "
            r"\(another server\?\); stop what holds it, pick another port, or "
            r"leave serve.port out to take a free one$",
        ):
            with plan(tmp_path, HTTP_SERVER, port=port).run():
                pass
    assert not (tmp_path / "logs" / "serve.log").exists()  # nothing was started


JOB = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from vlmgrid.serving import ServerPlan, ServeSpec
    command = [sys.executable, "-m", "http.server", "{port}", "--bind", "{host}"]
    plan = ServerPlan(ServeSpec.of({"command": command, "ready_path": "/"}), model="served",
                      model_dir=Path("m"), gpus=1, log_path=Path(sys.argv[1]))
    with plan.run() as server:
        print(server.server_pid, server.guard.pid, flush=True)
        time.sleep(600)
""")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_job_leaves_no_server_behind(tmp_path, how):
    job = subprocess.Popen(
        [sys.executable, "-c", JOB, str(tmp_path / "serve.log")], stdout=subprocess.PIPE, text=True
    )
    try:
        server_pid, guard_pid = map(int, job.stdout.readline().split())
        assert alive(server_pid)
        job.send_signal(how)
        job.wait(timeout=10)
        assert gone_within(server_pid, 10), "the server outlived its job"
        assert gone_within(guard_pid, 10)
    finally:
        job.kill()


def test_a_killed_guard_takes_its_server_down_with_it(tmp_path):
    # the backstop for a SIGKILL that reaches the guard itself (its server dies with it, PR_SET_PDEATHSIG)
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    with plan(tmp_path, HTTP_SERVER, ready_path="/").run() as server:
        server.guard.kill()
        server.guard.wait()
        assert gone_within(server.server_pid, 5)
