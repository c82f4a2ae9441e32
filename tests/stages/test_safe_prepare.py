"""Prepare is safe with the user's files: it removes only what it wrote, records the bytes it read, and runs
once at a time per benchmark folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from vlmgrid.benchmarks import BENCHMARKS, load_benchmark, verify_benchmark
from vlmgrid.benchmarks.sources import local_raw_files
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES
from vlmgrid.fixtures.kinds import food101 as food_fx
from vlmgrid.fixtures.kinds import mme as mme_fx
from vlmgrid.stages.prepare import prepare_benchmark

FOOD = {"seed": 3, "size": 2, "classes": 3, "corrupt": 0}
POPE = {"kind": "pope", "source": {"type": "fixture"}}


@pytest.fixture(autouse=True)
def _any_count(monkeypatch):
    # the copies here are small fixtures: the published counts are checked elsewhere
    from vlmgrid.benchmarks import dataset

    monkeypatch.setattr(dataset, "_check_count", lambda *args: None)


def _snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _food101_release(folder: Path) -> Path:
    """Food-101 as its authors ship it, extracted: images/<class>/<id>.jpg and meta/ directly in `folder`."""
    food_fx.write_extracted_fixture(folder.parent / "unpacked", FOOD)
    folder.parent.mkdir(parents=True, exist_ok=True)
    (folder.parent / "unpacked" / "food-101").rename(folder)
    (folder.parent / "unpacked").rmdir()
    return folder


def _local(path: Path, kind: str = "food101") -> dict:
    return {"kind": kind, "source": {"type": "local", "path": str(path)}}


# ------------------------------------------------------------------------------ A1: only what prepare wrote


@pytest.mark.parametrize(
    "placement", ["the same folder", "the data folder inside the copy", "the copy inside the data folder"]
)
def test_a_local_source_sharing_the_benchmark_folder_is_refused_in_one_sentence_and_left_as_it_was(
    tmp_path, placement
):
    if placement == "the same folder":
        release = bench_dir = _food101_release(tmp_path / "data" / "food101")
    elif placement == "the data folder inside the copy":
        release = _food101_release(tmp_path / "food-101")
        bench_dir = release / "data" / "food101"
    else:
        bench_dir = tmp_path / "data" / "food101"
        release = _food101_release(bench_dir / "food-101")
    before = _snapshot(release)
    with pytest.raises(VlmgridError) as refused:
        prepare_benchmark("food101", _local(release), bench_dir)
    message = str(refused.value)
    assert message.startswith(f"{release}: the local source of benchmark food101 ")
    assert f"{bench_dir} that prepare writes the benchmark into" in message and "\n" not in message
    assert _snapshot(release) == before  # the release's own images/ are all there, and nothing was added
    assert not (bench_dir / "records.parquet").exists()


def test_a_copy_in_the_benchmark_folders_raw_is_still_read_in_place(tmp_path):
    bench_dir = tmp_path / "data" / "food101"
    release = _food101_release(bench_dir / "raw")
    before = _snapshot(release)
    manifest = prepare_benchmark("food101", _local(release), bench_dir)
    assert manifest["n_items"] == len(load_benchmark(bench_dir).records)
    assert _snapshot(release) == before


def test_a_file_prepare_did_not_write_is_never_removed(tmp_path):
    bench_dir = tmp_path / "data" / "pope"
    mine = bench_dir / "images" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own notes")
    with pytest.raises(
        VlmgridError,
        match=f"^{mine}: benchmark pope is prepared into {bench_dir}, and prepare did not write this file",
    ):
        prepare_benchmark("pope", POPE, bench_dir)
    assert mine.read_text() == "my own notes"


def test_a_file_added_to_a_prepared_folder_is_never_removed_by_a_new_prepare(tmp_path):
    bench_dir = tmp_path / "data" / "pope"
    prepare_benchmark("pope", POPE, bench_dir)
    mine = bench_dir / "images" / "notes.txt"
    mine.write_text("my own notes")
    with pytest.raises(VlmgridError, match=f"^{mine}: .* prepare did not write this file"):
        prepare_benchmark("pope", {"kind": "pope", "source": {"type": "fixture", "seed": 1}}, bench_dir)
    assert mine.read_text() == "my own notes"
    mine.unlink()
    assert (
        prepare_benchmark("pope", {"kind": "pope", "source": {"type": "fixture", "seed": 1}}, bench_dir)[
            "source"
        ]["seed"]
        == 1
    )


def test_a_copy_in_raw_read_by_a_local_source_survives_a_switch_to_another_source(tmp_path):
    bench_dir = tmp_path / "data" / "pope"
    copy = bench_dir / "raw"
    BENCHMARK_FIXTURES.get("pope").write(copy, dict(BENCHMARK_FIXTURES.get("pope").defaults))
    before = _snapshot(copy)
    prepare_benchmark("pope", _local(copy, "pope"), bench_dir)
    with pytest.raises(
        VlmgridError,
        match=f"^{copy}/.*: benchmark pope is prepared into {bench_dir}, and prepare did not write this file",
    ):
        prepare_benchmark("pope", POPE, bench_dir)
    assert _snapshot(copy) == before


def test_an_interrupted_prepare_is_cleared_by_the_next(tmp_path, monkeypatch):
    bench_dir = tmp_path / "data" / "pope"
    kind = BENCHMARKS.get("pope")

    def crash(raw_dir, into):
        kind.adapt(raw_dir, into)
        (into / "image_sources.jsonl").write_text(
            '{"image": "images/stale.png", "from": "an older prepare"}\n'
        )
        raise KeyboardInterrupt

    monkeypatch.setitem(BENCHMARKS._items, "pope", dataclasses.replace(kind, adapt=crash))
    with pytest.raises(KeyboardInterrupt):
        prepare_benchmark("pope", POPE, bench_dir)
    monkeypatch.setitem(BENCHMARKS._items, "pope", kind)
    manifest = prepare_benchmark("pope", POPE, bench_dir)
    assert "stale" not in (bench_dir / "image_sources.jsonl").read_text()
    assert set(manifest["files"]) == set(_snapshot(bench_dir)) - {"manifest.json", ".prepare-written.json"}
    verify_benchmark(bench_dir)


def test_a_prepare_whose_outputs_snakemake_removed_still_clears_its_own_files(tmp_path):
    # Snakemake deletes a job's outputs (the manifest, the records) before it runs the job again
    bench_dir = tmp_path / "data" / "pope"
    prepare_benchmark("pope", POPE, bench_dir)
    (bench_dir / "manifest.json").unlink()
    (bench_dir / "records.parquet").unlink()
    manifest = prepare_benchmark("pope", POPE, bench_dir)
    assert set(manifest["files"]) == set(_snapshot(bench_dir)) - {"manifest.json", ".prepare-written.json"}
    verify_benchmark(bench_dir)


# ------------------------------------------------------------------------ A7: what is hashed is what was read


def test_a_local_source_edited_while_prepare_reads_it_is_refused_and_then_recorded_as_read(
    tmp_path, monkeypatch
):
    copy, bench_dir = tmp_path / "pope-copy", tmp_path / "data" / "pope"
    fixture = BENCHMARK_FIXTURES.get("pope")
    fixture.write(copy, dict(fixture.defaults))
    kind = BENCHMARKS.get("pope")

    def edited_after_reading(raw_dir, into):
        adapted = kind.adapt(raw_dir, into)
        fixture.write(copy, {**fixture.defaults, "seed": 7})  # another version, saved while prepare runs
        return adapted

    monkeypatch.setitem(BENCHMARKS._items, "pope", dataclasses.replace(kind, adapt=edited_after_reading))
    with pytest.raises(
        VlmgridError,
        match=f"^benchmark pope: its local source {copy} changed while prepare read it "
        r"\(.* changed\), so the records may mix two versions",
    ):
        prepare_benchmark("pope", _local(copy, "pope"), bench_dir)
    assert not (bench_dir / "manifest.json").exists()

    monkeypatch.setitem(BENCHMARKS._items, "pope", kind)
    manifest = prepare_benchmark("pope", _local(copy, "pope"), bench_dir)
    for path in local_raw_files(kind, copy):
        assert manifest["files"][str(path.resolve())] == hashlib.sha256(path.read_bytes()).hexdigest()
    prepare_benchmark(
        "pope", _local(copy, "pope"), tmp_path / "fresh"
    )  # the records of the copy as it is now
    pd.testing.assert_frame_equal(
        load_benchmark(bench_dir).records, load_benchmark(tmp_path / "fresh").records
    )
    verify_benchmark(bench_dir)


# ------------------------------------------------------------------------------ A9: one prepare at a time


def _prepare_held_in_subprocess(bench_dir: Path, started: Path) -> subprocess.Popen:
    """A `prepare` of the fixture POPE into bench_dir whose adapter says it started and then never ends."""
    code = textwrap.dedent(f"""
        import dataclasses, time
        from pathlib import Path
        from vlmgrid.benchmarks import BENCHMARKS
        from vlmgrid.stages.prepare import prepare_benchmark

        def stuck(raw_dir, into):
            Path({str(started)!r}).write_text("started")
            time.sleep(600)

        BENCHMARKS._items["pope"] = dataclasses.replace(BENCHMARKS.get("pope"), adapt=stuck)
        prepare_benchmark("pope", {POPE!r}, Path({str(bench_dir)!r}))
    """)
    process = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 120
    while not started.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the first prepare never started"
        time.sleep(0.05)
    return process


def test_a_second_prepare_waits_for_the_first_naming_it_and_a_killed_ones_lock_is_dropped(tmp_path, caplog):
    bench_dir = tmp_path / "data" / "pope"
    first = _prepare_held_in_subprocess(bench_dir, tmp_path / "started")
    result: dict = {}

    def second():
        try:
            result["manifest"] = prepare_benchmark("pope", POPE, bench_dir)
        except BaseException as exc:  # noqa: BLE001 -- the test reports it
            result["error"] = exc

    waiting = f"benchmark pope: another prepare of it is in progress (pid {first.pid} on "
    try:
        with caplog.at_level(logging.WARNING):
            thread = threading.Thread(target=second)
            thread.start()
            deadline = time.monotonic() + 60
            while waiting not in caplog.text and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert waiting in caplog.text, f"the second prepare did not wait for the first: {result}"
            assert (
                f"holding its lock {tmp_path / 'data' / 'pope.lock'}; waiting for it to finish" in caplog.text
            )
            time.sleep(0.5)
            assert thread.is_alive() and not result  # still waiting, and it wrote nothing
            assert not (bench_dir / "manifest.json").exists()
            os.kill(first.pid, signal.SIGKILL)  # the kernel drops the killed prepare's lock
            first.wait(timeout=30)
            thread.join(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert not thread.is_alive() and "error" not in result, result
    assert result["manifest"]["n_items"] == 30
    verify_benchmark(bench_dir)
    assert not (tmp_path / "data" / "pope.lock").exists()


def test_prepares_one_after_another_reuse_the_folder(tmp_path):
    bench_dir = tmp_path / "data" / "pope"
    first = prepare_benchmark("pope", POPE, bench_dir)
    assert prepare_benchmark("pope", POPE, bench_dir) == first
    assert not (tmp_path / "data" / "pope.lock").exists()


# ------------------------------------------------------------------------------ another grid's data


def _pope_grid(path: Path, seed: int) -> str:
    """A grid of the random baseline on `pope` (a fixture of `seed`) in the shared data folder data/."""
    import yaml

    path.write_text(
        yaml.safe_dump(
            {
                "data_dir": "data",
                "results_dir": f"results/{path.stem}",
                "benchmarks": {
                    "pope": {"kind": "pope", "source": {"type": "fixture", "seed": seed, "size": 2}}
                },
                "models": {"random": {"backend": "baseline"}},
                "grid": {"models": ["random"], "benchmarks": ["pope"]},
            }
        )
    )
    return path.name


def test_another_grids_data_is_never_prepared_over_but_shared_or_prepared_again_by_its_own_grid(
    tmp_path, monkeypatch, capsys
):
    from vlmgrid.cli import main

    monkeypatch.chdir(tmp_path)
    first, same, other = (
        _pope_grid(tmp_path / "a.yaml", 0),
        _pope_grid(tmp_path / "c.yaml", 0),
        _pope_grid(tmp_path / "b.yaml", 1),
    )
    assert main(["prepare", "pope", "--config", first]) == 0
    manifest = json.loads((tmp_path / "data/pope/manifest.json").read_text())
    assert manifest["grid_config"] == "a.yaml"
    assert main(["prepare", "pope", "--config", same]) == 0  # the same source: the grids share the data
    before = _snapshot(tmp_path / "data")
    assert main(["prepare", "pope", "--config", other]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "vlmgrid: error: benchmark pope: data/pope holds the data a.yaml prepared for it (pope from "
        '{"seed": 0, "size": 2, "type": "fixture"}), and b.yaml gives it another source (pope from {"seed": '
        '1, "size": 2, "type": "fixture"}), which would overwrite it; give b.yaml a data_dir of its own '
        "(data_dir: data/b)"
    )
    assert _snapshot(tmp_path / "data") == before
    # its own grid's changed source is a new version of its data, prepared again as always
    _pope_grid(tmp_path / "a.yaml", 1)
    assert main(["prepare", "pope", "--config", first]) == 0
    assert json.loads((tmp_path / "data/pope/manifest.json").read_text())["source"]["seed"] == 1


def _mme_grid(path: Path, release: str) -> str:
    """A grid of the random baseline on `mme`, the local MME release at `release`, in the shared data folder
    data/."""
    import yaml

    path.write_text(
        yaml.safe_dump(
            {
                "data_dir": "data",
                "results_dir": f"results/{path.stem}",
                "benchmarks": {"mme": {"kind": "mme", "source": {"type": "local", "path": release}}},
                "models": {"random": {"backend": "baseline"}},
                "grid": {"models": ["random"], "benchmarks": ["mme"]},
            }
        )
    )
    return path.name


def test_a_release_reached_through_a_link_is_the_same_source_and_not_prepared_again(tmp_path, monkeypatch):
    from vlmgrid.cli import main

    monkeypatch.chdir(tmp_path)
    mme_fx.write_release_fixture(tmp_path / "mme", {"seed": 0, "size": 2, "corrupt": 0})
    (tmp_path / "linked").symlink_to(tmp_path / "mme")
    first, linked = (
        _mme_grid(tmp_path / "a.yaml", "mme"),
        _mme_grid(tmp_path / "b.yaml", str(tmp_path / "linked")),
    )
    assert main(["prepare", "mme", "--config", first]) == 0
    records = tmp_path / "data" / "mme" / "records.parquet"
    written = records.stat().st_ino, records.stat().st_mtime_ns
    assert (
        main(["prepare", "mme", "--config", linked]) == 0
    )  # another grid, the same release: the data is shared
    _mme_grid(tmp_path / "a.yaml", "linked")
    assert (
        main(["prepare", "mme", "--config", first]) == 0
    )  # its own grid, the same release: nothing to prepare
    assert (records.stat().st_ino, records.stat().st_mtime_ns) == written
    assert json.loads((tmp_path / "data" / "mme" / "manifest.json").read_text())["grid_config"] == "a.yaml"
