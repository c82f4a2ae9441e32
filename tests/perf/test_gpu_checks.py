"""perf/gpu_checks.sh and perf/gpu_preflight.py: the GPU measurements in one run, refused in seconds where a
module or the device is missing, each step under its own time limit with its own log."""

import importlib.util
import os
import subprocess

import pytest
from helpers.common import REPO

_spec = importlib.util.spec_from_file_location("gpu_preflight", REPO / "perf" / "gpu_preflight.py")
gpu_preflight = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_preflight)


@pytest.mark.parametrize(
    "name,slug",
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA GeForce RTX 4090", "geforce"),
        ("", "gpu"),
    ],
)
def test_the_device_gets_a_short_name_for_file_names(name, slug):
    assert gpu_preflight.device_slug(name) == slug


def test_every_module_the_measurements_import_is_installed_here():
    """This environment runs perf/speed.py on the CPU: a module named wrongly in the list fails here."""
    assert gpu_preflight.problem(cpu_only=True) is None


def test_the_missing_distributions_are_named_by_what_pip_installs():
    absent = {"open_clip", "rpds"}

    def find_spec(module):
        return None if module in absent else importlib.util.find_spec(module)

    assert gpu_preflight.missing_distributions(find_spec) == ["open_clip_torch", "rpds-py"]


def test_a_module_an_entry_point_lacks_is_named_with_the_entry_point(monkeypatch):
    entry_points = ("vlmgrid.protocols.ranking", "vlmgrid._no_such_module")
    monkeypatch.setattr(gpu_preflight, "ENTRY_POINTS", entry_points)
    expected = "vlmgrid._no_such_module (imported by vlmgrid._no_such_module)"
    assert gpu_preflight.import_failure() == expected


def test_without_a_cuda_device_it_refuses_in_one_sentence(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_preflight.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu_preflight: torch ") and "sees no CUDA device" in err and err.count("\n") == 1


# A stand-in for python3: the preflight answers `h200` (or refuses), speed.py outlasts its limit, the
# tolerance prints its table; every call's arguments are recorded.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
case ${1##*/} in
  gpu_preflight.py) [[ -n ${REFUSE:-} ]] && { echo "gpu_preflight: not installed: ftfy" >&2; exit 2; }
                    echo h200 ;;
  speed.py) echo "clip measured"; exec sleep 30 ;;
  decode_tolerance.py) echo "| tolerance table |" ;;
esac
"""


def run_checks(tmp_path, **env):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    environ = {
        **os.environ,
        "PYTHON": str(fake),
        "CALLS": str(calls),
        "VLMGRID_SPEED_LIMIT_S": "1",
        **env,
    }
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(REPO / "perf" / "gpu_checks.sh"), str(out)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, out, calls.read_text().splitlines()


def test_a_step_that_outlasts_its_limit_is_stopped_and_the_next_one_still_runs(tmp_path):
    result, out, calls = run_checks(tmp_path)
    assert result.returncode == 124, result.stderr
    assert "gpu_checks: speed ended with status 124 (its 1 s limit); see " in result.stderr
    assert (out / "speed.log").read_text() == "clip measured\n"
    assert (out / "decode-tolerance.log").read_text() == "| tolerance table |\n"
    assert calls[1].endswith(
        f"perf/speed.py --shapes real --only clip,choice,generate,rank --out {out}/speed-h200.md"
    )
    tolerance = f"perf/decode_tolerance.py --decode-on cuda --out {out}/decode-tolerance-cuda.md"
    assert calls[2].endswith(tolerance)


def test_a_refused_preflight_runs_no_step(tmp_path):
    result, out, calls = run_checks(tmp_path, REFUSE="1")
    assert result.returncode == 2
    assert result.stderr == "gpu_preflight: not installed: ftfy\n"
    assert len(calls) == 1 and not (out / "speed.log").exists()


def test_the_checks_import_the_checkouts_vlmgrid(tmp_path):
    """PYTHONPATH puts this checkout's src/ first: an installed vlmgrid of another version is not measured."""
    fake = tmp_path / "python"
    fake.write_text('#!/usr/bin/env bash\necho "$PYTHONPATH" >&2\nexit 2\n')  # the preflight refuses
    fake.chmod(0o755)
    result = subprocess.run(
        ["bash", str(REPO / "perf" / "gpu_checks.sh"), str(tmp_path / "out")],
        env={**os.environ, "PYTHON": str(fake), "PYTHONPATH": "/elsewhere"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"{REPO}/src:/elsewhere"
