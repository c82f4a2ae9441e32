"""Ranking (DANCE): every query ranks its candidates, in one of two directions.

A record is one query (benchmarks/dance.py): `direction` "riddle-to-image" (the riddle is the `question`,
the candidates in `options` are picture paths) or "image-to-riddle" (the picture is the `image`, the
candidates are riddle texts). A prediction row holds one score per candidate (`scores`, in candidate
order, higher is better) and the best candidate as the prediction; the metric ranks by the scores.

- embed (contrastive models): cosine similarity of the riddle's and the picture's embeddings. Every
  picture and every text of a chunk is embedded once, however many queries share it.
- score_options (generative models): the per-token log-likelihood of the riddle, as the answer's
  continuation, given the picture and the prompt of config/prompts/dance_relations.yaml (`prompt`).
  Image-to-riddle is one request with the 50 riddles as options: the picture + prompt prefix is computed
  once and reused for every riddle, so 50 candidates cost about one picture pass. Riddle-to-image cannot
  share a prefix: the one riddle is scored under each of the 50 pictures, 50 requests (50 picture passes)
  per query, so that direction costs about 50 times the other.

A query whose picture (or one of whose candidate pictures) cannot be read is an error row: a format error,
scored as wrong.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.images import ImageError, open_rgb
from vlmgrid.prompts import DEFAULT_PROMPTS_DIR, load_prompts, prompts_file
from vlmgrid.protocols.base import (
    Protocol,
    error_row,
    image_alpha,
    image_problem,
    prediction_row,
    refuse_own_prompt,
)

PROMPT_SET = "dance_relations"
TO_IMAGE = "riddle-to-image"


def ranking_prompt(prompts_dir: Path | str = DEFAULT_PROMPTS_DIR) -> str:
    """The text a generative model sees with the picture before the riddle (dance_relations.yaml,
    `prompt`)."""
    prompt = load_prompts(PROMPT_SET, prompts_dir).get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise VlmgridError(
            f"{prompts_file(PROMPT_SET, prompts_dir)}: `prompt` must be the non-empty text shown "
            f"with the picture before a riddle"
        )
    return prompt


# Pictures are opened and embedded this many at a time: a chunk of riddle-to-image queries names up to 50
# pictures each, too many to hold decoded at once.
PICTURE_BATCH = 64


def _open(bench, relative: str, broken: dict, alpha: str):
    """The picture, or None after noting in `broken` why it cannot be read; `alpha`: image_alpha."""
    try:
        return open_rgb(bench.root / relative, alpha)
    except ImageError as exc:
        broken[relative] = image_problem(bench, relative, str(exc))
        return None


def _pictures_of(direction: str, image, options) -> list:
    return list(options) if direction == TO_IMAGE else [image]


def _problem(direction: str, image, options, broken: dict) -> str | None:
    for relative in _pictures_of(direction, image, options):
        if relative in broken:
            return broken[relative]
    return None


def _ranked_row(item_id: str, options, scores) -> dict:
    best = int(np.argmax(scores))
    return prediction_row(item_id, prediction=str(options[best]), prediction_index=best, scores=scores)


def _queries(records: pd.DataFrame):
    return zip(records["id"], records["direction"], records["question"], records["image"], records["options"])


def _picture_features(model, bench, paths: list[str]) -> tuple[dict, dict]:
    """{path: embedding} of the readable pictures, each embedded once, and {path: why} of the others.

    A backend that reads image files itself (`embed_image_files`) streams them, decoding ahead of the model
    and holding a few batches at a time; otherwise they are opened here PICTURE_BATCH at a time.
    """
    picture_features, broken = {}, {}
    read_files = getattr(model, "embed_image_files", None)
    if read_files is not None:
        if paths:
            features, problems = read_files([bench.root / p for p in paths])
            for p, row, problem in zip(paths, features, problems):
                if problem is None:
                    picture_features[p] = row
                else:
                    broken[p] = image_problem(bench, p, problem)
        return picture_features, broken
    for start in range(0, len(paths), PICTURE_BATCH):
        opened = {
            p: _open(bench, p, broken, image_alpha(model)) for p in paths[start : start + PICTURE_BATCH]
        }
        usable = [p for p, picture in opened.items() if picture is not None]
        if usable:
            picture_features.update(zip(usable, model.embed_images([opened[p] for p in usable])))
    return picture_features, broken


def embed_strategy(model, bench):
    def run(records: pd.DataFrame) -> list[dict]:
        paths = sorted(
            {
                p
                for _, direction, _, image, options in _queries(records)
                for p in _pictures_of(direction, image, options)
            }
        )
        picture_features, broken = _picture_features(model, bench, paths)
        texts = sorted(
            {
                text
                for _, direction, question, _, options in _queries(records)
                for text in ([question] if direction == TO_IMAGE else options)
            }
        )
        text_features = dict(zip(texts, model.embed_texts(texts))) if texts else {}
        rows = []
        for item_id, direction, question, image, options in _queries(records):
            options = list(options)
            problem = _problem(direction, image, options, broken)
            if problem is not None:
                rows.append(error_row(item_id, problem))
                continue
            if direction == TO_IMAGE:
                scores = np.stack([picture_features[p] for p in options]) @ text_features[question]
            else:
                scores = np.stack([text_features[t] for t in options]) @ picture_features[image]
            rows.append(_ranked_row(item_id, options, scores))
        return rows

    return run


# Requests per model call: a call's requests are prepared one ahead of the one the model runs, and its
# pictures are held open together (a riddle-to-pictures query is one request per candidate picture).
CALL_REQUESTS = 64


def likelihood_strategy(model, bench):
    from vlmgrid.model_requests import OptionRequest

    refuse_own_prompt(model, bench, "the prompt of its prompt set (config/prompts/dance_relations.yaml)")
    prompt = ranking_prompt(getattr(bench, "prompts_dir", DEFAULT_PROMPTS_DIR))

    def requests_for(item_id, direction, question, image, options, broken) -> list:
        if direction == TO_IMAGE:
            # One request per picture (its own prefix); the ids differ so that seeded baselines differ. The
            # riddle is the answer's continuation; the space is the one that follows the assistant's turn
            # marker, which byte-level tokenizers fold into the first word.
            pictures = [_open(bench, p, broken, image_alpha(model)) for p in options]
            return [
                OptionRequest(f"{item_id}#{k}", picture, prompt, [f" {question}"])
                for k, picture in enumerate(pictures)
            ]
        # One request: the riddles continue one shared picture + prompt prefix.
        return [
            OptionRequest(
                item_id,
                _open(bench, image, broken, image_alpha(model)),
                prompt,
                [f" {text}" for text in options],
            )
        ]

    def answer(queries: list[tuple]) -> list[dict]:
        """The rows of queries whose requests are made: their requests in one model call, so that the backend
        prepares each next request while one runs."""
        if not queries:
            return []
        results = iter(model.score_results([request for *_, requests in queries for request in requests]))
        rows = []
        for item_id, options, requests in queries:
            mine = [next(results) for _ in requests]
            failed = next((result.error for result in mine if not result.ok), None)
            if failed is not None:
                rows.append(error_row(item_id, failed))
                continue
            rows.append(
                _ranked_row(
                    item_id, options, [score for result in mine for score in result.scores.normalised]
                )
            )
        return rows

    def run(records: pd.DataFrame) -> list[dict]:
        rows: list[dict] = []
        waiting: list[tuple] = []  # queries whose requests go in the next call, at most CALL_REQUESTS in all
        for item_id, direction, question, image, options in _queries(records):
            options, broken = list(options), {}
            requests = requests_for(item_id, direction, question, image, options, broken)
            problem = _problem(direction, image, options, broken)
            if problem is not None:
                rows += answer(waiting)
                waiting = []
                rows.append(error_row(item_id, problem))
                continue
            if waiting and sum(len(queued) for *_, queued in waiting) + len(requests) > CALL_REQUESTS:
                rows += answer(waiting)
                waiting = []
            waiting.append((item_id, options, requests))
        return rows + answer(waiting)

    return run


RANKING = Protocol(
    name="ranking",
    description="rank a query's candidates: riddle -> pictures or picture -> riddles (DANCE)",
    strategies={"embed": embed_strategy, "score_options": likelihood_strategy},
)
