"""`vlmgrid inputs`: one JSON object per request, the exact text a model is handed, and what a recipe changes
of it; the inspect page shows the same text beside each answer."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from vlmgrid.cli import main
from vlmgrid.config import validate_config

LLAVA = {"backend": "hf", "source": {"type": "fixture", "family": "llava", "seed": 0}}
SYSTEM = "A chat between a curious user and an artificial intelligence assistant."


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Small fixtures of four kinds, the tiny LLaVA with and without its recipe (and the recipe answered by
    likelihood), a CLIP model, an API model that is never called, the random baseline."""
    from helpers.common import tiny_open_clip

    from vlmgrid.stages.fetch import fetch
    from vlmgrid.stages.prepare import prepare

    root = tmp_path_factory.mktemp("inputs")
    data = {
        "data_dir": str(root / "data"),
        "results_dir": str(root / "results"),
        "infer": {"invariance_items": 0, "part_size": 64, "threads": 1},
        "benchmarks": {
            "pope": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 2}},
            "mmbench": {"kind": "mmbench", "source": {"type": "fixture", "seed": 0, "size": 2}},
            "flowers": {
                "kind": "flowers102",
                "source": {"type": "fixture", "seed": 0, "classes": 3, "size": 2},
            },
            "textvqa": {"kind": "textvqa", "source": {"type": "fixture", "seed": 0, "size": 2}},
        },
        "models": {
            "recipe": {**LLAVA, "recipe": "llava-1.5"},
            "likelihood": {**LLAVA, "recipe": "llava-1.5", "answer_mode": "likelihood"},
            "plain": {**LLAVA, "batch_size": 4},
            "clip": tiny_open_clip(0),
            "api": {
                "backend": "openai",
                "model": "m",
                "base_url": "http://127.0.0.1:9/v1",
                "system": "Be brief.",
                "image_size": 16,
            },
            "random": {"backend": "baseline"},
        },
        "grid": {
            "models": ["recipe", "likelihood", "plain", "clip", "api", "random"],
            "benchmarks": ["pope", "mmbench", "flowers", "textvqa"],
        },
    }
    path = root / "config.yaml"
    path.write_text(json.dumps(data))
    config = validate_config(data, source=path)
    for benchmark in config.benchmarks:
        prepare(config, benchmark)
    for model in ("recipe", "likelihood", "plain", "clip"):
        fetch(config, model)
    return config


def _lines(config, model: str, benchmark: str, **options) -> list[dict]:
    from vlmgrid.stages.inputs import cell_inputs

    out = io.StringIO()
    cell_inputs(config, model, benchmark, out=out, **options)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_command_prints_a_json_object_per_request(grid, capsys, tmp_path):
    assert (
        main(
            [
                "inputs",
                "recipe",
                "pope",
                "--config",
                str(grid.path),
                "--limit",
                "2",
                "--pixels",
                str(tmp_path / "px"),
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2
    assert set(lines[0]) == {"id", "variant", "text", "options", "image", "pixels", "generation", "prompt"}
    first = lines[0]
    assert first["text"].startswith(SYSTEM) and first["text"].endswith("single word or phrase. ASSISTANT:")
    assert "USER: <image>\n" in first["text"] and first["options"] is None and first["variant"] == "default"
    assert first["generation"] == {"do_sample": False, "max_new_tokens": 128}
    assert first["image"].startswith(str(grid.data_dir)) and first["prompt"] == "recipe llava-1.5"
    assert np.load(first["pixels"]).dtype == np.float32


def test_without_a_recipe_the_protocols_own_prompt_and_option_likelihood(grid):
    lines = _lines(grid, "plain", "pope")
    assert lines[0]["text"].startswith("USER: <image>\n") and lines[0]["options"] == ["yes", "no"]
    assert lines[0]["generation"] is None and lines[0]["prompt"] == "vlmgrid's own"


def test_likelihood_under_a_recipe_scores_the_options_as_the_model_writes_them(grid):
    lines = _lines(grid, "likelihood", "pope")
    assert {tuple(line["options"]) for line in lines} == {("Yes", "No")}
    assert all(line["text"].startswith(SYSTEM) for line in lines)
    assert grid.model("likelihood")["departs_from_recipe"] == [
        "answer_mode: likelihood (scores the options; the recipe reads a generated answer)"
    ]
    from vlmgrid.stages import cost, cost_text

    plan = " ".join(cost_text.render(cost.cost_table(grid)).split())
    assert "recipe llava-1.5, departing from it: answer_mode: likelihood" in plan


def test_every_variant_is_a_request_of_its_own(grid):
    lines = _lines(grid, "plain", "flowers", limit=1)
    assert len(lines) == 20 and len({line["variant"] for line in lines}) == 20  # CARPE's 20 templates
    generated = [line for line in lines if line["generation"] is not None]
    scored = [line for line in lines if line["options"] is not None]
    assert len(generated) == 10 and len(scored) == 10  # open-world generated, closed-world class names scored


def test_an_api_model_shows_its_messages(grid):
    line = _lines(grid, "api", "mmbench", limit=1)[0]
    assert line["text"] is None and line["options"] is None
    system, user = line["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    assert [part["type"] for part in user["content"]] == ["image_url", "text"]
    assert user["content"][0]["image_url"]["url"] == f"file:{line['image']}"


def test_a_model_sent_no_prompt_and_a_cell_that_cannot_run_are_one_sentence(grid, capsys):
    for benchmark in ("pope", "flowers"):  # flowers: the classifier is made of the model as the strategy is
        assert main(["inputs", "clip", benchmark, "--config", str(grid.path)]) == 2
        assert (
            f"answers {benchmark} by image-text similarity (open_clip): it is sent no prompt"
            in capsys.readouterr().err
        )
    assert main(["inputs", "clip", "textvqa", "--config", str(grid.path)]) == 2
    assert 'cannot run benchmark "textvqa"' in capsys.readouterr().err
    assert main(["inputs", "nobody", "pope", "--config", str(grid.path)]) == 2


def test_the_inspect_page_shows_what_each_model_was_handed(grid):
    from vlmgrid.stages.infer import infer_cell
    from vlmgrid.stages.inspect import build_page

    for model in ("recipe", "plain", "random"):
        infer_cell(grid, model, "mmbench", progress=False)
    # clip and api have no predictions on mmbench here: the page needs a grid of the three
    written = json.loads(grid.path.read_text())
    page = build_page(
        validate_config(
            {**written, "grid": {"models": ["recipe", "plain", "random"], "benchmarks": ["mmbench"]}},
            source=grid.path,
        ),
        "mmbench",
    )
    shown = {
        model: [answer.prompt for item in page.items for answer in item.answers[model]]
        for model in ("recipe", "plain", "random")
    }
    expected = {line["id"]: line["text"] for line in _lines(grid, "recipe", "mmbench")}
    assert [answer.prompt for item in page.items for answer in item.answers["recipe"]] == [
        expected[item.item_id] for item in page.items
    ]
    assert all(text.startswith(SYSTEM) for text in shown["recipe"])
    assert all(text.startswith("USER: <image>\n") for text in shown["plain"])
    assert shown["random"] == [None] * len(page.items)  # a baseline reads no prompt


def test_a_prompt_of_a_kind_whose_protocol_has_none_is_refused(grid, tmp_path):
    from vlmgrid.errors import VlmgridError

    data = {
        **json.loads(grid.path.read_text()),
        "grid": {"models": ["m"], "benchmarks": ["flowers"]},
        "models": {"m": {**LLAVA, "kinds": {"flowers102": {"prompt": {"user": "What?"}}}}},
    }
    config = validate_config(data, source=grid.path)
    with pytest.raises(
        VlmgridError, match="classification protocol asks with the templates of its prompt set"
    ):
        _lines(config, "m", "flowers")
