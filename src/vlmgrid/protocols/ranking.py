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
from vlmgrid.protocols.base import Protocol, error_row, prediction_row

PROMPT_SET = "dance_relations"
TO_IMAGE = "riddle-to-image"


def ranking_prompt(prompts_dir: Path | str = DEFAULT_PROMPTS_DIR) -> str:
    """The text a generative model sees with the picture before the riddle (dance_relations.yaml, `prompt`)."""
    prompt = load_prompts(PROMPT_SET, prompts_dir).get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise VlmgridError(f"{prompts_file(PROMPT_SET, prompts_dir)}: `prompt` must be the non-empty text shown "
                           f"with the picture before a riddle")
    return prompt


def _pictures(bench, records: pd.DataFrame) -> tuple[dict, dict]:
    """Every picture the chunk's queries need, opened once: ({path: image}, {path: why it is unusable})."""
    needed = set()
    for direction, image, options in zip(records["direction"], records["image"], records["options"]):
        needed.update(options if direction == TO_IMAGE else [image])
    opened, broken = {}, {}
    for relative in sorted(needed):
        try:
            opened[relative] = open_rgb(bench.root / relative)
        except ImageError as exc:
            broken[relative] = str(exc)
    return opened, broken


def _problem(direction: str, image, options, broken: dict) -> str | None:
    for relative in (options if direction == TO_IMAGE else [image]):
        if relative in broken:
            return broken[relative]
    return None


def _ranked_row(item_id: str, options, scores) -> dict:
    best = int(np.argmax(scores))
    return prediction_row(item_id, prediction=str(options[best]), prediction_index=best, scores=scores)


def embed_strategy(model, bench):
    def run(records: pd.DataFrame) -> list[dict]:
        opened, broken = _pictures(bench, records)
        paths = sorted(opened)
        picture_row = {path: k for k, path in enumerate(paths)}
        picture_features = model.embed_images([opened[p] for p in paths]) if paths else None
        texts = sorted({text for direction, question, options in
                        zip(records["direction"], records["question"], records["options"])
                        for text in ([question] if direction == TO_IMAGE else options)})
        text_row = {text: k for k, text in enumerate(texts)}
        text_features = model.embed_texts(texts) if texts else None
        rows = []
        for item_id, direction, question, image, options in zip(
                records["id"], records["direction"], records["question"], records["image"], records["options"]):
            options = list(options)
            problem = _problem(direction, image, options, broken)
            if problem is not None:
                rows.append(error_row(item_id, problem))
                continue
            if direction == TO_IMAGE:
                scores = picture_features[[picture_row[p] for p in options]] @ text_features[text_row[question]]
            else:
                scores = text_features[[text_row[t] for t in options]] @ picture_features[picture_row[image]]
            rows.append(_ranked_row(item_id, options, scores))
        return rows

    return run


def likelihood_strategy(model, bench):
    from vlmgrid.models.base import OptionRequest

    prompt = ranking_prompt(getattr(bench, "prompts_dir", DEFAULT_PROMPTS_DIR))

    def run(records: pd.DataFrame) -> list[dict]:
        opened, broken = _pictures(bench, records)
        requests, owners, problems = [], [], {}
        for i, (item_id, direction, question, image, options) in enumerate(zip(
                records["id"], records["direction"], records["question"], records["image"], records["options"])):
            options = list(options)
            problems[i] = _problem(direction, image, options, broken)
            if problems[i] is not None:
                continue
            # The riddle is the answer's continuation; the space is the one that follows the assistant's turn
            # marker, which byte-level tokenizers fold into the first word.
            if direction == TO_IMAGE:
                for k, path in enumerate(options):  # one request per picture: ids differ so baselines differ
                    requests.append(OptionRequest(f"{item_id}#{k}", opened[path], prompt, [f" {question}"]))
                    owners.append(i)
            else:
                requests.append(OptionRequest(item_id, opened[image], prompt, [f" {text}" for text in options]))
                owners.append(i)
        results = model.score_results(requests) if requests else []
        scores: dict[int, list[float]] = {}
        for i, result in zip(owners, results):
            if not result.ok:
                problems[i] = problems[i] or result.error
                continue
            scores.setdefault(i, []).extend(result.scores.normalised)
        rows = []
        for i, item_id in enumerate(records["id"]):
            if problems[i] is not None:
                rows.append(error_row(item_id, problems[i]))
            else:
                rows.append(_ranked_row(item_id, list(records["options"].iloc[i]), scores[i]))
        return rows

    return run


RANKING = Protocol(
    name="ranking",
    description="rank a query's candidates: riddle -> pictures or picture -> riddles (DANCE)",
    strategies={"embed": embed_strategy, "score_options": likelihood_strategy},
)
