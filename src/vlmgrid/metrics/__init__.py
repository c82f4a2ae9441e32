"""Scoring: pure functions from (records, predictions) to the fields of the score JSON.
Imported from the floors above (stages); it imports only the shared modules.

No file I/O and no torch here: the score stage reads the files and calls `score_predictions`
(`vlmgrid.metrics.compute`), which scores with the metric `METRICS` names.

    from vlmgrid.metrics import METRICS, score_predictions
    score_predictions("pope", records, predictions, breakdown_by=("category",), samples=1000, seed=0)

`METRICS` holds, by name (their numbers in brackets, the headline first): "classification" (top1, top5,
mean_per_class_recall), "accuracy" (accuracy, valid_accuracy), "pope" (f1, accuracy, precision, recall,
yes_ratio), "mme" (scaled, total, perception, cognition, accuracy, accuracy_plus; points but `scaled`),
"mmbench_circular" (circular_accuracy, vanilla_accuracy), "cvbench" (cvbench, accuracy_2d, accuracy_3d,
accuracy_ade20k, accuracy_coco, accuracy_omni3d), "mmvp" (pair_accuracy, question_accuracy), "vqa_accuracy"
(vqa_accuracy), "kaleidoscope" (accuracy, valid_accuracy, format_error_rate), "cvqa" (accuracy,
valid_accuracy; refuses hidden labels and writes the leaderboard's submission tables instead), "dance"
(acc_at_50, hit_at_1, hit_at_5, recall_at_5, mrr).

Beside the metrics: `base` (the Metric interface, LabelsHidden), `bootstrap` (resampling and percentile CIs),
`grouped` (GroupedMetric: metrics whose unit is a group of items), `vqa_normalise` (the VQA answer
normalisation), `power` (the minimum detectable difference of a paired comparison).
"""

from vlmgrid.metrics.accuracy import Accuracy
from vlmgrid.metrics.base import Metric
from vlmgrid.metrics.bootstrap import bootstrap_indices, percentile_ci
from vlmgrid.metrics.classification import Classification
from vlmgrid.metrics.compute import score_predictions
from vlmgrid.metrics.cvbench import CVBench
from vlmgrid.metrics.cvqa import CVQAAccuracy
from vlmgrid.metrics.dance import Dance
from vlmgrid.metrics.kaleidoscope import Kaleidoscope
from vlmgrid.metrics.mmbench import MMBenchCircular
from vlmgrid.metrics.mme import MME
from vlmgrid.metrics.mmvp import MMVP
from vlmgrid.metrics.pope import Pope
from vlmgrid.metrics.vqa import VQAAccuracy
from vlmgrid.metrics.vqa_normalise import normalise_answer
from vlmgrid.registry import Registry

METRICS: Registry[Metric] = Registry(
    "metric",
    [
        Classification(),
        Accuracy(),
        Pope(),
        MME(),
        MMBenchCircular(),
        CVBench(),
        MMVP(),
        VQAAccuracy(),
        Kaleidoscope(),
        CVQAAccuracy(),
        Dance(),
    ],
)

__all__ = [
    "METRICS",
    "Accuracy",
    "CVBench",
    "CVQAAccuracy",
    "Classification",
    "Dance",
    "Kaleidoscope",
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
