"""Atomic writes against a hostile filesystem: outputs follow the umask like a plain open(), a full disk or a
read-only folder is one sentence with nothing left behind, and a killed writer's temporaries are removed on
the next run of the same writer while a running writer's are kept."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from helpers.filesystems import mounted_tmpfs

from vlmgrid import cli, fileio
from vlmgrid.errors import VlmgridError
from vlmgrid.report.style import pyplot, save_figure
from vlmgrid.report.tables.format import write_csv

HOST = fileio._HOST


@contextmanager
def umask(mask: int):
    saved = os.umask(mask)
    try:
        yield
    finally:
        os.umask(saved)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


# B: outputs follow the umask -------------------------------------------------------------------------------


def _write_every_kind(folder: Path) -> list[Path]:
    """The main writers: JSON, parquet, a table (Markdown and CSV), a figure (PNG and PDF)."""
    fileio.write_json(folder / "score.json", {"value": 1})
    fileio.write_parquet(folder / "predictions.parquet", pd.DataFrame({"item": ["a"], "answer": ["yes"]}))
    fileio.write_text(folder / "tables" / "main.md", "| a |\n")
    write_csv(folder / "tables" / "main.csv", pd.DataFrame({"a": [1]}))
    fig = pyplot().figure(figsize=(1, 1))
    written = save_figure(fig, folder / "figures", "main")
    pyplot().close(fig)
    return [
        folder / "score.json",
        folder / "predictions.parquet",
        folder / "tables" / "main.md",
        folder / "tables" / "main.csv",
        *written,
    ]


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_get_the_mode_a_plain_open_gives(tmp_path, mask, expected):
    with umask(mask):
        written = _write_every_kind(tmp_path)
        with open(tmp_path / "plain", "w"):
            pass
    assert mode(tmp_path / "plain") == expected
    assert {path.name: mode(path) for path in written} == {path.name: expected for path in written}


def test_a_rewritten_output_follows_the_umask_too(tmp_path):
    out = tmp_path / "score.json"
    with umask(0o077):
        fileio.write_json(out, {"value": 1})
    with umask(0o022):
        fileio.write_json(out, {"value": 2})
    assert mode(out) == 0o644


# C: a full disk or a read-only folder ----------------------------------------------------------------------


def test_a_full_disk_while_writing_is_one_sentence_and_leaves_nothing(tmp_path, monkeypatch):
    def full(self, data):
        with open(self, "wb") as handle:
            handle.write(data[:1000])  # what fitted
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    out = tmp_path / "tables" / "main.md"
    with pytest.raises(VlmgridError) as caught:
        fileio.write_text(out, "x" * 3000)
    message = str(caught.value)
    assert message.startswith(f"{out}: cannot write it, no space is left on its disk (2.9 kB wanted, ")
    assert " free); free some space there" in message and "\n" not in message
    assert leftovers(out.parent) == []


def test_the_space_wanted_by_a_writer_of_unknown_size_is_what_it_had_written(tmp_path):
    out = tmp_path / "predictions.parquet"
    out.write_text("the previous run's output")
    with pytest.raises(
        VlmgridError, match=r"no space is left on its disk \(more than 7 bytes wanted, .* free\)"
    ):
        with fileio.atomic_path(out) as tmp:
            tmp.write_text("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert leftovers(tmp_path) == ["predictions.parquet"]
    assert out.read_text() == "the previous run's output"


@pytest.mark.parametrize(
    "code, reason",
    [
        (errno.EROFS, "its folder is on a read-only file system"),
        (errno.EACCES, "its folder is not writable by this user"),
    ],
)
def test_a_folder_that_cannot_be_written_is_one_sentence(tmp_path, monkeypatch, code, reason):
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if Path(path).parent == tmp_path and flags & os.O_CREAT:
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    out = tmp_path / "score.json"
    with pytest.raises(VlmgridError) as caught:
        fileio.write_json(out, {"value": 1})  # '{\n  "value": 1\n}\n': 17 bytes
    assert str(caught.value) == (
        f"{out}: cannot write it (17 bytes wanted), {reason}; make {tmp_path} writable "
        "(or write the outputs elsewhere) and run again"
    )
    assert leftovers(tmp_path) == []


def test_a_failed_rename_leaves_no_temporary(tmp_path, monkeypatch):
    def refuse(src, dst):
        raise OSError(errno.EROFS, "Read-only file system", str(src), None, str(dst))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(VlmgridError, match="read-only file system"):
        fileio.write_json(tmp_path / "score.json", {})
    assert leftovers(tmp_path) == []


def test_a_permission_error_on_another_file_is_not_called_a_write_failure(tmp_path):
    with pytest.raises(PermissionError):
        with fileio.atomic_path(tmp_path / "records.jsonl"):
            raise PermissionError(errno.EACCES, "Permission denied", "/some/input.json")
    assert leftovers(tmp_path) == []


def test_a_real_full_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "disk", "size=64k") as disk:
        out = disk / "predictions.parquet"
        with pytest.raises(VlmgridError) as caught:
            fileio.write_bytes(out, b"\0" * 100_000)
        assert str(caught.value).startswith(
            f"{out}: cannot write it, no space is left on its disk (97.7 kB wanted, 64.0 kB free); "
        )
        assert leftovers(disk) == []


def test_a_real_read_only_folder(tmp_path):
    with mounted_tmpfs(tmp_path / "disk", "ro,size=64k") as disk:
        out = disk / "tables" / "main.md"
        with pytest.raises(
            VlmgridError,
            match=rf"^{out}: cannot write it \(5 bytes wanted\), its folder is on a "
            "read-only file system; make",
        ):
            fileio.write_text(out, "| a |")
        assert leftovers(disk) == []


def _run_handler(handler, capsys):
    args = argparse.Namespace(needs_config=False, config="/nonexistent/config.yaml", handler=handler)
    return cli._run(args), capsys.readouterr().err


def test_the_cli_turns_a_full_disk_anywhere_into_one_sentence(capsys):
    def handler(config, args):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/cache/weights.bin")

    code, err = _run_handler(handler, capsys)
    assert code == 2
    assert err.startswith(
        "vlmgrid: error: /data/cache/weights.bin: cannot write it, no space is left on its disk"
    )
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_cli_keeps_other_os_errors_as_they_are(capsys):
    def handler(config, args):
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")

    with pytest.raises(ConnectionRefusedError):
        _run_handler(handler, capsys)


def test_the_cli_says_the_inputs_fault_in_its_own_sentence(capsys):
    def handler(config, args):
        raise VlmgridError("grid.yaml: models.x: unknown backend")

    assert _run_handler(handler, capsys) == (2, "vlmgrid: error: grid.yaml: models.x: unknown backend\n")


@pytest.mark.parametrize(
    "error, said",
    [
        (VlmgridError("the input's fault"), "the input's fault"),
        (OSError(errno.EROFS, "Read-only file system", "/out/t.csv"), "/out/t.csv: cannot write it"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), None),  # not the disk: a traceback
        (ValueError("a bug"), None),
    ],
)
def test_one_rule_says_which_errors_end_a_command_in_one_sentence(error, said):
    """What a command (cli) ends with: the input's fault or a full or read-only disk in one sentence, anything
    else as it is."""
    failure = fileio.user_error(error)
    assert (None if failure is None else str(failure)[: len(said)]) == said


# E: temporaries never look like outputs, a killed writer's are removed -------------------------------------


def test_a_temporary_is_hidden_and_names_its_writer(tmp_path):
    with fileio.atomic_path(tmp_path / "main.png") as tmp:
        assert tmp.parent == tmp_path
        assert tmp.name.startswith(f".main.png.vlmgrid-{os.getpid()}@{HOST}.") and tmp.name.endswith(".tmp")
    assert leftovers(tmp_path) == ["main.png"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_table_writer_leaves_a_temporary_the_next_run_removes(tmp_path):
    tables = tmp_path / "tables"
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import os, signal, sys\n"
                "from vlmgrid import fileio\n"
                "with fileio.atomic_path(sys.argv[1]) as tmp:\n"
                "    tmp.write_text('half a table')\n"
                "    os.kill(os.getpid(), signal.SIGKILL)\n"
            ),
            str(tables / "main.md"),
        ]
    )
    assert killed.returncode == -signal.SIGKILL
    [stale] = leftovers(tables)
    assert stale.startswith(".main.md.vlmgrid-") and stale.endswith(".tmp")
    fileio.write_text(tables / "main.md", "| a |\n")
    assert leftovers(tables) == ["main.md"]


def test_a_killed_figure_writer_leaves_nothing_after_the_next_run(tmp_path):
    figures = tmp_path / "figures"
    figures.mkdir()
    stale = figures / f".main.png.vlmgrid-{_dead_pid()}@{HOST}.0123abcd.tmp"
    stale.write_bytes(b"\x89PNG half")
    fig = pyplot().figure(figsize=(1, 1))
    save_figure(fig, figures, "main")
    pyplot().close(fig)
    assert leftovers(figures) == ["main.pdf", "main.png"]


def test_a_running_writers_temporary_is_kept(tmp_path):
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".score.json.vlmgrid-{running.pid}@{HOST}.0123abcd.tmp"
        live.write_text("{")
        fileio.write_json(tmp_path / "score.json", {})
        assert leftovers(tmp_path) == [live.name, "score.json"]
    finally:
        running.kill()
        running.wait()


def test_another_hosts_temporary_is_removed_after_a_day_only(tmp_path):
    other = "node-elsewhere.cluster"
    assert other != HOST
    fresh = tmp_path / f".a.json.vlmgrid-12@{other}.0123abcd.tmp"
    old = tmp_path / f".b.json.vlmgrid-12@{other}.4567cdef.tmp"
    for path in (fresh, old):
        path.write_text("{")
    day_and_a_minute_ago = time.time() - 24 * 3600 - 60
    os.utime(old, (day_and_a_minute_ago, day_and_a_minute_ago))
    fileio.write_json(tmp_path / "a.json", {})
    assert leftovers(tmp_path) == [fresh.name, "a.json"]


def test_files_that_only_look_like_temporaries_are_left_alone(tmp_path):
    mine = [".notes.tmp", "results.tmp", f".x.vlmgrid-{_dead_pid()}@{HOST}.tmp"]
    for name in mine:
        (tmp_path / name).write_text("the user's")
    fileio.write_json(tmp_path / "a.json", {})
    assert leftovers(tmp_path) == sorted([*mine, "a.json"])
