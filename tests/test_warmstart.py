"""The warm start outside Snakemake (vlmgrid.warmstart): the `vlmgrid` command starts this user's fork server
when none answers (but for a quick listing), once for commands that come at once, and later commands use it;
what they print and their exit codes are those of their own process; the server stops after its idle timeout,
counted from the end of the last job however long it ran, and it leaves nothing behind; a server killed with
SIGKILL is replaced; a command in another process context (umask, capabilities, nice, limits, network namespace)
or after an edit of the code that keeps the files' times runs as its own process would, never in a server of
another; and no server is started where it must not be (off, GPUs, Slurm, `python -m vlmgrid.cli`, the
`forkserver` command, a folder that is not private, a socket path too long)."""

import fcntl
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from helpers.common import DEFAULT_CONFIG, REPO, fork_servers, process_running, stop_fork_servers, wait_for
from helpers.forkserver import edit_keeping_times, package_copy, package_version
from vlmgrid import forkserver, warmstart
from vlmgrid.forkserver import protocol

# The console script, run by this interpreter as the shell would run it: only the `vlmgrid` command starts one.
VLMGRID = [sys.executable, str(Path(sys.executable).parent / "vlmgrid")]
IDLE_S = 3  # long enough for the next command of a test to come, short enough to wait for


@pytest.fixture
def servers():
    """A folder of the test's own for the servers' private folder (short: a socket path holds 107 bytes); the
    servers started there are stopped at the end, whatever happened."""
    folder = Path(tempfile.mkdtemp(prefix="vlmgrid-ws-", dir="/tmp"))
    yield folder
    stop_fork_servers(folder)
    subprocess.run(["rm", "-rf", str(folder)], check=True)


def _env(servers: Path, **changes) -> dict:
    """This environment without what differs from one test to the next, with no GPU and the test's folder, and
    `changes` (None unsets a variable)."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTEST_CURRENT_TEST", "VLMGRID_FORKSERVER")}
    env.update({warmstart.DIR_ENV: str(servers), warmstart.IDLE_ENV: str(IDLE_S), "VLMGRID_GPU_COUNT": "0"})
    env.update(changes)
    return {name: value for name, value in env.items() if value is not None}  # None: the variable unset


def _run(args, env, command=VLMGRID, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run([*command, *args], capture_output=True, env=env, cwd=REPO, timeout=300,
                          preexec_fn=preexec_fn)


def _own(args, servers) -> subprocess.CompletedProcess:
    """The command in its own process, as before the warm start."""
    return _run(args, _env(servers, VLMGRID_FORKSERVER="off"))


def _logs(servers: Path) -> list[Path]:
    return sorted(servers.glob(f"{forkserver.FOLDER_PREFIX}*/*.log"))


def _text(servers: Path) -> str:
    """The servers' logs, together. (A command finds another server, with a log of its own, where the code on
    disk changed meanwhile: a checkout edited while the test runs.)"""
    return "".join(log.read_text() for log in _logs(servers))


FAILING = ["score", "clip-tiny", "no-such-bench"]  # a command that starts a server: exit status 2, one sentence


def test_commands_at_once_start_one_server_that_serves_them_and_later_ones_then_stops_when_idle(servers):
    # A quick command (a listing) starts no server: its own process costs less than a server's imports
    own = _own(["benchmarks"], servers)
    assert _run(["benchmarks"], _env(servers)).stdout == own.stdout
    assert not _logs(servers) and not fork_servers(servers)

    # Two at once, as DVC's stages differ only in their DVC_* variables: one server for both, and each one's exit
    # status and sentence as in its own process
    own_failing = _own(FAILING, servers)
    assert own_failing.returncode == 2 and own_failing.stderr.startswith(b"vlmgrid: error: ")
    clients = [subprocess.Popen([*VLMGRID, *FAILING], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_env(servers, DVC_STAGE=f"score@{name}", DVC_ROOT=str(REPO)), cwd=REPO)
               for name in ("a", "b")]
    for client in clients:
        assert (*client.communicate(timeout=300), client.returncode) == (own_failing.stdout, own_failing.stderr, 2)
    [log] = _logs(servers)
    assert log.read_text().count(" listening on ") == 1 and log.read_text().count(" exit 2 in ") == 2

    # A job that runs longer than the idle timeout (its 10 kB of output wait in a 4 kB pipe nobody reads): the
    # idle time counts from its end, so the server is still there a while after it
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    slow = subprocess.Popen([*VLMGRID, "plan"], stdout=write_end, stderr=subprocess.PIPE, env=_env(servers),
                            cwd=REPO)
    os.close(write_end)
    wait_for(lambda: "started: vlmgrid plan\n" in _text(servers), "the slow job to start")
    time.sleep(IDLE_S + 1)
    with os.fdopen(read_end, "rb") as pipe:
        assert len(pipe.read()) > 4096
    assert slow.wait(timeout=300) == 0 and slow.stderr.read() == b""
    slow.stderr.close()
    time.sleep(1)  # under the idle timeout
    assert fork_servers(servers) and ": stopping" not in _text(servers)

    # A quick command uses the server that is running
    served = _run(["benchmarks"], _env(servers))
    assert (served.returncode, served.stdout, served.stderr) == (0, own.stdout, own.stderr)
    assert "started: vlmgrid benchmarks\n" in _text(servers)

    wait_for(lambda: not fork_servers(servers), "the servers to stop on idle")
    # each took its socket, log and lock with it, and the last one the private folder, empty
    assert list(servers.iterdir()) == []


def _refused(path: Path) -> bool:
    """Whether a connection to the socket at `path` is refused: nothing listens there any more."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        return True
    finally:
        probe.close()
    return False


def test_a_server_killed_with_sigkill_is_replaced_by_the_next_command(servers):
    own = _own(FAILING, servers)
    assert _run(FAILING, _env(servers)).stderr == own.stderr
    [pid] = fork_servers(servers)
    [stale] = servers.glob("*/*.sock")
    os.kill(pid, signal.SIGKILL)  # its socket file stays, with nobody listening once all its threads are gone
    wait_for(lambda: not process_running(pid) and _refused(stale), "the killed server to end")
    again = _run(FAILING, _env(servers))
    assert (again.returncode, again.stdout, again.stderr) == (2, own.stdout, own.stderr)
    running = fork_servers(servers)
    assert len(running) == 1 and running[0] != pid
    assert f"started: vlmgrid {' '.join(FAILING)}\n" in _text(servers)


@pytest.mark.parametrize("changes, command, args", [
    ({"VLMGRID_FORKSERVER": "off"}, VLMGRID, FAILING),
    ({"VLMGRID_GPU_COUNT": "1"}, VLMGRID, FAILING),  # a job may hold GPUs
    ({"CUDA_VISIBLE_DEVICES": "0", "VLMGRID_GPU_COUNT": None}, VLMGRID, FAILING),
    ({"SLURM_JOB_ID": "7"}, VLMGRID, FAILING),
    ({}, [sys.executable, "-m", "vlmgrid.cli"], FAILING),
    ({}, VLMGRID, ["forkserver", "--help"]),
], ids=["off", "gpu-count", "cuda-visible-devices", "slurm", "python-m", "forkserver-itself"])
def test_no_server_where_the_command_must_run_in_its_own_process(servers, changes, command, args):
    result = _run(args, _env(servers, **changes), command=command)
    if args == FAILING:
        assert result.returncode == 2 and result.stderr.decode().startswith("vlmgrid: error: ")
        assert result.stderr.count(b"\n") == 1
    else:
        assert result.returncode == 0 and result.stdout and result.stderr == b""
    assert list(servers.iterdir()) == [] and not fork_servers(servers)


def test_a_folder_that_is_not_private_or_too_deep_runs_the_command_in_its_own_process_silently(servers):
    own = _own(FAILING, servers)
    shared = servers / "shared"
    (shared / f"{forkserver.FOLDER_PREFIX}{os.getuid()}").mkdir(parents=True, mode=0o755)
    os.chmod(shared / f"{forkserver.FOLDER_PREFIX}{os.getuid()}", 0o755)  # whatever the umask
    deep = servers / ("d" * 60)  # the socket's path would pass 100 bytes
    for base in (shared, deep):
        result = _run(FAILING, _env(servers, **{warmstart.DIR_ENV: str(base)}))
        assert (result.returncode, result.stdout, result.stderr) == (2, own.stdout, own.stderr)
        assert not list(base.glob("*/*.sock")) and not list(base.glob("*/*.log"))
    assert not fork_servers(servers)


def test_an_idle_timeout_that_is_not_a_number_is_one_sentence_and_the_command_runs_in_its_own_process(servers):
    result = _run(["benchmarks"], _env(servers, **{warmstart.IDLE_ENV: "soon"}))
    assert result.returncode == 0 and result.stdout == _own(["benchmarks"], servers).stdout
    assert result.stderr.decode().splitlines() == [
        f"vlmgrid: {warmstart.IDLE_ENV}=soon is not a number of seconds above 0; this command runs in its own "
        "process"]
    assert list(servers.iterdir()) == []


def test_the_servers_key_ignores_the_per_job_variables_and_not_the_others():
    base = {"HOME": "/home/u", "PATH": "/usr/bin", "HF_HOME": "/data/hf"}
    key = warmstart.server_key(base)
    per_job = {"DVC_ROOT": "/repo", "DVC_STAGE": "infer@a-b", "DVC_EXP_NAME": "e", "OMP_NUM_THREADS": "2",
               "TMPDIR": "/tmp/job", "VLMGRID_FORKSERVER": "/x.sock", "_": "/usr/bin/vlmgrid", "SHLVL": "3"}
    assert warmstart.server_key({**base, **per_job}) == key
    assert warmstart.server_key({**base, "HF_HOME": "/other"}) != key
    assert warmstart.server_key({**base, "CUDA_VISIBLE_DEVICES": "0"}) != key
    assert len(key) == 16
    # the server refuses no job for them either
    assert protocol.environment_difference({**base, **per_job}, base) is None
    assert protocol.environment_difference({**base, "HF_HOME": "/other"}, base) == "HF_HOME"


def _log_of(pid: int) -> Path:
    """The log of the fork server `pid`, beside its socket."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(argv[argv.index(b"--socket") + 1].decode()).with_suffix(".log")


def test_a_command_under_another_umask_writes_files_of_its_own_mode(servers, tmp_path):
    assert _run(FAILING, _env(servers), preexec_fn=lambda: os.umask(0o022)).returncode == 2  # a server, umask 022
    stamps = tmp_path / "stamps"
    result = _run(["stamp-sources", "--out", str(stamps)], _env(servers), preexec_fn=lambda: os.umask(0o077))
    assert result.returncode == 0, result.stderr
    modes = {oct(path.stat().st_mode & 0o777) for path in stamps.rglob("*") if path.is_file()}
    assert modes == {oct(0o600)}  # as its own process writes them, not 0644 as the server's umask would


def _fewer_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256) - 1, hard))


def test_a_command_with_another_nice_or_limit_runs_in_a_server_of_its_own(servers):
    own = _own(FAILING, servers)
    assert _run(FAILING, _env(servers)).stderr == own.stderr
    seen = set(fork_servers(servers))
    for change, has_it in ((lambda: os.nice(3), lambda pid: os.getpriority(os.PRIO_PROCESS, pid) == 3),
                           (_fewer_files, lambda pid: resource.prlimit(pid, resource.RLIMIT_NOFILE)[0] < 256)):
        result = _run(FAILING, _env(servers), preexec_fn=change)
        assert (result.returncode, result.stdout, result.stderr) == (2, own.stdout, own.stderr)
        [started] = set(fork_servers(servers)) - seen  # a server of its own, with its nice or limit
        assert has_it(started)
        assert f"started: vlmgrid {' '.join(FAILING)}\n" in _log_of(started).read_text()
        seen.add(started)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("capsh") is None,
                    reason="needs root and capsh, to drop the permission bypass from a command's process")
def test_a_command_without_the_permission_bypass_cannot_read_a_file_through_a_server_that_has_it(servers, tmp_path):
    # Root reads any file through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH; capsh drops them from the command's
    # process, as a process without them is (a container's, a user's)
    secret = tmp_path / "config.yaml"
    secret.write_text(DEFAULT_CONFIG.read_text())
    secret.chmod(0)
    assert _run(FAILING, _env(servers)).returncode == 2  # a server that has them

    def without_bypass(env) -> subprocess.CompletedProcess:
        return _run([*VLMGRID, "check-config", "--config", str(secret)], env, command=[
            "capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", 'exec "$0" "$@"'])

    own = without_bypass(_env(servers, VLMGRID_FORKSERVER="off"))
    assert own.returncode != 0 and b"valid;" not in own.stdout  # its own process cannot read the file
    served = without_bypass(_env(servers))
    assert (served.returncode, served.stdout, served.stderr) == (own.returncode, own.stdout, own.stderr)


def test_a_command_in_a_network_namespace_of_its_own_does_not_reach_the_hosts_loopback(servers, tmp_path):
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("no network namespace can be made here (unshare -n needs root or user namespaces)")
    listener = socket.create_server(("127.0.0.1", 0))  # on the host's loopback
    reached = []

    def answer():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed at the end of the test
                return
            reached.append(conn.getpeername())
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data.update(data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/flowers.tgz"
    data["benchmarks"]["flowers102-fixture"]["source"] = {
        "type": "url", "files": [{"url": url, "md5": "0" * 32, "name": "flowers.tgz"}]}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        assert _run(FAILING, _env(servers)).returncode == 2  # a server in the host's network namespace
        result = _run(["prepare", "flowers102-fixture", "--config", str(config)], _env(servers),
                      command=["unshare", "-n", *VLMGRID])
    finally:
        listener.close()
    assert result.returncode == 2 and "Network is unreachable" in result.stderr.decode(), result.stderr
    assert reached == []


def test_an_edit_that_keeps_the_files_times_is_run_by_the_next_command(servers, tmp_path):
    package = package_copy(tmp_path / "code")
    version = package_version(package)
    env = _env(servers, PYTHONPATH=str(tmp_path / "code"))
    assert _run(FAILING, env).returncode == 2  # a server that imported the copy
    [first] = fork_servers(servers)
    assert _run(["--version"], env).stdout == f"vlmgrid {version}\n".encode()
    assert "started: vlmgrid --version\n" in _log_of(first).read_text()
    edit_keeping_times(package / "__init__.py", f'"{version}"', f'"{version}+edited"')
    edited = _run(["--version"], env)  # no server imported this code: it runs in its own process
    assert (edited.returncode, edited.stdout, edited.stderr) == (0, f"vlmgrid {version}+edited\n".encode(), b"")
    assert _run(FAILING, env).returncode == 2  # starts a server of the code on disk
    [second] = set(fork_servers(servers)) - {first}
    served = _run(["--version"], env)
    assert (served.stdout, served.stderr) == (f"vlmgrid {version}+edited\n".encode(), b"")
    assert "started: vlmgrid --version\n" in _log_of(second).read_text()


def test_a_lock_removed_while_a_command_waited_for_it_is_taken_again_at_its_path(tmp_path, monkeypatch):
    folder = tmp_path / f"{forkserver.FOLDER_PREFIX}{os.getuid()}"
    folder.mkdir(mode=0o700)
    place = warmstart.Place(str(folder / "key.sock"), str(folder / "key.log"), str(folder / "key.lock"))
    flock, taken = fcntl.flock, []

    def a_server_stops_meanwhile(fd, operation):
        """The first take finds the lock removed, with its folder, by a server that ended meanwhile."""
        if not taken:
            os.unlink(place.lock)
            folder.rmdir()
        taken.append(os.fstat(fd if isinstance(fd, int) else fd.fileno()).st_ino)
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", a_server_stops_meanwhile)
    lock = warmstart._locked(place)
    assert lock is not None
    with lock:
        assert len(taken) == 2 and os.stat(place.lock).st_ino == os.fstat(lock.fileno()).st_ino == taken[1]
        assert folder.stat().st_mode & 0o777 == 0o700
