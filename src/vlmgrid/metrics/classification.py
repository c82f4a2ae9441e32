"""Image classification: top-1, top-5 and mean per-class recall."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import IndexMetric, count_true, int_column, safe_ratio


def _is_null(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _in_topk(topk: pd.Series | None, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Per item: gold is among the first five of `topk`, or equals `pred` where `topk` is null."""
    if topk is None:
        return pred == gold
    values = topk.tolist()
    has = np.array([not _is_null(v) for v in values], dtype=bool)
    hit = np.where(has, False, pred == gold)
    rows = np.flatnonzero(has)
    if len(rows):
        lists = [values[i] for i in rows]
        lens = np.fromiter((len(v) for v in lists), dtype=np.int64, count=len(lists))
        flat = np.fromiter((int(x) for v in lists for x in v), dtype=np.int64, count=int(lens.sum()))
        owner = np.repeat(rows, lens)
        rank = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
        match = (rank < 5) & (flat == gold[owner])
        hit[owner[match]] = True
    return hit


class Classification(IndexMetric):
    """Classification accuracy over class indices.

    Rules (the standard ImageNet-style definitions used by CLIP / open_clip zero-shot evaluation):

    - `top1` (headline): `prediction_index == answer_index`.
    - `top5`: `answer_index` is among the first five entries of `topk`; when a row's `topk` is null,
      its `prediction_index` alone stands in for it (so top5 falls back to top1 for that row).
    - `mean_per_class_recall`: the top-1 recall of each class, averaged over the classes present in the
      gold labels (of the sample or resample being scored); the headline of e.g. Flowers102/Pets in the
      CLIP paper. A gold `answer_index` of -1 (no gold) is treated as a class of its own that nothing
      predicts correctly.

    Format errors: a row with an `error`, a null `prediction` or `prediction_index` -1 is a format error
    and counts as wrong for every number (top5 too, whatever its `topk`); a gold index of -1 is never
    matched.
    """

    name = "classification"
    headline = "top1"
    names = ("top1", "top5", "mean_per_class_recall")
    record_columns = ("answer_index",)
    prediction_columns = ("prediction", "prediction_index")

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        gold = int_column(records, "answer_index")
        pred = int_column(preds, "prediction_index")
        ok = self.valid(records, preds) & (gold >= 0)
        top1 = ok & (pred == gold)
        top5 = _in_topk(preds["topk"] if "topk" in preds.columns else None, pred, gold) & ok
        # per item: dense class code 0..K-1 (for per-class counting) times 2, plus 1 when top-1 is right
        _, codes = np.unique(gold, return_inverse=True)
        return {"top5": top5, "class_top1": codes.astype(np.int64).ravel() * 2 + top1}

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        rows, n = idx.shape
        k2 = int(data["class_top1"].max()) // 2 * 2 + 2  # 2 x number of classes
        flat = data["class_top1"][idx]
        flat += np.arange(rows, dtype=np.int64)[:, None] * k2
        counts = np.bincount(flat.ravel(), minlength=rows * k2).reshape(rows, k2 // 2, 2)
        right = counts[:, :, 1]
        total = counts.sum(axis=2)
        recall = safe_ratio(right, total)
        return {
            "top1": 100.0 * right.sum(axis=1) / n,
            "top5": 100.0 * count_true(data["top5"][idx]) / n,
            "mean_per_class_recall": 100.0 * recall.sum(axis=1) / (total > 0).sum(axis=1),
        }
