"""`vlmgrid plan`: the cost plan's counts against hand-computed ones, and its GPU-hours from the throughput
table."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from vlmgrid.cli import main
from vlmgrid.config import Config, validate_config
from vlmgrid.stages import cost, cost_text
from vlmgrid.stages.prepare import prepare

TABLE = cost.load_throughput()
FORWARD = TABLE["lvlm"]["rates"]["forward"]["rate"]
CONTINUATION = TABLE["lvlm"]["rates"]["continuation"]["rate"]
DECODE = TABLE["lvlm"]["rates"]["decode_tokens"]["rate"]


def repo_grid(name: str, folder) -> Config:
    """The repo's grid config `name`, with its data and results in `folder`: what a run left in the checkout
    (a prepared benchmark is counted from its records) must not change the figures."""
    data = yaml.safe_load(open(f"config/{name}.yaml", encoding="utf-8"))
    return validate_config(
        {**data, "data_dir": str(folder / "data"), "results_dir": str(folder / "results")},
        source=f"config/{name}.yaml",
    )


def rows(costs: pd.DataFrame, model: str, benchmark: str) -> dict:
    """{unit: row} of one cell (its own work, not the batch check's rows)."""
    cell = costs[(costs["model"] == model) & (costs["benchmark"] == benchmark) & (costs["per"] != "check")]
    return {row["unit"] if isinstance(row["unit"], str) else "n/a": row for _, row in cell.iterrows()}


@pytest.fixture(scope="module")
def default_costs(tmp_path_factory):
    return cost.cost_table(repo_grid("config", tmp_path_factory.mktemp("default")))


def test_default_grid_counts_the_fixtures_items(default_costs):
    # pope: 30 questions in each of its 3 splits; flowers102: 5 classes x 8 images
    pope = rows(default_costs, "llava-tiny", "pope-fixture")
    assert list(pope) == ["forward"]
    assert (pope["forward"]["items"], pope["forward"]["basis"], pope["forward"]["requests"]) == (
        90,
        "fixture",
        90,
    )
    flowers = rows(default_costs, "llava-tiny", "flowers102-fixture")
    # 10 open-world templates generated, 10 closed-world ones scoring the 5 class names
    assert flowers["generate"]["requests"] == 40 * 10
    assert flowers["forward"]["requests"] == 40 * 10
    assert flowers["continuation"]["requests"] == 40 * 10 * 5
    # CLIP: each image once, and the 80 ImageNet templates x 1,000 class names once per cell
    clip = rows(default_costs, "clip-tiny", "imagenet-fixture")
    assert clip["embed_image"]["requests"] == 8
    assert (clip["embed_text"]["per"], clip["embed_text"]["requests"]) == ("cell", 80 * 1000)


def test_default_grid_has_no_made_up_hours(default_costs):
    tiny = default_costs[
        default_costs["model"].isin(["clip-tiny", "llava-tiny"]) & (default_costs["strategy"] != "n/a")
    ]
    assert tiny["gpu_hours"].isna().all()
    assert tiny["note"].str.startswith("model size unknown: no estimate").all()
    baseline = default_costs[default_costs["model"] == "random"]
    assert (baseline["gpu_hours"] == 0).all()
    na = rows(default_costs, "clip-tiny", "textvqa-fixture")["n/a"]
    assert na["note"].startswith('n/a: model "clip-tiny"') and "short_answer protocol" in na["note"]


def test_a_total_with_no_estimate_to_add_is_unknown_never_0(default_costs):
    # the tiny models' sizes are unknown; the baseline's 0 (the CPU) and clip-tiny's n/a cell's 0 add nothing
    sums = cost.totals(default_costs).set_index("model")
    for model in ("clip-tiny", "llava-tiny", "grid"):
        assert pd.isna(sums.loc[model, "gpu_hours"]) and sums.loc[model, "rows_without_estimate"] > 0, model
    assert sums.loc["random", "gpu_hours"] == 0 and sums.loc["random", "rows_without_estimate"] == 0
    lines = {
        line.split()[0]: line.split()[1:]
        for line in cost_text.render(default_costs).split("totals:")[1].splitlines()[2:6]
    }
    assert lines["grid"][1] == "unknown" and lines["grid"][2:4] == [
        str(int(sums.loc["grid", "rows_without_estimate"])),
        "rows",
    ]
    assert lines["clip-tiny"][1] == "unknown" and lines["random"][1] == "0"


SMALL = {
    "title": "small",
    "infer": {"invariance_items": 0},  # the batch check's rows: tests/cellrun/test_invariance.py
    "benchmarks": {
        "flowers": {"kind": "flowers102", "source": {"type": "url"}},
        "dance": {"kind": "dance", "source": {"type": "fixture", "seed": 0, "size": 10}},
    },
    "models": {
        "llava-7b": {
            "backend": "hf",
            "source": {
                "type": "hf_hub",
                "repo": "llava-hf/llava-1.5-7b-hf",
                "revision": "b234b804b114d9e37bb655e11cbbb5f5e971b7a9",
            },
        },
        "mystery": {
            "backend": "hf",
            "source": {"type": "hf_hub", "repo": "someone/some-vlm", "revision": "main"},
        },
        "gpt": {
            "backend": "openai",
            "base_url": "https://api.example.com/v1",
            "model": "gpt-x",
            "api_key_env": "EXAMPLE_KEY",
        },
    },
    "grid": {"models": ["llava-7b", "mystery", "gpt"], "benchmarks": ["flowers", "dance"]},
}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("grid")
    config = validate_config({**SMALL, "data_dir": str(root / "data"), "results_dir": str(root / "results")})
    prepare(config, "dance")
    return config


def test_classification_runs_twenty_templates_on_the_published_count(small):
    costs = cost.cost_table(small)
    flowers = rows(costs, "llava-7b", "flowers")
    generate = flowers["generate"]
    assert (generate["items"], generate["basis"], generate["variants"]) == (6149, "published", 10)
    assert generate["requests"] == 61_490
    assert math.isclose(generate["gpu_hours"], 61_490 * (1 / FORWARD + 16 / DECODE) / 3600)
    assert math.isclose(flowers["forward"]["gpu_hours"], 61_490 / FORWARD / 3600)
    # the kind fixes Flowers102's 102 classes (all under max_candidates 128): 10 closed-world templates each
    continuation = flowers["continuation"]
    assert (continuation["candidates"], continuation["requests"]) == (102, 6149 * 10 * 102)
    assert math.isclose(continuation["gpu_hours"], 6149 * 10 * 102 / CONTINUATION / 3600)


def test_ranking_counts_fifty_candidates_per_query(small):
    dance = rows(cost.cost_table(small), "llava-7b", "dance")
    # 10 riddle-to-image queries (a forward per candidate picture, 50 each) and 10 image-to-riddle (one
    # prefix)
    assert (dance["forward"]["basis"], dance["forward"]["requests"]) == ("prepared", 10 * 50 + 10)
    assert dance["continuation"]["requests"] == 20 * 50
    assert math.isclose(dance["continuation"]["gpu_hours"], 1000 / CONTINUATION / 3600)


def test_unknown_size_and_api_model(small):
    costs = cost.cost_table(small)
    mystery = rows(costs, "mystery", "dance")["forward"]
    assert mystery["requests"] == 510 and pd.isna(mystery["gpu_hours"])
    assert mystery["note"] == "model size unknown: no estimate"
    gpt = rows(costs, "gpt", "flowers")["generate"]
    assert (gpt["requests"], gpt["gpu_hours"]) == (61_490, 0.0)
    assert gpt["note"].startswith("API model")


def test_size_classes():
    assert (
        cost.size_class("x", {"backend": "hf", "source": {"repo": "Qwen/Qwen2.5-VL-72B-Instruct"}}) == "72b"
    )
    assert cost.size_class("x", {"backend": "hf", "source": {"repo": "laion/thing-laion5b"}}) is None
    assert (
        cost.size_class("x", {"backend": "open_clip", "source": {"arch": "ViT-L-14-336-quickgelu"}})
        == "vit-l-14-336"
    )
    assert cost.size_class("x", {"backend": "baseline"}) is None


def test_totals_leave_out_rows_without_an_estimate(small):
    costs = cost.cost_table(small)
    sums = cost.totals(costs).set_index("model")
    llava = costs[costs["model"] == "llava-7b"]
    assert math.isclose(sums.loc["llava-7b", "gpu_hours"], llava["gpu_hours"].sum())
    assert sums.loc["llava-7b", "rows_without_estimate"] == 0
    # "mystery" has no size class: all 5 of its rows (flowers: generate, forward, continuation; dance:
    # forward, continuation) lack an estimate, so its total is unknown, never 0
    assert pd.isna(sums.loc["mystery", "gpu_hours"]) and sums.loc["mystery", "rows_without_estimate"] == 5
    assert sums.loc["grid", "rows_without_estimate"] == 5
    assert math.isclose(sums.loc["grid", "gpu_hours"], sums.loc["llava-7b", "gpu_hours"])
    out = cost_text.render(costs)
    mystery_line = next(line for line in out.splitlines() if line.strip().startswith("mystery "))
    assert mystery_line.split()[2:4] == ["unknown", "5"], mystery_line
    assert (
        "The GPU-hours totals leave out 5 rows: mystery on flowers (generate), mystery on flowers (forward)"
        in out
    )
    # the API model without a price: its two rows' cost is unknown and the USD totals leave them out
    assert (sums.loc["gpt", "rows_without_price"], pd.isna(sums.loc["gpt", "cost_usd"])) == (2, True)
    assert "The USD totals leave out 2 rows: gpt on flowers (generate x2)." in " ".join(out.split())


def test_every_line_of_the_plan_fits_100_columns(small, default_costs):
    for costs in (cost.cost_table(small), default_costs):
        out = cost_text.render(costs)
        assert max(len(line) for line in out.splitlines()) <= 100
        assert "totals:" in out


def test_the_plan_says_how_each_cell_answers_and_that_the_lvlm_default_is_not_llavas_recipe(tmp_path):
    costs = cost.cost_table(repo_grid("examples/own-model", tmp_path))
    assert set(costs["method"]) == {
        "option likelihood"
    }  # MME, MMBench, ScienceQA: the options' log-likelihood
    out = " ".join(cost_text.render(costs).split())
    assert "my-llava" in out and "answers by option likelihood (mme, mmbench, scienceqa)" in out
    assert (
        "A model's recipe (`recipe: llava-1.5`) answers as its authors did: "
        "config/examples/llava-1.5-method.yaml" in out
    )
    assert "recipe" not in out.split("without a recipe")[0]  # my-llava has none
    method = cost.cost_table(repo_grid("examples/llava-1.5-method", tmp_path))
    assert set(method.loc[method["model"] == "llava-1.5-7b", "method"]) == {"generation"}
    assert set(method["recipe"]) == {"llava-1.5"}
    assert "llava-1.5-7b (size 7b) recipe llava-1.5 answers by generation (5 benchmarks)" in " ".join(
        cost_text.render(method).split()
    )
    # the default grid: CLIP by similarity, the LVLM's classification by its open- and closed-world templates
    default = " ".join(cost_text.render(cost.cost_table(repo_grid("config", tmp_path))).split())
    assert "clip-tiny answers by image-text similarity (13 benchmarks)" in default
    assert (
        "answers by templates: open-world generation, closed-world likelihood (4 benchmarks); option "
        "likelihood (9 benchmarks); generation (textvqa-fixture)" in default
    )


def test_a_total_that_leaves_out_one_row_says_1_row(tmp_path):
    config = validate_config(
        {
            **SMALL,
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "benchmarks": {"pope": {"kind": "pope", "source": {"type": "url"}}},
            "grid": {"models": ["mystery", "llava-7b"], "benchmarks": ["pope"]},
        }
    )
    out = cost_text.render(cost.cost_table(config))
    # mystery has no size class: its one row (forward, 9,000 questions) has no estimate
    mystery = next(line for line in out.splitlines() if line.strip().startswith("mystery "))
    assert mystery.split()[1:] == ["9,000", "unknown", "1", "row", "-"], mystery
    assert "The GPU-hours totals leave out 1 row: mystery on pope (forward)." in out
    assert "1 rows" not in out


def test_the_carpe_grid_counts_every_fixed_count_benchmark(tmp_path):
    costs = cost.cost_table(repo_grid("carpe", tmp_path))
    unknown = costs[costs["requests"].isna()]
    # only the CLIP rows of multiple-choice sets whose options per question vary are left to the records
    assert sorted(set(unknown["benchmark"])) == ["cvbench", "mmbench", "scienceqa_img"]
    assert set(unknown["unit"]) == {"embed_text"}
    # ImageNet: LLaVA-1.5's recipe generates its answers, as CARPE reads an LVLM's textual prediction: the
    # open- and the closed-world templates, 10 each, one request per image; CLIP's 80 templates
    llava = costs[
        (costs["model"] == "llava-1.5-7b")
        & (costs["benchmark"] == "imagenet")
        & ~costs["note"].fillna("").str.contains("batch check")
    ]
    assert llava["unit"].tolist() == ["generate", "generate"]
    assert llava["basis"].tolist() == ["published"] * 2 and llava["requests"].tolist() == [50_000 * 10] * 2
    clip = rows(costs, "clip-vit-l-14", "imagenet")["embed_text"]
    assert clip["requests"] == 80 * 1000
    # POPE's yes and no: two texts per question
    assert rows(costs, "clip-vit-l-14", "pope")["embed_text"]["requests"] == 9000 * 2
    assert rows(costs, "clip-vit-l-14", "mmvp")["embed_text"]["requests"] == 300 * 2
    out = cost_text.render(costs)
    # the recipe's generation answers the closed-world templates too: the plan says so, not the default's mix
    assert "answers by generation (open- and closed-world templates) (4 benchmarks); generation (7" in out
    assert "needs the records" in out  # the six rows above, and no other
    assert out.count("needs the records") == 1  # one note, numbered once


def test_an_api_model_costs_its_tokens_at_its_price(tmp_path):
    gpt = {**SMALL["models"]["gpt"], "price": {"input": 2.5, "output": 10.0, "input_tokens": 1000}}
    config = validate_config(
        {
            **SMALL,
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "models": {"gpt": gpt},
            "grid": {"models": ["gpt"], "benchmarks": ["flowers"]},
        }
    )
    costs = cost.cost_table(config)
    # generation for the 10 open-world and the 10 closed-world templates: a row each
    generate = costs[costs["model"] == "gpt"]
    assert generate["unit"].tolist() == ["generate", "generate"]
    # 6,149 images x 10 templates per row, each 1,000 tokens in at $2.50/M and 16 answer tokens out at $10/M
    assert generate["requests"].tolist() == [61_490, 61_490]
    assert (generate["input_tokens"].tolist(), generate["output_tokens"].tolist()) == ([1000] * 2, [16] * 2)
    assert math.isclose(generate["cost_usd"].iloc[0], 61_490 * (1000 * 2.5 + 16 * 10.0) / 1e6)
    sums = cost.totals(cost.cost_table(config)).set_index("model")
    assert math.isclose(sums.loc["grid", "cost_usd"], 327.1268)
    assert sums.loc["grid", "rows_without_price"] == 0


def test_infer_runtime_minutes(small):
    costs = cost.cost_table(small)
    hours = costs.loc[(costs["model"] == "llava-7b") & (costs["benchmark"] == "dance"), "gpu_hours"].sum()
    assert cost.infer_runtime_minutes(costs, "llava-7b", "dance", floor=0, factor=2) == math.ceil(hours * 120)
    assert cost.infer_runtime_minutes(costs, "llava-7b", "dance") == cost.RUNTIME_FLOOR_MINUTES
    assert cost.infer_runtime_minutes(costs, "mystery", "dance") is None


def test_cli_prints_the_plan_and_writes_the_csv(tmp_path, capsys):
    csv = tmp_path / "plan.csv"
    assert main(["plan", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "totals:" in out and "Assumes:" in out and "llava-tiny" in out
    table = pd.read_csv(csv)
    assert list(table.columns) == cost.COLUMNS
    # the cell's forwards, then the batch check's (the default grid's 4 sampled items again, one at a time)
    assert table.loc[
        (table["model"] == "llava-tiny") & (table["benchmark"] == "pope-fixture"), "requests"
    ].tolist() == [90, 4]


def test_a_model_served_by_its_job_holds_its_gpus_at_the_hf_rates(tmp_path):
    served = {
        "backend": "openai",
        "model": "qwen",
        "gpus": 4,
        "logprobs": True,
        "source": {"type": "hf_hub", "repo": "Qwen/Qwen2.5-VL-72B-Instruct", "revision": "a" * 40},
        "serve": {"command": ["vllm", "serve", "{model_dir}", "--port", "{port}"]},
    }
    config = validate_config(
        {
            **SMALL,
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "models": {"served": served},
            "grid": {"models": ["served"], "benchmarks": ["dance"]},
        }
    )
    prepare(config, "dance")
    forward = rows(cost.cost_table(config), "served", "dance")["forward"]
    # 510 forwards of a 72B model at the 7B rate x 7/72, on each of the 4 GPUs the job holds
    one_gpu = 510 / (FORWARD * 7 / 72) / 3600
    assert math.isclose(forward["gpu_hours"], 4 * one_gpu)
    assert forward["note"] == "size 72b, served: at hf rates, an upper bound"
    costs = cost.cost_table(config)
    hours = costs.loc[costs["model"] == "served", "gpu_hours"].sum()
    # its jobs' time on the clock: the GPU-hours over its 4 GPUs
    assert cost.infer_runtime_minutes(costs, "served", "dance", gpus=4, floor=0, factor=1) == math.ceil(
        hours / 4 * 60
    )


def test_the_kinds_class_counts_match_their_class_name_lists():
    from vlmgrid.benchmarks import BENCHMARKS, flowers102, imagenet

    assert BENCHMARKS.get("flowers102").class_count == len(flowers102.classnames()) == 102
    assert BENCHMARKS.get("imagenet").class_count == BENCHMARKS.get("imagenet_ilsvrc2012").class_count == 1000
    assert imagenet.N_CLASSES == 1000
    # a kind whose options vary per question fixes no count: the plan needs its records
    assert BENCHMARKS.get("scienceqa_img").option_count is None
    assert BENCHMARKS.get("pope").option_count == BENCHMARKS.get("mme").option_count == 2


def test_the_plan_says_what_each_benchmark_can_tell(tmp_path):
    # MMVP scores 150 pairs (300 questions): with two models disagreeing on 20% of them the minimum detectable
    # difference is 100 x 2.801585 x sqrt(0.2 / 150) = 10.23 points, so it cannot tell two models 3 points
    # apart; even at 5% disagreement it is 5.11 points
    config = validate_config(
        {
            **SMALL,
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "benchmarks": {
                "mmvp": {
                    "kind": "mmvp",
                    "source": {"type": "hf_hub", "repo": "MMVP/MMVP", "revision": "main"},
                },
                "pope": {"kind": "pope", "source": {"type": "url"}},
            },
            "grid": {"models": ["llava-7b"], "benchmarks": ["mmvp", "pope"]},
        }
    )
    costs = cost.cost_table(config)
    mmvp = rows(costs, "llava-7b", "mmvp")["forward"]
    assert (mmvp["items"], mmvp["scoring_units"], mmvp["scoring_unit"]) == (300, 150, "pair_id")
    assert mmvp["mdd"] == pytest.approx(10.23, abs=0.01) and mmvp["mdd"] > 3
    assert cost.planned_mdd(150, discordance=0.05) == pytest.approx(5.11, abs=0.01)
    # POPE scores its 9,000 questions: 100 x 2.801585 x sqrt(0.2 / 9000) = 1.32 points
    assert rows(costs, "llava-7b", "pope")["forward"]["mdd"] == pytest.approx(1.32, abs=0.01)
    out = cost_text.render(costs)
    lines = out.splitlines()
    assert "  mmvp                     150 pair_id groups of 300 items" in out
    told = lines[lines.index("what each benchmark can tell (MDD):") + 1 :]
    assert told[0].startswith("  mmvp ") and told[0].endswith("MDD 10.2 points")
    assert told[1].split() == ["pope", "9,000", "items", "MDD", "1.3", "points"]
    assert "assuming two models disagree on 20% of the units" in " ".join(lines)
    assert max(len(line) for line in lines) <= 100
    csv = tmp_path / "plan.csv"
    costs.to_csv(csv, index=False)
    assert pd.read_csv(csv).loc[0, "mdd"] == pytest.approx(10.23, abs=0.01)


def test_a_fixture_counts_its_scoring_units_from_its_records(default_costs):
    # the fixtures' groups as their records hold them: MMVP 10 pairs of 20 questions, MMBench 6 circular
    # groups of 17 rows; items elsewhere (POPE's 90 questions)
    first = default_costs.drop_duplicates("benchmark").set_index("benchmark")
    assert (first.loc["mmvp-fixture", "scoring_units"], first.loc["mmvp-fixture", "scoring_unit"]) == (
        10,
        "pair_id",
    )
    assert (first.loc["mmbench-fixture", "scoring_units"], first.loc["mmbench-fixture", "items"]) == (6, 17)
    assert (first.loc["pope-fixture", "scoring_units"], first.loc["pope-fixture", "scoring_unit"]) == (
        90,
        "item",
    )
    # 100 x 2.801585 x sqrt(0.2 / 10) = 39.62 points
    assert first.loc["mmvp-fixture", "mdd"] == pytest.approx(39.62, abs=0.01)


def test_a_baselines_classification_rows_are_its_open_and_closed_world_templates(tmp_path):
    # The random baseline scores options only: its 10 open-world templates are scored over every class name,
    # as its 10 closed-world ones are (Caltech-101's 102 names are under max_candidates), where an LVLM
    # generates the open-world answers. Two rows of one shape, each its own templates, named so; no row
    # counted twice.
    config = validate_config(
        {
            "title": "baseline",
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "benchmarks": {"caltech101": {"kind": "caltech101", "source": {"type": "url"}}},
            "models": {
                "random": {"backend": "baseline", "strategy": "random"},
                "llava-7b": SMALL["models"]["llava-7b"],
            },
            "grid": {"models": ["random", "llava-7b"], "benchmarks": ["caltech101"]},
        }
    )
    costs = cost.cost_table(config)
    baseline = costs[costs["model"] == "random"]
    assert baseline["unit"].tolist() == ["forward", "continuation"] * 2
    assert [note.split("; ")[-1] for note in baseline["note"]] == ["open-world templates"] * 2 + [
        "closed-world templates"
    ] * 2
    assert set(baseline["method"]) == {"likelihood (open- and closed-world templates)"}
    items = baseline["items"].iloc[0]
    assert (
        baseline["requests"].sum() == items * (10 + 10 * 102) * 2
    )  # 20 templates, each 102 names on a prefix
    llava = costs[(costs["model"] == "llava-7b") & (costs["per"] == "item")]
    assert llava["requests"].sum() == items * (10 + 10 + 10 * 102)
    assert set(llava["method"]) == {"templates: open-world generation, closed-world likelihood"}
    sums = cost.totals(costs).set_index("model")
    assert sums.loc["grid", "requests"] == sums.loc["random", "requests"] + sums.loc["llava-7b", "requests"]
    out = cost_text.render(costs)
    assert "open-world templates" in out and "closed-world templates" in out


def _safetensors(path, shapes: dict) -> None:
    """A safetensors file of bf16 zeros with these tensors' shapes."""
    import json
    import struct

    header, offset = {}, 0
    for name, shape in shapes.items():
        size = math.prod(shape) * 2
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))


def test_a_local_checkpoint_gets_its_size_from_its_safetensors_files(tmp_path):
    # a folder named for no size: its parameters are counted from the safetensors headers (two shards)
    folder = tmp_path / "my-checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    _safetensors(folder / "model-00001-of-00002.safetensors", {"a": [1000, 1000], "b": [1000]})
    _safetensors(folder / "model-00002-of-00002.safetensors", {"c": [500, 1000]})
    assert cost.safetensors_parameters(folder) == 1_501_000
    local = {"backend": "hf", "source": {"type": "local", "path": str(folder)}}
    config = validate_config(
        {
            **SMALL,
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "models": {"mine": local},
            "grid": {"models": ["mine"], "benchmarks": ["flowers"]},
        }
    )
    generate = rows(cost.cost_table(config), "mine", "flowers")["generate"]
    scale = 1_501_000 / 1e9 / TABLE["lvlm"]["reference_params_b"]
    assert generate["note"].startswith("size 0.0015b")
    assert math.isclose(
        generate["gpu_hours"], 61_490 * scale * (1 / FORWARD + 16 / DECODE) / 3600, rel_tol=1e-2
    )
    assert cost.safetensors_parameters(tmp_path / "nowhere") is None


def test_the_batch_checks_rows_are_timed_at_batch_1_rates(tmp_path):
    # 90 POPE questions (30 per split) of a 7B model: the check's 6 questions (a tenth of the cell's time,
    # each 1.4x alone) at the table's batch-1 forward rate, the cell's 90 at the batched one
    alone = TABLE["lvlm"]["rates_alone"]["forward"]["rate"]
    config = validate_config(
        {
            **SMALL,
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "infer": {"invariance_items": 32},
            "benchmarks": {"pope": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 30}}},
            "grid": {"models": ["llava-7b"], "benchmarks": ["pope"]},
        }
    )
    prepare(config, "pope")
    costs = cost.cost_table(config).set_index("per")
    assert (costs.loc["item", "requests"], costs.loc["check", "requests"]) == (90, 6)
    assert math.isclose(costs.loc["item", "gpu_hours"], 90 / FORWARD / 3600)
    assert math.isclose(costs.loc["check", "gpu_hours"], 6 / alone / 3600)
    assert alone < FORWARD
