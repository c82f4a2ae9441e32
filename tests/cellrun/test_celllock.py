"""One run at a time per cell: the lock beside the parts folder, refused in one sentence, dropped on a
kill."""

import json
import os
import signal
import socket
from pathlib import Path

import pytest
from helpers import kill_harness as kh
from helpers.locks import _hold_in_subprocess

from vlmgrid.cellrun.lock import cell_lock, lock_path
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import read_metadata

CELL = "random on pope-fixture"


def _files(root: Path) -> dict:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
    }


def test_the_lock_file_lies_beside_the_parts_folder(tmp_path):
    assert (
        lock_path(tmp_path / "partial" / "random" / "pope") == tmp_path / "partial" / "random" / "pope.lock"
    )
    shard = tmp_path / "shards" / "m" / "b"
    assert lock_path(shard / "2-of-3.parts") == shard / "2-of-3.parts.lock"


def test_the_holder_writes_who_it_is_into_the_lock_file(tmp_path):
    with cell_lock(tmp_path / "partial", CELL) as path:
        holder = json.loads(path.read_text())
    assert holder["pid"] == os.getpid()
    assert holder["host"] == socket.gethostname()
    assert holder["command"]  # the command line that runs the job
    assert not path.exists()  # removed as the holder ended


def test_a_second_holder_in_the_same_process_is_refused(tmp_path):
    with cell_lock(tmp_path / "partial", CELL):
        with pytest.raises(VlmgridError) as refused:
            with cell_lock(tmp_path / "partial", CELL):
                pytest.fail("two holders of one lock")
    assert f"pid {os.getpid()} on {socket.gethostname()}" in str(refused.value)


def test_the_lock_is_released_on_a_normal_exit(tmp_path):
    with cell_lock(tmp_path / "partial", CELL):
        pass
    with cell_lock(tmp_path / "partial", CELL) as path:  # a lock still held would refuse here
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_the_lock_is_released_on_an_exception(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with cell_lock(tmp_path / "partial", CELL):
            raise ZeroDivisionError("inside the lock")
    with cell_lock(tmp_path / "partial", CELL):
        pass


def test_a_lock_held_by_another_process_is_refused_naming_it_and_dropped_when_it_is_killed(tmp_path):
    partial = tmp_path / "partial" / "random" / "pope-fixture"
    holder = _hold_in_subprocess(partial)
    try:
        before = lock_path(partial).read_bytes()
        with pytest.raises(VlmgridError) as refused:
            with cell_lock(partial, CELL):
                pytest.fail("two holders of one lock")
        said = str(refused.value)
        assert said.startswith(
            f"{CELL}: another run of this cell is in progress (pid {holder.pid} on "
            f"{socket.gethostname()}, since "
        )
        assert "--holder-marker" in said  # its command line
        assert said.endswith(
            f"holding its lock {lock_path(partial)}; wait for it to finish, or stop it "
            f"(`kill {holder.pid}` on {socket.gethostname()}) and run this again"
        )
        assert lock_path(partial).read_bytes() == before  # the refused run wrote nothing, not even its name
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert lock_path(partial).is_file()  # a killed holder leaves its file; the kernel dropped its lock
    with cell_lock(partial, CELL) as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()


@pytest.mark.integration
def test_a_second_infer_of_a_running_cell_is_refused_and_a_killed_ones_lock_is_taken_over(
    small_config, tmp_path
):
    ws = kh.make_workspace(tmp_path / "grid", small_config, model="random", bench="pope-fixture", part_size=8)
    first = kh.start(ws, park_part=2, park_after=0.0)  # stops itself inside its second part, one part saved
    try:
        parked = lambda: [e for e in kh.trace(ws) if e["event"] == "parked" and e["pid"] == first.pid]  # noqa: E731
        assert kh._wait_for(parked, first, 120), kh.log_text(ws, ws.runs)
        results = Path(ws.config.results_dir)
        before = _files(results)
        second = kh.start(ws)
        assert second.wait(timeout=120) == 2
        said = kh.log_text(ws, ws.runs)
        assert (
            "vlmgrid: error: random on pope-fixture: another run of this cell is in progress (pid "
            f"{first.pid} on {socket.gethostname()}, since "
        ) in said
        assert f"kill_harness.py infer random pope-fixture --config {ws.config_path}" in said
        assert said.rstrip().endswith(f"(`kill {first.pid}` on {socket.gethostname()}) and run this again")
        assert _files(results) == before  # nothing of the second run was written
        assert [e["event"] for e in kh.trace(ws) if e["pid"] == second.pid] == ["start"]  # no part begun
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    kh.finish(ws, kh.start(ws))
    assert "resuming: 1 of" in kh.log_text(ws, ws.runs)  # the killed run's part is taken
    metadata = read_metadata(ws.out_path)
    assert metadata["strategy"] is not None and metadata["provenance"] is not None
    assert not ws.partial_dir.exists() and not lock_path(ws.partial_dir).exists()
