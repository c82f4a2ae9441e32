"""Reading Kaleidoscope exam answers: a JSON `{"choice": ...}` object or an `<ANSWER> X </ANSWER>` tag.

The Kaleidoscope authors ask open-weight models for JSON and closed (API) models for step-by-step reasoning
that ends in the tag. The headline readers, ``exam_json`` and ``exam_tag``, read an output exactly as the
authors' code does; the lenient readers, ``exam_json_lenient`` and ``exam_tag_lenient``, read more of what
models write and give the second, clearly named figure (``accuracy_lenient``). The parity tables
``tests/protocols/parity/exam_json.yaml`` and ``tests/protocols/parity/exam_tag.yaml`` hold the authors'
reading of each edge.

The authors' rule
-----------------

Sources: the JSON reader is ``dataset/answer_formating.py`` (``extract_choice_dict``, ``map_to_choice`` and
its first pass in ``main``), read in the authors' working copy manoloFer10/mm-exams-copy at commit 1ea20cd;
the hand repair of a broken bracket is the last cell of ``inference_post.ipynb`` and the tag reader is
``format_answer`` in ``model_zoo.py``, both in israfelsr/kaleidoscope (4db0593; ``format_answer`` is the same
at 293fdee); what counts as valid is ``compute_accuracy`` in israfelsr/kaleidoscope ``eval_utils.py``
(293fdee).

Valid (both readers): the choice read is option A, B, C or D (``compute_accuracy`` keeps predictions 0-3);
anything else is a format error, counted wrong. So E is never valid, even on an item with five options.

``exam_json``, in order:

1. repair: when step 4 finds no object anywhere in the output but there is a ``{"choice": "..."`` closed by
   ``)`` instead of ``}``, that piece, with the bracket replaced, stands for the whole output;
2. only what follows the last ``assistant`` + newline (anywhere, even inside a sentence) is read (the
   authors' stored text could hold the chat transcript);
3. an output of exactly one character (no stripping) is the choice itself, as written: ``B`` reads B, ``Б``
   reads B through the letter map, but ``b`` or `` B`` are not a choice;
4. otherwise the first ``{`` + ``"choice":`` (that key in double quotes, lower case, the colon right after
   it) up to the next ``}`` is read as a Python literal. Line breaks may come only before the key, after the
   colon and right before the ``}``: a pretty-printed object with a second key on its own line finds
   nothing, while ``{"choice": "B", "why": "..."}`` on one line is read. Double- or single-quoted string
   values both work; a bare token (``B``), ``null`` or ``true`` do not; a key repeated later wins; a ``}``
   inside a value cuts the object short (not read). Text, code fences or other objects around it do not
   matter. Another key spelling (``"Choice"``, ``'choice'``, ``"choice" :``) finds nothing;
5. the value, stripped of white space and upper-cased (Unicode upper case, so ``б`` becomes ``Б``), is the
   choice when it is one character; a longer value is split at ``.`` and read when exactly one piece is a
   Latin A-D (``B. cat`` and ``B.`` read B; ``(B)``, ``B) 42`` and ``A. B`` read nothing);
6. the choice is mapped from the authors' letter map, which holds Cyrillic Б→B, Ц→C, Д→D and Arabic أ→A,
   ب→B, ج→C, د→D and nothing else: Cyrillic А, В, Г, bare alif ا, ه and Greek letters are not read.

``exam_tag``: the first ``<ANSWER>`` + one Latin letter + ``</ANSWER>`` (tag names in any case, white space
around the letter) gives that letter (upper-cased): a reasoning that quotes ``<ANSWER> X </ANSWER>`` before
its final tag reads X, a format error. A tag that holds anything but one letter (``(B)``, ``B.``, ``**B**``,
``Б``, nothing) is skipped over. With no such tag, an output of exactly one character is read when it is an
upper-case Latin letter or a digit 1-9 (``2`` reads B); nothing else is read.

Where the headline departs from the authors' code (vlmgrid's choices, named as such):

- a ``"choice"`` value that is not a string (``{"choice": 2}``, ``{"choice": None}``, ``{"choice": True}``,
  a list): their ``map_to_choice`` raises and their script stops; vlmgrid reads no choice;
- a letter within A-D beyond the item's own options (D on a three-option item): their code counts it as a
  valid, wrong answer, but a prediction index must point at one of the item's options, so vlmgrid reads no
  choice (a format error; accuracy is the same, valid accuracy and the format error rate can differ);
- no options, or no text: no choice;
- the salvage passes of their working copy (``dataset/postprocess.py`` patterns, an LLM re-reading failed
  outputs, a person typing the letter in ``inference_post.ipynb``) are not reproducible and not part of the
  rule.

The lenient readers (``exam_json_lenient``, ``exam_tag_lenient``)
-----------------------------------------------------------------

They read many forms the headline readers do not, but they are not a superset of them: they never read an
output with neither JSON nor a tag (a bare ``B``, a bare digit); they take the first ``"choice"`` pair, where
the authors take a repeated key's last value and only the part after a transcript turn; they take the last
tag, where the authors take the first; and they do not read a value such as ``.B``. Their rules:

- JSON: the first ``"choice": <value>`` pair anywhere (key in single or double quotes, any case, space before
  the colon; the value a JSON string, a single-quoted string or a bare token), the broken bracket included;
  no pair, no choice (a bare letter without JSON is not read);
- tag: the last ``<ANSWER> ... </ANSWER>`` (the instruction asks for the FINAL answer there, and a reasoning
  may quote the tag before it), whatever it holds;
- the value is one option letter (``option_letter``): after Unicode NFKC (fullwidth letters become ASCII)
  and stripping spaces, quotes, ``*`` and backticks, a single letter, maybe in brackets, maybe followed by
  ".", ")", ":" or "-" and any text ("B", "(b)", "B.", "B) 42"). A word ("The answer is B", "A dog") is not a
  letter. Letters are read in the script they were written in: Latin A-Z (either case); Cyrillic А Б В Г Д
  as A-E in alphabet order (Е is left out: Serbian Cyrillic has Ђ before it); Arabic and Persian abjad
  أ ب ج د ه as A-E, with the other forms of alif (ا إ آ ٱ), the Persian name of the first letter (الف) and ه
  with a tatweel (هـ); Greek Α Β Γ Δ Ε (either case) as A-E;
- the letter must be one of the item's own options (A-E on a five-option item).
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
import warnings
from collections.abc import Sequence

from vlmgrid.protocols.parsing.base import LETTERS, UNPARSABLE, Parsed

# ---------------------------------------------------------------------------------------------------------
# The authors' rule (headline: exam_json, exam_tag)
# ---------------------------------------------------------------------------------------------------------

VALID_LETTERS = "ABCD"  # the predictions 0-3 that compute_accuracy counts as valid
_VALID = frozenset(VALID_LETTERS)
# The authors' map of letters in other scripts (exactly these; nothing in alphabet order).
AUTHORS_SCRIPT_LETTERS: dict[str, str] = {
    "Б": "B",
    "Ц": "C",
    "Д": "D",  # Cyrillic
    "أ": "A",
    "ب": "B",
    "ج": "C",
    "د": "D",  # Arabic
}
_CHOICE_OBJECT = re.compile(r'\{\s*"choice":\s*.*?\s*\}')  # one line: "." stops at a newline
_BROKEN_OBJECT = re.compile(r'\{\s*"choice":\s*".*?"\)')
_TRANSCRIPT_TURN = "assistant\n"
_ANSWER_TAG = re.compile(r"<ANSWER>\s*([A-Za-z])\s*</ANSWER>", re.IGNORECASE)
_NOT_READ = object()


def _python_literal(text: str):
    """The value of a Python literal, or _NOT_READ when it is none (never raises, prints no warning)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. an invalid escape sequence in a string
            return ast.literal_eval(text)
    except Exception:  # any failure to evaluate means: not read
        return _NOT_READ


def _repaired(text: str) -> str:
    """The whole output replaced by its `{"choice": "...")` piece, closed, when only that form is there."""
    if _CHOICE_OBJECT.search(text) is not None:
        return text
    broken = _BROKEN_OBJECT.search(text)
    if broken is None:
        return text
    fixed = broken.group().rstrip(")").strip() + "}"
    return text if _python_literal(fixed) is _NOT_READ else fixed


def _valid(choice: str) -> int:
    choice = AUTHORS_SCRIPT_LETTERS.get(choice, choice)
    return VALID_LETTERS.index(choice) if choice in _VALID else -1


def json_choice_index(text) -> int:
    """The option index (0-3) the authors' JSON reader gives the output, or -1 (rules: module docstring)."""
    if text is None:
        return -1
    answer = _repaired(str(text)).split(_TRANSCRIPT_TURN)[-1]
    if len(answer) == 1:
        return _valid(answer)
    found = _CHOICE_OBJECT.search(answer)
    if found is None:
        return -1
    value = _python_literal(found.group())
    if not isinstance(value, dict):
        return -1
    choice = value.get("choice", "")
    if not isinstance(choice, str):
        return -1  # their code raises here; vlmgrid's choice: no choice
    choice = choice.strip().upper()
    if len(choice) > 1:
        pieces = [piece for piece in (part.strip() for part in choice.split(".")) if piece in _VALID]
        choice = pieces[0] if len(pieces) == 1 else ""
    return _valid(choice)


def tag_choice_index(text) -> int:
    """The option index (0-3) the authors' tag reader gives the output, or -1 (rules: module docstring)."""
    if text is None:
        return -1
    text = str(text)
    found = _ANSWER_TAG.search(text)
    if found is not None:
        index = ord(found.group(1).upper()) - ord("A")
    elif len(text) == 1 and "A" <= text <= "Z":
        index = ord(text) - ord("A")
    elif len(text) == 1 and "1" <= text <= "9":
        index = int(text) - 1
    else:
        return -1
    return index if 0 <= index < len(VALID_LETTERS) else -1


def _option(index: int, options: Sequence[str] | None) -> Parsed:
    options = [] if options is None else [str(option) for option in options]
    return Parsed(options[index], index) if 0 <= index < len(options) else UNPARSABLE


def parse_exam_json(text: str, options: Sequence[str]) -> Parsed:
    """The option the authors' JSON reader gives the output (open-weight models' prompt), or unparsable."""
    return _option(json_choice_index(text), options)


def parse_exam_tag(text: str, options: Sequence[str]) -> Parsed:
    """The option the authors' `<ANSWER>` tag reader gives the output (closed models' prompt), or
    unparsable."""
    return _option(tag_choice_index(text), options)


# ---------------------------------------------------------------------------------------------------------
# The lenient readers (exam_json_lenient, exam_tag_lenient)
# ---------------------------------------------------------------------------------------------------------

# Letters in other scripts -> index (A = 0). Keys are compared after NFKC and casefold.
_SCRIPT_LETTERS: dict[str, int] = {
    **{letter: i for i, letter in enumerate("абвгд")},  # Cyrillic
    **{letter: i for i, letter in enumerate("αβγδε")},  # Greek
    **{letter: 0 for letter in ("أ", "ا", "إ", "آ", "ٱ", "الف")},  # Arabic/Persian alif
    "ب": 1,
    "ج": 2,
    "د": 3,
    "ه": 4,
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
    """The option index of one letter in any of the lenient readers' scripts (A = 0), or -1."""
    key = unicodedata.normalize("NFKC", letter).replace(_TATWEEL, "").casefold()
    if len(key) == 1 and key.upper() in LETTERS and key.isascii():
        return LETTERS.index(key.upper())
    return _SCRIPT_LETTERS.get(key, -1)


def option_letter(value: str | None, options: Sequence[str]) -> Parsed:
    """The option a choice value names (lenient rules in the module docstring), or unparsable."""
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
    """The value of the first `"choice": ...` pair in the text (lenient), or None."""
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
    """What the last `<ANSWER> ... </ANSWER>` holds (lenient), or None."""
    if text is None:
        return None
    found = _TAG.findall(str(text))
    return found[-1] if found else None


def parse_exam_json_lenient(text: str, options: Sequence[str]) -> Parsed:
    """The option named by the first JSON `"choice"` pair, read leniently, or unparsable."""
    return option_letter(choice_value(text), options)


def parse_exam_tag_lenient(text: str, options: Sequence[str]) -> Parsed:
    """The option named in the last `<ANSWER> ... </ANSWER>`, read leniently, or unparsable."""
    return option_letter(tag_value(text), options)
