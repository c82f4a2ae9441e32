"""The LLaVA-NeXT and Qwen2.5-VL recipes: each family's conversation as its harness renders it, the tiny
checkpoint carrying the hub checkpoint's chat template, and each benchmark's prompt as the harness builds it
from the item (lmms-eval v0.1.0's doc_to_text for LLaVA-NeXT, VLMEvalKit's dataset build_prompt for
Qwen2.5-VL), written here from those functions' descriptions, not from the recipes."""

from __future__ import annotations

import io
import json

import pytest

from vlmgrid.config import validate_config

VICUNA = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
    "detailed, and polite answers to the user's questions."
)
FAMILIES = {
    "next-vicuna": ("llava_next_vicuna", "llava-next-vicuna"),  # model: (tiny checkpoint family, recipe)
    "next-mistral": ("llava_next", "llava-next-mistral"),
    "qwen": ("qwen2_5_vl", "qwen2.5-vl"),
}


def conversation(model: str, user: str) -> str:
    """The whole string each family's harness hands its tokenizer for one user turn with an image."""
    if model == "next-vicuna":  # LLaVA's conv_vicuna_v1
        return f"{VICUNA} USER: <image>\n{user} ASSISTANT:"
    if model == "next-mistral":  # LLaVA's conv_mistral_instruct: no system text
        return f"[INST] <image>\n{user} [/INST]"
    # Qwen2.5-VL's chat template with its default system text, the image first
    return (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        f"<|vision_start|><|image_pad|><|vision_end|>{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def lmms_eval(kind: str, record: dict) -> str:
    """lmms-eval v0.1.0's prompt of an item (its tasks' doc_to_text, with the default post_prompt where the
    task has one). MMBench has none: at that release (EvolvingLMMs-Lab/lmms-eval@39d1dad2) the letter
    instruction is in lmms_eval/tasks/mmbench/mmbench_en.yaml, a group file whose keys the mmbench_en_dev task
    does not get (lmms_eval/tasks/__init__.py register_configurable_group records only the group's task
    names), so mmbench_doc_to_text returns "hint question options" alone; commit 6bf31ea2 added it later."""
    options = list(record["options"])
    if kind == "pope":
        return f"{record['question'].strip()}\nAnswer the question using a single word or phrase."
    if kind == "mmbench":
        lines = "\n".join(f"{'ABCDE'[i]}. {option}" for i, option in enumerate(options))
        query = f"{record['question']} There are several options:\n{lines}"
        if record["hint"]:
            query = f"{record['hint']} {query}"
        return query
    context = f"Context: {record['hint']}\n" if record["hint"] else ""
    lines = "\n".join(f"{'ABCDE'[i]}. {option}" for i, option in enumerate(options))
    return (
        f"{context}{record['question']}\n{lines}\nAnswer with the option's letter from the given choices "
        "directly."
    )


def vlmevalkit(kind: str, record: dict) -> str:
    """VLMEvalKit's dataset prompt of an item: the bare question (yes/no), or Hint / Question / Options."""
    if kind == "pope":
        return record["question"]
    prompt = f"Hint: {record['hint']}\n" if record["hint"] else ""
    prompt += f"Question: {record['question']}\nOptions:\n"
    prompt += "".join(f"{'ABCDE'[i]}. {option}\n" for i, option in enumerate(record["options"]))
    return prompt + "Please select the correct answer from the options above. \n"


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    from vlmgrid.stages.fetch import fetch
    from vlmgrid.stages.prepare import prepare

    root = tmp_path_factory.mktemp("families")
    config = validate_config(
        {
            "data_dir": str(root / "data"),
            "results_dir": str(root / "results"),
            "benchmarks": {
                kind: {
                    "kind": kind if kind != "scienceqa" else "scienceqa_img",
                    "source": {"type": "fixture", "seed": 0, "size": 3},
                }
                for kind in ("pope", "mmbench", "scienceqa")
            },
            "models": {
                model: {"backend": "hf", "source": {"type": "fixture", "family": family}, "recipe": recipe}
                for model, (family, recipe) in FAMILIES.items()
            },
            "grid": {"models": list(FAMILIES), "benchmarks": ["pope", "mmbench", "scienceqa"]},
        },
        source=root / "config.yaml",
    )
    for benchmark in config.benchmarks:
        prepare(config, benchmark)
    for model in config.models:
        fetch(config, model)
    return config


def _shown(config, model: str, benchmark: str) -> dict[str, dict]:
    from vlmgrid.stages.inputs import cell_inputs

    out = io.StringIO()
    cell_inputs(config, model, benchmark, out=out)
    return {line["id"]: line for line in map(json.loads, out.getvalue().splitlines())}


@pytest.mark.parametrize("model", list(FAMILIES))
@pytest.mark.parametrize("benchmark", ["pope", "mmbench", "scienceqa"])
def test_each_family_is_asked_as_its_harness_asks_it(grid, model, benchmark):
    from vlmgrid import paths
    from vlmgrid.benchmarks import load_benchmark

    records = load_benchmark(paths.bench_dir(grid.data_dir, benchmark)).records
    kind = "pope" if benchmark == "pope" else benchmark
    prompt = vlmevalkit if model == "qwen" else lmms_eval
    shown = _shown(grid, model, benchmark)
    for record in records.to_dict("records"):
        record = {**record, "hint": record.get("hint") or ""}
        assert shown[record["id"]]["text"] == conversation(model, prompt(kind, record)), record["id"]
        assert shown[record["id"]]["prompt"] == f"recipe {FAMILIES[model][1]}"
    # lmms-eval's generation_kwargs per task; VLMEvalKit's one max_new_tokens
    expected = 2048 if model == "qwen" else {"pope": 128, "scienceqa": 16, "mmbench": 1024}[benchmark]
    assert {line["generation"]["max_new_tokens"] for line in shown.values()} == {expected}
