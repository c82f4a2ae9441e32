"""What a model backend is: its capabilities, its settings, and how it fetches and loads weights.

Capabilities (the protocols pick a strategy by them):
- "embed": embed_images(images) and embed_texts(texts) -> L2-normalised float32 arrays (contrastive models);
- "generate": generate(requests) -> one text per GenerateRequest (greedy unless the settings say otherwise);
- "score_options": score_options(requests) -> one OptionScores per OptionRequest: for `letters`, the
  log-probability of each letter as the next token after the prompt (one forward pass); otherwise the
  log-likelihood of each option text as the continuation of the prompt (the image + prompt prefix computed
  once and reused for every option, which is also how many candidates are ranked for one image).

Also here: the named generation presets (GENERATION_PRESETS) and the name of the manifest
`vlmgrid fetch-model` writes into a model's folder. The request and result records the protocols exchange
with a backend are in `vlmgrid.model_requests`, below both (imported here, where the backends take them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from vlmgrid.errors import InferenceFailed, VlmgridError
from vlmgrid.model_requests import GenerateRequest, GenerationResult, OptionRequest, ScoreResult
from vlmgrid.models.checkpoints import Checkpoint
from vlmgrid.registry import Registry

#: What `vlmgrid fetch-model` writes last into a model's folder: the files' hashes and their fingerprint.
MANIFEST = "model.json"


def require_finite(rows, names: Sequence[str], what: str, fix: str, *, scores: bool = False) -> None:
    """Stop the job where a model's numbers hold NaN or infinity: an argmax over them is an answer the model
    never gave (the first option's), so they must never become a row.

    `rows`: one sequence of numbers per name (an embedding, an item's option scores). With `scores`, an
    option's log-likelihood may be minus infinity (a token the model rules out), but not every option's.
    """
    import numpy as np

    if not scores:  # embeddings: one array, every value finite
        values = np.asarray(rows)
        broken = np.flatnonzero(~np.isfinite(values).reshape(len(values), -1).all(axis=1))
        if broken.size:
            name = names[broken[0]]
            raise InferenceFailed(f"{what} of {name} holds NaN or infinite values; {fix}", stop=True)
        return
    for name, row in zip(names, rows):
        values = np.asarray(row, dtype=np.float64)
        if np.isnan(values).any() or (values == np.inf).any() or (values.size and (values == -np.inf).all()):
            raise InferenceFailed(f"{what} of {name} holds NaN or infinite values; {fix}", stop=True)


@dataclass(frozen=True)
class GenerationPreset:
    """Named decoding settings, chosen by `generation: {preset: NAME}`: the generation keys it fills where the
    model does not set them itself, and the model's `image_size` unless it has one."""

    name: str
    generation: dict
    image_size: int | None = None


#: The presets by name. Greedy decoding (no preset) stays the default, for determinism.
GENERATION_PRESETS: Registry[GenerationPreset] = Registry(
    "generation preset",
    [
        # Kaleidoscope's authors (israfelsr/kaleidoscope model_utils.py): vLLM's SamplingParams at temperature
        # 0.7 and top-p 0.9, up to 1,024 new tokens, its defaults for the rest (no top-k limit, no repetition
        # penalty, which transformers would otherwise take from the checkpoint), images resized to 512 x 512.
        GenerationPreset(
            name="kaleidoscope",
            generation={
                "do_sample": True,
                "temperature": 0.7,
                "top_p": 0.9,
                "top_k": 0,
                "repetition_penalty": 1.0,
                "max_new_tokens": 1024,
            },
            image_size=512,
        ),
    ],
)


def resolve_generation(settings: dict) -> dict:
    """The model settings with `generation.preset` expanded (the preset's name stays, for the provenance)."""
    generation = dict(settings.get("generation") or {})
    name = generation.get("preset")
    if name is None:
        return settings
    if name not in GENERATION_PRESETS:
        raise VlmgridError(
            f"generation preset {name!r} is unknown; use one of {', '.join(GENERATION_PRESETS)} "
            f"or set the generation keys yourself"
        )
    preset = GENERATION_PRESETS.get(name)
    resolved = {**settings, "generation": {**preset.generation, **generation}}
    if preset.image_size is not None and settings.get("image_size") is None:
        resolved["image_size"] = preset.image_size
    return resolved


class FixtureWriter(Protocol):
    """What writes a backend's tiny test model (`source: {type: fixture}`); the fetch-model stage passes it
    in."""

    def write(self, source: dict, model_dir: Path) -> dict[str, Path]: ...


def write_fixture(
    backend: str, source: dict, model_dir: Path, fixture: FixtureWriter | None
) -> dict[str, Path]:
    """The files of a `source: {type: fixture}` model, written into model_dir by `fixture`."""
    if fixture is None:
        raise VlmgridError(
            f"a {backend} model with `source: {{type: fixture}}` is a tiny test model that only "
            f"`vlmgrid fetch-model` can build; fetch it with `vlmgrid fetch-model`"
        )
    return fixture.write(source, Path(model_dir))


@dataclass
class Provenance:
    """What a predictions file records about the model that made it."""

    backend: str
    model_id: str
    revision: str | None = None
    dtype: str | None = None
    device: str | None = None
    batch_size: int | None = None
    generation: dict = field(default_factory=dict)
    libraries: dict = field(default_factory=dict)


class PromptView:
    """What a model receives for a request (`vlmgrid inputs`), for a backend that is handed the prompt as it
    is and reads none of it (the baselines): its text, no chat messages, no pixels. The hf backend's view is
    vlmgrid.models.hf_inputs, an API's its chat messages."""

    reads_prompt = False  # a baseline answers without reading it: the inspect page shows no prompt for it

    def text(self, request) -> str | None:
        return request.prompt

    def messages(self, request) -> list | None:
        return None

    def pixels(self, image):
        return None


class Backend:
    """A model family. Subclasses set the class attributes and implement fetch/load and their capabilities."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[str]]
    uses_gpu: ClassVar[bool] = False
    defaults: ClassVar[dict] = {}
    #: Why this backend's answers cannot depend on a batch (the batch check then skips its cells); None for a
    #: backend that batches requests, which must implement `one_at_a_time`.
    unbatched: ClassVar[str | None] = "the backend answers each request on its own"
    #: Settings that change how fast or how robustly the answers are computed, never what they are (worker
    #: counts, caches of identical values, retries): not part of a cell's identity (`answer_settings`), so
    #: changing one reruns no cell and keeps the parts made before.
    run_only: ClassVar[frozenset[str]] = frozenset()
    #: How a transparent image becomes RGB where the entry's `image_alpha` does not say (vlmgrid.images
    #: ALPHA_MODES): its transparency dropped, as the authors' evaluations did.
    image_alpha: ClassVar[str] = "drop"

    def __init__(self, settings: dict) -> None:
        self.settings = {**self.defaults, **resolve_generation(settings)}

    @classmethod
    def capabilities_for(cls, settings: dict) -> frozenset[str]:
        """The capabilities a model with these settings has (some depend on settings, e.g. API logprobs)."""
        return cls.capabilities

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path, fixture: FixtureWriter | None = None) -> dict[str, Path]:
        """Put what `load` needs into model_dir (download or build); return the files written, by name.

        A `source: {type: fixture}` is built by `fixture`, the backend's tiny-model writer (see
        write_fixture).
        """
        return {}

    @classmethod
    def in_place(cls, settings: dict) -> Checkpoint | None:
        """The checkpoint of a source read where it lies (a local folder or file, a hub repo in the Hugging
        Face cache), checked and listed, for `fetch-model` to record instead of writing a copy; None for a
        source that `fetch` writes into the model's folder."""
        source = settings.get("source") or {}
        if source.get("type") == "local":
            raise VlmgridError(
                f"the {cls.name} backend reads no local checkpoint; remove the model's local source"
            )
        return None

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> Backend:
        """The model from model_dir: the folder fetch wrote, or the location of an in-place checkpoint."""
        raise NotImplementedError

    @classmethod
    def request_view(cls, settings: dict, model_dir: Path):
        """What a model with these settings receives for a request, shown without answering it (`vlmgrid
        inputs`): an object with text(request), messages(request) and pixels(image)."""
        return PromptView()

    @property
    def model_capabilities(self) -> frozenset[str]:
        return self.capabilities_for(self.settings)

    def describe(self) -> str:
        return self.name

    def provenance(self) -> Provenance:
        return Provenance(backend=self.name, model_id=self.name)

    def generate_results(self, requests: Sequence[GenerateRequest]) -> list[GenerationResult]:
        """Per-item results; a backend whose items can fail one by one (an API) overrides this."""
        return [GenerationResult(text) for text in self.generate(requests)]

    def score_results(self, requests: Sequence[OptionRequest]) -> list[ScoreResult]:
        """Per-item results; a backend whose items can fail one by one (an API) overrides this."""
        return [ScoreResult(scores) for scores in self.score_options(requests)]

    def one_at_a_time(self) -> contextlib.AbstractContextManager:
        """While the block runs, every request is answered alone (batch size 1, no padding): the batch check's
        reference answers. The options scored on one request's prefix may stay chunked as the batched run
        chunks them. A setting for the block, not a change of the model: the batch size comes back."""
        return contextlib.nullcontext()

    def drop_capability(self, capability: str) -> bool:
        """Stop using a capability the server turned out to lack (`answer_mode: auto`); False when this
        backend cannot answer without it."""
        return False

    def set_answer_prior(self, answer_indices: Sequence[int]) -> None:
        """The benchmark's gold answer indices, offered before inference. Only reference baselines (the
        majority answer) read them; a real model ignores them."""

    def identity(self) -> str | None:
        """A key that changes whenever the model's outputs could (weights, precision, device type), for
        caching derived things such as zero-shot classifier weights; None means: do not cache."""
        return None
