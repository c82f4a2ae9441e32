"""Choosing one of a question's options: multiple choice (A, B, C, ...) and yes/no.

- embed (contrastive models): the option whose text "question option" is most similar to the image;
- score_options (generative models, API models with logprobs, baselines): multiple choice shows the lettered
  options in the prompt (with the item's context when it has one, as LLaVA's ScienceQA prompt does) and
  scores the letters as the next token, in one forward pass; yes/no asks for a one-word answer and scores
  "yes" against "no" the same way;
- generate (generative and API models with `answer_mode: generate`, or without log-likelihoods): the same
  prompts, free generation, and the benchmark's own parser (its official rule) reads the answer; the raw text
  is kept and an unreadable answer is a format error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vlmgrid.protocols.base import (
    LETTERS,
    Protocol,
    answers_as_written,
    error_row,
    generate_items,
    image_alpha,
    load_images,
    own_prompt,
    parsed_rows,
    parser_for,
    prediction_row,
    score_items,
    shown_text,
)


def option_texts(question: str, options) -> list[str]:
    return [f"{question} {option}".strip() for option in options]


def _choice_row(item_id: str, options, scores) -> dict:
    best = int(np.argmax(scores))
    return prediction_row(item_id, prediction=str(options[best]), prediction_index=best, scores=scores)


def embed_strategy(model, bench):
    def run(records: pd.DataFrame) -> list[dict]:
        images, problems = load_images(bench, records, image_alpha(model))
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


MC_INSTRUCTION = "Answer with the option's letter from the given choices directly."
YES_NO_INSTRUCTION = "Answer the question using a single word or phrase."


# The item's context (MMBench's hint, ScienceQA's), shown before the question under this label.
CONTEXT_FIELD, CONTEXT_LABEL = "hint", "Context"


def multiple_choice_prompt(question: str, options, context: str | None = None) -> str:
    lines = [f"{CONTEXT_LABEL}: {context}"] if context else []
    lines.append(question)
    lines.extend(f"{letter}. {option}" for letter, option in zip(LETTERS, options))
    lines.append(MC_INSTRUCTION)
    return "\n".join(lines)


# MME's own instruction, ending each of its questions. LLaVA-1.5 replaced it by the short-answer instruction
# rather than asking twice (its MME question file and answers hold "<question>\n" + YES_NO_INSTRUCTION), and
# lmms-eval does the same.
MME_INSTRUCTION = "Please answer yes or no."


def yes_no_prompt(question: str) -> str:
    kept = question.rstrip()
    if kept.endswith(MME_INSTRUCTION):
        question = kept[: -len(MME_INSTRUCTION)].rstrip()
    return f"{question}\n{YES_NO_INSTRUCTION}"


def _context(records: pd.DataFrame, i: int) -> str | None:
    if CONTEXT_FIELD not in records.columns:
        return None
    return shown_text(records[CONTEXT_FIELD].iloc[i])


def _option_runner(model, bench, prompt_of, letters_of):
    def run(records: pd.DataFrame) -> list[dict]:
        options = [list(item_options) for item_options in records["options"]]
        results = score_items(
            model,
            bench,
            records,
            lambda i: prompt_of(records, i, options[i]),
            lambda i: options[i],
            lambda i: letters_of(options[i]),
        )
        return [
            error_row(item_id, problem) if scores is None else _choice_row(item_id, options[i], scores)
            for i, (item_id, (scores, problem)) in enumerate(zip(records["id"], results))
        ]

    return run


def _multiple_choice_prompt(records, i, options) -> str:
    return multiple_choice_prompt(records["question"].iloc[i], options, _context(records, i))


def _yes_no_prompt(records, i, options) -> str:
    return yes_no_prompt(records["question"].iloc[i])


def multiple_choice_option_strategy(model, bench):
    return _option_runner(
        model,
        bench,
        own_prompt(model, bench, _multiple_choice_prompt),
        lambda options: tuple(LETTERS[: len(options)]),
    )


def yes_no_option_strategy(model, bench):
    # "yes" and "no" are single tokens in every tokenizer we support; a prompt may say the model writes them
    # otherwise ("Yes", "No"), and those are scored
    return _option_runner(
        model, bench, own_prompt(model, bench, _yes_no_prompt), answers_as_written(model, bench)
    )


def _generate_runner(model, bench, prompt_of, parse):
    def run(records: pd.DataFrame) -> list[dict]:
        options = [list(item_options) for item_options in records["options"]]
        results = generate_items(model, bench, records, lambda i: prompt_of(records, i, options[i]))
        return parsed_rows(records, results, parse, lambda i: options[i])

    return run


def multiple_choice_generate_strategy(model, bench):
    return _generate_runner(
        model, bench, own_prompt(model, bench, _multiple_choice_prompt), parser_for(bench, "letter")
    )


def yes_no_generate_strategy(model, bench):
    return _generate_runner(model, bench, own_prompt(model, bench, _yes_no_prompt), parser_for(bench, "pope"))


MULTIPLE_CHOICE = Protocol(
    name="multiple_choice",
    description="pick one of the item's options",
    strategies={
        "score_options": multiple_choice_option_strategy,
        "generate": multiple_choice_generate_strategy,
        "embed": embed_strategy,
    },
    prompt_fields=((CONTEXT_FIELD, CONTEXT_LABEL),),
)

YES_NO = Protocol(
    name="yes_no",
    description="answer a yes/no question",
    strategies={
        "score_options": yes_no_option_strategy,
        "generate": yes_no_generate_strategy,
        "embed": embed_strategy,
    },
)
