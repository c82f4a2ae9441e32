"""What every answer parser shares: the `Parsed` answer, the option letters, and the named `Parser`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Parsed:
    prediction: str | None  # the answer as text; None = unparsable (a format error)
    index: int = -1  # index into the options (or classes); -1 when none


UNPARSABLE = Parsed(None, -1)


@dataclass(frozen=True)
class Parser:
    """One reading rule, by name: `read(text, options) -> Parsed`; calling the parser calls `read`."""

    name: str
    read: Callable[[str, Sequence[str]], Parsed]

    def __call__(self, text: str, options: Sequence[str]) -> Parsed:
        return self.read(text, options)


def as_options(options) -> list[str]:
    return [] if options is None else [str(option) for option in options]


def choice_at(options: list[str], index: int) -> Parsed:
    return Parsed(options[index], index)
