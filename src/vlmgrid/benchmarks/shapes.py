"""Record shapes: what a kind's canonical records (formats.md) look like, one object per shape.

A kind declares its shape (`BenchmarkKind.shape`), so prepare and load read it instead of branching on the
protocol:

    classification   no options; the classes are kept in classes.json (and synonyms.json) beside the records
    yes_no           options exactly ['yes', 'no']; the question must not be empty
    short_answer     no options and answer_index -1; the question must not be empty
    ranking          a query's candidates, at least 2, as many as the benchmark gives (not lettered)
    multiple_choice  2 to 26 options (lettered A to Z)

Each shape's `labels(options, index, classes, where)` checks one record and returns the labels its
answer_index points into (the classes, or the options); `where` begins the error sentence ("<label>: item
'x'").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vlmgrid.errors import VlmgridError

MAX_OPTIONS = 26  # the protocols letter a multiple-choice item's options A to Z


@dataclass(frozen=True)
class RecordShape:
    """One shape of canonical records.

    name:            "classification" | "yes_no" | "short_answer" | "ranking" | "multiple_choice"
    has_classes:     the kind's classes are written to classes.json / synonyms.json by prepare, read by load
                     (and a fixture source may say how many classes it draws: `classes`)
    needs_question:  an item with an empty question is an error (the question is all there is to answer)
    labels:          labels(options, answer_index, classes, where) -> the labels answer_index points into;
                     raises VlmgridError for a record that does not have this shape
    """

    name: str
    has_classes: bool
    needs_question: bool
    labels: Callable[[list, int, list[str] | None, str], list] = field(repr=False)


def _classification(options: list, index: int, classes: list[str] | None, where: str) -> list:
    labels = classes or []
    if options:
        raise VlmgridError(
            f"{where} has options, but classification items keep their classes in classes.json"
        )
    return labels


def _yes_no(options: list, index: int, classes: list[str] | None, where: str) -> list:
    labels = options
    if options != ["yes", "no"]:
        raise VlmgridError(f"{where} has options {options!r}; yes/no items must have ['yes', 'no']")
    return labels


def _short_answer(options: list, index: int, classes: list[str] | None, where: str) -> list:
    labels = options
    if options or index != -1:
        raise VlmgridError(
            f"{where} has options {options!r} / answer_index {index}; short-answer items have no options "
            "and answer_index -1: the adapter needs a fix"
        )
    return labels


def _ranking(options: list, index: int, classes: list[str] | None, where: str) -> list:
    labels = options  # a query's candidates, as many as the benchmark gives (DANCE: 50), not lettered
    if len(options) < 2:
        raise VlmgridError(
            f"{where} has {len(options)} candidate(s); a ranking query needs at least 2: the adapter needs "
            "a fix"
        )
    return labels


def _multiple_choice(options: list, index: int, classes: list[str] | None, where: str) -> list:
    labels = options
    if not 2 <= len(options) <= MAX_OPTIONS:
        raise VlmgridError(
            f"{where} has {len(options)} option(s); multiple-choice items need at least 2 and at "
            f"most {MAX_OPTIONS} (lettered A to Z): the raw file is damaged or the adapter needs a fix"
        )
    return labels


CLASSIFICATION = RecordShape("classification", has_classes=True, needs_question=False, labels=_classification)
YES_NO = RecordShape("yes_no", has_classes=False, needs_question=True, labels=_yes_no)
SHORT_ANSWER = RecordShape("short_answer", has_classes=False, needs_question=True, labels=_short_answer)
RANKING = RecordShape("ranking", has_classes=False, needs_question=False, labels=_ranking)
MULTIPLE_CHOICE = RecordShape(
    "multiple_choice", has_classes=False, needs_question=False, labels=_multiple_choice
)
