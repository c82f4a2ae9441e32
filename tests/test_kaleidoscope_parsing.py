"""Kaleidoscope's answer readers (exam_json, exam_tag) against outputs as models write them."""

import pytest

from vlmgrid.protocols.parsing import PARSERS, parse
from vlmgrid.protocols.parsing_exam import choice_value, letter_index, option_letter, tag_value

FOUR = ["12", "15", "18", "21"]
THREE = ["Paris", "Lyon", "Nice"]
FIVE = ["a", "b", "c", "d", "e"]


def index(parser: str, text, options=FOUR) -> int:
    parsed = parse(parser, text, options)
    assert (parsed.prediction is None) == (parsed.index == -1)
    if parsed.index >= 0:
        assert parsed.prediction == options[parsed.index]
    return parsed.index


def test_both_parsers_are_registered():
    assert "exam_json" in PARSERS and "exam_tag" in PARSERS


@pytest.mark.parametrize("text, expected", [
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
])
def test_json_choices_that_are_read(text, expected):
    assert index("exam_json", text) == expected


@pytest.mark.parametrize("text", [
    "B",  # no JSON: the prompt asked for it
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
])
def test_json_answers_that_are_format_errors(text):
    assert index("exam_json", text) == -1


@pytest.mark.parametrize("value, expected", [
    # Cyrillic, in alphabet order (Russian, Ukrainian exams): А Б В Г Д
    ("А", 0), ("Б", 1), ("В", 2), ("Г", 3), ("Д", 4), ("б", 1), ("в", 2),
    # Arabic and Persian abjad: أ ب ج د هـ, alif in its other forms, Persian "alef"
    ("أ", 0), ("ا", 0), ("إ", 0), ("آ", 0), ("الف", 0), ("ب", 1), ("ج", 2), ("د", 3), ("ه", 4), ("هـ", 4),
    # Greek
    ("Α", 0), ("β", 1), ("Γ", 2), ("δ", 3), ("Ε", 4),
    # Latin, either case
    ("A", 0), ("e", 4),
])
def test_letters_in_other_scripts(value, expected):
    assert letter_index(value) == expected
    assert option_letter(value, FIVE).index == expected


@pytest.mark.parametrize("value", ["Е", "Ж", "ت", "ক", "क", "అ", "1", "?", "Ω"])
def test_other_characters_are_not_letters(value):
    assert option_letter(value, FIVE).index == -1


def test_script_letters_in_json_answers():
    assert index("exam_json", '{"choice": "Б"}') == 1
    assert index("exam_json", '{"choice": "ج"}') == 2
    assert index("exam_json", '{"choice": "(د)"}') == 3
    assert index("exam_json", '{"choice": "Д"}') == -1  # a fifth letter for a four-option item


def test_the_item_option_count_decides_what_is_valid():
    assert index("exam_json", '{"choice": "C"}', THREE) == 2
    assert index("exam_json", '{"choice": "D"}', THREE) == -1
    assert index("exam_json", '{"choice": "E"}', FIVE) == 4
    assert index("exam_json", '{"choice": "A"}', []) == -1


@pytest.mark.parametrize("text, expected", [
    ("<ANSWER> B </ANSWER>", 1),
    ("<ANSWER>C</ANSWER>", 2),
    ("Step 1: 3 + 4 = 7.\nStep 2: 7 + 8 = 15.\nSo the answer is 15, option B.\n<ANSWER> B </ANSWER>", 1),
    ("<answer> d </answer>", 3),
    ("I will write <ANSWER> X </ANSWER> at the end.\nThe sum is 18.\n<ANSWER> C </ANSWER>", 2),  # the last tag
    ("Сначала считаем: 12.\n<ANSWER> А </ANSWER>", 0),
    ("الإجابة النهائية: <ANSWER> ب </ANSWER>", 1),
    ("<ANSWER> (D) </ANSWER>", 3),
    ("<ANSWER>\nA\n</ANSWER>", 0),
    ("**Final answer:** <ANSWER> **B** </ANSWER>", 1),
])
def test_tag_answers_that_are_read(text, expected):
    assert index("exam_tag", text) == expected


@pytest.mark.parametrize("text", [
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
])
def test_tag_answers_that_are_format_errors(text):
    assert index("exam_tag", text) == -1


def test_values_are_taken_from_the_right_place():
    assert choice_value('x {"choice": "B"} y') == "B"
    assert choice_value('{"choice": "\\u0411"}') == "Б"
    assert choice_value("no pair") is None
    assert tag_value("<ANSWER> A </ANSWER> then <ANSWER> C </ANSWER>") == " C "
    assert tag_value("nothing") is None
