"""A cell's plan (vlmgrid.stages.plan.cell_plan): what is decided about a cell before it runs, once, and
handed to its run (vlmgrid.stages.infer.run_cell), to merge-shards and to a row's current-cell check."""

import copy

import pytest

from vlmgrid import paths
from vlmgrid.cellrun.cell import Shard
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.models.tiny_hf import write_tiny_checkpoint
from vlmgrid.stages.fetch import fetch_model
from vlmgrid.stages.plan import cell_plan, gpus, not_applicable

SERVED = {
    "backend": "openai",
    "model": "{model_dir}",
    "source": {"type": "fixture", "family": "llava", "seed": 0},
    "serve": {"command": ["transformers", "serve", "{model_dir}", "--port", "{port}"]},
    "gpus": 2,
}


def _config(small_config, **models):
    data = copy.deepcopy(small_config)
    data["models"].update(models)
    return validate_config(data, "grid.yaml")


def test_a_cell_the_model_cannot_run_gets_no_gpus_weights_or_server(small_config):
    config = _config(small_config)
    plan = cell_plan(config, "clip-tiny", "textvqa-fixture")
    assert plan.not_applicable == not_applicable(config, "clip-tiny", "textvqa-fixture") is not None
    assert (plan.gpus, plan.checkpoint, plan.server) == (0, None, None)
    assert plan.cell.out_path == paths.predictions_path(config.results_dir, "clip-tiny", "textvqa-fixture")


def test_a_runnable_cell_takes_its_gpus_folders_and_the_jobs_settings_from_the_config(small_config):
    config = _config(small_config, **{"llava-tiny": {**small_config["models"]["llava-tiny"], "gpus": 4}})
    plan = cell_plan(config, "llava-tiny", "pope-fixture")
    assert plan.not_applicable is None
    assert plan.gpus == gpus(config, "llava-tiny") == 4
    assert plan.model_settings == config.model("llava-tiny")
    assert plan.bench_dir == paths.bench_dir(config.data_dir, "pope-fixture")
    assert plan.model_dir == paths.model_dir(config.data_dir, "llava-tiny") and plan.checkpoint is None
    assert (plan.part_size, plan.check_items, plan.threads) == (
        int(config.infer["part_size"]),
        int(config.infer["invariance_items"]),
        int(config.infer["threads"]),
    )
    assert plan.prompts_dir == config.prompts_dir and plan.server is None
    assert cell_plan(config, "llava-tiny", "pope-fixture", threads=7).threads == 7


def test_a_shard_names_its_own_files_and_its_servers_log(small_config):
    config = _config(small_config, served=SERVED)
    plan = cell_plan(config, "served", "pope-fixture", shard="2/3")
    assert plan.cell.shard == Shard(2, 3)
    assert plan.cell.out_path == paths.shard_path(config.results_dir, "served", "pope-fixture", 2, 3)
    assert plan.cell.partial_dir == paths.shard_partial_dir(
        config.results_dir, "served", "pope-fixture", 2, 3
    )
    assert plan.server.log_path == paths.serve_log_path(config.results_dir, "served", "pope-fixture", (2, 3))
    assert (plan.server.gpus, plan.server.model_dir) == (2, plan.model_dir)
    with pytest.raises(VlmgridError, match=r'^--shard "2 of 3" is not I/N'):
        cell_plan(config, "served", "pope-fixture", shard="2 of 3")


def test_a_checkpoint_read_in_place_is_loaded_where_it_lies_and_named_by_its_files(small_config, tmp_path):
    folder = tmp_path / "checkpoints" / "mine"
    write_tiny_checkpoint("llava", folder)
    mine = {"backend": "hf", "source": {"type": "local", "path": str(folder)}, "precision": "fp32"}
    config = _config(small_config, mine=mine)
    manifest = fetch_model("mine", config.model("mine"), paths.model_dir(config.data_dir, "mine"))
    plan = cell_plan(config, "mine", "pope-fixture")
    assert plan.model_dir == folder.resolve() == plan.checkpoint.location
    assert plan.checkpoint.fingerprint == manifest["fingerprint"]


def test_an_unknown_benchmark_is_refused_before_anything_is_decided(small_config):
    with pytest.raises(VlmgridError, match="nope"):
        cell_plan(_config(small_config), "random", "nope")
