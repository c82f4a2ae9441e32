"""The Kaleidoscope recipes against the authors' own prompt builders, item by item.

tests/recipes/authors/kaleidoscope/builders.json holds 36 items (one with a picture and one without in each of
the 18 languages, some with a stray "<image>" in their text) and what the authors' builders return for each
(israfelsr/kaleidoscope: model_zoo.py's create_*_prompt, the ocr-experiments branch's closed-model parsers).
The items are written as the hub copy's parquet file and data.zip, prepared, and asked of a model under each
family's recipe: `vlmgrid inputs` must show the authors' string (Qwen2.5-VL, Molmo, Pangea: written by hand
for vLLM or the processor), or the authors' chat messages (Aya Vision, the API models).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from vlmgrid.config import validate_config

REPO = Path(__file__).resolve().parents[2]
BUILDERS = json.loads(
    (Path(__file__).parent / "authors" / "kaleidoscope" / "builders.json").read_text("utf-8")
)
API = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
MODELS = {
    "qwen": {
        "backend": "hf",
        "source": {"type": "fixture", "family": "qwen2_5_vl"},
        "recipe": "kaleidoscope-qwen2.5-vl",
    },
    "molmo": {
        "backend": "hf",
        "source": {"type": "fixture", "family": "llava"},
        "recipe": "kaleidoscope-molmo",
    },
    "pangea": {
        "backend": "hf",
        "source": {"type": "fixture", "family": "llava_next_vicuna"},
        "recipe": "kaleidoscope-pangea",
    },
    "aya": {
        "backend": "hf",
        "source": {"type": "fixture", "family": "aya_vision"},
        "recipe": "kaleidoscope-aya-vision",
    },
    "aya-api": {"backend": "openai", **API, "recipe": "kaleidoscope-aya-vision"},
    "openai": {"backend": "openai", **API, "recipe": "kaleidoscope-api"},
    "claude": {"backend": "openai", **API, "recipe": "kaleidoscope-claude"},
}


def _raw_copy(folder: Path) -> None:
    """The items as the hub copy holds them: data/train-*.parquet, the pictures in data.zip under
    final_data/."""
    from vlmgrid.benchmarks.kaleidoscope import ARCHIVE, ARCHIVE_ROOT, FEATURES, SCHEMA
    from vlmgrid.benchmarks.rawio import write_hub_parquet

    rows, members = [], {}
    for n, entry in enumerate(BUILDERS):
        item = entry["item"]
        if item["image"]:
            buffer = io.BytesIO()
            Image.new("RGB", (40 + n, 24), (n * 7 % 256, 90, 160)).save(buffer, format="PNG")
            members[ARCHIVE_ROOT + item["image"]] = buffer.getvalue()
        rows.append(
            {
                "language": item["language"],
                "country": "x",
                "file_name": "exam.pdf",
                "source": "s",
                "license": "CC BY 4.0",
                "level": "Secondary",
                "category_en": "Mathematics",
                "category_original_lang": "Mathematics",
                "original_question_num": str(n),
                "question": item["question"],
                "options": item["options"],
                "answer": item["answer"],
                "image_png": None,
                "image_information": None,
                "image_type": None,
                "parallel_question_id": None,
                "image": item["image"],
                "general_category_en": "STEM",
            }
        )
    write_hub_parquet(folder / "data" / "train-00000-of-00001.parquet", SCHEMA, rows, FEATURES)
    with zipfile.ZipFile(folder / ARCHIVE, "w") as archive:
        for name, data in sorted(members.items()):
            archive.writestr(name, data)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    from vlmgrid.stages.fetch import fetch
    from vlmgrid.stages.prepare import prepare

    root = tmp_path_factory.mktemp("kaleidoscope")
    raw = root / "raw"
    raw.mkdir()
    _raw_copy(raw)
    config = validate_config(
        {
            "data_dir": str(root / "data"),
            "results_dir": str(root / "results"),
            "prompts_dir": str(REPO / "config" / "prompts"),
            "benchmarks": {
                "kaleidoscope": {
                    "kind": "kaleidoscope",
                    "source": {"type": "local", "path": str(raw), "expected_items": 36},
                }
            },
            "models": MODELS,
            "grid": {"models": list(MODELS), "benchmarks": ["kaleidoscope"]},
        },
        source=root / "config.yaml",
    )
    prepare(config, "kaleidoscope")
    for model, settings in MODELS.items():
        if settings["backend"] == "hf":
            fetch(config, model)
    return config


def _inputs(config, model: str) -> list[dict]:
    from vlmgrid.stages.inputs import cell_inputs

    out = io.StringIO()
    cell_inputs(config, model, "kaleidoscope", out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["id"] for line in lines] == [f"train-{n}" for n in range(len(BUILDERS))]
    return lines


@pytest.mark.parametrize("model", ["qwen", "molmo", "pangea"])
def test_the_hand_written_strings_are_the_authors(grid, model):
    lines = _inputs(grid, model)
    equal = sum(line["text"] == entry["authors"][model] for line, entry in zip(lines, BUILDERS))
    assert equal == 36, next(
        (line["text"], entry["authors"][model])
        for line, entry in zip(lines, BUILDERS)
        if line["text"] != entry["authors"][model]
    )
    # the authors sampled: temperature 0.7, top-p 0.9, 1,024 new tokens; through vLLM (Qwen, Molmo) with its
    # SamplingParams defaults for the rest (no top-k limit, no repetition penalty: model_utils.py query_vllm),
    # through transformers' generate (Pangea) with the checkpoint's
    sampling = {"do_sample": True, "max_new_tokens": 1024, "seed": 0, "temperature": 0.7, "top_p": 0.9}
    if model != "pangea":
        sampling.update(top_k=0, repetition_penalty=1.0)
    assert {json.dumps(line["generation"], sort_keys=True) for line in lines} == {
        json.dumps(sampling, sort_keys=True)
    }
    assert all(line["variant"] == "json" for line in lines)


def _parts(message: dict) -> list:
    """A message's content as (kind, text) parts, adjacent text parts joined (an API reads them as one
    text)."""
    content = message["content"]
    if isinstance(content, str):
        return [("text", content)]
    parts: list = []
    for part in content:
        if part.get("type") == "text":
            if parts and parts[-1][0] == "text":
                parts[-1] = ("text", parts[-1][1] + part["text"])
            else:
                parts.append(("text", part["text"]))
        else:
            parts.append(("image", (part.get("image_url") or {}).get("detail")))
    return parts


@pytest.mark.parametrize(
    "model, authors, detail",
    [("openai", "openai", "low"), ("claude", "claude", None), ("aya-api", "aya", None)],
)
def test_the_api_messages_are_the_authors(grid, model, authors, detail):
    for line, entry in zip(_inputs(grid, model), BUILDERS):
        theirs = entry["authors"][authors]
        if authors == "claude":  # Anthropic's image block: the same place in the content, no detail
            theirs = [
                theirs[0],
                {
                    **theirs[1],
                    "content": [
                        {"type": "image_url", "image_url": {}} if part["type"] == "image" else part
                        for part in theirs[1]["content"]
                    ],
                },
            ]
        ours = line["messages"]
        assert [message["role"] for message in ours] == [message["role"] for message in theirs]
        assert [_parts(message) for message in ours] == [
            [(kind, detail if kind == "image" else value) for kind, value in _parts(message)]
            for message in theirs
        ]
        assert line["text"] is None
        assert (line["image"] is None) == (entry["item"]["image"] is None)


def test_aya_through_transformers_renders_the_authors_messages(grid):
    from transformers import AutoProcessor

    from vlmgrid import paths

    processor = AutoProcessor.from_pretrained(paths.model_dir(grid.data_dir, "aya"))
    for line, entry in zip(_inputs(grid, "aya"), BUILDERS):
        system, user = entry["authors"]["aya"]
        messages = [
            {"role": "system", "content": [{"type": "text", "text": system["content"]}]},
            {
                "role": "user",
                "content": [
                    {"type": "image"} if part["type"] == "image_url" else part for part in user["content"]
                ],
            },
        ]
        assert line["text"] == processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        assert line["generation"]["temperature"] == 0.3 and "top_p" not in line["generation"]
