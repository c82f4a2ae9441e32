import base64
import io
import json
import logging
import math

import pytest
from PIL import Image

from fake_openai_server import EchoAuth, FakeOpenAIServer, Reply, Sleep
from vlmgrid.errors import VlmgridError
from vlmgrid.models.base import GenerateRequest, OptionRequest
from vlmgrid.models.openai_backend import (
    ABSENT_LETTER_LOGPROB, ApiItemErrors, GenerationResult, OpenAI, encode_image, is_local_url,
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
        model = OpenAI.load({"backend": "openai", "base_url": server.base_url, "model": "fake-vlm", **settings},
                            None, "cpu")
        model._sleep = sleeps.append
        return model

    return build


def requests_for(n, image=None, **kwargs):
    return [GenerateRequest(f"q{i}", image, f"prompt {i}", **kwargs) for i in range(n)]


def cache_files(cache_dir):
    return sorted((cache_dir / "openai").rglob("*.json")) if (cache_dir / "openai").exists() else []


def image(width=40, height=30, colour=(200, 10, 60)):
    return Image.new("RGB", (width, height), colour)


# -- capabilities and loading --------------------------------------------------------------------------------------

def test_capabilities_follow_logprobs_setting():
    assert OpenAI.capabilities_for({"base_url": "x", "model": "m"}) == {"generate"}
    assert OpenAI.capabilities_for({"base_url": "x", "model": "m", "logprobs": True}) == {"generate", "score_options"}
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


# -- request bodies --------------------------------------------------------------------------------------------------

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


def test_image_encoding_is_deterministic_and_keeps_size_without_image_size():
    picture = image(33, 21)
    assert encode_image(picture, None) == encode_image(picture.copy(), None)
    data = base64.b64decode(encode_image(picture, None).split(",", 1)[1])
    assert Image.open(io.BytesIO(data)).size == (33, 21)


# -- generation ------------------------------------------------------------------------------------------------------

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
    server.script.extend([Reply(429, "{}", {"Retry-After": "0"}), Reply(503, "busy"),
                          Reply(429, "{}", {"Retry-After": "2"})])
    model = make(max_retries=5)
    model.backoff_base = 0.25
    results = model.generate_results(requests_for(1))
    assert results == [GenerationResult(text="echo: prompt 0")]
    assert server.count == 4
    assert sleeps[0] == 0 and 0.125 <= sleeps[1] <= 0.5 and sleeps[2] == 2


def test_retries_exhausted_is_an_error_result_naming_the_status(make, server, sleeps, cache_dir):
    server.script.extend([Reply(500, json.dumps({"error": {"message": "overloaded"}}))] * 3)
    model = make(max_retries=2, concurrency=1)
    results = model.generate_results(requests_for(2))
    assert results[0].text is None and not results[0].ok
    assert "HTTP 500" in results[0].error and "overloaded" in results[0].error and "3 attempts" in results[0].error
    assert results[1] == GenerationResult(text="echo: prompt 1")
    assert server.count == 4 and len(sleeps) == 2
    assert len(cache_files(cache_dir)) == 1  # only the success


def test_generate_raises_with_every_result_when_an_item_failed(make, server):
    server.script.append(Reply(400, json.dumps({"error": {"message": "bad image"}})))
    model = make(concurrency=1)
    with pytest.raises(ApiItemErrors, match="q0") as caught:
        model.generate(requests_for(2))
    assert isinstance(caught.value, VlmgridError)
    assert caught.value.results[1] == GenerationResult(text="echo: prompt 1")
    assert "HTTP 400" in caught.value.errors["q0"] and "bad image" in caught.value.errors["q0"]


def test_client_errors_are_not_retried(make, server, sleeps):
    server.script.append(Reply(404, json.dumps({"error": {"message": "model not found"}})))
    result = make(max_retries=5).generate_results(requests_for(1))[0]
    assert server.count == 1 and sleeps == []
    assert "HTTP 404" in result.error and "model not found" in result.error


def test_timeouts_are_retried(make, server, sleeps):
    server.script.append(Sleep(0.6))
    result = make(timeout=0.2, max_retries=1).generate_results(requests_for(1))[0]
    assert result.text == "echo: prompt 0"
    assert server.count == 2 and len(sleeps) == 1


def test_timeouts_exhausted(make, server):
    server.script.extend([Sleep(0.5)] * 2)
    result = make(timeout=0.15, max_retries=1).generate_results(requests_for(1))[0]
    assert result.text is None and "timed out" in result.error and "2 attempts" in result.error


def test_connection_errors_are_retried_then_reported(sleeps):
    model = OpenAI.load({"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 2}, None, "cpu")
    model._sleep = sleeps.append
    result = model.generate_results(requests_for(1))[0]
    assert result.text is None and "connection error" in result.error and len(sleeps) == 2


@pytest.mark.parametrize("garbage", [
    "<html>oops</html>",
    json.dumps({"object": "chat.completion"}),
    json.dumps({"choices": []}),
    json.dumps({"choices": [{"message": {"role": "assistant", "content": ""}}]}),
    json.dumps({"choices": [{"message": {"role": "assistant", "content": None}}]}),
])
def test_garbage_is_an_error_result_and_not_cached(make, server, cache_dir, garbage):
    server.script.append(Reply(200, garbage))
    result = make().generate_results(requests_for(1))[0]
    assert result.text is None and result.error.startswith("unparsable response")
    assert server.count == 1
    assert cache_files(cache_dir) == []
    # the next run asks again (nothing bad was cached) and succeeds
    assert make().generate(requests_for(1)) == ["echo: prompt 0"]
    assert server.count == 2 and len(cache_files(cache_dir)) == 1


# -- cache -----------------------------------------------------------------------------------------------------------

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


# -- the API key -----------------------------------------------------------------------------------------------------

def test_api_key_only_in_the_authorization_header(make, server, cache_dir, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    server.script.extend([EchoAuth(401), EchoAuth(500), EchoAuth(500)])
    model = make(concurrency=1, max_retries=1)
    results = model.generate_results(requests_for(3))
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in server.requests)
    errors = [r.error for r in results if r.error]
    assert len(errors) == 2 and "HTTP 401" in errors[0] and "HTTP 500" in errors[1]
    assert "[redacted]" in errors[0]  # the server did quote the key
    server.script.append(EchoAuth(403))
    with pytest.raises(ApiItemErrors) as caught:
        make(max_retries=0, cache=False).generate(requests_for(1))
    assert "HTTP 403" in str(caught.value)
    texts = [*errors, str(caught.value), caplog.text, repr(model), model.describe(), repr(model.provenance()),
             *(path.read_text() for path in cache_files(cache_dir))]
    assert len(cache_files(cache_dir)) == 1 and len(caplog.records) >= 1
    for text in texts:
        assert KEY not in text


# -- letter scoring --------------------------------------------------------------------------------------------------

def test_letters_are_scored_from_first_token_logprobs(make, server):
    server.top_logprobs = [(" B", -0.1), ("A", -2.5), ("b", -3.0), ("B", -4.0), ("The", -5.0)]
    model = make(logprobs=True, generation={"max_new_tokens": 50, "seed": 1})
    (scores,) = model.score_options([OptionRequest("q", image(), "Q? A. x B. y C. z", ["x", "y", "z"],
                                                   letters=["A", "B", "C"], system="answer with a letter")])
    assert scores.total[0] == pytest.approx(-2.5)
    assert scores.total[1] == pytest.approx(math.log(math.exp(-0.1) + math.exp(-4.0)))
    assert scores.total[2] == ABSENT_LETTER_LOGPROB
    assert scores.tokens == [1, 1, 1]
    body = server.requests[0].body
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["temperature"] == 0 and body["seed"] == 1
    assert body["messages"][0]["role"] == "system"


def test_letter_scoring_failures_are_error_results(make, server):
    model = make(logprobs=True, concurrency=1)
    server.top_logprobs = [("Yes", -0.1), ("No", -2.0)]
    server.script.append(Reply(200, json.dumps({"choices": [{"message": {"content": "A"}}]})))
    requests = [OptionRequest(f"q{i}", None, "Q?", ["x", "y"], letters=["A", "B"]) for i in range(2)]
    results = model.score_results(requests)
    assert results[0].scores is None and "unparsable response" in results[0].error and "logprobs" in results[0].error
    assert results[1].scores is None and "none of the letters A, B" in results[1].error


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
    assert model.provenance().generation == {"preset": "kaleidoscope", "do_sample": True, "temperature": 0.7,
                                             "top_p": 0.9, "max_new_tokens": 1024}
