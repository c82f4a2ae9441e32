"""MMVP (CLIP-blind pairs, two-option multiple choice) from the hub copy MMVP/MMVP.

Raw layout (the hub repo, an image folder): Questions.csv with columns Index (1-based), Question, Options
("(a) X (b) Y"), Correct Answer ("(a)" / "(b)"), and "MMVP Images/<Index>.jpg", 300 questions in 150
pairs: rows (1, 2), (3, 4), ... ask the same question of two images with opposite answers. (The repo also
holds Questions.xlsx and a README, not read.)

Label corrections: four labels of the original copy are wrong (lmms-eval issue 1018; the corrected copy
lmms-lab-eval/MMVP has them). They are applied here as data, by 1-based Index, after checking that the row
holds the expected options; a row that already has the corrected label is left alone.
Records: id = str(Index), pair_id = (Index + 1) // 2, label_corrected (bool).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from PIL import Image

from vlmgrid import fileio
from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import ImageStore, find_raw
from vlmgrid.errors import VlmgridError

QUESTIONS = "Questions.csv"
IMAGE_DIR = "MMVP Images"
IMAGE_PATTERN = f"{IMAGE_DIR}/*.jpg"
HEADER = ("Index", "Question", "Options", "Correct Answer")
OPTIONS = re.compile(r"^\s*\(a\)\s*(.*?)\s*\(b\)\s*(.*?)\s*$", re.IGNORECASE | re.DOTALL)
LABEL = re.compile(r"^\s*\(([ab])\)", re.IGNORECASE)
# 1-based Index -> (options (a), (b) the row must hold, the original label, the corrected label).
CORRECTIONS: dict[int, tuple[tuple[str, str], str, str]] = {
    99: (("Long", "Short"), "a", "b"),
    100: (("Long", "Short"), "b", "a"),
    279: (("Standing", "Sitting"), "a", "b"),
    280: (("Standing", "Sitting"), "b", "a"),
}
IMAGE_SIZE = 64


# ---------------------------------------------------------------------------------------------- fixture

def _direction(rng, first: bool):
    image, draw = fx.canvas(IMAGE_SIZE, (235, 235, 235))
    fx.draw_shape(draw, "arrow", 32, 32, 22, fx.COLOURS["black"])
    if not first:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)  # the arrow points left
    return image, "Is the arrow pointing to the right or to the left?", ("Right", "Left")


def _colour(rng, first: bool):
    image, draw = fx.canvas(IMAGE_SIZE, (240, 240, 240))
    fx.draw_shape(draw, "circle", 32, 32, 20, fx.COLOURS["red" if first else "blue"])
    return image, "Is the ball red or blue?", ("Red", "Blue")


def _count(rng, first: bool):
    image, draw = fx.canvas(IMAGE_SIZE, (245, 240, 225))
    for x in ((16, 48) if first else (12, 32, 52)):
        fx.draw_shape(draw, "star", x, 32, 9, fx.COLOURS["orange"])
    return image, "Are there two stars or three stars?", ("Two", "Three")


def _length(rng, first: bool):  # the pair the corrections 99/100 are about
    image, draw = fx.canvas(IMAGE_SIZE, (225, 235, 225))
    draw.rectangle((8, 28, 56 if first else 24, 36), fill=fx.COLOURS["white"])
    return image, "Are the elephant's tusks long or short?", ("Long", "Short")


def _pose(rng, first: bool):  # the pair the corrections 279/280 are about
    image, draw = fx.canvas(IMAGE_SIZE, (230, 230, 245))
    fx.draw_label(draw, "STAND" if first else "SIT", 32, 24, size=14)
    return image, "Is the person standing or sitting?", ("Standing", "Sitting")


PAIR_MAKERS = (_direction, _colour, _count)
# Pairs whose published labels are wrong: the fixture draws the truth and writes the original (wrong) labels.
FIXED_PAIRS = {50: _length, 140: _pose}  # pair 50 = Index 99, 100; pair 140 = Index 279, 280


def _pair(pair_id: int, rng) -> list[tuple[Any, str, tuple[str, str], str]]:
    """The two items of a pair: (image, question, options, label) each."""
    if pair_id in FIXED_PAIRS:
        maker = FIXED_PAIRS[pair_id]
        first_index = 2 * pair_id - 1
        items = []
        for first, index in ((False, first_index), (True, first_index + 1)):  # Index 99 is short, 100 long
            image, question, options = maker(rng, first)
            items.append((image, question, options, CORRECTIONS[index][1]))
        return items
    maker = PAIR_MAKERS[rng.randrange(len(PAIR_MAKERS))]
    swap = rng.random() < 0.5
    items = []
    for first in ((False, True) if swap else (True, False)):
        image, question, options = maker(rng, first)
        items.append((image, question, options, "a" if first else "b"))
    return items


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """`size` pairs (2 * size rows); pairs 50 and 140 carry the four published wrong labels, as the hub copy does."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    broken = fx.pick_corrupt(seed, list(range(1, 2 * size + 1)), corrupt, "images")
    rng = fx.rng_for(seed, "mmvp")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    for pair_id in range(1, size + 1):
        for k, (image, question, options, label) in enumerate(_pair(pair_id, rng)):
            index = 2 * pair_id - 1 + k
            data = fx.encode(image, "JPEG")
            fileio.write_bytes(Path(raw_dir) / IMAGE_DIR / f"{index}.jpg", fx.truncate(data) if index in broken else data)
            writer.writerow((index, question, f"(a) {options[0]} (b) {options[1]}", f"({label})"))
    fileio.write_bytes(Path(raw_dir) / QUESTIONS, buffer.getvalue().encode("utf-8"))


# ---------------------------------------------------------------------------------------------- adapter

def _read_questions(path: Path) -> list[dict[str, str]]:
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise VlmgridError(f"{path}: not readable UTF-8 text ({exc}); delete it and run prepare again") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in HEADER if c not in (reader.fieldnames or [])]
    if missing:
        raise VlmgridError(f"{path}: has no column {missing[0]!r} (it has {reader.fieldnames}); the file is not MMVP's Questions.csv: check the source")
    return [row for row in reader if any((v or "").strip() for v in row.values() if isinstance(v, str))]


def correct_label(index: int, options: tuple[str, str], label: str, where: str) -> tuple[str, bool]:
    """The label after the known corrections, and whether one was applied."""
    if index not in CORRECTIONS:
        return label, False
    expected, original, corrected = CORRECTIONS[index]
    if tuple(o.strip().lower() for o in options) != tuple(o.lower() for o in expected):
        raise VlmgridError(
            f"{where}: the label correction for Index {index} expects options (a) {expected[0]} (b) {expected[1]}, "
            f"but the row has (a) {options[0]} (b) {options[1]}; this is another MMVP version: check the source"
        )
    if label == corrected:
        return label, False
    if label != original:  # pragma: no cover - two options: a label is either one
        raise VlmgridError(f"{where}: label ({label}) is neither the original nor the corrected one")
    return corrected, True


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    path = find_raw(raw_dir, QUESTIONS)[0]
    store = ImageStore(bench_dir)
    rows = []
    for n, row in enumerate(_read_questions(path)):
        where = f"{path} row {n + 2}"
        try:
            index = int(str(row["Index"]).strip())
        except ValueError:
            raise VlmgridError(f"{where}: Index {row['Index']!r} is not an integer; re-download the file") from None
        match = OPTIONS.match(row["Options"] or "")
        if not match:
            raise VlmgridError(f"{where}: Options {row['Options']!r} is not \"(a) X (b) Y\"; re-download the file")
        options = (match.group(1), match.group(2))
        label_match = LABEL.match(row["Correct Answer"] or "")
        if not label_match:
            raise VlmgridError(f"{where}: Correct Answer {row['Correct Answer']!r} is not (a) or (b); re-download the file")
        label, corrected = correct_label(index, options, label_match.group(1).lower(), where)
        image_path = raw_dir / IMAGE_DIR / f"{index}.jpg"
        if not image_path.is_file():
            raise VlmgridError(f"{image_path}: missing (Index {index} of {path}); re-download the image folder")
        answer_index = "ab".index(label)
        rows.append(
            {
                "id": str(index),
                "image": store.add({"bytes": image_path.read_bytes(), "path": f"{IMAGE_DIR}/{image_path.name}"}, where),
                "question": row["Question"],
                "options": list(options),
                "answer": options[answer_index],
                "answer_index": answer_index,
                "pair_id": (index + 1) // 2,
                "label_corrected": corrected,
            }
        )
    sizes = pd.Series([r["pair_id"] for r in rows]).value_counts() if rows else pd.Series(dtype=int)
    broken = sizes[sizes != 2]
    if len(broken):
        raise VlmgridError(
            f"{path}: pair {int(broken.index[0])} (Index {2 * int(broken.index[0]) - 1}, {2 * int(broken.index[0])}) has "
            f"{int(broken.iloc[0])} row(s), not 2; MMVP is scored by pairs: re-download the file"
        )
    return Adapted(records=pd.DataFrame(rows))


KIND = register(
    BenchmarkKind(
        name="mmvp",
        protocol="multiple_choice",
        metric="mmvp",
        breakdown_by=(),
        description="MMVP: 150 pairs of CLIP-blind images, the same two-option question each (300 items, scored by pairs).",
        templates=(),
        expected_count=300,
        raw_files=(QUESTIONS, IMAGE_PATTERN),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 10, "corrupt": 0},
        parser="letter",
        # sha: hub cache snapshot datasets--MMVP--MMVP/snapshots/37eafecab8a3940c50c2ade5b36de69dbc99a8cf (also
        # `hf download MMVP/MMVP --repo-type dataset --revision 37eafeca...` in public setup scripts).
        hub={"repo": "MMVP/MMVP", "revision": "37eafecab8a3940c50c2ade5b36de69dbc99a8cf"},
    )
)
