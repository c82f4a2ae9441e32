"""Choosing one of a question's options: multiple choice (A, B, C, ...) and yes/no.

- embed (contrastive models): the option whose text "question option" is most similar to the image;
- score_options: the model scores each option after the question and the best is the prediction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vlmgrid.protocols.base import Protocol, error_row, load_images, prediction_row, score_items


def option_texts(question: str, options) -> list[str]:
    return [f"{question} {option}".strip() for option in options]


def _choice_row(item_id: str, options, scores) -> dict:
    best = int(np.argmax(scores))
    return prediction_row(item_id, prediction=str(options[best]), prediction_index=best, scores=scores)


def embed_strategy(model, bench):
    def run(records: pd.DataFrame) -> list[dict]:
        images, problems = load_images(bench, records)
        usable = [i for i, image in enumerate(images) if image is not None]
        image_features = model.embed_images([images[i] for i in usable]) if usable else None
        row_of = {i: k for k, i in enumerate(usable)}
        # All the chunk's option texts go through the text tower in one batched call.
        texts, spans = [], {}
        for i in usable:
            texts_i = option_texts(records["question"].iloc[i], records["options"].iloc[i])
            spans[i] = (len(texts), len(texts) + len(texts_i))
            texts.extend(texts_i)
        text_features = model.embed_texts(texts) if texts else None
        rows = []
        for i in range(len(records)):
            item_id = records["id"].iloc[i]
            if i not in spans:
                rows.append(error_row(item_id, problems[i] or "item has no image; embedding models need one"))
                continue
            start, stop = spans[i]
            similarity = text_features[start:stop] @ image_features[row_of[i]]
            rows.append(_choice_row(item_id, list(records["options"].iloc[i]), similarity))
        return rows

    return run


def option_strategy(model, bench):
    def run(records: pd.DataFrame) -> list[dict]:
        options = [list(item_options) for item_options in records["options"]]
        results = score_items(model, bench, records, lambda i: records["question"].iloc[i], lambda i: options[i])
        return [
            error_row(item_id, problem) if scores is None else _choice_row(item_id, options[i], scores)
            for i, (item_id, (scores, problem)) in enumerate(zip(records["id"], results))
        ]

    return run


MULTIPLE_CHOICE = Protocol(
    name="multiple_choice",
    description="pick one of the item's options",
    strategies={"score_options": option_strategy, "embed": embed_strategy},
)

YES_NO = Protocol(
    name="yes_no",
    description="answer a yes/no question",
    strategies={"score_options": option_strategy, "embed": embed_strategy},
)
