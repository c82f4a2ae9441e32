"""What a cell asks of a model before it runs: a benchmark's counts and the units of work its protocol sends.

The cost plan (vlmgrid.stages.cost) times and prices these counts.

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
(vlmgrid.stages.infer.open_job):

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
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

from vlmgrid import paths
from vlmgrid.config import Config

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
    def of(cls, bench, basis: str) -> Data:
        records = bench.records
        options = tuple(len(o) for o in records["options"]) if "options" in records.columns else None
        to_image = (
            tuple(d == "riddle-to-image" for d in records["direction"])
            if "direction" in records.columns
            else None
        )
        return cls(
            len(records), basis, len(bench.classes) if bench.classes is not None else None, options, to_image
        )


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


def _prepared(config: Config, benchmark: str):
    """The prepared benchmark, when its folder was prepared from the config's settings; else None."""
    import json

    from vlmgrid.benchmarks.dataset import load_benchmark
    from vlmgrid.benchmarks.folder import MANIFEST
    from vlmgrid.benchmarks.sources import data_settings

    bench_dir = paths.bench_dir(config.data_dir, benchmark)
    try:
        manifest = json.loads((bench_dir / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    settings = config.benchmark(benchmark)
    if (
        not isinstance(manifest, dict)
        or manifest.get("kind") != settings["kind"]
        or data_settings(manifest.get("source") or {}) != data_settings(dict(settings["source"]))
    ):
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
    return Data(
        published, "published", classes=kind.class_count, options=options, **_published_units(kind, published)
    )


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
    templates: str | None = None  # classification under CARPE's protocol: "open-world" or "closed-world"

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
    shown = (
        None
        if data.classes is None
        else (data.classes if prompts.max_candidates is None else min(data.classes, prompts.max_candidates))
    )
    works = []
    # A model that scores options but does not generate (a baseline) scores the open-world templates over
    # every class name: two sets of rows of one shape where the classes are under max_candidates, each its
    # own.
    for templates, method, variants, candidates in (
        ("open-world", open_method, len(prompts.open), data.classes),
        ("closed-world", closed_method, len(prompts.closed), shown),
    ):
        if not variants:
            continue
        if method == "generate":
            works.append(Work("generate", variants, 1, templates=templates))
        else:
            works += [
                Work("forward", variants, 1, templates=templates),
                Work("continuation", variants, candidates, templates=templates),
            ]
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


def pass_requests(
    data: Data, works: list[Work], weight: Callable[[Work], float] | None = None
) -> list | None:
    """Each record's model requests that take a pass of their own, in record order (its per-item units but the
    continuations that ride on a prefix's pass; a per-cell unit such as CLIP's class prompts is no item's),
    each unit's weighted by `weight` where given (the batch check's costs: vlmgrid.stages.cost.check_costs);
    None when the count needs records that are not at hand."""
    if data.items is None:
        return None
    units = [work for work in works if work.per == "item" and work.unit in PASS_UNITS]
    per_unit = [work.item_requests(data.items) for work in units]
    if any(counts is None for counts in per_unit):
        return None
    if not units:
        return [0] * data.items
    weights = [1 if weight is None else weight(work) for work in units]
    return [sum(w * n for w, n in zip(weights, counts)) for counts in zip(*per_unit)]


def item_work(bench, model_settings: dict) -> tuple[Data, list[Work]]:
    """A prepared benchmark's counts and the units of work a model with these settings sends it
    (cell_work)."""
    data = Data.of(bench, "prepared")
    _, works = cell_work(data, model_settings, bench.kind, bench.prompts_dir)
    return data, works


def item_requests(bench, model_settings: dict) -> list[int]:
    """Each record's model requests that take a pass of their own, as the plan counts them (pass_requests):
    what infer's parts are cut by (vlmgrid.cellrun.job) and the batch check's share is counted in. A
    classification item under CARPE's protocol asks its 20 templates."""
    return pass_requests(*item_work(bench, model_settings))


# ------------------------------------------------------------------------------------------ model sizes


def answer_mode(settings: dict) -> str | None:
    """How the model answers where a protocol lets it choose: its entry's answer_mode, or the one way it can
    (a model that cannot generate answers by likelihood, one that cannot score options by generation)."""
    capabilities = _capabilities(settings)
    if "generate" not in capabilities and "score_options" in capabilities:
        return "likelihood"
    if "score_options" not in capabilities and "generate" in capabilities:
        return "generate"
    return settings.get("answer_mode")


def _capabilities(settings: dict) -> frozenset[str]:
    from vlmgrid.models import BACKENDS

    return frozenset(BACKENDS.get(settings["backend"]).capabilities_for(settings))
