"""The classification kinds read from a local folder as their authors ship it, extracted: the same fixture in
the extracted layout and in the archive layout prepares to the same records, images and classes."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from vlmgrid.benchmarks import BENCHMARKS, imagenet, load_benchmark
from vlmgrid.benchmarks.sources import local_raw_files
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import caltech101 as caltech_fx
from vlmgrid.fixtures.kinds import flowers102 as flowers_fx
from vlmgrid.fixtures.kinds import food101 as food_fx
from vlmgrid.fixtures.kinds import imagenet as imagenet_fx
from vlmgrid.stages.prepare import prepare_benchmark

SETTINGS = {"seed": 3, "size": 2, "classes": 3, "corrupt": 0}


def _extract(archive: Path, into: Path) -> None:
    # extraction filters came in Python 3.10.12 and 3.11.4 (Debian 12's python3 is 3.11.2); these are the
    # tests' own archives
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(archive) as tar:
        tar.extractall(into, **safe)


def _ilsvrc_extracted_flat(raw: Path, settings) -> None:
    """The ILSVRC2012 archives unpacked as image-net.org's readers do: the val tar into val/, the devkit
    beside."""
    imagenet_fx.write_ilsvrc_fixture(raw / "tmp", settings)
    _extract(raw / "tmp" / imagenet.VAL_TAR, raw / "val")
    _extract(raw / "tmp" / imagenet.DEVKIT_TGZ, raw)
    for path in (raw / "tmp").iterdir():
        path.unlink()
    (raw / "tmp").rmdir()


# kind -> the archive-layout writer and the extracted-layout writers (name -> writer(raw_dir, settings))
CASES = {
    "flowers102": (flowers_fx.write_fixture, {"jpg": flowers_fx.write_extracted_fixture}),
    "caltech101": (
        caltech_fx.write_fixture,
        {
            "caltech-101/101_ObjectCategories": caltech_fx.write_extracted_fixture,
            "101_ObjectCategories": lambda raw, s: caltech_fx.write_extracted_fixture(raw, s, outer=False),
        },
    ),
    "food101": (
        food_fx.write_fixture,
        {
            "food-101": food_fx.write_extracted_fixture,
            "food-101 contents": lambda raw, s: (
                food_fx.write_extracted_fixture(raw.parent / "outer", s)
                or (raw.parent / "outer" / "food-101").rename(raw)
            ),
        },
    ),
    "imagenet_ilsvrc2012": (
        imagenet_fx.write_ilsvrc_fixture,
        {"val/<WNID>": imagenet_fx.write_sorted_fixture, "val flat": _ilsvrc_extracted_flat},
    ),
}
LAYOUT_CASES = [(kind, layout) for kind, (_, extracted) in CASES.items() for layout in extracted]


def _prepare_local(raw: Path, bench_dir: Path, kind: str) -> dict:
    return prepare_benchmark(kind, {"kind": kind, "source": {"type": "local", "path": str(raw)}}, bench_dir)


def _images(bench_dir: Path) -> dict[str, str]:
    return {
        p.relative_to(bench_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((bench_dir / "images").rglob("*"))
        if p.is_file()
    }


@pytest.fixture(autouse=True)
def _any_count(monkeypatch):
    # fixtures are small copies: the published counts are checked elsewhere
    from vlmgrid.benchmarks import dataset

    monkeypatch.setattr(dataset, "_check_count", lambda *args: None)


@pytest.mark.parametrize(("kind", "layout"), LAYOUT_CASES)
def test_extracted_layout_prepares_like_the_archive(tmp_path, kind, layout):
    write_archive, extracted = CASES[kind]
    write_archive(tmp_path / "archive", SETTINGS)
    extracted[layout](tmp_path / "extracted", SETTINGS)
    _prepare_local(tmp_path / "archive", tmp_path / "a", kind)
    manifest = _prepare_local(tmp_path / "extracted", tmp_path / "e", kind)
    archive, folder = load_benchmark(tmp_path / "a"), load_benchmark(tmp_path / "e")
    assert len(archive.records) >= 6
    pd.testing.assert_frame_equal(archive.records, folder.records)
    assert (tmp_path / "a" / "records.parquet").read_bytes() == (
        tmp_path / "e" / "records.parquet"
    ).read_bytes()
    assert _images(tmp_path / "a") == _images(tmp_path / "e")
    assert archive.classes == folder.classes
    # the manifest hashes the extracted layout's files, which are among the kind's raw_files patterns
    raw = {Path(k) for k in manifest["files"] if Path(k).is_absolute()}
    assert raw and raw == {p.resolve() for p in local_raw_files(BENCHMARKS.get(kind), tmp_path / "extracted")}
    assert not any(p.suffix in (".tgz", ".zip", ".tar", ".gz") and "devkit" not in p.name for p in raw)


def test_flowers_folder_holds_only_the_test_images_it_read(tmp_path):
    flowers_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    records = (
        load_benchmark(tmp_path / "b")
        if _prepare_local(tmp_path / "raw", tmp_path / "b", "flowers102")
        else None
    )
    # 3 classes x (1 train + 1 val + 2 test): the 6 test images, by setid.mat's tstid
    assert len(records.records) == 6 and len(_images(tmp_path / "b")) == 6
    assert len(list((tmp_path / "raw" / "jpg").glob("image_*.jpg"))) == 12


def test_imagenet_sorted_tree_indexes_the_sorted_wnids_with_timm_lemmas(tmp_path):
    wnids = imagenet.sorted_wnids()
    assert len(wnids) == 1000 and wnids[0] == "n01440764" and wnids[-1] == "n15075141"
    raw = tmp_path / "raw" / "val"
    for wnid, number in (("n01443537", 7), ("n01440764", 2), ("n15075141", 1)):
        (raw / wnid).mkdir(parents=True)
        (raw / wnid / f"ILSVRC2012_val_{number:08d}.JPEG").write_bytes(b"\xff\xd8 image %d" % number)
    adapted = imagenet.adapt_ilsvrc(tmp_path / "raw", tmp_path / "bench")
    records = adapted.records
    assert list(records["id"]) == [
        "ILSVRC2012_val_00000001",
        "ILSVRC2012_val_00000002",
        "ILSVRC2012_val_00000007",
    ]
    assert list(records["answer_index"]) == [999, 0, 1]
    assert list(records["answer"]) == ["toilet paper", "tench", "goldfish"]
    assert adapted.synonyms["tench"] == ["Tinca tinca"]
    assert (
        tmp_path / "bench" / "images" / "ILSVRC2012_val_00000007.JPEG"
    ).read_bytes() == b"\xff\xd8 image 7"


# ---------------------------------------------------------------------------------------------- bad input


def _error(tmp_path: Path, kind: str) -> str:
    with pytest.raises(VlmgridError) as caught:
        _prepare_local(tmp_path / "raw", tmp_path / "bench", kind)
    message = str(caught.value)
    assert message.count("; ") >= 1 and "\n" not in message
    return message


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_folder_of_no_layout_names_the_layouts(tmp_path, kind):
    (tmp_path / "raw" / "photos").mkdir(parents=True)
    (tmp_path / "raw" / "photos" / "a.jpg").write_bytes(b"\xff\xd8")
    message = _error(tmp_path, kind)
    assert message.startswith(f"{tmp_path / 'raw'}: holds no ")
    for layout in BENCHMARKS.get(kind).layouts:
        assert layout.markers[0] in message


def test_an_archive_beside_its_extracted_tree_is_ambiguous(tmp_path):
    flowers_fx.write_fixture(tmp_path / "raw", SETTINGS)
    flowers_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    message = _error(tmp_path, "flowers102")
    assert (
        "Flowers-102 data in more than one layout" in message
        and "102flowers.tgz" in message
        and "jpg/image_" in message
    )


def test_flowers_labels_without_setid_names_setid(tmp_path):
    flowers_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    (tmp_path / "raw" / "setid.mat").unlink()
    assert _error(tmp_path, "flowers102").startswith(f"{tmp_path / 'raw' / 'setid.mat'}: missing")


def test_flowers_missing_test_image_is_named(tmp_path):
    flowers_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    import scipy.io

    first = int(scipy.io.loadmat(tmp_path / "raw" / "setid.mat")["tstid"].ravel().min())
    (tmp_path / "raw" / "jpg" / f"image_{first:05d}.jpg").unlink()
    message = _error(tmp_path, "flowers102")
    assert message.startswith(
        f"{tmp_path / 'raw' / 'jpg' / f'image_{first:05d}.jpg'}: missing, though setid.mat lists it"
    )
    assert not (tmp_path / "bench" / "records.parquet").exists()


def test_food_class_folder_missing_is_named(tmp_path):
    food_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    folder = tmp_path / "raw" / "food-101" / "images" / "baklava"
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    assert _error(tmp_path, "food101").startswith(f"{folder}: missing, though meta/test.txt lists its images")


def test_food_tree_without_test_txt_names_it(tmp_path):
    food_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    (tmp_path / "raw" / "food-101" / "meta" / "test.txt").unlink()
    assert _error(tmp_path, "food101").startswith(
        f"{tmp_path / 'raw' / 'food-101' / 'meta' / 'test.txt'}: missing"
    )


def test_caltech_unknown_category_folder_is_named(tmp_path):
    caltech_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS)
    top = tmp_path / "raw" / "caltech-101" / "101_ObjectCategories"
    (top / "Faces_easy").rename(top / "faces_2")
    assert _error(tmp_path, "caltech101").startswith(
        f"{top / 'faces_2'}: 'faces_2' is not a Caltech-101 category"
    )


def test_caltech_empty_category_folder_is_named(tmp_path):
    caltech_fx.write_extracted_fixture(tmp_path / "raw", SETTINGS, outer=False)
    folder = tmp_path / "raw" / "101_ObjectCategories" / "Faces"
    for path in folder.iterdir():
        path.unlink()
    assert _error(tmp_path, "caltech101").startswith(f"{folder}: holds no .jpg images")


def test_imagenet_sorted_tree_unknown_or_empty_class_folder_is_named(tmp_path):
    imagenet_fx.write_sorted_fixture(tmp_path / "raw", SETTINGS)
    val = tmp_path / "raw" / "val"
    (val / "tench").mkdir()
    assert _error(tmp_path, "imagenet_ilsvrc2012").startswith(
        f"{val / 'tench'}: 'tench' is not one of the 1000 ILSVRC2012 WNIDs"
    )
    (val / "tench").rmdir()
    (val / "n01440764").mkdir(exist_ok=True)  # a class folder whose images are missing
    for path in (val / "n01440764").iterdir():
        path.unlink()
    assert _error(tmp_path, "imagenet_ilsvrc2012").startswith(
        f"{val / 'n01440764'}: holds no ILSVRC2012_val_*.JPEG image"
    )


def test_imagenet_flat_images_beside_class_folders_are_ambiguous(tmp_path):
    imagenet_fx.write_sorted_fixture(tmp_path / "raw", SETTINGS)
    first = next((tmp_path / "raw" / "val").glob("n*/ILSVRC2012_val_*.JPEG"))
    first.rename(tmp_path / "raw" / "val" / first.name)
    assert "ILSVRC2012 data in more than one layout" in _error(tmp_path, "imagenet_ilsvrc2012")
