"""docs/hostile-inputs.md names real tests: every `tests/<file>.py::<name>` in its last column (and every
`::<name>` after it, which means the same file) is a test function defined in that file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "hostile-inputs.md"


def named_tests(text: str) -> list[tuple[str, str]]:
    named = []
    for line in text.splitlines():
        if not line.startswith("|") or line.startswith("| ---"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        current = None
        for file, name in re.findall(r"`(tests/[\w/]+\.py)?::(\w+)`", cells[-1]):
            current = file or current
            named.append((current, name))
    return named


def test_the_helper_reads_a_row_as_written():
    row = "| a | b | `tests/test_x.py::test_one`, `::test_two`, `tests/test_y.py::test_three` |"
    assert named_tests(row) == [
        ("tests/test_x.py", "test_one"),
        ("tests/test_x.py", "test_two"),
        ("tests/test_y.py", "test_three"),
    ]


def test_every_row_names_tests_that_exist():
    text = DOC.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("|") and not line.startswith("| ---")][1:]
    named = named_tests(text)
    assert rows and all(
        re.search(r"`(tests/[\w/]+\.py)?::\w+`", row.rstrip("|").rsplit("|", 1)[-1]) for row in rows
    )
    missing = [
        f"{file}::{name}"
        for file, name in named
        if file is None or not re.search(rf"^def {name}\(", (ROOT / file).read_text(encoding="utf-8"), re.M)
    ]
    assert missing == []
