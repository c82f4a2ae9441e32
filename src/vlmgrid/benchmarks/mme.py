"""MME (perception and cognition, yes/no) from the hub copy lmms-lab/MME, split test.

Raw layout (the hub repo): data/test-0000N-of-00004-<hash>.parquet, 2,374 rows in all, columns question_id
(the image's path in the original release, e.g. "code_reasoning/0020.png": shared by the image's two
questions, one answered "Yes" and one "No"), image (struct {bytes, path}), question (ends "Please answer
yes or no."), answer ("Yes"/"No"), category (one of 14 subtasks). Records get ids "<question_id>#<k>", k the
question's position (0, 1) among its image's questions in file order; `image_id` keeps the question_id.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows, write_hub_parquet
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/test-*.parquet"
FIXTURE_FILE = "data/test-00000-of-00001.parquet"
COLUMNS = ("question_id", "image", "question", "answer", "category")
SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("image", IMAGE_TYPE),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("category", pa.string()),
    ]
)
FEATURES = {name: {"dtype": "string", "_type": "Value"} for name in COLUMNS} | {"image": {"_type": "Image"}}
# The 14 subtasks, spelled as in the dataset (perception: the first 10; cognition: the last 4).
CATEGORIES = (
    "existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork", "OCR",
    "commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning",
)
SUFFIX = " Please answer yes or no."
IMAGE_SIZE = 80
WORDS = ("CAT", "SUN", "TREE", "BOAT", "MILK", "STAR", "FISH", "LAMP")


# ---------------------------------------------------------------------------------------------- fixture

def _existence(rng):
    shape, other = rng.sample(fx.SHAPES, 2)
    image, draw = fx.canvas(IMAGE_SIZE, (240, 240, 240))
    fx.draw_shape(draw, shape, 40, 40, 22, fx.COLOURS[rng.choice(("red", "blue", "green"))])
    return image, f"Is there a {shape} in this image?", f"Is there a {other} in this image?"


def _count(rng):
    n = rng.randint(1, 4)
    image, draw = fx.canvas(IMAGE_SIZE, (245, 240, 225))
    for x, y in rng.sample([(16, 16), (40, 16), (64, 16), (16, 56), (40, 56), (64, 56)], n):
        fx.draw_shape(draw, "circle", x, y, 9, fx.COLOURS["blue"])
    wrong = rng.choice([k for k in range(1, 6) if k != n])
    return image, f"Are there {n} circles in this image?", f"Are there {wrong} circles in this image?"


def _color(rng):
    colour, other = rng.sample(("red", "blue", "yellow", "green", "purple", "orange"), 2)
    image, draw = fx.canvas(IMAGE_SIZE, (235, 235, 235))
    fx.draw_shape(draw, "square", 40, 40, 24, fx.COLOURS[colour])
    return image, f"Is the square {colour}?", f"Is the square {other}?"


def _ocr(rng):
    word, other = rng.sample(WORDS, 2)
    image, draw = fx.canvas(IMAGE_SIZE, (255, 255, 240))
    fx.draw_label(draw, word, 40, 28, size=20)
    return image, f'Is the word in the image "{word}"?', f'Is the word in the image "{other}"?'


MAKERS = (("existence", _existence), ("count", _count), ("color", _color), ("OCR", _ocr))


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """`size` images cycling through existence, count, color and OCR; two questions each (a yes, then a no)."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    broken = fx.pick_corrupt(seed, list(range(size)), corrupt, "images")
    rng = fx.rng_for(seed, "mme")
    per_category: Counter = Counter()
    rows = []
    for i in range(size):
        category, maker = MAKERS[i % len(MAKERS)]
        image, yes_question, no_question = maker(rng)
        data = fx.encode(image, "PNG" if category in ("OCR", "count") else "JPEG")
        data = fx.truncate(data) if i in broken else data
        ext = "png" if category in ("OCR", "count") else "jpg"
        question_id = f"{category}/{per_category[category]:04d}.{ext}"
        per_category[category] += 1
        for question, answer in ((yes_question, "Yes"), (no_question, "No")):
            rows.append(
                {
                    "question_id": question_id,
                    "image": {"bytes": data, "path": None},
                    "question": question + SUFFIX,
                    "answer": answer,
                    "category": category,
                }
            )
    write_hub_parquet(Path(raw_dir) / FIXTURE_FILE, SCHEMA, rows, FEATURES)


# ---------------------------------------------------------------------------------------------- adapter

def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    seen: Counter = Counter()
    rows = []
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            where = f"{path} row {n}"
            answer = str(row["answer"] or "").strip().lower()
            if answer not in ("yes", "no"):
                raise VlmgridError(f"{where}: answer {row['answer']!r} is not Yes/No; the file is damaged or not MME: re-download it")
            question_id = str(row["question_id"] or "").strip()
            if not question_id:
                raise VlmgridError(f"{where}: has no question_id; the file is damaged or not MME: re-download it")
            category = str(row["category"] or "")
            if category not in CATEGORIES:
                raise VlmgridError(
                    f"{where}: category {category!r} is not one of MME's 14 subtasks ({', '.join(CATEGORIES)}); "
                    f"the file is not MME: check the source"
                )
            k = seen[question_id]
            seen[question_id] += 1
            rows.append(
                {
                    "id": f"{question_id}#{k}",
                    "image": store.add(row["image"], where),
                    "question": row["question"],
                    "options": ["yes", "no"],
                    "answer": answer,
                    "answer_index": 0 if answer == "yes" else 1,
                    "category": category,
                    "image_id": question_id,
                }
            )
    return Adapted(records=pd.DataFrame(rows))


KIND = register(
    BenchmarkKind(
        name="mme",
        protocol="yes_no",
        metric="mme",
        breakdown_by=("category",),
        description="MME: yes/no perception and cognition questions over 14 subtasks, two questions per image (2,374 items).",
        templates=(),
        expected_count=2374,
        raw_files=(FILE_PATTERN,),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 8, "corrupt": 0},
        parser="mme",
        lenient_parsers={"*": "mme_lenient"},
        # sha: hub cache snapshot datasets--lmms-lab--MME/snapshots/d6c9023f017b564f7b3ccccf5348166bce8fdbcd, and a
        # public build script's pin of lmms-lab-encoder/MME (the repo's new name) to it with the 4 data/test-* files.
        hub={"repo": "lmms-lab/MME", "revision": "d6c9023f017b564f7b3ccccf5348166bce8fdbcd", "split": "test"},
    )
)
