"""The inspect page: one benchmark's items and every grid model's answers as one static HTML page.

Pure: `render_page` takes the rows the inspect stage read (`InspectPage`) and returns the page's text. Every
text from the data passes `html.escape`. The page is self-contained (thumbnails are data URIs, the style and
the filters are inline, no network), so it also works inside Snakemake's single-file report and when copied
alone. Its filters are plain JavaScript (`inspect_assets/inspect.js`): wrong answers or format errors of one
model or any, and items where the models disagree; a line says how many rows are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from importlib.resources import files

from vlmgrid.report.labels import metric_label

# Verdicts of one answer (one model, one item, one variant) under the benchmark's rule at item level.
RIGHT = "right"
WRONG = "wrong"
PARTIAL = "partly right"  # a soft score between 0 and 1 (VQA accuracy, DANCE's Acc@50 of one query)
FORMAT_ERROR = "format error"
NO_GOLD = "no gold"  # the benchmark hides its labels (the CVQA test copy): nothing to compare with
VERDICTS = (RIGHT, PARTIAL, WRONG, FORMAT_ERROR, NO_GOLD)

# Raw outputs and contexts longer than this are folded (a <details> element) so that a row stays readable.
FOLD_RAW_AT = 300
# Options beyond this many are summed up in one line ("… and 42 more"): DANCE queries have 50 candidates.
MAX_OPTIONS_SHOWN = 10
# A model that answered in more variants than this (classification prompt templates) gets a count per verdict,
# its lines folded under it.
FOLD_VARIANTS_AT = 4
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# The cell of an item a model's answer file lacks (a published answer set partial by construction): no
# verdict, so no filter counts it as wrong or as a format error.
NOT_ANSWERED = '<span class="dim">not answered</span>'


@dataclass(frozen=True)
class Answer:
    """One model's answer to one item in one variant (prompt template, prompt setting, answer mode)."""

    variant: str
    raw: str | None  # the model's output text; None when it answered by scores (log-likelihood, similarity)
    reading: str | None  # the parsed prediction as shown; None when nothing was read
    verdict: str  # one of VERDICTS
    note: str = ""  # why (the error of a format error, the soft score of a partial answer)
    prompt: str | None = (
        None  # what the model was handed (`vlmgrid inputs`' text: system text and chat template)
    )


@dataclass(frozen=True)
class Item:
    item_id: str
    thumbnail: str | None  # a data URI, or None
    image_note: str  # shown instead of a thumbnail: "text only", "image unreadable: ..."; "" with one
    question: str
    options: Sequence[str]
    # how options are shown: "letters" (A. B. ...), "numbers" (#1 #2 ..., DANCE's candidates) or "none"
    labels: str
    gold: str
    answers: dict[str, list[Answer]]  # by model (the models that can run the benchmark), variants in order
    disagree: bool  # the models' readings differ (the stage's rule)
    # (label, text) of what the prompt showed besides the question and options, before the question
    # (MMBench's and ScienceQA's context)
    context: Sequence[tuple[str, str]] = ()
    # the models whose answer to the item changed when it was answered one at a time (the batch check)
    batch: Sequence[str] = ()


@dataclass(frozen=True)
class InspectPage:
    benchmark: str
    kind: str
    metric: str
    rule: str  # one sentence: what right and wrong mean here
    models: Sequence[str]  # the page's model columns, grid order
    not_applicable: dict[str, str]  # model -> reason, said once on the page
    items: Sequence[Item]
    n_items: int  # the benchmark's items, all of them
    sample_note: str = ""  # how the items shown were chosen when they are not all of them
    notes: Sequence[str] = field(default_factory=tuple)  # anything else said once (labels hidden, ...)
    # a model's answers depend on the batch: the page gets that filter (a page without one is as it was)
    batch_filter: bool = False


def _asset(name: str) -> str:
    return files("vlmgrid.report").joinpath("inspect_assets", name).read_text("utf-8")


def _text(value: str | None) -> str:
    return escape(value if value is not None else "")


def option_label(index: int, labels: str) -> str:
    """The label an option is shown with ("B. ", "#2 ", or "")."""
    if labels == "letters" and index < len(LETTERS):
        return f"{LETTERS[index]}. "
    return f"#{index + 1} " if labels == "numbers" else ""


def _option_lines(options: Sequence[str], labels: str) -> str:
    if not options:
        return ""
    shown = [
        f"<li>{escape(option_label(i, labels) + str(option))}</li>"
        for i, option in enumerate(options[:MAX_OPTIONS_SHOWN])
    ]
    if len(options) > MAX_OPTIONS_SHOWN:
        shown.append(f'<li class="more">… and {len(options) - MAX_OPTIONS_SHOWN} more</li>')
    return f'<ol class="options">{"".join(shown)}</ol>'


def _folded(text: str, tag: str, css: str) -> str:
    """`text` escaped in a `tag` of class `css`; past FOLD_RAW_AT characters, its start, the whole folded
    under it."""
    if len(text) > FOLD_RAW_AT:
        return (
            f'<details><summary><{tag} class="{css}">{escape(text[:FOLD_RAW_AT])}…</{tag}></summary>'
            f'<{tag} class="{css}">{escape(text)}</{tag}></details>'
        )
    return f'<{tag} class="{css}">{escape(text)}</{tag}>'


def _raw(raw: str | None) -> str:
    if raw is None:  # answered by scores (log-likelihood, similarity): there is no text to show
        return ""
    return _folded(raw, "pre", "raw")


def _context(item: Item) -> str:
    # In the prompt's order and under its labels: the reader sees what the model read before the question.
    return "".join(
        f'<div class="context"><span class="label">{escape(label)}</span> '
        f"{_folded(text, 'span', 'text')}</div>"
        for label, text in item.context
    )


def _prompt(prompt: str | None) -> str:
    """What the model was handed, folded under a "prompt" summary: the exact text its tokenizer read."""
    if prompt is None:
        return ""
    return (
        '<details class="prompt"><summary>prompt</summary>'
        f'<pre class="prompt">{escape(prompt)}</pre></details>'
    )


def _answer(answer: Answer, several: bool) -> str:
    variant = f'<span class="variant">{escape(answer.variant)}</span> ' if several else ""
    # A format error's note says what went wrong; "nothing read" beside it would say it twice.
    reading = (
        f'<span class="reading">{escape(answer.reading)}</span>'
        if answer.reading is not None
        else ""
        if answer.verdict == FORMAT_ERROR
        else '<span class="dim">nothing read</span>'
    )
    note = f' <span class="note">{escape(answer.note)}</span>' if answer.note else ""
    verdict_class = answer.verdict.replace(" ", "-")
    return (
        f'<div class="answer {verdict_class}">{variant}<span class="verdict">{escape(answer.verdict)}</span>'
        f" {reading}{note}{_raw(answer.raw)}{_prompt(answer.prompt)}</div>"
    )


def _answers(answers: Sequence[Answer]) -> str:
    """One line per variant; past FOLD_VARIANTS_AT variants a count per verdict, the lines folded under it."""
    several = len(answers) > 1 or any(answer.variant != "default" for answer in answers)
    lines = "".join(_answer(answer, several) for answer in answers)
    if len(answers) <= FOLD_VARIANTS_AT:
        return lines
    counts = ", ".join(
        f"{sum(a.verdict == verdict for a in answers)} {verdict}"
        for verdict in VERDICTS
        if any(a.verdict == verdict for a in answers)
    )
    return (
        f'<details><summary class="summary">{len(answers)} variants: '
        f"{escape(counts)}</summary>{lines}</details>"
    )


def _flags(item: Item, models: Sequence[str], verdicts: Sequence[str]) -> str:
    """The model columns (by position) in which some answer of the item has one of `verdicts`."""
    return " ".join(
        str(position)
        for position, model in enumerate(models)
        if any(answer.verdict in verdicts for answer in item.answers.get(model, []))
    )


def _batch_flags(item: Item, models: Sequence[str]) -> str:
    """The model columns (by position) whose answer to the item depends on the batch, as a data attribute."""
    if not item.batch:
        return ""
    return (
        ' data-batch="'
        + " ".join(str(position) for position, model in enumerate(models) if model in item.batch)
        + '"'
    )


def _row(item: Item, models: Sequence[str]) -> str:
    image = (
        f'<img src="{escape(item.thumbnail)}" alt="{escape(item.item_id)}">'
        if item.thumbnail
        else f'<span class="dim">{escape(item.image_note)}</span>'
    )
    question = f'<div class="question">{_text(item.question)}</div>' if item.question else ""
    cells = []
    for model in models:
        answers = item.answers.get(model, [])
        # no answer at all: the model's answer file lacks the item by construction (a partial import)
        cells.append(f"<td>{_answers(answers) if answers else NOT_ANSWERED}</td>")
    return (
        f'<tr class="item" data-id="{escape(item.item_id)}" '
        f'data-wrong="{_flags(item, models, (WRONG, PARTIAL))}" '
        f'data-error="{_flags(item, models, (FORMAT_ERROR,))}" '
        f'data-disagree="{"1" if item.disagree else "0"}"'
        f"{_batch_flags(item, models)}>"
        f'<td class="thumb">{image}</td>'
        f'<td class="itemtext"><div class="id">{escape(item.item_id)}</div>{_context(item)}{question}'
        f'{_option_lines(item.options, item.labels)}<div class="gold">gold: {_text(item.gold)}</div></td>'
        f"{''.join(cells)}</tr>"
    )


def _preamble(page: InspectPage) -> str:
    lines = [f"<p>{escape(page.rule)}</p>"]
    if page.sample_note:
        lines.append(f'<p class="sample">{escape(page.sample_note)}</p>')
    for model, reason in page.not_applicable.items():
        lines.append(f'<p class="na"><b>{escape(model)}</b>: n/a, {escape(reason)}</p>')
    lines.extend(f'<p class="notice">{escape(note)}</p>' for note in page.notes)
    return "\n".join(lines)


def _controls(models: Sequence[str], batch_filter: bool = False) -> str:
    choices = "".join(
        f'<option value="{position}">{escape(model)}</option>' for position, model in enumerate(models)
    )
    return (
        '<div class="controls">'
        '<label>show <select id="show">'
        '<option value="all">all items</option>'
        '<option value="wrong">wrong answers</option>'
        '<option value="error">format errors</option>'
        '<option value="disagree">models disagree</option>'
        + ('<option value="batch">answers depend on the batch</option>' if batch_filter else "")
        + "</select></label> "
        f'<label>of <select id="model"><option value="any">any model</option>{choices}</select></label> '
        '<span id="count"></span></div>'
    )


def render_page(page: InspectPage) -> str:
    """The page's HTML text."""
    title = f"{page.benchmark}: items and answers"
    header = "".join(f"<th>{escape(model)}</th>" for model in page.models)
    rows = "\n".join(_row(item, page.models) for item in page.items)
    if not page.models:
        table = (
            '<p class="notice">No model of the grid can run this benchmark: there are no answers to show.</p>'
        )
    else:
        table = (
            f"{_controls(page.models, page.batch_filter)}<table><thead><tr><th>image</th><th>item</th>"
            f"{header}</tr></thead>"
            f"<tbody>\n{rows}\n</tbody></table>"
        )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)}</title>
<style>
{_asset("inspect.css")}
</style>
</head>
<body>
<h1>{escape(page.benchmark)}</h1>
<p class="sub">kind {escape(page.kind)} · metric {escape(metric_label(page.metric))} · {page.n_items} items ·
{len(page.items)} on this page</p>
{_preamble(page)}
{table}
<script>
{_asset("inspect.js")}
</script>
</body>
</html>
"""
