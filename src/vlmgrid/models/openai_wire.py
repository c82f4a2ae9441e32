"""The chat-completions wire format of the `openai` backend: images as data URLs, and what a response says.

`parse_text` reads the first choice's message; `parse_top_logprobs` the top log-probabilities of the first
generated token, which `letter_logprobs` turns into one score per option letter. A response that is no chat
completion is a ValueError (the client retries it); one without the logprobs a scoring request asked for is
NoLogprobs (the server has none: a systemic fault).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import Any

#: log-probability given to a letter that is not among the top log-probabilities of the first token
ABSENT_LETTER_LOGPROB = float("-inf")
#: how many alternatives per token the scoring request asks for (OpenAI's maximum)
TOP_LOGPROBS = 20


class NoLogprobs(ValueError):
    """A completion without the logprobs a scoring request asked for."""


def encode_image(image, size: int | None) -> str:
    """A deterministic PNG data URL of the image (RGB, resized to size x size first when size is set)."""
    from PIL import Image

    if image.mode != "RGB":
        image = image.convert("RGB")
    if size:
        image = image.resize((int(size), int(size)), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _first_choice(data: Any) -> dict:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices")
    return choices[0]


def parse_text(data: Any) -> str:
    """The text of the first choice ("" when the model answered nothing); ValueError when there is no
    message."""
    message = _first_choice(data).get("message")
    if not isinstance(message, dict):
        raise ValueError("no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError("message content is not text")
    return content or ""


def parse_top_logprobs(data: Any) -> list[tuple[str, float]]:
    """(token, logprob) pairs among the top log-probabilities of the first generated token."""
    logprobs = _first_choice(data).get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        raise NoLogprobs("no logprobs")
    first = content[0]
    top = first.get("top_logprobs") or [first]
    pairs = []
    for entry in top:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("token"), str)
            or not isinstance(entry.get("logprob"), (int, float))
        ):
            raise ValueError("malformed top_logprobs")
        pairs.append((entry["token"], float(entry["logprob"])))
    return pairs


def letter_logprobs(top: Sequence[tuple[str, float]], letters: Sequence[str]) -> list[float]:
    """Per letter, the log of the summed probability of the top tokens that are that letter once stripped
    of whitespace (" A" and "A" both count for "A"; case-sensitive); ABSENT_LETTER_LOGPROB if none is."""
    scores = []
    for letter in letters:
        values = [logprob for token, logprob in top if token.strip() == letter]
        if not values:
            scores.append(ABSENT_LETTER_LOGPROB)
            continue
        peak = max(values)
        scores.append(peak + math.log(sum(math.exp(v - peak) for v in values)) if peak > -math.inf else peak)
    return scores
