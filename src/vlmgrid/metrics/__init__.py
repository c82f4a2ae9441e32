"""Scoring: pure functions from (records, predictions) to the fields of the score JSON.

No file I/O and no torch here: the score stage reads the files and calls `score_predictions`.

    from vlmgrid.metrics import METRICS, score_predictions
    score_predictions("pope", records, predictions, breakdown_by=("category",), samples=1000, seed=0)

Metrics (registered in `METRICS` by name): "classification" (top1, top5, mean_per_class_recall),
"accuracy" (accuracy, valid_accuracy), "pope" (f1, accuracy, precision, recall, yes_ratio).
"""

from vlmgrid.metrics.accuracy import Accuracy
from vlmgrid.metrics.base import Metric
from vlmgrid.metrics.bootstrap import bootstrap_indices, percentile_ci
from vlmgrid.metrics.classification import Classification
from vlmgrid.metrics.pope import Pope
from vlmgrid.metrics.score import METRICS, score_predictions

for _metric in (Classification(), Accuracy(), Pope()):
    METRICS.register(_metric.name, _metric)
del _metric

__all__ = [
    "METRICS",
    "Accuracy",
    "Classification",
    "Metric",
    "Pope",
    "bootstrap_indices",
    "percentile_ci",
    "score_predictions",
]
