"""Models behind an OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang, ...).

- "generate" always; "score_options" only with `logprobs: true` (and only for letter options: the log-probability
  of each letter is read from the top-20 log-probabilities of the first generated token).
- Requests run `concurrency` at a time; a request is retried with exponential backoff and jitter on HTTP 429,
  5xx, timeouts, connection errors and bodies that are no chat completion (Retry-After honoured), up to
  `max_retries` times.
- Every valid response is cached on disk under cache_root()/openai, keyed by the SHA-256 of base_url and the
  exact request body (never the key), so a rerun makes no HTTP call. Error and unparsable responses are not cached.
- What fails is sorted by whose fault it is:
  - the item's (a data error): HTTP 400, 413, 422 and other client errors for that request, no letter among
    the first token's alternatives. `generate_results` / `score_results` return it as the item's result with
    `error` set, and the protocols keep it as an error row;
  - the server's or the network's (an inference error): retries exhausted. It is never a result: the call
    raises `InferenceFailed` naming the items and causes (after the other requests of the call have run, so
    their answers are cached), and the job keeps its finished parts and retries or stops;
  - systemic: HTTP 401, 403, 404 or 405 (credentials, endpoint, model name), a server that returns no
    logprobs to a model entry with `logprobs: true`, or refuses the image of a request before it has answered
    any (a server without image input; both `CapabilityMissing`), or `circuit_breaker` requests in a row
    (default 10) that all failed. The call stops sending requests and raises at once (`stop`).
  The interface methods `generate` and `score_options` return plain values and raise `ApiItemErrors` (a
  VlmgridError that carries every result) when an item failed.
- The API key is read from the environment variable `api_key_env` at load time and only ever goes into the
  Authorization header; every message that could echo it (server error bodies) is redacted.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import io
import ipaddress
import json
import logging
import math
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from vlmgrid.errors import CapabilityMissing, InferenceFailed, VlmgridError
from vlmgrid.models.base import (
    Backend, GenerateRequest, GenerationResult, OptionRequest, OptionScores, Provenance, ScoreResult,
)

logger = logging.getLogger(__name__)

#: log-probability given to a letter that is not among the top log-probabilities of the first token
ABSENT_LETTER_LOGPROB = float("-inf")
#: how many alternatives per token the scoring request asks for (OpenAI's maximum)
TOP_LOGPROBS = 20
_DEFAULT_GENERATION = {"max_new_tokens": 32, "do_sample": False}
_REDACTED = "[redacted]"
_SNIPPET = 200


class _ItemFailed(Exception):
    """A request the server refused for this item (a data error); the message (already redacted) becomes the
    item's error."""


class _Unavailable(Exception):
    """A request whose retries were exhausted (server or network): an inference error, never a row."""


class _Refused(Exception):
    """The server refused the request for a reason no item can change (credentials, endpoint, model name)."""


class _NoLogprobs(ValueError):
    """A completion without the logprobs a scoring request asked for."""


class _NoImages(Exception):
    """The server refused the image of a request before it ever answered one: it serves no vision model."""


#: statuses that say the model entry or the credentials are wrong, not the item
_SYSTEMIC_STATUSES = frozenset({401, 403, 404, 405})
#: what a server says when the model it serves takes no images at all (vLLM: "At most 0 image(s) may be
#: provided", OpenAI: "image_url is only supported by certain models", "... is not a multimodal model"); an
#: image the model cannot take ("image too large") is the item's error
_REFUSES_IMAGES = re.compile(
    r"at most 0 image|not (?:a )?multi-?modal|(?:does not|doesn't|do not|cannot) (?:support|accept|take) "
    r"(?:image|vision)|images? (?:input )?(?:is |are )?not supported|only supported by certain models|"
    r"not a vision",
    re.IGNORECASE,
)


class ApiItemErrors(VlmgridError):
    """Some requests of a call failed; `results` holds every result (in request order), `errors` the failed ones."""

    def __init__(self, results: list, ids: Sequence[str]) -> None:
        self.results = results
        self.errors = {ids[i]: result.error for i, result in enumerate(results) if result.error is not None}
        first_id, first_error = next(iter(self.errors.items()))
        super().__init__(f"{len(self.errors)} of {len(results)} API requests failed; "
                         f"the first, item {first_id}: {first_error}")


def is_local_url(base_url: str) -> bool:
    """True for a loopback endpoint (a local vLLM/SGLang server), where an API key is optional."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _endpoint(base_url: str) -> str:
    """host[:port] of the base URL, without credentials, path or query."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


def encode_image(image, size: int | None) -> str:
    """A deterministic PNG data URL of the image (RGB, resized to size x size first when size is set)."""
    from PIL import Image

    if image.mode != "RGB":
        image = image.convert("RGB")
    if size:
        image = image.resize((int(size), int(size)), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _first_choice(data: Any) -> dict:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices")
    return choices[0]


def parse_text(data: Any) -> str:
    """The text of the first choice ("" when the model answered nothing); ValueError when there is no message."""
    message = _first_choice(data).get("message")
    if not isinstance(message, dict):
        raise ValueError("no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError("message content is not text")
    return content or ""


def parse_top_logprobs(data: Any) -> list[tuple[str, float]]:
    """(token, logprob) pairs among the top log-probabilities of the first generated token."""
    logprobs = _first_choice(data).get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        raise _NoLogprobs("no logprobs")
    first = content[0]
    top = first.get("top_logprobs") or [first]
    pairs = []
    for entry in top:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str) \
                or not isinstance(entry.get("logprob"), (int, float)):
            raise ValueError("malformed top_logprobs")
        pairs.append((entry["token"], float(entry["logprob"])))
    return pairs


def letter_logprobs(top: Sequence[tuple[str, float]], letters: Sequence[str]) -> list[float]:
    """Per letter, the log of the summed probability of the top tokens that are that letter once stripped
    of whitespace (" A" and "A" both count for "A"; case-sensitive); ABSENT_LETTER_LOGPROB if none is."""
    scores = []
    for letter in letters:
        values = [logprob for token, logprob in top if token.strip() == letter]
        if not values:
            scores.append(ABSENT_LETTER_LOGPROB)
            continue
        peak = max(values)
        scores.append(peak + math.log(sum(math.exp(v - peak) for v in values)) if peak > -math.inf else peak)
    return scores


class OpenAI(Backend):
    name = "openai"
    capabilities = frozenset({"generate"})
    uses_gpu = False
    defaults = {"api_key_env": "OPENAI_API_KEY", "concurrency": 8, "max_retries": 5, "timeout": 120,
                "logprobs": False, "cache": True, "circuit_breaker": 10}

    #: first backoff delay in seconds (doubled per retry, jittered to 50-100%, capped at backoff_max)
    backoff_base: float = 1.0
    backoff_max: float = 60.0

    def __init__(self, settings: dict, api_key: str | None = None) -> None:
        super().__init__(settings)
        self.settings["generation"] = {**_DEFAULT_GENERATION, **(self.settings.get("generation") or {})}
        self.base_url = str(self.settings["base_url"]).rstrip("/")
        self._api_key = api_key or None
        self._local = threading.local()
        self._sleep: Callable[[float], None] = time.sleep
        self._lock = threading.Lock()
        self._failed_in_row = 0  # requests in a row that failed, over all calls (the circuit breaker)
        self._answered = False  # the server has answered a request (so it can take what this one sends)
        self._stop: InferenceFailed | None = None  # set once the job must end: no request is sent after it

    def __repr__(self) -> str:  # never the key
        return f"OpenAI(model={self.settings['model']!r}, endpoint={_endpoint(self.base_url)!r})"

    @classmethod
    def capabilities_for(cls, settings: dict) -> frozenset[str]:
        if settings.get("logprobs", cls.defaults["logprobs"]):
            return frozenset({"generate", "score_options"})
        return frozenset({"generate"})

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path) -> dict[str, Path]:
        return {}  # an API model has no weights

    def drop_capability(self, capability: str) -> bool:
        """A server without logprobs: answer by generation from here on (`answer_mode: auto`)."""
        if capability != "score_options" or not self.settings.get("logprobs"):
            return False
        self.settings["logprobs"] = False
        with self._lock:
            self._stop = None  # the fault was the capability, now dropped
        return True

    @classmethod
    def load(cls, settings: dict, model_dir: Path | None, device: str) -> "OpenAI":
        settings = {**cls.defaults, **settings}
        variable = settings["api_key_env"]
        api_key = os.environ.get(variable) or None
        if api_key is None and not is_local_url(str(settings["base_url"])):
            raise VlmgridError(f"the environment variable {variable} is not set; it must hold the API key for "
                               f"{_endpoint(str(settings['base_url']))} (model {settings['model']})")
        return cls(settings, api_key)

    # -- description -------------------------------------------------------------------------------------------

    def describe(self) -> str:
        return f"{self.settings['model']} via {_endpoint(self.base_url)} (OpenAI-compatible API)"

    def provenance(self) -> Provenance:
        import PIL
        import requests

        import vlmgrid

        return Provenance(
            backend=self.name,
            model_id=str(self.settings["model"]),
            device=f"api:{_endpoint(self.base_url)}",
            batch_size=int(self.settings["concurrency"]),
            generation=dict(self.settings["generation"]),
            libraries={"requests": requests.__version__, "pillow": PIL.__version__, "vlmgrid": vlmgrid.__version__},
        )

    # -- request bodies ----------------------------------------------------------------------------------------

    def _messages(self, image, prompt: str, system: str | None) -> list[dict]:
        content: list[dict] = []
        if image is not None:
            url = encode_image(image, self.settings.get("image_size"))
            content.append({"type": "image_url", "image_url": {"url": url}})
        content.append({"type": "text", "text": prompt})
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
        if generation.get("seed") is not None:
            body["seed"] = generation["seed"]
        return body

    def generation_body(self, request: GenerateRequest) -> dict:
        max_tokens = request.max_new_tokens or self.settings["generation"]["max_new_tokens"]
        messages = self._messages(request.image, request.prompt, request.system)
        return {"model": self.settings["model"], "messages": messages, "max_tokens": int(max_tokens),
                **self._sampling()}

    def scoring_body(self, request: OptionRequest) -> dict:
        messages = self._messages(request.image, request.prompt, request.system)
        return {"model": self.settings["model"], "messages": messages, "max_tokens": 1, **self._sampling(),
                "temperature": 0, "logprobs": True, "top_logprobs": TOP_LOGPROBS}

    # -- the interface -----------------------------------------------------------------------------------------

    def generate_results(self, requests: Sequence[GenerateRequest]) -> list[GenerationResult]:
        """One GenerationResult per request, in request order; an item the server refused is a result with
        `error` set. InferenceFailed when a request could not be answered at all (see the module docstring)."""

        def one(request: GenerateRequest) -> GenerationResult:
            try:
                return GenerationResult(text=self._complete(request.id, self.generation_body(request), parse_text))
            except _ItemFailed as exc:
                return GenerationResult(text=None, error=str(exc))

        return self._map(one, requests)

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """The texts, in request order; ApiItemErrors (with every result) if any request failed."""
        results = self.generate_results(requests)
        if any(not result.ok for result in results):
            raise ApiItemErrors(results, [request.id for request in requests])
        return [result.text for result in results]

    def score_results(self, requests: Sequence[OptionRequest]) -> list[ScoreResult]:
        """One ScoreResult per request (letters only), in request order; an item the server refused, or whose
        first token is no letter, is a result with `error` set. InferenceFailed as for `generate_results`."""
        if "score_options" not in self.model_capabilities:
            raise VlmgridError(f"model {self.settings['model']} has no option scoring; set `logprobs: true` if "
                               "the server returns logprobs")
        for request in requests:
            if not request.letters:
                raise VlmgridError(f"item {request.id}: an API model scores option letters only; scoring option "
                                   "texts as continuations needs a local (hf) model")
            if len(request.letters) != len(request.options):
                raise VlmgridError(f"item {request.id}: {len(request.letters)} letters for "
                                   f"{len(request.options)} options")

        def one(request: OptionRequest) -> ScoreResult:
            try:
                top = self._complete(request.id, self.scoring_body(request), parse_top_logprobs)
            except _ItemFailed as exc:
                return ScoreResult(scores=None, error=str(exc))
            scores = letter_logprobs(top, request.letters)
            if all(score == ABSENT_LETTER_LOGPROB for score in scores):
                seen = ", ".join(repr(token) for token, _ in top[:5])
                return ScoreResult(scores=None, error=f"none of the letters {', '.join(request.letters)} is among "
                                                      f"the top {len(top)} first tokens (the first: {seen})")
            return ScoreResult(scores=OptionScores(total=scores, tokens=[1] * len(scores)))

        return self._map(one, requests)

    def score_options(self, requests: Sequence[OptionRequest]) -> list[OptionScores]:
        """The letters' log-probabilities, in request order; ApiItemErrors (with every result) if any failed."""
        results = self.score_results(requests)
        if any(not result.ok for result in results):
            raise ApiItemErrors(results, [request.id for request in requests])
        return [result.scores for result in results]

    # -- HTTP, retries, the circuit breaker and the cache -------------------------------------------------------

    def _map(self, function, requests: Sequence) -> list:
        """function(request) for every request, `concurrency` at a time, in request order. Requests whose
        retries ran out make the call raise InferenceFailed once every request has run; a systemic fault makes
        it stop sending requests and raise with `stop`."""
        requests = list(requests)
        if not requests:
            return []
        unavailable: dict[str, str] = {}

        def guarded(request):
            if self._stop is not None:
                return None  # the job is ending: send nothing more
            try:
                result = function(request)
            except _Unavailable as exc:
                unavailable[request.id] = str(exc)
                return None
            except _Refused as exc:
                self._halt(InferenceFailed(
                    f"{_endpoint(self.base_url)} refused model {self.settings['model']} ({exc}); check the model "
                    f"entry's base_url, model and api_key_env", {request.id: str(exc)}, stop=True))
                return None
            except _NoImages as exc:
                self._halt(CapabilityMissing(
                    f"{_endpoint(self.base_url)} refused the image of the first request to model "
                    f"{self.settings['model']} ({exc}): it serves a model without image input; serve a vision "
                    f"model, or point the entry at one", "images"))
                return None
            except _NoLogprobs:
                self._halt(CapabilityMissing(
                    f"{_endpoint(self.base_url)} returned no logprobs for model {self.settings['model']}, whose "
                    f"entry sets `logprobs: true`; set `logprobs: false` or `answer_mode: generate` in the entry, "
                    f"or `answer_mode: auto` to answer by generation where the server has no logprobs",
                    "score_options"))
                return None
            return result

        workers = min(int(self.settings["concurrency"]), len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vlmgrid-openai") as pool:
            results = list(pool.map(guarded, requests))
        if self._stop is not None:
            self._stop.failures.update(unavailable)
            raise self._stop
        if unavailable:
            raise InferenceFailed(f"{len(unavailable)} of {len(requests)} requests to {_endpoint(self.base_url)} "
                                  f"failed", unavailable)
        return results

    def _count(self, *, failed: bool, cause: str | None = None) -> None:
        """The circuit breaker: `circuit_breaker` requests in a row that the server refused or never answered
        end the job (a cache hit, or an answer without a letter, neither breaks nor counts)."""
        with self._lock:
            self._failed_in_row = self._failed_in_row + 1 if failed else 0
            self._answered = self._answered or not failed
            tripped = failed and self._failed_in_row >= int(self.settings["circuit_breaker"])
            count = self._failed_in_row
        if tripped:
            self._halt(InferenceFailed(
                f"the last {count} requests to {_endpoint(self.base_url)} (model {self.settings['model']}) all "
                f"failed, the last one: {cause}; check that the server is up and serves this model", stop=True))

    def _halt(self, failure: InferenceFailed) -> None:
        with self._lock:
            if self._stop is None:
                self._stop = failure

    def _session(self):
        import requests

        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["Content-Type"] = "application/json"
            if self._api_key:
                session.headers["Authorization"] = f"Bearer {self._api_key}"
            self._local.session = session
        return session

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, _REDACTED)
        return text

    def cache_path(self, payload: bytes) -> Path:
        from vlmgrid.cache import cache_root

        digest = hashlib.sha256(self.base_url.encode("utf-8") + b"\n" + payload).hexdigest()
        return cache_root() / "openai" / digest[:2] / f"{digest}.json"

    def _read_cache(self, path: Path, parse):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return parse(data["response"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("ignoring the unreadable cache entry %s", path)
            return None

    def _write_cache(self, path: Path, response: dict) -> None:
        from vlmgrid.fileio import write_json

        try:
            write_json(path, {"base_url": self.base_url, "model": self.settings["model"], "response": response})
        except OSError as exc:
            logger.warning("could not write the cache entry %s: %s", path, exc)

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_max, self.backoff_base * 2 ** attempt) * random.uniform(0.5, 1.0)

    def _complete(self, item_id: str, body: dict, parse):
        """POST one chat completion (or read it from the cache) and return parse(response).

        Raises _ItemFailed (the server refused this item), _Unavailable (retries exhausted), _Refused (the
        entry or credentials are wrong) or _NoLogprobs (a scoring response without logprobs).
        """
        payload = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        path = self.cache_path(payload) if self.settings["cache"] else None
        if path is not None:
            cached = self._read_cache(path, parse)
            if cached is not None:
                return cached
        try:
            data, result = self._post(item_id, payload, parse)
        except (_ItemFailed, _Unavailable) as exc:
            self._count(failed=True, cause=str(exc))
            raise
        self._count(failed=False)
        if path is not None and result not in ("", None):
            self._write_cache(path, data)
        return result

    def _post(self, item_id: str, payload: bytes, parse):
        """(response, parse(response)) of one POST, retried as the module docstring says."""
        import requests

        url = f"{self.base_url}/chat/completions"
        timeout = float(self.settings["timeout"])
        attempts = int(self.settings["max_retries"]) + 1
        problem = ""
        for attempt in range(attempts):
            if self._stop is not None:
                raise _Unavailable(f"not sent: {self._stop}")
            delay = None
            try:
                response = self._session().post(url, data=payload, timeout=timeout)
            except requests.Timeout:
                problem = f"timed out after {timeout:g} s"
            except requests.ConnectionError as exc:
                problem = f"connection error ({type(exc).__name__})"
            else:
                status = response.status_code
                if status == 429 or status >= 500:
                    problem = f"HTTP {status}{self._detail(response)}"
                    delay = _retry_after(response.headers.get("Retry-After"))
                elif status in _SYSTEMIC_STATUSES:
                    raise _Refused(f"HTTP {status}{self._detail(response)}")
                elif not 200 <= status < 300:
                    detail = self._detail(response)
                    if not self._answered and b'"image_url"' in payload and _REFUSES_IMAGES.search(detail):
                        raise _NoImages(f"HTTP {status}{detail}")
                    raise _ItemFailed(f"HTTP {status}{detail} (not retried)")
                else:
                    try:
                        data = response.json()
                        result = parse(data)
                    except _NoLogprobs:
                        raise
                    except ValueError as exc:  # not JSON, or no chat completion: a server fault, retried
                        problem = f"unparsable response (HTTP {status}): {exc}: {self._snippet(response.text)!r}"
                    else:
                        return data, result
            if attempt + 1 < attempts:
                wait = self._backoff(attempt) if delay is None else min(delay, self.backoff_max * 5)
                logger.warning("item %s: %s; retry %d of %d in %.1f s", item_id, problem, attempt + 1,
                               attempts - 1, wait)
                self._sleep(wait)
        raise _Unavailable(f"{problem} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})")

    def _snippet(self, text: str) -> str:
        text = " ".join(self._redact(text or "").split())
        return text[:_SNIPPET] + ("..." if len(text) > _SNIPPET else "")

    def _detail(self, response) -> str:
        """': <the server's error message>' (redacted, shortened), or ''."""
        try:
            data = response.json()
            message = data.get("error", {}).get("message") if isinstance(data.get("error"), dict) else data.get("error")
            text = str(message) if message else response.text
        except (ValueError, AttributeError):
            text = response.text
        snippet = self._snippet(text)
        return f": {snippet}" if snippet else ""
