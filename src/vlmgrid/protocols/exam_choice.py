"""In-language exam multiple choice (Kaleidoscope): the prompts of the item's language, read from config data.

The prompt set is `config/prompts/kaleidoscope.yaml` (found through the benchmark's `prompts_dir`): per
language the words for "Question" and "Options" and a step-by-step instruction, and the layout of each
prompt mode. Records need a `language` column naming one of its languages.

- score_options (log-likelihood models, API models with logprobs, baselines): the question and its lettered
  options under the language's words, and the letters scored as the next token;
- generate: one of two prompt modes, as in the authors' code (israfelsr/kaleidoscope):
    json: an English system message asking for `{"choice": "<letter>"}` only; read by the `exam_json` parser;
    tag:  the language's step-by-step instruction as the system message; the answer is read from the first
          `<ANSWER> X </ANSWER>` holding one letter by the `exam_tag` parser, as the authors read it; asks for
          the prompt set's `tag.max_new_tokens` (reasoning needs room), where json mode keeps the model's own
          `generation.max_new_tokens`.
  The model setting `prompt_mode` chooses; without it the openai backend (closed models) gets tag and every
  other backend json. The mode is the predictions' `variant` ("json" or "tag"), so a predictions file says
  which prompts made it; the raw text is kept and an unreadable answer is a format error;
- embed (contrastive models): the option whose "question option" text is most like the image. A text-only
  question has no image to embed, so it is not applicable to this strategy (`scopes`): its row is an error row
  that says so, and the score is over the questions with an image, its `coverage` giving how many and why
  (the authors evaluate LVLMs, which answer the text-only questions too).

A literal "<image>" in a question or option (left in some exam texts) is removed: a processor would read it
as an image placeholder.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.prompts import load_prompts, prompts_file
from vlmgrid.protocols.base import (
    Protocol,
    Scope,
    error_row,
    image_alpha,
    load_images,
    own_prompt,
    prediction_row,
    prompt_fields,
    prompt_template,
    record_fields,
    score_items,
)
from vlmgrid.protocols.choice import embed_strategy
from vlmgrid.protocols.parsing import LETTERS
from vlmgrid.protocols.parsing.exam import parse_exam_json, parse_exam_tag

PROMPT_SET = "kaleidoscope"
PLACEHOLDERS = frozenset({"instruction", "question_word", "question", "options_word", "options"})
# Which parser reads each prompt mode's answers (registered as exam_json and exam_tag).
MODE_PARSERS = {"json": parse_exam_json, "tag": parse_exam_tag}
# The authors prompted closed (API) models for reasoning and open-weight models for JSON.
DEFAULT_MODE_BY_BACKEND: Mapping[str, str] = {"openai": "tag"}
DEFAULT_MODE = "json"
_IMAGE_PLACEHOLDER = "<image>"


def _text(value) -> str:
    return str(value).replace(_IMAGE_PLACEHOLDER, "").strip()


@dataclass(frozen=True)
class ExamPrompts:
    """The prompt set: option line, per-mode layout, and per-language words (see the YAML's header)."""

    option_line: str
    json_system: str
    json_instruction: str
    json_template: str
    tag_template: str
    tag_max_new_tokens: int
    likelihood_template: str
    languages: Mapping[str, Language]
    source: str = PROMPT_SET

    @classmethod
    def from_mapping(cls, data: Mapping, where: str) -> ExamPrompts:
        def section(name: str) -> Mapping:
            value = data.get(name)
            if not isinstance(value, Mapping):
                raise VlmgridError(f"{where}: `{name}` must be a mapping; see the file's header for its keys")
            return value

        def text(owner: Mapping, key: str, label: str) -> str:
            value = owner.get(key)
            if not isinstance(value, str) or not value.strip():
                raise VlmgridError(f"{where}: `{label}` must be a non-empty string")
            return value

        def template(owner: Mapping, label: str, allowed=PLACEHOLDERS) -> str:
            value = text(owner, "template", f"{label}.template")
            fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
            unknown = sorted(fields - allowed)
            if unknown:
                raise VlmgridError(
                    f"{where}: `{label}.template` has the unknown placeholder {{{unknown[0]}}}; "
                    f"use {', '.join('{' + p + '}' for p in sorted(allowed))}"
                )
            if "question" not in fields or "options" not in fields:
                raise VlmgridError(f"{where}: `{label}.template` must hold {{question}} and {{options}}")
            return value

        json_mode, tag_mode, likelihood = section("json"), section("tag"), section("likelihood")
        option_line = text(data, "option_line", "option_line")
        if {name for _, name, _, _ in string.Formatter().parse(option_line) if name} != {"letter", "option"}:
            raise VlmgridError(f"{where}: `option_line` must hold {{letter}} and {{option}} and nothing else")
        max_tokens = tag_mode.get("max_new_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise VlmgridError(
                f"{where}: `tag.max_new_tokens` must be a positive integer, not {max_tokens!r}"
            )
        languages = {}
        for code, entry in section("languages").items():
            if not isinstance(entry, Mapping):
                raise VlmgridError(
                    f"{where}: `languages.{code}` must map question, options and instruction to text"
                )
            languages[str(code)] = Language(
                *(
                    text(entry, key, f"languages.{code}.{key}")
                    for key in ("question", "options", "instruction")
                )
            )
        if not languages:
            raise VlmgridError(f"{where}: `languages` is empty; give at least one language")
        return cls(
            option_line=option_line,
            json_system=text(json_mode, "system", "json.system"),
            json_instruction=text(json_mode, "instruction", "json.instruction"),
            json_template=template(json_mode, "json"),
            tag_template=template(tag_mode, "tag"),
            tag_max_new_tokens=max_tokens,
            likelihood_template=template(likelihood, "likelihood"),
            languages=languages,
            source=where,
        )

    def language(self, code: str, item_id: str) -> Language:
        if code not in self.languages:
            raise VlmgridError(
                f"item {item_id}: language {code!r} has no prompts in {self.source}; add it under "
                f"`languages` (known: {', '.join(sorted(self.languages))})"
            )
        return self.languages[code]

    def _fill(self, template: str, words: Language, question: str, options: Sequence[str]) -> str:
        lines = "\n".join(
            self.option_line.format(letter=letter, option=_text(option))
            for letter, option in zip(LETTERS, options)
        )
        return template.format(
            instruction=self.json_instruction,
            question_word=words.question,
            options_word=words.options,
            question=_text(question),
            options=lines,
        )

    def user(self, mode: str, code: str, item_id: str, question: str, options: Sequence[str]) -> str:
        template = self.json_template if mode == "json" else self.tag_template
        return self._fill(template, self.language(code, item_id), question, options)

    def system(self, mode: str, code: str, item_id: str) -> str:
        return self.json_system if mode == "json" else self.language(code, item_id).instruction

    def max_new_tokens(self, mode: str) -> int | None:
        return self.tag_max_new_tokens if mode == "tag" else None

    def likelihood(self, code: str, item_id: str, question: str, options: Sequence[str]) -> str:
        return self._fill(self.likelihood_template, self.language(code, item_id), question, options)


@dataclass(frozen=True)
class Language:
    """One language's words in a prompt (ExamPrompts.languages)."""

    question: str
    options: str
    instruction: str


def load_exam_prompts(prompts_dir: Path | str) -> ExamPrompts:
    return ExamPrompts.from_mapping(
        load_prompts(PROMPT_SET, prompts_dir), str(prompts_file(PROMPT_SET, prompts_dir))
    )


def prompt_mode(model) -> str:
    """The model's `prompt_mode`, else the default of its backend (openai: tag; others: json)."""
    mode = model.settings.get("prompt_mode") or DEFAULT_MODE_BY_BACKEND.get(model.name, DEFAULT_MODE)
    if mode not in MODE_PARSERS:
        raise VlmgridError(
            f"model setting prompt_mode {mode!r} is unknown; use one of {', '.join(MODE_PARSERS)}"
        )
    return mode


def _item(records: pd.DataFrame, i: int) -> tuple[str, str, str, list[str]]:
    return (
        str(records["id"].iloc[i]),
        str(records["language"].iloc[i]),
        str(records["question"].iloc[i]),
        [str(option) for option in records["options"].iloc[i]],
    )


def _require_language(records: pd.DataFrame) -> None:
    if "language" not in records.columns:
        raise VlmgridError(
            "the exam_choice protocol needs a `language` column in the records; the benchmark's "
            "adapter must write one"
        )


def option_strategy(model, bench):
    prompts = load_exam_prompts(bench.prompts_dir)
    prompt_of = own_prompt(
        model,
        bench,
        lambda records, i, options: prompts.likelihood(
            str(records["language"].iloc[i]),
            str(records["id"].iloc[i]),
            str(records["question"].iloc[i]),
            options,
        ),
    )

    def run(records: pd.DataFrame) -> list[dict]:
        _require_language(records)
        items = [_item(records, i) for i in range(len(records))]
        results = score_items(
            model,
            bench,
            records,
            lambda i: prompt_of(records, i, items[i][3]),
            lambda i: items[i][3],
            lambda i: tuple(LETTERS[: len(items[i][3])]),
        )
        rows = []
        for (item_id, _, _, options), (scores, problem) in zip(items, results):
            if scores is None:
                rows.append(error_row(item_id, problem))
                continue
            best = int(np.argmax(scores))
            rows.append(
                prediction_row(item_id, prediction=options[best], prediction_index=best, scores=scores)
            )
        return rows

    return run


def generate_strategy(model, bench):
    from vlmgrid.model_requests import GenerateRequest

    prompts = load_exam_prompts(bench.prompts_dir)
    mode = prompt_mode(model)
    parse = MODE_PARSERS[mode]
    template = prompt_template(model, bench)

    def request(records: pd.DataFrame, i: int, image, item) -> GenerateRequest:
        item_id, language, question, options = item
        if template is not None and template.writes_text:
            # the cell's own prompt (the authors' builder for the model's family): its decoding is the model's
            rendered = template.render(record_fields(records, i, options))
            return GenerateRequest(item_id, image, variant=mode, **prompt_fields(rendered))
        return GenerateRequest(
            item_id,
            image,
            prompts.user(mode, language, item_id, question, options),
            system=prompts.system(mode, language, item_id),
            max_new_tokens=prompts.max_new_tokens(mode),
            variant=mode,
        )

    def run(records: pd.DataFrame) -> list[dict]:
        _require_language(records)
        items = [_item(records, i) for i in range(len(records))]
        images, problems = load_images(bench, records, image_alpha(model))
        usable = [i for i, problem in enumerate(problems) if problem is None]
        requests = [request(records, i, images[i], items[i]) for i in usable]
        results = dict(zip(usable, model.generate_results(requests))) if requests else {}
        rows = []
        for i, (item_id, _, _, options) in enumerate(items):
            result = results.get(i)
            if result is None or not result.ok:
                rows.append(error_row(item_id, problems[i] if result is None else result.error, variant=mode))
                continue
            parsed = parse(result.text, options)
            rows.append(
                prediction_row(
                    item_id,
                    variant=mode,
                    raw=result.text,
                    prediction=parsed.prediction,
                    prediction_index=parsed.index,
                )
            )
        return rows

    return run


def _has_image(records: pd.DataFrame) -> list[bool]:
    return [isinstance(image, str) and bool(image) for image in records["image"]]


# What a contrastive model cannot answer: a question without an image.
TEXT_ONLY_SCOPE = Scope(
    applies=_has_image,
    reason="a text-only question has no image to embed",
)

EXAM_CHOICE = Protocol(
    name="exam_choice",
    description="pick one lettered option of an exam question, prompted in the question's language",
    strategies={"score_options": option_strategy, "generate": generate_strategy, "embed": embed_strategy},
    scopes={"embed": TEXT_ONLY_SCOPE},
)
