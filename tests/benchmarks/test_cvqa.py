"""CVQA: the hub format and its fixture, the four prompt settings, hidden labels, the metric and the
submission."""

import copy
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers.chain import infer_cell

from vlmgrid import paths
from vlmgrid.benchmarks import BENCHMARKS, check_source, load_benchmark
from vlmgrid.benchmarks import cvqa as cvqa_bench
from vlmgrid.benchmarks.rawio import write_hub_parquet
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES
from vlmgrid.fixtures.kinds import cvqa as cvqa_fixture
from vlmgrid.metrics import METRICS, score_predictions
from vlmgrid.metrics.cvqa import (
    LabelsHidden,
    accuracy_by_pair,
    labels_hidden,
    submission_table,
    submission_tables,
)
from vlmgrid.model_requests import GenerationResult, OptionScores, ScoreResult
from vlmgrid.models.base import Backend
from vlmgrid.protocols import make_runner
from vlmgrid.protocols.cvqa import CVQAPrompts, cvqa_prompts
from vlmgrid.stages.prepare import prepare_benchmark
from vlmgrid.stages.score import score_cell

REPO = Path(__file__).resolve().parents[2]
PROMPTS = REPO / "config" / "prompts"
SETTINGS = ["loc-en", "loc-local", "noloc-en", "noloc-local"]
KIND = BENCHMARKS.get("cvqa")
FIXTURE = BENCHMARK_FIXTURES.get("cvqa")


# ---------------------------------------------------------------------------------------------- raw format


def _fixture(tmp_path, **settings) -> Path:
    raw = tmp_path / "raw"
    FIXTURE.write(raw, {**FIXTURE.defaults, **settings})
    return raw


def _raw_rows(raw: Path) -> list[dict]:
    return [
        row for path in sorted(raw.glob("data/test-*.parquet")) for row in pq.read_table(path).to_pylist()
    ]


def test_subset_is_a_language_country_tuple_repr():
    assert cvqa_bench.parse_subset("('Japanese', 'Japan')", "f") == ("Japanese", "Japan")
    assert cvqa_bench.parse_subset("(\"Breton\", 'France')", "f") == ("Breton", "France")
    for bad in ("Japanese-Japan", "('Japanese',)", "('Japanese', 3)", None, "__import__('os')"):
        with pytest.raises(VlmgridError, match="Subset"):
            cvqa_bench.parse_subset(bad, "f")


def test_fixture_is_hub_parquet_in_shards_with_embedded_images(tmp_path):
    raw = _fixture(tmp_path, size=4)
    shards = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*.parquet"))
    assert shards == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]
    table = pq.read_table(raw / shards[0])
    assert table.column_names == list(cvqa_bench.COLUMNS)
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert features["image"] == {"_type": "Image"} and features["Options"]["_type"] == "Sequence"
    rows = _raw_rows(raw)
    assert len(rows) == 7 * 4
    assert rows[0]["image"]["bytes"].startswith(
        b"\xff\xd8"
    )  # JPEG bytes inside the parquet, as the hub stores them
    assert len({row["Subset"] for row in rows}) == 7 and len({row["ID"] for row in rows}) == 28
    assert all(re.fullmatch(r"\d+_\d", row["ID"]) for row in rows)
    assert all(
        0 <= row["Label"] < 4 and len(row["Options"]) == len(row["Translated Options"]) == 4 for row in rows
    )


def test_fixture_writes_non_latin_scripts(tmp_path):
    scripts = {
        "Arabic": r"[\u0600-\u06FF]",
        "Bengali": r"[\u0980-\u09FF]",
        "Cyrillic": r"[\u0400-\u04FF]",
        "Telugu": r"[\u0C00-\u0C7F]",
        "CJK": r"[\u4E00-\u9FFF]",
    }
    rows = _raw_rows(_fixture(tmp_path, size=1))
    for script, pattern in scripts.items():
        assert any(
            re.search(pattern, row["Question"]) and all(re.search(pattern, o) for o in row["Options"])
            for row in rows
        ), script
    assert all(row["Translated Question"].isascii() for row in rows)


def test_fixture_is_deterministic_and_seeded(tmp_path):
    a, b, c = (_fixture(tmp_path / name, seed=seed) for name, seed in (("a", 1), ("b", 1), ("c", 2)))
    files = lambda raw: {p.relative_to(raw): p.read_bytes() for p in raw.rglob("*.parquet")}  # noqa: E731
    assert files(a) == files(b)
    assert files(a) != files(c)


def test_hidden_labels_fixture_has_every_label_minus_one(tmp_path):
    rows = _raw_rows(_fixture(tmp_path, hidden_labels=True))
    assert {row["Label"] for row in rows} == {-1}
    with pytest.raises(VlmgridError, match="hidden_labels"):
        _fixture(tmp_path / "x", hidden_labels="yes")


def test_hidden_labels_is_a_cvqa_fixture_setting_only():
    assert (
        check_source(KIND, {"type": "fixture", "hidden_labels": True}, "b", FIXTURE)["hidden_labels"] is True
    )
    with pytest.raises(VlmgridError, match="hidden_labels"):
        check_source(
            BENCHMARKS.get("scienceqa_img"),
            {"type": "fixture", "hidden_labels": True},
            "b",
            BENCHMARK_FIXTURES.get("scienceqa_img"),
        )


# ---------------------------------------------------------------------------------------------- adapter


def test_adapter_keeps_both_languages_and_parses_the_pair(tmp_path):
    raw = _fixture(tmp_path)
    records = KIND.adapt(raw, tmp_path / "bench").records
    rows = _raw_rows(raw)
    assert list(records["id"]) == [row["ID"] for row in rows]
    first = records.iloc[0]
    assert (first["language"], first["country"], first["country_language"]) == (
        "Egyptian Arabic",
        "Egypt",
        "Egypt-Egyptian Arabic",
    )
    assert first["question"] == rows[0]["Question"] and first["question_en"] == rows[0]["Translated Question"]
    assert (
        list(first["options"]) == rows[0]["Options"]
        and list(first["options_en"]) == rows[0]["Translated Options"]
    )
    assert (
        first["answer"] == rows[0]["Options"][rows[0]["Label"]] and first["answer_index"] == rows[0]["Label"]
    )
    assert (tmp_path / "bench" / first["image"]).is_file()
    assert {"category", "image_type", "image_source", "license"} <= set(records.columns)
    # The local options are the translations of the English ones, position by position.
    for _, record in records.iterrows():
        kind = next(k for k, (q, _) in cvqa_fixture.ENGLISH.items() if q == record["question_en"])
        local = cvqa_fixture.LOCAL[(record["language"], record["country"])][kind][1]
        english = cvqa_fixture.ENGLISH[kind][1]
        assert [local.index(o) for o in record["options"]] == [english.index(o) for o in record["options_en"]]


def test_adapter_reads_hidden_labels_as_no_answer(tmp_path):
    records = KIND.adapt(_fixture(tmp_path, hidden_labels=True), tmp_path / "bench").records
    assert set(records["answer_index"]) == {-1} and records["answer"].isna().all()


def _rewrite(raw: Path, change) -> None:
    path = raw / "data/test-00000-of-00002.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    change(rows[0])
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    write_hub_parquet(path, cvqa_bench.SCHEMA, rows, features)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda row: row.update(Label=4), "Label 4"),
        (lambda row: row.update(Label=-2), "Label -2"),
        (lambda row: row.update(Subset="Japanese"), "Subset"),
        (
            lambda row: row.update({"Translated Options": row["Translated Options"][:3]}),
            "4 local options but 3",
        ),
        (lambda row: row.update(Options=["only one"]), "at least 2"),
    ],
)
def test_adapter_names_the_row_of_a_damaged_file(tmp_path, change, message):
    raw = _fixture(tmp_path)
    _rewrite(raw, change)
    with pytest.raises(VlmgridError, match=re.escape(message)) as error:
        KIND.adapt(raw, tmp_path / "bench")
    assert "test-00000-of-00002.parquet row 0" in str(error.value)


def test_real_source_is_the_hub_test_split_with_the_cards_count():
    assert KIND.default_source == {
        "type": "hf_hub",
        "repo": "afaji/cvqa",
        "revision": "main",
        "split": "test",
    }
    assert KIND.expected_count == 10374 and KIND.raw_files == ("data/test-*.parquet",)


# ---------------------------------------------------------------------------------------------- prompts


def _bench(records: pd.DataFrame, root: Path = Path(".")):
    return SimpleNamespace(
        name="cvqa-test",
        root=root,
        records=records,
        prompts_dir=PROMPTS,
        kind=SimpleNamespace(parser="letter", templates=()),
    )


def _records(n_images: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["q1"],
            "image": ["img.png"],
            "question": ["写真のキャラクターの名前は? "],
            "options": [["コスモ星丸", "ミャクミャク", " フリービー ", "ハイバオ"]],
            "answer": ["ミャクミャク"],
            "answer_index": [1],
            "question_en": ["What is the name of the character? "],
            "options_en": [["Cosmo Hoshimaru", "MYAKU-MYAKU", "Freebie ", "Haibao"]],
            "country": ["Japan"],
            "language": ["Japanese"],
            "country_language": ["Japan-Japanese"],
        }
    )


@pytest.fixture
def image_bench(tmp_path):
    from PIL import Image

    Image.new("RGB", (8, 8), (200, 10, 10)).save(tmp_path / "img.png")
    return _bench(_records(), tmp_path)


class Recorder(Backend):
    """A test backend that keeps what it is asked (`asked`)."""

    def __init__(self):
        super().__init__({})
        self.asked = []


class RecordingScorer(Recorder):
    """Scores the letter C highest (the options in order otherwise) and keeps the requests."""

    name = "recording"
    capabilities = frozenset({"score_options"})

    def score_results(self, requests):
        self.asked.extend(requests)
        return [
            ScoreResult(
                OptionScores(
                    total=[0.0 if i == 2 else -1.0 - i for i in range(len(r.options))],
                    tokens=[1] * len(r.options),
                )
            )
            for r in requests
        ]


def test_the_four_prompts(image_bench):
    model = RecordingScorer()
    runner, strategy = make_runner("cvqa", model, image_bench)
    rows = runner(image_bench.records)
    prompts = {row["variant"]: request.prompt for row, request in zip(rows, model.asked)}
    # the paper's template, the options written as MMLU writes them (a line each, "A. option")
    english = (
        "Question: What is the name of the character? Options:\n"
        "A. Cosmo Hoshimaru\nB. MYAKU-MYAKU\nC. Freebie\nD. Haibao\nShort Answer:"
    )
    local = (
        "Question: 写真のキャラクターの名前は? Options:\n"
        "A. コスモ星丸\nB. ミャクミャク\nC. フリービー\nD. ハイバオ\nShort Answer:"
    )
    assert prompts == {
        "loc-en": "Location: Japan. " + english,
        "loc-local": "Location: Japan. " + local,
        "noloc-en": english,
        "noloc-local": local,
    }
    assert all(request.variant == row["variant"] for row, request in zip(rows, model.asked))
    assert strategy == "score_options"
    assert all(tuple(r.letters) == ("A", "B", "C", "D") and r.image is not None for r in model.asked)
    assert [(row["id"], row["variant"], row["prediction_index"]) for row in rows] == [
        ("q1", v, 2) for v in SETTINGS
    ]
    assert [row["prediction"] for row in rows] == ["Freebie ", " フリービー ", "Freebie ", " フリービー "]
    assert rows[0]["scores"] == [-1.0, -2.0, 0.0, -4.0]


class FakeEmbedder(Recorder):
    """One image direction; a text is similar to the image when it names "MYAKU" or "ミャク"."""

    name = "fake-embed"
    capabilities = frozenset({"embed"})

    def embed_images(self, images):
        return np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(images), 1))

    def embed_texts(self, texts):
        self.asked.extend(texts)
        return np.array(
            [[0.9, 0.1] if ("MYAKU" in t or "ミャク" in t) else [0.1, 0.9] for t in texts], dtype=np.float32
        )


def test_embedding_models_compare_the_image_with_question_plus_option(image_bench):
    model = FakeEmbedder()
    rows = make_runner("cvqa", model, image_bench)[0](image_bench.records)
    assert [(row["variant"], row["prediction_index"]) for row in rows] == [(v, 1) for v in SETTINGS]
    assert model.asked[:2] == [
        "Location: Japan. What is the name of the character? Cosmo Hoshimaru",
        "Location: Japan. What is the name of the character? MYAKU-MYAKU",
    ]
    assert model.asked[-1] == "写真のキャラクターの名前は? ハイバオ" and len(model.asked) == 16
    assert rows[0]["scores"] == pytest.approx([0.1, 0.9, 0.1, 0.1])


class CannedGenerator(Backend):
    name = "canned"
    capabilities = frozenset({"generate"})

    def __init__(self, texts):
        super().__init__({})
        self.texts = list(texts)

    def generate_results(self, requests):
        return [GenerationResult(self.texts.pop(0)) for _ in requests]


def test_generation_is_read_by_the_letter_parser_and_kept_raw(image_bench):
    model = CannedGenerator(["B", "(D) ハイバオ", "I cannot tell.", "The answer is A."])
    rows = make_runner("cvqa", model, image_bench)[0](image_bench.records)
    assert [(row["variant"], row["prediction_index"]) for row in rows] == list(zip(SETTINGS, [1, 3, -1, 0]))
    assert rows[2]["prediction"] is None and rows[2]["raw"] == "I cannot tell." and rows[2]["error"] is None


def test_an_unreadable_image_is_an_error_row_in_every_setting(tmp_path):
    (tmp_path / "img.png").write_bytes(b"not an image")
    bench = _bench(_records(), tmp_path)
    model = RecordingScorer()
    rows = make_runner("cvqa", model, bench)[0](bench.records)
    assert [row["variant"] for row in rows] == SETTINGS and not model.asked
    assert all(row["error"] and row["prediction_index"] == -1 for row in rows)


def test_the_prompt_set_is_checked_with_one_sentence_naming_the_key():
    good = {
        "settings": {"a": {"language": "en", "prompt": "{question} {options}", "text": "{question} {option}"}}
    }
    assert list(CVQAPrompts.from_mapping(good, "p.yaml").settings) == ["a"]
    assert list(cvqa_prompts(PROMPTS).settings) == SETTINGS
    for change, message in (
        ({"prompt": "{question}"}, "settings.a.prompt lacks {options}"),
        ({"text": "{question} {option} {city}"}, "settings.a.text has the unknown placeholder {city}"),
        ({"language": "fr"}, "settings.a.language is 'fr'"),
    ):
        bad = copy.deepcopy(good)
        bad["settings"]["a"].update(change)
        with pytest.raises(VlmgridError, match=re.escape(f"p.yaml: {message}")):
            CVQAPrompts.from_mapping(bad, "p.yaml")


# ---------------------------------------------------------------------------------------------- metric


def _metric_records() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "answer_index": [0, 1, 2, 3],
            "country_language": ["India-Bengali", "India-Bengali", "India-Telugu", "India-Telugu"],
        }
    )


def _predictions(picks: dict[str, list[int]]) -> pd.DataFrame:
    rows = []
    for variant, indices in picks.items():
        for item_id, index in zip("abcd", indices):
            rows.append(
                {
                    "id": item_id,
                    "variant": variant,
                    "prediction": None if index < 0 else f"o{index}",
                    "prediction_index": index,
                    "error": None,
                }
            )
    return pd.DataFrame(rows)


# Right per setting: loc-en 4/4, loc-local a, b (2/4), noloc-en c only (1/4), noloc-local none (d unparsable).
PICKS = {
    "loc-en": [0, 1, 2, 3],
    "loc-local": [0, 1, 0, 0],
    "noloc-en": [1, 0, 2, 0],
    "noloc-local": [3, 3, 3, -1],
}


def test_accuracy_per_setting_mean_headline_and_pair_breakdown():
    score = score_predictions(
        "cvqa", _metric_records(), _predictions(PICKS), breakdown_by=("country_language",), samples=20, seed=0
    )
    assert score["metric"] == "accuracy" and score["value"] == pytest.approx((100 + 50 + 25 + 0) / 4)
    assert {v: e["value"] for v, e in score["variants"].items()} == {
        "loc-en": 100.0,
        "loc-local": 50.0,
        "noloc-en": 25.0,
        "noloc-local": 0.0,
    }
    pairs = score["breakdown"]["country_language"]
    # Bengali (a, b): 100, 100, 0, 0 -> 50; Telugu (c, d): 100, 0, 50, 0 -> 37.5
    assert pairs["India-Bengali"]["metrics"]["accuracy"]["value"] == pytest.approx(50.0)
    assert pairs["India-Telugu"]["metrics"]["accuracy"]["value"] == pytest.approx(37.5)
    assert score["format_error_rate"] == pytest.approx(100 / 16)


def test_accuracy_by_pair_is_the_papers_table():
    table = accuracy_by_pair(_metric_records(), _predictions(PICKS))
    assert list(table.columns) == SETTINGS + ["mean"]
    assert list(table.index) == ["India-Bengali", "India-Telugu", "all"]
    assert table.loc["India-Bengali"].tolist() == [100.0, 100.0, 0.0, 0.0, 50.0]
    assert table.loc["India-Telugu"].tolist() == [100.0, 0.0, 50.0, 0.0, 37.5]
    assert table.loc["all", "mean"] == pytest.approx(43.75)


def test_hidden_labels_are_refused_never_scored():
    hidden = _metric_records().assign(answer_index=-1)
    assert labels_hidden(hidden) and not labels_hidden(_metric_records())
    with pytest.raises(LabelsHidden, match="hidden labels .* submit"):
        score_predictions("cvqa", hidden, _predictions(PICKS), samples=10)
    with pytest.raises(LabelsHidden):
        accuracy_by_pair(hidden, _predictions(PICKS))
    mixed = _metric_records().assign(answer_index=[0, -1, 2, 3])
    with pytest.raises(VlmgridError, match='record "b" has a hidden label') as error:
        score_predictions("cvqa", mixed, _predictions(PICKS), samples=10)
    assert not isinstance(error.value, LabelsHidden)


def test_submission_table_lists_every_item_with_its_chosen_letter():
    records = _metric_records().assign(answer_index=-1)
    predictions = _predictions(PICKS).sample(frac=1.0, random_state=0)  # any row order
    predictions.loc[(predictions["id"] == "b") & (predictions["variant"] == "loc-en"), "error"] = "HTTP 500"
    table = submission_table(records, predictions, "loc-en")
    assert list(table.columns) == ["ID", "prediction"]
    # the error row is kept, with an empty prediction the leaderboard counts as wrong
    assert table.to_dict("list") == {"ID": ["a", "b", "c", "d"], "prediction": ["A", "", "C", "D"]}
    tables = submission_tables(records, predictions)
    assert list(tables) == sorted(SETTINGS)
    assert METRICS.get("cvqa").submission(records, predictions)["loc-en"].equals(table)
    assert tables["noloc-local"]["prediction"].tolist() == ["D", "D", "D", ""]
    with pytest.raises(VlmgridError, match='lack item "d"'):
        submission_table(records, predictions[predictions["id"] != "d"], "loc-en")


# ---------------------------------------------------------------------------------------------- whole chain


@pytest.mark.parametrize("hidden", [False, True])
def test_fixture_runs_through_prepare_infer_and_score(small_config, tmp_path, hidden):
    data = copy.deepcopy(small_config)
    data["benchmarks"] = {
        "cvqa": {"kind": "cvqa", "source": {"type": "fixture", "size": 2, "hidden_labels": hidden}}
    }
    data["grid"] = {"models": ["random", "clip-tiny"], "benchmarks": ["cvqa"]}
    config = validate_config(data)
    bench_dir = paths.bench_dir(config.data_dir, "cvqa")
    prepare_benchmark("cvqa", config.benchmark("cvqa"), bench_dir)
    assert len(load_benchmark(bench_dir).records) == 14
    for model in config.models:
        predictions = infer_cell(config, model, "cvqa", part_size=5)
        assert sorted(pd.read_parquet(predictions)["variant"].unique()) == sorted(SETTINGS)
        out = paths.score_path(config.results_dir, model, "cvqa")
        if hidden:
            score = score_cell(
                model_name=model,
                bench_dir=bench_dir,
                predictions_path=predictions,
                out_path=out,
                samples=20,
                seed=0,
            )
            assert score["labels_hidden"] is True and "value" not in score and score["n"] == 14
            assert json.loads(out.read_text()) == score
            records = load_benchmark(bench_dir).records
            for setting in SETTINGS:
                written = pd.read_csv(
                    out.parent / f"cvqa.submission-{setting}.csv", keep_default_na=False, dtype=str
                )
                assert score["submission"][setting] == f"cvqa.submission-{setting}.csv"
                assert written.equals(submission_table(records, pd.read_parquet(predictions), setting))
            continue
        score = score_cell(
            model_name=model,
            bench_dir=bench_dir,
            predictions_path=predictions,
            out_path=out,
            samples=20,
            seed=0,
        )
        assert score["metric"] == "accuracy" and set(score["variants"]) == set(SETTINGS)
        assert len(score["breakdown"]["country_language"]) == 7
        assert score["value"] == pytest.approx(
            np.mean([e["value"] for e in score["variants"].values()]), abs=1e-3
        )
