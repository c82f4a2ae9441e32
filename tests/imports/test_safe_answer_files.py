"""Answer files handed over as they are, and possibly hostile: a workbook that unpacks to hundreds of MB or
declares a DTD, predictions and options that read "None" or "NA", rows re-sorted in a spreadsheet, files saved
with a byte-order mark, an eval-tool file that cannot be read or is not UTF-8. Each is read as its text says,
or refused in one sentence naming it."""

import errno
import json
import pathlib
import struct
import zipfile

import pytest
from helpers.imports import (
    MODEL_ID,
    dump,
    gold_text,
    imported,
    mmbench_answers,
    mmbench_rows,
    mme_answers,
    mme_rows,
    mme_samples,
    mme_tool_folder,
    refused,
    run,
    score_of,
    small_grid,
    textvqa_rows,
    write_jsonl,
    write_logs_json,
    write_samples,
)
from helpers.permissions import vlmgrid_held_back

from vlmgrid.imports import vlmevalkit

SIZES = {"mme-fixture": 6, "textvqa-fixture": 3, "mmbench-fixture": 2}
PLACEHOLDER = "an answer to replace"


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """(config path, {bench: records}); MME at 12 records, two pairs of which share subtask, question and
    gold."""
    return small_grid(tmp_path_factory.mktemp("safe"), SIZES)


# ------------------------------------------------------------------------------------------ hostile workbooks


def rewrite(path: pathlib.Path, member: str, change=lambda data: data, method=zipfile.ZIP_DEFLATED) -> None:
    """The workbook with `member`'s bytes replaced by change(bytes) and packed by `method` (zipfile's
    compress_type), the others deflated as zipfile packs them."""
    with zipfile.ZipFile(path) as source:
        members = [(info.filename, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for name, data in members:
            if name == member:
                out.writestr(name, change(data), compress_type=method)
            else:
                out.writestr(name, data)


def declare_size(path: pathlib.Path, member: str, size: int) -> None:
    """Set the unpacked size that the zip's central directory declares for `member`: the size zipfile, and so
    openpyxl, goes by (the bytes stay as they are)."""
    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02")
    while True:
        (length,) = struct.unpack_from("<H", data, at + 28)
        if bytes(data[at + 46 : at + 46 + length]) == member.encode():
            struct.pack_into("<I", data, at + 24, size)
            path.write_bytes(bytes(data))
            return
        at = data.index(b"PK\x01\x02", at + 46)


def mmbench_workbook(records, folder: pathlib.Path) -> pathlib.Path:
    """VLMEvalKit's MMBench_DEV_EN.xlsx with its first prediction the PLACEHOLDER text, to be made hostile."""
    rows = mmbench_rows(records)
    answers = gold_text(rows)
    answers[0] = PLACEHOLDER
    return pathlib.Path(dump(rows, answers, folder, "MMBench_DEV_EN"))


def refused_in_every_format(capsys, config, path, tmp_path) -> list[str]:
    """The refusals of the workbook guessed, and read as each format that takes workbooks."""
    out = str(tmp_path / "o.parquet")
    messages = [
        refused(capsys, config, MODEL_ID, "mmbench-fixture", str(path), *given, "--out", out)
        for given in ([], ["--format", "vlmevalkit"], ["--format", "mmbench-submission"])
    ]
    assert not (tmp_path / "o.parquet").exists()
    return messages


def test_a_workbook_declaring_400_mb_unpacked_is_refused_before_anything_is_inflated(grid, tmp_path, capsys):
    config, records = grid
    path = mmbench_workbook(records["mmbench-fixture"], tmp_path)
    declare_size(path, "xl/sharedStrings.xml", 400 << 20)
    for message in refused_in_every_format(capsys, config, path, tmp_path):
        assert message.startswith(
            f"vlmgrid: error: {path} would unpack to 400.0 MB (xl/sharedStrings.xml alone to 400.0 MB from "
        )
        assert message.endswith(
            "), more than the 128.0 MB a workbook of answers is read up to, so it is not read; "
            "check that it is the file meant (or give the answers as .tsv)"
        )


def test_a_workbook_whose_cell_inflates_a_thousand_times_is_refused(grid, tmp_path, capsys):
    config, records = grid
    path = mmbench_workbook(records["mmbench-fixture"], tmp_path)
    rewrite(path, "xl/sharedStrings.xml", lambda data: data.replace(PLACEHOLDER.encode(), b"A" * (8 << 20)))
    for message in refused_in_every_format(capsys, config, path, tmp_path):
        assert f"{path} holds xl/sharedStrings.xml, which inflates" in message
        assert "times (to 8.0 MB from " in message
        assert (
            "), as no spreadsheet program packs a workbook, so it is not read; save it again from the "
            "program that made it (or give the answers as .tsv)" in message
        )


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_a_workbook_member_packed_with_bzip2_or_lzma_is_refused_before_it_is_inflated(
    grid, tmp_path, capsys, method
):
    """zipfile inflates such a member whole before cutting it to the size the zip declares (a 7 kB workbook
    whose bzip2 member declared 785 bytes took 4.2 GB), so no declared size bounds it."""
    config, records = grid
    path = mmbench_workbook(records["mmbench-fixture"], tmp_path)
    rewrite(path, "xl/sharedStrings.xml", method=method)
    name = zipfile.compressor_names[method]
    for message in refused_in_every_format(capsys, config, path, tmp_path):
        assert message == (
            f"vlmgrid: error: {path} holds xl/sharedStrings.xml, packed with {name} (zip method {method}), "
            f"as no spreadsheet program packs a workbook, so it is not read; save it again from the program "
            f"that made it (or give the answers as .tsv)"
        )


def billion_laughs() -> bytes:
    """A DTD whose entity &i; expands to 10^9 characters."""
    entities = [b'<!ENTITY a "aaaaaaaaaa">']
    for before, name in zip("abcdefgh", "bcdefghi"):
        entities.append(f'<!ENTITY {name} "{("&" + before + ";") * 10}">'.encode())
    return b"<!DOCTYPE sst [" + b"".join(entities) + b"]>"


DTDS = {  # (the declaration, the reference put in place of a prediction)
    "an external entity": (b'<!DOCTYPE sst [<!ENTITY x SYSTEM "file:///etc/hostname">]>', b"&x;"),
    "entities that expand a billion times": (billion_laughs(), b"&i;"),
}


@pytest.mark.parametrize("dtd", DTDS)
def test_a_workbook_whose_xml_declares_a_dtd_is_refused_in_one_sentence(grid, tmp_path, capsys, dtd):
    config, records = grid
    path = mmbench_workbook(records["mmbench-fixture"], tmp_path)
    declaration, reference = DTDS[dtd]

    def hostile(data: bytes) -> bytes:
        head, body = data.split(b"?>", 1)
        return head + b"?>" + declaration + body.replace(PLACEHOLDER.encode(), reference)

    rewrite(path, "xl/sharedStrings.xml", hostile)
    for message in refused_in_every_format(capsys, config, path, tmp_path):
        assert message == (
            f"vlmgrid: error: {path} holds xl/sharedStrings.xml, whose XML declares a DTD "
            f"(<!DOCTYPE ...>), which no spreadsheet program writes, so it is not read; save it "
            f"again from the program that made it (or give the answers as .tsv)"
        )


# ---------------------------------------------------------------------------------------------- text is text


def test_predictions_none_null_and_na_are_text_in_a_workbook_as_in_a_tsv(grid, tmp_path):
    config, records = grid
    rows = textvqa_rows(records["textvqa-fixture"])
    texts = ["None", "null", "NA"]
    frames, scores = {}, {}
    for fmt in ("xlsx", "tsv"):
        out = tmp_path / f"{fmt}.parquet"
        assert (
            run(
                config,
                MODEL_ID,
                "textvqa-fixture",
                dump(rows, texts, tmp_path / fmt, "TextVQA_VAL", fmt),
                "--out",
                str(out),
            )
            == 0
        )
        frames[fmt] = imported(out)
        scores[fmt] = score_of(config, tmp_path, "textvqa-fixture", out)["value"]
    assert list(frames["xlsx"]["raw"]) == texts
    assert frames["xlsx"].equals(frames["tsv"]) and scores["xlsx"] == scores["tsv"]


def test_an_mmbench_option_none_is_the_records_option_not_another_version(grid, tmp_path):
    _, records = grid
    mmbench = records["mmbench-fixture"].copy()
    mmbench["options"] = [
        ["None", *options[1:]] if n == 0 else list(options) for n, options in enumerate(mmbench["options"])
    ]
    rows = mmbench_rows(mmbench)
    for fmt in ("xlsx", "tsv", "json"):
        path = pathlib.Path(dump(rows, gold_text(rows), tmp_path / fmt, "MMBench_DEV_EN", fmt))
        answers = vlmevalkit.read(path, mmbench, "mmbench", None)
        assert [answer.record_id for answer in answers] == list(mmbench["id"]), fmt


# --------------------------------------------------------------------------------------------- rows re-sorted


def test_mme_rows_without_image_path_are_matched_by_index_not_file_order(grid, tmp_path):
    config, records = grid
    mme = records["mme-fixture"]
    rows = [{key: value for key, value in row.items() if key != "image_path"} for row in mme_rows(mme)]
    answers = gold_text(rows)
    first, second = [n for n, r in enumerate(rows) if r["category"] == "existence" and r["answer"] == "Yes"][
        :2
    ]
    assert (
        rows[first]["question"] == rows[second]["question"]
    )  # two images asked the same, with the same gold
    answers[second] = "No"  # the second image's question answered wrong
    scores, predictions = [], []
    for order, folder in ((list(range(len(rows))), "as written"), (None, "re-sorted")):
        if order is None:  # the two rows swapped, as sorting the sheet by prediction does
            order = list(range(len(rows)))
            order[first], order[second] = second, first
        out = tmp_path / f"{folder}.parquet"
        path = dump([rows[n] for n in order], [answers[n] for n in order], tmp_path / folder, "MME")
        assert run(config, MODEL_ID, "mme-fixture", path, "--out", str(out)) == 0
        predictions.append(imported(out).set_index("id")["prediction"].to_dict())
        scores.append(score_of(config, tmp_path, "mme-fixture", out)["value"])
    assert predictions[0][mme["id"].iloc[second]] == "no" and predictions[0][mme["id"].iloc[first]] == "yes"
    assert predictions[1] == predictions[0] and scores[1] == scores[0]


# ------------------------------------------------------------------------------------------- byte-order marks


def test_a_vlmevalkit_file_saved_with_a_byte_order_mark_is_read(grid, tmp_path):
    config, records = grid
    rows = mme_rows(records["mme-fixture"])
    for fmt in ("tsv", "json"):
        path = pathlib.Path(dump(rows, gold_text(rows), tmp_path / fmt, "MME", fmt))
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # Excel on Windows saves "UTF-8" so
        out = tmp_path / f"{fmt}.parquet"
        assert run(config, MODEL_ID, "mme-fixture", str(path), "--out", str(out)) == 0, fmt
        assert list(imported(out)["id"]) == list(records["mme-fixture"]["id"])


def test_an_eval_tool_folder_saved_with_byte_order_marks_is_read(grid, tmp_path):
    config, records = grid
    mme = records["mme-fixture"]
    folder = pathlib.Path(mme_tool_folder(tmp_path / "mme", mme, list(mme["answer"].str.capitalize())))
    for file in folder.glob("*.txt"):
        file.write_bytes(b"\xef\xbb\xbf" + file.read_bytes())
    out = tmp_path / "o.parquet"
    assert run(config, MODEL_ID, "mme-fixture", str(folder), "--out", str(out)) == 0
    assert sorted(imported(out)["id"]) == sorted(mme["id"])


# -------------------------------------------------------------------------------------------- unreadable text


def test_an_eval_tool_file_that_cannot_be_read_is_one_sentence_naming_it(grid, tmp_path, capsys, monkeypatch):
    config, records = grid
    mme = records["mme-fixture"]
    folder = pathlib.Path(mme_tool_folder(tmp_path / "mme", mme, list(mme["answer"])))
    locked = folder / "count.txt"
    opened = pathlib.Path.open

    def open_unless_locked(self, *args, **kwargs):  # mode 000: the tests run as root, who reads anything
        if self == locked:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", open_unless_locked)
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "mme-fixture",
        str(folder),
        "--format",
        "mme-eval-tool",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert message == (
        f"vlmgrid: error: {locked} cannot be read: permission denied; make it readable by this user "
        f"(chmod u+r) and run again"
    )


@pytest.mark.parametrize("given", [[], ["--format", "llava-answers"]], ids=["guessed", "given"])
def test_a_llava_answer_file_that_cannot_be_read_is_one_sentence_naming_it(grid, tmp_path, given):
    """Mode 000 for real, its format guessed from the file or given; as root, under capsh
    (helpers.permissions)."""
    config, records = grid
    mme = records["mme-fixture"]
    answers = pathlib.Path(write_jsonl(tmp_path / "llava_mme.jsonl", mme_answers(mme, list(mme["answer"]))))
    answers.chmod(0)
    out = tmp_path / "o.parquet"
    result = vlmgrid_held_back(
        "import-predictions",
        MODEL_ID,
        "mme-fixture",
        str(answers),
        *given,
        "--out",
        str(out),
        "--config",
        config,
    )
    assert (result.returncode, result.stderr) == (
        2,
        f"vlmgrid: error: {answers} cannot be read: permission denied; make it readable by this user (chmod "
        "u+r) and run again\n",
    )
    assert not out.exists()


def test_an_eval_tool_file_that_is_not_utf8_is_one_sentence_naming_it_and_its_line(grid, tmp_path, capsys):
    config, records = grid
    mme = records["mme-fixture"]
    folder = pathlib.Path(mme_tool_folder(tmp_path / "mme", mme, list(mme["answer"])))
    file = folder / "count.txt"
    lines = file.read_bytes().split(b"\n")
    lines[1] = lines[1].rsplit(b"\t", 1)[0] + "\tSí".encode(
        "cp1252"
    )  # saved by Notepad in the ANSI code page
    file.write_bytes(b"\n".join(lines))
    message = refused(
        capsys, config, MODEL_ID, "mme-fixture", str(folder), "--out", str(tmp_path / "o.parquet")
    )
    assert message == f"vlmgrid: error: {file} line 2 is not UTF-8 text (byte 0xed); save the file as UTF-8"


def locked(monkeypatch, path: pathlib.Path, method: str) -> None:
    """`path` as mode 000 makes it for `Path.<method>` (open, iterdir): the tests run as root, who reads
    anything."""
    original = getattr(pathlib.Path, method)

    def unless_locked(self, *args, **kwargs):
        if self == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, method, unless_locked)


# The answer folders of each format that reads one, for MME: made in `folder` from the records.
FOLDERS = {
    "vlmevalkit": lambda folder, mme: dump(mme_rows(mme), gold_text(mme_rows(mme)), folder, "MME"),
    "lmms-eval-samples": lambda folder, mme: write_samples(
        folder, "mme", mme_samples(mme, list(mme["answer"]))
    ),
    "mme-eval-tool": lambda folder, mme: mme_tool_folder(folder, mme, list(mme["answer"])),
}
FOLDER_DENIED = "cannot be read: permission denied; make it readable by this user (chmod u+rx) and run again"


@pytest.mark.parametrize("given", [False, True], ids=["guessed", "given"])
@pytest.mark.parametrize("fmt", FOLDERS)
def test_an_answer_folder_that_cannot_be_listed_is_one_sentence_naming_it(
    grid, tmp_path, capsys, monkeypatch, fmt, given
):
    config, records = grid
    folder = tmp_path / fmt
    FOLDERS[fmt](folder, records["mme-fixture"])
    locked(monkeypatch, folder, "iterdir")
    out = tmp_path / "o.parquet"
    choice = ["--format", fmt] if given else []
    message = refused(capsys, config, MODEL_ID, "mme-fixture", str(folder), *choice, "--out", str(out))
    assert message == f"vlmgrid: error: {folder} {FOLDER_DENIED}"
    assert not out.exists()


@pytest.mark.parametrize("fmt", FOLDERS)
def test_an_answer_folder_of_mode_000_is_one_sentence_naming_it(grid, tmp_path, fmt):
    """Mode 000 for real, the format guessed; as root, under capsh (helpers.permissions)."""
    config, records = grid
    folder = tmp_path / fmt
    FOLDERS[fmt](folder, records["mme-fixture"])
    out = tmp_path / "o.parquet"
    folder.chmod(0)
    try:
        result = vlmgrid_held_back(
            "import-predictions", MODEL_ID, "mme-fixture", str(folder), "--out", str(out), "--config", config
        )
    finally:
        folder.chmod(0o755)
    assert (result.returncode, result.stderr) == (2, f"vlmgrid: error: {folder} {FOLDER_DENIED}\n")
    assert not out.exists()


@pytest.mark.parametrize("where", ["given", "in a folder"])
def test_an_lmms_eval_logs_json_that_cannot_be_read_is_one_sentence_naming_it(
    grid, tmp_path, capsys, monkeypatch, where
):
    config, records = grid
    mme = records["mme-fixture"]
    lines = mme_samples(mme, list(mme["answer"]), "0.2.0")
    path = pathlib.Path(write_logs_json(tmp_path / "run", "mme", lines))
    locked(monkeypatch, path, "open")
    given = path if where == "given" else path.parent
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "mme-fixture",
        str(given),
        "--format",
        "lmms-eval-samples",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert message == (
        f"vlmgrid: error: {path} cannot be read: permission denied; make it readable by this user "
        f"(chmod u+r) and run again"
    )


# ---------------------------------------------------------------------------------------- nested too deeply

DEEP = "[" * 100_000 + "]" * 100_000  # JSON that Python's parser gives up on (RecursionError)
TOO_DEEP = (
    "nests its JSON arrays or objects too deeply to be read (about a thousand levels), as no tool's answers "
    "do; check that it is the file meant"
)


@pytest.mark.parametrize("given", [False, True], ids=["guessed", "given"])
@pytest.mark.parametrize("line", [1, 3])
def test_an_answer_line_nested_too_deeply_is_one_sentence_naming_it_and_its_line(
    grid, tmp_path, capsys, line, given
):
    config, records = grid
    lines = [json.dumps(item) for item in mmbench_answers(records["mmbench-fixture"])]
    lines[line - 1] = lines[line - 1].replace('"metadata": {}', f'"metadata": {DEEP}')
    path = tmp_path / "llava_mmbench.jsonl"
    path.write_text("\n".join(lines) + "\n")
    choice = ["--format", "llava-answers"] if given else []
    out = tmp_path / "o.parquet"
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", str(path), *choice, "--out", str(out))
    assert message == f"vlmgrid: error: {path} line {line} {TOO_DEEP}"
    assert not out.exists()


@pytest.mark.parametrize("given", [False, True], ids=["guessed", "given"])
@pytest.mark.parametrize("fmt", ["vlmevalkit", "lmms-eval-samples"])
def test_an_answer_document_nested_too_deeply_is_one_sentence_naming_it(grid, tmp_path, capsys, fmt, given):
    config, records = grid
    if fmt == "vlmevalkit":
        bench, path = "mmbench-fixture", tmp_path / "llava_v1.5_7b_MMBench_DEV_EN.json"
        path.write_text(f'[\n    {{"index": 1, "prediction": {DEEP}}}\n]')
    else:
        bench, path = "mme-fixture", tmp_path / "mme.json"
        path.write_text(f'{{\n    "model_configs": {{"task": "mme"}},\n    "logs": {DEEP}\n}}')
    choice = ["--format", fmt] if given else []
    out = tmp_path / "o.parquet"
    message = refused(capsys, config, MODEL_ID, bench, str(path), *choice, "--out", str(out))
    assert message == f"vlmgrid: error: {path} {TOO_DEEP}"
    assert not out.exists()
