"""The package's floors and its freedom from circles (pyproject.toml's import-linter contracts,
docs/design.md) hold, and each contract bites."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"
LAYERS = "cli over stages over the domain packages over the shared modules"
NO_CIRCLE = "no circle: no module imports one that imports it, at any depth of the package"


def _lint(cwd: Path, package_parent: Path) -> subprocess.CompletedProcess:
    if not LINT.is_file():
        pytest.skip(
            f"{LINT} is missing; install the test extra (pip install -e '.[test]'), which brings "
            "import-linter"
        )
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_package_keeps_its_layers():
    result = _lint(REPO, REPO / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_the_house_has_six_floors_or_fewer():
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    [layers] = [contract["layers"] for contract in contracts if contract["name"] == LAYERS]
    assert len(layers) <= 6, layers


@pytest.mark.parametrize(
    "module, upward, broken",
    [
        ("config.py", "from vlmgrid.benchmarks import BENCHMARKS", {LAYERS}),  # config above a domain package
        ("metrics/base.py", "import vlmgrid.report", {LAYERS}),  # one domain package beside another
        (
            "models/base.py",
            "import vlmgrid.fixtures",
            {LAYERS, NO_CIRCLE},
        ),  # production code on the test scaffolding
        ("errors.py", "import vlmgrid.stages", {LAYERS, NO_CIRCLE}),  # the bottom on the top
        # the fork server running the command it is handed, not importing it: cli imports the server
        ("forkserver/server.py", "from vlmgrid import cli", {LAYERS, NO_CIRCLE}),
        ("errors.py", "import vlmgrid.fileio", {NO_CIRCLE}),  # a circle on one floor: fileio imports errors
        # the running of a cell asking the plan from inside the run: the plan hands it a CellPlan instead
        ("cellrun/run.py", "from vlmgrid.stages import plan", {LAYERS, NO_CIRCLE}),
        # the running of a cell knows a job as records and request counts: the stage brings the benchmark and
        # model
        ("cellrun/job.py", "from vlmgrid.benchmarks import load_benchmark", {LAYERS}),
    ],
)
def test_an_import_against_the_layers_fails_the_check(tmp_path, module, upward, broken):
    shutil.copytree(
        REPO / "src" / "vlmgrid", tmp_path / "src" / "vlmgrid", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "src" / "vlmgrid" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{upward}  # noqa\n", encoding="utf-8")
    result = _lint(tmp_path, tmp_path / "src")
    assert result.returncode != 0
    for name in (LAYERS, NO_CIRCLE):
        assert f"{name} {'BROKEN' if name in broken else 'KEPT'}" in result.stdout, result.stdout
