"""Bad input, one case each: one clear sentence naming the file, item or key and the fix (exit code 2 from the
CLI), or a recorded error row that the metric counts as a format error; never a traceback, never a lost row.

Most cases run the chain: prepare a fixture -> infer (the `random` baseline, a fake backend, or the openai
backend against a local fake server) -> score. A raw file with a defect is simulated by editing the adapter's
records (and images) before they are validated and hashed, as a damaged download would give them.
"""

import copy
import dataclasses
import importlib
import json
import re
import struct
import zlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from helpers.common import REPO
from helpers.dvc_lock import write_dvc_repo
from helpers.fake_openai_server import FakeOpenAIServer, Reply, completion
from PIL import Image

from vlmgrid import paths
from vlmgrid.benchmarks import BENCHMARKS, load_benchmark
from vlmgrid.cellrun.cell import Cell
from vlmgrid.cli import main
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.models import BACKENDS
from vlmgrid.models.base import Backend
from vlmgrid.predictions import (
    SCHEMA,
    check_data_fingerprint,
    read_metadata,
    read_predictions,
    write_predictions,
)
from vlmgrid.prompts import load_prompts
from vlmgrid.stages.infer import run_inference
from vlmgrid.stages.prepare import prepare_benchmark
from vlmgrid.stages.score import score_cell

prepare_module = importlib.import_module("vlmgrid.benchmarks.dataset")

SIZES = {"pope-fixture": 2, "scienceqa-fixture": 6, "textvqa-fixture": 4}


# ---------------------------------------------------------------------------------------------- helpers


@pytest.fixture
def grid(small_config, write_config, tmp_path):
    """The default grid, small, with absolute paths: (validated config, path of its YAML file)."""
    data = copy.deepcopy(small_config)
    data["prompts_dir"] = str(REPO / "config" / "prompts")
    for name, size in SIZES.items():
        data["benchmarks"][name]["source"]["size"] = size
    return validate_config(data), str(write_config(data))


def bench_dir(config, bench):
    return paths.bench_dir(config.data_dir, bench)


def prepare(config, bench, monkeypatch=None, edit=None):
    """Prepare a fixture; `edit(records, bench_dir)` changes the adapter's records (and images) first."""
    if edit is not None:
        kind = BENCHMARKS.get(config.benchmark(bench)["kind"])

        def adapt(raw_dir, out_dir):
            adapted = kind.adapt(raw_dir, out_dir)
            return dataclasses.replace(adapted, records=edit(adapted.records.copy(), out_dir))

        patched = {kind.name: dataclasses.replace(kind, adapt=adapt)}
        monkeypatch.setattr(prepare_module, "BENCHMARKS", patched)
    return prepare_benchmark(bench, config.benchmark(bench), bench_dir(config, bench))


def infer(config, bench, model="random", settings=None):
    return run_inference(
        model_settings=settings or config.model(model),
        bench_dir=bench_dir(config, bench),
        model_dir=paths.model_dir(config.data_dir, model),
        cell=Cell.in_results(config.results_dir, model, bench),
        part_size=4,
        threads=1,
        progress=False,
    )


def score(config, bench, model="random"):
    return score_cell(
        model_name=model,
        bench_dir=bench_dir(config, bench),
        predictions_path=paths.predictions_path(config.results_dir, model, bench),
        out_path=paths.score_path(config.results_dir, model, bench),
        samples=20,
        seed=0,
    )


def cli_error(capsys, argv) -> str:
    """Run the CLI, expect exit code 2 and one line without a traceback; return that line."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlmgrid: error: ") and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def rewrite(path, frame):
    """Write an edited predictions frame back to its file, keeping its metadata, as vlmgrid's writer would
    write those rows (the hash of its rows is theirs): the checks of the rows themselves see it."""
    table = pa.Table.from_pandas(frame.reset_index(drop=True), schema=SCHEMA, preserve_index=False)
    write_predictions(path, table, read_metadata(path))


def png_header(width, height) -> bytes:
    """A PNG that declares width x height grey pixels but holds almost no data (a decompression bomb's
    header)."""

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def replace_image(records, out_dir, i, write) -> str:
    """Point item i at a new image file written by write(path); returns the item's id."""
    relative = f"images/replaced-{i}.png"
    write(out_dir / relative)
    records.loc[i, "image"] = relative
    return records["id"].iloc[i]


class Silent(Backend):
    """A generative model that answers every prompt with the empty string."""

    name = "silent"
    capabilities = frozenset({"generate"})

    @classmethod
    def load(cls, settings, model_dir, device):
        return cls(settings)

    def generate(self, requests):
        return ["" for _ in requests]


# ---------------------------------------------------------------------------------------------- the cases


def test_corrupt_or_truncated_image(grid):
    config, _ = grid
    data = copy.deepcopy(config.data)
    data["benchmarks"]["scienceqa-fixture"]["source"]["corrupt"] = 1
    config = validate_config(data)
    prepare(config, "scienceqa-fixture")
    frame = read_predictions(infer(config, "scienceqa-fixture"))
    errors = frame[frame["error"].notna()]
    assert len(frame) == 6 and len(errors) == 1  # the broken item is kept, as an error row
    assert errors["error"].iloc[0].startswith("image unreadable: ")
    # the stored copy is named by its hash: the error says which raw file and row it came from
    assert re.search(
        r"images/[0-9a-f]{64}\.png \(from raw/ScienceQA-IMG/test-00000-of-00001\.parquet row \d+\): ",
        errors["error"].iloc[0],
    ), errors["error"].iloc[0]
    assert errors["prediction"].isna().all() and (errors["prediction_index"] == -1).all()
    result = score(config, "scienceqa-fixture")
    records = load_benchmark(bench_dir(config, "scienceqa-fixture")).records.set_index("id")
    right = sum(
        int(row.prediction_index) == int(records.loc[row.id, "answer_index"])
        for row in frame.itertuples()
        if pd.isna(row.error)
    )
    assert result["n"] == 6 and result["n_errors"] == 1 and result["n_valid"] == 5
    assert result["format_error_rate"] == pytest.approx(100 / 6, abs=1e-3)
    assert result["value"] == pytest.approx(100 * right / 6, abs=1e-3)  # the error row counts as wrong


def test_broken_image_names_where_it_came_from(grid, tmp_path):
    config, _ = grid
    data = copy.deepcopy(config.data)
    data["benchmarks"]["mmvp-fixture"]["source"].update(size=2, corrupt=1)
    config = validate_config(data)
    manifest = prepare(config, "mmvp-fixture")
    folder = bench_dir(config, "mmvp-fixture")
    assert "image_sources.jsonl" in manifest["files"]  # hashed like any other file of the folder
    sources = [json.loads(line) for line in (folder / "image_sources.jsonl").read_text("utf-8").splitlines()]
    records = load_benchmark(folder).records
    assert {entry["image"] for entry in sources} == set(records["image"])
    assert all(
        not entry["from"].startswith(str(folder)) for entry in sources
    )  # relative: the folder may move
    frame = read_predictions(infer(config, "mmvp-fixture"))
    errors = frame[frame["error"].notna()]
    assert len(errors) == 1
    item = errors["id"].iloc[0]  # the MMVP Index, which names its picture
    stored = folder / records.set_index("id").loc[item, "image"]
    assert (
        errors["error"]
        .iloc[0]
        .startswith(
            f"image unreadable: {stored} (from raw/Questions.csv row {int(item) + 1}, 'MMVP "
            f"Images/{item}.jpg'): "
        )
    )

    # A message from a backend that reads the files itself names the stored copy too; a folder that does not
    # record sources (prepared before they were kept) gives the message as it was.
    from vlmgrid.protocols.base import image_problem

    bench = load_benchmark(folder)
    relative = records.set_index("id").loc[item, "image"]
    assert (
        image_problem(bench, relative, f"image missing: {stored}")
        == f"image missing: {stored} (from raw/Questions.csv row {int(item) + 1}, 'MMVP Images/{item}.jpg')"
    )
    assert (
        image_problem(bench, relative, "decoder failed")
        == f"decoder failed (image from raw/Questions.csv row {int(item) + 1}, 'MMVP Images/{item}.jpg')"
    )
    assert image_problem(bench, "images/other.png", "image unreadable: x") == "image unreadable: x"

    class FileReader:  # a backend that decodes the files itself (open_clip's embed_image_files)
        def embed_image_files(self, files):
            return np.zeros((len(files), 2)), [f"image unreadable: {path}: broken" for path in files]

    from vlmgrid.protocols.classification import _embedded_images

    one = bench.records[bench.records["id"] == item]
    _, _, problems = _embedded_images(FileReader(), bench, one)
    assert problems == [
        f"image unreadable: {stored} (from raw/Questions.csv row {int(item) + 1}, "
        f"'MMVP Images/{item}.jpg'): broken"
    ]
    (tmp_path / "old").mkdir()
    assert (
        image_problem(dataclasses.replace(bench, root=tmp_path / "old"), relative, "image unreadable: y")
        == "image unreadable: y"
    )


def test_missing_image(grid, monkeypatch, capsys):
    config, config_path = grid
    # an item pointing at no file: prepare names it
    with pytest.raises(VlmgridError, match=r"images/none\.png: missing, though item '.+' points at it"):
        prepare(
            config,
            "pope-fixture",
            monkeypatch,
            edit=lambda records, out: records.assign(image=["images/none.png"] + list(records["image"][1:])),
        )
    monkeypatch.undo()
    # an image deleted after prepare: infer names it and the fix, and writes nothing
    prepare(config, "pope-fixture")
    victim = (
        bench_dir(config, "pope-fixture")
        / load_benchmark(bench_dir(config, "pope-fixture")).records["image"][0]
    )
    victim.unlink()
    err = cli_error(capsys, ["infer", "random", "pope-fixture", "--config", config_path, "--no-progress"])
    assert f"{victim}: missing" in err and "run prepare again" in err
    assert not paths.predictions_path(config.results_dir, "random", "pope-fixture").exists()


def test_unusual_image_modes(grid, monkeypatch):
    config, _ = grid
    grey16 = np.full((6, 8), 32768, dtype=np.uint16)
    palette = Image.new("P", (8, 6))
    palette.putpalette([10, 20, 30] * 256)
    writers = [
        lambda path: Image.new("RGB", (8, 6), (200, 100, 50)).convert("CMYK").save(path, "JPEG"),
        lambda path: Image.fromarray(grey16).save(path, "PNG"),  # 16-bit grey
        lambda path: Image.fromarray(grey16).save(path, "TIFF"),
        lambda path: palette.save(path, "PNG", transparency=0),  # palette with a transparent entry
        lambda path: Image.new("LA", (8, 6), (90, 0)).save(path, "PNG"),  # grey + alpha, fully transparent
        lambda path: Image.new("RGBA", (8, 6), (1, 2, 3, 255)).save(path, "PNG"),
        lambda path: Image.new("1", (8, 6), 1).save(path, "PNG"),
    ]

    def edit(records, out_dir):
        for i, write in enumerate(writers):
            replace_image(records, out_dir, i, write)
        return records

    config = validate_config(
        {
            **config.data,
            "benchmarks": {
                **config.data["benchmarks"],
                "pope-fixture": {"kind": "pope", "source": {"type": "fixture", "size": 3}},
            },
        }
    )
    prepare(config, "pope-fixture", monkeypatch, edit)
    frame = read_predictions(infer(config, "pope-fixture"))
    assert len(frame) == 9 and frame["error"].isna().all() and frame["prediction"].notna().all()
    result = score(config, "pope-fixture")
    assert result["n_errors"] == 0 and result["format_error_rate"] == 0.0


def test_decompression_bomb_image(grid, monkeypatch):
    config, _ = grid
    bombed = []

    def edit(records, out_dir):
        bombed.append(
            replace_image(records, out_dir, 0, lambda path: path.write_bytes(png_header(30000, 30000)))
        )
        return records

    prepare(config, "pope-fixture", monkeypatch, edit)
    frame = read_predictions(infer(config, "pope-fixture")).set_index("id")
    error = frame.loc[bombed[0], "error"]
    assert error.startswith("image too large") and "replaced-0.png" in error  # refused before decoding
    assert frame["error"].notna().sum() == 1
    result = score(config, "pope-fixture")
    assert result["n_errors"] == 1 and result["format_error_rate"] == pytest.approx(100 / 6, abs=1e-3)


def test_empty_question(grid, monkeypatch):
    config, _ = grid

    def set_question(value):
        def edit(records, out_dir):
            records["question"] = records["question"].astype(object)
            records.loc[1, "question"] = value
            return records

        return edit

    # yes/no and short answer: the question is the item; without one it is a damaged raw file
    with pytest.raises(
        VlmgridError, match=r"benchmark pope-fixture: item '.+' has an empty question; .*re-download"
    ):
        prepare(config, "pope-fixture", monkeypatch, set_question("  "))
    with pytest.raises(VlmgridError, match=r"textvqa-fixture: item '.+' has an empty question"):
        prepare(config, "textvqa-fixture", monkeypatch, set_question(""))
    # a missing (null) question is never text: the adapter must write "" (classification does)
    with pytest.raises(
        VlmgridError, match=r"scienceqa-fixture: item '.+' has question None, not text; the adapter"
    ):
        prepare(config, "scienceqa-fixture", monkeypatch, set_question(None))
    # multiple choice: the options (and the image) can carry the question, so "" runs and is scored
    prepare(config, "scienceqa-fixture", monkeypatch, set_question(""))
    records = load_benchmark(bench_dir(config, "scienceqa-fixture")).records
    assert records["question"].iloc[1] == ""
    frame = read_predictions(infer(config, "scienceqa-fixture"))
    assert frame["error"].isna().all() and (frame["prediction_index"] >= 0).all()
    assert score(config, "scienceqa-fixture")["n_valid"] == 6


def test_non_utf8_text(grid, tmp_path, capsys, write_config):
    config, _ = grid
    latin1 = 'question: "caf\xe9?"\n'.encode("latin-1")
    # the config file
    bad_config = tmp_path / "latin1.yaml"
    bad_config.write_bytes(b"data_dir: data\n# caf\xe9\n")
    assert "latin1.yaml is not UTF-8 text; save it as UTF-8" in cli_error(
        capsys, ["cells", "--config", str(bad_config)]
    )
    # a prompt set
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "kaleidoscope.yaml").write_bytes(latin1)
    with pytest.raises(VlmgridError, match=r"kaleidoscope\.yaml: is not valid UTF-8 YAML .*; fix the file"):
        load_prompts("kaleidoscope", tmp_path / "prompts")
    # a raw text file of a benchmark (MMVP's Questions.csv, read from a local copy)
    prepare(config, "mmvp-fixture")
    raw = bench_dir(config, "mmvp-fixture") / "raw"
    questions = raw / "Questions.csv"
    questions.write_bytes(questions.read_text("utf-8").replace("?", " caf\xe9?", 1).encode("latin-1"))
    local = {"kind": "mmvp", "source": {"type": "local", "path": str(raw)}}
    with pytest.raises(
        VlmgridError, match=r"Questions\.csv: not readable UTF-8 text .*; delete it and run prepare again"
    ):
        prepare_benchmark("mmvp-local", local, tmp_path / "mmvp-local")


def test_wrong_number_of_options(grid, monkeypatch, capsys):
    config, config_path = grid

    def set_options(i, options):
        def edit(records, out_dir):
            records.at[i, "options"] = options
            records.loc[i, "answer"] = options[0]
            records.loc[i, "answer_index"] = 0
            return records

        return edit

    with pytest.raises(
        VlmgridError,
        match=r"scienceqa-fixture: item '.+' has 1 option\(s\); multiple-choice items need at least 2 and at "
        r"most 26",
    ):
        prepare(config, "scienceqa-fixture", monkeypatch, set_options(0, ["only"]))
    many = [f"option {k}" for k in range(27)]  # more than the letters A to Z
    with pytest.raises(
        VlmgridError,
        match=r"has 27 option\(s\); multiple-choice items need at least 2 and at most 26 \(lettered A to Z\)",
    ):
        prepare(config, "scienceqa-fixture", monkeypatch, set_options(0, many))
    with pytest.raises(
        VlmgridError, match=r"pope-fixture: item '.+' has options \['yes', 'no', 'maybe'\]; yes/no items"
    ):
        prepare(config, "pope-fixture", monkeypatch, set_options(0, ["yes", "no", "maybe"]))
    monkeypatch.undo()
    # a predictions file (made elsewhere) that picks an option the item does not have
    prepare(config, "scienceqa-fixture")
    predictions = read_predictions(infer(config, "scienceqa-fixture"))
    item = predictions["id"].iloc[2]
    n_options = len(
        load_benchmark(bench_dir(config, "scienceqa-fixture")).records.set_index("id").loc[item, "options"]
    )
    predictions.loc[2, "prediction_index"] = n_options
    outside = paths.predictions_path(config.results_dir, "elsewhere", "scienceqa-fixture")
    outside.parent.mkdir(parents=True)
    outside.write_bytes(
        paths.predictions_path(config.results_dir, "random", "scienceqa-fixture").read_bytes()
    )
    rewrite(outside, predictions)
    err = cli_error(
        capsys,
        ["score", "elsewhere", "scienceqa-fixture", "--config", config_path, "--predictions", str(outside)],
    )
    assert (
        f'gives item "{item}" (variant "default") prediction_index {n_options}, but it has {n_options} '
        "options" in err
    )


def test_duplicate_ids(grid, monkeypatch, capsys):
    config, config_path = grid

    def duplicate(records, out_dir):
        records.loc[1, "id"] = records["id"].iloc[0]
        return records

    with pytest.raises(VlmgridError, match=r"pope-fixture: item id '.+' appears 2 times; ids must be unique"):
        prepare(config, "pope-fixture", monkeypatch, duplicate)
    monkeypatch.undo()
    prepare(config, "pope-fixture")
    path = infer(config, "pope-fixture")
    table = read_predictions(path)
    rewrite(path, pd.concat([table, table.iloc[[3]]]))
    err = cli_error(capsys, ["score", "random", "pope-fixture", "--config", config_path])
    assert f'has id "{table["id"].iloc[3]}" more than once in variant "default"' in err
    assert not paths.score_path(config.results_dir, "random", "pope-fixture").exists()


def test_truncated_records_or_predictions_file(grid, capsys):
    config, config_path = grid
    prepare(config, "pope-fixture")
    predictions = infer(config, "pope-fixture")
    assert main(["score", "random", "pope-fixture", "--config", config_path]) == 0
    score_path = paths.score_path(config.results_dir, "random", "pope-fixture")
    kept = score_path.read_bytes()
    # a truncated predictions file: one error, and the score file from before is left as it was
    whole = predictions.read_bytes()
    predictions.write_bytes(whole[: len(whole) // 2])
    err = cli_error(capsys, ["score", "random", "pope-fixture", "--config", config_path])
    assert "pope-fixture.parquet is unreadable (truncated or not parquet" in err
    assert err.endswith(
        "; delete it and rerun `vlmgrid infer random pope-fixture` to rebuild it"
    )  # the grid's own
    assert score_path.read_bytes() == kept
    predictions.write_bytes(whole)
    # truncated records: the quick check at load time hashes them
    records = bench_dir(config, "pope-fixture") / "records.parquet"
    records.write_bytes(records.read_bytes()[:100])
    for command in (
        ["score", "random", "pope-fixture"],
        ["infer", "random", "pope-fixture", "--no-progress"],
    ):
        err = cli_error(capsys, command + ["--config", config_path])
        assert f"{records}: does not match its manifest" in err and "run prepare again" in err
    assert score_path.read_bytes() == kept


def test_a_missing_predictions_file_dvc_tracks_says_dvc_pull_first(grid, capsys, tmp_path, monkeypatch):
    config, config_path = grid
    prepare(config, "pope-fixture")
    predictions = paths.predictions_path(config.results_dir, "random", "pope-fixture")
    rebuild = "rerun `vlmgrid infer random pope-fixture` to rebuild it"
    err = cli_error(capsys, ["score", "random", "pope-fixture", "--config", config_path])
    assert err.endswith(f"predictions file {predictions} not found; {rebuild}")  # no DVC repo around
    monkeypatch.chdir(write_dvc_repo(tmp_path))  # results_dir is tmp_path/results, which DVC tracks
    err = cli_error(capsys, ["score", "random", "pope-fixture", "--config", config_path])
    assert err.endswith(
        f"predictions file {predictions} not found; `dvc pull results/predictions/random/pope-fixture"
        f".parquet` fetches it (DVC tracks it: dvc.lock), or {rebuild}"
    )


def test_predictions_given_to_score_are_fixed_not_rebuilt(grid, capsys, tmp_path):
    # A file named with --predictions was not written by inference: the error says what is wrong with it and
    # points at the predictions format, never at deleting it or rerunning inference.
    config, config_path = grid
    prepare(config, "pope-fixture")
    made = read_predictions(infer(config, "pope-fixture"))
    out = tmp_path / "given.json"

    def given_error(path):
        err = cli_error(
            capsys,
            [
                "score",
                "random",
                "pope-fixture",
                "--config",
                config_path,
                "--predictions",
                str(path),
                "--out",
                str(out),
            ],
        )
        assert "infer" not in err and "delete" not in err and "rerun" not in err, err
        return err

    fix = (
        "write it again in the predictions format of docs/formats.md "
        "(`results/predictions/<model>/<bench>.parquet`"
    )
    csv = tmp_path / "mine.csv"
    made.drop(columns=["scores", "topk"]).to_csv(csv, index=False)
    err = given_error(csv)
    assert f"predictions file {csv} is unreadable (truncated or not parquet" in err and fix in err
    err = given_error(tmp_path / "nowhere.parquet")
    assert err.endswith("nowhere.parquet not found; check the path")
    wrong_type = tmp_path / "wrong-type.parquet"
    made.assign(prediction_index=made["prediction_index"].map(lambda k: f"option {k}")).to_parquet(wrong_type)
    err = given_error(wrong_type)
    assert re.search(r"column `prediction_index` is (large_)?string, not int64 \(.*'option 0'", err), err
    assert err.endswith("docs/formats.md gives each column's type")
    fewer = tmp_path / "fewer.parquet"
    made.iloc[1:].to_parquet(fewer)
    err = given_error(fewer)
    assert 'misses 1 item(s) in variant "default"' in err and fix in err
    other = tmp_path / "other.parquet"
    made.assign(id=made["id"] + "-x").to_parquet(other)
    err = given_error(other)
    assert "id(s) that the benchmark does not have" in err and fix in err
    bad_index = tmp_path / "bad-index.parquet"
    made.assign(prediction_index=7).to_parquet(bad_index)
    assert given_error(bad_index).endswith("the index is 0-based (-1 for none): fix the file")
    assert not out.exists()
    # the same file, well formed, is scored
    good = tmp_path / "good.parquet"
    made.to_parquet(good)
    assert (
        main(
            [
                "score",
                "random",
                "pope-fixture",
                "--config",
                config_path,
                "--predictions",
                str(good),
                "--out",
                str(out),
            ]
        )
        == 0
        and out.is_file()
    )


def test_manifest_mismatch(grid, capsys, tmp_path):
    config, config_path = grid
    prepare(config, "pope-fixture")
    folder = bench_dir(config, "pope-fixture")
    path = infer(config, "pope-fixture")
    made_with = read_metadata(path)["data_fingerprint"]
    # a file changed after prepare: verify names it, prepare refuses to rebuild over it
    image = folder / load_benchmark(folder).records["image"][0]
    image.write_bytes(image.read_bytes() + b"edited")
    err = cli_error(capsys, ["verify", "pope-fixture", "--config", config_path])
    assert f"{image}: does not match its manifest" in err and f"delete {folder}" in err
    assert f"{image}: does not match its manifest" in cli_error(
        capsys, ["prepare", "pope-fixture", "--config", config_path]
    )
    # a hand-edited manifest
    image.write_bytes(image.read_bytes()[: -len(b"edited")])
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["extra.txt"] = manifest["files"].pop("records.parquet")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "extra.txt").write_bytes((folder / "records.parquet").read_bytes())
    assert "fingerprint does not match its file list" in cli_error(
        capsys, ["verify", "pope-fixture", "--config", config_path]
    )
    # predictions made from other data with the same ids (the benchmark prepared again with another seed)
    other = prepare_benchmark(
        "pope-fixture",
        {"kind": "pope", "source": {"type": "fixture", "seed": 1, "size": 2}},
        tmp_path / "other",
    )
    assert list(load_benchmark(tmp_path / "other").records["id"]) == list(read_predictions(path)["id"])
    with pytest.raises(
        VlmgridError,
        match=rf"made from data with fingerprint {made_with[:12]}, but the benchmark's "
        rf"manifest now says {other['fingerprint'][:12]} .*; rerun",
    ):
        check_data_fingerprint(read_metadata(path), other["fingerprint"], path, "rerun inference")
    check_data_fingerprint(read_metadata(path), made_with, path, "rerun inference")  # the same data: fine
    check_data_fingerprint({}, other["fingerprint"], path, "rerun inference")  # made elsewhere: not recorded
    # and `vlmgrid score` applies it: the stale predictions against the re-prepared benchmark
    from vlmgrid.stages.score import score_cell

    with pytest.raises(VlmgridError, match="made from data with fingerprint .*rerun `vlmgrid infer random"):
        score_cell(
            model_name="random",
            bench_dir=tmp_path / "other",
            predictions_path=path,
            out_path=tmp_path / "s.json",
            samples=10,
            seed=0,
        )
    assert not (tmp_path / "s.json").exists()


def test_config_typos(grid, write_config, capsys):
    config, _ = grid
    for edit, expected in [
        (
            lambda data: data["models"]["random"].update(bakend=data["models"]["random"].pop("backend")),
            'did you mean "backend"',
        ),
        (lambda data: data.update(benchmark=data.pop("benchmarks")), 'did you mean "benchmarks"'),
        (lambda data: data["grid"].update(models=["random", "clip-tny"]), 'did you mean "clip-tiny"'),
    ]:
        data = copy.deepcopy(config.data)
        edit(data)
        err = cli_error(capsys, ["check-config", "--config", str(write_config(data, "typo.yaml"))])
        assert expected in err and "typo.yaml" in err


def test_model_returns_empty_strings(grid, monkeypatch):
    config, _ = grid
    monkeypatch.setitem(BACKENDS._items, "silent", Silent)
    settings = {"backend": "silent"}
    prepare(config, "pope-fixture")
    frame = read_predictions(infer(config, "pope-fixture", model="silent", settings=settings))
    assert (frame["raw"] == "").all()  # the raw text is kept
    assert frame["prediction"].isna().all() and frame["error"].isna().all()
    result = score(config, "pope-fixture", model="silent")
    # POPE's official rule reads an unparsable answer as "yes": two items per split, one of each answer
    assert result["format_error_rate"] == 100.0 and result["n_valid"] == 0 and result["n_errors"] == 0
    assert result["metrics"]["accuracy"]["value"] == 50.0 and result["value"] == pytest.approx(
        200 / 3, abs=1e-3
    )
    prepare(config, "textvqa-fixture")
    infer(config, "textvqa-fixture", model="silent", settings=settings)
    result = score(config, "textvqa-fixture", model="silent")
    assert result["n"] == 4 and result["format_error_rate"] == 100.0 and result["value"] == 0.0


def test_api_500s_and_garbage_are_never_rows(grid):
    config, _ = grid
    prepare(config, "pope-fixture")
    server = FakeOpenAIServer().start()
    try:
        server.reply = lambda body: "Yes, there is."
        server.script.extend(
            [
                Reply(500, json.dumps({"error": {"message": "overloaded"}})),
                Reply(200, "<html>gateway</html>"),
                Reply(200, json.dumps(completion(""))),  # an empty answer: the model's, not a failure
                Reply(200, json.dumps({"choices": []})),
            ]
        )
        settings = {
            "backend": "openai",
            "base_url": server.base_url,
            "model": "fake-vlm",
            "max_retries": 0,
            "concurrency": 1,
            "cache": False,
        }
        # The first part's failed requests are asked again in the job's second pass, and answered then.
        frame = read_predictions(infer(config, "pope-fixture", model="api", settings=settings))
        assert server.count == 6 + 4
        assert len(frame) == 6 and frame["error"].isna().all() and frame["prediction"].tolist() == ["yes"] * 6
        # When they keep failing, the job stops with one sentence and writes no predictions file.
        server.script.extend([Reply(500, json.dumps({"error": {"message": "overloaded"}}))] * 12)
        out = paths.predictions_path(config.results_dir, "api", "pope-fixture")
        out.unlink()
        with pytest.raises(
            VlmgridError,
            match=r"api on pope-fixture: 4 item\(s\) failed to run \(HTTP 500: "
            r"overloaded \(gave up after 1 attempt\): 4x; the first: random-1, "
            r".*\) and the job stopped: the last 10 requests to .* all failed",
        ):
            infer(config, "pope-fixture", model="api", settings=settings)
        assert not out.exists()
        # An empty answer is a row: the raw text is kept and it is a format error.
        server.script.clear()
        server.script.append(Reply(200, json.dumps(completion(""))))
        frame = read_predictions(infer(config, "pope-fixture", model="api", settings=settings))
    finally:
        server.stop()
    assert frame["raw"].iloc[0] == "" and pd.isna(frame["prediction"].iloc[0]) and frame["error"].isna().all()
    result = score(config, "pope-fixture", model="api")
    assert result["n_errors"] == 0 and result["n_valid"] == 5
    assert result["format_error_rate"] == pytest.approx(100 / 6, abs=1e-3)
