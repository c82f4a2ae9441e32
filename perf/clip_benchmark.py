"""vlmgrid next to CLIP_benchmark: the same image folder, the same open_clip checkpoint, the same predictions?

    python perf/clip_benchmark.py --clip-benchmark-python /opt/cb/bin/python            # a fresh folder
    python perf/clip_benchmark.py --clip-benchmark-python ... --food101 /data/food-101   # a real Food-101

CLIP_benchmark (`pip install clip-benchmark`, best in a virtualenv of its own, whose python
`--clip-benchmark-python` names) and vlmgrid each run zero-shot classification of Food-101's test split:
a folder in the extracted release layout (food-101/images/<class>/<id>.jpg, food-101/meta/test.json,
test.txt, classes.txt), which torchvision's Food101 reads for CLIP_benchmark's `--dataset food101` and which
vlmgrid's `food101` kind reads in place. Without `--food101` the script writes one: `--classes` of the real
class folder names, `--images` photo-like JPEGs of Food-101's size (512 pixels on the longer side).

The model is a tiny random open_clip ViT at 224 pixels (the image path at a real model's resolution, the
towers small enough that decoding and resizing dominate), saved in open_clip's hub layout; CLIP_benchmark
loads it by `--model local-dir:<folder>` (open_clip's own folder loading), vlmgrid as a `local` source. Both
run in fp32 (CLIP_benchmark's `--no_amp`: its autocast would run the CPU in bfloat16) with batches of 64.

Each run is a fresh process: cold is vlmgrid with an empty pixel cache, warm is vlmgrid with the cache the
cold runs filled; CLIP_benchmark has no cache, so its every run is cold. The records are prepared once
before (`vlmgrid prepare`, timed apart, and `vlmgrid fetch-model`, which records the local checkpoint).
CLIP_benchmark's CLI writes only its metrics, so its run is its own `clip_benchmark eval` with
`run_classification` wrapped to save each image's argmax. Predictions must be equal item by item (the run
stops otherwise); the medians of `--runs` runs of wall time and of CPU time (user + sys of the process and its
children) and their ratios are printed, with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # perf/'s own modules, when loaded by path too
from gridrun import timed  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PHOTO_SIZE = (512, 384)  # Food-101's images are rescaled to 512 pixels on the longer side
BATCH = 64
MODEL_CFG = {  # open_clip's ViT-B/32 image path at 224 pixels, at 2 layers of width 64
    "embed_dim": 32,
    "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 32, "head_width": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
# The first class folders of the real Food-101 (meta/classes.txt, sorted).
FOOD101_CLASSES = (
    "apple_pie",
    "baby_back_ribs",
    "baklava",
    "beef_carpaccio",
    "beef_tartare",
    "beet_salad",
    "beignets",
    "bibimbap",
    "bread_pudding",
    "breakfast_burrito",
    "bruschetta",
    "caesar_salad",
    "cannoli",
    "caprese_salad",
    "carrot_cake",
    "ceviche",
    "cheese_plate",
    "cheesecake",
    "chicken_curry",
    "chicken_quesadilla",
)

# Run by CLIP_benchmark's python: its CLI, with run_classification wrapped to save the argmax per image.
CLIP_BENCHMARK_RUNNER = """
import sys
import numpy as np
from clip_benchmark.metrics import zeroshot_classification as zsc
from clip_benchmark.cli import main

out, sys.argv = sys.argv[1], ["clip_benchmark", *sys.argv[2:]]
run = zsc.run_classification

def saving(*args, **kwargs):
    logits, targets = run(*args, **kwargs)
    np.save(out, logits.argmax(dim=1).numpy())
    return logits, targets

zsc.run_classification = saving
main()
"""


def write_food101(root: Path, classes: int, images: int, seed: int = 0) -> Path:
    """food-101/ in the extracted release layout: `images` photo-like JPEGs over the first `classes` classes,
    all of them in the test split (meta/test.json and test.txt), meta/classes.txt and labels.txt."""
    import numpy as np
    from PIL import Image

    if not 1 <= classes <= len(FOOD101_CLASSES):
        raise SystemExit(f"--classes must lie in 1..{len(FOOD101_CLASSES)}")
    folder = root / "food-101"
    names = FOOD101_CLASSES[:classes]
    rng = np.random.default_rng(seed)
    test: dict[str, list[str]] = {name: [] for name in names}
    for k in range(images):
        name = names[k % classes]
        entry = f"{name}/{100000 + k}"
        test[name].append(entry)
        width, height = PHOTO_SIZE if k % 3 else PHOTO_SIZE[::-1]  # some portrait pictures
        small = Image.fromarray(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8)).resize(
            (width, height), Image.BICUBIC
        )
        noisy = np.asarray(small).astype(np.int16) + rng.integers(-12, 12, (height, width, 3))
        path = folder / "images" / f"{entry}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(path, quality=75)
    meta = folder / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "test.json").write_text(json.dumps(test), encoding="utf-8")
    (meta / "test.txt").write_text("".join(f"{e}\n" for name in names for e in test[name]), encoding="utf-8")
    (meta / "train.json").write_text(json.dumps({name: [] for name in names}), encoding="utf-8")
    (meta / "train.txt").write_text("", encoding="utf-8")
    (meta / "classes.txt").write_text("".join(f"{name}\n" for name in names), encoding="utf-8")
    (meta / "labels.txt").write_text(
        "".join(" ".join(w.capitalize() for w in name.split("_")) + "\n" for name in names), encoding="utf-8"
    )
    return folder


def write_config(work: Path, food: Path, model: Path, items: int | None) -> Path:
    import yaml

    config = {
        "title": "vlmgrid next to CLIP_benchmark",
        "data_dir": str(work / "data"),
        "results_dir": str(work / "results"),
        "benchmarks": {
            "food101": {
                "kind": "food101",
                "source": {
                    "type": "local",
                    "path": str(food),
                    **({"expected_items": items} if items else {}),
                },
            }
        },
        "models": {
            "tiny-clip": {
                "backend": "open_clip",
                "source": {"type": "local", "path": str(model)},
                "batch_size": BATCH,
                "device": "cpu",
            }
        },
        "grid": {"models": ["tiny-clip"], "benchmarks": ["food101"]},
    }
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def timed_run(command: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys of the process and its children) of one subprocess."""
    run = timed(command, cwd, env)
    return run.wall_s, run.cpu_s


def item_ids(food: Path) -> list[str]:
    """vlmgrid's record ids ("<class>-<id>") of the test images in meta/test.json's order, the order in which
    torchvision's Food101 (CLIP_benchmark's dataset) lists them."""
    test = json.loads((food / "meta" / "test.json").read_text(encoding="utf-8"))
    return [entry.replace("/", "-") for entries in test.values() for entry in entries]


def vlmgrid_predictions(work: Path, food: Path) -> list[int]:
    """vlmgrid's class index per test image, in CLIP_benchmark's order."""
    import pandas as pd

    frame = pd.read_parquet(work / "results" / "predictions" / "tiny-clip" / "food101.parquet")
    if frame["error"].notna().any():
        raise SystemExit(
            f"vlmgrid's predictions have error rows: {frame.loc[frame['error'].notna(), 'error'].iloc[0]}"
        )
    by_id = dict(zip(frame["id"], frame["prediction_index"].astype(int)))
    return [by_id[item] for item in item_ids(food)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--clip-benchmark-python",
        default=sys.executable,
        help="the python of the environment where clip-benchmark is installed",
    )
    parser.add_argument("--food101", type=Path, help="an extracted food-101/ folder (default: write one)")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="CLIP_benchmark's --num_workers (default: its own default, 4)",
    )
    parser.add_argument(
        "--work", type=Path, help="a folder for the data, model and results (default: temporary)"
    )
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="clip-benchmark-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "VLMGRID_CACHE_DIR": str(work / "cache"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
    }
    food = args.food101 or write_food101(work / "food", args.classes, args.images)
    model = work / "tiny-clip"
    if not (model / "open_clip_config.json").is_file():
        sys.path.insert(0, str(REPO / "src"))
        from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip

        model.mkdir(parents=True, exist_ok=True)
        write_tiny_open_clip(model, seed=0, model_cfg=MODEL_CFG)
    config = write_config(work, food, model, None if args.food101 else args.images)
    vlmgrid = [sys.executable, "-m", "vlmgrid.cli"]
    prepare = timed_run([*vlmgrid, "prepare", "food101", "--config", str(config)], env, work)
    timed_run(
        [*vlmgrid, "fetch-model", "tiny-clip", "--config", str(config)], env, work
    )  # records it in place
    runner = work / "clip_benchmark_runner.py"
    runner.write_text(CLIP_BENCHMARK_RUNNER, encoding="utf-8")
    argmax = work / "clip_benchmark_argmax.npy"
    clip_benchmark = [
        args.clip_benchmark_python,
        str(runner),
        str(argmax),
        "eval",
        "--dataset",
        "food101",
        "--dataset_root",
        str(food.parent),
        "--split",
        "test",
        "--task",
        "zeroshot_classification",
        "--model",
        f"local-dir:{model}",
        "--pretrained",
        "none",
        "--no_amp",
        "--batch_size",
        str(BATCH),
        "--output",
        str(work / "clip_benchmark.json"),
        "--quiet",
    ]
    if args.workers is not None:
        clip_benchmark += ["--num_workers", str(args.workers)]
    infer = [*vlmgrid, "infer", "tiny-clip", "food101", "--config", str(config)]
    predictions = work / "results" / "predictions" / "tiny-clip" / "food101.parquet"

    def vlmgrid_run(cold: bool) -> tuple[float, float]:
        predictions.unlink(missing_ok=True)
        if cold:
            shutil.rmtree(work / "cache", ignore_errors=True)
        return timed_run(infer, env, work)

    times: dict[str, list[tuple[float, float]]] = {
        "clip_benchmark": [],
        "vlmgrid cold": [],
        "vlmgrid warm": [],
    }
    load = [os.getloadavg()[0]]
    for _ in range(args.runs):  # interleaved, so that a change in the machine's load touches all three alike
        times["clip_benchmark"].append(timed_run(clip_benchmark, env, work))
        times["vlmgrid cold"].append(vlmgrid_run(cold=True))
        times["vlmgrid warm"].append(vlmgrid_run(cold=False))
        load.append(os.getloadavg()[0])

    import numpy as np

    theirs = np.load(argmax).tolist()
    ours = vlmgrid_predictions(work, food)
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    if len(ours) != len(theirs) or differing:
        print(
            f"predictions differ: {len(ours)} vs {len(theirs)} items, {len(differing)} differing "
            f"(first at item {differing[:1]})"
        )
        return 1
    median = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in times.items()
    }
    base_wall, base_cpu = median["clip_benchmark"]
    print(
        f"{len(ours)} images, {args.classes if not args.food101 else 'all'} classes: predictions equal item "
        "by item"
    )
    print(
        f"{platform.node()}, {os.cpu_count()} CPUs, 1-minute load {min(load):.1f}-{max(load):.1f} during "
        f"the runs; vlmgrid prepare (once, before): {prepare[0]:.1f} s wall, {prepare[1]:.1f} s CPU"
    )
    print(f"median of {args.runs} runs      wall s   CPU s   wall ratio   CPU ratio")
    for name, (wall, cpu) in median.items():
        print(f"{name:<22}{wall:>9.2f}{cpu:>8.2f}{wall / base_wall:>13.2f}{cpu / base_cpu:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
