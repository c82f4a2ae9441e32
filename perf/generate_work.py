"""The work each `generate` call is handed: vlmgrid's short-answer path against perf/speed.py's reference.

    python perf/generate_work.py                                  # tiny LLaVA, small shapes, 2 batches of 16
    python perf/generate_work.py --shapes real --depth 1 --batch 4 --items 8   # real widths and image tokens
    python perf/generate_work.py --out perf/results/generate-work.md

The two paths of speed.py's generate section run on the CPU with the model's `generate` wrapped: every call's
batch size, prompt lengths (unpadded), padded length, tokens processed by the prefill (batch x padded length),
image tokens per row, max_new_tokens, the new tokens actually generated (a row ends at its first end of
sequence, a batch at its longest row), the padding side, and every generation setting the call was handed or
took from the model's generation config, with the logits processors and stopping criteria generate built.
Counting only: the times printed are this machine's, not a GPU's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speedcases import SHAPES, at_depth, in_parts, infer_parts, load_llava, write_llava  # noqa: E402
from speedfolders import folder_benchmark, item_records  # noqa: E402

SETTINGS = (
    "do_sample",
    "num_beams",
    "use_cache",
    "pad_token_id",
    "eos_token_id",
    "max_new_tokens",
    "min_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "cache_implementation",
    "output_scores",
    "output_logits",
    "return_dict_in_generate",
    "output_attentions",
    "output_hidden_states",
    "repetition_penalty",
)


def instrument(model, calls: list[dict]) -> None:
    """Wrap the model's generate (and the pieces it builds) so that each call appends what it was handed."""
    original = model.generate
    processors, criteria, configs = (
        model._get_logits_processor,
        model._get_stopping_criteria,
        model._prepare_generation_config,
    )

    def prepare(*args, **kwargs):
        config, model_kwargs = configs(*args, **kwargs)
        calls[-1]["config"] = {key: getattr(config, key, None) for key in SETTINGS}
        return config, model_kwargs

    def logits_processor(*args, **kwargs):
        built = processors(*args, **kwargs)
        calls[-1]["processors"] = [type(p).__name__ for p in built]
        return built

    def stopping(*args, **kwargs):
        built = criteria(*args, **kwargs)
        calls[-1]["stopping"] = [type(c).__name__ for c in built]
        return built

    def generate(**inputs):
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        lengths = mask.sum(dim=1).tolist()
        image_id = model.config.image_token_id
        call = {
            "kwargs": {k: v for k, v in inputs.items() if not hasattr(v, "shape")},
            "tensors": sorted(k for k, v in inputs.items() if hasattr(v, "shape")),
            "batch": ids.shape[0],
            "padded": ids.shape[1],
            "lengths": lengths,
            "left_padded": bool((mask[:, 0] == 0).any()),
            "right_padded": bool((mask[:, -1] == 0).any()),
            "image_tokens": sorted(set((ids == image_id).sum(dim=1).tolist())),
        }
        calls.append(call)
        start = time.perf_counter()
        output = original(**inputs)
        call["seconds"] = time.perf_counter() - start
        new = output[:, ids.shape[1] :]
        eos = model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, (list, tuple)) else [eos])
        ends = []
        for row in new.tolist():
            ends.append(next((k + 1 for k, token in enumerate(row) if token in eos), len(row)))
        call["steps"] = new.shape[1]
        call["row_new_tokens"] = ends
        return output

    model.generate = generate
    model._get_logits_processor, model._get_stopping_criteria = logits_processor, stopping
    model._prepare_generation_config = prepare


def run(shape: dict, batch: int, items: int, work: Path, part_size: int) -> dict[str, list[dict]]:
    import torch

    from vlmgrid.images import open_rgb
    from vlmgrid.model_requests import GenerateRequest
    from vlmgrid.protocols.short_answer import generate_strategy, short_answer_prompt

    backend = load_llava(shape, "cpu", write_llava(shape, "cpu", work / "llava"), batch)
    folder = work / "textvqa"
    records = item_records(items, folder, "vqa")
    bench = folder_benchmark("textvqa", folder, records)
    calls: dict[str, list[dict]] = {"vlmgrid": [], "reference": []}

    instrument(backend.model, calls["vlmgrid"])
    in_parts(generate_strategy(backend, bench), infer_parts(bench, backend.settings, part_size))
    # speed.py's reference: the first batch's requests, encoded by the backend, handed to generate as they are
    requests = [
        GenerateRequest(
            records["id"].iloc[i],
            open_rgb(folder / records["image"].iloc[i]),
            short_answer_prompt(records["question"].iloc[i]),
        )
        for i in range(batch)
    ]
    inputs = backend._cast(backend._encode(requests))
    backend.model.generate = type(backend.model).generate.__get__(backend.model)
    instrument(backend.model, calls["reference"])
    with torch.inference_mode():
        backend.model.generate(**inputs, do_sample=False)
    return calls


def table(calls: dict[str, list[dict]]) -> str:
    lines = [
        "| path | call | batch | prompt lengths | padded length | prefill tokens (batch x padded) "
        "| pad tokens | image tokens per row | steps (new tokens of the longest row) | new tokens per row "
        "| s (this CPU) |",
        "|---|---:|---:|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for path, made in calls.items():
        for k, call in enumerate(made):
            lengths = call["lengths"]
            lines.append(
                f"| {path} | {k + 1} | {call['batch']} | {min(lengths)}-{max(lengths)} | {call['padded']} | "
                f"{call['batch'] * call['padded']:,} | {call['batch'] * call['padded'] - sum(lengths):,} | "
                f"{', '.join(map(str, call['image_tokens']))} | {call['steps']} | "
                f"{min(call['row_new_tokens'])}-{max(call['row_new_tokens'])} | {call['seconds']:.2f} |"
            )
    lines += [
        "",
        "| path | call | tensors | other arguments handed to generate | padding | settings generate ran with "
        "| logits processors | stopping criteria |",
        "|---|---:|---|---|---|---|---|---|",
    ]
    for path, made in calls.items():
        for k, call in enumerate(made):
            padding = "left" if call["left_padded"] else "right" if call["right_padded"] else "none"
            settings = ", ".join(f"{key}={value}" for key, value in call.get("config", {}).items())
            lines.append(
                f"| {path} | {k + 1} | {', '.join(call['tensors'])} | "
                f"{', '.join(f'{k}={v}' for k, v in call['kwargs'].items())} | {padding} | {settings} | "
                f"{', '.join(call.get('processors', []))} | {', '.join(call.get('stopping', []))} |"
            )
    return "\n".join(lines)


def totals(calls: dict[str, list[dict]]) -> str:
    """Per answered item: prefill tokens and decoding steps x rows, each path's, and their ratio."""
    per_item = {}
    for path, made in calls.items():
        answered = sum(call["batch"] for call in made)
        prefill = sum(call["batch"] * call["padded"] for call in made) / answered
        decode = sum(call["batch"] * call["steps"] for call in made) / answered
        per_item[path] = (prefill, decode)
    lines = ["| per answered item | vlmgrid | reference | reference / vlmgrid |", "|---|---:|---:|---:|"]
    for k, label in enumerate(("prefill tokens", "decoding steps (row x step)")):
        ours, ref = per_item["vlmgrid"][k], per_item["reference"][k]
        lines.append(f"| {label} | {ours:,.1f} | {ref:,.1f} | {ref / ours:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", choices=["real", "small"], default="small")
    parser.add_argument(
        "--depth", type=int, help="layers per tower and in the language model, the widths kept"
    )
    parser.add_argument("--batch", type=int, help="the batch size (default: the shapes' lm_batch)")
    parser.add_argument("--items", type=int, help="items vlmgrid answers (default: two batches)")
    parser.add_argument("--part-size", type=int, default=1024)
    parser.add_argument("--out", help="write the tables here (Markdown)")
    args = parser.parse_args(argv)
    shape = SHAPES[args.shapes] if args.depth is None else at_depth(SHAPES[args.shapes], args.depth)
    shape = {**shape, "precision": "fp32"}
    batch = args.batch or shape["lm_batch"]
    with tempfile.TemporaryDirectory(prefix="vlmgrid-generate-work-") as work:
        calls = run(shape, batch, args.items or 2 * batch, Path(work), args.part_size)
    text = (
        f"# The work handed to `generate`: vlmgrid's short answers against transformers' generate\n\n"
        f"- command: python perf/generate_work.py {' '.join(argv if argv is not None else sys.argv[1:])}\n\n"
        f"{table(calls)}\n\n{totals(calls)}\n"
    )
    print(text)
    if args.out:
        from vlmgrid.fileio import write_text

        write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
