"""A model's own prompt for one kind of benchmark, as data: Jinja templates over an item's fields.

A recipe (vlmgrid.recipes) or a model entry writes, per benchmark kind, what the authors' evaluation showed
the model (`kinds: {<kind>: {prompt: {...}}}`); the cell's settings hold it as `prompt`:

- `user`: the user turn's text. `{{ image }}` marks where the image stands in it (a content list of text,
  image, text, as an OpenAI message or a chat template takes it); without the mark the image comes first;
- `system`: the system turn's text, where the benchmark's authors wrote one per item (Kaleidoscope's
  languages); otherwise the model's `system` setting serves;
- `raw`: the whole string handed to the tokenizer, the conversation's special tokens and the image placeholder
  included, where the authors wrote it by hand instead of applying a chat template (Kaleidoscope's vLLM
  prompts). Exclusive with `user` and `system`;
- `answers`: how the model writes the options of a yes/no question ("Yes", "No"), the texts option likelihood
  scores (`answer_mode: likelihood`);
- `data`: tables the templates read as `data` (a recipe's translations: Kaleidoscope's words per language).

Templates are rendered in a sandbox (jinja2's ImmutableSandboxedEnvironment, as transformers renders chat
templates) with undefined names an error, and whitespace kept exactly: the authors' strings are reproduced
byte for byte. The fields are the record's columns (`question`, `hint`, `ocr_tokens`, `language`, ...; a
missing or NaN value is none), `options`, `letters` (A, B, ..., one per option), `has_image` and the prompt's
`data` tables. Two filters beside jinja2's own: `upper_first` (the first character upper-cased, the rest kept)
and `without_suffix(text)` (a trailing text removed, with the whitespace before it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vlmgrid.errors import VlmgridError

#: What `{{ image }}` renders to: a character no benchmark text holds, where the user text is cut in two.
IMAGE_MARK = "\x00image\x00"
TEMPLATE_KEYS = ("user", "system", "raw")
PROMPT_KEYS = (*TEMPLATE_KEYS, "answers", "data")


@dataclass(frozen=True)
class Rendered:
    """One request's prompt: the user text (or, `formatted`, the whole string for the tokenizer), the system
    text of this item (None: the model's own `system`), and where the image stands in the text (None:
    first)."""

    text: str
    system: str | None = None
    image_at: int | None = None
    formatted: bool = False


def _upper_first(text: Any) -> str:
    text = "" if text is None else str(text)
    return text[:1].upper() + text[1:]


def _without_suffix(text: Any, suffix: str) -> str:
    text = "" if text is None else str(text)
    kept = text.rstrip()
    return kept[: -len(suffix)].rstrip() if suffix and kept.endswith(suffix) else text


@lru_cache(maxsize=1)
def _environment():
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(
        keep_trailing_newline=True, undefined=StrictUndefined, autoescape=False
    )
    environment.filters["upper_first"] = _upper_first
    environment.filters["without_suffix"] = _without_suffix
    return environment


@lru_cache(maxsize=256)
def _compiled(source: str, where: str):
    from jinja2 import TemplateError

    try:
        return _environment().from_string(source)
    except TemplateError as exc:
        raise VlmgridError(
            f"{where}: not a valid template ({exc}); fix it (templates are Jinja, as chat templates are)"
        ) from None


def cell_value(value: Any) -> Any:
    """A record's value as a template sees it: NaN and None are none, arrays are lists."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    return value


@dataclass(frozen=True)
class PromptTemplate:
    """A cell's `prompt` setting, checked: its templates compiled, rendered per item by `render`."""

    user: str | None = None
    system: str | None = None
    raw: str | None = None
    answers: tuple[str, ...] | None = None
    data: Mapping[str, Any] | None = None
    where: str = "prompt"

    @classmethod
    def of(cls, spec: Mapping | None, where: str = "prompt") -> PromptTemplate | None:
        """The template of a `prompt` setting; None when there is none. A malformed one is one sentence."""
        if not spec:
            return None
        unknown = sorted(set(spec) - set(PROMPT_KEYS))
        if unknown:
            raise VlmgridError(
                f"{where}: unknown key {unknown[0]!r}; a prompt holds {', '.join(PROMPT_KEYS)}"
            )
        if spec.get("raw") is not None and (spec.get("user") is not None or spec.get("system") is not None):
            raise VlmgridError(
                f"{where}: `raw` is the whole string handed to the tokenizer; it cannot be given "
                f"with `user` or `system`"
            )
        if spec.get("raw") is None and spec.get("user") is None and spec.get("answers") is None:
            raise VlmgridError(f"{where}: give `user` (the user turn's text) or `raw` (the whole string)")
        for key in TEMPLATE_KEYS:
            if spec.get(key) is not None:
                if not isinstance(spec[key], str):
                    raise VlmgridError(f"{where}.{key}: must be a string (a Jinja template)")
                _compiled(spec[key], f"{where}.{key}")
        answers = spec.get("answers")
        if answers is not None and (
            not isinstance(answers, (list, tuple))
            or not all(isinstance(answer, str) and answer for answer in answers)
        ):
            raise VlmgridError(f"{where}.answers: must be a list of non-empty texts, one per option")
        data = spec.get("data")
        if data is not None and not isinstance(data, Mapping):
            raise VlmgridError(f"{where}.data: must be a mapping of the tables the templates read")
        return cls(
            user=spec.get("user"),
            system=spec.get("system"),
            raw=spec.get("raw"),
            answers=tuple(answers) if answers is not None else None,
            data=data,
            where=where,
        )

    @property
    def writes_text(self) -> bool:
        """Whether it gives the prompt's text (not only how the answers are written)."""
        return self.user is not None or self.raw is not None

    def _render(self, key: str, fields: Mapping[str, Any]) -> str:
        from jinja2 import TemplateError

        source = getattr(self, key)
        values = {
            **{name: cell_value(value) for name, value in fields.items()},
            "data": self.data or {},
            "image": IMAGE_MARK,
        }
        try:
            return _compiled(source, f"{self.where}.{key}").render(**values)
        except TemplateError as exc:
            item = fields.get("id", "?")
            raise VlmgridError(
                f"{self.where}.{key}: cannot be rendered for item {item} ({exc}); the item's fields "
                f"are {', '.join(sorted(values))}"
            ) from None

    def render(self, fields: Mapping[str, Any]) -> Rendered:
        """The prompt of one item (`fields`: its record's values and what the protocol adds)."""
        if self.raw is not None:
            text = self._render("raw", fields)
            if IMAGE_MARK in text:
                raise VlmgridError(
                    f"{self.where}.raw: holds {{{{ image }}}}; a raw prompt writes the model's own "
                    f"image placeholder itself"
                )
            return Rendered(text, formatted=True)
        text = self._render("user", fields)
        system = self._render("system", fields) if self.system is not None else None
        if text.count(IMAGE_MARK) > 1:
            raise VlmgridError(f"{self.where}.user: marks the image ({{{{ image }}}}) more than once")
        position = text.find(IMAGE_MARK)
        if position < 0:
            return Rendered(text, system)
        return Rendered(text.replace(IMAGE_MARK, ""), system, image_at=position)
