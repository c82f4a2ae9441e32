"""MMVP (CLIP-blind pairs, two-option multiple choice) from the hub copy MMVP/MMVP.

Raw layout (the hub repo, an image folder): Questions.csv with columns Index (1-based), Question, Options
("(a) X (b) Y"), Correct Answer ("(a)" / "(b)"), and "MMVP Images/<Index>.jpg", 300 questions in 150
pairs: rows (1, 2), (3, 4), ... ask the same question of two images with opposite answers. (The repo also
holds Questions.xlsx and a README, not read.)

Label corrections: four labels of the original copy are wrong (lmms-eval issue 1018; the corrected copy
lmms-lab-eval/MMVP has them). They are applied here as data, by 1-based Index, after checking that the row
holds the expected options; a row that already has the corrected label is left alone.
Records: id = str(Index), pair_id = (Index + 1) // 2, label_corrected (bool), options_text (the Options cell
as the CSV writes it, which the authors' evaluation shows the model after the question).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.rawio import ImageStore, find_raw, read_bytes, read_text, within
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


# ---------------------------------------------------------------------------------------------- adapter


def _read_questions(path: Path) -> list[dict[str, str]]:
    text = read_text(path, "delete it and run prepare again")
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in HEADER if c not in (reader.fieldnames or [])]
    if missing:
        raise VlmgridError(
            f"{path}: has no column {missing[0]!r} (it has {reader.fieldnames}); the file is not MMVP's "
            "Questions.csv: check the source"
        )
    return [row for row in reader if any((v or "").strip() for v in row.values() if isinstance(v, str))]


def correct_label(index: int, options: tuple[str, str], label: str, where: str) -> tuple[str, bool]:
    """The label after the known corrections, and whether one was applied."""
    if index not in CORRECTIONS:
        return label, False
    expected, original, corrected = CORRECTIONS[index]
    if tuple(o.strip().lower() for o in options) != tuple(o.lower() for o in expected):
        raise VlmgridError(
            f"{where}: the label correction for Index {index} expects options (a) {expected[0]} (b) "
            f"{expected[1]}, but the row has (a) {options[0]} (b) {options[1]}; this is another MMVP "
            "version: check the source"
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
            raise VlmgridError(
                f"{where}: Index {row['Index']!r} is not an integer; re-download the file"
            ) from None
        match = OPTIONS.match(row["Options"] or "")
        if not match:
            raise VlmgridError(
                f'{where}: Options {row["Options"]!r} is not "(a) X (b) Y"; re-download the file'
            )
        options = (match.group(1), match.group(2))
        label_match = LABEL.match(row["Correct Answer"] or "")
        if not label_match:
            raise VlmgridError(
                f"{where}: Correct Answer {row['Correct Answer']!r} is not (a) or (b); re-download the file"
            )
        label, corrected = correct_label(index, options, label_match.group(1).lower(), where)
        image_path = within(raw_dir / IMAGE_DIR, f"{index}.jpg", f"{where} (Index {index})")
        if not image_path.is_file():
            raise VlmgridError(
                f"{image_path}: missing (Index {index} of {path}); re-download the image folder"
            )
        answer_index = "ab".index(label)
        rows.append(
            {
                "id": str(index),
                "image": store.add(
                    {
                        "bytes": read_bytes(image_path, "re-download the image folder"),
                        "path": f"{IMAGE_DIR}/{image_path.name}",
                    },
                    where,
                ),
                "question": row["Question"],
                "options": list(options),
                "options_text": row["Options"],  # as the CSV writes them: the authors' prompt shows this text
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
            f"{path}: pair {int(broken.index[0])} (Index {2 * int(broken.index[0]) - 1}, "
            f"{2 * int(broken.index[0])}) has {int(broken.iloc[0])} row(s), not 2; MMVP is scored by pairs: "
            "re-download the file"
        )
    return Adapted(records=pd.DataFrame(rows))


KIND = question_kind(
    "mmvp",
    "multiple_choice",
    metric="mmvp",
    breakdown_by=(),
    description=(
        "MMVP: 150 pairs of CLIP-blind images, the same two-option question each (300 items, scored by "
        "pairs)."
    ),
    expected_count=300,
    option_count=2,  # (a), (b)
    group_size=2,  # the two questions of a pair
    raw_files=(QUESTIONS, IMAGE_PATTERN),
    adapt=adapt,
    parser="letter",
    # sha: hub cache snapshot datasets--MMVP--MMVP/snapshots/37eafecab8a3940c50c2ade5b36de69dbc99a8cf (also
    # `hf download MMVP/MMVP --repo-type dataset --revision 37eafeca...` in public setup scripts).
    hub={"repo": "MMVP/MMVP", "revision": "37eafecab8a3940c50c2ade5b36de69dbc99a8cf"},
)
