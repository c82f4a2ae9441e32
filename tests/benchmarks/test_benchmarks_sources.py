"""Benchmark sources (local, url, hf_hub) with the network mocked, and the checks prepare makes on settings,
raw files and records."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import huggingface_hub
import pandas as pd
import pytest
import yaml
from helpers.sources import raw_fixture, with_kind
from huggingface_hub import errors as hub_errors
from huggingface_hub.hf_api import DatasetInfo

from vlmgrid.benchmarks import BENCHMARKS, Adapted, load_benchmark, sources, verify_benchmark
from vlmgrid.benchmarks.sources import hub as hub_source
from vlmgrid.benchmarks.sources import url as url_source
from vlmgrid.errors import VlmgridError
from vlmgrid.stages.prepare import prepare_benchmark


def hub_error(cls, message: str):
    """A huggingface_hub HTTP error as the library raises it (its constructor wants an HTTP response)."""
    try:
        import httpx2 as http
    except ImportError:  # older huggingface_hub versions
        import httpx as http  # type: ignore[no-redef]
    request = http.Request(
        "GET", "https://huggingface.co/datasets/lmms-lab/POPE/resolve/x/Full/random.parquet"
    )
    return cls(message, response=http.Response(403, request=request))


# ---------------------------------------------------------------------------------------------- local


def test_local_source_reads_raw_in_place_and_checks_the_real_count(tmp_path, monkeypatch):
    copy = raw_fixture("flowers102", tmp_path / "my-flowers")
    bench_dir = tmp_path / "data" / "flowers"
    settings = {"kind": "flowers102", "source": {"type": "local", "path": str(copy)}}
    with pytest.raises(
        VlmgridError, match=r"holds 20 flowers102 items, but the published benchmark has 6149"
    ):
        prepare_benchmark("flowers", settings, bench_dir)
    assert not (bench_dir / "manifest.json").exists()

    with_kind(monkeypatch, "flowers102", expected_count=20)
    manifest = prepare_benchmark("flowers", settings, bench_dir)
    assert not (bench_dir / "raw").exists()  # read in place, not copied
    raw_keys = {k for k in manifest["files"] if Path(k).is_absolute()}
    assert raw_keys == {str((copy / n).resolve()) for n in ("102flowers.tgz", "imagelabels.mat", "setid.mat")}
    assert manifest["source"] == {"type": "local", "path": str(copy)}
    assert len(load_benchmark(bench_dir).records) == 20

    (copy / "setid.mat").write_bytes((copy / "setid.mat").read_bytes() + b"x")
    with pytest.raises(VlmgridError, match=f"{(copy / 'setid.mat').resolve()}: does not match its manifest"):
        verify_benchmark(bench_dir)


def test_expected_items_in_the_source_sets_the_count_of_a_published_variant(tmp_path, monkeypatch):
    copy = raw_fixture("flowers102", tmp_path / "my-flowers")
    bench_dir = tmp_path / "data" / "flowers"

    def settings(**extra):
        return {"kind": "flowers102", "source": {"type": "local", "path": str(copy), **extra}}

    with pytest.raises(
        VlmgridError, match=r"holds 20 flowers102 items, but the source's `expected_items` is 21"
    ):
        prepare_benchmark("flowers", settings(expected_items=21), bench_dir)
    manifest = prepare_benchmark("flowers", settings(expected_items=20), bench_dir)
    assert manifest["n_items"] == manifest["expected_items"] == 20
    assert manifest["source"]["expected_items"] == 20
    records = (bench_dir / "records.parquet").stat().st_mtime_ns

    # A reused folder is counted again: the data stays, only the check (and the manifest) follow the source.
    with pytest.raises(
        VlmgridError, match=r"holds 20 flowers102 items, but the source's `expected_items` is 19"
    ):
        prepare_benchmark("flowers", settings(expected_items=19), bench_dir)
    with pytest.raises(
        VlmgridError, match=r"holds 20 flowers102 items, but the published benchmark has 6149"
    ):
        prepare_benchmark("flowers", settings(), bench_dir)
    assert prepare_benchmark("flowers", settings(expected_items=20), bench_dir)["expected_items"] == 20
    assert (bench_dir / "records.parquet").stat().st_mtime_ns == records
    # ... and so is a folder whose kind's published count changed since it was prepared.
    with_kind(monkeypatch, "flowers102", expected_count=20)
    assert prepare_benchmark("flowers", settings(), bench_dir)["expected_items"] == 20
    with_kind(monkeypatch, "flowers102", expected_count=25)
    with pytest.raises(VlmgridError, match=r"holds 20 flowers102 items, but the published benchmark has 25"):
        prepare_benchmark("flowers", settings(), bench_dir)
    assert (bench_dir / "records.parquet").stat().st_mtime_ns == records


@pytest.mark.parametrize("value", [0, -3, "8910", True, 2.5])
def test_expected_items_must_be_a_positive_whole_number(tmp_path, value):
    settings = {
        "kind": "flowers102",
        "source": {"type": "local", "path": str(tmp_path), "expected_items": value},
    }
    with pytest.raises(VlmgridError, match="`expected_items` must be a positive whole number"):
        prepare_benchmark("flowers", settings, tmp_path / "bench")


def test_a_fixture_source_needs_the_kinds_fixture_writer(tmp_path):
    from vlmgrid.benchmarks import (
        prepare_benchmark as prepare_folder,  # the benchmark folder alone, no fixtures
    )

    with pytest.raises(VlmgridError, match="a fixture source needs the pope fixture writer") as info:
        prepare_folder("pope", {"kind": "pope", "source": {"type": "fixture"}}, tmp_path / "pope")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "pope").exists()


def test_a_fixture_has_no_expected_items(tmp_path):
    settings = {"kind": "flowers102", "source": {"type": "fixture", "expected_items": 20}}
    with pytest.raises(VlmgridError, match="source key `expected_items` is not valid for a fixture source"):
        prepare_benchmark("flowers", settings, tmp_path / "bench")


def test_local_source_missing_raw_file_is_named(tmp_path):
    copy = raw_fixture("flowers102", tmp_path / "copy")
    (copy / "setid.mat").unlink()
    settings = {"kind": "flowers102", "source": {"type": "local", "path": str(copy)}}
    with pytest.raises(VlmgridError, match=r"copy/setid\.mat: missing"):
        prepare_benchmark("flowers", settings, tmp_path / "bench")
    with pytest.raises(VlmgridError, match="not a folder"):
        prepare_benchmark(
            "flowers",
            {"kind": "flowers102", "source": {"type": "local", "path": str(tmp_path / "nope")}},
            tmp_path / "b2",
        )


def test_unreadable_raw_file_is_named(tmp_path):
    copy = raw_fixture("pope", tmp_path / "pope-copy")
    broken = next((copy / "Full").glob("popular-*.parquet"))
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(VlmgridError, match=f"{broken}: not a readable parquet file"):
        prepare_benchmark(
            "pope", {"kind": "pope", "source": {"type": "local", "path": str(copy)}}, tmp_path / "bench"
        )


def test_local_scienceqa_and_pope_copies_are_adapted(tmp_path, monkeypatch):
    for kind, count in (("scienceqa_img", 20), ("pope", 30)):
        copy = raw_fixture(kind, tmp_path / f"{kind}-copy")
        with_kind(monkeypatch, kind, expected_count=count)
        manifest = prepare_benchmark(
            kind, {"kind": kind, "source": {"type": "local", "path": str(copy)}}, tmp_path / kind
        )
        assert manifest["n_items"] == manifest["expected_items"] == count
        assert sum(Path(k).is_absolute() for k in manifest["files"]) == (1 if kind == "scienceqa_img" else 3)


# ---------------------------------------------------------------------------------------------- url


def _serve(files: dict[str, bytes]):
    def fake_download(url: str, dest: Path) -> None:
        Path(dest).write_bytes(files[url.rsplit("/", 1)[1]])

    return fake_download


def test_url_source_rejects_a_wrong_md5(tmp_path, monkeypatch):
    calls = []

    def wrong_bytes(url, dest):
        calls.append(url)
        Path(dest).write_bytes(b"<html>moved</html>")

    monkeypatch.setattr(url_source, "download_url", wrong_bytes)
    bench_dir = tmp_path / "flowers"
    with pytest.raises(
        VlmgridError,
        match=r"102flowers\.tgz: the download from https://www\.robots\.ox\.ac\.uk/.*has md5 .* expected "
        r"52808999861908f626f3c1f4e79d11fa",
    ):
        prepare_benchmark("flowers", {"kind": "flowers102", "source": {"type": "url"}}, bench_dir)
    assert calls == ["https://www.robots.ox.ac.uk/~vgg/data/flowers/102/102flowers.tgz"]
    assert not (bench_dir / "raw" / "102flowers.tgz").exists()
    assert not (bench_dir / "manifest.json").exists()


def test_url_source_downloads_verifies_and_prepares(tmp_path, monkeypatch):
    served = {p.name: p.read_bytes() for p in raw_fixture("flowers102", tmp_path / "server").iterdir()}
    files = [
        {
            "url": f"https://example.org/flowers/{name}",
            "sha256": hashlib.sha256(data).hexdigest(),
            "name": name,
        }
        if name.endswith(".tgz")
        else {
            "url": f"https://example.org/flowers/{name}",
            "md5": hashlib.md5(data).hexdigest(),
            "name": name,
        }
        for name, data in sorted(served.items())
    ]
    monkeypatch.setattr(url_source, "download_url", _serve(served))
    with_kind(monkeypatch, "flowers102", expected_count=20)
    bench_dir = tmp_path / "flowers"
    settings = {"kind": "flowers102", "source": {"type": "url", "files": files}}
    manifest = prepare_benchmark("flowers", settings, bench_dir)
    assert {k for k in manifest["files"] if k.startswith("raw/")} == {f"raw/{n}" for n in served}
    assert manifest["n_items"] == 20

    def no_network(url, dest):
        raise AssertionError("an unchanged prepare must not download")

    monkeypatch.setattr(url_source, "download_url", no_network)
    assert prepare_benchmark("flowers", settings, bench_dir) == manifest


def test_url_network_error_is_one_sentence(tmp_path, monkeypatch):
    import requests

    def offline(url, dest):
        raise requests.ConnectionError("Name or service not known")

    monkeypatch.setattr(url_source, "download_url", offline)
    with pytest.raises(VlmgridError, match="could not download .*point a `local` source at it"):
        prepare_benchmark("flowers", {"kind": "flowers102", "source": {"type": "url"}}, tmp_path / "f")


# ---------------------------------------------------------------------------------------------- hf_hub

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _fake_hub(monkeypatch, repo_files: dict[str, bytes], calls: list, commit: str = COMMIT):
    """A hub whose every revision names `commit` (HfApi.dataset_info is mocked, as are listing and
    download)."""
    listing = {path: hashlib.sha256(data).hexdigest() for path, data in repo_files.items()}

    def fake_info(self, repo_id, *, revision=None, **kwargs):
        calls.append(("info", repo_id, revision))
        return DatasetInfo(id=repo_id, sha=commit, private=False, downloads=0, likes=0, tags=[])

    def fake_listing(repo, revision, folders):
        calls.append(("list", repo, revision, tuple(sorted(folders))))
        return dict(listing)

    def fake_download(repo_id, filename, *, repo_type=None, revision=None, local_dir=None, **kwargs):
        calls.append(("download", repo_id, filename, repo_type, revision))
        dest = Path(local_dir) / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(repo_files[filename])
        bookkeeping = Path(local_dir) / ".cache" / "huggingface" / "download" / f"{filename}.metadata"
        bookkeeping.parent.mkdir(parents=True, exist_ok=True)
        bookkeeping.write_text("commit\netag\n1700000000.0\n")
        return str(dest)

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", fake_info)
    monkeypatch.setattr(hub_source, "hub_listing", fake_listing)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)


def test_hf_hub_source_downloads_the_kinds_files_at_the_resolved_commit(tmp_path, monkeypatch, caplog):
    copy = raw_fixture("pope", tmp_path / "hub")
    repo_files = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*.parquet")}
    repo_files["data/test-00000-of-00003.parquet"] = b"the default config, not read"
    repo_files["README.md"] = b"card"
    calls: list = []
    _fake_hub(monkeypatch, repo_files, calls)
    with_kind(monkeypatch, "pope", expected_count=30)
    bench_dir = tmp_path / "pope"
    settings = {"kind": "pope", "source": {"type": "hf_hub", "revision": "v1.0", "config": "Full"}}
    with caplog.at_level(logging.WARNING, logger="vlmgrid.benchmarks.sources"):
        manifest = prepare_benchmark("pope", settings, bench_dir)
    # The tag is resolved once; the listing and every download read that commit, not the tag.
    assert calls[:2] == [("info", "lmms-lab/POPE", "v1.0"), ("list", "lmms-lab/POPE", COMMIT, ("Full",))]
    downloaded = sorted(c[2] for c in calls if c[0] == "download")
    assert downloaded == sorted(p for p in repo_files if p.startswith("Full/"))
    assert all(c[3] == "dataset" and c[4] == COMMIT for c in calls if c[0] == "download")
    assert not (bench_dir / "raw" / ".cache").exists()
    assert manifest["n_items"] == 30 and len(load_benchmark(bench_dir).records) == 30
    assert manifest["source"]["revision"] == "v1.0" and manifest["resolved_revision"] == COMMIT
    assert json.loads((bench_dir / "manifest.json").read_text())["resolved_revision"] == COMMIT
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "revision 'v1.0' of lmms-lab/POPE is not a commit, so the data is not pinned" in warnings[0]
    assert f"set `revision: {COMMIT}`" in warnings[0]


def test_hf_hub_commit_revision_is_recorded_without_a_warning(tmp_path, monkeypatch, caplog):
    copy = raw_fixture("scienceqa_img", tmp_path / "hub")
    repo_files = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*.parquet")}
    calls: list = []
    _fake_hub(monkeypatch, repo_files, calls)
    with_kind(monkeypatch, "scienceqa_img", expected_count=20)
    settings = {"kind": "scienceqa_img", "source": {"type": "hf_hub", "revision": COMMIT}}
    with caplog.at_level(logging.WARNING, logger="vlmgrid.benchmarks.sources"):
        manifest = prepare_benchmark("sqa", settings, tmp_path / "sqa")
    assert manifest["resolved_revision"] == COMMIT
    assert calls[0] == ("info", "lmms-lab/ScienceQA", COMMIT)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_non_hub_sources_record_no_resolved_revision(tmp_path):
    manifest = prepare_benchmark("pope", {"kind": "pope", "source": {"type": "fixture"}}, tmp_path / "pope")
    assert "resolved_revision" in manifest and manifest["resolved_revision"] is None


def test_hf_hub_download_not_matching_the_hub_sha256_is_an_error(tmp_path, monkeypatch):
    copy = raw_fixture("scienceqa_img", tmp_path / "hub")
    repo_files = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*.parquet")}
    calls: list = []
    _fake_hub(monkeypatch, repo_files, calls)
    real_download = huggingface_hub.hf_hub_download

    def damaged(*args, **kwargs):
        path = Path(real_download(*args, **kwargs))
        path.write_bytes(path.read_bytes()[:-10])
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", damaged)
    settings = {
        "kind": "scienceqa_img",
        "source": {"type": "hf_hub", "revision": "v1", "repo": "me/ScienceQA"},
    }
    with pytest.raises(
        VlmgridError,
        match=r"test-00000-of-00001\.parquet: the download .* from me/ScienceQA@v1 does not match the hub's "
        r"sha256",
    ):
        prepare_benchmark("sqa", settings, tmp_path / "sqa")


def test_hf_hub_gated_download_says_how_to_fix_it(tmp_path, monkeypatch):
    calls: list = []
    _fake_hub(monkeypatch, {"ScienceQA-IMG/test-00000-of-00001.parquet": b"x"}, calls)

    def gated(*args, **kwargs):
        raise hub_error(hub_errors.GatedRepoError, "403 Client Error: cannot access gated repo")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", gated)
    settings = {
        "kind": "scienceqa_img",
        "source": {"type": "hf_hub", "revision": "df59f11e9fd34bc02e24b4d5314bb1c86dcd21c0"},
    }
    with pytest.raises(VlmgridError) as info:
        prepare_benchmark("sqa", settings, tmp_path / "sqa")
    message = str(info.value)
    assert "lmms-lab/ScienceQA is gated" in message
    assert (
        "https://huggingface.co/datasets/lmms-lab/ScienceQA" in message
        and "HF_TOKEN" in message
        and "`local` source" in message
    )
    assert "\n" not in message


@pytest.mark.parametrize("failing", ["dataset_info", "list_repo_tree"])
def test_hf_hub_gated_listing_and_other_hub_errors(tmp_path, monkeypatch, failing):
    """The commit lookup and the listing both turn hub failures into one-sentence errors."""
    settings = {"kind": "pope", "source": {"type": "hf_hub", "revision": "abc"}}
    monkeypatch.setattr(
        huggingface_hub.HfApi,
        "dataset_info",
        lambda self, repo_id, **kwargs: DatasetInfo(
            id=repo_id, sha=COMMIT, private=False, downloads=0, likes=0, tags=[]
        ),
    )
    cases = [
        (hub_error(hub_errors.GatedRepoError, "gated"), "is gated; accept its licence"),
        (hub_error(hub_errors.RevisionNotFoundError, "no rev"), "revision 'abc' does not exist"),
        (
            hub_error(hub_errors.RepositoryNotFoundError, "404"),
            "was not found or this account may not read it",
        ),
        (ConnectionError("Network is unreachable"), "cannot reach the Hugging Face hub"),
    ]
    for error, expected in cases:

        def raising(self, *args, _error=error, **kwargs):
            raise _error

        monkeypatch.setattr(huggingface_hub.HfApi, failing, raising)
        with pytest.raises(VlmgridError, match=expected) as info:
            prepare_benchmark("pope", settings, tmp_path / "pope")
        assert "\n" not in str(info.value)


def test_hf_hub_layout_mismatch_names_the_pattern(tmp_path, monkeypatch):
    _fake_hub(monkeypatch, {"Full/random-00000-of-00001.parquet": b"x"}, [])
    with pytest.raises(VlmgridError, match=r"no file matching Full/popular-\*\.parquet"):
        prepare_benchmark(
            "pope", {"kind": "pope", "source": {"type": "hf_hub", "revision": "abc"}}, tmp_path / "p"
        )


def test_carpe_grid_reads_the_kinds_pinned_copies():
    """config/carpe.yaml holds CARPE's 11 benchmarks, each hub source exactly its kind's known-good pin."""
    from helpers.common import REPO

    grid = yaml.safe_load((REPO / "config" / "carpe.yaml").read_text())
    entries = grid["benchmarks"]
    assert sorted(entries[name]["kind"] for name in grid["grid"]["benchmarks"]) == sorted(
        [
            "imagenet",
            "caltech101",
            "flowers102",
            "food101",
            "scienceqa_img",
            "textvqa",
            "pope",
            "mme",
            "mmbench",
            "cvbench",
            "mmvp",
        ]
    )
    for name, entry in entries.items():
        kind = BENCHMARKS.get(entry["kind"])
        source = sources.check_source(kind, entry["source"], name)
        assert source["type"] != "fixture", name
        if source["type"] == "hf_hub":
            assert source == kind.default_source, name
            assert hub_source.COMMIT_SHA.fullmatch(source["revision"]), name


# ---------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"source": {"type": "fixture"}}, "`kind` is missing"),
        ({"kind": "pope"}, "`source` is missing"),
        ({"kind": "flowers"}, 'did you mean "flowers102"'),
        (
            {"kind": "pope", "source": {"type": "fixtures"}},
            "source type 'fixtures' is unknown \\(did you mean \"fixture\"\\?\\)",
        ),
        (
            {"kind": "pope", "source": {"type": "fixture", "sizes": 3}},
            'source key `sizes` is not valid .* \\(did you mean "size"\\?\\)',
        ),
        ({"kind": "pope", "source": {"type": "fixture", "classes": 3}}, "source key `classes` is not valid"),
        ({"kind": "pope", "source": {"type": "fixture", "size": 0}}, "`size` must be an integer >= 1"),
        (
            {"kind": "pope", "source": {"type": "hf_hub"}},
            "`revision` is required .*revision: 4db1276663dfa5eb8ad16a52d24c31a09e470896",
        ),
        (
            {"kind": "pope", "source": {"type": "hf_hub", "revision": "a", "config": "default"}},
            "`config: default` is not supported",
        ),
        ({"kind": "flowers102", "source": {"type": "hf_hub", "revision": "a"}}, "flowers102 has no hub copy"),
        ({"kind": "pope", "source": {"type": "url"}}, "pope has no published URL list"),
        (
            {"kind": "flowers102", "source": {"type": "url", "files": [{"url": "https://x/a", "name": "a"}]}},
            "`md5` or `sha256`",
        ),
        (
            {
                "kind": "flowers102",
                "source": {"type": "url", "files": [{"url": "https://x/a", "md5": "0", "name": "../a"}]},
            },
            "must be a relative path",
        ),
        ({"kind": "pope", "source": {"type": "local"}}, "`path` is required"),
    ],
)
def test_bad_settings_are_one_sentence_errors(settings, expected, tmp_path):
    with pytest.raises(VlmgridError, match=expected) as info:
        prepare_benchmark("bench", settings, tmp_path / "bench")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "bench" / "manifest.json").exists()


# ---------------------------------------------------------------------------------------------- records


def _adapter_giving(records: pd.DataFrame, classes=None):
    def adapt(raw_dir, bench_dir):
        return Adapted(records=records.copy(), classes=classes)

    return adapt


def _record(id_, options, answer, index, **extra):
    return {
        "id": id_,
        "image": None,
        "question": "q",
        "options": options,
        "answer": answer,
        "answer_index": index,
        **extra,
    }


@pytest.mark.parametrize(
    "kind, rows, expected",
    [
        (
            "pope",
            [_record("a-1", ["yes", "no"], "yes", 0), _record("a-1", ["yes", "no"], "no", 1)],
            "item id 'a-1' appears 2 times",
        ),
        (
            "pope",
            [_record("a-1", ["yes", "no", "maybe"], "yes", 0)],
            "yes/no items must have \\['yes', 'no'\\]",
        ),
        ("scienceqa_img", [_record("t-0", ["only"], "only", 0)], "multiple-choice items need at least 2"),
        ("scienceqa_img", [_record("t-0", ["a", "b"], "b", 2)], "answer_index 2, outside 0..1"),
        ("scienceqa_img", [_record("t-0", ["a", "b"], "a", 1)], "answer 'a' is not option 1"),
    ],
)
def test_records_are_validated_before_writing(kind, rows, expected, tmp_path, monkeypatch):
    with_kind(monkeypatch, kind, adapt=_adapter_giving(pd.DataFrame(rows)))
    bench_dir = tmp_path / kind
    with pytest.raises(VlmgridError, match=expected):
        prepare_benchmark(kind, {"kind": kind, "source": {"type": "fixture"}}, bench_dir)
    assert not (bench_dir / "records.parquet").exists() and not (bench_dir / "manifest.json").exists()


def test_classification_answer_index_is_checked_against_classes(tmp_path, monkeypatch):
    rows = [_record("image_00001", [], "rose", 3)]
    with_kind(
        monkeypatch, "flowers102", adapt=_adapter_giving(pd.DataFrame(rows), classes=["a", "b", "rose"])
    )
    with pytest.raises(VlmgridError, match="answer_index 3, outside 0..2"):
        prepare_benchmark("f", {"kind": "flowers102", "source": {"type": "fixture"}}, tmp_path / "f")


def test_interrupted_prepare_leaves_no_manifest_and_recovers(tmp_path, monkeypatch):
    kind = BENCHMARKS.get("pope")
    bench_dir = tmp_path / "pope"

    def crash(raw_dir, bench_dir_):
        kind.adapt(raw_dir, bench_dir_)
        raise KeyboardInterrupt

    with_kind(monkeypatch, "pope", adapt=crash)
    with pytest.raises(KeyboardInterrupt):
        prepare_benchmark("pope", {"kind": "pope", "source": {"type": "fixture"}}, bench_dir)
    assert (bench_dir / "images").is_dir() and not (bench_dir / "manifest.json").exists()
    with pytest.raises(VlmgridError, match="manifest.json: missing"):
        load_benchmark(bench_dir)
    monkeypatch.setitem(BENCHMARKS._items, "pope", kind)
    manifest = prepare_benchmark("pope", {"kind": "pope", "source": {"type": "fixture"}}, bench_dir)
    assert manifest["n_items"] == 30
    verify_benchmark(bench_dir)
    shutil.rmtree(bench_dir)


def test_local_source_inside_the_benchmark_folder_is_never_deleted(tmp_path, monkeypatch):
    bench_dir = tmp_path / "data" / "sqa"
    raw_fixture("scienceqa_img", bench_dir / "raw")
    with_kind(monkeypatch, "scienceqa_img", expected_count=20)
    prepare_benchmark(
        "sqa", {"kind": "scienceqa_img", "source": {"type": "fixture", "size": 5}}, tmp_path / "other"
    )
    (bench_dir / "manifest.json").write_text(
        (tmp_path / "other" / "manifest.json").read_text()
    )  # older settings
    manifest = prepare_benchmark(
        "sqa",
        {"kind": "scienceqa_img", "source": {"type": "local", "path": str(bench_dir / "raw")}},
        bench_dir,
    )
    assert manifest["n_items"] == 20
    assert (bench_dir / "raw" / "ScienceQA-IMG" / "test-00000-of-00001.parquet").is_file()
