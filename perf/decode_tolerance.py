"""How far the device path's pixels (open_clip's `image_decode: device`) lie from the host path's, and how
many top-1 answers that changes: on the default grid's CLIP cells and on photo-like JPEGs of ImageNet's size.

    python perf/decode_tolerance.py --out perf/results/decode-tolerance.md
    python perf/decode_tolerance.py --images 300 --sizes 224,336
    python perf/decode_tolerance.py --decode-on cuda --out ...   # on a GPU: nvjpeg's own pixels

The device path runs here on CPU tensors, with the same torch ops it runs on CUDA: decode_jpeg on the CPU is
libjpeg-turbo (PIL's decoder too), where on CUDA it is nvjpeg, whose inverse DCT may differ from
libjpeg-turbo's by about one level more; the resize and crop are the same float ops on either. Pixels are
compared in uint8 levels after the preprocessing's resize and crop (before normalising): the largest and the
mean absolute difference and the share of values that differ, over every value of every image the device
path decoded (the rest go the host path and are equal by construction). Answers: zero-shot top-1 of each
model, host pixels against device pixels.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gridrun import REPO, save_results  # noqa: E402
from speedfolders import imagenet_folder  # noqa: E402

CLASSES = 10


def pixel_stats(paths: list, geometric, decode_on: str = "cpu") -> dict:
    """The device path's pixels against the host path's for the files: counts and differences in levels."""
    import numpy as np

    from vlmgrid.models import clip_device_decode, clip_files

    geometry = clip_device_decode.device_geometry(geometric)
    on_device = [p for p in paths if clip_device_decode.read_for_device(p, geometric)[0] == "jpeg"]
    stats = {"files": len(paths), "on device": len(on_device), "max": 0, "sum": 0.0, "differing": 0}
    stats["values"] = 0
    device_pixels = [
        pixels.cpu().numpy()
        for _, _, pixels in clip_device_decode.device_batches(
            on_device, geometric, geometry, 64, None, decode_on
        )
        if pixels is not None
    ]
    if not device_pixels:
        return stats
    device = np.concatenate(device_pixels).astype(np.int16)
    host = np.stack([clip_files.load_pixels(p, geometric)[0] for p in on_device]).transpose(0, 3, 1, 2)
    difference = np.abs(device - host.astype(np.int16))
    stats.update(
        max=int(difference.max()),
        sum=float(difference.sum()),
        differing=int((difference > 0).sum()),
        values=int(difference.size),
    )
    return stats


def decode_alone(paths: list) -> int:
    """The largest difference of decode_jpeg on the CPU against PIL's decoding, before any resize."""
    import numpy as np
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    from vlmgrid.images import open_rgb

    largest = 0
    for path in paths:
        ours = decode_jpeg(read_file(str(path)), mode=ImageReadMode.RGB).permute(1, 2, 0).numpy()
        pil = np.asarray(open_rgb(Path(path)))
        largest = max(largest, int(np.abs(ours.astype(np.int16) - pil).max()))
    return largest


def top1_changes(model, preprocess_steps, mean, std, paths: list, texts, decode_on: str) -> tuple[int, int]:
    """(answers that differ, answers) of a zero-shot classifier over `texts`, host pixels against device
    pixels (the model's forward on each)."""
    import numpy as np
    import torch

    from vlmgrid.models import clip_device_decode, clip_files

    geometry = clip_device_decode.device_geometry(preprocess_steps)
    mean = torch.tensor(mean).view(1, -1, 1, 1)
    std = torch.tensor(std).view(1, -1, 1, 1)
    with torch.inference_mode():
        classifier = model.encode_text(texts, normalize=True)

        def top1(pixels) -> np.ndarray:
            pixels = pixels.to(torch.float32).div(255).sub_(mean).div_(std)
            return (model.encode_image(pixels, normalize=True) @ classifier.T).argmax(dim=1).numpy()

        host, device = [], []
        for start in range(0, len(paths), 64):
            batch = paths[start : start + 64]
            rows = [clip_files.load_pixels(p, preprocess_steps)[0] for p in batch]
            host.append(top1(torch.from_numpy(np.stack(rows)).permute(0, 3, 1, 2)))
            ((_, _, pixels),) = clip_device_decode.device_batches(
                batch, preprocess_steps, geometry, 64, None, decode_on
            )
            device.append(top1(pixels.cpu()))
    host, device = np.concatenate(host), np.concatenate(device)
    return int((host != device).sum()), len(host)


def real_size_rows(images: int, sizes: list[int], work: Path, decode_on: str) -> list[dict]:
    import open_clip
    import torch

    from vlmgrid.models.open_clip_backend import _split_preprocess

    bench = imagenet_folder(images, work)
    paths = [bench.root / name for name in bench.records["image"]]
    rows = []
    for size in sizes:
        steps, mean, std = _split_preprocess(open_clip.image_transform(size, is_train=False))
        stats = pixel_stats(paths, steps, decode_on)
        towers = {
            "ViT-B/32, random": open_clip.create_model("ViT-B-32", force_image_size=size),
            "tiny ViT/16, random": open_clip.model.CLIP(**tiny_cfg(size)),
        }
        tokenizer = open_clip.get_tokenizer("ViT-B-32")
        texts = tokenizer([f"a photo of a {name}." for name in bench.classes])
        for label, model in towers.items():
            torch.manual_seed(0)
            changed, answers = top1_changes(model.eval(), steps, mean, std, paths, texts, decode_on)
            rows.append(row(f"{images} photo-like JPEGs, 500x375, at {size}", label, stats, changed, answers))
    return rows


def tiny_cfg(size: int) -> dict:
    return {
        "embed_dim": 64,
        "vision_cfg": {"image_size": size, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
    }


def grid_rows(work: Path) -> list[dict]:
    """The default grid's CLIP cells: clip-tiny on every benchmark it answers, host against device pixels
    through the protocol's own runner."""
    import os

    from vlmgrid import paths as vpaths
    from vlmgrid.benchmarks.dataset import load_benchmark
    from vlmgrid.config import load_config
    from vlmgrid.models import BACKENDS
    from vlmgrid.models.open_clip_backend import _split_preprocess
    from vlmgrid.protocols import make_runner, strategy_for
    from vlmgrid.stages.fetch import fetch_model
    from vlmgrid.stages.prepare import prepare_benchmark

    os.environ["VLMGRID_CACHE_DIR"] = str(work / "cache")
    config = load_config(REPO / "config" / "config.yaml")
    settings = config.model("clip-tiny")
    model_dir = work / "clip-tiny"
    fetch_model("clip-tiny", settings, model_dir)
    host = BACKENDS.get("open_clip").load(settings, model_dir, "cpu")
    device = BACKENDS.get("open_clip").load({**settings, "image_decode": "device"}, model_dir, "cpu")
    device.decodes_on_device = lambda: True  # the CUDA path's own torch ops, on CPU tensors
    steps = _split_preprocess(host.preprocess)[0]
    rows = []
    for name in config.benchmarks:
        bench_dir = vpaths.bench_dir(work / "data", name)
        prepare_benchmark(name, config.benchmark(name), bench_dir)
        bench = load_benchmark(bench_dir)
        if strategy_for(bench.kind.protocol, host.model_capabilities) != "embed":
            continue
        files = sorted(set(bench_files(bench)))
        stats = pixel_stats(files, steps)
        ours = make_runner(bench.kind.protocol, host, bench)[0](bench.records)
        theirs = make_runner(bench.kind.protocol, device, bench)[0](bench.records)
        changed = sum(_answer(a) != _answer(b) for a, b in zip(ours, theirs))
        rows.append(row(f"default grid: {name}", "clip-tiny (fixture)", stats, changed, len(ours)))
    return rows


def _answer(prediction: dict) -> tuple:
    return prediction.get("prediction"), prediction.get("prediction_index")


def bench_files(bench) -> list[Path]:
    """Every image file the benchmark's items name (pictures and picture options)."""
    names = [n for n in bench.records["image"] if isinstance(n, str)]
    names += [n for options in bench.records["options"] for n in options if isinstance(n, str)]
    return [bench.root / n for n in names if (bench.root / n).is_file()]


def row(where: str, model: str, stats: dict, changed: int, answers: int) -> dict:
    values = max(stats["values"], 1)
    return {
        "set": where,
        "model": model,
        "files": stats["files"],
        "decoded on the device": stats["on device"],
        "max levels": stats["max"],
        "mean levels": stats["sum"] / values,
        "values differing": stats["differing"] / values,
        "top-1 changed": f"{changed} of {answers}",
    }


def render(rows: list[dict], meta: dict) -> str:
    lines = [
        "# The device path's pixels and answers against the host path's (`image_decode: device`)",
        "",
        *[f"- {key}: {value}" for key, value in meta.items()],
        "",
        "| set | model | files | decoded on the device | max difference (levels) | mean difference | "
        "values differing | top-1 changed |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['set']} | {r['model']} | {r['files']} | {r['decoded on the device']} | "
            f"{r['max levels']} | {r['mean levels']:.3f} | {r['values differing']:.1%} | "
            f"{r['top-1 changed']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import platform

    import open_clip
    import PIL
    import torch
    import torchvision

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=300, help="photo-like JPEGs of ImageNet's size")
    parser.add_argument("--sizes", default="224,336", help="the preprocessing's image sizes")
    parser.add_argument(
        "--decode-on",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the photos' device path decodes (cuda: nvjpeg); the grid's cells decode on the CPU",
    )
    parser.add_argument("--out", help="write the table here (Markdown; the same name with .json beside it)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="vlmgrid-tolerance-") as folder:
        work = Path(folder)
        rows = grid_rows(work / "grid") + real_size_rows(args.images, sizes, work / "real", args.decode_on)
        bench = imagenet_folder(20, work / "decode")
        largest = decode_alone([bench.root / name for name in bench.records["image"]])
    meta = {
        "command": "python perf/decode_tolerance.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "device path": "on CPU tensors (decode_jpeg: libjpeg-turbo; on CUDA nvjpeg)"
        if args.decode_on == "cpu"
        else "the photos decoded on CUDA (nvjpeg), the default grid's cells on CPU tensors",
        "decoding alone": f"decode_jpeg on the CPU against PIL, before resizing: at most {largest} levels",
        "libraries": f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
        f"Pillow {PIL.__version__}, open_clip {open_clip.__version__}, python {platform.python_version()}",
    }
    text = render(rows, meta)
    print(text)
    if args.out:
        save_results(args.out, text, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
