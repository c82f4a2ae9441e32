"""Models behind an OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang, ...).

- "generate" always; "score_options" only with `logprobs: true` (and only for letter options: the
  log-probability of each letter is read from the top-20 log-probabilities of the first generated token).
- Requests run `concurrency` at a time; a request is retried with exponential backoff and jitter on HTTP 408,
  409, 429, 5xx, timeouts, connection errors and bodies that are no chat completion (Retry-After honoured), up
  to `max_retries` times. A refused connection before the server has sent any response is not retried: nothing
  listens at base_url, and the job stops at once.
- Every valid response is cached on disk under cache_root()/openai, keyed by the SHA-256 of base_url (for a
  server the job starts, `serve`: its command and weights) and the exact request body (never the key), so a
  rerun makes no HTTP call. Error and unparsable responses are not cached.
- With `serve`, the infer stage starts the server (vlmgrid.serving) and hands this backend its base_url.
- What fails is sorted by whose fault it is:
  - the item's (a data error): HTTP 400, 413, 422 and other client errors for that request (408 and 409
    excepted), no letter among the first token's alternatives. `generate_results` / `score_results` return
    it as the item's result with `error` set, and the protocols keep it as an error row;
  - the server's or the network's (an inference error): retries exhausted. It is never a result: the call
    raises `InferenceFailed` naming the items and causes (after the other requests of the call have run, so
    their answers are cached), and the job keeps its finished parts and retries or stops;
  - systemic: HTTP 401, 403, 404 or 405 (credentials, endpoint, model name), a refused connection before the
    server has sent any response (it is not running, or base_url is wrong), a server that returns no
    logprobs to a model entry with `logprobs: true`, or refuses the image of a request before it has answered
    any with an image (a server without image input; both `CapabilityMissing`), or `circuit_breaker` requests
    in a row (default 10) that all failed. The call stops sending requests and raises at once (`stop`).
  The interface methods `generate` and `score_options` return plain values and raise `ApiItemErrors` (a
  VlmgridError that carries every result) when an item failed.
- The API key is read from the environment variable `api_key_env` at load time and only ever goes into the
  Authorization header; every message that could echo it (server error bodies) is redacted.

The HTTP side (concurrency, retries, whose fault a failure is, the circuit breaker, the response cache) is in
vlmgrid.models.openai_http, the wire format (image data URLs, reading responses) in
vlmgrid.models.openai_wire.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from vlmgrid.errors import InferenceFailed, VlmgridError
from vlmgrid.fileio import sha256_json
from vlmgrid.model_requests import (
    GenerateRequest,
    GenerationResult,
    OptionRequest,
    OptionScores,
    ScoreResult,
    content_parts,
)
from vlmgrid.models.base import Backend, Provenance, require_finite, write_fixture
from vlmgrid.models.hf_loading import checkpoint_in_place
from vlmgrid.models.openai_http import ApiClient, ItemFailed, endpoint, is_local_url
from vlmgrid.models.openai_wire import (
    ABSENT_LETTER_LOGPROB,
    TOP_LOGPROBS,
    encode_image,
    letter_logprobs,
    parse_text,
    parse_top_logprobs,
)
from vlmgrid.serving import recorded_settings

__all__ = [
    "ABSENT_LETTER_LOGPROB",
    "ApiItemErrors",
    "GenerationResult",
    "OpenAI",
    "encode_image",
    "is_local_url",
]

_DEFAULT_GENERATION = {"max_new_tokens": 32, "do_sample": False}


class ApiItemErrors(VlmgridError):
    """Some requests of a call failed; `results` holds every result (in request order), `errors` the failed
    ones."""

    def __init__(self, results: list, ids: Sequence[str]) -> None:
        self.results = results
        self.errors = {ids[i]: result.error for i, result in enumerate(results) if result.error is not None}
        first_id, first_error = next(iter(self.errors.items()))
        super().__init__(
            f"{len(self.errors)} of {len(results)} API requests failed; "
            f"the first, item {first_id}: {first_error}"
        )


class OpenAI(ApiClient, Backend):
    name = "openai"
    capabilities = frozenset({"generate"})
    uses_gpu = False
    unbatched = "an API request carries one item; how the server batches is not the job's to choose"
    defaults = {
        "api_key_env": "OPENAI_API_KEY",
        "concurrency": 8,
        "max_retries": 5,
        "timeout": 120,
        "logprobs": False,
        "cache": True,
        "circuit_breaker": 10,
        "generation": dict(_DEFAULT_GENERATION),
    }
    # a request that fails is retried or stops the job, never an answer; the response cache keeps answers
    run_only = frozenset({"concurrency", "max_retries", "timeout", "circuit_breaker", "cache"})

    def __init__(self, settings: dict, api_key: str | None = None) -> None:
        super().__init__(settings)
        self.settings["generation"] = {**_DEFAULT_GENERATION, **(self.settings.get("generation") or {})}
        self.base_url = str(self.settings["base_url"]).rstrip("/")
        # Responses are cached per server: its base_url, or for a server the job started (whose port changes
        # from job to job) what it serves, the command and weights (a new token in serve.env serves the same).
        self.cache_scope = (
            self.base_url
            if "serve" not in self.settings
            else "serve:"
            + sha256_json(
                {"serve": recorded_settings(self.settings)["serve"], "source": self.settings.get("source")}
            )
        )
        self._api_key = api_key or None
        self._local = threading.local()
        self._sleep: Callable[[float], None] = time.sleep
        self._lock = threading.Lock()
        self._failed_in_row = 0  # requests in a row that failed, over all calls (the circuit breaker)
        self._took_image = False  # the server has answered a request with an image (so it takes images)
        self._reached = False  # the server has sent an HTTP response, of any status (it listens at base_url)
        self._stop: InferenceFailed | None = None  # set once the job must end: no request is sent after it

    def __repr__(self) -> str:  # never the key
        return f"OpenAI(model={self.settings['model']!r}, endpoint={endpoint(self.base_url)!r})"

    @classmethod
    def capabilities_for(cls, settings: dict) -> frozenset[str]:
        if settings.get("logprobs", cls.defaults["logprobs"]):
            return frozenset({"generate", "score_options"})
        return frozenset({"generate"})

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path, fixture=None) -> dict[str, Path]:
        """No weights for a model behind an API; a model whose jobs start a server (`serve`) may have a
        `source` of weights for it, fetched as the hf backend fetches a checkpoint (the server loads them)."""
        source = settings.get("source")
        if source is None:
            return {}
        return write_fixture(cls.name, source, Path(model_dir), fixture)

    @classmethod
    def in_place(cls, settings: dict):
        """The served weights of a hub or local source, where they lie (as the hf backend reads them)."""
        return checkpoint_in_place(settings.get("source"))

    def drop_capability(self, capability: str) -> bool:
        """A server without logprobs: answer by generation from here on (`answer_mode: auto`)."""
        if capability != "score_options" or not self.settings.get("logprobs"):
            return False
        self.settings["logprobs"] = False
        with self._lock:
            self._stop = None  # the fault was the capability, now dropped
        return True

    @classmethod
    def request_view(cls, settings: dict, model_dir: Path | None) -> _MessagesView:
        """The chat messages each request would send, the image named by its file (`vlmgrid inputs`): no key
        read, no request sent."""
        return _MessagesView(cls({**cls.defaults, "base_url": "http://127.0.0.1", **settings}))

    @classmethod
    def load(cls, settings: dict, model_dir: Path | None, device: str) -> OpenAI:
        settings = {**cls.defaults, **settings}
        variable = settings["api_key_env"]
        api_key = os.environ.get(variable) or None
        if api_key is None and not is_local_url(str(settings["base_url"])):
            raise VlmgridError(
                f"the environment variable {variable} is not set; it must hold the API key for "
                f"{endpoint(str(settings['base_url']))} (model {settings['model']})"
            )
        return cls(settings, api_key)

    # -- description -----------------------------------------------------------------------------------------

    def describe(self) -> str:
        return f"{self.settings['model']} via {endpoint(self.base_url)} (OpenAI-compatible API)"

    def provenance(self) -> Provenance:
        import PIL
        import requests

        import vlmgrid

        return Provenance(
            backend=self.name,
            model_id=str(self.settings["model"]),
            device=f"api:{endpoint(self.base_url)}",
            batch_size=int(self.settings["concurrency"]),
            generation=dict(self.settings["generation"]),
            libraries={
                "requests": requests.__version__,
                "pillow": PIL.__version__,
                "vlmgrid": vlmgrid.__version__,
            },
        )

    # -- request bodies --------------------------------------------------------------------------------------

    def messages(self, request, image_url: Callable | None = None) -> list[dict]:
        """The request's chat messages: its system text (the request's own, else the model's `system`), then
        the user turn, its text and image in the request's order (vlmgrid.model_requests.content_parts). The
        image is a PNG data URL (`image_size`: resized first), or what `image_url(image)` makes of it
        (`vlmgrid inputs` names the file instead)."""
        if request.formatted:
            raise VlmgridError(
                f"item {request.id}: its prompt is a whole hand-written string (a recipe's `raw` "
                f"prompt), which an API cannot take; give the {self.name} model a `user` prompt"
            )
        image_url = image_url or (lambda image: encode_image(image, self.settings.get("image_size")))
        content: list[dict] = []
        for kind, value in content_parts(request):
            if kind == "text":
                content.append({"type": "text", "text": value})
                continue
            part = {"url": image_url(request.image)}
            if self.settings.get("image_detail"):
                part["detail"] = self.settings["image_detail"]
            content.append({"type": "image_url", "image_url": part})
        system = request.system if request.system is not None else self.settings.get("system")
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": content})
        return messages

    def _sampling(self) -> dict:
        generation = self.settings["generation"]
        body: dict = {}
        if generation.get("do_sample"):
            if generation.get("temperature") is not None:
                body["temperature"] = generation["temperature"]
        else:
            body["temperature"] = 0
        if generation.get("top_p") is not None:
            body["top_p"] = generation["top_p"]
        # vLLM and SGLang take these; OpenAI's API refuses them, and applies neither: their neutral values
        # (no top-k limit, no penalty) are what it does anyway, so they are not sent
        if generation.get("do_sample") and generation.get("top_k") not in (None, 0):
            body["top_k"] = generation["top_k"]
        if generation.get("repetition_penalty") not in (None, 1.0):
            body["repetition_penalty"] = generation["repetition_penalty"]
        if generation.get("seed") is not None:
            body["seed"] = generation["seed"]
        return body

    def generation_body(self, request: GenerateRequest) -> dict:
        max_tokens = request.max_new_tokens or self.settings["generation"]["max_new_tokens"]
        messages = self.messages(request)
        return {
            "model": self.settings["model"],
            "messages": messages,
            "max_tokens": int(max_tokens),
            **self._sampling(),
        }

    def scoring_body(self, request: OptionRequest) -> dict:
        messages = self.messages(request)
        return {
            "model": self.settings["model"],
            "messages": messages,
            "max_tokens": 1,
            **self._sampling(),
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
        }

    # -- the interface ---------------------------------------------------------------------------------------

    def generate_results(self, requests: Sequence[GenerateRequest]) -> list[GenerationResult]:
        """One GenerationResult per request, in request order; an item the server refused is a result with
        `error` set. InferenceFailed when a request could not be answered at all (see the module
        docstring)."""

        def one(request: GenerateRequest) -> GenerationResult:
            try:
                return GenerationResult(
                    text=self._complete(request.id, self.generation_body(request), parse_text)
                )
            except ItemFailed as exc:
                return GenerationResult(text=None, error=str(exc))

        return self._map(one, requests)

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """The texts, in request order; ApiItemErrors (with every result) if any request failed."""
        return [result.text for result in _all_ok(self.generate_results(requests), requests)]

    def score_results(self, requests: Sequence[OptionRequest]) -> list[ScoreResult]:
        """One ScoreResult per request (letters only), in request order; an item the server refused, or whose
        first token is no letter, is a result with `error` set. InferenceFailed as for `generate_results`."""
        if "score_options" not in self.model_capabilities:
            raise VlmgridError(
                f"model {self.settings['model']} has no option scoring; set `logprobs: true` if "
                "the server returns logprobs"
            )
        for request in requests:
            if not request.letters:
                raise VlmgridError(
                    f"item {request.id}: an API model scores option letters only; scoring option "
                    "texts as continuations needs a local (hf) model"
                )
            if len(request.letters) != len(request.options):
                raise VlmgridError(
                    f"item {request.id}: {len(request.letters)} letters for {len(request.options)} options"
                )

        def one(request: OptionRequest) -> ScoreResult:
            try:
                top = self._complete(request.id, self.scoring_body(request), parse_top_logprobs)
            except ItemFailed as exc:
                return ScoreResult(scores=None, error=str(exc))
            scores = letter_logprobs(top, request.letters)
            if all(score == ABSENT_LETTER_LOGPROB for score in scores):
                seen = ", ".join(repr(token) for token, _ in top[:5])
                return ScoreResult(
                    scores=None,
                    error=f"none of the letters {', '.join(request.letters)} is among "
                    f"the top {len(top)} first tokens (the first: {seen})",
                )
            return ScoreResult(scores=OptionScores(total=scores, tokens=[1] * len(scores)))

        results = self._map(one, requests)
        answered = [(request.id, result.scores) for request, result in zip(requests, results) if result.ok]
        require_finite(
            [scores.total for _, scores in answered],
            [item for item, _ in answered],
            "the letters' log-probabilities",
            f"the server at {endpoint(self.base_url)} returned them; check the model it serves",
            scores=True,
        )
        return results

    def score_options(self, requests: Sequence[OptionRequest]) -> list[OptionScores]:
        """The letters' log-probabilities, in request order; ApiItemErrors (with every result) if any
        failed."""
        return [result.scores for result in _all_ok(self.score_results(requests), requests)]


def _all_ok(results: list, requests: Sequence) -> list:
    """The results of the requests, when every one is ok; ApiItemErrors, holding them all, when one is not."""
    if any(not result.ok for result in results):
        raise ApiItemErrors(results, [request.id for request in requests])
    return results


class _MessagesView:
    """An API model's view of a request (vlmgrid.models.base.PromptView's interface): the messages it sends,
    each image named by the file it was read from instead of its data URL; no tokenizer text, no pixels."""

    def __init__(self, backend: OpenAI) -> None:
        self.backend = backend

    def text(self, request) -> str | None:
        return None

    def messages(self, request) -> list:
        from vlmgrid.images import SOURCE_KEY

        return self.backend.messages(
            request, image_url=lambda image: f"file:{image.info.get(SOURCE_KEY, '?')}"
        )

    def pixels(self, image):
        return None
