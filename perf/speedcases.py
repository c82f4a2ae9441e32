"""perf/speed.py's measurements: the shapes, the models written and loaded as the grid loads them, the
benchmark folders of JPEG files, and one function per section that runs vlmgrid's runner and its reference."""

from __future__ import annotations

import copy
import shutil
import time
from pathlib import Path

from speedfolders import RIDDLE_TOKENS, dance_folder, folder_benchmark, imagenet_folder, item_records
from speedhost import cpu_seconds
from speedreport import result_row

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
        "clip_images": 4096,
        "clip_batch": 64,
        "precision": "bf16",
        "vision": {
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "patch_size": 14,
            "image_size": 336,
            "projection_dim": 768,
        },
        "text": {
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "max_position_embeddings": 4096,
        },
        "vocab": 32064,
        "choice_items": 512,
        "generate_items": 1024,  # a part of short answers, as `vlmgrid infer` cuts them
        "lm_batch": 64,
        "rank_queries": 8,
    },
    "small": {
        "clip": {
            "large": (
                "tiny ViT/8@64",
                {
                    "embed_dim": 64,
                    "vision_cfg": {
                        "image_size": 64,
                        "layers": 4,
                        "width": 128,
                        "patch_size": 8,
                        "head_width": 32,
                    },
                    "text_cfg": {
                        "context_length": 77,
                        "vocab_size": 49408,
                        "width": 64,
                        "heads": 2,
                        "layers": 2,
                    },
                },
            ),
            "base": (
                "tiny ViT/16@64",
                {
                    "embed_dim": 64,
                    "vision_cfg": {
                        "image_size": 64,
                        "layers": 2,
                        "width": 64,
                        "patch_size": 16,
                        "head_width": 32,
                    },
                    "text_cfg": {
                        "context_length": 77,
                        "vocab_size": 49408,
                        "width": 64,
                        "heads": 2,
                        "layers": 2,
                    },
                },
            ),
        },
        "clip_images": 512,
        "clip_batch": 64,
        "precision": "fp32",
        "vision": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "patch_size": 14,
            "image_size": 224,
            "projection_dim": 64,
        },
        # the fixture tokenizer's own vocabulary: a 32k one would make the output layer most of a tiny model
        "text": {
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "max_position_embeddings": 2048,
        },
        "vocab": None,
        "choice_items": 64,
        "generate_items": 32,
        "lm_batch": 16,
        "rank_queries": 4,
    },
}


def at_depth(shape: dict, depth: int) -> dict:
    """The shapes with `depth` transformer layers in every CLIP tower and in LLaVA's vision tower and language
    model, everything else (widths, heads, vocabularies, image and patch sizes, projector) as they are: the
    same path at the same widths, small enough for a test on the CPU."""
    import open_clip

    def clip_cfg(arch) -> dict:
        cfg = copy.deepcopy(open_clip.get_model_config(arch) if isinstance(arch, str) else arch)
        cfg["vision_cfg"]["layers"] = cfg["text_cfg"]["layers"] = depth
        return cfg

    return {
        **shape,
        "clip": {role: (label, clip_cfg(arch)) for role, (label, arch) in shape["clip"].items()},
        "vision": {**shape["vision"], "num_hidden_layers": depth},
        "text": {**shape["text"], "num_hidden_layers": depth},
    }


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


def on_host(fn, device: str) -> tuple[float, float]:
    """(seconds, host cores used: the CPU seconds of the process and of its worker processes over the wall
    seconds) of one call of vlmgrid's path."""
    _sync(device)
    wall, cpu = time.perf_counter(), cpu_seconds()
    fn()
    _sync(device)
    seconds = time.perf_counter() - wall
    return seconds, (cpu_seconds() - cpu) / seconds


def warm_up(runner, records) -> None:
    """One untimed call of a runner before the timed ones (kernels chosen, caches filled, memory
    allocated)."""
    runner(records)


def infer_parts(bench, settings: dict, part_size: int) -> list:
    """The benchmark's records cut into the parts `vlmgrid infer` cuts them into: at most part_size model
    requests each (vlmgrid.cellrun.job.part_bounds)."""
    from vlmgrid.cellrun.job import part_bounds
    from vlmgrid.stages.cost_work import item_requests

    bounds = part_bounds(item_requests(bench, settings), part_size)
    return [bench.records.iloc[start:stop] for start, stop in zip(bounds, bounds[1:])]


def in_parts(runner, parts: list) -> list[dict]:
    """The runner over the parts, one call each, as `vlmgrid infer` calls it."""
    return [row for part in parts for row in runner(part)]


# --- CLIP ------------------------------------------------------------------------------------------------


def clip_section(shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    bench = imagenet_folder(shape["clip_images"], work)
    rows = []
    for role, (label, arch) in shape["clip"].items():
        rows += _clip_tower(role, label, arch, shape, device, work, bench, part_size)
    return rows


def _clip_tower(
    role: str, label: str, arch, shape: dict, device: str, work: Path, bench, part_size: int
) -> list[dict]:
    import open_clip
    import torch

    from vlmgrid.cache import cache_root
    from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip
    from vlmgrid.models import BACKENDS
    from vlmgrid.models.clip_files import usable_cores
    from vlmgrid.pixel_cache import PIXELS_DIR
    from vlmgrid.protocols.classification import embed_strategy

    n = len(bench.records)
    model_cfg = open_clip.get_model_config(arch) if isinstance(arch, str) else arch
    model_dir = work / f"clip-{role}"
    model_dir.mkdir()
    write_tiny_open_clip(model_dir, seed=0, model_cfg=model_cfg)
    settings = {
        "backend": "open_clip",
        "source": {"type": "fixture"},
        "batch_size": shape["clip_batch"],
        "precision": shape["precision"],
    }
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
    ours, ours_cores = on_host(lambda: in_parts(runner, parts), device)
    cached, cached_cores = on_host(lambda: in_parts(runner, parts), device)

    class Opened:
        """The same model without `embed_image_files`: the protocol opens every image in the main process."""

        embed_images, embed_texts, identity = model.embed_images, model.embed_texts, model.identity

    plain_runner = embed_strategy(Opened(), bench)
    plain, plain_cores = on_host(lambda: in_parts(plain_runner, parts), device)
    classifier = torch.from_numpy(model.embed_texts([f"a photo of a {c}." for c in bench.classes]))
    paths = [bench.root / name for name in bench.records["image"]]
    workers = usable_cores()
    naive, naive_cores = on_host(lambda: naive_dataloader(model, paths, classifier, workers), device)
    tower_rate = shape["clip_batch"] / tower
    naive_label = f"naive DataLoader ({workers} workers, PIL + preprocessing in them)"
    rows = [
        result_row(
            f"clip {role}",
            f"CLIP {label}: classification from JPEG files",
            "img/s",
            n / ours,
            tower_rate,
            "image tower on device tensors",
            host_cores=ours_cores,
        ),
        result_row(
            f"clip {role} vs naive",
            f"CLIP {label}: classification from JPEG files",
            "img/s",
            n / ours,
            n / naive,
            naive_label,
            host_cores=ours_cores,
        ),
        result_row(
            f"clip {role} naive",
            f"CLIP {label}: {naive_label}, as CLIP_benchmark reads files",
            "img/s",
            n / naive,
            tower_rate,
            "image tower on device tensors",
            host_cores=naive_cores,
        ),
        result_row(
            f"clip {role} cached",
            f"CLIP {label}: the same files again, from the pixel cache",
            "img/s",
            n / cached,
            tower_rate,
            "image tower on device tensors",
            host_cores=cached_cores,
        ),
        result_row(
            f"clip {role} plain",
            f"CLIP {label}: images opened one by one in the main process",
            "img/s",
            n / plain,
            tower_rate,
            "image tower on device tensors",
            host_cores=plain_cores,
        ),
    ]
    if device != "cuda":  # the device path needs CUDA (elsewhere image_decode: device decodes on the host)
        return rows
    on_device = BACKENDS.get("open_clip").load({**settings, "image_decode": "device"}, model_dir, device)
    device_runner = embed_strategy(on_device, bench)
    decoded, decoded_cores = on_host(lambda: in_parts(device_runner, parts), device)
    return [
        *rows,
        result_row(
            f"clip {role} device",
            f"CLIP {label}: JPEG decoded and resized on the device (image_decode: device)",
            "img/s",
            n / decoded,
            tower_rate,
            "image tower on device tensors",
            host_cores=decoded_cores,
        ),
    ]


class PreprocessedFiles:
    """The naive reader's dataset: each file opened with PIL and put through the model's whole preprocessing
    in the worker (CLIP_benchmark's image folders with `transform=preprocess`)."""

    def __init__(self, paths: list, preprocess) -> None:
        self.paths, self.preprocess = paths, preprocess

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, k: int):
        from PIL import Image

        with Image.open(self.paths[k]) as image:
            return self.preprocess(image.convert("RGB"))


def naive_dataloader(model, paths: list, classifier, workers: int) -> list[int]:
    """Zero-shot top-1 of every file the way CLIP_benchmark reads them: one torch DataLoader over the whole
    set (the default start method, workers = the cores), the model's forward on each batch, the classifier's
    argmax."""
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(
        PreprocessedFiles(paths, model.preprocess),
        batch_size=int(model.settings["batch_size"]),
        num_workers=workers,
        pin_memory=model.device == "cuda",
    )
    classifier = classifier.to(model.device, model.dtype)
    top1 = []
    with torch.inference_mode():
        for images in loader:
            features = model.model.encode_image(images.to(model.device, model.dtype), normalize=True)
            top1 += (features @ classifier.T).argmax(dim=1).tolist()
    return top1


# --- LLaVA -----------------------------------------------------------------------------------------------


def write_llava(shape: dict, device: str, out_dir: Path) -> Path:
    """A LLaVA-1.5 checkpoint of the given shape (random weights) with the fixture's tokenizer, via
    save_pretrained."""
    import torch
    from transformers import AutoModelForImageTextToText, CLIPVisionConfig, LlamaConfig, LlavaConfig

    from vlmgrid.fixtures.models.tiny_hf import write_tiny_checkpoint

    write_tiny_checkpoint("llava", out_dir, seed=0)
    tiny = LlavaConfig.from_pretrained(out_dir)
    vision = CLIPVisionConfig(**shape["vision"])
    text = LlamaConfig(
        **shape["text"],
        vocab_size=shape["vocab"] or tiny.text_config.vocab_size,
        bos_token_id=tiny.text_config.bos_token_id,
        eos_token_id=tiny.text_config.eos_token_id,
        pad_token_id=tiny.text_config.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tiny.image_token_id,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        image_seq_length=(vision.image_size // vision.patch_size) ** 2,
    )
    dtype = torch.bfloat16 if shape["precision"] == "bf16" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype).eval()
        with torch.no_grad():
            for parameter in model.parameters():  # a small init keeps random logits finite
                parameter.normal_(0, 0.02)
    model.save_pretrained(out_dir)
    del model
    write_llava_processor(shape, out_dir)
    if device == "cuda":
        torch.cuda.empty_cache()
    return out_dir


def write_llava_processor(shape: dict, out_dir: Path) -> None:
    """The checkpoint's processor at the shape's image size and patch: LLaVA-1.5's CLIP image processing and
    its image tokens ((size / patch)^2 of them in every prompt), with the fixture's tokenizer and chat
    template."""
    from transformers import CLIPImageProcessor, LlavaProcessor

    old = LlavaProcessor.from_pretrained(out_dir)
    size, patch = shape["vision"]["image_size"], shape["vision"]["patch_size"]
    LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": size}, crop_size={"height": size, "width": size}
        ),
        tokenizer=old.tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=old.chat_template,
    ).save_pretrained(out_dir)


def load_llava(shape: dict, device: str, model_dir: Path, batch_size: int):
    from vlmgrid.models.hf_backend import Hf

    settings = {
        "backend": "hf",
        "source": {"type": "fixture", "family": "llava"},
        "batch_size": batch_size,
        "precision": shape["precision"],
        "generation": {"max_new_tokens": NEW_TOKENS},
    }
    backend = Hf.load(settings, model_dir, device)
    # every sample generates exactly NEW_TOKENS tokens, in our path and in the bare calls alike
    backend.model.generation_config.min_new_tokens = NEW_TOKENS
    backend.model.generation_config.max_new_tokens = NEW_TOKENS
    return backend


def choice_section(backend, shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import torch

    from vlmgrid.images import open_rgb
    from vlmgrid.model_requests import GenerateRequest, OptionRequest
    from vlmgrid.protocols.choice import (
        LETTERS,
        _context,
        multiple_choice_option_strategy,
        multiple_choice_prompt,
    )

    n, bs = shape["choice_items"], shape["lm_batch"]
    folder = work / "scienceqa"
    records = item_records(n, folder, "choice")
    bench = folder_benchmark("scienceqa_img", folder, records)
    runner = multiple_choice_option_strategy(backend, bench)
    parts = infer_parts(bench, backend.settings, part_size)
    warm_up(runner, records.iloc[:bs])
    ours, ours_cores = on_host(lambda: in_parts(runner, parts), device)

    def request(i):
        options = list(records["options"].iloc[i])
        return OptionRequest(
            records["id"].iloc[i],
            open_rgb(folder / records["image"].iloc[i]),
            multiple_choice_prompt(records["question"].iloc[i], options, _context(records, i)),
            options,
            tuple(LETTERS[: len(options)]),
        )

    batch = backend._cast(backend._encode([request(i) for i in range(bs)]))
    with torch.inference_mode():
        bare = timed(lambda: backend.model(**batch, logits_to_keep=1), device, repeats=3)
        one = backend._cast(backend._encode([GenerateRequest("g", request(0).image, request(0).prompt)]))
        per_sample = timed(lambda: backend.model.generate(**one, do_sample=False), device, repeats=2)
    return [
        result_row(
            "choice",
            f"multiple choice by letter log-likelihood, batch {bs}",
            "samples/s",
            n / ours,
            bs / bare,
            f"bare batched forward, batch {bs}",
            host_cores=ours_cores,
        ),
        result_row(
            "choice vs per-sample generate",
            "multiple choice by letter log-likelihood",
            "samples/s",
            n / ours,
            1 / per_sample,
            f"per-sample generate, {NEW_TOKENS} tokens",
            host_cores=ours_cores,
        ),
    ]


def generate_section(backend, shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import torch

    from vlmgrid.images import open_rgb
    from vlmgrid.model_requests import GenerateRequest
    from vlmgrid.protocols.short_answer import generate_strategy, short_answer_prompt

    bs, n = shape["lm_batch"], shape["generate_items"]
    folder = work / "textvqa"
    records = item_records(n, folder, "vqa")
    bench = folder_benchmark("textvqa", folder, records)
    runner = generate_strategy(backend, bench)
    parts = infer_parts(bench, backend.settings, part_size)
    # warmed at the timed batch size, as the reference is by its untimed call: a first call at a new size
    # grows the device's memory pool (the KV cache of a batch of 64), which neither timed call should pay
    warm_up(runner, records.iloc[:bs])
    ours, ours_cores = on_host(lambda: in_parts(runner, parts), device)
    requests = [
        GenerateRequest(
            records["id"].iloc[i],
            open_rgb(folder / records["image"].iloc[i]),
            short_answer_prompt(records["question"].iloc[i]),
        )
        for i in range(bs)
    ]
    batch = backend._cast(backend._encode(requests))
    with torch.inference_mode():
        bare = timed(lambda: backend.model.generate(**batch, do_sample=False), device, repeats=3)
    # The same run with nothing prepared beside `generate` (each batch's inputs made before its call): where
    # this row is faster, the preparing thread delays the thread that launches the device's work
    rows = [("generate", "", ours, ours_cores)]
    if backend._prefetch is not None:
        pool, backend._prefetch = backend._prefetch, None
        try:
            alone, alone_cores = on_host(lambda: in_parts(runner, parts), device)
        finally:
            backend._prefetch = pool
        rows.append(("generate, prepared before", ", nothing prepared beside generate", alone, alone_cores))
    return [
        result_row(
            figure,
            f"short answers, {NEW_TOKENS} new tokens, batch {bs}{label}",
            "samples/s",
            n / seconds,
            bs / bare,
            f"transformers generate, batch {bs}",
            host_cores=cores,
        )
        for figure, label, seconds, cores in rows
    ]


def rank_section(backend, shape: dict, device: str, work: Path, part_size: int) -> list[dict]:
    import torch

    from vlmgrid.images import open_rgb
    from vlmgrid.model_requests import OptionRequest
    from vlmgrid.protocols.ranking import likelihood_strategy, ranking_prompt

    n, k = shape["rank_queries"], CANDIDATES
    bench = dance_folder(n, k, work, backend.tokenizer)
    folder, records = bench.root, bench.records
    names, riddles = list(records["image"]), list(records["options"])
    runner = likelihood_strategy(backend, bench)
    parts = infer_parts(bench, backend.settings, part_size)
    warm_up(runner, records.iloc[:1])
    ours, ours_cores = on_host(lambda: in_parts(runner, parts), device)

    # 50 full forwards: picture + prompt + riddle, each its own sequence, in batches as a plain evaluation
    # does
    prompt = ranking_prompt()
    picture = open_rgb(folder / names[0])
    full = [OptionRequest(f"r{j}", picture, prompt + " " + riddles[0][j], ["x"], ["A"]) for j in range(k)]

    def naive():
        for start in range(0, k, shape["lm_batch"]):
            batch = backend._cast(backend._encode(full[start : start + shape["lm_batch"]]))
            backend.model(**batch, use_cache=False)

    with torch.inference_mode():
        naive_s = timed(naive, device, repeats=1)
    # The same ranking with every riddle in its own row on a repeated copy of the picture's cache (the path of
    # models whose riddles cannot be packed into one row): which of the two a GPU runs faster
    rows = [("rank", "", ours, ours_cores)]
    if backend.pack_options:
        backend.pack_options = False
        try:
            in_rows, in_rows_cores = on_host(lambda: in_parts(runner, parts), device)
        finally:
            backend.pack_options = True
        rows.append(("rank, rows", ", each riddle in its own row", in_rows, in_rows_cores))
    return [
        result_row(
            figure,
            f"ranking {k} riddles per picture ({RIDDLE_TOKENS} tokens each){label}",
            "pictures/s",
            n / seconds,
            1 / naive_s,
            f"{k} full forwards",
            host_cores=cores,
        )
        for figure, label, seconds, cores in rows
    ]
