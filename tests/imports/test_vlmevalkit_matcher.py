"""VLMEvalKit's option matcher restated (`vlmgrid.imports.vlmevalkit_matcher`): each case is what
vlmeval/utils/matching_util.py `can_infer` (at e8e78f05) returns for it, worked by hand from its code."""

import pytest

from vlmgrid.imports.vlmevalkit_matcher import can_infer, choices_of, matcher_hit

CHOICES = {"A": "Denver", "B": "Helena", "C": "Boise", "D": "Cheyenne"}


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("D", "D"),
        ("**Answer:** D. Cheyenne", "D"),  # words Answer, D, Cheyenne: one letter, among the last four
        ("(B)", "B"),
        ("The answer is C.", "C"),  # the words: The, answer, is, C
        # one letter, but not among the last four words: the text reader then finds no option text
        ("D is right because the capital of Wyoming is a city called that name", None),
        # ... unless "answer is X" names it
        (
            "The correct answer is **B** here, since Helena has been the state's capital for over a century "
            "now",
            "B",
        ),
        ("A or B", None),  # two letters: no letter; no option text either
        ("Cheyenne", "D"),  # the option's text, once
        ("cheyenne or denver", None),  # two options' texts
        ("Z", "Z"),  # no option letter, the word Z
        ("Z or Z", "Z"),  # counted as a word once, however often it is there
        ("B, B", "B"),
        ("Sorry, I can't help with images of people yet.", "Z"),
        ("Failed to obtain answer via API. D", None),  # an API failure reads nothing, not even the D
        ("I think it is " + "very " * 20 + "likely Cheyenne", None),  # longer than twice the options' texts
        ("", None),
    ],
)
def test_the_matcher_reads_as_vlmevalkit_does(answer, expected):
    assert can_infer(answer, dict(CHOICES)) == expected


def test_a_letter_is_read_only_among_the_choices():
    assert can_infer("E", {"A": "yes", "B": "no"}) is None
    assert can_infer("the answer is D", {"A": "yes", "B": "no"}) is None


def test_without_a_judge_an_unread_answer_is_z_and_wrong():
    options = list(CHOICES.values())
    assert choices_of(options) == CHOICES
    assert matcher_hit("**Answer:** D. Cheyenne", options, 3) == (1, "D")
    assert matcher_hit("I cannot tell.", options, 3) == (0, "Z")
    assert matcher_hit("B", options, 3) == (0, "B")
