"""VLMEvalKit's judge file beside a prediction file: its own per-row verdicts, read (never re-run).

Layout (open-compass/VLMEvalKit at e8e78f05: `vlmeval/dataset/image_mcq.py`
`ImageMCQDataset.evaluate_heuristic`, `vlmeval/dataset/utils/multiple_choice.py` `mcq_vanilla_eval` and
`eval_vanilla`, `vlmeval/smp/file.py` `get_intermediate_file_path`): evaluating `<model>_<dataset>.xlsx`
writes `<model>_<dataset>_<judge>_result.xlsx` beside it (`.tsv` or `.json` under PRED_FORMAT; before
9cc14cd0, 2025-09-12, the prediction file's own extension), `<judge>` the judge's name as run.py gives it:
`openai` (chatgpt-0125, its default until a9343a1e), `gpt-4o-mini` (its default since), `exact_matching` (no
judge), or the `--judge` given. The rows are the prediction file's, sorted by `index`, its column names
lower-cased (the option letters kept), plus `hit` (1 when the letter read is the gold `answer`, else 0) and
`log`, "Match Log: <text>. " where <text> is:

- the `prediction` itself, when the option matcher (`can_infer`, `vlmevalkit_matcher`) read it;
- the judge model's answer, when the matcher read nothing and the judge's answer named an option;
- "Failed to predict, thus randomly generate one. " when the judge failed three times: a random letter;
- "Failed in Prefetch, no GPT-based answer matching under `exact_matching` policy." without a judge: "Z",
  wrong.

So a row was read by the judge when its log is neither its prediction nor the no-judge failure. The vanilla
evaluation and its "Match Log" exist since 646e7bc8 (2024-07-18); MMBench's circular evaluation writes other
logs and is not read here. The judge file of a dataset read here is that of a `JUDGED` dataset only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import Verdict
from vlmgrid.imports.vlmevalkit_matcher import NO_OPTION, can_infer

#: VLMEvalKit's datasets evaluated one row at a time (`mcq_vanilla_eval`) whose figure is the mean of `hit`
#: (`report_acc`'s Overall), as vlmgrid's headline metric of their benchmark is a mean over items
JUDGED = ("ScienceQA_TEST", "ScienceQA_VAL")
LOG_START = "Match Log: "
NO_JUDGE = "Failed in Prefetch, no GPT-based answer matching under `exact_matching` policy."
RANDOM = "Failed to predict, thus randomly generate one."
SUFFIXES = (".xlsx", ".tsv", ".json")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def judge_files(prediction_file: Path) -> list[Path]:
    """The judge files beside a prediction file: `<its stem>_<judge>_result.<xlsx|tsv|json>`."""
    pattern = re.compile(re.escape(prediction_file.stem) + r"_(.+)_result")
    return sorted(
        path
        for path in prediction_file.parent.iterdir()
        if path.is_file() and path.suffix in SUFFIXES and pattern.fullmatch(path.stem)
    )


def judge_name(judge_file: Path, prediction_file: Path) -> str:
    """The judge's name in the file name ("openai", "gpt-4o-mini", "exact_matching")."""
    return judge_file.stem[len(prediction_file.stem) + 1 : -len("_result")]


def judge_file(prediction_file: Path) -> Path | None:
    """The one judge file beside the prediction file, None when there is none; several are refused."""
    found = judge_files(prediction_file)
    if len(found) > 1:
        raise VlmgridError(
            f"{prediction_file} has {len(found)} VLMEvalKit judge files beside it "
            f"({', '.join(p.name for p in found)}), one per judge it was evaluated with; move away "
            "all but the one whose verdicts the import should keep"
        )
    return found[0] if found else None


def _choices(cells: dict[str, str]) -> dict[str, str]:
    """`build_choices`: the row's option columns A-Z that are not empty."""
    return {letter: cells[letter] for letter in LETTERS if cells.get(letter, "").strip()}


def verdict(path: Path, where: str, cells: dict[str, str]) -> Verdict:
    """One judge row's verdict: its `hit`, whether the judge read it (from its `log`), the letter read."""
    hit, log, prediction = cells.get("hit", "").strip(), cells.get("log", ""), cells.get("prediction", "")
    if hit not in ("0", "1"):
        raise VlmgridError(
            f"{path} {where} has hit {hit!r}, not 0 or 1: the file is not a VLMEvalKit judge file; "
            f"move it away from the prediction file, or evaluate the predictions again with VLMEvalKit"
        )
    if not log.startswith(LOG_START):
        raise VlmgridError(
            f'{path} {where} has the log {log[:60]!r}, not VLMEvalKit\'s "{LOG_START}..." (its '
            f"vanilla evaluation since 646e7bc8, 2024-07-18): the file is not a judge file read here; "
            f"move it away from the prediction file"
        )
    text = log[len(LOG_START) :].rstrip()
    text = text[:-1] if text.endswith(".") else text  # eval_vanilla's ". " after the text
    choices = _choices(cells)
    if log.rstrip() == f"{LOG_START}{prediction}.":  # the matcher read the prediction itself
        letter, judged = can_infer(prediction, choices), False
    elif text.startswith(NO_JUDGE.rstrip(".")):
        letter, judged = NO_OPTION, False
    elif text.startswith(RANDOM.rstrip(".")):
        letter, judged = None, True
    else:
        letter, judged = can_infer(text, choices), True
    gold = cells.get("answer", "").strip()
    if letter is not None and (letter == gold) != (hit == "1"):
        letter = (
            None  # another version's matcher read it otherwise: the hit is the tool's, the letter unknown
        )
    return Verdict(int(hit), judged, letter, str(path))


def read_verdicts(path: Path, rows: Sequence, predictions: dict[str, str]) -> dict[str, Verdict]:
    """{index: verdict} of a judge file's rows (`rows`: its rows as `vlmevalkit.Row`s), checked against the
    prediction file's {index: prediction}: the same rows, the same answers."""
    verdicts = {}
    for row in rows:
        index = row.get("index")
        if index not in predictions:
            raise VlmgridError(
                f"{path} {row.where} judges a row the prediction file does not have: the judge file "
                f"was made from other predictions; move it away, or evaluate these predictions again"
            )
        if row.get("prediction").rstrip() != predictions[index].rstrip():
            raise VlmgridError(
                f"{path} {row.where} judges the answer {row.get('prediction')[:60]!r}, but the "
                f"prediction file answers {predictions[index][:60]!r} there: the judge file was made "
                f"from other predictions; move it away, or evaluate these predictions again"
            )
        verdicts[index] = verdict(path, row.where, row.cells)
    missing = [index for index in predictions if index not in verdicts]
    if missing:
        raise VlmgridError(
            f"{path} has no verdict for {len(missing)} row(s) of the prediction file (index "
            f"{missing[0]} first): it judged a part of them only; move it away, or evaluate the "
            f"whole file again with VLMEvalKit"
        )
    return verdicts
