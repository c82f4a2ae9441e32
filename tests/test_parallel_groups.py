"""The suite in parallel (pytest-xdist, `-n 3 --dist loadgroup`, as .ci/run runs it): conftest.py puts the
tests that share a session or module fixture in one worker, so the fixture is made once, and a test that asks
for one only while it runs joins them by an xdist_group mark of its name; the end-to-end tests are handed out
first. Run on a small suite beside this conftest.py, in two workers of their own."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra has it)")

HERE = Path(__file__).resolve().parent

# Appended to a copy of conftest.py: a session fixture that notes each time it is made, in which worker.
SHARED = """

@pytest.fixture(scope="session")
def shared_setup():
    note("made shared_setup")
    return "ready"


def note(what):
    import json as _json
    import os as _os

    with open(_os.environ["GROUPS_LOG"], "a") as log:
        log.write(_json.dumps([_os.environ.get("PYTEST_XDIST_WORKER", "main"), what]) + "\\n")
"""

TESTS_A = """
import pytest
from conftest import note


@pytest.fixture(scope="module")
def module_setup():
    note("made module_setup")
    return "ready"


def test_uses_the_session_fixture(shared_setup):
    note("a1")


def test_uses_it_too(shared_setup):
    note("a2")


def test_uses_the_module_fixture(module_setup):
    note("a3")


def test_uses_the_module_fixture_too(module_setup):
    note("a4")


@pytest.mark.parametrize("index", range(6))
def test_needs_nothing(index):
    note(f"free{index}")
"""

TESTS_B = """
import pytest
from conftest import note


def test_uses_the_session_fixture_here(shared_setup):
    note("b1")


@pytest.mark.xdist_group("shared_setup")
def test_asks_for_it_late(request):
    assert request.getfixturevalue("shared_setup") == "ready"
    note("b2")


def test_fails_in_its_group(shared_setup):
    note("b3")
    assert shared_setup == "not ready"


@pytest.mark.integration
def test_end_to_end_collected_last():
    note("end-to-end")
"""


def test_tests_sharing_a_fixture_run_in_one_worker_and_still_fail(tmp_path):
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "pytest.ini").write_text("[pytest]\ntestpaths = tests\nmarkers =\n    integration: slow\n")
    (suite / "tests" / "conftest.py").write_text((HERE / "conftest.py").read_text() + SHARED)
    shutil.copytree(
        HERE / "helpers", suite / "tests" / "helpers", ignore=shutil.ignore_patterns("__pycache__")
    )
    (suite / "tests" / "test_a.py").write_text(TESTS_A)
    (suite / "tests" / "test_b.py").write_text(TESTS_B)
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "GROUPS_LOG": str(log)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 13 passed" in result.stdout, result.stdout
    assert "FAILED tests/test_b.py::test_fails_in_its_group" in result.stdout

    notes = [json.loads(line) for line in log.read_text().splitlines()]
    worker = {what: who for who, what in notes}
    assert [what for _, what in notes].count("made shared_setup") == 1
    assert [what for _, what in notes].count("made module_setup") == 1
    assert all(who.startswith("gw") for who, _ in notes)  # it did run in workers
    shared = {worker[what] for what in ("made shared_setup", "a1", "a2", "b1", "b2", "b3")}
    assert len(shared) == 1, notes
    assert {worker["a3"], worker["a4"]} == {worker["made module_setup"]}
    assert {f"free{index}" for index in range(6)} <= set(worker)
    # the end-to-end test, collected last, is handed out first: no long test is left to run alone at the end
    first = next(what for who, what in notes if who == worker["end-to-end"])
    assert first == "end-to-end", notes
