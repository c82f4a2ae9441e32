"""What a model backend is: its capabilities, its settings, and how it fetches and loads weights.

Capabilities (the protocols pick a strategy by them):
- "embed": embed_images(images) and embed_texts(texts) -> L2-normalised float32 arrays (contrastive models);
- "score_options": score_options(requests) -> one score per option for each request (higher is better).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

from PIL.Image import Image


@dataclass(frozen=True)
class OptionRequest:
    """One item to score: its id (seeds the baseline), its image (or None), a prompt and the options."""

    id: str
    image: Image | None
    prompt: str
    options: Sequence[str]


class Backend:
    """A model family. Subclasses set the class attributes and implement fetch/load and their capabilities."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[str]]
    uses_gpu: ClassVar[bool] = False
    defaults: ClassVar[dict] = {}

    def __init__(self, settings: dict) -> None:
        self.settings = {**self.defaults, **settings}

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path) -> dict[str, Path]:
        """Put what `load` needs into model_dir (download or build); return the files written, by name."""
        return {}

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> "Backend":
        raise NotImplementedError

    def describe(self) -> str:
        return self.name
