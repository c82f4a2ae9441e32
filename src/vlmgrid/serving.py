"""An inference server that a model's infer job starts for itself: vLLM, SGLang, `transformers serve`, ...

A model entry of the `openai` backend with `serve:` names the command (docs/backends.md). Its infer job starts
the server on the GPUs it locked (the job's CUDA_VISIBLE_DEVICES), waits until GET `ready_path` answers 200,
runs the openai backend against `http://127.0.0.1:<port><api_path>` and stops the server when it is done, has
failed or is killed: the server runs under `vlmgrid.serve_guard`, which stops it once the job's end of a pipe
closes, so no server outlives its job holding a GPU.

The command's words may name {port}, {host}, {model_dir} (the model's fetched weights) and {gpus} (how many
GPUs the job holds, e.g. for --tensor-parallel-size); so may the entry's `model` (the name requests carry).

A command that exits or never becomes ready, or a fixed port that is in use, stops the job with one sentence
(with the server log's last lines). The predictions' provenance records the command and the server's version;
the values of `serve.env` (tokens, keys) are recorded nowhere, only their names (`recorded_settings`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vlmgrid.errors import VlmgridError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
PLACEHOLDERS = ("port", "host", "model_dir", "gpus")
LOG_TAIL_LINES = 15
_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class ServeSpec:
    """A model entry's `serve:` settings, defaults filled (config.schema.yaml, $defs/serve)."""

    command: tuple[str, ...]
    ready_path: str = "/v1/models"
    api_path: str = "/v1"
    port: int | None = None  # None: a free port, chosen when the server starts
    startup_timeout: float = 1800.0
    stop_timeout: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, serve: dict) -> ServeSpec:
        known = {
            name: serve[name]
            for name in ("ready_path", "api_path", "port", "startup_timeout", "stop_timeout")
            if name in serve
        }
        return cls(command=tuple(serve["command"]), env=dict(serve.get("env") or {}), **known)


def fill(template: str, values: Mapping[str, object], where: str) -> str:
    """`template` with its {placeholders} filled; an unknown one is one sentence naming it and the known
    ones."""
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None and name not in values:
            known = ", ".join("{" + placeholder + "}" for placeholder in PLACEHOLDERS)
            raise VlmgridError(
                f'{where} "{template}" names {{{name}}}, which is none of {known}; a literal brace '
                f"is written {{{{ or }}}}"
            )
    return template.format_map(values)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def check_port_free(port: int, model: str) -> None:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            raise VlmgridError(
                f"model {model}: serve.port {port} is in use on this machine (another server?); "
                f"stop what holds it, pick another port, or leave serve.port out to take a free "
                f"one"
            ) from None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"


@dataclass
class Server:
    """A running server: where to reach it, what it runs, and its guard (which stops it)."""

    model: str
    command: list[str]
    values: dict  # what the command's placeholders were filled with
    api_path: str
    log_path: Path
    guard: subprocess.Popen
    server_pid: int
    stop_timeout: float
    gpus: str
    version: str | None = None

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.values['port']}"

    @property
    def base_url(self) -> str:
        return self.root_url + self.api_path

    def provenance(self) -> dict:
        return {
            "command": self.command,
            "version": self.version,
            "base_url": self.base_url,
            "gpus": self.gpus or None,
            "log": str(self.log_path),
        }

    def exited(self) -> int | None:
        return self.guard.poll()

    def stop(self) -> None:
        """Ask the guard to stop the server (close its stdin), wait, and kill both if that takes too long."""
        self.guard.stdin.close()
        try:
            self.guard.wait(timeout=self.stop_timeout + 10)
        except subprocess.TimeoutExpired:
            self.guard.kill()
            self.guard.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.server_pid, signal.SIGKILL)  # anything of the server's group that is still there
        self.guard.stdout.close()
        log.info(f"stopped the server of {self.model}")


def _start(spec: ServeSpec, *, model: str, values: dict, log_path: Path) -> Server:
    command = [fill(word, values, f"model {model}: a word of serve.command") for word in spec.command]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **spec.env}
    with open(log_path, "ab") as server_log:
        server_log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        server_log.flush()
        guard = subprocess.Popen(
            [sys.executable, "-m", "vlmgrid.serve_guard", str(spec.stop_timeout), "--", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=server_log,
            env=env,
            start_new_session=True,  # the job's Ctrl-C or group kill must leave the guard to stop the server
        )
    first = guard.stdout.readline().strip()
    if not first.isdigit():
        guard.wait()
        raise VlmgridError(
            f"model {model}: the serve command could not start ({' '.join(command)}); the last lines "
            f"of its log {log_path}:",
            quoted=log_tail(log_path),
        )
    return Server(
        model=model,
        command=command,
        values=values,
        api_path=spec.api_path,
        log_path=log_path,
        guard=guard,
        server_pid=int(first),
        stop_timeout=spec.stop_timeout,
        gpus=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    )


def _wait_ready(server: Server, spec: ServeSpec) -> None:
    import requests

    url = server.root_url + spec.ready_path
    deadline = time.monotonic() + spec.startup_timeout
    while True:
        code = server.exited()
        if code is not None:
            raise VlmgridError(
                f"model {server.model}: the serve command exited (code {code}) before it answered "
                f"{url}; the last lines of its log {server.log_path}:",
                quoted=log_tail(server.log_path),
            )
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            raise VlmgridError(
                f"model {server.model}: the server did not answer {url} within "
                f"{spec.startup_timeout:g} s (serve.startup_timeout); the last lines of its log "
                f"{server.log_path}:",
                quoted=log_tail(server.log_path),
            )
        time.sleep(_POLL_SECONDS)


def server_version(server: Server) -> str | None:
    """What the server says it is (GET /version, as vLLM and SGLang answer), else the version of the installed
    package whose program the command runs, when it runs from this environment; None when neither tells."""
    import requests

    try:
        answer = requests.get(server.root_url + "/version", timeout=5)
        said = answer.json() if answer.status_code == 200 else None
    except (requests.RequestException, ValueError):
        said = None
    if isinstance(said, dict) and said.get("version"):
        return f"{_program(server.command)} {said['version']}"
    return _installed_version(server.command)


def _program(command: list[str]) -> str:
    if Path(command[0]).name.startswith("python") and len(command) > 2 and command[1] == "-m":
        return command[2].split(".")[0]
    return Path(command[0]).name


def _installed_version(command: list[str]) -> str | None:
    """The distribution and version behind the command, read from this environment's packages, but only when
    the command runs from this environment (another venv's `vllm` may be another version)."""
    from importlib import metadata

    executable = shutil.which(command[0])
    ours = Path(sys.executable).parent
    if executable is None or Path(executable).resolve().parent not in (ours.resolve(), ours):
        return None
    program = _program(command)
    for entry in metadata.entry_points(group="console_scripts", name=program):
        if entry.dist is not None:
            return f"{entry.dist.name} {entry.dist.version}"
    for name in metadata.packages_distributions().get(program, []):
        return f"{name} {metadata.version(name)}"
    return None


@dataclass(frozen=True)
class ServerPlan:
    """The server a served model's job starts: what to run, for which model and weights, on how many GPUs
    (the job's CUDA_VISIBLE_DEVICES says which), and where its output goes."""

    spec: ServeSpec
    model: str
    model_dir: Path
    gpus: int
    log_path: Path

    @contextlib.contextmanager
    def run(self) -> Iterator[Server]:
        """The server, started and ready, for the body of the `with`; stopped after it, whatever happens."""
        spec, model = self.spec, self.model
        port = spec.port
        if port is None:
            port = free_port()
        else:
            check_port_free(port, model)
        values = {"port": port, "host": HOST, "model_dir": str(self.model_dir), "gpus": max(self.gpus, 1)}
        started = time.monotonic()
        server = _start(spec, model=model, values=values, log_path=self.log_path)
        try:
            log.info(
                f"started the server of {model} ({' '.join(server.command)}); waiting for "
                f"{server.root_url + spec.ready_path}; its log: {self.log_path}"
            )
            _wait_ready(server, spec)
            server.version = server_version(server)
            log.info(
                f"the server of {model} is ready after {time.monotonic() - started:.0f} s "
                f"({server.version or 'version unknown'})"
            )
            yield server
        finally:
            server.stop()


def recorded_settings(settings: dict) -> dict:
    """A model's settings as the files it leaves record them (predictions metadata, fingerprints, the
    workflows' params): each `serve.env` variable by its name alone. Its values are the server's tokens and
    keys, which must reach no file that is shared or committed; and a new token is the same model, so it
    reruns nothing."""
    serve = settings.get("serve")
    if not isinstance(serve, dict) or not serve.get("env"):
        return settings
    return {**settings, "serve": {**serve, "env": sorted(serve["env"])}}


def served_settings(settings: dict, server: Server) -> dict:
    """The model's settings as the openai backend takes them: the running server's address, the model name
    filled."""
    return {
        **settings,
        "base_url": server.base_url,
        "model": fill(str(settings["model"]), server.values, f"model {server.model}: model"),
    }
