"""How the report names things in words: headline metrics (and their footnotes), how a cell was answered
(strategy, baseline) and how its generated answers were decoded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# Display names for headline metrics; an unknown metric is shown as it is spelled in the score file.
METRIC_LABELS = {
    "f1": "F1",
    "accuracy": "Acc.",
    "acc": "Acc.",
    "top1": "Top-1",
    "top5": "Top-5",
    "top1_accuracy": "Top-1",
    "top5_accuracy": "Top-5",
    "precision": "Precision",
    "recall": "Recall",
    "exact_match": "EM",
    "vqa_accuracy": "VQA acc.",
    "scaled": "MME scaled",
    "circular_accuracy": "circular acc.",
    "cvbench": "CV-Bench",
    "pair_accuracy": "pair acc.",
    "acc_at_50": "Acc@50",
}

# What a headline that is not a plain accuracy means, for the table's footnote.
METRIC_NOTES = {
    "f1": "F1: POPE's F1 with yes as positive, mean over its splits",
    "scaled": "MME scaled: MME's perception + cognition points / 2800 x 100",
    "circular_accuracy": (
        "circular acc.: MMBench, a question counts only when every row the file holds for it (the original "
        "and its rotated copies) is right"
    ),
    "cvbench": "CV-Bench: ((ADE20K + COCO) / 2 + Omni3D) / 2 of the per-source accuracies",
    "pair_accuracy": "pair acc.: MMVP, a pair counts only when both its questions are right",
    "vqa_accuracy": "VQA acc.: min(1, matching human answers / 3), averaged over the leave-one-out subsets",
    "acc_at_50": (
        "Acc@50: DANCE, per query with n positives among 50 candidates the share of them ranked within "
        "the top n, mean of the two directions"
    ),
}


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


# How a model answered, in words: the score file's `strategy` names the model capability that was used.
STRATEGY_LABELS = {
    "score_options": "log-likelihood",
    "generate": "generation + parser",
    "embed": "embedding similarity",
}


def strategy_label(strategy: str | None) -> str | None:
    """The strategy in words; a composite one ("open-world: generate; closed-world: score_options") word by
    word; an unknown capability as it is spelled."""
    if strategy is None:
        return None
    return re.sub(r"[a-z_]+", lambda m: STRATEGY_LABELS.get(m.group(0), m.group(0)), strategy)


# A reference baseline ranks the options without reading them; its `model_id` says how.
BASELINE_LABELS = {
    "baseline:random": "random guess (baseline)",
    "baseline:first": "first option (baseline)",
    "baseline:majority": "majority answer (baseline)",
}


def answered_label(
    strategy: str | None, backend: str | None = None, model_id: str | None = None
) -> str | None:
    """How the cell's answers were obtained, in words: a baseline says which guess it is (its strategy is
    `score_options` only because it ranks options), any other model its strategy in words."""
    if backend == "baseline":
        return BASELINE_LABELS.get(model_id or "", "baseline")
    return strategy_label(strategy)


def decoding_label(strategy: str | None, generation: Mapping[str, Any]) -> str | None:
    """How generated answers were decoded ("greedy", "sampled: kaleidoscope preset, temperature 0.7, top-p
    0.9"); None when the model generated nothing (log-likelihood and embeddings do not sample)."""
    if strategy is None or "generate" not in strategy:
        return None
    if not generation.get("do_sample"):
        return "greedy"
    parts = [f"{generation['preset']} preset"] if generation.get("preset") else []
    parts += [
        f"{label} {generation[key]}"
        for key, label in (("temperature", "temperature"), ("top_p", "top-p"))
        if generation.get(key) is not None
    ]
    if generation.get("top_k"):  # 0 is no limit, as unset reads
        parts.append(f"top-k {generation['top_k']}")
    return "sampled" + (": " + ", ".join(parts) if parts else "")


def interval_label(samples: Sequence[int]) -> str:
    """What a whisker is, as a figure's note says it: the score step's 95% percentile bootstrap CI over items,
    with its number of resamples (a range where the cells differ; none where no cell has draws)."""
    counts = count_range(samples)
    return "95% percentile bootstrap CI over items" + (f" ({counts} resamples)" if counts else "")


def count_range(counts: Sequence[int], spec: str = ",") -> str:
    """Counts as one number or a range, lowest to highest, each formatted by `spec` ("1,000",
    "500\u20131,000"); "" when there are none."""
    distinct = sorted(set(counts))
    if not distinct:
        return ""
    if len(distinct) == 1:
        return format(distinct[0], spec)
    return f"{distinct[0]:{spec}}\u2013{distinct[-1]:{spec}}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the right number: "1 model", "3 models", "1,200 items" (`plural` where
    adding an "s" is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
