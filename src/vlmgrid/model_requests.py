"""What a protocol asks a model and what the model answers: the request and result records both sides share.

Below the protocols, which make the requests, and the model backends, which answer them (`vlmgrid.models.base`
says what each capability does with them), so that neither imports the other to speak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from PIL.Image import Image

__all__ = ["GenerateRequest", "GenerationResult", "OptionRequest", "OptionScores", "ScoreResult"]


@dataclass(frozen=True)
class OptionRequest:
    """One item to score: its id (seeds the baseline), its image (or None), a prompt and the options.

    With `letters` (e.g. ("A", "B", "C", "D"), one per option, already shown in the prompt), the model scores
    the letters as the next token; without, it scores the option texts as continuations of the prompt.
    """

    id: str
    image: Image | None
    prompt: str
    options: Sequence[str]
    letters: Sequence[str] | None = None
    system: str | None = None


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
    id: str
    image: Image | None
    prompt: str
    system: str | None = None
    max_new_tokens: int | None = None  # None: the model's `generation.max_new_tokens` setting


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
