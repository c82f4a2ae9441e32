"""Data as its authors ship it, handed over as it may arrive: names in the data that lead out of the release
folder (or a link that does), ScienceQA values of the wrong JSON type, text saved with a byte-order mark or in
Latin-1, a file that cannot be read, an MMBench TSV under another name and LLaVA's ScienceQA result file.
Each is read as the authors meant it or refused in one sentence naming the file, item and field."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
import yaml
from helpers.common import DEFAULT_CONFIG, REPO
from helpers.permissions import vlmgrid_held_back

from vlmgrid.benchmarks import BENCHMARKS, load_benchmark
from vlmgrid.cli import main
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES
from vlmgrid.fixtures.kinds import food101 as food_fx
from vlmgrid.fixtures.kinds import mmbench as mmbench_fx
from vlmgrid.fixtures.kinds import mme as mme_fx
from vlmgrid.fixtures.kinds import scienceqa as scienceqa_fx
from vlmgrid.fixtures.kinds import textvqa as textvqa_fx
from vlmgrid.stages.prepare import prepare_benchmark

SETTINGS = {"seed": 0, "size": 3, "corrupt": 0}
SECRET = b"\x89PNG not the benchmark's: a private file beside the release"


def adapt(kind: str, raw: Path, bench_dir: Path):
    return BENCHMARKS.get(kind).adapt(raw, bench_dir).records


def refused(kind: str, raw: Path, bench_dir: Path) -> str:
    """The error that adapting raw into bench_dir ends in; nothing it wrote before is the private file."""
    with pytest.raises(VlmgridError) as error:
        adapt(kind, raw, bench_dir)
    assert copied_nothing_of(bench_dir, SECRET)
    return str(error.value)


def copied_nothing_of(bench_dir: Path, data: bytes) -> bool:
    return not any(p.is_file() and p.read_bytes() == data for p in bench_dir.rglob("*"))


def local(kind: str, path: Path, **source) -> dict:
    return {"kind": kind, "source": {"type": "local", "path": str(path), **source}}


# ---------------------------------------------------------------------------------------------- scienceqa


def sqa_release(tmp_path: Path, size: int = 3) -> tuple[Path, dict, list[str]]:
    """A ScienceQA release under tmp_path/sqa: (folder, problems, the test pids with an image)."""
    raw = tmp_path / "sqa"
    scienceqa_fx.write_release_fixture(raw, {**SETTINGS, "size": size})
    problems = json.loads((raw / "problems.json").read_text())
    pids = [p for p in json.loads((raw / "pid_splits.json").read_text())["test"] if problems[p]["image"]]
    return raw, problems, pids


def write_json(path: Path, data, bom: bool = False) -> None:
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + json.dumps(data).encode("utf-8"))


@pytest.mark.parametrize("name", ["../../../../secret.png", "/absolute"])
def test_a_scienceqa_image_name_leading_out_of_the_release_is_refused_naming_the_problem(tmp_path, name):
    raw, problems, pids = sqa_release(tmp_path)
    (tmp_path / "secret.png").write_bytes(SECRET)
    problems[pids[1]]["image"] = str(tmp_path / "secret.png") if name == "/absolute" else name
    write_json(raw / "problems.json", problems)
    message = refused("scienceqa_img", raw, tmp_path / "bench")
    assert message.startswith(f"{raw / 'problems.json'} problem {pids[1]} (its pid and `image`): ")
    assert f"leads out of {raw / 'images' / 'test'} (to {tmp_path / 'secret.png'})" in message


def test_a_scienceqa_pid_leading_out_of_the_release_is_refused(tmp_path):
    raw, problems, pids = sqa_release(tmp_path)
    (tmp_path / "secret.png").write_bytes(SECRET)
    problems["../../.."] = {**problems[pids[0]], "image": "secret.png"}
    splits = json.loads((raw / "pid_splits.json").read_text())
    splits["test"].insert(0, "../../..")
    write_json(raw / "pid_splits.json", splits)
    write_json(raw / "problems.json", problems)
    assert "problem ../../.. (its pid and `image`)" in refused("scienceqa_img", raw, tmp_path / "bench")


@pytest.mark.parametrize(
    ("field", "value", "wanted"),
    [
        ("answer", 1.9, "not the index of one of its 4 choices (0 to 3)"),
        ("answer", True, "not the index of one of its 4 choices"),
        ("answer", "B", "not the index of one of its 4 choices"),
        ("choices", ["a", None, "c", "d"], "not a list of at least 2 option texts"),
        ("hint", ["a", "list"], "not a text (or null)"),
        ("question", None, "not the question's text"),
    ],
)
def test_a_scienceqa_value_of_the_wrong_type_is_refused_naming_the_pid_and_field(
    tmp_path, field, value, wanted
):
    raw, problems, pids = sqa_release(tmp_path)
    problems[pids[2]][field] = value
    write_json(raw / "problems.json", problems)
    message = refused("scienceqa_img", raw, tmp_path / "bench")
    assert message.startswith(
        f"{raw / 'problems.json'} problem {pids[2]}: `{field}` is {json.dumps(value)}, {wanted}"
    )
    assert message.endswith(
        "; the file is damaged or edited: restore it from lupantech/ScienceQA's data/scienceqa"
    )


def test_a_scienceqa_pid_listed_twice_is_refused_not_two_items(tmp_path):
    raw, _, pids = sqa_release(tmp_path)
    splits = json.loads((raw / "pid_splits.json").read_text())
    splits["test"].append(pids[0])
    write_json(raw / "pid_splits.json", splits)
    message = refused("scienceqa_img", raw, tmp_path / "bench")
    assert message.startswith(f"{raw / 'pid_splits.json'}: lists test problem '{pids[0]}' twice;")


def test_a_scienceqa_release_saved_with_a_byte_order_mark_is_read(tmp_path):
    raw, problems, pids = sqa_release(tmp_path)
    write_json(raw / "problems.json", problems, bom=True)
    write_json(raw / "pid_splits.json", json.loads((raw / "pid_splits.json").read_text()), bom=True)
    records = adapt("scienceqa_img", raw, tmp_path / "bench")
    assert list(records["question"]) == [problems[pid]["question"] for pid in pids]


def test_llava_scienceqa_result_file_imports_into_a_release_prepared_benchmark(tmp_path, capsys):
    raw, problems, pids = sqa_release(tmp_path, size=4)
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["data_dir"], data["results_dir"] = str(tmp_path / "data"), str(tmp_path / "results")
    data["prompts_dir"] = str(REPO / "config" / "prompts")
    data["benchmarks"]["scienceqa-release"] = local("scienceqa_img", raw, expected_items=4)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["prepare", "scienceqa-release", "--config", str(config)]) == 0
    records = load_benchmark(tmp_path / "data" / "scienceqa-release").records
    assert list(records["pid"]) == pids and list(records["id"]) == ["test-0", "test-1", "test-2", "test-3"]

    # eval_science_qa.py's --output-result: every problem of the split, text-only ones too, by problem id
    letters = {pid: "ABCD"[problems[pid]["answer"]] for pid in pids}
    letters[pids[1]] = "ABCD"[(problems[pids[1]]["answer"] + 1) % 4]  # one wrong answer
    outputs = {**letters, "5": "A"}
    result = tmp_path / "llava-v1.5-13b_result.json"
    result.write_text(
        json.dumps(
            {
                "acc": 75.0,
                "correct": 3,
                "count": 5,
                "outputs": outputs,
                "results": {pid: "ABCD".index(text) for pid, text in outputs.items()},
            },
            indent=2,
        )
    )
    out = tmp_path / "imported.parquet"
    assert (
        main(
            [
                "import-predictions",
                "llava-tiny",
                "scienceqa-release",
                str(result),
                "--out",
                str(out),
                "--config",
                str(config),
            ]
        )
        == 0
    ), capsys.readouterr().err
    score = tmp_path / "score.json"
    assert (
        main(
            [
                "score",
                "llava-tiny",
                "scienceqa-release",
                "--predictions",
                str(out),
                "--out",
                str(score),
                "--config",
                str(config),
            ]
        )
        == 0
    )
    assert json.loads(score.read_text())["value"] == pytest.approx(75.0)


def test_a_result_file_into_records_without_problem_ids_says_where_they_come_from(tmp_path, capsys):
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["data_dir"], data["results_dir"] = str(tmp_path / "data"), str(tmp_path / "results")
    data["prompts_dir"] = str(REPO / "config" / "prompts")
    data["benchmarks"]["scienceqa-fixture"]["source"]["size"] = 2
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["prepare", "scienceqa-fixture", "--config", str(config)]) == 0
    result = tmp_path / "llava-v1.5-13b_result.json"
    result.write_text(
        json.dumps(
            {"acc": 0.0, "correct": 0, "count": 1, "results": {"4": 1}, "outputs": {"4": "B"}}, indent=2
        )
    )
    capsys.readouterr()
    assert (
        main(
            [
                "import-predictions",
                "llava-tiny",
                "scienceqa-fixture",
                str(result),
                "--out",
                str(tmp_path / "o.parquet"),
                "--config",
                str(config),
            ]
        )
        == 2
    )
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        "(a copy prepared from the hub's parquet files has none); prepare it from the authors' release"
        in message
    )
    assert "(the hub copy)" not in message


# ---------------------------------------------------------------------------------------------- textvqa


def test_a_textvqa_image_id_leading_out_of_the_release_is_refused_naming_the_entry(tmp_path):
    raw = tmp_path / "tv"
    textvqa_fx.write_release_fixture(raw, SETTINGS)
    (tmp_path / "private.jpg").write_bytes(SECRET)
    questions = json.loads((raw / "TextVQA_0.5.1_val.json").read_text())
    questions["data"][1]["image_id"] = "../../private"
    write_json(raw / "TextVQA_0.5.1_val.json", questions)
    message = refused("textvqa", raw, tmp_path / "bench")
    assert message.startswith(f"{raw / 'TextVQA_0.5.1_val.json'} entry 1 (its image_id): ")
    assert f"leads out of {raw / 'train_images'} (to {tmp_path / 'private.jpg'})" in message


def test_a_link_in_the_release_pointing_outside_is_refused(tmp_path):
    raw = tmp_path / "tv"
    textvqa_fx.write_release_fixture(raw, SETTINGS)
    (tmp_path / "private.jpg").write_bytes(SECRET)
    image_id = json.loads((raw / "TextVQA_0.5.1_val.json").read_text())["data"][0]["image_id"]
    image = raw / "train_images" / f"{image_id}.jpg"
    image.unlink()
    image.symlink_to(tmp_path / "private.jpg")
    message = refused("textvqa", raw, tmp_path / "bench")
    assert message.startswith(
        f"{raw / 'TextVQA_0.5.1_val.json'} entry 0 (its image_id): {image} leads out of"
    )


def test_a_nul_in_a_textvqa_image_id_is_refused_naming_the_entry(tmp_path):
    raw = tmp_path / "tv"
    textvqa_fx.write_release_fixture(raw, SETTINGS)
    questions = json.loads((raw / "TextVQA_0.5.1_val.json").read_text())
    questions["data"][1]["image_id"] = "abc\u0000def"
    write_json(raw / "TextVQA_0.5.1_val.json", questions)
    message = refused("textvqa", raw, tmp_path / "bench")
    assert message == (
        f"{raw / 'TextVQA_0.5.1_val.json'} entry 1 (its image_id): the file name 'abc\\x00def.jpg' "
        f"holds a NUL character, which no file name can; fix the name"
    )


def test_a_linked_image_folder_is_read_where_it_lies(tmp_path):
    """A shared image folder linked into the release is the user's own arrangement: read through the link."""
    raw = tmp_path / "tv"
    textvqa_fx.write_release_fixture(raw, SETTINGS)
    (raw / "train_images").rename(tmp_path / "shared_images")
    (raw / "train_images").symlink_to(tmp_path / "shared_images")
    assert len(adapt("textvqa", raw, tmp_path / "bench")) == 3


def test_a_textvqa_json_saved_with_a_byte_order_mark_is_read(tmp_path):
    raw = tmp_path / "tv"
    textvqa_fx.write_release_fixture(raw, SETTINGS)
    for name in ("TextVQA_0.5.1_val.json", "TextVQA_Rosetta_OCR_v0.2_val.json"):
        write_json(raw / name, json.loads((raw / name).read_text()), bom=True)
    records = adapt("textvqa", raw, tmp_path / "bench")
    assert len(records) == 3 and all(len(tokens) for tokens in records["ocr_tokens"])


# ---------------------------------------------------------------------------------------------- pope_coco


def test_a_pope_label_leading_out_of_val2014_is_refused_naming_the_line(tmp_path):
    raw = tmp_path / "pope"
    fixture = BENCHMARK_FIXTURES.get("pope_coco")
    fixture.write(raw, {**fixture.defaults, "size": 2})
    (tmp_path / "secret.jpg").write_bytes(SECRET)
    label = raw / "coco" / "coco_pope_popular.json"
    lines = label.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "image": "../../secret.jpg"})
    label.write_text("\n".join(lines) + "\n")
    message = refused("pope_coco", raw, tmp_path / "bench")
    assert message.startswith(
        f"{label} line 2 (its image): {raw / 'val2014' / '../../secret.jpg'} leads out of"
    )


def test_a_pope_label_file_saved_with_a_byte_order_mark_is_read(tmp_path):
    raw = tmp_path / "pope"
    fixture = BENCHMARK_FIXTURES.get("pope_coco")
    fixture.write(raw, {**fixture.defaults, "size": 2})
    label = raw / "coco" / "coco_pope_random.json"
    label.write_bytes(codecs.BOM_UTF8 + label.read_bytes())
    assert len(adapt("pope_coco", raw, tmp_path / "bench")) == 6


# ---------------------------------------------------------------------------------------------- food101


def test_a_food_test_entry_leading_out_of_its_class_is_refused_and_nothing_is_written_outside(tmp_path):
    food_fx.write_extracted_fixture(tmp_path / "raw", {"seed": 3, "size": 2, "classes": 3, "corrupt": 0})
    test_txt = tmp_path / "raw" / "food-101" / "meta" / "test.txt"
    lines = test_txt.read_text().splitlines()
    folder = lines[0].split("/")[0]
    (tmp_path / "secret.jpg").write_bytes(SECRET)
    lines[0] = f"{folder}/../../../../secret"
    test_txt.write_text("\n".join(lines) + "\n")
    message = refused("food101", tmp_path / "raw", tmp_path / "data" / "bench")
    assert f"meta/test.txt lists '{folder}/../../../../secret' under '{folder}'" in message
    assert copied_nothing_of(tmp_path / "data", SECRET)


def test_a_food_test_list_saved_with_a_byte_order_mark_is_read(tmp_path):
    food_fx.write_extracted_fixture(tmp_path / "raw", {"seed": 3, "size": 2, "classes": 3, "corrupt": 0})
    for name in ("test.txt", "classes.txt"):
        path = tmp_path / "raw" / "food-101" / "meta" / name
        path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    records = BENCHMARKS.get("food101").adapt(tmp_path / "raw", tmp_path / "bench")
    assert not any(name.startswith("\ufeff") for name in records.classes)
    assert not any(str(i).startswith("\ufeff") for i in records.records["id"])


# ---------------------------------------------------------------------------------------------- mmbench


def test_an_mmbench_tsv_saved_with_a_byte_order_mark_is_read(tmp_path):
    path = mmbench_fx.write_tsv_fixture(tmp_path, {**SETTINGS, "size": 2})
    plain = adapt("mmbench", path, tmp_path / "a")
    path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    assert adapt("mmbench", path, tmp_path / "b").equals(plain)


def test_an_mmbench_tsv_under_another_name_is_read_by_its_content(tmp_path):
    path = mmbench_fx.write_tsv_fixture(tmp_path / "raw", {**SETTINGS, "size": 2})
    n = len(adapt("mmbench", path, tmp_path / "probe"))
    renamed = path.rename(tmp_path / "raw" / "mmbench dev (1).tsv")
    prepare_benchmark("b", local("mmbench", renamed, expected_items=n), tmp_path / "bench")
    assert len(load_benchmark(tmp_path / "bench").records) == n


def test_a_file_neither_named_nor_headed_as_mmbench_names_both(tmp_path):
    path = tmp_path / "notes.tsv"
    path.write_text("index\tquestion\n1\twhat?\n")
    with pytest.raises(
        VlmgridError, match=r"notes.tsv: is not a mmbench data file, by its name or its content"
    ):
        BENCHMARKS.get("mmbench").adapt(path, tmp_path / "bench")


# ---------------------------------------------------------------------------------------------- mme


def test_an_mme_question_file_in_latin1_is_named_with_its_line(tmp_path):
    mme_fx.write_release_fixture(tmp_path / "mme", {**SETTINGS, "size": 4})
    path = tmp_path / "mme" / "count" / "0000.txt"
    lines = path.read_text().splitlines()
    path.write_bytes(("\n".join([lines[0], "Is the caf\u00e9 open?\tYes"]) + "\n").encode("latin-1"))
    message = refused("mme", tmp_path / "mme", tmp_path / "bench")
    assert message == (
        f"{path}: not readable UTF-8 text (line 2 holds byte 0xe9, as a file saved in Latin-1 or "
        f"another encoding does: save it as UTF-8); restore it from MME_Benchmark_release_version"
    )


def test_an_mme_question_file_saved_with_a_byte_order_mark_keeps_no_mark_in_the_question(tmp_path):
    mme_fx.write_release_fixture(tmp_path / "mme", {**SETTINGS, "size": 4})
    for path in (tmp_path / "mme").rglob("*.txt"):
        path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    records = adapt("mme", tmp_path / "mme", tmp_path / "bench")
    assert len(records) == 8 and not any(q.startswith("\ufeff") for q in records["question"])


def test_an_mme_image_that_cannot_be_read_is_named(tmp_path, monkeypatch):
    mme_fx.write_release_fixture(tmp_path / "mme", {**SETTINGS, "size": 4})
    image = tmp_path / "mme" / "count" / "0000.png"
    real = Path.read_bytes

    def read_bytes(self):
        if self == image:  # mode 000, as root would still read it
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    message = refused("mme", tmp_path / "mme", tmp_path / "bench")
    assert (
        message
        == f"{image}: cannot be read (Permission denied); restore it from MME_Benchmark_release_version"
    )


def test_a_link_in_an_mme_subtask_pointing_outside_is_refused(tmp_path):
    mme_fx.write_release_fixture(tmp_path / "mme", {**SETTINGS, "size": 4})
    (tmp_path / "secret.png").write_bytes(SECRET)
    image = tmp_path / "mme" / "count" / "0000.png"
    image.unlink()
    image.symlink_to(tmp_path / "secret.png")
    message = refused("mme", tmp_path / "mme", tmp_path / "bench")
    assert message.startswith(f"MME subtask count: {image} leads out of {tmp_path / 'mme' / 'count'}")


def mme_grid(tmp_path: Path) -> Path:
    """A grid config whose benchmark `mme` is a local MME release at tmp_path/mme (8 questions)."""
    mme_fx.write_release_fixture(tmp_path / "mme", {**SETTINGS, "size": 4})
    data = {
        "data_dir": str(tmp_path / "data"),
        "results_dir": str(tmp_path / "results"),
        "benchmarks": {"mme": local("mme", tmp_path / "mme", expected_items=8)},
        "models": {"random": {"backend": "baseline"}},
        "grid": {"models": ["random"], "benchmarks": ["mme"]},
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


def unreadable(path: Path) -> str:
    return (
        f"{path} cannot be read by this user (permission denied); make it readable (`chmod a+r {path}`) and "
        f"run again"
    )


@pytest.mark.parametrize("name", ["count/0000.png", "count/0000.txt"])
def test_an_unreadable_file_of_a_local_mme_release_is_one_sentence_naming_it(tmp_path, name):
    """Mode 000 for real, prepare hashing the release before it reads it; as root, under capsh
    (helpers.permissions)."""
    config = mme_grid(tmp_path)
    (tmp_path / "mme" / name).chmod(0)
    result = vlmgrid_held_back("prepare", "mme", "--config", str(config))
    assert (result.returncode, result.stderr) == (
        2,
        f"vlmgrid: error: {unreadable(tmp_path / 'mme' / name)}\n",
    )
    assert not (tmp_path / "data" / "mme" / "records.parquet").exists()


def test_a_prepared_local_mme_file_made_unreadable_is_one_sentence_to_prepare_and_verify(tmp_path):
    """Mode 000 for real, once prepared: prepare compares the release with its manifest, verify checks it; as
    root, under capsh (helpers.permissions)."""
    config = mme_grid(tmp_path)
    assert main(["prepare", "mme", "--config", str(config)]) == 0
    image = tmp_path / "mme" / "count" / "0000.png"
    image.chmod(0)
    result = vlmgrid_held_back("prepare", "mme", "--config", str(config))
    assert (result.returncode, result.stderr) == (2, f"vlmgrid: error: {unreadable(image)}\n")
    result = vlmgrid_held_back("verify", "mme", "--config", str(config))
    assert (result.returncode, result.stderr) == (2, f"vlmgrid: error: {unreadable(image)}\n")


def test_a_subtask_folder_that_can_be_listed_but_not_entered_is_one_sentence_naming_it(tmp_path):
    """Mode 0644 on a folder: its names can be listed, but nothing in it can be reached (a stat of a file in
    it is refused). As root, under capsh (helpers.permissions)."""
    config = mme_grid(tmp_path)
    (tmp_path / "mme" / "count").chmod(0o644)
    try:
        result = vlmgrid_held_back("prepare", "mme", "--config", str(config))
    finally:
        (tmp_path / "mme" / "count").chmod(0o755)  # pytest removes tmp_path later
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"vlmgrid: error: {tmp_path / 'mme' / 'count'}")
    assert "cannot be entered by this user (permission denied)" in result.stderr
    assert f"`chmod -R a+rX {tmp_path / 'mme'}`" in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_an_unreadable_subtask_folder_of_a_local_mme_release_is_one_sentence_naming_it(tmp_path):
    """Mode 000 for real (a glob would take the folder for an empty one); as root, under capsh
    (helpers.permissions)."""
    config = mme_grid(tmp_path)
    (tmp_path / "mme" / "count").chmod(0)
    try:
        result = vlmgrid_held_back("prepare", "mme", "--config", str(config))
    finally:
        (tmp_path / "mme" / "count").chmod(0o755)  # pytest removes tmp_path later
    assert (result.returncode, result.stderr) == (
        2,
        f"vlmgrid: error: {tmp_path / 'mme' / 'count' / 'images'} cannot be read by this user (permission "
        f"denied); make the release readable (`chmod -R a+rX {tmp_path / 'mme'}`) and run again\n",
    )


def test_an_archive_member_larger_than_any_release_file_is_refused_unread(tmp_path, monkeypatch):
    """A member's declared size is checked before it is read: a gzip bomb's would be read whole."""
    import io
    import tarfile

    from vlmgrid.benchmarks import rawio

    archive = tmp_path / "images.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"x" * 100
        member = tarfile.TarInfo("images/a.jpg")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    monkeypatch.setattr(rawio, "MAX_MEMBER", 99)
    with pytest.raises(VlmgridError, match=r"its member images/a.jpg declares 100 bytes, more than any file"):
        rawio.extract_images(archive, "r:gz", {"images/a.jpg": "a.jpg"}, tmp_path / "bench", "archive", "x")
    assert not (tmp_path / "bench").exists()


def test_a_zip_member_packed_with_bzip2_is_refused_before_it_is_inflated(tmp_path):
    """zipfile inflates a bzip2 or LZMA member whole before cutting it to its declared size."""
    import zipfile

    from vlmgrid.benchmarks import rawio

    path = tmp_path / "release.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("deflated.png"), b"png" * 10, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr(zipfile.ZipInfo("packed.png"), b"png" * 10, compress_type=zipfile.ZIP_BZIP2)
    with zipfile.ZipFile(path) as zf:
        assert rawio.zip_file(path, zf, "deflated.png") == b"png" * 10
        with pytest.raises(
            VlmgridError, match=r"its member packed.png is packed with bzip2, as the published"
        ):
            rawio.zip_file(path, zf, "packed.png")
