"""The plan: what the grid is before anything runs.

Its cells (model x benchmark, from the config), which of them a model cannot run and why (not applicable:
the cell stays in the grid, its files say so and the report shows "n/a"), how many GPUs a model's jobs hold,
each cell's plan as its run takes it (`cell_plan`: all of these decided once, and handed to inference),
whether it would prepare a benchmark over another grid's data, and the listings behind `vlmgrid check-config`,
`cells`, `benchmarks` and `models`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from vlmgrid import paths
from vlmgrid.config import Config
from vlmgrid.escaping import terminal_text
from vlmgrid.report.labels import counted

if TYPE_CHECKING:
    from vlmgrid.cellrun.cell import CellPlan


def not_applicable(config: Config, model: str, benchmark: str) -> str | None:
    """Why the model cannot run the benchmark, in one sentence; None when it can.

    Such a cell stays in the grid (every workflow runs every pair): inference records it as not
    applicable and the report shows "n/a".
    """
    return not_applicable_reason(model, config.model(model), benchmark, config.benchmark(benchmark))


def not_applicable_reason(
    model: str, model_settings: dict, benchmark: str, benchmark_settings: dict
) -> str | None:
    """Why a model with these settings cannot run the benchmark (no capability its protocol uses); None if it
    can."""
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.models import BACKENDS
    from vlmgrid.protocols import PROTOCOLS, strategy_for

    protocol = BENCHMARKS.get(benchmark_settings["kind"]).protocol
    backend = model_settings["backend"]
    capabilities = sorted(BACKENDS.get(backend).capabilities_for(model_settings))
    if strategy_for(protocol, capabilities) is not None:
        return None
    needs = " or ".join(PROTOCOLS.get(protocol).strategies)
    have = f"capabilit{'y' if len(capabilities) == 1 else 'ies'} {', '.join(capabilities) or 'none'}"
    return (
        f'model "{model}" ({backend} backend, {have}) cannot run benchmark "{benchmark}" '
        f"({protocol} protocol needs {needs})"
    )


def cell_plan(
    config: Config, model: str, benchmark: str, *, shard: str | None = None, threads: int | None = None
) -> CellPlan:
    """Everything decided about a cell before it runs (vlmgrid.cellrun.cell.CellPlan), in one place: whether
    the model can run the benchmark (`not_applicable`), how many GPUs its job holds, where its weights are
    read (a checkpoint read in place is loaded where it lies, and its files' fingerprint named), its server,
    and the job's settings from the config. `shard` is "I/N" (`vlmgrid infer --shard`); `threads` overrides
    `infer.threads`. A cell that cannot run gets no GPUs, weights or server: its run only records why."""
    from vlmgrid.cellrun.cell import Cell, CellPlan, Shard
    from vlmgrid.serving import ServerPlan, ServeSpec
    from vlmgrid.stages.fetch import in_place_weights

    benchmark_settings = config.benchmark(benchmark)  # a clear error for an unknown name before any work
    settings = config.cell_settings(model, benchmark)  # the model's settings for this benchmark's kind
    # Without a shard the cell runs whole whatever its benchmark's `shards` says: sharding is the workflow's
    # choice of jobs (a plain `vlmgrid infer` runs the cell whole), and the file is the same either way.
    cell = Cell.in_results(
        config.results_dir, model, benchmark, Shard.parse(shard) if shard is not None else None
    )
    reason = not_applicable_reason(model, settings, benchmark, benchmark_settings)
    held = gpus(config, model) if reason is None else 0
    own_dir = paths.model_dir(config.data_dir, model)
    checkpoint = in_place_weights(model, settings, own_dir) if reason is None else None
    model_dir = checkpoint.location if checkpoint is not None else own_dir
    server = None
    if reason is None and "serve" in settings:
        shard_of = (cell.shard.index, cell.shard.count) if cell.shard is not None else None
        server = ServerPlan(
            ServeSpec.of(settings["serve"]),
            model=model,
            model_dir=model_dir,
            gpus=held,
            log_path=paths.serve_log_path(config.results_dir, model, benchmark, shard_of),
        )
    return CellPlan(
        cell=cell,
        model_settings=settings,
        not_applicable=reason,
        gpus=held,
        bench_dir=paths.bench_dir(config.data_dir, benchmark),
        model_dir=model_dir,
        checkpoint=checkpoint,
        server=server,
        part_size=int(config.infer["part_size"]),
        check_items=int(config.infer["invariance_items"]),
        threads=int(threads or config.infer["threads"]),
        prompts_dir=config.prompts_dir,
    )


def runnable(protocol_name: str, model_settings: dict) -> bool:
    """Whether a model with these settings has a capability that the protocol can use."""
    from vlmgrid.models import BACKENDS
    from vlmgrid.protocols import strategy_for

    backend = BACKENDS.get(model_settings["backend"])
    return strategy_for(protocol_name, backend.capabilities_for(model_settings)) is not None


def gpus(config: Config, model: str) -> int:
    """How many GPUs each of the model's inference jobs holds: its `gpus` (1 unless it says more) for a model
    that runs on a GPU, or whose jobs start a server (`serve`) for it; 0 for one that runs on the CPU."""
    from vlmgrid.models import BACKENDS

    settings = config.model(model)
    if settings.get("device") == "cpu":
        return 0
    if not (BACKENDS.get(settings["backend"]).uses_gpu or "serve" in settings):
        return 0
    return int(settings.get("gpus", 1))


def gpu_problems(config: Config, visible: list[str], limit: int | None = None) -> list[str]:
    """Why some of the grid's inference jobs could never start here, one sentence per model: more GPUs than
    the machine shows (`visible`), or than the run lets all jobs hold at once (Snakemake's
    `--resources gpu=<limit>`). Such a job would wait forever; the workflow refuses it before anything
    runs."""
    from vlmgrid.gpu import shortfall

    problems = []
    for model in config.models:
        needed = gpus(config, model)
        problem = shortfall(needed, visible)
        if problem is not None:
            problems.append(
                f'model "{model}" cannot run here: {problem}; give it fewer gpus in {config.path}, '
                f"or run the grid on a machine with {needed} GPUs"
            )
        elif limit is not None and needed > limit:
            problems.append(
                f'model "{model}" cannot run: it needs {needed} GPUs at once, but --resources '
                f"gpu={limit} lets all running jobs hold only {limit}, so it would never start; "
                f"allow --resources gpu={needed} or more, or give it fewer gpus in {config.path}"
            )
    return problems


def grid_config_name(config: Config) -> str | None:
    """The name a prepared benchmark folder records of the grid config it was prepared for: its path from the
    working folder (the repo root, where Snakemake and DVC run every job), so that both workflows name it
    alike; None for a config that is no file (made in code)."""
    path = Path(config.path)
    if not path.is_file():
        return None
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def another_grids_data(name: str, settings: dict, bench_dir: Path, grid_config: str) -> str | None:
    """Why preparing the benchmark for the grid config `grid_config` would overwrite the data another grid
    config prepared into bench_dir (the two share a data_dir and the benchmark's name, not its source), in one
    sentence; None when it would not. Switching between such grids would prepare, and rerun every cell, on
    every switch."""
    try:  # the manifest (vlmgrid.benchmarks.folder.MANIFEST), read without the benchmarks package's imports
        old = json.loads((Path(bench_dir) / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None  # nothing prepared there (or no manifest to read): prepare says what to do
    prepared_for = old.get("grid_config") if isinstance(old, dict) else None
    if prepared_for in (None, grid_config):
        return (
            None  # this grid's data (or data from before grids were recorded): changed settings prepare again
        )
    # the benchmark kinds' modules, slow to import: only a folder another grid prepared needs them
    from vlmgrid.benchmarks.sources import data_settings

    held, given = old.get("source"), settings.get("source")
    held = data_settings(held) if isinstance(held, dict) else held
    given = data_settings(json.loads(json.dumps(given))) if isinstance(given, dict) else given
    if old.get("kind") == settings.get("kind") and held == given:
        return None  # the same data: the grids share it
    return (
        f"benchmark {name}: {bench_dir} holds the data {prepared_for} prepared for it ({old.get('kind')} "
        f"from {json.dumps(held)}), and {grid_config} gives it another source ({settings.get('kind')} from "
        f"{json.dumps(given)}), which would overwrite it; give {grid_config} a data_dir of its own "
        f"(data_dir: data/{Path(grid_config).stem})"
    )


def data_conflict(config: Config) -> str | None:
    """The first benchmark of the grid that it would prepare over another grid's data (another_grids_data)."""
    name = grid_config_name(config)
    for benchmark in config.benchmarks if name is not None else []:
        conflict = another_grids_data(
            benchmark, config.benchmark(benchmark), paths.bench_dir(config.data_dir, benchmark), name
        )
        if conflict is not None:
            return conflict
    return None


def summary(config: Config) -> str:
    """`vlmgrid check-config`: the config is valid, and the grid's size. Paths are the texts of the listings
    that are no name the schema allows (letters, digits, ".", "_", "-"): they are printed escaped."""
    n_na = sum(not_applicable(config, cell.model, cell.benchmark) is not None for cell in config.cells)
    return (
        f"{terminal_text(str(config.path))}: valid; {counted(len(config.models), 'model')} x "
        f"{counted(len(config.benchmarks), 'benchmark')} = {counted(len(config.cells), 'cell')}"
        + (f" ({n_na} not applicable)" if n_na else "")
    )


def cell_lines(config: Config, as_paths: bool = False) -> list[str]:
    """`vlmgrid cells`: one line per cell, its names (and why it is not applicable), or its predictions
    path."""
    lines = []
    for cell in config.cells:
        if as_paths:
            # A not-applicable cell has its files too (they say so), so it is listed like any other.
            lines.append(
                terminal_text(str(paths.predictions_path(config.results_dir, cell.model, cell.benchmark)))
            )
            continue
        reason = not_applicable(config, cell.model, cell.benchmark)
        lines.append(f"{cell.model}\t{cell.benchmark}" + (f"\tn/a: {reason}" if reason else ""))
    return lines


def benchmark_lines(config: Config | None) -> list[str]:
    """`vlmgrid benchmarks`: the benchmark kinds, and the config's benchmarks when there is a config."""
    from vlmgrid.benchmarks import BENCHMARKS

    lines = ["benchmark kinds:"]
    lines += aligned(
        [(name, kind.protocol, kind.metric, kind.description) for name, kind in BENCHMARKS.items()]
    )
    if config is not None:
        lines.append(f"benchmarks in {terminal_text(str(config.path))}:")
        lines += aligned(
            [
                (
                    name,
                    f"kind={config.benchmark(name)['kind']}",
                    f"source={config.benchmark(name)['source']['type']}",
                )
                for name in config.benchmarks
            ]
        )
    return lines


def model_lines(config: Config | None) -> list[str]:
    """`vlmgrid models`: the model backends, and the config's models when there is a config."""
    from vlmgrid.models import BACKENDS

    lines = ["model backends:"]
    lines += aligned(
        [
            (
                name,
                f"capabilities: {', '.join(sorted(backend.capabilities))}"
                f"{'; uses a GPU when there is one' if backend.uses_gpu else ''}",
            )
            for name, backend in BACKENDS.items()
        ]
    )
    if config is not None:
        lines.append(f"models in {terminal_text(str(config.path))}:")
        rows = []
        for name in config.models:
            entry = config.model(name)
            source = (f"source={entry['source']['type']}",) if entry.get("source") else ()
            rows.append((name, f"backend={entry['backend']}", *source))
        lines += aligned(rows)
    return lines


def aligned(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    """The rows as lines of columns, each column as wide as its longest text (the last one unpadded), so a
    long name never pushes its row's columns out of line."""
    widths = [
        max((len(row[i]) for row in rows if len(row) > i), default=0)
        for i in range(max((len(row) for row in rows), default=0))
    ]
    return [indent + "  ".join(text.ljust(widths[i]) for i, text in enumerate(row)).rstrip() for row in rows]
