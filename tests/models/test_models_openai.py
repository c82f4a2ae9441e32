import base64
import io
import json
import logging
import math

import pytest
from helpers.fake_openai_server import (
    EchoAuth,
    FakeOpenAIServer,
    Outage,
    Reply,
    Sleep,
    closed_port,
    completion,
)
from PIL import Image

from vlmgrid.errors import CapabilityMissing, InferenceFailed, VlmgridError
from vlmgrid.model_requests import GenerateRequest, OptionRequest
from vlmgrid.models.base import GENERATION_PRESETS
from vlmgrid.models.openai_backend import (
    ABSENT_LETTER_LOGPROB,
    ApiItemErrors,
    GenerationResult,
    OpenAI,
    encode_image,
    is_local_url,
)

KEY = "sk-test-S3CRET-0123456789abcdef"


@pytest.fixture
def server():
    fake = FakeOpenAIServer().start()
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(directory))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return directory


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def make(server, sleeps):
    """load() an OpenAI backend against the fake server; backoff sleeps are recorded, not slept."""

    def build(**settings) -> OpenAI:
        model = OpenAI.load(
            {"backend": "openai", "base_url": server.base_url, "model": "fake-vlm", **settings}, None, "cpu"
        )
        model._sleep = sleeps.append
        return model

    return build


def requests_for(n, image=None, **kwargs):
    return [GenerateRequest(f"q{i}", image, f"prompt {i}", **kwargs) for i in range(n)]


def cache_files(cache_dir):
    return sorted((cache_dir / "openai").rglob("*.json")) if (cache_dir / "openai").exists() else []


def image(width=40, height=30, colour=(200, 10, 60)):
    return Image.new("RGB", (width, height), colour)


# -- capabilities and loading --------------------------------------------------------------------------------


def test_capabilities_follow_logprobs_setting():
    assert OpenAI.capabilities_for({"base_url": "x", "model": "m"}) == {"generate"}
    assert OpenAI.capabilities_for({"base_url": "x", "model": "m", "logprobs": True}) == {
        "generate",
        "score_options",
    }
    assert OpenAI.fetch({"base_url": "x", "model": "m"}, None) == {}


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MY_VLM_KEY", raising=False)
    settings = {"base_url": "https://api.example.com/v1", "model": "m", "api_key_env": "MY_VLM_KEY"}
    with pytest.raises(VlmgridError, match="MY_VLM_KEY"):
        OpenAI.load(settings, None, "cpu")
    monkeypatch.setenv("MY_VLM_KEY", KEY)
    assert OpenAI.load(settings, None, "cpu").settings["model"] == "m"


def test_localhost_needs_no_key_and_sends_no_authorization(make, server):
    assert is_local_url("http://localhost:8000/v1") and is_local_url("http://127.0.0.1:1/v1")
    assert is_local_url("http://[::1]:8000/v1") and not is_local_url("https://api.openai.com/v1")
    model = make()
    assert model.generate(requests_for(1)) == ["echo: prompt 0"]
    assert "Authorization" not in server.requests[0].headers


# -- request bodies ------------------------------------------------------------------------------------------


def test_request_body_has_system_image_and_text_parts(make, server):
    model = make(image_size=16, generation={"max_new_tokens": 7, "seed": 3})
    model.generate([GenerateRequest("a", image(), "what is it?", system="be brief")])
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "fake-vlm"
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    user = body["messages"][1]
    assert user["role"] == "user"
    assert [part["type"] for part in user["content"]] == ["image_url", "text"]
    assert user["content"][1]["text"] == "what is it?"
    url = user["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert decoded.format == "PNG" and decoded.size == (16, 16)
    assert decoded.convert("RGB").getpixel((8, 8)) == (200, 10, 60)
    assert body["max_tokens"] == 7 and body["temperature"] == 0 and body["seed"] == 3
    assert "logprobs" not in body


def test_request_without_image_or_system_is_text_only(make, server):
    make().generate([GenerateRequest("a", None, "hi", max_new_tokens=3)])
    body = server.requests[0].body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 3 and body["temperature"] == 0


def test_sampling_settings_are_passed(make, server):
    make(generation={"do_sample": True, "temperature": 0.7, "top_p": 0.9}).generate(requests_for(1))
    body = server.requests[0].body
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["max_tokens"] == 32
    assert "seed" not in body


def test_a_top_k_or_repetition_penalty_that_changes_decoding_is_sent_as_vllm_takes_it(make, server):
    sampling = {"do_sample": True, "temperature": 0.7, "top_k": 20, "repetition_penalty": 1.05}
    make(generation=sampling).generate(requests_for(1))
    assert server.requests[0].body["top_k"] == 20 and server.requests[0].body["repetition_penalty"] == 1.05
    make(generation={"top_k": 20, "repetition_penalty": 1.05}, cache=False).generate(requests_for(1))
    greedy = server.requests[1].body
    assert "top_k" not in greedy and greedy["repetition_penalty"] == 1.05  # a penalty changes greedy too


def test_image_encoding_is_deterministic_and_keeps_size_without_image_size():
    picture = image(33, 21)
    assert encode_image(picture, None) == encode_image(picture.copy(), None)
    data = base64.b64decode(encode_image(picture, None).split(",", 1)[1])
    assert Image.open(io.BytesIO(data)).size == (33, 21)


# -- generation ----------------------------------------------------------------------------------------------


def test_generation_keeps_request_order(make, server):
    # Later requests answer faster, so completions arrive out of order.
    server.delay_of = lambda body: 0.02 * (12 - int(body["messages"][-1]["content"][-1]["text"].split()[-1]))
    texts = make(concurrency=6).generate(requests_for(12))
    assert texts == [f"echo: prompt {i}" for i in range(12)]
    assert server.count == 12


def test_concurrency_is_bounded_and_used(make, server):
    server.delay = 0.08
    make(concurrency=3, cache=False).generate(requests_for(15))
    assert server.count == 15
    assert 1 < server.max_in_flight <= 3


def test_concurrency_one_is_sequential(make, server):
    server.delay = 0.02
    make(concurrency=1, cache=False).generate(requests_for(5))
    assert server.max_in_flight == 1


def test_retries_then_success_honouring_retry_after(make, server, sleeps):
    server.script.extend(
        [Reply(429, "{}", {"Retry-After": "0"}), Reply(503, "busy"), Reply(429, "{}", {"Retry-After": "2"})]
    )
    model = make(max_retries=5)
    model.backoff_base = 0.25
    results = model.generate_results(requests_for(1))
    assert results == [GenerationResult(text="echo: prompt 0")]
    assert server.count == 4
    assert sleeps[0] == 0 and 0.125 <= sleeps[1] <= 0.5 and sleeps[2] == 2


def test_retries_exhausted_are_an_inference_failure_naming_the_items_never_a_result(
    make, server, sleeps, cache_dir
):
    server.script.extend([Reply(500, json.dumps({"error": {"message": "overloaded"}}))] * 3)
    model = make(max_retries=2, concurrency=1)
    with pytest.raises(InferenceFailed) as caught:
        model.generate_results(requests_for(2))
    assert not caught.value.stop and list(caught.value.failures) == ["q0"]
    cause = caught.value.failures["q0"]
    assert "HTTP 500" in cause and "overloaded" in cause and "3 attempts" in cause
    assert "1 of 2 requests" in str(caught.value)
    assert server.count == 4 and len(sleeps) == 2
    # The other request ran and is cached: asking again answers it without the server.
    assert len(cache_files(cache_dir)) == 1
    assert model.generate_results(requests_for(2)) == [
        GenerationResult(text="echo: prompt 0"),
        GenerationResult(text="echo: prompt 1"),
    ]
    assert server.count == 5


def test_generate_raises_with_every_result_when_an_item_failed(make, server):
    server.script.append(Reply(400, json.dumps({"error": {"message": "bad image"}})))
    model = make(concurrency=1)
    with pytest.raises(ApiItemErrors, match="q0") as caught:
        model.generate(requests_for(2))
    assert isinstance(caught.value, VlmgridError)
    assert caught.value.results[1] == GenerationResult(text="echo: prompt 1")
    assert "HTTP 400" in caught.value.errors["q0"] and "bad image" in caught.value.errors["q0"]


def test_client_errors_are_the_items_and_not_retried(make, server, sleeps):
    server.script.append(Reply(400, json.dumps({"error": {"message": "image too large"}})))
    result = make(max_retries=5).generate_results(requests_for(1))[0]
    assert server.count == 1 and sleeps == []
    assert "HTTP 400" in result.error and "image too large" in result.error


@pytest.mark.parametrize("status", [408, 409])
def test_a_request_timeout_or_conflict_is_the_servers_and_retried_never_a_row(make, server, sleeps, status):
    """408 and 409 say the server could not take the request now, not that the item is wrong: retried, as
    OpenAI's own client retries them; once retries run out, an inference failure, not the item's error row."""
    server.script.append(Reply(status, json.dumps({"error": {"message": "try again"}})))
    assert make(max_retries=2).generate_results(requests_for(1)) == [GenerationResult(text="echo: prompt 0")]
    assert server.count == 2 and len(sleeps) == 1
    server.script.extend([Reply(status, "{}")] * 3)
    with pytest.raises(InferenceFailed) as caught:
        make(max_retries=2, cache=False).generate_results(requests_for(1))
    assert f"HTTP {status}" in caught.value.failures["q0"] and not caught.value.stop


@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_a_wrong_entry_or_credentials_stop_at_the_first_request(make, server, sleeps, status):
    server.script.append(Reply(status, json.dumps({"error": {"message": "model not found"}})))
    with pytest.raises(
        InferenceFailed,
        match=rf"refused model fake-vlm \(HTTP {status}: model not found\); check "
        r"the model entry's base_url, model and api_key_env",
    ) as caught:
        make(max_retries=5, concurrency=1).generate_results(requests_for(5))
    assert caught.value.stop and server.count == 1 and sleeps == []


def test_timeouts_are_retried(make, server, sleeps):
    server.script.append(Sleep(0.6))
    result = make(timeout=0.2, max_retries=1).generate_results(requests_for(1))[0]
    assert result.text == "echo: prompt 0"
    assert server.count == 2 and len(sleeps) == 1


def test_timeouts_exhausted(make, server):
    server.script.extend([Sleep(0.5)] * 2)
    with pytest.raises(InferenceFailed) as caught:
        make(timeout=0.15, max_retries=1).generate_results(requests_for(1))
    assert "timed out" in caught.value.failures["q0"] and "2 attempts" in caught.value.failures["q0"]


@pytest.fixture
def posts(monkeypatch):
    """Every POST the backend attempts (a refused connection included), counted below the retry loop."""
    import requests

    sent = []
    original = requests.Session.post

    def post(self, url, *args, **kwargs):
        sent.append(url)
        return original(self, url, *args, **kwargs)

    monkeypatch.setattr(requests.Session, "post", post)
    return sent


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_closed_port_stops_at_the_first_refused_connection_with_one_sentence(sleeps, posts, concurrency):
    port = closed_port()
    model = OpenAI.load(
        {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "concurrency": concurrency}, None, "cpu"
    )  # the default max_retries (5) and circuit_breaker (10)
    model._sleep = sleeps.append
    with pytest.raises(InferenceFailed) as caught:
        model.generate_results(requests_for(20))
    assert caught.value.stop and sleeps == []
    # One attempt per request in flight when the first refusal came back, none retried, no other sent.
    assert 1 <= len(posts) <= concurrency
    assert str(caught.value) == (
        f"connection refused at http://127.0.0.1:{port}/v1/chat/completions before any "
        f"request to model m was answered; check that the server is running and listening "
        f"there, and the model entry's base_url"
    )
    # The job is over: a later call sends nothing.
    with pytest.raises(InferenceFailed):
        model.generate_results(requests_for(1))
    assert len(posts) <= concurrency


def test_a_refused_connection_names_the_url_without_its_credentials(sleeps, posts):
    port = closed_port()
    model = OpenAI.load({"base_url": f"http://user:pa55@127.0.0.1:{port}/v1", "model": "m"}, None, "cpu")
    model._sleep = sleeps.append
    with pytest.raises(
        InferenceFailed, match=rf"connection refused at http://127.0.0.1:{port}/v1/chat/completions "
    ):
        model.generate_results(requests_for(1))
    assert len(posts) == 1


def test_a_server_that_answered_then_refuses_is_a_restart_and_keeps_its_retries(make, server, sleeps, posts):
    # The first answer closes its connection, so the next request opens a new one: to a port now closed.
    server.script.append(Reply(200, json.dumps(completion("first")), {"Connection": "close"}))
    model = make(max_retries=2, concurrency=1, cache=False)
    assert model.generate_results(requests_for(1)) == [GenerationResult(text="first")]
    server.stop()
    with pytest.raises(InferenceFailed) as caught:
        model.generate_results(requests_for(1))
    assert not caught.value.stop and len(posts) == 1 + 3 and len(sleeps) == 2
    assert "connection error" in caught.value.failures["q0"] and "3 attempts" in caught.value.failures["q0"]


def test_a_server_that_answered_an_error_then_refuses_keeps_its_retries(make, server, sleeps, posts):
    # Any HTTP answer (here a 503, retried) shows a server listens there; a refusal after it is a restart.
    server.script.append(Reply(503, "{}", {"Connection": "close"}))
    model = make(max_retries=1, concurrency=1, cache=False)

    def restart(seconds):
        sleeps.append(seconds)
        server.stop()

    model._sleep = restart
    with pytest.raises(InferenceFailed) as caught:
        model.generate_results(requests_for(1))
    assert not caught.value.stop and len(posts) == 2 and len(sleeps) == 1
    assert "connection error" in caught.value.failures["q0"] and "2 attempts" in caught.value.failures["q0"]


def test_dropped_connections_are_retried_then_reported(make, server, sleeps, posts):
    server.script.append(Outage(seconds=60))  # connections accepted and closed without an answer
    model = make(max_retries=2, concurrency=1)
    with pytest.raises(InferenceFailed) as caught:
        model.generate_results(requests_for(1))
    assert not caught.value.stop and len(posts) == 3 and len(sleeps) == 2
    assert "connection error" in caught.value.failures["q0"]


def test_the_circuit_breaker_ends_the_call_after_that_many_failed_requests_in_a_row(make, server, sleeps):
    server.script.append(Outage(seconds=60))
    model = make(max_retries=1, concurrency=2, circuit_breaker=3)
    with pytest.raises(
        InferenceFailed,
        match=r"the last 3 requests to 127.0.0.1:\d+ \(model fake-vlm\) all failed, "
        r"the last one: connection error .*; check that the server is up",
    ) as caught:
        model.generate_results(requests_for(40))
    assert caught.value.stop
    # Two requests in flight when it tripped at most: the other 38 were never sent (two attempts each).
    assert len(sleeps) <= 4
    # The job is over: a later call sends nothing either.
    with pytest.raises(InferenceFailed):
        model.generate_results(requests_for(1))
    assert len(sleeps) <= 4


def test_a_success_resets_the_breaker(make, server):
    server.script.extend(
        [
            Reply(400, "{}"),
            Reply(400, "{}"),
            Reply(200, json.dumps(completion("ok"))),
            Reply(400, "{}"),
            Reply(400, "{}"),
        ]
    )
    results = make(concurrency=1, circuit_breaker=3, cache=False).generate_results(requests_for(5))
    assert [result.ok for result in results] == [False, False, True, False, False]


@pytest.mark.parametrize(
    "garbage",
    [
        "<html>oops</html>",
        json.dumps({"object": "chat.completion"}),
        json.dumps({"choices": []}),
        json.dumps({"choices": [{"text": "no message"}]}),
    ],
)
def test_garbage_is_retried_then_an_inference_failure_and_not_cached(
    make, server, cache_dir, sleeps, garbage
):
    server.script.extend([Reply(200, garbage)] * 2)
    with pytest.raises(InferenceFailed) as caught:
        make(max_retries=1).generate_results(requests_for(1))
    assert caught.value.failures["q0"].startswith("unparsable response") and len(sleeps) == 1
    assert server.count == 2
    assert cache_files(cache_dir) == []
    # the next run asks again (nothing bad was cached) and succeeds
    assert make().generate(requests_for(1)) == ["echo: prompt 0"]
    assert server.count == 3 and len(cache_files(cache_dir)) == 1


@pytest.mark.parametrize("content", ["", None])
def test_an_empty_answer_is_the_models_answer_and_not_cached(make, server, cache_dir, content):
    server.script.append(
        Reply(
            200,
            json.dumps(
                {
                    "choices": [
                        {
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "content_filter",
                        }
                    ]
                }
            ),
        )
    )
    assert make().generate_results(requests_for(1)) == [GenerationResult(text="")]
    assert cache_files(cache_dir) == []


# -- cache ---------------------------------------------------------------------------------------------------


def test_cache_hit_makes_no_http_call(make, server, cache_dir):
    requests = requests_for(3, image=image())
    first = make().generate(requests)
    assert server.count == 3
    files = cache_files(cache_dir)
    assert len(files) == 3
    for path in files:
        assert path.parent.name == path.stem[:2] and len(path.stem) == 64
        assert path.parent.parent == cache_dir / "openai"
    server.reply = lambda body: "a different answer"
    again = make().generate(requests_for(3, image=image()))  # a new instance, new (equal) images
    assert again == first and server.count == 3


def test_cache_key_depends_on_body_and_base_url(make, server, cache_dir):
    model = make()
    model.generate(requests_for(1))
    make(generation={"max_new_tokens": 5}).generate(requests_for(1))
    assert server.count == 2
    other = OpenAI({"base_url": "http://127.0.0.1:1/v1", "model": "fake-vlm"})
    assert other.cache_path(b"{}") != model.cache_path(b"{}")


def test_cache_off_always_calls(make, server, cache_dir):
    make(cache=False).generate(requests_for(2))
    make(cache=False).generate(requests_for(2))
    assert server.count == 4 and cache_files(cache_dir) == []


def test_corrupt_cache_entry_is_ignored(make, server, cache_dir):
    make().generate(requests_for(1))
    (path,) = cache_files(cache_dir)
    path.write_text("{not json")
    assert make().generate(requests_for(1)) == ["echo: prompt 0"]
    assert server.count == 2


# -- the API key ---------------------------------------------------------------------------------------------


def test_api_key_only_in_the_authorization_header(make, server, cache_dir, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    server.script.extend([EchoAuth(400), EchoAuth(500), EchoAuth(500)])
    model = make(concurrency=1, max_retries=1)
    with pytest.raises(InferenceFailed) as unavailable:
        model.generate_results(requests_for(3))
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in server.requests)
    assert "HTTP 500" in unavailable.value.failures["q1"] and "[redacted]" in unavailable.value.failures["q1"]
    server.script.append(EchoAuth(400))
    refused = make(cache=False).generate_results(requests_for(1))[0].error
    assert "HTTP 400" in refused and "[redacted]" in refused  # the server did quote the key
    server.script.append(EchoAuth(403))
    with pytest.raises(InferenceFailed) as caught:
        make(max_retries=0, cache=False).generate(requests_for(1))
    assert "HTTP 403" in str(caught.value) and caught.value.stop
    texts = [
        refused,
        str(unavailable.value),
        *unavailable.value.failures.values(),
        str(caught.value),
        *caught.value.failures.values(),
        caplog.text,
        repr(model),
        model.describe(),
        repr(model.provenance()),
        *(path.read_text() for path in cache_files(cache_dir)),
    ]
    assert len(cache_files(cache_dir)) >= 1 and len(caplog.records) >= 1
    for text in texts:
        assert KEY not in text


# -- letter scoring ------------------------------------------------------------------------------------------


def test_letters_are_scored_from_first_token_logprobs(make, server):
    server.top_logprobs = [(" B", -0.1), ("A", -2.5), ("b", -3.0), ("B", -4.0), ("The", -5.0)]
    model = make(logprobs=True, generation={"max_new_tokens": 50, "seed": 1})
    (scores,) = model.score_options(
        [
            OptionRequest(
                "q",
                image(),
                "Q? A. x B. y C. z",
                ["x", "y", "z"],
                letters=["A", "B", "C"],
                system="answer with a letter",
            )
        ]
    )
    assert scores.total[0] == pytest.approx(-2.5)
    assert scores.total[1] == pytest.approx(math.log(math.exp(-0.1) + math.exp(-4.0)))
    assert scores.total[2] == ABSENT_LETTER_LOGPROB
    assert scores.tokens == [1, 1, 1]
    body = server.requests[0].body
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["temperature"] == 0 and body["seed"] == 1
    assert body["messages"][0]["role"] == "system"


def test_log_probabilities_that_are_not_numbers_stop_the_job(make, server):
    """A server that returns NaN for a letter's log-probability (Python's JSON reads it) gave no answer: an
    argmax over it would pick the first option."""
    server.top_logprobs = [("A", float("nan")), ("B", -1.0)]
    model = make(logprobs=True, concurrency=1)
    with pytest.raises(InferenceFailed) as caught:
        model.score_results([OptionRequest("q7", None, "Q?", ["x", "y"], letters=["A", "B"])])
    assert caught.value.stop
    assert str(caught.value).startswith("the letters' log-probabilities of q7 holds NaN or infinite values; ")


def test_an_answer_without_a_letter_is_the_items_error(make, server):
    model = make(logprobs=True, concurrency=1, circuit_breaker=1)
    server.top_logprobs = [("Yes", -0.1), ("No", -2.0)]
    requests = [OptionRequest(f"q{i}", None, "Q?", ["x", "y"], letters=["A", "B"]) for i in range(2)]
    results = model.score_results(requests)  # not a failed request: the breaker does not count it
    assert all(result.scores is None and "none of the letters A, B" in result.error for result in results)


def test_a_server_without_logprobs_stops_at_the_first_request_and_names_the_setting(make, server):
    model = make(logprobs=True, concurrency=1)
    server.script.append(Reply(200, json.dumps({"choices": [{"message": {"content": "A"}}]})))
    requests = [OptionRequest(f"q{i}", None, "Q?", ["x", "y"], letters=["A", "B"]) for i in range(5)]
    with pytest.raises(
        CapabilityMissing,
        match=r"returned no logprobs for model fake-vlm, whose entry sets "
        r"`logprobs: true`; set `logprobs: false` or `answer_mode: generate`"
        r" in the entry, or `answer_mode: auto`",
    ) as caught:
        model.score_results(requests)
    assert caught.value.stop and caught.value.capability == "score_options" and server.count == 1
    # answer_mode auto drops the capability: the model generates from then on
    assert model.drop_capability("score_options") and "score_options" not in model.model_capabilities
    assert model.generate(requests_for(1)) == ["echo: prompt 0"]
    assert not model.drop_capability("score_options")


def test_option_texts_need_a_local_model(make):
    model = make(logprobs=True)
    with pytest.raises(VlmgridError, match="letters"):
        model.score_options([OptionRequest("q", None, "Q?", ["yes", "no"])])
    with pytest.raises(VlmgridError, match="logprobs"):
        make().score_options([OptionRequest("q", None, "Q?", ["x"], letters=["A"])])


def test_provenance_and_describe(make, server):
    model = make(generation={"seed": 4})
    provenance = model.provenance()
    assert provenance.backend == "openai" and provenance.model_id == "fake-vlm"
    assert provenance.device == f"api:127.0.0.1:{server.base_url.split(':')[2].split('/')[0]}"
    assert provenance.generation == {"max_new_tokens": 32, "do_sample": False, "seed": 4}
    assert set(provenance.libraries) >= {"requests", "pillow"}
    assert "fake-vlm" in model.describe() and "127.0.0.1" in model.describe()
    assert OpenAI.uses_gpu is False and OpenAI.name == "openai"


def test_empty_request_list(make, server):
    assert make().generate([]) == [] and server.count == 0


def test_the_kaleidoscope_preset_samples_and_resizes_and_says_so(make, server):
    model = make(generation={"preset": "kaleidoscope"})
    model.generate([GenerateRequest("a", Image.new("RGB", (40, 30), (1, 2, 3)), "what is it?")])
    body = server.requests[0].body
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["max_tokens"] == 1024
    url = body["messages"][0]["content"][0]["image_url"]["url"]
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (512, 512)
    preset = GENERATION_PRESETS.get("kaleidoscope").generation  # its values: tests/models/test_models.py
    assert model.provenance().generation == {"preset": "kaleidoscope", **preset}
    # no top-k limit and no penalty are what OpenAI's API does anyway, and it refuses both keys: not sent
    assert "top_k" not in body and "repetition_penalty" not in body


@pytest.mark.parametrize(
    "message",
    [
        "At most 0 image(s) may be provided in one request.",
        "Invalid content type. image_url is only supported by certain models.",
        "model x is not a multimodal model",
        "This model does not support image input",
    ],
)
def test_a_server_without_image_input_stops_at_the_first_request(make, server, message):
    server.script.append(Reply(400, json.dumps({"error": {"message": message}})))
    with pytest.raises(
        CapabilityMissing,
        match=r"refused the image of the first request with one to model fake-vlm \(HTTP "
        r"400: .*\): it serves a model without image input",
    ) as caught:
        make(concurrency=1).generate_results(requests_for(3, image=image()))
    assert caught.value.capability == "images" and caught.value.stop and server.count == 1


def test_text_items_answered_first_do_not_hide_a_server_without_image_input(make, server):
    """A benchmark with text-only items (Kaleidoscope) may have some answered before its first image: the
    server's refusal of that image still stops the job, not one error row per image item."""
    model = make(concurrency=1)
    assert all(result.ok for result in model.generate_results(requests_for(2)))
    server.script.append(Reply(400, json.dumps({"error": {"message": "At most 0 image(s) may be provided"}})))
    with pytest.raises(CapabilityMissing, match="refused the image of the first request with one") as caught:
        model.generate_results(requests_for(3, image=image()))
    assert caught.value.stop and server.count == 3


def test_an_image_the_model_cannot_take_is_the_items_even_first(make, server):
    server.script.append(Reply(400, json.dumps({"error": {"message": "image too large"}})))
    result = make(concurrency=1).generate_results(requests_for(1, image=image()))[0]
    assert "HTTP 400: image too large" in result.error


def test_once_the_server_has_answered_a_refused_image_is_the_items(make, server):
    model = make(concurrency=1)
    assert model.generate_results(requests_for(1, image=image()))[0].ok
    server.script.append(Reply(400, json.dumps({"error": {"message": "At most 0 image(s) may be provided"}})))
    result = model.generate_results([GenerateRequest("big", image(4000, 4000), "what is it?")])[0]
    assert "HTTP 400: At most 0 image(s)" in result.error
    # ... and a request without an image is never read as the server lacking image input
    server.script.append(Reply(400, json.dumps({"error": {"message": "this model does not support images"}})))
    assert not make(concurrency=1, cache=False).generate_results(requests_for(1))[0].ok


def test_a_served_models_cache_is_keyed_by_what_it_serves_not_by_its_port(cache_dir):
    from vlmgrid.models.openai_backend import OpenAI

    served = {
        "backend": "openai",
        "model": "m",
        "serve": {"command": ["vllm", "serve", "{model_dir}"]},
        "source": {"type": "hf_hub", "repo": "org/m", "revision": "a" * 40},
    }
    one = OpenAI({**served, "base_url": "http://127.0.0.1:40001/v1"})
    two = OpenAI({**served, "base_url": "http://127.0.0.1:40002/v1"})
    assert one.cache_path(b"{}") == two.cache_path(b"{}")  # the next job's server, on another port
    other_weights = OpenAI(
        {
            **served,
            "base_url": "http://127.0.0.1:40001/v1",
            "source": {**served["source"], "revision": "b" * 40},
        }
    )
    assert other_weights.cache_path(b"{}") != one.cache_path(b"{}")
    api = {"backend": "openai", "model": "m"}
    assert OpenAI({**api, "base_url": "http://127.0.0.1:40001/v1"}).cache_path(b"{}") != OpenAI(
        {**api, "base_url": "http://127.0.0.1:40002/v1"}
    ).cache_path(b"{}")


def test_a_served_models_weights_are_fetched_like_a_checkpoint(tmp_path):
    pytest.importorskip("transformers")
    from vlmgrid.fixtures.models import MODEL_FIXTURES
    from vlmgrid.models.openai_backend import OpenAI

    assert (
        OpenAI.fetch({"backend": "openai", "model": "m", "base_url": "https://api.example.com/v1"}, tmp_path)
        == {}
    )
    settings = {
        "backend": "openai",
        "model": "{model_dir}",
        "serve": {"command": ["x"]},
        "source": {"type": "fixture", "family": "llava", "seed": 0},
    }
    files = OpenAI.fetch(settings, tmp_path / "served", fixture=MODEL_FIXTURES.get("openai"))
    assert "config.json" in files and any(name.endswith(".safetensors") for name in files)
