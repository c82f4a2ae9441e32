"""Records and predictions frames for the metric tests, built from a few values per item."""

import pandas as pd

YES_NO_INDEX = {"yes": 0, "no": 1}


def values(result):
    """A score's metrics as {name: value}."""
    return {k: v["value"] for k, v in result["metrics"].items()}


def _errors(errors, n):
    return errors if errors is not None else [None] * n


def choice_frames(rows, question, options, column, errors=None):
    """rows: (`column` value, gold index, predicted index; -1 = unparsable), every item asking `question`
    with `options`."""
    n = len(rows)
    ids = [f"q{i}" for i in range(n)]
    records = pd.DataFrame(
        {
            "id": ids,
            "question": [question] * n,
            "options": [options] * n,
            "answer": [options[0]] * n,
            "answer_index": [r[1] for r in rows],
            column: [r[0] for r in rows],
        }
    )
    preds = pd.DataFrame(
        {
            "id": ids,
            "variant": "default",
            "prediction": [None if r[2] < 0 else "x" for r in rows],
            "prediction_index": [r[2] for r in rows],
            "error": _errors(errors, n),
        }
    )
    return records, preds


def yes_no_frames(question, gold, pred, errors=None, **columns):
    """Yes/no items: gold answers and raw predictions ("yes", "no", anything else or None), item by item;
    `columns` are the records' own columns."""
    n = len(gold)
    ids = [f"q{i}" for i in range(n)]
    records = pd.DataFrame(
        {
            "id": ids,
            "question": [question] * n,
            "options": [["yes", "no"]] * n,
            "answer": gold,
            "answer_index": [YES_NO_INDEX[g] for g in gold],
            **columns,
        }
    )
    preds = pd.DataFrame(
        {
            "id": ids,
            "variant": "default",
            "raw": pred,
            "prediction": pred,
            "prediction_index": [YES_NO_INDEX.get(str(p).lower(), -1) for p in pred],
            "error": _errors(errors, n),
        }
    )
    return records, preds
