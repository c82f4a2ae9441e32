"""A fork server of the tests' own: a copy of the package it serves, the server's environment, and
`vlmgrid` commands run through it."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import vlmgrid
from helpers.common import wait_for

REPO = Path(__file__).resolve().parents[2]
VLMGRID = [sys.executable, "-m", "vlmgrid.cli"]


def _base_env(**changes) -> dict:
    """This environment without what differs from one test to the next (pytest names the running test)."""
    keep = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTEST_CURRENT_TEST", "VLMGRID_FORKSERVER")
    }
    return {**keep, **changes}


class Server:
    def __init__(self, idle_timeout: float = 300.0):
        # A Unix socket's path is short (107 bytes): a folder of its own under /tmp, not pytest's deep
        # tmp_path.
        self.folder = Path(tempfile.mkdtemp(prefix="vlmgrid-test-", dir="/tmp"))
        self.socket = self.folder / "socket"
        self.log = self.folder / "forkserver.log"
        env = _base_env()
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [*VLMGRID, "forkserver", "--socket", str(self.socket), "--idle-timeout", str(idle_timeout)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd="/",
                start_new_session=True,
            )
        wait_for(lambda: "ready:" in self.text(), "the server's imports")

    def text(self) -> str:
        return self.log.read_text()

    def env(self, **changes) -> dict:
        return _base_env(VLMGRID_FORKSERVER=str(self.socket), **changes)

    def started_pid(self, command: str, after: int) -> int:
        """The pid of the job the log says started with `command` after the `after` ones before it
        (waiting)."""

        def lines():
            return [ln for ln in self.text().splitlines() if ln.endswith(f"started: vlmgrid {command}")]

        wait_for(lambda: len(lines()) > after, f"job {command!r} to start")
        return int(lines()[after].split(" job ")[1].split()[0])

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.stop()


def _run(args, env=None, cwd=REPO):
    return subprocess.run(
        [*VLMGRID, *args], capture_output=True, env=env or _base_env(), cwd=cwd, timeout=300
    )


def _served(server, command: str) -> int:
    return server.text().count(f"started: vlmgrid {command}\n")


def package_copy(folder: Path) -> Path:
    """A copy of the vlmgrid package under `folder` (put `folder` first on PYTHONPATH to run it), to edit."""
    copy = folder / "vlmgrid"
    shutil.copytree(Path(vlmgrid.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def edit_keeping_times(path: Path, old: str, new: str) -> None:
    """Replace `old` with `new` in the file at `path` and set its times back, as `cp -p`, `rsync -a` or
    `touch -r` leave them."""
    before = path.stat()
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def package_version(package: Path) -> str:
    return (package / "__init__.py").read_text().split("__version__ = ")[1].split('"')[1]
