"""What a cell asks of a model: the units of work its benchmark's protocol sends, and each record's requests.

Model requests follow what the protocols send (vlmgrid.protocols); one row per unit of work, with
requests = items x variants x candidates (or variants x candidates once per cell, `per` = "cell"), the
candidates counted per item where they vary (options per question, DANCE's direction). The same count, item
by item and without the continuations (`item_requests`), cuts an inference job into parts
(vlmgrid.cellrun.job):

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

The cost plan (vlmgrid.stages.cost) counts a benchmark's items and prices these units; `Data` is what the
counts need of a benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Mapping

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
    class prompts is no item's): what infer's parts are cut by (vlmgrid.cellrun.job). A classification item
    under CARPE's protocol asks its 20 templates."""
    data = Data.of(bench, "prepared")
    _, works = cell_work(data, model_settings, bench.kind, bench.prompts_dir)
    per_unit = [work.item_requests(data.items) for work in works if work.per == "item" and work.unit in PASS_UNITS]
    return [sum(counts) for counts in zip(*per_unit)] if per_unit else [0] * data.items


def _capabilities(settings: dict) -> frozenset[str]:
    from vlmgrid.models import BACKENDS

    return frozenset(BACKENDS.get(settings["backend"]).capabilities_for(settings))
