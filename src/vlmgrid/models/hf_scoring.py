"""Option scoring for the `hf` backend.

- letters: one forward pass per batch; the next-token log-softmax at the last prompt position, read at each
  letter's token. Tokenizers differ in whether a letter after "ASSISTANT:" is the token "A" or " A"
  (byte-level BPE has both, SentencePiece may only have "▁A"), so each letter is scored as the best of its
  plain and space-prefixed spellings that are single tokens (an error if neither is);
- continuations: the image + prompt prefix is computed once per request (use_cache=True), and the option
  texts, tokenised on their own without special tokens and appended to the prompt tokens, are scored in
  batched forwards that reuse copies of its KV cache; each option's score is the sum of its tokens'
  log-probabilities. Option texts are appended as given: pass " yes" rather than "yes" where the model
  expects a space.
  For a language model whose attention takes a ready-made 4D mask (`PACKED_TEXT_MODELS`), a chunk's options
  are packed one after another into a single row that continues one copy of the prefix's cache, each option
  seeing the prefix and its own earlier tokens at the positions it would have alone: the prefix's keys and
  values are read once per chunk instead of copied once per option (hundreds of class names after a prompt
  of a thousand tokens). Other models score each option in its own row of the chunk; both give the same
  scores.

On an accelerator the next batch of letters, or the next request's prompt inputs and option tokens, are
prepared in a thread while the current one runs (hf_batching's `Prefetched`); everything that uses the
tokenizer is on that side, so the device loop never shares it with the preparing thread. Between a prefix's
forward and its options' the device loop makes its small tensors (token ids, positions, indices) on the host
and copies them without waiting for the device (`host_device.on_device`), so that the host does not idle
through the prefix's forward nor the device through the options' preparation. A request's scores come back
the same way (`host_device.HostCopy`: one gather and one copy a chunk, packed or not) and are read once the
next request's prefix and options are launched, so that the device runs those while the host waits for the
copy and turns it into totals.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence

from vlmgrid.errors import VlmgridError
from vlmgrid.model_requests import OptionRequest, OptionScores
from vlmgrid.models.base import require_finite
from vlmgrid.models.hf_batching import Prefetched
from vlmgrid.models.host_device import HostCopy, on_device, to_device


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
    raise VlmgridError(
        f"{type(output).__name__} returned no KV cache; continuation scoring needs a model with use_cache"
    )


# Text model types (config.model_type) whose attention takes a custom 4D additive mask and explicit position
# ids unchanged, checked against the row-per-option path on the tiny checkpoints
# (vlmgrid.fixtures.models.tiny_hf).
PACKED_TEXT_MODELS = frozenset({"llama"})


class _ScoresLater:
    """A request's option scores whose totals are read from the host copies of its chunks when asked for
    (`read`): each chunk's totals a call that waits for its copy."""

    def __init__(self, chunks: Sequence[Callable[[], list[float]]], tokens: list[int]) -> None:
        self.chunks, self.tokens = list(chunks), tokens

    def read(self) -> OptionScores:
        return OptionScores(total=[total for chunk in self.chunks for total in chunk()], tokens=self.tokens)


def _totals_later(first, option_ids: Sequence[list[int]], picked) -> Callable[[], list[float]]:
    """A chunk's option totals, read when called: each option's first token's log-probability from the
    prefix's (`first`), its following tokens' from `picked` (every option's in turn), both gathered on the
    device and copied to the host in one piece without waiting."""
    import torch

    firsts = first[on_device(first.device, [ids[0] for ids in option_ids])]
    copied = HostCopy(torch.cat([firsts, picked]))
    lengths = [len(ids) for ids in option_ids]
    return lambda: _option_totals(copied, lengths)


def _option_totals(copied: HostCopy, lengths: Sequence[int]) -> list[float]:
    """A chunk's option totals from its host copy: the options' first tokens' log-probabilities, then the
    following tokens' of every option in turn."""
    values = copied.values()
    firsts, picked = values[: len(lengths)].tolist(), values[len(lengths) :]
    totals, start = [], 0
    for total, length in zip(firsts, lengths):
        if length > 1:
            total += float(picked[start : start + length - 1].sum())
        totals.append(total)
        start += length - 1
    return totals


def _packed_mask(lengths: Sequence[int], prefix_length: int, dtype, device):
    """The (1, 1, T, prefix + T) additive mask of options packed into one row: each token sees the whole
    prefix and its own option's tokens up to itself, nothing of the other options. Made on `device`: on a GPU
    it is the device's work, not the host's between the prefix's forward and the options'."""
    import torch

    total = sum(lengths)
    # a token sees the keys from its own option's first token to itself
    starts = torch.repeat_interleave(
        on_device(device, list(itertools.accumulate([0, *lengths[:-1]]))),
        on_device(device, list(lengths)),
        output_size=total,
    )
    key = torch.arange(total, device=device)
    hidden = (key[None, :] < starts[:, None]) | (key[None, :] > key[:, None])
    mask = torch.zeros((total, prefix_length + total), dtype=dtype, device=device)
    mask[:, prefix_length:].masked_fill_(hidden, torch.finfo(dtype).min)
    return mask[None, None]


def _cache_argument(model) -> str:
    """The forward argument that takes a KV cache: `cache` where the model has it, else `past_key_values`."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class HfOptionScoring:
    """The option-scoring methods of the `hf` backend (mixed into `Hf`, whose model, tokenizer, request
    encoding and batching they use)."""

    pack_options = True  # False: every option in its own row, whatever the model (the reference path)

    def score_options(self, requests: Sequence[OptionRequest]) -> list[OptionScores]:
        requests = list(requests)
        results: list = [None] * len(requests)
        lettered = [i for i, r in enumerate(requests) if r.letters]
        if lettered:
            for index, scores in zip(
                lettered,
                self._by_image(
                    [requests[i] for i in lettered],
                    Prefetched(self._letter_inputs, self._score_letters, self._prefetch),
                ),
            ):
                results[index] = scores
        continued = [i for i, r in enumerate(requests) if not r.letters]
        # One request at a time (its prefix's cache is reused by its options), the next one's inputs and
        # option tokens prepared ahead while this one runs, and each one's scores read once the next one is
        # launched.
        step = Prefetched(self._continuation_inputs, self._score_continuations, self._prefetch)
        launched: tuple[int, _ScoresLater] | None = None
        for position, index in enumerate(continued):
            step.ahead([requests[i] for i in continued[position + 1 : position + 2]])
            scores = step([requests[index]])[0]
            if launched is not None:
                results[launched[0]] = self._read_back(launched[1].read)
            launched = (index, scores)
        if launched is not None:
            results[launched[0]] = self._read_back(launched[1].read)
        require_finite(
            [scores.total for scores in results],
            [request.id for request in requests],
            "the option scores",
            f"{self._model_id()} overflowed at its precision ({self.settings['precision']}; bf16 or fp32 "
            "avoid that) or its weights are damaged; nothing of this call was written",
            scores=True,
        )
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

    def _letter_inputs(self, requests: Sequence[OptionRequest]) -> dict:
        """A batch's inputs, its letters' token ids looked up here (on the preparing thread), so that the
        device loop (`_score_letters`) reads them without using the tokenizer."""
        for request in requests:
            for letter in request.letters:
                self.letter_token_ids(letter)
        return self._inputs(requests)

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
                raise VlmgridError(
                    f"item {request.id} has {len(request.options)} options but {len(request.letters)} letters"
                )
            total = [
                max(float(row[token]) for token in self.letter_token_ids(letter))
                for letter in request.letters
            ]
            scores.append(OptionScores(total=total, tokens=[1] * len(total)))
        return scores

    def _text_model(self):
        """What continues a cached prefix from token ids: the model, or its causal LM (BLIP-2,
        InstructBLIP)."""
        language_model = getattr(self.model, "language_model", None)
        if (
            language_model is not None
            and getattr(language_model, "get_output_embeddings", lambda: None)() is not None
        ):
            return language_model
        return self.model

    def _packable(self, text_model) -> bool:
        """Whether options can be packed into one row (`PACKED_TEXT_MODELS`, sdpa or eager attention)."""
        config = getattr(text_model.config, "text_config", None) or text_model.config
        attention = getattr(config, "_attn_implementation", None)
        return (
            getattr(config, "model_type", None) in PACKED_TEXT_MODELS
            and attention in ("sdpa", "eager")
            and self.pack_options
        )

    def _score_packed(
        self, request: OptionRequest, option_ids: list[list[int]], cache, first, prefix_mask, text_model
    ) -> _ScoresLater:
        """Each chunk's options packed into one row after a copy of the prefix's cache (see the module's
        doc), after an unpadded prefix; the totals read when asked for."""
        import torch

        prefix_length = prefix_mask.shape[1]
        device = prefix_mask.device

        def run(chunk: Sequence[int]) -> list[Callable[[], list[float]]]:
            lengths = [len(option_ids[i]) for i in chunk]
            ids = on_device(device, [[token for i in chunk for token in option_ids[i]]])
            positions = on_device(device, [[prefix_length + k for n in lengths for k in range(n)]])
            with torch.inference_mode():
                logits = text_model(
                    input_ids=ids,
                    attention_mask=_packed_mask(lengths, prefix_length, self.dtype, device),
                    position_ids=positions,
                    use_cache=True,
                    **{_cache_argument(text_model): copy.deepcopy(cache)},
                ).logits
            logprobs = torch.log_softmax(logits[0].float(), dim=-1)
            # every option's first token read from the prefix's logits, its others from the packed row: one
            # gather each and one copy to the host for the chunk, not a round trip per option
            rows, following, start = [], [], 0
            for i, length in zip(chunk, lengths):
                rows += range(start, start + length - 1)
                following += option_ids[i][1:]
                start += length
            picked = logprobs[
                on_device(logprobs.device, rows, torch.long),
                on_device(logprobs.device, following, torch.long),
            ]
            return [_totals_later(first, [option_ids[i] for i in chunk], picked)]

        chunks = self._batched(list(range(len(option_ids))), run, options=True)
        return _ScoresLater(chunks, [len(ids) for ids in option_ids])

    def _continuation_inputs(
        self, requests: Sequence[OptionRequest]
    ) -> tuple[dict, list[list[int]], int, bool]:
        """A request's prompt inputs, its options' tokens, the pad token and whether the prompt is padded: all
        the tokenizer's work, so that the device loop (`_score_continuations`) never touches it while the
        next request is prepared in a thread (a tokenizer used by two threads at once can fail)."""
        (request,) = requests
        host = self._encode([request])
        mask = host.get("attention_mask")
        padded = mask is not None and bool((mask == 0).any())  # read on the host: no wait for the device
        inputs = self._on_model(host)
        option_ids = [self.tokenizer.encode(option, add_special_tokens=False) for option in request.options]
        for option, ids in zip(request.options, option_ids):
            if not ids:
                raise VlmgridError(
                    f"item {request.id} has an empty option {option!r}; every option needs text"
                )
        return inputs, option_ids, self.tokenizer.pad_token_id or 0, padded

    def _score_continuations(
        self, requests: Sequence[OptionRequest], prepared: tuple[dict, list[list[int]], int, bool]
    ) -> list[_ScoresLater]:
        import torch

        (request,) = requests
        inputs, option_ids, pad, padded = prepared
        # Multimodal RoPE models (Qwen2-VL, Qwen2.5-VL) keep the prefix's position offset in `rope_deltas`;
        # clear a stale one so that a text-only prefix leaves none.
        rope_owner = getattr(self.model, "model", None)
        mrope = rope_owner is not None and hasattr(rope_owner, "rope_deltas")
        if mrope:
            rope_owner.rope_deltas = None
        with torch.inference_mode():
            prefix = self._on_device(
                lambda: self.model(**inputs, use_cache=True), f"the prefix of item {request.id}"
            )
        prefix_length = inputs["input_ids"].shape[1]
        cache = _cache_of(prefix)
        first = torch.log_softmax(prefix.logits[0, -1].float(), dim=-1)
        prefix_mask = inputs["attention_mask"]
        text_model = self._text_model()
        if not mrope and self._packable(text_model):
            if padded:  # a single request is never padded; a pad would shift the packed options' positions
                raise ValueError("a packed continuation needs an unpadded prefix")
            return [self._score_packed(request, option_ids, cache, first, prefix_mask, text_model)]

        def run(chunk: Sequence[int]) -> list[Callable[[], list[float]]]:
            lengths = [len(option_ids[i]) for i in chunk]
            longest = max(lengths)
            ids = torch.full((len(chunk), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), longest), dtype=prefix_mask.dtype)
            for row, i in enumerate(chunk):  # right padding: pads come after an option's tokens
                ids[row, : len(option_ids[i])] = torch.tensor(option_ids[i])
                mask[row, : len(option_ids[i])] = 1
            # copied without waiting for the prefix's forward
            ids, mask = to_device(ids, prefix_mask.device), to_device(mask, prefix_mask.device)
            past = copy.deepcopy(cache)
            past.batch_repeat_interleave(len(chunk))
            extra = {_cache_argument(text_model): past}
            if (
                mrope
            ):  # the continuation's positions follow the prefix's, shifted by its rope delta (t, h, w alike)
                delta = rope_owner.rope_deltas
                offset = int(delta.reshape(-1)[0]) if delta is not None else 0
                positions = torch.arange(longest, device=ids.device) + prefix_length + offset
                extra["position_ids"] = positions.view(1, 1, -1).expand(3, len(chunk), -1)
            with torch.inference_mode():
                logits = text_model(
                    input_ids=ids,
                    attention_mask=torch.cat([prefix_mask.expand(len(chunk), -1), mask], dim=1),
                    use_cache=True,
                    **extra,
                ).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            # as the packed path reads them: one gather for the chunk and one copy to the host, read later
            rows, steps, following = [], [], []
            for row, (i, length) in enumerate(zip(chunk, lengths)):
                rows += [row] * (length - 1)
                steps += range(length - 1)
                following += option_ids[i][1:]
            device = logprobs.device
            picked = logprobs[
                on_device(device, rows, torch.long),
                on_device(device, steps, torch.long),
                on_device(device, following, torch.long),
            ]
            return [_totals_later(first, [option_ids[i] for i in chunk], picked)]

        chunks = self._batched(list(range(len(option_ids))), run, options=True)
        return [_ScoresLater(chunks, [len(ids) for ids in option_ids])]
