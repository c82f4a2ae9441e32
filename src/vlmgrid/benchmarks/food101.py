"""Food-101 (zero-shot classification on the 25,250 official test images, 250 per class).

Raw layout (https://data.vision.ee.ethz.ch/cvl/datasets_extra/food-101/): one archive food-101.tar.gz holding
  food-101/images/<class>/<id>.jpg       all 101,000 images (<class> is snake_case, e.g. apple_pie)
  food-101/meta/classes.txt              the 101 class folder names, sorted, one a line
  food-101/meta/test.json                {class: ["class/id", ...]}: the test split (train.json likewise)
Classes: the sorted class folder names; CLIP's prompt names replace "_" by " " ("apple pie"), and
classes.json holds those prompt names. Record ids are "<class>-<id>" (e.g. "apple_pie-1011328").
The adapter streams the 5 GB tar (never held in memory) in two passes: the first stops as soon as it has read
meta/test.json and meta/classes.txt, the second writes only the test images.

Two more layouts (benchmarks/layouts.py): the archive extracted, food-101/images/<class>/<id>.jpg with
food-101/meta/test.txt ("class/id", one a line: the same split as test.json) and classes.txt, in the folder or
with `path` pointing at food-101/ itself (the tree torchvision's Food101 reads); both prepare the same records
as the archive. A local source hashes every image of the tree (all 101,000, about the archive's 5 GB).
"""

from __future__ import annotations

import json
import tarfile
import zlib
from pathlib import Path

import pandas as pd

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import Adapted, classification_kind
from vlmgrid.benchmarks.layouts import Layout, layout_fields
from vlmgrid.benchmarks.rawio import archive_file, extract_images, raw_file, read_bytes, read_text, within
from vlmgrid.benchmarks.records import classification_record
from vlmgrid.errors import VlmgridError

ARCHIVE = "food-101.tar.gz"
ROOT = "food-101"
TEST_JSON, CLASSES_TXT = f"{ROOT}/meta/test.json", f"{ROOT}/meta/classes.txt"
IMAGE_NAME = ROOT + "/images/{}.jpg"  # {} = "class/id" as in test.json


def prompt_name(folder: str) -> str:
    """CLIP's Food-101 prompt name of a class folder: underscores become spaces ("apple_pie" -> "apple
    pie")."""
    return folder.replace("_", " ")


# ---------------------------------------------------------------------------------------------- adapter


def _name(member: tarfile.TarInfo) -> str:
    return member.name[2:] if member.name.startswith("./") else member.name


def _read_meta(archive: Path) -> tuple[dict, list[str] | None]:
    """Pass 1: test.json (required) and classes.txt (optional) from the archive."""
    test, classes = None, None
    with tarfile.open(archive, "r|*") as tar:
        for member in tar:
            name = _name(member)
            if name in (TEST_JSON, CLASSES_TXT) and archive_file(archive, member):
                data = tar.extractfile(member).read().decode("utf-8-sig")
                if name == TEST_JSON:
                    try:
                        test = json.loads(data)
                    except (ValueError, RecursionError) as exc:
                        raise VlmgridError(
                            f"{archive}: {TEST_JSON} is not readable JSON ({exc}); re-download the archive"
                        ) from None
                else:
                    classes = [line.strip() for line in data.splitlines() if line.strip()]
                if test is not None and classes is not None:
                    break
    if test is None:
        raise VlmgridError(
            f"{archive}: has no {TEST_JSON}; it is not the published Food-101 archive: re-download it"
        )
    if not isinstance(test, dict) or not all(isinstance(v, list) for v in test.values()):
        raise VlmgridError(
            f'{archive}: {TEST_JSON} is not a {{class: ["class/id", ...]}} table; re-download the archive'
        )
    return test, classes


def _wanted(test: dict, listed: list[str] | None, where: Path, split_file: str) -> dict[str, tuple[str, int]]:
    """{image path in the release: ("class/id", class index)} of the test split; classes = sorted folders."""
    folders = sorted(test)
    if listed is not None and sorted(listed) != folders:
        raise VlmgridError(
            f"{where}: meta/classes.txt and {split_file} name different classes; re-download the archive"
        )
    wanted: dict[str, tuple[str, int]] = {}
    for index, folder in enumerate(folders):
        for entry in test[folder]:
            # "class/id" and nothing more: the entry names a file to read, and one to write under images/
            parts = entry.split("/") if isinstance(entry, str) else []
            if len(parts) != 2 or parts[0] != folder or parts[1] in ("", ".", ".."):
                raise VlmgridError(
                    f"{where}: {split_file} lists {entry!r} under {folder!r}; re-download the archive"
                )
            wanted[IMAGE_NAME.format(entry)] = (entry, index)
    return wanted


def _records(wanted: dict[str, tuple[str, int]], test: dict) -> Adapted:
    classes = [prompt_name(f) for f in sorted(test)]
    rows = []
    for entry, index in sorted(wanted.values(), key=lambda v: (v[1], v[0])):
        rows.append(classification_record(entry.replace("/", "-"), f"images/{entry}.jpg", classes, index))
    return Adapted(records=pd.DataFrame(rows), classes=classes)


def adapt_archive(raw_dir: Path, bench_dir: Path) -> Adapted:
    archive = raw_file(raw_dir, ARCHIVE)
    try:
        test, listed = _read_meta(archive)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise VlmgridError(
            f"{archive}: not a readable .tar.gz archive ({exc}); delete it and run prepare again"
        ) from None
    wanted = _wanted(test, listed, archive, TEST_JSON)
    # pass 2: only the test images, streamed
    targets = {name: f"{entry}.jpg" for name, (entry, _) in wanted.items()}
    extract_images(archive, "r|*", targets, bench_dir, ".tar.gz archive", TEST_JSON)
    return _records(wanted, test)


def _folder_reader(outer: str):
    """The reader of the extracted archive: `outer` is "food-101" (the folder holds it) or "" (it is it)."""

    def adapt_folder(raw_dir: Path, bench_dir: Path) -> Adapted:
        root = Path(raw_dir) / outer
        test_txt, classes_txt = root / "meta" / "test.txt", root / "meta" / "classes.txt"
        if not test_txt.is_file():
            raise VlmgridError(
                f"{test_txt}: missing, so the test split is unknown; extract the whole of {ARCHIVE} (its "
                "meta/ folder too)"
            )
        test: dict[str, list[str]] = {}
        fix = f"extract the whole of {ARCHIVE} again"
        for line in read_text(test_txt, fix).splitlines():
            if line.strip():
                test.setdefault(line.strip().split("/")[0], []).append(line.strip())
        listed = None
        if classes_txt.is_file():
            listed = [line.strip() for line in read_text(classes_txt, fix).splitlines() if line.strip()]
        wanted = _wanted(test, listed, test_txt, "meta/test.txt")
        for folder in sorted(test):
            if not (root / "images" / folder).is_dir():
                raise VlmgridError(
                    f"{root / 'images' / folder}: missing, though meta/test.txt lists its images; extract "
                    f"the whole of {ARCHIVE}"
                )
        missing = [entry for entry, _ in wanted.values() if not (root / "images" / f"{entry}.jpg").is_file()]
        if missing:
            raise VlmgridError(
                f"{root / 'images' / missing[0]}.jpg: missing, though meta/test.txt lists it "
                f"({len(missing)} test images missing in all); extract the whole of {ARCHIVE}"
            )
        for entry, _ in wanted.values():
            image = within(root / "images", f"{entry}.jpg", f"{test_txt} (its entry {entry!r})")
            fileio.write_bytes(Path(bench_dir) / "images" / f"{entry}.jpg", read_bytes(image, fix))
        return _records(wanted, test)

    return adapt_folder


def _extracted(outer: str) -> Layout:
    prefix = f"{outer}/" if outer else ""
    images, test = f"{prefix}images/*/*.jpg", f"{prefix}meta/test.txt"
    name = f"extracted {ROOT}/ folder" if outer else f"contents of the extracted {ROOT}/ folder"
    return Layout(
        name, "", (test, images), (images, test, f"{prefix}meta/classes.txt"), _folder_reader(outer)
    )


LAYOUTS = (
    Layout(f"{ARCHIVE} archive", "", (ARCHIVE,), (ARCHIVE,), adapt_archive),
    _extracted(ROOT),
    _extracted(""),
)


KIND = classification_kind(
    "food101",
    description="Food-101: zero-shot classification of the 25,250 test images into 101 dishes.",
    templates=("a photo of {c}, a type of food.",),
    url_files=(
        {
            "url": "http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz",
            "md5": "85eeb15f3717b99a5da872d97d918f87",
            "name": ARCHIVE,
        },
    ),
    expected_count=25250,
    class_count=101,
    **layout_fields(LAYOUTS, "Food-101"),
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
