"""What every importer shares: an answer read from a published file, and the checks that the file answers
exactly the prepared benchmark's items.

An importer reads a file made by another tool and finds, for each answer, the record of the prepared
benchmark it answers (by the published ids and texts the records keep), returning `Answer`s. `check_answers`
then refuses, in one sentence, answers to items the benchmark does not have, items answered twice and items
not answered at all: a file of a subset is never scored as if it were the whole benchmark. Only a format whose
published files answer a subset by construction (`Importer.partial`: MME's eval-tool folders, whose releases
lack some questions' images) is taken as it is: its unanswered items are absent, not wrong, and the
predictions file records its coverage.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import unreadable
from vlmgrid.imports.reading import DENIED

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """The publishing tool's own verdict on one answer, where its files keep one beside the answers
    (VLMEvalKit's judge file): `hit` 1 or 0, `judge` whether its judge model gave the reading rather than its
    rule-based matcher, `option` the letter it read where known (None: not known), `source` the file it was
    read from."""

    hit: int
    judge: bool
    option: str | None
    source: str


@dataclass(frozen=True)
class Answer:
    """One answer of the file: the record it answers (None: no record of the benchmark), the model's raw
    text, and where in the file it stands (for messages), e.g. "line 7 (question_id 12)"; `verdict`: the
    tool's own verdict on it, where the file keeps one; `error`: why the answer's text cannot be told (its row
    is then an error row saying so, never a guess)."""

    record_id: str | None
    raw: str
    where: str
    verdict: Verdict | None = None
    error: str | None = None


@dataclass(frozen=True)
class Importer:
    """A file format of predictions made elsewhere.

    `kinds`: the benchmark kinds whose items the format can name; `looks_like(path)`: whether the file (or
    folder) is in this format, used to guess the format; `read(path, records, kind, questions)`: the file's
    answers matched to the records (`questions`: the question file the answers were made from, for formats
    whose answers name their questions only by its ids). `partial`: the format's published files answer a
    subset of the benchmark by construction, so a file that leaves items unanswered is imported as it is, its
    coverage recorded; every other format must answer every item.
    """

    name: str
    description: str
    kinds: tuple[str, ...]
    looks_like: Callable[[Path], bool]
    read: Callable[[Path, pd.DataFrame, str, Path | None], list[Answer]]
    partial: bool = False
    tool: str | None = None  # the tool whose verdicts its answers may carry (`Answer.verdict`), by name


def check_answers(
    answers: Sequence[Answer], records: pd.DataFrame, path: Path, bench: str, *, partial: bool = False
) -> None:
    """Every record answered exactly once, and no answer to an item the benchmark does not have; with
    `partial` (a format partial by construction), at most once and at least one record."""
    unknown = [answer for answer in answers if answer.record_id is None]
    if unknown:
        raise VlmgridError(
            f"{path} has {len(unknown)} answer(s) to items that benchmark {bench} does not have, the first "
            f"at {unknown[0].where}; import it into the benchmark it was made for"
        )
    first: dict[str, Answer] = {}
    for answer in answers:
        if answer.record_id in first:
            raise VlmgridError(
                f'{path} answers item "{answer.record_id}" of {bench} twice ({first[answer.record_id].where} '
                f"and {answer.where}); keep one answer per item"
            )
        first[answer.record_id] = answer
    missing = [item for item in records["id"].astype(str) if item not in first]
    if partial and not first:
        raise VlmgridError(
            f"{path} answers none of the {len(records)} items of {bench}; import the file made for it"
        )
    if missing and not partial:
        raise VlmgridError(
            f"{path} answers {len(first)} of the {len(records)} items of {bench}: {len(missing)} missing, "
            f'the first "{missing[0]}"; a file of a subset is not scored as the whole benchmark: import a '
            "file that answers every item"
        )


def squeeze(text: str) -> str:
    """Text with every run of white space made one space, and both ends stripped: prompts are rebuilt by
    their tools with other spacing than the published question (LLaVA collapses double spaces)."""
    return re.sub(r"\s+", " ", str(text)).strip()


def escaped_line_breaks(text: str) -> str:
    """A prompt with the two characters backslash-n read as a line break, when it has no real one: some tools
    write every line break of their prompts escaped, and the question is the same."""
    if "\n" in text or "\\n" not in text:
        return text
    return text.replace("\\n", "\n")


def read_line_breaks(path: Path, lines: list[tuple[int, dict]], key: str) -> list[tuple[int, dict]]:
    """The JSON lines with their `key` text read by `escaped_line_breaks`; one log line says how many were."""
    read, escaped = [], 0
    for n, item in lines:
        text = item.get(key)
        if isinstance(text, str) and escaped_line_breaks(text) != text:
            item, escaped = {**item, key: escaped_line_breaks(text)}, escaped + 1
        read.append((n, item))
    if escaped:
        log.info(
            f"{path}: {escaped} of {len(lines)} `{key}` texts write their line breaks as the two characters "
            f"\\n; they are read as line breaks"
        )
    return read


def places(index: dict[tuple, str]) -> dict[tuple, list[tuple[str, str]]]:
    """{place: [(record id, question)]} of an index keyed (place..., question), e.g. (split, image,
    question)."""
    found: dict[tuple, list[tuple[str, str]]] = {}
    for key, record_id in index.items():
        found.setdefault(key[:-1], []).append((record_id, key[-1]))
    return found


def check_questions(
    path: Path,
    answers: Sequence[Answer],
    asked: Sequence[tuple[tuple, str]],
    at_place: dict[tuple, list[tuple[str, str]]],
    place: str,
) -> None:
    """Refuse the first answer that matched no record although its `place` (the image, the split and image)
    holds a record no answer matched: the questions differ, shown side by side (the record's closest
    question). `asked[i]`: (place, question) of `answers[i]`. An answer whose place has every record answered
    is an item the benchmark lacks, which `check_answers` says."""
    answered = {answer.record_id for answer in answers}
    for answer, (where, question) in zip(answers, asked):
        if answer.record_id is not None:
            continue
        left = [
            (record_id, theirs) for record_id, theirs in at_place.get(where, []) if record_id not in answered
        ]
        if left:
            record_id, theirs = max(
                left, key=lambda pair: difflib.SequenceMatcher(None, question, pair[1]).ratio()
            )
            raise VlmgridError(
                f"{path} {answer.where} asks {question!r}, but item {record_id}, of the same {place}, asks "
                f"{theirs!r} and no answer matches it: the file's questions differ from the benchmark's; "
                "import answers made from this benchmark's questions"
            )


def stem(name: str) -> str:
    """An image's file name without folders and extension: "artwork/images/10002.jpg" -> "10002"."""
    return Path(str(name)).stem


def unique_index(records: pd.DataFrame, key_of: Callable[[pd.Series], tuple], what: str) -> dict[tuple, str]:
    """{key: record id}, for keys that name one record; a key shared by records is a damaged benchmark."""
    index: dict[tuple, str] = {}
    for _, record in records.iterrows():
        key = key_of(record)
        if key in index:
            raise VlmgridError(
                f'records "{index[key]}" and "{record["id"]}" have the same {what}, so answers cannot be '
                "told apart; prepare the benchmark again"
            )
        index[key] = str(record["id"])
    return index


#: what is left of a JSON token cut short where the parser stopped: a literal's or a number's start (the
#: parser then names the token's first character, not the text's end)
_TOKEN_START = re.compile(
    r"(?:t(?:ru?)?|f(?:a(?:ls?)?)?|n(?:ul?)?|N(?:aN?)?|-?(?:I(?:n(?:f(?:i(?:n(?:i(?:ty?)?)?)?)?)?)?)?|"
    r"-?\d*\.?\d*(?:[eE][-+]?\d*)?)"
)


def cut_short(error: json.JSONDecodeError, text: str) -> bool:
    """Whether JSON text failed because it ends too early (a file copied or written only in part): a string
    never closed, an escape or the error at the text's very end, or only the start of a token (true, 1.5e3)
    from where the parser stopped to the end."""
    if error.msg.startswith("Unterminated string") or error.pos >= len(text.rstrip()):
        return True
    if error.msg.startswith("Invalid \\uXXXX escape"):  # the escape, even whole, is the text's end
        return re.fullmatch(r"\\u[0-9a-fA-F]{0,4}", text[text.rfind("\\u") :].rstrip()) is not None
    return _TOKEN_START.fullmatch(text[error.pos :].rstrip()) is not None


def too_deep(path: Path, line: int | None = None) -> VlmgridError:
    """The one sentence for JSON nested deeper than Python's parser goes (its recursion limit, about a
    thousand levels), which no tool writes, at the file's `line` where it is known."""
    at = f"{path} line {line}" if line is not None else str(path)
    return VlmgridError(
        f"{at} nests its JSON arrays or objects too deeply to be read (about a thousand levels), as no "
        "tool's answers do; check that it is the file meant"
    )


def _cut_short_sentence(path: Path, n: int) -> str:
    return f"{path} line {n} is cut short (its JSON object does not end); copy the whole file again"


def _text_lines(path: Path) -> list[str]:
    """The file's lines as UTF-8 text; a file that ends inside a character was cut short there."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise unreadable(path, error, DENIED) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        n = data.count(b"\n", 0, error.start) + 1
        if error.end >= len(data) and error.reason == "unexpected end of data":
            raise VlmgridError(_cut_short_sentence(path, n)) from None
        raise VlmgridError(f"{path} line {n} is not UTF-8 text; save the file as UTF-8") from None
    # A JSON line ends at "\n" only: str.splitlines() also splits at U+2028, U+0085 and the like, which JSON
    # strings may hold raw (lmms-eval writes them), and would cut such a line in two.
    return text.split("\n")


def read_json_lines(path: Path, required: Sequence[str], what: str) -> list[tuple[int, dict]]:
    """The file's JSON objects with their line numbers (blank lines skipped); a line that is not one, or lacks
    a `required` key, is refused in one sentence saying the file is not `what`; a line cut short, or nested
    too deeply to parse, is named."""
    if not path.is_file():
        raise VlmgridError(f"{path} is not a file; {what} is one JSON object a line")
    lines = []
    for n, line in enumerate(_text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            if cut_short(error, line):
                raise VlmgridError(_cut_short_sentence(path, n)) from None
            item = None
        except RecursionError:
            raise too_deep(path, n) from None
        if not isinstance(item, dict):
            raise VlmgridError(
                f"{path} line {n} is not a JSON object: the file is not {what} (give the right --format)"
            )
        missing = [key for key in required if key not in item]
        if missing:
            raise VlmgridError(
                f"{path} line {n} has no `{missing[0]}`: the file is not {what} (give the right --format)"
            )
        lines.append((n, item))
    return lines


def first_json_object(path: Path) -> dict | None:
    """The object on the file's first non-blank line (None when that line is not a JSON object): enough to
    tell a JSON-lines format by its keys without reading the whole file. A file of that one line, cut short,
    is refused naming it (no format could be told from it, and the cause is the copy), and so are a line
    nested too deeply to parse and a file that cannot be read."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            numbered = ((n, line) for n, line in enumerate(handle, start=1) if line.strip())
            n, first = next(numbered, (1, ""))
            alone = next(numbered, None) is None
    except OSError as error:
        raise unreadable(path, error, DENIED) from None
    try:
        item = json.loads(first)
    except json.JSONDecodeError as error:
        if alone and first.lstrip().startswith("{") and cut_short(error, first):
            raise VlmgridError(_cut_short_sentence(path, n)) from None
        return None
    except ValueError:
        return None
    except RecursionError:
        raise too_deep(path, n) from None
    return item if isinstance(item, dict) else None
