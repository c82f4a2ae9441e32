"""What a protocol asks a model and what the model answers: the request and result records both sides share.

Below the protocols, which make the requests, and the model backends, which answer them (`vlmgrid.models.base`
says what each capability does with them), so that neither imports the other to speak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PIL.Image import Image

__all__ = [
    "GenerateRequest",
    "GenerationResult",
    "OptionRequest",
    "OptionScores",
    "ScoreResult",
    "content_parts",
]


@dataclass(frozen=True)
class OptionRequest:
    """One item to score: its id (seeds the baseline), its image (or None), a prompt and the options.

    With `letters` (e.g. ("A", "B", "C", "D"), one per option, already shown in the prompt), the model scores
    the letters as the next token; without, it scores the option texts as continuations of the prompt.
    The prompt's other fields are GenerateRequest's.
    """

    id: str
    image: Image | None
    prompt: str
    options: Sequence[str]
    letters: Sequence[str] | None = None
    system: str | None = None
    variant: str = "default"
    image_at: int | None = None
    formatted: bool = False


@dataclass(frozen=True)
class OptionScores:
    """Log-likelihood of each option (summed over its tokens) and its token count (1 for a letter)."""

    total: list[float]
    tokens: list[int]

    @property
    def normalised(self) -> list[float]:
        """Per-token log-likelihood: the length-normalised score that does not favour short options."""
        return [total / max(count, 1) for total, count in zip(self.total, self.tokens)]


@dataclass(frozen=True)
class GenerateRequest:
    """One item to answer in words: its id, its image (or None) and its prompt.

    `system`: the item's own system text (None: the model's `system` setting); `variant`: the prediction
    variant the request answers (a template, a prompt setting); `image_at`: where the image stands in the
    prompt's text (None: before it); `formatted`: the prompt is already the whole string for the tokenizer,
    the conversation's turns and the image placeholder written by hand (vlmgrid.prompt_templates `raw`), so no
    chat template is applied to it.
    """

    id: str
    image: Image | None
    prompt: str
    system: str | None = None
    max_new_tokens: int | None = None  # None: the model's `generation.max_new_tokens` setting
    variant: str = "default"
    image_at: int | None = None
    formatted: bool = False


class _Outcome:
    """A request's result: `ok` when it has no `error` (the result's last field)."""

    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class GenerationResult(_Outcome):
    """One generation: the text, or None and why the item has none (an API that failed after retries)."""

    text: str | None
    error: str | None = None


@dataclass(frozen=True)
class ScoreResult(_Outcome):
    """One option scoring: the scores, or None and why the item has none."""

    scores: OptionScores | None
    error: str | None = None


def content_parts(request) -> list[tuple[str, str | None]]:
    """A request's user turn as ("text", text) and ("image", None) parts in order: the image where `image_at`
    puts it in the text (before the text when it says nothing), no empty text part. A request without an image
    is its text alone."""
    text = request.prompt
    if request.image is None:
        return [("text", text)] if text else []
    at = 0 if request.image_at is None else request.image_at
    parts = [("text", text[:at]), ("image", None), ("text", text[at:])]
    return [(kind, value) for kind, value in parts if kind == "image" or value]
