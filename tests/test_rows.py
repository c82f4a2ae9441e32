"""A model's row in one command (DVC's stage per model): its cells side by side, a current cell left as it is.

The row must write what the per-cell commands write, byte for byte; a cell is current only when its predictions
file records every input a run would use now, so any change of settings, data, prompts or the batch check runs
it again; a failed piece stops the command with a sentence naming it, after the others have finished.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest

from helpers.common import process_running, wait_for
from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.stages.infer import infer_cell
from vlmgrid.stages.prepare import prepare
from vlmgrid.stages.rows import predictions_current, run_row
from vlmgrid.stages.score import score_grid_cell
from vlmgrid.stages.sidebyside import Task, run_side_by_side

BENCHES = ["pope-fixture", "mme-fixture"]


def _config(small_config, **changes):
    data = copy.deepcopy(small_config)
    data["grid"] = {"models": ["random"], "benchmarks": BENCHES}
    for key, value in changes.items():
        data[key] = value
    return validate_config(data)


@pytest.fixture
def row_config(small_config):
    config = _config(small_config)
    for bench in BENCHES:
        prepare(config, bench)
    return config


def test_the_row_writes_the_cells_files_byte_for_byte(row_config, small_config, tmp_path):
    run_row(row_config, "random", jobs=2)
    alone = _config(small_config, results_dir=str(tmp_path / "alone"))
    for bench in BENCHES:
        infer_cell(alone, "random", bench, progress=False)
        score_grid_cell(alone, "random", bench)
        for path in (paths.predictions_path, paths.score_path):
            assert path(row_config.results_dir, "random", bench).read_bytes() == \
                path(alone.results_dir, "random", bench).read_bytes()


def test_a_current_cell_is_left_as_it_is_and_scored_again(row_config, caplog):
    run_row(row_config, "random", jobs=1)
    predictions = paths.predictions_path(row_config.results_dir, "random", "pope-fixture")
    score = paths.score_path(row_config.results_dir, "random", "pope-fixture")
    before = predictions.stat().st_mtime_ns
    score.unlink()
    run_row(row_config, "random", jobs=2)
    assert predictions.stat().st_mtime_ns == before and score.is_file()


def test_current_means_every_input_a_run_would_use_now(row_config, small_config, tmp_path):
    assert not predictions_current(row_config, "random", "pope-fixture")  # no file yet
    infer_cell(row_config, "random", "pope-fixture", progress=False)
    assert predictions_current(row_config, "random", "pope-fixture")

    models = copy.deepcopy(small_config["models"])
    models["random"]["seed"] = 1
    assert not predictions_current(_config(small_config, models=models), "random", "pope-fixture")
    # the batch check turned off (the baseline does not batch, so it records why it was skipped, whatever the
    # sample's size; a batching model's record holds the sample's size, tests/cellrun/test_invariance.py)
    infer = {**small_config["infer"], "invariance_items": 0}
    assert not predictions_current(_config(small_config, infer=infer), "random", "pope-fixture")
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "extra.yaml").write_text("a: b\n")
    assert not predictions_current(_config(small_config, prompts_dir=str(prompts)), "random", "pope-fixture")
    # other data under the same name: its fingerprint differs
    benchmarks = copy.deepcopy(small_config["benchmarks"])
    benchmarks["pope-fixture"]["source"]["seed"] = 1
    other = _config(small_config, benchmarks=benchmarks)
    prepare(other, "pope-fixture")
    assert not predictions_current(other, "random", "pope-fixture")
    # a damaged file is not current (the run replaces it)
    path = paths.predictions_path(row_config.results_dir, "random", "pope-fixture")
    path.write_bytes(path.read_bytes()[:100])
    assert not predictions_current(row_config, "random", "pope-fixture")


def test_a_cell_that_fails_to_run_again_keeps_no_number_of_its_old_inputs(row_config, small_config, monkeypatch):
    run_row(row_config, "random", jobs=1)
    models = copy.deepcopy(small_config["models"])
    models["random"]["seed"] = 1
    changed = _config(small_config, models=models)

    def fails(*args, **kwargs):
        raise VlmgridError("out of memory")

    monkeypatch.setattr("vlmgrid.stages.infer.infer_cell", fails)
    with pytest.raises(VlmgridError, match="2 of the 2 cells of random failed"):
        run_row(changed, "random", jobs=2)
    assert not any(paths.score_path(changed.results_dir, "random", bench).exists() for bench in BENCHES)


def test_a_model_outside_the_grid_is_one_sentence(row_config):
    with pytest.raises(VlmgridError, match='model "nobody" is not in the grid'):
        run_row(row_config, "nobody")


def _write(path: Path, text: str) -> None:
    logging.getLogger("vlmgrid.test").info(f"writing {path.name}")
    path.write_text(text)


def _fail() -> None:
    raise VlmgridError("this piece cannot run")


def test_a_failed_piece_is_named_after_the_others_finish(tmp_path, capfd):
    tasks = [Task("first", lambda: _write(tmp_path / "a", "a")), Task("broken", _fail),
             Task("third", lambda: _write(tmp_path / "c", "c"))]
    with pytest.raises(VlmgridError, match=r"1 of the 3 pieces failed \(broken\); each one's error is above"):
        run_side_by_side(tasks, 2, "pieces")
    assert (tmp_path / "a").read_text() == "a" and (tmp_path / "c").read_text() == "c"
    assert "vlmgrid: error: broken: this piece cannot run" in capfd.readouterr().err


def test_compare_and_inspect_take_one_benchmark_or_all(capsys):
    assert main(["compare"]) == 2
    assert "name one benchmark of the grid, or pass --all" in capsys.readouterr().err
    assert main(["inspect", "pope-fixture", "--all"]) == 2


def test_the_batch_checks_sample_size_is_an_input_of_a_batching_model(small_config):
    from vlmgrid.stages.fetch import fetch

    infer = {**small_config["infer"], "invariance_items": 2}
    config = _config(small_config, infer=infer, grid={"models": ["llava-tiny"], "benchmarks": ["mme-fixture"]})
    prepare(config, "mme-fixture")
    fetch(config, "llava-tiny")
    infer_cell(config, "llava-tiny", "mme-fixture", progress=False)
    assert predictions_current(config, "llava-tiny", "mme-fixture")
    more = _config(small_config, infer={**infer, "invariance_items": 3},
                   grid={"models": ["llava-tiny"], "benchmarks": ["mme-fixture"]})
    assert not predictions_current(more, "llava-tiny", "mme-fixture")


PIECES_SCRIPT = """
import os, sys, time
from pathlib import Path
from vlmgrid.stages.sidebyside import Task, run_side_by_side

def piece(name):
    Path(sys.argv[1], name).write_text(str(os.getpid()))
    time.sleep(60)

run_side_by_side([Task(name, lambda name=name: piece(name)) for name in ("a", "b", "c")], 2, "pieces")
"""


def test_a_cancelled_command_ends_its_pieces(tmp_path):
    import signal
    import subprocess
    import sys

    command = subprocess.Popen([sys.executable, "-c", PIECES_SCRIPT, str(tmp_path)])
    wait_for(lambda: len([path for path in tmp_path.iterdir() if path.read_text()]) >= 2, "two pieces to start")
    pids = [int(path.read_text()) for path in tmp_path.iterdir()]
    assert len(pids) == 2 and all(pids)  # two at a time: the third waits
    command.send_signal(signal.SIGTERM)
    assert command.wait(timeout=30) == 128 + signal.SIGTERM
    assert not any(process_running(pid) for pid in pids)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b"]
