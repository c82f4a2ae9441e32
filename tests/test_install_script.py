"""scripts/install.sh: PyTorch's CPU index without a working NVIDIA GPU, PyPI's default with one.

The script runs with a PATH holding only a stub pip, which records its working folder and arguments, and a
fake nvidia-smi (or none), so nothing is installed and the network is never asked.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install.sh"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
BASH = shutil.which("bash")

NVIDIA_SMI_WORKING = """#!{bash}
[ "$1" = -L ] || exit 64
echo "GPU 0: NVIDIA H200 (UUID: GPU-6a2f7c1e-0000-0000-0000-000000000000)"
"""
NVIDIA_SMI_NO_DRIVER = """#!{bash}
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
Make sure that the latest NVIDIA driver is installed and running."
exit 9
"""
PIP = """#!{bash}
printf '%s\\n' "$PWD" "$@" "--" >> "{log}"
if [ "$1" = index ]; then
  # asked with no configuration file and no other index or links
  [ "$PIP_CONFIG_FILE" = /dev/null ] && [ -z "${{PIP_EXTRA_INDEX_URL+set}}${{PIP_FIND_LINKS+set}}" ] \
|| exit 70
  exit {index_status}
fi
exit {status}
"""
# install.sh asks the CPU index once before it installs from it, where the build was detected
ASK_CPU_INDEX = ["index", "versions", "torch", "--index-url", CPU_INDEX, "--retries", "1", "--timeout", "20"]
ENV_WITH_OTHER_INDEXES = {"PIP_EXTRA_INDEX_URL": "file:///mirror/simple", "PIP_FIND_LINKS": "/wheels"}


def _torch_requirements() -> list[str]:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "dependencies"
    ]
    return [d for d in dependencies if d.split(">")[0].split("=")[0] in ("torch", "torchvision")]


def run_script(
    tmp_path: Path,
    *args: str,
    nvidia_smi: str | None = None,
    pip_status: int = 0,
    index_status: int = 0,
    env: dict | None = None,
) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """Run install.sh with only the stubs on PATH; (the result, each pip call as [cwd, *arguments]). The stub
    pip exits with `index_status` for `pip index`, with `pip_status` otherwise."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "pip.log"
    stubs = {"pip": PIP.format(bash=BASH, log=log, status=pip_status, index_status=index_status)}
    if nvidia_smi is not None:
        stubs["nvidia-smi"] = nvidia_smi.format(bash=BASH)
    for name, text in stubs.items():
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    result = subprocess.run(
        [BASH, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": str(bin_dir), **(env or {})},
    )
    calls, call = [], []
    for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else []:
        if line == "--":
            calls.append(call)
            call = []
        else:
            call.append(line)
    return result, calls


def test_the_requirements_read_are_pyprojects():
    assert _torch_requirements() == ["torch>=2.1", "torchvision>=0.16"]


def test_no_nvidia_smi_installs_torch_from_the_cpu_index_first(tmp_path):
    result, calls = run_script(tmp_path, env=ENV_WITH_OTHER_INDEXES)
    assert result.returncode == 0, result.stderr
    assert calls == [
        [str(REPO), *ASK_CPU_INDEX],
        [str(REPO), "install", "--extra-index-url", CPU_INDEX, *_torch_requirements()],
        [str(REPO), "install", "-e", "."],
    ]
    assert "no NVIDIA GPU" in result.stderr


def test_nvidia_smi_without_a_driver_is_no_gpu(tmp_path):
    result, calls = run_script(tmp_path, nvidia_smi=NVIDIA_SMI_NO_DRIVER)
    assert result.returncode == 0, result.stderr
    assert [call[1:4] for call in calls] == [
        ASK_CPU_INDEX[:3],
        ["install", "--extra-index-url", CPU_INDEX],
        ["install", "-e", "."],
    ]


def test_a_working_gpu_keeps_the_default_index(tmp_path):
    result, calls = run_script(tmp_path, nvidia_smi=NVIDIA_SMI_WORKING)
    assert result.returncode == 0, result.stderr
    assert calls == [[str(REPO), "install", "-e", "."]]


@pytest.mark.parametrize("gpu", [None, NVIDIA_SMI_WORKING])
def test_extras_are_passed_on(tmp_path, gpu):
    result, calls = run_script(tmp_path, "test", nvidia_smi=gpu)
    assert result.returncode == 0, result.stderr
    assert calls[-1] == [str(REPO), "install", "-e", ".[test]"]


def test_the_choice_can_be_forced_either_way(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, calls = run_script(tmp_path / "a", env={"VLMGRID_TORCH": "default"})
    assert calls == [[str(REPO), "install", "-e", "."]]
    _, calls = run_script(
        tmp_path / "b",
        nvidia_smi=NVIDIA_SMI_WORKING,
        env={"VLMGRID_TORCH": "cpu", "VLMGRID_TORCH_CPU_INDEX": "https://mirror.example/cpu"},
    )
    assert calls[0][1:4] == ["install", "--extra-index-url", "https://mirror.example/cpu"]  # not asked first


def test_an_unknown_choice_is_refused_before_pip_runs(tmp_path):
    result, calls = run_script(tmp_path, env={"VLMGRID_TORCH": "cuda"})
    assert result.returncode == 2
    assert calls == []
    assert 'VLMGRID_TORCH is "cuda"; set it to cpu or default' in result.stderr


def test_a_cpu_index_out_of_reach_is_asked_once_and_the_default_index_serves(tmp_path):
    # pip would otherwise retry the index five times for every package it looks up there
    result, calls = run_script(tmp_path, index_status=1)
    assert result.returncode == 0, result.stderr
    assert calls == [[str(REPO), *ASK_CPU_INDEX], [str(REPO), "install", "-e", "."]]
    assert f"PyTorch's CPU index {CPU_INDEX} cannot be reached" in result.stderr
    assert "installing PyTorch from the default index instead" in result.stderr


def test_a_failed_cpu_build_install_falls_back_to_the_default_index_and_says_so(tmp_path):
    # the index answers, but every install fails: the CPU build's, then the project's from the default index
    result, calls = run_script(tmp_path, pip_status=1)
    assert result.returncode == 1
    assert [call[1:3] for call in calls] == [
        ASK_CPU_INDEX[:2],
        ["install", "--extra-index-url"],
        ["install", "-e"],
    ]
    assert "installing PyTorch from the default index instead" in result.stderr


def test_a_failed_cpu_torch_install_asked_for_by_name_stops_before_the_project(tmp_path):
    result, calls = run_script(tmp_path, pip_status=1, env={"VLMGRID_TORCH": "cpu"})
    assert result.returncode == 1
    assert [call[1:3] for call in calls] == [["install", "--extra-index-url"]]
    assert "default index instead" not in result.stderr
