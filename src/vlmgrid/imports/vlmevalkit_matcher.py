"""VLMEvalKit's option matcher, restated: which option letter a multiple-choice answer names, as VLMEvalKit
reads it before (or instead of) asking its judge model. Pure functions, no I/O.

The rule is open-compass/VLMEvalKit's `can_infer` (vlmeval/utils/matching_util.py at commit e8e78f05, the
newest stored; `can_infer_option`, then `can_infer_text` where that reads nothing), which
`vlmeval/dataset/utils/multiple_choice.py` `extract_answer_from_item` applies to the `prediction` with the
row's options as choices (`build_choices`: every column A-Z that is not empty). The facts, in order:

1. `can_infer_option` (the letter):
   - an answer holding "Failed to obtain answer via API" reads nothing;
   - an answer holding one of the refusals "Sorry, I can't help with images of people yet.", "I can't process
     this file.", "I'm sorry, but without the image provided", "Cannot determine the answer" reads "Z" (no
     option);
   - the characters `.()[],:;!*#{}` become spaces and the answer is split at white space into words; when
     exactly one choice letter is a word (however often), that letter is read if its first place is among the
     last four words (since c3371551, 2025-08-04; anywhere before); when none is and "Z" is a word, "Z";
   - else (since a67ace50, 2026-06-17) the first "answer is X" or "correct answer is X" (any case, X one of
     A-D, asterisks around it allowed) names X, if X is a choice.
2. `can_infer_text` (the option's text), only where 1 reads nothing: the answer, lower-cased, when no longer
   than twice the options' texts together (since c3371551), names the one option whose lower-cased text it
   contains; none or several read nothing.

With no judge (`exact_matching`), an answer the matcher reads nothing from is given "Z"
("Failed in Prefetch, ..."), so it is wrong; "Z" is never a gold letter. The word check VLMEvalKit adds under
its VERBOSE environment variable (a lone "A" among more than three words read as nothing) is off by default
and not restated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: where the rule is taken from, recorded with every figure it gives
RULE = "VLMEvalKit can_infer (vlmeval/utils/matching_util.py at e8e78f05)"
#: the letter VLMEvalKit gives an answer that names no option
NO_OPTION = "Z"

_API_FAILURE = "Failed to obtain answer via API"
_REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_BLANKED = str.maketrans({c: " " for c in ".()[],:;!*#{}"})
_ANSWER_IS = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")


def option_letter(answer: str, choices: Mapping[str, str]) -> str | None:
    """The letter `can_infer_option` reads: a choice's letter, "Z" (no option), or None (nothing read)."""
    if _API_FAILURE in answer:
        return None
    if any(refusal in answer for refusal in _REFUSALS):
        return NO_OPTION
    words = answer.translate(_BLANKED).split()
    named = [letter for letter in choices if letter in words]
    if len(named) == 1:
        letter = named[0]
        if words.index(letter) > len(words) - 5:
            return letter
    elif not named and NO_OPTION in words:
        return NO_OPTION
    match = _ANSWER_IS.search(answer)
    if match and match.group(1).upper() in choices:
        return match.group(1).upper()
    return None


def option_text(answer: str, choices: Mapping[str, str]) -> str | None:
    """The letter `can_infer_text` reads: the one option whose text the (short enough) answer holds."""
    answer = answer.lower()
    if len(answer) > 2 * sum(len(str(text)) for text in choices.values()):
        return None
    found = [letter for letter, text in choices.items() if str(text).lower() in answer]
    return found[0] if len(found) == 1 else None


def can_infer(answer: object, choices: Mapping[str, str]) -> str | None:
    """The letter VLMEvalKit's matcher reads from `answer` (its `prediction` as text), "Z" for no option, None
    where it reads nothing (then VLMEvalKit asks its judge, or without one gives "Z")."""
    text = str(answer)
    return option_letter(text, choices) or option_text(text, choices)


def choices_of(options) -> dict[str, str]:
    """VLMEvalKit's choices of an item's options: {"A": first, "B": second, ...}."""
    return {chr(ord("A") + k): str(option) for k, option in enumerate(options)}


def matcher_hit(answer: object, options, gold_index: int) -> tuple[int, str | None]:
    """(hit, letter) of VLMEvalKit's reading without a judge: 1 when the matcher reads the gold letter; the
    letter read ("Z" where it reads nothing, as VLMEvalKit gives it then)."""
    letter = can_infer(answer, choices_of(options)) or NO_OPTION
    return int(letter == chr(ord("A") + int(gold_index))), letter
