"""A protocol turns a benchmark's records into model calls and the outputs into prediction rows.

Each protocol has one strategy per model capability it can use; a model runs a protocol through the first
strategy whose capability it has. A strategy is built once per (model, benchmark) and then called on chunks
of records, returning one row per (item, variant) in the predictions format (docs/formats.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.images import ImageError, open_rgb
from vlmgrid.protocols.parsing.base import LETTERS

Runner = Callable[[pd.DataFrame], list[dict]]
StrategyFactory = Callable[[Any, Any], Runner]  # (model, benchmark) -> runner

DEFAULT_VARIANT = "default"


@dataclass(frozen=True)
class Scope:
    """The items a strategy can answer at all, where that is fewer than the benchmark's: `applies(records)` is
    True for those; the others are not applicable to it (not wrong), and `reason` says why in words."""

    applies: Callable[[pd.DataFrame], Sequence[bool]]
    reason: str


@dataclass(frozen=True)
class Protocol:
    name: str
    description: str
    strategies: Mapping[str, StrategyFactory]  # capability -> factory, in order of preference
    # strategy -> the items it can answer, where it cannot answer them all (scored on those alone)
    scopes: Mapping[str, Scope] = field(default_factory=dict)
    # (record column, its label in the prompt): what the prompt shows of an item besides its question and
    # options, where the item has it (a non-blank text); the inspect page shows the same, so a reader sees
    # what the model saw
    prompt_fields: Sequence[tuple[str, str]] = ()
    # capability, or (capability, answer_mode) where the model's answer_mode changes it -> how its strategy
    # answers, in a reader's words, where it differs from ANSWERS_BY's
    methods: Mapping[str | tuple[str, str], str] = field(default_factory=dict)
    # bench -> the sets of prediction variants a whole answer of the benchmark holds (any one of them), where
    # its headline is a mean over variants: a file that holds some of one set is not that headline
    variant_sets: Callable[[Any], list[frozenset[str]]] | None = None

    def method(self, capability: str, answer_mode: str | None = None) -> str:
        """How a model with this capability (and answer_mode) answers this protocol's items (`vlmgrid plan`
        says it per cell)."""
        return (
            self.methods.get((capability, answer_mode))
            or self.methods.get(capability)
            or ANSWERS_BY.get(capability, capability)
        )


# How each capability's strategy answers, in a reader's words: the choice that moves an LVLM's numbers most.
ANSWERS_BY = {
    "score_options": "option likelihood",
    "generate": "generation",
    "embed": "image-text similarity",
}


def shown_text(value) -> str | None:
    """A record's value as a prompt shows it (`Protocol.prompt_fields`): a non-blank text, else None
    (nothing)."""
    return value if isinstance(value, str) and value.strip() else None


def prediction_row(
    item_id: str,
    *,
    variant: str = DEFAULT_VARIANT,
    raw: str | None = None,
    prediction: str | None = None,
    prediction_index: int = -1,
    scores: Sequence[float] | None = None,
    topk: Sequence[int] | None = None,
    error: str | None = None,
) -> dict:
    return {
        "id": item_id,
        "variant": variant,
        "raw": raw,
        "prediction": prediction,
        "prediction_index": int(prediction_index),
        "scores": None if scores is None else [float(s) for s in scores],
        "topk": None if topk is None else [int(k) for k in topk],
        "error": error,
    }


def error_row(item_id: str, error: str, variant: str = DEFAULT_VARIANT) -> dict:
    return prediction_row(item_id, variant=variant, error=error)


# Images are decoded by this many threads (PIL releases the GIL while it decodes): one core decoding a chunk
# would keep an accelerator waiting for longer than the model takes.
IMAGE_THREADS = min(16, os.cpu_count() or 1)


def image_problem(bench, relative: str, problem: str) -> str:
    """Why an image is unusable, with where prepare read it when the folder records that (a stored copy's
    name, images/<sha256>.<ext>, says nothing): "image unreadable: data/b/images/94bf....jpg (from
    raw/x.parquet row 7, '7.jpg'): ..."."""
    from vlmgrid.image_sources import image_source

    source = image_source(bench.root, str(relative))
    if source is None:
        return problem
    path = str(bench.root / relative)
    if path in problem:
        return problem.replace(path, f"{path} (from {source})", 1)
    return f"{problem} (image from {source})"


def _no_image(relative) -> bool:
    return relative is None or (isinstance(relative, float) and pd.isna(relative))


def image_alpha(model) -> str:
    """How the model's images lose their transparency: its entry's `image_alpha`, else its backend's
    (vlmgrid.images.ALPHA_MODES)."""
    return getattr(model, "settings", {}).get("image_alpha") or getattr(model, "image_alpha", "drop")


def _open_image(bench, relative, alpha: str) -> tuple[Any, str | None]:
    if _no_image(relative):
        return None, None
    try:
        return open_rgb(bench.root / relative, alpha), None
    except ImageError as exc:
        return None, image_problem(bench, relative, str(exc))


def load_images(bench, records: pd.DataFrame, alpha: str = "drop") -> tuple[list, list[str | None]]:
    """The chunk's images (None where there is none or it is broken) and, per item, why it is unusable;
    `alpha`: how a transparent one becomes RGB (image_alpha)."""
    relatives = list(records["image"])
    with ThreadPoolExecutor(max_workers=max(1, min(IMAGE_THREADS, len(relatives)))) as pool:
        opened = list(pool.map(lambda relative: _open_image(bench, relative, alpha), relatives))
    return [image for image, _ in opened], [problem for _, problem in opened]


def _opened(bench, relative, alpha: str):
    image, problem = _open_image(bench, relative, alpha)
    if problem is not None:
        raise ImageError(problem)
    return image


def _answered(model, bench, records: pd.DataFrame, answer, request_of) -> tuple[dict, list[str | None]]:
    """The model's results by record index (`answer` of the requests `request_of(i, image)` builds) and, per
    record, why its image is unusable.

    A model that takes images still being opened (`accepts_image_futures`) gets each as a future, opened by
    threads in record order, so that its first batch need not wait for the part's last image. Where one turns
    out unusable, the part is answered again as for any model (unusable items not sent), from the images
    already opened: the batches, and so the answers, are always those.
    """
    if getattr(model, "accepts_image_futures", False):
        relatives = list(records["image"])
        with ThreadPoolExecutor(max_workers=max(1, min(IMAGE_THREADS, len(relatives)))) as pool:
            futures = [
                None if _no_image(relative) else pool.submit(_opened, bench, relative, image_alpha(model))
                for relative in relatives
            ]
            requests = [request_of(i, future) for i, future in enumerate(futures)]
            try:
                results = dict(enumerate(answer(requests))) if requests else {}
            except ImageError:
                results = None
        opened = [(None, None) if future is None else _outcome(future) for future in futures]
        images, problems = [image for image, _ in opened], [problem for _, problem in opened]
        if results is not None and all(problem is None for problem in problems):
            return results, problems
    else:
        images, problems = load_images(bench, records, image_alpha(model))
    usable = [i for i, problem in enumerate(problems) if problem is None]
    requests = [request_of(i, images[i]) for i in usable]
    return (dict(zip(usable, answer(requests))) if requests else {}), problems


def _outcome(future) -> tuple[Any, str | None]:
    try:
        return future.result(), None
    except ImageError as exc:
        return None, str(exc)


# --- the cell's own prompt (vlmgrid.prompt_templates) -------------------------------------------------------


def prompt_template(model, bench):
    """The cell's own prompt (its `prompt` setting: a recipe's, or the model entry's), checked; None where the
    protocol's own prompt serves."""
    from vlmgrid.prompt_templates import PromptTemplate

    spec = model.settings.get("prompt")
    if not spec:
        return None
    return PromptTemplate.of(spec, where=f"the prompt of {bench.kind.name} for {model.name}")


def refuse_own_prompt(model, bench, asks_with: str) -> None:
    """A protocol that asks with its own prompt set has no place for a cell's own prompt: one sentence, never
    a prompt silently left unused."""
    if model.settings.get("prompt"):
        raise VlmgridError(
            f"the prompt of {bench.kind.name} for {model.name}: the {bench.kind.protocol} protocol "
            f"asks with {asks_with}, not a prompt of the model's; remove the model's "
            f"kinds.{bench.kind.name}.prompt"
        )


def record_fields(records: pd.DataFrame, i: int, options) -> dict:
    """What a prompt template sees of the i-th record: its columns, its options, their letters and whether it
    has an image."""
    fields = {column: records[column].iloc[i] for column in records.columns}
    options = [str(option) for option in options]
    image = fields.get("image")
    return {
        **fields,
        "options": options,
        "letters": list(LETTERS[: len(options)]),
        "has_image": not _no_image(image) and image != "",
    }


def own_prompt(model, bench, default):
    """The i-th item's prompt, `prompt_of(records, i, options)`: the cell's own template rendered where it has
    one that writes the text, else `default(records, i, options)` (the protocol's own prompt)."""
    template = prompt_template(model, bench)
    if template is None or not template.writes_text:
        return default
    return lambda records, i, options: template.render(record_fields(records, i, options))


def answers_as_written(model, bench):
    """`scored(options)`: the texts option likelihood scores for a question's options: as the model writes
    them where its prompt says so (`answers`: "Yes", "No"), else the options themselves."""
    template = prompt_template(model, bench)
    if template is None or template.answers is None:
        return tuple
    answers = template.answers

    def scored(options) -> tuple[str, ...]:
        if len(answers) != len(options):
            raise VlmgridError(
                f"{template.where}: `answers` lists {len(answers)} texts, but item options number "
                f"{len(options)}"
            )
        return answers

    return scored


def prompt_fields(prompt) -> dict:
    """A request's prompt fields from a rendered prompt (vlmgrid.prompt_templates.Rendered) or a plain
    text."""
    if isinstance(prompt, str):
        return {"prompt": prompt}
    fields = {"prompt": prompt.text, "image_at": prompt.image_at, "formatted": prompt.formatted}
    if prompt.system is not None:
        fields["system"] = prompt.system
    return fields


def score_items(
    model, bench, records: pd.DataFrame, prompt_of, options_of, letters_of=lambda i: None
) -> list[tuple[list | None, str | None]]:
    """Per item: the model's option scores, or None and why the item could not be scored.

    prompt_of(i), options_of(i) and letters_of(i) give the i-th item's prompt (a text, or a rendered
    template), options and the labels to score as the next token (None: score the option texts as
    continuations); unusable items are not sent. The score of an option is its length-normalised
    log-likelihood (per token), so options of different lengths compete fairly; for single-token letters it is
    the plain log-probability.
    """
    from vlmgrid.model_requests import OptionRequest

    results, problems = _answered(
        model,
        bench,
        records,
        model.score_results,
        lambda i, image: OptionRequest(
            records["id"].iloc[i],
            image,
            options=options_of(i),
            letters=letters_of(i),
            **prompt_fields(prompt_of(i)),
        ),
    )
    for i, result in results.items():
        if not result.ok:
            problems[i] = result.error
    return [
        (results[i].scores.normalised if i in results and results[i].ok else None, problems[i])
        for i in range(len(records))
    ]


def generate_items(model, bench, records: pd.DataFrame, prompt_of) -> list[tuple[str | None, str | None]]:
    """Per item: the model's generated text, or None and why there is none (broken image, failed request)."""
    from vlmgrid.model_requests import GenerateRequest

    results, problems = _answered(
        model,
        bench,
        records,
        model.generate_results,
        lambda i, image: GenerateRequest(records["id"].iloc[i], image, **prompt_fields(prompt_of(i))),
    )
    for i, result in results.items():
        if not result.ok:
            problems[i] = result.error
    return [
        (results[i].text if i in results and results[i].ok else None, problems[i])
        for i in range(len(records))
    ]


def parser_for(bench, default: str):
    """The benchmark's own answer parser (its official rule), else the protocol's default."""
    from vlmgrid.protocols.parsing import PARSERS

    return PARSERS.get(getattr(bench.kind, "parser", "") or default)


def parsed_rows(records: pd.DataFrame, results, parse, options_of) -> list[dict]:
    """Prediction rows from generated texts: the raw text is always kept; unparsable text is a format
    error."""
    rows = []
    for i, (item_id, (text, problem)) in enumerate(zip(records["id"], results)):
        if text is None:
            rows.append(error_row(item_id, problem))
            continue
        parsed = parse(text, options_of(i))
        rows.append(
            prediction_row(item_id, raw=text, prediction=parsed.prediction, prediction_index=parsed.index)
        )
    return rows


def topk_indices(scores, k: int = 5):
    """Indices of the k best scores per row, best first (ties broken by the lower index)."""
    import numpy as np

    scores = np.asarray(scores)
    k = min(k, scores.shape[1])
    order = np.argsort(-scores, axis=1, kind="stable")
    return order[:, :k]
