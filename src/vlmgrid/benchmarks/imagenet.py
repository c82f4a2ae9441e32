"""ImageNet-1k (ILSVRC2012) zero-shot classification on the 50,000 validation images; two kinds, one label
space.

`imagenet`: the hub copy ILSVRC/imagenet-1k (gated: accept its terms, then set HF_TOKEN; the hf_hub source
turns a gated error into that advice). Raw layout: data/validation-000NN-of-00014.parquet, columns
image (struct {bytes, path}) and label (int: index into the 1,000 WordNet ids in sorted order). A `local`
source may point at a folder holding those parquet files.

`imagenet_ilsvrc2012`: the original ILSVRC2012 files, for a `local` source (image-net.org needs a login):
  ILSVRC2012_img_val.tar            ILSVRC2012_val_%08d.JPEG (50,000, flat)
  ILSVRC2012_devkit_t12.tar.gz      ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt
                                    (1-based ILSVRC2012_IDs, line n = image n) and data/meta.mat (`synsets`:
                                    ILSVRC2012_ID, WNID, words, gloss, num_children, ...)
Three layouts (benchmarks/layouts.py), told apart by the files present:
  the archives           ILSVRC2012_img_val.tar and the devkit (its .tar.gz or extracted
                         ILSVRC2012_devkit_t12/)
  val/ flat              the val tar extracted into val/ (val/ILSVRC2012_val_00000001.JPEG ...), and the
                         devkit
  val/ sorted by class   val/<WNID>/ILSVRC2012_val_%08d.JPEG, 1,000 folders (torchvision's ImageFolder and
                         ImageNet, CLIP_benchmark): the folder names the class, no devkit is needed
Labels: ILSVRC2012_ID -> WNID through the leaf synsets (ILSVRC2012_ID 1..1000, num_children 0) of meta.mat ->
index of that WNID in sorted order, the same index the hub `label` uses; a sorted tree's WNID is its folder's,
indexed in the 1,000 ILSVRC2012 WNIDs in sorted order (timm's imagenet_synsets.txt, read from the installed
timm), its synonyms from timm's WordNet lemmas (imagenet_synset_to_lemma.txt). All three prepare the same
records, images/ILSVRC2012_val_%08d.JPEG.

Class names and templates: open_clip's zero-shot metadata (IMAGENET_CLASSNAMES, index = sorted-WNID index;
the 80 OPENAI_IMAGENET_TEMPLATES, turned from callables into "{c}" strings), read from the installed
open_clip without importing torch. classes.json always holds all 1,000 names, fixtures included.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from vlmgrid import fileio
from vlmgrid.benchmarks.kinds import Adapted, classification_kind
from vlmgrid.benchmarks.layouts import Layout, layout_fields
from vlmgrid.benchmarks.rawio import (
    IMAGE_TYPE,
    ImageStore,
    archive_file,
    find_raw,
    iter_parquet_rows,
    read_bytes,
    within,
)
from vlmgrid.benchmarks.records import classification_record
from vlmgrid.errors import VlmgridError

N_CLASSES, N_VAL = 1000, 50000
HUB_PATTERN = "data/validation-*.parquet"
VAL_TAR, DEVKIT_TGZ, DEVKIT = (
    "ILSVRC2012_img_val.tar",
    "ILSVRC2012_devkit_t12.tar.gz",
    "ILSVRC2012_devkit_t12",
)
GROUND_TRUTH, META = "data/ILSVRC2012_validation_ground_truth.txt", "data/meta.mat"
VAL_NAME = "ILSVRC2012_val_{:08d}.JPEG"
VAL_RE = re.compile(r"ILSVRC2012_val_(\d{8})\.JPEG$")
SCHEMA = pa.schema([("image", IMAGE_TYPE), ("label", pa.int64())])


# ---------------------------------------------------------------------------------------------- names


@lru_cache(maxsize=1)
def _metadata():
    """open_clip.zero_shot_metadata, loaded from its file (importing open_clip itself would import torch)."""
    spec = importlib.util.find_spec("open_clip")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "zero_shot_metadata.py"
        if path.is_file():
            module_spec = importlib.util.spec_from_file_location(
                "_vlmgrid_open_clip_zero_shot_metadata", path
            )
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            return module
    import open_clip.zero_shot_metadata as module  # noqa: PLC0415 - the plain way, if the file trick fails

    return module


def classnames() -> list[str]:
    names = list(_metadata().IMAGENET_CLASSNAMES)
    if len(names) != N_CLASSES:
        raise VlmgridError(
            f"open_clip's IMAGENET_CLASSNAMES has {len(names)} names, not {N_CLASSES}; reinstall "
            "open_clip_torch"
        )
    return names


def templates() -> tuple[str, ...]:
    """The 80 OpenAI ImageNet templates as "{c}" strings (open_clip stores them as callables)."""
    return tuple(t("{c}") if callable(t) else str(t) for t in _metadata().OPENAI_IMAGENET_TEMPLATES)


def synonyms_from_words(names: list[str], words: list[str | None]) -> dict[str, list[str]]:
    """{class name: its other names} from WordNet lemma lists in label order ("tench, Tinca tinca").

    The lemmas that differ from the class's own name (case-insensitively) and that no other class uses as
    its name or lemma are kept; a lemma shared by two classes ("crane" the bird and the machine) would make
    an answer ambiguous, so it names neither.
    """
    lemmas = [[w.strip() for w in (entry or "").split(",") if w.strip()] for entry in words]
    owners: dict[str, set[int]] = {}
    for k, (name, own) in enumerate(zip(names, lemmas)):
        for lemma in {name.lower(), *(w.lower() for w in own)}:
            owners.setdefault(lemma, set()).add(k)
    synonyms = {}
    for k, (name, own) in enumerate(zip(names, lemmas)):
        kept = list(dict.fromkeys(w for w in own if w.lower() != name.lower() and owners[w.lower()] == {k}))
        if kept:
            synonyms[name] = kept
    return synonyms


def hub_label_names(path: Path) -> list[str] | None:
    """The `label` ClassLabel names a hub parquet file carries in its `datasets` metadata, if any."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    try:
        names = json.loads(metadata[b"huggingface"])["info"]["features"]["label"]["names"]
    except (KeyError, TypeError, ValueError):
        return None
    return [str(n) for n in names] if isinstance(names, list) and len(names) == N_CLASSES else None


# ---------------------------------------------------------------------------------------------- hub copy


def adapt_hub(raw_dir: Path, bench_dir: Path) -> Adapted:
    names = classnames()
    store = ImageStore(bench_dir)
    items = []
    label_names = None
    for path in find_raw(raw_dir, HUB_PATTERN):
        label_names = label_names or hub_label_names(path)
        for n, row in enumerate(iter_parquet_rows(path, ("image", "label"))):
            where = f"{path} row {n}"
            label = row["label"]
            if label is None or not 0 <= int(label) < N_CLASSES:
                raise VlmgridError(
                    f"{where}: label {label!r} is outside 0..{N_CLASSES - 1}; this is not the validation "
                    "split (the test split has no labels): check the files"
                )
            image = store.add(row["image"], where)
            if image is None:
                raise VlmgridError(
                    f"{where}: has no image; the file is damaged: delete it and run prepare again"
                )
            hint = (row["image"] or {}).get("path") or ""
            items.append((Path(hint).stem, image, int(label)))
    stems = [stem for stem, _, _ in items]
    use_stems = all(stems) and len(set(stems)) == len(stems)
    rows = [
        classification_record(stem if use_stems else f"validation-{k:05d}", image, names, label)
        for k, (stem, image, label) in enumerate(items)
    ]
    return Adapted(
        records=pd.DataFrame(rows), classes=names, synonyms=synonyms_from_words(names, label_names or [])
    )


# -------------------------------------------------------------------------------------------- ILSVRC2012 tree


def leaf_synsets(meta_mat: bytes | Path, where: str) -> dict[int, str]:
    """{ILSVRC2012_ID: WNID} of the 1,000 leaf synsets (ids 1..1000, num_children 0) of a devkit meta.mat."""
    return {i: wnid for i, (wnid, _) in leaf_synset_words(meta_mat, where).items()}


def leaf_synset_words(meta_mat: bytes | Path, where: str) -> dict[int, tuple[str, str]]:
    """{ILSVRC2012_ID: (WNID, words)} of the 1,000 leaf synsets; `words` is the WordNet lemma list."""
    import scipy.io

    try:
        content = scipy.io.loadmat(
            io.BytesIO(meta_mat) if isinstance(meta_mat, bytes) else meta_mat, squeeze_me=True
        )
        synsets = np.atleast_1d(content["synsets"])
        ids, wnids, children = synsets["ILSVRC2012_ID"], synsets["WNID"], synsets["num_children"]
        words = synsets["words"] if "words" in synsets.dtype.names else [""] * len(ids)
    except KeyError as exc:
        raise VlmgridError(
            f"{where}: has no `synsets` struct with field {exc}; it is not the devkit's meta.mat: "
            "re-download the devkit"
        ) from None
    except Exception as exc:  # scipy raises ValueError, OSError, TypeError... for damaged files
        raise VlmgridError(f"{where}: not a readable .mat file ({exc}); re-download the devkit") from None
    leaves = {
        int(i): (str(w), str(t))
        for i, w, t, c in zip(ids, wnids, words, children)
        if 1 <= int(i) <= N_CLASSES and int(c) == 0
    }
    if sorted(leaves) != list(range(1, N_CLASSES + 1)) or len({w for w, _ in leaves.values()}) != N_CLASSES:
        raise VlmgridError(
            f"{where}: does not hold the {N_CLASSES} leaf synsets (ILSVRC2012_ID 1..{N_CLASSES}, distinct "
            "WNIDs); re-download the devkit"
        )
    return leaves


def id_to_index(leaves: Mapping[int, str]) -> dict[int, int]:
    """ILSVRC2012_ID -> the index of its WNID among the sorted WNIDs (the hub's `label`, open_clip's
    order)."""
    order = {wnid: k for k, wnid in enumerate(sorted(leaves.values()))}
    return {ilsvrc_id: order[wnid] for ilsvrc_id, wnid in leaves.items()}


def _devkit_files(raw_dir: Path) -> tuple[bytes, bytes, str]:
    folder = raw_dir / DEVKIT
    if (folder / META).is_file() and (folder / GROUND_TRUTH).is_file():
        fix = f"extract {DEVKIT_TGZ} again"
        return read_bytes(folder / META, fix), read_bytes(folder / GROUND_TRUTH, fix), str(folder)
    archive = raw_dir / DEVKIT_TGZ
    if not archive.is_file():
        raise VlmgridError(
            f"{raw_dir}: holds neither {DEVKIT_TGZ} nor an extracted {DEVKIT}/ folder; put the ILSVRC2012 "
            "devkit there"
        )
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                name = member.name[2:] if member.name.startswith("./") else member.name
                for key in (META, GROUND_TRUTH):
                    if name == f"{DEVKIT}/{key}" and archive_file(archive, member):
                        found[key] = tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise VlmgridError(f"{archive}: not a readable .tar.gz archive ({exc}); re-download it") from None
    for key in (META, GROUND_TRUTH):
        if key not in found:
            raise VlmgridError(
                f"{archive}: has no {DEVKIT}/{key}; it is not the ILSVRC2012 task 1&2 devkit: re-download it"
            )
    return found[META], found[GROUND_TRUTH], str(archive)


def _folder_images(raw_dir: Path) -> Iterator[tuple[int, bytes]]:
    """(image number, bytes) from the val tar extracted into val/ (flat)."""
    for path in sorted((raw_dir / "val").glob("ILSVRC2012_val_*.JPEG")):
        match = VAL_RE.search(path.name)
        if match:
            within(raw_dir / "val", path.name, "the val/ folder")
            yield int(match.group(1)), read_bytes(path, f"extract {VAL_TAR} again")


def _tar_images(raw_dir: Path) -> Iterator[tuple[int, bytes]]:
    """(image number, bytes) from ILSVRC2012_img_val.tar, streamed."""
    archive = raw_dir / VAL_TAR
    try:
        with tarfile.open(archive, "r|*") as tar:
            for member in tar:
                match = VAL_RE.search(member.name)
                if match and archive_file(archive, member):
                    yield int(match.group(1)), tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise VlmgridError(f"{archive}: not a readable .tar archive ({exc}); re-download it") from None


def _ground_truth_reader(images: Callable[[Path], Iterator[tuple[int, bytes]]]):
    """The reader of a layout whose labels are the devkit's ground truth, its images from `images`."""
    return lambda raw_dir, bench_dir: _adapt_ground_truth(Path(raw_dir), Path(bench_dir), images)


def _adapt_ground_truth(
    raw_dir: Path, bench_dir: Path, images: Callable[[Path], Iterator[tuple[int, bytes]]]
) -> Adapted:
    names = classnames()
    meta, truth, where = _devkit_files(raw_dir)
    leaves = leaf_synset_words(meta, f"{where} ({META})")
    mapping = id_to_index({i: wnid for i, (wnid, _) in leaves.items()})
    words = [""] * N_CLASSES
    for i, (_, lemmas) in leaves.items():
        words[mapping[i]] = lemmas
    try:
        ids = [int(line) for line in truth.decode("utf-8-sig").split()]
    except (ValueError, UnicodeDecodeError):
        raise VlmgridError(
            f"{where}: {GROUND_TRUTH} is not a list of integers; re-download the devkit"
        ) from None
    bad = [i for i in ids if i not in mapping]
    if bad:
        raise VlmgridError(
            f"{where}: {GROUND_TRUTH} holds ILSVRC2012_ID {bad[0]}, outside 1..{N_CLASSES}; re-download the "
            "devkit"
        )
    written: set[int] = set()
    for number, data in images(raw_dir):
        if not 1 <= number <= len(ids):
            raise VlmgridError(
                f"{raw_dir}: image {VAL_NAME.format(number)} has no line in {GROUND_TRUTH} ({len(ids)} "
                "lines); the devkit and images do not match"
            )
        if number not in written:
            fileio.write_bytes(Path(bench_dir) / "images" / VAL_NAME.format(number), data)
            written.add(number)
    missing = [n for n in range(1, len(ids) + 1) if n not in written]
    if missing:
        raise VlmgridError(
            f"{raw_dir}: has no {VAL_NAME.format(missing[0])} ({len(missing)} validation images missing); "
            "the copy is incomplete"
        )
    rows = [
        classification_record(
            Path(VAL_NAME.format(n)).stem, f"images/{VAL_NAME.format(n)}", names, mapping[i]
        )
        for n, i in enumerate(ids, start=1)
    ]
    return Adapted(records=pd.DataFrame(rows), classes=names, synonyms=synonyms_from_words(names, words))


def _timm_info(name: str) -> list[str]:
    """The lines of one of timm's ImageNet info files (timm/data/_info/), read without importing timm."""
    spec = importlib.util.find_spec("timm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "data" / "_info" / name
        if path.is_file():
            return [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    raise VlmgridError(
        f"timm's data/_info/{name} is not installed, and it lists the ILSVRC2012 WNIDs a val/<WNID>/ tree "
        "needs; install timm (open_clip_torch brings it)"
    )


@lru_cache(maxsize=1)
def sorted_wnids() -> list[str]:
    """The 1,000 ILSVRC2012 WNIDs in sorted order: a hub `label`, an open_clip class index, is an index into
    it."""
    wnids = [line.strip() for line in _timm_info("imagenet_synsets.txt")]
    if len(wnids) != N_CLASSES or wnids != sorted(set(wnids)):
        raise VlmgridError(
            f"timm's data/_info/imagenet_synsets.txt does not list {N_CLASSES} distinct WNIDs in sorted "
            "order; reinstall timm"
        )
    return wnids


def _wnid_words() -> dict[str, str]:
    """{WNID: its WordNet lemma list} from timm's imagenet_synset_to_lemma.txt ("n01440764<TAB>tench, Tinca
    tinca")."""
    return dict(line.split("\t", 1) for line in _timm_info("imagenet_synset_to_lemma.txt") if "\t" in line)


def adapt_sorted(raw_dir: Path, bench_dir: Path) -> Adapted:
    """val/<WNID>/ILSVRC2012_val_%08d.JPEG: the class is the folder's WNID; no devkit is read."""
    val = Path(raw_dir) / "val"
    names, wnids = classnames(), sorted_wnids()
    index = {wnid: k for k, wnid in enumerate(wnids)}
    found: dict[int, tuple[Path, int]] = {}
    for folder in sorted(p for p in val.iterdir() if p.is_dir()):
        if folder.name not in index:
            raise VlmgridError(
                f"{folder}: {folder.name!r} is not one of the {N_CLASSES} ILSVRC2012 WNIDs; val/ must hold "
                "only the class folders"
            )
        paths = [p for p in sorted(folder.glob("ILSVRC2012_val_*.JPEG")) if VAL_RE.search(p.name)]
        if not paths:
            raise VlmgridError(
                f"{folder}: holds no ILSVRC2012_val_*.JPEG image; the class's images are missing: sort the "
                "validation images into it again"
            )
        for path in paths:
            number = int(VAL_RE.search(path.name).group(1))
            if number in found:
                raise VlmgridError(
                    f"{path}: {path.name} is also in {found[number][0].parent}; an image belongs to one "
                    "class folder: sort the validation images again"
                )
            found[number] = (path, index[folder.name])
    rows = []
    for number in sorted(found):
        path, label = found[number]
        within(val, Path(path.parent.name) / path.name, f"class folder {path.parent.name}")
        fileio.write_bytes(
            Path(bench_dir) / "images" / path.name,
            read_bytes(path, "sort the validation images into it again"),
        )
        rows.append(classification_record(path.stem, f"images/{path.name}", names, label))
    lemmas = _wnid_words()
    return Adapted(
        records=pd.DataFrame(rows),
        classes=names,
        synonyms=synonyms_from_words(names, [lemmas.get(w, "") for w in wnids]),
    )


DEVKIT_FILES = (DEVKIT_TGZ, f"{DEVKIT}/{META}", f"{DEVKIT}/{GROUND_TRUTH}")
FLAT, SORTED = "val/ILSVRC2012_val_*.JPEG", "val/n*/ILSVRC2012_val_*.JPEG"
ILSVRC_LAYOUTS = (
    Layout(f"{VAL_TAR} archive", "", (VAL_TAR,), (VAL_TAR, *DEVKIT_FILES), _ground_truth_reader(_tar_images)),
    Layout(
        "val/ folder (the val tar extracted)",
        "",
        (FLAT,),
        (FLAT, *DEVKIT_FILES),
        _ground_truth_reader(_folder_images),
    ),
    Layout("val/<WNID>/ folders (sorted by class)", "", (SORTED,), (SORTED,), adapt_sorted),
)


# ---------------------------------------------------------------------------------------------- kinds

DESCRIPTION = "ImageNet-1k: zero-shot classification of the 50,000 validation images into 1,000 classes"

KIND = classification_kind(
    "imagenet",
    description=DESCRIPTION + " (hub copy ILSVRC/imagenet-1k, gated).",
    templates=templates(),
    expected_count=N_VAL,
    class_count=N_CLASSES,
    raw_files=(HUB_PATTERN,),
    adapt=adapt_hub,
    # sha: hub cache snapshot datasets--ILSVRC--imagenet-1k/snapshots/49e2ee26f3810fb5a7536bbf732a7b07389a47b5
    # (read as data/validation*.parquet by several public projects)
    hub={
        "repo": "ILSVRC/imagenet-1k",
        "revision": "49e2ee26f3810fb5a7536bbf732a7b07389a47b5",
        "split": "validation",
    },
)

# The same benchmark as `imagenet` (templates, counts) read from the original files.
ILSVRC_KIND = dataclasses.replace(
    KIND,
    name="imagenet_ilsvrc2012",
    description=DESCRIPTION + " (the original ILSVRC2012 val tar and devkit; use a local source).",
    hub=None,
    **layout_fields(ILSVRC_LAYOUTS, "ILSVRC2012"),
    url_files=(  # image-net.org serves these only after a login: download by hand, then use a local source
        {
            "url": "https://image-net.org/data/ILSVRC/2012/ILSVRC2012_devkit_t12.tar.gz",
            "md5": "fa75699e90414af021442c21a62c3abf",
            "name": DEVKIT_TGZ,
        },
        {
            "url": "https://image-net.org/data/ILSVRC/2012/ILSVRC2012_img_val.tar",
            "md5": "29b22e2961454d5413ddabcf34fc5622",
            "name": VAL_TAR,
        },
    ),
)

adapt_ilsvrc = ILSVRC_KIND.adapt  # reads the one layout the folder holds (ILSVRC_LAYOUTS)
