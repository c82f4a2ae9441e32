"""Zero-shot classification.

- embed (contrastive models): the classifier for a class is the normalised mean of the normalised text
  embeddings of its prompt templates (CLIP's recipe); the prediction is the class of highest cosine similarity.
- score_options: the model scores every class name as the answer to a fixed question (length-normalised
  log-likelihood) and the best is the prediction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vlmgrid.cache import cache_root
from vlmgrid.fileio import atomic_path, sha256_json
from vlmgrid.protocols.base import Protocol, error_row, load_images, prediction_row, score_items, topk_indices


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


def embed_strategy(model, bench):
    classes = bench.classes
    weights = zero_shot_weights(model, classes, list(bench.kind.templates))

    def run(records: pd.DataFrame) -> list[dict]:
        images, problems = load_images(bench, records)
        usable = [i for i, image in enumerate(images) if image is not None]
        rows: dict[int, dict] = {}
        if usable:
            features = model.embed_images([images[i] for i in usable])
            scores = features @ weights.T
            for i, row in zip(usable, _rows_from_scores(records["id"].iloc[usable], scores, classes)):
                rows[i] = row
        for i, problem in enumerate(problems):
            if i not in rows:
                rows[i] = error_row(records["id"].iloc[i], problem or "item has no image")
        return [rows[i] for i in range(len(records))]

    return run


CLASSIFICATION_QUESTION = "What is shown in this image? Answer with its name."


def option_strategy(model, bench):
    classes = bench.classes
    # Each class name is scored as the answer's continuation; the space is the one that follows the
    # assistant's turn marker, which byte-level tokenizers fold into the first word.
    continuations = [f" {name}" for name in classes]

    def run(records: pd.DataFrame) -> list[dict]:
        results = score_items(model, bench, records, lambda i: CLASSIFICATION_QUESTION, lambda i: continuations)
        return [
            error_row(item_id, problem) if scores is None
            else _rows_from_scores([item_id], np.asarray([scores]), classes)[0]
            for item_id, (scores, problem) in zip(records["id"], results)
        ]

    return run


CLASSIFICATION = Protocol(
    name="classification",
    description="zero-shot classification over the benchmark's class names",
    strategies={"embed": embed_strategy, "score_options": option_strategy},
)
