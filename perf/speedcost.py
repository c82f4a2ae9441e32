"""The simulated device's costs: what a model call takes on the H200 for the work it is handed, and how much
of that time the thread launching its kernels holds the GIL.

The call costs are fitted to the H200's measured rates (gpu-limits-h200.json, gen-limits-h200.json):

- a forward with images (a prompt): `call_s` + `image_s` per image + `prefill_token_s` per token of its padded
  rows (rows x length, the image tokens included). `image_s` is the ViT-L/14@336 tower's time per image;
  `call_s` and the time per prompt are a line through the letter forwards at batch 1, 16 and 64 (576 image +
  64 text tokens each), the rest of a prompt's time spread over its 640 tokens;
- a forward without images (a ranking prefix's continuations): `call_s` + `continuation_token_s` per token
  of its rows (packed or one per option, padding included): 50 candidates of 24 tokens after one prompt at
  the shared-prefix rate, less that prompt's forward;
- `generate`: the prompt's forward, then `step_s` + `step_row_s` per row for every decoding step: least
  squares over the six batched generations (16 and 128 new tokens at batch 1, 16, 64) less their prompts;
- CLIP: the tower's time per image at batch 256.

A decoding step of a 7B model is hundreds of kernel launches, each a round trip through Python and torch's
dispatcher on the launching thread; a thread preparing the next batch meanwhile takes the GIL from it. The
launch share of a call is the host time of its launches on the H200's host over the call's time (at most 1):
the host time of one forward and of one decoding step is measured here on a LLaVA of the same depth (24
vision and 32 language layers) at tiny widths, where the launches are nearly all the time, and scaled to the
H200's host by the two hosts' JPEG decode + resize per core (the one figure measured on both).
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import numpy as np

# the letter forwards' prompt: LLaVA-1.5's 576 image tokens and 64 text tokens
LETTER_PROMPT_TOKENS = 576 + 64
# the shared-prefix ranking measurement: one prompt of 576 + 8 tokens, 50 candidates of 24 tokens
RANK_PREFIX_TOKENS, RANK_CANDIDATES, RANK_TOKENS = 576 + 8, 50, 24
# a decoding step's floor on the H200: LLaMA-2-7B's 6.74 B bf16 weights and 32 layers' keys and values (4096
# wide, bf16) per token of context, read at the HBM3e's 4.8 TB/s
LM_WEIGHT_BYTES, KV_BYTES_PER_TOKEN, HBM_BYTES_PER_S = 6.74e9 * 2, 32 * 2 * 4096 * 2, 4.8e12


@dataclass(frozen=True)
class DeviceCost:
    """Seconds of the H200 per unit of work (the module's doc says how each is fitted)."""

    clip_image_s: dict  # tower key -> s per image
    call_s: float
    image_s: float
    prefill_token_s: float
    continuation_token_s: float
    step_s: float
    step_row_s: float
    residuals: dict  # measurement -> fitted s / measured s

    def prompt(self, rows: int, length: int, images: int) -> float:
        return self.call_s + images * self.image_s + rows * length * self.prefill_token_s

    def continuation(self, rows: int, length: int) -> float:
        return self.call_s + rows * length * self.continuation_token_s

    def step(self, rows: int) -> float:
        return self.step_s + rows * self.step_row_s

    def unbound_step_share(self, rows: int, context: int) -> float:
        """The share of a decoding step beyond the device's floor (reading the language model's weights and
        the rows' KV cache from memory once): what a step whose launches bound it spends launching."""
        floor = (LM_WEIGHT_BYTES + rows * context * KV_BYTES_PER_TOKEN) / HBM_BYTES_PER_S
        return max(0.0, 1 - floor / self.step(rows))


def fit_cost(limits: dict, generation: dict, clip_keys) -> DeviceCost:
    """The costs fitted to the measurement files' contents (KeyError where one is missing)."""
    letters = {
        int(key.split("bs")[1]): value["samples_per_s"]
        for key, value in limits["llava"].items()
        if key.startswith("forward_letter")
    }
    sizes = sorted(letters)
    seconds = np.array([size / letters[size] for size in sizes])
    (call_s, per_prompt), *_ = np.linalg.lstsq(np.c_[np.ones(len(sizes)), sizes], seconds, rcond=None)
    image_s = 1 / limits["clip"]["ViT-L-14@336 bs256"]["img_per_s"]
    token_s = (per_prompt - image_s) / LETTER_PROMPT_TOKENS

    def prompt(rows: int, length: int) -> float:
        return call_s + rows * image_s + rows * length * token_s

    runs = []
    for key, value in generation.items():
        if key.startswith("generate"):
            new, batch = (int(part) for part in key.removeprefix("generate").split(" bs"))
            runs.append((key, new, batch, batch / value["samples_per_s"]))
    if not runs:
        raise KeyError("generate<new tokens> bs<batch>")
    design = np.array([[new, new * batch] for _, new, batch, _ in runs], dtype=float)
    decoding = np.array([s - prompt(batch, LETTER_PROMPT_TOKENS) for _, _, batch, s in runs])
    (step_s, step_row_s), *_ = np.linalg.lstsq(design, decoding, rcond=None)
    rank_s = 1 / limits["rank50"]["shared_prefix_images_per_s"]
    continuation_token_s = (rank_s - prompt(1, RANK_PREFIX_TOKENS) - call_s) / (RANK_CANDIDATES * RANK_TOKENS)
    cost = DeviceCost(
        clip_image_s={key: 1 / limits["clip"][f"{key} bs256"]["img_per_s"] for key in clip_keys},
        call_s=float(call_s),
        image_s=image_s,
        prefill_token_s=float(token_s),
        continuation_token_s=float(continuation_token_s),
        step_s=float(step_s),
        step_row_s=float(step_row_s),
        residuals={},
    )
    residuals = {
        f"letters bs{size}": cost.prompt(size, LETTER_PROMPT_TOKENS, size) / s
        for size, s in zip(sizes, seconds)
    }
    for key, new, batch, s in runs:
        residuals[key] = (cost.prompt(batch, LETTER_PROMPT_TOKENS, batch) + new * cost.step(batch)) / s
    naive = limits["rank50"].get("naive_images_per_s")
    if naive:  # not fitted: 50 full forwards of prompt + candidate, one batch
        rows, length = RANK_CANDIDATES, RANK_PREFIX_TOKENS + RANK_TOKENS
        residuals["rank50 naive"] = cost.prompt(rows, length, rows) * naive
    return DeviceCost(**{**cost.__dict__, "residuals": residuals})


# --- the launching thread --------------------------------------------------------------------------------


class Launcher:
    """The GIL-holding part of a stand-in's call: tiny torch operations, each a round trip through the
    dispatcher as a kernel launch is, until this thread has spent the call's launch seconds of CPU. A thread
    that holds the GIL meanwhile stops the clock of this one's CPU time, not its wall clock: the launches take
    longer, as a real launching thread's do."""

    CHUNK = 50  # operations between two looks at the thread's CPU clock

    def __init__(self) -> None:
        import torch

        self._tensor = torch.zeros(1)

    def run_ops(self, count: int) -> None:
        tensor = self._tensor
        for _ in range(count):
            tensor.add_(1)

    def hold(self, seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            self.run_ops(self.CHUNK)


# LLaVA-1.5-7B's transformer layers: its launches are measured on a model of this depth, and a simulated
# forward holds each part's share
LLAVA_LAYERS = {"vision": 24, "language": 32}


@dataclass(frozen=True)
class LaunchTimes:
    """Host seconds of the launches of one prompt's forward and one decoding step, measured here on a model of
    LLaVA-1.5-7B's depth at tiny widths, and this host's JPEG decode + resize per core per s (the H200's
    host's measure, measured here)."""

    forward_s: float
    step_s: float
    decode_per_core: float


def measure_launch_times(repeats: int = 3) -> LaunchTimes:
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LLAVA_LAYERS["vision"],
        num_attention_heads=2,
        patch_size=14,
        image_size=28,
    )
    text = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LLAVA_LAYERS["language"],
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=256,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=500,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        image_seq_length=4,
    )
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    ids = torch.randint(3, 400, (1, 24))
    ids[0, 1:5] = 500
    inputs = {"input_ids": ids, "pixel_values": torch.zeros(1, 3, 28, 28)}

    def best(fn) -> float:
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times[1:])

    with torch.inference_mode():
        forward = best(lambda: model(**inputs, use_cache=False))

        def generate(new: int):
            return lambda: model.generate(
                **inputs, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0
            )

        short, long = best(generate(2)), best(generate(18))
    return LaunchTimes(forward_s=forward, step_s=(long - short) / 16, decode_per_core=bare_jpeg_per_core())


def bare_jpeg_per_core(n: int = 200) -> float:
    """The H200 host's `jpeg_decode_resize_per_core_per_s`, the same code on this host: a 500x375 photo-like
    JPEG decoded and resized to 336 (bicubic), one after another."""
    from PIL import Image

    array = (np.random.default_rng(0).random((375, 500, 3)) * 255).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG", quality=90)
    data = buffer.getvalue()
    Image.open(io.BytesIO(data)).convert("RGB").resize((336, 336), Image.BICUBIC)
    start = time.perf_counter()
    for _ in range(n):
        Image.open(io.BytesIO(data)).convert("RGB").resize((336, 336), Image.BICUBIC)
    return n / (time.perf_counter() - start)
