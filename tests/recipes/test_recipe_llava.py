"""LLaVA-1.5's recipe against LLaVA's own evaluation files, item by item.

Each benchmark is built in the form its authors publish it (tests/recipes/authors/README.md: POPE's label
files, MME's release folder, ScienceQA's problems and splits, MMBench's dev TSV), prepared as a user's local
copy, and asked of the tiny LLaVA (llava-hf's chat template) under `recipe: llava-1.5`. `vlmgrid inputs` must
print, for every item, the string LLaVA's evaluation handed its tokenizer: the question file's text after
"<image>\\n" in the vicuna_v1 conversation, LLaVA's system text first (llava/conversation.py: `system + "
USER: " + message + " ASSISTANT:"`). The images are placeholders of the right names; their pixels are checked
on their own below, against LLaVA's padding (expand2square) and the checkpoint's own processor.
"""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from vlmgrid.config import validate_config

REPO = Path(__file__).resolve().parents[2]
AUTHORS = Path(__file__).resolve().parent / "authors"
SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions."
)
LETTER_INSTRUCTION = "Answer with the option's letter from the given choices directly."


def vicuna_v1(message: str) -> str:
    """LLaVA's conv_vicuna_v1 prompt of one user turn with an image (SeparatorStyle.TWO, sep " ")."""
    return f"{SYSTEM} USER: <image>\n{message} ASSISTANT:"


def _lines(name: str) -> list[dict]:
    with gzip.open(AUTHORS / "llava" / name, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _picture(path: Path, size=(6, 4)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (200, 30, 60)).save(path)


# --- the benchmarks as their authors publish them -----------------------------------------------------------


def _pope(root: Path) -> Path:
    folder = root / "pope"
    for split in ("adversarial", "popular", "random"):
        with gzip.open(AUTHORS / "pope" / f"coco_pope_{split}.json.gz", "rb") as handle:
            data = handle.read()
        (folder / "coco").mkdir(parents=True, exist_ok=True)
        (folder / "coco" / f"coco_pope_{split}.json").write_bytes(data)
        for line in data.decode("utf-8").split("\n"):
            if line.strip():
                image = folder / "val2014" / json.loads(line)["image"]
                if not image.exists():
                    _picture(image)
    return folder


# MME's subtasks whose release folder keeps images/ and questions_answers_YN/ apart
NESTED = ("artwork", "celebrity", "landmark", "posters", "scene")


def _mme(root: Path) -> Path:
    """MME's release folder, its question files written from the MME eval tool's result templates, which hold
    every question of every image with its answer in the release's order (Image\tQuestion\tAnswer)."""
    folder = root / "MME_Benchmark_release_version"
    with tarfile.open(AUTHORS / "mme" / "eval_tool-Your_Results.tar.gz") as archive:
        archive.extractall(root / "eval", filter="data")
    for path in sorted((root / "eval" / "eval_tool" / "Your_Results").glob("*.txt")):
        category = path.stem
        questions = defaultdict(list)
        for line in path.read_text("utf-8").split("\n"):
            if line.strip():
                image, question, answer = line.split("\t")[:3]
                questions[image].append(f"{question}\t{answer}\n")
        for image, lines in questions.items():
            images, texts = (
                (folder / category / "images", folder / category / "questions_answers_YN")
                if category in NESTED
                else (folder / category, folder / category)
            )
            _picture(images / image)
            texts.mkdir(parents=True, exist_ok=True)
            (texts / f"{Path(image).stem}.txt").write_text("".join(lines), "utf-8")
    return folder


def _scienceqa(root: Path) -> Path:
    folder = root / "scienceqa"
    folder.mkdir()
    problems = json.loads((AUTHORS / "scienceqa" / "problems-test-image-subset.json").read_text("utf-8"))
    (folder / "problems.json").write_text(json.dumps(problems), "utf-8")
    with gzip.open(AUTHORS / "scienceqa" / "pid_splits.json.gz", "rt", encoding="utf-8") as handle:
        splits = json.load(handle)
    # the authors' test split, in its order, cut to the problems the subset holds
    splits["test"] = [pid for pid in splits["test"] if pid in problems]
    (folder / "pid_splits.json").write_text(json.dumps(splits), "utf-8")
    for pid in problems:
        _picture(folder / "images" / "test" / pid / "image.png", (9, 5))
    return folder


def _mmbench_rows() -> list[dict]:
    """The dev file's rows: index, question, options and answer as LLaVA uploaded them; the hint, which that
    upload leaves out, as LLaVA's prompt shows it (the text before the question)."""
    upload = pd.read_excel(
        AUTHORS / "llava" / "mmbench_dev_20230712_upload_llava-v1.5-13b.xlsx",
        dtype=str,
        keep_default_na=False,
    )
    prompts = {
        int(line["question_id"]): line["prompt"]
        for line in _lines("mmbench_dev_20230712_answers_llava-v1.5-13b.jsonl.gz")
    }
    rows = []
    for row in upload.to_dict("records"):
        prompt, question = prompts[int(row["index"])], row["question"]
        hint = "" if prompt.startswith(question + "\n") else prompt[: prompt.index("\n" + question + "\n")]
        rows.append({**row, "hint": hint})
    return rows


def _mmbench(root: Path) -> Path:
    folder = root / "mmbench"
    folder.mkdir()
    buffer = io.BytesIO()
    Image.new("RGB", (7, 3), (10, 120, 40)).save(buffer, format="JPEG")
    picture = base64.b64encode(buffer.getvalue()).decode("ascii")
    header = [
        "index",
        "question",
        "hint",
        "A",
        "B",
        "C",
        "D",
        "answer",
        "category",
        "image",
        "source",
        "l2-category",
        "comment",
        "split",
    ]
    with open(folder / "mmbench_dev_20230712.tsv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        writer.writerow(header)
        for row in _mmbench_rows():
            writer.writerow(
                [
                    row["index"],
                    row["question"],
                    row["hint"],
                    row["A"],
                    row["B"],
                    row["C"],
                    row["D"],
                    row["answer"],
                    "",
                    picture,
                    "",
                    "",
                    "",
                    row["split"],
                ]
            )
    return folder


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The benchmarks prepared from their authors' files, and the tiny LLaVA under recipe llava-1.5."""
    from vlmgrid.stages.fetch import fetch
    from vlmgrid.stages.prepare import prepare

    root = tmp_path_factory.mktemp("authors")
    raw = root / "raw"
    raw.mkdir()
    config = validate_config(
        {
            "data_dir": str(root / "data"),
            "results_dir": str(root / "results"),
            "prompts_dir": str(REPO / "config" / "prompts"),
            "benchmarks": {
                "pope": {
                    "kind": "pope_coco",
                    "source": {"type": "local", "path": str(_pope(raw)), "expected_items": 8910},
                },
                "mme": {"kind": "mme", "source": {"type": "local", "path": str(_mme(raw))}},
                "scienceqa": {
                    "kind": "scienceqa_img",
                    "source": {"type": "local", "path": str(_scienceqa(raw)), "expected_items": 164},
                },
                "mmbench": {"kind": "mmbench", "source": {"type": "local", "path": str(_mmbench(raw))}},
            },
            "models": {
                "llava": {
                    "backend": "hf",
                    "source": {"type": "fixture", "family": "llava", "seed": 0},
                    "recipe": "llava-1.5",
                }
            },
            "grid": {"models": ["llava"], "benchmarks": ["pope", "mme", "scienceqa", "mmbench"]},
        },
        source=root / "config.yaml",
    )
    for benchmark in config.benchmarks:
        prepare(config, benchmark)
    fetch(config, "llava")
    return config


def _inputs(config, benchmark: str, **options) -> list[dict]:
    from vlmgrid.stages.inputs import cell_inputs

    out = io.StringIO()
    cell_inputs(config, "llava", benchmark, out=out, **options)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _compare(expected: dict, shown: dict) -> tuple[int, list]:
    """(items equal, the first few that differ) of two {key: text} mappings over the same keys."""
    assert set(shown) == set(expected)
    differ = [(key, expected[key], shown[key]) for key in expected if expected[key] != shown[key]]
    return len(expected) - len(differ), differ[:3]


# --- the prompts -------------------------------------------------------------------------------------------


def test_pope_every_item_is_llavas_input(grid):
    offsets = {"adversarial": 0, "random": 10_000_000, "popular": 20_000_000}
    expected = {}
    for line in _lines("llava_pope_test.jsonl.gz"):
        expected[f"{line['category']}-{line['question_id'] - offsets[line['category']]}"] = vicuna_v1(
            line["text"]
        )
    shown = _inputs(grid, "pope")
    equal, differ = _compare(expected, {line["id"]: line["text"] for line in shown})
    assert (equal, differ) == (8910, [])
    assert {line["generation"]["max_new_tokens"] for line in shown} == {128}
    assert all(line["options"] is None and line["prompt"] == "recipe llava-1.5" for line in shown)


def test_mme_every_item_is_llavas_input(grid):
    # LLaVA names an MME image by its path in the release (artwork/images/x.jpg), vlmgrid by its subtask and
    # file (artwork/x.jpg); an image's two questions keep the release's order in both
    seen: Counter = Counter()
    expected = {}
    for line in _lines("llava_mme.jsonl.gz"):
        image = line["question_id"].replace("/images/", "/")
        expected[f"{image}#{seen[image]}"] = vicuna_v1(line["text"])
        seen[image] += 1
    equal, differ = _compare(expected, {line["id"]: line["text"] for line in _inputs(grid, "mme")})
    assert (equal, differ) == (2374, [])


def test_scienceqa_img_items_are_llavas_input(grid):
    from vlmgrid import paths
    from vlmgrid.benchmarks import load_benchmark

    with gzip.open(AUTHORS / "llava" / "llava_test_CQM-A.json.gz", "rt", encoding="utf-8") as handle:
        questions = {entry["id"]: entry for entry in json.load(handle)}
    records = load_benchmark(paths.bench_dir(grid.data_dir, "scienceqa")).records
    pid_of = dict(zip(records["id"], records["pid"]))
    shown = {pid_of[line["id"]]: line for line in _inputs(grid, "scienceqa")}
    # model_vqa_science: the file's text without "<image>", stripped; "<image>\n" before it and the letter
    # instruction after it (--single-pred-prompt)
    expected = {
        pid: vicuna_v1(
            questions[pid]["conversations"][0]["value"].replace("<image>", "").strip()
            + "\n"
            + LETTER_INSTRUCTION
        )
        for pid in shown
    }
    equal, differ = _compare(expected, {pid: line["text"] for pid, line in shown.items()})
    assert (equal, differ) == (164, [])
    assert {line["generation"]["max_new_tokens"] for line in shown.values()} == {1024}


def test_mmbench_every_row_is_llavas_input(grid):
    prompts = {
        str(line["question_id"]): line["prompt"]
        for line in _lines("mmbench_dev_20230712_answers_llava-v1.5-13b.jsonl.gz")
    }
    expected = {key: vicuna_v1(prompt + "\n" + LETTER_INSTRUCTION) for key, prompt in prompts.items()}
    shown = _inputs(grid, "mmbench")
    equal, differ = _compare(expected, {line["id"]: line["text"] for line in shown})
    assert (equal, differ) == (4377, [])
    hinted = sum(
        not prompts[line["id"]].startswith(row["question"]) for line, row in zip(shown, _mmbench_rows())
    )
    assert hinted == 322  # the rows with a hint: bare on its own line, with no "Context: " label


def test_textvqa_layout_on_questions_rebuilt_from_llavas_file(tmp_path):
    """TextVQA's release files are in no copy readable here, so its records are rebuilt from LLaVA's own file:
    the question lower-cased at its first letter as TextVQA writes its questions, the OCR tokens split at ",
    ". This checks the recipe's layout (capitalisation, the OCR line, the instruction, the conversation) on
    all 5,000 questions, not the data."""
    from vlmgrid.stages.prepare import prepare

    lines = _lines("llava_textvqa_val_v051_ocr.jsonl.gz")
    raw = tmp_path / "textvqa"
    data, ocr = [], {}
    for n, line in enumerate(lines):
        question, tokens, instruction = line["text"].split("\n")
        assert tokens.startswith("Reference OCR token: ") and instruction.startswith("Answer the question")
        listed = tokens[len("Reference OCR token: ") :]
        data.append(
            {
                "question": question[:1].lower() + question[1:],
                "image_id": line["image"][:-4],
                "question_id": n,
                "answers": ["x"] * 10,
            }
        )
        ocr[line["image"][:-4]] = listed.split(", ") if listed else []
        _picture(raw / "train_images" / line["image"])
    (raw / "TextVQA_0.5.1_val.json").write_text(json.dumps({"data": data}), "utf-8")
    (raw / "TextVQA_Rosetta_OCR_v0.2_val.json").write_text(
        json.dumps({"data": [{"image_id": image, "ocr_tokens": tokens} for image, tokens in ocr.items()]}),
        "utf-8",
    )
    config = validate_config(
        {
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "benchmarks": {"textvqa": {"kind": "textvqa", "source": {"type": "local", "path": str(raw)}}},
            "models": {
                "llava": {
                    "backend": "hf",
                    "source": {"type": "fixture", "family": "llava"},
                    "recipe": "llava-1.5",
                }
            },
            "grid": {"models": ["llava"], "benchmarks": ["textvqa"]},
        },
        source=tmp_path / "config.yaml",
    )
    prepare(config, "textvqa")
    from vlmgrid.stages.fetch import fetch

    fetch(config, "llava")
    from vlmgrid.stages.inputs import cell_inputs

    out = io.StringIO()
    cell_inputs(config, "llava", "textvqa", out=out)
    shown = [json.loads(text)["text"] for text in out.getvalue().splitlines()]
    expected = [vicuna_v1(line["text"]) for line in lines]
    assert sum(a == b for a, b in zip(expected, shown)) == 5000


# --- the pixels ---------------------------------------------------------------------------------------------


def expand2square(image: Image.Image, background: tuple[int, ...]) -> Image.Image:
    """LLaVA's padding (llava/mm_utils.py), written here from its description: the image centred on a square
    of the background colour, the odd pixel at the bottom or right."""
    width, height = image.size
    side = max(width, height)
    square = Image.new(image.mode, (side, side), background)
    square.paste(image, ((side - width) // 2, (side - height) // 2))
    return square


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    """A benchmark of non-square pictures (wide, tall, odd sides) with its MME-style questions, to look at
    pixels."""
    from vlmgrid.stages.fetch import fetch
    from vlmgrid.stages.prepare import prepare

    root = tmp_path_factory.mktemp("pictures")
    folder = root / "raw" / "MME_Benchmark_release_version"
    rng = np.random.default_rng(0)
    sizes = {"OCR": [(64, 48), (37, 90), (101, 60)], "existence": [(48, 48)]}
    for category in (
        "OCR",
        "existence",
        "count",
        "position",
        "color",
        "posters",
        "celebrity",
        "scene",
        "landmark",
        "artwork",
        "commonsense_reasoning",
        "numerical_calculation",
        "text_translation",
        "code_reasoning",
    ):
        images = sizes.get(category, [(20, 12)])
        nested = category in NESTED
        for k, (width, height) in enumerate(images):
            stem = f"{category}_{k}"
            image_dir, text_dir = (
                (folder / category / "images", folder / category / "questions_answers_YN")
                if nested
                else (folder / category, folder / category)
            )
            image_dir.mkdir(parents=True, exist_ok=True)
            text_dir.mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(image_dir / f"{stem}.png")
            (text_dir / f"{stem}.txt").write_text(
                "Is it red? Please answer yes or no.\tYes\nIs it blue? Please answer yes or no.\tNo\n"
            )
    config = validate_config(
        {
            "data_dir": str(root / "data"),
            "results_dir": str(root / "results"),
            "benchmarks": {
                "mme": {"kind": "mme", "source": {"type": "local", "path": str(folder), "expected_items": 32}}
            },
            "models": {
                "llava": {
                    "backend": "hf",
                    "source": {"type": "fixture", "family": "llava"},
                    "recipe": "llava-1.5",
                },
                "cropped": {"backend": "hf", "source": {"type": "fixture", "family": "llava"}},
            },
            "grid": {"models": ["llava", "cropped"], "benchmarks": ["mme"]},
        },
        source=root / "config.yaml",
    )
    prepare(config, "mme")
    fetch(config, "llava")
    fetch(config, "cropped")
    return config, root


def test_pixels_are_llavas_padding_then_the_checkpoints_processor(pictures):
    from transformers import AutoProcessor

    from vlmgrid import paths
    from vlmgrid.stages.inputs import cell_inputs

    config, root = pictures
    out = io.StringIO()
    cell_inputs(config, "llava", "mme", out=out, pixels_dir=root / "pixels")
    lines = [json.loads(text) for text in out.getvalue().splitlines()]
    # the checkpoint's own processor, as LLaVA ran its CLIPImageProcessor: the PIL one
    processor = AutoProcessor.from_pretrained(paths.model_dir(config.data_dir, "llava"), backend="pil")
    background = tuple(int(value * 255) for value in processor.image_processor.image_mean)
    checked = set()
    for line in lines:
        with Image.open(line["image"]) as opened:
            image = opened.convert("RGB")
        expected = processor.image_processor(images=[expand2square(image, background)], return_tensors="np")[
            "pixel_values"
        ]
        np.testing.assert_allclose(np.load(line["pixels"]), expected, atol=1e-4)
        checked.add(image.size)
    assert {(64, 48), (37, 90), (101, 60), (48, 48)} <= checked
    # every question of an image reads one pixel file: the image's
    files = defaultdict(set)
    for line in lines:
        files[line["image"]].add(line["pixels"])
    assert all(len(names) == 1 for names in files.values()) and len(files) == 16


def test_without_padding_the_processor_crops(pictures):
    from transformers import AutoProcessor

    from vlmgrid import paths
    from vlmgrid.stages.inputs import cell_inputs

    config, root = pictures
    out = io.StringIO()
    cell_inputs(config, "cropped", "mme", out=out, pixels_dir=root / "cropped-pixels", limit=6)
    processor = AutoProcessor.from_pretrained(paths.model_dir(config.data_dir, "cropped"))
    for line in map(json.loads, out.getvalue().splitlines()):
        with Image.open(line["image"]) as opened:
            image = opened.convert("RGB")
        expected = processor.image_processor(images=[image], return_tensors="np")["pixel_values"]
        np.testing.assert_allclose(np.load(line["pixels"]), expected, atol=1e-4)
        assert line["prompt"] == "vlmgrid's own" and not line["text"].startswith("A chat between")
