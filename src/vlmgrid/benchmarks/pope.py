"""POPE (object hallucination, yes/no) from the hub copy lmms-lab/POPE, config `Full`.

Raw layout (the hub repo): Full/{random,popular,adversarial}-*.parquet, 3,000 rows each, columns
id, question_id (restarts per split), question ("Is there a {object} in the image?"), answer ("yes"/"no"),
image_source, image (struct {bytes, path}), category. Records get ids "<split>-<question_id>".
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows, write_hub_parquet
from vlmgrid.errors import VlmgridError

SPLITS = ("random", "popular", "adversarial")
FILE_PATTERN = "Full/{split}-*.parquet"
COLUMNS = ("id", "question_id", "question", "answer", "image_source", "image", "category")
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("image_source", pa.string()),
        ("image", IMAGE_TYPE),
        ("category", pa.string()),
    ]
)
FEATURES = {name: {"dtype": "string", "_type": "Value"} for name in COLUMNS} | {"image": {"_type": "Image"}}
OBJECTS_PER_SCENE = 3
# Objects that tend to appear together, so "adversarial" (co-occurring) differs from "popular" (frequent).
GROUPS = (("circle", "ring", "star"), ("square", "diamond", "cross"), ("triangle", "hexagon", "arrow"))
IMAGE_SIZE = 96


# ---------------------------------------------------------------------------------------------- fixture

def _scenes(seed: int, n: int) -> list[list[str]]:
    rng = fx.rng_for(seed, "pope", "scenes")
    scenes = []
    for _ in range(n):
        group = list(rng.choice(GROUPS))
        objects = [rng.choice(group)]
        while len(objects) < OBJECTS_PER_SCENE:
            pool = group if rng.random() < 0.7 else list(fx.SHAPES)
            candidate = rng.choice(pool)
            if candidate not in objects:
                objects.append(candidate)
        scenes.append(objects)
    return scenes


def _scene_image(objects: list[str], rng) -> bytes:
    image, draw = fx.canvas(IMAGE_SIZE, (rng.randrange(200, 250), rng.randrange(200, 250), rng.randrange(200, 250)))
    cells = rng.sample([(0, 0), (1, 0), (0, 1), (1, 1)], len(objects))
    colours = list(fx.COLOURS.values())[:-2]
    for name, (col, row) in zip(objects, cells):
        cx, cy = 24 + 48 * col + rng.uniform(-3, 3), 20 + 48 * row + rng.uniform(-2, 2)
        fx.draw_shape(draw, name, cx, cy, 13, rng.choice(colours))
        fx.draw_label(draw, name, cx, cy + 15, size=10)
    return fx.encode(image, "JPEG")


def _negatives(split: str, present: list[str], freq: Counter, cooc: Counter, rng) -> list[str]:
    """Absent objects asked about, chosen the way POPE's three settings choose them."""
    absent = [o for o in fx.SHAPES if o not in present]
    if split == "random":
        return rng.sample(absent, OBJECTS_PER_SCENE)
    if split == "popular":  # the most frequent objects of the whole set
        return sorted(absent, key=lambda o: (-freq[o], o))[:OBJECTS_PER_SCENE]
    # adversarial: the objects that co-occur most often with the ones present
    return sorted(absent, key=lambda o: (-sum(cooc[frozenset((o, p))] for p in present), o))[:OBJECTS_PER_SCENE]


def fixture_questions(settings: Mapping[str, Any]) -> tuple[list[bytes], dict[str, list[tuple[int, str, str]]]]:
    """The fixture's scene images and, per split, `size` questions (scene, object, answer) over
    ceil(size/6) shared scenes: 3 present (yes) and 3 absent (no) objects each. Both POPE layouts write them."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    scenes = _scenes(seed, math.ceil(size / (2 * OBJECTS_PER_SCENE)))
    freq = Counter(o for scene in scenes for o in scene)
    cooc = Counter(frozenset(pair) for scene in scenes for pair in combinations(scene, 2))
    broken = fx.pick_corrupt(seed, list(range(len(scenes))), corrupt, "scene images")
    draw_rng = fx.rng_for(seed, "pope", "draw")
    images = []
    for s, objects in enumerate(scenes):
        data = _scene_image(objects, draw_rng)
        images.append(fx.truncate(data) if s in broken else data)
    questions: dict[str, list[tuple[int, str, str]]] = {}
    for split in SPLITS:
        rng = fx.rng_for(seed, "pope", split)
        asked: list[tuple[int, str, str]] = []
        for s, objects in enumerate(scenes):
            negatives = _negatives(split, objects, freq, cooc, rng)
            for yes, no in zip(objects, negatives):
                asked.extend(((s, yes, "yes"), (s, no, "no")))
        questions[split] = asked[:size]
    return images, questions


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """The fixture questions (`fixture_questions`) as the hub copy's three parquet files."""
    images, questions = fixture_questions(settings)
    row_id = 0
    for split in SPLITS:
        rows = []
        for s, obj, answer in questions[split]:
            rows.append(
                {
                    "id": str(row_id),
                    "question_id": str(len(rows) + 1),
                    "question": f"Is there a {obj} in the image?",
                    "answer": answer,
                    "image_source": f"fixture_scene_{s:06d}",
                    "image": {"bytes": images[s], "path": f"fixture_scene_{s:06d}.jpg"},
                    "category": split,
                }
            )
            row_id += 1
        write_hub_parquet(Path(raw_dir) / FILE_PATTERN.format(split=split).replace("*", "00000-of-00001"), SCHEMA, rows, FEATURES)


# ---------------------------------------------------------------------------------------------- adapter

def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for split in SPLITS:
        for path in find_raw(raw_dir, FILE_PATTERN.format(split=split)):
            for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
                where = f"{path} row {n}"
                answer = str(row["answer"] or "").strip().lower()
                if answer not in ("yes", "no"):
                    raise VlmgridError(f"{where}: answer {row['answer']!r} is not yes/no; the file is damaged or not POPE: re-download it")
                if row["question_id"] in (None, ""):
                    raise VlmgridError(f"{where}: has no question_id; the file is damaged or not POPE: re-download it")
                rows.append(
                    {
                        "id": f"{split}-{row['question_id']}",
                        "image": store.add(row["image"], where),
                        "question": row["question"],
                        "options": ["yes", "no"],
                        "answer": answer,
                        "answer_index": 0 if answer == "yes" else 1,
                        "split": split,
                        "category": row["category"],
                        "image_source": row["image_source"],
                        "question_id": str(row["question_id"]),
                    }
                )
    return Adapted(records=pd.DataFrame(rows))


KIND = register(
    BenchmarkKind(
        name="pope",
        protocol="yes_no",
        metric="pope",
        breakdown_by=("split",),
        description="POPE: yes/no questions on whether an object is in a COCO image (random, popular, adversarial negatives).",
        templates=(),
        expected_count=9000,
        raw_files=tuple(FILE_PATTERN.format(split=split) for split in SPLITS),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 10, "corrupt": 0},
        # lmms-lab moved to lmms-lab-encoder in 2026 (history kept; the hub redirects); the pin is the commit
        # that added Full/ (kcz358, "Upload dataset").
        hub={"repo": "lmms-lab/POPE", "revision": "4db1276663dfa5eb8ad16a52d24c31a09e470896", "config": "Full"},
    )
)
