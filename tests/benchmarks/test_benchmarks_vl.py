"""The vision-language benchmark kinds (MME, MMBench, CV-Bench, MMVP, TextVQA): fixtures in each kind's real
raw layout -> prepare -> records, and each adapter's own rules (MME pairs, MMBench circular expansion,
CV-Bench sources, MMVP label corrections and pairs, TextVQA's ten answers)."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers.chain import opens

from vlmgrid.benchmarks import BENCHMARKS, load_benchmark, mmbench, mme, mmvp, textvqa
from vlmgrid.benchmarks.rawio import write_hub_parquet
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import cvbench as cvbench_fixture
from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture
from vlmgrid.fixtures.kinds import mme as mme_fixture
from vlmgrid.fixtures.kinds import mmvp as mmvp_fixture
from vlmgrid.fixtures.kinds import textvqa as textvqa_fixture
from vlmgrid.stages.prepare import prepare_benchmark

KINDS = ("mme", "mmbench", "cvbench", "mmvp", "textvqa")
# Items a default fixture yields: MME 8 images x 2 questions; MMBench 6 questions with 2, 3, 4, 2, 3, 4
# options, one record per published row (a question and its copies; the last has two copies only);
# CV-Bench 8 per file x 2 files; MMVP 10 pairs; TextVQA 12.
DEFAULT_COUNTS = {"mme": 16, "mmbench": 17, "cvbench": 16, "mmvp": 20, "textvqa": 12}
EXTRA_COLUMNS = {
    "mme": {"category": str, "image_id": str},
    "mmbench": {
        "hint": str,
        "category": str,
        "l2_category": str,
        "circular_group": int,
        "circular_shift": int,
    },
    "cvbench": {"source": str, "task": str, "type": str, "prompt": str},
    "mmvp": {"pair_id": int, "label_corrected": bool, "options_text": str},
    "textvqa": {"answers": list, "ocr_tokens": list, "image_id": str},
}
CANONICAL = ["id", "image", "question", "options", "answer", "answer_index"]


def prepare(kind: str, bench_dir: Path, **source) -> dict:
    return prepare_benchmark(
        f"{kind}-fixture", {"kind": kind, "source": {"type": "fixture", **source}}, bench_dir
    )


def records(bench_dir: Path) -> pd.DataFrame:
    return load_benchmark(bench_dir).records


def prepared_records(kind: str, bench_dir: Path, **source) -> pd.DataFrame:
    """The records of the kind's fixture, prepared in bench_dir."""
    prepare(kind, bench_dir, **source)
    return records(bench_dir)


def test_kinds_are_registered_with_protocol_metric_parser_and_source():
    expected = {
        "mme": ("yes_no", "mme", "mme", ("category",), 2374, "lmms-lab/MME"),
        "mmbench": (
            "multiple_choice",
            "mmbench_circular",
            "mmbench",
            ("category",),
            4329,
            "lmms-lab/MMBench",
        ),
        "cvbench": (
            "multiple_choice",
            "cvbench",
            "cvbench",
            ("source", "task"),
            2638,
            "nyu-visionx/CV-Bench",
        ),
        "mmvp": ("multiple_choice", "mmvp", "letter", (), 300, "MMVP/MMVP"),
        "textvqa": ("short_answer", "vqa_accuracy", "short_answer", (), 5000, "lmms-lab/textvqa"),
    }
    for name, (protocol, metric, parser, breakdown, count, repo) in expected.items():
        kind = BENCHMARKS.get(name)
        assert (kind.protocol, kind.metric, kind.parser, kind.breakdown_by) == (
            protocol,
            metric,
            parser,
            breakdown,
        )
        assert kind.expected_count == count and kind.templates == ()
        assert kind.default_source["type"] == "hf_hub" and kind.default_source["repo"] == repo
        assert kind.description and "\n" not in kind.description
    # The two pins found in a public source are full commits; the others are left to the config.
    assert BENCHMARKS.get("cvbench").hub["revision"] == "bc284db50d036958861cb60cdd7b77612052ce0d"
    assert BENCHMARKS.get("textvqa").hub["revision"] == "9c0699cd19768ac5ab97568f6b3cbac4c0062884"
    assert BENCHMARKS.get("mmbench").default_source["config"] == "en"
    assert BENCHMARKS.get("mmbench").default_source["split"] == "dev"
    assert BENCHMARKS.get("cvbench").raw_files == ("test_2d.parquet", "test_3d.parquet")
    assert BENCHMARKS.get("mmvp").raw_files == ("Questions.csv", "MMVP Images/*.jpg")


@pytest.mark.parametrize("kind", KINDS)
def test_fixture_prepares_to_canonical_records(kind, tmp_path):
    bench_dir = tmp_path / kind
    manifest = prepare(kind, bench_dir)
    table = pq.read_table(bench_dir / "records.parquet")
    assert table.column_names[:6] == CANONICAL
    assert set(table.column_names[6:]) == set(EXTRA_COLUMNS[kind])
    frame = records(bench_dir)
    assert len(frame) == manifest["n_items"] == DEFAULT_COUNTS[kind]
    assert frame["id"].is_unique
    for column, kind_of_value in EXTRA_COLUMNS[kind].items():
        for value in frame[column]:
            if kind_of_value is list:
                assert hasattr(value, "__len__") and not isinstance(value, str)
            elif kind_of_value is int:
                assert isinstance(value, int) or hasattr(value, "dtype") and value.dtype.kind == "i"
            elif kind_of_value is bool:
                assert value in (True, False)
            else:
                assert isinstance(value, str)
    for row in frame.itertuples():
        assert opens(bench_dir / row.image), row.image
        options = list(row.options)
        if kind == "textvqa":
            assert options == [] and row.answer_index == -1 and row.answer
        else:
            assert options[row.answer_index] == row.answer
    # Images are stored by content hash: as many files as distinct images.
    assert len(list((bench_dir / "images").iterdir())) == frame["image"].nunique()


@pytest.mark.parametrize("kind", KINDS)
def test_fixture_is_deterministic(kind, tmp_path):
    first = prepare(kind, tmp_path / "a")
    second = prepare(kind, tmp_path / "b")
    other = prepare(kind, tmp_path / "c", seed=1)
    assert first["fingerprint"] == second["fingerprint"]
    assert first["files"] == second["files"]
    assert other["fingerprint"] != first["fingerprint"]


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_fixture_images_do_not_open(kind, tmp_path):
    bench_dir = tmp_path / kind
    prepare(kind, bench_dir, corrupt=1)
    frame = records(bench_dir)
    broken = {image for image in frame["image"].unique() if not opens(bench_dir / image)}
    assert len(broken) == 1


# ---------------------------------------------------------------------------------------------- MME


def test_mme_pairs_share_an_image_and_have_one_yes_and_one_no(tmp_path):
    bench_dir = tmp_path / "mme"
    frame = prepared_records("mme", bench_dir, size=10)
    raw = pd.read_parquet(bench_dir / "raw" / mme_fixture.FIXTURE_FILE)
    assert set(raw["answer"]) == {"Yes", "No"} and len(raw) == 20
    assert set(frame["answer"]) == {"yes", "no"}
    assert all(list(o) == ["yes", "no"] for o in frame["options"])
    assert set(frame["category"]) <= set(mme.CATEGORIES) and len(set(frame["category"])) == 4
    for image_id, group in frame.groupby("image_id"):
        assert sorted(group["answer"]) == ["no", "yes"]
        assert sorted(group["id"]) == [f"{image_id}#0", f"{image_id}#1"]
        assert group["image"].nunique() == 1
        assert image_id.startswith(group["category"].iloc[0] + "/")
    assert frame["image_id"].nunique() == 10


def test_mme_rejects_an_unknown_category(tmp_path):
    raw_dir = tmp_path / "raw"
    mme_fixture.write_fixture(raw_dir, {"seed": 0, "size": 2, "corrupt": 0})
    path = raw_dir / mme_fixture.FIXTURE_FILE
    rows = pq.read_table(path).to_pylist()
    rows[0]["category"] = "Existence"
    write_hub_parquet(path, mme.SCHEMA, rows, mme.FEATURES)
    with pytest.raises(VlmgridError, match="14 subtasks"):
        mme.adapt(raw_dir, tmp_path / "bench")


# ---------------------------------------------------------------------------------------------- MMBench


def _mmbench_raw(bench_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(bench_dir / "raw" / mmbench_fixture.FIXTURE_FILE)


def test_mmbench_rotation_by_hand(tmp_path):
    bench_dir = tmp_path / "mmbench"
    prepare("mmbench", bench_dir)
    raw = _mmbench_raw(bench_dir)
    frame = records(bench_dir).set_index("id")
    # The third question has 4 options (2, 3, 4 in turn) and all three copies.
    base = raw[raw["index"] < mmbench.GROUP].iloc[2]
    a, b, c, d = base["A"], base["B"], base["C"], base["D"]
    answer = {"A": a, "B": b, "C": c, "D": d}[base["answer"]]
    group = int(base["index"])
    # The authors' convention: copy k holds at position i the original option (i - k) mod n.
    by_hand = {0: [a, b, c, d], 1: [d, a, b, c], 2: [c, d, a, b], 3: [b, c, d, a]}
    for k, options in by_hand.items():
        row = frame.loc[str(group + k * 1_000_000)]
        assert list(row["options"]) == options
        assert row["answer"] == answer and options[row["answer_index"]] == answer
        assert (row["circular_group"], row["circular_shift"]) == (group, k)
    assert str(group + 4 * 1_000_000) not in frame.index


def test_mmbench_records_are_the_raw_rows(tmp_path):
    bench_dir = tmp_path / "mmbench"
    prepare("mmbench", bench_dir, size=9)
    raw = _mmbench_raw(bench_dir)
    frame = records(bench_dir)
    assert list(frame["id"]) == [str(i) for i in raw["index"]]
    for (_, row), (_, record) in zip(raw.iterrows(), frame.iterrows()):
        options = [row[letter] for letter in "ABCD" if isinstance(row[letter], str) and row[letter] != "nan"]
        assert list(record["options"]) == options
        assert "ABCD"[record["answer_index"]] == row["answer"]
        assert record["answer"] == row[row["answer"]]
        assert (record["circular_group"], record["circular_shift"]) == (
            row["index"] % 1_000_000,
            row["index"] // 1_000_000,
        )


def test_mmbench_fixture_holds_a_two_copy_group_that_keeps_d(tmp_path):
    bench_dir = tmp_path / "mmbench"
    frame = prepared_records("mmbench", bench_dir, size=9)
    sizes = Counter()
    for group, rows in frame.groupby("circular_group"):
        n = len(rows.iloc[0]["options"])
        assert rows["answer"].nunique() == 1  # every copy keeps the correct option text
        assert all(sorted(o) == sorted(rows.iloc[0]["options"]) for o in rows["options"])
        assert sorted(rows["id"]) == sorted(str(group + k * 1_000_000) for k in range(len(rows)))
        sizes[(n, len(rows))] += 1
        if len(rows) < n:  # the two-copy question: A-C rotate, D stays
            assert len(rows) == 3 and n == 4
            assert rows["options"].map(lambda o: o[3]).nunique() == 1
            assert sorted(rows["answer_index"]) == [0, 1, 2] or rows["answer_index"].nunique() == 1
    assert sizes == {(2, 2): 3, (3, 3): 3, (4, 4): 2, (4, 3): 1}
    # Missing options spelled None and "nan" are both dropped.
    assert not any("nan" in list(o) for o in frame["options"])


def test_mmbench_expands_a_raw_file_of_originals_only_in_the_published_convention(tmp_path):
    bench_dir = tmp_path / "mmbench"
    prepare("mmbench", bench_dir, size=5)  # no two-copy question among the first five
    published = records(bench_dir).drop(columns=["image"])
    raw_dir = tmp_path / "originals"
    rows = [
        r
        for r in pq.read_table(bench_dir / "raw" / mmbench_fixture.FIXTURE_FILE).to_pylist()
        if r["index"] < mmbench.GROUP
    ]
    assert len(rows) == 5
    write_hub_parquet(raw_dir / mmbench_fixture.FIXTURE_FILE, mmbench.SCHEMA, rows, mmbench.FEATURES)
    adapted = mmbench.adapt(raw_dir, tmp_path / "bench2").records.drop(columns=["image"])
    pd.testing.assert_frame_equal(
        adapted.sort_values("id").reset_index(drop=True),
        published.sort_values("id").reset_index(drop=True).astype(adapted.dtypes.to_dict()),
        check_dtype=False,
    )


def test_mmbench_checks_the_published_copies(tmp_path):
    bench_dir = tmp_path / "mmbench"
    prepare("mmbench", bench_dir)
    raw = pq.read_table(bench_dir / "raw" / mmbench_fixture.FIXTURE_FILE).to_pylist()

    def adapt_with(rows: list[dict], name: str, schema=mmbench.SCHEMA):
        raw_dir = tmp_path / name
        write_hub_parquet(raw_dir / mmbench_fixture.FIXTURE_FILE, schema, rows, mmbench.FEATURES)
        return mmbench.adapt(raw_dir, tmp_path / f"{name}-bench")

    assert len(adapt_with(raw, "same").records) == 17
    # A group scores over the rows the file has: a file with one copy fewer is read as it is.
    copy = next(n for n, r in enumerate(raw) if r["index"] >= mmbench.GROUP)
    fewer = adapt_with(raw[:copy] + raw[copy + 1 :], "fewer").records
    assert list(fewer["id"]) == [str(r["index"]) for r in raw[:copy] + raw[copy + 1 :]]
    wrong = [dict(r) for r in raw]
    wrong[copy]["answer"] = "A" if wrong[copy]["answer"] != "A" else "B"
    with pytest.raises(VlmgridError, match="does not hold the options and correct answer"):
        adapt_with(wrong, "wrong")
    original = next(n for n, r in enumerate(raw) if r["index"] == raw[copy]["index"] % mmbench.GROUP)
    with pytest.raises(VlmgridError, match="has no original question"):
        adapt_with(raw[:original] + raw[original + 1 :], "orphan")
    with pytest.raises(VlmgridError, match="appears twice"):
        adapt_with(raw + raw[:1], "repeated")
    # The index column may be a string in the hub copy: it is cast.
    as_text = [{**r, "index": str(r["index"])} for r in raw]
    schema = mmbench.SCHEMA.set(0, mmbench.pa.field("index", mmbench.pa.string()))
    assert len(adapt_with(as_text, "text-index", schema).records) == 17


# ---------------------------------------------------------------------------------------------- CV-Bench


def test_cvbench_keeps_sources_tasks_and_types(tmp_path):
    bench_dir = tmp_path / "cvbench"
    frame = prepared_records("cvbench", bench_dir, size=8)
    raw2d = pd.read_parquet(bench_dir / "raw" / "test_2d.parquet")
    raw3d = pd.read_parquet(bench_dir / "raw" / "test_3d.parquet")
    assert len(raw2d) == len(raw3d) == 8 and set(raw2d["answer"].str[0]) == {"("}
    by_type = frame.groupby("type")
    assert set(by_type.get_group("2D")["source"]) == {"ADE20K", "COCO"}
    assert set(by_type.get_group("3D")["source"]) == {"Omni3D"}
    assert set(by_type.get_group("2D")["task"]) == {"Count", "Relation"}
    assert set(by_type.get_group("3D")["task"]) == {"Depth", "Distance"}
    assert sorted(frame["id"]) == sorted([f"2D-{i}" for i in range(8)] + [f"3D-{i}" for i in range(8)])
    first = frame.set_index("id").loc["2D-1"]
    raw_first = raw2d.iloc[1]
    assert list(first["options"]) == list(raw_first["choices"])
    assert first["answer_index"] == ord(raw_first["answer"][1]) - ord("A")
    assert f"({raw_first['answer'][1]}) {first['answer']}" in first["prompt"]


def test_cvbench_rejects_an_answer_outside_the_choices(tmp_path):
    from vlmgrid.benchmarks import cvbench

    raw_dir = tmp_path / "raw"
    cvbench_fixture.write_fixture(raw_dir, {"seed": 0, "size": 2, "corrupt": 0})
    rows = pq.read_table(raw_dir / "test_3d.parquet").to_pylist()
    rows[0]["answer"] = "(C)"  # depth questions have two choices
    write_hub_parquet(raw_dir / "test_3d.parquet", cvbench.SCHEMA, rows, cvbench.FEATURES)
    with pytest.raises(VlmgridError, match="not one of its 2 choices"):
        cvbench.adapt(raw_dir, tmp_path / "bench")


# ---------------------------------------------------------------------------------------------- MMVP


def test_mmvp_pairs(tmp_path):
    bench_dir = tmp_path / "mmvp"
    frame = prepared_records("mmvp", bench_dir, size=6)
    assert sorted(frame["id"].astype(int)) == list(range(1, 13))
    assert (frame["pair_id"] == (frame["id"].astype(int) + 1) // 2).all()
    for _, pair in frame.groupby("pair_id"):
        assert len(pair) == 2 and pair["question"].nunique() == 1
        assert sorted(pair["answer_index"]) == [0, 1]  # a pair's two images have opposite answers
        assert pair["image"].nunique() == 2
    assert not frame["label_corrected"].any()
    assert (bench_dir / "raw" / "MMVP Images" / "12.jpg").is_file()


def test_mmvp_applies_the_label_corrections(tmp_path):
    bench_dir = tmp_path / "mmvp"
    prepare("mmvp", bench_dir, size=150)
    with open(bench_dir / "raw" / "Questions.csv", encoding="utf-8") as handle:
        published = {int(r["Index"]): r["Correct Answer"] for r in csv.DictReader(handle)}
    # The fixture carries the original copy's wrong labels ...
    assert [published[i] for i in (99, 100, 279, 280)] == ["(a)", "(b)", "(a)", "(b)"]
    frame = records(bench_dir).set_index("id")
    assert len(frame) == 300
    # ... and the records the corrected ones.
    assert [frame.loc[i, "answer"] for i in ("99", "100", "279", "280")] == [
        "Short",
        "Long",
        "Sitting",
        "Standing",
    ]
    assert sorted(frame.index[frame["label_corrected"]].astype(int)) == [99, 100, 279, 280]
    assert frame.loc["98", "answer"] == list(frame.loc["98", "options"])[0 if published[98] == "(a)" else 1]
    assert (frame.loc[["99", "100"], "pair_id"] == 50).all() and (
        frame.loc[["279", "280"], "pair_id"] == 140
    ).all()


def _rewrite_csv(raw_dir: Path, change) -> None:
    path = raw_dir / "Questions.csv"
    with open(path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        change(row)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(mmvp.HEADER), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def test_mmvp_corrections_are_checked_against_the_row(tmp_path):
    raw_dir = tmp_path / "raw"
    mmvp_fixture.write_fixture(raw_dir, {"seed": 0, "size": 50, "corrupt": 0})

    def already_corrected(row):
        if row["Index"] == "99":
            row["Correct Answer"] = "(b)"

    _rewrite_csv(raw_dir, already_corrected)
    frame = mmvp.adapt(raw_dir, tmp_path / "b1").records.set_index("id")
    assert frame.loc["99", "answer"] == "Short" and not frame.loc["99", "label_corrected"]
    assert frame.loc["100", "answer"] == "Long" and frame.loc["100", "label_corrected"]

    def other_options(row):
        if row["Index"] == "100":
            row["Options"] = "(a) Big (b) Small"

    _rewrite_csv(raw_dir, other_options)
    with pytest.raises(VlmgridError, match="Index 100 expects options"):
        mmvp.adapt(raw_dir, tmp_path / "b2")


def test_mmvp_needs_whole_pairs_and_every_image(tmp_path):
    raw_dir = tmp_path / "raw"
    mmvp_fixture.write_fixture(raw_dir, {"seed": 0, "size": 3, "corrupt": 0})
    (raw_dir / "MMVP Images" / "4.jpg").unlink()
    with pytest.raises(VlmgridError, match="4.jpg: missing"):
        mmvp.adapt(raw_dir, tmp_path / "b1")
    shutil.rmtree(raw_dir)
    mmvp_fixture.write_fixture(raw_dir, {"seed": 0, "size": 3, "corrupt": 0})
    path = raw_dir / "Questions.csv"
    path.write_text("".join(path.read_text("utf-8").splitlines(keepends=True)[:-1]), "utf-8")
    with pytest.raises(VlmgridError, match="pair 3 .* has 1 row"):
        mmvp.adapt(raw_dir, tmp_path / "b2")


# ---------------------------------------------------------------------------------------------- TextVQA


def test_textvqa_keeps_ten_answers_and_the_majority(tmp_path):
    bench_dir = tmp_path / "textvqa"
    frame = prepared_records("textvqa", bench_dir, size=11)
    raw = pd.read_parquet(bench_dir / "raw" / textvqa_fixture.FIXTURE_FILE)
    assert len(frame) == len(raw) == 11
    assert frame["id"].tolist() == [str(q) for q in raw["question_id"]]
    for row, raw_answers in zip(frame.itertuples(), raw["answers"]):
        answers = list(row.answers)
        assert len(answers) == 10 and answers == list(raw_answers)
        counts = Counter(answers)
        assert counts[row.answer] == max(counts.values())
        assert list(row.options) == [] and row.answer_index == -1
        assert len(row.ocr_tokens) >= 2
    assert frame["image_id"].nunique() == 6  # two questions per sign image
    assert textvqa.majority_answer(["b", "a", "a", "b"]) == "b"  # a tie goes to the first given


def test_textvqa_rejects_items_without_ten_answers(tmp_path):
    raw_dir = tmp_path / "raw"
    textvqa_fixture.write_fixture(raw_dir, {"seed": 0, "size": 2, "corrupt": 0})
    path = raw_dir / textvqa_fixture.FIXTURE_FILE
    rows = pq.read_table(path).to_pylist()
    rows[1]["answers"] = rows[1]["answers"][:9]
    write_hub_parquet(path, textvqa.SCHEMA, rows, textvqa.FEATURES)
    with pytest.raises(VlmgridError, match="10 human answers"):
        textvqa.adapt(raw_dir, tmp_path / "bench")


def test_short_answer_records_may_not_carry_options(tmp_path):
    # prepare's record check knows the short_answer protocol: no options, answer_index -1.
    original = textvqa.KIND.adapt

    def with_options(raw_dir, bench_dir):
        adapted = original(raw_dir, bench_dir)
        adapted.records.at[0, "options"] = ["a", "b"]
        return adapted

    object.__setattr__(textvqa.KIND, "adapt", with_options)
    try:
        with pytest.raises(VlmgridError, match="short-answer items have no options"):
            prepare("textvqa", tmp_path / "textvqa", size=2)
    finally:
        object.__setattr__(textvqa.KIND, "adapt", original)
