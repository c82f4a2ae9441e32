"""DANCE ranking metrics: Acc@50, Hit@1, Hit@5, Recall@5 and MRR over queries of 50 candidates."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from vlmgrid.metrics.base import Metric


def rank_query(scores: Sequence[float], positives: Sequence[int]) -> dict[str, float]:
    """One query's numbers (fractions 0-1) from its candidates' scores (higher is better) and positive
    indices.

    Candidates are ranked by score, ties in candidate order (the DANCE builder shuffles the candidates, so
    the order says nothing about the answer). With n positives:
    - `acc_at_50`: the fraction of the n positives ranked within the top n;
    - `hit_at_1`, `hit_at_5`: 1 when a positive is ranked within the top 1 / top 5 (a hit rate, often
      called Recall@k for a single positive);
    - `recall_at_5`: the fraction of the n positives ranked within the top 5 (retrieval's Recall@5: with
      more than 5 positives it cannot reach 1);
    - `mrr`: 1 / the rank of the best-ranked positive.
    """
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    is_positive = np.isin(order, np.asarray(positives, dtype=np.int64))
    n = int(is_positive.sum())
    if n == 0:
        return {"acc_at_50": 0.0, "hit_at_1": 0.0, "hit_at_5": 0.0, "recall_at_5": 0.0, "mrr": 0.0}
    first = int(np.argmax(is_positive))
    return {
        "acc_at_50": float(is_positive[:n].sum()) / n,
        "hit_at_1": float(first < 1),
        "hit_at_5": float(first < 5),
        "recall_at_5": float(is_positive[:5].sum()) / n,
        "mrr": 1.0 / (first + 1),
    }


class Dance(Metric):
    """DANCE's ranking accuracy (headline) and the usual retrieval numbers, in percent.

    Source: arXiv 2211.16504, the diagnostic benchmark: every query (a riddle against 50 pictures, or a
    picture against 50 riddles) has 1 to 15 positives among its 50 candidates, and Acc@50 is reported per
    direction on test-seen and test-unseen. Per query with n positives:

    - `acc_at_50` (headline): the fraction of the n positives that the model ranks within its top n (so a
      query with one positive scores 1 only when that positive is ranked first, one with 4 positives scores
      3/4 when three of them fill three of the top 4 places); averaged over queries. The shorthand "the
      ground truth is within the top 50" is not it: with 50 candidates every candidate is within the top
      50, so that number is 100% for any model.
    - `hit_at_1`, `hit_at_5`: the share of queries with a positive ranked first / within the top 5.
    - `recall_at_5`: the share of a query's positives ranked within the top 5, averaged over queries.
    - `mrr`: the mean reciprocal rank of the best-ranked positive.

    Ties rank in candidate order (see `rank_query`). The headline and every number are the mean of the two
    directions (each the mean over its queries); the score's breakdown gives each split, each direction and
    each (split, direction) cell (`subset`).

    Format errors: a row with an `error`, a null `prediction` or no score per candidate counts 0 for every
    number.

    Bootstrap: resamples queries within each direction.
    """

    name = "dance"
    headline = "acc_at_50"
    names = ("acc_at_50", "hit_at_1", "hit_at_5", "recall_at_5", "mrr")
    stratify_by = "direction"
    record_columns = ("positives", "options", "direction")
    prediction_columns = ("prediction", "scores")

    def valid(self, records: pd.DataFrame, preds: pd.DataFrame) -> np.ndarray:
        has_scores = np.array(
            [
                scores is not None and len(scores) == len(options)
                for scores, options in zip(preds["scores"], records["options"])
            ],
            dtype=bool,
        )
        return super().valid(records, preds) & has_scores

    def prepare(self, records: pd.DataFrame, preds: pd.DataFrame) -> dict[str, np.ndarray]:
        valid = self.valid(records, preds)
        per_query = {name: np.zeros(len(records)) for name in self.names}
        for i, (scores, positives) in enumerate(zip(preds["scores"], records["positives"])):
            if valid[i]:
                for name, value in rank_query(scores, positives).items():
                    per_query[name][i] = value
        return per_query

    def compute(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice]
    ) -> dict[str, np.ndarray]:
        return {
            name: 100.0 * np.mean([data[name][idx[:, sl]].mean(axis=1) for sl in slices], axis=0)
            for name in self.names
        }
