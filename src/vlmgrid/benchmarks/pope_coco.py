"""POPE from its original label files, as RUCAIBox/POPE publishes them and LLaVA's evaluation uses them.

Raw layout (a `local` folder, laid out as LLaVA's and InternVL's evaluation instructions build it):
  coco/coco_pope_random.json, coco/coco_pope_popular.json, coco/coco_pope_adversarial.json
      JSON lines, one question each: {"question_id": 1, "image": "COCO_val2014_000000310196.jpg",
      "text": "Is there a snowboard in the image?", "label": "yes"}
  val2014/COCO_val2014_*.jpg
      the COCO 2014 validation images the questions name (http://images.cocodataset.org/zips/val2014.zip)

POPE's repository (RUCAIBox/POPE, now AoiDragon/POPE, `output/coco/`) holds 3,000 questions per split;
LLaVA-1.5 published its POPE scores on LLaVA's own copy of these files, whose random split has 2,910
(8,910 in all): the published variant `llava`, known by its count (a source may also name it with
`expected_items: 8910`), a whole copy, never a partial one. Records are those of the `pope` kind
(ids "<split>-<question_id>", the same columns), so the metric, parser and tables are POPE's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from vlmgrid.benchmarks import pope
from vlmgrid.benchmarks.kinds import Adapted
from vlmgrid.benchmarks.rawio import ImageStore, find_raw, read_bytes, read_text, within
from vlmgrid.benchmarks.records import yes_no_record
from vlmgrid.errors import VlmgridError

LABEL_FILE = "coco/coco_pope_{split}.json"
IMAGE_FOLDER = "val2014"


def _questions(path: Path) -> list[tuple[dict, str]]:
    questions = []
    # lines end at "\n" only: splitlines() would also cut at a U+2028 or U+0085 that a JSON string holds raw
    for n, line in enumerate(read_text(path, "download the label file again").split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            question = json.loads(line)
        except (ValueError, RecursionError):
            raise VlmgridError(
                f"{where}: not a JSON object; the label file is damaged: download it again"
            ) from None
        missing = [
            key
            for key in ("question_id", "image", "text", "label")
            if not isinstance(question, dict) or key not in question
        ]
        if missing:
            raise VlmgridError(
                f"{where}: has no `{missing[0]}`; the file is not a POPE label file: check the source"
            )
        questions.append((question, where))
    return questions


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    images = Path(raw_dir) / IMAGE_FOLDER
    rows = []
    for split in pope.SPLITS:
        for question, where in _questions(find_raw(raw_dir, LABEL_FILE.format(split=split))[0]):
            answer = str(question["label"]).strip().lower()
            if answer not in ("yes", "no"):
                raise VlmgridError(
                    f"{where}: label {question['label']!r} is not yes/no; the file is damaged or not POPE: "
                    "download it again"
                )
            name = str(question["image"])
            image_path = within(images, name, f"{where} (its image)")
            if not image_path.is_file():
                raise VlmgridError(
                    f"{image_path}: missing, though {where} asks about it; put the COCO 2014 validation "
                    f"images (val2014.zip) in {images}"
                )
            rows.append(
                {
                    **yes_no_record(
                        f"{split}-{question['question_id']}",
                        store.add(
                            {
                                "bytes": read_bytes(
                                    image_path, "put a readable copy of the COCO image there"
                                ),
                                "path": name,
                            },
                            where,
                        ),
                        str(question["text"]),
                        answer,
                    ),
                    "split": split,
                    "category": split,
                    "image_source": Path(name).stem,
                    "question_id": str(question["question_id"]),
                }
            )
    return Adapted(records=pd.DataFrame(rows))


# The same benchmark as `pope` (metric, breakdown, count) read from other files.
KIND = dataclasses.replace(
    pope.KIND,
    name="pope_coco",
    description=(
        "POPE from its original COCO label files (coco_pope_<split>.json + val2014 images), as LLaVA "
        "evaluates it."
    ),
    raw_files=tuple(LABEL_FILE.format(split=split) for split in pope.SPLITS) + (f"{IMAGE_FOLDER}/*",),
    adapt=adapt,
    parser="pope",
    hub=None,
    # The label files are on GitHub and the images in COCO's val2014.zip (6 GB): point a `local` source at
    # them.
    local_only=True,
    variants={
        "llava": 8910
    },  # LLaVA-1.5's copy (playground/data/eval/pope), its random split 2,910 questions
)
