"""A predictions file is the model's output only while its rows are the ones vlmgrid wrote: its metadata
record a hash of its rows (`rows_sha256`), so a file edited after the run, its metadata kept (every answer set
to the gold), is refused when scored, compared, diffed, inspected or merged; and every output records the
version of the code that made it (`code_version`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.common import pope_grid_file

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.codeversion import running_version
from vlmgrid.config import load_config
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import (
    METADATA_KEY,
    SCHEMA,
    read_metadata,
    rows_digest,
    rows_to_table,
    write_predictions,
)

BENCH = "pope-fixture"
MODELS = {"random": {"backend": "baseline", "seed": 0}, "first": {"backend": "baseline", "strategy": "first"}}


@pytest.fixture
def grid(small_config, tmp_path, capsys):
    """Both baselines inferred and scored on a small POPE fixture; the config."""
    path = pope_grid_file(small_config, tmp_path, MODELS)
    for command in (
        ["prepare", BENCH],
        *(
            step
            for model in MODELS
            for step in (["fetch-model", model], ["infer", model, BENCH], ["score", model, BENCH])
        ),
    ):
        assert main([*command, "--config", path]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return load_config(path)


def _predictions(config, model: str = "random") -> Path:
    return paths.predictions_path(config.results_dir, model, BENCH)


def _edit_to_gold(config, path: Path) -> None:
    """Every answer set to the gold, as a user would with pyarrow: the metadata kept as they were."""
    records = (
        pq.read_table(paths.bench_dir(config.data_dir, BENCH) / "records.parquet").to_pandas().set_index("id")
    )
    table = pq.read_table(path)
    frame = table.to_pandas()
    frame["prediction"] = frame["id"].map(records["answer"])
    frame["prediction_index"] = frame["id"].map(records["answer_index"]).astype("int64")
    edited = pa.Table.from_pandas(frame, schema=table.schema.remove_metadata(), preserve_index=False)
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)


def _score(config) -> dict:
    return json.loads(paths.score_path(config.results_dir, "random", BENCH).read_text())


def _refused(capsys, *args) -> str:
    """The one line a refused command prints."""
    assert main(list(args)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vlmgrid: error: "), lines
    return lines[0]


def test_an_edited_predictions_file_is_refused_when_scored_in_one_sentence(grid, capsys):
    path = _predictions(grid)
    _edit_to_gold(grid, path)
    said = _refused(capsys, "score", "random", BENCH, "--config", str(grid.path))
    assert f"predictions file {path}: its rows are not the ones vlmgrid wrote (edited after the run)" in said
    assert "rerun `vlmgrid infer random pope-fixture` to rebuild it, or restore the file" in said
    assert _score(grid)["value"] < 100.0  # the number of the model's own rows stays


def test_compare_inspect_diff_and_a_named_file_refuse_an_edited_one(grid, capsys, tmp_path):
    path = _predictions(grid)
    _edit_to_gold(grid, path)
    config = ["--config", str(grid.path)]
    for command in (
        ["compare", BENCH],
        ["inspect", BENCH],
        ["diff", BENCH, "random", "first"],
        ["score", "random", BENCH, "--predictions", str(path), "--out", str(tmp_path / "s.json")],
    ):
        said = _refused(capsys, *command, *config)
        assert f"predictions file {path}: its rows are not the ones vlmgrid wrote" in said, command
    # a file named on the command line is fixed, not rebuilt: the sentence says how
    assert "restore the file, or remove its vlmgrid metadata to take it as predictions made elsewhere" in said


def test_a_file_without_a_rows_hash_is_scored_only_when_named(grid, capsys, tmp_path):
    path = _predictions(grid)
    table = pq.read_table(path)
    metadata = read_metadata(path)
    del metadata["rows_sha256"]
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()}), path)
    said = _refused(capsys, "score", "random", BENCH, "--config", str(grid.path))
    assert f"predictions file {path} records no hash of its rows" in said
    assert "vlmgrid infer random pope-fixture" in said
    # predictions made elsewhere (docs/formats.md: the metadata may be absent) are scored as they are
    elsewhere = tmp_path / "mine.parquet"
    pq.write_table(table.replace_schema_metadata(None), elsewhere)
    out = tmp_path / "mine.json"
    assert (
        main(
            [
                "score",
                "random",
                BENCH,
                "--predictions",
                str(elsewhere),
                "--out",
                str(out),
                "--config",
                str(grid.path),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["value"] == _score(grid)["value"]


def test_merged_shards_record_their_rows_hash_and_an_edited_shard_is_refused(small_config, tmp_path, capsys):
    path = pope_grid_file(small_config, tmp_path, {"random": MODELS["random"]})
    data = yaml.safe_load(Path(path).read_text())
    data["benchmarks"][BENCH]["shards"] = 2
    Path(path).write_text(yaml.safe_dump(data))
    config = load_config(path)
    for command in (
        ["prepare", BENCH],
        ["fetch-model", "random"],
        ["infer", "random", BENCH, "--shard", "1/2"],
        ["infer", "random", BENCH, "--shard", "2/2"],
    ):
        assert main([*command, "--config", path]) == 0
    assert main(["merge-shards", "random", BENCH, "--config", path]) == 0
    merged = read_metadata(_predictions(config))
    assert merged["rows_sha256"] == rows_digest(pq.read_table(_predictions(config)))
    assert merged["code_version"] == running_version()
    capsys.readouterr()
    shard = paths.shard_path(config.results_dir, "random", BENCH, 2, 2)
    _edit_to_gold(config, shard)
    said = _refused(capsys, "merge-shards", "random", BENCH, "--config", path)
    assert f"predictions file {shard}: its rows are not the ones vlmgrid wrote" in said
    assert "vlmgrid infer random pope-fixture --shard 2/2" in said


def test_every_writer_records_its_rows_hash_and_the_code_version(grid, tmp_path):
    inferred = _predictions(grid)
    not_applicable = tmp_path / "na.parquet"
    from vlmgrid.cellrun.job import write_not_applicable

    write_not_applicable(
        model_name="clip",
        model_settings={},
        benchmark=BENCH,
        reason="it cannot",
        out_path=not_applicable,
        partial_dir=tmp_path / "parts",
    )
    for path in (inferred, not_applicable):
        metadata = read_metadata(path)
        assert metadata["rows_sha256"] == rows_digest(pq.read_table(path))
        assert metadata["code_version"] == running_version()
    # merged shards: test_merged_shards_record_their_rows_hash_and_an_edited_shard_is_refused; imports:
    # tests/imports/test_import_predictions.py::test_mmbench_answers_map_to_the_published_rows_and_score


def test_the_rows_hash_is_sha256_of_the_rows_as_canonical_json_whatever_the_chunks():
    rows = [
        {
            "id": "a",
            "variant": "default",
            "raw": "Yes é",
            "prediction": "yes",
            "prediction_index": 0,
            "scores": [0.25, -1.5],
            "topk": None,
            "error": None,
        },
        {
            "id": "b",
            "variant": "default",
            "raw": None,
            "prediction": None,
            "prediction_index": -1,
            "scores": None,
            "topk": [3, 1],
            "error": "image unreadable",
        },
    ]
    table = rows_to_table(rows)
    # the documented serialisation (docs/formats.md), so any tool can check it: a JSON array per row, in the
    # schema's column order, compact, ASCII, each followed by a line feed
    canonical = (
        '["a","default","Yes \\u00e9","yes",0,[0.25,-1.5],null,null]\n'
        '["b","default",null,null,-1,null,[3,1],"image unreadable"]\n'
    )
    import hashlib

    assert rows_digest(table) == hashlib.sha256(canonical.encode()).hexdigest()
    assert rows_digest(pa.concat_tables([table.slice(0, 1), table.slice(1)])) == rows_digest(table)
    assert rows_digest(
        pa.Table.from_pandas(table.to_pandas(), schema=SCHEMA, preserve_index=False)
    ) == rows_digest(table)
    assert rows_digest(rows_to_table(rows[::-1])) != rows_digest(table)  # the order of the rows counts


def test_a_writer_records_its_own_code_version_whatever_the_metadata_it_is_given(grid):
    path = _predictions(grid)
    assert read_metadata(path)["code_version"] == running_version()
    table = pq.read_table(path)
    metadata = {**read_metadata(path), "code_version": "0" * 16}
    write_predictions(path, table.replace_schema_metadata(None), metadata)
    assert read_metadata(path)["code_version"] == running_version()


def test_score_compare_diff_and_fetch_record_the_code_version_and_the_tables_do_not(grid, capsys, tmp_path):
    config = ["--config", str(grid.path)]
    assert main(["compare", BENCH, *config]) == 0
    assert main(["diff", BENCH, "random", "first", "--json", str(tmp_path / "diff.json"), *config]) == 0
    assert main(["report", *config]) == 0
    outputs = [
        paths.score_path(grid.results_dir, "random", BENCH),
        paths.comparison_path(grid.results_dir, BENCH),
        tmp_path / "diff.json",
    ]
    for output in outputs:
        recorded = json.loads(output.read_text())
        assert recorded["code_version"] == running_version() and "vlmgrid_version" in recorded, output
    # The records of what was read: the same files give the same bytes, whatever code wrote them.
    for ledger in (
        paths.model_dir(grid.data_dir, "random") / "model.json",
        grid.data_dir / BENCH / "manifest.json",
    ):
        assert "code_version" not in json.loads(ledger.read_text()), ledger
    tables = {path: path.read_bytes() for path in (grid.results_dir / "tables").rglob("*") if path.is_file()}
    assert tables
    for output in outputs[:2]:  # other code made them: the tables are the same bytes
        recorded = json.loads(output.read_text())
        output.write_text(json.dumps({**recorded, "code_version": "0" * 16}))
    assert main(["report", *config]) == 0
    assert {path: path.read_bytes() for path in tables} == tables


def test_an_edited_import_is_imported_again_not_inferred(tmp_path):
    from vlmgrid.predictions import read_predictions
    from vlmgrid.protocols.base import prediction_row

    path = tmp_path / "imported.parquet"
    metadata = {
        "model": "m",
        "benchmark": BENCH,
        "provenance": {"imported": "imported from a.jsonl (llava-answers)"},
    }
    write_predictions(
        path, rows_to_table([prediction_row("a", raw="no", prediction="no", prediction_index=1)]), metadata
    )
    table = pq.read_table(path)
    edited = rows_to_table([prediction_row("a", raw="yes", prediction="yes", prediction_index=0)])
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(
        VlmgridError,
        match=r"its rows are not the ones vlmgrid wrote \(edited after the run\); import "
        r"the answers again \(`vlmgrid import-predictions \.\.\. --replace`\), or "
        r"restore the file",
    ):
        read_predictions(path, "rerun `vlmgrid infer m pope-fixture` to rebuild it")
