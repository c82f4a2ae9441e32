"""The same weights answer the same through `hf` and through a served engine (`serve:` with `transformers
serve`, on the CPU), item by item, as `vlmgrid diff` compares them.

What must agree: the default grid's generative cells of llava-tiny (textvqa-fixture: short answers, generated
greedily; a classification fixture's open-world templates, answered freely) and a yes/no cell where both sides
generate (pope-fixture with `answer_mode: generate`). Both sides
render the prompt with the checkpoint's own chat template (image first, then the text), the openai backend
sends the image as a lossless PNG (the same pixels), the server loads the weights in the entry's precision
(`--dtype float32`, as `precision: fp32`), and both decode greedily to the same number of new tokens: the same
text, so `vlmgrid diff` finds no differing item. The tiny model's texts are random tokens, which any change of
prompt, pixels or dtype would change: agreement on them is not agreement by chance.

What cannot agree by construction: a cell that `hf` answers by the options' log-likelihood (pope-fixture by
default, every yes/no and multiple-choice cell of the default grid, and a classification fixture's
closed-world templates, whose class names hf scores as continuations). `transformers serve` returns no
logprobs, so the served model can only generate there; one side ranks options by their likelihood and the
other reads a generated text, and their answers are two methods' answers, not one computed twice. The test
checks that the served cell says it generated and that the two sets are still paired item by item; where one
cell holds both kinds (classification), only the closed-world templates may differ.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml
from helpers.common import REPO

from vlmgrid.cli import main
from vlmgrid.predictions import read_metadata, read_predictions
from vlmgrid.protocols.classification import classification_prompts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None,
        reason="`transformers serve` needs the pip extra transformers[serving] (fastapi, uvicorn)",
    ),
]

GENERATION = {"max_new_tokens": 8, "do_sample": False}
MODELS = ("llava-tiny", "llava-tiny-generate", "llava-tiny-served")
# llava-tiny-generate (hf, `answer_mode: generate`) runs only where hf would otherwise score the options
CELLS = {
    "textvqa-fixture": ("llava-tiny", "llava-tiny-served"),
    "caltech101-fixture": ("llava-tiny", "llava-tiny-served"),
    "pope-fixture": MODELS,
}


def served_entry(source: dict) -> dict:
    command = [
        str(Path(sys.executable).parent / "transformers"),
        "serve",
        "{model_dir}",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--device",
        "cpu",
        "--dtype",
        "float32",
    ]
    return {
        "backend": "openai",
        "source": source,
        "model": "{model_dir}",
        "max_retries": 1,
        "concurrency": 2,
        "timeout": 60,
        "cache": False,
        "generation": GENERATION,
        "serve": {
            "command": command,
            "startup_timeout": 180,
            "env": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        },
    }


def agreement_grid(small_config: dict, tmp_path: Path) -> str:
    data = copy.deepcopy(small_config)
    data["prompts_dir"] = str(REPO / "config" / "prompts")
    hf = {**data["models"]["llava-tiny"], "generation": GENERATION}
    data["models"] = {
        "llava-tiny": hf,
        "llava-tiny-generate": {**hf, "answer_mode": "generate"},
        "llava-tiny-served": served_entry(hf["source"]),
    }
    benchmarks = data["benchmarks"]
    data["benchmarks"] = {
        "textvqa-fixture": {
            **benchmarks["textvqa-fixture"],
            "source": {"type": "fixture", "seed": 0, "size": 6},
        },
        "pope-fixture": {**benchmarks["pope-fixture"], "source": {"type": "fixture", "seed": 0, "size": 4}},
        "caltech101-fixture": benchmarks["caltech101-fixture"],
    }
    data["grid"] = {"models": list(data["models"]), "benchmarks": list(data["benchmarks"])}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def diff(config: str, tmp_path: Path, bench: str, a: str, b: str) -> dict:
    out = tmp_path / f"{bench}-{a}-{b}.json"
    assert main(["diff", bench, a, b, "--config", config, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def differing(result: dict) -> list[str]:
    return [f"{item['id']}: {item['raw_a']!r} vs {item['raw_b']!r}" for item in result["items"]]


def test_hf_and_a_served_engine_agree_item_by_item(small_config, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))
    config = agreement_grid(small_config, tmp_path)
    for model in MODELS:
        assert main(["fetch-model", model, "--config", config]) == 0
    for bench, models in CELLS.items():
        assert main(["prepare", bench, "--config", config]) == 0
        for model in models:
            code = main(["infer", model, bench, "--config", config, "--no-progress"])
            assert code == 0, capsys.readouterr().err

    # what must agree: the generative cells, on texts that are not empty (an empty answer agrees with
    # anything)
    results = Path(yaml.safe_load(open(config))["results_dir"]) / "predictions"
    generated = read_predictions(results / "llava-tiny" / "textvqa-fixture.parquet")["raw"]
    assert generated.str.strip().str.len().gt(0).all(), generated.tolist()
    for bench, hf in (("textvqa-fixture", "llava-tiny"), ("pope-fixture", "llava-tiny-generate")):
        result = diff(config, tmp_path, bench, hf, "llava-tiny-served")
        assert result["n_common"] > 0 and not result["only_a"] and not result["only_b"]
        assert result["a"]["error_rows"] == result["b"]["error_rows"] == 0
        assert differing(result) == [], f"{bench}: hf and the served engine answer differently"
        assert [c["items"] for c in result["classes"]] == [0] * len(result["classes"])
        assert result["difference"] == 0

    # a classification cell: the open-world templates are generated on both sides and must agree; the
    # closed-world ones are scored by hf and generated by the served engine
    result = diff(config, tmp_path, "caltech101-fixture", "llava-tiny", "llava-tiny-served")
    assert result["n_common"] > 0 and not result["only_a"] and not result["only_b"]
    open_world = set(classification_prompts(REPO / "config" / "prompts").open)
    variants = set(read_predictions(results / "llava-tiny-served" / "caltech101-fixture.parquet")["variant"])
    assert open_world and open_world < variants
    assert [item for item in result["items"] if item["variant"] in open_world] == []

    # what cannot agree by construction: hf scores the options' likelihood, the served engine (no logprobs)
    # generates
    assert read_metadata(results / "llava-tiny" / "pope-fixture.parquet")["strategy"] != "generate"
    assert read_metadata(results / "llava-tiny-served" / "pope-fixture.parquet")["strategy"] == "generate"
    result = diff(config, tmp_path, "pope-fixture", "llava-tiny", "llava-tiny-served")
    assert result["n_common"] > 0 and not result["only_a"] and not result["only_b"]
