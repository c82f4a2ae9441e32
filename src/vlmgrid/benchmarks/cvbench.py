"""CV-Bench (vision-centric multiple choice) from the hub copy nyu-visionx/CV-Bench.

Raw layout (the hub repo root): test_2d.parquet (type "2D": tasks Count and Relation, sources ADE20K and
COCO) and test_3d.parquet (type "3D": tasks Depth and Distance, source Omni3D), 2,638 rows in all, columns
idx, type, task, image (struct {bytes, path}), choices (list), question, prompt (the question with its
lettered choices and an instruction), answer ("(A)"), filename, source, source_dataset, ... `idx` is
numbered within each file, so records get ids "<type>-<idx>". Records keep source, task and type: the
official score averages accuracy within sources ((ADE20K + COCO) / 2 + Omni3D) / 2.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows, write_hub_parquet
from vlmgrid.errors import VlmgridError

FILES = {"2D": "test_2d.parquet", "3D": "test_3d.parquet"}
TASKS = {"2D": ("Count", "Relation"), "3D": ("Depth", "Distance")}
SOURCES = ("ADE20K", "COCO", "Omni3D")
COLUMNS = ("idx", "type", "task", "image", "choices", "question", "prompt", "answer", "source")
SCHEMA = pa.schema(
    [
        ("idx", pa.int64()),
        ("type", pa.string()),
        ("task", pa.string()),
        ("image", IMAGE_TYPE),
        ("choices", pa.list_(pa.string())),
        ("question", pa.string()),
        ("prompt", pa.string()),
        ("answer", pa.string()),
        ("filename", pa.string()),
        ("source", pa.string()),
        ("source_dataset", pa.string()),
    ]
)
FEATURES = (
    {"idx": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in ("type", "task")}
    | {"image": {"_type": "Image"}, "choices": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in ("question", "prompt", "answer", "filename", "source", "source_dataset")}
)
ANSWER = re.compile(r"^\(([A-Z])\)$")
IMAGE_SIZE = 96
INSTRUCTION = "Answer with the option's letter from the given choices directly."


# ---------------------------------------------------------------------------------------------- fixture

def _count(rng):
    shape, n = rng.choice(fx.SHAPES), rng.randint(0, 4)
    image, draw = fx.canvas(IMAGE_SIZE, (230, 235, 240))
    for x, y in rng.sample([(20, 20), (48, 20), (76, 20), (20, 70), (48, 70), (76, 70)], n):
        fx.draw_shape(draw, shape, x, y, 10, fx.COLOURS["orange"])
    start = max(0, n - rng.randint(0, 3))
    choices = [str(k) for k in range(start, start + rng.choice((4, 5, 6)))]
    plural = shape + ("es" if shape.endswith("s") else "s")
    return image, f"How many {plural} are in the image?", choices, choices.index(str(n))


def _relation(rng):
    a, b = rng.sample(fx.SHAPES, 2)
    image, draw = fx.canvas(IMAGE_SIZE, (240, 240, 230))
    if rng.random() < 0.5:
        left_first = rng.random() < 0.5
        fx.draw_shape(draw, a, 24 if left_first else 72, 48, 14, fx.COLOURS["red"])
        fx.draw_shape(draw, b, 72 if left_first else 24, 48, 14, fx.COLOURS["blue"])
        choices, correct = ["left", "right"], "left" if left_first else "right"
    else:
        above = rng.random() < 0.5
        fx.draw_shape(draw, a, 48, 24 if above else 72, 14, fx.COLOURS["red"])
        fx.draw_shape(draw, b, 48, 72 if above else 24, 14, fx.COLOURS["blue"])
        choices, correct = ["above", "below"], "above" if above else "below"
    question = (
        f"Considering the relative positions of the {a} (annotated by the red box) and the {b} (annotated by "
        f"the blue box) in the image provided, where is the {a} located with respect to the {b}?"
    )
    return image, question, choices, choices.index(correct)


def _depth(rng):
    a, b = rng.sample(fx.SHAPES, 2)
    image, draw = fx.canvas(IMAGE_SIZE, (225, 230, 240))
    near = rng.choice((a, b))
    for name, x, colour in ((a, 26, "red"), (b, 70, "blue")):
        fx.draw_shape(draw, name, x, 50, 18 if name == near else 8, fx.COLOURS[colour])
    question = (
        f"Which object is closer to the camera taking this photo, the {a} (highlighted by a red box) or the "
        f"{b} (highlighted by a blue box)?"
    )
    return image, question, [a, b], [a, b].index(near)


def _distance(rng):
    c, a, b = rng.sample(fx.SHAPES, 3)
    image, draw = fx.canvas(IMAGE_SIZE, (235, 240, 225))
    near = rng.choice((a, b))
    fx.draw_shape(draw, c, 20, 48, 10, fx.COLOURS["red"])
    for name, colour in ((a, "blue"), (b, "green")):
        fx.draw_shape(draw, name, 44 if name == near else 84, 20 if colour == "blue" else 76, 9, fx.COLOURS[colour])
    question = (
        f"Which object is closer to the {c} (highlighted by a red box), the {a} (highlighted by a blue box) or "
        f"the {b} (highlighted by a green box)?"
    )
    return image, question, [a, b], [a, b].index(near)


MAKERS = {"Count": _count, "Relation": _relation, "Depth": _depth, "Distance": _distance}


def _prompt(question: str, choices: list[str]) -> str:
    lettered = "\n".join(f"({chr(65 + i)}) {c}" for i, c in enumerate(choices))
    return f"{question} Select from the following choices.\n{lettered}\n{INSTRUCTION}"


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """`size` items per file: 2D alternates Count/Relation over ADE20K/COCO, 3D alternates Depth/Distance (Omni3D)."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    broken = fx.pick_corrupt(seed, [(t, i) for t in FILES for i in range(size)], corrupt, "images")
    for kind_type, name in FILES.items():
        rng = fx.rng_for(seed, "cvbench", kind_type)
        rows = []
        for i in range(size):
            task = TASKS[kind_type][i % 2]
            source = ("ADE20K", "COCO")[(i // 2) % 2] if kind_type == "2D" else "Omni3D"
            image, question, choices, answer = MAKERS[task](rng)
            data = fx.encode(image, "PNG")
            filename = f"img/{kind_type}/{task.lower()}/{source.lower()}_{i + 1}.png"
            rows.append(
                {
                    "idx": i,
                    "type": kind_type,
                    "task": task,
                    "image": {"bytes": fx.truncate(data) if (kind_type, i) in broken else data, "path": None},
                    "choices": choices,
                    "question": question,
                    "prompt": _prompt(question, choices),
                    "answer": f"({chr(65 + answer)})",
                    "filename": filename,
                    "source": source,
                    "source_dataset": {"ADE20K": "ADE20K Validation Set", "COCO": "COCO Validation Set", "Omni3D": "Omni3D Test Set"}[source],
                }
            )
        write_hub_parquet(Path(raw_dir) / name, SCHEMA, rows, FEATURES)


# ---------------------------------------------------------------------------------------------- adapter

def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for kind_type, name in FILES.items():
        for path in find_raw(raw_dir, name):
            for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
                where = f"{path} row {n}"
                if row["type"] != kind_type or row["task"] not in TASKS[kind_type]:
                    raise VlmgridError(
                        f"{where}: type/task {row['type']!r}/{row['task']!r} do not belong in {name} (expected type "
                        f"{kind_type}, task one of {', '.join(TASKS[kind_type])}); the file is not CV-Bench: check the source"
                    )
                if row["source"] not in SOURCES:
                    raise VlmgridError(f"{where}: source {row['source']!r} is not one of {', '.join(SOURCES)}; the file is not CV-Bench: check the source")
                choices = row["choices"]
                if not isinstance(choices, list) or len(choices) < 2:
                    raise VlmgridError(f"{where}: `choices` must list at least 2 options, not {choices!r}; re-download the file")
                match = ANSWER.match(str(row["answer"] or "").strip())
                index = ord(match.group(1)) - 65 if match else -1
                if not 0 <= index < len(choices):
                    raise VlmgridError(f"{where}: answer {row['answer']!r} is not one of its {len(choices)} choices (A)..; re-download the file")
                if row["idx"] is None:
                    raise VlmgridError(f"{where}: has no idx; re-download the file")
                rows.append(
                    {
                        "id": f"{kind_type}-{int(row['idx'])}",
                        "image": store.add(row["image"], where),
                        "question": row["question"],
                        "options": [str(c) for c in choices],
                        "answer": str(choices[index]),
                        "answer_index": index,
                        "source": row["source"],
                        "task": row["task"],
                        "type": kind_type,
                        "prompt": row["prompt"] or "",
                    }
                )
    return Adapted(records=pd.DataFrame(rows))


KIND = register(
    BenchmarkKind(
        name="cvbench",
        protocol="multiple_choice",
        metric="cvbench",
        breakdown_by=("source", "task"),
        description="CV-Bench: vision-centric multiple choice (2D count/relation on ADE20K/COCO, 3D depth/distance on Omni3D).",
        templates=(),
        expected_count=2638,
        raw_files=tuple(FILES.values()),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 8, "corrupt": 0},
        parser="cvbench",
        lenient_parsers={"*": "cvbench_lenient"},
        # The pin is the commit a public build script downloads test_2d.parquet from (with the file's sha256
        # 33196034ef4bf3265cae4a7ff5c4071b2ff1cc21123e8e285c6a91393897ecbc); that test_3d.parquet is at the
        # same commit was not checked.
        hub={"repo": "nyu-visionx/CV-Bench", "revision": "bc284db50d036958861cb60cdd7b77612052ce0d", "split": "test"},
    )
)
