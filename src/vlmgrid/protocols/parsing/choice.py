"""Multiple-choice readers of CV-Bench (``cvbench``, ``cvbench_lenient``), MMBench (``mmbench``) and ScienceQA
(``scienceqa``), each the benchmark authors' rule but for the lenient one."""

from __future__ import annotations

import re
from collections.abc import Sequence

from vlmgrid.protocols.parsing.base import LETTERS, UNPARSABLE, Parsed, as_options, choice_at

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
    options = as_options(options)
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
    return choice_at(options, index) if 0 <= index < len(options) else UNPARSABLE


_CAMBRIAN_CUE = re.compile(r"answer is|answer:")


def parse_cvbench_lenient(text: str, options: Sequence[str]) -> Parsed:
    """CV-Bench read leniently (vlmgrid's reading, not Cambrian's): lowercase; keep the text after the
    last "answer is" or "answer:"; strip whitespace and the characters "." "(" ")" from both ends; the
    first character, when it is one of the item's letters. Unlike `parse_cvbench`, ".A" and "( a )" read
    as A.
    """
    options = as_options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text).lower()
    cues = list(_CAMBRIAN_CUE.finditer(answer))
    if cues:
        answer = answer[cues[-1].end() :]
    answer = answer.strip(" \t\r\n\f\v.()")
    if not answer:
        return UNPARSABLE
    index = LETTERS.lower().find(answer[0])
    return choice_at(options, index) if 0 <= index < len(options) else UNPARSABLE


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
    options = as_options(options)
    if text is None or not options:
        return UNPARSABLE
    answer = str(text)
    letters = LETTERS[: len(options)]
    letter = _mmbench_letter(answer, letters)
    if letter == "Z":
        return UNPARSABLE
    if letter is not None:
        return choice_at(options, letters.index(letter))
    lowered = answer.lower()
    if len(lowered) > 2 * sum(len(option) for option in options):
        return UNPARSABLE
    found = [i for i, option in enumerate(options) if option.lower() in lowered]
    return choice_at(options, found[0]) if len(found) == 1 else UNPARSABLE


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
    options = as_options(options)
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
    index = _SCIENCEQA_LETTERS[: len(options)].find(letter) if letter else -1
    return choice_at(options, index) if index >= 0 else UNPARSABLE
