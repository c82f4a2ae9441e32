"""The seeded random-guess baseline: chance level, reproducible item by item, whatever the order or resume."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from vlmgrid.models.base import Backend, OptionRequest, OptionScores


def _item_seed(seed: int, item_id: str) -> list[int]:
    # Seeding per item keeps a guess independent of batch composition and of where a killed run resumed.
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return [seed, int.from_bytes(digest[:8], "little")]


class Baseline(Backend):
    name = "baseline"
    capabilities = frozenset({"score_options"})
    uses_gpu = False
    defaults = {"seed": 0}

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> "Baseline":
        return cls(settings)

    def score_options(self, requests: Sequence[OptionRequest]) -> list[OptionScores]:
        seed = int(self.settings["seed"])
        return [
            OptionScores(
                total=np.random.default_rng(_item_seed(seed, request.id)).random(len(request.options)).tolist(),
                tokens=[1] * len(request.options),
            )
            for request in requests
        ]
