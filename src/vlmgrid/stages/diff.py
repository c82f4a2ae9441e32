"""The diff stage (`vlmgrid diff BENCH A B`): why two numbers of one benchmark differ (docs/diff.md).

A and B are predictions files, or models of the grid (their predictions files). The item-by-item comparison
and each kind of difference's effect on the headline are `vlmgrid.metrics.differences`, on the metric the
score uses. With `reread`, both sets' raw texts are read again by one parser (the benchmark's headline reader,
or its lenient one), so what is left differs in the answers, not in the reading. With `tool`, one set is
diffed against itself: its publishing tool's own reading (A: its verdicts or rule, `stages.tool_reading`)
against the official one it records (B), the items read differently split by cause (the tool's judge, its
matcher). The summary and the items are printed; `csv` and `json` get the full list.
"""

from __future__ import annotations

import csv
import io
import textwrap
from pathlib import Path

import pandas as pd

from vlmgrid import __version__, paths
from vlmgrid.codeversion import running_version
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.escaping import spreadsheet_text, terminal_json, terminal_text
from vlmgrid.fileio import atomic_path, write_json
from vlmgrid.metrics.differences import DiffClass, Differences, diff_predictions
from vlmgrid.predictions import (
    GIVEN_HINT,
    check_data_fingerprint,
    read_metadata,
    read_predictions,
    recorded_not_applicable,
)
from vlmgrid.report.inspect_page import option_label
from vlmgrid.stages.imports import PROTOCOL_PARSERS
from vlmgrid.stages.inspect import ITEM_RULES
from vlmgrid.stages.score import read_again

READINGS = ("recorded", "headline", "lenient")
# the pairs of one set read differently by its tool and by the official rule, by cause (`--tool-reading`)
TOOL_CLASSES = (
    DiffClass("judge", "read by the tool's judge"),
    DiffClass("matcher", "read by the tool's matcher"),
)
WIDTH = 100  # the printed output fits a terminal this wide
# The item table's columns after the id: (header, width on a line of WIDTH beside a 16-column id, least
# width). An id is never cut (two ids that differ in their last character would read the same), so these share
# what the longest id leaves, and the texts in them are cut; below their least, the ids have lines of their
# own.
ITEM_COLUMNS = (
    ("A raw", 20, 12),
    ("B raw", 20, 12),
    ("A reading", 12, 10),
    ("B reading", 12, 10),
    ("gold", 10, 8),
)
GAP = "  "
DECIMALS = 4
CSV_COLUMNS = (
    "id",
    "variant",
    "class",
    "raw_a",
    "raw_b",
    "prediction_a",
    "prediction_b",
    "prediction_index_a",
    "prediction_index_b",
    "error_a",
    "error_b",
    "gold",
    "gold_index",
)


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), DECIMALS)


def set_path(config: Config, benchmark: str, given: str) -> Path:
    """A set named on the command line: a predictions file, or a model of the grid (its predictions file)."""
    path = Path(given)
    if given in config.data["models"] and not path.exists():
        return paths.predictions_path(config.results_dir, given, benchmark)
    if path.exists() or given.endswith(".parquet"):
        return path
    raise VlmgridError(
        f'"{given}" is neither a predictions file nor a model of {config.path}; give the file\'s '
        f"path or one of the models: {', '.join(config.data['models'])}"
    )


def _read_set(bench, path: Path) -> pd.DataFrame:
    predictions = read_predictions(path, GIVEN_HINT, given=True)
    metadata = read_metadata(path)
    reason = recorded_not_applicable(metadata)
    if reason is not None:
        raise VlmgridError(
            f"predictions file {path} is the record of a cell that cannot run ({reason}): it holds no "
            f"answers to diff"
        )
    made_for = metadata.get("benchmark")
    if (
        made_for
        and made_for != bench.name
        and metadata.get("data_fingerprint") != bench.manifest.get("fingerprint")
    ):
        # before the data check, which would say the benchmark "was prepared again"
        raise VlmgridError(
            f"predictions file {path} holds answers to benchmark {made_for} (its metadata say so), "
            f"not {bench.name}; diff it with another set of {made_for}: "
            f"`vlmgrid diff {made_for} {path} ...`"
        )
    check_data_fingerprint(
        metadata, bench.manifest.get("fingerprint"), path, "diff predictions of the benchmark as prepared now"
    )
    # as the score leaves them out: the items its strategy cannot answer (a contrastive model's text-only
    # questions) are not applicable, never its wrong answers
    from vlmgrid.stages.score import applicable_items

    return applicable_items(bench, metadata.get("strategy"), bench.records, predictions, None)[1]


def headline_parsers(kind) -> dict[str, str]:
    """{variant ("*": any): parser} of the headline reading: the kind's parser, else its protocol's default
    (Kaleidoscope: the parser of each prompt mode, the variant)."""
    from vlmgrid.protocols.exam_choice import MODE_PARSERS
    from vlmgrid.protocols.parsing import PARSERS

    if kind.parser:
        return {"*": kind.parser}
    if kind.protocol in PROTOCOL_PARSERS:
        return {"*": PROTOCOL_PARSERS[kind.protocol]}
    if kind.protocol == "exam_choice":
        return {
            mode: name
            for mode, read in MODE_PARSERS.items()
            for name in PARSERS
            if PARSERS.get(name).read is read
        }
    return {}


def reread(bench, predictions: pd.DataFrame, reading: str, which: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The set with its raw texts read again (`reading`: "headline" or "lenient"), and {variant: parser}."""
    parsers = headline_parsers(bench.kind) if reading == "headline" else dict(bench.kind.lenient_parsers)
    if not parsers:
        what = "parser of generated text" if reading == "headline" else "lenient reading"
        raise VlmgridError(
            f"benchmark {bench.name} ({bench.kind.name}) has no {what}; diff it with the readings recorded"
        )
    result = read_again(bench.records, predictions, parsers)
    if result is None:
        raise VlmgridError(
            f"{which} holds no raw text to read again (its answers were not generated); diff it with "
            f"the readings recorded"
        )
    return result


def _tool_diff(bench, path: Path) -> tuple[Differences, dict]:
    """The set's tool reading (A) against its official reading as recorded (B), split by cause; and the
    document's `tool` ({tool, source, n_read_by_judge})."""
    from vlmgrid.stages.tool_reading import reading

    predictions = _read_set(bench, path)
    read = reading(bench.kind.name, read_metadata(path), bench.records, predictions, str(path))
    if read is None:
        raise VlmgridError(
            f"{path} carries no reading of the tool that published it (no verdicts in its metadata, "
            f"and no tool's rule applies to its import format on {bench.kind.name}); diff it with "
            f"another set, or import the tool's files again with their verdicts beside them"
        )
    variants = (
        predictions["variant"].fillna("default").astype(str)
        if "variant" in predictions.columns
        else ["default"] * len(predictions)
    )
    causes = {
        (item, variant): "judge" if (item, variant) in read.judged else "matcher"
        for item, variant in zip(predictions["id"].astype(str), variants)
    }
    result = diff_predictions(
        bench.kind.metric,
        bench.records,
        read.frame,
        predictions,
        names=(f"{read.tool}'s reading of {path}", str(path)),
        causes=causes,
        cause_classes=TOOL_CLASSES,
    )
    return result, {"tool": read.tool, "source": read.source, "n_read_by_judge": len(read.judged)}


def diff_sets(
    config: Config,
    benchmark: str,
    a: str,
    b: str | None,
    *,
    reading: str = "recorded",
    csv_out: str | None = None,
    json_out: str | None = None,
    limit: int = 10,
    tool: bool = False,
) -> str:
    """`vlmgrid diff`: the printed summary and items; the full list to `csv_out` and `json_out`. With `tool`,
    `b` is None: A's tool reading against its official one."""
    from vlmgrid.benchmarks import load_benchmark

    if reading not in READINGS:
        raise VlmgridError(f'reading "{reading}" is unknown; use one of {", ".join(READINGS)}')
    if limit < 0:
        raise VlmgridError(f"--limit must be 0 or more, got {limit}")
    if tool and (b is not None or reading != "recorded"):
        raise VlmgridError(
            "--tool-reading compares the two readings of one set: give one set, without B or --reread"
        )
    if not tool and b is None:
        raise VlmgridError(
            "give the set B to diff A with, or --tool-reading to diff A's tool reading with its official one"
        )
    bench = load_benchmark(paths.bench_dir(config.data_dir, benchmark))
    if tool:
        path_a = set_path(config, benchmark, a)
        result, about = _tool_diff(bench, path_a)
        document = as_document(bench.name, path_a, path_a, "tool", {}, result, None)
        document["tool"] = about
        return _written(document, result, csv_out, json_out, limit)
    path_a, path_b = set_path(config, benchmark, a), set_path(config, benchmark, b)
    preds_a, preds_b = _read_set(bench, path_a), _read_set(bench, path_b)
    recorded = None
    parsers: dict[str, dict[str, str]] = {}
    if reading != "recorded":
        recorded = diff_predictions(
            bench.kind.metric, bench.records, preds_a, preds_b, names=(str(path_a), str(path_b))
        )
        preds_a, parsers["a"] = reread(bench, preds_a, reading, str(path_a))
        preds_b, parsers["b"] = reread(bench, preds_b, reading, str(path_b))
    result = diff_predictions(
        bench.kind.metric, bench.records, preds_a, preds_b, names=(str(path_a), str(path_b))
    )
    document = as_document(bench.name, path_a, path_b, reading, parsers, result, recorded)
    return _written(document, result, csv_out, json_out, limit)


def _written(
    document: dict, result: Differences, csv_out: str | None, json_out: str | None, limit: int
) -> str:
    if csv_out:
        with atomic_path(csv_out) as tmp:
            tmp.write_text(items_csv(result), encoding="utf-8")
    if json_out:
        write_json(json_out, document)
    return render(document, limit)


def as_document(
    benchmark: str,
    path_a: Path,
    path_b: Path,
    reading: str,
    parsers: dict,
    result: Differences,
    recorded: Differences | None,
) -> dict:
    """The diff as the JSON file holds it (docs/diff.md)."""

    def side(path, value, own, errors, unreadable, before):
        out = {"file": str(path), "value": _r(value), "error_rows": errors, "unreadable": unreadable}
        if own is not None:
            out["value_all_answered"] = _r(own)
        if before is not None:
            out["value_recorded"] = _r(before)
        return out

    return {
        "benchmark": benchmark,
        "metric": result.metric,
        "headline": result.headline,
        "option_labels": ITEM_RULES.get(result.metric).labels,
        "reading": reading,
        "parsers": parsers,
        "a": side(
            path_a,
            result.value_a,
            result.own_value_a,
            result.error_rows_a,
            result.unreadable_a,
            recorded.value_a if recorded else None,
        ),
        "b": side(
            path_b,
            result.value_b,
            result.own_value_b,
            result.error_rows_b,
            result.unreadable_b,
            recorded.value_b if recorded else None,
        ),
        "n_common": result.n_common,
        "n_rows": result.n_rows,
        "difference": _r(result.difference),
        "order_matters": result.order_matters,
        "classes": [
            {
                "class": c.name,
                "label": c.label,
                "items": c.items,
                "effect": _r(c.effect),
                "alone": _r(c.alone),
            }
            for c in result.classes
        ],
        "only_a": result.only_a,
        "only_b": result.only_b,
        "variant_pairing": list(result.variant_pairing) if result.variant_pairing else None,
        "items": [_item(d) for d in result.items],
        "vlmgrid_version": __version__,
        "code_version": running_version(),
    }


def _item(d) -> dict:
    return {
        "id": d.id,
        "variant": d.variant,
        "class": d.diff_class,
        "raw_a": d.raw_a,
        "raw_b": d.raw_b,
        "prediction_a": d.prediction_a,
        "prediction_b": d.prediction_b,
        "prediction_index_a": d.prediction_index_a,
        "prediction_index_b": d.prediction_index_b,
        "error_a": d.error_a,
        "error_b": d.error_b,
        "gold": d.gold,
        "gold_index": d.gold_index,
    }


def items_csv(result: Differences) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for d in result.items:
        # answers and gold texts are data: a spreadsheet must read them, not run them
        writer.writerow({k: ("" if v is None else spreadsheet_text(v)) for k, v in _item(d).items()})
    return buffer.getvalue()


# --- the printed output ------------------------------------------------------------------------------------
# Every text from the data (ids, variants, answers, gold, error messages, paths) is printed escaped
# (terminal_text): an id holding ESC, CR or U+202E would otherwise recolour the terminal or split its row.


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrap(text: str, indent: str = "") -> list[str]:
    # Ids and paths are never broken: a word longer than the line has a line of its own.
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _whole(label: str, text: str) -> list[str]:
    """`label` and `text` (a path: never cut) on one line where they fit; else `text` on a line of its own,
    indented unless that pushes it past `WIDTH`."""
    if len(label) + len(text) <= WIDTH:
        return [label + text]
    return [label.rstrip(), "    " + text if len(text) + 4 <= WIDTH else text]


def _share(room: int) -> list[int]:
    """The widths of `ITEM_COLUMNS` in `room` columns: each its least, and what is left in proportion to what
    each gets beyond its least on a line beside a 16-column id."""
    least = [column[2] for column in ITEM_COLUMNS]
    weights = [column[1] - column[2] for column in ITEM_COLUMNS]
    spare = room - sum(least)
    widths = [w + spare * weight // sum(weights) for w, weight in zip(least, weights)]
    for k in range(room - sum(widths)):  # what the rounding down left, to the raw texts first
        widths[k % len(widths)] += 1
    return widths


def _item_layout(name_width: int) -> tuple[int | None, list[int]]:
    """(the id column's width, or None where each id has a line of its own; the widths of `ITEM_COLUMNS`)."""
    id_width = max(name_width, len("id"))
    gaps = len(GAP) * len(ITEM_COLUMNS)  # one before each column; below its id, the first is the indent
    if WIDTH - id_width - gaps >= sum(column[2] for column in ITEM_COLUMNS):
        return id_width, _share(WIDTH - id_width - gaps)
    return None, _share(WIDTH - gaps)


def _raw(text: str | None, error: str | None) -> str:
    # Quoted, with escapes: white space at the ends and line breaks stay visible.
    if text is None:
        return (
            "(no text)" if error is None else f"(error: {terminal_text(error)})"
        )  # no text: answered by scores
    return terminal_json(text)


def _option(text: str | None, index: int, labels: str) -> str | None:
    # As a researcher reads a multiple-choice answer: the option's label and its text ("D. diamond").
    if text is None:
        return None
    return terminal_text(text) if index < 0 else option_label(index, labels) + terminal_text(text)


def _reading(prediction: str | None, index: int, error: str | None, labels: str) -> str:
    if error is not None:
        return "(error)"
    return "(unread)" if prediction is None else _option(prediction, index, labels)


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "failed"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _count(n: int, what: str = "item") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _share_of(n: int, rows: int) -> str:
    """A count of rows and, where it is not 0, its percent of `rows` ("3 (3.6%)")."""
    if not n:
        return "0"
    percent = 100.0 * n / rows
    return f"{n} ({'<0.1' if percent < 0.05 else f'{percent:.1f}'}%)"


def render(document: dict, limit: int) -> str:
    """The summary table, the notes and the items (at most `limit` per class), in `WIDTH` columns."""
    head, a, b = document["headline"], document["a"], document["b"]
    lines = _wrap(
        f"{terminal_text(document['benchmark'])}: {head} ({document['metric']} metric), A - B explained "
        f"item by item"
    )
    # whole, however long: a path cut short names nothing
    if document["reading"] == "tool":
        about = document["tool"]
        how = (
            "the verdicts it wrote"
            if about["source"] == "verdicts"
            else "its rule on the raw answers, no judge"
        )
        lines += _whole("  set = ", terminal_text(a["file"]))
        lines += _wrap(
            f"A = {terminal_text(about['tool'])}'s own reading of the set ({how}; "
            f"{_count(about['n_read_by_judge'])} read by its judge); B = the official reading the file "
            f"records (the headline's)",
            "  ",
        )
    elif document["reading"] == "recorded":
        lines += _whole("  A = ", terminal_text(a["file"])) + _whole("  B = ", terminal_text(b["file"]))
        lines.append("  readings: as the files record them")
    else:
        lines += _whole("  A = ", terminal_text(a["file"])) + _whole("  B = ", terminal_text(b["file"]))
        names = sorted({name for used in document["parsers"].values() for name in used.values()})
        lines += _wrap(
            f"readings: both sets' raw texts read again by the {document['reading']} reading "
            f"({', '.join(names)}); as recorded, A {_number(a['value_recorded'])} and B "
            f"{_number(b['value_recorded'])}",
            "  ",
        )
    lines.append("")
    label_width = max(len(c["label"]) for c in document["classes"]) + 2
    alone_header = "alone" if document["order_matters"] else ""
    value_header = f"{head} (points)"
    w = max(14, len(value_header))
    lines.append(f"{'':<{label_width}}{'items':>7}  {value_header:>{w}}  {alone_header:>8}".rstrip())
    lines.append(f"{'A':<{label_width}}{document['n_common']:>7}  {_number(a['value']):>{w}}")
    lines.append(f"{'B':<{label_width}}{document['n_common']:>7}  {_number(b['value']):>{w}}")
    for c in document["classes"]:
        alone = _number(c["alone"], True) if document["order_matters"] else ""
        lines.append(
            (
                f"{c['label']:<{label_width}}{c['items']:>7}  {_number(c['effect'], True):>{w}}  {alone:>8}"
            ).rstrip()
        )
    changed = sum(c["items"] for c in document["classes"])
    lines.append(f"{'A - B':<{label_width}}{changed:>7}  {_number(document['difference'], True):>{w}}")
    lines.append("")
    notes = []
    if document["difference"] is None:
        notes.append(
            "A set whose every answer is a format error has no headline (its cell failed), so no effect "
            "is computed."
        )
    elif document["order_matters"]:
        notes.append(
            f"{head} is not a sum over items: each class's effect is B's headline after A's rows are put "
            f"in on its items, after the classes above it; 'alone': put in on their own."
        )
    for key, side, name in (("only_a", "a", "A"), ("only_b", "b", "B")):
        ids = [terminal_text(item_id) for item_id in document[key]]
        if ids:
            own = document[side].get("value_all_answered")
            notes.append(
                f"Only in {name}: {_count(len(ids))} ({', '.join(ids[:3])}{', …' if len(ids) > 3 else ''}); "
                f"{name} over all it answers: {_number(own)}."
            )
    if document["only_a"] or document["only_b"]:
        notes.append(f"The headlines above are over the {document['n_common']} items both sets answer.")
    rows = document["n_rows"]
    notes.append(
        f"Unreadable answers: A {_share_of(a['unreadable'], rows)}, B {_share_of(b['unreadable'], rows)}. "
        f"Error rows (a failed request or image): A {_share_of(a['error_rows'], rows)}, B "
        f"{_share_of(b['error_rows'], rows)}. Of the {_count(rows, 'row')} each set has here; the score "
        f"counts both as format errors."
    )
    read_differently = next(c["items"] for c in document["classes"] if c["class"] == "reading")
    if read_differently and document["reading"] == "recorded":
        notes.append(
            f"{_count(read_differently)} read differently: --reread headline reads both sets' raw texts "
            f"again with the benchmark's own parser, so that what is left differs in the answers."
        )
    if document["variant_pairing"]:
        va, vb = (terminal_text(variant) for variant in document["variant_pairing"])
        notes.append(f'A\'s variant "{va}" is paired with B\'s "{vb}".')
    lines += [line for note in notes for line in _wrap(note)]
    several = len({item["variant"] for item in document["items"]}) > 1
    labels = document["option_labels"]
    tables = [
        (c, [item for item in document["items"] if item["class"] == c["class"]]) for c in document["classes"]
    ]

    def name(item) -> str:
        shown = terminal_text(item["id"])
        return f"{shown} [{terminal_text(item['variant'])}]" if several else shown

    # one layout for every table: the columns line up from one class to the next
    id_width, widths = _item_layout(
        max((len(name(item)) for _, items in tables for item in items[:limit]), default=0)
    )

    def row(first: str, cells) -> list[str]:
        text = GAP.join(f"{_cut(cell, w):<{w}}" for cell, w in zip(cells, widths))
        if id_width is None:
            return [first, (GAP + text).rstrip()]
        return [(f"{first:<{id_width}}" + GAP + text).rstrip()]

    for c, items in tables:
        if not items:
            continue
        lines += ["", f"{c['label']} ({len(items)}):"]
        lines += row("id", [column[0] for column in ITEM_COLUMNS])
        for item in items[:limit]:
            lines += row(
                name(item),
                (
                    _raw(item["raw_a"], item["error_a"]),
                    _raw(item["raw_b"], item["error_b"]),
                    _reading(item["prediction_a"], item["prediction_index_a"], item["error_a"], labels),
                    _reading(item["prediction_b"], item["prediction_index_b"], item["error_b"], labels),
                    _option(item["gold"], item["gold_index"], labels) or "",
                ),
            )
        if len(items) > limit:
            lines += _wrap(
                f"… and {len(items) - limit} more: --limit {len(items)} prints them, --csv FILE or --json "
                f"FILE writes every item"
            )
    return "\n".join(lines)
