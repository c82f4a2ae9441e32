"""Reading Kaleidoscope-style exam answers: a JSON `{"choice": ...}` object or an `<ANSWER> X </ANSWER>` tag.

The Kaleidoscope authors (israfelsr/kaleidoscope, see shared/reference/official-scorers.md) ask open-weight
models for JSON and closed models for step-by-step reasoning that ends in the tag; an answer is valid only
when the choice read from it is one of the item's option letters, and everything else is a format error.

``exam_json``: the first `"choice": <value>` pair in the text (the key in single or double quotes, any case;
the value a JSON string, a single-quoted string or a bare token). Code fences, text around the object and a
broken closing bracket (`{"choice": "B")`, which the authors repaired by hand) do not matter, since only the
pair is read. No pair: unparsable.

``exam_tag``: the last `<ANSWER> ... </ANSWER>` in the text (tag names in any case); the last, because the
instruction asks for the FINAL answer there and a reasoning text may quote the tag (`<ANSWER> X </ANSWER>`)
before it. No tag: unparsable.

The value then has to be one option letter (`option_letter`): after Unicode NFKC (fullwidth letters become
ASCII) and stripping spaces, quotes, `*` and backticks, it is a single letter, optionally in brackets,
optionally followed by ".", ")", ":" or "-" and any text ("B", "(b)", "B.", "B) 42", "Б"). A word ("The answer
is B", "A dog") is not a letter, so it is a format error rather than option T or A. The letter is read in
the script the model wrote it in:

- Latin A-Z (either case);
- Cyrillic А Б В Г Д (either case) as A-E, in alphabet order as Russian and Ukrainian exams letter them
  (note: Cyrillic В is then C, not a look-alike of Latin B); Е is left out because Serbian Cyrillic has Ђ
  before it;
- Arabic and Persian abjad letters أ ب ج د ه as A-E, with the other forms of alif (ا إ آ ٱ), the Persian
  name of the first letter (الف) and ه written with a tatweel (هـ);
- Greek Α Β Γ Δ Ε (either case) as A-E.

Indic letters are not read: the authors' prompts letter the options A, B, C, ... in every language. The
letter must be one of the item's own options (A-D for four options, A-C for three, A-E for five); the
authors' notebook counts only A-D as valid, which is the same rule for the four-option items that make up
most of the benchmark.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Sequence

from vlmgrid.protocols.parsing import LETTERS, PARSERS, UNPARSABLE, Parsed

# Letters in other scripts -> index (A = 0). Keys are compared after NFKC and casefold.
_SCRIPT_LETTERS: dict[str, int] = {
    **{letter: i for i, letter in enumerate("абвгд")},  # Cyrillic
    **{letter: i for i, letter in enumerate("αβγδε")},  # Greek
    **{letter: 0 for letter in ("أ", "ا", "إ", "آ", "ٱ", "الف")},  # Arabic/Persian alif
    "ب": 1, "ج": 2, "د": 3, "ه": 4,
}
_TATWEEL = "\u0640"
_STRIP = " \t\r\n\"'`*“”‘’«»"
_LETTER = re.compile(
    r"^[(\[]?\s*(الف|[^\W\d_])\s*"  # one letter (or Persian "alef"), maybe after a bracket
    r"(?:[.):\]\-–].*)?$",  # alone, or closed by a bracket or separator and maybe the option's text
    re.DOTALL,
)
_CHOICE = re.compile(
    r"""["']choice["']\s*:\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s,}\]"']+))""",
    re.IGNORECASE,
)
_TAG = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)


def letter_index(letter: str) -> int:
    """The option index of one letter in any of the scripts above (A = 0), or -1."""
    key = unicodedata.normalize("NFKC", letter).replace(_TATWEEL, "").casefold()
    if len(key) == 1 and key.upper() in LETTERS and key.isascii():
        return LETTERS.index(key.upper())
    return _SCRIPT_LETTERS.get(key, -1)


def option_letter(value: str | None, options: Sequence[str]) -> Parsed:
    """The option a choice value names (rules in the module docstring), or unparsable."""
    options = [] if options is None else [str(option) for option in options]
    if value is None or not options:
        return UNPARSABLE
    text = unicodedata.normalize("NFKC", str(value)).replace(_TATWEEL, "").strip(_STRIP)
    match = _LETTER.match(text)
    if match is None:
        return UNPARSABLE
    index = letter_index(match.group(1))
    return Parsed(options[index], index) if 0 <= index < len(options) else UNPARSABLE


def _json_string(body: str) -> str | None:
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return None


def choice_value(text: str | None) -> str | None:
    """The value of the first `"choice": ...` pair in the text, or None."""
    if text is None:
        return None
    match = _CHOICE.search(str(text))
    if match is None:
        return None
    double, single, bare = match.groups()
    if double is not None:
        return _json_string(double)
    return single if single is not None else bare


def tag_value(text: str | None) -> str | None:
    """What the last `<ANSWER> ... </ANSWER>` holds, or None."""
    if text is None:
        return None
    found = _TAG.findall(str(text))
    return found[-1] if found else None


def parse_exam_json(text: str, options: Sequence[str]) -> Parsed:
    """The option named by the JSON `"choice"` (open-weight models' prompt), or unparsable."""
    return option_letter(choice_value(text), options)


def parse_exam_tag(text: str, options: Sequence[str]) -> Parsed:
    """The option named in the last `<ANSWER> X </ANSWER>` (closed models' prompt), or unparsable."""
    return option_letter(tag_value(text), options)


PARSERS.register("exam_json", parse_exam_json)
PARSERS.register("exam_tag", parse_exam_tag)
