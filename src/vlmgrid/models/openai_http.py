"""The HTTP side of the `openai` backend: requests `concurrency` at a time, retries, whose fault a failure is,
the circuit breaker and the response cache (see vlmgrid.models.openai_backend for the rules).

What a failed request is, as the exceptions here say it:
- ItemFailed: the server refused this item (a data error); its message becomes the item's error;
- Unavailable: retries exhausted (server or network), an inference error, never a row;
- Refused: a reason no item can change (credentials, endpoint, model name);
- Unreachable: the endpoint refused the connection before the server had answered any request (nothing listens
  there: the server is not running, or base_url is wrong);
- NoImages: the server refused the image of a request before it ever answered one with an image (no vision
  model).
"""

from __future__ import annotations

import email.utils
import hashlib
import ipaddress
import json
import logging
import random
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from vlmgrid.errors import CapabilityMissing, InferenceFailed
from vlmgrid.models.openai_wire import NoLogprobs

log = logging.getLogger(__name__)

_REDACTED = "[redacted]"
_SNIPPET = 200


class ItemFailed(Exception):
    """A request the server refused for this item (a data error); the message (already redacted) becomes the
    item's error."""


class Unavailable(Exception):
    """A request whose retries were exhausted (server or network): an inference error, never a row."""


class Refused(Exception):
    """The server refused the request for a reason no item can change (credentials, endpoint, model name)."""


class Unreachable(Exception):
    """The endpoint refused the connection before the server had answered any request of the job: nothing
    listens at base_url, and no retry can change that (a refusal after an answer is a restart, retried)."""


class NoImages(Exception):
    """The server refused the image of a request before it ever answered a request with an image: it serves
    no vision model (answers to text-only items say nothing of that)."""


#: statuses that say the model entry or the credentials are wrong, not the item
_SYSTEMIC_STATUSES = frozenset({401, 403, 404, 405})
#: client errors that say the server could not take the request now (a request timeout, a conflict, too many
#: requests), not that the item is wrong: retried like a 5xx, as OpenAI's own client retries them
_RETRIED_STATUSES = frozenset({408, 409, 429})
#: what a server says when the model it serves takes no images at all (vLLM: "At most 0 image(s) may be
#: provided", OpenAI: "image_url is only supported by certain models", "... is not a multimodal model"); an
#: image the model cannot take ("image too large") is the item's error
_REFUSES_IMAGES = re.compile(
    r"at most 0 image|not (?:a )?multi-?modal|(?:does not|doesn't|do not|cannot) (?:support|accept|take) "
    r"(?:image|vision)|images? (?:input )?(?:is |are )?not supported|only supported by certain models|"
    r"not a vision",
    re.IGNORECASE,
)


def is_local_url(base_url: str) -> bool:
    """True for a loopback endpoint (a local vLLM/SGLang server), where an API key is optional."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint(base_url: str) -> str:
    """host[:port] of the base URL, without credentials, path or query."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


def _without_credentials(url: str) -> str:
    """The URL without user:password@ (a base_url may carry them)."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def connection_refused(exc: BaseException) -> bool:
    """True when a requests ConnectionError was caused by a refused TCP connection (ECONNREFUSED: nothing
    listens on the port), found along the chain urllib3 wraps it in (MaxRetryError.reason, the causes)."""
    seen: set[int] = set()
    pending: list = [exc]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        pending.extend(
            [getattr(current, "reason", None), current.__cause__, current.__context__, *current.args]
        )
    return False


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


class ApiClient:
    """The request machinery of the `openai` backend (mixed into `OpenAI`, whose settings, base_url,
    cache_scope, key and per-call state it uses)."""

    #: first backoff delay in seconds (doubled per retry, jittered to 50-100%, capped at backoff_max)
    backoff_base: float = 1.0
    backoff_max: float = 60.0

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
            except Unavailable as exc:
                unavailable[request.id] = str(exc)
                return None
            except Refused as exc:
                self._halt(
                    InferenceFailed(
                        f"{endpoint(self.base_url)} refused model {self.settings['model']} ({exc}); check "
                        "the model entry's base_url, model and api_key_env",
                        {request.id: str(exc)},
                        stop=True,
                    )
                )
                return None
            except Unreachable as exc:
                self._halt(
                    InferenceFailed(
                        f"connection refused at {exc} before any request to model {self.settings['model']} "
                        "was answered; check that the server is running and listening there, and the model "
                        "entry's base_url",
                        {request.id: f"connection refused at {exc}"},
                        stop=True,
                    )
                )
                return None
            except NoImages as exc:
                self._halt(
                    CapabilityMissing(
                        f"{endpoint(self.base_url)} refused the image of the first request with one to model "
                        f"{self.settings['model']} ({exc}): it serves a model without image input; serve a "
                        "vision model, or point the entry at one",
                        "images",
                    )
                )
                return None
            except NoLogprobs:
                self._halt(
                    CapabilityMissing(
                        f"{endpoint(self.base_url)} returned no logprobs for model "
                        f"{self.settings['model']}, whose entry sets `logprobs: true`; set "
                        "`logprobs: false` or `answer_mode: generate` in the entry, or "
                        "`answer_mode: auto` to answer by generation where the server has no logprobs",
                        "score_options",
                    )
                )
                return None
            return result

        workers = min(int(self.settings["concurrency"]), len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vlmgrid-openai") as pool:
            results = list(pool.map(guarded, requests))
        if self._stop is not None:
            self._stop.failures.update(unavailable)
            raise self._stop
        if unavailable:
            raise InferenceFailed(
                f"{len(unavailable)} of {len(requests)} requests to {endpoint(self.base_url)} failed",
                unavailable,
            )
        return results

    def _count(self, *, failed: bool, cause: str | None = None) -> None:
        """The circuit breaker: `circuit_breaker` requests in a row that the server refused or never answered
        end the job (a cache hit, or an answer without a letter, neither breaks nor counts)."""
        with self._lock:
            self._failed_in_row = self._failed_in_row + 1 if failed else 0
            tripped = failed and self._failed_in_row >= int(self.settings["circuit_breaker"])
            count = self._failed_in_row
        if tripped:
            self._halt(
                InferenceFailed(
                    f"the last {count} requests to {endpoint(self.base_url)} (model "
                    f"{self.settings['model']}) all failed, the last one: {cause}; check that the server is "
                    "up and serves this model",
                    stop=True,
                )
            )

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

        digest = hashlib.sha256(self.cache_scope.encode("utf-8") + b"\n" + payload).hexdigest()
        return cache_root() / "openai" / digest[:2] / f"{digest}.json"

    def _read_cache(self, path: Path, parse):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return parse(data["response"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("ignoring the unreadable cache entry %s", path)
            return None

    def _write_cache(self, path: Path, response: dict) -> None:
        from vlmgrid.fileio import write_json

        try:
            write_json(
                path, {"base_url": self.base_url, "model": self.settings["model"], "response": response}
            )
        except OSError as exc:
            log.warning("could not write the cache entry %s: %s", path, exc)

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_max, self.backoff_base * 2**attempt) * random.uniform(0.5, 1.0)

    def _complete(self, item_id: str, body: dict, parse):
        """POST one chat completion (or read it from the cache) and return parse(response).

        Raises ItemFailed (the server refused this item), Unavailable (retries exhausted), Refused (the
        entry or credentials are wrong) or NoLogprobs (a scoring response without logprobs).
        """
        payload = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        path = self.cache_path(payload) if self.settings["cache"] else None
        if path is not None:
            cached = self._read_cache(path, parse)
            if cached is not None:
                self._answered(payload)
                return cached
        try:
            data, result = self._post(item_id, payload, parse)
        except (ItemFailed, Unavailable) as exc:
            self._count(failed=True, cause=str(exc))
            raise
        self._count(failed=False)
        self._answered(payload)
        if path is not None and result not in ("", None):
            self._write_cache(path, data)
        return result

    def _answered(self, payload: bytes) -> None:
        """Note that the server answered this request: one with an image shows it takes images."""
        if b'"image_url"' in payload:
            self._took_image = True

    def _post(self, item_id: str, payload: bytes, parse):
        """(response, parse(response)) of one POST, retried as vlmgrid.models.openai_backend says."""
        import requests

        url = f"{self.base_url}/chat/completions"
        timeout = float(self.settings["timeout"])
        attempts = int(self.settings["max_retries"]) + 1
        problem = ""
        for attempt in range(attempts):
            if self._stop is not None:
                raise Unavailable(f"not sent: {self._stop}")
            delay = None
            try:
                response = self._session().post(url, data=payload, timeout=timeout)
            except requests.Timeout:
                problem = f"timed out after {timeout:g} s"
            except requests.ConnectionError as exc:
                if not self._reached and connection_refused(exc):
                    raise Unreachable(_without_credentials(url)) from None
                problem = f"connection error ({type(exc).__name__})"
            else:
                self._reached = True
                status = response.status_code
                if status in _RETRIED_STATUSES or status >= 500:
                    problem = f"HTTP {status}{self._detail(response)}"
                    delay = _retry_after(response.headers.get("Retry-After"))
                elif status in _SYSTEMIC_STATUSES:
                    raise Refused(f"HTTP {status}{self._detail(response)}")
                elif not 200 <= status < 300:
                    detail = self._detail(response)
                    if not self._took_image and b'"image_url"' in payload and _REFUSES_IMAGES.search(detail):
                        raise NoImages(f"HTTP {status}{detail}")
                    raise ItemFailed(f"HTTP {status}{detail} (not retried)")
                else:
                    try:
                        data = response.json()
                        result = parse(data)
                    except NoLogprobs:
                        raise
                    except ValueError as exc:  # not JSON, or no chat completion: a server fault, retried
                        problem = (
                            f"unparsable response (HTTP {status}): {exc}: {self._snippet(response.text)!r}"
                        )
                    else:
                        return data, result
            if attempt + 1 < attempts:
                wait = self._backoff(attempt) if delay is None else min(delay, self.backoff_max * 5)
                log.warning(
                    "item %s: %s; retry %d of %d in %.1f s", item_id, problem, attempt + 1, attempts - 1, wait
                )
                self._sleep(wait)
        raise Unavailable(f"{problem} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})")

    def _snippet(self, text: str) -> str:
        text = " ".join(self._redact(text or "").split())
        return text[:_SNIPPET] + ("..." if len(text) > _SNIPPET else "")

    def _detail(self, response) -> str:
        """': <the server's error message>' (redacted, shortened), or ''."""
        try:
            data = response.json()
            message = (
                data.get("error", {}).get("message")
                if isinstance(data.get("error"), dict)
                else data.get("error")
            )
            text = str(message) if message else response.text
        except (ValueError, AttributeError):
            text = response.text
        snippet = self._snippet(text)
        return f": {snippet}" if snippet else ""
