"""The running cell (`vlmgrid.cellrun`): which model run made which rows, across resumes and shards, and
the folders a finished job leaves behind."""

import copy
import dataclasses

import pyarrow as pa
import pytest

from vlmgrid import paths
from vlmgrid.cellrun.cell import Cell, Shard
from vlmgrid.cellrun.job import merge_runs
from vlmgrid.cellrun.parts import PartStore
from vlmgrid.cellrun.run import CellRun
from vlmgrid.cellrun.shards import merge_shards
from vlmgrid.config import validate_config
from vlmgrid.models.baseline import Baseline
from vlmgrid.predictions import read_metadata, read_predictions, rows_to_table, write_table
from vlmgrid.stages.fetch import fetch_model
from vlmgrid.stages.infer import open_job, run_inference
from vlmgrid.stages.prepare import prepare_benchmark

BENCH = "pope-fixture"  # 90 records: 6 parts of 16 (the last of 10)


class Killed(Exception):
    pass


def _setup(small_config):
    data = copy.deepcopy(small_config)
    data["infer"] = {"part_size": 16, "threads": 1}
    config = validate_config(data)
    prepare_benchmark(BENCH, config.benchmark(BENCH), paths.bench_dir(config.data_dir, BENCH))
    fetch_model("random", config.model("random"), paths.model_dir(config.data_dir, "random"))
    return config


def _run(config, cell):
    return run_inference(
        cell=cell,
        model_settings=config.model("random"),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        model_dir=paths.model_dir(config.data_dir, "random"),
        part_size=16,
        threads=1,
        prompts_dir=config.prompts_dir,
        progress=False,
    )


def _served_by(monkeypatch, server: str) -> None:
    """The model reports the server (and its version) it answers through, as a served model's provenance
    does."""
    provenance = Baseline.provenance
    monkeypatch.setattr(
        Baseline,
        "provenance",
        lambda self: dataclasses.replace(provenance(self), libraries={"server": server}),
    )


def _killed_after(monkeypatch, n_parts: int) -> None:
    """The job is killed once it has saved n_parts parts."""
    save, saved = PartStore.save, []

    def save_then_kill(self, index, table, made_by):
        if len(saved) == n_parts:
            raise Killed()
        save(self, index, table, made_by)
        saved.append(index)

    monkeypatch.setattr(PartStore, "save", save_then_kill)


def _interrupted_then_resumed(config, monkeypatch, cell, first: str, second: str, parts_first: int) -> dict:
    _served_by(monkeypatch, first)
    _killed_after(monkeypatch, parts_first)
    with pytest.raises(Killed):
        _run(config, cell)
    monkeypatch.undo()
    _served_by(monkeypatch, second)
    _run(config, cell)
    monkeypatch.undo()
    return read_metadata(cell.out_path)


def test_a_job_resumed_on_another_server_lists_both_with_the_rows_each_made(small_config, monkeypatch):
    config = _setup(small_config)
    cell = Cell.in_results(config.results_dir, "random", BENCH)
    metadata = _interrupted_then_resumed(config, monkeypatch, cell, "server 1.0", "server 2.0", parts_first=2)

    runs = metadata["runs"]
    assert [run["provenance"]["libraries"] for run in runs] == [
        {"server": "server 1.0"},
        {"server": "server 2.0"},
    ]
    assert [run["rows"] for run in runs] == [[[0, 32]], [[32, 90]]]
    assert all(run["strategy"] == metadata["strategy"] == "score_options" for run in runs)
    # the headline provenance is the run that made the last rows, as before
    assert metadata["provenance"]["libraries"] == {"server": "server 2.0"}
    assert len(read_predictions(cell.out_path)) == 90


def test_a_job_resumed_on_the_same_server_writes_the_file_of_an_uninterrupted_one(
    small_config, monkeypatch, tmp_path
):
    config = _setup(small_config)
    cell = Cell.in_results(config.results_dir, "random", BENCH)
    resumed = _interrupted_then_resumed(config, monkeypatch, cell, "server 1.0", "server 1.0", parts_first=3)
    reference = cell.out_path.read_bytes()
    cell.out_path.unlink()
    _served_by(monkeypatch, "server 1.0")
    _run(config, cell)
    assert cell.out_path.read_bytes() == reference
    assert [run["rows"] for run in resumed["runs"]] == [[[0, 90]]]


def test_merged_shards_list_every_run_of_every_shard_with_rows_of_the_whole_cell(small_config, monkeypatch):
    config = _setup(small_config)
    shards = [Cell.in_results(config.results_dir, "random", BENCH, Shard(index, 2)) for index in (1, 2)]
    _served_by(monkeypatch, "server 1.0")
    _run(config, shards[0])  # parts 0-2: rows 0-48
    monkeypatch.undo()
    # shard 2 (parts 3-5: rows 48-90) is killed after one part and resumed on the same server
    _interrupted_then_resumed(config, monkeypatch, shards[1], "server 1.0", "server 1.0", parts_first=1)
    shard_runs = read_metadata(shards[1].out_path)["runs"]
    assert [run["rows"] for run in shard_runs] == [[[48, 90]]]  # rows of the cell's file, not of the shard's

    job = open_job(
        model_settings=config.model("random"),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        part_size=16,
        prompts_dir=config.prompts_dir,
    )
    out = merge_shards(
        job=job,
        model_name="random",
        model_settings=config.model("random"),
        shard_paths=[cell.out_path for cell in shards],
        out_path=paths.predictions_path(config.results_dir, "random", BENCH),
    )
    assert [run["rows"] for run in read_metadata(out)["runs"]] == [[[0, 90]]]


def test_merge_runs_joins_touching_ranges_and_keeps_distinct_runs_apart():
    a = {"strategy": "generate", "provenance": {"server": "1"}}
    b = {"strategy": "generate", "provenance": {"server": "2"}}
    fallback = {"strategy": "score_options", "provenance": {"server": "1"}}
    runs = merge_runs(
        [
            {**b, "rows": [[32, 48]]},
            {**a, "rows": [[0, 16]]},
            {**a, "rows": [[16, 32]]},
            {**a, "rows": [[48, 64]]},
            {**fallback, "rows": [[64, 70]]},
            {**a, "rows": [[70, 70]]},
        ]
    )
    assert runs == [
        {**a, "rows": [[0, 32], [48, 64]]},
        {**b, "rows": [[32, 48]]},
        {**fallback, "rows": [[64, 70]]},
    ]


def _random_run(small_config):
    """The random baseline's job on BENCH in parts of 16 requests: (config, job, cell, its run)."""
    config = _setup(small_config)
    job = open_job(
        model_settings=config.model("random"),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        part_size=16,
        prompts_dir=config.prompts_dir,
    )
    cell = Cell.in_results(config.results_dir, "random", BENCH)
    return config, job, cell, CellRun(cell, job, config.model("random"))


def test_a_part_saved_without_its_run_is_redone(small_config, tmp_path):
    config, job, cell, run = _random_run(small_config)
    chunk = job.chunk(0)
    rows = [{"id": item} for item in chunk["id"]]
    write_table(run.store.path(0), rows_to_table(rows))  # a part written before parts recorded their run
    run.store.save(1, rows_to_table(rows), {"strategy": "score_options", "provenance": {"backend": "random"}})
    assert CellRun(cell, job, config.model("random")).pending[:2] == [0, 2]


def test_a_part_edited_after_it_was_written_is_redone_never_merged(small_config):
    """A part whose rows are not the ones the model wrote (an answer set by hand, its metadata kept) is
    answered again: a resumed job never merges it into the predictions as the model's."""
    import pyarrow.parquet as pq

    config, job, cell, run = _random_run(small_config)
    rows = [{"id": item, "prediction": "yes", "prediction_index": 0} for item in job.chunk(0)["id"]]
    made_by = {"strategy": "score_options", "provenance": {"backend": "random"}}
    for index in (0, 1):
        run.store.save(index, rows_to_table(rows), made_by)
    saved = pq.read_table(run.store.path(1))
    edited = saved.set_column(
        saved.schema.get_field_index("prediction_index"),
        "prediction_index",
        pa.array([1] * saved.num_rows, pa.int64()),
    )
    pq.write_table(edited, run.store.path(1))  # its metadata, the run and the rows' hash, kept
    assert CellRun(cell, job, config.model("random")).pending[:2] == [1, 2]
    assert not run.store.path(1).exists()


def test_a_finished_job_leaves_no_empty_parts_folder(small_config):
    config = _setup(small_config)
    cell = Cell.in_results(config.results_dir, "random", BENCH)
    with cell.running():
        _run(config, cell)
    assert cell.out_path.is_file()
    assert not (config.results_dir / "partial" / "random").exists()
    assert not (config.results_dir / "partial").exists()


def test_a_failed_job_keeps_its_parts(small_config, monkeypatch):
    config = _setup(small_config)
    cell = Cell.in_results(config.results_dir, "random", BENCH)
    _killed_after(monkeypatch, 2)
    with pytest.raises(Killed), cell.running():
        _run(config, cell)
    assert len(list(cell.partial_dir.glob("part-*.parquet"))) == 2
    assert not cell.partial_dir.with_name(f"{BENCH}.lock").exists()


API = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "concurrency": 8}
CLIP = {"backend": "open_clip", "source": {"type": "fixture", "seed": 0}, "batch_size": 64}


@pytest.mark.parametrize(
    "settings, change, same",
    [
        # how the answers are computed: the parts made before are resumed
        (API, {"concurrency": 2, "max_retries": 0, "timeout": 5, "circuit_breaker": 3, "cache": False}, True),
        (CLIP, {"decode_workers": 0, "pixel_cache": False}, True),
        # what they are
        (API, {"generation": {"max_new_tokens": 4}}, False),
        (CLIP, {"batch_size": 8}, False),
        (CLIP, {"image_decode": "device"}, False),
    ],
)
def test_a_job_is_the_same_after_a_change_of_how_answers_are_computed_alone(
    small_config, settings, change, same
):
    from vlmgrid.models import answer_settings

    config = _setup(small_config)

    def fingerprint(model_settings):
        return open_job(
            model_settings=model_settings,
            bench_dir=paths.bench_dir(config.data_dir, BENCH),
            part_size=16,
            prompts_dir=config.prompts_dir,
        ).fingerprint

    assert (fingerprint(settings) == fingerprint({**settings, **change})) == same
    assert (answer_settings(settings) == answer_settings({**settings, **change})) == same
