"""Open answers: short answers (``short_answer``, ``short_answer_lenient``) and open-world class names
(``open_class``, `match_class`)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

from vlmgrid.protocols.parsing.base import UNPARSABLE, Parsed, as_options, choice_at


def parse_short_answer(text: str, options: Sequence[str] = ()) -> Parsed:
    """A short open answer (TextVQA), read whole as mmf's evaluator does (facebookresearch/mmf
    ``mmf/utils/m4c_evaluators.py``, ``TextVQAAccuracyEvaluator`` and ``EvalAIAnswerProcessor``, at
    2dc099a; LLaVA's ``llava/eval/eval_textvqa.py`` passes the whole generated text to it).

    The answer is the whole text, stripped: every line of a multi-line answer and a final period stay,
    and the metric's normalisation (`vlmgrid.metrics.vqa_normalise.normalise_answer`, mmf's processing)
    turns line breaks into spaces and drops periods, as mmf does. Stripping changes nothing there (mmf
    strips too). An empty or blank text is unparsable (mmf has no such rule: it would compare "" with the
    human answers, which matches only if 3 of them process to nothing); the index is always -1.
    """
    if text is None:
        return UNPARSABLE
    answer = str(text).strip()
    return Parsed(answer, -1) if answer else UNPARSABLE


def parse_short_answer_lenient(text: str, options: Sequence[str] = ()) -> Parsed:
    """A short open answer read leniently (vlmgrid's reading, not mmf's): the stripped text's first line,
    without a trailing period ("Nike.\\nThe logo says Nike." -> "Nike"). Empty -> unparsable; index -1.
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
        if (
            word.endswith(suffix)
            and len(word) > len(suffix)
            and word[: -len(suffix)] + replacement in vocabulary
        ):
            return word[: -len(suffix)] + replacement
    return word


def _normalise(text: str, vocabulary: frozenset[str]) -> str:
    return " ".join(_singular(word, vocabulary) for word in _words(text))


def match_class(
    text: str, classes: Sequence[str], synonyms: Mapping[str, Sequence[str]] | None = None
) -> Parsed:
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
    classes = as_options(classes)
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
        return choice_at(classes, exact.pop()) if len(exact) == 1 else UNPARSABLE

    padded = f" {answer} "
    contained = [(len(name), index) for index, name in normalised if f" {name} " in padded]
    if not contained:
        return UNPARSABLE
    longest = max(length for length, _ in contained)
    winners = {index for length, index in contained if length == longest}
    return choice_at(classes, winners.pop()) if len(winners) == 1 else UNPARSABLE


def parse_open_class(text: str, classes: Sequence[str]) -> Parsed:
    """`match_class` without synonyms, as a parser: (text, classes) -> Parsed."""
    return match_class(text, classes)
