"""pull_hint: a missing file that a dvc.lock of the repo records in DVC's cache gets the `dvc pull` that
fetches it; one kept in git, one no stage outputs, one outside the repo or a repo whose lock cannot be read
gets none."""

from __future__ import annotations

import pytest
from helpers.dvc_lock import write_dvc_repo

from vlmgrid.dvc_outputs import or_pull, pull_hint


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = write_dvc_repo(tmp_path / "repo")
    monkeypatch.chdir(root)
    return root


@pytest.mark.parametrize(
    "missing, lock",
    [
        ("data/mme-fixture/manifest.json", "dvc.lock"),  # a file inside a tracked folder
        ("data/mme-fixture", "dvc.lock"),  # the tracked folder itself
        ("results/predictions/random/pope-fixture.parquet", "dvc.lock"),
        ("results/scores/random/pope-fixture.json", "dvc.lock"),
        ("data/models/clip-tiny/model.json", "dvc.lock"),  # a foreach stage's output (fetch_model@clip-tiny)
        ("data/.source-stamps/mme-fixture.json", "dvc.lock"),
        # a paper grid's pipeline: its stages run at the repo root (wdir: ../.., under `do:` for a foreach
        # stage)
        ("data/mme/records.parquet", "pipelines/paper/dvc.lock"),
        ("results/paper/scores/llava-1.5-7b/mme.json", "pipelines/paper/dvc.lock"),
        ("data/models/llava-1.5-7b", "pipelines/paper/dvc.lock"),
    ],
)
def test_a_tracked_path_gets_its_dvc_pull(repo, missing, lock):
    said = f"`dvc pull {missing}` fetches it (DVC tracks it: {lock})"
    assert pull_hint(missing) == said
    assert pull_hint(repo / missing) == said  # absolute or relative to the current folder alike
    assert (
        or_pull(repo / missing, "run `vlmgrid prepare` for it") == f"{said}, or run `vlmgrid prepare` for it"
    )


@pytest.mark.parametrize(
    "missing",
    [
        "results/metrics/pope-fixture.json",  # cache: false: kept in git, never pulled
        "results/paper/metrics/mme.json",
        "data/mme-fixture-extra/manifest.json",  # beside a tracked folder whose name it starts with
        "data/textvqa-fixture/manifest.json",  # no stage outputs it
        "data",  # a folder that holds outputs is not one
        "results/tables/main.csv",
    ],
)
def test_a_path_no_lock_caches_gets_none(repo, missing):
    assert pull_hint(missing) is None
    assert or_pull(missing, "rerun it") == "rerun it"


def test_outside_the_repo_or_without_one_none(repo, tmp_path, monkeypatch):
    assert pull_hint(tmp_path / "data" / "mme-fixture") is None  # outside the repo
    assert pull_hint("../data/mme-fixture") is None
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "data" / "mme-fixture").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # no .dvc folder here or above
    assert pull_hint("data/mme-fixture") is None


def test_a_dvc_file_is_not_a_repo(repo, monkeypatch):
    nested = repo / "sub"
    nested.mkdir()
    (nested / ".dvc").write_text("not a folder")
    for name in ("dvc.yaml", "dvc.lock"):
        (nested / name).write_text((repo / name).read_text())
    monkeypatch.chdir(nested)  # the repo is the folder above, whose lock does not name sub/data/mme-fixture
    assert pull_hint("data/mme-fixture") is None


def test_from_a_folder_inside_the_repo_the_paths_are_the_current_folders(repo, monkeypatch):
    (repo / "results").mkdir()
    monkeypatch.chdir(repo / "results")  # dvc pull reads its targets relative to the current folder
    assert (
        pull_hint("scores/m/b.json") == "`dvc pull scores/m/b.json` fetches it (DVC tracks it: ../dvc.lock)"
    )
    assert pull_hint(repo / "data" / "mme") == (
        "`dvc pull ../data/mme` fetches it (DVC tracks it: ../pipelines/paper/dvc.lock)"
    )


def test_a_path_that_needs_quoting_is_quoted(repo):
    (repo / "dvc.lock").write_text(
        (repo / "dvc.lock").read_text().replace("data/pope-fixture", "data/pope fixture")
    )
    assert pull_hint("data/pope fixture/x.json") == (
        "`dvc pull 'data/pope fixture/x.json'` fetches it (DVC tracks it: dvc.lock)"
    )


@pytest.mark.parametrize(
    "corrupt",
    [
        "stages: [unclosed\n",  # not YAML
        "- a list\n",  # YAML, not a lock
        "schema: '2.0'\nstages:\n  grid: [not, a, stage]\n",
        "schema: '2.0'\nstages:\n  grid:\n    outs: [just-a-path, {path: 7, md5: x}, {path: "
        "data/mme-fixture}]\n",  # no md5
        "\xff\xfe",  # not UTF-8
    ],
)
def test_a_corrupt_lock_gives_none_and_the_others_still_answer(repo, corrupt):
    (repo / "dvc.lock").write_bytes(corrupt.encode("latin-1"))
    assert pull_hint("data/mme-fixture") is None
    assert pull_hint("data/mme").endswith("(DVC tracks it: pipelines/paper/dvc.lock)")


def test_a_lock_whose_dvc_yaml_is_missing_or_corrupt_is_passed_over(repo):
    (repo / "dvc.yaml").unlink()  # its stages' wdir is unknown
    assert pull_hint("data/mme-fixture") is None
    (repo / "pipelines" / "paper" / "dvc.yaml").write_text("stages: {grid: [")
    assert pull_hint("data/mme") is None


def test_an_unreadable_lock_gives_none(repo):
    (repo / "dvc.lock").unlink()
    (repo / "dvc.lock").mkdir()  # a folder where the file should be
    assert pull_hint("data/mme-fixture") is None


def test_never_raises_on_an_odd_path(repo):
    assert pull_hint("data/mme-fixture/\0") is None
