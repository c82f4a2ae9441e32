"""`vlmgrid inputs MODEL BENCHMARK`: what a cell's model receives, one JSON object per model request.

The cell's protocol runs as inference runs it (its plan's settings, the benchmark's records in order, the same
strategy), but its requests go to a recorder that answers nothing: each is shown through the model's backend
as that backend would send it (vlmgrid.models.base.PromptView; the hf backend's text is its chat template
applied by the checkpoint's own processor, which is all that is loaded). A line holds:

- `id`, `variant`: the item and the prediction variant the request answers;
- `text`: the exact string handed to the tokenizer: chat template applied, system text included, the image
  placeholder as the template writes it (null for an API model, whose `messages` are shown instead: the chat
  messages it sends, each image named `file:<path>`);
- `options`: the continuations an option-likelihood request scores (the letters, or the option texts), else
  null;
- `image`: the image file the request reads, or null;
- `pixels` (with a pixels folder): the .npy file of the float32 pixel values the processor makes of that
  image, as it returns them for one image; one file per image, written once;
- `generation`: the decoding settings of a generated answer, else null;
- `prompt`: where the prompt's wording comes from: the model's recipe, or vlmgrid's own (the protocol's).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TextIO

from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.escaping import terminal_json

#: Records per protocol call: the requests of a chunk are printed before the next is built.
CHUNK = 256


class SentNoPrompt(VlmgridError):
    """The cell's model is handed no prompt: it answers by image-text similarity (it embeds)."""


class _Recorder:
    """A stand-in for a model that records the requests a protocol sends it and answers each with nothing
    (an empty text, equal scores); the rows it leads to are thrown away."""

    accepts_image_futures = False

    def __init__(self, backend, settings: dict) -> None:
        self.name = backend.name
        self.settings = settings
        self.model_capabilities = backend.capabilities_for(settings)
        self.requests: list = []

    def generate_results(self, requests):
        from vlmgrid.model_requests import GenerationResult

        self.requests.extend(requests)
        return [GenerationResult("") for _ in requests]

    def score_results(self, requests):
        from vlmgrid.model_requests import OptionScores, ScoreResult

        self.requests.extend(requests)
        return [
            ScoreResult(OptionScores([0.0] * len(r.letters or r.options), [1] * len(r.letters or r.options)))
            for r in requests
        ]

    def set_answer_prior(self, answer_indices) -> None:
        pass


def decoding(backend, settings: dict) -> dict:
    """The decoding settings a backend generates with for these model settings (its defaults, the preset)."""
    from vlmgrid.models.base import resolve_generation

    return {
        **(backend.defaults.get("generation") or {}),
        **(resolve_generation(settings).get("generation") or {}),
    }


def prompt_source(settings: dict) -> str:
    """Where a cell's prompt wording comes from, in words."""
    recipe = settings.get("recipe")
    own = settings.get("prompt") or {}
    if own.get("user") is not None or own.get("raw") is not None:
        return f"recipe {recipe}" if recipe else "the model's own prompt"
    return "vlmgrid's own" + (f" (recipe {recipe} sets no prompt for this benchmark)" if recipe else "")


class _Pixels:
    """The pixel files of a pixels folder: one .npy per image file, written atomically the first time."""

    def __init__(self, folder: Path, view) -> None:
        self.folder, self.view = Path(folder), view
        self.folder.mkdir(parents=True, exist_ok=True)
        self.written: dict[str, str] = {}

    def path(self, image) -> str | None:
        import numpy as np

        from vlmgrid.fileio import atomic_path
        from vlmgrid.images import SOURCE_KEY

        source = image.info.get(SOURCE_KEY, "")
        if source not in self.written:
            values = self.view.pixels(image)
            if values is None:
                return None
            path = self.folder / f"{len(self.written):06d}.npy"
            with atomic_path(path) as temporary, open(temporary, "wb") as handle:
                np.save(handle, values)
            self.written[source] = str(path)
        return self.written[source]


def request_line(request, view, generation: dict, pixels: _Pixels | None, source: str) -> dict:
    """One request as `vlmgrid inputs` prints it (the module's docstring)."""
    from vlmgrid.images import SOURCE_KEY
    from vlmgrid.model_requests import GenerateRequest

    line = {"id": str(request.id), "variant": request.variant, "text": view.text(request)}
    messages = view.messages(request)
    if messages is not None:
        line["messages"] = messages
    generated = isinstance(request, GenerateRequest)
    line["options"] = None if generated else list(request.letters or request.options)
    line["image"] = None if request.image is None else request.image.info.get(SOURCE_KEY)
    if pixels is not None:
        line["pixels"] = None if request.image is None else pixels.path(request.image)
    line["generation"] = (
        {**generation, "max_new_tokens": request.max_new_tokens or generation.get("max_new_tokens")}
        if generated
        else None
    )
    line["prompt"] = source
    return line


@dataclasses.dataclass(frozen=True)
class _Recording:
    """A cell's protocol bound to a recorder: its plan, its prepared benchmark, the backend and its view of a
    request."""

    plan: object
    bench: object
    backend: object
    view: object
    runner: object
    recorder: _Recorder

    def requests(self, records):
        """The requests the protocol sends for `records`, a chunk at a time, in order."""
        for start in range(0, len(records), CHUNK):
            self.runner(records.iloc[start : start + CHUNK])
            yield from self.recorder.requests
            self.recorder.requests.clear()


def _recording(config: Config, model: str, benchmark: str, bench=None) -> _Recording:
    """The cell's protocol bound to a recorder, its benchmark `bench` or the one its plan names; VlmgridError
    where the cell sends no requests (not applicable), SentNoPrompt where its model is sent no prompt (it
    embeds)."""
    from vlmgrid.models import BACKENDS
    from vlmgrid.protocols import make_runner, strategy_for
    from vlmgrid.stages.infer import open_benchmark
    from vlmgrid.stages.plan import cell_plan

    plan = cell_plan(config, model, benchmark)
    if plan.not_applicable is not None:
        raise VlmgridError(f"{plan.not_applicable}: the cell sends no requests")
    settings = plan.model_settings
    backend = BACKENDS.get(settings["backend"])
    bench = (
        open_benchmark(plan.bench_dir, plan.prompts_dir)
        if bench is None
        else dataclasses.replace(bench, prompts_dir=plan.prompts_dir)
    )
    recorder = _Recorder(backend, {**backend.defaults, **settings})
    # an embedding strategy builds its classifier from the model as it is made: ask which one runs first
    if strategy_for(bench.kind.protocol, recorder.model_capabilities, settings.get("answer_mode")) == "embed":
        raise SentNoPrompt(
            f"model {model} answers {benchmark} by image-text similarity ({settings['backend']}): it "
            f"is sent no prompt, only the benchmark's texts to embed"
        )
    runner, _ = make_runner(bench.kind.protocol, recorder, bench)
    return _Recording(plan, bench, backend, backend.request_view(settings, plan.model_dir), runner, recorder)


def shown_prompts(config: Config, model: str, benchmark: str, bench, records) -> dict[tuple[str, str], str]:
    """What the model was handed for each item of `records` and variant (the inspect page shows it): the text
    for its tokenizer, or an API's messages as JSON; the first request of an item that sends several (a DANCE
    query's pictures). Empty for a model that reads no prompt (a baseline)."""
    recording = _recording(config, model, benchmark, bench)
    view = recording.view
    if not getattr(view, "reads_prompt", True):
        return {}
    ids = {str(item) for item in records["id"]}
    shown: dict[tuple[str, str], str] = {}
    for request in recording.requests(records):
        item = str(request.id) if str(request.id) in ids else str(request.id).rsplit("#", 1)[0]
        text = view.text(request)
        if text is None:
            text = json.dumps(view.messages(request), ensure_ascii=False, indent=1)
        shown.setdefault((item, request.variant), text)
    return shown


def cell_inputs(
    config: Config,
    model: str,
    benchmark: str,
    *,
    limit: int | None = None,
    pixels_dir: Path | None = None,
    out: TextIO | None = None,
) -> int:
    """Print the requests of the cell (its first `limit` items), one JSON object a line; returns their
    number."""
    out = out or sys.stdout
    recording = _recording(config, model, benchmark)
    settings, bench = recording.plan.model_settings, recording.bench
    records = bench.records if limit is None else bench.records.iloc[: max(int(limit), 0)]
    generation, source = decoding(recording.backend, settings), prompt_source(settings)
    pixels = _Pixels(pixels_dir, recording.view) if pixels_dir is not None else None
    shown = 0
    for request in recording.requests(records):
        # the prompt's text as it is (any script), but no character a terminal acts on: JSON escapes for those
        out.write(terminal_json(request_line(request, recording.view, generation, pixels, source)) + "\n")
        shown += 1
    return shown
