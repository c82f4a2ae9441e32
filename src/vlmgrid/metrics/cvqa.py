"""CVQA: accuracy per prompt setting and per country-language pair, and the leaderboard's submission table.

The public test copy hides its labels (every Label is -1). Indexing options by such a label would score
every answer against a made-up option, so the metric refuses: `check_labels` raises `LabelsHidden`, and
the score stage writes the challenge's submission table (`submission_table`) instead of a number. With a
labelled copy (a `local` source), scoring is `Accuracy` per setting (each setting is one prediction variant),
the four-setting mean as the headline and the per-pair breakdown through the benchmark's `breakdown_by`;
`accuracy_by_pair` gives the paper's table of pairs by settings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.accuracy import Accuracy
from vlmgrid.metrics.base import LabelsHidden, int_column, no_error

HIDDEN = -1
SUBMISSION_COLUMNS = ("ID", "prediction")
LETTERS = "ABCD"
PAIR = "country_language"

__all__ = [
    "LabelsHidden",
    "CVQAAccuracy",
    "accuracy_by_pair",
    "check_labels",
    "labels_hidden",
    "submission_table",
    "submission_tables",
]


def labels_hidden(records: pd.DataFrame) -> bool:
    """True when every record's label is hidden; a mix of hidden and given labels is an error naming an
    item."""
    gold = int_column(records, "answer_index")
    hidden = gold == HIDDEN
    if hidden.all():
        return True
    if hidden.any():
        first = records["id"].iloc[int(np.flatnonzero(hidden)[0])]
        raise VlmgridError(
            f'CVQA record "{first}" has a hidden label (-1) while {int((~hidden).sum())} of {len(gold)} '
            "records have theirs; score a copy whose labels are all "
            "given (a `local` source), or none (the submission file)"
        )
    return False


def check_labels(records: pd.DataFrame) -> None:
    """Raise `LabelsHidden` (one sentence) when the records' labels are hidden."""
    if labels_hidden(records):
        raise LabelsHidden(
            f"the {len(records)} CVQA records have hidden labels (every Label is -1, as in the public test "
            "copy), so there is no accuracy to compute: submit the predictions' submission file to the CVQA "
            "leaderboard, or point a `local` source at a labelled copy"
        )


class CVQAAccuracy(Accuracy):
    """Multiple-choice accuracy (see `Accuracy`) that refuses records with hidden labels.

    Each prompt setting is one prediction variant and is scored on its own; the headline is the mean of
    the settings (score_predictions' rule for variants). An unparsable answer counts as wrong.
    """

    name = "cvqa"

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        check_labels(records)
        return super().prepare(records, preds)

    def submission(self, records: pd.DataFrame, predictions: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """What to hand the leaderboard instead of a score: one submission table per setting."""
        return submission_tables(records, predictions)


def _variant_rows(records: pd.DataFrame, predictions: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The variant's prediction rows in records order; a missing or repeated item is an error naming it."""
    rows = predictions[predictions["variant"].astype(str) == variant]
    if rows["id"].duplicated().any():
        raise VlmgridError(
            f'predictions for setting "{variant}" hold item '
            f'"{rows["id"][rows["id"].duplicated()].iloc[0]}" more than once'
        )
    rows = rows.set_index("id")
    missing = pd.Index(records["id"]).difference(rows.index)
    if len(missing):
        raise VlmgridError(
            f'predictions for setting "{variant}" lack item "{missing[0]}"; rerun infer for this benchmark'
        )
    return rows.loc[list(records["id"])].reset_index()


def submission_table(records: pd.DataFrame, predictions: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The leaderboard's submission for one setting: `ID` (the item's ID) and `prediction` (the chosen
    option's letter, A-D, as the prompts show the options), one row per record in records order.

    A format error (an error row, no prediction, an index outside A-D) is written as an empty prediction: the
    item is kept, and the leaderboard counts it as wrong.
    """
    rows = _variant_rows(records, predictions, variant)
    index = int_column(rows, "prediction_index")
    valid = no_error(rows) & rows["prediction"].notna().to_numpy() & (index >= 0) & (index < len(LETTERS))
    letters = [LETTERS[i] if ok else "" for i, ok in zip(index, valid)]
    return pd.DataFrame({"ID": records["id"].astype(str).to_numpy(), "prediction": letters})


def submission_tables(records: pd.DataFrame, predictions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One submission table per setting (prediction variant), in the settings' sorted order."""
    variants = sorted(predictions["variant"].astype(str).unique())
    return {variant: submission_table(records, predictions, variant) for variant in variants}


def accuracy_by_pair(records: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """Accuracy (percent) of every country-language pair in every setting: pairs as rows (sorted), settings as
    columns, plus the mean over the settings; the last row, "all", is every item. Point values, no CI: the
    score file's breakdown carries the CIs of the four-setting mean per pair."""
    check_labels(records)
    gold = int_column(records, "answer_index")
    pairs = records[PAIR].astype(str).to_numpy()
    columns = {}
    for variant in sorted(predictions["variant"].astype(str).unique()):
        rows = _variant_rows(records, predictions, variant)
        index = int_column(rows, "prediction_index")
        right = no_error(rows) & rows["prediction"].notna().to_numpy() & (index == gold)
        frame = pd.DataFrame({"pair": pairs, "right": right.astype(float)})
        per_pair = frame.groupby("pair", sort=True)["right"].mean() * 100.0
        per_pair.loc["all"] = frame["right"].mean() * 100.0
        columns[variant] = per_pair
    table = pd.DataFrame(columns)
    table["mean"] = table.mean(axis=1)
    table.index.name = PAIR
    return table
