"""Caltech-101 (zero-shot classification on the VTAB/TFDS-style test split: all images beyond 30 per class).

Raw layout (https://data.caltech.edu/records/mzrjq-6wc02): caltech-101.zip holding
  caltech-101/101_ObjectCategories.tar.gz   (md5 b224c7392d521a49829488ab0f1120d9) with
      101_ObjectCategories/<category>/image_%04d.jpg   102 folders (101 objects + BACKGROUND_Google)
  caltech-101/Annotations.tar, caltech-101/show_annotation.m   (not read)
The zip's md5 (3138e1922a9193bfa496528edbbc45d0) comes from third-party download code, not from Caltech; the
adapter therefore also hashes the inner 101_ObjectCategories.tar.gz while streaming it and refuses a full
(102-category) copy whose md5 differs from the published one.
Three layouts (benchmarks/layouts.py): caltech-101.zip as downloaded, or its images extracted,
101_ObjectCategories/<category>/image_%04d.jpg, with or without the zip's outer caltech-101/ folder (the
tree torchvision's Caltech101 and CLIP_benchmark read); all prepare the same records. An extracted tree has no
archive to check against the published md5: its count (6,084 test images) is checked, as for every source.

Classes (CLIP_benchmark's convention, its `caltech101` class-name list): BACKGROUND_Google is kept, as
"background"; the order is the case-sensitive sorted folder order (BACKGROUND_Google, Faces, Faces_easy,
Leopards, Motorbikes, accordion, ...); names are CLIP's curated ones
(benchmarks/data/caltech101_classnames.json, {folder: name}; "Faces" -> "off-center face", "Faces_easy" ->
"centered face", verbatim, including the double space of "head of a  crocodile").

Split (TFDS `caltech101` 3.x, which VTAB and CLIP_benchmark's vtab/caltech101 use): 30 images per class go
to train, the rest to test (TFDS: train 3,060, test 6,084). TFDS draws the 30 with numpy seed 1234 in
os.listdir order, which depends on the filesystem, so its exact membership is not reproducible. Here the rule
is made deterministic: one numpy RandomState(1234), categories in sorted order, each category's .jpg names
sorted, train = rng.choice(names, 30, replace=False), test = the rest (sorted). Same counts as TFDS, not the
same members.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
import zlib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import Adapted, classification_kind
from vlmgrid.benchmarks.layouts import Layout, layout_fields
from vlmgrid.benchmarks.rawio import archive_file, raw_file, read_bytes, within
from vlmgrid.benchmarks.records import classification_record
from vlmgrid.errors import VlmgridError

ARCHIVE = "caltech-101.zip"
INNER = "101_ObjectCategories.tar.gz"
INNER_MD5 = "b224c7392d521a49829488ab0f1120d9"
TOP = "101_ObjectCategories"
TRAIN_PER_CLASS = 30
SPLIT_SEED = 1234
N_CATEGORIES = 102


def classnames() -> dict[str, str]:
    """{folder: CLIP_benchmark class name}, in sorted folder order."""
    text = (
        resources.files("vlmgrid.benchmarks").joinpath("data/caltech101_classnames.json").read_text("utf-8")
    )
    return json.loads(text)


def split_test(files: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """{category: test file names}: the deterministic TFDS-style rule (module docstring)."""
    rng = np.random.RandomState(SPLIT_SEED)
    test = {}
    for category in sorted(files):
        names = sorted(files[category])
        if len(names) < TRAIN_PER_CLASS:
            raise VlmgridError(
                f"Caltech-101 category {category!r} has {len(names)} images, fewer than the "
                f"{TRAIN_PER_CLASS} the split puts in train"
            )
        train = set(rng.choice(names, TRAIN_PER_CLASS, replace=False).tolist())
        test[category] = [n for n in names if n not in train]
    return test


# ---------------------------------------------------------------------------------------------- adapter


class _Hashing(io.RawIOBase):
    """A read-only stream that md5-hashes what passes through it."""

    def __init__(self, raw) -> None:
        self.raw, self.md5 = raw, hashlib.md5()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.raw.read(len(buffer))
        self.md5.update(data)
        buffer[: len(data)] = data
        return len(data)

    def drain(self) -> None:
        for block in iter(lambda: self.raw.read(1 << 20), b""):
            self.md5.update(block)


def adapt_archive(raw_dir: Path, bench_dir: Path) -> Adapted:
    archive = raw_file(raw_dir, ARCHIVE)
    names = classnames()
    images = Path(bench_dir) / "images"
    files: dict[str, list[str]] = {}
    try:
        with zipfile.ZipFile(archive) as zf:
            inner = [
                i
                for i in zf.infolist()
                if PurePosixPath(i.filename).name == INNER and "__MACOSX" not in i.filename
            ]
            if not inner:
                raise VlmgridError(
                    f"{archive}: holds no {INNER}; it is not the published caltech-101.zip: re-download it"
                )
            with zf.open(inner[0]) as handle:
                stream = _Hashing(handle)
                with tarfile.open(fileobj=io.BufferedReader(stream, 1 << 20), mode="r|gz") as tar:
                    for member in tar:
                        parts = PurePosixPath(
                            member.name[2:] if member.name.startswith("./") else member.name
                        ).parts
                        if len(parts) != 3 or parts[0] != TOP or not parts[2].lower().endswith(".jpg"):
                            continue
                        if not archive_file(f"{archive} ({inner[0]})", member):
                            continue
                        category, name = parts[1], parts[2]
                        if category not in names:
                            raise VlmgridError(
                                f"{archive}: category {category!r} is not a Caltech-101 category; "
                                "re-download the archive"
                            )
                        if name in files.get(category, ()):
                            raise VlmgridError(
                                f"{archive}: {INNER} holds {member.name} twice, which the published "
                                "archive does not; re-download it"
                            )
                        # Every image is written; the train images are removed once the split is known.
                        fileio.write_bytes(images / category / name, tar.extractfile(member).read())
                        files.setdefault(category, []).append(name)
                stream.drain()
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise VlmgridError(
            f"{archive}: not a readable caltech-101.zip ({exc}); delete it and run prepare again"
        ) from None
    if not files:
        raise VlmgridError(f"{archive}: {INNER} holds no {TOP}/<category>/*.jpg images; re-download it")
    if len(files) >= N_CATEGORIES and stream.md5.hexdigest() != INNER_MD5:
        raise VlmgridError(
            f"{archive}: its {INNER} has md5 {stream.md5.hexdigest()}, but the published one has "
            f"{INNER_MD5}; the copy is another version or damaged: re-download it"
        )
    test = split_test(files)
    for category in files:  # every image was written; the train images go once the split is known
        keep = set(test[category])
        for name in files[category]:
            if name not in keep:
                (images / category / name).unlink()
    return _records(test, names)


def _records(test: Mapping[str, list[str]], names: Mapping[str, str]) -> Adapted:
    folders = sorted(test)
    classes = [names[f] for f in folders]
    rows = []
    for index, category in enumerate(folders):
        for name in test[category]:
            rows.append(
                classification_record(
                    f"{category}-{Path(name).stem}", f"images/{category}/{name}", classes, index
                )
            )
    return Adapted(records=pd.DataFrame(rows), classes=classes)


def _folder_reader(root: str):
    """The reader of an extracted 101_ObjectCategories/ tree under `root` ("" or "caltech-101/")."""

    def adapt_folder(raw_dir: Path, bench_dir: Path) -> Adapted:
        top = Path(raw_dir) / root / TOP
        names = classnames()
        files: dict[str, list[str]] = {}
        for folder in sorted(p for p in top.iterdir() if p.is_dir()):
            if folder.name not in names:
                raise VlmgridError(
                    f"{folder}: {folder.name!r} is not a Caltech-101 category; {top} must hold only the "
                    "published category folders"
                )
            files[folder.name] = sorted(
                p.name for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(".jpg")
            )
            if not files[folder.name]:
                raise VlmgridError(
                    f"{folder}: holds no .jpg images; the extraction is incomplete: extract {INNER} again"
                )
        test = split_test(files)
        for category, kept in test.items():
            for name in kept:
                image = within(top, Path(category) / name, f"Caltech-101 category {category}")
                fileio.write_bytes(
                    Path(bench_dir) / "images" / category / name, read_bytes(image, f"extract {INNER} again")
                )
        return _records(test, names)

    return adapt_folder


LAYOUTS = (
    Layout(f"{ARCHIVE} archive", "", (ARCHIVE,), (ARCHIVE,), adapt_archive),
    Layout(f"extracted {TOP}/ folder", "", (f"{TOP}/*/*.jpg",), (f"{TOP}/*/*.jpg",), _folder_reader("")),
    Layout(
        f"extracted caltech-101/{TOP}/ folder",
        "",
        (f"caltech-101/{TOP}/*/*.jpg",),
        (f"caltech-101/{TOP}/*/*.jpg",),
        _folder_reader("caltech-101"),
    ),
)


KIND = classification_kind(
    "caltech101",
    description=(
        "Caltech-101: zero-shot classification of the 6,084 VTAB-style test images into 102 classes "
        "(background kept)."
    ),
    templates=(
        "a photo of a {c}.",
        "a painting of a {c}.",
        "a plastic {c}.",
        "a sculpture of a {c}.",
        "a sketch of a {c}.",
        "a tattoo of a {c}.",
        "a toy {c}.",
        "a rendition of a {c}.",
        "a embroidered {c}.",
        "a cartoon {c}.",
        "a {c} in a video game.",
        "a plushie {c}.",
        "a origami {c}.",
        "art of a {c}.",
        "graffiti of a {c}.",
        "a drawing of a {c}.",
        "a doodle of a {c}.",
        "a photo of the {c}.",
        "a painting of the {c}.",
        "the plastic {c}.",
        "a sculpture of the {c}.",
        "a sketch of the {c}.",
        "a tattoo of the {c}.",
        "the toy {c}.",
        "a rendition of the {c}.",
        "the embroidered {c}.",
        "the cartoon {c}.",
        "the {c} in a video game.",
        "the plushie {c}.",
        "the origami {c}.",
        "art of the {c}.",
        "graffiti of the {c}.",
        "a drawing of the {c}.",
        "a doodle of the {c}.",
    ),
    expected_count=6084,
    class_count=102,  # 101 object categories + BACKGROUND_Google
    **layout_fields(LAYOUTS, "Caltech-101"),
    url_files=(
        {
            "url": "https://data.caltech.edu/records/mzrjq-6wc02/files/caltech-101.zip?download=1",
            "md5": "3138e1922a9193bfa496528edbbc45d0",
            "name": ARCHIVE,
        },
    ),
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
