"""The cost plan (`vlmgrid plan`): what a grid will cost, before it runs.

Per cell (model x benchmark): its items, the model requests its protocol sends, and the GPU-hours they take
at the throughput table's rates (stages/data/throughput.yaml, docs/formats.md); then the totals per model
and for the grid.

The counts (a benchmark's items, the units of work a model's protocol sends) are vlmgrid.stages.cost_work's;
the plan as `vlmgrid plan` prints it is vlmgrid.stages.cost_text's.

GPU-hours are requests / rate / 3600 per GPU a job holds (the model's `gpus`). A model behind an API
(`openai` without `serve`), or one that runs on the CPU, holds no GPU: its GPU-hours are 0. An API model's
cost is its requests' tokens at the `price` its entry gives (USD per million input and output tokens): the
input tokens per request are the price's `input_tokens`, else the throughput table's `api.input_tokens`; the
output tokens are a generated answer's assumed length, or one for a letter scored by its logprobs. Without a
`price` its cost is unknown. A model whose job serves it on its GPUs (`serve`) is timed at the hf backend's
rates, an upper bound. A model whose size class the table lacks gets no estimate ("unknown"), never a guess.

Per benchmark, what it can tell: the minimum detectable difference (MDD) of a paired comparison of two models
on its scoring units (items, or the groups its metric scores whole: MMVP's pairs, MME's images, MMBench's
circular groups), from their number alone and an assumed discordance (ASSUMED_DISCORDANCE of the units, one
model right and the other wrong): two models closer than it are not told apart, whatever they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from importlib import resources

import pandas as pd
import yaml

from vlmgrid.cellrun.invariance import sample_positions
from vlmgrid.config import Config
from vlmgrid.stages import plan
from vlmgrid.stages.cost_work import (
    Data,
    Work,
    answer_mode,
    benchmark_data,
    cell_work,
    pass_requests,
)

THROUGHPUT_FILE = "data/throughput.yaml"
COLUMNS = [
    "model",
    "benchmark",
    "items",
    "basis",
    "scoring_units",
    "scoring_unit",
    "mdd",
    "strategy",
    "method",
    "unit",
    "per",
    "variants",
    "candidates",
    "requests",
    "gpu_hours",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "note",
    "recipe",
]

# The share of scoring units on which two models are assumed to disagree (one right, the other wrong) before
# anything runs: two models of similar accuracy typically disagree on about one unit in five. The MDD scales
# with its square root, so 10% would give 0.71 x the figure and the extreme 50% of a coin-flip pairing 1.58 x.
ASSUMED_DISCORDANCE = 0.2


def load_throughput() -> dict:
    """The throughput table shipped with the package."""
    return yaml.safe_load(resources.files("vlmgrid.stages").joinpath(THROUGHPUT_FILE).read_text("utf-8"))


def planned_mdd(units: int | None, discordance: float = ASSUMED_DISCORDANCE) -> float:
    """The MDD in points (percent) of a paired comparison on `units` scoring units that disagree on the share
    `discordance` of them (5% two-sided, 80% power: vlmgrid.metrics.power); NaN when the units are unknown."""
    from vlmgrid.metrics.power import mdd_discordance

    return math.nan if not units else 100.0 * mdd_discordance(discordance, int(units))


# ------------------------------------------------------------------------------------------ model sizes

_PARAMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)b(?![a-z0-9])")
_TOWER = re.compile(r"vit-([a-z]+)-(\d+)(?:-(\d+))?")


def _hints(name: str, settings: dict) -> list[str]:
    source = settings.get("source") or {}
    return [
        str(text).lower()
        for text in (source.get("repo"), source.get("arch"), name, settings.get("description"))
        if text
    ]


def safetensors_parameters(folder) -> int | None:
    """The parameters of a checkpoint folder's safetensors files, counted from their headers (each tensor's
    shape; nothing else is read); None when it has none, or one that is not a safetensors file."""
    import json
    import struct
    from pathlib import Path

    files = sorted(Path(folder).glob("*.safetensors")) if Path(folder).is_dir() else []
    total = 0
    for path in files:
        try:
            with open(path, "rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                header = json.loads(handle.read(length)) if length < 100_000_000 else None
        except (OSError, struct.error, ValueError):
            return None
        if not isinstance(header, dict):
            return None
        for key, tensor in header.items():
            if key != "__metadata__" and isinstance(tensor, dict):
                total += math.prod(int(n) for n in tensor.get("shape") or [])
    return total or None


def _lvlm_size(name: str, settings: dict) -> str | None:
    """An hf model's size class, "7b": a local checkpoint's from its safetensors files' parameters, else from
    its hub repo, name or description ("llava-1.5-7b-hf")."""
    source = settings.get("source") or {}
    if source.get("type") == "local" and (params := safetensors_parameters(source.get("path", ""))):
        return f"{params / 1e9:.3g}b"
    for text in _hints(name, settings):
        found = _PARAMS.search(text.replace("_", "-"))
        if found:
            return f"{found.group(1)}b"
    return None


def _tower_size(name: str, settings: dict) -> str | None:
    """An open_clip model's size class, "vit-l-14-336", from its architecture name (or the model's name)."""
    for text in _hints(name, settings):
        found = _TOWER.search(text.replace("/", "-").replace("@", "-"))
        if found:
            return "vit-" + "-".join(part for part in found.groups() if part)
    return None


SIZE_FINDERS: Mapping[str, Callable[[str, dict], str | None]] = {"hf": _lvlm_size, "open_clip": _tower_size}


def rated_as(settings: dict) -> str:
    """The backend whose throughput figures time the model. A model whose job starts its own server (`serve`)
    runs an LVLM on the job's GPUs as the hf backend does: timed at the hf figures, an upper bound (a serving
    engine batches continuously, and spreads a model over its GPUs by tensor parallelism)."""
    return "hf" if "serve" in settings else settings["backend"]


def size_class(name: str, settings: dict) -> str | None:
    """The model's size class in the throughput table's terms; None when nothing names it."""
    finder = SIZE_FINDERS.get(rated_as(settings))
    return finder(name, settings) if finder else None


def tokens_per_answer(work: Work, protocol: str, table: dict) -> int:
    """The new tokens a generated answer of this unit is assumed to take: the prompt set's, else the table's
    for the protocol."""
    if work.answer_tokens is not None:
        return work.answer_tokens
    assumed = table["lvlm"]["answer_tokens"]
    return int(assumed.get(protocol, assumed["default"]))


def seconds_per_request(
    work: Work, backend: str, size: str, table: dict, protocol: str, alone: bool = False
) -> float | None:
    """One request's GPU seconds on one GPU, from the table; None when it has no figure for it. `alone`: the
    request is sent by itself (the batch check), at the table's batch-1 rates where it has them."""
    if backend == "hf":
        lvlm = table["lvlm"]
        scale = float(size[:-1]) / lvlm["reference_params_b"]
        rates = {**lvlm["rates"], **(lvlm.get("rates_alone", {}) if alone else {})}
        if work.unit == "generate":
            tokens = tokens_per_answer(work, protocol, table)
            return scale * (1 / rates["forward"]["rate"] + tokens / rates["decode_tokens"]["rate"])
        return scale / rates[work.unit]["rate"]
    entry = table.get("clip", {}).get(size, {}).get(work.unit) if backend == "open_clip" else None
    return None if entry is None else 1 / entry["rate"]


def alone_factor(work: Work, settings: dict, protocol: str, table: dict) -> float:
    """How many times longer a request of this unit takes sent alone (the batch check) than in a batch: the
    table's batch-1 time over its batched time (a model's size scales both alike); 1 where the table has no
    batch-1 rate for it."""
    if rated_as(settings) != "hf" or work.unit not in ("forward", "generate"):
        return 1.0
    batched = seconds_per_request(work, "hf", "7b", table, protocol)
    return seconds_per_request(work, "hf", "7b", table, protocol, alone=True) / batched


def check_costs(
    data: Data, works: list[Work], settings: dict, protocol: str, table: dict
) -> list[float] | None:
    """Each record's cost answered alone by the batch check, in batched requests' time: its requests that take
    a pass of their own (pass_requests), each weighted by its unit's alone_factor; None when the count needs
    records that are not at hand."""
    return pass_requests(data, works, lambda work: alone_factor(work, settings, protocol, table))


# ---------------------------------------------------------------------------------------------- API price


def is_api(settings: dict) -> bool:
    """A model behind an API: an `openai` entry whose job starts no server of its own."""
    return settings["backend"] == "openai" and "serve" not in settings


def request_tokens(work: Work, settings: dict, protocol: str, table: dict) -> tuple[int, int]:
    """One request's (input, output) tokens as an API bills them: the price's `input_tokens` (else the table's
    assumption) in; a generated answer's assumed length out, or the one token of a letter scored by
    logprobs."""
    price = settings.get("price") or {}
    tokens_in = int(price.get("input_tokens") or table["api"]["input_tokens"]["value"])
    tokens_out = tokens_per_answer(work, protocol, table) if work.unit == "generate" else 1
    return tokens_in, tokens_out


def api_cost(requests: int, tokens: tuple[int, int], price: Mapping) -> float:
    """USD for the requests at the price (USD per million input and output tokens)."""
    return requests * (tokens[0] * float(price["input"]) + tokens[1] * float(price["output"])) / 1e6


# ---------------------------------------------------------------------------------------------- the plan


def recipe_note(settings: dict) -> str | None:
    """The model's recipe, and how the entry departs from it, in words; None for a model without one."""
    if not settings.get("recipe"):
        return None
    departs = settings.get("departs_from_recipe") or []
    return settings["recipe"] + (f", departing from it: {'; '.join(departs)}" if departs else "")


def _no_gpu_note(config: Config, model: str) -> str | None:
    settings = config.model(model)
    if settings["backend"] == "openai" and "serve" not in settings:
        return "API model: no GPU-hours (requests only)"
    if plan.gpus(config, model) == 0:
        return "runs on the CPU: no GPU-hours"
    return None


def cost_table(config: Config, table: dict | None = None) -> pd.DataFrame:
    """One row per (cell, unit of work): items, variants, candidates, requests and GPU-hours (COLUMNS)."""
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.protocols import PROTOCOLS

    table = table or load_throughput()
    data = {name: benchmark_data(config, name) for name in config.benchmarks}
    rows = []
    for cell in config.cells:
        settings, bench = config.cell_settings(cell.model, cell.benchmark), data[cell.benchmark]
        base = {
            "model": cell.model,
            "benchmark": cell.benchmark,
            "items": bench.items,
            "basis": bench.basis,
            "scoring_units": bench.units,
            "scoring_unit": bench.unit,
            "mdd": planned_mdd(bench.units),
            "recipe": recipe_note(settings),
        }
        reason = plan.not_applicable(config, cell.model, cell.benchmark)
        if reason is not None:
            rows.append(
                {**base, "strategy": "n/a", "gpu_hours": 0.0, "requests": 0, "note": f"n/a: {reason}"}
            )
            continue
        kind = BENCHMARKS.get(config.benchmark(cell.benchmark)["kind"])
        capability, works = cell_work(bench, settings, kind, config.prompts_dir)
        method = (
            PROTOCOLS.get(kind.protocol).method(capability, answer_mode(settings)) if capability else None
        )
        size = size_class(cell.model, settings)
        gpus = plan.gpus(config, cell.model)
        check = int(config.infer["invariance_items"]) if _batched(settings) else 0
        costs = check_costs(bench, works, settings, kind.protocol, table)
        sample = _check_sample(cell.benchmark, bench, works, check, costs)
        for work, checked in [(work, False) for work in works] + [
            (work, True) for work in works if check and work.per == "item" and sample != []
        ]:
            items = bench.items if not checked else None if sample is None else len(sample)
            requests = work.requests(items) if not checked else _check_requests(work, bench, sample)
            note = _no_gpu_note(config, cell.model)
            hours = 0.0 if note else math.nan
            if note is None and requests is None:
                note = "needs the records: prepare the benchmark for this count"
            elif note is None and size is None:
                note = "model size unknown: no estimate"
            elif note is None:
                seconds = seconds_per_request(
                    work, rated_as(settings), size, table, kind.protocol, alone=checked
                )
                if seconds is None:
                    note = f"no {work.unit} figure for size {size}: no estimate"
                else:
                    hours = requests * seconds * gpus / 3600
                    note = f"size {size}" + (
                        ", served: at hf rates, an upper bound" if "serve" in settings else ""
                    )
            if work.templates:
                note = (f"{note}; " if note else "") + f"{work.templates} templates"
            if checked:
                note = (f"{note}; " if note else "") + (
                    f"the batch check: up to {check} items (infer.invariance_items) within a tenth of the "
                    "cell's time, answered again one request at a time, at batch-1 rates"
                )
            priced = {}
            if is_api(settings):
                tokens = request_tokens(work, settings, kind.protocol, table)
                price = settings.get("price")
                priced = {
                    "input_tokens": tokens[0],
                    "output_tokens": tokens[1],
                    "cost_usd": (
                        api_cost(requests, tokens, price) if price and requests is not None else math.nan
                    ),
                }
                if not price:
                    note += "; no price in its entry: cost unknown"
            rows.append(
                {
                    **base,
                    "items": items,
                    "strategy": capability,
                    "method": method,
                    "unit": work.unit,
                    "per": "check" if checked else work.per,
                    "variants": work.variants,
                    "candidates": work.mean_candidates,
                    "requests": requests,
                    "gpu_hours": hours,
                    **priced,
                    "note": note,
                }
            )
    costs = pd.DataFrame(rows, columns=COLUMNS)
    return costs.astype(
        {
            "items": "Int64",
            "scoring_units": "Int64",
            "variants": "Int64",
            "input_tokens": "Int64",
            "output_tokens": "Int64",
        }
    )


def _batched(settings: dict) -> bool:
    """Whether the model batches its requests, so that the batch check answers a sample again."""
    from vlmgrid.models import BACKENDS

    return BACKENDS.get(settings["backend"]).unbatched is None


def _check_sample(
    benchmark: str, data: Data, works: list[Work], check: int, costs: list[float] | None
) -> list[int] | None:
    """The record positions the batch check will answer again: the job's own draw (vlmgrid.cellrun.invariance)
    over the same per-record requests and costs alone; None when those need records that are not at hand."""
    requests = pass_requests(data, works)
    return None if requests is None else sample_positions(benchmark, requests, check, costs)


def _check_requests(work: Work, data: Data, sample: list[int] | None) -> int | None:
    """The requests of this unit that the batch check sends: the sampled records' own."""
    per_item = work.item_requests(data.items)
    return None if per_item is None or sample is None else sum(per_item[position] for position in sample)


def _sum(values: pd.Series) -> float:
    """The sum of the known values; NaN ("unknown"), never 0, when none is known, or when the known ones are
    all 0 and some are not known (an n/a cell's or a CPU baseline's 0 beside a model of unknown size)."""
    known = values.sum(min_count=1)
    return math.nan if values.isna().any() and not known > 0 else known


def totals(costs: pd.DataFrame) -> pd.DataFrame:
    """Per model and for the grid: requests, GPU-hours and (API models) USD of the rows that have them, and
    how many rows each leaves out for want of a count or an estimate. A total with nothing known to add is NaN
    ("unknown"), never 0 (_sum)."""

    def total(frame: pd.DataFrame) -> dict:
        api = frame[frame["input_tokens"].notna()]  # an API model's rows of work
        return {
            "requests": _sum(frame["requests"]),
            "rows_without_count": int(frame["requests"].isna().sum()),
            "gpu_hours": _sum(frame["gpu_hours"]),
            "rows_without_estimate": int(frame["gpu_hours"].isna().sum()),
            "cost_usd": _sum(api["cost_usd"]),
            "rows_without_price": int(api["cost_usd"].isna().sum()),
        }

    rows = [{"model": model, **total(frame)} for model, frame in costs.groupby("model", sort=False)]
    rows.append({"model": "grid", **total(costs)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------- Slurm runtime

RUNTIME_FLOOR_MINUTES = 30  # start-up, model loading and a small cell's queue of parts
RUNTIME_SAFETY_FACTOR = (
    2.0  # the table's rates are ceilings of one H200; a job must not be killed at the limit
)


def infer_runtime_minutes(
    costs: pd.DataFrame,
    model: str,
    benchmark: str,
    shards: int = 1,
    gpus: int = 1,
    floor: int = RUNTIME_FLOOR_MINUTES,
    factor: float = RUNTIME_SAFETY_FACTOR,
) -> int | None:
    """One infer job's Slurm runtime (minutes) from the plan: the cell's GPU-hours over the GPUs each job
    holds (its hours on the clock) and over its shards, times `factor`, at least `floor`; None when the cell
    has no estimate (a flat runtime must stand in)."""
    hours = costs.loc[(costs["model"] == model) & (costs["benchmark"] == benchmark), "gpu_hours"]
    if hours.empty or hours.isna().any():
        return None
    return max(floor, math.ceil(hours.sum() / max(gpus, 1) / shards * 60 * factor))


def infer_job_runtime(config: Config, costs: pd.DataFrame, model: str, benchmark: str) -> int:
    """The Slurm runtime (minutes) of each infer job of the cell under `cluster.infer.runtime_from_plan`: the
    plan's (infer_runtime_minutes, over the benchmark's shards), else the flat `cluster.infer.runtime`. A
    model whose GPU-hours the plan does not count (an API model, or one on the CPU) has nothing to time its
    jobs by, so it keeps the flat one."""
    flat = int(config.cluster["infer"]["runtime"])
    if _no_gpu_note(config, model) is not None:
        return flat
    minutes = infer_runtime_minutes(
        costs, model, benchmark, config.shards(benchmark), plan.gpus(config, model)
    )
    return flat if minutes is None else minutes
