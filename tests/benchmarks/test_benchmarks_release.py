"""The vision-language benchmarks' data as their authors ship it (MMBench's TSV, MME's release folder,
ScienceQA's problems.json, TextVQA's JSON and images), read in place by a local source: the same fixture in
the release layout and in the hub layout prepares to the same records, images and prompts; the layout is
found from the files; what is missing or ambiguous is one sentence naming the file."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from vlmgrid.benchmarks import dataset, load_benchmark, mmbench, mme
from vlmgrid.benchmarks.catalog import BENCHMARKS
from vlmgrid.benchmarks.stamps import source_stamp
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES
from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture
from vlmgrid.fixtures.kinds import mme as mme_fixture
from vlmgrid.fixtures.kinds import scienceqa as scienceqa_fixture
from vlmgrid.fixtures.kinds import textvqa as textvqa_fixture
from vlmgrid.model_requests import GenerationResult
from vlmgrid.models.base import Backend
from vlmgrid.protocols import make_runner
from vlmgrid.registry import Registry
from vlmgrid.stages.prepare import prepare_benchmark


def _tsv_file(raw_dir: Path, settings: dict) -> Path:
    return mmbench_fixture.write_tsv_fixture(raw_dir, settings)


def _tsv_folder(raw_dir: Path, settings: dict) -> Path:
    mmbench_fixture.write_tsv_fixture(raw_dir, settings, name="mmbench_dev_20230712.tsv")
    return raw_dir


def _folder(writer):
    def write(raw_dir: Path, settings: dict) -> Path:
        writer(raw_dir, settings)
        return raw_dir

    return write


# kind -> (fixture size, how the release copy is written: returns the local source's `path`)
RELEASES = {
    "mmbench-tsv-file": ("mmbench", 6, _tsv_file),
    "mmbench-tsv-folder": ("mmbench", 6, _tsv_folder),
    "mme": ("mme", 10, _folder(mme_fixture.write_release_fixture)),
    "scienceqa_img": ("scienceqa_img", 9, _folder(scienceqa_fixture.write_release_fixture)),
    "textvqa": ("textvqa", 7, _folder(textvqa_fixture.write_release_fixture)),
}


def local(kind: str, path: Path, **source) -> dict:
    return {"kind": kind, "source": {"type": "local", "path": str(path), **source}}


class Echo(Backend):
    """Answers every generation request with "A", keeping the prompts it was asked."""

    name = "echo"
    capabilities = frozenset({"generate"})

    def __init__(self):
        super().__init__({})
        self.prompts: dict[str, str] = {}

    def generate_results(self, requests):
        self.prompts.update({request.id: request.prompt for request in requests})
        return [GenerationResult("A") for _ in requests]


def prompts(bench) -> dict[str, str]:
    model = Echo()
    make_runner(bench.kind.protocol, model, bench)[0](bench.records)
    return model.prompts


def image_hashes(bench) -> list[str]:
    return [
        hashlib.sha256(bench.image_path(image).read_bytes()).hexdigest() for image in bench.records["image"]
    ]


@pytest.mark.parametrize("case", sorted(RELEASES))
def test_release_and_hub_layouts_prepare_to_the_same_records_images_and_prompts(case, tmp_path):
    kind, size, write_release = RELEASES[case]
    settings = {**BENCHMARK_FIXTURES.get(kind).defaults, "size": size}
    hub_dir = tmp_path / "hub"
    BENCHMARK_FIXTURES.get(kind).write(hub_dir, settings)
    release = write_release(tmp_path / "release", settings)
    n = len(BENCHMARKS.get(kind).adapt(hub_dir, tmp_path / "probe").records)

    hub = prepare_benchmark("hub", local(kind, hub_dir, expected_items=n), tmp_path / "bench-hub")
    ours = prepare_benchmark("release", local(kind, release, expected_items=n), tmp_path / "bench-release")
    assert hub["n_items"] == ours["n_items"] == n

    a, b = load_benchmark(tmp_path / "bench-hub"), load_benchmark(tmp_path / "bench-release")
    # ScienceQA's release keeps each item's problem id, which the hub copy has none of
    extra = ["pid"] if kind == "scienceqa_img" else []
    assert list(b.records.columns) == list(a.records.columns) + extra
    pd.testing.assert_frame_equal(a.records, b.records.drop(columns=extra))
    if not extra:
        assert (tmp_path / "bench-hub" / "records.parquet").read_bytes() == (
            tmp_path / "bench-release" / "records.parquet"
        ).read_bytes()
    assert image_hashes(a) == image_hashes(b)
    assert prompts(a) == prompts(b) and len(prompts(a)) == n
    # the manifest hashes the release's own files, where they lie, and nothing of the hub layout
    raw = sorted(key for key in ours["files"] if Path(key).is_absolute())
    assert raw and all(key.startswith(str(release.resolve())) for key in raw)
    assert not any(key.endswith(".parquet") for key in raw)


def test_release_records_by_hand(tmp_path):
    """ScienceQA: the test problems with an image, in pid_splits.json's order, numbered as the hub's rows;
    MME: ids "<subtask>/<image file>#k"; MMBench TSV: a copy's image is its original's."""
    settings = {"seed": 0, "size": 3, "corrupt": 0}
    scienceqa_fixture.write_release_fixture(tmp_path / "sqa", {**settings, "size": 5})
    splits = json.loads((tmp_path / "sqa" / "pid_splits.json").read_text())
    problems = json.loads((tmp_path / "sqa" / "problems.json").read_text())
    # the fixture's test split: pid 1000 + 37 * (7i mod 23) + i for item i, and after the third item one
    # problem without an image (pid "7"); the last pid is below the one before it
    assert splits["test"] == ["1000", "1260", "1520", "7", "1780", "1189"] and problems["7"]["image"] is None
    assert splits["train"] == ["20002"] and problems["20002"]["split"] == "train"
    records = BENCHMARKS.get("scienceqa_img").adapt(tmp_path / "sqa", tmp_path / "b1").records
    assert list(records["id"]) == ["test-0", "test-1", "test-2", "test-3", "test-4"]
    assert list(records["question"]) == [
        problems[pid]["question"] for pid in ("1000", "1260", "1520", "1780", "1189")
    ]
    assert list(records["pid"]) == ["1000", "1260", "1520", "1780", "1189"]

    mme_fixture.write_release_fixture(tmp_path / "mme", {**settings, "size": 5})
    records = BENCHMARKS.get("mme").adapt(tmp_path / "mme", tmp_path / "b2").records
    # 5 images: existence 0000, 0001 (made 1st and 5th), count 0000, color 0000, OCR 0000
    assert list(records["id"]) == [
        "existence/0000.jpg#0",
        "existence/0000.jpg#1",
        "existence/0001.jpg#0",
        "existence/0001.jpg#1",
        "count/0000.png#0",
        "count/0000.png#1",
        "color/0000.jpg#0",
        "color/0000.jpg#1",
        "OCR/0000.png#0",
        "OCR/0000.png#1",
    ]
    assert list(records["answer"]) == ["yes", "no"] * 5

    path = mmbench_fixture.write_tsv_fixture(tmp_path / "mmb", {**settings, "size": 1})
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [row["image"] for row in rows[1:]] == [rows[0]["index"]]  # 2 options: one copy, pointing at row 1
    records = BENCHMARKS.get("mmbench").adapt(path, tmp_path / "b3").records
    assert records["image"].nunique() == 1 and list(records["circular_shift"]) == [0, 1]


def test_mme_release_with_images_apart_and_the_archive_folder(tmp_path):
    """A subtask with images/ and questions_answers_YN/ (scene, as in the release), under MME_Benchmark/."""
    root = tmp_path / "MME_Benchmark_release_version" / "MME_Benchmark"
    (root / "scene" / "images").mkdir(parents=True)
    (root / "scene" / "questions_answers_YN").mkdir()
    (root / "scene" / "images" / "sa_1.jpg").write_bytes(b"\xff\xd8scene")
    (root / "scene" / "questions_answers_YN" / "sa_1.txt").write_text(
        "Is this photo taken in a place of beach? Please answer yes or no.\tYes\n"
        "Is this photo taken in a place of forest? Please answer yes or no.\tNo\n\n"
    )
    records = BENCHMARKS.get("mme").adapt(root.parent, tmp_path / "bench").records
    assert list(records["id"]) == ["scene/sa_1.jpg#0", "scene/sa_1.jpg#1"]
    assert list(records["answer"]) == ["yes", "no"] and set(records["category"]) == {"scene"}
    assert (tmp_path / "bench" / records["image"][0]).read_bytes() == b"\xff\xd8scene"


def test_mmbench_dev_20230712_is_a_known_variant(tmp_path, monkeypatch):
    kind = BENCHMARKS.get("mmbench")
    source = {"type": "local", "path": "x"}
    assert dataset._check_count(4377, source, kind, Path("x")) == "dev_20230712"
    assert dataset._check_count(4329, source, kind, Path("x")) is None
    with pytest.raises(
        VlmgridError, match=r"holds 4000 mmbench items.*known variant dev_20230712: 4377 items"
    ):
        dataset._check_count(4000, source, kind, Path("x"))
    with pytest.raises(VlmgridError, match="`expected_items` is 17"):  # a source's own count rules
        dataset._check_count(4377, {**source, "expected_items": 17}, kind, Path("x"))
    # prepared without expected_items, a copy of the variant's count names the variant in its manifest
    small = replace(kind, variants={"dev_20230712": 17})
    monkeypatch.setattr(dataset, "BENCHMARKS", Registry("benchmark kind", [small]))
    path = mmbench_fixture.write_tsv_fixture(
        tmp_path / "raw", {"seed": 0, "size": 6, "corrupt": 0}, name="mmbench_dev_20230712.tsv"
    )
    manifest = prepare_benchmark("mmbench-llava", local("mmbench", path), tmp_path / "bench")
    assert (manifest["variant"], manifest["n_items"], manifest["expected_items"]) == ("dev_20230712", 17, 17)
    again = prepare_benchmark("mmbench-llava", local("mmbench", path), tmp_path / "bench")
    assert again["variant"] == "dev_20230712"


def test_a_tsv_file_path_is_stamped_and_hashed_alone(tmp_path):
    path = mmbench_fixture.write_tsv_fixture(tmp_path, {"seed": 0, "size": 2, "corrupt": 0})
    (tmp_path / "MMBench_TEST_EN.tsv").write_text("not read\n")
    stamp = source_stamp(local("mmbench", path))
    assert stamp["path"] == str(path.resolve()) and [entry[0] for entry in stamp["files"]] == [
        "MMBench_DEV_EN.tsv"
    ]
    assert stamp["files"][0][1] == path.stat().st_size


# ---------------------------------------------------------------------------------------------- bad input


def test_a_folder_in_no_layout_names_what_it_needs(tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "notes.txt").write_text("hello\n")
    for kind, needs in (
        ("mmbench", "MMBench_DEV_EN.tsv"),
        ("mme", "<subtask>/<name>.txt"),
        ("scienceqa_img", "problems.json"),
        ("textvqa", "TextVQA_0.5.1_val.json"),
    ):
        with pytest.raises(VlmgridError) as error:
            prepare_benchmark("b", local(kind, copy, expected_items=1), tmp_path / f"bench-{kind}")
        assert str(error.value).startswith(
            f"{copy.resolve()}: holds no {kind} data in a layout"
        ) and needs in str(error.value)


def test_a_folder_in_two_layouts_or_with_two_tsv_files_is_ambiguous(tmp_path):
    settings = {"seed": 0, "size": 2, "corrupt": 0}
    mmbench_fixture.write_tsv_fixture(tmp_path, settings)
    mmbench_fixture.write_tsv_fixture(tmp_path, settings, name="MMBench_DEV_EN_V11.tsv")
    with pytest.raises(
        VlmgridError,
        match=r"holds 2 mmbench files \(MMBench_DEV_EN.tsv, MMBench_DEV_EN_V11.tsv\); "
        r"point `path` at the one",
    ):
        mmbench.adapt(tmp_path, tmp_path / "bench")
    mmbench_fixture.write_fixture(tmp_path, settings)
    with pytest.raises(
        VlmgridError,
        match=r"in more than one layout "
        r"\(en/dev-00000-of-00001.parquet \(hub\), MMBench_DEV_EN.tsv \(tsv\)\)",
    ):
        mmbench.adapt(tmp_path, tmp_path / "bench")


def test_a_file_path_that_is_no_data_file_of_the_kind(tmp_path):
    path = tmp_path / "MMBench_TEST_EN.tsv"
    path.write_text("index\n")
    with pytest.raises(VlmgridError, match=r"MMBench_TEST_EN.tsv: not one of the mmbench files it may name"):
        prepare_benchmark("b", local("mmbench", path, expected_items=1), tmp_path / "bench")


def test_a_tsv_missing_a_column(tmp_path):
    path = mmbench_fixture.write_tsv_fixture(tmp_path, {"seed": 0, "size": 2, "corrupt": 0})
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    drop = header.index("l2-category")
    path.write_text(
        "".join("\t".join(c for i, c in enumerate(line.split("\t")) if i != drop) + "\n" for line in lines)
    )
    with pytest.raises(VlmgridError) as error:
        mmbench.adapt(path, tmp_path / "bench")
    assert str(error.value).startswith(
        f"{path}: has no column 'l2-category' (its header has index, question, hint,"
    )


def test_an_mmbench_row_whose_image_refers_to_no_row(tmp_path):
    path = mmbench_fixture.write_tsv_fixture(tmp_path, {"seed": 0, "size": 1, "corrupt": 0})
    lines = path.read_text().splitlines()
    cells = lines[2].split("\t")
    cells[9] = "999"
    path.write_text("\n".join(lines[:2] + ["\t".join(cells)]) + "\n")
    with pytest.raises(
        VlmgridError, match=r"line 3: image '999' is neither an image nor the index of a row with one"
    ):
        mmbench.adapt(path, tmp_path / "bench")


def test_an_mme_question_file_without_its_image(tmp_path):
    mme_fixture.write_release_fixture(tmp_path, {"seed": 0, "size": 4, "corrupt": 0})
    (tmp_path / "count" / "0000.png").unlink()
    with pytest.raises(VlmgridError) as error:
        mme.adapt(tmp_path, tmp_path / "bench")
    assert str(error.value) == (
        f"{tmp_path / 'count' / '0000.txt'}: its image 0000.jpg (or .png) is missing from "
        f"{tmp_path / 'count'}; the release folder is incomplete: restore the image from "
        "MME_Benchmark_release_version"
    )


def test_problems_json_without_its_split_file(tmp_path):
    copy = tmp_path / "copy"
    scienceqa_fixture.write_release_fixture(copy, {"seed": 0, "size": 2, "corrupt": 0})
    (copy / "pid_splits.json").unlink()
    with pytest.raises(VlmgridError) as error:
        prepare_benchmark("b", local("scienceqa_img", copy), tmp_path / "bench")
    assert str(error.value).startswith(f"{copy.resolve() / 'pid_splits.json'}: missing beside problems.json;")


DEEP = "[" * 200_000 + "]" * 200_000  # valid JSON nested past Python's recursion limit


@pytest.mark.parametrize("kind", ["scienceqa", "textvqa"])
def test_a_release_json_nested_too_deeply_is_one_sentence_naming_it(tmp_path, kind):
    if kind == "scienceqa":
        scienceqa_fixture.write_release_fixture(tmp_path, {"seed": 0, "size": 2, "corrupt": 0})
        damaged, adapt = tmp_path / "problems.json", BENCHMARKS.get("scienceqa_img").adapt
    else:
        textvqa_fixture.write_release_fixture(tmp_path, {"seed": 0, "size": 2, "corrupt": 0})
        damaged, adapt = tmp_path / "TextVQA_0.5.1_val.json", BENCHMARKS.get("textvqa").adapt
    damaged.write_text(DEEP)
    with pytest.raises(VlmgridError, match=rf"^{damaged}: not readable (TextVQA )?JSON \(maximum recursion"):
        adapt(tmp_path, tmp_path / "bench")


def test_textvqa_question_without_its_image(tmp_path):
    textvqa_fixture.write_release_fixture(tmp_path, {"seed": 0, "size": 2, "corrupt": 0})
    image = next((tmp_path / "train_images").glob("*.jpg"))
    image.unlink()
    with pytest.raises(
        VlmgridError, match=rf"{image.name}: missing \(the image of .*TextVQA_0.5.1_val.json entry 0\)"
    ):
        BENCHMARKS.get("textvqa").adapt(tmp_path, tmp_path / "bench")
