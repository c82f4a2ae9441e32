"""ScienceQA-IMG (multiple choice) from the hub copy lmms-lab/ScienceQA, config `ScienceQA-IMG`, split test.

Raw layout (the hub repo): ScienceQA-IMG/test-00000-of-00001.parquet, 2,017 rows, columns image (struct
{bytes, path}), question, choices (list), answer (0-based index), hint, task, grade, subject, topic,
category, skill, lecture, solution. Records keep the question as the question; hint/subject/grade/... are
metadata (a protocol decides how to use the hint). Items have no id column: ids are "test-<row>".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows, write_hub_parquet
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "ScienceQA-IMG/test-*.parquet"
FIXTURE_FILE = "ScienceQA-IMG/test-00000-of-00001.parquet"
TEXT_COLUMNS = ("question", "hint", "task", "grade", "subject", "topic", "category", "skill", "lecture", "solution")
COLUMNS = ("image", "question", "choices", "answer") + TEXT_COLUMNS[1:]
SCHEMA = pa.schema(
    [("image", IMAGE_TYPE), ("question", pa.string()), ("choices", pa.list_(pa.string())), ("answer", pa.int8())]
    + [(name, pa.string()) for name in TEXT_COLUMNS[1:]]
)
FEATURES = (
    {"image": {"_type": "Image"}, "question": {"dtype": "string", "_type": "Value"}}
    | {"choices": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}}
    | {"answer": {"dtype": "int8", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in TEXT_COLUMNS[1:]}
)
METADATA = ("hint", "subject", "grade", "topic", "category", "skill", "task")
N_CHOICES = 4
IMAGE_SIZE = 80
WORDS = ("cat", "sun", "tree", "boat", "milk", "star", "fish", "lamp")


# ---------------------------------------------------------------------------------------------- fixture

def _choices(correct: str, pool, rng) -> tuple[list[str], int]:
    options = [correct] + rng.sample([p for p in pool if p != correct], N_CHOICES - 1)
    rng.shuffle(options)
    return options, options.index(correct)


def _colour_item(rng):
    colour, shape = rng.choice(list(fx.COLOURS)), rng.choice(fx.SHAPES)
    image, draw = fx.canvas(IMAGE_SIZE, (235, 235, 235) if colour != "white" else (90, 90, 90))
    fx.draw_shape(draw, shape, 40 + rng.uniform(-5, 5), 40 + rng.uniform(-5, 5), 22, fx.COLOURS[colour])
    choices, answer = _choices(colour, list(fx.COLOURS), rng)
    meta = {"subject": "natural science", "topic": "physics", "category": "Colours", "skill": "Identify colours"}
    return image, "Which colour is the shape?", choices, answer, meta, f"The shape is {colour}."


def _shape_item(rng):
    colour, shape = rng.choice(list(fx.COLOURS)[:-2]), rng.choice(fx.SHAPES)
    image, draw = fx.canvas(IMAGE_SIZE, (240, 240, 240))
    fx.draw_shape(draw, shape, 40 + rng.uniform(-5, 5), 40 + rng.uniform(-5, 5), 24, fx.COLOURS[colour])
    choices, answer = _choices(shape, list(fx.SHAPES), rng)
    meta = {"subject": "natural science", "topic": "geometry", "category": "Shapes", "skill": "Identify shapes"}
    return image, "Which shape is shown?", choices, answer, meta, f"The picture shows a {shape}."


def _count_item(rng):
    count, shape = rng.randint(1, 5), rng.choice(fx.SHAPES)
    image, draw = fx.canvas(IMAGE_SIZE, (245, 240, 225))
    spots = rng.sample([(x, y) for x in (16, 40, 64) for y in (16, 40, 64)], count)
    for x, y in spots:
        fx.draw_shape(draw, shape, x, y, 9, fx.COLOURS["blue"])
    choices, answer = _choices(str(count), [str(n) for n in range(1, 7)], rng)
    meta = {"subject": "social science", "topic": "map skills", "category": "Counting", "skill": "Count objects on a map"}
    return image, "How many shapes are in the picture?", choices, answer, meta, f"There are {count} shapes."


def _word_item(rng):
    word = rng.choice(WORDS)
    image, draw = fx.canvas(IMAGE_SIZE, (255, 255, 240))
    fx.draw_label(draw, word, 40, 28, size=20)
    choices, answer = _choices(word, list(WORDS), rng)
    meta = {"subject": "language science", "topic": "reading", "category": "Reading", "skill": "Read a word"}
    return image, "Which word is written in the picture?", choices, answer, meta, f"The word is {word}."


ITEM_MAKERS = (_colour_item, _shape_item, _count_item, _word_item)


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """`size` items cycling through colour, shape, counting and reading questions, 4 choices each (PNG images)."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    broken = fx.pick_corrupt(seed, list(range(size)), corrupt, "images")
    rng = fx.rng_for(seed, "scienceqa")
    rows = []
    for i in range(size):
        image, question, choices, answer, meta, solution = ITEM_MAKERS[i % len(ITEM_MAKERS)](rng)
        data = fx.encode(image, "PNG")
        rows.append(
            {
                "image": {"bytes": fx.truncate(data) if i in broken else data, "path": None},
                "question": question,
                "choices": choices,
                "answer": answer,
                "hint": "Look at the picture." if rng.random() < 0.5 else "",
                "task": "closed choice",
                "grade": f"grade{rng.randint(1, 8)}",
                **meta,
                "lecture": "Look carefully at the picture before you answer.",
                "solution": solution,
            }
        )
    write_hub_parquet(Path(raw_dir) / FIXTURE_FILE, SCHEMA, rows, FEATURES)


# ---------------------------------------------------------------------------------------------- adapter

def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for path in find_raw(raw_dir, FILE_PATTERN):
        for row in iter_parquet_rows(path, COLUMNS):
            n = len(rows)
            where = f"{path} row {n}"
            choices = row["choices"]
            if not isinstance(choices, list) or len(choices) < 2:
                raise VlmgridError(f"{where}: `choices` must list at least 2 options, not {choices!r}; re-download the file")
            answer = row["answer"]
            if answer is None or not 0 <= int(answer) < len(choices):
                raise VlmgridError(f"{where}: answer index {answer!r} is outside its {len(choices)} choices; re-download the file")
            rows.append(
                {
                    "id": f"test-{n}",
                    "image": store.add(row["image"], where),
                    "question": row["question"],
                    "options": [str(c) for c in choices],
                    "answer": str(choices[int(answer)]),
                    "answer_index": int(answer),
                    **{key: row[key] if row[key] is not None else "" for key in METADATA},
                }
            )
    return Adapted(records=pd.DataFrame(rows))


KIND = register(
    BenchmarkKind(
        name="scienceqa_img",
        protocol="multiple_choice",
        metric="accuracy",
        breakdown_by=("subject",),
        description="ScienceQA-IMG: multiple-choice science questions about an image (2,017 test items, 2-5 choices).",
        templates=(),
        expected_count=2017,
        raw_files=(FILE_PATTERN,),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 20, "corrupt": 0},
        # LLaVA-1.5's reading (llava/eval/eval_science_qa.py), which CARPE's evaluation follows; an unreadable
        # answer is wrong. The ScienceQA authors' own GPT-3 script picks a random option instead.
        parser="scienceqa",
        lenient_parsers={"*": "letter"},
        # lmms-lab moved to lmms-lab-encoder in 2026 (history kept); the pin is the commit that uploaded
        # ScienceQA-IMG/ (pufanyi, "Upload dataset").
        hub={"repo": "lmms-lab/ScienceQA", "revision": "df59f11e9fd34bc02e24b4d5314bb1c86dcd21c0", "config": "ScienceQA-IMG", "split": "test"},
    )
)
