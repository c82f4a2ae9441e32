"""`vlmgrid diff`: two prediction sets of one prepared fixture benchmark that differ in known ways are
reported as exactly those items, in their classes, with the headline effects computed by hand."""

from __future__ import annotations

import csv
import dataclasses
import importlib
import json
import re

import numpy as np
import pandas as pd
import pytest
from helpers.diff import _config, _prepare, _rows, _write

from vlmgrid.cli import main
from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.differences import diff_predictions, same_answer
from vlmgrid.stages.diff import diff_sets, headline_parsers, render

# --- ScienceQA-IMG (accuracy): A read with the general letter reader, B with LLaVA's rule -------------------
# Gold letters of the 8 fixture items: test-0 A, test-1 D, test-2 C, test-3 A, test-4 D, test-5 C, test-6 A,
# test-7 B.
SQA_A = {
    "test-0": "A",  # identical in B
    "test-1": "(D)",  # same text in B; LLaVA's rule does not read "(D)": B unread, A right
    "test-2": "Answer: C\n",  # B's text lacks the final line break: the same answer; B unread, A right
    "test-3": "A",  # B answered B: A right, B wrong
    "test-4": "B",  # B answered D: A wrong, B right
    "test-5": "C",  # B wrote "C. circle": read the same, both right
    "test-6": "A",  # B's request failed: A right
    "test-7": "B",  # B has no row: coverage
}
SQA_B = {
    "test-0": "A",
    "test-1": "(D)",
    "test-2": "Answer: C",
    "test-3": "B",
    "test-4": "D",
    "test-5": "C. circle",
    "test-6": ("error", "HTTP 500 after 3 retries"),
}


@pytest.fixture
def sqa(tmp_path):
    bench = _prepare(tmp_path, "scienceqa_img", "scienceqa-fixture", size=8)
    assert [chr(65 + i) for i in bench.records["answer_index"]] == list("ADCADCAB")
    return bench, pd.DataFrame(_rows(bench, SQA_A, "letter")), pd.DataFrame(_rows(bench, SQA_B, "scienceqa"))


def test_same_answer_is_equal_text_once_the_ends_are_trimmed():
    assert same_answer("Answer: C\n", " Answer: C")
    assert not same_answer("C", "C. circle")
    assert not same_answer(None, None)  # answers by scores have no text to compare


def test_accuracy_items_land_in_their_classes(sqa):
    bench, a, b = sqa
    result = diff_predictions("accuracy", bench.records, a, b)
    classes = {d.id: d.diff_class for d in result.items}
    assert classes == {
        "test-1": "reading",
        "test-2": "reading",
        "test-3": "answer",
        "test-4": "answer",
        "test-6": "error",
        "test-5": "same_reading",
    }
    assert [d.id for d in result.items] == ["test-1", "test-2", "test-3", "test-4", "test-6", "test-5"]
    assert result.only_a == ["test-7"] and result.only_b == []
    assert result.error_rows_a == 0 and result.error_rows_b == 1
    first = result.items[0]
    assert (first.raw_a, first.raw_b, first.prediction_b, first.gold) == (
        "(D)",
        "(D)",
        None,
        bench.records["answer"][1],
    )


def test_accuracy_effects_add_up_to_a_minus_b(sqa):
    bench, a, b = sqa
    result = diff_predictions("accuracy", bench.records, a, b)
    # Over the 7 common items: A right on all but test-4 (6/7), B on test-0, test-4, test-5 (3/7).
    assert result.n_common == 7
    assert result.value_a == pytest.approx(600 / 7) and result.value_b == pytest.approx(300 / 7)
    effects = {c.name: (c.items, c.effect) for c in result.classes}
    assert effects["reading"] == (2, pytest.approx(200 / 7))  # test-1, test-2: B wrong -> right
    assert effects["answer"] == (2, pytest.approx(0.0))  # test-3 +1, test-4 -1
    assert effects["error"] == (1, pytest.approx(100 / 7))  # test-6
    assert effects["same_reading"] == (1, 0.0)
    assert sum(c.effect for c in result.classes) == pytest.approx(result.value_a - result.value_b)
    assert not result.order_matters and all(c.alone == pytest.approx(c.effect) for c in result.classes)
    assert result.own_value_a == pytest.approx(700 / 8)  # A over its 8 items: test-7 right too
    assert result.own_value_b is None


def test_read_again_by_one_parser_the_reading_differences_vanish(sqa, tmp_path, write_config):
    bench, a, b = sqa
    config = _config(tmp_path, write_config, "scienceqa-fixture")
    path_a = _write(tmp_path / "a.parquet", bench, a)
    path_b = _write(tmp_path / "b.parquet", bench, b)
    out = tmp_path / "diff.json"
    from vlmgrid.config import load_config

    text = diff_sets(
        load_config(config), "scienceqa-fixture", path_a, path_b, reading="headline", json_out=str(out)
    )
    assert (
        "as recorded, A 85.71 and B 42.86" in " ".join(text.split())
        and max(len(line) for line in text.splitlines()) <= 100
    )
    document = json.loads(out.read_text())
    assert document["parsers"] == {"a": {"default": "scienceqa"}, "b": {"default": "scienceqa"}}
    classes = {item["id"]: item["class"] for item in document["items"]}
    # Read by LLaVA's rule, A no longer reads "(D)" and "Answer: C": what remains is in the answers.
    assert classes == {"test-3": "answer", "test-4": "answer", "test-6": "error", "test-5": "same_reading"}
    assert document["a"]["value"] == pytest.approx(round(400 / 7, 4))
    assert document["a"]["value_recorded"] == pytest.approx(round(600 / 7, 4))
    assert document["b"]["value"] == document["b"]["value_recorded"] == pytest.approx(round(300 / 7, 4))
    assert document["difference"] == pytest.approx(round(100 / 7, 4))
    diff_sets(load_config(config), "scienceqa-fixture", path_a, path_b, reading="lenient", json_out=str(out))
    lenient = json.loads(out.read_text())
    assert lenient["parsers"]["b"] == {"default": "letter"}
    assert {item["id"] for item in lenient["items"] if item["class"] == "reading"} == set()
    assert lenient["b"]["value"] == pytest.approx(round(500 / 7, 4))  # B reads test-1 and test-2 now


# --- POPE (F1 per split, averaged): a set-level headline ----------------------------------------------------
# Gold per split: -1 yes, -2 no, -3 yes, -4 no. A answers every item right.
POPE_A = {
    f"{split}-{k}": ("Yes" if k % 2 else "No")
    for split in ("random", "popular", "adversarial")
    for k in range(1, 5)
}
POPE_A["random-2"] = "Yes, there is not a cat in the image."  # POPE's rule reads "not": no (right)
POPE_B = dict(POPE_A)
POPE_B["popular-1"] = "No"  # a different answer: FN
POPE_B["popular-2"] = "No."  # other text, read the same
POPE_B["random-4"] = ("error", "image unreadable")  # POPE reads an error row as yes: FP
del POPE_B["adversarial-4"]  # only in A


def _pope_rows(bench, answers, reread_yes=()):
    rows = _rows(bench, answers, "pope")
    for row in rows:  # B's reader takes any "yes" in the text for yes
        if row["id"] in reread_yes:
            row.update(prediction="yes", prediction_index=0)
    return rows


@pytest.fixture
def pope(tmp_path):
    bench = _prepare(tmp_path, "pope", "pope-fixture", size=4)
    assert bench.records["answer"].tolist() == ["yes", "no"] * 6
    a = pd.DataFrame(_pope_rows(bench, POPE_A))
    b = pd.DataFrame(_pope_rows(bench, POPE_B, reread_yes=("random-2",)))
    return bench, a, b


def test_pope_f1_effects_by_substitution_in_order(pope):
    bench, a, b = pope
    result = diff_predictions("pope", bench.records, a, b)
    assert {d.id: d.diff_class for d in result.items} == {
        "random-2": "reading",
        "popular-1": "answer",
        "random-4": "error",
        "popular-2": "same_reading",
    }
    assert result.only_a == ["adversarial-4"] and result.n_common == 11
    # B: random TP 2, FP 2 (random-2, random-4) -> F1 2/3; popular TP 1, FN 1 -> 2/3; adversarial 1.
    assert result.value_a == pytest.approx(100.0)
    assert result.value_b == pytest.approx(700 / 9)
    effects = {c.name: c.effect for c in result.classes}
    assert effects["reading"] == pytest.approx(40 / 9)  # random: FP 1 -> F1 4/5
    assert effects["answer"] == pytest.approx(100 / 9)  # popular -> 1
    assert effects["error"] == pytest.approx(20 / 3)  # random: 4/5 -> 1
    assert effects["same_reading"] == 0.0
    assert sum(effects.values()) == pytest.approx(result.value_a - result.value_b)
    # Alone, the error row's fix lifts random's F1 from 2/3 to 4/5 only: F1 is not a sum over items.
    assert {c.name: c.alone for c in result.classes}["error"] == pytest.approx(40 / 9)
    assert result.order_matters


def test_printed_output_fits_a_terminal_and_names_each_item(pope, tmp_path):
    bench, a, b = pope
    from vlmgrid.stages.diff import as_document

    document = as_document(
        bench.name,
        tmp_path / "a.parquet",
        tmp_path / "b.parquet",
        "recorded",
        {},
        diff_predictions("pope", bench.records, a, b),
        None,
    )
    text = render(document, limit=10)
    assert max(len(line) for line in text.splitlines()) <= 100
    for expected in (
        "same answer, read differently        1           +4.44     +4.44",
        "error rows                           1           +6.67     +4.44",
        "A - B                                4          +22.22",
        'random-2   "Yes, there is not a c…  "Yes, there is not a c…  no             yes           no',
        'random-4   "No"                     (error: image unreadab…  no             (error)       no',
        "Only in A: 1 item (adversarial-4); A over all it answers: 100.00.",
        "Unreadable answers: A 0, B 0. Error rows (a failed request or image): A 0, B 1 (9.1%).",
        "f1 is not a sum over items",
    ):
        assert expected in text, expected
    one = render(document, limit=0)
    assert "random-2" not in one and "… and 1 more" in one


# --- the command -----------------------------------------------------------------------------------------


def test_cli_diffs_a_grid_model_against_a_file(pope, tmp_path, write_config, capsys):
    bench, a, b = pope
    config = _config(tmp_path, write_config, "pope-fixture", models=("llava",))
    (tmp_path / "results" / "predictions" / "llava").mkdir(parents=True)
    _write(tmp_path / "results" / "predictions" / "llava" / "pope-fixture.parquet", bench, a)
    imported = _write(tmp_path / "imported.parquet", bench, b)
    csv_path, json_path = tmp_path / "out" / "diff.csv", tmp_path / "out" / "diff.json"
    status = main(
        [
            "diff",
            "pope-fixture",
            "llava",
            imported,
            "--config",
            config,
            "--csv",
            str(csv_path),
            "--json",
            str(json_path),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "pope-fixture: f1 (pope metric)" in out and "predictions/llava/pope-fixture.parquet" in out
    with csv_path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["id"], row["class"]) for row in rows] == [
        ("random-2", "reading"),
        ("popular-1", "answer"),
        ("random-4", "error"),
        ("popular-2", "same_reading"),
    ]
    assert rows[2]["error_b"] == "image unreadable" and rows[2]["prediction_b"] == ""
    document = json.loads(json_path.read_text())
    assert document["difference"] == pytest.approx(round(200 / 9, 4)) and document["only_a"] == [
        "adversarial-4"
    ]
    assert [c["class"] for c in document["classes"]] == ["reading", "answer", "error", "same_reading"]


def test_cli_refuses_what_it_cannot_diff_in_one_sentence(pope, tmp_path, write_config, capsys):
    bench, a, b = pope
    config = _config(tmp_path, write_config, "pope-fixture")
    path_a = _write(tmp_path / "a.parquet", bench, a)
    assert main(["diff", "pope-fixture", path_a, "nobody", "--config", config]) == 2
    assert '"nobody" is neither a predictions file nor a model of' in capsys.readouterr().err
    assert main(["diff", "pope-fixture", path_a, path_a, "--config", config, "--reread", "lenient"]) == 2
    assert "has no lenient reading" in capsys.readouterr().err
    two = a.assign(variant="open-1")
    path_two = _write(tmp_path / "two.parquet", bench, pd.concat([a, two]))
    assert main(["diff", "pope-fixture", path_a, path_two, "--config", config]) == 2
    assert "diff sets of the same prompt variants" in capsys.readouterr().err


def test_one_variant_each_is_paired_whatever_its_name(pope):
    bench, a, b = pope
    result = diff_predictions("pope", bench.records, a, b.assign(variant="open-1"))
    assert result.variant_pairing == ("default", "open-1") and len(result.items) == 4


def test_headline_parsers_follow_the_kind():
    from vlmgrid.benchmarks import BENCHMARKS

    assert headline_parsers(BENCHMARKS.get("pope")) == {"*": "pope"}
    assert headline_parsers(BENCHMARKS.get("mme")) == {"*": "mme"}
    assert headline_parsers(BENCHMARKS.get("kaleidoscope")) == {"json": "exam_json", "tag": "exam_tag"}


def test_a_failed_set_has_no_headline_and_no_effects(pope):
    bench, a, b = pope
    failed = b.assign(prediction=None, prediction_index=-1, error="HTTP 500")
    result = diff_predictions("pope", bench.records, a, failed)
    assert result.value_b is None and result.difference is None
    assert all(c.effect is None for c in result.classes)


def test_items_the_benchmark_does_not_have_are_refused(pope):
    bench, a, b = pope
    stray = pd.concat([b, b.iloc[:1].assign(id="random-99")])
    with pytest.raises(
        VlmgridError, match='name 1 item\\(s\\) the benchmark does not have, e.g. "random-99"'
    ):
        diff_predictions("pope", bench.records, a, stray)


def test_the_headlines_are_the_score_files_own(tmp_path):
    from vlmgrid.metrics import score_predictions

    bench = _prepare(tmp_path, "mme", "mme-fixture", size=4)
    # Gold yes, no per image. A (read with the lenient reader) answers all right; B (read with MME's tool,
    # which looks at the first 4 characters only) has the same "    No" on the color image unread, and says
    # yes to both questions of the count image (its acc+ 0).
    answers_a = {i: g.capitalize() for i, g in zip(bench.records["id"], bench.records["answer"])}
    answers_a["color/0000.jpg#1"] = "    No"
    answers_b = dict(answers_a, **{"count/0000.png#1": "Yes"})
    a, b = pd.DataFrame(_rows(bench, answers_a, "mme_lenient")), pd.DataFrame(_rows(bench, answers_b, "mme"))
    result = diff_predictions("mme", bench.records, a, b)
    for frame, value in ((a, result.value_a), (b, result.value_b)):
        assert round(value, 4) == score_predictions("mme", bench.records, frame, samples=1)["value"]
    # Per subtask 100 acc + 100 acc+; 4 subtasks, 800 points: B loses 50 + 100 on count and on color.
    assert result.value_a == pytest.approx(100.0) and result.value_b == pytest.approx(100 * 500 / 800)
    assert {c.name: c.effect for c in result.classes if c.items} == {
        "reading": pytest.approx(100 * 150 / 800),
        "answer": pytest.approx(100 * 150 / 800),
    }


def test_answers_by_scores_differ_in_their_score_lists():
    # DANCE: no raw text; A and B rank q0's candidates in another order below the same top one, and q1 alike.
    # The scores as a parquet file gives them back: arrays.
    records = pd.DataFrame(
        {
            "id": ["q0", "q1"],
            "options": [["r0", "r1", "r2"]] * 2,
            "positives": [[0], [1]],
            "direction": ["picture_to_riddle"] * 2,
            "answer": ["r0", "r1"],
        }
    )
    a = pd.DataFrame(
        {
            "id": ["q0", "q1"],
            "prediction": ["r0", "r1"],
            "raw": [None, None],
            "scores": [np.array([0.9, 0.1, 0.0]), np.array([0.2, 0.7, 0.1])],
        }
    )
    b = a.assign(scores=[np.array([0.9, 0.0, 0.1]), np.array([0.2, 0.7, 0.1])])
    result = diff_predictions("dance", records, a, b)
    assert [(d.id, d.diff_class, d.prediction_a, d.prediction_b) for d in result.items] == [
        ("q0", "answer", "r0", "r0")
    ]
    # Both rank each query's one positive first: Acc@50 100 each, so the different answer moves nothing.
    assert result.value_a == result.value_b == pytest.approx(100.0)
    assert {c.name: c.effect for c in result.classes}["answer"] == pytest.approx(0.0)


def test_multiple_choice_readings_show_the_option_letter_and_its_text(sqa, tmp_path):
    bench, a, b = sqa
    from vlmgrid.stages.diff import as_document

    result = diff_predictions("accuracy", bench.records, a, b)
    document = as_document(
        bench.name, tmp_path / "a.parquet", tmp_path / "b.parquet", "recorded", {}, result, None
    )
    assert document["option_labels"] == "letters"
    text = render(document, limit=10)
    # test-1's options are cross, hexagon, circle, diamond (gold D); test-3's lamp, star, sun, cat (gold A);
    # test-4's purple, pink, orange, yellow (gold D); test-6's 1, 3, 2, 5 (gold A).
    assert (
        'test-1  "(D)"                     "(D)"                     D. diamond     (unread)       D. diamond'
        in text
    )
    assert (
        'test-3  "A"                       "B"                       A. lamp        B. star        A. lamp'
        in text
    )
    assert (
        'test-4  "B"                       "D"                       B. pink        D. yellow      D. yellow'
        in text
    )
    assert (
        'test-6  "A"                       (error: HTTP 500 after …  A. 1           (error)        A. 1'
        in text
    )
    items = {item["id"]: item for item in document["items"]}
    assert (items["test-1"]["prediction_a"], items["test-1"]["gold"], items["test-1"]["gold_index"]) == (
        "diamond",
        "diamond",
        3,
    )  # the files keep the text and the index apart


def test_classes_and_yes_no_readings_stay_as_they_are(tmp_path):
    from vlmgrid.stages.diff import as_document

    records = pd.DataFrame({"id": ["0", "1"], "answer": ["tabby cat", "goldfish"], "answer_index": [1, 0]})
    a = pd.DataFrame({"id": ["0", "1"], "prediction": ["tabby cat", "goldfish"], "prediction_index": [1, 0]})
    b = a.assign(prediction=["tench", "goldfish"], prediction_index=[0, 0])
    document = as_document(
        "imagenet",
        tmp_path / "a.parquet",
        tmp_path / "b.parquet",
        "recorded",
        {},
        diff_predictions("classification", records, a, b),
        None,
    )
    assert document["option_labels"] == "none"
    assert (
        "0   (no text)                   (no text)                  tabby cat      tench          tabby cat"
        in (render(document, limit=10))
    )


def test_the_output_says_what_to_do_next(pope, tmp_path):
    bench, a, b = pope
    from vlmgrid.stages.diff import as_document

    document = as_document(
        bench.name,
        tmp_path / "a.parquet",
        tmp_path / "b.parquet",
        "recorded",
        {},
        diff_predictions("pope", bench.records, a, b),
        None,
    )
    text = " ".join(render(document, limit=0).split())
    # random-2 is the one answer read differently; each class holds one item.
    assert "1 item read differently: --reread headline reads both sets' raw texts again" in text
    assert "… and 1 more: --limit 1 prints them, --csv FILE or --json FILE writes every item" in text
    same = as_document(
        bench.name,
        tmp_path / "a.parquet",
        tmp_path / "b.parquet",
        "recorded",
        {},
        diff_predictions("pope", bench.records, a, a),
        None,
    )
    assert "--reread" not in render(same, limit=10)


# --- the printed output read by a person: whole ids, 100 columns, unreadable answers counted ----------------
# MME names its images after the film and shot: ids of one image's two questions share all but their last
# character, and a cluster's absolute paths are long.
CELEBRITY = "celebrity/tt0032138_shot_0395_img_0.jpg#"
CLUSTER = "/scratch/project_2001234/vlmgrid/results/predictions/llava-onevision-qwen2-72b-ov-sft/"


def _long_document(ids, variants=("default",), only_a=(), path_a=CLUSTER + "mme.parquet", path_b="b.parquet"):
    """A diff of `ids` (and `only_a`, answered by A alone) where A and B answer every item differently at
    length."""
    from pathlib import Path

    from vlmgrid.stages.diff import as_document

    every = [*ids, *only_a]
    records = pd.DataFrame(
        {
            "id": every,
            "answer": ["Humphrey Bogart in The Maltese Falcon"] * len(every),
            "answer_index": [0] * len(every),
        }
    )
    rows_a = [
        {
            "id": i,
            "variant": v,
            "raw": "The person in the picture is Humphrey Bogart,\nwho plays Sam Spade "
            "in The Maltese Falcon (1941); the answer is A.",
            "prediction": "Humphrey Bogart in The Maltese Falcon",
            "prediction_index": 0,
            "error": None,
        }
        for v in variants
        for i in every
    ]
    rows_b = [
        {
            **row,
            "raw": "B. Lauren Bacall, " * 12,
            "prediction": "Lauren Bacall in To Have and Have Not",
            "prediction_index": 1,
        }
        for row in rows_a
        if row["id"] in ids
    ]
    result = diff_predictions("accuracy", records, pd.DataFrame(rows_a), pd.DataFrame(rows_b))
    return as_document("mme", Path(path_a), Path(path_b), "recorded", {}, result, None)


def test_ids_that_share_a_long_prefix_are_printed_whole_and_distinct():
    ids = [CELEBRITY + "0", CELEBRITY + "1"]
    lines = render(_long_document(ids), limit=10).splitlines()
    rows = [line for line in lines if line.startswith(CELEBRITY)]
    assert [row.split()[0] for row in rows] == ids


def test_every_line_fits_100_columns_with_long_ids_answers_and_paths():
    ids = [f"{CELEBRITY}{k}" for k in range(4)]
    only = [f"celebrity/tt0034583_shot_0{k}12_img_1.jpg#0" for k in range(5)]
    text = render(_long_document(ids, variants=("default", "open-1"), only_a=only), limit=10)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100]
    for item_id in ids:  # each item of each variant, its id whole
        for variant in ("default", "open-1"):
            assert sum(line.split("  ")[0] == f"{item_id} [{variant}]" for line in lines) == 1
    assert all(item_id in text for item_id in only[:3])  # the coverage note names ids whole, never broken
    assert CLUSTER + "mme.parquet" in text.split("B =")[0]  # whole


def test_an_id_too_long_for_the_line_has_a_line_of_its_own():
    long_id = "kaleidoscope/" + "x" * 100 + ".png#0"
    lines = render(_long_document([long_id, "short"]), limit=10).splitlines()
    assert long_id in lines  # whole, alone on its line
    assert all(len(line) <= 100 for line in lines if line != long_id)
    answers = lines[lines.index(long_id) + 1]
    assert answers.startswith("  ") and '"B. Lauren Bacall' in answers


def test_error_rows_count_the_answers_the_reader_could_not_read(sqa, tmp_path):
    bench, a, b = sqa
    from vlmgrid.stages.diff import as_document

    result = diff_predictions("accuracy", bench.records, a, b)
    # Of the 7 items both answer, B's "(D)" (test-1) and "Answer: C" (test-2) are unread by LLaVA's rule, and
    # test-6 is a failed request: the score counts 3 format errors of B, A none.
    assert (result.unreadable_a, result.unreadable_b, result.error_rows_b, result.n_rows) == (0, 2, 1, 7)
    document = as_document(
        bench.name, tmp_path / "a.parquet", tmp_path / "b.parquet", "recorded", {}, result, None
    )
    assert (document["a"]["unreadable"], document["b"]["unreadable"]) == (0, 2)
    text = " ".join(render(document, limit=10).split())
    assert (
        "Unreadable answers: A 0, B 2 (28.6%). Error rows (a failed request or image): A 0, B 1 (14.3%)."
        in text
    )


# --- text from the data on a terminal -----------------------------------------------------------------------
# What a terminal acts on instead of showing it: a window title set (OSC ... BEL), a colour (CSI), a carriage
# return and a line break (a row overwritten or split), a right-to-left override (the rest of the line
# reversed).
TERMINAL = "\x1b]0;pwned\x07\x1b[31m\r\n\u202e"
SHOWN = r"\x1b]0;pwned\x07\x1b[31m\r\n\u202e"
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _hostile_sqa(tmp_path, monkeypatch):
    """The ScienceQA-IMG fixture (4 items) whose first id and second item's gold option hold TERMINAL, as a
    downloaded file could: its adapter's records are edited before they are validated and hashed."""
    from vlmgrid.benchmarks import BENCHMARKS

    kind = BENCHMARKS.get("scienceqa_img")

    def adapt(raw_dir, out_dir):
        adapted = kind.adapt(raw_dir, out_dir)
        records = adapted.records.copy()
        records.loc[0, "id"] = "test-0" + TERMINAL
        options, gold = list(records.loc[1, "options"]), records.loc[1, "answer_index"]
        options[gold] += TERMINAL
        records.at[1, "options"], records.loc[1, "answer"] = options, options[gold]
        return dataclasses.replace(adapted, records=records)

    monkeypatch.setattr(
        importlib.import_module("vlmgrid.benchmarks.dataset"),
        "BENCHMARKS",
        {kind.name: dataclasses.replace(kind, adapt=adapt)},
    )
    return _prepare(tmp_path, "scienceqa_img", "scienceqa-fixture", size=4)


def test_the_printed_diff_shows_ids_gold_answers_and_paths_escaped(
    tmp_path, write_config, monkeypatch, capsys
):
    bench = _hostile_sqa(tmp_path, monkeypatch)
    records = bench.records
    assert records["id"][0] == "test-0" + TERMINAL and records["answer"][1].endswith(TERMINAL)

    def row(k: int, index: int, raw: str | None, error: str | None = None) -> dict:
        option = list(records["options"][k])[index] if index >= 0 else None
        return {
            "id": records["id"][k],
            "variant": "default",
            "raw": raw,
            "prediction": option,
            "prediction_index": index,
            "error": error,
        }

    gold = int(records["answer_index"][1])
    a = [row(k, 0, f"answer {TERMINAL}") for k in range(4)]
    b = [
        row(0, 1, f"other {TERMINAL}"),
        row(1, gold, f"right {TERMINAL}"),
        row(2, -1, None, f"HTTP 500 {TERMINAL}"),
        a[3],
    ]
    path_a = _write(tmp_path / f"a{TERMINAL}.parquet", bench, pd.DataFrame(a))
    path_b = _write(tmp_path / "b.parquet", bench, pd.DataFrame(b))
    config = _config(tmp_path, write_config, "scienceqa-fixture")
    assert main(["diff", "scienceqa-fixture", path_a, path_b, "--config", config]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.split("\n") if RAW.search(line)] == []
    lines = out.splitlines()
    assert f"test-0{SHOWN}" in lines  # the id whole, on a line of its own (it is long), its row not split
    assert f"{tmp_path}/a{SHOWN}.parquet" in [line.strip(" A=") for line in lines]  # whole, on one line
    assert any(line.strip().startswith(r'"answer \u001b]0;pwned') for line in lines)  # raw answers as JSON
    assert (
        r"(error: HTTP 500 \x1b]0;p" in out and r"D. diamond\x" in out
    )  # B's error, B's reading of the gold


def test_an_error_naming_a_hostile_item_is_one_line_with_the_item_escaped(
    sqa, tmp_path, write_config, capsys
):
    bench, a, b = sqa
    config = _config(tmp_path, write_config, "scienceqa-fixture")
    stray = pd.concat([b, b.iloc[:1].assign(id=f"test-99{TERMINAL}")])
    path_a, path_b = _write(tmp_path / "a.parquet", bench, a), _write(tmp_path / "b.parquet", bench, stray)
    assert main(["diff", "scienceqa-fixture", path_a, path_b, "--config", config]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vlmgrid: error: ") and err.endswith("\n") and not RAW.search(err[:-1]), repr(err)
    assert f'"test-99{SHOWN}"' in err


def test_items_a_sets_strategy_cannot_answer_are_left_out_as_the_score_leaves_them(small_config, tmp_path):
    """A contrastive model's Kaleidoscope set leaves the text-only questions out (not applicable): the diff
    pairs the items both answer, and A's number is its score file's, not one with error rows for the rest."""
    from helpers.chain import infer_cell, prepared_grid, score_of

    bench = "kaleidoscope-fixture"
    config = prepared_grid(small_config, {bench: small_config["benchmarks"][bench]}, ["clip-tiny", "random"])
    scores = {
        model: score_of(config, model, bench, infer_cell(config, model, bench, 64), 50)
        for model in ("clip-tiny", "random")
    }
    assert scores["clip-tiny"]["coverage"]["answered"] < scores["clip-tiny"]["coverage"]["total"]
    out = tmp_path / "diff.json"
    diff_sets(config, bench, "clip-tiny", "random", json_out=str(out), limit=0)
    document = json.loads(out.read_text())
    assert document["n_common"] == scores["clip-tiny"]["coverage"]["answered"]
    assert document["a"]["value"] == pytest.approx(scores["clip-tiny"]["value"])
