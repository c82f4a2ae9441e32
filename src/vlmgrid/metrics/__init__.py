"""Scoring: pure functions from (records, predictions) to the fields of the score JSON.

No file I/O and no torch here: the score stage reads the files and calls `score_predictions`.

    from vlmgrid.metrics import METRICS, score_predictions
    score_predictions("pope", records, predictions, breakdown_by=("category",), samples=1000, seed=0)

Metrics (registered in `METRICS` by name): "classification" (top1, top5, mean_per_class_recall),
"accuracy" (accuracy, valid_accuracy), "pope" (f1, accuracy, precision, recall, yes_ratio),
"mme" (scaled, total, perception, cognition, accuracy, accuracy_plus; points but `scaled`),
"mmbench_circular" (circular_accuracy, vanilla_accuracy), "cvbench" (cvbench, accuracy_2d, accuracy_3d,
accuracy_ade20k, accuracy_coco, accuracy_omni3d), "mmvp" (pair_accuracy, question_accuracy),
"vqa_accuracy" (vqa_accuracy), "dance" (acc_at_50, hit_at_1, hit_at_5, recall_at_5, mrr).
"""

from vlmgrid.metrics.accuracy import Accuracy
from vlmgrid.metrics.base import Metric
from vlmgrid.metrics.bootstrap import bootstrap_indices, percentile_ci
from vlmgrid.metrics.classification import Classification
from vlmgrid.metrics.cvbench import CVBench
from vlmgrid.metrics.cvqa import CVQAAccuracy
from vlmgrid.metrics.dance import Dance
from vlmgrid.metrics.kaleidoscope import Kaleidoscope
from vlmgrid.metrics.mmbench import MMBenchCircular
from vlmgrid.metrics.mme import MME
from vlmgrid.metrics.mmvp import MMVP
from vlmgrid.metrics.pope import Pope
from vlmgrid.metrics.score import METRICS, score_predictions
from vlmgrid.metrics.vqa import VQAAccuracy
from vlmgrid.metrics.vqa_normalise import normalise_answer

for _metric in (Classification(), Accuracy(), Pope(), MME(), MMBenchCircular(), CVBench(), MMVP(), VQAAccuracy()):
    METRICS.register(_metric.name, _metric)
METRICS.register(Kaleidoscope.name, Kaleidoscope())
del _metric
METRICS.register(CVQAAccuracy.name, CVQAAccuracy())
METRICS.register(Dance.name, Dance())

__all__ = [
    "METRICS",
    "Accuracy",
    "CVBench",
    "Classification",
    "MMBenchCircular",
    "MME",
    "MMVP",
    "Metric",
    "Pope",
    "VQAAccuracy",
    "bootstrap_indices",
    "normalise_answer",
    "percentile_ci",
    "score_predictions",
]
