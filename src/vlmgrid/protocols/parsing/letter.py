"""``letter``: the general multiple-choice reader (options lettered A, B, C, ... by position)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from vlmgrid.protocols.parsing.base import LETTERS, UNPARSABLE, Parsed, as_options, choice_at

# Words after a capital "A" or "I" that show it is an option letter ("A is correct", "A or B"); any other
# lowercase word after it makes it the article ("A cat sits") or the pronoun ("I think"), not a letter.
_LETTER_FOLLOWERS = frozenset(
    "is was seems appears looks would should could must matches fits and or because since as for but "
    "then so which that best correctly".split()
)
_FOLLOWING_WORD = re.compile(r"\s+([a-z][\w'’]*)")

# "The answer is B", "Answer: (C)", "answer is option D", "The correct option is B", "best choice: c)" ...
_ANSWER_CUE = re.compile(
    r"\b(?:answer|choice|option)\b\s*(?:\bis\b|:|-)?\s*(?:\b(?:option|choice)\b\s*)?[:\-]?\s*"
    r"(?:[(\[]\s*([A-Za-z])\s*[)\]]"  # a letter in brackets, either case
    r"|(?-i:([A-Z]))(?![\w'’])"  # a capital letter standing alone
    r"|(?-i:([a-z]))(?=[.)\]]*\s*$))",  # a lowercase letter closing the text
    re.IGNORECASE,
)
_BRACKETED_START = re.compile(r"^[(\[]\s*([A-Za-z])\s*[)\]]")
_BARE = re.compile(r"^([A-Za-z])\s*[.:)]?$")
_LETTER_PUNCT_START = re.compile(r"^([A-Z])\s*[.:)]")
_LETTER_WORD_START = re.compile(r"^([A-Z])\s+(\S.*)$", re.DOTALL)
_STANDALONE_CAPITAL = re.compile(r"(?<![\w'’])([A-Z])(?![\w'’])")


def _is_word_not_letter(text: str, match: re.Match) -> bool:
    """A capital A or I followed by a lowercase word that does not go with an option letter."""
    if match.group(1) not in "AI":
        return False
    following = _FOLLOWING_WORD.match(text, match.end())
    return following is not None and following.group(1) not in _LETTER_FOLLOWERS


def _whole_word(needle: str, haystack: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", haystack) is not None


def match_option_text(text: str, options: Sequence[str]) -> int:
    """The index of the one option whose text appears in `text` (case-insensitive, as a whole word), or -1.

    When several appear, an option whose text lies inside another appearing option's text drops out (the
    longest wins: "red and blue" beats "red"); if more than one is still left (or none), -1.
    """
    lowered = text.lower()
    found = {
        i: option.strip().lower()
        for i, option in enumerate(options)
        if option.strip() and _whole_word(option.strip().lower(), lowered)
    }
    left = [
        i
        for i, option in found.items()
        if not any(option != other and option in other for other in found.values())
    ]
    return left[0] if len(left) == 1 else -1


def _letter_index(letter: str, letters: str) -> int:
    letter = letter.upper()
    return letters.index(letter) if letter in letters else -1


def parse_letter(text: str, options: Sequence[str]) -> Parsed:
    """The default multiple-choice reader; options are lettered A, B, C, ... by position.

    In order, the first rule that applies decides:

    1. An answer cue: the last "answer is X", "answer: (X)", "answer is option X", "the correct option is
       X", "choice: X" (case-insensitive cue words, "**" and backticks ignored). X is a capital letter
       standing alone, a letter of either case in brackets, or a lowercase letter that ends the text. A
       capital A or I followed by an ordinary lowercase word ("answer: A dog", "answer: I think") is not
       taken as a letter.
    2. The text starts with a letter: a bare letter ("B", "b", "(B)", "B.", "B)"), a bracketed letter or a
       capital letter followed by "." ":" or ")" and anything ("B: text", "(B) text"), or a capital
       letter followed by its own option's text ("B dog").
    3. Exactly one distinct valid capital letter standing alone as a token (punctuation around it counts
       as space), leaving out a capital A or I used as an article or pronoun (as in rule 1).
    4. The option whose text appears in the answer (`match_option_text`).

    A letter found by rule 1 or 2 that is not one of the item's letters ("E" with 4 options) makes the
    answer unparsable. Lowercase letters elsewhere are never read as letters ("a cat" is not option A).
    Empty text, two letters ("A or B") with no single option text, or nothing found: unparsable.
    """
    options = as_options(options)
    if text is None or not options:
        return UNPARSABLE
    letters = LETTERS[: len(options)]
    s = re.sub(r"[*`]+", "", str(text)).strip()
    if not s:
        return UNPARSABLE

    # 1. an explicit answer cue, the last one wins
    for cue in reversed(list(_ANSWER_CUE.finditer(s))):
        if cue.group(2) is not None:
            following = _FOLLOWING_WORD.match(s, cue.end())
            if cue.group(2) in "AI" and following and following.group(1) not in _LETTER_FOLLOWERS:
                continue
        letter = next(group for group in cue.groups() if group is not None)
        index = _letter_index(letter, letters)
        return choice_at(options, index) if index >= 0 else UNPARSABLE

    # 2. the text starts with the letter
    start = _BARE.match(s) or _BRACKETED_START.match(s) or _LETTER_PUNCT_START.match(s)
    if start is None:
        word_start = _LETTER_WORD_START.match(s)
        if word_start:
            index = _letter_index(word_start.group(1), letters)
            if index >= 0 and _whole_word_prefix(options[index], word_start.group(2)):
                return choice_at(options, index)
    else:
        index = _letter_index(start.group(1), letters)
        return choice_at(options, index) if index >= 0 else UNPARSABLE

    # 3. one valid capital letter standing alone
    found = {
        match.group(1)
        for match in _STANDALONE_CAPITAL.finditer(s)
        if match.group(1) in letters and not _is_word_not_letter(s, match)
    }
    if len(found) == 1:
        return choice_at(options, letters.index(found.pop()))

    # 4. the option's own text
    index = match_option_text(s, options)
    return choice_at(options, index) if index >= 0 else UNPARSABLE


def _whole_word_prefix(option: str, rest: str) -> bool:
    option = option.strip().lower()
    return bool(option) and re.match(re.escape(option) + r"(?!\w)", rest.lower()) is not None
