"""Kill `vlmgrid infer` with SIGKILL at chosen points and measure what each kill costs.

Run as a script, this file is `vlmgrid` itself with a trace: every part started, computed and saved, every
model batch, and the final write are appended as JSON lines to the file named by VLMGRID_TRACE. Three more
variables slow the job down: VLMGRID_TRACE_PART_DELAY (seconds added to each part's computation, as a model
would take), VLMGRID_TRACE_BATCH_DELAY (the same for each batch of the hf backend) and
VLMGRID_TRACE_FINAL_DELAY (seconds the final write stops halfway, its temporary file half written). Two aim
the kills: with VLMGRID_TRACE_PARK_PART=k the job stops itself (SIGSTOP, after tracing "parked") inside the
k-th part it computes, VLMGRID_TRACE_PARK_AFTER seconds into it or when its rows are ready, whichever comes
first, never after the part is saved. The killer then waits for "parked", so where a kill lands does not
depend on how loaded the machine is.

Imported, it prepares a small grid in a folder (`make_workspace`), runs a job uninterrupted or killed again
and again (`run_killed`), and says what each kill lost (`kill_costs`): the items of the part being computed,
the model batches already done for it, and the seconds spent on it. perf/kill_cost.py prints these.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

TRACE_ENV = "VLMGRID_TRACE"
PART_DELAY_ENV = "VLMGRID_TRACE_PART_DELAY"
FINAL_DELAY_ENV = "VLMGRID_TRACE_FINAL_DELAY"
BATCH_DELAY_ENV = "VLMGRID_TRACE_BATCH_DELAY"
PARK_PART_ENV = "VLMGRID_TRACE_PARK_PART"
PARK_AFTER_ENV = "VLMGRID_TRACE_PARK_AFTER"
REPO = Path(__file__).resolve().parents[2]


# --- the traced job (runs in the child process) ---------------------------------------------------------


def _trace(event: str, **fields) -> None:
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "event": event, **fields}) + "\n"
    # One write per line on an O_APPEND file: lines of a killed process are whole or absent.
    fd = os.open(os.environ[TRACE_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class _Parking:
    """Stops this process inside one chosen part: at a timer set when the part starts, or when its rows are
    ready if that comes first; once only."""

    def __init__(self, part: int, after: float):
        self.part, self.after = part, after
        self.computed = 0
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.parked = False

    def part_started(self) -> None:
        self.computed += 1
        if self.computed == self.part:
            self.timer = threading.Timer(self.after, self.park)
            self.timer.daemon = True
            self.timer.start()

    def part_ready(self) -> None:
        if self.computed == self.part:
            self.timer.cancel()
            self.park()

    def park(self) -> None:
        with self.lock:
            if self.parked:
                return
            self.parked = True
        _trace("parked")
        os.kill(os.getpid(), signal.SIGSTOP)


def _install_trace() -> None:
    import pyarrow.parquet as pq

    import vlmgrid.protocols
    from vlmgrid.cellrun import parts

    part_delay = float(os.environ.get(PART_DELAY_ENV, "0"))
    final_delay = float(os.environ.get(FINAL_DELAY_ENV, "0"))
    batch_delay = float(os.environ.get(BATCH_DELAY_ENV, "0"))
    park_part = int(os.environ.get(PARK_PART_ENV, "0"))
    parking = _Parking(park_part, float(os.environ.get(PARK_AFTER_ENV, "0"))) if park_part else None

    make_runner = vlmgrid.protocols.make_runner

    def traced_make_runner(protocol, model, bench):
        runner, strategy = make_runner(protocol, model, bench)

        def traced(chunk):
            _trace("compute", items=len(chunk), first=str(chunk["id"].iloc[0]))
            if parking:
                parking.part_started()
            rows = runner(chunk)
            time.sleep(part_delay)
            if parking:
                parking.part_ready()
            _trace("computed", items=len(chunk))
            return rows

        _trace("ready")
        return traced, strategy

    vlmgrid.protocols.make_runner = traced_make_runner

    save = parts.PartStore.save

    def traced_save(self, index, table, made_by):
        save(self, index, table, made_by)
        _trace("saved", index=index, items=len(set(table.column("id").to_pylist())))

    parts.PartStore.save = traced_save

    write_table = pq.write_table

    def traced_write_table(table, where, *args, **kwargs):
        # Any parquet file but a part: the final predictions file, whichever way infer writes it.
        if not final_delay or "part-" in Path(where).name:
            return write_table(table, where, *args, **kwargs)
        write_table(table, where, *args, **kwargs)
        data = Path(where).read_bytes()
        Path(where).write_bytes(data[: len(data) // 2])
        _trace("final-write", path=str(where))
        time.sleep(final_delay)
        write_table(table, where, *args, **kwargs)

    pq.write_table = traced_write_table

    try:
        from vlmgrid.models import hf_backend
    except ImportError:
        return
    batched = hf_backend.Hf._batched

    def traced_batched(self, items, run):
        def traced_run(chunk):
            out = run(chunk)
            time.sleep(batch_delay)
            _trace("batch", size=len(chunk))
            return out

        return batched(self, items, traced_run)

    hf_backend.Hf._batched = traced_batched


def main(argv: list[str]) -> int:
    _trace("start")
    _install_trace()
    from vlmgrid.cli import main as vlmgrid_main

    return vlmgrid_main(argv)


# --- driving jobs (runs in the test) --------------------------------------------------------------------


@dataclass
class Workspace:
    """A small grid in a folder of its own: one benchmark, one model, prepared and fetched."""

    root: Path
    config_path: Path
    model: str
    bench: str
    part_size: int
    runs: int = 0

    @property
    def config(self):
        from vlmgrid.config import load_config

        return load_config(self.config_path)

    @property
    def out_path(self) -> Path:
        from vlmgrid import paths

        return paths.predictions_path(self.config.results_dir, self.model, self.bench)

    @property
    def partial_dir(self) -> Path:
        from vlmgrid import paths

        return paths.partial_dir(self.config.results_dir, self.model, self.bench)

    @property
    def trace_path(self) -> Path:
        return self.root / "trace.jsonl"

    def parts(self) -> int:
        return len(list(self.partial_dir.glob("part-*.parquet")))

    def job(self):
        """The job `vlmgrid infer` runs here, with its parts (at most `part_size` model requests each)."""
        from vlmgrid import paths
        from vlmgrid.stages.infer import open_job

        config = self.config
        return open_job(
            model_settings=config.model(self.model),
            bench_dir=paths.bench_dir(config.data_dir, self.bench),
            part_size=self.part_size,
            prompts_dir=config.prompts_dir,
        )


def make_workspace(
    root: Path,
    config_data: dict,
    *,
    model: str,
    bench: str,
    part_size: int,
    size: int | None = None,
    model_settings: dict | None = None,
) -> Workspace:
    """Prepare `bench` and fetch `model` under root, with the prompts copied there so no edit elsewhere moves
    the job's identity between runs."""
    from vlmgrid import paths
    from vlmgrid.config import validate_config
    from vlmgrid.stages.fetch import fetch_model
    from vlmgrid.stages.prepare import prepare_benchmark

    root.mkdir(parents=True, exist_ok=True)
    data = copy.deepcopy(config_data)
    data["data_dir"] = str(root / "data")
    data["results_dir"] = str(root / "results")
    prompts = root / "prompts"
    shutil.copytree(REPO / "config" / "prompts", prompts, dirs_exist_ok=True)
    data["prompts_dir"] = str(prompts)
    data["infer"] = {"part_size": part_size, "threads": 1}
    if size is not None:
        data["benchmarks"][bench]["source"]["size"] = size
    data["models"][model].update(model_settings or {})
    data["grid"] = {"models": [model], "benchmarks": [bench]}
    config = validate_config(data)
    prepare_benchmark(bench, config.benchmark(bench), paths.bench_dir(config.data_dir, bench))
    fetch_model(model, config.model(model), paths.model_dir(config.data_dir, model))
    config_path = root / "config.yaml"
    config_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Workspace(root, config_path, model, bench, part_size)


def start(
    ws: Workspace,
    part_delay: float = 0.0,
    batch_delay: float = 0.0,
    final_delay: float = 0.0,
    park_part: int = 0,
    park_after: float = 0.0,
) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(
        {
            TRACE_ENV: str(ws.trace_path),
            PART_DELAY_ENV: str(part_delay),
            BATCH_DELAY_ENV: str(batch_delay),
            FINAL_DELAY_ENV: str(final_delay),
            PARK_PART_ENV: str(park_part),
            PARK_AFTER_ENV: str(park_after),
            "VLMGRID_GPU_COUNT": "0",
        }
    )
    ws.runs += 1
    log = open(ws.root / f"run-{ws.runs}.log", "w")
    command = [
        sys.executable,
        __file__,
        "infer",
        ws.model,
        ws.bench,
        "--config",
        str(ws.config_path),
        "--no-progress",
        "--threads",
        "1",
    ]
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ws.root)


def log_text(ws: Workspace, run: int) -> str:
    return (ws.root / f"run-{run}.log").read_text()


def finish(ws: Workspace, process: subprocess.Popen, timeout: float = 300) -> None:
    if process.wait(timeout=timeout) != 0:
        raise AssertionError(f"vlmgrid infer failed:\n{log_text(ws, ws.runs)}")


def _wait_for(condition, process: subprocess.Popen, timeout: float) -> bool:
    """Poll until condition() holds; False when the process ended first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise AssertionError("the job made no progress in time")
        time.sleep(0.002)
    return True


@dataclass
class Kill:
    run: int
    pid: int
    at: float
    parts_at_kill: int
    log: str = field(repr=False, default="")


def run_killed(
    ws: Workspace,
    kills: int,
    seed: int,
    part_seconds: float,
    part_delay: float = 0.0,
    batch_delay: float = 0.0,
    timeout: float = 300,
) -> list[Kill]:
    """Start the job, and SIGKILL it `kills` times: each time inside the part that follows a seeded random
    number (1 to 3) of new parts, a seeded random fraction of `part_seconds` (about a part's time) into it.
    Then let it finish."""
    rng = random.Random(seed)
    n_parts = ws.job().n_parts
    done: list[Kill] = []
    for _ in range(kills):
        new_parts = min(rng.randint(1, 3), n_parts - 1 - ws.parts())  # a part left to be cut short
        if new_parts < 1:
            raise AssertionError(f"{kills} kills need more than the {n_parts} parts of {ws.bench}")
        pause = rng.uniform(0.0, 1.0) * part_seconds
        process = start(
            ws, part_delay=part_delay, batch_delay=batch_delay, park_part=new_parts + 1, park_after=pause
        )

        def parked(process=process):
            return [e for e in trace(ws) if e["event"] == "parked" and e["pid"] == process.pid]

        if not _wait_for(parked, process, timeout):
            raise AssertionError(f"the job ended before it was killed:\n{log_text(ws, ws.runs)}")
        process.send_signal(signal.SIGKILL)
        if process.wait() != -signal.SIGKILL:
            raise AssertionError(f"the job ended before it was killed:\n{log_text(ws, ws.runs)}")
        done.append(Kill(ws.runs, process.pid, parked()[0]["t"], ws.parts(), log_text(ws, ws.runs)))
    finish(ws, start(ws, part_delay=part_delay, batch_delay=batch_delay), timeout)
    return done


def kill_in_final_write(ws: Workspace, timeout: float = 300) -> Path:
    """Start the job and SIGKILL it while its final file is half written; returns the temporary file left."""
    process = start(ws, final_delay=30.0)
    writes = lambda: [e for e in trace(ws) if e["event"] == "final-write" and e["pid"] == process.pid]  # noqa: E731
    if not _wait_for(writes, process, timeout):
        raise AssertionError(
            f"the job ended without writing its predictions as parquet:\n{log_text(ws, ws.runs)}"
        )
    process.send_signal(signal.SIGKILL)
    process.wait()
    return Path(writes()[0]["path"])


def trace(ws: Workspace) -> list[dict]:
    if not ws.trace_path.is_file():
        return []
    return [json.loads(line) for line in ws.trace_path.read_text().splitlines() if line.endswith("}")]


@dataclass
class Cost:
    """What one kill lost: the part in computation when it came (resume starts it again), the model batches
    already done for it (computed, never saved), and the time spent on it."""

    run: int
    items_saved: int  # items in the parts this run saved before the kill
    part_items: int  # items of the part cut short
    batches_done: int  # its batches already done (hf backend only)
    items_done: int  # the items in those batches: computed, not saved, computed again after the restart
    seconds_lost: float  # time spent on the part cut short
    restart_seconds: float  # start-up and model load before the next run computes again


def kill_costs(ws: Workspace, kills: list[Kill]) -> list[Cost]:
    events = trace(ws)
    costs = []
    for kill in kills:
        mine = [e for e in events if e["pid"] == kill.pid and e["t"] <= kill.at]
        saved = [e for e in mine if e["event"] == "saved"]
        last_save = max([e["t"] for e in saved] + [next(e["t"] for e in mine if e["event"] == "ready")])
        started = [e for e in mine if e["t"] >= last_save and e["event"] == "compute"]
        since = [e for e in mine if started and e["t"] >= started[-1]["t"]]
        batches = [e["size"] for e in since if e["event"] == "batch"]
        seconds = kill.at - started[-1]["t"] if started else 0.0
        later = [e for e in events if e["t"] > kill.at and e["event"] in ("start", "ready")]
        ready = [e for e in later[1:2] if e["event"] == "ready" and e["pid"] == later[0]["pid"]]
        restart = ready[0]["t"] - later[0]["t"] if ready else 0.0
        costs.append(
            Cost(
                kill.run,
                sum(e["items"] for e in saved),
                started[-1]["items"] if started else 0,
                len(batches),
                sum(batches),
                seconds,
                restart,
            )
        )
    return costs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
