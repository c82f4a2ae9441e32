"""The package's layers (pyproject.toml's import-linter contract, docs/design.md) hold, and the contract bites."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path, package_parent: Path) -> subprocess.CompletedProcess:
    if not LINT.is_file():
        pytest.skip(f"{LINT} is missing; install the test extra (pip install -e '.[test]'), which brings import-linter")
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_package_keeps_its_layers():
    result = _lint(REPO, REPO / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, upward", [
    ("config.py", "from vlmgrid.benchmarks import BENCHMARKS"),  # config above a domain package
    ("metrics/base.py", "import vlmgrid.report"),  # one domain package beside another
    ("models/base.py", "import vlmgrid.fixtures"),  # production code on the test scaffolding
    ("errors.py", "import vlmgrid.stages"),  # the bottom on the top
])
def test_an_import_against_the_layers_fails_the_check(tmp_path, module, upward):
    shutil.copytree(REPO / "src" / "vlmgrid", tmp_path / "src" / "vlmgrid",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "src" / "vlmgrid" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{upward}  # noqa\n", encoding="utf-8")
    result = _lint(tmp_path, tmp_path / "src")
    assert result.returncode != 0
    assert "0 kept, 1 broken" in result.stdout
