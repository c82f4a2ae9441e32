"""A failed run is never a score: what failed to run is retried, or the job stops with one sentence and keeps
its finished parts, and the rerun after the fault clears gives the predictions of a clean run.

The openai backend runs against the project's scripted server (tests/helpers/fake_openai_server.py), which
does on demand what a real server will not (a given status, a body that is no completion, an outage); the same
cases against a real server (`transformers serve`) are in tests/models/test_serve.py. The hf backend's
out-of-memory and CUDA errors are simulated on the tiny LLaVA.
"""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from helpers.common import pope_grid_file
from helpers.fake_openai_server import FakeOpenAIServer, Outage, Reply, Sleep, closed_port

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.predictions import read_metadata, read_predictions

# pope-fixture with size 4: 12 items, in parts of 4
ITEMS = 12


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def server():
    fake = FakeOpenAIServer().start()
    fake.reply = lambda body: "Yes, there is." if "cat" in json.dumps(body) else "No."
    yield fake
    fake.stop()


def api(server_or_url, **settings) -> dict:
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    return {
        "api": {
            "backend": "openai",
            "base_url": url,
            "model": "fake-vlm",
            "max_retries": 1,
            "concurrency": 2,
            **settings,
        }
    }


def run_cli(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


def one_sentence(err: str) -> str:
    """The CLI's last line, which must be the error, with no traceback before it."""
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("vlmgrid: error: "), err
    return line


def predictions(config: str, model: str = "api"):
    data = yaml.safe_load(open(config))
    return paths.predictions_path(data["results_dir"], model, "pope-fixture")


def infer(capsys, config: str, model: str = "api") -> tuple[int, str]:
    assert main(["prepare", "pope-fixture", "--config", config]) == 0
    return run_cli(capsys, "infer", model, "pope-fixture", "--config", config, "--no-progress")


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    from vlmgrid.models.openai_backend import OpenAI

    monkeypatch.setattr(OpenAI, "backoff_base", 0.01)


def test_a_server_without_logprobs_stops_the_job_at_the_first_request(small_config, tmp_path, server, capsys):
    server.top_logprobs = None  # like `transformers serve`: asked for logprobs, it returns none
    config = pope_grid_file(small_config, tmp_path, api(server, logprobs=True))
    code, err = infer(capsys, config)
    line = one_sentence(err)
    assert code == 2 and server.count <= 2  # the requests in flight (concurrency 2), no more
    assert "returned no logprobs" in line and "`answer_mode: auto`" in line and "`logprobs: false`" in line
    assert "No predictions file was written" in line and "0 of 3 parts are done" in line
    assert not predictions(config).exists()


def test_answer_mode_auto_falls_back_to_generation_and_says_so(small_config, tmp_path, server, capsys):
    server.top_logprobs = None
    config = pope_grid_file(small_config, tmp_path, api(server, logprobs=True, answer_mode="auto"))
    code, err = infer(capsys, config)
    assert code == 0, err
    assert "answer_mode auto: answering by generate instead of score_options" in err
    metadata = read_metadata(predictions(config))
    assert metadata["strategy"] == "generate" and "fell back to generate" in metadata["fallback"]
    frame = read_predictions(predictions(config))
    assert len(frame) == ITEMS and frame["error"].isna().all() and frame["raw"].notna().all()
    assert main(["score", "api", "pope-fixture", "--config", config]) == 0
    score = json.loads(
        paths.score_path(yaml.safe_load(open(config))["results_dir"], "api", "pope-fixture").read_text()
    )
    assert score["strategy"] == "generate" and "fell back" in score["fallback"]


def test_a_closed_port_stops_the_job_at_the_first_refused_connection(
    small_config, tmp_path, capsys, monkeypatch
):
    import requests

    attempts = []
    original = requests.Session.post
    monkeypatch.setattr(
        requests.Session,
        "post",
        lambda self, url, *a, **k: attempts.append(url) or original(self, url, *a, **k),
    )
    port = closed_port()
    # The backend's default retries and circuit breaker: a refusal before any answer is not retried.
    config = pope_grid_file(
        small_config, tmp_path, api(f"http://127.0.0.1:{port}/v1", max_retries=5, circuit_breaker=10)
    )
    code, err = infer(capsys, config)
    line = one_sentence(err)
    assert code == 2 and 1 <= len(attempts) <= 2  # the requests in flight (concurrency 2), no retry, no more
    assert (
        f"connection refused at http://127.0.0.1:{port}/v1/chat/completions before any request to model "
        "fake-vlm was answered; check that the server is running and listening there, and the model entry's "
        "base_url" in line
    )
    assert "0 of 3 parts are done and kept" in line and "runs only the missing parts" in line
    assert "retry" not in err, err  # no backoff warning: nothing was retried
    assert not predictions(config).exists()
    # Nothing to score: no number can come of it.
    code, err = run_cli(capsys, "score", "api", "pope-fixture", "--config", config)
    assert code == 2 and "not found" in one_sentence(err)


def test_items_that_fail_are_named_and_never_rows_and_the_rerun_does_only_them(
    small_config, tmp_path, server, capsys
):
    # The first part's four items fail in both passes (the server answers 503); the other two parts run. (No
    # response cache here, so that every item is one request: some items of the fixture ask the same.)
    server.script.extend([Reply(503, "{}")] * 4 + [Sleep(0)] * 8 + [Reply(503, "{}")] * 4)
    config = pope_grid_file(small_config, tmp_path, api(server, max_retries=0, concurrency=1, cache=False))
    code, err = infer(capsys, config)
    line = one_sentence(err)
    assert code == 2, err
    assert (
        "api on pope-fixture: 4 item(s) failed to run (HTTP 503: {} (gave up after 1 attempt): 4x; the "
        "first: random-1, random-2, random-3, random-4)" in line
    )
    assert "No predictions file was written" in line and "2 of 3 parts are done and kept" in line
    assert not predictions(config).exists()
    asked = server.count

    # The rerun, the fault cleared: only the missing part's items are sent, and the predictions are those of a
    # clean run.
    code, err = infer(capsys, config)
    assert code == 0 and "resuming: 2 of 3 parts" in err, err
    assert server.count - asked == 4
    clean = pope_grid_file(
        small_config, tmp_path, api(server, max_retries=0, concurrency=1, cache=False), "clean.yaml", "clean"
    )
    assert main(["infer", "api", "pope-fixture", "--config", clean, "--no-progress"]) == 0
    assert predictions(config).read_bytes() == predictions(clean).read_bytes()
    assert read_predictions(predictions(config))["error"].isna().all()


def test_a_dead_server_trips_the_breaker_and_nothing_more_is_sent(small_config, tmp_path, server, capsys):
    server.script.append(Outage(seconds=60))
    config = pope_grid_file(
        small_config, tmp_path, api(server, max_retries=0, concurrency=1, circuit_breaker=5)
    )
    code, err = infer(capsys, config)
    line = one_sentence(err)
    assert code == 2 and server.count == 5
    assert "the job stopped: the last 5 requests to" in line and "connection error" in line


def test_a_short_outage_is_retried_within_the_job(small_config, tmp_path, server, capsys):
    server.script.extend([Reply(503, "{}"), Reply(503, "{}")])
    config = pope_grid_file(small_config, tmp_path, api(server, max_retries=0, concurrency=1))
    code, err = infer(capsys, config)
    assert code == 0, err
    assert "retrying 1 part(s) whose items failed to run" in err
    frame = read_predictions(predictions(config))
    assert len(frame) == ITEMS and frame["error"].isna().all()


def test_an_item_the_server_refuses_stays_a_row(small_config, tmp_path, server, capsys):
    server.script.append(Reply(400, json.dumps({"error": {"message": "image too large"}})))
    config = pope_grid_file(small_config, tmp_path, api(server, concurrency=1))
    code, err = infer(capsys, config)
    assert code == 0, err
    frame = read_predictions(predictions(config))
    assert len(frame) == ITEMS and frame["error"].notna().sum() == 1
    assert "HTTP 400: image too large" in frame["error"].dropna().iloc[0]


# --------------------------------------------------------------------------------------------- the hf backend


def _tiny_llava(small_config, tmp_path, capsys) -> str:
    config = pope_grid_file(
        small_config, tmp_path, {"llava-tiny": dict(small_config["models"]["llava-tiny"], batch_size=2)}
    )
    assert main(["fetch-model", "llava-tiny", "--config", config]) == 0
    return config


@pytest.mark.parametrize(
    "fault, said",
    [
        (
            torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
            "ran out of GPU memory with batch size 2",
        ),
        (
            RuntimeError(
                "CUDA error: an illegal memory access was encountered\nCompile with TORCH_USE_CUDA_DSA"
            ),
            "hit a CUDA error (CUDA error: an illegal memory access was encountered)",
        ),
    ],
)
def test_hf_out_of_memory_or_a_cuda_error_stops_the_job_and_the_rerun_completes_it(
    small_config, tmp_path, capsys, monkeypatch, fault, said
):
    from vlmgrid.models.hf_backend import Hf

    config = _tiny_llava(small_config, tmp_path, capsys)
    original = Hf._batched
    calls = {"n": 0}

    def batched(self, items, run):
        # The fault surfaces where the batches run, inside the backend's batching, on the second part.
        calls["n"] += 1

        def faulty(chunk):
            if calls["n"] == 2:
                raise fault
            return run(chunk)

        return original(self, items, faulty)

    monkeypatch.setattr(Hf, "_batched", batched)
    code, err = infer(capsys, config, "llava-tiny")
    line = one_sentence(err)
    assert code == 2 and said in line and "1 of 3 parts are done and kept" in line
    assert not predictions(config, "llava-tiny").exists()

    monkeypatch.setattr(Hf, "_batched", original)
    code, err = infer(capsys, config, "llava-tiny")
    assert code == 0 and "resuming: 1 of 3 parts" in err, err
    clean = pope_grid_file(
        small_config,
        tmp_path,
        {"llava-tiny": dict(small_config["models"]["llava-tiny"], batch_size=2)},
        "clean.yaml",
        "clean",
    )
    assert main(["infer", "llava-tiny", "pope-fixture", "--config", clean, "--no-progress"]) == 0
    assert predictions(config, "llava-tiny").read_bytes() == predictions(clean, "llava-tiny").read_bytes()
