"""Speed of vlmgrid's own inference path, end to end from files on disk, next to the raw ceilings measured in the same run.

    python perf/speed.py --out perf/results/speed-cpu-small.md               # CPU: small shapes
    python perf/speed.py --shapes real --out perf/results/speed-h200.md      # one GPU: real shapes, bf16
    python perf/speed.py --only dag --workflow --out ...                           # the CPU side alone
    python perf/speed.py --render perf/results/speed-cpu-small.json          # the table again, from saved figures
    python perf/speed.py --shapes real --depth 1 --device cpu --out ...      # the real-shape path at one layer

Every model is random-initialised at the chosen shapes, saved to a temporary folder and loaded the way the grid
loads it (open_clip's `local-dir:` path, transformers' `from_pretrained`); every benchmark is a folder of JPEG
files with its records, run through the protocol's own runner in parts of `--part-size` model requests, as
`vlmgrid infer` runs it. `--shapes real` (the default on CUDA) is ViT-B/32@224 and ViT-L/14@336 CLIP, and LLaVA-1.5-7B's
shape in bf16; `--shapes small` (the default on the CPU) is tiny shapes that run in a few minutes, whose figures
say nothing about a GPU. `--depth N` keeps the shapes' widths but gives every tower and the language model N
layers: the real-shape path at a size the CPU runs (tests/test_speed.py runs it at one layer), so that a short
GPU run is not spent on a crash.

Sections (`--only`, comma-separated; all but `workflow` by default):
- clip: zero-shot classification from JPEG files in ImageNet's folder layout, for each tower, decoding them and
  then again from the pixel cache that pass filled; next to the tower alone on tensors already on the device
  (the ceiling) and to opening each image in the main process;
- choice: multiple choice by the options' letter log-likelihood (ScienceQA-style items); next to a bare batched
  forward of the same inputs (the ceiling) and to the per-sample `generate` loop (16 new tokens);
- generate: short answers (TextVQA-style, 16 new tokens), next to transformers' own batched `generate` of the
  same inputs at the same batch size;
- rank: DANCE picture -> 50 riddles, next to 50 full forwards of picture + riddle;
- dag: `snakemake -n` of the largest grid (every catalog model x every benchmark of the shipped configs);
- workflow (also `--workflow`): the default grid cold (`snakemake --cores 2` in a fresh copy) and with nothing to do.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # perf/'s own modules, when loaded by path too
from gridrun import REPO, render_saved, save_results, snakemake, workflow_copy  # noqa: E402

SECTIONS = ("clip", "choice", "generate", "rank", "dag", "workflow")
GRID_CONFIGS = ("config.yaml", "carpe.yaml", "kaleidoscope.yaml", "cvqa.yaml", "dance.yaml")
PHOTO_SIZE = (500, 375)  # ImageNet's typical picture
NEW_TOKENS = 16
CANDIDATES = 50  # DANCE ranks 50 riddles for each picture

# The shapes: CLIP towers by role (the goals name the roles), the LLaVA model, counts and batch sizes.
SHAPES = {
    "real": {
        "clip": {
            "large": ("ViT-L/14@336", "ViT-L-14-336"),
            "base": ("ViT-B/32@224", "ViT-B-32"),
        },
        # batches of 64: within a part of 256 items the next batches decode while the model runs this one
        "clip_images": 4096, "clip_batch": 64, "precision": "bf16",
        "vision": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                   "num_attention_heads": 16, "patch_size": 14, "image_size": 336, "projection_dim": 768},
        "text": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096},
        "vocab": 32064, "choice_items": 512, "lm_batch": 64, "rank_queries": 8,
    },
    "small": {
        "clip": {
            "large": ("tiny ViT/8@64", {"embed_dim": 64, "vision_cfg": {"image_size": 64, "layers": 4, "width": 128,
                                                                         "patch_size": 8, "head_width": 32},
                                        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64,
                                                     "heads": 2, "layers": 2}}),
            "base": ("tiny ViT/16@64", {"embed_dim": 64, "vision_cfg": {"image_size": 64, "layers": 2, "width": 64,
                                                                         "patch_size": 16, "head_width": 32},
                                        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64,
                                                     "heads": 2, "layers": 2}}),
        },
        "clip_images": 512, "clip_batch": 64, "precision": "fp32",
        "vision": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "patch_size": 14, "image_size": 224, "projection_dim": 64},
        # the fixture tokenizer's own vocabulary: a 32k one would make the output layer most of a tiny model
        "text": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
                 "num_key_value_heads": 4, "max_position_embeddings": 2048},
        "vocab": None, "choice_items": 64, "lm_batch": 16, "rank_queries": 4,
    },
}


def at_depth(shape: dict, depth: int) -> dict:
    """The shapes with `depth` transformer layers in every CLIP tower and in LLaVA's vision tower and language
    model, everything else (widths, heads, vocabularies, image and patch sizes, projector) as they are: the same
    path at the same widths, small enough for a test on the CPU."""
    import open_clip

    def clip_cfg(arch) -> dict:
        cfg = copy.deepcopy(open_clip.get_model_config(arch) if isinstance(arch, str) else arch)
        cfg["vision_cfg"]["layers"] = cfg["text_cfg"]["layers"] = depth
        return cfg

    return {**shape, "clip": {role: (label, clip_cfg(arch)) for role, (label, arch) in shape["clip"].items()},
            "vision": {**shape["vision"], "num_hidden_layers": depth},
            "text": {**shape["text"], "num_hidden_layers": depth}}


@dataclass(frozen=True)
class Goal:
    """What a figure must reach: `ratio` (our figure over its reference) or `value` at least `minimum`, or
    `value` under `maximum`. Only `cpu_side` goals are judged with small shapes: the others are about real
    model sizes on a GPU."""

    figure: str
    measure: str  # "ratio" or "value"
    minimum: float | None = None
    maximum: float | None = None
    cpu_side: bool = False
    text: str = ""


GOALS = (
    Goal("clip large", "ratio", minimum=0.9, text=">= 0.9x the image tower"),
    Goal("clip base", "value", minimum=8000, text=">= 8,000 img/s"),
    Goal("clip base cached", "value", minimum=8000, text=">= 8,000 img/s"),
    Goal("generate", "ratio", minimum=0.9, text=">= 0.9x batched generate"),
    Goal("choice", "ratio", minimum=0.85, text=">= 0.85x batched forward"),
    Goal("choice vs per-sample generate", "ratio", minimum=15, text=">= 15x per-sample generate"),
    Goal("rank", "ratio", minimum=7, text=">= 7x 50 full forwards"),
    Goal("dag", "value", maximum=10, cpu_side=True, text="< 10 s"),
)


def verdict(goal: Goal | None, row: dict, shapes: str) -> str:
    """"met", "missed", "n/a (...)" or "" (no goal) for one result row."""
    if goal is None:
        return ""
    if not goal.cpu_side and shapes != "real":
        return f"n/a ({shapes} shapes)"
    measured = row.get(goal.measure)
    if measured is None:
        return "n/a (not measured)"
    if goal.minimum is not None and measured < goal.minimum:
        return "missed"
    if goal.maximum is not None and measured >= goal.maximum:
        return "missed"
    return "met"


def result_row(figure: str, label: str, unit: str, value: float, reference: float | None = None,
               reference_label: str = "") -> dict:
    """One line of the results: our figure, the reference measured beside it and their ratio."""
    ratio = value / reference if reference else None
    return {"figure": figure, "label": label, "unit": unit, "value": value, "reference": reference,
            "reference_label": reference_label, "ratio": ratio}


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


# Above the table, what its figures can say, by shapes; any shapes not named here are at a reduced depth.
CAVEATS = {
    "real": [],
    "small": ["**CPU, small shapes.** Tiny random models on the CPU: these figures check that every path runs and ",
              "show ratios between paths on this machine; they say nothing about a GPU or about real model sizes."],
}
REDUCED_DEPTH = ["**Reduced depth.** The shapes' widths with fewer layers in every tower and in the language model: "
                 "these figures check that the path of these shapes runs; they say nothing about its speed."]


def shapes_label(shapes: str, depth: int | None) -> str:
    return shapes if depth is None else f"depth-{depth} {shapes}"


def render_markdown(meta: dict, rows: list[dict]) -> str:
    goals = {goal.figure: goal for goal in GOALS}
    lines = [f"# vlmgrid speed: {meta['device']}, {meta['shapes']} shapes", ""]
    caveat = CAVEATS.get(meta["shapes"], REDUCED_DEPTH)
    if caveat:
        lines += [*caveat, ""]
    lines += [f"- {key}: {meta[key]}" for key in ("date", "device", "shapes", "precision", "cpus", "libraries", "command")]
    lines += ["", "| figure | vlmgrid | unit | reference (same run) | reference | ratio | goal | verdict |",
              "|---|---:|---|---|---:|---:|---|---|"]
    for row in rows:
        goal = goals.get(row["figure"])
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        lines.append(f"| {row['label']} | {_number(row['value'])} | {row['unit']} | {row['reference_label']} | "
                     f"{_number(row['reference'])} | {ratio} | {goal.text if goal else ''} | "
                     f"{verdict(goal, row, meta['shapes'])} |")
    notes = meta.get("notes") or []
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def largest_grid(repo: Path = REPO) -> dict:
    """A grid config of every catalog model x every benchmark of the shipped grid configs."""
    import yaml

    config = yaml.safe_load((repo / "config" / "carpe.yaml").read_text(encoding="utf-8"))
    benchmarks: dict = {}
    for name in GRID_CONFIGS:
        benchmarks.update(yaml.safe_load((repo / "config" / name).read_text(encoding="utf-8"))["benchmarks"])
    models = yaml.safe_load((repo / "config" / "models.yaml").read_text(encoding="utf-8"))["models"]
    config.update(benchmarks=benchmarks, models=models, results_dir="results/largest",
                  grid={"models": list(models), "benchmarks": list(benchmarks)})
    return config


# --- helpers ---------------------------------------------------------------------------------------------

def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str, repeats: int = 1, warmup: int = 1) -> float:
    """Seconds per call after `warmup` calls."""
    for _ in range(warmup):
        fn()
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / repeats


def warm_up(runner, records) -> None:
    """One untimed call of a runner before the timed ones (kernels chosen, caches filled, memory allocated)."""
    runner(records)


def infer_parts(bench, settings: dict, part_size: int) -> list:
    """The benchmark's records cut into the parts `vlmgrid infer` cuts them into: at most part_size model
    requests each (vlmgrid.stages.jobs.part_bounds)."""
    from vlmgrid.stages.cost import item_requests
    from vlmgrid.stages.jobs import part_bounds

    bounds = part_bounds(item_requests(bench, settings), part_size)
    return [bench.records.iloc[start:stop] for start, stop in zip(bounds, bounds[1:])]


def in_parts(runner, parts: list) -> list[dict]:
    """The runner over the parts, one call each, as `vlmgrid infer` calls it."""
    return [row for part in parts for row in runner(part)]


def write_photos(folder: Path, names: list[str], seed: int = 0) -> None:
    """Photo-like JPEGs (smooth content plus noise, quality 90) of ImageNet's typical size at the given names."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    width, height = PHOTO_SIZE
    for name in names:
        small = Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).resize((width, height),
                                                                                            Image.BICUBIC)
        noisy = np.asarray(small).astype(np.int16) + rng.integers(-12, 12, (height, width, 3))
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(path, quality=90)


def _benchmark(kind: str, root: Path, records, classes=None):
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.benchmarks.dataset import Benchmark

    return Benchmark(name=f"speed-{kind}", kind=BENCHMARKS.get(kind), root=root, records=records, classes=classes,
                     manifest={})


# --- CLIP ------------------------------------------------------------------------------------------------

def clip_section(shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import pandas as pd

    n, n_classes = shape["clip_images"], 10
    synsets = [f"n{1440764 + k:08d}" for k in range(n_classes)]
    names = [f"images/{synsets[i % n_classes]}/ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(n)]
    bench_dir = work / "imagenet"
    write_photos(bench_dir, names)
    records = pd.DataFrame({"id": [f"val-{i}" for i in range(n)], "image": names, "question": "",
                            "options": [[] for _ in names], "answer": "", "answer_index": [i % n_classes for i in range(n)]})
    bench = _benchmark("imagenet", bench_dir, records, [f"class {k}" for k in range(n_classes)])
    rows = []
    for role, (label, arch) in shape["clip"].items():
        rows += _clip_tower(role, label, arch, shape, device, work, bench, part_size)
    return rows


def _clip_tower(role: str, label: str, arch, shape: dict, device: str, work: Path, bench, part_size: int) -> list[dict]:
    import open_clip
    import torch

    from vlmgrid.cache import cache_root
    from vlmgrid.models import BACKENDS
    from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip
    from vlmgrid.pixel_cache import PIXELS_DIR
    from vlmgrid.protocols.classification import embed_strategy

    n = len(bench.records)
    model_cfg = open_clip.get_model_config(arch) if isinstance(arch, str) else arch
    model_dir = work / f"clip-{role}"
    model_dir.mkdir()
    write_tiny_open_clip(model_dir, seed=0, model_cfg=model_cfg)
    settings = {"backend": "open_clip", "source": {"type": "fixture"}, "batch_size": shape["clip_batch"],
                "precision": shape["precision"]}
    model = BACKENDS.get("open_clip").load(settings, model_dir, device)
    runner = embed_strategy(model, bench)  # the zero-shot classifier is built here, before the clock starts
    parts = infer_parts(bench, settings, part_size)
    size = model_cfg["vision_cfg"]["image_size"]

    pixels = torch.randn(shape["clip_batch"], 3, size, size, device=device, dtype=model.dtype)
    with torch.inference_mode():
        tower = timed(lambda: model.model.encode_image(pixels, normalize=True), device, repeats=3)
    # the first pass decodes the JPEGs (and fills the pixel cache), the second reads that cache: start cold,
    # whatever an earlier tower of the same image size left there
    shutil.rmtree(cache_root() / PIXELS_DIR, ignore_errors=True)
    ours = timed(lambda: in_parts(runner, parts), device, warmup=0)
    cached = timed(lambda: in_parts(runner, parts), device, warmup=0)

    class Opened:
        """The same model without `embed_image_files`: the protocol opens every image in the main process."""

        embed_images, embed_texts, identity = model.embed_images, model.embed_texts, model.identity

    plain_runner = embed_strategy(Opened(), bench)
    plain = timed(lambda: in_parts(plain_runner, parts), device, warmup=0)
    tower_rate = shape["clip_batch"] / tower
    return [
        result_row(f"clip {role}", f"CLIP {label}: classification from JPEG files", "img/s", n / ours,
                   tower_rate, "image tower on device tensors"),
        result_row(f"clip {role} cached", f"CLIP {label}: the same files again, from the pixel cache", "img/s",
                   n / cached, tower_rate, "image tower on device tensors"),
        result_row(f"clip {role} plain", f"CLIP {label}: images opened one by one in the main process",
                   "img/s", n / plain, tower_rate, "image tower on device tensors"),
    ]


# --- LLaVA -----------------------------------------------------------------------------------------------

def write_llava(shape: dict, device: str, out_dir: Path) -> Path:
    """A LLaVA-1.5 checkpoint of the given shape (random weights) with the fixture's tokenizer, via save_pretrained."""
    import torch
    from transformers import (AutoModelForImageTextToText, CLIPImageProcessor, CLIPVisionConfig, LlamaConfig,
                              LlavaConfig, LlavaProcessor)

    from vlmgrid.fixtures.models.tiny_hf import write_tiny_checkpoint

    write_tiny_checkpoint("llava", out_dir, seed=0)
    tiny = LlavaConfig.from_pretrained(out_dir)
    vision = CLIPVisionConfig(**shape["vision"])
    text = LlamaConfig(**shape["text"], vocab_size=shape["vocab"] or tiny.text_config.vocab_size, bos_token_id=tiny.text_config.bos_token_id,
                       eos_token_id=tiny.text_config.eos_token_id, pad_token_id=tiny.text_config.pad_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tiny.image_token_id,
                         vision_feature_layer=-2, vision_feature_select_strategy="default",
                         projector_hidden_act="gelu", image_seq_length=(vision.image_size // vision.patch_size) ** 2)
    dtype = torch.bfloat16 if shape["precision"] == "bf16" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype).eval()
        with torch.no_grad():
            for parameter in model.parameters():  # a small init keeps random logits finite
                parameter.normal_(0, 0.02)
    model.save_pretrained(out_dir)
    del model
    old = LlavaProcessor.from_pretrained(out_dir)
    size = vision.image_size
    LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": size},
                                                      crop_size={"height": size, "width": size}),
                   tokenizer=old.tokenizer, patch_size=vision.patch_size, vision_feature_select_strategy="default",
                   num_additional_image_tokens=1, chat_template=old.chat_template).save_pretrained(out_dir)
    if device == "cuda":
        torch.cuda.empty_cache()
    return out_dir


def load_llava(shape: dict, device: str, model_dir: Path, batch_size: int):
    from vlmgrid.models.hf_backend import Hf

    settings = {"backend": "hf", "source": {"type": "fixture", "family": "llava"}, "batch_size": batch_size,
                "precision": shape["precision"], "generation": {"max_new_tokens": NEW_TOKENS}}
    backend = Hf.load(settings, model_dir, device)
    # every sample generates exactly NEW_TOKENS tokens, in our path and in the bare calls alike
    backend.model.generation_config.min_new_tokens = NEW_TOKENS
    backend.model.generation_config.max_new_tokens = NEW_TOKENS
    return backend


QUESTIONS = ("Which of the one is in the picture ?", "What is the small animal in the image ?",
             "How many red car are there in the photo ?", "Which option is the man on the left ?")
OPTIONS = (["cat", "dog", "bird", "tree"], ["red", "green", "blue", "black"], ["one", "two", "three", "four"])


def _item_records(n: int, folder: Path, prefix: str):
    import pandas as pd

    names = [f"images/{prefix}-{i:06d}.jpg" for i in range(n)]
    write_photos(folder, names, seed=1)
    return pd.DataFrame({"id": [f"{prefix}-{i}" for i in range(n)], "image": names,
                         "question": [QUESTIONS[i % len(QUESTIONS)] for i in range(n)],
                         "options": [OPTIONS[i % len(OPTIONS)] for i in range(n)], "answer": "",
                         "answer_index": 0, "hint": ["Look at the picture ." if i % 2 else "" for i in range(n)]})


def choice_section(backend, shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import torch

    from vlmgrid.models.base import GenerateRequest, OptionRequest
    from vlmgrid.protocols.choice import LETTERS, multiple_choice_option_strategy, multiple_choice_prompt, _context
    from vlmgrid.images import open_rgb

    n, bs = shape["choice_items"], shape["lm_batch"]
    folder = work / "scienceqa"
    records = _item_records(n, folder, "choice")
    bench = _benchmark("scienceqa_img", folder, records)
    runner = multiple_choice_option_strategy(backend, bench)
    parts = infer_parts(bench, backend.settings, part_size)
    warm_up(runner, records.iloc[:bs])
    ours = timed(lambda: in_parts(runner, parts), device, warmup=0)

    def request(i):
        options = list(records["options"].iloc[i])
        return OptionRequest(records["id"].iloc[i], open_rgb(folder / records["image"].iloc[i]),
                             multiple_choice_prompt(records["question"].iloc[i], options, _context(records, i)),
                             options, tuple(LETTERS[:len(options)]))

    batch = backend._cast(backend._encode([request(i) for i in range(bs)]))
    with torch.inference_mode():
        bare = timed(lambda: backend.model(**batch, logits_to_keep=1), device, repeats=3)
        one = backend._cast(backend._encode([GenerateRequest("g", request(0).image, request(0).prompt)]))
        per_sample = timed(lambda: backend.model.generate(**one, do_sample=False), device, repeats=2)
    return [
        result_row("choice", f"multiple choice by letter log-likelihood, batch {bs}", "samples/s", n / ours,
                   bs / bare, f"bare batched forward, batch {bs}"),
        result_row("choice vs per-sample generate", "multiple choice by letter log-likelihood", "samples/s",
                   n / ours, 1 / per_sample, f"per-sample generate, {NEW_TOKENS} tokens"),
    ]


def generate_section(backend, shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import torch

    from vlmgrid.images import open_rgb
    from vlmgrid.models.base import GenerateRequest
    from vlmgrid.protocols.short_answer import generate_strategy, short_answer_prompt

    bs = shape["lm_batch"]
    n = 2 * bs
    folder = work / "textvqa"
    records = _item_records(n, folder, "vqa")
    bench = _benchmark("textvqa", folder, records)
    runner = generate_strategy(backend, bench)
    parts = infer_parts(bench, backend.settings, part_size)
    warm_up(runner, records.iloc[:2])
    ours = timed(lambda: in_parts(runner, parts), device, warmup=0)
    requests = [GenerateRequest(records["id"].iloc[i], open_rgb(folder / records["image"].iloc[i]),
                                short_answer_prompt(records["question"].iloc[i])) for i in range(bs)]
    batch = backend._cast(backend._encode(requests))
    with torch.inference_mode():
        bare = timed(lambda: backend.model.generate(**batch, do_sample=False), device, repeats=1)
    return [result_row("generate", f"short answers, {NEW_TOKENS} new tokens, batch {bs}", "samples/s", n / ours,
                       bs / bare, f"transformers generate, batch {bs}")]


RIDDLE_WORDS = ("this is used for cutting bread a red small animal with fur that you can find in the house or "
                "on a tree and it is green blue black white large left right").split()


def rank_section(backend, shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import numpy as np
    import pandas as pd
    import torch

    from vlmgrid.images import open_rgb
    from vlmgrid.models.base import OptionRequest
    from vlmgrid.protocols.ranking import likelihood_strategy, ranking_prompt

    n, k = shape["rank_queries"], CANDIDATES
    folder = work / "dance"
    names = [f"images/entity-{i:04d}.jpg" for i in range(n)]
    write_photos(folder, names, seed=2)
    rng = np.random.default_rng(0)
    riddles = [[" ".join(rng.choice(RIDDLE_WORDS, 20)) + " ." for _ in range(k)] for _ in range(n)]
    records = pd.DataFrame({"id": [f"q{i}" for i in range(n)], "image": names, "question": "",
                            "options": riddles, "answer": "", "answer_index": 0,
                            "direction": "image-to-riddle", "split": "test-seen"})
    bench = _benchmark("dance", folder, records)
    runner = likelihood_strategy(backend, bench)
    parts = infer_parts(bench, backend.settings, part_size)
    warm_up(runner, records.iloc[:1])
    ours = timed(lambda: in_parts(runner, parts), device, warmup=0)

    # 50 full forwards: picture + prompt + riddle, each its own sequence, in batches as a plain evaluation does
    prompt = ranking_prompt()
    picture = open_rgb(folder / names[0])
    full = [OptionRequest(f"r{j}", picture, prompt + " " + riddles[0][j], ["x"], ["A"]) for j in range(k)]

    def naive():
        for start in range(0, k, shape["lm_batch"]):
            batch = backend._cast(backend._encode(full[start:start + shape["lm_batch"]]))
            backend.model(**batch, use_cache=False)

    with torch.inference_mode():
        naive_s = timed(naive, device, repeats=1)
    return [result_row("rank", f"ranking {k} riddles per picture ({len(riddles[0][0].split())} words each)",
                       "pictures/s", n / ours, 1 / naive_s, f"{k} full forwards")]


# --- CPU side --------------------------------------------------------------------------------------------

def dag_section(work: Path) -> list[dict]:
    import yaml

    root = workflow_copy(work / "dag")
    config = largest_grid(REPO)
    (root / "config" / "largest.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    cells = len(config["grid"]["models"]) * len(config["grid"]["benchmarks"])
    seconds = snakemake(["-n", "--quiet", "--configfile", "config/largest.yaml"], root).wall_s
    return [result_row("dag", f"`snakemake -n`, largest grid ({len(config['grid']['models'])} models x "
                              f"{len(config['grid']['benchmarks'])} benchmarks = {cells} cells)", "s", seconds)]


def workflow_section(work: Path) -> list[dict]:
    root = workflow_copy(work / "grid")
    cold = snakemake(["--cores", "2"], root).wall_s
    noop = snakemake(["--cores", "2"], root).wall_s
    return [result_row("workflow cold", "default grid, cold (`snakemake --cores 2`)", "s", cold),
            result_row("workflow no-op", "default grid, nothing to do", "s", noop)]


# --- main ------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--shapes", choices=["real", "small"], help="default: real on CUDA, small on the CPU")
    parser.add_argument("--only", default=",".join(s for s in SECTIONS if s != "workflow"),
                        help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument("--workflow", action="store_true", help="add the default grid's cold and no-op runs")
    parser.add_argument("--depth", type=int, help="layers in every tower and in the language model, the widths kept "
                                                  "(default: the shapes' own; a test runs the real shapes at 1)")
    parser.add_argument("--part-size", type=int, default=1024,
                        help="model requests per runner call at most, as infer.part_size (its default)")
    parser.add_argument("--out", help="write the results here (Markdown; the same name with .json beside it)")
    parser.add_argument("--render", metavar="JSON", help="measure nothing: write the Markdown of a results JSON")
    args = parser.parse_args(argv)
    if args.render:
        return render_saved(args.render, args.out, lambda results: render_markdown(results["meta"], results["rows"]))
    sections = [s.strip() for s in args.only.split(",") if s.strip()] + (["workflow"] if args.workflow else [])
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section {unknown[0]!r}; the sections are {', '.join(SECTIONS)}")
    if args.depth is not None and args.depth < 1:
        parser.error(f"--depth {args.depth}: a model needs at least one layer")

    import torch
    import transformers
    import open_clip

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    shapes = args.shapes or ("real" if device == "cuda" else "small")
    shape = SHAPES[shapes] if args.depth is None else at_depth(SHAPES[shapes], args.depth)
    work = Path(tempfile.mkdtemp(prefix="vlmgrid-speed-"))
    # a stopped run still removes its models and pictures (several GB with real shapes)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["VLMGRID_CACHE_DIR"] = str(work / "cache")  # classifier weights start cold, and stay out of ~/.cache
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    rows: list[dict] = []
    try:
        if "clip" in sections:
            clip_rows = clip_section(shape, device, work / "clip", args.part_size)
            rows += clip_rows
            print(json.dumps(clip_rows, indent=1), flush=True)
        lm_sections = [s for s in ("choice", "generate", "rank") if s in sections]
        if lm_sections:
            model_dir = write_llava(shape, device, work / "llava")
            backend = load_llava(shape, device, model_dir, shape["lm_batch"])
            for name in lm_sections:
                section = {"choice": choice_section, "generate": generate_section, "rank": rank_section}[name]
                rows += section(backend, shape, device, work / name, args.part_size)
                print(json.dumps(rows[-1], indent=1), flush=True)
            del backend
        if "dag" in sections:
            rows += dag_section(work)
        if "workflow" in sections:
            rows += workflow_section(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": torch.cuda.get_device_name() if device == "cuda" else f"CPU ({platform.processor() or platform.machine()})",
        "shapes": shapes_label(shapes, args.depth),
        "precision": shape["precision"] if device == "cuda" else "fp32 (the CPU always runs fp32)",
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "libraries": f"torch {torch.__version__}, transformers {transformers.__version__}, "
                     f"open_clip {open_clip.__version__}, python {platform.python_version()}",
        "command": "python perf/speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seconds": round(time.perf_counter() - started, 1),
        "part_size": args.part_size,
    }
    meta["notes"] = [f"runners called in parts of at most {args.part_size} model requests, cut as `vlmgrid infer` "
                     f"cuts them; the whole run "
                     f"took {meta['seconds']} s",
                     f"load average (1 min) at the start {load_before:.1f}, at the end {os.getloadavg()[0]:.1f}, "
                     f"on {meta['cpus']} CPUs: a load above the CPU count means other work shared them"]
    text = render_markdown(meta, rows)
    print(text)
    if args.out:
        save_results(args.out, text, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
