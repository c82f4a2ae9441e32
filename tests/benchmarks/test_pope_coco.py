"""POPE from its original label files (coco/coco_pope_<split>.json + val2014/): the same records as the hub
copy, a published variant's own item count, and one clear sentence for a missing image or a damaged line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlmgrid.benchmarks import BENCHMARKS, load_benchmark
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES
from vlmgrid.stages.prepare import prepare_benchmark


def _label_copy(folder: Path, size: int = 12) -> Path:
    fixture = BENCHMARK_FIXTURES.get("pope_coco")
    fixture.write(folder, {**fixture.defaults, "size": size})
    return folder


def test_the_label_files_give_the_records_of_the_hub_copy(tmp_path):
    prepare_benchmark(
        "labels", {"kind": "pope_coco", "source": {"type": "fixture", "size": 12}}, tmp_path / "labels"
    )
    prepare_benchmark("hub", {"kind": "pope", "source": {"type": "fixture", "size": 12}}, tmp_path / "hub")
    labels, hub = load_benchmark(tmp_path / "labels").records, load_benchmark(tmp_path / "hub").records
    assert len(labels) == 36
    same = ["id", "question", "options", "answer", "answer_index", "split", "category", "question_id"]
    assert labels[same].equals(hub[same])
    # The pixels are the same images, read from val2014/ instead of the parquet files.
    for a, b in zip(labels["image"], hub["image"]):
        assert (tmp_path / "labels" / a).read_bytes() == (tmp_path / "hub" / b).read_bytes()
    kind = BENCHMARKS.get("pope_coco")
    assert (kind.protocol, kind.metric, kind.expected_count, kind.default_source["type"]) == (
        "yes_no",
        "pope",
        9000,
        "local",
    )


def test_a_raw_label_line_is_read_as_published(tmp_path):
    copy = _label_copy(tmp_path / "pope")
    first = json.loads((copy / "coco/coco_pope_popular.json").read_text().splitlines()[0])
    assert set(first) == {"question_id", "image", "text", "label"} and first["image"].startswith(
        "COCO_val2014_"
    )
    prepare_benchmark(
        "pope",
        {"kind": "pope_coco", "source": {"type": "local", "path": str(copy), "expected_items": 36}},
        tmp_path / "bench",
    )
    record = load_benchmark(tmp_path / "bench").records.set_index("id").loc[f"popular-{first['question_id']}"]
    assert (record["question"], record["answer"], record["image_source"]) == (
        first["text"],
        first["label"],
        first["image"][:-4],
    )


def test_a_local_copy_is_checked_against_its_variants_count(tmp_path):
    copy = _label_copy(tmp_path / "pope")
    with pytest.raises(VlmgridError, match="holds 36 pope_coco items, but the published benchmark has 9000"):
        prepare_benchmark(
            "pope", {"kind": "pope_coco", "source": {"type": "local", "path": str(copy)}}, tmp_path / "b"
        )
    # LLaVA's copy drops 90 questions of the random split: such a variant states its own count.
    lines = (copy / "coco/coco_pope_random.json").read_text().splitlines()
    (copy / "coco/coco_pope_random.json").write_text("\n".join(lines[:9]) + "\n")
    manifest = prepare_benchmark(
        "pope",
        {"kind": "pope_coco", "source": {"type": "local", "path": str(copy), "expected_items": 33}},
        tmp_path / "b",
    )
    assert manifest["n_items"] == manifest["expected_items"] == 33


def test_a_missing_image_or_a_damaged_line_is_one_sentence(tmp_path):
    copy = _label_copy(tmp_path / "pope")
    image = sorted((copy / "val2014").iterdir())[0]
    image.unlink()
    with pytest.raises(
        VlmgridError,
        match=rf"{image}: missing, though .*coco_pope_random.json line 1 asks about it; put the COCO 2014 "
        r"validation images",
    ):
        prepare_benchmark(
            "pope", {"kind": "pope_coco", "source": {"type": "local", "path": str(copy)}}, tmp_path / "b"
        )
    copy = _label_copy(tmp_path / "pope2")
    path = copy / "coco/coco_pope_adversarial.json"
    path.write_text(path.read_text().replace('"label": "no"', '"label": "maybe"', 1))
    with pytest.raises(
        VlmgridError, match=r"coco_pope_adversarial.json line \d+: label 'maybe' is not yes/no"
    ):
        prepare_benchmark(
            "pope", {"kind": "pope_coco", "source": {"type": "local", "path": str(copy)}}, tmp_path / "b2"
        )
    path.write_text('{"question_id": 1, "image": "x.jpg"}\n')
    with pytest.raises(VlmgridError, match=r"line 1: has no `text`"):
        prepare_benchmark(
            "pope", {"kind": "pope_coco", "source": {"type": "local", "path": str(copy)}}, tmp_path / "b3"
        )
