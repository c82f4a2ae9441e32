"""Reading a model's generated text as an answer: one pure function per reading rule, found by name.

Every parser takes the generated text and the item's options (option texts in order for multiple choice,
["yes", "no"] for yes/no, the class names for open-world classification, nothing for short answers) and
returns a `Parsed`: the answer as text and its index into the options, or `prediction=None` when the text
cannot be read (a format error). Parsers never raise on odd input (None, empty text, no options).

The benchmark-specific parsers follow the benchmark authors' own scorers (docs:
shared/reference/official-scorers.md), so that scores are comparable with published ones:

- ``pope``: RUCAIBox/POPE ``evaluate.py``;
- ``mme``: MME's ``eval_tool/calculation.py``;
- ``cvbench``: the Cambrian scorers (``eval/eval/{ade,coco,omni}/*_test.py``);
- ``mmbench``: VLMEvalKit ``can_infer_option`` then ``can_infer_text`` (no judge model).

``letter`` is the general multiple-choice reader, ``short_answer`` the open-answer reader (TextVQA) and
``open_class`` the open-world classification matcher (`match_class`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from vlmgrid.registry import Registry

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Parsed:
    prediction: str | None  # the answer as text; None = unparsable (a format error)
    index: int = -1  # index into the options (or classes); -1 when none


UNPARSABLE = Parsed(None, -1)

Parser = Callable[[str, Sequence[str]], Parsed]


def _options(options) -> list[str]:
    return [] if options is None else [str(option) for option in options]


def _choice(options: list[str], index: int) -> Parsed:
    return Parsed(options[index], index)


# ---------------------------------------------------------------------------------------------------------
# letter: the general multiple-choice reader
# ---------------------------------------------------------------------------------------------------------

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
    found = {i: option.strip().lower() for i, option in enumerate(options)
             if option.strip() and _whole_word(option.strip().lower(), lowered)}
    left = [i for i, option in found.items()
            if not any(option != other and option in other for other in found.values())]
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
    options = _options(options)
    if text is None or not options:
        return UNPARSABLE
    letters = LETTERS[:len(options)]
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
        return _choice(options, index) if index >= 0 else UNPARSABLE

    # 2. the text starts with the letter
    start = _BARE.match(s) or _BRACKETED_START.match(s) or _LETTER_PUNCT_START.match(s)
    if start is None:
        word_start = _LETTER_WORD_START.match(s)
        if word_start:
            index = _letter_index(word_start.group(1), letters)
            if index >= 0 and _whole_word_prefix(options[index], word_start.group(2)):
                return _choice(options, index)
    else:
        index = _letter_index(start.group(1), letters)
        return _choice(options, index) if index >= 0 else UNPARSABLE

    # 3. one valid capital letter standing alone
    found = {match.group(1) for match in _STANDALONE_CAPITAL.finditer(s)
             if match.group(1) in letters and not _is_word_not_letter(s, match)}
    if len(found) == 1:
        return _choice(options, letters.index(found.pop()))

    # 4. the option's own text
    index = match_option_text(s, options)
    return _choice(options, index) if index >= 0 else UNPARSABLE


def _whole_word_prefix(option: str, rest: str) -> bool:
    option = option.strip().lower()
    return bool(option) and re.match(re.escape(option) + r"(?!\w)", rest.lower()) is not None


# ---------------------------------------------------------------------------------------------------------
# yes/no: POPE and MME
# ---------------------------------------------------------------------------------------------------------


def _yes_no(label: str | None, options: Sequence[str]) -> Parsed:
    """"yes"/"no" with its index among the options (0 for yes, 1 for no when the options do not say)."""
    if label is None:
        return UNPARSABLE
    lowered = [option.strip().lower() for option in _options(options)]
    index = lowered.index(label) if label in lowered else (0 if label == "yes" else 1)
    return Parsed(label, index)


def parse_pope(text: str, options: Sequence[str] = ("yes", "no")) -> Parsed:
    """POPE's official rule (RUCAIBox/POPE evaluate.py), with unparsable answers kept apart.

    Keep the text before the first "."; remove ","; split on single spaces; if the words include "No",
    "not" or "no" (case-sensitive, whole words: "NO" and "Not" do not count) -> "no". Otherwise the
    official script says "yes"; here the answer is "yes" only if that kept text contains "yes" in any
    case, and unparsable (None) otherwise; the POPE metric counts None as "yes", as the official rule does,
    and reports it as a format error.
    """
    if text is None:
        return UNPARSABLE
    kept = str(text).split(".")[0].replace(",", "")
    words = kept.split(" ")
    if "No" in words or "not" in words or "no" in words:
        return _yes_no("no", options)
    if "yes" in kept.lower():
        return _yes_no("yes", options)
    return UNPARSABLE


def parse_mme(text: str, options: Sequence[str] = ("yes", "no")) -> Parsed:
    """MME's official rule (eval_tool/calculation.py).

    Lowercase and strip; exactly "yes" or "no" is taken as is; otherwise look at the first 4 characters:
    "yes" among them -> yes, else "no" among them -> no ("not ...", "none", "nope" read as no), else
    unparsable (None; the official tool's "other", always wrong).
    """
    if text is None:
        return UNPARSABLE
    answer = str(text).lower().strip()
    if answer in ("yes", "no"):
        return _yes_no(answer, options)
    prefix = answer[:4]
    if "yes" in prefix:
        return _yes_no("yes", options)
    if "no" in prefix:
        return _yes_no("no", options)
    return UNPARSABLE


# ---------------------------------------------------------------------------------------------------------
# multiple choice: CV-Bench and MMBench
# ---------------------------------------------------------------------------------------------------------

_CAMBRIAN_CUE = re.compile(r"answer is|answer:")


def parse_cvbench(text: str, options: Sequence[str]) -> Parsed:
    """The Cambrian scorers' rule for CV-Bench.

    Lowercase; keep the text after the last "answer is" or "answer:" (whichever comes last; all of it when
    neither appears); strip whitespace and the characters "." "(" ")" from both ends; take the first
    character; if it is one of the item's letters (a, b, c, ...) -> that option, else unparsable. Note that
    this reads "a cat" as option A, as the official scorer does.
    """
    options = _options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text).lower()
    cues = list(_CAMBRIAN_CUE.finditer(answer))
    if cues:
        answer = answer[cues[-1].end():]
    answer = answer.strip(" \t\r\n\f\v.()")
    if not answer:
        return UNPARSABLE
    index = LETTERS.lower().find(answer[0])
    return _choice(options, index) if 0 <= index < len(options) else UNPARSABLE


_MMBENCH_PUNCTUATION = str.maketrans({c: " " for c in ".()[],:;!*#{}"})
_MMBENCH_REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)


def parse_mmbench(text: str, options: Sequence[str]) -> Parsed:
    """VLMEvalKit's exact matching for MMBench (can_infer_option, then can_infer_text; no judge model).

    Letters: one of VLMEvalKit's refusal sentences -> unparsable (its "Z", always wrong). Replace each of
    . ( ) [ ] , : ; ! * # { } by a space and split on whitespace. If exactly one of the item's letters
    (capital, case-sensitive) is among the tokens and its first occurrence is among the last 4 tokens
    (VLMEvalKit: index > len(tokens) - 5) -> that letter. If no letter but a token "Z" -> unparsable (its
    "Z"). Text: unless the lowercased answer is longer than twice the options' total length, the one option
    whose lowercased text is a substring of the lowercased answer -> it. Otherwise unparsable.
    """
    options = _options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text)
    letters = LETTERS[:len(options)]
    if any(refusal in answer for refusal in _MMBENCH_REFUSALS):
        return UNPARSABLE
    tokens = answer.translate(_MMBENCH_PUNCTUATION).split()
    present = [letter for letter in letters if letter in tokens]
    if len(present) == 1 and tokens.index(present[0]) > len(tokens) - 5:
        return _choice(options, letters.index(present[0]))
    if not present and "Z" in tokens:
        return UNPARSABLE
    lowered = answer.lower()
    if len(lowered) > 2 * sum(len(option) for option in options):
        return UNPARSABLE
    found = [i for i, option in enumerate(options) if option.lower() in lowered]
    return _choice(options, found[0]) if len(found) == 1 else UNPARSABLE


# ---------------------------------------------------------------------------------------------------------
# open answers
# ---------------------------------------------------------------------------------------------------------


def parse_short_answer(text: str, options: Sequence[str] = ()) -> Parsed:
    """A short open answer (TextVQA): the stripped text's first line, without a trailing period.

    Empty -> unparsable. The index is always -1; normalising for scoring is the metric's work.
    """
    if text is None:
        return UNPARSABLE
    lines = str(text).strip().splitlines()
    answer = lines[0].strip() if lines else ""
    if answer.endswith("."):
        answer = answer[:-1].rstrip()
    return Parsed(answer, -1) if answer else UNPARSABLE


_ARTICLES = frozenset({"a", "an", "the"})
_APOSTROPHES = str.maketrans({"'": None, "’": None, "‘": None, "`": None})


def _words(text: str) -> list[str]:
    """NFKC, lowercase, apostrophes deleted, other punctuation and symbols as spaces, articles dropped."""
    text = unicodedata.normalize("NFKC", str(text)).lower().translate(_APOSTROPHES)
    text = "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in text)
    return [word for word in text.split() if word not in _ARTICLES]


def _singular(word: str, vocabulary: frozenset[str]) -> str:
    if word in vocabulary:
        return word
    for suffix, replacement in (("ies", "y"), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) > len(suffix) and word[:-len(suffix)] + replacement in vocabulary:
            return word[:-len(suffix)] + replacement
    return word


def _normalise(text: str, vocabulary: frozenset[str]) -> str:
    return " ".join(_singular(word, vocabulary) for word in _words(text))


def match_class(text: str, classes: Sequence[str],
                synonyms: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """The class an open-world answer names (LVLM open-world classification), or unparsable.

    Normalisation, the same for the answer, the class names and the synonyms:
      1. Unicode NFKC, then lowercase;
      2. apostrophes (' ’ ‘ `) deleted; every other punctuation or symbol character becomes a space;
      3. split on whitespace; the articles "a", "an", "the" are dropped;
      4. simple singular, per word: a word that is itself a class word stays; otherwise a trailing "ies"
         becomes "y", or a trailing "es", else "s", is removed, when the result is a class word ("class
         words": every word of every class name and synonym after steps 1-3);
      5. the words are joined by single spaces.
    Matching (synonyms[class_name] lists other names of that class; the class itself is always a name):
      1. exact: the normalised answer equals a normalised name -> that name's class (two different classes
         with that same name -> unparsable);
      2. otherwise containment: the names found in the normalised answer as whole words (word boundaries at
         spaces); the longest such name (in characters, after normalisation) wins; if names of two
         different classes tie for the longest -> unparsable;
      3. nothing found, or an empty answer -> unparsable.
    The prediction is the class name as given in `classes`; the index is its position there.
    """
    classes = _options(classes)
    if text is None or not classes:
        return UNPARSABLE
    synonyms = synonyms or {}
    names: list[tuple[int, list[str]]] = []
    for index, name in enumerate(classes):
        alternatives = synonyms.get(name, ())
        if isinstance(alternatives, str):
            alternatives = (alternatives,)
        names.append((index, [name, *map(str, alternatives)]))
    vocabulary = frozenset(word for _, group in names for name in group for word in _words(name))
    normalised = [(index, _normalise(name, vocabulary)) for index, group in names for name in group]
    normalised = [(index, name) for index, name in normalised if name]
    answer = _normalise(text, vocabulary)
    if not answer:
        return UNPARSABLE

    exact = {index for index, name in normalised if name == answer}
    if exact:
        return _choice(classes, exact.pop()) if len(exact) == 1 else UNPARSABLE

    padded = f" {answer} "
    contained = [(len(name), index) for index, name in normalised if f" {name} " in padded]
    if not contained:
        return UNPARSABLE
    longest = max(length for length, _ in contained)
    winners = {index for length, index in contained if length == longest}
    return _choice(classes, winners.pop()) if len(winners) == 1 else UNPARSABLE


def parse_open_class(text: str, classes: Sequence[str]) -> Parsed:
    """`match_class` without synonyms, as a parser: (text, classes) -> Parsed."""
    return match_class(text, classes)


PARSERS: Registry[Parser] = Registry("parser")
for _name, _parser in (
    ("letter", parse_letter),
    ("pope", parse_pope),
    ("mme", parse_mme),
    ("cvbench", parse_cvbench),
    ("mmbench", parse_mmbench),
    ("short_answer", parse_short_answer),
    ("open_class", parse_open_class),
):
    PARSERS.register(_name, _parser)


def parse(parser_name: str, text: str, options: Sequence[str]) -> Parsed:
    """Read `text` with the named parser (an unknown name raises VlmgridError naming the valid ones)."""
    return PARSERS.get(parser_name)(text, options)
