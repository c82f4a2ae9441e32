"""The lenient figure: the headline follows the authors' reading; a kind's more lenient reading of the same
generated answers is scored beside it as `<headline>_lenient`, named as such, never in its place."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from vlmgrid.benchmarks import BENCHMARKS, load_benchmark
from vlmgrid.predictions import rows_to_table, write_predictions
from vlmgrid.protocols.parsing import PARSERS, parse
from vlmgrid.stages.prepare import prepare_benchmark
from vlmgrid.stages.score import lenient_predictions, score_cell


def test_every_kind_names_registered_parsers():
    for kind in (BENCHMARKS.get(name) for name in BENCHMARKS):
        for name in ([kind.parser] if kind.parser else []) + list(kind.lenient_parsers.values()):
            assert name in PARSERS, (kind.name, name)
    assert BENCHMARKS.get("scienceqa_img").parser == "scienceqa"
    assert BENCHMARKS.get("kaleidoscope").lenient_parsers == {
        "json": "exam_json_lenient",
        "tag": "exam_tag_lenient",
    }


def _prepare(tmp_path, kind: str, **source):
    bench_dir = tmp_path / kind
    prepare_benchmark(kind, {"kind": kind, "source": {"type": "fixture", **source}}, bench_dir)
    return load_benchmark(bench_dir)


def _predictions(tmp_path, bench, rows) -> str:
    path = tmp_path / f"{bench.name}.parquet"
    metadata = {
        "model": "m",
        "benchmark": bench.name,
        "data_fingerprint": bench.manifest["fingerprint"],
        "strategy": "generate",
        "applicable": True,
    }
    write_predictions(path, rows_to_table(rows), metadata)
    return path


def _generated(records: pd.DataFrame, texts, parser: str, variant: str = "default") -> list[dict]:
    rows = []
    for (_, record), text in zip(records.iterrows(), texts):
        parsed = parse(parser, text, list(record["options"]))
        rows.append(
            {
                "id": record["id"],
                "variant": variant,
                "raw": text,
                "prediction": parsed.prediction,
                "prediction_index": parsed.index,
            }
        )
    return rows


def _score(tmp_path, bench, rows) -> dict:
    out = tmp_path / f"{bench.name}.json"
    score_cell(
        model_name="m",
        bench_dir=bench.root,
        predictions_path=_predictions(tmp_path, bench, rows),
        out_path=out,
        samples=50,
        seed=0,
    )
    return json.loads(out.read_text())


def test_mme_leading_spaces_are_other_in_the_headline_and_read_in_the_lenient_figure(tmp_path):
    bench = _prepare(tmp_path, "mme", size=4)
    # Every answer right, but written after three spaces: MME's tool looks at the first 4 characters only and
    # strips nothing, so "   Yes" and "   No" are neither yes nor no.
    texts = ["   " + answer.capitalize() for answer in bench.records["answer"]]
    score = _score(tmp_path, bench, _generated(bench.records, texts, "mme"))
    assert score["value"] == 0.0 and score["format_error_rate"] == 100.0
    assert score["lenient"]["metric"] == "scaled_lenient" and score["lenient"]["parsers"] == {
        "default": "mme_lenient"
    }
    assert score["lenient"]["value"] == 100.0 and score["lenient"]["format_error_rate"] == 0.0
    assert score["metrics"]["scaled_lenient"] == {"value": 100.0, "ci95": score["lenient"]["ci95"]}
    assert score["metrics"]["scaled"]["value"] == score["value"]


def test_kaleidoscope_rereads_each_prompt_mode_with_its_own_lenient_reader(tmp_path):
    bench = _prepare(tmp_path, "kaleidoscope")
    letters = ["ABCDE"[i] for i in bench.records["answer_index"]]
    half = len(letters) // 2
    # json mode: "(B)" is no choice for the authors' reader; tag mode: the authors read the first tag.
    json_rows = _generated(
        bench.records.iloc[:half], [f'{{"choice": "({x})"}}' for x in letters[:half]], "exam_json", "json"
    )
    tag_rows = _generated(
        bench.records.iloc[half:],
        [f"<ANSWER> X </ANSWER> so <ANSWER> {x} </ANSWER>" for x in letters[half:]],
        "exam_tag",
        "tag",
    )
    reread = lenient_predictions(bench.kind, bench.records, pd.DataFrame(json_rows + tag_rows))
    frame, parsers = reread
    assert parsers == {"json": "exam_json_lenient", "tag": "exam_tag_lenient"}
    assert (frame["prediction_index"].to_numpy() == bench.records["answer_index"].to_numpy()).all()
    assert (pd.DataFrame(json_rows + tag_rows)["prediction_index"] == -1).all()


def test_rows_without_text_or_with_an_error_keep_their_reading(tmp_path):
    bench = _prepare(tmp_path, "cvbench", size=2)
    ids = list(bench.records["id"])
    rows = [
        {
            "id": ids[0],
            "variant": "default",
            "raw": None,
            "prediction": "x",
            "prediction_index": 0,
            "scores": [0.1, 0.2],
        },
        {"id": ids[1], "variant": "default", "raw": ".A", "prediction": None, "prediction_index": -1},
        {
            "id": ids[2],
            "variant": "default",
            "raw": "A",
            "prediction": None,
            "prediction_index": -1,
            "error": "unreadable image",
        },
    ]
    frame, parsers = lenient_predictions(bench.kind, bench.records.iloc[:3], pd.DataFrame(rows))
    assert list(frame["prediction_index"]) == [0, 0, -1]
    assert parsers == {"default": "cvbench_lenient"}
    # A kind without a lenient reading, or predictions without generated text, give no lenient figure.
    assert lenient_predictions(BENCHMARKS.get("pope"), bench.records, pd.DataFrame(rows)) is None
    assert lenient_predictions(bench.kind, bench.records, pd.DataFrame(rows[:1])) is None


def test_a_score_without_generated_answers_has_no_lenient_figure(tmp_path):
    bench = _prepare(tmp_path, "scienceqa_img", size=4)
    rows = [
        {
            "id": i,
            "variant": "default",
            "raw": None,
            "prediction": options[0],
            "prediction_index": 0,
            "scores": [0.0] * len(options),
        }
        for i, options in zip(bench.records["id"], bench.records["options"])
    ]
    score = _score(tmp_path, bench, rows)
    assert "lenient" not in score and not any(name.endswith("_lenient") for name in score["metrics"])


@pytest.mark.parametrize(
    "text, headline, lenient", [("A", 0, 0), ("(A) the answer", -1, 0), ("B) dog", -1, 1)]
)
def test_scienceqa_headline_is_llavas_reading_and_the_letter_reader_is_its_lenient_one(
    text, headline, lenient
):
    options = ["cat", "dog", "bird"]
    assert parse("scienceqa", text, options).index == headline
    assert parse("letter", text, options).index == lenient
