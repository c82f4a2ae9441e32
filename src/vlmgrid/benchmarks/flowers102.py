"""Oxford Flowers-102 (zero-shot classification on the 6,149 test images, `tstid` of setid.mat).

Raw layout (https://www.robots.ox.ac.uk/~vgg/data/flowers/102/):
  102flowers.tgz   tar of jpg/image_00001.jpg ... (all 8,189 images)
  imagelabels.mat  `labels`: 1 x N, 1-based class of image i
  setid.mat        `trnid`, `valid`, `tstid`: 1 x n each, 1-based image numbers
Two layouts (benchmarks/layouts.py): the three files as downloaded, or the archive extracted in their folder
(jpg/image_00001.jpg ... beside the two .mat files, as torchvision's Flowers102 reads it); both prepare the
same. Class names: CLIP's curated list (benchmarks/data/flowers102_classnames.json), index = label - 1.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import Adapted, classification_kind
from vlmgrid.benchmarks.layouts import Layout, layout_fields
from vlmgrid.benchmarks.rawio import extract_images, raw_file, read_bytes, within
from vlmgrid.benchmarks.records import classification_record
from vlmgrid.errors import VlmgridError

ARCHIVE, LABELS, SETID = "102flowers.tgz", "imagelabels.mat", "setid.mat"
IMAGE_NAME = "jpg/image_{:05d}.jpg"


def classnames() -> list[str]:
    text = (
        resources.files("vlmgrid.benchmarks").joinpath("data/flowers102_classnames.json").read_text("utf-8")
    )
    return json.loads(text)


# ---------------------------------------------------------------------------------------------- adapter


def _mat_vector(path: Path, key: str) -> np.ndarray:
    import scipy.io

    try:
        content = scipy.io.loadmat(path)
    except Exception as exc:  # scipy raises ValueError, OSError, TypeError... for damaged files
        raise VlmgridError(
            f"{path}: not a readable .mat file ({exc}); delete it and run prepare again"
        ) from None
    if key not in content:
        raise VlmgridError(
            f"{path}: has no `{key}` array; it is not the published {path.name}: re-download it"
        )
    return np.asarray(content[key]).ravel().astype(np.int64)


def _split(raw_dir: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(labels of images 1..N, the test image numbers, the class names) from the two .mat files."""
    labels = _mat_vector(raw_file(raw_dir, LABELS), "labels")
    setid = raw_file(raw_dir, SETID)
    test_ids = _mat_vector(setid, "tstid")
    names = classnames()
    if labels.size == 0 or labels.min() < 1 or labels.max() > len(names):
        raise VlmgridError(
            f"{raw_dir / LABELS}: labels must lie in 1..{len(names)}; it is not the published file: "
            "re-download it"
        )
    if test_ids.size and (test_ids.min() < 1 or test_ids.max() > labels.size):
        raise VlmgridError(
            f"{setid}: `tstid` names images outside 1..{labels.size} (imagelabels.mat); the two files do "
            "not match: re-download them"
        )
    # The label space is 1..max(label): all 102 classes for the real files, the first `classes` for a fixture.
    return labels, test_ids, names[: int(labels.max())]


def _records(labels: np.ndarray, test_ids: np.ndarray, classes: list[str]) -> Adapted:
    rows = []
    for number in test_ids:
        index = int(labels[number - 1]) - 1
        name = IMAGE_NAME.format(int(number))
        rows.append(classification_record(Path(name).stem, f"images/{name}", classes, index))
    return Adapted(records=pd.DataFrame(rows), classes=classes)


def adapt_archive(raw_dir: Path, bench_dir: Path) -> Adapted:
    archive = raw_file(raw_dir, ARCHIVE)
    labels, test_ids, classes = _split(raw_dir)
    names = {IMAGE_NAME.format(int(i)) for i in test_ids}
    extract_images(archive, "r:*", {name: name for name in names}, bench_dir, ".tgz archive", "setid.mat")
    return _records(labels, test_ids, classes)


def adapt_folder(raw_dir: Path, bench_dir: Path) -> Adapted:
    """The archive extracted beside the .mat files: jpg/image_%05d.jpg read in place (only the test
    images)."""
    labels, test_ids, classes = _split(raw_dir)
    names = sorted({IMAGE_NAME.format(int(i)) for i in test_ids})
    missing = [name for name in names if not (Path(raw_dir) / name).is_file()]
    if missing:
        raise VlmgridError(
            f"{Path(raw_dir) / missing[0]}: missing, though setid.mat lists it as a test image "
            f"({len(missing)} missing in all); extract all of {ARCHIVE} there"
        )
    for name in names:
        image = within(Path(raw_dir) / "jpg", Path(name).name, f"setid.mat's test image {Path(name).name}")
        fileio.write_bytes(
            Path(bench_dir) / "images" / name, read_bytes(image, f"extract {ARCHIVE} there again")
        )
    return _records(labels, test_ids, classes)


LAYOUTS = (
    Layout(f"{ARCHIVE} archive", "", (ARCHIVE,), (ARCHIVE, LABELS, SETID), adapt_archive),
    Layout(
        "extracted jpg/ folder", "", ("jpg/image_*.jpg",), ("jpg/image_*.jpg", LABELS, SETID), adapt_folder
    ),
)


KIND = classification_kind(
    "flowers102",
    description=(
        "Oxford Flowers-102: zero-shot classification of the 6,149 test images into 102 flower species."
    ),
    templates=("a photo of a {c}, a type of flower.",),
    url_files=(
        {
            "url": "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/102flowers.tgz",
            "md5": "52808999861908f626f3c1f4e79d11fa",
            "name": ARCHIVE,
        },
        {
            "url": "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/imagelabels.mat",
            "md5": "e0620be6f572b9609742df49c70aed4d",
            "name": LABELS,
        },
        {
            "url": "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/setid.mat",
            "md5": "a5357ecc9cb78c4bef273ce3793fc85c",
            "name": SETID,
        },
    ),
    expected_count=6149,
    class_count=102,
    **layout_fields(LAYOUTS, "Flowers-102"),
)

adapt = KIND.adapt  # reads the one layout the folder holds (LAYOUTS)
