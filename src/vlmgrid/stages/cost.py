"""The cost plan (`vlmgrid plan`): what a grid will cost, before it runs.

Per cell (model x benchmark): its items, the model requests its protocol sends, and the GPU-hours they take
at the throughput table's rates (stages/data/throughput.yaml, docs/formats.md); then the totals per model
and for the grid.

Items come from the prepared benchmark (data/<bench>/, read as inference reads it) when its folder matches
the config ("prepared"); a fixture source not yet prepared is generated into a temporary folder and counted
("fixture"; fixtures are small and deterministic, so this is the exact count); otherwise the benchmark kind's
published count ("published"), or "unknown". A published benchmark's classes and options per item come from
its kind where the benchmark fixes them (`class_count`, `option_count`: ImageNet's 1,000 classes, yes/no's
two options); counts that vary with the data itself (options per question of ScienceQA, MMBench, CV-Bench;
DANCE's candidates) are known for prepared and fixture benchmarks only.

Model requests follow what the protocols send (vlmgrid.protocols); one row per unit of work, with
requests = items x variants x candidates (or variants x candidates once per cell, `per` = "cell"), the
candidates counted per item where they vary (options per question, DANCE's direction). The same count, item
by item and without the continuations (`item_requests`), cuts an inference job into parts
(vlmgrid.stages.jobs):

- generate: one request per item x variant (CARPE's classification templates answered by generation, one
  per template; CVQA's four prompt settings; multiple choice, yes/no, short answers, Kaleidoscope: one);
- forward (option scoring by letters): one forward per item x variant reads every option's letter at once
  (multiple choice, yes/no, Kaleidoscope, CVQA);
- forward + continuation (option scoring by continuations): one prefix forward per item x variant, plus one
  continuation per option on its cached prefix: CARPE's closed-world templates score min(classes,
  max_candidates) class names; DANCE's image-to-riddle scores its riddles on one picture prefix, while
  riddle-to-image sends one request (a forward and one continuation) per candidate picture;
- embed_image + embed_text (contrastive models): classification embeds each image once and the class
  prompts (classes x CLIP templates) once per cell; multiple choice embeds the image and one text per option
  (per prompt setting for CVQA); DANCE embeds every candidate picture or riddle of a query (an upper bound:
  inference embeds a picture shared by queries of one part once).

GPU-hours are requests / rate / 3600 per GPU a job holds (the model's `gpus`). A model behind an API
(`openai` without `serve`), or one that runs on the CPU, holds no GPU: its GPU-hours are 0. An API model's
cost is its requests' tokens at the `price` its entry gives (USD per million input and output tokens): the
input tokens per request are the price's `input_tokens`, else the throughput table's `api.input_tokens`; the
output tokens are a generated answer's assumed length, or one for a letter scored by its logprobs. Without a
`price` its cost is unknown. A model whose job serves it on its GPUs (`serve`) is timed at the hf backend's rates, an upper
bound. A model whose size class the table lacks gets no estimate ("unknown"), never a guess.

Per benchmark, what it can tell: the minimum detectable difference (MDD) of a paired comparison of two models
on its scoring units (items, or the groups its metric scores whole: MMVP's pairs, MME's images, MMBench's
circular groups), from their number alone and an assumed discordance (ASSUMED_DISCORDANCE of the units, one
model right and the other wrong): two models closer than it are not told apart, whatever they are.
"""

from __future__ import annotations

import math
import re
from collections import Counter
import tempfile
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Mapping

import pandas as pd
import yaml

from vlmgrid import fileio, paths
from vlmgrid.config import Config
from vlmgrid.report.labels import counted
from vlmgrid.stages import plan

THROUGHPUT_FILE = "data/throughput.yaml"
COLUMNS = ["model", "benchmark", "items", "basis", "scoring_units", "scoring_unit", "mdd", "strategy", "method", "unit",
           "per",
           "variants", "candidates", "requests", "gpu_hours", "input_tokens", "output_tokens", "cost_usd", "note"]

# The share of scoring units on which two models are assumed to disagree (one right, the other wrong) before
# anything runs: two models of similar accuracy typically disagree on about one unit in five. The MDD scales
# with its square root, so 10% would give 0.71 x the figure and the extreme 50% of a coin-flip pairing 1.58 x.
ASSUMED_DISCORDANCE = 0.2


def load_throughput() -> dict:
    """The throughput table shipped with the package."""
    return yaml.safe_load(resources.files("vlmgrid.stages").joinpath(THROUGHPUT_FILE).read_text("utf-8"))


# ----------------------------------------------------------------------------------------- benchmark data

@dataclass(frozen=True)
class Data:
    """What the counts need of a benchmark: its items and, when its records are at hand, their shape."""

    items: int | None
    basis: str  # prepared | fixture | published | unknown
    classes: int | None = None
    options: tuple[int, ...] | None = None  # options per record
    to_image: tuple[bool, ...] | None = None  # ranking: whether each query is riddle-to-image
    # what the headline is scored over and a paired test flips: items, or the groups of the metric's
    # `group_by` column (`unit`); None when that needs the records
    units: int | None = None
    unit: str = "item"

    @classmethod
    def of(cls, bench, basis: str) -> "Data":
        records = bench.records
        options = tuple(len(o) for o in records["options"]) if "options" in records.columns else None
        to_image = (tuple(d == "riddle-to-image" for d in records["direction"])
                    if "direction" in records.columns else None)
        return cls(len(records), basis, len(bench.classes) if bench.classes is not None else None, options, to_image)


def _scoring_units(bench) -> dict:
    """The prepared benchmark's scoring units (Data.units, Data.unit): its items, or its metric's groups."""
    from vlmgrid.metrics import METRICS
    from vlmgrid.metrics.grouped import GroupedMetric

    metric = METRICS.get(bench.kind.metric)
    if isinstance(metric, GroupedMetric):
        return {"units": int(len(set(metric.group_codes(bench.records).tolist()))), "unit": metric.group_by}
    return {"units": len(bench.records), "unit": "item"}


def _published_units(kind, items: int) -> dict:
    """An unprepared benchmark's scoring units: its items, or its groups where the kind fixes their size."""
    from vlmgrid.metrics import METRICS
    from vlmgrid.metrics.grouped import GroupedMetric

    metric = METRICS.get(kind.metric)
    if isinstance(metric, GroupedMetric):
        return {"units": items // kind.group_size if kind.group_size else None, "unit": metric.group_by}
    return {"units": items, "unit": "item"}


def planned_mdd(units: int | None, discordance: float = ASSUMED_DISCORDANCE) -> float:
    """The MDD in points (percent) of a paired comparison on `units` scoring units that disagree on the share
    `discordance` of them (5% two-sided, 80% power: vlmgrid.metrics.power); NaN when the units are unknown."""
    from vlmgrid.metrics.power import mdd_discordance

    return math.nan if not units else 100.0 * mdd_discordance(discordance, int(units))


def _prepared(config: Config, benchmark: str):
    """The prepared benchmark, when its folder was prepared from the config's settings; else None."""
    import json

    from vlmgrid.benchmarks.dataset import MANIFEST, load_benchmark
    from vlmgrid.benchmarks.sources import data_settings

    bench_dir = paths.bench_dir(config.data_dir, benchmark)
    try:
        manifest = json.loads((bench_dir / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    settings = config.benchmark(benchmark)
    if (not isinstance(manifest, dict) or manifest.get("kind") != settings["kind"]
            or data_settings(manifest.get("source") or {}) != data_settings(dict(settings["source"]))):
        return None  # a folder of other settings: its counts are not this benchmark's
    return load_benchmark(bench_dir)


def benchmark_data(config: Config, benchmark: str) -> Data:
    """The benchmark's counts: prepared, else a fixture generated for counting, else the published count."""
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.benchmarks.dataset import load_benchmark
    from vlmgrid.stages.prepare import prepare_benchmark

    prepared = _prepared(config, benchmark)
    if prepared is not None:
        return replace(Data.of(prepared, "prepared"), **_scoring_units(prepared))
    settings = config.benchmark(benchmark)
    if settings["source"]["type"] == "fixture":
        with tempfile.TemporaryDirectory() as tmp:
            prepare_benchmark(benchmark, settings, Path(tmp) / benchmark)
            bench = load_benchmark(Path(tmp) / benchmark)
            return replace(Data.of(bench, "fixture"), **_scoring_units(bench))
    kind = BENCHMARKS.get(settings["kind"])
    published = settings["source"].get("expected_items") or kind.expected_count
    if not published:
        return Data(None, "unknown")
    # what the kind fixes for every copy: its classes, and its options where every item has the same number
    options = (kind.option_count,) * published if kind.option_count else None
    return Data(published, "published", classes=kind.class_count, options=options,
                **_published_units(kind, published))


# ---------------------------------------------------------------------------------------- units of work

@dataclass(frozen=True)
class Work:
    """One unit of work of a cell: `candidates` per (item, variant), or per cell when `per` is "cell".

    `candidates` is one count for every item, or one count per item (a tuple in record order) where it
    varies: options per question, DANCE's direction; None when it needs records that are not at hand.
    """

    unit: str  # forward | continuation | generate | embed_image | embed_text
    variants: int
    candidates: int | tuple[int, ...] | None
    per: str = "item"
    answer_tokens: int | None = None  # generate: the new tokens per answer; None: the throughput table's

    @property
    def mean_candidates(self) -> float | None:
        if isinstance(self.candidates, tuple):
            return sum(self.candidates) / len(self.candidates) if self.candidates else None
        return self.candidates

    def item_requests(self, items: int | None) -> list[int] | None:
        """Each item's requests of this unit, variants x its candidates; None for a per-cell unit or when the
        count needs the records."""
        if self.per == "cell" or self.candidates is None:
            return None
        if isinstance(self.candidates, tuple):
            return [self.variants * count for count in self.candidates]
        return None if items is None else [self.variants * self.candidates] * items

    def requests(self, items: int | None) -> int | None:
        """The cell's requests of this unit: the sum of its items' (item_requests), or variants x candidates
        once for a per-cell unit."""
        if self.per == "cell":
            return None if self.candidates is None else self.variants * self.candidates
        per_item = self.item_requests(items)
        return None if per_item is None else sum(per_item)


def _classification(data: Data, capability: str, settings: dict, prompts_dir: Path, kind) -> list[Work]:
    from vlmgrid.protocols.classification import answer_methods, classification_prompts

    if capability == "embed":
        return [Work("embed_image", 1, 1), Work("embed_text", len(kind.templates), data.classes, per="cell")]
    prompts = classification_prompts(prompts_dir)
    model = SimpleNamespace(model_capabilities=_capabilities(settings), settings=settings)
    open_method, closed_method = answer_methods(model)
    shown = None if data.classes is None else (
        data.classes if prompts.max_candidates is None else min(data.classes, prompts.max_candidates))
    works = []
    for method, variants, candidates in ((open_method, len(prompts.open), data.classes),
                                         (closed_method, len(prompts.closed), shown)):
        if not variants:
            continue
        if method == "generate":
            works.append(Work("generate", variants, 1))
        else:
            works += [Work("forward", variants, 1), Work("continuation", variants, candidates)]
    return works


def _choice(variants: int = 1):
    def count(data: Data, capability: str, settings: dict, prompts_dir: Path, kind) -> list[Work]:
        if capability == "embed":
            # The image is embedded once per item, whatever the variants; one text per option per variant.
            return [Work("embed_image", 1, 1), Work("embed_text", variants, data.options)]
        if capability == "score_options":
            return [Work("forward", variants, 1)]
        return [Work("generate", variants, 1)]

    return count


def _cvqa(data: Data, capability: str, settings: dict, prompts_dir: Path, kind) -> list[Work]:
    from vlmgrid.protocols.cvqa import cvqa_prompts

    return _choice(len(cvqa_prompts(prompts_dir).settings))(data, capability, settings, prompts_dir, kind)


def _exam_choice(data: Data, capability: str, settings: dict, prompts_dir: Path, kind) -> list[Work]:
    from vlmgrid.protocols.exam_choice import DEFAULT_MODE, DEFAULT_MODE_BY_BACKEND, load_exam_prompts

    if capability != "generate":
        return _choice()(data, capability, settings, prompts_dir, kind)
    mode = settings.get("prompt_mode") or DEFAULT_MODE_BY_BACKEND.get(settings["backend"], DEFAULT_MODE)
    return [Work("generate", 1, 1, answer_tokens=load_exam_prompts(prompts_dir).max_new_tokens(mode))]


def _ranking(data: Data, capability: str, settings: dict, prompts_dir: Path, kind) -> list[Work]:
    if data.options is None or data.to_image is None:
        return [Work("embed_image" if capability == "embed" else "forward", 1, None)]
    pairs = list(zip(data.options, data.to_image))
    # Riddle-to-image: one picture per candidate and one riddle; image-to-riddle: one picture, a riddle each.
    pictures = tuple(n if to_image else 1 for n, to_image in pairs)
    texts = tuple(1 if to_image else n for n, to_image in pairs)
    if capability == "embed":
        return [Work("embed_image", 1, pictures), Work("embed_text", 1, texts)]
    # Likelihood: a forward per candidate picture (riddle-to-image) or one shared prefix (image-to-riddle),
    # and one continuation per candidate either way.
    return [Work("forward", 1, pictures), Work("continuation", 1, data.options)]


def _short_answer(data: Data, capability: str, settings: dict, prompts_dir: Path, kind) -> list[Work]:
    return [Work("generate", 1, 1)]


# Per protocol: the units of work one model sends, following the protocol's strategies.
COUNTERS: Mapping[str, Callable[..., list[Work]]] = {
    "classification": _classification,
    "multiple_choice": _choice(),
    "yes_no": _choice(),
    "short_answer": _short_answer,
    "cvqa": _cvqa,
    "exam_choice": _exam_choice,
    "ranking": _ranking,
}


def cell_work(data: Data, model_settings: dict, kind, prompts_dir: Path) -> tuple[str | None, list[Work]]:
    """How a model with these settings answers a benchmark of this kind (its strategy, None when it cannot)
    and the units of work it sends: what the plan counts and what infer's parts are cut by."""
    from vlmgrid.protocols import strategy_for

    capability = strategy_for(kind.protocol, _capabilities(model_settings), model_settings.get("answer_mode"))
    if capability is None:
        return None, []
    return capability, COUNTERS[kind.protocol](data, capability, model_settings, Path(prompts_dir), kind)


# The units a part counts: each takes a model pass of its own. A continuation is scored on its prefix's
# cached pass, at a fraction of a forward's cost; counted, a closed-world ImageNet item (128 class names on
# each of 10 templates) would be a part of its own, and its 10 open-world answers would be a batch of 10.
PASS_UNITS = frozenset({"forward", "generate", "embed_image", "embed_text"})


def item_requests(bench, model_settings: dict) -> list[int]:
    """Each record's model requests that take a pass of their own, in record order, as the plan counts them
    (its per-item units but the continuations that ride on a prefix's pass; a per-cell unit such as CLIP's
    class prompts is no item's): what infer's parts are cut by (vlmgrid.stages.jobs). A classification item
    under CARPE's protocol asks its 20 templates."""
    data = Data.of(bench, "prepared")
    _, works = cell_work(data, model_settings, bench.kind, bench.prompts_dir)
    per_unit = [work.item_requests(data.items) for work in works if work.per == "item" and work.unit in PASS_UNITS]
    return [sum(counts) for counts in zip(*per_unit)] if per_unit else [0] * data.items


# ------------------------------------------------------------------------------------------ model sizes

_PARAMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)b(?![a-z0-9])")
_TOWER = re.compile(r"vit-([a-z]+)-(\d+)(?:-(\d+))?")


def _capabilities(settings: dict) -> frozenset[str]:
    from vlmgrid.models import BACKENDS

    return frozenset(BACKENDS.get(settings["backend"]).capabilities_for(settings))


def _hints(name: str, settings: dict) -> list[str]:
    source = settings.get("source") or {}
    return [str(text).lower() for text in (source.get("repo"), source.get("arch"), name, settings.get("description"))
            if text]


def _lvlm_size(name: str, settings: dict) -> str | None:
    """An hf model's size class, "7b", from its hub repo, name or description ("llava-1.5-7b-hf")."""
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


def seconds_per_request(work: Work, backend: str, size: str, table: dict, protocol: str) -> float | None:
    """One request's GPU seconds on one GPU, from the table; None when it has no figure for it."""
    if backend == "hf":
        lvlm = table["lvlm"]
        scale = float(size[:-1]) / lvlm["reference_params_b"]
        rates = lvlm["rates"]
        if work.unit == "generate":
            tokens = tokens_per_answer(work, protocol, table)
            return scale * (1 / rates["forward"]["rate"] + tokens / rates["decode_tokens"]["rate"])
        return scale / rates[work.unit]["rate"]
    entry = table.get("clip", {}).get(size, {}).get(work.unit) if backend == "open_clip" else None
    return None if entry is None else 1 / entry["rate"]


# ---------------------------------------------------------------------------------------------- API price

def is_api(settings: dict) -> bool:
    """A model behind an API: an `openai` entry whose job starts no server of its own."""
    return settings["backend"] == "openai" and "serve" not in settings


def request_tokens(work: Work, settings: dict, protocol: str, table: dict) -> tuple[int, int]:
    """One request's (input, output) tokens as an API bills them: the price's `input_tokens` (else the table's
    assumption) in; a generated answer's assumed length out, or the one token of a letter scored by logprobs."""
    price = settings.get("price") or {}
    tokens_in = int(price.get("input_tokens") or table["api"]["input_tokens"]["value"])
    tokens_out = tokens_per_answer(work, protocol, table) if work.unit == "generate" else 1
    return tokens_in, tokens_out


def api_cost(requests: int, tokens: tuple[int, int], price: Mapping) -> float:
    """USD for the requests at the price (USD per million input and output tokens)."""
    return requests * (tokens[0] * float(price["input"]) + tokens[1] * float(price["output"])) / 1e6


# ---------------------------------------------------------------------------------------------- the plan

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
        settings, bench = config.model(cell.model), data[cell.benchmark]
        base = {"model": cell.model, "benchmark": cell.benchmark, "items": bench.items, "basis": bench.basis,
                "scoring_units": bench.units, "scoring_unit": bench.unit, "mdd": planned_mdd(bench.units)}
        reason = plan.not_applicable(config, cell.model, cell.benchmark)
        if reason is not None:
            rows.append({**base, "strategy": "n/a", "gpu_hours": 0.0, "requests": 0, "note": f"n/a: {reason}"})
            continue
        kind = BENCHMARKS.get(config.benchmark(cell.benchmark)["kind"])
        capability, works = cell_work(bench, settings, kind, config.prompts_dir)
        method = PROTOCOLS.get(kind.protocol).method(capability) if capability else None
        size = size_class(cell.model, settings)
        gpus = plan.gpus(config, cell.model)
        check = int(config.infer["invariance_items"]) if _batched(settings) else 0
        for work, checked in [(work, False) for work in works] + [(work, True) for work in works
                                                                  if check and work.per == "item"]:
            items = bench.items if not checked or bench.items is None else min(check, bench.items)
            requests = work.requests(items) if not checked else _check_requests(work, items)
            note = _no_gpu_note(config, cell.model)
            hours = 0.0 if note else math.nan
            if note is None and requests is None:
                note = "needs the records: prepare the benchmark for this count"
            elif note is None and size is None:
                note = "model size unknown: no estimate"
            elif note is None:
                seconds = seconds_per_request(work, rated_as(settings), size, table, kind.protocol)
                if seconds is None:
                    note = f"no {work.unit} figure for size {size}: no estimate"
                else:
                    hours = requests * seconds * gpus / 3600
                    note = f"size {size}" + (", served: at hf rates, an upper bound" if "serve" in settings else "")
            if checked:
                note = (f"{note}; " if note else "") + (
                    f"the batch check: {check} items (infer.invariance_items) answered again one at a time, "
                    f"at the batched rates (a lower bound)")
            priced = {}
            if is_api(settings):
                tokens = request_tokens(work, settings, kind.protocol, table)
                price = settings.get("price")
                priced = {"input_tokens": tokens[0], "output_tokens": tokens[1],
                          "cost_usd": (api_cost(requests, tokens, price) if price and requests is not None
                                       else math.nan)}
                if not price:
                    note += "; no price in its entry: cost unknown"
            rows.append({**base, "items": items, "strategy": capability, "method": method, "unit": work.unit,
                         "per": "check" if checked else work.per,
                         "variants": work.variants, "candidates": work.mean_candidates, "requests": requests,
                         "gpu_hours": hours, **priced, "note": note})
    costs = pd.DataFrame(rows, columns=COLUMNS)
    return costs.astype({"items": "Int64", "scoring_units": "Int64", "variants": "Int64", "input_tokens": "Int64",
                         "output_tokens": "Int64"})


def _batched(settings: dict) -> bool:
    """Whether the model batches its requests, so that the batch check answers a sample again."""
    from vlmgrid.models import BACKENDS

    return BACKENDS.get(settings["backend"]).unbatched is None


def _check_requests(work: Work, items: int | None) -> int | None:
    """The requests of the batch check's `items` (a sample: an item of the mean shape where shapes vary)."""
    if items is None or work.candidates is None:
        return None
    mean = work.mean_candidates
    return None if mean is None else round(work.variants * mean * items)


def totals(costs: pd.DataFrame) -> pd.DataFrame:
    """Per model and for the grid: requests, GPU-hours and (API models) USD of the rows that have them, and how
    many rows each leaves out for want of a count or an estimate. A total that leaves out every row is NaN
    ("unknown"), never 0."""
    def total(frame: pd.DataFrame) -> dict:
        api = frame[frame["input_tokens"].notna()]  # an API model's rows of work
        return {"requests": frame["requests"].sum(min_count=1),
                "rows_without_count": int(frame["requests"].isna().sum()),
                "gpu_hours": frame["gpu_hours"].sum(min_count=1),
                "rows_without_estimate": int(frame["gpu_hours"].isna().sum()),
                "cost_usd": api["cost_usd"].sum(min_count=1),
                "rows_without_price": int(api["cost_usd"].isna().sum())}

    rows = [{"model": model, **total(frame)} for model, frame in costs.groupby("model", sort=False)]
    rows.append({"model": "grid", **total(costs)})
    return pd.DataFrame(rows)


ASSUMPTIONS = (
    "Assumes: each inference job holds its model's gpus for its time at the throughput table's rates "
    "(measured on one H200 where the table says so; LVLM rates scale by 7B / parameters; a model served by "
    "its job at the hf rates); {tokens} new tokens per generated answer unless the prompt set asks for more; "
    "an API request of {input_tokens} input tokens unless the model's price says otherwise; items from the "
    "prepared data, a generated fixture or the published count. A total leaves out the rows without a count, "
    "an estimate or a price, and says how many."
)

WIDTH = 100  # the printed plan's lines fit a terminal this wide; `--csv` holds every column
_BENCH_WIDTH = 24
_HEADER = ("benchmark", "unit", "items", "shape", "requests", "GPU-h", "USD", "note")


def _number(value, digits: str = ",.0f") -> str:
    return "unknown" if pd.isna(value) else format(value, digits)


def _fit(text: str, width: int) -> str:
    """The text cut to `width` characters, the cut marked by an ellipsis."""
    return text if len(text) <= width else text[:width - 1] + "\u2026"


def _model_heading(costs: pd.DataFrame) -> str:
    """What a model's rows share: its size class or why it has no GPU-hours."""
    notes = [str(n) for n in costs["note"].dropna() if not str(n).startswith("n/a")]
    shared = [n for n in notes if n.startswith(("size ", "API model", "runs on the CPU"))]
    return shared[0].split(";")[0] if shared else ""


def _row_note(note) -> str:
    """The part of a row's note its model's heading does not say already."""
    if pd.isna(note):
        return ""
    text = str(note)
    if text.startswith(("size ", "API model", "runs on the CPU")):
        return text.split("; ", 1)[1] if "; " in text else ""
    return text


def _wrapped(text: str, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


MDD_NOTE = (
    "MDD: the smallest true difference between two models' headlines (points) that a paired test, two-sided at "
    "5%, finds with 80% power: {z:.2f} x sqrt({d:g} / units) x 100, assuming two models disagree on {d:.0%} of "
    "the units (one right, the other wrong). Two models closer than that are not told apart by the benchmark, "
    "whatever they are. It scales with the square root of the disagreement (10%: 0.71 x; 50%: 1.58 x), and "
    "takes the headline for the mean of its units' scores (a guide where it is not: a mean over strata, MME's "
    "acc + acc+, POPE's F1); `vlmgrid compare` gives each pair its own, from its answers."
)


LIKELIHOOD_NOTE = (
    "Option likelihood (each option scored, the likeliest taken) is the grid's default for an LVLM on yes/no and "
    "multiple choice; LLaVA-1.5's paper generated a short answer greedily and parsed it. `answer_mode: generate` "
    "in a model's entry answers as it did: config/examples/llava-1.5-method.yaml."
)


def _method_lines(costs: pd.DataFrame) -> list[str]:
    """How one model answers its cells, by method: the benchmarks named where a method has three or fewer."""
    cells = costs[costs["strategy"] != "n/a"].drop_duplicates("benchmark")
    parts = []
    for method, benchmarks in cells.groupby("method", sort=False)["benchmark"]:
        names = list(benchmarks)
        parts.append(f"{method} ({', '.join(names) if len(names) <= 3 else counted(len(names), 'benchmark')})")
    return _wrapped("  answers by " + "; ".join(parts), "    ") if parts else []


def _mdd_lines(costs: pd.DataFrame) -> list[str]:
    """Per benchmark: its scoring units and the MDD they allow (planned_mdd), then what the figure assumes."""
    from vlmgrid.metrics.power import z_sum

    lines = ["what each benchmark can tell (MDD):"]
    for benchmark, row in costs.drop_duplicates("benchmark").set_index("benchmark").iterrows():
        if pd.isna(row["scoring_units"]):
            units = "units unknown: prepare it to count them"
        elif row["scoring_unit"] == "item":
            units = f"{row['scoring_units']:,} items"
        else:
            units = f"{row['scoring_units']:,} {row['scoring_unit']} groups of {row['items']:,} items"
        mdd = "unknown" if pd.isna(row["mdd"]) else f"{row['mdd']:.1f} points"
        lines.append(f"  {_fit(str(benchmark), _BENCH_WIDTH):<{_BENCH_WIDTH}} {_fit(units, 44):<44} MDD {mdd}")
    return lines + _wrapped(MDD_NOTE.format(z=z_sum(), d=ASSUMED_DISCORDANCE))


def render(costs: pd.DataFrame, table: dict | None = None) -> str:
    """`vlmgrid plan`: per model its cells' units of work (a note's number points to the notes under the table),
    per benchmark the MDD its scoring units allow, the totals per model and for the grid with the rows each
    leaves out, and what the estimate assumes; every line at most WIDTH characters (the CSV has the full
    detail)."""
    table = table or load_throughput()
    notes: dict[str, int] = {}
    lines = []
    row_format = "  {:<%d} {:<12} {:>7} {:>8} {:>11} {:>8} {:>9} {:>5}" % _BENCH_WIDTH
    lines.append(row_format.format(*_HEADER))
    api_models = set(costs.loc[costs["input_tokens"].notna(), "model"])
    for model, frame in costs.groupby("model", sort=False):
        heading = _model_heading(frame)
        lines.append(_fit(f"{model}" + (f" ({heading})" if heading else ""), WIDTH))
        lines += _method_lines(frame)
        for _, row in frame.iterrows():
            na = row["strategy"] == "n/a"
            shape = "" if na or pd.isna(row["variants"]) else (
                f"{row['variants']}x" + ("?" if pd.isna(row["candidates"]) else
                                         f"{row['candidates']:.0f}" if float(row["candidates"]).is_integer()
                                         else f"{row['candidates']:.1f}"))
            note = _row_note(row["note"])
            mark = f"[{notes.setdefault(note, len(notes) + 1)}]" if note else ""
            usd = ("-" if model not in api_models or na else _number(row["cost_usd"], ",.2f"))
            lines.append(row_format.format(
                _fit(str(row["benchmark"]), _BENCH_WIDTH), "n/a" if na else _fit(str(row["unit"]), 12),
                _number(row["items"]), shape, "-" if na else _number(row["requests"]),
                "-" if na else _number(row["gpu_hours"], ".3g"), usd, mark))
    lines.append("")
    for note, number in notes.items():
        lines += _wrapped(f"[{number}] {note}", "    ")
    from vlmgrid.protocols.base import ANSWERS_BY

    if (costs["method"] == ANSWERS_BY["score_options"]).any():
        lines += _wrapped(LIKELIHOOD_NOTE)
    lines += [""] + _mdd_lines(costs)
    sums = totals(costs)
    lines += ["", "totals:"]
    total_format = "  {:<24} {:>13} {:>9} {:>10} {:>12} {:>10}"
    lines.append(total_format.format("model", "requests", "GPU-h", "left out", "USD", "left out"))
    for _, row in sums.iterrows():
        api = row["model"] in api_models or (row["model"] == "grid" and api_models)
        lines.append(total_format.format(
            _fit(str(row["model"]), 24), _number(row["requests"]), _number(row["gpu_hours"], ".3g"),
            counted(int(row["rows_without_estimate"]), "row") if row["rows_without_estimate"] else "",
            _number(row["cost_usd"], ",.2f") if api else "-",
            counted(int(row["rows_without_price"]), "row") if row["rows_without_price"] else ""))
    lines.append("")
    left_out: dict[tuple, list[str]] = {}  # the rows left out -> which totals leave them out
    for what, column in (("GPU-hours", "gpu_hours"), ("requests", "requests"), ("USD", "cost_usd")):
        # the USD totals are an API model's rows of work only (totals)
        left = costs[costs[column].isna() & ((column != "cost_usd") | costs["input_tokens"].notna())]
        if not left.empty:
            left_out.setdefault(tuple(f"{r.model} on {r.benchmark} ({r.unit})" for r in left.itertuples()),
                                []).append(what)
    for named, whats in left_out.items():
        # a cell's two rows of one unit (open- and closed-world templates) are named once, with their number
        listed = [f"{name[:-1]} x{n})" if n > 1 else name for name, n in Counter(named).items()]
        lines += _wrapped(f"The {' and '.join(whats)} totals leave out {counted(len(named), 'row')}: "
                          f"{', '.join(listed)}.")
    lines += _wrapped(ASSUMPTIONS.format(tokens=table["lvlm"]["answer_tokens"]["default"],
                                         input_tokens=table["api"]["input_tokens"]["value"]))
    return "\n".join(line.rstrip() for line in lines)


def write_plan(config: Config, csv: Path | None = None) -> str:
    """The plan as text; with `csv`, the table written there as well."""
    table = load_throughput()
    costs = cost_table(config, table)
    if csv is not None:
        with fileio.atomic_path(csv) as tmp:
            costs.to_csv(tmp, index=False)
    return render(costs, table)


# ----------------------------------------------------------------------------------- Slurm runtime

RUNTIME_FLOOR_MINUTES = 30  # start-up, model loading and a small cell's queue of parts
RUNTIME_SAFETY_FACTOR = 2.0  # the table's rates are ceilings of one H200; a job must not be killed at the limit


def infer_runtime_minutes(costs: pd.DataFrame, model: str, benchmark: str, shards: int = 1, gpus: int = 1,
                          floor: int = RUNTIME_FLOOR_MINUTES, factor: float = RUNTIME_SAFETY_FACTOR) -> int | None:
    """One infer job's Slurm runtime (minutes) from the plan: the cell's GPU-hours over the GPUs each job holds
    (its hours on the clock) and over its shards, times `factor`, at least `floor`; None when the cell has no
    estimate (a flat runtime must stand in)."""
    hours = costs.loc[(costs["model"] == model) & (costs["benchmark"] == benchmark), "gpu_hours"]
    if hours.empty or hours.isna().any():
        return None
    return max(floor, math.ceil(hours.sum() / max(gpus, 1) / shards * 60 * factor))


def infer_job_runtime(config: Config, costs: pd.DataFrame, model: str, benchmark: str) -> int:
    """The Slurm runtime (minutes) of each infer job of the cell under `cluster.infer.runtime_from_plan`: the
    plan's (infer_runtime_minutes, over the benchmark's shards), else the flat `cluster.infer.runtime`. A model
    whose GPU-hours the plan does not count (an API model, or one on the CPU) has nothing to time its jobs
    by, so it keeps the flat one."""
    flat = int(config.cluster["infer"]["runtime"])
    if _no_gpu_note(config, model) is not None:
        return flat
    minutes = infer_runtime_minutes(costs, model, benchmark, config.shards(benchmark), plan.gpus(config, model))
    return flat if minutes is None else minutes
