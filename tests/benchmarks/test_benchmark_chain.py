"""Every benchmark kind's fixture through prepare -> infer -> score, with the models that can run it.

Chance-level models, so the values are not checked against a target; the chain is: records that the
protocol accepts, predictions the metric accepts, and a score file with the benchmark's headline and CI.
"""

import copy

import pytest
from helpers.chain import infer_cell, score_of

from vlmgrid import paths
from vlmgrid.benchmarks import BENCHMARKS
from vlmgrid.config import validate_config
from vlmgrid.stages.plan import runnable
from vlmgrid.stages.prepare import prepare_benchmark

HEADLINES = {
    "flowers102": "top1",
    "food101": "top1",
    "caltech101": "top1",
    "imagenet": "top1",
    "imagenet_ilsvrc2012": "top1",
    "pope": "f1",
    "scienceqa_img": "accuracy",
    "mme": "scaled",
    "mmbench": "circular_accuracy",
    "cvbench": "cvbench",
    "mmvp": "pair_accuracy",
    "textvqa": "vqa_accuracy",
    "dance": "acc_at_50",
}
SMALL = {
    "flowers102": 2,
    "food101": 2,
    "caltech101": 2,
    "imagenet": 2,
    "pope": 4,
    "mme": 4,
    "mmbench": 6,
    "cvbench": 6,
    "mmvp": 4,
    "textvqa": 6,
    "scienceqa_img": 6,
    "dance": 2,
}


@pytest.mark.parametrize("kind", sorted(set(HEADLINES) - {"imagenet_ilsvrc2012"}))
def test_fixture_runs_through_the_whole_chain(kind, small_config, tmp_path):
    data = copy.deepcopy(small_config)
    data["benchmarks"] = {
        "bench": {"kind": kind, "source": {"type": "fixture", "seed": 0, "size": SMALL[kind]}}
    }
    models = [
        name
        for name in ("random", "llava-tiny", "clip-tiny")
        if runnable(BENCHMARKS.get(kind).protocol, data["models"][name])
    ]
    data["grid"] = {"models": models, "benchmarks": ["bench"]}
    config = validate_config(data)
    bench_dir = paths.bench_dir(config.data_dir, "bench")
    prepare_benchmark("bench", config.benchmark("bench"), bench_dir)
    assert "llava-tiny" in models  # a generative model runs every protocol
    for model in models:
        score = score_of(config, model, "bench", infer_cell(config, model, "bench", part_size=8), samples=50)
        assert score["metric"] == HEADLINES[kind], (kind, model)
        assert score["n"] > 0 and score["ci95"][0] <= score["value"] <= score["ci95"][1]
        assert score["strategy"] in {
            "score_options",
            "generate",
            "embed",
            "open-world: generate; closed-world: score_options",
        }
