"""Inference: parts as it goes, resume after a crash, atomic final file, error rows for broken images."""

import contextlib
import copy
import json
import logging

import pyarrow.parquet as pq
import pytest

from vlmgrid import paths
from vlmgrid.cellrun.cell import Cell
from vlmgrid.cellrun.job import write_not_applicable
from vlmgrid.cellrun.parts import PartStore
from vlmgrid.config import validate_config
from vlmgrid.predictions import read_metadata, read_predictions, recorded_not_applicable
from vlmgrid.stages import infer as infer_module
from vlmgrid.stages.fetch import fetch_model
from vlmgrid.stages.prepare import prepare_benchmark


def _setup(small_config, bench="pope-fixture", model="random", part_size=16, corrupt=0):
    data = copy.deepcopy(small_config)
    data["infer"] = {"part_size": part_size, "threads": 1}
    data["benchmarks"][bench]["source"]["corrupt"] = corrupt
    config = validate_config(data)
    prepare_benchmark(bench, config.benchmark(bench), paths.bench_dir(config.data_dir, bench))
    fetch_model(model, config.model(model), paths.model_dir(config.data_dir, model))
    return config


@contextlib.contextmanager
def _listening(messages):
    """The package's log messages while the block runs, appended to `messages` (when it is a list)."""
    if messages is None:
        yield
        return
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    package = logging.getLogger("vlmgrid")
    package.addHandler(handler)
    level = package.level
    package.setLevel(logging.INFO)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(level)


def _run(config, model="random", bench="pope-fixture", messages=None, prompts_dir=None):
    with _listening(messages):
        return infer_module.run_inference(
            model_settings=config.model(model),
            bench_dir=paths.bench_dir(config.data_dir, bench),
            model_dir=paths.model_dir(config.data_dir, model),
            cell=Cell.in_results(config.results_dir, model, bench),
            part_size=int(config.infer["part_size"]),
            threads=1,
            progress=False,
            prompts_dir=prompts_dir,
        )


class Crash(Exception):
    pass


def _crash_after(monkeypatch, n_parts):
    """Make the part store raise after n_parts saves, as a kill between two parts would."""
    original = PartStore.save
    calls = {"n": 0}

    def save(self, index, table, made_by):
        if calls["n"] == n_parts:
            raise Crash()
        calls["n"] += 1
        original(self, index, table, made_by)

    monkeypatch.setattr(PartStore, "save", save)


def _crash_run(monkeypatch, n_parts, config, **run):
    """Runs the cell until it crashes after n_parts parts, then lets the part store save again."""
    _crash_after(monkeypatch, n_parts)
    with pytest.raises(Crash):
        _run(config, **run)
    monkeypatch.undo()


def test_resume_after_crash_gives_identical_predictions(small_config, monkeypatch, tmp_path):
    config = _setup(small_config)
    reference = read_predictions(_run(config))
    out = paths.predictions_path(config.results_dir, "random", "pope-fixture")
    out.unlink()

    _crash_run(monkeypatch, 2, config)
    assert not out.exists()  # no half-written predictions file
    parts = sorted(paths.partial_dir(config.results_dir, "random", "pope-fixture").glob("part-*.parquet"))
    assert len(parts) == 2

    messages = []
    resumed = read_predictions(_run(config, messages=messages))
    assert any(m.startswith("resuming: 2 of") for m in messages)
    assert resumed.equals(reference)
    assert not paths.partial_dir(config.results_dir, "random", "pope-fixture").exists()


def test_truncated_part_is_redone(small_config, monkeypatch):
    config = _setup(small_config)
    _crash_run(monkeypatch, 3, config)
    part = paths.partial_dir(config.results_dir, "random", "pope-fixture") / "part-000001.parquet"
    part.write_bytes(part.read_bytes()[:50])
    messages = []
    frame = read_predictions(_run(config, messages=messages))
    assert any("unreadable; redoing it" in m for m in messages)
    assert frame["id"].is_unique and len(frame) == 90


def test_parts_made_with_other_settings_are_discarded(small_config, monkeypatch):
    config = _setup(small_config)
    _crash_run(monkeypatch, 1, config)
    changed = copy.deepcopy(config.data)
    changed["models"]["random"]["seed"] = 5
    messages = []
    _run(validate_config(changed), messages=messages)
    assert any("discarding parts" in m for m in messages)


def test_parts_hold_model_requests_not_items(small_config, monkeypatch):
    # The random baseline scores 20 templates per flowers image, a prefix each (its 5 class names ride on
    # it): 20 requests, so parts of 50 requests hold 2 of the 40 images.
    config = _setup(small_config, bench="flowers102-fixture", part_size=50)
    _crash_run(monkeypatch, 3, config, bench="flowers102-fixture")
    messages = []
    resumed = read_predictions(_run(config, bench="flowers102-fixture", messages=messages))
    assert "resuming: 3 of 20 parts (6 of 40 items) already done" in messages
    assert len(resumed) == 40 * 20


def test_parts_of_other_boundaries_are_discarded(small_config, monkeypatch):
    config = _setup(small_config, bench="flowers102-fixture", part_size=50)
    reference = read_predictions(_run(config, bench="flowers102-fixture"))
    paths.predictions_path(config.results_dir, "random", "flowers102-fixture").unlink()
    _crash_run(monkeypatch, 3, config, bench="flowers102-fixture")
    # 30 requests a part: one image each, so the 3 parts on disk (2 images each) are not this job's
    changed = copy.deepcopy(config.data)
    changed["infer"]["part_size"] = 30
    messages = []
    again = read_predictions(_run(validate_config(changed), bench="flowers102-fixture", messages=messages))
    assert any("discarding parts" in m for m in messages)
    assert not any(m.startswith("resuming") for m in messages)
    # the same rows; within a part they run template by template, so their order follows the parts
    key = ["id", "variant"]
    assert (
        again.sort_values(key)
        .reset_index(drop=True)
        .equals(reference.sort_values(key).reset_index(drop=True))
    )


def test_predictions_record_their_inputs(small_config):
    config = _setup(small_config)
    metadata = json.loads(pq.read_schema(_run(config)).metadata[b"vlmgrid"])
    assert metadata["model"] == "random" and metadata["protocol"] == "yes_no"
    assert metadata["provenance"]["model_id"] == "baseline:random"
    assert metadata["provenance"]["generation"] == {"seed": 0}


def test_broken_image_becomes_an_error_row(small_config):
    config = _setup(small_config, bench="scienceqa-fixture", model="clip-tiny", corrupt=1)
    frame = read_predictions(_run(config, model="clip-tiny", bench="scienceqa-fixture"))
    errors = frame[frame["error"].notna()]
    assert len(errors) >= 1
    assert errors["error"].str.startswith("image unreadable").all()
    assert (errors["prediction_index"] == -1).all()
    assert frame["prediction"].notna().sum() == len(frame) - len(errors)


@pytest.mark.parametrize("model", ["clip-tiny", "llava-tiny", "random"])
@pytest.mark.parametrize("bench", ["flowers102-fixture", "pope-fixture", "scienceqa-fixture"])
def test_every_model_predicts_every_item(small_config, bench, model):
    config = _setup(small_config, bench=bench, model=model)
    frame = read_predictions(_run(config, model=model, bench=bench))
    assert frame["error"].isna().all()
    if bench == "flowers102-fixture" and model == "llava-tiny":
        # CARPE's templates: every item under every template; open-world answers are generated text,
        # kept raw (a random model's text rarely names a class), closed-world ones rank the class names
        assert frame.groupby("id")["variant"].nunique().eq(20).all()
        open_world = frame["variant"].str.startswith("open-")
        assert frame.loc[open_world, "raw"].notna().all() and frame.loc[open_world, "topk"].isna().all()
        frame = frame[~open_world]
    assert (frame["prediction_index"] >= 0).all()
    if bench == "flowers102-fixture":
        assert frame["topk"].map(len).eq(5).all()
        assert (frame["prediction_index"] == frame["topk"].map(lambda k: k[0])).all()
    else:
        assert frame["scores"].map(len).ge(2).all()


def _prompts(tmp_path, text):
    """A prompts folder holding one prompt set, some_protocol.yaml."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "some_protocol.yaml").write_text(text)
    return prompts


def test_changed_prompts_discard_parts_and_are_recorded(small_config, monkeypatch, tmp_path):
    config = _setup(small_config)
    prompts = _prompts(tmp_path, "templates: [a]\n")
    _crash_run(monkeypatch, 1, config, prompts_dir=prompts)
    (prompts / "some_protocol.yaml").write_text("templates: [b]\n")
    messages = []
    out = _run(config, messages=messages, prompts_dir=prompts)
    assert any("discarding parts" in m for m in messages)
    metadata = json.loads(pq.read_schema(out).metadata[b"vlmgrid"])
    assert list(metadata["prompts"]) == ["some_protocol.yaml"] and metadata["applicable"] is True


def test_unchanged_prompts_resume(small_config, monkeypatch, tmp_path):
    config = _setup(small_config)
    prompts = _prompts(tmp_path, "templates: [a]\n")
    _crash_run(monkeypatch, 1, config, prompts_dir=prompts)
    messages = []
    _run(config, messages=messages, prompts_dir=prompts)
    assert any(m.startswith("resuming: 1 of") for m in messages)


def test_the_benchmark_gets_the_configured_prompts_dir(small_config, monkeypatch, tmp_path):
    import vlmgrid.protocols

    config = _setup(small_config)
    seen = []
    original = vlmgrid.protocols.make_runner

    def make_runner(protocol, model, bench):
        seen.append(bench.prompts_dir)
        return original(protocol, model, bench)

    monkeypatch.setattr(vlmgrid.protocols, "make_runner", make_runner)
    _run(config, prompts_dir=tmp_path / "elsewhere")
    assert seen == [tmp_path / "elsewhere"]


def test_not_applicable_cell_writes_an_empty_marked_file(small_config, tmp_path):
    config = validate_config(copy.deepcopy(small_config))
    out = paths.predictions_path(config.results_dir, "clip-tiny", "textvqa-fixture")
    partial = paths.partial_dir(config.results_dir, "clip-tiny", "textvqa-fixture")
    partial.mkdir(parents=True)
    (partial / "part-000000.parquet").write_bytes(b"old")
    write_not_applicable(
        model_name="clip-tiny",
        model_settings=config.model("clip-tiny"),
        benchmark="textvqa-fixture",
        reason="it cannot",
        out_path=out,
        partial_dir=partial,
    )
    assert read_predictions(out).empty
    metadata = read_metadata(out)
    assert metadata["applicable"] is False and metadata["reason"] == "it cannot"
    assert recorded_not_applicable(metadata) == "it cannot"
    assert not partial.exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["textvqa-fixture.parquet"]  # atomic: no leftovers


def _score(config, predictions, bench="pope-fixture", model="random"):
    from vlmgrid.stages.score import score_cell

    return score_cell(
        model_name=model,
        bench_dir=paths.bench_dir(config.data_dir, bench),
        predictions_path=predictions,
        out_path=paths.score_path(config.results_dir, model, bench),
        samples=20,
        seed=0,
    )


def test_zero_rows_not_marked_not_applicable_stay_an_error(small_config, tmp_path):
    from vlmgrid.errors import VlmgridError
    from vlmgrid.predictions import rows_to_table, write_predictions

    config = _setup(small_config)
    path = tmp_path / "empty.parquet"
    write_predictions(path, rows_to_table([]), {"model": "random", "strategy": "score_options"})
    with pytest.raises(VlmgridError, match="no predictions to score"):
        _score(config, path)


def test_not_applicable_marked_file_with_rows_is_an_error(small_config, tmp_path):
    from vlmgrid.errors import VlmgridError
    from vlmgrid.predictions import rows_to_table, write_predictions
    from vlmgrid.protocols.base import prediction_row

    config = _setup(small_config)
    path = tmp_path / "odd.parquet"
    write_predictions(
        path, rows_to_table([prediction_row("x")]), {"applicable": False, "reason": "it cannot"}
    )
    with pytest.raises(VlmgridError, match=r"odd.parquet is marked not applicable but holds 1 rows; rerun"):
        _score(config, path)


def test_not_applicable_score_has_the_reason_and_no_numbers(small_config, tmp_path):
    config = _setup(small_config)
    path = tmp_path / "na.parquet"
    write_not_applicable(
        model_name="random",
        model_settings=config.model("random"),
        benchmark="pope-fixture",
        reason="it cannot",
        out_path=path,
        partial_dir=tmp_path / "parts",
    )
    score = _score(config, path)
    written = json.loads(paths.score_path(config.results_dir, "random", "pope-fixture").read_text())
    assert written == score
    assert score["applicable"] is False and score["reason"] == "it cannot" and score["metric"] == "f1"
    assert not {"value", "ci95", "n", "metrics", "bootstrap"} & set(score)
