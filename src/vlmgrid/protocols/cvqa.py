"""CVQA's protocol: every item asked in four prompt settings, one prediction variant each.

The settings are the prompt set `config/prompts/cvqa.yaml`: location-aware or location-agnostic, with the
English or the local-language question and options (the records' `question_en`/`options_en` or
`question`/`options`; one `answer_index` serves both, the order being the same).

- score_options (generative models, as the paper does after MMLU): the prompt shows the lettered options
  and the letters A, B, C, D are scored as the next token; the prediction is the most probable letter;
- embed (CLIP, multilingual CLIP): one text per option from the setting's `text` template ("question
  option"), and the prediction is the option whose text is most similar to the image;
- generate (API models without log-probabilities): the same prompt, free generation, read by the
  benchmark's letter parser; the raw text is kept and an unreadable answer is a format error.

Images are loaded once per chunk and every setting's requests go to the model in one call, so the backend
batches across settings and items.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.prompts import DEFAULT_PROMPTS_DIR, load_prompts, prompts_file
from vlmgrid.protocols.base import (
    Protocol,
    error_row,
    image_alpha,
    load_images,
    parser_for,
    prediction_row,
    refuse_own_prompt,
)

PROMPT_SET = "cvqa"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LANGUAGES = {"en": ("question_en", "options_en"), "local": ("question", "options")}
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_FIELDS = {
    "prompt": ({"question", "options"}, {"country"}),
    "text": ({"question", "option"}, {"country"}),
    "option": ({"letter", "option"}, set()),
}


@dataclass(frozen=True)
class Setting:
    """One prompt setting: which language pair it asks with, its prompt and its per-option text."""

    name: str
    language: str
    prompt: str
    text: str


@dataclass(frozen=True)
class CVQAPrompts:
    settings: Mapping[str, Setting]
    option: str = "{letter}. {option}"
    option_separator: str = "\n"

    @classmethod
    def from_mapping(cls, data: Mapping, where: str) -> CVQAPrompts:
        unknown = set(data) - {"settings", "option", "option_separator"}
        if unknown:
            raise VlmgridError(
                f"{where}: unknown key {sorted(unknown)[0]!r}; "
                "the keys are settings, option, option_separator"
            )
        option = data.get("option", cls.option)
        _check_template(option, "option", where, "option")
        separator = data.get("option_separator", cls.option_separator)
        if not isinstance(separator, str):
            raise VlmgridError(f"{where}: `option_separator` must be a string")
        entries = data.get("settings")
        if not isinstance(entries, Mapping) or not entries:
            raise VlmgridError(
                f"{where}: `settings` must map variant names to {{language, prompt, text}}; it holds none"
            )
        settings = {}
        for name, entry in entries.items():
            key = f"settings.{name}"
            if not isinstance(name, str) or not _VARIANT_NAME.match(name):
                raise VlmgridError(f"{where}: {key}: a variant name is lowercase letters, digits and '-'")
            if not isinstance(entry, Mapping) or set(entry) != {"language", "prompt", "text"}:
                raise VlmgridError(f"{where}: {key} must hold exactly language, prompt and text")
            if entry["language"] not in LANGUAGES:
                raise VlmgridError(
                    f"{where}: {key}.language is {entry['language']!r}; use one of {', '.join(LANGUAGES)}"
                )
            for field in ("prompt", "text"):
                _check_template(entry[field], field, where, f"{key}.{field}")
            settings[name] = Setting(name, entry["language"], entry["prompt"], entry["text"])
        return cls(settings=settings, option=option, option_separator=separator)


def _check_template(template, kind: str, where: str, key: str) -> None:
    """A template must be a string whose placeholders are the required ones plus any of the optional ones."""
    required, optional = _FIELDS[kind]
    if not isinstance(template, str) or not template.strip():
        raise VlmgridError(f"{where}: {key} must be a non-empty string")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise VlmgridError(
            f"{where}: {key} is not a valid template ({exc}); write placeholders as {{name}}"
        ) from None
    missing, extra = required - names, names - required - optional
    if missing or extra:
        allowed = ", ".join("{" + n + "}" for n in sorted(required | optional))
        problem = (
            f"lacks {{{sorted(missing)[0]}}}"
            if missing
            else f"has the unknown placeholder {{{sorted(extra)[0]}}}"
        )
        raise VlmgridError(
            f"{where}: {key} {problem}; it may hold {allowed} (the required ones: "
            f"{', '.join('{' + n + '}' for n in sorted(required))})"
        )


def cvqa_prompts(prompts_dir: Path | str = DEFAULT_PROMPTS_DIR) -> CVQAPrompts:
    return CVQAPrompts.from_mapping(
        load_prompts(PROMPT_SET, prompts_dir), str(prompts_file(PROMPT_SET, prompts_dir))
    )


def render_prompt(
    prompts: CVQAPrompts, setting: Setting, question: str, options: Sequence[str], country: str
) -> str:
    """The generative prompt of one item in one setting: the options lettered A, B, C, ... in order."""
    shown = prompts.option_separator.join(
        prompts.option.format(letter=letter, option=str(option).strip())
        for letter, option in zip(LETTERS, options)
    )
    return setting.prompt.format(country=country, question=question.strip(), options=shown)


def option_texts(setting: Setting, question: str, options: Sequence[str], country: str) -> list[str]:
    """The embedding texts of one item in one setting, one per option ("question option")."""
    return [
        setting.text.format(country=country, question=question.strip(), option=str(option).strip())
        for option in options
    ]


def item_texts(records: pd.DataFrame, i: int, language: str) -> tuple[str, list[str]]:
    """The i-th record's question and options in `language` ("en" or "local")."""
    question_col, options_col = LANGUAGES[language]
    return str(records[question_col].iloc[i]), [str(o) for o in records[options_col].iloc[i]]


def _prepared(model, bench, records: pd.DataFrame):
    """The chunk's images, ids and why each unusable item is unusable; the prompt set; the item texts."""
    refuse_own_prompt(model, bench, "the four settings of its prompt set (config/prompts/cvqa.yaml)")
    missing = [c for c in ("question_en", "options_en", "country") if c not in records.columns]
    if missing:
        raise VlmgridError(
            f"benchmark {bench.name}: records lack `{missing[0]}`; the cvqa protocol reads CVQA records only"
        )
    prompts = cvqa_prompts(getattr(bench, "prompts_dir", DEFAULT_PROMPTS_DIR))
    images, problems = load_images(bench, records, image_alpha(model))
    for i, image in enumerate(images):
        if image is None and problems[i] is None:
            problems[i] = "item has no image"
    return prompts, images, problems


def _asked(records: pd.DataFrame, prompts: CVQAPrompts, problems) -> list[tuple[int, str, list[str], str]]:
    """(item, setting, options, prompt) for every usable item of the chunk in every setting: what a model is
    asked."""
    countries = [str(c) for c in records["country"]]
    asked = []
    for i in (i for i, problem in enumerate(problems) if problem is None):
        for setting in prompts.settings.values():
            question, options = item_texts(records, i, setting.language)
            asked.append(
                (i, setting.name, options, render_prompt(prompts, setting, question, options, countries[i]))
            )
    return asked


def _ordered(
    rows: dict[tuple[int, str], dict], records: pd.DataFrame, prompts: CVQAPrompts, problems
) -> list[dict]:
    """Rows item by item, the settings in the prompt set's order; an unusable item gets an error row per
    setting."""
    ids = list(records["id"])
    return [
        rows.get((i, v)) or error_row(ids[i], problems[i], v)
        for i in range(len(records))
        for v in prompts.settings
    ]


def _choice_row(item_id: str, variant: str, options: Sequence[str], scores) -> dict:
    best = int(np.argmax(scores))
    return prediction_row(
        item_id, variant=variant, prediction=str(options[best]), prediction_index=best, scores=scores
    )


def option_strategy(model, bench):
    from vlmgrid.model_requests import OptionRequest

    def run(records: pd.DataFrame) -> list[dict]:
        prompts, images, problems = _prepared(model, bench, records)
        ids = list(records["id"])
        asked = _asked(records, prompts, problems)
        requests = [
            OptionRequest(ids[i], images[i], prompt, options, tuple(LETTERS[: len(options)]), variant=variant)
            for i, variant, options, prompt in asked
        ]
        results = model.score_results(requests) if requests else []
        rows = {}
        for (i, variant, options, _), result in zip(asked, results):
            rows[i, variant] = (
                _choice_row(ids[i], variant, options, result.scores.normalised)
                if result.ok
                else error_row(ids[i], result.error, variant)
            )
        return _ordered(rows, records, prompts, problems)

    return run


def embed_strategy(model, bench):
    def run(records: pd.DataFrame) -> list[dict]:
        prompts, images, problems = _prepared(model, bench, records)
        ids, countries = list(records["id"]), [str(c) for c in records["country"]]
        usable = [i for i, problem in enumerate(problems) if problem is None]
        image_features = model.embed_images([images[i] for i in usable]) if usable else None
        # Every setting's option texts of the chunk go through the text tower in one batched call.
        texts, spans = [], []
        for k, i in enumerate(usable):
            for setting in prompts.settings.values():
                question, options = item_texts(records, i, setting.language)
                spans.append((k, i, setting.name, options, len(texts)))
                texts.extend(option_texts(setting, question, options, countries[i]))
        text_features = model.embed_texts(texts) if texts else None
        rows = {}
        for k, i, variant, options, start in spans:
            similarity = text_features[start : start + len(options)] @ image_features[k]
            rows[i, variant] = _choice_row(ids[i], variant, options, similarity)
        return _ordered(rows, records, prompts, problems)

    return run


def generate_strategy(model, bench):
    from vlmgrid.model_requests import GenerateRequest

    parse = parser_for(bench, "letter")

    def run(records: pd.DataFrame) -> list[dict]:
        prompts, images, problems = _prepared(model, bench, records)
        ids = list(records["id"])
        asked = _asked(records, prompts, problems)
        requests = [
            GenerateRequest(ids[i], images[i], prompt, variant=variant) for i, variant, _, prompt in asked
        ]
        results = model.generate_results(requests) if requests else []
        rows = {}
        for (i, variant, options, _), result in zip(asked, results):
            if not result.ok:
                rows[i, variant] = error_row(ids[i], result.error, variant)
                continue
            parsed = parse(result.text, options)
            rows[i, variant] = prediction_row(
                ids[i],
                variant=variant,
                raw=result.text,
                prediction=parsed.prediction,
                prediction_index=parsed.index,
            )
        return _ordered(rows, records, prompts, problems)

    return run


CVQA = Protocol(
    name="cvqa",
    description=(
        "CVQA multiple choice in four prompt settings (location-aware or not, English or local language)"
    ),
    strategies={"score_options": option_strategy, "generate": generate_strategy, "embed": embed_strategy},
    # the headline is the mean over the prompt set's settings, every one of them
    variant_sets=lambda bench: [
        frozenset(cvqa_prompts(getattr(bench, "prompts_dir", DEFAULT_PROMPTS_DIR)).settings)
    ],
)
