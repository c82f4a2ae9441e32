"""A local source's raw files change: the stamp the workflows watch changes with them, and prepare prepares
the benchmark again (a tampered benchmark folder stays an error)."""

from __future__ import annotations

import json
import logging
import os

import pytest
from helpers.sources import raw_fixture, with_kind

from vlmgrid import cli, fileio
from vlmgrid.benchmarks import verify_benchmark
from vlmgrid.benchmarks.stamps import source_fingerprint, source_stamp, write_source_stamps
from vlmgrid.errors import VlmgridError
from vlmgrid.stages.prepare import prepare_benchmark

FLOWERS = ("102flowers.tgz", "imagelabels.mat", "setid.mat")


def local(folder, kind="flowers102", **source):
    return {"kind": kind, "source": {"type": "local", "path": str(folder), **source}}


def bump_mtime(path, seconds=10):
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


# ---------------------------------------------------------------------------------------------- the stamp


def test_stamp_lists_the_files_the_kind_reads_with_size_and_hash(tmp_path):
    copy = raw_fixture("flowers102", tmp_path / "my-flowers", size=2, classes=3)
    (copy / "README.txt").write_text("notes")  # not a file the kind reads
    stamp = source_stamp(local(copy))
    assert stamp["type"] == "local" and stamp["path"] == str(copy.resolve())
    assert [entry[0] for entry in stamp["files"]] == sorted(FLOWERS)
    for name, size, digest in stamp["files"]:
        assert (size, digest) == ((copy / name).stat().st_size, fileio.sha256_file(copy / name))

    before = source_fingerprint(local(copy))
    (copy / "README.txt").write_text("other notes")
    assert source_fingerprint(local(copy)) == before
    bump_mtime(copy / "setid.mat")  # touched, the same bytes: nothing to prepare
    assert source_fingerprint(local(copy)) == before
    (copy / "setid.mat").write_bytes((copy / "setid.mat").read_bytes() + b"x")
    assert source_fingerprint(local(copy)) != before


def test_stamp_sees_a_file_added_or_removed_by_a_pattern(tmp_path):
    copy = raw_fixture("pope", tmp_path / "my-pope", size=2)
    names = [entry[0] for entry in source_stamp(local(copy, "pope"))["files"]]
    assert names and all(name.startswith("Full/") for name in names)
    before = source_fingerprint(local(copy, "pope"))
    extra = copy / "Full" / "random-00001-of-00002.parquet"
    extra.write_bytes((copy / names[0]).read_bytes())
    assert source_fingerprint(local(copy, "pope")) != before
    extra.unlink()
    assert source_fingerprint(local(copy, "pope")) == before


def test_stamp_of_other_sources_and_of_a_missing_folder(tmp_path):
    assert source_stamp({"kind": "pope", "source": {"type": "fixture", "seed": 0}}) == {"type": "fixture"}
    assert source_stamp({"kind": "pope", "source": {"type": "hf_hub", "revision": "x"}}) == {"type": "hf_hub"}
    missing = source_stamp(local(tmp_path / "nowhere"))
    assert missing == {"type": "local", "path": str((tmp_path / "nowhere").resolve()), "files": []}


def test_write_source_stamps_rewrites_only_what_changed_and_drops_others(tmp_path):
    copy = raw_fixture("flowers102", tmp_path / "my-flowers", size=2, classes=3)
    folder = tmp_path / "stamps"
    grid = {"flowers": local(copy), "pope": {"kind": "pope", "source": {"type": "fixture"}}}
    folder.mkdir()
    (folder / "gone.json").write_text("{}")
    assert write_source_stamps(grid, folder) == ["flowers", "pope"]
    assert sorted(p.name for p in folder.iterdir()) == ["flowers.json", "pope.json"]
    first = {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert write_source_stamps(grid, folder) == []
    assert {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in folder.iterdir()} == first
    bump_mtime(copy / "imagelabels.mat")  # touched, the same bytes
    assert write_source_stamps(grid, folder) == []
    (copy / "imagelabels.mat").write_bytes((copy / "imagelabels.mat").read_bytes() + b"x")
    assert write_source_stamps(grid, folder) == ["flowers"]
    stamp = json.loads((folder / "flowers.json").read_text())
    assert stamp["benchmark"] == "flowers" and stamp == {"benchmark": "flowers", **source_stamp(local(copy))}


def test_stamp_sources_command_writes_the_grid_stamps(write_config, default_config_data, tmp_path, capsys):
    copy = raw_fixture("flowers102", tmp_path / "my-flowers", size=2, classes=3)
    data = dict(default_config_data, data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"))
    data["benchmarks"] = {**data["benchmarks"], "flowers-local": local(copy, expected_items=6)}
    data["grid"] = {"models": ["random"], "benchmarks": ["flowers-local", "pope-fixture"]}
    assert cli.main(["stamp-sources", "--config", str(write_config(data))]) == 0
    folder = tmp_path / "data" / ".source-stamps"
    assert sorted(p.name for p in folder.iterdir()) == [
        "flowers-local.json",
        "grid",
        "models",
        "pope-fixture.json",
    ]
    assert json.loads((folder / "models" / "random.json").read_text()) == {
        "model": "random",
        "type": None,
        "models": {
            "random": {"backend": "baseline", "description": "seeded random guess (chance level)", "seed": 0}
        },
    }
    err = capsys.readouterr().err
    assert "2 source stamps (1 local), 2 changed" in err and "1 model stamps (0 local)" in err


# ---------------------------------------------------------------------------------------------- prepare


@pytest.fixture
def prepared(tmp_path, monkeypatch):
    """A flowers102 benchmark prepared from a local copy of fixture raw files (6 items)."""
    with_kind(monkeypatch, "flowers102", expected_count=6)
    copy = raw_fixture("flowers102", tmp_path / "my-flowers", size=2, classes=3)
    bench_dir = tmp_path / "data" / "flowers"
    manifest = prepare_benchmark("flowers", local(copy), bench_dir)
    return copy, bench_dir, manifest


def test_an_unchanged_local_source_is_reused_even_when_touched(prepared, caplog):
    copy, bench_dir, manifest = prepared
    records = (bench_dir / "records.parquet").stat().st_mtime_ns
    bump_mtime(copy / "setid.mat")  # same contents: nothing to prepare
    with caplog.at_level(logging.WARNING):
        assert prepare_benchmark("flowers", local(copy), bench_dir) == manifest
    assert not caplog.records
    assert (bench_dir / "records.parquet").stat().st_mtime_ns == records


def test_a_changed_local_source_is_prepared_again_with_one_line(prepared, caplog):
    copy, bench_dir, manifest = prepared
    raw_fixture("flowers102", copy, size=2, classes=3, seed=1)  # the user's data, a new version
    assert (
        fileio.sha256_file(copy / "imagelabels.mat")
        != manifest["files"][str((copy / "imagelabels.mat").resolve())]
    )
    with caplog.at_level(logging.WARNING, logger="vlmgrid.benchmarks.dataset"):
        again = prepare_benchmark("flowers", local(copy), bench_dir)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("benchmark flowers: its local source changed since it was prepared (")
    assert lines[0].endswith(" changed, and 2 more raw files); preparing it again")
    assert again["fingerprint"] != manifest["fingerprint"]
    for name in FLOWERS:
        assert again["files"][str((copy / name).resolve())] == fileio.sha256_file(copy / name)
    verify_benchmark(bench_dir)  # the new version, whole


def test_a_removed_local_raw_file_is_a_change_and_prepare_names_it(prepared, caplog):
    copy, bench_dir, _ = prepared
    (copy / "setid.mat").unlink()
    with caplog.at_level(logging.WARNING, logger="vlmgrid.benchmarks.dataset"):
        with pytest.raises(VlmgridError, match="setid.mat: missing from the raw files"):
            prepare_benchmark("flowers", local(copy), bench_dir)
    assert (
        f"changed since it was prepared ({(copy / 'setid.mat').resolve()} is gone); preparing" in caplog.text
    )


def test_a_tampered_benchmark_folder_stays_an_error(prepared):
    copy, bench_dir, _ = prepared
    raw_fixture("flowers102", copy, size=2, classes=3, seed=1)  # even with a changed source
    image = sorted((bench_dir / "images").rglob("*.*"))[0]
    image.write_bytes(image.read_bytes() + b"x")
    with pytest.raises(VlmgridError, match=f"{image}: does not match its manifest"):
        prepare_benchmark("flowers", local(copy), bench_dir)
    assert image.is_file()  # nothing rebuilt over it
