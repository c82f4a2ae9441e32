"""The publishing tool's own reading of an imported prediction set, beside vlmgrid's official one
(docs/formats.md, "The tool's own reading").

The headline reads every answer by the benchmark authors' rule. A tool such as VLMEvalKit reads them its own
way: a rule-based matcher, and where that reads nothing a judge model. Its verdicts, where its files keep them
(a judge file beside VLMEvalKit's prediction file), are recorded in the predictions file's metadata at import
(`tool_reading`: the tool, the files, per item and variant the `hit`, whether the `judge` gave it and the
`option` read), never re-run; where they are not kept and the tool's reading is a deterministic rule
(VLMEvalKit's option matcher on ScienceQA), the rule gives them from the raw answers, with no judge (an answer
the matcher cannot read is wrong, as VLMEvalKit counts it without a judge). `reading` turns either into the
prediction set as the tool reads it, which the benchmark's metric scores as the tool's figure and `vlmgrid
diff --tool-reading` compares with the official reading item by item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file

#: (import format, benchmark kind) -> (the tool, its rule's name) where the tool's reading is a rule vlmgrid
#: restates (`vlmgrid.imports.vlmevalkit_matcher`), so that the raw answers give it without a verdict file
RULES = {("vlmevalkit", "scienceqa_img"): "VLMEvalKit"}
FROM_FILE, FROM_RULE = "verdicts", "rule"
YES_NO = ["yes", "no"]  # the options of a yes/no benchmark's records (MME, POPE)


@dataclass(frozen=True)
class ToolReading:
    """A prediction set as its tool reads it: `frame` the rows with the tool's reading in place of the
    official one (`prediction`, `prediction_index`), `judged` the (id, variant) rows its judge read, `source`
    FROM_FILE (its recorded verdicts) or FROM_RULE (the rule on the raw answers)."""

    tool: str
    source: str
    frame: pd.DataFrame
    judged: frozenset[tuple[str, str]]
    rule: str | None = None
    files: tuple[str, ...] = ()


def metadata_entry(tool: str | None, answers: Sequence, variant: str = "default") -> dict | None:
    """The predictions metadata's `tool_reading` of imported answers that carry the tool's verdicts (None when
    none does): the tool, its files with their sha256, and per item the verdict, in the answers' order."""
    judged = [answer for answer in answers if answer.verdict is not None]
    if not judged or tool is None:
        return None
    files = sorted({answer.verdict.source for answer in judged})
    return {
        "tool": tool,
        "version": None,
        "files": [{"file": file, "sha256": sha256_file(file)} for file in files],
        "items": [
            {
                "id": answer.record_id,
                "variant": variant,
                "hit": answer.verdict.hit,
                "judge": answer.verdict.judge,
                "option": answer.verdict.option,
            }
            for answer in judged
        ],
    }


def _variants(predictions: pd.DataFrame) -> pd.Series:
    if "variant" in predictions.columns:
        return predictions["variant"].fillna("default").astype(str)
    return pd.Series("default", index=predictions.index)


def _as_read(
    records: pd.DataFrame,
    predictions: pd.DataFrame,
    verdicts: dict[tuple[str, str], tuple[int, str | None]],
    where: str,
) -> pd.DataFrame:
    """The predictions with each row's reading the tool's: its gold option where it hit, the option it read
    where it missed and the letter is known, else nothing read (wrong, as a miss); a yes/no item's miss is the
    other answer (a yes/no metric reads nothing as "yes", which would make a miss on a "yes" item right)."""
    options = dict(zip(records["id"].astype(str), records["options"]))
    golds = dict(zip(records["id"].astype(str), records["answer_index"]))
    texts, indices = [], []
    for item, variant in zip(predictions["id"].astype(str), _variants(predictions)):
        if (item, variant) not in verdicts:
            raise VlmgridError(
                f"{where} gives no verdict of the tool for item {item} ({variant}); import the "
                f"answers again with the tool's files beside them"
            )
        hit, letter = verdicts[(item, variant)]
        choices = [str(option) for option in options[item]]
        index = int(golds[item]) if hit else -1
        if not hit and choices == YES_NO:
            index = 1 - int(golds[item])
        elif not hit and letter and len(letter) == 1 and 0 <= ord(letter) - ord("A") < len(choices):
            index = ord(letter) - ord("A") if ord(letter) - ord("A") != int(golds[item]) else -1
        texts.append(choices[index] if index >= 0 else None)
        indices.append(index)
    return predictions.assign(
        prediction=pd.Series(texts, index=predictions.index, dtype=object),
        prediction_index=pd.Series(indices, index=predictions.index, dtype="int64"),
    )


def _recorded(entry: dict, where: str) -> tuple[dict, frozenset]:
    items = entry.get("items")
    if not isinstance(entry.get("tool"), str) or not isinstance(items, list):
        raise VlmgridError(
            f"{where}: its metadata's tool_reading has no tool or no items; import the answers again"
        )
    verdicts, judged = {}, set()
    for item in items:
        try:
            key = (str(item["id"]), str(item.get("variant", "default")))
            verdicts[key] = (int(item["hit"]), item.get("option"))
        except (KeyError, TypeError, ValueError):
            raise VlmgridError(
                f"{where}: its metadata's tool_reading holds an item without id or hit ({item!r}); "
                f"import the answers again"
            ) from None
        if item.get("judge"):
            judged.add(key)
    return verdicts, frozenset(judged)


def reading(
    kind_name: str, metadata: dict, records: pd.DataFrame, predictions: pd.DataFrame, where: str
) -> ToolReading | None:
    """The set as its tool reads it: from the verdicts its metadata record, else by the tool's rule where one
    applies to its import format and the benchmark's kind; None when neither does."""
    entry = metadata.get("tool_reading")
    if isinstance(entry, dict):
        verdicts, judged = _recorded(entry, where)
        files = tuple(str(f.get("file")) for f in entry.get("files", []) if isinstance(f, dict))
        return ToolReading(
            entry["tool"], FROM_FILE, _as_read(records, predictions, verdicts, where), judged, files=files
        )
    provenance = metadata.get("provenance") if isinstance(metadata.get("provenance"), dict) else {}
    tool = RULES.get((provenance.get("format"), kind_name))
    if tool is None or "raw" not in predictions.columns:
        return None
    from vlmgrid.imports.vlmevalkit_matcher import RULE, matcher_hit

    options = dict(zip(records["id"].astype(str), records["options"]))
    golds = dict(zip(records["id"].astype(str), records["answer_index"]))
    verdicts = {}
    for item, variant, raw in zip(predictions["id"].astype(str), _variants(predictions), predictions["raw"]):
        verdicts[(item, variant)] = (
            matcher_hit(raw, options[item], golds[item]) if isinstance(raw, str) else (0, None)
        )
    return ToolReading(
        tool, FROM_RULE, _as_read(records, predictions, verdicts, where), frozenset(), rule=RULE
    )


def score_entry(read: ToolReading, value: float, metrics: dict | None = None) -> dict:
    """The score file's `tool_reading`: {tool, value, n_read_by_judge, source} (and the rule, or the files;
    `metrics`: each of the benchmark's figures as the tool reads the answers, {name: value}, e.g. MME's total,
    lmms-eval's own figure, beside the scaled headline)."""
    entry = {"tool": read.tool, "value": value, "n_read_by_judge": len(read.judged), "source": read.source}
    if metrics:
        entry["metrics"] = metrics
    if read.rule:
        entry["rule"] = read.rule
    if read.files:
        entry["files"] = list(read.files)
    return entry
