"""Benchmarks: fixtures in each kind's real raw format -> prepare -> records/classes/manifest, and the
manifest's guarantees (determinism, nothing rewritten when unchanged, tampering detected, rebuild on
change)."""

from __future__ import annotations

import hashlib
import json
import tarfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.io
from helpers.chain import opens
from helpers.dvc_lock import write_dvc_repo

import vlmgrid
from vlmgrid.benchmarks import BENCHMARKS, SOURCE_TYPES, flowers102, load_benchmark, pope, verify_benchmark
from vlmgrid.benchmarks.dataset import fingerprint
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures import drawing as fx
from vlmgrid.stages.prepare import prepare_benchmark

KINDS = ("flowers102", "pope", "scienceqa_img")
# Items a default fixture yields: flowers 5 classes x 4 test images, POPE 3 splits x 10, ScienceQA 20.
DEFAULT_COUNTS = {"flowers102": 20, "pope": 30, "scienceqa_img": 20}


def fixture_settings(kind: str, **source) -> dict:
    return {"kind": kind, "source": {"type": "fixture", **source}}


def prepare(kind: str, bench_dir: Path, **source) -> dict:
    return prepare_benchmark(f"{kind}-fixture", fixture_settings(kind, **source), bench_dir)


def files_on_disk(bench_dir: Path) -> dict[str, int]:
    return {
        p.relative_to(bench_dir).as_posix(): p.stat().st_mtime_ns
        for p in sorted(bench_dir.rglob("*"))
        if p.is_file()
    }


ALL_KINDS = KINDS + (
    "caltech101",
    "cvbench",
    "cvqa",
    "dance",
    "food101",
    "imagenet",
    "imagenet_ilsvrc2012",
    "kaleidoscope",
    "mmbench",
    "mme",
    "mmvp",
    "pope_coco",
    "textvqa",
)


def test_kinds_are_registered_with_their_protocol_metric_and_source():
    assert list(BENCHMARKS) == sorted(ALL_KINDS)
    assert SOURCE_TYPES == ("fixture", "url", "hf_hub", "local")
    flowers, pope_kind, sqa = (BENCHMARKS.get(k) for k in KINDS)
    assert (flowers.protocol, flowers.metric, flowers.breakdown_by) == (
        "classification",
        "classification",
        (),
    )
    assert flowers.templates == ("a photo of a {c}, a type of flower.",)
    assert (pope_kind.protocol, pope_kind.metric, pope_kind.breakdown_by) == ("yes_no", "pope", ("split",))
    assert (sqa.protocol, sqa.metric, sqa.breakdown_by) == ("multiple_choice", "accuracy", ("subject",))
    assert [k.expected_count for k in (flowers, pope_kind, sqa)] == [6149, 9000, 2017]
    assert [f["md5"] for f in flowers.url_files] == [
        "52808999861908f626f3c1f4e79d11fa",
        "e0620be6f572b9609742df49c70aed4d",
        "a5357ecc9cb78c4bef273ce3793fc85c",
    ]
    assert (
        pope_kind.default_source["repo"] == "lmms-lab/POPE"
        and len(pope_kind.default_source["revision"]) == 40
    )
    assert sqa.default_source["repo"] == "lmms-lab/ScienceQA"
    assert all(k.description and "\n" not in k.description for k in (flowers, pope_kind, sqa))
    with pytest.raises(VlmgridError, match='did you mean "pope"'):
        BENCHMARKS.get("poppe")


def test_every_kind_has_a_fixture_and_a_record_shape_that_fits_its_protocol():
    from vlmgrid.benchmarks import shapes
    from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES

    assert BENCHMARK_FIXTURES.names() == BENCHMARKS.names()
    assert all(
        {"seed", "size", "corrupt"} <= set(BENCHMARK_FIXTURES.get(name).defaults) for name in BENCHMARKS
    )
    for name, kind in BENCHMARKS.items():
        assert kind.shape.has_classes == (kind.protocol == "classification"), name
        assert ("classes" in BENCHMARK_FIXTURES.get(name).defaults) == kind.shape.has_classes, name
    by_protocol = {"yes_no": shapes.YES_NO, "short_answer": shapes.SHORT_ANSWER, "ranking": shapes.RANKING}
    assert all(
        kind.shape is by_protocol.get(kind.protocol, kind.shape)
        for kind in (BENCHMARKS.get(n) for n in BENCHMARKS)
    )


def test_flowers_classnames_are_clips_102():
    names = flowers102.classnames()
    assert len(names) == 102 == len(set(names))
    assert names[:3] == ["pink primrose", "hard-leaved pocket orchid", "canterbury bells"]
    assert names[-1] == "blackberry lily" and names[59] == "pink and yellow dahlia"


@pytest.mark.parametrize("kind", KINDS)
def test_fixture_prepare_writes_canonical_records(kind, tmp_path):
    bench_dir = tmp_path / "data" / kind
    manifest = prepare(kind, bench_dir)
    schema = pq.read_schema(bench_dir / "records.parquet")
    expected_types = {
        "id": pa.string(),
        "image": pa.string(),
        "question": pa.string(),
        "options": pa.list_(pa.string()),
        "answer": pa.string(),
        "answer_index": pa.int64(),
    }
    assert schema.names[:6] == list(expected_types)
    for name, type_ in expected_types.items():
        assert schema.field(name).type == type_, name

    bench = load_benchmark(bench_dir)
    records = bench.records
    assert bench.kind is BENCHMARKS.get(kind) and bench.root == bench_dir and bench.name == f"{kind}-fixture"
    assert len(records) == DEFAULT_COUNTS[kind] == manifest["n_items"]
    assert records["id"].is_unique
    for row in records.itertuples():
        assert (bench_dir / row.image).is_file()
        assert opens(bench_dir / row.image), row.image
        labels = bench.classes if kind == "flowers102" else list(row.options)
        assert labels[row.answer_index] == row.answer

    assert manifest["kind"] == kind and manifest["benchmark"] == f"{kind}-fixture"
    assert manifest["source"] == {"type": "fixture"}
    assert manifest["vlmgrid_version"] == vlmgrid.__version__
    on_disk = set(files_on_disk(bench_dir)) - {"manifest.json", ".prepare-written.json"}
    assert set(manifest["files"]) == on_disk
    assert "records.parquet" in on_disk and any(p.startswith("raw/") for p in on_disk)
    assert {f"images/{Path(p).relative_to('images').as_posix()}" for p in records["image"]} <= on_disk
    assert manifest["fingerprint"] == fingerprint(manifest["files"])
    assert json.loads((bench_dir / "manifest.json").read_text()) == manifest
    verify_benchmark(bench_dir)


def test_flowers_fixture_is_the_published_layout_and_records_the_test_split(tmp_path):
    bench_dir = tmp_path / "flowers"
    prepare("flowers102", bench_dir, size=3, classes=4)
    labels = scipy.io.loadmat(bench_dir / "raw/imagelabels.mat")["labels"]
    setid = scipy.io.loadmat(bench_dir / "raw/setid.mat")
    assert labels.shape == (1, 4 * (3 + 2)) and labels.min() == 1 and labels.max() == 4
    assert {k for k in setid if not k.startswith("__")} == {"trnid", "valid", "tstid"}
    assert [setid[k].shape for k in ("trnid", "valid", "tstid")] == [(1, 4), (1, 4), (1, 12)]
    with tarfile.open(bench_dir / "raw/102flowers.tgz") as tar:
        names = [m.name for m in tar if m.isfile()]
    assert names == [f"jpg/image_{i:05d}.jpg" for i in range(1, 21)]

    bench = load_benchmark(bench_dir)
    assert bench.classes == flowers102.classnames()[:4]
    assert json.loads((bench_dir / "classes.json").read_text()) == bench.classes
    test_ids = [int(i) for i in setid["tstid"].ravel()]
    assert list(bench.records["id"]) == [f"image_{i:05d}" for i in test_ids]
    assert list(bench.records["image"]) == [f"images/jpg/image_{i:05d}.jpg" for i in test_ids]
    assert list(bench.records["answer_index"]) == [int(labels[0, i - 1]) - 1 for i in test_ids]
    assert (bench.records["question"] == "").all() and bench.records["options"].map(len).eq(0).all()
    assert Counter(bench.records["answer_index"]) == {0: 3, 1: 3, 2: 3, 3: 3}
    # Only the test split is extracted.
    assert len(list((bench_dir / "images/jpg").iterdir())) == 12


def _raw_pope(bench_dir: Path) -> dict[str, pd.DataFrame]:
    return {
        split: pd.read_parquet(next((bench_dir / "raw/Full").glob(f"{split}-*.parquet")))
        for split in pope.SPLITS
    }


def test_pope_fixture_is_the_hub_layout_with_balanced_splits(tmp_path):
    bench_dir = tmp_path / "pope"
    prepare("pope", bench_dir, size=12)
    raw = _raw_pope(bench_dir)
    for frame in raw.values():
        assert list(frame.columns) == [
            "id",
            "question_id",
            "question",
            "answer",
            "image_source",
            "image",
            "category",
        ]
        assert list(frame["question_id"]) == [str(i) for i in range(1, 13)]  # restarts per split
        assert Counter(frame["answer"]) == {"yes": 6, "no": 6}
        assert frame["question"].str.fullmatch(r"Is there a [a-z ]+ in the image\?").all()
        assert set(frame["image"].map(lambda im: bytes(im["bytes"][:2]))) == {b"\xff\xd8"}
    assert pq.read_schema(next((bench_dir / "raw/Full").glob("random-*.parquet"))).metadata[b"huggingface"]

    bench = load_benchmark(bench_dir)
    records = bench.records
    assert list(records["id"][:2]) == ["random-1", "random-2"] and records["id"].is_unique
    assert list(records["split"].unique()) == ["random", "popular", "adversarial"]
    assert all(list(options) == ["yes", "no"] for options in records["options"])
    assert records.groupby("split")["answer"].apply(lambda a: (a == "yes").sum()).eq(6).all()
    # Images are shared across questions and splits: one file per distinct image.
    assert records["image"].nunique() == len(list((bench_dir / "images").iterdir())) == 2


def test_pope_negatives_follow_the_three_settings(tmp_path):
    bench_dir = tmp_path / "pope"
    prepare("pope", bench_dir, size=60, seed=3)
    raw = _raw_pope(bench_dir)
    first = raw["random"]
    objects_of = {}
    for frame in raw.values():
        for row in frame[frame["answer"] == "yes"].itertuples():
            objects_of.setdefault(row.image_source, set()).add(row.question.split("a ", 1)[1].split(" in")[0])
    freq = Counter(o for objs in objects_of.values() for o in objs)
    asked = lambda frame: {  # noqa: E731
        src: {q.split("a ", 1)[1].split(" in")[0] for q in g["question"]}
        for src, g in frame[frame["answer"] == "no"].groupby("image_source")
    }
    for src, negatives in asked(raw["popular"]).items():
        absent = [o for o in freq.keys() | set(fx.SHAPES) if o not in objects_of[src]]
        cutoff = min(freq[o] for o in negatives)
        assert all(freq[o] <= cutoff for o in absent if o not in negatives), src
    cooc = Counter()
    for objs in objects_of.values():
        for a in objs:
            for b in objs - {a}:
                cooc[(a, b)] += 1
    for src, negatives in asked(raw["adversarial"]).items():
        score = lambda o, src=src: sum(cooc[(o, p)] for p in objects_of[src])  # noqa: E731
        absent = [o for o in fx.SHAPES if o not in objects_of[src]]
        assert min(score(o) for o in negatives) >= max(score(o) for o in absent if o not in negatives)
    assert asked(raw["popular"]) != asked(first) or asked(raw["adversarial"]) != asked(first)


def test_scienceqa_fixture_is_the_hub_layout_with_four_choices(tmp_path):
    bench_dir = tmp_path / "sqa"
    prepare("scienceqa_img", bench_dir, size=12)
    raw = pd.read_parquet(bench_dir / "raw/ScienceQA-IMG/test-00000-of-00001.parquet")
    assert list(raw.columns) == [
        "image",
        "question",
        "choices",
        "answer",
        "hint",
        "task",
        "grade",
        "subject",
        "topic",
        "category",
        "skill",
        "lecture",
        "solution",
    ]
    assert raw["choices"].map(len).eq(4).all() and raw["answer"].between(0, 3).all()
    bench = load_benchmark(bench_dir)
    records = bench.records
    assert list(records["id"]) == [f"test-{i}" for i in range(12)]
    assert list(records["question"]) == list(raw["question"])
    assert list(records["answer_index"]) == list(raw["answer"])
    assert list(records["hint"]) == list(raw["hint"]) and set(records["hint"]) == {"", "Look at the picture."}
    assert set(records["subject"]) == {"natural science", "social science", "language science"}
    assert {"grade", "topic", "skill"} <= set(records.columns)
    assert records["image"].str.fullmatch(r"images/[0-9a-f]{64}\.png").all()
    for rel in records["image"]:
        assert (
            hashlib.sha256((bench_dir / rel).read_bytes()).hexdigest() == Path(rel).stem
        )  # named by content


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_fingerprint_other_seed_differs(kind, tmp_path, monkeypatch):
    one = prepare(kind, tmp_path / "a" / kind, seed=7, size=4)
    with monkeypatch.context() as later:  # another day: no timestamp may leak into the raw files
        later.setattr(time, "time", lambda: 4102444800.0)
        later.setattr(time, "asctime", lambda *args: "Fri Jan  1 00:00:00 2100")
        two = prepare(kind, tmp_path / "b" / "elsewhere", seed=7, size=4)
    assert one["files"] == two["files"] and one["fingerprint"] == two["fingerprint"]
    other = prepare(kind, tmp_path / "c" / kind, seed=8, size=4)
    assert other["fingerprint"] != one["fingerprint"]


@pytest.mark.parametrize("kind", KINDS)
def test_reprepare_unchanged_rewrites_nothing(kind, tmp_path):
    bench_dir = tmp_path / kind
    first = prepare(kind, bench_dir)
    before = files_on_disk(bench_dir)
    again = prepare(kind, bench_dir)
    assert again == first
    assert files_on_disk(bench_dir) == before


def test_rename_only_rewrites_the_manifest(tmp_path):
    bench_dir = tmp_path / "pope"
    prepare("pope", bench_dir)
    before = files_on_disk(bench_dir)
    renamed = prepare_benchmark("pope-small", fixture_settings("pope"), bench_dir)
    assert renamed["benchmark"] == "pope-small"
    after = files_on_disk(bench_dir)
    assert {k: v for k, v in after.items() if k != "manifest.json"} == {
        k: v for k, v in before.items() if k != "manifest.json"
    }


@pytest.mark.parametrize("kind", KINDS)
def test_tampered_image_is_named_and_never_silently_rebuilt(kind, tmp_path):
    bench_dir = tmp_path / "data" / kind
    prepare(kind, bench_dir)
    image = bench_dir / load_benchmark(bench_dir).records["image"].iloc[0]
    image.write_bytes(image.read_bytes() + b"tampered")
    rel = image.relative_to(tmp_path)
    with pytest.raises(VlmgridError, match="does not match its manifest") as info:
        prepare(kind, bench_dir)
    assert str(rel) in str(info.value) and f"delete {bench_dir}" in str(info.value)
    assert image.read_bytes().endswith(b"tampered")  # nothing was rebuilt
    with pytest.raises(VlmgridError, match=str(rel)):
        verify_benchmark(bench_dir)
    verify_benchmark(bench_dir, full=False)  # presence only: still passes


def test_missing_file_and_missing_manifest_are_named(tmp_path):
    bench_dir = tmp_path / "sqa"
    prepare("scienceqa_img", bench_dir)
    victim = bench_dir / load_benchmark(bench_dir).records["image"].iloc[3]
    victim.unlink()
    with pytest.raises(VlmgridError, match=f"{victim}: missing"):
        verify_benchmark(bench_dir, full=False)
    with pytest.raises(VlmgridError, match=f"{victim}: missing"):
        load_benchmark(bench_dir)
    (bench_dir / "manifest.json").unlink()
    with pytest.raises(VlmgridError, match="manifest.json: missing"):
        load_benchmark(bench_dir)


@pytest.mark.parametrize(
    "bench, pull",
    [
        ("pope-fixture", "`dvc pull data/pope-fixture` fetches it (DVC tracks it: dvc.lock), or "),
        ("textvqa-fixture", ""),  # a folder no dvc.lock records: recompute it, nothing to pull
    ],
)
def test_a_missing_prepared_benchmark_says_dvc_pull_when_dvc_tracks_it(tmp_path, monkeypatch, bench, pull):
    monkeypatch.chdir(write_dvc_repo(tmp_path))
    bench_dir = tmp_path / "data" / bench
    with pytest.raises(VlmgridError) as caught:
        load_benchmark(bench_dir)
    assert str(caught.value) == (
        f"{bench_dir / 'manifest.json'}: missing, so {bench_dir} is not a prepared benchmark "
        f"(or its prepare was interrupted); {pull}run `vlmgrid prepare` for it"
    )
    prepare("pope", bench_dir)
    victim = bench_dir / load_benchmark(bench_dir).records["image"].iloc[3]
    victim.unlink()
    with pytest.raises(VlmgridError) as caught:
        verify_benchmark(bench_dir, full=False)
    pull = pull and f"`dvc pull {victim.relative_to(tmp_path)}` fetches it (DVC tracks it: dvc.lock), or "
    assert str(caught.value) == (
        f"{victim}: missing (it is listed in {bench_dir / 'manifest.json'}); {pull}restore "
        f"it, or delete {bench_dir} and run prepare again"
    )


def test_tampered_records_fail_even_the_quick_check(tmp_path):
    bench_dir = tmp_path / "pope"
    prepare("pope", bench_dir)
    records = pd.read_parquet(bench_dir / "records.parquet")
    records.loc[0, "answer"] = "no" if records.loc[0, "answer"] == "yes" else "yes"
    records.to_parquet(bench_dir / "records.parquet")
    with pytest.raises(VlmgridError, match="records.parquet: does not match its manifest"):
        load_benchmark(bench_dir)


@pytest.mark.parametrize("kind", KINDS)
def test_changed_settings_rebuild_from_scratch(kind, tmp_path):
    bench_dir = tmp_path / kind
    first = prepare(kind, bench_dir, size=4)
    strays = [bench_dir / "images" / "stale.jpg", bench_dir / "raw" / "stale.parquet"]
    for stray in strays:
        stray.write_bytes(b"left over")
    # files that no prepare wrote are never removed: they are named, and kept
    with pytest.raises(VlmgridError, match=f"^{strays[0]}: .* prepare did not write this file"):
        prepare(kind, bench_dir, size=2, seed=1)
    assert all(stray.read_bytes() == b"left over" for stray in strays)
    strays[0].unlink()
    with pytest.raises(VlmgridError, match=f"^{strays[1]}: .* prepare did not write this file"):
        prepare(kind, bench_dir, size=2, seed=1)
    strays[1].unlink()
    second = prepare(kind, bench_dir, size=2, seed=1)
    assert second["source"] == {"type": "fixture", "size": 2, "seed": 1}
    assert second["n_items"] < first["n_items"]
    assert not any(stray.exists() for stray in strays)
    assert set(second["files"]) == set(files_on_disk(bench_dir)) - {"manifest.json", ".prepare-written.json"}
    assert load_benchmark(bench_dir).manifest == second
    verify_benchmark(bench_dir)


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_images_are_written_hashed_and_unloadable(kind, tmp_path):
    bench_dir = tmp_path / kind
    manifest = prepare(kind, bench_dir, corrupt=1)
    bench = load_benchmark(bench_dir)
    images = sorted(set(bench.records["image"]))
    broken = [rel for rel in images if not opens(bench_dir / rel)]
    assert len(broken) == 1
    assert manifest["files"][broken[0]]  # hashed like any other file
    clean = prepare(kind, tmp_path / "clean")
    assert all(
        opens(tmp_path / "clean" / rel) for rel in set(load_benchmark(tmp_path / "clean").records["image"])
    )
    assert clean["fingerprint"] != manifest["fingerprint"]


def test_too_many_corrupt_images_is_a_clear_error(tmp_path):
    with pytest.raises(VlmgridError, match="`corrupt: 50`.*lower `corrupt` or raise `size`"):
        prepare("scienceqa_img", tmp_path / "sqa", corrupt=50)
