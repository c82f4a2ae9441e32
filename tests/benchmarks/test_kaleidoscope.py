"""Kaleidoscope: the fixture in the hub's raw layout -> records, the exam_choice prompts per language and
mode, its strategies, and the whole chain (prepare, infer, score) on the fixture."""

from __future__ import annotations

import copy
import dataclasses
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.chain import infer_cell, opens, score_of

from vlmgrid import paths
from vlmgrid.benchmarks import BENCHMARKS, load_benchmark
from vlmgrid.benchmarks import kaleidoscope as kd
from vlmgrid.benchmarks.rawio import write_hub_parquet
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import kaleidoscope as kaleidoscope_fixture
from vlmgrid.model_requests import GenerationResult
from vlmgrid.protocols import PROTOCOLS, strategy_for
from vlmgrid.protocols.exam_choice import ExamPrompts, load_exam_prompts, prompt_mode
from vlmgrid.stages.prepare import prepare_benchmark

REPO = Path(__file__).resolve().parents[2]
PROMPTS_DIR = REPO / "config" / "prompts"
ALL_LANGUAGES = {
    "ar",
    "bn",
    "de",
    "en",
    "es",
    "fa",
    "fr",
    "hi",
    "hr",
    "hu",
    "lt",
    "ne",
    "nl",
    "pt",
    "ru",
    "sr",
    "te",
    "uk",
}
CARD_COLUMNS = [
    "language",
    "country",
    "file_name",
    "source",
    "license",
    "level",
    "category_en",
    "category_original_lang",
    "original_question_num",
    "question",
    "options",
    "answer",
    "image_png",
    "image_information",
    "image_type",
    "parallel_question_id",
    "image",
    "general_category_en",
]


def prepare(bench_dir: Path, **source):
    return prepare_benchmark(
        "kaleidoscope-fixture", {"kind": "kaleidoscope", "source": {"type": "fixture", **source}}, bench_dir
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    bench_dir = tmp_path_factory.mktemp("kaleidoscope") / "bench"
    prepare(bench_dir)
    return dataclasses.replace(load_benchmark(bench_dir), prompts_dir=PROMPTS_DIR)


# ---------------------------------------------------------------------------------------------- the kind


def test_kind_is_registered_with_its_protocol_metric_and_unpinned_source():
    kind = BENCHMARKS.get("kaleidoscope")
    assert (kind.protocol, kind.metric, kind.expected_count) == ("exam_choice", "kaleidoscope", 20911)
    assert kind.breakdown_by == ("language", "modality", "image_type", "category_en", "general_category_en")
    assert kind.default_source == {
        "type": "hf_hub",
        "repo": "CohereLabs/kaleidoscope",
        "revision": "main",
        "split": "train",
    }
    assert kind.raw_files == ("data/train-*.parquet", "data.zip")
    assert "exam_choice" in PROTOCOLS


def test_fixture_is_written_in_the_hub_layout(bench):
    raw = bench.root / "raw"
    table = pq.read_table(raw / "data" / "train-00000-of-00001.parquet")
    assert table.column_names == CARD_COLUMNS
    assert b"huggingface" in table.schema.metadata
    with zipfile.ZipFile(raw / "data.zip") as archive:
        names = archive.namelist()
    assert names and all(name.startswith("final_data/images/") and name.endswith(".png") for name in names)
    images = [value for value in table.column("image").to_pylist() if value not in (None, "None")]
    assert sorted("final_data/" + value for value in images) == sorted(names)


def test_fixture_records(bench):
    records = bench.records
    assert len(records) == 7 * 4 and records["id"].tolist() == [f"train-{i}" for i in range(28)]
    assert set(records["language"]) == {"ar", "bn", "en", "es", "ru", "te", "uk"}
    assert set(records["language"]) <= ALL_LANGUAGES
    assert records.groupby("language").size().tolist() == [4] * 7
    assert set(records["options"].map(len)) == {3, 4, 5}
    text_only = records["modality"] == "text-only"
    assert text_only.sum() == 7 and records.loc[text_only, "image"].isna().all()
    assert records.loc[~text_only, "image"].notna().all()
    assert all(opens(bench.root / image) for image in records.loc[~text_only, "image"])
    assert (records.loc[text_only, "image_type"] == "").all()
    assert set(records.loc[~text_only, "image_type"]) == {"diagram", "figure", "graph"}
    for _, row in records.iterrows():
        assert row["answer"] == row["options"][row["answer_index"]]
    assert records.loc[records["language"] == "uk", "question"].iloc[0] == "Скільки фігур на малюнку?"
    assert records.loc[records["language"] == "bn", "country"].iloc[0] == "Bangladesh"


def test_fixture_is_deterministic(tmp_path):
    assert prepare(tmp_path / "a")["fingerprint"] == prepare(tmp_path / "b")["fingerprint"]
    assert prepare(tmp_path / "c", seed=1)["fingerprint"] != prepare(tmp_path / "a")["fingerprint"]


def test_corrupt_fixture_images_do_not_open(tmp_path):
    prepare(tmp_path / "k", size=3, corrupt=2)
    records = load_benchmark(tmp_path / "k").records
    images = records["image"].dropna()
    assert len(records) == 21 and sum(not opens(tmp_path / "k" / image) for image in images) == 2


def _local_copy(bench, tmp_path: Path, edit) -> Path:
    """A copy of the fixture's raw files with the parquet rows changed by `edit(rows)`."""
    raw = tmp_path / "raw"
    shutil.copytree(bench.root / "raw", raw)
    path = raw / kaleidoscope_fixture.FIXTURE_FILE
    rows = pq.read_table(path).to_pylist()
    edit(rows)
    write_hub_parquet(path, kd.SCHEMA, rows, kd.FEATURES)
    return raw


def _prepare_local(raw: Path, bench_dir: Path):
    """The adapter's records for raw files in the real layout (a local copy's item count is not checked)."""
    return kd.adapt(raw, bench_dir).records


def test_image_paths_are_found_with_or_without_the_archive_folder(bench, tmp_path):
    def spell(rows):
        for n, row in enumerate(rows):
            if row["image"] not in (None, "None"):
                row["image"] = ("final_data/" if n % 2 else "./") + row["image"]
            elif n % 2:
                row["image"] = ""

    records = _prepare_local(_local_copy(bench, tmp_path, spell), tmp_path / "bench")
    expected = [None if isinstance(image, float) else image for image in bench.records["image"]]
    assert records["image"].tolist() == expected
    assert records["modality"].tolist() == bench.records["modality"].tolist()


def test_an_image_missing_from_the_archive_is_an_error(bench, tmp_path):
    def lose(rows):
        rows[0]["image"] = "images/ar/missing.png"

    with pytest.raises(VlmgridError, match=r"row 0: image 'images/ar/missing.png' is not in .*data\.zip"):
        _prepare_local(_local_copy(bench, tmp_path, lose), tmp_path / "bench")


def test_an_answer_outside_the_options_is_an_error(bench, tmp_path):
    def wrong(rows):
        rows[2]["answer"] = len(rows[2]["options"])

    with pytest.raises(VlmgridError, match="row 2: answer index"):
        _prepare_local(_local_copy(bench, tmp_path, wrong), tmp_path / "bench")


# ---------------------------------------------------------------------------------------------- prompts


@pytest.fixture(scope="module")
def prompts() -> ExamPrompts:
    return load_exam_prompts(PROMPTS_DIR)


def test_the_prompt_set_covers_every_language(prompts):
    assert set(prompts.languages) == ALL_LANGUAGES
    for code, words in prompts.languages.items():
        assert "<ANSWER> X </ANSWER>" in words.instruction, code
        assert words.question and words.options


def test_json_prompt_in_russian_by_hand(prompts):
    user = prompts.user("json", "ru", "q1", "Сколько будет 2 + 2?", ["3", "4", "5"])
    assert user == (
        "Give your choice in the JSON format described.\n\n"
        "Вопрос: Сколько будет 2 + 2?\n"
        "Варианты ответа:\n"
        "A. 3\nB. 4\nC. 5"
    )
    assert prompts.system("json", "ru", "q1") == prompts.json_system
    assert '{"choice":' in prompts.json_system
    assert prompts.max_new_tokens("json") is None


def test_tag_prompt_in_arabic_by_hand(prompts):
    user = prompts.user("tag", "ar", "q1", "ما ناتج 2 + 2؟", ["3", "4", "5", "6"])
    assert user == "ما ناتج 2 + 2؟\nالخيارات:\nA. 3\nB. 4\nC. 5\nD. 6"
    system = prompts.system("tag", "ar", "q1")
    assert system == prompts.languages["ar"].instruction and system.startswith("فيما يلي سؤال")
    assert prompts.max_new_tokens("tag") == 1024


@pytest.mark.parametrize("code", sorted(ALL_LANGUAGES))
def test_every_language_gets_its_own_words(prompts, code):
    words = prompts.languages[code]
    json_user = prompts.user("json", code, "q", "Q?", ["x", "y"])
    assert f"\n\n{words.question}: Q?\n{words.options}:\nA. x\nB. y" in json_user
    assert prompts.user("tag", code, "q", "Q?", ["x", "y"]) == f"Q?\n{words.options}:\nA. x\nB. y"
    assert prompts.system("tag", code, "q") == words.instruction
    assert prompts.likelihood(code, "q", "Q?", ["x", "y"]).startswith(
        f"{words.question}: Q?\n{words.options}:\nA. x"
    )


def test_image_placeholders_are_removed_and_braces_kept(prompts):
    user = prompts.user("tag", "en", "q", "<image> What is {x}?", ["<image>", "{y}"])
    assert user == "What is {x}?\nOptions:\nA. \nB. {y}"


def test_a_language_without_prompts_is_an_error(prompts):
    with pytest.raises(VlmgridError, match=r"item q7: language 'xx' has no prompts in .*kaleidoscope\.yaml"):
        prompts.user("json", "xx", "q7", "Q?", ["a", "b"])


def _edited_prompts(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load((PROMPTS_DIR / "kaleidoscope.yaml").read_text("utf-8"))
    edit(data)
    (tmp_path / "kaleidoscope.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), "utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["json"].update(template="{question} {opts}"), r"unknown placeholder \{opts\}"),
        (lambda d: d["tag"].update(template="{question}"), r"must hold \{question\} and \{options\}"),
        (lambda d: d["tag"].update(max_new_tokens=0), "tag.max_new_tokens"),
        (lambda d: d["languages"]["ru"].pop("options"), "languages.ru.options"),
        (lambda d: d.pop("likelihood"), "`likelihood` must be a mapping"),
        (lambda d: d.update(option_line="{letter}"), "option_line"),
    ],
)
def test_a_malformed_prompt_set_is_one_clear_error(tmp_path, edit, message):
    with pytest.raises(VlmgridError, match=message):
        load_exam_prompts(_edited_prompts(tmp_path, edit))


# ---------------------------------------------------------------------------------------------- strategies


class FakeGenerator:
    """A generating model that answers from a script and records its requests."""

    def __init__(self, backend: str, answers, **settings):
        self.name = backend
        self.settings = settings
        self.answers = answers
        self.requests = []

    def generate_results(self, requests):
        self.requests.extend(requests)
        return [GenerationResult(self.answers(request)) for request in requests]


def test_prompt_mode_defaults_by_backend_and_can_be_forced():
    assert prompt_mode(FakeGenerator("hf", None)) == "json"
    assert prompt_mode(FakeGenerator("openai", None)) == "tag"
    assert prompt_mode(FakeGenerator("hf", None, prompt_mode="tag")) == "tag"
    assert prompt_mode(FakeGenerator("openai", None, prompt_mode="json")) == "json"
    with pytest.raises(VlmgridError, match="prompt_mode 'cot' is unknown"):
        prompt_mode(FakeGenerator("hf", None, prompt_mode="cot"))


def test_generate_in_json_mode(bench, prompts):
    records = bench.records
    model = FakeGenerator("hf", lambda r: '```json\n{"choice": "B"}\n```')
    rows = PROTOCOLS.get("exam_choice").strategies["generate"](model, bench)(records)
    assert [row["id"] for row in rows] == records["id"].tolist()
    assert {row["variant"] for row in rows} == {"json"}
    assert all(row["prediction_index"] == 1 and row["raw"].startswith("```json") for row in rows)
    first = model.requests[0]
    assert first.system == prompts.json_system and first.max_new_tokens is None
    assert first.prompt == prompts.user(
        "json",
        records["language"].iloc[0],
        "train-0",
        records["question"].iloc[0],
        list(records["options"].iloc[0]),
    )
    with_image = {r.id: r.image is not None for r in model.requests}
    assert with_image == dict(zip(records["id"], records["modality"] == "multimodal"))


def test_generate_in_tag_mode_keeps_unreadable_answers(bench, prompts):
    records = bench.records
    answers = {
        rid: ("<ANSWER> A </ANSWER>" if n % 2 else "I think it is A.") for n, rid in enumerate(records["id"])
    }
    model = FakeGenerator("openai", lambda r: answers[r.id])
    rows = PROTOCOLS.get("exam_choice").strategies["generate"](model, bench)(records)
    assert {row["variant"] for row in rows} == {"tag"}
    for n, row in enumerate(rows):
        assert row["raw"] == answers[row["id"]] and row["error"] is None
        assert (row["prediction_index"], row["prediction"] is None) == ((0, False) if n % 2 else (-1, True))
    uk = next(r for r in model.requests if r.id in set(records.loc[records["language"] == "uk", "id"]))
    assert uk.system == prompts.languages["uk"].instruction and uk.max_new_tokens == 1024


def test_generate_turns_a_broken_image_into_an_error_row(tmp_path):
    prepare(tmp_path / "k", size=1, corrupt=1)
    bench = dataclasses.replace(load_benchmark(tmp_path / "k"), prompts_dir=PROMPTS_DIR)
    model = FakeGenerator("hf", lambda r: '{"choice": "A"}')
    rows = PROTOCOLS.get("exam_choice").strategies["generate"](model, bench)(bench.records)
    broken = [row for row in rows if row["error"] is not None]
    assert len(broken) == 1 and broken[0]["raw"] is None and broken[0]["variant"] == "json"
    assert len(model.requests) == len(rows) - 1


def test_score_options_with_the_baseline(bench):
    from vlmgrid.models import BACKENDS

    model = BACKENDS.get("baseline").load({"backend": "baseline", "seed": 0}, None, "cpu")
    records = bench.records
    rows = PROTOCOLS.get("exam_choice").strategies["score_options"](model, bench)(records)
    for row, options in zip(rows, records["options"]):
        assert len(row["scores"]) == len(options) and row["variant"] == "default"
        assert row["prediction_index"] == int(np.argmax(row["scores"]))
        assert row["prediction"] == options[row["prediction_index"]]
    assert strategy_for("exam_choice", {"score_options", "generate"}) == "score_options"
    assert strategy_for("exam_choice", {"score_options", "generate"}, "generate") == "generate"


class FakeEmbedder:
    """Images all embed alike; the texts in `liked` are the most similar to them."""

    def __init__(self, liked):
        self.liked = set(liked)

    def embed_images(self, images):
        return np.ones((len(images), 2)) / np.sqrt(2)

    def embed_texts(self, texts):
        return np.asarray([[0.6, 0.8] if text in self.liked else [1.0, 0.0] for text in texts])


def test_embedding_cannot_answer_text_only_questions(bench):
    records = bench.records
    rows = []
    for i in range(len(records)):  # one item at a time: questions repeat across items, their answers differ
        item = records.iloc[i : i + 1]
        model = FakeEmbedder([f"{item['question'].iloc[0]} {item['answer'].iloc[0]}"])
        rows += PROTOCOLS.get("exam_choice").strategies["embed"](model, bench)(item)
    for row, modality, gold in zip(rows, records["modality"], records["answer_index"]):
        if modality == "text-only":
            assert row["error"] == "item has no image; embedding models need one"
        else:
            assert row["error"] is None and row["prediction_index"] == gold


def test_a_clip_model_is_scored_on_the_questions_with_an_image_and_the_others_are_not_applicable(
    bench, tmp_path
):
    """Every question with an image answered right by embedding: the score is 100 over those, the text-only
    ones not applicable (never wrong, never a 0), and the score file and the report say how many and why."""
    from vlmgrid.predictions import rows_to_table, write_predictions
    from vlmgrid.report import build_report
    from vlmgrid.stages.score import score_cell

    records = bench.records
    rows = []
    for i in range(len(records)):
        item = records.iloc[i : i + 1]
        model = FakeEmbedder([f"{item['question'].iloc[0]} {item['answer'].iloc[0]}"])
        rows += PROTOCOLS.get("exam_choice").strategies["embed"](model, bench)(item)
    with_image = int((records["modality"] == "multimodal").sum())
    assert 0 < with_image < len(records)  # the fixture has both kinds
    predictions = tmp_path / "predictions" / "clip" / "k.parquet"
    predictions.parent.mkdir(parents=True)
    write_predictions(
        predictions,
        rows_to_table(rows),
        {"applicable": True, "strategy": "embed", "data_fingerprint": bench.manifest["fingerprint"]},
    )
    out = tmp_path / "scores" / "clip" / "k.json"
    score = score_cell(
        model_name="clip",
        bench_dir=bench.root,
        predictions_path=predictions,
        out_path=out,
        samples=100,
        seed=0,
    )
    assert score["value"] == 100.0 and score["n"] == with_image and score["format_error_rate"] == 0.0
    assert score["coverage"] == {
        "answered": with_image,
        "total": len(records),
        "reason": "a text-only question has no image to embed",
    }
    assert set(score["breakdown"]["modality"]) == {"multimodal"}

    name = bench.name
    written = build_report(
        {("clip", name): out},
        ["clip"],
        [name],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={name: "kaleidoscope"},
    )
    main = (tmp_path / "tables" / "main.md").read_text()
    assert (
        f"clip on {name}, {with_image} of {len(records)} answered ({len(records) - with_image} not "
        "applicable: a text-only question has no image to embed"
    ) in " ".join(main.split())
    assert "published answer file" not in main and written


# ---------------------------------------------------------------------------------------------- chain


def _config(small_config: dict, **llava) -> dict:
    data = copy.deepcopy(small_config)
    data["benchmarks"] = {
        "kaleidoscope-fixture": {"kind": "kaleidoscope", "source": {"type": "fixture", "size": 3}}
    }
    data["models"]["llava-tiny"].update(llava)
    data["grid"] = {"models": ["random", "llava-tiny"], "benchmarks": ["kaleidoscope-fixture"]}
    return data


def test_model_settings_for_the_prompt_mode_and_the_preset_validate(small_config):
    validate_config(_config(small_config, prompt_mode="tag", generation={"preset": "kaleidoscope"}))
    with pytest.raises(VlmgridError, match="prompt_mode"):
        validate_config(_config(small_config, prompt_mode="cot"))
    with pytest.raises(VlmgridError, match="preset"):
        validate_config(_config(small_config, generation={"preset": "paper"}))


@pytest.mark.parametrize("answer_mode, strategy", [("likelihood", "score_options"), ("generate", "generate")])
def test_the_fixture_runs_through_prepare_infer_and_score(small_config, monkeypatch, answer_mode, strategy):
    monkeypatch.chdir(REPO)  # the default prompts folder, config/prompts
    config = validate_config(_config(small_config, answer_mode=answer_mode))
    bench_dir = paths.bench_dir(config.data_dir, "kaleidoscope-fixture")
    prepare_benchmark("kaleidoscope-fixture", config.benchmark("kaleidoscope-fixture"), bench_dir)
    for model in config.models:
        predictions = infer_cell(config, model, "kaleidoscope-fixture", part_size=8)
        score = score_of(config, model, "kaleidoscope-fixture", predictions, samples=50)
        assert score["metric"] == "accuracy" and score["n"] == 21
        assert score["ci95"][0] <= score["value"] <= score["ci95"][1]
        generated = score["strategy"] == "generate"
        # Generated answers are also read leniently: a second figure beside the authors' reading.
        assert set(score["metrics"]) == {"accuracy", "valid_accuracy", "format_error_rate"} | (
            {"accuracy_lenient"} if generated else set()
        )
        assert ("lenient" in score) == generated
        assert set(score["breakdown"]) == set(BENCHMARKS.get("kaleidoscope").breakdown_by)
        assert len(score["breakdown"]["language"]) == 7
        assert score["strategy"] == ("score_options" if model == "random" else strategy)
        if model == "random":
            assert score["format_error_rate"] == 0.0
