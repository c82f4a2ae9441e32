"""Inference parts counted in model requests: each item's requests as the cost plan counts them, less the
continuations scored on a cached prefix, and parts cut greedily from them, against hand-computed
boundaries."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pandas as pd
import pytest
import yaml

from vlmgrid.benchmarks import BENCHMARKS
from vlmgrid.benchmarks.dataset import Benchmark
from vlmgrid.cellrun.job import job_fingerprint, part_bounds
from vlmgrid.config import validate_config
from vlmgrid.stages import cost
from vlmgrid.stages.cost_work import item_requests
from vlmgrid.stages.prepare import prepare

REPO = Path(__file__).resolve().parents[2]
PROMPTS = REPO / "config" / "prompts"
HF = {"backend": "hf"}
CLIP = {"backend": "open_clip"}


def bench(kind: str, records: dict, classes: list[str] | None = None) -> Benchmark:
    """A benchmark of `kind` held in memory: only its records' shape counts here."""
    n = len(next(iter(records.values())))
    frame = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "image": "x.png",
            "question": "q",
            "answer": "",
            "answer_index": 0,
            **records,
        }
    )
    return Benchmark(
        name=kind,
        kind=BENCHMARKS.get(kind),
        root=Path("."),
        records=frame,
        classes=classes,
        manifest={},
        prompts_dir=PROMPTS,
    )


def classification(n_items: int, n_classes: int) -> Benchmark:
    return bench(
        "flowers102", {"options": [[] for _ in range(n_items)]}, [f"class {k}" for k in range(n_classes)]
    )


# --- each item's requests ----------------------------------------------------------------------------------


def test_a_classification_item_asks_its_twenty_templates():
    flowers = classification(7, 5)
    # 10 open-world templates generated, 10 closed-world ones: a prefix forward each, its 5 class names scored
    # on that forward's cached prefix (no pass of their own)
    assert item_requests(flowers, HF) == [10 + 10] * 7
    # generated answers only: one request per template
    assert item_requests(flowers, {**HF, "answer_mode": "generate"}) == [20] * 7
    # however many classes: ImageNet's 1,000 (128 shown per closed-world question) still ask 20
    assert item_requests(classification(2, 1000), HF) == [20] * 2
    # CLIP: the image once; the class prompts are the cell's, no item's
    assert item_requests(flowers, CLIP) == [1] * 7


def test_multiple_choice_items_ask_by_their_option_counts():
    options = [["a", "b"], ["a", "b", "c", "d"], ["a", "b", "c"], ["a", "b", "c", "d", "e"], ["a", "b"]]
    scienceqa = bench("scienceqa_img", {"options": options})
    # letters: one forward reads every option's letter at once
    assert item_requests(scienceqa, HF) == [1, 1, 1, 1, 1]
    # embedding: the image, and one text per option
    assert item_requests(scienceqa, CLIP) == [3, 5, 4, 6, 3]


def test_ranking_queries_ask_by_their_direction():
    dance = bench(
        "dance",
        {
            "options": [["o"] * 3, ["o"] * 5, ["o"] * 2, ["o"] * 4],
            "direction": ["riddle-to-image", "image-to-riddle", "image-to-riddle", "riddle-to-image"],
        },
    )
    # riddle-to-image: a forward per candidate picture; image-to-riddle: one picture prefix (its riddles are
    # continuations on it)
    assert item_requests(dance, HF) == [3, 1, 1, 4]
    # embedding: every candidate picture and the riddle, or the picture and every riddle
    assert item_requests(dance, CLIP) == [3 + 1, 1 + 5, 1 + 2, 4 + 1]


# --- parts ------------------------------------------------------------------------------------------------


def test_classification_parts():
    flowers = classification(7, 5)
    assert part_bounds(item_requests(flowers, HF), 64) == (0, 3, 6, 7)  # 60 requests a part
    assert part_bounds(item_requests(flowers, HF), 1024) == (0, 7)
    # an item asking more than a part holds is a part of its own
    assert part_bounds(item_requests(flowers, HF), 16) == (0, 1, 2, 3, 4, 5, 6, 7)
    assert part_bounds(item_requests(flowers, CLIP), 64) == (0, 7)


def test_multiple_choice_parts_under_option_scoring():
    options = [["a", "b"], ["a", "b", "c", "d"], ["a", "b", "c"], ["a", "b", "c", "d", "e"], ["a", "b"]]
    scienceqa = bench("scienceqa_img", {"options": options})
    # requests 3, 5 | 4 | 6 | 3: each next item would take the part past 8
    assert part_bounds(item_requests(scienceqa, CLIP), 8) == (0, 2, 3, 4, 5)
    assert part_bounds(item_requests(scienceqa, CLIP), 9) == (0, 2, 3, 5)
    assert part_bounds(item_requests(scienceqa, HF), 2) == (0, 2, 4, 5)


def test_ranking_parts():
    dance = bench(
        "dance",
        {
            "options": [["o"] * 3, ["o"] * 5, ["o"] * 2, ["o"] * 4],
            "direction": ["riddle-to-image", "image-to-riddle", "image-to-riddle", "riddle-to-image"],
        },
    )
    # requests 3, 1, 1 | 4
    assert part_bounds(item_requests(dance, HF), 5) == (0, 3, 4)
    assert part_bounds(item_requests(dance, HF), 2) == (0, 1, 3, 4)
    assert part_bounds(item_requests(dance, CLIP), 5) == (0, 1, 2, 3, 4)  # 4 | 6 | 3 | 5: every query alone


def test_no_records_no_parts():
    assert part_bounds([], 64) == (0,)


@pytest.mark.parametrize("seed", range(20))
def test_no_part_exceeds_the_part_size_unless_it_is_one_item(seed):
    rng = random.Random(seed)
    requests = [rng.choice([1, 1, 4, 20, 51, 100, 1300]) for _ in range(rng.randint(1, 300))]
    part_size = rng.choice([1, 16, 64, 256, 1024])
    bounds = part_bounds(requests, part_size)
    assert bounds[0] == 0 and bounds[-1] == len(requests) and list(bounds) == sorted(set(bounds))
    for start, stop in zip(bounds, bounds[1:]):
        held = sum(requests[start:stop])
        assert held <= part_size or stop - start == 1
        if stop < len(requests):  # cut greedily: the next item would not have fitted
            assert held + requests[stop] > part_size


def test_the_part_boundaries_are_part_of_the_job_fingerprint():
    settings, manifest = {"backend": "baseline"}, {"fingerprint": "data"}
    assert job_fingerprint(settings, manifest, "yes_no", (0, 2, 4)) != job_fingerprint(
        settings, manifest, "yes_no", (0, 3, 4)
    )


# --- the plan's totals are the items' requests, with the continuations ------------------------------------

GRID = {
    "benchmarks": {
        name: {"kind": kind, "source": {"type": "fixture", "seed": 0, "size": size}}
        for name, kind, size in [
            ("flowers", "flowers102", 3),
            ("scienceqa", "scienceqa_img", 12),
            ("mmbench", "mmbench", 8),
            ("cvqa", "cvqa", 2),
            ("dance", "dance", 4),
            ("pope", "pope", 4),
        ]
    },
}


def test_the_plans_requests_are_its_items_requests_plus_continuations_and_the_cells_own(tmp_path):
    from vlmgrid.benchmarks.dataset import load_benchmark

    models = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["models"]
    models["llava-generate"] = {**models["llava-tiny"], "answer_mode": "generate"}
    config = validate_config(
        {
            **GRID,
            "models": models,
            "title": "t",
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "prompts_dir": str(PROMPTS),
            "grid": {"models": list(models), "benchmarks": list(GRID["benchmarks"])},
        }
    )
    for name in config.benchmarks:
        prepare(config, name)
    costs = cost.cost_table(config)
    assert set(costs["basis"]) == {"prepared"} and "n/a" not in set(costs["strategy"])
    for name in config.benchmarks:
        prepared = dataclasses.replace(load_benchmark(config.data_dir / name), prompts_dir=PROMPTS)
        for model in config.models:
            # the cell's own work (the batch check's rows count a sample again:
            # tests/cellrun/test_invariance.py)
            cell = costs[(costs["model"] == model) & (costs["benchmark"] == name) & (costs["per"] != "check")]
            per_cell = cell.loc[cell["per"] == "cell", "requests"].sum()
            continuations = cell.loc[cell["unit"] == "continuation", "requests"].sum()
            items = item_requests(prepared, config.model(model))
            assert len(items) == len(prepared.records) and min(items) >= 1, (model, name)
            assert cell["requests"].sum() == sum(items) + continuations + per_cell, (model, name)
    assert costs.loc[costs["per"] == "cell", "requests"].sum() > 0  # CLIP's class prompts: counted, no item's
    assert costs.loc[costs["unit"] == "continuation", "requests"].sum() > 0  # class names, riddles: no pass
