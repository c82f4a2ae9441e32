"""A real, scriptable OpenAI-compatible chat-completions server on 127.0.0.1 for the openai backend's tests.

By default every POST to /v1/chat/completions answers 200 with `reply(body)` as the message content (and,
when the body asks for logprobs, `top_logprobs` as the first token's alternatives). `script` is a queue of
one-off behaviours consumed one per request before the default applies:
  Reply(status, body, headers) - a canned HTTP response (e.g. 429 with Retry-After: 0, 500, garbage);
  Sleep(seconds)               - sleep, then answer normally (forces a client timeout);
  EchoAuth(status)             - an error whose body quotes the request's Authorization header;
  Outage(seconds)              - the server goes down for that long: this request and every request until then
                                 get their connection closed without an answer, as from a killed server.
It records every request (path, headers, parsed body) and the largest number of requests in flight at once.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int
    body: bytes | str = b""
    headers: dict = field(default_factory=dict)


@dataclass
class Sleep:
    seconds: float


@dataclass
class EchoAuth:
    status: int = 401


@dataclass
class Outage:
    seconds: float


@dataclass
class Recorded:
    path: str
    headers: dict
    body: dict | None


def closed_port() -> int:
    """A local port nothing listens on: bound, noted and closed again, so a connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def default_reply(body: dict) -> str:
    """'echo: <the text part of the last user message>'."""
    content = body["messages"][-1]["content"]
    text = next(part["text"] for part in content if part["type"] == "text")
    return f"echo: {text}"


def completion(content: str, top_logprobs: list[tuple[str, float]] | None = None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    if top_logprobs is not None:
        first = top_logprobs[0] if top_logprobs else (content, 0.0)
        choice["logprobs"] = {
            "content": [
                {
                    "token": first[0],
                    "logprob": first[1],
                    "top_logprobs": [{"token": token, "logprob": logprob} for token, logprob in top_logprobs],
                }
            ]
        }
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "fake",
        "choices": [choice],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.script: deque = deque()
        self.reply = default_reply
        self.delay = 0.0  # seconds every default answer waits (to overlap requests)
        self.delay_of = None  # optional body -> seconds, overrides delay
        self.top_logprobs: list[tuple[str, float]] = [("A", -0.5), ("B", -1.5)]
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.down_until = 0.0  # time.monotonic() until which connections are dropped (an outage)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        return len(self.requests)

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self):
        with self._lock:
            return self.script.popleft() if self.script else None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: bytes | str, headers: dict | None = None) -> None:
                data = body.encode("utf-8") if isinstance(body, str) else body
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, str(value))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append(Recorded(self.path, dict(self.headers), body))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, body) -> None:
                if time.monotonic() < server.down_until:
                    self.close_connection = True  # no answer: the client sees the connection drop
                    return
                if self.path != "/v1/chat/completions" or body is None:
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                    return
                step = server._next()
                if isinstance(step, Reply):
                    self._send(step.status, step.body, step.headers)
                    return
                if isinstance(step, Outage):
                    server.down_until = time.monotonic() + step.seconds
                    self.close_connection = True
                    return
                if isinstance(step, EchoAuth):
                    auth = self.headers.get("Authorization", "")
                    self._send(step.status, json.dumps({"error": {"message": f"bad credentials: {auth}"}}))
                    return
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                delay = server.delay_of(body) if server.delay_of else server.delay
                if delay:
                    time.sleep(delay)
                top = server.top_logprobs if body.get("logprobs") else None
                self._send(200, json.dumps(completion(server.reply(body), top)))

        return Handler
