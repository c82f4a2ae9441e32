"""Zero-shot classification.

- embed (contrastive models): the classifier for a class is the normalised mean of the normalised text
  embeddings of its prompt templates (CLIP's recipe); the prediction is the class of highest cosine
  similarity.
- generate / score_options (generative LVLMs, API models, baselines): CARPE's protocol. Every item is asked
  with each template of the prompt set `config/prompts/lvlm_classification.yaml`, one prediction variant per
  template. Open-world templates give no candidates: the model answers freely and `match_class` maps the
  answer to a class name (normalisation, plurals, the benchmark's synonyms); an answer that names no class,
  or two, is a format error. Closed-world templates list every class name: the class names are scored as
  the answer's continuation (length-normalised log-likelihood) when the model can score options, else the
  generated answer is matched the same way. A benchmark with more classes than the prompt set's
  `max_candidates` (ImageNet's 1,000 names would make a prompt of about 8,000 tokens and 1,000 continuations
  per template) is asked a `max_candidates`-way closed-world question instead: the gold class and
  max_candidates - 1 other classes drawn with a seed from the item id, listed in class order, so the
  position of the gold class tells nothing. `answer_mode: likelihood` scores the open-world templates too;
  `answer_mode: generate` generates for the closed-world ones too. The cell's headline is the mean over
  the templates; each template is reported on its own as well.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vlmgrid.cache import cache_root
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import atomic_path, sha256_json
from vlmgrid.prompts import DEFAULT_PROMPTS_DIR, load_prompts, prompts_file
from vlmgrid.protocols.base import (
    Protocol,
    error_row,
    image_alpha,
    image_problem,
    load_images,
    prediction_row,
    refuse_own_prompt,
    topk_indices,
)
from vlmgrid.protocols.parsing import match_class


def class_prompt_texts(classes: list[str], templates: list[str]) -> list[str]:
    return [template.format(c=name) for name in classes for template in templates]


def zero_shot_weights(model, classes: list[str], templates: list[str]) -> np.ndarray:
    """(n_classes, dim) unit vectors: mean of each class's normalised template embeddings, renormalised.

    Cached on disk per model identity + class names + templates, so ImageNet's 1,000 x 80 prompts are
    embedded once per model, not once per run.
    """
    identity = model.identity()
    cache_file = None
    if identity is not None:
        key = sha256_json({"model": identity, "classes": list(classes), "templates": list(templates)})
        cache_file = cache_root() / "classifiers" / f"{key}.npy"
        if cache_file.is_file():
            try:
                return np.load(cache_file)
            except (OSError, ValueError):
                pass  # a damaged cache entry is recomputed and replaced
    embeddings = model.embed_texts(class_prompt_texts(classes, templates))
    embeddings = embeddings.reshape(len(classes), len(templates), -1).mean(axis=1)
    weights = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    if cache_file is not None:
        with atomic_path(cache_file) as tmp:
            with open(tmp, "wb") as handle:
                np.save(handle, weights)
    return weights


def _rows_from_scores(ids, scores: np.ndarray, classes: list[str]) -> list[dict]:
    best = topk_indices(scores)
    return [
        prediction_row(item_id, prediction=classes[top[0]], prediction_index=top[0], topk=top)
        for item_id, top in zip(ids, best)
    ]


def _embedded_images(model, bench, records: pd.DataFrame) -> tuple[list[int], np.ndarray | None, list]:
    """The items with a usable image, their embeddings (in that order) and, per item, why it has none.

    A backend that reads image files itself (`embed_image_files`) decodes them in parallel, ahead of the
    model; otherwise the images are opened here and handed over decoded.
    """
    read_files = getattr(model, "embed_image_files", None)
    if read_files is None:
        images, problems = load_images(bench, records, image_alpha(model))
        usable = [i for i, image in enumerate(images) if image is not None]
        return usable, (model.embed_images([images[i] for i in usable]) if usable else None), problems
    relatives = list(records["image"])  # once: a column's .iloc per item costs more than the item's copy
    named = [i for i, relative in enumerate(relatives) if isinstance(relative, str)]
    problems: list = [None] * len(records)
    if not named:
        return [], None, problems
    features, file_problems = read_files([bench.root / relatives[i] for i in named])
    for i, problem in zip(named, file_problems):
        problems[i] = None if problem is None else image_problem(bench, relatives[i], problem)
    usable = [k for k, problem in enumerate(file_problems) if problem is None]
    return [named[k] for k in usable], features[usable], problems


def embed_strategy(model, bench):
    classes = bench.classes
    weights = zero_shot_weights(model, classes, list(bench.kind.templates))

    def run(records: pd.DataFrame) -> list[dict]:
        usable, features, problems = _embedded_images(model, bench, records)
        rows: dict[int, dict] = {}
        if usable:
            scores = features @ weights.T
            for i, row in zip(usable, _rows_from_scores(records["id"].iloc[usable], scores, classes)):
                rows[i] = row
        for i, problem in enumerate(problems):
            if i not in rows:
                rows[i] = error_row(records["id"].iloc[i], problem or "item has no image")
        return [rows[i] for i in range(len(records))]

    return run


PROMPT_SET = "lvlm_classification"
CANDIDATES = "{candidates}"
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class ClassificationPrompts:
    """The LVLM classification templates: {variant: text}, open-world first, then closed-world."""

    open: Mapping[str, str]
    closed: Mapping[str, str]
    separator: str = ", "
    max_candidates: int | None = None  # None: every class is a candidate

    @classmethod
    def from_mapping(cls, data: Mapping, where: str) -> ClassificationPrompts:
        unknown = set(data) - {"open", "closed", "candidates_separator", "max_candidates"}
        if unknown:
            raise VlmgridError(
                f"{where}: unknown key {sorted(unknown)[0]!r}; the keys are open, closed, "
                f"candidates_separator, max_candidates"
            )
        sections = {}
        for section in ("open", "closed"):
            entries = data.get(section) or {}
            if not isinstance(entries, Mapping):
                raise VlmgridError(f"{where}: `{section}` must map variant names to templates")
            for name, text in entries.items():
                if not isinstance(name, str) or not _VARIANT_NAME.match(name):
                    raise VlmgridError(
                        f"{where}: {section}.{name}: a variant name is lowercase letters, digits and '-'"
                    )
                if not isinstance(text, str) or not text.strip():
                    raise VlmgridError(f"{where}: {section}.{name}: the template must be a non-empty string")
                if (text.count(CANDIDATES) == 1) != (section == "closed"):
                    rule = (
                        "must hold {candidates} exactly once"
                        if section == "closed"
                        else "must not hold {candidates}"
                    )
                    raise VlmgridError(f"{where}: {section}.{name}: a {section}-world template {rule}")
            sections[section] = dict(entries)
        clash = set(sections["open"]) & set(sections["closed"])
        if clash:
            raise VlmgridError(
                f"{where}: variant {sorted(clash)[0]!r} is both open and closed; names must be unique"
            )
        if not sections["open"] and not sections["closed"]:
            raise VlmgridError(f"{where}: holds no template; give `open` and/or `closed` templates")
        separator = data.get("candidates_separator", ", ")
        if not isinstance(separator, str):
            raise VlmgridError(f"{where}: `candidates_separator` must be a string")
        limit = data.get("max_candidates")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 2):
            raise VlmgridError(
                f"{where}: `max_candidates` must be an integer of at least 2, or absent for all classes"
            )
        return cls(
            open=sections["open"], closed=sections["closed"], separator=separator, max_candidates=limit
        )

    def candidates(self, n_classes: int, item_id: str, gold: int) -> list[int]:
        """The class indices a closed-world question about this item lists, in class order."""
        if self.max_candidates is None or n_classes <= self.max_candidates or not 0 <= gold < n_classes:
            return list(range(n_classes))
        rng = np.random.default_rng(list(hashlib.sha256(item_id.encode("utf-8")).digest()[:8]))
        others = np.delete(np.arange(n_classes), gold)
        drawn = rng.choice(others, size=self.max_candidates - 1, replace=False)
        return sorted([gold, *map(int, drawn)])

    def fill(self, template: str, names: list[str]) -> str:
        return template.replace(CANDIDATES, self.separator.join(names))


def classification_prompts(prompts_dir: Path | str = DEFAULT_PROMPTS_DIR) -> ClassificationPrompts:
    return ClassificationPrompts.from_mapping(
        load_prompts(PROMPT_SET, prompts_dir), str(prompts_file(PROMPT_SET, prompts_dir))
    )


def answer_methods(model) -> tuple[str, str]:
    """How (open-world, closed-world) templates are answered: "generate" or "score_options"."""
    capabilities = model.model_capabilities
    mode = model.settings.get("answer_mode")
    open_method = "generate" if "generate" in capabilities and mode != "likelihood" else "score_options"
    closed_method = "score_options" if "score_options" in capabilities and mode != "generate" else "generate"
    return open_method, closed_method


def templated_strategy(model, bench):
    from vlmgrid.model_requests import GenerateRequest, OptionRequest

    refuse_own_prompt(
        model, bench, "the templates of its prompt set (config/prompts/lvlm_classification.yaml)"
    )
    classes = list(bench.classes)
    synonyms = getattr(bench, "synonyms", None) or {}
    prompt_set = classification_prompts(getattr(bench, "prompts_dir", DEFAULT_PROMPTS_DIR))
    templates = [(name, text, True) for name, text in prompt_set.open.items()] + [
        (name, text, False) for name, text in prompt_set.closed.items()
    ]
    open_method, closed_method = answer_methods(model)
    # A class name is scored as the answer's continuation; the space is the one that follows the
    # assistant's turn marker, which byte-level tokenizers fold into the first word.
    continuation = {k: f" {name}" for k, name in enumerate(classes)}

    def run(records: pd.DataFrame) -> list[dict]:
        images, problems = load_images(bench, records, image_alpha(model))
        ids = list(records["id"])
        for i, image in enumerate(images):
            if image is None and problems[i] is None:
                problems[i] = "item has no image"
        usable = [i for i, problem in enumerate(problems) if problem is None]
        gold = [int(g) for g in records["answer_index"]]
        shown = {i: prompt_set.candidates(len(classes), ids[i], gold[i]) for i in usable}
        everything = list(range(len(classes)))
        # One call per method for the whole chunk, so the backend batches across templates and items
        # (and reuses each image's encoding where it can).
        asked: dict[str, list[tuple[str, int, list[int], str]]] = {"generate": [], "score_options": []}
        for variant, text, open_world in templates:
            method = open_method if open_world else closed_method
            for i in usable:
                candidates = everything if open_world else shown[i]
                prompt = text if open_world else prompt_set.fill(text, [classes[k] for k in candidates])
                asked[method].append((variant, i, candidates, prompt))
        generated = (
            model.generate_results(
                [
                    GenerateRequest(ids[i], images[i], prompt, variant=variant)
                    for variant, i, _, prompt in asked["generate"]
                ]
            )
            if asked["generate"]
            else []
        )
        scored = (
            model.score_results(
                [
                    OptionRequest(
                        ids[i], images[i], prompt, [continuation[k] for k in candidates], variant=variant
                    )
                    for variant, i, candidates, prompt in asked["score_options"]
                ]
            )
            if asked["score_options"]
            else []
        )

        rows: dict[tuple[str, int], dict] = {}
        for (variant, i, candidates, _), result in zip(asked["generate"], generated):
            if not result.ok:
                rows[variant, i] = error_row(ids[i], result.error, variant)
                continue
            names = [classes[k] for k in candidates]
            parsed = match_class(result.text, names, synonyms)
            index = candidates[parsed.index] if parsed.index >= 0 else -1
            rows[variant, i] = prediction_row(
                ids[i], variant=variant, raw=result.text, prediction=parsed.prediction, prediction_index=index
            )
        for (variant, i, candidates, _), result in zip(asked["score_options"], scored):
            if not result.ok:
                rows[variant, i] = error_row(ids[i], result.error, variant)
                continue
            top = [candidates[k] for k in topk_indices(np.asarray([result.scores.normalised]))[0]]
            rows[variant, i] = prediction_row(
                ids[i], variant=variant, prediction=classes[top[0]], prediction_index=top[0], topk=top
            )
        return [
            rows.get((variant, i)) or error_row(ids[i], problems[i], variant)
            for variant, _, _ in templates
            for i in range(len(records))
        ]

    methods = {open_method if open_world else closed_method for _, _, open_world in templates}
    run.strategy = (
        methods.pop() if len(methods) == 1 else f"open-world: {open_method}; closed-world: {closed_method}"
    )
    return run


def _variant_sets(bench) -> list[frozenset[str]]:
    """An embedding model's one classifier ("default"), or a generative model's every template."""
    prompt_set = classification_prompts(getattr(bench, "prompts_dir", DEFAULT_PROMPTS_DIR))
    return [frozenset({"default"}), frozenset([*prompt_set.open, *prompt_set.closed])]


CLASSIFICATION = Protocol(
    name="classification",
    description="zero-shot classification over the benchmark's class names",
    strategies={"embed": embed_strategy, "generate": templated_strategy, "score_options": templated_strategy},
    variant_sets=_variant_sets,
    # the templates answer half by generation (open-world) and half by the class names' likelihood
    # (closed-world), unless the model's answer_mode puts one way first for both (answer_methods)
    methods={
        **{
            capability: "templates: open-world generation, closed-world likelihood"
            for capability in ("generate", "score_options")
        },
        **{
            (capability, "generate"): "generation (open- and closed-world templates)"
            for capability in ("generate", "score_options")
        },
        **{
            (capability, "likelihood"): "likelihood (open- and closed-world templates)"
            for capability in ("generate", "score_options")
        },
    },
)
