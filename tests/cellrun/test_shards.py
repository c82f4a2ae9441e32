"""Sharded cells: shard I of N computes a contiguous range of whole parts, and the merged shard files are the
predictions file an unsharded run writes, byte for byte."""

import copy
import logging

import pyarrow.parquet as pq
import pytest

from vlmgrid import paths
from vlmgrid.cellrun.cell import Cell, Shard
from vlmgrid.cellrun.shards import merge_shards
from vlmgrid.cli import main
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import read_metadata, read_predictions
from vlmgrid.stages.fetch import fetch_model
from vlmgrid.stages.infer import open_job, run_inference
from vlmgrid.stages.prepare import prepare_benchmark

BENCH = "pope-fixture"  # 90 items: 6 parts of 16


# --- shard ranges ----------------------------------------------------------------------------------------


def test_shards_split_parts_into_contiguous_ranges_of_near_equal_size():
    assert [Shard(i, 3).parts(10) for i in (1, 2, 3)] == [range(0, 3), range(3, 6), range(6, 10)]
    assert [Shard(i, 3).parts(6) for i in (1, 2, 3)] == [range(0, 2), range(2, 4), range(4, 6)]
    assert Shard(1, 1).parts(7) == range(0, 7)


def test_more_shards_than_parts_leaves_some_shards_empty():
    assert [Shard(i, 3).parts(2) for i in (1, 2, 3)] == [range(0, 0), range(0, 1), range(1, 2)]
    assert [Shard(i, 2).parts(0) for i in (1, 2)] == [range(0, 0), range(0, 0)]


@pytest.mark.parametrize("n_parts", [0, 1, 2, 5, 17])
@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_the_shards_together_are_every_part_once_in_order(n_parts, count):
    joined = [index for i in range(1, count + 1) for index in Shard(i, count).parts(n_parts)]
    assert joined == list(range(n_parts))


def test_shard_parse_and_its_errors():
    assert Shard.parse("2/3") == Shard(2, 3) and str(Shard.parse(" 1 / 1 ")) == "1/1"
    with pytest.raises(VlmgridError, match=r'--shard "2of3" is not I/N'):
        Shard.parse("2of3")
    for text in ("0/3", "4/3", "1/0"):
        with pytest.raises(VlmgridError, match=rf"shard {text} does not exist"):
            Shard.parse(text)


def test_config_shards_default_to_one_and_are_validated(small_config):
    data = copy.deepcopy(small_config)
    config = validate_config(data)
    assert config.shards(BENCH) == 1 and config.sharded_benchmarks == []
    data["benchmarks"][BENCH]["shards"] = 3
    config = validate_config(data)
    assert config.shards(BENCH) == 3 and config.sharded_benchmarks == [BENCH]
    data["benchmarks"][BENCH]["shards"] = 0
    with pytest.raises(VlmgridError, match=rf"benchmarks.{BENCH}.shards: 0 is less than the minimum of 1"):
        validate_config(data)


# --- sharded runs -----------------------------------------------------------------------------------------


def _setup(small_config, write_config, models=("random",), part_size=16, shards=3, model_settings=None):
    data = copy.deepcopy(small_config)
    data["infer"] = {"part_size": part_size, "threads": 1}
    data["benchmarks"][BENCH]["shards"] = shards
    for model in models:
        data["models"][model].update(model_settings or {})
    config = validate_config(data, source=write_config(data))
    prepare_benchmark(BENCH, config.benchmark(BENCH), paths.bench_dir(config.data_dir, BENCH))
    for model in models:
        fetch_model(model, config.model(model), paths.model_dir(config.data_dir, model))
    return config


def _cli(config, *args):
    assert main([*args, "--config", str(config.path)]) == 0


def _run(config, model, shard=None):
    """run_inference in this process, as `vlmgrid infer [--shard]` calls it."""
    if shard is None:
        out = paths.predictions_path(config.results_dir, model, BENCH)
        partial = paths.partial_dir(config.results_dir, model, BENCH)
    else:
        out = paths.shard_path(config.results_dir, model, BENCH, shard.index, shard.count)
        partial = paths.shard_partial_dir(config.results_dir, model, BENCH, shard.index, shard.count)
    return run_inference(
        cell=Cell(model, BENCH, out, partial, shard),
        model_settings=config.model(model),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        model_dir=paths.model_dir(config.data_dir, model),
        part_size=int(config.infer["part_size"]),
        threads=1,
        prompts_dir=config.prompts_dir,
        progress=False,
    )


def _move_aside(out):
    """The unsharded run's predictions file, moved aside so that the merge writes its own."""
    reference = out.with_name("reference.parquet")
    out.rename(reference)
    return reference


def _assert_same_file(out, reference):
    assert out.read_bytes() == reference.read_bytes()
    assert pq.read_table(out).equals(pq.read_table(reference), check_metadata=True)


def test_random_three_shards_merge_to_the_unsharded_file_byte_for_byte(small_config, write_config):
    config = _setup(small_config, write_config)
    _cli(config, "infer", "random", BENCH)  # unsharded, whatever the benchmark's `shards`
    reference = _move_aside(paths.predictions_path(config.results_dir, "random", BENCH))
    for index in (3, 1, 2):  # any order: each shard is its own job
        _cli(config, "infer", "random", BENCH, "--shard", f"{index}/3")
    shard_files = [paths.shard_path(config.results_dir, "random", BENCH, i, 3) for i in (1, 2, 3)]
    assert [len(read_predictions(path)) for path in shard_files] == [
        32,
        32,
        26,
    ]  # 2 parts of 16 each, 90 items
    assert read_metadata(shard_files[2])["shard"]["parts"] == [4, 6]
    assert not any(
        paths.shard_partial_dir(config.results_dir, "random", BENCH, i, 3).exists() for i in (1, 2, 3)
    )

    _cli(config, "merge-shards", "random", BENCH)
    _assert_same_file(paths.predictions_path(config.results_dir, "random", BENCH), reference)


def test_llava_tiny_three_shards_merge_to_the_unsharded_file_byte_for_byte(small_config, write_config):
    # batches of 4 inside parts of 16: each batch must hold the items it holds unsharded
    config = _setup(small_config, write_config, models=("llava-tiny",), model_settings={"batch_size": 4})
    reference = _move_aside(_run(config, "llava-tiny"))
    shard_files = [_run(config, "llava-tiny", Shard(i, 3)) for i in (1, 2, 3)]
    job = open_job(
        model_settings=config.model("llava-tiny"),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        part_size=16,
        prompts_dir=config.prompts_dir,
    )
    out = merge_shards(
        job=job,
        model_name="llava-tiny",
        model_settings=config.model("llava-tiny"),
        shard_paths=shard_files,
        out_path=paths.predictions_path(config.results_dir, "llava-tiny", BENCH),
    )
    _assert_same_file(out, reference)
    assert read_metadata(out)["provenance"]["batch_size"] == 4


def test_more_shards_than_parts_write_empty_shard_files_and_merge_the_same(small_config, write_config):
    config = _setup(small_config, write_config, part_size=32, shards=5)  # 3 parts for 5 shards
    reference = _move_aside(_run(config, "random"))
    for index in range(1, 6):
        _run(config, "random", Shard(index, 5))
    empty = paths.shard_path(config.results_dir, "random", BENCH, 1, 5)
    assert read_predictions(empty).empty  # a valid file with the columns and no rows
    assert read_metadata(empty)["shard"]["parts"] == [0, 0] and read_metadata(empty)["provenance"] is None
    _cli(config, "merge-shards", "random", BENCH)
    _assert_same_file(paths.predictions_path(config.results_dir, "random", BENCH), reference)


def test_a_killed_shard_resumes_its_own_parts(small_config, write_config, monkeypatch, caplog):
    from vlmgrid.cellrun.parts import PartStore

    config = _setup(small_config, write_config)
    original, saved = PartStore.save, []

    def save_then_crash(self, index, table, made_by):
        original(self, index, table, made_by)
        saved.append(index)
        raise KeyboardInterrupt

    monkeypatch.setattr(PartStore, "save", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        _run(config, "random", Shard(2, 3))
    monkeypatch.undo()
    assert saved == [2]  # shard 2 of 3 starts at part 2 of 6

    caplog.set_level(logging.INFO, logger="vlmgrid")
    run_inference(
        model_settings=config.model("random"),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        model_dir=paths.model_dir(config.data_dir, "random"),
        cell=Cell.in_results(config.results_dir, "random", BENCH, Shard(2, 3)),
        part_size=16,
        threads=1,
        prompts_dir=config.prompts_dir,
        progress=False,
    )
    assert "resuming: 1 of 2 parts (16 of 32 items) already done" in caplog.messages


# --- merge refuses what it cannot trust ---------------------------------------------------------------------


def _all_shards(config, model="random"):
    for index in (1, 2, 3):
        _run(config, model, Shard(index, 3))


def _merge_error(config, capsys) -> str:
    assert main(["merge-shards", "random", BENCH, "--config", str(config.path)]) == 2
    assert not paths.predictions_path(config.results_dir, "random", BENCH).exists()
    return capsys.readouterr().err


def test_merge_refuses_a_missing_shard(small_config, write_config, capsys):
    config = _setup(small_config, write_config)
    _all_shards(config)
    paths.shard_path(config.results_dir, "random", BENCH, 2, 3).unlink()
    err = _merge_error(config, capsys)
    assert "random on pope-fixture: shard file(s) 2 of 3 missing" in err
    assert "run `vlmgrid infer random pope-fixture --shard 2/3` for each before merging" in err


def test_merge_refuses_a_stale_shard_from_other_settings(small_config, write_config, capsys):
    config = _setup(small_config, write_config)
    _all_shards(config)
    data = copy.deepcopy(config.data)
    data["models"]["random"]["seed"] = 1
    other = validate_config(data, source=config.path)
    _run(other, "random", Shard(3, 3))  # shard 3 made with seed 1; the config says seed 0
    err = _merge_error(config, capsys)
    assert (
        "3-of-3.parquet was made with other model settings, data, prompts or part size than random on "
        "pope-fixture has now; run `vlmgrid infer random pope-fixture --shard 3/3` again" in err
    )


def test_merge_calls_a_truncated_shard_unreadable(small_config, write_config, capsys):
    config = _setup(small_config, write_config)
    _all_shards(config)
    path = paths.shard_path(config.results_dir, "random", BENCH, 2, 3)
    path.write_bytes(path.read_bytes()[:100])
    err = _merge_error(config, capsys)
    assert "2-of-3.parquet is unreadable (truncated or not parquet" in err
    assert "delete it and run `vlmgrid infer random pope-fixture --shard 2/3` again" in err


def test_merge_refuses_a_shard_under_another_shards_name(small_config, write_config, capsys):
    config = _setup(small_config, write_config)
    _all_shards(config)
    first, second = (paths.shard_path(config.results_dir, "random", BENCH, i, 3) for i in (1, 2))
    first.write_bytes(second.read_bytes())
    err = _merge_error(config, capsys)
    assert "1-of-3.parquet holds shard 2/3, but is merged as shard 1/3" in err


def test_merge_refuses_shards_that_ran_the_model_differently(small_config, write_config, capsys):
    import json

    from vlmgrid.predictions import METADATA_KEY, write_table

    config = _setup(small_config, write_config)
    _all_shards(config)
    path = paths.shard_path(config.results_dir, "random", BENCH, 3, 3)
    table = pq.read_table(path)
    metadata = read_metadata(path)
    metadata["provenance"]["device"] = "another GPU"
    write_table(path, table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()}))
    err = _merge_error(config, capsys)
    assert (
        "3-of-3.parquet differs from shard 1 in how the model ran (provenance.device: 'another GPU' vs" in err
    )


def test_not_applicable_sharded_cell_writes_the_unsharded_record(small_config, write_config):
    data = copy.deepcopy(small_config)
    data["benchmarks"]["textvqa-fixture"]["shards"] = 3
    config = validate_config(data, source=write_config(data))
    _cli(config, "infer", "clip-tiny", "textvqa-fixture")
    out = paths.predictions_path(config.results_dir, "clip-tiny", "textvqa-fixture")
    reference = out.read_bytes()
    out.unlink()

    _cli(config, "infer", "clip-tiny", "textvqa-fixture", "--shard", "2/3")  # a shard job records it too
    shard = paths.shard_path(config.results_dir, "clip-tiny", "textvqa-fixture", 2, 3)
    assert read_metadata(shard)["applicable"] is False and read_predictions(shard).empty
    _cli(config, "merge-shards", "clip-tiny", "textvqa-fixture")  # needs no shard file
    assert out.read_bytes() == reference


# --- Snakemake ----------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_snakemake_runs_sharded_cells_to_the_unsharded_predictions(tmp_path):
    import yaml
    from helpers.common import copy_workflow, run

    root = copy_workflow(tmp_path / "repo")
    data = yaml.safe_load((root / "config/config.yaml").read_text())
    data["grid"] = {"models": ["random", "clip-tiny"], "benchmarks": [BENCH, "textvqa-fixture"]}
    data["infer"]["part_size"] = 16  # 6 parts: 2 a shard
    for bench in data["grid"]["benchmarks"]:  # textvqa: a sharded cell that cannot run (clip-tiny, random)
        data["benchmarks"][bench]["shards"] = 3

    def configure(name, **changes):
        path = root / "config" / name
        path.write_text(yaml.safe_dump({**data, **changes}, sort_keys=False))
        return ["--configfile", str(path)]

    sharded = configure("sharded.yaml")
    # two jobs at a time even on two cores (each spends most of its time loading its model on one): the same
    # files
    run(["snakemake", "--cores", "4", *sharded], root)
    cells = [(model, bench) for model in ("random", "clip-tiny") for bench in (BENCH, "textvqa-fixture")]
    for model, bench in cells:
        assert (root / f"results/scores/{model}/{bench}.json").is_file()
    for index in (1, 2, 3):
        assert (root / f"results/logs/infer/clip-tiny/{BENCH}/{index}-of-3.log").is_file()
    assert not list((root / "results/shards").rglob("*.parquet"))  # merged, then removed
    assert "Nothing to be done" in run(["snakemake", "-n", *sharded], root).stdout
    # another shard count reruns the sharded cells' inference, never the data's preparation
    data["benchmarks"][BENCH]["shards"] = 2
    plan = run(["snakemake", "-n", "--quiet", "rules", *configure("two.yaml")], root).stdout
    assert "infer_shard" in plan and "prepare" not in plan

    data["benchmarks"][BENCH].pop("shards")
    data["benchmarks"]["textvqa-fixture"].pop("shards")
    unsharded = configure("unsharded.yaml", results_dir="results-unsharded")
    targets = [f"results-unsharded/predictions/{model}/{bench}.parquet" for model, bench in cells]
    run(["snakemake", "--cores", "4", *targets, *unsharded], root)  # --configfile takes every name after it
    for model, bench in cells:
        merged = root / f"results/predictions/{model}/{bench}.parquet"
        _assert_same_file(merged, root / f"results-unsharded/predictions/{model}/{bench}.parquet")
    assert (root / f"results-unsharded/logs/infer/random/{BENCH}.log").is_file()  # each grid its own logs


def test_the_batch_check_survives_the_merge(small_config, write_config):
    # a LLaVA padded on the wrong side, on questions of different lengths: its batch check finds differing
    # answers in the shards, and the merged record is the unsharded one (counts summed, differing ids united)
    bench, model = "scienceqa-fixture", "llava-right"
    data = copy.deepcopy(small_config)
    data["infer"] = {"part_size": 16, "threads": 1, "invariance_items": 12}
    data["benchmarks"] = {bench: {**data["benchmarks"][bench], "shards": 3}}
    data["models"] = {model: {**data["models"]["llava-tiny"], "padding_side": "right"}}
    data["grid"] = {"models": [model], "benchmarks": [bench]}
    config = validate_config(data, source=write_config(data))
    bench_dir, model_dir = paths.bench_dir(config.data_dir, bench), paths.model_dir(config.data_dir, model)
    prepare_benchmark(bench, config.benchmark(bench), bench_dir)
    fetch_model(model, config.model(model), model_dir)

    def run(shard=None):
        if shard is None:
            cell = Cell.in_results(config.results_dir, model, bench)
        else:
            cell = Cell(
                model,
                bench,
                paths.shard_path(config.results_dir, model, bench, shard.index, shard.count),
                paths.shard_partial_dir(config.results_dir, model, bench, shard.index, shard.count),
                shard,
            )
        return run_inference(
            cell=cell,
            model_settings=config.model(model),
            bench_dir=bench_dir,
            model_dir=model_dir,
            part_size=16,
            threads=1,
            prompts_dir=config.prompts_dir,
            progress=False,
            check_items=12,
        )

    reference = read_metadata(_move_aside(run()))["invariance"]
    checks = [read_metadata(run(Shard(i, 3)))["invariance"] for i in (1, 2, 3)]
    job = open_job(
        model_settings=config.model(model), bench_dir=bench_dir, part_size=16, prompts_dir=config.prompts_dir
    )
    out = merge_shards(
        job=job,
        model_name=model,
        model_settings=config.model(model),
        shard_paths=[paths.shard_path(config.results_dir, model, bench, i, 3) for i in (1, 2, 3)],
        out_path=paths.predictions_path(config.results_dir, model, bench),
    )
    merged = read_metadata(out)["invariance"]
    assert reference["differing"] and sum(len(c["differing"]) for c in checks) == len(reference["differing"])
    assert (
        merged["checked"] == sum(c["checked"] for c in checks) == reference["checked"] == 2
    )  # a tenth of 40 forwards, each 1.4x alone
    assert merged["same"] == sum(c["same"] for c in checks) == reference["same"]
    assert (
        sorted(merged["differing"])
        == sorted(i for c in checks for i in c["differing"])
        == sorted(reference["differing"])
    )
    assert merged["batch_size"] == reference["batch_size"]
    if reference["max_logprob_delta"] is not None:
        assert merged["max_logprob_delta"] == max(
            c["max_logprob_delta"] for c in checks if c["max_logprob_delta"] is not None
        )
