"""transformers vision-language models: generation and option scoring through one generic path.

Every source is a folder in the hub layout (config, weights, processor, tokenizer, chat template): a
fixture is a tiny random checkpoint, written by the fixture writer `fetch` is handed; a hub source is a pinned
snapshot in the Hugging Face cache and a local source the user's own folder, both read where they lie
(`in_place`, vlmgrid.models.checkpoints), never copied. `load` always goes through `AutoProcessor` and
`AutoModelForImageTextToText` (or the class named by `model_class`; vlmgrid.models.hf_loading), so a fixture
and a real checkpoint run the same code, and inference never needs the network.

Prompts: each request's text and image are what vlmgrid.models.hf_inputs makes of them (the checkpoint's own
chat template over a system message and the user's text and image, or a recipe's hand-written string; the
image padded to a square or resized as the settings say); the processor then expands the image placeholder and
batches with left padding.

Scoring (letters as the next token, or option texts as continuations of a cached prefix) is in
vlmgrid.models.hf_scoring; batching (auto batch size, out-of-memory halving, prefetching the next batch's
inputs, requests with and without images batched apart) in vlmgrid.models.hf_batching.

BLIP-2 and InstructBLIP cannot run without an image (`needs_image`), which is an error naming the item.
InstructBLIP's Q-Former text is re-padded on the right: it has absolute positions, and its processor would pad
it like the language model's text (left), which changes the scores with the batch composition.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vlmgrid.errors import VlmgridError
from vlmgrid.models.base import Backend, GenerateRequest, Provenance, resolve_generation, write_fixture
from vlmgrid.models.checkpoints import Checkpoint
from vlmgrid.models.hf_batching import AUTO_START, HfBatching, Prefetched
from vlmgrid.models.hf_inputs import HfInputs
from vlmgrid.models.hf_loading import checkpoint_in_place, load_pretrained, load_processor, needs_image
from vlmgrid.models.hf_scoring import HfOptionScoring
from vlmgrid.models.host_device import to_device

log = logging.getLogger(__name__)


def _model_id(source: dict) -> str:
    return {
        "fixture": lambda: f"fixture:{source['family']}",
        "hf_hub": lambda: source["repo"],
        "local": lambda: str(source["path"]),
    }[source["type"]]()


class Hf(HfOptionScoring, HfBatching, Backend):
    name = "hf"
    capabilities = frozenset({"generate", "score_options"})
    uses_gpu = True
    unbatched = None
    # A request's image may be a future of it (protocols.base opens a part's images while the first batches
    # run); an image that cannot be opened raises its ImageError from the batch that needs it.
    accepts_image_futures = True
    defaults = {
        "batch_size": "auto",
        "precision": "bf16",
        "device": "auto",
        "attn_implementation": "sdpa",
        "trust_remote_code": False,
        "generation": {"max_new_tokens": 32, "do_sample": False},
    }

    def __init__(self, settings: dict, model, processor, device: str, dtype) -> None:
        super().__init__(settings)
        self.settings["generation"] = {**self.defaults["generation"], **self.settings.get("generation", {})}
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.device = device
        self.dtype = dtype
        size = self.settings["batch_size"]
        self.auto_batch = size == "auto"
        # With "auto": the largest size not yet known to run out of memory, and the largest that has worked.
        self._limit = AUTO_START if self.auto_batch else int(size)
        self.batch_size: int | None = None if self.auto_batch else int(size)
        self._letter_ids: dict[str, list[int]] = {}
        self.inputs = HfInputs(processor, self.settings, self._model_id())
        self.needs_image = needs_image(model)
        # On an accelerator the next batch's inputs are prepared by a thread while the current batch runs; on
        # the CPU that thread would only take turns with the model for the same cores.
        self._prefetch = ThreadPoolExecutor(max_workers=1) if str(device) != "cpu" else None

    @contextlib.contextmanager
    def one_at_a_time(self):
        # Every batch of requests (generation, letters) holds one request; the options scored on one request's
        # prefix are chunked as in the batched run (HfBatching._batched: `options`), as nothing pads them to
        # another request's.
        saved = self._limit, self.batch_size
        self._requests_alone = True
        try:
            yield self
        finally:
            self._requests_alone = False
            self._limit, self.batch_size = saved

    # --- fetch and load ---------------------------------------------------------------------------------

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path, fixture=None) -> dict[str, Path]:
        """A fixture's tiny checkpoint, written into model_dir (hub and local sources are read in place)."""
        return write_fixture(cls.name, settings["source"], Path(model_dir), fixture)

    @classmethod
    def in_place(cls, settings: dict) -> Checkpoint | None:
        return checkpoint_in_place(settings["source"])

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> Hf:
        settings = {**cls.defaults, **settings}
        model, processor, device, dtype = load_pretrained(settings, Path(model_dir), device)
        return cls(settings, model, processor, device, dtype)

    @classmethod
    def request_view(cls, settings: dict, model_dir: Path) -> HfInputs:
        """What the model receives for a request, from its processor alone (`vlmgrid inputs`): no weights
        read."""
        settings = {**cls.defaults, **resolve_generation(settings)}
        return HfInputs(load_processor(settings, Path(model_dir)), settings, _model_id(settings["source"]))

    # --- description ------------------------------------------------------------------------------------

    def _model_id(self) -> str:
        return _model_id(self.settings["source"])

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"hf {self._model_id()} on {self.device} ({dtype})"

    def provenance(self) -> Provenance:
        import torch
        import transformers

        source = self.settings["source"]
        device = self.device
        if str(device).startswith("cuda") and torch.cuda.is_available():
            device = torch.cuda.get_device_name(torch.device(device))
        return Provenance(
            backend=self.name,
            model_id=self._model_id(),
            revision=source.get("revision")
            if source["type"] != "fixture"
            else f"seed={source.get('seed', 0)}",
            dtype=str(self.dtype).removeprefix("torch."),
            device=device,
            batch_size=self.batch_size,
            generation=dict(self.settings["generation"]),
            libraries={"torch": torch.__version__, "transformers": transformers.__version__},
        )

    # --- prompts ----------------------------------------------------------------------------------------

    def _encode(self, requests: Sequence) -> dict:
        """Tokenise a batch of requests (all with an image or all without) with left padding, on the host."""
        if self.needs_image and any(r.image is None for r in requests):
            item = next(r.id for r in requests if r.image is None)
            raise VlmgridError(
                f"item {item} has no image, but {self._model_id()} cannot run without one; "
                "use a model that takes text-only prompts for this benchmark"
            )
        texts = [self.inputs.text(r) for r in requests]
        images = [self.inputs.image(r.image) for r in requests if r.image is not None]
        kwargs: dict = {"text": texts, "return_tensors": "pt", "padding": True}
        if images:
            if len(images) != len(requests):
                raise ValueError("a batch mixes requests with and without images")
            kwargs["images"] = images if not self._nested_images() else [[image] for image in images]
        inputs = dict(self.processor(**kwargs))
        qformer_tokenizer = getattr(self.processor, "qformer_tokenizer", None)
        if qformer_tokenizer is not None and "qformer_input_ids" in inputs:
            # InstructBLIP's processor pads the Q-Former text like the language model's (left here); the
            # Q-Former has absolute positions, so its text is padded on the right to score the same in any
            # batch.
            qformer = qformer_tokenizer(texts, padding=True, padding_side="right", return_tensors="pt")
            inputs["qformer_input_ids"] = qformer["input_ids"]
            inputs["qformer_attention_mask"] = qformer["attention_mask"]
        return {key: value for key, value in inputs.items() if value is not None}

    def _nested_images(self) -> bool:
        # Idefics3 and SmolVLM processors take one list of images per text.
        return type(self.processor).__name__ in {"Idefics3Processor", "SmolVLMProcessor", "Idefics2Processor"}

    def _cast(self, inputs: dict) -> dict:
        import torch

        return {
            key: value.to(self.dtype)
            if isinstance(value, torch.Tensor) and value.is_floating_point()
            else value
            for key, value in inputs.items()
        }

    # --- generate ---------------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        ids = self.generate_token_ids(requests)
        return [self.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]

    def generate_token_ids(self, requests: Sequence[GenerateRequest]) -> list[list[int]]:
        """The new tokens of each request, up to its max_new_tokens and before the first end-of-sequence
        token."""
        return self._by_image(list(requests), Prefetched(self._inputs, self._generate_batch, self._prefetch))

    def _inputs(self, requests: Sequence) -> dict:
        """The model's inputs for a batch of requests, on its device and in its precision."""
        return self._on_model(self._encode(requests))

    def _on_model(self, inputs: dict) -> dict:
        """Host inputs on the model's device, copied without waiting for its queue (they are prepared while
        the device runs the batch before), and in its precision."""
        import torch

        return self._cast(
            {
                key: to_device(value, self.model.device) if isinstance(value, torch.Tensor) else value
                for key, value in inputs.items()
            }
        )

    def _generate_batch(self, requests: Sequence[GenerateRequest], inputs: dict) -> list[list[int]]:
        import torch

        settings = self.settings["generation"]
        limits = [r.max_new_tokens or int(settings["max_new_tokens"]) for r in requests]
        kwargs: dict = {
            "max_new_tokens": max(limits),
            "do_sample": bool(settings.get("do_sample", False)),
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if kwargs["do_sample"]:
            torch.manual_seed(int(settings.get("seed", 0)))
            for key in ("temperature", "top_p", "top_k"):
                if settings.get(key) is not None:
                    kwargs[key] = settings[key]
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        # a penalty changes greedy decoding too; unset, the checkpoint's generation_config.json decides
        if settings.get("repetition_penalty") is not None:
            kwargs["repetition_penalty"] = settings["repetition_penalty"]
        with torch.inference_mode():
            output = self.model.generate(**inputs, **kwargs)
        new = output[:, inputs["input_ids"].shape[1] :]
        eos = self._eos_ids()
        rows = []
        for row, limit in zip(new.tolist(), limits):
            row = row[:limit]  # greedy decoding: a shorter limit is a prefix of the longer run
            for position, token in enumerate(row):
                if token in eos:
                    row = row[:position]
                    break
            rows.append(row)
        return rows

    def _eos_ids(self) -> set[int]:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids
