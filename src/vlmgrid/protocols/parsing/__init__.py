"""Reading a model's generated text as an answer: one pure function per reading rule, found by name.

Every parser takes the generated text and the item's options (option texts in order for multiple choice,
["yes", "no"] for yes/no, the class names for open-world classification, nothing for short answers) and
returns a `Parsed`: the answer as text and its index into the options, or `prediction=None` when the text
cannot be read (a format error). Parsers never raise on odd input (None, empty text, no options).

The headline parsers read every output as the benchmark authors' own scorers do (docs:
shared/reference/official-scorers.md), so that scores are comparable with published ones; each function's
docstring gives the rule, and `tests/protocols/parity/<name>.yaml` holds the readings derived from the
authors' code:

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
(`match_class`). The Kaleidoscope exam readers (``exam_json``, ``exam_tag`` and their lenient forms) are
described in `vlmgrid.protocols.parsing.exam`.

The rules live in `letter` (the general letter reader), `yes_no` (POPE, MME), `choice` (CV-Bench, MMBench,
ScienceQA), `open_answer` (short answers, open-world class names) and `exam` (Kaleidoscope); `base` holds
`Parsed` and `Parser`. `PARSERS` lists every parser once, here.
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmgrid.protocols.parsing.base import LETTERS, UNPARSABLE, Parsed, Parser
from vlmgrid.protocols.parsing.choice import (
    parse_cvbench,
    parse_cvbench_lenient,
    parse_mmbench,
    parse_scienceqa,
)
from vlmgrid.protocols.parsing.exam import (
    parse_exam_json,
    parse_exam_json_lenient,
    parse_exam_tag,
    parse_exam_tag_lenient,
)
from vlmgrid.protocols.parsing.letter import match_option_text, parse_letter
from vlmgrid.protocols.parsing.open_answer import (
    match_class,
    parse_open_class,
    parse_short_answer,
    parse_short_answer_lenient,
)
from vlmgrid.protocols.parsing.yes_no import parse_mme, parse_mme_lenient, parse_pope
from vlmgrid.registry import Registry

PARSERS: Registry[Parser] = Registry(
    "parser",
    [
        Parser("letter", parse_letter),
        Parser("pope", parse_pope),
        Parser("mme", parse_mme),
        Parser("mme_lenient", parse_mme_lenient),
        Parser("cvbench", parse_cvbench),
        Parser("cvbench_lenient", parse_cvbench_lenient),
        Parser("mmbench", parse_mmbench),
        Parser("scienceqa", parse_scienceqa),
        Parser("short_answer", parse_short_answer),
        Parser("short_answer_lenient", parse_short_answer_lenient),
        Parser("open_class", parse_open_class),
        Parser("exam_json", parse_exam_json),
        Parser("exam_tag", parse_exam_tag),
        Parser("exam_json_lenient", parse_exam_json_lenient),
        Parser("exam_tag_lenient", parse_exam_tag_lenient),
    ],
)


def parse(parser_name: str, text: str, options: Sequence[str]) -> Parsed:
    """Read `text` with the named parser (an unknown name raises VlmgridError naming the valid ones)."""
    return PARSERS.get(parser_name)(text, options)


__all__ = [
    "LETTERS",
    "PARSERS",
    "UNPARSABLE",
    "Parsed",
    "Parser",
    "match_class",
    "match_option_text",
    "parse",
    "parse_cvbench",
    "parse_cvbench_lenient",
    "parse_exam_json",
    "parse_exam_json_lenient",
    "parse_exam_tag",
    "parse_exam_tag_lenient",
    "parse_letter",
    "parse_mmbench",
    "parse_mme",
    "parse_mme_lenient",
    "parse_open_class",
    "parse_pope",
    "parse_scienceqa",
    "parse_short_answer",
    "parse_short_answer_lenient",
]
