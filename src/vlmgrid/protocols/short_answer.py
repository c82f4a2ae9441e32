"""Short-answer VQA (TextVQA): generate a word or phrase; the benchmark's parser keeps the answer text.

Scoring (normalisation, the ten human answers) belongs to the metric, so the raw text is kept untouched.
"""

from __future__ import annotations

import pandas as pd

from vlmgrid.protocols.base import Protocol, generate_items, own_prompt, parsed_rows, parser_for

SHORT_ANSWER_INSTRUCTION = "Answer the question using a single word or phrase."


def short_answer_prompt(question: str) -> str:
    return f"{question}\n{SHORT_ANSWER_INSTRUCTION}"


def generate_strategy(model, bench):
    parse = parser_for(bench, "short_answer")
    prompt_of = own_prompt(
        model, bench, lambda records, i, options: short_answer_prompt(records["question"].iloc[i])
    )

    def run(records: pd.DataFrame) -> list[dict]:
        results = generate_items(model, bench, records, lambda i: prompt_of(records, i, []))
        return parsed_rows(records, results, parse, lambda i: [])

    return run


SHORT_ANSWER = Protocol(
    name="short_answer",
    description="answer with a word or phrase (VQA)",
    strategies={"generate": generate_strategy},
)
