"""DANCE: the on-disk format and its loader, the builder from ConceptNet triples, the fixture and the
adapter."""

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.chain import infer_cell, prepared_grid

from vlmgrid.benchmarks import dance, load_benchmark
from vlmgrid.benchmarks.dance_build import build_dance, concept_name, read_triples, relation_templates
from vlmgrid.cli import main
from vlmgrid.errors import VlmgridError
from vlmgrid.fixtures.kinds import dance as dance_fixture
from vlmgrid.stages.prepare import prepare_benchmark

TEMPLATES = {"UsedFor": "This is used for {end}.", "HasProperty": "This is {end}."}


def assertion(relation, start, end):
    return f'/a/[/r/{relation}/,{start}/,{end}/]\t/r/{relation}\t{start}\t{end}\t{{"weight": 1.0}}\n'


def small_inputs(tmp_path, pictures, triples):
    """An assertions file and one tiny JPEG per (entity, n) in pictures={entity: count}."""
    from PIL import Image

    path = tmp_path / "assertions.csv"
    path.write_text("".join(assertion(r, f"/c/en/{s}", f"/c/en/{e}") for r, s, e in triples), "utf-8")
    for entity, count in pictures.items():
        (tmp_path / "pics" / entity).mkdir(parents=True)
        for n in range(count):
            Image.new("RGB", (8, 8), (n * 40, 10, 10)).save(tmp_path / "pics" / entity / f"{n}.jpg")
    return path, tmp_path / "pics"


def queries_of(folder):
    return {q["id"]: q for q in map(json.loads, (Path(folder) / "queries.jsonl").read_text().splitlines())}


def test_concepts_are_english_names_without_their_part_of_speech():
    assert concept_name("/c/en/cutting_bread/n") == "cutting_bread"
    assert concept_name("/c/en/knife") == "knife"
    assert concept_name("/c/fr/couteau") is None


def test_read_triples_keeps_english_triples_once(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(
        assertion("UsedFor", "/c/en/knife/n", "/c/en/cutting_bread")
        + assertion("UsedFor", "/c/en/knife", "/c/en/cutting_bread/v")
        + assertion("RelatedTo", "/c/fr/couteau", "/c/en/knife"),
        "utf-8",
    )
    frame = read_triples(path)
    assert frame[["relation", "start", "end"]].values.tolist() == [["UsedFor", "knife", "cutting_bread"]]


def test_read_triples_names_a_line_that_is_not_conceptnet(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(
        assertion("UsedFor", "/c/en/knife", "/c/en/x") + "a\tUsedFor\t/c/en/b\t/c/en/c\t{}\n", "utf-8"
    )
    with pytest.raises(VlmgridError, match=r"a.csv line 2: relation 'UsedFor'"):
        read_triples(path)


def test_shipped_relation_templates_hold_end_once():
    templates, prompt = relation_templates()
    assert templates["UsedFor"] == "This is used for {end}."
    assert "RelatedTo" not in templates and prompt


def test_builder_makes_riddles_positives_and_nearest_negatives_first(tmp_path):
    # knife and saw answer "This is used for cutting."; fork is RelatedTo knife; rock is unrelated
    triples = [
        ("UsedFor", "knife", "cutting"),
        ("UsedFor", "saw", "cutting"),
        ("HasProperty", "rock", "hard"),
        ("HasProperty", "fork", "shiny"),
        ("RelatedTo", "knife", "fork"),
        ("HasProperty", "rock", "grey"),
        ("HasProperty", "saw", "loud"),
    ]
    path, pics = small_inputs(tmp_path, {"knife": 2, "saw": 1, "fork": 2, "rock": 2}, triples)
    meta = build_dance(path, pics, tmp_path / "out", relations=TEMPLATES, n_candidates=5, max_positives=3)
    assert meta["n_riddle_triples"] == 6 and meta["n_queries"] == 12
    query = queries_of(tmp_path / "out")["r2i-00000"]  # the first riddle triple: knife UsedFor cutting
    assert query["query"] == "This is used for cutting." and query["entity"] == "knife"
    by_item = {c["item"]: c for c in query["candidates"]}
    assert {i for i, c in by_item.items() if c["positive"]} == {
        "images/knife/0.jpg",
        "images/knife/1.jpg",
        "images/saw/0.jpg",
    }
    # two places for negatives: fork's pictures (RelatedTo, distance 1) come before rock's (no path)
    assert sorted(i for i, c in by_item.items() if not c["positive"]) == [
        "images/fork/0.jpg",
        "images/fork/1.jpg",
    ]
    assert {(c["source"], c["distance"]) for c in by_item.values() if not c["positive"]} == {("RelatedTo", 1)}
    riddles = queries_of(tmp_path / "out")["i2r-00000"]
    assert riddles["query"].startswith("images/knife/")
    assert [c["item"] for c in riddles["candidates"] if c["positive"]] == ["This is used for cutting."]
    # saw's riddle is 2 hops away (knife - cutting - saw); rock is not connected to knife at all
    assert {c["item"]: (c["source"], c["distance"]) for c in riddles["candidates"] if not c["positive"]} == {
        "This is shiny.": ("RelatedTo", 1),
        "This is loud.": ("graph", 2),
        "This is hard.": ("random", None),
        "This is grey.": ("random", None),
    }


def test_builder_caps_positives_and_splits_by_triple(tmp_path):
    triples = (
        [("UsedFor", e, "cutting") for e in ("a", "b", "c")]
        + [("HasProperty", e, "odd") for e in ("x", "y")]
        + [("HasProperty", "x", "round"), ("HasProperty", "y", "big")]
    )
    path, pics = small_inputs(tmp_path, {"a": 3, "b": 3, "c": 3, "x": 2, "y": 2}, triples)
    build_dance(
        path,
        pics,
        tmp_path / "seen",
        relations=TEMPLATES,
        n_candidates=3,
        max_positives=2,
        train_fraction=1.0,
    )
    queries = queries_of(tmp_path / "seen")
    assert {q["split"] for q in queries.values()} == {"test-seen"}
    query = queries["r2i-00000"]
    assert sum(c["positive"] for c in query["candidates"]) == 2 and len(query["candidates"]) == 3
    build_dance(
        path,
        pics,
        tmp_path / "unseen",
        relations=TEMPLATES,
        n_candidates=3,
        max_positives=2,
        train_fraction=0.0,
    )
    assert {q["split"] for q in queries_of(tmp_path / "unseen").values()} == {"test-unseen"}


def test_training_triples_decide_which_queries_are_seen(tmp_path):
    triples, pictures = dance_fixture.write_fixture_inputs(tmp_path / "in", seed=0)
    trained = tmp_path / "train.csv"
    trained.write_text(
        assertion("HasProperty", "/c/en/lemon", "/c/en/sour") + assertion("IsA", "/c/en/cat/n", "/c/en/pet")
    )
    meta = build_dance(
        triples, pictures, tmp_path / "out", relations=dance_fixture.FIXTURE_TEMPLATES, train_triples=trained
    )
    seen = {
        (q["triple"]["start"], q["triple"]["end"])
        for q in queries_of(tmp_path / "out").values()
        if q["split"] == "test-seen"
    }
    assert seen == {("lemon", "sour"), ("cat", "pet")}
    assert meta["train_triples"] == "train.csv" and meta["train_fraction"] is None


def test_builder_is_reproducible_and_seeded(tmp_path):
    triples, pictures = dance_fixture.write_fixture_inputs(tmp_path / "in", seed=0)
    build_dance(triples, pictures, tmp_path / "a", seed=1, relations=dance_fixture.FIXTURE_TEMPLATES)
    build_dance(triples, pictures, tmp_path / "b", seed=1, relations=dance_fixture.FIXTURE_TEMPLATES)
    build_dance(triples, pictures, tmp_path / "c", seed=2, relations=dance_fixture.FIXTURE_TEMPLATES)
    read = lambda name: (tmp_path / name / "queries.jsonl").read_bytes()  # noqa: E731
    assert read("a") == read("b") != read("c")


def test_builder_says_when_there_are_too_few_negatives(tmp_path):
    path, pics = small_inputs(tmp_path, {"knife": 1, "rock": 1}, [("UsedFor", "knife", "cutting")])
    with pytest.raises(VlmgridError, match="only 1 negatives for 3 places"):
        build_dance(path, pics, tmp_path / "out", relations=TEMPLATES, n_candidates=4, max_positives=1)


def test_cli_builds_a_set(tmp_path, capsys):
    triples, pictures = dance_fixture.write_fixture_inputs(tmp_path / "in", seed=0)
    assert (
        main(
            [
                "build-dance",
                "--triples",
                str(triples),
                "--images",
                str(pictures),
                "--out",
                str(tmp_path / "out"),
                "--seed",
                "0",
            ]
        )
        == 0
    )
    meta, queries = dance.load_dance(tmp_path / "out")
    assert meta["n_candidates"] == 50 and len(queries) == 2 * meta["n_riddle_triples"] == 146
    assert "146 queries" in capsys.readouterr().err


def test_loader_points_at_the_format_document_when_the_data_is_absent(tmp_path):
    with pytest.raises(VlmgridError, match=r"dance\.json: missing.*build-dance.*docs/dance-format\.md"):
        dance.load_dance(tmp_path)


def test_loader_names_the_line_of_a_bad_query(tmp_path):
    prepare = tmp_path / "set"
    build_dance(
        *dance_fixture.write_fixture_inputs(tmp_path / "in", seed=0),
        prepare,
        relations=dance_fixture.FIXTURE_TEMPLATES,
        max_triples=2,
    )
    lines = (prepare / "queries.jsonl").read_text().splitlines()
    query = json.loads(lines[1])
    query["candidates"] = query["candidates"][:49]
    lines[1] = json.dumps(query)
    (prepare / "queries.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        VlmgridError, match=r"queries\.jsonl line 2: 49 candidates, but dance.json says n_candidates 50"
    ):
        dance.load_dance(prepare)
    query["candidates"] = [{**c, "positive": False} for c in json.loads(lines[0])["candidates"]]
    lines[1] = json.dumps(query)
    (prepare / "queries.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(VlmgridError, match=r"line 2: 0 positives; a query has 1 to 15"):
        dance.load_dance(prepare)


def test_fixture_prepares_into_ranking_records(tmp_path):
    prepare_benchmark("d", {"kind": "dance", "source": {"type": "fixture", "size": 6}}, tmp_path / "d")
    records = load_benchmark(tmp_path / "d").records
    assert len(records) == 12
    assert set(records["direction"]) == {"riddle-to-image", "image-to-riddle"}
    assert set(records["subset"]) <= {
        f"{s} {d}" for s in ("test-seen", "test-unseen") for d in ("riddle-to-image", "image-to-riddle")
    }
    for row in records.itertuples():
        assert len(row.options) == 50 and 1 <= len(row.positives) <= 15
        assert row.answer_index == row.positives[0] and row.answer == row.options[row.answer_index]
        assert all(row.candidate_sources[k] == "positive" for k in row.positives)
        if row.direction == "riddle-to-image":
            assert pd.isna(row.image) and row.question.startswith("This ")
            assert all((tmp_path / "d" / option).is_file() for option in row.options)
        else:
            assert (tmp_path / "d" / row.image).is_file() and row.question == ""


def test_local_source_reads_a_built_folder_and_checks_no_item_count(tmp_path):
    build_dance(
        *dance_fixture.write_fixture_inputs(tmp_path / "in", seed=0),
        tmp_path / "set",
        relations=dance_fixture.FIXTURE_TEMPLATES,
        max_triples=3,
    )
    manifest = prepare_benchmark(
        "d", {"kind": "dance", "source": {"type": "local", "path": str(tmp_path / "set")}}, tmp_path / "d"
    )
    assert manifest["n_items"] == 6
    assert any(key.endswith("queries.jsonl") for key in manifest["files"])
    with pytest.raises(VlmgridError, match="docs/dance-format.md"):
        prepare_benchmark(
            "e", {"kind": "dance", "source": {"type": "local", "path": str(tmp_path / "in")}}, tmp_path / "e"
        )


def test_score_of_the_fixture_carries_split_by_direction_cells(small_config, tmp_path):
    from vlmgrid import paths
    from vlmgrid.stages.score import score_cell

    benchmarks = {"dance-fixture": {"kind": "dance", "source": {"type": "fixture", "seed": 0, "size": 8}}}
    config = prepared_grid(small_config, benchmarks, ["random"])
    bench_dir = paths.bench_dir(config.data_dir, "dance-fixture")
    predictions = infer_cell(config, "random", "dance-fixture", part_size=4)
    rows = pd.read_parquet(predictions)
    assert len(rows) == 16 and all(len(scores) == 50 for scores in rows["scores"])
    score = score_cell(
        model_name="random",
        bench_dir=bench_dir,
        predictions_path=predictions,
        out_path=tmp_path / "score.json",
        samples=50,
        seed=0,
    )
    assert score["metric"] == "acc_at_50" and score["strategy"] == "score_options"
    assert set(score["breakdown"]["direction"]) == {"riddle-to-image", "image-to-riddle"}
    assert set(score["breakdown"]["split"]) == {"test-seen", "test-unseen"}
    assert len(score["breakdown"]["subset"]) == 4
    assert 0 <= score["value"] < 50  # 50 candidates: a seeded random ranking stays far below a real model


def test_unreadable_pictures_are_kept_as_format_errors(small_config, tmp_path):
    from vlmgrid import paths
    from vlmgrid.stages.score import score_cell

    benchmarks = {"d": {"kind": "dance", "source": {"type": "fixture", "seed": 0, "size": 4, "corrupt": 12}}}
    config = prepared_grid(small_config, benchmarks, ["random"])
    bench_dir = paths.bench_dir(config.data_dir, "d")
    predictions = infer_cell(config, "random", "d", part_size=4)
    rows = pd.read_parquet(predictions)
    assert (
        len(rows) == 8 and rows["error"].notna().any()
    )  # 12 of 60 pictures broken: riddle-to-image hits some
    score = score_cell(
        model_name="random",
        bench_dir=bench_dir,
        predictions_path=predictions,
        out_path=tmp_path / "score.json",
        samples=20,
        seed=0,
    )
    assert score["n"] == 8 and score["format_error_rate"] == pytest.approx(
        100 * rows["error"].notna().sum() / 8
    )
