"""Reference baselines: a seeded random guess, the first option, and the majority answer.

The random guess is seeded per item, so it does not depend on batch composition or on where a killed run
resumed. The majority baseline answers the benchmark's most frequent gold answer index (option position for
multiple choice, "yes" or "no" for yes/no, the class for classification): the floor a real model must beat.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vlmgrid.model_requests import OptionRequest, OptionScores
from vlmgrid.models.base import Backend, Provenance


def _item_seed(seed: int, item_id: str) -> list[int]:
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return [seed, int.from_bytes(digest[:8], "little")]


def _ranked_from(best: int, n: int) -> list[float]:
    """Scores that put `best` first and the others in their order (as a log-likelihood would rank them)."""
    return [0.0 if i == best else -1.0 - i for i in range(n)]


class Baseline(Backend):
    name = "baseline"
    capabilities = frozenset({"score_options"})
    uses_gpu = False
    unbatched = "a baseline answers each item by itself, with no model pass"
    defaults = {"seed": 0, "strategy": "random"}

    def __init__(self, settings: dict) -> None:
        super().__init__(settings)
        self.majority: int | None = None

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> Baseline:
        return cls(settings)

    def set_answer_prior(self, answer_indices: Sequence[int]) -> None:
        counts = Counter(int(i) for i in answer_indices if int(i) >= 0)
        # Ties go to the lowest index, so the choice does not depend on the order of the items.
        self.majority = min(counts, key=lambda i: (-counts[i], i)) if counts else None

    def provenance(self) -> Provenance:
        return Provenance(
            backend=self.name,
            model_id=f"baseline:{self.settings['strategy']}",
            generation={"seed": int(self.settings["seed"])},
        )

    def describe(self) -> str:
        return f"baseline ({self.settings['strategy']})"

    def _scores(self, request: OptionRequest) -> list[float]:
        n = len(request.options)
        strategy = self.settings["strategy"]
        if strategy == "random":
            return (
                np.random.default_rng(_item_seed(int(self.settings["seed"]), request.id)).random(n).tolist()
            )
        if strategy == "majority" and self.majority is not None and self.majority < n:
            return _ranked_from(self.majority, n)
        return _ranked_from(0, n)  # "first", and "majority" with no usable prior

    def score_options(self, requests: Sequence[OptionRequest]) -> list[OptionScores]:
        return [OptionScores(total=self._scores(r), tokens=[1] * len(r.options)) for r in requests]
