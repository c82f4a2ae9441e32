"""Text from a config, a dataset or a model, made safe for the place where it lands: a web page, a CSV file
that a spreadsheet opens, a Markdown table.

- `script_json`: a value as JSON inside a `<script>` element, which the HTML parser ends at the first `</script`
  whatever the JSON means, and which `<!--` and (in older engines) U+2028/U+2029 also break: `<`, `>`, `&`,
  U+2028 and U+2029 are written as JSON escapes (`\\u003c` ...), so the text parses to the same value and holds
  no markup. (HTML text and attribute values need only `html.escape`, which the pages call as it is.)
- `report_param`: a value Snakemake's report shows among a job's parameters. Snakemake puts those, unescaped,
  in JSON inside a `<script>` of report.html; the value's text has none of the characters above.
- `spreadsheet_text` / `spreadsheet_frame`: a field of a CSV file, which a spreadsheet runs as a formula when
  its text starts with `=`, `+`, `-`, `@`, a tab or a carriage return (an MMBench category, a model's answer):
  such a text gets a leading single quote, as OWASP's CSV-injection guidance says, so it reads as text. A
  number, a negative one too, is left as it is: it runs nothing.
- `markdown_text`: text in a Markdown table or heading, where `<`, `>` and `&` would be raw HTML and `|` would
  end the cell: written as `&lt;`, `&gt;`, `&amp;` and `\\|`, which show as the same characters.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# What would end or bend a <script> element's text, and its JSON escape.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(value: Any) -> str:
    """`value` as JSON text that can stand inside a <script> element: the same value, no markup."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "".join(_SCRIPT_UNSAFE.get(char, char) for char in text)


def report_param(value: Any) -> str:
    """A rule parameter shown in Snakemake's report: `value` as script-safe JSON text (one text per value, so
    a change of value still reruns the job)."""
    return script_json(value)


# What a spreadsheet takes as the start of a formula (OWASP: CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_text(value: Any) -> Any:
    """`value` as a CSV field a spreadsheet reads, never runs: a text that would start a formula gets a leading
    single quote; a number, or a text that is only a number ("-3.2"), and anything else stay as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def spreadsheet_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell made `spreadsheet_text` (numeric columns untouched), for a CSV writer."""
    from pandas.api.types import is_numeric_dtype

    texts = [name for name, dtype in frame.dtypes.items() if not is_numeric_dtype(dtype)]
    if not texts:
        return frame
    safe = frame.copy()
    for name in texts:
        safe[name] = frame[name].map(spreadsheet_text)
    return safe


_MARKDOWN_UNSAFE = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|"}


def markdown_text(text: str) -> str:
    """`text` as it may stand in a Markdown table cell or heading: no HTML, no cell boundary."""
    return "".join(_MARKDOWN_UNSAFE.get(char, char) for char in text)
