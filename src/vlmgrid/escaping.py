"""Text from a config, a dataset or a model, made safe for the place in a web page where it lands.

- `script_json`: a value as JSON inside a `<script>` element, which the HTML parser ends at the first `</script`
  whatever the JSON means, and which `<!--` and (in older engines) U+2028/U+2029 also break: `<`, `>`, `&`,
  U+2028 and U+2029 are written as JSON escapes (`\\u003c` ...), so the text parses to the same value and holds
  no markup. (HTML text and attribute values need only `html.escape`, which the pages call as it is.)
- `report_param`: a value Snakemake's report shows among a job's parameters. Snakemake puts those, unescaped,
  in JSON inside a `<script>` of report.html; the value's text has none of the characters above.
"""

from __future__ import annotations

import json
from typing import Any

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
