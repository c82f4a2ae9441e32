"""The openai backend against a real OpenAI-compatible server the project did not write: transformers' own
`transformers serve` (the pip extra `transformers[serving]`), serving the tiny LLaVA checkpoint on 127.0.0.1.

The cases of tests/models/test_inference_failures.py that a real server can show: generation works; a model
entry with `logprobs: true` meets a server that returns none; the server is killed in the middle of a run and
comes back; the rerun gives the predictions of a clean run.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml
from helpers.common import pope_grid_file

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.predictions import read_metadata, read_predictions

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None,
        reason="`transformers serve` needs the pip extra transformers[serving] (fastapi, uvicorn)",
    ),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Serve:
    """`transformers serve` on one checkpoint and a fixed port, which can be stopped and started again."""

    def __init__(self, checkpoint: Path, log: Path) -> None:
        self.checkpoint, self.log, self.port = checkpoint, log, _free_port()
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> Serve:
        command = [
            str(Path(sys.executable).parent / "transformers"),
            "serve",
            str(self.checkpoint),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(
                    f"transformers serve exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}"
                )
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/health", timeout=2).ok:
                    return self
            except requests.RequestException:
                time.sleep(0.5)
        self.stop()
        pytest.fail(f"transformers serve did not come up in {timeout:g} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # killed, as a crashed server is
            self.process.wait()
        self.process = None


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    assert main(["make-tiny-models", str(out), "--families", "llava"]) == 0
    return out / "llava"


@pytest.fixture(scope="module")
def serve(checkpoint, tmp_path_factory):
    server = Serve(checkpoint, tmp_path_factory.mktemp("serve") / "serve.log").start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))


def grid(small_config, tmp_path, serve, name="grid.yaml", results="results", **settings) -> str:
    served = {
        "backend": "openai",
        "base_url": serve.base_url,
        "model": str(serve.checkpoint),
        "max_retries": 1,
        "concurrency": 2,
        "timeout": 60,
        "generation": {"max_new_tokens": 4},
        **settings,
    }
    return pope_grid_file(small_config, tmp_path, {"served": served}, name, results)


def infer(capsys, config) -> tuple[int, str]:
    assert main(["prepare", "pope-fixture", "--config", config]) == 0
    capsys.readouterr()
    code = main(["infer", "served", "pope-fixture", "--config", config, "--no-progress"])
    return code, capsys.readouterr().err


def out(config) -> Path:
    return paths.predictions_path(yaml.safe_load(open(config))["results_dir"], "served", "pope-fixture")


def last_line(err: str) -> str:
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def test_generation_through_a_real_server(small_config, tmp_path, serve, capsys):
    config = grid(small_config, tmp_path, serve)
    code, err = infer(capsys, config)
    assert code == 0, err
    frame = read_predictions(out(config))
    assert len(frame) == 12 and frame["error"].isna().all() and frame["raw"].notna().all()
    assert read_metadata(out(config))["strategy"] == "generate"


def test_logprobs_the_server_does_not_return_stop_the_job_or_fall_back(small_config, tmp_path, serve, capsys):
    config = grid(small_config, tmp_path, serve, logprobs=True)
    code, err = infer(capsys, config)
    line = last_line(err)
    assert code == 2 and "returned no logprobs" in line and "`answer_mode: auto`" in line, err
    assert not out(config).exists()

    config = grid(
        small_config, tmp_path, serve, name="auto.yaml", results="auto", logprobs=True, answer_mode="auto"
    )
    code, err = infer(capsys, config)
    assert code == 0, err
    assert read_metadata(out(config))["strategy"] == "generate"
    assert "fell back to generate" in read_metadata(out(config))["fallback"]


def test_a_killed_server_fails_the_job_and_the_rerun_equals_a_clean_run(
    small_config, tmp_path, serve, capsys
):
    config = grid(small_config, tmp_path, serve, cache=False, circuit_breaker=4)
    serve.stop()
    try:
        code, err = infer(capsys, config)
        line = last_line(err)
        assert code == 2 and "connection refused at" in line and "No predictions file was written" in line, (
            err
        )
        assert not out(config).exists()
    finally:
        serve.start()
    code, err = infer(capsys, config)
    assert code == 0, err
    clean = grid(
        small_config, tmp_path, serve, name="clean.yaml", results="clean", cache=False, circuit_breaker=4
    )
    assert infer(capsys, clean)[0] == 0
    assert out(config).read_bytes() == out(clean).read_bytes()


# --------------------------------------------------------------- a server the job starts for itself (`serve`)


def served_by_job(small_config, tmp_path, name="grid.yaml", results="results", **serve) -> str:
    """A grid whose model's infer job starts `transformers serve` on the tiny LLaVA that fetch-model
    builds."""
    command = [
        str(Path(sys.executable).parent / "transformers"),
        "serve",
        "{model_dir}",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--device",
        "cpu",
    ]
    model = {
        "backend": "openai",
        "source": {"type": "fixture", "family": "llava", "seed": 0},
        "model": "{model_dir}",
        "max_retries": 1,
        "concurrency": 2,
        "timeout": 60,
        "generation": {"max_new_tokens": 4},
        "serve": {
            "command": command,
            "startup_timeout": 180,
            "env": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
            **serve,
        },
    }
    return pope_grid_file(small_config, tmp_path, {"served": model}, name, results)


def servers_of(model_dir: Path) -> list[int]:
    """The pids of `transformers serve` processes serving model_dir."""
    found = subprocess.run(
        ["pgrep", "-f", f"serve {model_dir} "], capture_output=True, text=True
    ).stdout.split()
    return [int(pid) for pid in found if int(pid) != os.getpid()]


def model_dir_of(config) -> Path:
    return paths.model_dir(yaml.safe_load(open(config))["data_dir"], "served")


def test_a_job_starts_its_server_answers_through_it_and_stops_it(small_config, tmp_path, serve, capsys):
    config = served_by_job(small_config, tmp_path)
    assert main(["fetch-model", "served", "--config", config]) == 0
    code, err = infer(capsys, config)
    assert code == 0, err
    assert "the server of served is ready" in err and "stopped the server of served" in err
    assert servers_of(model_dir_of(config)) == []  # stopped with its job
    frame = read_predictions(out(config))
    assert len(frame) == 12 and frame["error"].isna().all()
    server = read_metadata(out(config))["provenance"]["server"]
    assert server["command"][1:3] == ["serve", str(model_dir_of(config))] and "--port" in server["command"]
    assert server["version"] == f"transformers {importlib.metadata.version('transformers')}"
    # the same weights behind a server started by hand answer the same
    by_hand = grid(small_config, tmp_path, serve, name="by-hand.yaml", results="by-hand")
    assert infer(capsys, by_hand)[0] == 0
    assert read_predictions(out(by_hand))[["id", "raw", "prediction"]].equals(
        frame[["id", "raw", "prediction"]]
    )


def test_a_killed_job_leaves_no_server_and_its_rerun_completes(small_config, tmp_path):
    config = served_by_job(small_config, tmp_path, name="killed.yaml", results="killed")
    assert main(["fetch-model", "served", "--config", config]) == 0
    assert main(["prepare", "pope-fixture", "--config", config]) == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLMGRID_GPU_COUNT": "0"}
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vlmgrid.cli",
            "infer",
            "served",
            "pope-fixture",
            "--config",
            config,
            "--no-progress",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for line in job.stderr:
            if "is ready after" in line:
                break
        assert servers_of(model_dir_of(config)), "no server was running"
        job.send_signal(signal.SIGKILL)
        job.wait()
    finally:
        job.kill()
    deadline = time.monotonic() + 40  # SIGTERM, then SIGKILL after serve.stop_timeout (30 s)
    while servers_of(model_dir_of(config)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert servers_of(model_dir_of(config)) == [], "the server outlived its killed job"
    rerun = subprocess.run(
        [
            sys.executable,
            "-m",
            "vlmgrid.cli",
            "infer",
            "served",
            "pope-fixture",
            "--config",
            config,
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert len(read_predictions(out(config))) == 12


def test_snakemake_runs_a_served_models_cell_and_leaves_no_server(tmp_path):
    from helpers.common import copy_workflow, run, small_grid_config

    root = copy_workflow(tmp_path / "repo")
    path = root / "config" / "config.yaml"
    data = small_grid_config(
        {"models": ["served"], "benchmarks": ["pope-fixture"]}, yaml.safe_load(path.read_text())
    )
    data["models"] = yaml.safe_load(open(served_by_job(data, tmp_path)))["models"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    run(["snakemake", "--cores", "2"], root)
    score = yaml.safe_load((root / "results" / "scores" / "served" / "pope-fixture.json").read_text())
    assert score["n"] > 0
    assert (
        "Uvicorn running" in (root / "results" / "logs" / "serve" / "served" / "pope-fixture.log").read_text()
    )
    assert (
        servers_of(root / "data" / "models" / "served") == [] and servers_of(Path("data/models/served")) == []
    )
