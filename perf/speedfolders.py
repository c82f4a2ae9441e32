"""perf/speed.py's benchmark folders: photo-like JPEG files in each benchmark's layout, with their records."""

from __future__ import annotations

from pathlib import Path

PHOTO_SIZE = (500, 375)  # ImageNet's typical picture


def write_photos(folder: Path, names: list[str], seed: int = 0) -> None:
    """Photo-like JPEGs (smooth content plus noise, quality 90) of ImageNet's typical size at the given
    names."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    width, height = PHOTO_SIZE
    for name in names:
        small = Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).resize(
            (width, height), Image.BICUBIC
        )
        noisy = np.asarray(small).astype(np.int16) + rng.integers(-12, 12, (height, width, 3))
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(path, quality=90)


def folder_benchmark(kind: str, root: Path, records, classes=None):
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.benchmarks.dataset import Benchmark

    return Benchmark(
        name=f"speed-{kind}",
        kind=BENCHMARKS.get(kind),
        root=root,
        records=records,
        classes=classes,
        manifest={},
    )


def imagenet_folder(n: int, work: Path):
    """A benchmark of n photo-like JPEGs in ImageNet's folder layout, 10 classes."""
    import pandas as pd

    n_classes = 10
    synsets = [f"n{1440764 + k:08d}" for k in range(n_classes)]
    names = [f"images/{synsets[i % n_classes]}/ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(n)]
    bench_dir = work / "imagenet"
    write_photos(bench_dir, names)
    records = pd.DataFrame(
        {
            "id": [f"val-{i}" for i in range(n)],
            "image": names,
            "question": "",
            "options": [[] for _ in names],
            "answer": "",
            "answer_index": [i % n_classes for i in range(n)],
        }
    )
    return folder_benchmark("imagenet", bench_dir, records, [f"class {k}" for k in range(n_classes)])


QUESTIONS = (
    "Which of the one is in the picture ?",
    "What is the small animal in the image ?",
    "How many red car are there in the photo ?",
    "Which option is the man on the left ?",
)
OPTIONS = (["cat", "dog", "bird", "tree"], ["red", "green", "blue", "black"], ["one", "two", "three", "four"])


def item_records(n: int, folder: Path, prefix: str):
    import pandas as pd

    names = [f"images/{prefix}-{i:06d}.jpg" for i in range(n)]
    write_photos(folder, names, seed=1)
    return pd.DataFrame(
        {
            "id": [f"{prefix}-{i}" for i in range(n)],
            "image": names,
            "question": [QUESTIONS[i % len(QUESTIONS)] for i in range(n)],
            "options": [OPTIONS[i % len(OPTIONS)] for i in range(n)],
            "answer": "",
            "answer_index": 0,
            "hint": ["Look at the picture ." if i % 2 else "" for i in range(n)],
        }
    )


RIDDLE_WORDS = (
    "this is used for cutting bread a red small animal with fur that you can find in the house or "
    "on a tree and it is green blue black white large left right"
).split()


# A riddle's length in the model's tokens: the candidates' of the H200's ranking measurement (gpu_limits.py),
# which the ranking's goal (7x fifty full forwards) was set from. In words it depends on the tokenizer: 24
# tokens are about 20 words to LLaVA's, 14 to the fixture's tokenizer of 512 pieces.
RIDDLE_TOKENS = 24


def riddle(rng, tokenizer, tokens: int = RIDDLE_TOKENS) -> str:
    """Random riddle words ending in " .", as many as keep it within `tokens` of the tokenizer (as it follows
    the prompt: after a space)."""
    words: list[str] = []
    while True:
        word = str(rng.choice(RIDDLE_WORDS))
        text = " ".join([*words, word]) + " ."
        if words and len(tokenizer.encode(" " + text, add_special_tokens=False)) > tokens:
            return " ".join(words) + " ."
        words.append(word)


def dance_folder(n: int, k: int, work: Path, tokenizer):
    """A DANCE benchmark of n pictures, each to be matched with one of k riddles of RIDDLE_TOKENS tokens."""
    import numpy as np
    import pandas as pd

    folder = work / "dance"
    names = [f"images/entity-{i:04d}.jpg" for i in range(n)]
    write_photos(folder, names, seed=2)
    rng = np.random.default_rng(0)
    riddles = [[riddle(rng, tokenizer) for _ in range(k)] for _ in range(n)]
    records = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "image": names,
            "question": "",
            "options": riddles,
            "answer": "",
            "answer_index": 0,
            "direction": "image-to-riddle",
            "split": "test-seen",
        }
    )
    return folder_benchmark("dance", folder, records)
