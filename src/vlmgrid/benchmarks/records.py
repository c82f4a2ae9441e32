"""The canonical records (formats.md) the adapters build: one constructor per kind of item, and the checks of
a raw item's options and answer that every multiple-choice adapter makes. A record's keys come in this order,
the kind's own columns after them."""

from __future__ import annotations

from typing import Any

from vlmgrid.errors import VlmgridError


def classification_record(item_id: str, image: str, classes: list[str], index: int) -> dict:
    """A classification item: no question, no options, the class as the answer."""
    return {
        "id": item_id,
        "image": image,
        "question": "",
        "options": [],
        "answer": classes[index],
        "answer_index": index,
    }


def yes_no_record(item_id: str, image: Any, question: Any, answer: str) -> dict:
    """A yes/no item; `answer` is "yes" or "no"."""
    return {
        "id": item_id,
        "image": image,
        "question": question,
        "options": ["yes", "no"],
        "answer": answer,
        "answer_index": 0 if answer == "yes" else 1,
    }


def choice_record(item_id: str, image: Any, question: Any, options: list, index: int) -> dict:
    """A multiple-choice item: its options as text, the one at `index` the answer."""
    return {
        "id": item_id,
        "image": image,
        "question": question,
        "options": [str(o) for o in options],
        "answer": str(options[index]),
        "answer_index": index,
    }


def checked_options(where: str, options: Any, column: str) -> list:
    """A raw item's options (the list in its `column`), refused unless they are a list of two or more."""
    if not isinstance(options, list) or len(options) < 2:
        raise VlmgridError(
            f"{where}: `{column}` must list at least 2 options, not {options!r}; re-download the file"
        )
    return options


def checked_answer_index(where: str, answer: Any, options: list, column: str) -> int:
    """A raw item's answer given as an index into its options, refused when it is none of them."""
    if answer is None or not 0 <= int(answer) < len(options):
        raise VlmgridError(
            f"{where}: answer index {answer!r} is outside its {len(options)} {column}; re-download the file"
        )
    return int(answer)
