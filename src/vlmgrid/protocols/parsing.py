"""Reading a model's generated text as an answer: one pure function per reading rule, found by name.

Every parser takes the generated text and the item's options (option texts in order for multiple choice,
["yes", "no"] for yes/no, the class names for open-world classification, nothing for short answers) and
returns a `Parsed`: the answer as text and its index into the options, or `prediction=None` when the text
cannot be read (a format error). Parsers never raise on odd input (None, empty text, no options).

The headline parsers read every output as the benchmark authors' own scorers do (docs:
shared/reference/official-scorers.md), so that scores are comparable with published ones; each function's
docstring gives the rule, and `tests/parity/<name>.yaml` holds the readings derived from the authors' code:

- ``pope``: RUCAIBox/POPE ``evaluate.py`` (f3ec604; LLaVA ``llava/eval/eval_pope.py`` is the same rule);
- ``mme``: BradyFU's MME ``eval_tool/calculation.py`` (read in zjunlp/Deco at a3ccc15);
- ``cvbench``: the Cambrian scorers, cambrian-mllm/cambrian ``eval/eval/{coco,omni}/*_test.py`` (a220b3f);
- ``mmbench``: open-compass/VLMEvalKit ``vlmeval/utils/matching_util.py`` ``can_infer`` (d21c5e9), no judge;
- ``scienceqa``: LLaVA-1.5 ``llava/eval/eval_science_qa.py`` (haotian-liu/LLaVA);
- ``short_answer``: facebookresearch/mmf ``mmf/utils/m4c_evaluators.py`` (2dc099a; TextVQA): the whole text.

The lenient parsers keep vlmgrid's more forgiving readings for a second, separately named figure:
``mme_lenient`` (strips the text first), ``cvbench_lenient`` (strips "." "(" ")" from both ends),
``short_answer_lenient`` (the first line, without a final period), and ``letter`` (the general
multiple-choice reader) for ScienceQA. ``open_class`` is the open-world classification matcher
(`match_class`).
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
    """POPE's rule (RUCAIBox/POPE, stored as AoiDragon/POPE, ``evaluate.py`` at f3ec604; LLaVA's
    ``llava/eval/eval_pope.py`` at 4241f08 has the same rule), with unparsable answers kept apart.

    Keep the text before the first "."; delete every ","; split on single spaces (so a line break or a tab
    does not separate words); if the words include "No", "not" or "no" (case-sensitive, whole words: "NO",
    "Not" and "No\\nthere" do not count) -> "no". The authors read everything else as "yes"; here it is
    "yes" only when that kept text holds "yes" in any case, and unparsable (None) otherwise. The POPE metric
    counts None as "yes", as the authors do, and reports it as a format error, so every score is the
    authors'. The text is read as generated: ``evaluate.py`` strips nothing (LLaVA's generation script
    strips the output before writing it; a leading line break, as in "\\nNo", is the only place where that
    changes the reading).
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
    """MME's rule: BradyFU/Awesome-Multimodal-Large-Language-Models ``tools/eval_tool.zip`` ->
    ``eval_tool/calculation.py`` (``parse_pred_ans``; read in the copy zjunlp/Deco
    ``eval_tool/calculation.py`` at a3ccc15).

    Lowercase, and nothing else (no strip); exactly "yes" or "no" is taken as is; otherwise look at the
    first 4 characters: "yes" among them -> yes, else "no" among them -> no ("not ...", "none", "nope",
    "know", " no" read as no), else unparsable (None; the tool's "other", always wrong). Leading
    whitespace counts: "  yes" is "other" (its first 4 characters are "  ye") while " yes" is yes.

    The tool reads one answer per line of a tab-separated file, so it has no rule for a text holding a
    line break or a tab (such a file breaks it); here such a text is read the same way, from its first 4
    characters. The line break that ends each line in the tool's files changes no reading.
    """
    if text is None:
        return UNPARSABLE
    answer = str(text).lower()
    if answer in ("yes", "no"):
        return _yes_no(answer, options)
    prefix = answer[:4]
    if "yes" in prefix:
        return _yes_no("yes", options)
    if "no" in prefix:
        return _yes_no("no", options)
    return UNPARSABLE


def parse_mme_lenient(text: str, options: Sequence[str] = ("yes", "no")) -> Parsed:
    """MME read leniently (vlmgrid's reading, not the tool's): as `parse_mme`, but on the stripped text, so
    leading whitespace does not hide the answer ("  yes" -> yes).
    """
    return UNPARSABLE if text is None else parse_mme(str(text).strip(), options)


# ---------------------------------------------------------------------------------------------------------
# multiple choice: CV-Bench, MMBench and ScienceQA
# ---------------------------------------------------------------------------------------------------------

_CAMBRIAN_CUES = ("answer is", "answer is:", "answer:")


def parse_cvbench(text: str, options: Sequence[str]) -> Parsed:
    """The Cambrian scorers' rule for CV-Bench (cambrian-mllm/cambrian ``eval/eval/coco/coco_test.py`` and
    ``eval/eval/omni/omni_test.py``, ``extract_mcq_answer``, at a220b3f).

    In order: lowercase and strip whitespace; for each of "answer is", "answer is:", "answer:" in turn,
    when it occurs, keep the text after its last occurrence; strip whitespace; strip "." from the right
    end, then "(" from the left end, then ")" from the right end; take the first character. One of the
    item's letters (a, b, c, ...) -> that option, anything else -> unparsable (always wrong). Only those
    characters are stripped, each from its own end: ".A" and "( a )" are unparsable, "a cat" reads as A.

    The 3D (Omni3D) scorer also strips ":" and "," from the right end, which changes no letter, and also
    counts the answer right when that single character equals the gold option's text; no CV-Bench 3D
    option is one character long (they name objects), so that never applies, and the 2D scorers, which
    score the count questions with their one-digit options, take the letter only. A missing text reads as
    unparsable.
    """
    options = _options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text).lower().strip()
    for cue in _CAMBRIAN_CUES:
        if cue in answer:
            answer = answer.split(cue)[-1]
    answer = answer.strip().rstrip(".").lstrip("(").rstrip(")")
    if not answer:
        return UNPARSABLE
    index = LETTERS.lower().find(answer[0])
    return _choice(options, index) if 0 <= index < len(options) else UNPARSABLE


_CAMBRIAN_CUE = re.compile(r"answer is|answer:")


def parse_cvbench_lenient(text: str, options: Sequence[str]) -> Parsed:
    """CV-Bench read leniently (vlmgrid's reading, not Cambrian's): lowercase; keep the text after the
    last "answer is" or "answer:"; strip whitespace and the characters "." "(" ")" from both ends; the
    first character, when it is one of the item's letters. Unlike `parse_cvbench`, ".A" and "( a )" read
    as A.
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
_MMBENCH_API_FAILURE = "Failed to obtain answer via API"
_MMBENCH_ANSWER_IS = re.compile(r"(?:correct\s+)?answer\s+is\s+\**([ABCD])\**", re.IGNORECASE)


def _mmbench_letter(answer: str, letters: str) -> str | None:
    """VLMEvalKit's option reading: a letter, "Z" (a refusal, always wrong) or None (read the text)."""
    if _MMBENCH_API_FAILURE in answer:
        return None
    if any(refusal in answer for refusal in _MMBENCH_REFUSALS):
        return "Z"
    tokens = answer.translate(_MMBENCH_PUNCTUATION).split()
    present = [letter for letter in letters if letter in tokens]
    if len(present) == 1:
        if tokens.index(present[0]) > len(tokens) - 5:
            return present[0]
    elif not present and "Z" in tokens:
        return "Z"
    cue = _MMBENCH_ANSWER_IS.search(answer)
    if cue and cue.group(1).upper() in letters:
        return cue.group(1).upper()
    return None


def parse_mmbench(text: str, options: Sequence[str]) -> Parsed:
    """VLMEvalKit's exact matching for MMBench, without a judge model (open-compass/VLMEvalKit
    ``vlmeval/utils/matching_util.py`` ``can_infer`` = ``can_infer_option``, else ``can_infer_text``, as
    of d21c5e9; ``vlmeval/dataset/utils/multiple_choice.py`` reads every circular copy this way before
    any judge (``prefetch_answer``), and without a judge an unread copy makes its group wrong).

    Letters (the item's, A, B, C, ... by position; capital only):

    1. "Failed to obtain answer via API" in the text -> no letter (go to the text rule).
    2. One of VLMEvalKit's refusal sentences in the text -> unparsable (its "Z", always wrong).
    3. Replace each of . ( ) [ ] , : ; ! * # { } by a space and split on whitespace. Exactly one of the
       item's letters among the tokens, first found among the last 4 tokens (index > len(tokens) - 5)
       -> that letter. No letter but a token "Z" -> unparsable (its "Z").
    4. Otherwise (one letter too early, two letters, or none): "answer is X" or "correct answer is X"
       (any case, whitespace between the words, "*" around X; X one of A-D, either case, and one of the
       item's letters) -> X. So "The answer is a dog" reads as A.

    Text, when no letter was read: unless the lowercased text is longer than twice the options' total
    length, the one option whose lowercased text is a substring of the lowercased text -> it. Otherwise
    unparsable. The text is read as generated (VLMEvalKit strips it only on its judge path, and the
    length test counts surrounding whitespace). VLMEvalKit's VERBOSE switch, which can refuse a text with
    a token "A" and more than 3 tokens, is off by default and not followed. Earlier VLMEvalKit versions
    lack rule 4 (before 2026-05) and the "last 4 tokens" and length tests (before 2025-07).
    """
    options = _options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text)
    letters = LETTERS[:len(options)]
    letter = _mmbench_letter(answer, letters)
    if letter == "Z":
        return UNPARSABLE
    if letter is not None:
        return _choice(options, letters.index(letter))
    lowered = answer.lower()
    if len(lowered) > 2 * sum(len(option) for option in options):
        return UNPARSABLE
    found = [i for i, option in enumerate(options) if option.lower() in lowered]
    return _choice(options, found[0]) if len(found) == 1 else UNPARSABLE


_SCIENCEQA_LETTERS = "ABCDE"
_SCIENCEQA_ANSWER_IS = re.compile(r"The answer is ([A-Z]).")


def parse_scienceqa(text: str, options: Sequence[str]) -> Parsed:
    """LLaVA-1.5's ScienceQA rule (haotian-liu/LLaVA ``llava/eval/eval_science_qa.py``, the LLaVA-1.5
    version, read in the fork copy SmallPigPeppa/LLaVA at c41dd81, which adds only a debugger line;
    ``llava/eval/model_vqa_science.py`` strips the generated text before it is scored). LLaVA's first
    version (8959d5c) read only "The answer is X." and guessed an unread answer at random.

    Strip whitespace; then, in order: the text is exactly one of A B C D E -> it; the text is at least 3
    characters long, starts with one of A-E and then ". " -> that letter; the text holds exactly one match
    of ``The answer is ([A-Z]).`` (case-sensitive; "." is any character but a line break, so the letter
    must not end the text) -> that letter; else "FAILED". A letter that is not among the item's options
    (E with 4 options, F-Z), and "FAILED", count wrong: unparsable here. So "B." (two characters),
    "(B)", "b" and "The answer is B" (nothing after B) are unparsable, and two "The answer is X." are too.
    Options are lettered A, B, C, ... by position; a sixth option and beyond can never be read.
    """
    options = _options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text).strip()
    if len(answer) == 1 and answer in _SCIENCEQA_LETTERS:
        letter = answer
    elif len(answer) >= 3 and answer[0] in _SCIENCEQA_LETTERS and answer[1:3] == ". ":
        letter = answer[0]
    else:
        found = _SCIENCEQA_ANSWER_IS.findall(answer)
        letter = found[0] if len(found) == 1 else ""
    index = _SCIENCEQA_LETTERS[:len(options)].find(letter) if letter else -1
    return _choice(options, index) if index >= 0 else UNPARSABLE


# ---------------------------------------------------------------------------------------------------------
# open answers
# ---------------------------------------------------------------------------------------------------------


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
    ("mme_lenient", parse_mme_lenient),
    ("cvbench", parse_cvbench),
    ("cvbench_lenient", parse_cvbench_lenient),
    ("mmbench", parse_mmbench),
    ("scienceqa", parse_scienceqa),
    ("short_answer", parse_short_answer),
    ("short_answer_lenient", parse_short_answer_lenient),
    ("open_class", parse_open_class),
):
    PARSERS.register(_name, _parser)


def parse(parser_name: str, text: str, options: Sequence[str]) -> Parsed:
    """Read `text` with the named parser (an unknown name raises VlmgridError naming the valid ones)."""
    return PARSERS.get(parser_name)(text, options)
