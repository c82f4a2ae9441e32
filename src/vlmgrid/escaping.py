"""Text from a config, a dataset or a model, made safe for the place where it lands: a web page, a CSV file
that a spreadsheet opens, a Markdown table.

- `script_json`: a value as JSON inside a `<script>` element, which the HTML parser ends at the first
  `</script` whatever the JSON means, and which `<!--` and (in older engines) U+2028/U+2029 also break: `<`,
  `>`, `&`, U+2028 and U+2029 are written as JSON escapes (`\\u003c` ...), so the text parses to the same
  value and holds no markup. (HTML text and attribute values need only `html.escape`, which the pages call as
  it is.)
- `report_param`: a value Snakemake's report shows among a job's parameters. Snakemake puts those, unescaped,
  in JSON inside a `<script>` of report.html; the value's text has none of the characters above.
- `spreadsheet_text` / `spreadsheet_frame`: a field of a CSV file, which a spreadsheet runs as a formula when
  its text starts with `=`, `+`, `-`, `@`, a tab or a carriage return (an MMBench category, a model's answer):
  such a text gets a leading single quote, as OWASP's CSV-injection guidance says, so it reads as text. A
  number, a negative one too, is left as it is: it runs nothing.
- `markdown_text`: text in a Markdown table or heading, where `<`, `>` and `&` would be raw HTML and `|` would
  end the cell: written as `&lt;`, `&gt;`, `&amp;` and `\\|`, which show as the same characters.
- `terminal_text` / `terminal_json`: text a command prints on a terminal (an item id, a gold answer, a model's
  answer, a path), where a control character acts instead of showing: ESC starts a sequence that sets colours
  or the window's title, CR and LF overwrite or split a row, a bidirectional override reverses what follows.
  Each such character is written as a visible escape (`\\x1b`, `\\u202e`); the rest of the text, any script
  or language, shows as it is. `terminal_message`: the same for a sentence of vlmgrid's that names such text
  (an error, a log line), its backslashes left as they are.
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
    """`value` as a CSV field a spreadsheet reads, never runs: a text that would start a formula gets a
    leading single quote; a number, or a text that is only a number ("-3.2"), and anything else stay as they
    are."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def spreadsheet_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell made `spreadsheet_text` (numeric columns untouched), for a CSV
    writer."""
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


# What a terminal acts on rather than shows: the C0 controls (ESC, BEL, CR, LF, TAB ...), DEL and the C1
# controls (U+0080-U+009F; U+009B is an ESC [ of its own); what reorders the text around it: the bidirectional
# controls (embeddings, overrides, isolates, marks); U+2028 and U+2029, which end a line for a viewer that
# follows Unicode (less, an editor's terminal) and would split a row as LF does; and a lone surrogate (text
# decoded with surrogateescape), which a UTF-8 stream refuses to write, failing the command. Other invisible
# formatting characters (zero-width space and joiners, soft hyphen, BOM) stay as they are: they move nothing
# and colour nothing, and the joiners are part of ordinary Persian, Indic and emoji text, which escaping would
# garble; two ids that differ only in one look alike on a terminal, and the JSON and CSV outputs keep them
# apart.
_ACTING = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_ACTING_CHARS = re.compile(f"[\x00-\x1f{_ACTING}]")
_TERMINAL_UNSAFE = re.compile(f"[\\\\\x00-\x1f{_ACTING}]")
_JSON_UNSAFE = re.compile(f"[{_ACTING}]")  # JSON escapes the C0 controls and the backslash itself
_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def terminal_text(text: str) -> str:
    """`text` as a terminal may be sent it: each character it would act on (above) written as Python writes it
    in a string (`\\n`, `\\x1b`, `\\u202e`), and a backslash as `\\\\`, so that no text forges an escape."""
    return _TERMINAL_UNSAFE.sub(_escape, text)


def terminal_message(text: str) -> str:
    """A message vlmgrid prints (an error, a log line) that names text from the data: each character a
    terminal acts on escaped as `terminal_text` escapes it, a backslash left as it is. The message is read,
    not parsed back, and quotes library messages that already write a tab as `\\t` (YAML's, jsonschema's),
    which a doubled backslash would only garble."""
    return _ACTING_CHARS.sub(_escape, text)


def terminal_json(value: Any) -> str:
    """`value` as one line of JSON that a terminal may be sent: the same value, its text readable (not
    ASCII-escaped), and every character a terminal acts on written as a JSON escape (`\\u001b`, `\\u202e`)."""
    text = json.dumps(value, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
