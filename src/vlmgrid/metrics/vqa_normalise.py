"""Answer normalisation for VQA accuracy, following the TextVQA rule of facebookresearch/mmf.

The rule (mmf `mmf/utils/m4c_evaluators.py`, `EvalAIAnswerProcessor`, itself following the VQA evaluation
script GT-Vision-Lab/VQA `vqaEval.py`), applied alike to the prediction and to every human answer:

1. lowercase; delete every "," and "?"; put a space before every "'s" ("dog's" -> "dog 's"); turn newlines
   and tabs into spaces; strip.
2. punctuation: for each mark of ``; / [ ] " { } ( ) = + \\ _ - > < @ ` , ? !``: when the text has the mark
   next to a space (before or after), or has a comma between two digits, every occurrence of the mark is
   deleted; otherwise every occurrence is replaced by a space. (The test looks at the text as it was before
   this step. After step 1 no comma is left, so in practice only the "next to a space" test applies.)
   Then a period not followed by a digit is deleted ("hello." -> "hello", "3.5" stays); like the official
   script, at most 32 periods are deleted.
3. split on whitespace; map the number words none/zero..ten to "0".."10"; drop the articles a, an, the;
   apply the VQA contractions map ("dont" -> "don't", ...); join with single spaces.

Colons, apostrophes and other characters not listed are kept.
"""

from __future__ import annotations

import re

#: the VQA contractions map, as published in the official scripts (keys with capitals never match after
#: lowercasing; kept as published)
CONTRACTIONS: dict[str, str] = {
    "aint": "ain't",
    "arent": "aren't",
    "cant": "can't",
    "couldve": "could've",
    "couldnt": "couldn't",
    "couldn'tve": "couldn't've",
    "couldnt've": "couldn't've",
    "didnt": "didn't",
    "doesnt": "doesn't",
    "dont": "don't",
    "hadnt": "hadn't",
    "hadnt've": "hadn't've",
    "hadn'tve": "hadn't've",
    "hasnt": "hasn't",
    "havent": "haven't",
    "hed": "he'd",
    "hed've": "he'd've",
    "he'dve": "he'd've",
    "hes": "he's",
    "howd": "how'd",
    "howll": "how'll",
    "hows": "how's",
    "Id've": "I'd've",
    "I'dve": "I'd've",
    "Im": "I'm",
    "Ive": "I've",
    "isnt": "isn't",
    "itd": "it'd",
    "itd've": "it'd've",
    "it'dve": "it'd've",
    "itll": "it'll",
    "let's": "let's",
    "maam": "ma'am",
    "mightnt": "mightn't",
    "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've",
    "mightve": "might've",
    "mustnt": "mustn't",
    "mustve": "must've",
    "neednt": "needn't",
    "notve": "not've",
    "oclock": "o'clock",
    "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at",
    "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at",
    "shant": "shan't",
    "shed've": "she'd've",
    "she'dve": "she'd've",
    "she's": "she's",
    "shouldve": "should've",
    "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've",
    "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've",
    "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll",
    "somebodys": "somebody's",
    "someoned": "someone'd",
    "someoned've": "someone'd've",
    "someone'dve": "someone'd've",
    "someonell": "someone'll",
    "someones": "someone's",
    "somethingd": "something'd",
    "somethingd've": "something'd've",
    "something'dve": "something'd've",
    "somethingll": "something'll",
    "thats": "that's",
    "thered": "there'd",
    "thered've": "there'd've",
    "there'dve": "there'd've",
    "therere": "there're",
    "theres": "there's",
    "theyd": "they'd",
    "theyd've": "they'd've",
    "they'dve": "they'd've",
    "theyll": "they'll",
    "theyre": "they're",
    "theyve": "they've",
    "twas": "'twas",
    "wasnt": "wasn't",
    "wed've": "we'd've",
    "we'dve": "we'd've",
    "weve": "we've",
    "werent": "weren't",
    "whatll": "what'll",
    "whatre": "what're",
    "whats": "what's",
    "whatve": "what've",
    "whens": "when's",
    "whered": "where'd",
    "wheres": "where's",
    "whereve": "where've",
    "whod": "who'd",
    "whod've": "who'd've",
    "who'dve": "who'd've",
    "wholl": "who'll",
    "whos": "who's",
    "whove": "who've",
    "whyll": "why'll",
    "whyre": "why're",
    "whys": "why's",
    "wont": "won't",
    "wouldve": "would've",
    "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've",
    "yall": "y'all",
    "yall'll": "y'all'll",
    "y'allll": "y'all'll",
    "yall'd've": "y'all'd've",
    "y'alld've": "y'all'd've",
    "y'all'dve": "y'all'd've",
    "youd": "you'd",
    "youd've": "you'd've",
    "you'dve": "you'd've",
    "youll": "you'll",
    "youre": "you're",
    "youve": "you've",
}

NUMBER_WORDS: dict[str, str] = {
    "none": "0",
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}

ARTICLES = frozenset({"a", "an", "the"})

PUNCTUATION = (
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
)

_DIGIT_COMMA = re.compile(r"(?<=\d),+(?=\d)")
_LONE_PERIOD = re.compile(r"\.(?!\d)")
_MAX_PERIODS = 32


def _tokenize(text: str) -> str:
    text = text.lower().replace(",", "").replace("?", "").replace("'s", " 's")
    return text.strip()


def _punctuation(text: str) -> str:
    digit_comma = _DIGIT_COMMA.search(text) is not None
    out = text
    for mark in PUNCTUATION:
        delete = digit_comma or (mark + " ") in text or (" " + mark) in text
        out = out.replace(mark, "" if delete else " ")
    return _LONE_PERIOD.sub("", out, count=_MAX_PERIODS)


def _words(text: str) -> str:
    words = []
    for word in text.lower().split():
        word = NUMBER_WORDS.get(word, word)
        if word not in ARTICLES:
            words.append(CONTRACTIONS.get(word, word))
    return " ".join(words)


def normalise_answer(text: str) -> str:
    """The normalised form of one answer (see the module docstring for the rule)."""
    text = _tokenize(str(text))
    text = text.replace("\n", " ").replace("\t", " ").strip()
    return _words(_punctuation(text))
