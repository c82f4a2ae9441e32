"""perf/clip_benchmark.py's Food-101 folder is read alike by torchvision's Food101 (CLIP_benchmark's dataset)
and by vlmgrid's food101 kind, and its predictions are matched in the order CLIP_benchmark lists the
images."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from torchvision.datasets import Food101

from vlmgrid.benchmarks.dataset import load_benchmark
from vlmgrid.stages.prepare import prepare_benchmark

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("clip_benchmark_perf", REPO / "perf" / "clip_benchmark.py")
perf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf)


def test_both_tools_read_the_same_items_labels_and_order(tmp_path):
    food = perf.write_food101(tmp_path / "food", classes=3, images=7)
    theirs = Food101(str(tmp_path / "food"), split="test")
    assert theirs.classes == ["apple_pie", "baby_back_ribs", "baklava"]
    ids = perf.item_ids(food)
    # torchvision's order and labels, as "<class>-<id>" and class indices
    assert ids == [f"{p.parent.name}-{p.stem}" for p in theirs._image_files]
    assert ids[:3] == ["apple_pie-100000", "apple_pie-100003", "apple_pie-100006"]
    source = {"type": "local", "path": str(food), "expected_items": 7}
    prepare_benchmark("food101", {"kind": "food101", "source": source}, tmp_path / "bench")
    data = load_benchmark(tmp_path / "bench")
    records = dict(zip(data.records["id"], data.records["answer_index"].astype(int)))
    assert sorted(records) == sorted(ids)
    assert [records[i] for i in ids] == theirs._labels == [0, 0, 0, 1, 1, 2, 2]
    assert data.classes == ["apple pie", "baby back ribs", "baklava"]
