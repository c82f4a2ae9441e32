"""The classification kinds food101, caltech101, imagenet and imagenet_ilsvrc2012: fixture -> prepare ->
records."""

from __future__ import annotations

import hashlib
import io
import json
import random
import tarfile
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from vlmgrid.benchmarks import BENCHMARKS, caltech101, food101, imagenet, load_benchmark
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures import drawing as fx
from vlmgrid.fixtures.kinds import caltech101 as caltech101_fixture
from vlmgrid.fixtures.kinds import food101 as food101_fixture
from vlmgrid.fixtures.kinds import imagenet as imagenet_fixture
from vlmgrid.stages.prepare import prepare_benchmark

# kind -> (fixture settings, expected number of items)
CASES = {
    "food101": ({"classes": 3, "size": 2}, 6),
    "caltech101": ({"classes": 3, "size": 2}, 3 * 2 + 1 + 2),  # category k keeps size + k test images
    "imagenet": ({"classes": 3, "size": 2}, 6),
    "imagenet_ilsvrc2012": ({"classes": 3, "size": 2}, 6),
}


def _prepare(tmp_path: Path, kind: str, **source) -> Path:
    bench_dir = tmp_path / kind
    prepare_benchmark(kind, {"kind": kind, "source": {"type": "fixture", **source}}, bench_dir)
    return bench_dir


def _tree_hash(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_kinds_are_registered_as_open_class_classification():
    expected = {"food101": 25250, "caltech101": 6084, "imagenet": 50000, "imagenet_ilsvrc2012": 50000}
    for name, count in expected.items():
        kind = BENCHMARKS.get(name)
        assert (kind.protocol, kind.metric, kind.breakdown_by, kind.parser) == (
            "classification",
            "classification",
            (),
            "open_class",
        )
        assert kind.expected_count == count
        assert kind.templates and all("{c}" in t for t in kind.templates)
    assert BENCHMARKS.get("food101").templates == ("a photo of {c}, a type of food.",)
    assert BENCHMARKS.get("food101").url_files[0]["md5"] == "85eeb15f3717b99a5da872d97d918f87"
    assert len(BENCHMARKS.get("caltech101").templates) == 34
    assert BENCHMARKS.get("imagenet").hub["repo"] == "ILSVRC/imagenet-1k"
    assert {f["md5"] for f in BENCHMARKS.get("imagenet_ilsvrc2012").url_files} == {
        "fa75699e90414af021442c21a62c3abf",
        "29b22e2961454d5413ddabcf34fc5622",
    }


def test_imagenet_names_and_templates_come_from_open_clip():
    import importlib.util
    import runpy

    # open_clip's own file, run directly (importing open_clip would import torch: slow)
    folder = importlib.util.find_spec("open_clip").submodule_search_locations[0]
    metadata = runpy.run_path(str(Path(folder) / "zero_shot_metadata.py"))
    assert imagenet.classnames() == list(metadata["IMAGENET_CLASSNAMES"])
    assert imagenet.classnames()[:2] == ["tench", "goldfish"]
    assert len(imagenet.templates()) == 80
    assert [t.format(c="dog") for t in imagenet.templates()] == [
        t("dog") for t in metadata["OPENAI_IMAGENET_TEMPLATES"]
    ]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_fixture_prepares_into_records_classes_and_images(tmp_path, kind):
    settings, count = CASES[kind]
    bench_dir = _prepare(tmp_path, kind, **settings)
    bench = load_benchmark(bench_dir)
    records = bench.records
    assert len(records) == count and records["id"].is_unique
    classes = json.loads((bench_dir / "classes.json").read_text("utf-8"))
    assert classes == bench.classes
    if kind.startswith("imagenet"):
        assert classes == imagenet.classnames()  # always all 1,000: labels index them
    else:
        assert len(classes) == settings["classes"]
    assert records["answer_index"].nunique() == settings["classes"]
    for row in records.itertuples():
        assert classes[row.answer_index] == row.answer and list(row.options) == [] and row.question == ""
        with Image.open(bench.image_path(row.image)) as image:
            image.load()
            assert 64 <= image.size[0] <= 96


@pytest.mark.parametrize("kind", sorted(CASES))
def test_fixture_is_deterministic(tmp_path, kind):
    settings, _ = CASES[kind]
    first = _tree_hash(_prepare(tmp_path / "a", kind, **settings) / "raw")
    again = _tree_hash(_prepare(tmp_path / "b", kind, **settings) / "raw")
    other = _tree_hash(_prepare(tmp_path / "c", kind, seed=1, **settings) / "raw")
    assert first == again
    assert first != other


def test_food101_prompt_names_and_layout(tmp_path):
    assert food101.prompt_name("baby_back_ribs") == "baby back ribs"
    assert food101.prompt_name("pho") == "pho"
    bench_dir = _prepare(tmp_path, "food101", classes=3, size=2)
    bench = load_benchmark(bench_dir)
    assert bench.classes == ["apple pie", "baby back ribs", "baklava"]
    with tarfile.open(bench_dir / "raw" / food101.ARCHIVE) as tar:
        names = tar.getnames()
        test = json.loads(tar.extractfile("food-101/meta/test.json").read())
    assert names.index("food-101/meta/test.json") > names.index(
        "food-101/images/apple_pie"
    )  # meta after images
    wanted = sorted(f"{entry.replace('/', '-')}" for entries in test.values() for entry in entries)
    assert sorted(bench.records["id"]) == wanted
    first = bench.records.iloc[0]
    assert (
        first["id"].startswith("apple_pie-")
        and first["image"] == f"images/{first['id'].replace('-', '/')}.jpg"
    )


def _food101_members(raw):
    """Writes a small Food-101 fixture into raw; its archive's files (name, bytes) and its test split."""
    food101_fixture.write_fixture(raw, {"seed": 0, "size": 1, "classes": 2, "corrupt": 0})
    with tarfile.open(raw / food101.ARCHIVE) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]
    return members, json.loads(dict(members)["food-101/meta/test.json"])


def test_food101_missing_test_image_is_an_error(tmp_path):
    raw = tmp_path / "raw"
    members, test = _food101_members(raw)
    dropped = f"food-101/images/{test['apple_pie'][0]}.jpg"
    fx.write_tgz(raw / food101.ARCHIVE, [m for m in members if m[0] != dropped])
    with pytest.raises(VlmgridError, match="has no food-101/images/apple_pie/"):
        food101.adapt(raw, tmp_path / "bench")


def test_caltech_split_keeps_all_but_30_per_class_deterministically():
    files = {
        "b": [f"image_{i:04d}.jpg" for i in range(1, 36)],
        "a": [f"image_{i:04d}.jpg" for i in range(1, 31)],
    }
    test = caltech101.split_test(files)
    assert len(test["b"]) == 5 and test["a"] == []
    assert set(test["b"]) < set(files["b"]) and test["b"] == sorted(test["b"])
    shuffled = {k: random.Random(3).sample(v, len(v)) for k, v in reversed(files.items())}
    assert caltech101.split_test(shuffled) == test  # independent of listing order
    assert test["b"] != [f"image_{i:04d}.jpg" for i in range(31, 36)]  # a random draw, not the last five
    with pytest.raises(VlmgridError, match="fewer than the 30"):
        caltech101.split_test({"c": ["image_0001.jpg"]})


def test_caltech_fixture_follows_the_split_and_keeps_background(tmp_path):
    bench_dir = _prepare(tmp_path, "caltech101", classes=3, size=2)
    bench = load_benchmark(bench_dir)
    assert bench.classes == ["background", "off-center face", "centered face"]
    import zipfile

    with zipfile.ZipFile(bench_dir / "raw" / caltech101.ARCHIVE) as zf:
        assert "caltech-101/101_ObjectCategories.tar.gz" in zf.namelist()
    counts = bench.records.groupby("answer_index").size().to_dict()
    assert counts == {0: 2, 1: 3, 2: 4}  # (30 + size + k) images, 30 to train
    files = {
        c: [f"image_{i:04d}.jpg" for i in range(1, 30 + 2 + k + 1)]
        for k, c in enumerate(["BACKGROUND_Google", "Faces", "Faces_easy"])
    }
    expected = sorted(
        f"{c}-{Path(n).stem}" for c, names in caltech101.split_test(files).items() for n in names
    )
    assert sorted(bench.records["id"]) == expected
    assert len(list((bench_dir / "images").rglob("*.jpg"))) == len(expected)  # train images are not kept


def test_caltech_class_names_cover_all_102_folders():
    names = caltech101.classnames()
    assert len(names) == 102 and list(names) == sorted(names)
    assert (
        names["BACKGROUND_Google"] == "background"
        and names["Faces"] == "off-center face"
        and names["yin_yang"] == "yin and yang symbol"
    )


def test_caltech_full_copy_with_another_inner_md5_is_refused(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    caltech101_fixture.write_fixture(raw, {"seed": 0, "size": 1, "classes": 3, "corrupt": 0})
    monkeypatch.setattr(caltech101, "N_CATEGORIES", 3)  # the fixture now looks like a full copy
    with pytest.raises(VlmgridError, match="b224c7392d521a49829488ab0f1120d9"):
        caltech101.adapt(raw, tmp_path / "bench")
    # ... and the md5 taken while streaming is the inner archive's: with its true md5 published, it passes
    import zipfile

    inner = zipfile.ZipFile(raw / caltech101.ARCHIVE).read(f"caltech-101/{caltech101.INNER}")
    monkeypatch.setattr(caltech101, "INNER_MD5", hashlib.md5(inner).hexdigest())
    assert len(caltech101.adapt(raw, tmp_path / "bench2").records) == 1 + 2 + 3  # size + k per category


def test_caltech_archive_holding_an_image_twice_is_refused_in_one_sentence(tmp_path, monkeypatch):
    members = caltech101_fixture._members

    def doubled(settings):
        listed, directories = members(settings)
        return [*listed, listed[0]], directories

    monkeypatch.setattr(caltech101_fixture, "_members", doubled)
    raw = tmp_path / "raw"
    caltech101_fixture.write_fixture(raw, {"seed": 0, "size": 1, "classes": 3, "corrupt": 0})
    with pytest.raises(VlmgridError, match=r"holds 101_ObjectCategories/\S+\.jpg twice, which the published"):
        caltech101.adapt(raw, tmp_path / "bench")


def _fake_ilsvrc_tree(root: Path, ground_truth: list[int]) -> None:
    """An extracted ILSVRC2012 tree: devkit folder (meta.mat, ground truth) and the val tar extracted into
    val/."""
    data = root / imagenet.DEVKIT / "data"
    data.mkdir(parents=True)
    imagenet_fixture.write_devkit_meta(data / "meta.mat", imagenet_fixture.fixture_leaves())
    (data / "ILSVRC2012_validation_ground_truth.txt").write_text("".join(f"{i}\n" for i in ground_truth))
    for n in range(1, len(ground_truth) + 1):
        folder = root / "val"
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (64, 64), (n * 40, 0, 0)).save(folder / f"ILSVRC2012_val_{n:08d}.JPEG")


def test_imagenet_local_tree_maps_ilsvrc_ids_through_sorted_wnids(tmp_path):
    # Fake WNIDs: id i -> "n%08d" % (1001 - i), so sorted order is reversed: id 1 -> index 999, id 1000 -> 0.
    _fake_ilsvrc_tree(tmp_path / "raw", [1, 1000, 3, 500])
    adapted = imagenet.adapt_ilsvrc(tmp_path / "raw", tmp_path / "bench")
    records = adapted.records
    assert list(records["id"]) == [f"ILSVRC2012_val_{n:08d}" for n in (1, 2, 3, 4)]
    assert list(records["answer_index"]) == [999, 0, 997, 500]
    assert records["answer"].iloc[1] == "tench"
    assert adapted.classes[999] == records["answer"].iloc[0]
    assert (tmp_path / "bench" / "images" / "ILSVRC2012_val_00000002.JPEG").is_file()


def test_imagenet_devkit_uses_only_leaf_synsets(tmp_path):
    leaves = imagenet_fixture.fixture_leaves()
    path = tmp_path / "meta.mat"
    imagenet_fixture.write_devkit_meta(path, leaves, extra=4)
    assert imagenet.leaf_synsets(path, "meta") == leaves  # ids 1001.. (with children) are left out
    del leaves[7]
    imagenet_fixture.write_devkit_meta(path, leaves)
    with pytest.raises(VlmgridError, match="leaf synsets"):
        imagenet.leaf_synsets(path, "meta")


def test_imagenet_ground_truth_and_images_must_match(tmp_path):
    _fake_ilsvrc_tree(tmp_path / "raw", [1, 2])
    (tmp_path / "raw" / "val" / "ILSVRC2012_val_00000001.JPEG").unlink()
    with pytest.raises(VlmgridError, match="has no ILSVRC2012_val_00000001.JPEG"):
        imagenet.adapt_ilsvrc(tmp_path / "raw", tmp_path / "bench")


def test_imagenet_hub_copy_and_ilsvrc_tree_agree(tmp_path):
    hub = load_benchmark(_prepare(tmp_path / "h", "imagenet", classes=3, size=2))
    tree = load_benchmark(_prepare(tmp_path / "t", "imagenet_ilsvrc2012", classes=3, size=2))
    assert list(hub.records["id"]) == list(tree.records["id"])
    assert list(hub.records["answer_index"]) == list(tree.records["answer_index"])


def test_imagenet_hub_label_outside_the_1000_classes_is_an_error(tmp_path):
    import pyarrow as pa

    from vlmgrid.benchmarks.rawio import IMAGE_TYPE, write_hub_parquet

    schema = pa.schema([("image", IMAGE_TYPE), ("label", pa.int64())])
    row = {
        "image": {"bytes": b"\xff\xd8jpeg", "path": "ILSVRC2012_val_00000001.JPEG"},
        "label": -1,
    }  # the test split
    write_hub_parquet(tmp_path / "raw" / "data" / "validation-00000-of-00014.parquet", schema, [row], {})
    with pytest.raises(VlmgridError, match="outside 0..999"):
        imagenet.adapt_hub(tmp_path / "raw", tmp_path / "bench")


def test_imagenet_synonyms_keep_the_other_lemmas_and_drop_shared_ones():
    names = ["tench", "crane", "crane (machine)", "great white shark"]
    words = ["tench, Tinca tinca", "crane", "crane, derrick", "great white shark, white shark, man-eater"]
    # "crane" names the bird class and is a lemma of the machine: it stays the bird's name, not a synonym
    assert imagenet.synonyms_from_words(names, words) == {
        "tench": ["Tinca tinca"],
        "crane (machine)": ["derrick"],
        "great white shark": ["white shark", "man-eater"],
    }
    assert imagenet.synonyms_from_words(names, []) == {}


def test_imagenet_synonyms_come_from_the_devkit_words_and_reach_the_benchmark(tmp_path):
    bench = load_benchmark(_prepare(tmp_path, "imagenet_ilsvrc2012", classes=3, size=1))
    # the fixture devkit's words for ILSVRC2012_ID i are "words i, lemma i"; ids map to classes 1000 - i
    assert bench.synonyms["tench"] == ["words 1000", "lemma 1000"]
    assert len(bench.synonyms) == len(set(bench.classes))  # open_clip's names repeat "missile", "sunglasses"
    assert "synonyms.json" in bench.manifest["files"]


def test_imagenet_hub_label_names_become_synonyms(tmp_path, monkeypatch):
    lemmas = [f"{name}, other name {k}" for k, name in enumerate(imagenet.classnames())]
    real = imagenet_fixture.write_hub_parquet

    def with_lemmas(path, schema, rows, features):
        real(path, schema, rows, {**features, "label": {"names": lemmas, "_type": "ClassLabel"}})

    monkeypatch.setattr(imagenet_fixture, "write_hub_parquet", with_lemmas)
    bench = load_benchmark(_prepare(tmp_path, "imagenet", classes=2, size=1))
    assert bench.synonyms["goldfish"] == ["other name 1"]


def test_food101_a_link_in_the_archive_is_named_and_not_followed(tmp_path):
    raw = tmp_path / "raw"
    members, test = _food101_members(raw)
    linked = f"food-101/images/{test['apple_pie'][0]}.jpg"
    # As GNU tar stores a symbolic link: a SYMTYPE member with its target in linkname and no data.
    with tarfile.open(raw / food101.ARCHIVE, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if name == linked:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with pytest.raises(VlmgridError) as caught:
        food101.adapt(raw, tmp_path / "bench")
    assert str(caught.value) == (
        f"{raw / food101.ARCHIVE}: member {linked} is a symbolic link (to /etc/passwd), and links inside an "
        "archive are not followed (one could point anywhere on the disk); re-download the archive, or "
        "rebuild it with the file itself in place of the link (tar --dereference)"
    )
    assert not (tmp_path / "bench" / "images" / f"{test['apple_pie'][0]}.jpg").exists()


def test_a_symbolic_link_in_a_zip_is_named_and_not_followed(tmp_path):
    from vlmgrid.benchmarks.rawio import zip_file

    archive = tmp_path / "images.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("images/a.jpg", b"\xff\xd8 jpeg")
        # As Info-ZIP's `zip --symlinks` stores one: the Unix mode S_IFLNK in the external attributes, the
        # target as the member's data.
        info = zipfile.ZipInfo("images/b.jpg")
        info.create_system, info.external_attr = 3, (0o120777 << 16)
        zf.writestr(info, "../../secret.jpg")
    with zipfile.ZipFile(archive) as zf:
        assert zip_file(archive, zf, "images/a.jpg") == b"\xff\xd8 jpeg"
        with pytest.raises(
            VlmgridError,
            match=r"images.zip: member images/b.jpg is a symbolic link \(to "
            r"\.\./\.\./secret\.jpg\), and links inside an archive are not "
            r"followed .*; re-download the archive",
        ):
            zip_file(archive, zf, "images/b.jpg")
