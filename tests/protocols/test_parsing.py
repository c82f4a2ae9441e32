"""The answer parsers read generated text as the benchmarks' own scorers do, and fail loudly on ambiguity.

Each case gives the text, the options and the expected (prediction, index); None / -1 means unparsable.
The headline parsers' readings are held to the authors' code by the parity tables
(tests/protocols/parity/*.yaml); here are the (prediction, index) pairs, and the lenient parsers that feed the
second, lenient figure.
"""

import pytest

from vlmgrid.errors import VlmgridError
from vlmgrid.protocols.parsing import (
    PARSERS,
    Parsed,
    match_class,
    match_option_text,
    parse,
    parse_cvbench,
    parse_cvbench_lenient,
    parse_letter,
    parse_mmbench,
    parse_mme,
    parse_mme_lenient,
    parse_pope,
    parse_scienceqa,
    parse_short_answer,
    parse_short_answer_lenient,
)

FOUR = ["dog", "cat", "bird", "fish"]  # A dog, B cat, C bird, D fish
CAT_DOG = ["cat", "dog"]
DOG_CAT = ["dog", "cat"]
YES_NO = ["yes", "no"]
NONE = Parsed(None, -1)


def test_registry_holds_every_parser_under_its_name():
    assert list(PARSERS) == sorted(
        [
            "letter",
            "pope",
            "mme",
            "mme_lenient",
            "cvbench",
            "cvbench_lenient",
            "mmbench",
            "scienceqa",
            "short_answer",
            "short_answer_lenient",
            "open_class",
            "exam_json",
            "exam_tag",
            "exam_json_lenient",
            "exam_tag_lenient",
        ]
    )
    assert PARSERS.get("letter").read is parse_letter
    assert PARSERS.get("pope").read is parse_pope
    assert PARSERS.get("mme_lenient").read is parse_mme_lenient
    assert PARSERS.get("cvbench_lenient").read is parse_cvbench_lenient
    assert PARSERS.get("short_answer_lenient").read is parse_short_answer_lenient
    assert PARSERS.get("scienceqa").read is parse_scienceqa
    assert parse("mme", "Yes", YES_NO) == Parsed("yes", 0)
    assert parse("open_class", "two cats", ["cat", "dog"]) == Parsed("cat", 0)


def test_unknown_parser_name_suggests_the_closest():
    with pytest.raises(VlmgridError, match='did you mean "letter"'):
        PARSERS.get("leter")


def test_parsed_is_frozen_and_defaults_to_no_index():
    parsed = Parsed("x")
    assert parsed.index == -1
    with pytest.raises(AttributeError):
        parsed.prediction = "y"  # type: ignore[misc]


LETTER_CASES = [
    # bare letters
    ("B", FOUR, ("cat", 1)),
    ("  B  ", FOUR, ("cat", 1)),
    ("(B)", FOUR, ("cat", 1)),
    ("[C]", FOUR, ("bird", 2)),
    ("B.", FOUR, ("cat", 1)),
    ("B)", FOUR, ("cat", 1)),
    ("b", FOUR, ("cat", 1)),
    ("(d)", FOUR, ("fish", 3)),
    ("B: cat", FOUR, ("cat", 1)),
    ("C. bird", FOUR, ("bird", 2)),
    ("(D) fish, clearly", FOUR, ("fish", 3)),
    ("B cat", FOUR, ("cat", 1)),
    ("D fish swimming", FOUR, ("fish", 3)),
    ("**B**", FOUR, ("cat", 1)),
    ("**B. cat**", FOUR, ("cat", 1)),
    ("`C`", FOUR, ("bird", 2)),
    ("A", FOUR, ("dog", 0)),
    ("A.", FOUR, ("dog", 0)),
    # answer cues: never read as the first capital ("T")
    ("The answer is B", FOUR, ("cat", 1)),
    ("The answer is B.", FOUR, ("cat", 1)),
    ("The answer is B because the animal meows.", FOUR, ("cat", 1)),
    ("Answer: (C)", FOUR, ("bird", 2)),
    ("Answer: C", FOUR, ("bird", 2)),
    ("answer is option D", FOUR, ("fish", 3)),
    ("The correct option is C.", FOUR, ("bird", 2)),
    ("The best choice is (a).", FOUR, ("dog", 0)),
    ("the answer is b.", FOUR, ("cat", 1)),
    ("Looking at A and B, the answer is D", FOUR, ("fish", 3)),
    ("The answer is A. Wait, no: the answer is C", FOUR, ("bird", 2)),
    ("**Answer:** B", FOUR, ("cat", 1)),
    ("Option A is correct", FOUR, ("dog", 0)),
    ("answer: I think B", FOUR, ("cat", 1)),
    ("The answer is a cat", DOG_CAT, ("cat", 1)),  # a lowercase "a" before a word is the article
    ("Answer: A dog", ["cat", "dog"], ("dog", 1)),  # so is a capital "A" before a plain word
    ("The answer is E", FOUR, (None, -1)),
    # a standalone capital among the words
    ("I think it is B.", FOUR, ("cat", 1)),
    ("B\nBecause it meows.", FOUR, ("cat", 1)),
    ("It must be C, given the feathers", FOUR, ("bird", 2)),
    ("A is correct", FOUR, ("dog", 0)),
    ("I believe C", FOUR, ("bird", 2)),
    # articles and pronouns are not letters
    ("a cat", DOG_CAT, ("cat", 1)),
    ("a cat", CAT_DOG, ("cat", 0)),
    ("A cat is sitting on the mat.", DOG_CAT, ("cat", 1)),
    ("I see a dog", DOG_CAT, ("dog", 0)),
    ("a", FOUR, ("dog", 0)),  # a lone letter, nothing else, is a letter
    # option text
    ("fish", FOUR, ("fish", 3)),
    ("It is a BIRD.", FOUR, ("bird", 2)),
    ("red and blue", ["red", "red and blue", "green"], ("red and blue", 1)),
    ("it is 12", ["2", "12"], ("12", 1)),
    ("cats and dogs", DOG_CAT, (None, -1)),  # whole words only: "cats" is not "cat"
    ("a cat and a dog", DOG_CAT, (None, -1)),
    ("catalog", DOG_CAT, (None, -1)),
    # unparsable
    ("E", FOUR, (None, -1)),
    ("(E)", FOUR, (None, -1)),
    ("C", ["yes", "no"], (None, -1)),
    ("A or B", FOUR, (None, -1)),
    ("A and B", FOUR, (None, -1)),
    ("", FOUR, (None, -1)),
    ("   \n ", FOUR, (None, -1)),
    ("I do not know", FOUR, (None, -1)),
    ("The answer is", FOUR, (None, -1)),
    ("B", [], (None, -1)),
]


@pytest.mark.parametrize("text, options, expected", LETTER_CASES)
def test_letter(text, options, expected):
    assert parse_letter(text, options) == Parsed(*expected)


def test_letter_reads_none_and_tuples_of_options():
    assert parse_letter(None, FOUR) == NONE
    assert parse_letter("C", tuple(FOUR)) == Parsed("bird", 2)


@pytest.mark.parametrize(
    "text, options, expected",
    [
        ("the cat", DOG_CAT, 1),
        ("Cat", DOG_CAT, 1),
        ("dog or cat", DOG_CAT, -1),
        ("a sports car", ["car", "sports car"], 1),
        ("nothing", DOG_CAT, -1),
        ("same", ["same", "same"], -1),
        ("x", ["", "x"], 1),
    ],
)
def test_match_option_text(text, options, expected):
    assert match_option_text(text, options) == expected


POPE_CASES = [
    ("Yes.", ("yes", 0)),
    ("Yes", ("yes", 0)),
    ("yes, there is a dog", ("yes", 0)),
    ("YES", ("yes", 0)),
    ("No, there is not.", ("no", 1)),
    ("No", ("no", 1)),
    ("no", ("no", 1)),
    ("Not sure", (None, -1)),  # "Not" is not one of the official words; no "yes" either
    ("I am not sure", ("no", 1)),
    ("There is no dog in the image.", ("no", 1)),
    ("There is a dog.", (None, -1)),
    ("NO", (None, -1)),  # case-sensitive, as the official script
    ("No.", ("no", 1)),
    ("Yes. There is no cat.", ("yes", 0)),  # only the text before the first "." counts
    ("There is a dog. Yes", (None, -1)),
    ("No,there is none", (None, -1)),  # "," removed: "Nothere" is not a word
    ("Yes, no doubt", ("no", 1)),  # the official rule looks for no-words first
    ("Nope", (None, -1)),
    ("", (None, -1)),
]


@pytest.mark.parametrize("text, expected", POPE_CASES)
def test_pope(text, expected):
    assert parse_pope(text, YES_NO) == Parsed(*expected)


def test_pope_index_follows_the_options():
    assert parse_pope("No", ["no", "yes"]) == Parsed("no", 0)
    assert parse_pope("Yes", ["no", "yes"]) == Parsed("yes", 1)
    assert parse_pope(None, YES_NO) == NONE


# read alike by the official tool (headline) and the lenient reading
MME_CASES = [
    ("Yes", ("yes", 0)),
    ("yes", ("yes", 0)),
    ("  No  ", ("no", 1)),
    ("Yes, there is", ("yes", 0)),
    ("yes.", ("yes", 0)),
    ("No.", ("no", 1)),
    ("Nope", ("no", 1)),
    ("Not really", ("no", 1)),
    ("None of them", ("no", 1)),
    ("NO", ("no", 1)),
    ("The answer is yes", (None, -1)),  # "the " holds neither
    ("I think no", (None, -1)),
    ("Y", (None, -1)),
    ("know", ("no", 1)),  # "know" holds "no" in its first 4 characters, as in the official tool
    ("", (None, -1)),
]


@pytest.mark.parametrize("text, expected", MME_CASES)
def test_mme(text, expected):
    assert parse_mme(text, YES_NO) == Parsed(*expected)
    assert parse_mme_lenient(text, YES_NO) == Parsed(*expected)


# the official tool does not strip: leading whitespace counts among the first 4 characters
MME_UNSTRIPPED_CASES = [
    ("  yes", (None, -1), ("yes", 0)),
    ("   no", (None, -1), ("no", 1)),
    ("\n\nYes", (None, -1), ("yes", 0)),
    (" yes", ("yes", 0), ("yes", 0)),
    ("  no", ("no", 1), ("no", 1)),
]


@pytest.mark.parametrize("text, headline, lenient", MME_UNSTRIPPED_CASES)
def test_mme_headline_does_not_strip(text, headline, lenient):
    assert parse_mme(text, YES_NO) == Parsed(*headline)
    assert parse_mme_lenient(text, YES_NO) == Parsed(*lenient)


def test_mme_index_follows_the_options():
    assert parse_mme("No", ["no", "yes"]) == Parsed("no", 0)
    assert parse_mme(None, YES_NO) == NONE
    assert parse_mme_lenient(None, YES_NO) == NONE


CVBENCH_CASES = [
    ("The answer is (B).", FOUR, ("cat", 1)),
    ("(c) the left one", FOUR, ("bird", 2)),
    ("B", FOUR, ("cat", 1)),
    ("(A)", FOUR, ("dog", 0)),
    ("Answer: D", FOUR, ("fish", 3)),
    ("The answer is A, no wait, the answer is C.", FOUR, ("bird", 2)),
    ("answer: b. answer is (d)", FOUR, ("fish", 3)),
    ("answer is (c) answer: a", FOUR, ("dog", 0)),
    ("a cat", FOUR, ("dog", 0)),  # first character, as the official scorer
    ("((b))", FOUR, ("cat", 1)),
    ("b).", FOUR, ("cat", 1)),
    ("The answer is: C", FOUR, (None, -1)),  # ":" is left at the start
    ("The left one", FOUR, (None, -1)),
    ("E", FOUR, (None, -1)),
    ("C", ["left", "right"], (None, -1)),
    ("The answer is", FOUR, (None, -1)),
    ("", FOUR, (None, -1)),
]


@pytest.mark.parametrize("text, options, expected", CVBENCH_CASES)
def test_cvbench(text, options, expected):
    assert parse_cvbench(text, options) == Parsed(*expected)
    assert parse_cvbench_lenient(text, options) == Parsed(*expected)


# Cambrian strips "." from the right end only, then "(" from the left, then ")" from the right
CVBENCH_STRIP_CASES = [
    (".A", (None, -1), ("dog", 0)),
    ("..(b)..", (None, -1), ("cat", 1)),
    ("( a )", (None, -1), ("dog", 0)),
    ("\u00a0b", ("cat", 1), (None, -1)),  # str.strip removes Unicode spaces
]


@pytest.mark.parametrize("text, headline, lenient", CVBENCH_STRIP_CASES)
def test_cvbench_headline_strips_as_cambrian(text, headline, lenient):
    assert parse_cvbench(text, FOUR) == Parsed(*headline)
    assert parse_cvbench_lenient(text, FOUR) == Parsed(*lenient)


MMBENCH_CASES = [
    ("B", FOUR, ("cat", 1)),
    ("(B)", FOUR, ("cat", 1)),
    ("B. cat", FOUR, ("cat", 1)),
    ("**C**", FOUR, ("bird", 2)),
    ("The answer is D", FOUR, ("fish", 3)),
    ("A or B", FOUR, (None, -1)),
    # the letter must be among the last 4 tokens, else the text is tried
    ("I pick B, it meows", FOUR, ("cat", 1)),
    ("B so it must be dog", FOUR, ("dog", 0)),  # B is 6th from the end: the text decides
    ("B, so it's a cat", FOUR, ("cat", 1)),
    ("B is right because it meows at night", FOUR, (None, -1)),  # too long for the text, B too early
    ("The answer is B because it meows at night", FOUR, ("cat", 1)),  # B too early: "answer is B" decides
    ("Option A and option B are wrong; the answer is D", FOUR, ("fish", 3)),
    ("The correct answer is **C**, since birds have feathers and fly", FOUR, ("bird", 2)),
    ("The answer is a cat", DOG_CAT, ("dog", 0)),  # the cue takes "a" as A, before any text
    ("Failed to obtain answer via API. C", FOUR, (None, -1)),  # no letter reading; the text is too long
    ("E", FOUR, (None, -1)),
    ("b", FOUR, (None, -1)),  # letters are capital only
    ("a cat", DOG_CAT, ("cat", 1)),
    ("catalog", DOG_CAT, ("cat", 1)),  # substring, as VLMEvalKit
    ("a cat and a dog", DOG_CAT, (None, -1)),
    ("cat " * 10, DOG_CAT, (None, -1)),  # longer than twice the options' text
    ("Z", FOUR, (None, -1)),
    ("Z cat", DOG_CAT, (None, -1)),  # a lone "Z" is VLMEvalKit's refusal, before any text matching
    ("Cannot determine the answer B", FOUR, (None, -1)),
    ("", FOUR, (None, -1)),
]


@pytest.mark.parametrize("text, options, expected", MMBENCH_CASES)
def test_mmbench(text, options, expected):
    assert parse_mmbench(text, options) == Parsed(*expected)


# the lenient reading: the first line, without a final period
SHORT_LENIENT_CASES = [
    ("Coca Cola", ("Coca Cola", -1)),
    ("  stop.  ", ("stop", -1)),
    ("3.5", ("3.5", -1)),
    ("Nike.\nThe logo on the shirt says Nike.", ("Nike", -1)),
    ("\n\n  exit \nmore", ("exit", -1)),
    ("U.S.A.", ("U.S.A", -1)),
    ("", (None, -1)),
    ("   \n  ", (None, -1)),
    (".", (None, -1)),
    (None, (None, -1)),
]


@pytest.mark.parametrize("text, expected", SHORT_LENIENT_CASES)
def test_short_answer_lenient(text, expected):
    assert parse_short_answer_lenient(text, []) == Parsed(*expected)


# the headline: the whole text, stripped, as mmf's evaluator reads it (normalising is the metric's work)
SHORT_CASES = [
    ("Coca Cola", ("Coca Cola", -1)),
    ("  stop.  ", ("stop.", -1)),
    ("3.5", ("3.5", -1)),
    ("Nike.\nThe logo on the shirt says Nike.", ("Nike.\nThe logo on the shirt says Nike.", -1)),
    ("\n\n  exit \nmore", ("exit \nmore", -1)),
    ("U.S.A.", ("U.S.A.", -1)),
    (".", (".", -1)),
    ("", (None, -1)),
    ("   \n  ", (None, -1)),
    (None, (None, -1)),
]


@pytest.mark.parametrize("text, expected", SHORT_CASES)
def test_short_answer(text, expected):
    assert parse_short_answer(text, []) == Parsed(*expected)


SCIENCEQA_CASES = [
    ("B", FOUR, ("cat", 1)),
    (" B\n", FOUR, ("cat", 1)),  # stripped, as LLaVA's generation script does
    ("B. cat", FOUR, ("cat", 1)),
    ("The answer is C.", FOUR, ("bird", 2)),
    ("The answer is C, since birds fly", FOUR, ("bird", 2)),
    ("C. bird\nThe answer is B.", FOUR, ("bird", 2)),  # "X. " at the start comes first
    ("E", FOUR + ["cow"], ("cow", 4)),
    ("B.", FOUR, (None, -1)),  # two characters: no rule
    ("(B)", FOUR, (None, -1)),
    ("b", FOUR, (None, -1)),
    ("B: cat", FOUR, (None, -1)),
    ("The answer is B", FOUR, (None, -1)),  # the pattern needs a character after the letter
    ("The answer is B\nfor sure", FOUR, (None, -1)),
    ("The answer is A. The answer is C.", FOUR, (None, -1)),  # two matches: FAILED
    ("the answer is B.", FOUR, (None, -1)),
    ("The answer is E.", FOUR, (None, -1)),  # not among the item's options: wrong, not random
    ("E", FOUR, (None, -1)),
    ("F", FOUR + ["cow", "hen"], (None, -1)),  # LLaVA letters A-E only
    ("", FOUR, (None, -1)),
    (None, FOUR, (None, -1)),
    ("B", [], (None, -1)),
]


@pytest.mark.parametrize("text, options, expected", SCIENCEQA_CASES)
def test_scienceqa(text, options, expected):
    assert parse_scienceqa(text, options) == Parsed(*expected)


CLASSES = ["cat", "dog", "sports car", "car", "glass", "glasses", "puppy", "box", "t-shirt", "café"]
SYNONYMS = {"dog": ["hound", "canine"], "cat": ["kitty"], "car": ["automobile"]}

CLASS_CASES = [
    ("cat", None, ("cat", 0)),
    ("Cat.", None, ("cat", 0)),
    ("The cat", None, ("cat", 0)),
    ("cats", None, ("cat", 0)),
    ("A photo of two cats.", None, ("cat", 0)),
    ("boxes", None, ("box", 7)),
    ("puppies", None, ("puppy", 6)),
    ("glasses", None, ("glasses", 5)),  # a class word itself is not singularised
    ("a glass", None, ("glass", 4)),
    ("It's a sports car", None, ("sports car", 2)),  # the longest name wins over "car"
    ("sports cars", None, ("sports car", 2)),
    ("a red car", None, ("car", 3)),
    ("T-Shirt", None, ("t-shirt", 8)),
    ("t shirt", None, ("t-shirt", 8)),
    ("CAFÉ", None, ("café", 9)),
    ("ｃａｔ", None, ("cat", 0)),  # full-width letters, NFKC
    ("the dog's bowl", None, ("dog", 1)),
    ("a cat and a dog", None, (None, -1)),  # two classes tie for the longest
    ("concatenate", None, (None, -1)),  # whole words only
    ("a bird", None, (None, -1)),
    ("", None, (None, -1)),
    ("the", None, (None, -1)),
    # synonyms
    ("a hound", SYNONYMS, ("dog", 1)),
    ("Hounds!", SYNONYMS, ("dog", 1)),
    ("kitty", SYNONYMS, ("cat", 0)),
    ("an automobile", SYNONYMS, ("car", 3)),
    ("a canine and a cat", SYNONYMS, ("dog", 1)),  # "canine" is longer than "cat"
    ("a hound", None, (None, -1)),
]


@pytest.mark.parametrize("text, synonyms, expected", CLASS_CASES)
def test_match_class(text, synonyms, expected):
    assert match_class(text, CLASSES, synonyms) == Parsed(*expected)


def test_match_class_longest_name_wins_and_shared_names_are_ambiguous():
    # "big cat" is the longest name found, although "cat" (another class) is inside it
    assert match_class("Big cats", ["cat", "big cat"]) == Parsed("big cat", 1)
    assert match_class("jaguar", ["animal", "car"], {"animal": ["jaguar"], "car": ["jaguar"]}) == NONE
    assert match_class("a jaguar car", ["animal", "car"], {"animal": ["jaguar"]}) == Parsed(
        "animal", 0
    )  # 6 > 3
    assert match_class("a jaguar car", ["animal", "car"], {"car": ["jaguar car"]}) == Parsed("car", 1)
    assert match_class("a horse and a mouse", ["horse", "mouse"]) == NONE  # 5 characters each: a tie
    assert match_class("x", []) == NONE
    assert match_class(None, ["cat"]) == NONE
    assert match_class("kitty", ["cat"], {"cat": "kitty"}) == Parsed("cat", 0)  # a lone synonym string


def test_parsers_never_raise_on_odd_input():
    for name, parser in PARSERS.items():
        for text in (None, "", " ", "\n", "((((", "答案是 B", "B" * 1000):
            for options in ([], FOUR, YES_NO):
                result = parser(text, options)
                assert isinstance(result, Parsed), name
                assert result.prediction is None or result.index < len(options) or name == "short_answer"
