"""Speed of the hf backend's capabilities, each next to the raw model measured in the same run.

    python benchmarks/hf_speed.py                      # tiny LLaVA checkpoint, CPU or GPU
    python benchmarks/hf_speed.py --shape llava-7b     # random weights of LLaVA-1.5-7B's shape (GPU, bf16)

Figures (samples or images per second):
- letter scoring: the backend's `score_options` with letters (one forward pass per batch) at several batch
  sizes, next to a bare forward of the same shape that keeps only the last logits (the ceiling);
- per-sample generation of 16 tokens: the backend's `generate` with batch size 1, next to bare
  `model.generate` at batch 1; and batched generation, next to bare `model.generate` at the same batch size;
- 50-candidate ranking for one image: the backend's shared-prefix scoring, next to the same 50 candidates
  scored one by one (50 full forwards through the backend) and to the bare shared-prefix forward.
`--reference FILE` adds a column of figures measured elsewhere (e.g. an H200's ceilings) for comparison.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path


def _sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, torch, device, repeats: int) -> float:
    """Seconds per call: one warm-up call, then the mean of `repeats` calls."""
    fn()
    _sync(torch, device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(torch, device)
    return (time.perf_counter() - start) / repeats


def build_backend(shape: str, device: str, work: Path):
    """The backend over a tiny fixture checkpoint, or over random weights of LLaVA-1.5-7B's shape."""
    import torch

    from vlmgrid.models.hf_backend import Hf
    from vlmgrid.models.tiny_hf import write_tiny_checkpoint

    tiny_dir = work / "llava"
    write_tiny_checkpoint("llava", tiny_dir, seed=0)
    settings = {"backend": "hf", "source": {"type": "fixture", "family": "llava"}, "batch_size": 64,
                "precision": "bf16", "generation": {"max_new_tokens": 16}}
    if shape == "tiny":
        return Hf.load(settings, tiny_dir, device)

    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tiny = Hf.load(settings, tiny_dir, "cpu")
    tokenizer = tiny.tokenizer
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                              num_attention_heads=16, patch_size=14, image_size=336, projection_dim=768)
    text = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=32, vocab_size=32064, max_position_embeddings=4096)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token,
                         vision_feature_layer=-2, vision_feature_select_strategy="default")
    config._attn_implementation = "sdpa"
    dtype = torch.bfloat16
    with torch.device(device):
        model = LlavaForConditionalGeneration(config).to(dtype).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336}),
        tokenizer=tokenizer, patch_size=14, vision_feature_select_strategy="default",
        chat_template=tiny.processor.chat_template, image_token="<image>",
    )
    return Hf(settings, model, processor, device, dtype)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["tiny", "llava-7b"], default="tiny")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--batch-sizes", default=None, help="letter-scoring batch sizes, e.g. 1,16,64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reference", help="a JSON of figures measured elsewhere (gpu_limits.py's output)")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()

    import numpy as np
    import torch
    import transformers
    from PIL import Image

    from vlmgrid.models.base import GenerateRequest, OptionRequest

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    sizes = [int(s) for s in args.batch_sizes.split(",")] if args.batch_sizes else (
        [1, 16, 64] if args.shape == "llava-7b" else [1, 8, 32])
    work = Path(tempfile.mkdtemp(prefix="vlmgrid-speed-"))
    started = time.perf_counter()
    backend = build_backend(args.shape, device, work)
    model = backend.model
    model.generation_config.min_new_tokens = 16  # every sample generates exactly 16 tokens: a fair comparison
    model.generation_config.max_new_tokens = 16
    build_s = time.perf_counter() - started

    rng = np.random.default_rng(0)
    size = 336 if args.shape == "llava-7b" else 64

    def image(i):
        return Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8))

    images = [image(i) for i in range(max(sizes))]
    question = "Which option matches the image? A. a cat B. a dog C. a car D. a tree Answer with the letter."
    letters = ["A", "B", "C", "D"]
    figures: dict = {"device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
                     "shape": args.shape, "torch": torch.__version__, "transformers": transformers.__version__,
                     "build_s": round(build_s, 2)}

    def inputs_for(requests):
        return backend._cast(backend._encode(requests))

    with torch.inference_mode():
        # Letter scoring.
        for bs in sizes:
            requests = [OptionRequest(str(i), images[i], question, ["a cat", "a dog", "a car", "a tree"], letters)
                        for i in range(bs)]
            backend._limit = bs
            ours = timed(lambda: backend.score_options(requests), torch, device, args.repeats)
            batch = inputs_for(requests)
            bare = timed(lambda: model(**batch, logits_to_keep=1), torch, device, args.repeats)
            figures[f"letter bs{bs}"] = {"vlmgrid": bs / ours, "bare_forward": bs / bare, "ratio": bare / ours}

        # Generation, per sample and batched.
        one = [GenerateRequest("0", images[0], "Describe the image.")]
        backend._limit = 1
        ours = timed(lambda: backend.generate(one), torch, device, args.repeats)
        batch = inputs_for(one)
        bare = timed(lambda: model.generate(**batch, do_sample=False), torch, device, args.repeats)
        figures["generate16 bs1"] = {"vlmgrid": 1 / ours, "bare_generate": 1 / bare, "ratio": bare / ours}
        bs = max(sizes)
        many = [GenerateRequest(str(i), images[i], "Describe the image.") for i in range(bs)]
        backend._limit = bs
        ours = timed(lambda: backend.generate(many), torch, device, 1)
        batch = inputs_for(many)
        bare = timed(lambda: model.generate(**batch, do_sample=False), torch, device, 1)
        figures[f"generate16 bs{bs}"] = {"vlmgrid": bs / ours, "bare_generate": bs / bare, "ratio": bare / ours}

        # 50-candidate ranking for one image.
        words = ["this", "is", "used", "for", "cutting", "bread", "a", "red", "small", "animal", "with", "fur"]
        candidates = [" ".join(rng.choice(words, 24)) for _ in range(50)]
        ranking = OptionRequest("r", images[0], "Which riddle describes the image?", candidates)
        backend._limit = 64
        shared = timed(lambda: backend.score_options([ranking]), torch, device, args.repeats)
        naive = timed(lambda: [backend.score_options([OptionRequest("r", images[0], ranking.prompt, [c])])
                               for c in candidates], torch, device, 1)
        figures["rank50"] = {"vlmgrid_shared_prefix": 1 / shared, "vlmgrid_one_by_one": 1 / naive,
                             "speedup": naive / shared}

    if device == "cuda":
        figures["max_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    reference = json.loads(Path(args.reference).read_text()) if args.reference else {}
    print(f"# hf backend speed: {args.shape} on {figures['device']} (torch {torch.__version__}, "
          f"transformers {transformers.__version__})")
    print(f"{'figure':<18} {'vlmgrid':>10} {'ceiling':>10} {'ratio':>7}  reference")
    ref_llava = reference.get("llava", {})
    for name, row in figures.items():
        if not isinstance(row, dict):
            continue
        if name == "rank50":
            ref = reference.get("rank50", {}).get("speedup")
            print(f"{'rank50 (img/s)':<18} {row['vlmgrid_shared_prefix']:>10.2f} {row['vlmgrid_one_by_one']:>10.2f} "
                  f"{row['speedup']:>6.1f}x  {'' if ref is None else f'{ref:.1f}x shared-prefix speedup'}")
            continue
        ceiling = row.get("bare_forward", row.get("bare_generate"))
        ref = ref_llava.get(name.replace("letter", "forward_letter"), {}).get("samples_per_s")
        print(f"{name:<18} {row['vlmgrid']:>10.2f} {ceiling:>10.2f} {row['ratio']:>6.2f}x  "
              f"{'' if ref is None else f'{ref:.2f}/s'}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
