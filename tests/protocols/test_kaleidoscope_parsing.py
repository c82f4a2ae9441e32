"""Kaleidoscope's answer readers against outputs as models write them.

Headline (`exam_json`, `exam_tag`): the authors' rule; the parity tables in tests/protocols/parity/ hold its
edges, case by case. Here: what the authors' code has no rule for, the option count, and odd input. Lenient
(`exam_json_lenient`, `exam_tag_lenient`): the more forgiving readers behind the second figure.
"""

import warnings

import pytest

from vlmgrid.protocols.parsing import PARSERS, parse
from vlmgrid.protocols.parsing.exam import (
    AUTHORS_SCRIPT_LETTERS,
    choice_value,
    json_choice_index,
    letter_index,
    option_letter,
    tag_choice_index,
    tag_value,
)

FOUR = ["12", "15", "18", "21"]
THREE = ["Paris", "Lyon", "Nice"]
FIVE = ["a", "b", "c", "d", "e"]


def index(parser: str, text, options=FOUR) -> int:
    parsed = parse(parser, text, options)
    assert (parsed.prediction is None) == (parsed.index == -1)
    if parsed.index >= 0:
        assert parsed.prediction == options[parsed.index]
    return parsed.index


def test_all_four_readers_are_registered():
    for name in ("exam_json", "exam_tag", "exam_json_lenient", "exam_tag_lenient"):
        assert name in PARSERS


# ---------------------------------------------------------------------------------------------------------
# Headline: the authors' rule
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"choice": "B"}', 1),
        ('```json\n{"choice": "C"}\n```', 2),
        ('Here is my answer:\n{"choice": "D"}\nI hope this helps.', 3),
        ('{"choice": "B")', 1),  # the broken bracket the authors repaired
        ('{"choice": "b"}', 1),
        ('{"choice": "B. 15"}', 1),
        ('{"choice": "A", "explanation": "12 is the sum"}', 0),
        ('{"choice": "B"} {"choice": "C"}', 1),  # the first object
        ('{"choice": "A", "choice": "C"}', 2),  # a repeated key: the last value
        ("B", 1),  # a bare letter, no JSON
        ("Д", 3),  # their map: Cyrillic Д is D
        ('{"choice": "Ц"}', 2),
        ('{"choice": "أ"}', 0),
        ('{"choice": "\\u0411"}', 1),  # Б as an escape
    ],
)
def test_json_headline_reads(text, expected):
    assert index("exam_json", text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"choice": "А"}',
        '{"choice": "В"}',
        '{"choice": "Г"}',  # Cyrillic А, В, Г: not in the authors' map
        '{"choice": "ا"}',  # bare alif: not in the map
        '{"choice": "(B)"}',
        '{"choice": "C) 18"}',
        "{'choice': 'C'}",
        '{"Choice": "A"}',
        '{"choice": B}',
        '{ "choice" : "a" }',
        '{"choice": "Ｃ"}',  # fullwidth
        '{\n  "choice": "A",\n  "explanation": "12"\n}',  # pretty-printed with a second key
        "b",
        " B",
        "The answer is B",
        "",
    ],
)
def test_json_headline_does_not_read(text):
    assert index("exam_json", text) == -1


@pytest.mark.parametrize(
    "text", ['{"choice": 2}', '{"choice": None}', '{"choice": True}', '{"choice": ["B"]}']
)
def test_json_value_that_is_not_a_string_is_no_choice(text):
    # The authors' map_to_choice raises on these (their script stops); vlmgrid's choice: no choice.
    assert json_choice_index(text) == -1
    assert index("exam_json", text) == -1


def test_json_headline_reads_python_literals_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert index("exam_json", '{"choice": "\\d"}') == -1  # an invalid escape: no warning, no choice
        assert index("exam_json", '{"choice": "' + "[" * 200 + '"}') == -1
        assert index("exam_json", '{"choice": ' + "[" * 5000 + "}") == -1  # too deep for the parser


def test_authors_letter_map_is_theirs():
    assert AUTHORS_SCRIPT_LETTERS == {"Б": "B", "Ц": "C", "Д": "D", "أ": "A", "ب": "B", "ج": "C", "د": "D"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<ANSWER> B </ANSWER>", 1),
        ("Step 1: 3 + 4 = 7.\nStep 2: 7 + 8 = 15.\nSo the answer is 15, option B.\n<ANSWER> B </ANSWER>", 1),
        ("<answer> d </answer>", 3),
        ("<ANSWER>\nA\n</ANSWER>", 0),
        ("<ANSWER> A </ANSWER> then <ANSWER> C </ANSWER>", 0),  # the first tag
        ("<ANSWER> (B) </ANSWER> finally <ANSWER> C </ANSWER>", 2),  # a tag that is not one letter is skipped
        ("B", 1),
        ("3", 2),  # a bare capital letter or digit 1-9
    ],
)
def test_tag_headline_reads(text, expected):
    assert index("exam_tag", text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # the first tag: X
        "I will write <ANSWER> X </ANSWER> at the end.\nThe sum is 18.\n<ANSWER> C </ANSWER>",
        "<ANSWER> (D) </ANSWER>",
        "<ANSWER> **B** </ANSWER>",
        "<ANSWER> А </ANSWER>",
        "<ANSWER> ب </ANSWER>",
        "<ANSWER> E </ANSWER>",
        "<ANSWER></ANSWER>",
        "<ANSWER> B",
        "b",
        "0",
        "5",
        "The answer is B.",
        '{"choice": "B"}',
    ],
)
def test_tag_headline_does_not_read(text):
    assert index("exam_tag", text) == -1


def test_headline_valid_letters_are_a_to_d_within_the_item_options():
    # E is never valid (the authors keep predictions 0-3), even on a five-option item.
    assert index("exam_json", '{"choice": "E"}', FIVE) == -1
    assert index("exam_tag", "<ANSWER> E </ANSWER>", FIVE) == -1
    assert index("exam_json", '{"choice": "D"}', FIVE) == 3
    # D on a three-option item: the authors count a valid, wrong answer; a prediction index must point at one
    # of the item's options, so vlmgrid's choice is no choice.
    assert json_choice_index('{"choice": "D"}') == 3 and tag_choice_index("4") == 3
    assert index("exam_json", '{"choice": "D"}', THREE) == -1
    assert index("exam_tag", "<ANSWER> D </ANSWER>", THREE) == -1
    assert index("exam_json", '{"choice": "C"}', THREE) == 2
    assert index("exam_json", '{"choice": "A"}', []) == -1
    assert index("exam_tag", "<ANSWER> A </ANSWER>", None) == -1


@pytest.mark.parametrize("parser", ["exam_json", "exam_tag", "exam_json_lenient", "exam_tag_lenient"])
@pytest.mark.parametrize("text", [None, "", 7, "\x00", "{" * 10000, "<ANSWER>" * 1000])
def test_odd_input_is_no_choice_and_never_raises(parser, text):
    assert index(parser, text) == -1


@pytest.mark.parametrize(
    "text, headline, lenient",
    [
        ("B", 1, -1),  # a bare letter: the authors read it, the lenient reader wants JSON
        ('{"choice": "(B)"}', -1, 1),
        ('{"choice": "В"}', -1, 2),  # Cyrillic В: not in the authors' map; C in alphabet order
        ('{"choice": "А"}', -1, 0),
        ('{"choice": "ا"}', -1, 0),
        ("{'choice': 'C'}", -1, 2),
        ('{"choice": B}', -1, 1),
        ('{"choice": "A", "choice": "C"}', 2, 0),
    ],
)
def test_json_headline_and_lenient_differ(text, headline, lenient):
    assert index("exam_json", text) == headline
    assert index("exam_json_lenient", text) == lenient


@pytest.mark.parametrize(
    "text, headline, lenient",
    [
        ("<ANSWER> A </ANSWER> then <ANSWER> C </ANSWER>", 0, 2),  # first tag vs last tag
        ("I will write <ANSWER> X </ANSWER> at the end.\n<ANSWER> C </ANSWER>", -1, 2),
        ("<ANSWER> (D) </ANSWER>", -1, 3),
        ("<ANSWER> Б </ANSWER>", -1, 1),
        ("2", 1, -1),
    ],
)
def test_tag_headline_and_lenient_differ(text, headline, lenient):
    assert index("exam_tag", text) == headline
    assert index("exam_tag_lenient", text) == lenient


# ---------------------------------------------------------------------------------------------------------
# Lenient readers
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"choice": "B"}', 1),
        ('{"choice":"D"}', 3),
        ('{ "choice" : "a" }', 0),
        ('```json\n{"choice": "C"}\n```', 2),
        ('```\n{\n  "choice": "B"\n}\n```', 1),
        ('Here is my answer:\n{"choice": "D"}\nI hope this helps.', 3),
        ('{"choice": "B")', 1),  # the broken bracket the authors repaired by hand
        ("{'choice': 'C'}", 2),
        ('{"Choice": "A"}', 0),
        ('{"choice": "(B)"}', 1),
        ('{"choice": "B."}', 1),
        ('{"choice": "C) 18"}', 2),
        ('{"choice": "B. 15"}', 1),
        ('{"choice": "**D**"}', 3),
        ('{"choice": " b "}', 1),
        ('{"choice": B}', 1),  # a bare token
        ('{"choice": "Ｃ"}', 2),  # fullwidth
        ('{"choice": "\\u0412"}', 2),  # Cyrillic В as a JSON escape
        ('{"choice": "A", "explanation": "12 is the sum"}', 0),
        ('{"choice": "B"} {"choice": "C"}', 1),  # the first pair, as the authors' regular expression
    ],
)
def test_lenient_json_choices_that_are_read(text, expected):
    assert index("exam_json_lenient", text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "B",  # no JSON: the prompt asked for it (the authors read it)
        "The answer is B",
        "Answer: B",
        '{"answer": "B"}',
        '{"choice": "The answer is B"}',  # not read as T
        '{"choice": "A dog is shown"}',  # not read as the article A
        '{"choice": "A or B"}',
        '{"choice": "A, B"}',
        '{"choice": ""}',
        '{"choice": null}',
        '{"choice": 2}',  # an index is not a letter (0- or 1-based?)
        '{"choice": "E"}',  # not one of four options
        '{"choice": "X"}',
        '{"choice": "AB"}',
        "",
        None,
        "I cannot answer questions about this image.",
    ],
)
def test_lenient_json_answers_that_are_format_errors(text):
    assert index("exam_json_lenient", text) == -1


@pytest.mark.parametrize(
    "value, expected",
    [
        # Cyrillic, in alphabet order (Russian, Ukrainian exams): А Б В Г Д
        ("А", 0),
        ("Б", 1),
        ("В", 2),
        ("Г", 3),
        ("Д", 4),
        ("б", 1),
        ("в", 2),
        # Arabic and Persian abjad: أ ب ج د هـ, alif in its other forms, Persian "alef"
        ("أ", 0),
        ("ا", 0),
        ("إ", 0),
        ("آ", 0),
        ("الف", 0),
        ("ب", 1),
        ("ج", 2),
        ("د", 3),
        ("ه", 4),
        ("هـ", 4),
        # Greek
        ("Α", 0),
        ("β", 1),
        ("Γ", 2),
        ("δ", 3),
        ("Ε", 4),
        # Latin, either case
        ("A", 0),
        ("e", 4),
    ],
)
def test_lenient_letters_in_other_scripts(value, expected):
    assert letter_index(value) == expected
    assert option_letter(value, FIVE).index == expected


@pytest.mark.parametrize("value", ["Е", "Ж", "ت", "ক", "क", "అ", "1", "?", "Ω"])
def test_lenient_other_characters_are_not_letters(value):
    assert option_letter(value, FIVE).index == -1


def test_lenient_script_letters_in_json_answers():
    assert index("exam_json_lenient", '{"choice": "Б"}') == 1
    assert index("exam_json_lenient", '{"choice": "ج"}') == 2
    assert index("exam_json_lenient", '{"choice": "(د)"}') == 3
    assert index("exam_json_lenient", '{"choice": "Д"}') == -1  # a fifth letter for a four-option item


def test_lenient_item_option_count_decides_what_is_valid():
    assert index("exam_json_lenient", '{"choice": "C"}', THREE) == 2
    assert index("exam_json_lenient", '{"choice": "D"}', THREE) == -1
    assert index("exam_json_lenient", '{"choice": "E"}', FIVE) == 4
    assert index("exam_json_lenient", '{"choice": "A"}', []) == -1


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<ANSWER> B </ANSWER>", 1),
        ("<ANSWER>C</ANSWER>", 2),
        ("Step 1: 3 + 4 = 7.\nStep 2: 7 + 8 = 15.\nSo the answer is 15, option B.\n<ANSWER> B </ANSWER>", 1),
        ("<answer> d </answer>", 3),
        (
            "I will write <ANSWER> X </ANSWER> at the end.\nThe sum is 18.\n<ANSWER> C </ANSWER>",
            2,
        ),  # the last tag
        ("Сначала считаем: 12.\n<ANSWER> А </ANSWER>", 0),
        ("الإجابة النهائية: <ANSWER> ب </ANSWER>", 1),
        ("<ANSWER> (D) </ANSWER>", 3),
        ("<ANSWER>\nA\n</ANSWER>", 0),
        ("**Final answer:** <ANSWER> **B** </ANSWER>", 1),
    ],
)
def test_lenient_tag_answers_that_are_read(text, expected):
    assert index("exam_tag_lenient", text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The answer is B.",
        '{"choice": "B"}',  # JSON is not the tag prompt's format
        "<ANSWER> X </ANSWER>",  # the instruction echoed
        "<ANSWER> The answer is B </ANSWER>",
        "<ANSWER> B",  # never closed
        "<ANSWER> E </ANSWER>",
        "<ANSWER></ANSWER>",
        "<ANSWER> B or C </ANSWER>",
        "Reasoning that ran out of tokens before the",
        None,
    ],
)
def test_lenient_tag_answers_that_are_format_errors(text):
    assert index("exam_tag_lenient", text) == -1


def test_lenient_values_are_taken_from_the_right_place():
    assert choice_value('x {"choice": "B"} y') == "B"
    assert choice_value('{"choice": "\\u0411"}') == "Б"
    assert choice_value("no pair") is None
    assert tag_value("<ANSWER> A </ANSWER> then <ANSWER> C </ANSWER>") == " C "
    assert tag_value("nothing") is None
