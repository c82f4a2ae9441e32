"""transformers vision-language models: generation and option scoring through one generic path.

Every source ends as a folder in the hub layout (config, weights, processor, tokenizer, chat template):
a fixture is a tiny random checkpoint written by `vlmgrid.models.tiny_hf`, a hub source is a pinned
snapshot. `load` always goes through `AutoProcessor` and `AutoModelForImageTextToText` (or the class named by
`model_class`), so a fixture and a real checkpoint run the same code, and inference never needs the network.

Prompts: each request becomes a user message holding its image (when there is one) and its text, after an
optional system message, rendered with the model's own chat template and `add_generation_prompt=True`; the
processor then expands the image placeholder and batches with left padding.

Scoring:
- letters: one forward pass per batch; the next-token log-softmax at the last prompt position, read at each
  letter's token. Tokenizers differ in whether a letter after "ASSISTANT:" is the token "A" or " A" (byte-level
  BPE has both, SentencePiece may only have "▁A"), so each letter is scored as the best of its plain and
  space-prefixed spellings that are single tokens (an error if neither is);
- continuations: the image + prompt prefix is computed once per request (use_cache=True), and the option texts,
  tokenised on their own without special tokens and appended to the prompt tokens, are scored in batched
  forwards that reuse copies of its KV cache; each option's score is the sum of its tokens' log-probabilities.
  Option texts are appended as given: pass " yes" rather than "yes" where the model expects a space.

Batches: on an accelerator, the next batch's inputs (image processing, tokenising, the copy to the device) are
prepared by a thread while the current batch runs, so the accelerator does not wait on the processor; the inputs
are the same either way. Requests with images and requests without are batched apart (results come back in
request order);
BLIP-2 and InstructBLIP cannot run without an image (`needs_image`), which is an error naming the item. A model
without any chat template (the BLIP family on the hub) gets the system text and the prompt as plain text.
InstructBLIP's Q-Former text is re-padded on the right: it has absolute positions, and its processor would pad
it like the language model's text (left), which changes the scores with the batch composition.
"""

from __future__ import annotations

import copy
import logging
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Sequence

from vlmgrid.errors import InferenceFailed, VlmgridError
from vlmgrid.hub import hub_errors
from vlmgrid.models.base import Backend, GenerateRequest, OptionRequest, OptionScores, Provenance

log = logging.getLogger(__name__)

AUTO_START = 64  # the first batch size tried with batch_size "auto"



def _is_cuda_error(exc: BaseException) -> bool:
    """A RuntimeError raised by the CUDA runtime or a CUDA library (the device failed, not the input)."""
    text = str(exc)
    return any(mark in text for mark in ("CUDA error", "CUBLAS_STATUS", "CUDNN_STATUS", "cuDNN error",
                                          "NCCL error", "device-side assert"))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

class _Prefetched:
    """A batch step in two halves, `compute(chunk, prepare(chunk))`, whose next chunk's `prepare` (image
    processing, tokenising, the copy to the device) runs in a thread while the accelerator runs this one.

    `_batched` announces the next chunk with `ahead` before it runs the current one; its preparation starts once
    the current chunk's inputs are ready, so the processor is never used by two threads at once. A chunk that
    comes other than announced (the batch size halved after running out of memory) is prepared when it is run.
    Either way the inputs are the same, so the outputs are too.
    """

    def __init__(self, prepare: Callable, compute: Callable, pool: ThreadPoolExecutor | None) -> None:
        self.prepare, self.compute, self.pool = prepare, compute, pool
        self._queued: list | None = None
        self._next: tuple[list, object] | None = None

    def ahead(self, chunk: Sequence) -> None:
        self._queued = list(chunk) if self.pool is not None and len(chunk) else None

    def __call__(self, chunk: Sequence) -> list:
        announced, self._next = self._next, None
        queued, self._queued = self._queued, None
        ready = None
        if announced is not None and len(announced[0]) == len(chunk) and all(
                a is b for a, b in zip(announced[0], chunk)):
            ready = announced[1]
        elif announced is not None:
            wait([announced[1]])
        inputs = self.prepare(chunk) if ready is None else None
        if queued is not None:
            self._next = (queued, self.pool.submit(self.prepare, queued))
        return self.compute(chunk, inputs if ready is None else ready.result())


def _fetch_hub(source: dict, model_dir: Path) -> dict[str, Path]:
    from huggingface_hub import snapshot_download

    repo, revision = source["repo"], source["revision"]
    with hub_errors(repo, revision, f"model {repo}"):
        snapshot_download(repo_id=repo, revision=revision, local_dir=model_dir)
    return {
        str(path.relative_to(model_dir)): path
        for path in sorted(model_dir.rglob("*"))
        if path.is_file() and ".cache" not in path.relative_to(model_dir).parts
    }


def _fetch_fixture(source: dict, model_dir: Path) -> dict[str, Path]:
    from vlmgrid.models.tiny_hf import write_tiny_checkpoint

    return write_tiny_checkpoint(source["family"], model_dir, int(source.get("seed", 0)))


_FETCHERS = {"fixture": _fetch_fixture, "hf_hub": _fetch_hub}


def _cache_of(output):
    """The KV cache of a forward's output (`cache` from transformers 5.x, `past_key_values` before).

    BLIP-2 and InstructBLIP keep it in their language model's output.
    """
    inner = output.get("language_model_outputs") if hasattr(output, "get") else None
    if inner is not None:
        output = inner
    for name in ("cache", "past_key_values"):
        cache = output.get(name) if hasattr(output, "get") else getattr(output, name, None)
        if cache is not None:
            return cache
    raise VlmgridError(f"{type(output).__name__} returned no KV cache; continuation scoring needs a model with use_cache")


def _cache_argument(model) -> str:
    """The forward argument that takes a KV cache: `cache` where the model has it, else `past_key_values`."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _needs_image(model) -> bool:
    """Whether the model's forward cannot run without pixel_values (BLIP-2, InstructBLIP)."""
    import inspect

    parameter = inspect.signature(model.forward).parameters.get("pixel_values")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _from_pretrained(model_class, model_dir: Path, attn: str, kwargs: dict):
    """Load with the asked attention implementation, falling back (flash_attention_2 -> sdpa -> eager) with a note."""
    order = ["flash_attention_2", "sdpa", "eager"]
    candidates = [attn] + [name for name in order[order.index(attn) + 1:]] if attn in order else [attn]
    for position, name in enumerate(candidates):
        try:
            return model_class.from_pretrained(model_dir, attn_implementation=name, **kwargs)
        except (ValueError, ImportError) as exc:
            message = str(exc).lower()
            if position == len(candidates) - 1 or not any(word in message for word in ("attn", "attention", "sdpa")):
                raise
            log.warning("%s: attn_implementation=%s is not available (%s); trying %s",
                        model_dir, name, exc, candidates[position + 1])
    raise AssertionError("unreachable")


def _resolve_class(name: str):
    import transformers

    cls = getattr(transformers, name, None)
    if cls is None:
        raise VlmgridError(f'transformers {transformers.__version__} has no class "{name}"; fix the model\'s model_class')
    return cls


class Hf(Backend):
    name = "hf"
    capabilities = frozenset({"generate", "score_options"})
    uses_gpu = True
    defaults = {
        "batch_size": "auto", "precision": "bf16", "device": "auto", "attn_implementation": "sdpa",
        "trust_remote_code": False, "generation": {"max_new_tokens": 32, "do_sample": False},
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
        self._warned_template = False
        self.needs_image = _needs_image(model)
        # On an accelerator the next batch's inputs are prepared by a thread while the current batch runs; on
        # the CPU that thread would only take turns with the model for the same cores.
        self._prefetch = ThreadPoolExecutor(max_workers=1) if str(device) != "cpu" else None

    # --- fetch and load ---------------------------------------------------------------------------------

    @classmethod
    def fetch(cls, settings: dict, model_dir: Path) -> dict[str, Path]:
        source = settings["source"]
        return _FETCHERS[source["type"]](source, Path(model_dir))

    @classmethod
    def load(cls, settings: dict, model_dir: Path, device: str) -> "Hf":
        import torch
        from transformers import AutoProcessor

        settings = {**cls.defaults, **settings}
        model_dir = Path(model_dir)
        if not (model_dir / "config.json").is_file():
            raise VlmgridError(f"{model_dir / 'config.json'} is missing; run `vlmgrid fetch-model` for this model first")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[settings["precision"]]
        if device == "cpu":
            dtype = torch.float32  # half precision on the CPU is slow and not what a reference run uses
        remote = bool(settings.get("trust_remote_code", False))
        processor = AutoProcessor.from_pretrained(model_dir, trust_remote_code=remote,
                                                  **dict(settings.get("processor_kwargs") or {}))
        model_class = _resolve_class(settings.get("model_class") or "AutoModelForImageTextToText")
        kwargs: dict = {"dtype": dtype, "trust_remote_code": remote}
        if settings.get("device_map") == "auto":
            import importlib.util

            if importlib.util.find_spec("accelerate") is None:
                raise VlmgridError('device_map: auto needs the accelerate package; `pip install accelerate` '
                                   'or remove device_map from the model settings')
            kwargs["device_map"] = "auto"
        model = _from_pretrained(model_class, model_dir, settings.get("attn_implementation") or "sdpa", kwargs)
        if "device_map" not in kwargs:
            model = model.to(device)
        model.eval()
        tokenizer = getattr(processor, "tokenizer", processor)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return cls(settings, model, processor, device, dtype)

    # --- description ------------------------------------------------------------------------------------

    def _model_id(self) -> str:
        source = self.settings["source"]
        return f"fixture:{source['family']}" if source["type"] == "fixture" else source["repo"]

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
            revision=source.get("revision") if source["type"] == "hf_hub" else f"seed={source.get('seed', 0)}",
            dtype=str(self.dtype).removeprefix("torch."),
            device=device,
            batch_size=self.batch_size,
            generation=dict(self.settings["generation"]),
            libraries={"torch": torch.__version__, "transformers": transformers.__version__},
        )

    # --- batching ---------------------------------------------------------------------------------------

    def _batched(self, items: Sequence, run: Callable[[Sequence], list]) -> list:
        """Run `run` over consecutive chunks of items; with batch_size "auto", halve the chunk on out-of-memory."""
        import torch

        results: list = []
        start = 0
        size = min(self._limit, max(len(items), 1))
        while start < len(items):
            chunk = items[start:start + size]
            announce = getattr(run, "ahead", None)
            if announce is not None:
                announce(items[start + size:start + 2 * size])
            try:
                results.extend(run(chunk))
            except torch.cuda.OutOfMemoryError:
                if not self.auto_batch or size == 1:
                    # An inference error, not the items': the job stops, keeping its finished parts.
                    raise InferenceFailed(
                        f"{self._model_id()} ran out of GPU memory with batch size {size}; "
                        "set the model's batch_size lower (or to auto) or use a smaller precision", stop=True
                    ) from None
                size = self._limit = max(size // 2, 1)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                log.info("out of memory: batch size now %d", size)
                continue
            except RuntimeError as exc:
                if not _is_cuda_error(exc):
                    raise
                raise InferenceFailed(
                    f"{self._model_id()} hit a CUDA error ({_first_line(exc)}); the GPU or its driver failed, not "
                    "the items: check the GPU (nvidia-smi) and rerun, which resumes at the first unfinished part",
                    stop=True,
                ) from None
            start += len(chunk)
            if self.auto_batch:
                self.batch_size = size
        return results

    # --- prompts ----------------------------------------------------------------------------------------

    def _prepare_image(self, image):
        size = self.settings.get("image_size")
        image = image.convert("RGB")
        return image.resize((int(size), int(size))) if size else image

    def _prompt_text(self, prompt: str, has_image: bool, system: str | None) -> str:
        content = ([{"type": "image"}] if has_image else []) + [{"type": "text", "text": prompt}]
        messages = ([{"role": "system", "content": [{"type": "text", "text": system}]}] if system else [])
        messages.append({"role": "user", "content": content})
        for owner in (self.processor, self.tokenizer):
            if getattr(owner, "chat_template", None):
                return owner.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        if not self._warned_template:
            log.warning("%s has no chat template; prompts are passed as plain text", self._model_id())
            self._warned_template = True
        return f"{system}\n{prompt}" if system else prompt

    def _encode(self, requests: Sequence) -> dict:
        """Tokenise a batch of requests (all with an image or all without) with left padding."""
        if self.needs_image and any(r.image is None for r in requests):
            item = next(r.id for r in requests if r.image is None)
            raise VlmgridError(f"item {item} has no image, but {self._model_id()} cannot run without one; "
                               "use a model that takes text-only prompts for this benchmark")
        texts = [self._prompt_text(r.prompt, r.image is not None, r.system) for r in requests]
        images = [self._prepare_image(r.image) for r in requests if r.image is not None]
        kwargs: dict = {"text": texts, "return_tensors": "pt", "padding": True}
        if images:
            if len(images) != len(requests):
                raise ValueError("a batch mixes requests with and without images")
            kwargs["images"] = images if not self._nested_images() else [[image] for image in images]
        inputs = dict(self.processor(**kwargs))
        qformer_tokenizer = getattr(self.processor, "qformer_tokenizer", None)
        if qformer_tokenizer is not None and "qformer_input_ids" in inputs:
            # InstructBLIP's processor pads the Q-Former text like the language model's (left here); the Q-Former
            # has absolute positions, so its text is padded on the right to score the same in any batch.
            qformer = qformer_tokenizer(texts, padding=True, padding_side="right", return_tensors="pt")
            inputs["qformer_input_ids"] = qformer["input_ids"]
            inputs["qformer_attention_mask"] = qformer["attention_mask"]
        inputs = {key: value for key, value in inputs.items() if value is not None}
        return {key: (value.to(self.model.device) if hasattr(value, "to") else value) for key, value in inputs.items()}

    def _nested_images(self) -> bool:
        # Idefics3 and SmolVLM processors take one list of images per text.
        return type(self.processor).__name__ in {"Idefics3Processor", "SmolVLMProcessor", "Idefics2Processor"}

    def _cast(self, inputs: dict) -> dict:
        import torch

        return {
            key: value.to(self.dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
            for key, value in inputs.items()
        }

    def _by_image(self, requests: Sequence, run: Callable[[Sequence], list]) -> list:
        """Batch requests with images and requests without separately; results come back in request order."""
        results: list = [None] * len(requests)
        for has_image in (True, False):
            indices = [i for i, r in enumerate(requests) if (r.image is not None) == has_image]
            if not indices:
                continue
            outputs = self._batched([requests[i] for i in indices], run)
            for index, output in zip(indices, outputs):
                results[index] = output
        return results

    # --- generate ---------------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        ids = self.generate_token_ids(requests)
        return [self.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]

    def generate_token_ids(self, requests: Sequence[GenerateRequest]) -> list[list[int]]:
        """The new tokens of each request, up to its max_new_tokens and before the first end-of-sequence token."""
        return self._by_image(list(requests), _Prefetched(self._inputs, self._generate_batch, self._prefetch))

    def _inputs(self, requests: Sequence) -> dict:
        """The model's inputs for a batch of requests, on its device and in its precision."""
        return self._cast(self._encode(requests))

    def _generate_batch(self, requests: Sequence[GenerateRequest], inputs: dict) -> list[list[int]]:
        import torch

        settings = self.settings["generation"]
        limits = [r.max_new_tokens or int(settings["max_new_tokens"]) for r in requests]
        kwargs: dict = {"max_new_tokens": max(limits), "do_sample": bool(settings.get("do_sample", False)),
                        "pad_token_id": self.tokenizer.pad_token_id}
        if kwargs["do_sample"]:
            torch.manual_seed(int(settings.get("seed", 0)))
            for key in ("temperature", "top_p"):
                if settings.get(key) is not None:
                    kwargs[key] = settings[key]
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            output = self.model.generate(**inputs, **kwargs)
        new = output[:, inputs["input_ids"].shape[1]:]
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

    # --- score options ----------------------------------------------------------------------------------

    def score_options(self, requests: Sequence[OptionRequest]) -> list[OptionScores]:
        requests = list(requests)
        results: list = [None] * len(requests)
        lettered = [i for i, r in enumerate(requests) if r.letters]
        if lettered:
            for index, scores in zip(lettered, self._by_image(
                    [requests[i] for i in lettered],
                    _Prefetched(self._inputs, self._score_letters, self._prefetch))):
                results[index] = scores
        for index, request in enumerate(requests):
            if not request.letters:
                results[index] = self._score_continuations(request)
        return results

    def letter_token_ids(self, letter: str) -> list[int]:
        """The single-token spellings of a letter: plain and space-prefixed (whichever are one token)."""
        if letter not in self._letter_ids:
            ids = []
            for text in (letter, " " + letter):
                tokens = self.tokenizer.encode(text, add_special_tokens=False)
                if len(tokens) == 1 and tokens[0] not in ids:
                    ids.append(tokens[0])
            if not ids:
                raise VlmgridError(
                    f'the letter "{letter}" is not a single token for {self._model_id()}; use option texts '
                    "(continuation scoring) instead of letters for this model"
                )
            self._letter_ids[letter] = ids
        return self._letter_ids[letter]

    def _next_token_logprobs(self, inputs: dict):
        import torch

        with torch.inference_mode():
            logits = self.model(**inputs, use_cache=False).logits
        return torch.log_softmax(logits[:, -1].float(), dim=-1).cpu()

    def _score_letters(self, requests: Sequence[OptionRequest], inputs: dict) -> list[OptionScores]:
        logprobs = self._next_token_logprobs(inputs)
        scores = []
        for row, request in zip(logprobs, requests):
            if len(request.letters) != len(request.options):
                raise VlmgridError(f"item {request.id} has {len(request.options)} options but {len(request.letters)} letters")
            total = [max(float(row[token]) for token in self.letter_token_ids(letter)) for letter in request.letters]
            scores.append(OptionScores(total=total, tokens=[1] * len(total)))
        return scores

    def _text_model(self):
        """What continues a cached prefix from token ids: the model, or its causal LM (BLIP-2, InstructBLIP)."""
        language_model = getattr(self.model, "language_model", None)
        if language_model is not None and getattr(language_model, "get_output_embeddings", lambda: None)() is not None:
            return language_model
        return self.model

    def _score_continuations(self, request: OptionRequest) -> OptionScores:
        import torch

        inputs = self._cast(self._encode([request]))
        # Multimodal RoPE models (Qwen2-VL, Qwen2.5-VL) keep the prefix's position offset in `rope_deltas`;
        # clear a stale one so that a text-only prefix leaves none.
        rope_owner = getattr(self.model, "model", None)
        mrope = rope_owner is not None and hasattr(rope_owner, "rope_deltas")
        if mrope:
            rope_owner.rope_deltas = None
        with torch.inference_mode():
            prefix = self.model(**inputs, use_cache=True)
        prefix_length = inputs["input_ids"].shape[1]
        cache = _cache_of(prefix)
        first = torch.log_softmax(prefix.logits[0, -1].float(), dim=-1)
        prefix_mask = inputs["attention_mask"]
        option_ids = [self.tokenizer.encode(option, add_special_tokens=False) for option in request.options]
        for option, ids in zip(request.options, option_ids):
            if not ids:
                raise VlmgridError(f"item {request.id} has an empty option {option!r}; every option needs text")
        text_model = self._text_model()
        pad = self.tokenizer.pad_token_id or 0

        def run(chunk: Sequence[int]) -> list[float]:
            longest = max(len(option_ids[i]) for i in chunk)
            ids = torch.full((len(chunk), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), longest), dtype=prefix_mask.dtype)
            for row, i in enumerate(chunk):  # right padding: pads come after an option's tokens
                ids[row, :len(option_ids[i])] = torch.tensor(option_ids[i])
                mask[row, :len(option_ids[i])] = 1
            ids, mask = ids.to(prefix_mask.device), mask.to(prefix_mask.device)
            past = copy.deepcopy(cache)
            past.batch_repeat_interleave(len(chunk))
            extra = {_cache_argument(text_model): past}
            if mrope:  # the continuation's positions follow the prefix's, shifted by its rope delta (t, h, w alike)
                delta = rope_owner.rope_deltas
                offset = int(delta.reshape(-1)[0]) if delta is not None else 0
                positions = torch.arange(longest, device=ids.device) + prefix_length + offset
                extra["position_ids"] = positions.view(1, 1, -1).expand(3, len(chunk), -1)
            with torch.inference_mode():
                logits = text_model(
                    input_ids=ids,
                    attention_mask=torch.cat([prefix_mask.expand(len(chunk), -1), mask], dim=1),
                    use_cache=True, **extra,
                ).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            totals = []
            for row, i in enumerate(chunk):
                tokens = option_ids[i]
                total = float(first[tokens[0]])
                if len(tokens) > 1:
                    following = torch.tensor(tokens[1:], device=logprobs.device)
                    total += float(logprobs[row, :len(tokens) - 1].gather(-1, following[:, None]).sum())
                totals.append(total)
            return totals

        totals = self._batched(list(range(len(option_ids))), run)
        return OptionScores(total=totals, tokens=[len(ids) for ids in option_ids])
