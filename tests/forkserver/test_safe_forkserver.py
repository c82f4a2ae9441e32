"""The fork server and what is already on the disk: `vlmgrid forkserver --socket PATH` never replaces nor
removes anything but its own socket (a stale one of ours it may replace), a results folder that cannot be
written is one sentence before any job with nothing left in the temporary folder, a server ends with the run
that started it, even one killed with SIGKILL, leaving nothing behind."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers.common import copy_workflow, wait_for, workflow_env
from helpers.filesystems import mounted_tmpfs
from helpers.forkserver import REPO, VLMGRID, Server, _base_env, _run, _served

FOLDER_PREFIX = "vlmgrid-forkserver-"  # the private folder Snakemake's run makes for its server's socket


@pytest.fixture
def short_folder():
    """A folder under /tmp: a Unix socket's path holds at most 107 bytes, too few for pytest's tmp_path."""
    folder = Path(tempfile.mkdtemp(prefix="vlmgrid-test-", dir="/tmp"))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=True)


def _forkserver(socket_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`vlmgrid forkserver` on `socket_path`, stopping after a second with no job (its log is its stderr)."""
    return subprocess.run(
        [*VLMGRID, "forkserver", "--socket", str(socket_path), "--idle-timeout", "1", *args],
        capture_output=True,
        text=True,
        env=_base_env(),
        cwd="/",
        timeout=300,
    )


def _stale_socket(path: Path) -> None:
    """A socket file nobody listens on, as a server killed with SIGKILL leaves it."""
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()


def _ended(pid: int) -> bool:
    """Whether process `pid` has ended (gone, or a zombie that nobody has reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _make(kind: str, path: Path) -> None:
    if kind == "a file":
        path.write_text("a researcher's notes\n")
    elif kind == "a folder":
        path.mkdir()
        (path / "notes.txt").write_text("a researcher's notes\n")
    else:
        (path.parent / "notes.txt").write_text("a researcher's notes\n")
        path.symlink_to(path.parent / "notes.txt")


def _unchanged(kind: str, path: Path) -> bool:
    if kind == "a file":
        return path.read_text() == "a researcher's notes\n"
    if kind == "a folder":
        return path.is_dir() and (path / "notes.txt").read_text() == "a researcher's notes\n"
    return path.is_symlink() and path.read_text() == "a researcher's notes\n"


@pytest.mark.parametrize("kind", ["a file", "a folder", "a link"])
def test_a_socket_path_where_something_is_is_refused_and_what_is_there_is_kept(short_folder, kind):
    target = short_folder / "sock"
    _make(kind, target)
    result = _forkserver(target)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"vlmgrid: error: {target} exists and is not a socket; give --socket a path where "
        "nothing is (the server makes its socket there)\n"
    )
    assert _unchanged(kind, target)
    assert [
        p.name for p in short_folder.iterdir() if p.name.startswith("sock.")
    ] == []  # no socket made either


def test_a_stale_socket_outside_a_folder_of_ours_is_refused_and_kept(short_folder):
    stale = short_folder / "sock"
    _stale_socket(stale)
    result = _forkserver(stale)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"vlmgrid: error: {stale} is a socket that nobody listens on, outside a folder of "
        "vlmgrid's own; remove it if it is a stale server's, or give --socket another path\n"
    )
    assert stale.is_socket()


def test_the_socket_of_a_running_server_is_refused_and_that_server_keeps_serving():
    running = Server()
    try:
        result = _forkserver(running.socket)
        assert result.returncode == 2, result.stderr
        assert result.stderr == (
            f"vlmgrid: error: {running.socket} is the socket of a server that is running; "
            "stop that one first, or give --socket another path\n"
        )
        before = _served(running, "benchmarks")
        served = _run(["benchmarks"], env=running.env())
        assert (served.returncode, served.stderr) == (0, b"")
        assert _served(running, "benchmarks") == before + 1  # still its socket: the job ran there
    finally:
        running.stop()


def test_a_stale_socket_in_a_folder_of_ours_is_replaced_and_removed_with_its_folder_at_the_end():
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir="/tmp"))
    try:
        _stale_socket(folder / "socket")
        result = _forkserver(folder / "socket")
        assert result.returncode == 0, result.stderr
        assert f"listening on {folder / 'socket'}" in result.stderr
        assert "no job for 1 s: stopping" in result.stderr
        assert not folder.exists()  # the server's own folder, empty once its socket is gone
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=True)


def test_a_file_put_beside_the_socket_keeps_the_folder():
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir="/tmp"))
    try:
        (folder / "notes.txt").write_text("kept\n")
        result = _forkserver(folder / "socket")
        assert result.returncode == 0, result.stderr
        assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=True)


@pytest.mark.integration
def test_a_read_only_results_dir_under_snakemake_is_one_sentence_and_leaves_no_folder(tmp_path, short_folder):
    root = copy_workflow(tmp_path / "repo")
    with mounted_tmpfs(tmp_path / "results", "ro,size=64k") as results:
        data = yaml.safe_load((root / "config/config.yaml").read_text())
        data["results_dir"] = str(results)
        (root / "config/readonly.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        # the server's folder would be made in the runtime folder, else the temporary folder: both point here
        env = workflow_env({"TMPDIR": str(short_folder), "XDG_RUNTIME_DIR": str(short_folder)})
        result = subprocess.run(
            ["snakemake", "--cores", "1", "--configfile", "config/readonly.yaml"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    said = (
        f"{root}/config/readonly.yaml: results_dir {results} cannot be written (read-only file system: "
        f"{results}/logs); make it writable, or set results_dir to a folder that is, and run again"
    )
    assert output.count(said) == 1, output
    assert "Traceback" not in output and "OSError" not in output
    assert list(short_folder.glob(f"{FOLDER_PREFIX}*")) == []


def test_a_server_whose_parent_is_killed_ends_promptly_and_removes_its_folder(tmp_path, short_folder):
    # The parent is what Snakemake's onstart is: a process that called `start`. SIGKILL runs none of its code.
    parent_code = (
        "import sys, time\n"
        "from vlmgrid import forkserver\n"
        "server = forkserver.start(sys.argv[1])\n"
        "print(server.process.pid, server.folder, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = _base_env(XDG_RUNTIME_DIR=str(short_folder))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # its `vlmgrid`, as a run's
    log = tmp_path / "forkserver.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code, str(log)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    server_pid, folder = parent.stdout.readline().split()
    server_pid = int(server_pid)
    try:
        assert Path(folder).parent == short_folder and (Path(folder) / "socket").is_socket()
        parent.kill()
        parent.wait(timeout=60)
        # promptly: not after its 300 s of idle time
        wait_for(lambda: _ended(server_pid), "the server to end after its parent", limit_s=30)
        assert f"its parent (pid {parent.pid}) ended: stopping 0 job(s)" in log.read_text()
        assert list(short_folder.iterdir()) == []
    finally:
        parent.kill()
        parent.stdout.close()
        if not _ended(server_pid):
            os.kill(server_pid, signal.SIGKILL)
