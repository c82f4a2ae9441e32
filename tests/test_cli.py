import subprocess
import sys

import pytest

from vlmgrid.cli import main

from conftest import REPO


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def test_check_config(capsys):
    assert main(["check-config"]) == 0
    assert "3 models x 3 benchmarks = 9 cells" in capsys.readouterr().out


def test_cells_lists_the_grid(capsys):
    assert main(["cells"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "clip-tiny\tflowers102-fixture" and len(lines) == 9


def test_listing_commands(capsys):
    assert main(["benchmarks"]) == 0
    out = capsys.readouterr().out
    assert "pope" in out and "flowers102-fixture" in out
    assert main(["models"]) == 0
    assert "open_clip" in capsys.readouterr().out


def test_unknown_model_is_one_sentence_with_the_closest_name(capsys):
    assert main(["infer", "clip-tny", "pope-fixture"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlmgrid: error: ") and 'did you mean "clip-tiny"' in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_missing_config_file(capsys, tmp_path):
    assert main(["cells", "--config", str(tmp_path / "none.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "vlmgrid.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("vlmgrid ")



def test_make_tiny_models_writes_loadable_checkpoints(tmp_path, capsys):
    from vlmgrid.models import BACKENDS
    from vlmgrid.models.base import GenerateRequest

    assert main(["make-tiny-models", str(tmp_path), "--families", "llava"]) == 0
    assert "no CLIP weights" not in capsys.readouterr().err
    hf = BACKENDS.get("hf").load({"backend": "hf", "source": {"type": "fixture", "family": "llava"}},
                                 tmp_path / "llava", "cpu")
    assert isinstance(hf.generate([GenerateRequest("a", None, "Hello", max_new_tokens=3)])[0], str)
    clip = BACKENDS.get("open_clip").load({"backend": "open_clip", "source": {"type": "fixture"}},
                                          tmp_path / "open_clip", "cpu")
    assert clip.embed_texts(["a cat"]).shape == (1, 32)
