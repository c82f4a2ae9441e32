import os
import re
import subprocess
import sys

import pytest
from helpers.common import REPO

from vlmgrid.cli import main


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def test_check_config(capsys):
    assert main(["check-config"]) == 0
    # CLIP and the random baseline cannot answer TextVQA's free-form questions
    assert "3 models x 14 benchmarks = 42 cells (2 not applicable)" in capsys.readouterr().out


def test_cells_lists_the_grid(capsys):
    assert main(["cells"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "clip-tiny\timagenet-fixture" and len(lines) == 42


def _column_starts(line: str) -> list[int]:
    """Where each column of a listing line starts: after two spaces or more (a description has single
    ones)."""
    return [match.end() for match in re.finditer(r"(?:^|  ) *(?=\S)", line)]


def test_listing_commands(capsys):
    assert main(["benchmarks"]) == 0
    out = capsys.readouterr().out
    assert "pope" in out and "flowers102-fixture" in out
    kinds = out.split("benchmark kinds:\n")[1].split("benchmarks in")[0].splitlines()
    # every kind's protocol, metric and description start in the same column, the longest name
    # (imagenet_ilsvrc2012) and metric (mmbench_circular) included
    assert len({tuple(_column_starts(line)[:4]) for line in kinds}) == 1, kinds
    assert next(line for line in kinds if "imagenet_ilsvrc2012" in line).split()[:3] == [
        "imagenet_ilsvrc2012",
        "classification",
        "classification",
    ]
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "open_clip" in out and "  llava-tiny  backend=hf         source=fixture\n" in out
    assert "  random      backend=baseline\n" in out
    backends = out.split("model backends:\n")[1].split("models in")[0].splitlines()
    assert len({_column_starts(line)[1] for line in backends}) == 1, backends


def test_check_config_counts_one_model_in_the_singular(capsys, tmp_path, write_config, default_config_data):
    data = default_config_data
    data["grid"] = {"models": ["random"], "benchmarks": ["pope-fixture"]}
    assert main(["check-config", "--config", str(write_config(data))]) == 0
    assert "valid; 1 model x 1 benchmark = 1 cell\n" in capsys.readouterr().out


def test_unknown_model_is_one_sentence_with_the_closest_name(capsys):
    assert main(["infer", "clip-tny", "pope-fixture"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlmgrid: error: ") and 'did you mean "clip-tiny"' in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_missing_config_file(capsys, tmp_path):
    assert main(["cells", "--config", str(tmp_path / "none.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_console_script_is_installed():
    result = subprocess.run(
        [sys.executable, "-m", "vlmgrid.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout.startswith("vlmgrid ")


@pytest.mark.parametrize("command", [["benchmarks"], ["cells"]])
def test_listing_into_a_closed_pipe_ends_quietly(command):
    # `vlmgrid benchmarks | head -1`: the reader leaves before the listing is written. The pipe's read end is
    # closed before the command starts, so every write to it fails, as it does once `head` has quit.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "vlmgrid.cli", *command],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert result.stderr == "" and result.returncode == 141  # no traceback; 128 + SIGPIPE, as a shell reports


def test_make_tiny_models_writes_loadable_checkpoints(tmp_path, capsys):
    from vlmgrid.model_requests import GenerateRequest
    from vlmgrid.models import BACKENDS

    assert main(["make-tiny-models", str(tmp_path), "--families", "llava"]) == 0
    assert "no CLIP weights" not in capsys.readouterr().err
    hf = BACKENDS.get("hf").load(
        {"backend": "hf", "source": {"type": "fixture", "family": "llava"}}, tmp_path / "llava", "cpu"
    )
    assert isinstance(hf.generate([GenerateRequest("a", None, "Hello", max_new_tokens=3)])[0], str)
    clip = BACKENDS.get("open_clip").load(
        {"backend": "open_clip", "source": {"type": "fixture"}}, tmp_path / "open_clip", "cpu"
    )
    assert clip.embed_texts(["a cat"]).shape == (1, 32)


def _grid_with_textvqa(tmp_path, write_config, default_config_data):
    data = default_config_data
    data["data_dir"] = str(tmp_path / "data")
    data["results_dir"] = str(tmp_path / "results")
    data["benchmarks"]["textvqa-fixture"] = {
        "kind": "textvqa",
        "source": {"type": "fixture", "seed": 0, "size": 6},
    }
    data["grid"] = {"models": ["clip-tiny", "llava-tiny"], "benchmarks": ["pope-fixture", "textvqa-fixture"]}
    return str(write_config(data))


def test_cells_and_check_config_show_not_applicable_cells(
    capsys, tmp_path, write_config, default_config_data
):
    config = _grid_with_textvqa(tmp_path, write_config, default_config_data)
    assert main(["check-config", "--config", config]) == 0
    assert "2 models x 2 benchmarks = 4 cells (1 not applicable)" in capsys.readouterr().out
    assert main(["cells", "--config", config]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "clip-tiny\tpope-fixture",
        'clip-tiny\ttextvqa-fixture\tn/a: model "clip-tiny" (open_clip backend, capability embed) cannot run '
        'benchmark "textvqa-fixture" (short_answer protocol needs generate)',
        "llava-tiny\tpope-fixture",
        "llava-tiny\ttextvqa-fixture",
    ]
    assert main(["cells", "--paths", "--config", config]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


def test_infer_and_score_of_a_not_applicable_cell(capsys, tmp_path, write_config, default_config_data):
    import json

    import pyarrow.parquet as pq

    config = _grid_with_textvqa(tmp_path, write_config, default_config_data)
    assert main(["prepare", "textvqa-fixture", "--config", config]) == 0
    # A separate interpreter: the cell must be written without importing torch or loading the model.
    code = (
        "import sys; from vlmgrid.cli import main; rc = main(['infer', 'clip-tiny', 'textvqa-fixture', "
        f"'--config', {config!r}]); assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    predictions = tmp_path / "results" / "predictions" / "clip-tiny" / "textvqa-fixture.parquet"
    table = pq.read_table(predictions)
    assert table.num_rows == 0
    metadata = json.loads(table.schema.metadata[b"vlmgrid"])
    assert metadata["applicable"] is False
    assert metadata["reason"].startswith('model "clip-tiny" (open_clip backend, capability embed) cannot run')
    assert list((tmp_path / "results").rglob("*.tmp*")) == []
    assert main(["score", "clip-tiny", "textvqa-fixture", "--config", config]) == 0
    assert "not applicable" in capsys.readouterr().err
    score = json.loads((tmp_path / "results" / "scores" / "clip-tiny" / "textvqa-fixture.json").read_text())
    assert score["applicable"] is False and score["reason"] == metadata["reason"]
    assert score["metric"] == "vqa_accuracy"
    assert not {"value", "ci95", "n", "bootstrap"} & set(score)
